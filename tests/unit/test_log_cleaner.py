"""Log compaction over MemorySegmentStore: what a pass keeps, tombstones, transactions, a bounded key
map, crash safety at every storage step, and a follower of a compacted leader."""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from pykraft.log.cleaner import OFFSET_MAP_ENTRY_BYTES, CleanerConfig, CleanerStats, clean
from pykraft.log.partition_log import CLEANER_SWAP_CHECKPOINT, LogConfig, PartitionLog
from pykraft.log.store import MemorySegmentStore
from pykraft.log.txn_index import AbortedTxn
from pykraft.protocol.records import (
    DELETE_HORIZON_MASK,
    Record,
    build_batch,
    decode_records,
    end_txn_marker,
    scan_batches,
    validate_batches,
)

COMPACT = LogConfig(
    segment_bytes=4096,
    index_interval_bytes=256,
    cleanup_policy_compact=True,
    cleanup_policy_delete=False,
    delete_retention_ms=1000,
)
NOW_MS = 1_000_000


def keyed_batch(
    items: Iterable[tuple[bytes, bytes | None]], timestamp_ms: int = NOW_MS, **kwargs
) -> bytearray:
    return build_batch([Record(key, value) for key, value in items], timestamp_ms=timestamp_ms, **kwargs)


def append(log: PartitionLog, batch: bytearray) -> int:
    return log.append(batch, validate_batches(batch)).first_offset


def run_pass(log: PartitionLog, now_ms: int = NOW_MS, **kwargs) -> CleanerStats:
    stats = CleanerStats()
    options = {
        "config": CleanerConfig(),
        "first_unstable_offset": None,
        "aborted": [],
        "producer_last_offsets": {},
        **kwargs,
    }
    for _ in clean(log, now_ms, stats=stats, **options):  # type: ignore[arg-type]
        pass
    return stats


def all_records(log: PartitionLog) -> list[Record]:
    """Every data record from the log start, in order, with its offset (through batch gaps)."""
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 24)
        if not result.chunks:
            break
        for chunk in result.chunks:
            for position, header in scan_batches(chunk):
                if header.is_control:
                    continue  # what a consumer sees
                out.extend(decode_records(chunk[position : position + header.size_in_bytes]))
        offset = result.next_offset
    return out


def below_active(log: PartitionLog, records: list[Record]) -> list[Record]:
    return [r for r in records if r.offset < log.active_segment_base_offset]


def fill(
    log: PartitionLog, updates: int, keys: int, per_batch: int = 10, seed: int = 0
) -> dict[bytes, bytes | None]:
    """``updates`` writes over ``keys`` keys (every 7th a tombstone); returns the latest per key."""
    rng = random.Random(seed)
    latest: dict[bytes, bytes | None] = {}
    for start in range(0, updates, per_batch):
        items = []
        for i in range(start, min(start + per_batch, updates)):
            key = b"key-%d" % rng.randrange(keys)
            value = None if i % 7 == 6 else b"value-%d-" % i + bytes(rng.randrange(20))
            items.append((key, value))
            latest[key] = value
        append(log, keyed_batch(items))
    return latest


def check_compacted(log: PartitionLog, latest: dict[bytes, bytes | None]) -> None:
    records = all_records(log)
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offsets must keep increasing"
    seen: dict[bytes, bytes | None] = {}
    for record in records:
        assert record.key is not None
        seen[record.key] = record.value
    assert seen == latest, "every key's latest value, byte for byte"
    clean_keys = [r.key for r in below_active(log, records)]
    assert len(clean_keys) == len(set(clean_keys)), "at most one record per key below the active segment"


def test_a_pass_keeps_the_latest_record_of_each_key_with_its_offset() -> None:
    store = MemorySegmentStore()
    log = PartitionLog.open(store, COMPACT)
    latest = fill(log, 2000, 10)
    append(log, keyed_batch([(b"tail", b"x")]))
    latest[b"tail"] = b"x"
    log.roll()
    log.flush()
    before = {r.offset: r for r in all_records(log)}
    stats = run_pass(log)
    assert stats.passes == 1 and stats.records_removed > 1900
    check_compacted(log, latest)
    # Survivors are the very records written, at their original offsets.
    for record in all_records(log):
        assert before[record.offset] == record
    assert log.log_end_offset == max(before) + 1
    assert log.size_in_bytes < 2 * COMPACT.segment_bytes
    # Reopening accepts the offset gaps the cleaner left, and finds the same records.
    log.close()
    reopened = PartitionLog.open(store, COMPACT)
    check_compacted(reopened, latest)


def test_tombstones_stay_until_the_delete_horizon_then_go() -> None:
    log = PartitionLog.open(MemorySegmentStore(), COMPACT)
    append(log, keyed_batch([(b"a", b"1"), (b"b", b"2")]))
    append(log, keyed_batch([(b"a", None)]))
    log.roll()
    log.flush()
    run_pass(log, NOW_MS)
    records = all_records(log)
    assert [(r.key, r.value) for r in records] == [(b"b", b"2"), (b"a", None)]
    # The batch keeping the tombstone carries KIP-534's delete horizon; timestamps are unchanged.
    assert all(r.timestamp == NOW_MS for r in records)
    headers = [h for chunk in log.read(0, 1 << 20).chunks for _, h in scan_batches(chunk)]
    assert headers[-1].attributes & DELETE_HORIZON_MASK and headers[-1].base_timestamp == NOW_MS + 1000
    # Before the horizon a forced pass keeps it; after it the tombstone is gone.
    run_pass(log, NOW_MS + 999, expire_deletes=True)
    assert [(r.key, r.value) for r in all_records(log)] == [(b"b", b"2"), (b"a", None)]
    run_pass(log, NOW_MS + 1000, expire_deletes=True)
    assert [(r.key, r.value) for r in all_records(log)] == [(b"b", b"2")]


def test_nothing_past_the_uncleanable_offset_is_touched() -> None:
    log = PartitionLog.open(MemorySegmentStore(), COMPACT)
    fill(log, 300, 5)
    log.flush()
    recovery_point = log.recovery_point
    fill(log, 600, 5, seed=1)  # rolled, not flushed: above the recovery point
    run_pass(log)
    for record in all_records(log):
        if record.offset >= recovery_point:
            break
    assert any(r.offset >= recovery_point for r in all_records(log))
    upper = min(log.recovery_point, log.active_segment_base_offset)
    above = [r for r in all_records(log) if r.offset >= upper]
    assert len(above) == log.log_end_offset - upper, "everything from the recovery point on is intact"
    # An open transaction holds the cleaner back too.
    log2 = PartitionLog.open(MemorySegmentStore(), COMPACT)
    fill(log2, 600, 5)
    log2.roll()
    log2.flush()
    assert run_pass(log2, first_unstable_offset=0).passes == 0


def test_min_compaction_lag_keeps_young_segments_dirty() -> None:
    lagged = LogConfig(**{**COMPACT.__dict__, "min_compaction_lag_ms": 60_000})
    log = PartitionLog.open(MemorySegmentStore(), lagged)
    fill(log, 600, 5)
    log.roll()
    log.flush()
    assert run_pass(log, NOW_MS + 59_999).passes == 0
    assert run_pass(log, NOW_MS + 60_001).passes == 1


def test_aborted_transactions_leave_and_last_batches_of_producers_stay_empty() -> None:
    log = PartitionLog.open(MemorySegmentStore(), COMPACT)
    # Producer 7: committed k=1, then k=2; producer 8 aborts k=99.
    append(log, keyed_batch([(b"k", b"1")], producer_id=7, producer_epoch=0, base_sequence=0))
    aborted_first = append(
        log,
        keyed_batch([(b"k", b"99")], producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True),
    )
    marker = build_batch(
        [end_txn_marker(False, 0)],
        timestamp_ms=NOW_MS,
        producer_id=8,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    marker_offset = append(log, marker)
    last_7 = append(log, keyed_batch([(b"k", b"2")], producer_id=7, producer_epoch=0, base_sequence=1))
    append(log, keyed_batch([(b"k", b"3")]))  # a plain write supersedes producer 7's last record
    log.roll()
    log.flush()
    run_pass(
        log,
        aborted=[AbortedTxn(8, aborted_first, marker_offset, marker_offset)],
        producer_last_offsets={7: last_7, 8: marker_offset},
    )
    batches = [h for chunk in log.read(0, 1 << 20).chunks for _, h in scan_batches(chunk)]
    # The aborted record never entered the map nor stays; producer 7's last batch stays, empty, with its
    # sequence; the marker stays (with a delete horizon) and the latest value is the plain write.
    assert [(h.producer_id, h.base_offset, h.record_count) for h in batches] == [
        (8, marker_offset, 1),
        (7, last_7, 0),
        (-1, last_7 + 1, 1),
    ]
    assert batches[1].base_sequence == 1 and batches[1].last_offset == last_7
    assert [(r.key, r.value) for r in all_records(log)] == [(b"k", b"3")]


def test_a_small_key_map_cleans_in_more_passes_never_losing_a_latest_value() -> None:
    log = PartitionLog.open(MemorySegmentStore(), COMPACT)
    latest = fill(log, 3000, 200)
    log.roll()
    log.flush()
    config = CleanerConfig(dedupe_buffer_bytes=50 * OFFSET_MAP_ENTRY_BYTES)
    assert config.offset_map_capacity == 50
    passes = 0
    while True:
        stats = run_pass(log, config=config)
        if not stats.passes:
            break
        passes += 1
        assert stats.map_full_passes == 1 or passes > 1
        seen = {r.key: r.value for r in all_records(log)}
        assert seen == latest
    assert passes > 3, "a map of 50 keys cannot clean 200 keys in one pass"
    assert log.size_in_bytes < 3000 * 15


class Crash(Exception):
    pass


class CrashingStore(MemorySegmentStore):
    """Raises Crash at the n-th storage change once armed (a kill -9 at that point)."""

    MUTATIONS = (
        "create_segment",
        "append",
        "truncate_segment",
        "delete_segment",
        "write_index",
        "flush",
        "write_checkpoint",
        "delete_checkpoint",
        "create_cleaned",
        "append_cleaned",
        "write_cleaned_index",
        "seal_cleaned",
        "install_swap",
        "discard_cleaning",
    )

    def __init__(self) -> None:
        super().__init__()
        self.countdown: int | None = None
        self.changes = 0

    def __getattribute__(self, name: str):
        attr = super().__getattribute__(name)
        if name in CrashingStore.MUTATIONS and self.countdown is not None:

            def step(*args, **kwargs):
                self.changes += 1
                if self.changes == self.countdown:
                    raise Crash(name)
                return attr(*args, **kwargs)

            return step
        return attr


def test_a_crash_at_any_step_of_a_pass_loses_nothing_and_leaves_no_stray_files() -> None:
    def build() -> tuple[CrashingStore, dict[bytes, bytes | None], dict[int, Record]]:
        store = CrashingStore()
        log = PartitionLog.open(store, COMPACT)
        latest = fill(log, 1500, 12)
        log.roll()
        log.flush()
        return store, latest, {r.offset: r for r in all_records(log)}

    store, _, _ = build()
    store.countdown = 10**9
    run_pass(PartitionLog.open(store, COMPACT))
    total_changes = store.changes
    assert total_changes > 20
    rng = random.Random(5)
    for crash_at in range(1, total_changes + 1):
        store, latest, written = build()
        log = PartitionLog.open(store, COMPACT)
        store.countdown = crash_at
        with pytest.raises(Crash):
            run_pass(log)
        store.countdown = None
        store.crash(rng)
        reopened = PartitionLog.open(store, COMPACT)
        records = all_records(reopened)
        assert {r.key: r.value for r in records} == latest, f"crash at change {crash_at}"
        assert all(written[r.offset] == r for r in records), f"crash at change {crash_at}"
        assert store.list_cleaning() == {} and store.read_checkpoint(CLEANER_SWAP_CHECKPOINT) is None
        # And the next pass finishes the job.
        run_pass(reopened)
        check_compacted(reopened, latest)


def test_a_follower_stores_a_compacted_leaders_batches_with_their_gaps() -> None:
    leader = PartitionLog.open(MemorySegmentStore(), COMPACT)
    latest = fill(leader, 1000, 6)
    leader.roll()
    leader.flush()
    run_pass(leader)
    follower_store = MemorySegmentStore()
    follower = PartitionLog.open(follower_store, LogConfig(segment_bytes=1024, index_interval_bytes=128))
    offset = 0
    while offset < leader.log_end_offset:
        result = leader.read(offset, 3000)
        data = bytearray(b"".join(result.chunks))
        follower.append(data, validate_batches(data, from_leader=True), assign_offsets=False)
        offset = result.next_offset
    assert follower.log_end_offset == leader.log_end_offset
    assert all_records(follower) == all_records(leader)
    follower.close()
    # The gaps sit inside segments the follower rolled itself: recovery takes them as they are.
    reopened = PartitionLog.open(follower_store, LogConfig(segment_bytes=1024, index_interval_bytes=128))
    assert all_records(reopened) == all_records(leader)
    assert {r.key: r.value for r in all_records(reopened)} == latest


def test_a_million_updates_over_a_thousand_keys_end_with_one_record_per_live_key() -> None:
    store = MemorySegmentStore()
    config = LogConfig(**{**COMPACT.__dict__, "segment_bytes": 1 << 20, "index_interval_bytes": 4096})
    log = PartitionLog.open(store, config)
    rng = random.Random(1)
    latest: dict[bytes, bytes | None] = {}
    keys = [b"key-%04d" % k for k in range(1000)]
    written = 0
    while written < 1_000_000:
        items = []
        for i in range(written, written + 1000):
            key = keys[rng.randrange(1000)]
            value = None if i % 97 == 0 else b"%d" % i
            items.append((key, value))
            latest[key] = value
        append(log, keyed_batch(items))
        written += 1000
        if written % 250_000 == 0:  # the cleaner runs now and then while the writes go on
            log.flush()
            run_pass(log)
    append(log, keyed_batch([(b"last", b"!")]))
    latest[b"last"] = b"!"
    log.roll()
    log.flush()
    stats = run_pass(log)
    check_compacted(log, latest)
    live = {key for key, value in latest.items() if value is not None}
    assert stats.records_removed > 0 and len(all_records(log)) == len(latest)
    # After delete.retention.ms the tombstones are gone too: exactly the live keys remain.
    run_pass(log, NOW_MS + config.delete_retention_ms, expire_deletes=True)
    records = all_records(log)
    assert {r.key for r in records} == live and len(records) == len(live)
    assert {r.key: r.value for r in records} == {k: latest[k] for k in live}
    log.close()
    check_compacted(PartitionLog.open(store, config), {k: latest[k] for k in live})
