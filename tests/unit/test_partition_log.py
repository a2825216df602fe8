"""PartitionLog over MemorySegmentStore: offsets, reads, recovery, index, retention, timestamps."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.core.errors import ErrorCode, KafkaError
from pykraft.log.partition_log import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    SCAN_WINDOW_BYTES,
    LogConfig,
    PartitionLog,
)
from pykraft.log.store import MemorySegmentStore
from pykraft.protocol.records import (
    Record,
    build_batch,
    decode_records,
    read_batch_header,
    scan_batches,
    validate_batches,
)


def make_batch(records: int = 1, value_bytes: int = 10, timestamp_ms: int = 1000) -> bytearray:
    return build_batch(
        [Record(None, bytes([i % 251]) * value_bytes) for i in range(records)], timestamp_ms=timestamp_ms
    )


def append(log: PartitionLog, batch: bytearray):
    return log.append(batch, validate_batches(batch))


def read_all(log: PartitionLog, offset: int | None = None) -> bytes:
    start = log.log_start_offset if offset is None else offset
    return b"".join(log.read(start, 1 << 40).chunks)


def bases(data: bytes) -> list[int]:
    return [header.base_offset for _, header in scan_batches(data)]


def filled_log(
    store: MemorySegmentStore, config: LogConfig, batches: int, records: int = 3, value_bytes: int = 50
) -> tuple[PartitionLog, list[bytes]]:
    log = PartitionLog.open(store, config)
    stored = []
    for i in range(batches):
        batch = make_batch(records, value_bytes, timestamp_ms=1000 + i)
        append(log, batch)
        stored.append(bytes(batch))
    return log, stored


SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=100)


# --- append and read ----------------------------------------------------------------------------


def test_append_assigns_consecutive_offsets_and_rolls_segments() -> None:
    store = MemorySegmentStore()
    log = PartitionLog.open(store, SMALL)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    infos = [append(log, make_batch(3, 50, timestamp_ms=2000 + i)) for i in range(40)]
    assert [info.first_offset for info in infos] == list(range(0, 120, 3))
    assert infos[-1].last_offset == 119 and infos[-1].max_timestamp == 2039
    assert infos[-1].offset_of_max_timestamp == 119
    assert log.log_end_offset == log.high_watermark == 120
    assert len(store.list_segments()) > 5
    for segment in log.segments[:-1]:
        assert segment.size_bytes <= SMALL.segment_bytes
    assert [s.base_offset for s in log.segments] == store.list_segments()
    assert log.size_in_bytes == sum(s.size_bytes for s in log.segments)
    data = read_all(log)
    assert bases(data) == list(range(0, 120, 3))
    assert len(data) == log.size_in_bytes
    # The stored batches decode to the records appended, at the offsets assigned.
    offsets = [
        record.offset
        for position, header in scan_batches(data)
        for record in decode_records(data[position : position + header.size_in_bytes])
    ]
    assert offsets == list(range(120))


def test_append_rewrites_in_place_and_one_store_append_per_call() -> None:
    store = MemorySegmentStore()
    log = PartitionLog.open(store)
    records = make_batch(2) + make_batch(5) + make_batch(1)
    headers = validate_batches(records)
    info = log.append(records, headers, leader_epoch=7)
    assert store.append_calls == 1
    assert (info.first_offset, info.last_offset) == (0, 7)
    stored = [h for _, h in scan_batches(records)]
    assert [h.base_offset for h in stored] == [0, 2, 7]
    assert {h.partition_leader_epoch for h in stored} == {7}
    validate_batches(records)  # CRC still holds: it does not cover baseOffset or the epoch


def test_empty_segment_takes_an_oversized_append() -> None:
    log = PartitionLog.open(MemorySegmentStore(), LogConfig(segment_bytes=200))
    append(log, make_batch(1, 500))
    append(log, make_batch(1, 500))
    assert [s.base_offset for s in log.segments] == [0, 1]
    assert log.roll() == 2 and log.roll() == 2  # rolling an empty active segment is a no-op


def test_an_append_longer_than_segment_bytes_is_split_between_batches() -> None:
    # A follower's fetched chunk (the leader's offsets, with a compaction gap) goes into segments of at
    # most segment.bytes, cut between batches, as the leader's own appends did.
    leader, stored = filled_log(MemorySegmentStore(), LogConfig(segment_bytes=100_000), 12)
    chunk = bytearray(b"".join(stored[:5] + stored[6:]))
    batch_bytes = len(stored[0])
    follower = PartitionLog.open(MemorySegmentStore(), LogConfig(segment_bytes=3 * batch_bytes + 10))
    info = follower.append(chunk, validate_batches(chunk), assign_offsets=False)
    assert (info.first_offset, info.last_offset) == (0, 35)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (1011, 35)
    assert [s.base_offset for s in follower.segments] == [0, 9, 21, 30]
    assert all(s.size_bytes <= 3 * batch_bytes for s in follower.segments)
    assert read_all(follower) == bytes(chunk)
    # A leader's append is split the same way (offsets assigned across the segments).
    log = PartitionLog.open(MemorySegmentStore(), LogConfig(segment_bytes=2 * batch_bytes))
    batches = make_batch(3, 50) + make_batch(3, 50) + make_batch(3, 50)
    assert log.append(batches, validate_batches(batches))[:2] == (0, 8)
    assert [s.base_offset for s in log.segments] == [0, 6]
    assert bases(read_all(log)) == [0, 3, 6]


def test_read_from_middle_of_batch_returns_whole_batch() -> None:
    log, stored = filled_log(MemorySegmentStore(), SMALL, 10, records=5)
    result = log.read(12, 1)
    assert result.first_offset == 10 and result.next_offset == 15
    assert bases(b"".join(result.chunks)) == [10]


def test_max_bytes_and_min_one_batch() -> None:
    log, stored = filled_log(MemorySegmentStore(), LogConfig(), 10)
    size = len(stored[0])
    assert bases(b"".join(log.read(0, 1).chunks)) == [0]
    assert log.read(0, 1, min_one_batch=False).chunks == []
    assert bases(b"".join(log.read(3, int(size * 2.5)).chunks)) == [3, 6]
    assert log.read(3, int(size * 2.5)).size_bytes == 2 * size
    assert bases(b"".join(log.read(0, size * 3).chunks)) == [0, 3, 6]


def test_reads_span_segments_one_chunk_per_segment() -> None:
    log, stored = filled_log(MemorySegmentStore(), SMALL, 30)
    result = log.read(0, 1 << 30)
    assert len(result.chunks) == len(log.segments)
    assert b"".join(result.chunks) == b"".join(stored[:0]) + read_all(log)
    assert result.next_offset == log.log_end_offset


def test_out_of_range_and_log_end() -> None:
    log, _ = filled_log(MemorySegmentStore(), SMALL, 5)
    with pytest.raises(KafkaError) as err:
        log.read(16, 100)
    assert err.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(KafkaError):
        log.read(-1, 100)
    at_end = log.read(15, 100)
    assert at_end.chunks == [] and at_end.next_offset == 15 and at_end.first_offset == -1
    log.delete_records_before(6)
    with pytest.raises(KafkaError):
        log.read(5, 100)
    assert bases(b"".join(log.read(6, 1 << 20).chunks))[0] == 6


def test_max_offset_stops_below_high_watermark() -> None:
    store = MemorySegmentStore()
    log = PartitionLog.open(store, SMALL, high_watermark_tracks_log_end=False)
    for _ in range(10):
        append(log, make_batch(3))
    assert log.high_watermark == 0
    log.set_high_watermark(9)
    assert bases(b"".join(log.read(0, 1 << 20, max_offset=log.high_watermark).chunks)) == [0, 3, 6]
    # A batch straddling the high watermark is not returned.
    assert bases(b"".join(log.read(0, 1 << 20, max_offset=10).chunks)) == [0, 3, 6]
    assert log.read(9, 1 << 20, max_offset=9).chunks == []
    log.set_high_watermark(10**9)
    assert log.high_watermark == log.log_end_offset == 30


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 300)), min_size=1, max_size=40),
    interval_bytes=st.integers(0, 600),
    segment_bytes=st.integers(200, 3000),
    probes=st.lists(st.integers(0, 10**6), min_size=1, max_size=10),
    max_bytes=st.integers(0, 5000),
)
def test_lookup_always_starts_with_batch_holding_offset(
    batches: list[tuple[int, int]], interval_bytes: int, segment_bytes: int, probes: list[int], max_bytes: int
) -> None:
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval_bytes)
    log = PartitionLog.open(MemorySegmentStore(), config)
    expected = []  # (base, last, bytes)
    for records, value_bytes in batches:
        batch = make_batch(records, value_bytes)
        info = append(log, batch)
        expected.append((info.first_offset, info.last_offset, bytes(batch)))
    for probe in probes:
        offset = probe % log.log_end_offset
        result = log.read(offset, max_bytes)
        data = b"".join(result.chunks)
        first = next(i for i, (base, last, _) in enumerate(expected) if base <= offset <= last)
        # Whole batches from the one holding the offset, as many as fit (at least one).
        want, total = [], 0
        for _base, _last, batch in expected[first:]:
            if want and total + len(batch) > max_bytes:
                break
            want.append(batch)
            total += len(batch)
        assert data == b"".join(want)
        assert result.first_offset == expected[first][0]
        assert [h.base_offset for h in log.batch_headers(offset)] == [b for b, _, _ in expected[first:]]


# --- index ----------------------------------------------------------------------------------------


def test_index_entries_follow_kafka_layout() -> None:
    store = MemorySegmentStore()
    log, _ = filled_log(store, LogConfig(segment_bytes=5000, index_interval_bytes=300), 60)
    log.flush()
    for segment in log.segments:
        index = store.read_index(segment.base_offset)
        assert index is not None and len(index) == 8 * segment.index_entries > 0
        for relative_offset, position in struct.iter_unpack(">ii", index):
            header = read_batch_header(store.read(segment.base_offset, position, 61))
            # Kafka's entry offset is the last offset of the batch at that position.
            assert header.last_offset == segment.base_offset + relative_offset


def test_bad_index_is_rebuilt_on_open() -> None:
    store = MemorySegmentStore()
    log, _ = filled_log(store, LogConfig(segment_bytes=5000, index_interval_bytes=300), 60)
    log.close()
    good = {b: store.read_index(b) for b in store.list_segments()}
    first = store.list_segments()[0]
    store.write_index(first, 0, b"\xff" * 13)
    PartitionLog.open(store, LogConfig(segment_bytes=5000, index_interval_bytes=300))
    assert {b: store.read_index(b) for b in store.list_segments()} == good


# --- recovery -----------------------------------------------------------------------------------


def test_reopen_after_clean_close_keeps_everything() -> None:
    store = MemorySegmentStore()
    log, stored = filled_log(store, SMALL, 25)
    log.close()
    reopened = PartitionLog.open(store, SMALL)
    assert reopened.log_end_offset == 75
    assert bases(read_all(reopened)) == list(range(0, 75, 3))
    assert reopened.segments == log.segments


@pytest.mark.parametrize("cut_bytes", [1, 2, 10, 60, 61, 62, 100])
def test_torn_tail_truncates_to_last_whole_batch(cut_bytes: int) -> None:
    store = MemorySegmentStore()
    log, stored = filled_log(store, SMALL, 25)
    before = read_all(log)
    last = store.list_segments()[-1]
    last_batch = len(stored[-1])
    store.cut(last, store.segment_size(last) - cut_bytes)
    reopened = PartitionLog.open(store, SMALL)
    # Everything before the torn batch survives; the torn batch (and anything after) is gone.
    lost_batches = 1 if cut_bytes <= last_batch else 2
    assert reopened.log_end_offset == 75 - 3 * lost_batches
    assert read_all(reopened) == before[: len(before) - lost_batches * last_batch]
    assert store.segment_size(last) == reopened.segments[-1].size_bytes
    append(reopened, make_batch(3))
    assert bases(read_all(reopened))[-1] == reopened.log_end_offset - 3


def test_every_cut_of_the_last_segment_recovers_a_prefix() -> None:
    store = MemorySegmentStore()
    log, stored = filled_log(store, SMALL, 25)
    log.close()
    before = read_all(log)
    last = store.list_segments()[-1]
    full_size = store.segment_size(last)
    pristine = store.read(last, 0, full_size)
    for size in range(full_size + 1):
        store.cut(last, 0)
        store.append(last, pristine[:size])
        reopened = PartitionLog.open(store, SMALL)
        data = read_all(reopened)
        assert before.startswith(data)
        whole_batches = sum(1 for _ in scan_batches(pristine[:size]))
        assert reopened.segments[-1].size_bytes == sum(
            h.size_in_bytes for _, h in list(scan_batches(pristine[:size]))[:whole_batches]
        )


@pytest.mark.parametrize("where", ["header_crc", "body", "length"])
def test_corrupt_last_batch_is_dropped(where: str) -> None:
    store = MemorySegmentStore()
    log, stored = filled_log(store, SMALL, 25)
    log.close()
    before = read_all(log)
    last = store.list_segments()[-1]
    position = store.segment_size(last) - len(stored[-1])
    store.corrupt(last, position + {"header_crc": 18, "body": 70, "length": 9}[where])
    reopened = PartitionLog.open(store, SMALL)
    assert reopened.log_end_offset == 72
    assert read_all(reopened) == before[: -len(stored[-1])]


def test_torn_segment_above_recovery_point_drops_later_segments() -> None:
    store = MemorySegmentStore()
    log, stored = filled_log(store, SMALL, 40)
    # Never flushed: the recovery point is 0, so every segment is CRC-checked.
    assert store.read_checkpoint(RECOVERY_POINT_CHECKPOINT) is None
    segments = store.list_segments()
    victim = segments[1]
    store.corrupt(victim, 70)
    reopened = PartitionLog.open(store, SMALL)
    assert store.list_segments() == segments[:2]
    assert reopened.log_end_offset == victim
    assert reopened.segments[-1].size_bytes == 0


def test_segments_below_recovery_point_are_not_crc_checked_or_read_whole() -> None:
    store = MemorySegmentStore()
    config = LogConfig(segment_bytes=500_000)
    log = PartitionLog.open(store, config)
    for _ in range(40):
        append(log, make_batch(1, 50_000))
    log.flush()
    assert store.read_checkpoint(RECOVERY_POINT_CHECKPOINT) == f"0\n{log.segments[-1].base_offset}\n".encode()
    store.read_bytes = 0
    reopened = PartitionLog.open(store, config)
    assert reopened.log_end_offset == 40
    # Old segments: one window, then headers only. The active one is CRC-checked (read whole).
    assert store.read_bytes <= log.segments[-1].size_bytes + len(log.segments) * SCAN_WINDOW_BYTES + 40 * 61
    assert store.read_bytes < log.size_in_bytes / 2


def test_crash_loses_only_unflushed_data() -> None:
    store = MemorySegmentStore()
    log, _ = filled_log(store, SMALL, 20)
    log.flush()
    flushed = read_all(log)
    for _ in range(20):
        append(log, make_batch(3))
    store.crash()
    reopened = PartitionLog.open(store, SMALL)
    assert read_all(reopened) == flushed


@pytest.mark.parametrize("seed", range(40))
def test_random_crashes_keep_flushed_prefix(seed: int) -> None:
    rng = random.Random(seed)
    store = MemorySegmentStore()
    config = LogConfig(segment_bytes=rng.choice([300, 1000, 5000]), index_interval_bytes=rng.choice([0, 100]))
    log = PartitionLog.open(store, config)
    durable = b""
    for _round in range(5):
        for _ in range(rng.randint(1, 30)):
            append(log, make_batch(rng.randint(1, 4), rng.randint(0, 200), timestamp_ms=rng.randint(0, 99)))
            if rng.random() < 0.1:
                log.flush()
                durable = read_all(log, 0)
        appended = read_all(log, 0)
        store.crash(rng)
        log = PartitionLog.open(store, config)
        if log.log_start_offset > 0:
            # Only a first segment that was never flushed can vanish: then nothing was flushed.
            assert durable == b"" and store.read_checkpoint(LOG_START_OFFSET_CHECKPOINT) is None
            log.truncate_fully_and_start_at(0)
        data = read_all(log, 0)
        assert appended.startswith(data)
        assert data.startswith(durable)
        headers = [h for _, h in scan_batches(data)]
        assert log.log_end_offset == (headers[-1].next_offset if headers else 0)
        assert bases(data) == [h.base_offset for h in log.batch_headers(0)]


# --- deletion, retention, truncation -----------------------------------------------------------


def test_delete_records_before_persists_across_reopen() -> None:
    store = MemorySegmentStore()
    log, _ = filled_log(store, SMALL, 30)
    first_segments = store.list_segments()
    assert log.delete_records_before(40) == 40
    assert log.delete_records_before(10) == 40  # never backwards
    assert store.read_checkpoint(LOG_START_OFFSET_CHECKPOINT) == b"0\n40\n"
    assert store.list_segments()[0] <= 40 < log.segments[0].next_offset
    assert len(store.list_segments()) < len(first_segments)
    with pytest.raises(KafkaError) as err:
        log.delete_records_before(91)
    assert err.value.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    reopened = PartitionLog.open(store, SMALL)
    assert reopened.log_start_offset == 40
    assert bases(read_all(reopened))[0] <= 40
    with pytest.raises(KafkaError):
        reopened.read(39, 100)
    # Deleting everything leaves an empty log that starts at the log end.
    reopened.delete_records_before(90)
    assert reopened.read(90, 100).chunks == []
    again = PartitionLog.open(store, SMALL)
    assert (again.log_start_offset, again.log_end_offset) == (90, 90)


def test_retention_by_time_never_deletes_active_segment() -> None:
    store = MemorySegmentStore()
    config = LogConfig(segment_bytes=1000, retention_ms=1000)
    log, _ = filled_log(store, config, 30)  # timestamps 1000..1029
    segments = log.segments
    assert log.apply_retention(now_ms=1500) == []
    deleted = log.apply_retention(now_ms=10**9)
    assert deleted == [s.base_offset for s in segments[:-1]]
    assert store.list_segments() == [segments[-1].base_offset]
    assert log.log_start_offset == segments[-1].base_offset
    assert PartitionLog.open(store, config).log_start_offset == segments[-1].base_offset


def test_retention_by_time_stops_at_first_young_segment() -> None:
    log = PartitionLog.open(MemorySegmentStore(), LogConfig(segment_bytes=300, retention_ms=100))
    for ts in [0, 0, 0, 5000, 0, 0, 0, 0]:
        append(log, make_batch(1, 150, timestamp_ms=ts))
    assert len(log.segments) == 8
    assert log.apply_retention(now_ms=1000) == [0, 1, 2]


def test_retention_by_bytes() -> None:
    config = LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    log, _ = filled_log(MemorySegmentStore(), config, 40)
    sizes = [s.size_bytes for s in log.segments]
    deleted = log.apply_retention(now_ms=10**12)
    assert deleted
    assert log.size_in_bytes >= 2500
    assert log.size_in_bytes - log.segments[0].size_bytes < 2500
    assert len(deleted) + len(log.segments) == len(sizes)
    zero = LogConfig(segment_bytes=1000, retention_bytes=0, retention_ms=-1)
    log0, _ = filled_log(MemorySegmentStore(), zero, 40)
    log0.apply_retention(now_ms=0)
    assert len(log0.segments) == 1  # the active segment stays


def test_retention_respects_high_watermark() -> None:
    config = LogConfig(segment_bytes=1000, retention_ms=1)
    log = PartitionLog.open(MemorySegmentStore(), config, high_watermark_tracks_log_end=False)
    for _ in range(40):
        append(log, make_batch(3, 50))
    assert log.apply_retention(now_ms=10**9) == []
    log.set_high_watermark(log.segments[2].base_offset)
    segments = log.segments
    assert log.apply_retention(now_ms=10**9) == [s.base_offset for s in segments[:2]]
    assert log.log_start_offset == segments[2].base_offset


def test_truncate_to_drops_tail_and_keeps_index_consistent() -> None:
    store = MemorySegmentStore()
    config = LogConfig(segment_bytes=1000, index_interval_bytes=50)
    log, _ = filled_log(store, config, 40)
    log.flush()
    log.truncate_to(61)  # inside batch 60..62: that batch goes whole
    assert log.log_end_offset == 60
    assert bases(read_all(log))[-1] == 57
    assert store.list_segments()[-1] <= 60
    info = append(log, make_batch(3))
    assert info.first_offset == 60
    log.close()
    reopened = PartitionLog.open(store, config)
    assert reopened.log_end_offset == 63
    assert reopened.segments == log.segments
    log.truncate_to(1000)  # past the end: no-op
    assert log.log_end_offset == 63


def test_truncate_to_segment_base_and_below_log_start() -> None:
    store = MemorySegmentStore()
    log, _ = filled_log(store, SMALL, 40)
    boundary = log.segments[3].base_offset
    log.truncate_to(boundary)
    assert log.log_end_offset == boundary
    assert store.list_segments()[-1] == boundary and log.segments[-1].size_bytes == 0
    log.delete_records_before(30)
    log.truncate_to(5)
    assert (log.log_start_offset, log.log_end_offset, store.list_segments()) == (5, 5, [5])
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, store.list_segments()) == (1000, 1000, [1000])
    assert append(log, make_batch(2)).first_offset == 1000
    reopened = PartitionLog.open(store, SMALL)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (1000, 1002)


def test_log_start_checkpoint_past_surviving_data_resets_log() -> None:
    store = MemorySegmentStore()
    log, _ = filled_log(store, SMALL, 10)
    log.delete_records_before(30)
    store.crash()  # nothing was flushed: every segment disappears, the checkpoint stays
    reopened = PartitionLog.open(store, SMALL)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (30, 30)


# --- timestamps ---------------------------------------------------------------------------------


def test_offset_for_timestamp_is_exact_within_a_batch() -> None:
    store = MemorySegmentStore()
    log = PartitionLog.open(store, LogConfig(segment_bytes=400, index_interval_bytes=0))
    # Batch i holds records with timestamps 100*i + 0, 10, 20 (and batch 5 goes back in time).
    for i in range(10):
        base_ts = 100 * i if i != 5 else 50
        batch = build_batch(
            [Record(None, b"x" * 40, timestamp=base_ts + 10 * j) for j in range(3)], timestamp_ms=base_ts
        )
        append(log, batch)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, 0)
    assert log.offset_for_timestamp(5) == (1, 10)
    assert log.offset_for_timestamp(215) == (8, 220)
    assert log.offset_for_timestamp(60) == (3, 100)  # batch 1 (100..120) precedes batch 5 (50..70)
    assert log.offset_for_timestamp(921) is None
    assert log.offset_for_timestamp(920) == (29, 920)
    assert log.max_timestamp_offset() == (29, 920)
    log.delete_records_before(7)
    assert log.offset_for_timestamp(0) == (7, 210)


def test_max_timestamp_offset_finds_first_record_with_max() -> None:
    log = PartitionLog.open(MemorySegmentStore(), SMALL)
    assert log.max_timestamp_offset() == (-1, -1)
    append(log, make_batch(2, timestamp_ms=10))
    batch = build_batch([Record(None, b"a", timestamp=t) for t in (5, 99, 7, 99)], timestamp_ms=5)
    append(log, batch)
    append(log, make_batch(2, timestamp_ms=50))
    assert log.max_timestamp_offset() == (3, 99)


def test_first_segment_above_zero_without_checkpoint_is_the_log_start() -> None:
    """A directory Kafka wrote (or retention moved) may start anywhere: keep it, do not wipe it."""
    store = MemorySegmentStore()
    log, _ = filled_log(store, SMALL, 30)
    log.close()
    store.delete_segment(0)
    start = store.list_segments()[0]
    reopened = PartitionLog.open(store, SMALL)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (start, 90)


def test_segment_hole_drops_everything_after_it() -> None:
    store = MemorySegmentStore()
    filled_log(store, SMALL, 30)  # never flushed: the recovery point is 0
    segments = store.list_segments()
    store.delete_segment(segments[2])  # as if a crash lost a never-flushed segment but kept later ones
    reopened = PartitionLog.open(store, SMALL)
    assert store.list_segments() == segments[:2]
    assert reopened.log_end_offset == segments[2]
    # With a log start checkpoint below it, a lost first segment empties the log at that start.
    reopened.truncate_fully_and_start_at(0)
    for batch in range(30):
        append(reopened, make_batch(3, 50, timestamp_ms=batch))
    reopened.delete_records_before(1)
    reopened.close()
    store.delete_segment(0)
    again = PartitionLog.open(store, SMALL)
    assert (again.log_start_offset, again.log_end_offset, store.list_segments()) == (1, 1, [1])
