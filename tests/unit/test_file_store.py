"""FileSegmentStore: the SegmentStore contract on real files, and PartitionLog end to end on disk."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from pykraft.io.file_store import OPEN_SEGMENTS_MAX, FileSegmentStore
from pykraft.log.partition_log import LOG_START_OFFSET_CHECKPOINT, LogConfig, PartitionLog
from pykraft.log.store import MemorySegmentStore, SegmentStore, segment_file_name
from pykraft.protocol.records import Record, build_batch, read_batch_header, scan_batches, validate_batches

SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def make_batch(records: int = 3, value_bytes: int = 50, timestamp_ms: int = 1000) -> bytearray:
    return build_batch(
        [Record(b"k", bytes([i]) * value_bytes) for i in range(records)], timestamp_ms=timestamp_ms
    )


def fill(log: PartitionLog, batches: int) -> None:
    for i in range(batches):
        batch = make_batch(timestamp_ms=1000 + i)
        log.append(batch, validate_batches(batch))


def read_all(log: PartitionLog) -> bytes:
    return b"".join(log.read(log.log_start_offset, 1 << 40).chunks)


def bases(data: bytes) -> list[int]:
    return [header.base_offset for _, header in scan_batches(data)]


# --- the store contract, for both stores -------------------------------------------------------


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SegmentStore:
    if request.param == "memory":
        return MemorySegmentStore()
    return FileSegmentStore(str(tmp_path / "topic-0"))


def test_store_contract(store: SegmentStore) -> None:
    assert store.list_segments() == []
    store.create_segment(100)
    store.create_segment(7)
    assert store.list_segments() == [7, 100]
    store.append(7, b"hello ")
    store.append(7, memoryview(bytearray(b"world")))
    assert store.segment_size(7) == 11
    assert store.read(7, 6, 100) == b"world"
    assert store.read(7, 11, 10) == b""
    store.truncate_segment(7, 5)
    assert store.read(7, 0, 100) == b"hello"
    store.append(7, b"!")
    assert store.read(7, 0, 100) == b"hello!"
    assert store.read_index(7) in (None, b"")
    store.write_index(7, 0, b"12345678abcdefgh")
    store.write_index(7, 8, b"ABCDEFGH")
    assert store.read_index(7) == b"12345678ABCDEFGH"
    store.write_index(7, 8, b"")
    assert store.read_index(7) == b"12345678"
    store.flush(7)
    store.delete_segment(100)
    assert store.list_segments() == [7]
    assert store.read_checkpoint("x") is None
    store.write_checkpoint("x", b"one")
    store.write_checkpoint("x", b"two")
    assert store.read_checkpoint("x") == b"two"
    store.close()


# --- files on disk --------------------------------------------------------------------------------


def test_kafka_file_names_and_index_layout(tmp_path: Path) -> None:
    directory = tmp_path / "orders-3"
    log = PartitionLog.open(FileSegmentStore(str(directory)), SMALL)
    fill(log, 30)
    log.close()
    names = sorted(os.listdir(directory))
    logs = [n for n in names if n.endswith(".log")]
    assert logs[0] == "00000000000000000000.log"
    assert all(len(n) == len("00000000000000000000.log") for n in logs)
    assert [segment_file_name(s.base_offset, ".log") for s in log.segments] == logs
    indexes = {n.replace(".log", suffix) for n in logs for suffix in (".index", ".timeindex")}
    assert set(names) - set(logs) == indexes | {"recovery-point"}
    for segment in log.segments:
        log_bytes = (directory / segment_file_name(segment.base_offset, ".log")).read_bytes()
        assert len(log_bytes) == segment.size_bytes
        index = (directory / segment_file_name(segment.base_offset, ".index")).read_bytes()
        assert len(index) == 8 * segment.index_entries
        for relative_offset, position in struct.iter_unpack(">ii", index):
            assert read_batch_header(log_bytes, position).last_offset == segment.base_offset + relative_offset
        # The time index: (largest timestamp so far, relative last offset of the batch that has it),
        # ascending, the segment's largest timestamp last (Kafka's TimeIndex; kafka-dump-log checks this).
        time_index = (directory / segment_file_name(segment.base_offset, ".timeindex")).read_bytes()
        entries = list(struct.iter_unpack(">qi", time_index))
        assert entries and len(time_index) == 12 * len(entries)
        max_timestamps = {h.last_offset: h.max_timestamp for _, h in scan_batches(log_bytes, check_crc=False)}
        for timestamp, relative_offset in entries:
            assert max_timestamps[segment.base_offset + relative_offset] == timestamp
        assert entries == sorted(set(entries)) and entries[-1][0] == segment.max_timestamp


def test_round_trip_and_reopen(tmp_path: Path) -> None:
    directory = str(tmp_path / "t-0")
    log = PartitionLog.open(FileSegmentStore(directory), SMALL)
    fill(log, 40)
    before = read_all(log)
    assert bases(before) == list(range(0, 120, 3))
    assert bases(b"".join(log.read(50, 1).chunks)) == [48]
    log.close()
    reopened = PartitionLog.open(FileSegmentStore(directory), SMALL)
    assert read_all(reopened) == before
    assert reopened.segments == log.segments
    fill(reopened, 1)
    assert reopened.log_end_offset == 123


@pytest.mark.parametrize("cut_bytes", [1, 30, 61, 200])
def test_reopen_after_truncating_the_file_by_hand(tmp_path: Path, cut_bytes: int) -> None:
    directory = tmp_path / "t-0"
    log = PartitionLog.open(FileSegmentStore(str(directory)), SMALL)
    fill(log, 40)
    log.close()
    before = read_all(log)
    batch_bytes = len(make_batch())
    last = directory / segment_file_name(log.segments[-1].base_offset, ".log")
    os.truncate(last, last.stat().st_size - cut_bytes)
    reopened = PartitionLog.open(FileSegmentStore(str(directory)), SMALL)
    lost = -(-cut_bytes // batch_bytes)
    assert reopened.log_end_offset == 120 - 3 * lost
    assert read_all(reopened) == before[: len(before) - lost * batch_bytes]
    assert last.stat().st_size == reopened.segments[-1].size_bytes


def test_corrupt_byte_on_disk_truncates_there(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = PartitionLog.open(FileSegmentStore(str(directory)), SMALL)
    fill(log, 40)
    log.close()
    last = directory / segment_file_name(log.segments[-1].base_offset, ".log")
    data = bytearray(last.read_bytes())
    data[-5] ^= 0x01
    last.write_bytes(data)
    reopened = PartitionLog.open(FileSegmentStore(str(directory)), SMALL)
    assert reopened.log_end_offset == 117


def test_delete_records_and_retention_remove_files(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=1000, retention_ms=10)
    log = PartitionLog.open(FileSegmentStore(str(directory)), config)
    fill(log, 40)
    files_before = len(os.listdir(directory))
    log.delete_records_before(50)
    assert (directory / LOG_START_OFFSET_CHECKPOINT).read_bytes() == b"0\n50\n"
    assert len(os.listdir(directory)) < files_before
    log.close()
    reopened = PartitionLog.open(FileSegmentStore(str(directory)), config)
    assert reopened.log_start_offset == 50
    deleted = reopened.apply_retention(now_ms=10**9)
    assert deleted and all(not (directory / segment_file_name(b, ".log")).exists() for b in deleted)
    assert sorted(n for n in os.listdir(directory) if n.endswith(".log")) == [
        segment_file_name(reopened.segments[0].base_offset, ".log")
    ]


def test_many_segments_beyond_open_handle_limit(tmp_path: Path) -> None:
    directory = str(tmp_path / "t-0")
    log = PartitionLog.open(FileSegmentStore(directory), LogConfig(segment_bytes=300))
    fill(log, OPEN_SEGMENTS_MAX * 2 + 5)
    assert len(log.segments) > OPEN_SEGMENTS_MAX * 2
    assert bases(read_all(log)) == list(range(0, log.log_end_offset, 3))
    log.close()
    assert bases(
        read_all(PartitionLog.open(FileSegmentStore(directory), LogConfig(segment_bytes=300)))
    ) == list(range(0, log.log_end_offset, 3))


def test_stray_checkpoint_temp_file_is_removed(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    (directory / "log-start-offset.tmp").write_bytes(b"0\n9")
    store = FileSegmentStore(str(directory))
    assert os.listdir(directory) == []
    assert store.read_checkpoint(LOG_START_OFFSET_CHECKPOINT) is None


def test_process_exit_without_flush_or_close_loses_nothing(tmp_path: Path) -> None:
    """Appends reach the OS at once: a process that dies (os._exit, like kill -9) keeps them."""
    directory = str(tmp_path / "t-0")
    script = f"""
import os
from pykraft.io.file_store import FileSegmentStore
from pykraft.log.partition_log import LogConfig, PartitionLog
from pykraft.protocol.records import Record, build_batch, validate_batches
log = PartitionLog.open(FileSegmentStore({directory!r}), LogConfig(segment_bytes=1000))
for i in range(50):
    batch = build_batch([Record(None, b"v" * 40)] * 2, timestamp_ms=i)
    log.append(batch, validate_batches(batch))
os._exit(0)
"""
    subprocess.run([sys.executable, "-c", script], check=True)
    log = PartitionLog.open(FileSegmentStore(directory), LogConfig(segment_bytes=1000))
    assert log.log_end_offset == 100
    assert bases(read_all(log)) == list(range(0, 100, 2))
