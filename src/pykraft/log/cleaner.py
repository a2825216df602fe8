"""Log compaction (``cleanup.policy=compact``): Kafka's LogCleaner, one partition at a time. Pure.

A pass over one log, as Kafka's ``Cleaner.doClean`` does it:

1. **What may be cleaned.** Segments wholly below the *first uncleanable offset*: the active segment's
   base, the high watermark, the last stable offset (an open transaction is never compacted), the
   recovery point (only flushed segments are rewritten) and, with ``min.compaction.lag.ms``, the first
   segment holding a record younger than that. The *dirty* section starts at the cleaner checkpoint;
   a log is cleaned when dirty bytes / (clean + dirty bytes) reach ``min.cleanable.dirty.ratio``.
2. **The offset map.** The dirty section's keys, each with the offset of its latest record. Records of
   aborted transactions and control batches stay out of it. The map holds at most
   ``log.cleaner.dedupe.buffer.size / OFFSET_MAP_ENTRY_BYTES`` keys; when it fills, the pass ends at the
   last segment it covered whole (the next pass goes on from there).
3. **Rewriting.** From the first segment to the end of the mapped section, consecutive segments are
   grouped (at most ``segment.bytes`` together) and each group is rewritten into one cleaned segment,
   keeping a record when no later record of its key is in the map. Kept batches keep their base
   offset, last offset delta, producer id, epoch, sequences and timestamps (``rewrite_batch``), so
   consumers see gaps in offsets, never renumbering. A batch that loses every record goes, unless it
   is its producer's last one (then its empty header stays, so the producer's sequence survives).
4. **Tombstones and markers** (KIP-534): the first pass that keeps a tombstone or a transaction marker
   stamps its batch with a delete horizon (``now + delete.retention.ms``, in the base timestamp with
   the delete-horizon attribute); a later pass past the horizon drops them. Records of aborted
   transactions are dropped at once; keyless records (written before the topic was compacted) too.

The pass is a generator: it yields after every batch, so the shell can hand the event loop back as often
as it likes. If the log changes under it (retention, truncation, another swap) it gives up; swapping a
cleaned segment in is one synchronous, crash-safe step of the log (``PartitionLog.replace_with_cleaned``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from typing import NamedTuple

from pykraft.log.partition_log import PartitionLog, SegmentInfo
from pykraft.log.txn_index import AbortedTxn
from pykraft.protocol.records import (
    DELETE_HORIZON_MASK,
    INT32_MAX,
    BatchHeader,
    Record,
    decode_records,
    read_batch_header,
    rewrite_batch,
)

# What one key of the offset map costs in this process (a 16-byte key object, an int, a dict slot; 133
# bytes measured with tracemalloc, 149 at the dict's resize peak). Kafka's SkimpyOffsetMap needs 24.
OFFSET_MAP_ENTRY_BYTES = 150
# Keys shorter than a digest are their own map key (exact); longer ones map by a 16-byte BLAKE2b digest,
# as Kafka maps every key by its MD5 (a collision would need 2**64 keys).
_DIGEST_BYTES = 16


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    dedupe_buffer_bytes: int = 134217728  # log.cleaner.dedupe.buffer.size
    io_buffer_bytes: int = 524288  # log.cleaner.io.buffer.size: bytes read from a segment at a time

    @property
    def offset_map_capacity(self) -> int:
        return max(1, self.dedupe_buffer_bytes // OFFSET_MAP_ENTRY_BYTES)


class Cleanable(NamedTuple):
    """Where a log's dirty section starts and ends, and how dirty it is."""

    first_dirty_index: int  # segments[first_dirty_index:first_uncleanable_index] are dirty
    first_uncleanable_index: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanerStats:
    """What passes did (one object can add up many)."""

    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    map_full_passes: int = 0
    aborted_passes: int = 0
    # The earliest delete horizon a kept tombstone or marker waits for (None: nothing waits).
    next_delete_horizon_ms: int | None = None

    def add(self, other: CleanerStats) -> None:
        """Add up another's counters (not its horizon)."""
        self.passes += other.passes
        self.bytes_read += other.bytes_read
        self.bytes_written += other.bytes_written
        self.records_read += other.records_read
        self.records_removed += other.records_removed
        self.map_full_passes += other.map_full_passes
        self.aborted_passes += other.aborted_passes

    def wait_for_horizon(self, horizon_ms: int) -> None:
        if self.next_delete_horizon_ms is None or horizon_ms < self.next_delete_horizon_ms:
            self.next_delete_horizon_ms = horizon_ms


def map_key(key: bytes) -> bytes:
    return key if len(key) < _DIGEST_BYTES else blake2b(key, digest_size=_DIGEST_BYTES).digest()


def cleanable(log: PartitionLog, now_ms: int, first_unstable_offset: int | None) -> Cleanable:
    """Step 1 of the module docstring."""
    segments = log.segments
    uncleanable = min(log.active_segment_base_offset, log.high_watermark, log.recovery_point)
    if first_unstable_offset is not None:
        uncleanable = min(uncleanable, first_unstable_offset)
    lag_ms = log.config.min_compaction_lag_ms
    first_dirty = log.cleaner_offset
    # A segment is cleanable when the next one starts at or below the uncleanable offset.
    end = 0
    while end + 1 < len(segments) and segments[end + 1].base_offset <= uncleanable:
        if lag_ms > 0 and segments[end].max_timestamp > now_ms - lag_ms:
            break
        end += 1
    start = 0
    while start < end and segments[start + 1].base_offset <= first_dirty:
        start += 1
    clean_bytes = sum(segment.size_bytes for segment in segments[:start])
    dirty_bytes = sum(segment.size_bytes for segment in segments[start:end])
    return Cleanable(start, end, clean_bytes, dirty_bytes)


class _Aborted:
    """Is a transactional batch part of an aborted transaction (the aborted-transaction index)?"""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._by_producer: dict[int, list[tuple[int, int]]] = {}
        for entry in aborted:
            self._by_producer.setdefault(entry.producer_id, []).append(
                (entry.first_offset, entry.last_offset)
            )

    def __contains__(self, header: BatchHeader) -> bool:
        ranges = self._by_producer.get(header.producer_id)
        return ranges is not None and any(first <= header.base_offset <= last for first, last in ranges)


def _group(segments: Sequence[SegmentInfo], max_bytes: int) -> list[list[SegmentInfo]]:
    """Consecutive segments whose bytes together fit one segment and whose offsets fit its index
    (Kafka's groupSegmentsBySize)."""
    groups: list[list[SegmentInfo]] = []
    for segment in segments:
        current = groups[-1] if groups else None
        if (
            current is not None
            and sum(s.size_bytes for s in current) + segment.size_bytes <= max_bytes
            and segment.next_offset - 1 - current[0].base_offset <= INT32_MAX
        ):
            current.append(segment)
        else:
            groups.append([segment])
    return groups


def clean(
    log: PartitionLog,
    now_ms: int,
    *,
    config: CleanerConfig,
    first_unstable_offset: int | None,
    aborted: Sequence[AbortedTxn],
    producer_last_offsets: Mapping[int, int],
    stats: CleanerStats,
    expire_deletes: bool = False,
) -> Iterator[None]:
    """One cleaning pass over ``log`` (the module docstring); ``producer_last_offsets`` maps each
    producer with state here to the last offset of its last batch. With ``expire_deletes`` the clean
    section is rewritten even with nothing dirty (a delete horizon has passed). Yields after every
    batch."""
    generation = log.generation
    span = cleanable(log, now_ms, first_unstable_offset)
    segments = log.segments
    if span.first_dirty_index >= span.first_uncleanable_index and not (
        expire_deletes and span.first_dirty_index > 0
    ):
        return
    stats.passes += 1
    aborted_txns = _Aborted(aborted)
    chunk_bytes = config.io_buffer_bytes

    # 2. The offset map of the dirty section.
    offset_map: dict[bytes, int] = {}
    capacity = config.offset_map_capacity
    mapped_end = span.first_dirty_index
    for index in range(span.first_dirty_index, span.first_uncleanable_index):
        full = False
        for header, data in log.segment_batches(segments[index].base_offset, chunk_bytes):
            yield
            if log.generation != generation:
                stats.aborted_passes += 1
                return
            if header.is_control or (header.is_transactional and header in aborted_txns):
                continue
            for record in _records(header, data):
                if record.key is None:
                    continue
                key = map_key(record.key)
                if len(offset_map) >= capacity and key not in offset_map:
                    full = True
                    continue  # keys already mapped still move to their latest offset
                offset_map[key] = record.offset
        if full:
            stats.map_full_passes += 1
            if index == span.first_dirty_index:
                mapped_end = index + 1  # a partial map still cleans; the rest waits for the next pass
            break
        mapped_end = index + 1

    # 3. Rewrite every segment up to the end of the mapped section, group by group.
    delete_retention_ms = log.config.delete_retention_ms
    for group in _group(segments[:mapped_end], log.config.segment_bytes):
        cleaned = log.begin_cleaned(group[0].base_offset)
        for segment in group:
            for header, data in log.segment_batches(segment.base_offset, chunk_bytes):
                yield
                if log.generation != generation:
                    log.abort_cleaned(cleaned)
                    stats.aborted_passes += 1
                    return
                stats.bytes_read += header.size_in_bytes
                kept = _clean_batch(
                    header,
                    data,
                    offset_map,
                    aborted_txns,
                    producer_last_offsets,
                    now_ms,
                    delete_retention_ms,
                    stats,
                )
                if kept is not None:
                    kept_header, kept_data = kept
                    log.append_cleaned(cleaned, kept_header, kept_data)
                    stats.bytes_written += len(kept_data)
        if not log.replace_with_cleaned(cleaned, [segment.base_offset for segment in group], generation):
            stats.aborted_passes += 1
            return
        generation = log.generation
    log.set_cleaner_offset(segments[mapped_end].base_offset)


def _records(header: BatchHeader, data: memoryview) -> list[Record]:
    try:
        return decode_records(data)
    except ValueError:
        return []  # records we cannot read (an unknown codec): the batch is kept as it is


def _clean_batch(
    header: BatchHeader,
    data: memoryview,
    offset_map: Mapping[bytes, int],
    aborted_txns: _Aborted,
    producer_last_offsets: Mapping[int, int],
    now_ms: int,
    delete_retention_ms: int,
    stats: CleanerStats,
) -> tuple[BatchHeader, bytes | bytearray | memoryview] | None:
    """What of one batch stays: its bytes unchanged, a rewritten batch, or None."""
    last_of_producer = (
        header.has_producer_id and producer_last_offsets.get(header.producer_id) == header.last_offset
    )
    horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None
    if header.is_control:
        if horizon is None:
            markers = _records(header, data)
            if not markers:
                return header, data  # an unreadable marker is kept as it is
            horizon = now_ms + delete_retention_ms
            stats.wait_for_horizon(horizon)
            return _rewritten(header, markers, horizon)
        if now_ms >= horizon and not last_of_producer:
            stats.records_removed += header.record_count
            return None
        stats.wait_for_horizon(horizon)
        return header, data
    records = _records(header, data)
    stats.records_read += header.record_count
    if not records and header.record_count:
        return header, data  # undecodable: kept whole
    if header.is_transactional and header in aborted_txns:
        kept: list[Record] = []
    else:
        kept = []
        tombstones = False
        for record in records:
            if record.key is None:
                continue  # Kafka refuses keyless records on compacted topics; older ones go here
            latest = offset_map.get(map_key(record.key))
            if latest is not None and record.offset < latest:
                continue
            if record.value is None:
                if horizon is not None and now_ms >= horizon:
                    continue
                tombstones = True
            kept.append(record)
        if tombstones:
            if horizon is None:
                horizon = now_ms + delete_retention_ms
            stats.wait_for_horizon(horizon)
    stats.records_removed += len(records) - len(kept)
    if len(kept) == len(records) and (horizon is None or header.attributes & DELETE_HORIZON_MASK):
        return header, data
    if not kept and not last_of_producer:
        return None
    return _rewritten(header, kept, horizon)


def _rewritten(
    header: BatchHeader, records: list[Record], horizon_ms: int | None
) -> tuple[BatchHeader, bytearray]:
    data = rewrite_batch(header, records, delete_horizon_ms=horizon_ms)
    return read_batch_header(data), data
