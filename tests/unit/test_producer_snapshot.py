"""Producer-state snapshots: the file codec (whole, one byte at a time, trailing bytes, hypothesis),
and the partition's lifecycle through ReplicaManager: a snapshot at each roll and at clean shutdown,
loaded on start with only the log after it re-read; corrupt snapshots fall back; KIP-360 expiration
on a now_ms timer that retention and DeleteRecords do not touch."""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Collection

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.broker.replica_manager import Partition, ReplicaManager
from pykraft.core.errors import ErrorCode
from pykraft.log.partition_log import LogConfig, PartitionLog
from pykraft.log.producer_snapshot import (
    SNAPSHOT_ENTRY_BYTES,
    CorruptSnapshotError,
    decode_producer_snapshot,
    encode_producer_snapshot,
    list_snapshot_offsets,
    snapshot_file_name,
    snapshot_offset,
)
from pykraft.log.producer_state import ProducerStateManager, SnapshotEntry
from pykraft.log.store import MemorySegmentStore
from pykraft.protocol.records import INT32_MAX, Record, build_batch

ENTRIES = [
    SnapshotEntry(1000, 0, 4, 9, 4, 1_700_000_000_000, -1, -1),
    SnapshotEntry(1001, 3, -1, -1, 0, 55, 7, 12),  # marker only: no batch, open transaction
    SnapshotEntry(2**62, 32767, INT32_MAX, 2**40, 0, -1, 2**31 - 1, 2**40),
]


# --- codec -------------------------------------------------------------------------------------------


def test_file_name__twenty_digits() -> None:
    assert snapshot_file_name(2) == "00000000000000000002.snapshot"
    assert snapshot_offset("00000000000000000002.snapshot") == 2
    assert snapshot_offset("00000000000000000002.snapshot.deleted") is None
    assert snapshot_offset("2.snapshot") is None
    assert snapshot_offset("00000000000000000002.log") is None


def test_encode__kafka_layout() -> None:
    data = encode_producer_snapshot(ENTRIES[:1])
    assert len(data) == 2 + 4 + 4 + 46
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 1)
    assert crc == crc32c(data[6:])
    assert struct.unpack_from(">qhiqiqiq", data, 10) == tuple(ENTRIES[0])
    assert SNAPSHOT_ENTRY_BYTES == 46


def test_decode__whole() -> None:
    assert decode_producer_snapshot(encode_producer_snapshot(ENTRIES)) == ENTRIES
    assert decode_producer_snapshot(encode_producer_snapshot([])) == []


def test_decode__every_truncation_is_corrupt() -> None:
    data = encode_producer_snapshot(ENTRIES)
    for size in range(len(data)):
        with pytest.raises(CorruptSnapshotError):
            decode_producer_snapshot(data[:size])


def test_decode__one_byte_at_a_time_flipped_is_corrupt() -> None:
    data = encode_producer_snapshot(ENTRIES)
    for position in range(len(data)):
        broken = bytearray(data)
        broken[position] ^= 0x01
        with pytest.raises(CorruptSnapshotError):
            decode_producer_snapshot(broken)


def test_decode__trailing_bytes_are_corrupt() -> None:
    data = encode_producer_snapshot(ENTRIES)
    body = data[6:] + b"\x00"
    with_trailing = struct.pack(">hI", 1, crc32c(body)) + body  # even with a CRC that covers them
    with pytest.raises(CorruptSnapshotError, match="should be"):
        decode_producer_snapshot(with_trailing)


def test_decode__bad_version_and_negative_count() -> None:
    data = bytearray(encode_producer_snapshot([]))
    data[1] = 2
    with pytest.raises(CorruptSnapshotError, match="version 2"):
        decode_producer_snapshot(data)
    body = struct.pack(">i", -1)
    with pytest.raises(CorruptSnapshotError, match="negative"):
        decode_producer_snapshot(struct.pack(">hI", 1, crc32c(body)) + body)


_entry = st.builds(
    SnapshotEntry,
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**15 - 1),
    st.integers(-1, INT32_MAX),
    st.integers(-1, 2**63 - 1),
    st.integers(0, INT32_MAX),
    st.integers(-1, 2**63 - 1),
    st.integers(-1, INT32_MAX),
    st.integers(-1, 2**63 - 1),
)


@given(st.lists(_entry, max_size=20))
def test_codec_round_trip__hypothesis(entries: list[SnapshotEntry]) -> None:
    assert decode_producer_snapshot(encode_producer_snapshot(entries)) == entries


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_decode__fuzz_decodes_or_raises_corrupt(data: bytes) -> None:
    try:
        decode_producer_snapshot(data)
    except CorruptSnapshotError:
        pass


def test_manager_round_trip__last_batch_and_rare_fields_survive() -> None:
    manager = ProducerStateManager(retained_batches=5)
    manager.load_snapshot(ENTRIES, 100, now_ms=0)
    assert list(manager.snapshot_entries()) == ENTRIES
    marker_only = manager.entry(1001)
    assert marker_only is not None
    assert marker_only.is_empty and marker_only.last_timestamp_ms == 55
    assert (marker_only.coordinator_epoch, marker_only.current_txn_first_offset) == (7, 12)
    assert manager.map_end_offset == 100


# --- the partition lifecycle -------------------------------------------------------------------------

PID = 5000


class MemoryOpener:
    """LogOpener over MemorySegmentStores that outlive the log, so a test can 'restart'. Its log dirs
    are names only: a partition stays in the dir it was first put in, a new one goes to the online
    dir with the fewest (as the shell's FileLogOpener places them)."""

    def __init__(self, log_dirs: tuple[str, ...] = ("/data/a",)) -> None:
        self.log_dirs = log_dirs
        self.stores: dict[tuple[str, int], MemorySegmentStore] = {}
        self.dir_of: dict[tuple[str, int], str] = {}

    def new_store(self, log_dir: str) -> MemorySegmentStore:
        """The store of a partition first opened in ``log_dir`` (a subclass may fake a disk)."""
        return MemorySegmentStore()

    def log_dir_for(self, topic: str, partition: int, offline_log_dirs: Collection[str]) -> str | None:
        found = self.dir_of.get((topic, partition))
        if found is not None:
            return found
        online = [d for d in self.log_dirs if d not in offline_log_dirs]
        counts = Counter(self.dir_of.values())
        return min(online, key=lambda d: (counts[d], online.index(d)), default=None)

    def open_log(
        self,
        log_dir: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        high_watermark_tracks_log_end: bool = True,
    ) -> PartitionLog:
        store = self.stores.get((topic, partition))
        if store is None:
            store = self.stores[(topic, partition)] = self.new_store(log_dir)
        self.dir_of[(topic, partition)] = log_dir
        return PartitionLog.open(store, config, high_watermark_tracks_log_end=high_watermark_tracks_log_end)

    def delete_log(self, topic: str, partition: int) -> None:
        self.stores.pop((topic, partition), None)
        self.dir_of.pop((topic, partition), None)

    def clean_log_bounds(self, topic: str, partition: int) -> tuple[int, int] | None:
        return None  # these stores keep no clean-shutdown checkpoints: every log opens at once


def replicas(opener: MemoryOpener, **kwargs: int) -> ReplicaManager:
    # Tiny segments: every batch of 3 records (~80 bytes) rolls after two of them.
    config = LogConfig(segment_bytes=200, retention_ms=-1, retention_bytes=-1)
    defaults = {"producer_id_expiration_ms": 10_000}
    return ReplicaManager(opener, config, **{**defaults, **kwargs})  # type: ignore[arg-type]


def batch(seq: int, epoch: int = 0, pid: int = PID, n: int = 3) -> memoryview:
    recs = [Record(None, b"v%d" % i) for i in range(n)]
    return memoryview(
        build_batch(recs, timestamp_ms=1_000, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    )


def produce(
    rm: ReplicaManager, part: Partition, seq: int, now_ms: int = 0, **kw: int
) -> tuple[ErrorCode, int]:
    result = rm.append(part, batch(seq, **kw), now_ms)
    return result.error_code, result.base_offset


def store_of(opener: MemoryOpener) -> MemorySegmentStore:
    return opener.stores[("t", 0)]


def test_snapshot_at_each_roll__state_before_the_rolling_append() -> None:
    opener = MemoryOpener()
    rm = replicas(opener)
    part = rm.ensure_partition("t", 0, now_ms=0)
    for i in range(6):
        assert produce(rm, part, 3 * i) == (ErrorCode.NONE, 3 * i)
    bases = [s.base_offset for s in part.log.segments]
    assert len(bases) >= 3
    assert list_snapshot_offsets(store_of(opener)) == bases[1:]
    data = store_of(opener).read_checkpoint(snapshot_file_name(bases[1]))
    assert data is not None
    (entry,) = decode_producer_snapshot(data)
    # The snapshot at offset B holds the batch that ends at B - 1.
    assert (entry.producer_id, entry.last_offset, entry.last_sequence) == (PID, bases[1] - 1, bases[1] - 1)


def test_restart__loads_the_snapshot_and_reads_only_the_log_after_it() -> None:
    opener = MemoryOpener()
    rm = replicas(opener)
    part = rm.ensure_partition("t", 0, now_ms=0)
    for i in range(6):
        produce(rm, part, 3 * i)
    rm.close_all()  # clean shutdown: a snapshot at the log end
    store = store_of(opener)
    assert list_snapshot_offsets(store)[-1] == 18
    reads_before = store.read_calls
    rm2 = replicas(opener)
    part2 = rm2.ensure_partition("t", 0, now_ms=50)
    # Log recovery reads headers; producer state reads no batch from before the snapshot.
    log_recovery_reads = store.read_calls - reads_before
    assert rm2.warnings == []
    assert produce(rm2, part2, 15, now_ms=60) == (ErrorCode.NONE, 15)  # exact retry: original offset
    assert produce(rm2, part2, 9, now_ms=60) == (ErrorCode.DUPLICATE_SEQUENCE_NUMBER, -1)
    assert produce(rm2, part2, 19, now_ms=60)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(rm2, part2, 18, now_ms=60) == (ErrorCode.NONE, 18)
    # The same start without snapshots reads the whole log again for producer state.
    for offset in list_snapshot_offsets(store):
        store.delete_checkpoint(snapshot_file_name(offset))
    rm2.close_all()
    for offset in list_snapshot_offsets(store):
        store.delete_checkpoint(snapshot_file_name(offset))
    reads_before = store.read_calls
    replicas(opener).ensure_partition("t", 0, now_ms=70)
    assert store.read_calls - reads_before > log_recovery_reads


def test_restart_after_crash__roll_snapshot_plus_log_tail() -> None:
    opener = MemoryOpener()
    rm = replicas(opener)
    part = rm.ensure_partition("t", 0, now_ms=0)
    for i in range(5):
        produce(rm, part, 3 * i)
    part.log.flush()
    # No close_all: a kill -9. The newest snapshot is the last roll's; the tail after it is replayed.
    rm2 = replicas(opener)
    part2 = rm2.ensure_partition("t", 0, now_ms=0)
    assert list_snapshot_offsets(store_of(opener))[-1] < 15
    entry = part2.producer_state.entry(PID)
    assert entry is not None and entry.last_seq == 14
    assert produce(rm2, part2, 12) == (ErrorCode.NONE, 12)


def test_corrupt_newest_snapshot__falls_back_to_the_previous_one() -> None:
    opener = MemoryOpener()
    rm = replicas(opener)
    part = rm.ensure_partition("t", 0, now_ms=0)
    for i in range(6):
        produce(rm, part, 3 * i)
    rm.close_all()
    store = store_of(opener)
    offsets = list_snapshot_offsets(store)
    newest = snapshot_file_name(offsets[-1])
    data = bytearray(store.read_checkpoint(newest) or b"")
    data[-3] ^= 0x40
    store.write_checkpoint(newest, bytes(data))
    rm2 = replicas(opener)
    part2 = rm2.ensure_partition("t", 0, now_ms=0)
    assert len(rm2.warnings) == 1 and newest in rm2.warnings[0] and "CRC" in rm2.warnings[0]
    assert list_snapshot_offsets(store) == offsets[:-1]  # the corrupt one is gone
    assert produce(rm2, part2, 15) == (ErrorCode.NONE, 15)
    assert produce(rm2, part2, 18) == (ErrorCode.NONE, 18)


def test_every_snapshot_corrupt__rebuild_from_the_log() -> None:
    opener = MemoryOpener()
    rm = replicas(opener)
    part = rm.ensure_partition("t", 0, now_ms=0)
    for i in range(6):
        produce(rm, part, 3 * i)
    rm.close_all()
    store = store_of(opener)
    for offset in list_snapshot_offsets(store):
        store.write_checkpoint(snapshot_file_name(offset), b"\x00\x01garbage")
    rm2 = replicas(opener)
    part2 = rm2.ensure_partition("t", 0, now_ms=0)
    assert list_snapshot_offsets(store) == []
    assert produce(rm2, part2, 15) == (ErrorCode.NONE, 15)


def test_snapshot_beyond_the_log_end_is_deleted() -> None:
    opener = MemoryOpener()
    rm = replicas(opener)
    part = rm.ensure_partition("t", 0, now_ms=0)
    produce(rm, part, 0)
    rm.close_all()
    store = store_of(opener)
    store.write_checkpoint(snapshot_file_name(999), encode_producer_snapshot([]))
    rm2 = replicas(opener)
    part2 = rm2.ensure_partition("t", 0, now_ms=0)
    assert any("beyond the log end" in w for w in rm2.warnings)
    assert produce(rm2, part2, 0) == (ErrorCode.NONE, 0)


def test_delete_records_to_high_watermark__state_outlives_the_log_and_a_restart() -> None:
    opener = MemoryOpener()
    rm = replicas(opener)
    part = rm.ensure_partition("t", 0, now_ms=0)
    for i in range(4):
        produce(rm, part, 3 * i)
    part.log.delete_records_before(part.log.high_watermark)
    rm.apply_retention(now_ms=1)
    assert part.log.log_start_offset == 12
    # KIP-360: the producer is still known: in order accepted, a gap rejected.
    assert produce(rm, part, 13)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(rm, part, 12) == (ErrorCode.NONE, 12)
    rm.close_all()
    rm2 = replicas(opener)
    part2 = rm2.ensure_partition("t", 0, now_ms=0)
    part2.log.delete_records_before(part2.log.high_watermark)
    assert produce(rm2, part2, 16)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(rm2, part2, 15) == (ErrorCode.NONE, 15)


def test_expiration_timer__moves_with_now_ms_and_honours_the_interval() -> None:
    opener = MemoryOpener()
    rm = replicas(opener, producer_id_expiration_check_interval_ms=1_000)
    part = rm.ensure_partition("t", 0, now_ms=0)
    assert produce(rm, part, 0, now_ms=0)[0] == ErrorCode.NONE
    assert rm.expire_producers(now_ms=9_500) == 0  # first check; nothing due before 10_000
    assert rm.expire_producers(now_ms=10_200) == 0  # due, but the check interval has not passed
    assert part.producer_state.entry(PID) is not None
    assert rm.expire_producers(now_ms=10_500) == 1
    assert part.producer_state.entry(PID) is None
    # Expired: any sequence is accepted (KIP-360 "unknown producer").
    assert produce(rm, part, 1234, now_ms=10_501) == (ErrorCode.NONE, 3)


def test_classic_mode__older_retry_gets_its_original_offset() -> None:
    opener = MemoryOpener()
    rm = replicas(opener, retained_batches=5)
    part = rm.ensure_partition("t", 0, now_ms=0)
    for i in range(6):
        produce(rm, part, 3 * i)
    assert produce(rm, part, 6) == (ErrorCode.NONE, 6)
    assert produce(rm, part, 0)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # older than 5 batches


def test_config__producer_state_properties() -> None:
    from pykraft.core.config import DEFAULT_PROPERTIES, ConfigError, load_config

    config = load_config(DEFAULT_PROPERTIES)
    assert (
        config.producer_state_retained_batches,
        config.max_in_flight_sequence_number_per_connection,
        config.producer_id_expiration_check_interval_ms,
    ) == (1, 10_000_000, 600_000)
    config = load_config(
        DEFAULT_PROPERTIES,
        {"producer.state.retained.batches": "5", "max.in.flight.sequence.number.per.connection": "1000"},
    )
    assert (config.producer_state_retained_batches, config.max_in_flight_sequence_number_per_connection) == (
        5,
        1000,
    )
    for key, value in [
        ("producer.state.retained.batches", "0"),
        ("producer.state.retained.batches", "128"),
        ("max.in.flight.sequence.number.per.connection", "ten"),
        ("max.in.flight.sequence.number.per.connection", str((1 << 30) + 1)),
        ("producer.id.expiration.check.interval.ms", "0"),
    ]:
        with pytest.raises(ConfigError, match=key):
            load_config(DEFAULT_PROPERTIES, {key: value})
