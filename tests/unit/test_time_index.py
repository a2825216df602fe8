"""Kafka's ``.timeindex`` beside each segment (issue 33 item 2): when entries are added, what a roll, a
close and a recovery add, lookups by timestamp, truncation, and the files following their segment
through retention, DeleteRecords and compaction."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest

from pykraft.io.file_store import FileSegmentStore
from pykraft.log.partition_log import LogConfig, PartitionLog
from pykraft.log.segment_index import TimeIndex
from pykraft.log.store import TIME_INDEX_SUFFIX, MemorySegmentStore, SegmentStore
from pykraft.protocol.records import (
    NO_TIMESTAMP,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    scan_batches,
    validate_batches,
)
from tests.unit.test_log_cleaner import COMPACT, fill, run_pass

SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def append(log: PartitionLog, timestamps_ms: list[int]) -> None:
    """One batch whose records carry ``timestamps_ms``."""
    batch = build_batch(
        [Record(b"k", b"v" * 20, timestamp=ts) for ts in timestamps_ms], timestamp_ms=timestamps_ms[0]
    )
    log.append(batch, validate_batches(batch))


def headers(store: SegmentStore, base_offset: int) -> list[BatchHeader]:
    data = store.read(base_offset, 0, store.segment_size(base_offset))
    return [header for _, header in scan_batches(data, check_crc=False)]


def stored_entries(store: SegmentStore, base_offset: int) -> list[tuple[int, int]]:
    """``(timestamp, absolute offset)`` of each stored entry."""
    data = store.read_index(base_offset, suffix=TIME_INDEX_SUFFIX)
    assert data is not None and len(data) % 12 == 0, data
    return [(ts, base_offset + relative) for ts, relative in struct.iter_unpack(">qi", data)]


def kafka_time_index(
    batches: list[BatchHeader], interval_bytes: int, *, inactive: bool
) -> list[tuple[int, int]]:
    """What Kafka's LogSegment.recover writes for these batches (an inactive segment also gets its
    largest timestamp, as onBecomeInactiveSegment / close add it): written here independently of
    pykraft's code."""
    entries: list[tuple[int, int]] = []
    max_ts, max_offset, since_entry = NO_TIMESTAMP, -1, 0

    def maybe_append() -> None:
        if max_ts > (entries[-1][0] if entries else NO_TIMESTAMP):
            entries.append((max_ts, max_offset))

    for batch in batches:
        if batch.max_timestamp > max_ts:
            max_ts, max_offset = batch.max_timestamp, batch.last_offset
        if since_entry > interval_bytes:
            maybe_append()
            since_entry = 0
        since_entry += batch.size_in_bytes
    if inactive:
        maybe_append()
    return entries


def random_log(store: SegmentStore, rng: random.Random, batches: int) -> PartitionLog:
    """Timestamps that mostly grow, sometimes step back (producers' clocks), sometimes repeat."""
    log = PartitionLog.open(store, SMALL)
    now = 1_000_000
    for _ in range(batches):
        now += rng.choice([0, 1, 5, 40, -30])
        append(log, [now + rng.randrange(-20, 20) for _ in range(rng.randrange(1, 4))])
    return log


@pytest.mark.parametrize("seed", range(5))
def test_entries_are_kafkas_at_roll_and_at_close(seed: int) -> None:
    store = MemorySegmentStore()
    log = random_log(store, random.Random(seed), 120)
    bases = [segment.base_offset for segment in log.segments]
    assert len(bases) > 3
    # Rolled segments: written at the roll, the largest timestamp last.
    for base in bases[:-1]:
        assert stored_entries(store, base) == kafka_time_index(headers(store, base), 100, inactive=True)
    # The active segment: a flush writes the entries so far, without the roll's.
    log.flush()
    active = bases[-1]
    assert stored_entries(store, active) == kafka_time_index(headers(store, active), 100, inactive=False)
    log.close()
    assert stored_entries(store, active) == kafka_time_index(headers(store, active), 100, inactive=True)


def test_an_entry_only_when_the_largest_timestamp_grew() -> None:
    store = MemorySegmentStore()
    log = PartitionLog.open(store, SMALL)
    for _ in range(8):  # every batch the same timestamp: one entry, at the first index entry
        append(log, [5000, 5000])
    log.flush()
    (only,) = stored_entries(store, 0)
    assert only[0] == 5000 and log.segments[0].index_entries >= 2
    first_with_max = headers(store, 0)[0].last_offset
    log.close()
    # The close adds nothing (5000 is indexed already), and names the first batch that had 5000 ...
    assert stored_entries(store, 0) == [only]
    # ... as long as that batch came before the first offset index entry; it is then batch 0.
    assert only[1] == first_with_max


def test_a_recovered_segment_gets_the_index_kafka_rebuilds() -> None:
    store = MemorySegmentStore()
    log = random_log(store, random.Random(7), 60)
    log.flush()
    bases = [segment.base_offset for segment in log.segments]
    # A crash that loses the last flush's index writes: the stored time indexes are garbage.
    for base in bases:
        store.write_index(base, 0, b"\x7f" * 30, suffix=TIME_INDEX_SUFFIX)
    store.flush(bases[0])
    store.crash()
    reopened = PartitionLog.open(store, SMALL)
    for base in bases:
        # LogSegment.recover: entries at the offset index moments, the largest timestamp last.
        assert stored_entries(store, base) == kafka_time_index(headers(store, base), 100, inactive=True)
    assert reopened.log_end_offset == log.log_end_offset


def test_appends_after_a_recovery_or_a_clean_restart_keep_the_file_and_memory_equal(tmp_path: Path) -> None:
    directory = str(tmp_path / "t-0")
    rng = random.Random(3)
    log = random_log(FileSegmentStore(directory), rng, 30)
    log.close()
    end = log.log_end_offset
    # A clean restart: the active segment is loaded lazily; then more appends and another close.
    for clean in (end, None):
        store = FileSegmentStore(directory)
        log = PartitionLog.open(store, SMALL, clean_log_end_offset=clean)
        for _ in range(25):
            append(log, [2_000_000 + rng.randrange(1000)])
        log.close()
        end = log.log_end_offset
    store = FileSegmentStore(directory)
    reopened = PartitionLog.open(store, SMALL)  # recovery: every index rebuilt, rewritten if it differs
    for segment in reopened.segments:
        entries = stored_entries(store, segment.base_offset)
        batches = {h.last_offset: h.max_timestamp for h in headers(store, segment.base_offset)}
        assert entries and all(batches[offset] == ts for ts, offset in entries)
        assert entries == sorted(set(entries)) and entries[-1] == (
            segment.max_timestamp,
            segment.offset_of_max_timestamp,
        )
    reopened.close()


def test_offset_for_timestamp_matches_a_scan_of_every_record() -> None:
    store = MemorySegmentStore()
    rng = random.Random(11)
    log = random_log(store, rng, 150)
    log.delete_records_before(37)
    data = b"".join(log.read(log.log_start_offset, 1 << 40).chunks)
    records = [
        record
        for position, header in scan_batches(data)
        for record in decode_records(data[position : position + header.size_in_bytes])
        if record.offset >= log.log_start_offset
    ]
    assert records[0].offset == 37 and records[-1].offset == log.log_end_offset - 1
    timestamps = sorted({record.timestamp for record in records})
    for target in [
        timestamps[0] - 1,
        *timestamps,
        timestamps[-1] + 1,
        *rng.sample(range(999_000, 1_004_000), 40),
    ]:
        expected = next(((r.offset, r.timestamp) for r in records if r.timestamp >= target), None)
        assert log.offset_for_timestamp(target) == expected, target


def test_time_index_lookup_is_kafkas() -> None:
    index = TimeIndex()
    assert index.offset_at_or_before(100) is None
    for ts, offset in [(10, 3), (10, 4), (20, 9), (15, 12), (30, 14)]:
        index.maybe_append(ts, offset)
    assert list(zip(index.keys, index.values, strict=True)) == [(10, 3), (20, 9), (30, 14)]
    assert [index.offset_at_or_before(ts) for ts in (9, 10, 19, 20, 29, 30, 99)] == [None, 3, 3, 9, 9, 14, 14]
    assert index.encode(2, 1) == struct.pack(">qiqi", 20, 7, 30, 12)
    index.entries_written = 3
    index.truncate_to_offset(9)  # TimeIndex.truncateTo: entries with offset >= 9 go
    assert (list(index.values), index.entries_written) == ([3], 1)


def test_truncation_cuts_the_time_index_and_appends_continue() -> None:
    store = MemorySegmentStore()
    log = PartitionLog.open(store, LogConfig(segment_bytes=1 << 20, index_interval_bytes=100))
    for i in range(40):
        append(log, [1000 + 10 * i])
    log.flush()
    before = stored_entries(store, 0)
    assert len(before) > 5
    cut = before[3][1]  # truncate at an indexed batch: its entry and every later one go
    log.truncate_to(cut)
    assert stored_entries(store, 0) == before[:3]
    for i in range(10):
        append(log, [5000 + i])
    log.close()
    entries = stored_entries(store, 0)
    assert entries[:3] == before[:3] and entries[-1] == (5009, log.log_end_offset - 1)
    assert entries == sorted(set(entries))


def test_time_index_files_follow_their_segment(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = PartitionLog.open(
        FileSegmentStore(str(directory)), LogConfig(segment_bytes=600, index_interval_bytes=100)
    )
    for i in range(60):
        append(log, [1000 + i])
    log.flush()

    def files(suffix: str) -> set[str]:
        return {name.removesuffix(suffix) for name in os.listdir(directory) if name.endswith(suffix)}

    assert files(".timeindex") == files(".index") == files(".log")  # every rolled segment has both
    log.delete_records_before(log.segments[3].base_offset)  # DeleteRecords
    assert files(".timeindex") == files(".log") and len(files(".log")) == len(log.segments)
    log.set_high_watermark(log.log_end_offset)
    assert log.apply_retention(now_ms=10**12)  # retention.ms
    assert files(".timeindex") == files(".log") == {f"{s.base_offset:020d}" for s in log.segments}
    log.truncate_fully_and_start_at(log.log_end_offset + 5)
    append(log, [5000])
    log.close()  # the active segment's indexes are written when it holds data and rolls or closes
    assert files(".timeindex") == files(".index") == files(".log") == {f"{log.log_start_offset:020d}"}


def test_a_cleaned_segment_gets_its_time_index(tmp_path: Path) -> None:
    directory = tmp_path / "c-0"
    store = FileSegmentStore(str(directory))
    log = PartitionLog.open(store, COMPACT)
    fill(log, 1500, 12)
    log.roll()
    log.flush()
    assert run_pass(log).records_removed > 0
    names = os.listdir(directory)
    assert not [name for name in names if name.endswith((".cleaned", ".swap"))], names
    for segment in log.segments[:-1]:
        batches = headers(store, segment.base_offset)
        assert stored_entries(store, segment.base_offset) == kafka_time_index(
            batches, COMPACT.index_interval_bytes, inactive=True
        )
    log.close()
