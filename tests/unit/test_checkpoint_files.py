"""Kafka's checkpoint files and clean-shutdown semantics (issue 29): after a clean stop a partition is
opened without reading any segment data, a replicated leader starts at its checkpointed high watermark,
and its leader epochs come from leader-epoch-checkpoint; after a crash everything recovers as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pykraft.broker.replica_manager import Partition, ReplicaManager
from pykraft.core.errors import ErrorCode
from pykraft.io.descriptor_cache import DescriptorCache
from pykraft.io.log_dirs import FileLogOpener
from pykraft.log.checkpoint_files import (
    CLEAN_SHUTDOWN_FILE,
    LEADER_EPOCH_CHECKPOINT,
    decode_leader_epoch_checkpoint,
    decode_offset_checkpoint,
    encode_leader_epoch_checkpoint,
    encode_offset_checkpoint,
)
from pykraft.log.partition_log import LogConfig, PartitionLog
from pykraft.log.store import MemorySegmentStore
from pykraft.protocol.records import Record, build_batch


def test_byte_layouts_are_kafkas() -> None:
    assert (
        encode_offset_checkpoint({("orders", 0): 42, ("orders", 1): 7}) == b"0\n2\norders 0 42\norders 1 7\n"
    )
    assert encode_leader_epoch_checkpoint([(0, 0), (3, 120)]) == b"0\n2\n0 0\n3 120\n"
    assert decode_offset_checkpoint(b"0\n1\na-b 3 9\n", "f") == {("a-b", 3): 9}
    assert decode_leader_epoch_checkpoint(b"0\n0\n") == []
    for bad in (b"1\n0\n", b"0\n2\nt 0 1\n", b"0\n1\nt x 1\n", b"0\n1\nt 0\n"):
        with pytest.raises(ValueError, match="replication-offset-checkpoint"):
            decode_offset_checkpoint(bad, "replication-offset-checkpoint")


CHECKPOINT_FILES = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
)


def _batch(value: bytes) -> bytearray:
    return bytearray(build_batch([Record(None, value)], timestamp_ms=1000))


def test_a_log_opened_clean_reads_no_segment_until_used() -> None:
    store = MemorySegmentStore()
    log = PartitionLog.open(store, LogConfig(segment_bytes=200, index_interval_bytes=0))
    for i in range(20):
        log.append_bytes(_batch(b"value-%d" % i))
    end, segments = log.log_end_offset, log.segments
    log.close()
    store.read_bytes = 0
    reopened = PartitionLog.open(
        store, LogConfig(segment_bytes=200, index_interval_bytes=0), clean_log_end_offset=end
    )
    assert reopened.opened_clean and store.read_bytes == 0
    assert reopened.log_end_offset == end and reopened.size_in_bytes == sum(s.size_bytes for s in segments)
    # First use loads what the headers say, the same as a full recovery would have found.
    assert reopened.segments == segments
    assert b"value-3" in b"".join(reopened.read(3, 1000).chunks)
    assert reopened.append_bytes(_batch(b"after")).first_offset == end
    assert reopened.offset_for_timestamp(1000) == (0, 1000)


def _replicas(tmp_path: Path) -> tuple[ReplicaManager, FileLogOpener]:
    opener = FileLogOpener([str(tmp_path)], DescriptorCache(64))
    return ReplicaManager(opener, LogConfig(), producer_id_expiration_ms=60_000), opener


def _leader(replicas: ReplicaManager, partition: int, epoch: int):  # type: ignore[no-untyped-def]
    part = replicas.ensure_partition("t", partition, 0, replicated=True, broker_id=1)
    replicas.apply_partition(
        part,
        leader_id=1,
        leader_epoch=epoch,
        partition_epoch=epoch,
        replicas=(1, 2, 3),
        isr=(1, 2, 3),
        now_ms=0,
    )
    return part


def test_a_clean_restart_reads_no_segment_data_and_serves_the_high_watermark(tmp_path: Path) -> None:
    replicas, opener = _replicas(tmp_path)
    for partition in range(20):
        part = _leader(replicas, partition, 2)
        for i in range(5):
            assert replicas.append(part, memoryview(_batch(b"%d" % i)), 1).error_code == ErrorCode.NONE
        part.log.set_high_watermark(3)  # the followers have fetched up to 3
    opener.write_clean_shutdown(replicas.close_all())
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    hws = decode_offset_checkpoint((tmp_path / "replication-offset-checkpoint").read_bytes(), "hw")
    assert hws == {("t", p): 3 for p in range(20)}
    assert decode_offset_checkpoint((tmp_path / "recovery-point-offset-checkpoint").read_bytes(), "rp") == {
        ("t", p): 5 for p in range(20)
    }
    assert (tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n1\n2 0\n"

    replicas, opener = _replicas(tmp_path)
    parts = [replicas.ensure_partition("t", p, 0, replicated=True, broker_id=1) for p in range(20)]
    assert opener.descriptors.segment_bytes_read == 0
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # a crash from now on recovers as usual
    assert all(part.log.opened_clean for part in parts)
    assert [part.log.high_watermark for part in parts] == [3] * 20
    assert parts[0].epochs.entries == [(2, 0)]
    result = replicas.read(parts[0], 0, 1 << 20, min_one_batch=True)
    assert result.error_code == ErrorCode.NONE and result.high_watermark == 3
    replicas.close_all()

    # No marker (a crash): every log recovers from its segments; the high watermarks still count.
    replicas, opener = _replicas(tmp_path)
    part = replicas.ensure_partition("t", 0, 0, replicated=True, broker_id=1)
    assert not part.log.opened_clean and opener.descriptors.segment_bytes_read > 0
    assert part.log.high_watermark == 3 and part.epochs.entries == [(2, 0)]
    replicas.close_all()
    assert os.path.exists(tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT)


def _lead(replicas: ReplicaManager, part: Partition) -> None:
    replicas.apply_partition(
        part, leader_id=1, leader_epoch=0, partition_epoch=0, replicas=(1,), isr=(1,), now_ms=0
    )


def test_a_clean_restart_opens_single_replica_logs_when_first_used(tmp_path: Path) -> None:
    """After a clean stop a single-replica log is hosted and led from its dir's checkpoint files alone
    (no partition dir is even listed), opened when a request first uses it or when the shell's
    background pass gets to it; the timers that walk every partition leave it be, and a stop while it
    is still unopened checkpoints it as it was, so the next start is as clean."""
    replicas, opener = _replicas(tmp_path)
    for p in range(6):
        part = replicas.ensure_partition("t", p, 0, broker_id=1)
        for i in range(p):
            batch = build_batch([Record(None, b"%d" % i)], timestamp_ms=1000, producer_id=7, base_sequence=i)
            assert replicas.append(part, memoryview(bytearray(batch)), 1).error_code == ErrorCode.NONE
    assert replicas.delete_records(replicas.partitions[("t", 5)], 2) == (ErrorCode.NONE, 2)
    opener.write_clean_shutdown(replicas.close_all())
    checkpoints = {
        name: decode_offset_checkpoint((tmp_path / name).read_bytes(), name) for name in CHECKPOINT_FILES
    }

    replicas, opener = _replicas(tmp_path)
    listed: list[str] = []
    real_listdir = os.listdir
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "listdir", lambda path: listed.append(str(path)) or real_listdir(path))
        parts = [replicas.ensure_partition("t", p, 0, broker_id=1) for p in range(6)]
        for part in parts:
            replicas.apply_log_config(part, LogConfig(retention_ms=1))
            _lead(replicas, part)
        replicas.apply_retention(10_000)
        replicas.expire_producers(10_000_000)
        assert replicas.next_cleaning(0) is None
        replicas.flush_all()
    assert listed == [] and all(part.deferred is not None for part in parts)
    assert [(part.log_end_offset, part.log_start_offset) for part in parts] == [
        (p, 2 if p == 5 else 0) for p in range(6)
    ]
    assert parts[4].replication.is_leader and parts[4].epochs.entries == [(0, 4)]

    # A request opens it: its producer state and the topic's configs as the image gave them.
    assert replicas.get("t", 4) is parts[4] and parts[4].deferred is None and parts[4].log.opened_clean
    assert parts[4].log.config.retention_ms == 1
    assert [entry.producer_id for entry in parts[4].producer_state.active_producers()] == [7]
    result = replicas.read(parts[4], 0, 1 << 20, min_one_batch=True)
    assert result.error_code == ErrorCode.NONE and result.high_watermark == 4
    assert replicas.open_deferred(2) == 3  # the background pass, two at a time
    assert [part.deferred is None for part in parts] == [True, True, False, False, True, False]

    # Stopped with three still unopened: the checkpoints say what they said, and so does the next start.
    opener.write_clean_shutdown(replicas.close_all())
    assert {
        name: decode_offset_checkpoint((tmp_path / name).read_bytes(), name) for name in CHECKPOINT_FILES
    } == checkpoints
    replicas, opener = _replicas(tmp_path)
    parts = [replicas.ensure_partition("t", p, 0, broker_id=1) for p in range(6)]
    assert all(part.deferred is not None for part in parts)
    assert replicas.open_deferred(100) == 0
    assert [part.log.log_end_offset for part in parts] == list(range(6)) and parts[
        5
    ].log.log_start_offset == 2
    assert opener.descriptors.segment_bytes_read == 0


def test_a_deferred_log_in_a_dir_gone_offline_is_never_opened(tmp_path: Path) -> None:
    """Its dir failed before anything used it: requests get KAFKA_STORAGE_ERROR, nothing opens it, and
    deleting its topic or stopping the node does not try to."""
    replicas, opener = _replicas(tmp_path)
    for p in range(2):
        replicas.ensure_partition("t", p, 0, broker_id=1)
    opener.write_clean_shutdown(replicas.close_all())
    replicas, opener = _replicas(tmp_path)
    parts = [replicas.ensure_partition("t", p, 0, broker_id=1) for p in range(2)]
    replicas.offline_log_dirs[parts[0].log_dir] = "EIO"
    assert replicas.get("t", 0) is None and replicas.is_offline("t", 0)
    assert replicas.open_deferred(10) == 0 and all(part.deferred is not None for part in parts)
    replicas.remove_partition("t", 0)
    assert replicas.close_all() == {} and not replicas.hosts("t", 1)


def test_a_stop_costs_what_the_written_partitions_cost(tmp_path: Path) -> None:
    """Flushing a log never written to syncs nothing, and a producer snapshot is written at close only
    where there is none at the log end already (Kafka's takeSnapshot rule)."""
    stores = [MemorySegmentStore() for _ in range(10)]
    logs = [PartitionLog.open(store) for store in stores]
    logs[3].append_bytes(_batch(b"only here"))
    for log in logs:
        log.flush()
    assert [store.flush_calls for store in stores] == [0, 0, 0, 1, 0, 0, 0, 0, 0, 0]

    replicas, opener = _replicas(tmp_path)
    parts = [replicas.ensure_partition("t", p, 0) for p in range(10)]
    assert replicas.append(parts[3], memoryview(_batch(b"x")), 1).error_code == ErrorCode.NONE
    opener.write_clean_shutdown(replicas.close_all())
    snapshots = sorted(path.parent.name for path in tmp_path.glob("t-*/*.snapshot"))
    assert snapshots == ["t-3"]
    mtime = next(tmp_path.glob("t-3/*.snapshot")).stat().st_mtime_ns
    replicas, opener = _replicas(tmp_path)
    for p in range(10):
        replicas.ensure_partition("t", p, 0)
    opener.write_clean_shutdown(replicas.close_all())
    assert next(tmp_path.glob("t-3/*.snapshot")).stat().st_mtime_ns == mtime  # unchanged: not rewritten


def test_a_clean_shutdown_closes_logs_on_a_pool_and_syncs_each_partition_dir_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's LogManager.shutdown closes logs on num.recovery.threads.per.data.dir threads: every file
    sync of a partition happens on those threads, and a written partition's dir is synced once after all
    its files (snapshot, transaction index, segment, indexes), not once per file (issue 29)."""
    import stat
    import threading

    replicas, opener = _replicas(tmp_path)
    parts = [replicas.ensure_partition("t", p, 0) for p in range(8)]
    for part in parts[:3]:
        assert replicas.append(part, memoryview(_batch(b"x")), 1).error_code == ErrorCode.NONE
    synced: list[tuple[str, str, bool]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        synced.append((path, threading.current_thread().name, stat.S_ISDIR(os.fstat(fd).st_mode)))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    opener.close_cleanly(replicas, threads_per_dir=2)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    partition_dirs = sorted(path for path, _, is_dir in synced if is_dir and path != str(tmp_path))
    assert partition_dirs == [str(tmp_path / f"t-{p}") for p in range(3)]
    in_partitions = [(path, thread) for path, thread, _ in synced if path.startswith(str(tmp_path / "t-"))]
    assert in_partitions and all(thread.startswith("log-close") for _, thread in in_partitions)
    assert replicas.partitions == {}

    # After a clean restart, a stop of partitions nobody wrote to syncs nothing in them.
    replicas, opener = _replicas(tmp_path)
    for p in range(8):
        replicas.ensure_partition("t", p, 0)
    synced.clear()
    opener.close_cleanly(replicas, threads_per_dir=2)
    assert not [path for path, _, _ in synced if path.startswith(str(tmp_path / "t-"))]
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
