"""The partition log: RecordBatch v2 segments over an injected ``SegmentStore``.

Kafka's on-disk layout (UnifiedLog/LocalLog/LogSegment), batch headers only on the hot path:

- A segment holds batches back to back exactly as produced, with ``baseOffset`` rewritten. A new
  segment starts (``roll``) when the active one would pass ``segment_bytes``, when a relative offset
  would not fit an int32, or when its index is full. An empty segment always takes the append.
- The sparse offset index has one 8-byte entry (int32 offset relative to the segment base, int32
  file position) after every ``index_interval_bytes`` appended; the entry's offset is the LAST offset
  of the batch at that position, as Kafka writes it (kafka-dump-log checks this). A lookup finds the
  last entry with offset <= target and scans headers forward. At the same moment the time index gets
  a 12-byte entry (int64 largest timestamp so far, int32 relative offset of the batch that has it)
  when that timestamp grew, and one more when the segment stops being active (a roll, a clean close,
  recovery): Kafka's LogSegment.append / onBecomeInactiveSegment / recover. Both indexes are kept
  whole in memory (``pykraft.log.segment_index``) and written to their files at a roll or a flush.
- Offsets increase. A leader assigns them contiguously; a follower keeps the leader's, which have
  gaps once the leader's cleaner ran (log compaction keeps a batch's offsets, not its dropped
  records). Each segment starts where its predecessor ended, except below the recovery point: a
  cleaned segment (only flushed segments are cleaned) may end short of its successor's base. Above
  it a hole means a crash lost an unflushed segment, and recovery drops what follows; an overlap
  is corruption anywhere.
- Compaction (``pykraft.log.cleaner`` decides what to keep) writes a group of segments' surviving
  batches into ``<base>.log.cleaned``, seals it as ``.swap``, deletes the segments it replaces and
  renames the swap into place; a ``cleaner-swap`` checkpoint names the replaced segments first, so
  recovery finishes a sealed swap and deletes an unsealed ``.cleaned`` (Kafka's LogLoader does both).
- Recovery (``open``) reads headers, jumping batch to batch. Segments below the persisted recovery
  point were flushed whole and are only checked for structure; segments at or above it are also
  CRC-checked. The first torn or corrupt batch ends the log: its segment is truncated there and later
  segments are deleted (Kafka's LogLoader does the same). Both indexes are rebuilt from the headers and
  rewritten when they differ from what is stored.
- The log start offset (moved by DeleteRecords and retention) and the recovery point are small
  checkpoints, written atomically.

Expected failures (a fetch outside the log, DeleteRecords past the high watermark) raise
``KafkaError(OFFSET_OUT_OF_RANGE)``; storage failures surface as ``OSError`` from the store.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from crc32c import crc32c

from pykraft.core.errors import ErrorCode, KafkaError
from pykraft.log.segment_index import OffsetIndex, SparseIndex, TimeIndex
from pykraft.log.store import SWAP, BytesLike, SegmentStore
from pykraft.protocol import compression
from pykraft.protocol.records import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CURRENT_MAGIC,
    INT32_MAX,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    BatchHeader,
    decode_records,
    read_batch_header,
    scan_batches,
    set_base_offset,
    set_partition_leader_epoch,
)

LOG_START_OFFSET_CHECKPOINT = "log-start-offset"
# Base offset of the oldest segment that may hold unflushed bytes: everything below it was fsynced.
RECOVERY_POINT_CHECKPOINT = "recovery-point"
# The first offset the cleaner has not cleaned (Kafka keeps one cleaner-offset-checkpoint per log dir).
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
# A swap in progress: the cleaned segment's base and the bases of the segments it replaces.
CLEANER_SWAP_CHECKPOINT = "cleaner-swap"
INDEX_ENTRY_BYTES = OffsetIndex.ENTRY_BYTES
_CHECKPOINT_VERSION = 0
# Recovery reads headers through a window, so small batches cost one store read per window rather
# than one per batch; batches larger than the window are skipped by reading the next header only.
SCAN_WINDOW_BYTES = 64 * 1024
NO_OFFSET = -1


@dataclass(frozen=True)
class LogConfig:
    """Kafka's topic configs that shape a partition log (names without dots, units in the name)."""

    segment_bytes: int = 1073741824  # segment.bytes
    index_interval_bytes: int = 4096  # index.interval.bytes
    segment_index_bytes: int = 10485760  # segment.index.bytes: a full index rolls the segment
    retention_ms: int = 604800000  # retention.ms; -1 = unlimited
    retention_bytes: int = -1  # retention.bytes; -1 = unlimited
    segment_ms: int = 604800000  # segment.ms: roll once a segment spans this much time
    # Checked by the leader before it appends (ReplicaManager.append), not by the log itself.
    max_message_bytes: int = 1048588  # max.message.bytes (message.max.bytes on the broker)
    message_timestamp_log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    message_timestamp_before_max_ms: int = 2**63 - 1  # message.timestamp.before.max.ms (KIP-937)
    message_timestamp_after_max_ms: int = 3_600_000  # message.timestamp.after.max.ms (KIP-937; KIP-1030)
    # cleanup.policy: "delete" (retention), "compact" (the cleaner), or both.
    cleanup_policy_delete: bool = True
    cleanup_policy_compact: bool = False
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    delete_retention_ms: int = 86400000  # delete.retention.ms: how long tombstones and markers stay
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms: records younger than this stay uncompacted
    # Checked by the leader before it appends: compression.type as the codec every batch is stored in
    # (None for "producer": each batch's own), and the KIP-390 levels a recompressed batch gets.
    compression_type: int | None = None
    compression_gzip_level: int = compression.GZIP_DEFAULT_LEVEL  # compression.gzip.level
    compression_lz4_level: int = compression.LZ4_DEFAULT_LEVEL  # compression.lz4.level
    compression_zstd_level: int = compression.ZSTD_DEFAULT_LEVEL  # compression.zstd.level

    def __post_init__(self) -> None:
        assert self.segment_bytes >= BATCH_HEADER_SIZE, self.segment_bytes
        assert self.index_interval_bytes >= 0, self.index_interval_bytes
        assert self.segment_index_bytes >= INDEX_ENTRY_BYTES, self.segment_index_bytes
        assert self.retention_ms >= -1, self.retention_ms
        assert self.retention_bytes >= -1, self.retention_bytes
        assert self.segment_ms >= 1, self.segment_ms
        assert 0.0 <= self.min_cleanable_dirty_ratio <= 1.0, self.min_cleanable_dirty_ratio
        assert self.delete_retention_ms >= 0 and self.min_compaction_lag_ms >= 0

    @property
    def compression_level(self) -> int | None:
        """The level of ``compression_type``'s codec (None for snappy and uncompressed)."""
        return {
            compression.GZIP: self.compression_gzip_level,
            compression.LZ4: self.compression_lz4_level,
            compression.ZSTD: self.compression_zstd_level,
        }.get(self.compression_type or compression.NONE)


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    # The last offset of the batch holding max_timestamp (Kafka's shallow offset of max timestamp).
    offset_of_max_timestamp: int


class ReadResult(NamedTuple):
    """Whole batches, as stored. ``chunks`` are read-only views the caller owns (one per segment
    touched); write them to a socket as they are, or ``b"".join`` them."""

    chunks: list[memoryview]
    first_offset: int  # base offset of the first batch returned (may be < fetch_offset); -1 if none
    next_offset: int  # offset after the last batch returned; fetch_offset if none
    size_bytes: int


class SegmentInfo(NamedTuple):
    base_offset: int
    size_bytes: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    index_entries: int


# What a segment opened after a clean shutdown learns only when first used: everything its batch headers
# say beyond its size and offsets (issue 29: a clean restart reads no segment data).
_LAZY_FIELDS = frozenset(
    {
        "bytes_since_index_entry",
        "max_timestamp",
        "offset_index",
        "offset_of_max_timestamp",
        "rolling_timestamp",
        "time_index",
    }
)


class _Segment:
    """In-memory state of one segment, rebuilt from batch headers on open -- or, after a clean
    shutdown, on first use: an ``unloaded`` segment knows its size and offsets, and the first read of
    any other field scans its headers (``loader``)."""

    __slots__ = (
        "base_offset",
        "bytes_since_index_entry",
        "loader",
        "max_timestamp",
        "next_offset",
        "offset_index",
        "offset_of_max_timestamp",
        "rolling_timestamp",
        "size_bytes",
        "time_index",
    )

    def __init__(self, base_offset: int) -> None:
        self.base_offset = base_offset
        self.loader: Callable[[_Segment], None] | None = None
        self.size_bytes = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = NO_OFFSET
        # The first batch's max timestamp: segment.ms counts from it (LogSegment.rollingBasedTimestamp).
        self.rolling_timestamp = NO_TIMESTAMP
        self.offset_index = OffsetIndex()
        self.time_index = TimeIndex()
        self.bytes_since_index_entry = 0

    @classmethod
    def unloaded(
        cls, base_offset: int, size_bytes: int, next_offset: int, loader: Callable[[_Segment], None]
    ) -> _Segment:
        segment = cls.__new__(cls)
        segment.base_offset = base_offset
        segment.size_bytes = size_bytes
        segment.next_offset = next_offset
        segment.loader = loader
        return segment

    def __getattr__(self, name: str) -> object:
        # Only reached for a slot never set: a lazy field of an unloaded segment.
        loader = self.loader
        if name not in _LAZY_FIELDS or loader is None:
            raise AttributeError(name)
        self.loader = None
        loader(self)
        return object.__getattribute__(self, name)

    def load_from(self, rebuilt: _Segment) -> None:
        """Take the lazy fields (and the true next offset) from the same segment rebuilt from headers."""
        for name in _LAZY_FIELDS:
            setattr(self, name, getattr(rebuilt, name))
        self.next_offset = rebuilt.next_offset

    @property
    def indexes(self) -> tuple[SparseIndex, SparseIndex]:
        return self.offset_index, self.time_index

    def track(self, last_offset: int, size_bytes: int, max_timestamp: int, interval_bytes: int) -> None:
        """Account for one batch appended at the end (LogSegment.append's index rule: the largest
        timestamp moves first, then both indexes get their entry)."""
        if self.size_bytes == 0:
            self.rolling_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_index_entry > interval_bytes:
            self.offset_index.append(last_offset, self.size_bytes)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_index_entry = 0
        self.bytes_since_index_entry += size_bytes
        self.size_bytes += size_bytes
        self.next_offset = last_offset + 1

    def seal_time_index(self) -> None:
        """The segment stops being active (rolled, closed, recovered): its largest timestamp gets a time
        index entry (LogSegment.onBecomeInactiveSegment / close / recover)."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    def info(self) -> SegmentInfo:
        return SegmentInfo(
            self.base_offset,
            self.size_bytes,
            self.next_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            len(self.offset_index),
        )


@dataclass(slots=True)
class CleanedSegment:
    """A cleaned segment being written (``PartitionLog.begin_cleaned``)."""

    segment: _Segment

    @property
    def size_bytes(self) -> int:
        return self.segment.size_bytes


def _scan_headers(
    store: SegmentStore, base_offset: int, start: int, end: int, *, check_crc: bool, window_bytes: int
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each sane batch in ``[start, end)`` of a segment; stop at the
    first one that is torn, structurally impossible, or (with ``check_crc``) fails its CRC-32C.
    The same checks as ``protocol.records.scan_batches``, without holding the segment in memory."""
    buf = b""
    buf_start = start
    pos = start
    read_bytes = window_bytes
    while end - pos >= BATCH_HEADER_SIZE:
        rel = pos - buf_start
        if rel + BATCH_HEADER_SIZE > len(buf):
            buf = store.read(base_offset, pos, min(max(read_bytes, BATCH_HEADER_SIZE), end - pos))
            buf_start, rel = pos, 0
            if len(buf) < BATCH_HEADER_SIZE:
                return
        header = read_batch_header(buf, rel)
        size = header.size_in_bytes
        if (
            header.magic != CURRENT_MAGIC
            or header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD
            or header.last_offset_delta < 0
            or pos + size > end
        ):
            return
        if check_crc:
            if rel + size > len(buf):
                buf = store.read(base_offset, pos, max(size, min(window_bytes, end - pos)))
                buf_start, rel = pos, 0
                if len(buf) < size:
                    return
            if crc32c(memoryview(buf)[rel + ATTRIBUTES_OFFSET : rel + size]) != header.crc:
                return
        # Batches that are large next to the window: a window would mostly hold bytes we skip, so
        # read the next header alone (61 bytes, one read a batch).
        read_bytes = BATCH_HEADER_SIZE if size * 4 >= window_bytes else window_bytes
        yield pos, header
        pos += size


def _encode_offset_checkpoint(offset: int) -> bytes:
    return f"{_CHECKPOINT_VERSION}\n{offset}\n".encode("ascii")


def _encode_swap_plan(base_offset: int, replaced: list[int]) -> bytes:
    return f"{_CHECKPOINT_VERSION}\n{base_offset}\n{' '.join(map(str, replaced))}\n".encode("ascii")


def _read_swap_plan(store: SegmentStore) -> tuple[int, list[int]] | None:
    data = store.read_checkpoint(CLEANER_SWAP_CHECKPOINT)
    if data is None:
        return None
    lines = data.decode("ascii", "replace").split("\n")
    try:
        assert lines[0] == str(_CHECKPOINT_VERSION)
        return int(lines[1]), [int(word) for word in lines[2].split()]
    except (AssertionError, IndexError, ValueError):
        raise ValueError(
            f"checkpoint {CLEANER_SWAP_CHECKPOINT!r} is not '0\\n<base>\\n<bases...>\\n' but {data[:60]!r}; "
            "delete it and every *.swap file to fall back to the segments as they are"
        ) from None


def _read_offset_checkpoint(store: SegmentStore, name: str) -> int | None:
    data = store.read_checkpoint(name)
    if data is None:
        return None
    lines = data.split(b"\n")
    if len(lines) < 2 or lines[0] != str(_CHECKPOINT_VERSION).encode() or not lines[1].isdigit():
        raise ValueError(
            f"checkpoint {name!r} is not '{_CHECKPOINT_VERSION}\\n<offset>\\n' but {data[:40]!r}; "
            "restore it, or delete it to fall back to what the segments say"
        )
    return int(lines[1])


class PartitionLog:
    """One partition's log. Not thread-safe: one owner calls it (the partition's event loop task)."""

    def __init__(self, store: SegmentStore, config: LogConfig, high_watermark_tracks_log_end: bool) -> None:
        self._store = store
        self._config = config
        self._segments: list[_Segment] = []
        self._log_start_offset = 0
        self._high_watermark = 0
        self._high_watermark_tracks_log_end = high_watermark_tracks_log_end
        self._size_bytes = 0
        self._recovery_point = 0
        # The first offset not cleaned yet (the cleaner's dirty section starts here).
        self._cleaner_offset = 0
        # Bumped whenever segments are deleted, cut or replaced: a cleaning pass started before gives up.
        self._generation = 0
        # Segments with bytes (or an index, or a creation) that no flush has made durable yet.
        self._unflushed: set[int] = set()
        # Segments created and never appended to: a flush leaves them alone (issue 29: a stop costs what
        # the partitions with data cost). Losing one in a crash loses no record; recovery recreates it.
        self._created_empty: set[int] = set()
        self._opened_clean = False
        self._lookup_window_bytes = min(
            SCAN_WINDOW_BYTES, 2 * config.index_interval_bytes + BATCH_HEADER_SIZE
        )

    # --- opening and recovery --------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        store: SegmentStore,
        config: LogConfig | None = None,
        *,
        high_watermark_tracks_log_end: bool = True,
        clean_log_end_offset: int | None = None,
        high_watermark: int | None = None,
    ) -> PartitionLog:
        """Recover the log in ``store``; see the module docstring. With
        ``high_watermark_tracks_log_end`` (single node) every append moves the high watermark to the
        log end; otherwise it starts at ``high_watermark`` (Kafka's replication-offset-checkpoint,
        clamped to the log) or the log start offset, and only ``set_high_watermark`` moves it.

        ``clean_log_end_offset``: the log was closed cleanly at this log end (Kafka's
        .kafka_cleanshutdown and recovery-point-offset-checkpoint). Then nothing is recovered and no
        segment data is read: each segment is known by its size and base offsets, and reads its batch
        headers only when first used (LogLoader skips recovery after a clean shutdown too)."""
        log = cls(store, config or LogConfig(), high_watermark_tracks_log_end)
        log._recover(clean_log_end_offset)
        if high_watermark is not None and not high_watermark_tracks_log_end:
            log.set_high_watermark(high_watermark)
        return log

    @property
    def opened_clean(self) -> bool:
        """Opened after a clean shutdown, without recovery (``open``'s ``clean_log_end_offset``)."""
        return self._opened_clean

    @property
    def untouched_since_clean_open(self) -> bool:
        """Opened after a clean shutdown and not written since, its active segment not even loaded:
        closing it writes and syncs nothing."""
        return self._opened_clean and not self._unflushed and self._segments[-1].loader is not None

    def _recover(self, clean_log_end_offset: int | None) -> None:
        store = self._store
        self._recover_cleaning()
        self._recovery_point = _read_offset_checkpoint(store, RECOVERY_POINT_CHECKPOINT) or 0
        self._cleaner_offset = _read_offset_checkpoint(store, CLEANER_OFFSET_CHECKPOINT) or 0
        checkpoint_start = _read_offset_checkpoint(store, LOG_START_OFFSET_CHECKPOINT)
        bases = store.list_segments()
        if clean_log_end_offset is not None and bases and bases[-1] <= clean_log_end_offset:
            self._open_segments_unloaded(bases, clean_log_end_offset)
            self._opened_clean = True
        else:
            self._load_segments(bases, checkpoint_start)
        if not self._segments:
            self._create_segment(checkpoint_start or 0)
        log_start = max(checkpoint_start or 0, self._segments[0].base_offset)
        if log_start > self.log_end_offset:
            # DeleteRecords or a snapshot moved the start past what survived: start empty there.
            self.truncate_fully_and_start_at(log_start)
            return
        self._log_start_offset = log_start
        self._size_bytes = sum(segment.size_bytes for segment in self._segments)
        self._delete_segments_below_log_start()
        self._high_watermark = self.log_end_offset if self._high_watermark_tracks_log_end else log_start
        if not self._opened_clean:  # after a clean shutdown every index was written and flushed
            for segment in self._segments:
                self._sync_indexes(segment)

    def _open_segments_unloaded(self, base_offsets: list[int], log_end_offset: int) -> None:
        """Segments as a clean shutdown left them: sizes from the store, each ending where the next
        begins (the last at the log end); headers read on first use (``_load_segment``)."""
        ends = [*base_offsets[1:], log_end_offset]
        for base_offset, next_offset in zip(base_offsets, ends, strict=True):
            size_bytes = self._store.segment_size(base_offset)
            self._segments.append(_Segment.unloaded(base_offset, size_bytes, next_offset, self._load_segment))

    def _load_segment(self, segment: _Segment) -> None:
        rebuilt = _Segment(segment.base_offset)
        self._rebuild_segment(rebuilt, segment.size_bytes, check_crc=False)
        rebuilt.seal_time_index()
        # Its indexes were flushed at the clean shutdown: every offset index entry is on disk already.
        # A time index differs from the rebuilt one only when the segment was active across an earlier
        # clean close (which added an entry); the next roll or flush writes it whole.
        rebuilt.offset_index.entries_written = len(rebuilt.offset_index)
        time_index = rebuilt.time_index
        stored = self._store.read_index(segment.base_offset, suffix=time_index.SUFFIX)
        if stored == time_index.encode(segment.base_offset, 0):
            time_index.entries_written = len(time_index)
        else:
            self._unflushed.add(segment.base_offset)
        segment.load_from(rebuilt)

    def _recover_cleaning(self) -> None:
        """Finish a swap that was sealed (its plan names what it replaces); drop cleaned segments that
        were not (Kafka's LogLoader: .cleaned files are deleted, .swap files completed)."""
        store = self._store
        plan = _read_swap_plan(store)
        for base_offset, state in sorted(store.list_cleaning().items()):
            if state == SWAP and plan is not None and plan[0] == base_offset:
                present = set(store.list_segments())
                for replaced in plan[1]:
                    if replaced in present:
                        store.delete_segment(replaced)
                store.install_swap(base_offset)
            store.discard_cleaning(base_offset)
        if plan is not None:
            store.delete_checkpoint(CLEANER_SWAP_CHECKPOINT)

    def _load_segments(self, base_offsets: list[int], checkpoint_start: int | None) -> None:
        """Rebuild segments from headers; cut the log at the first torn or corrupt batch."""
        store = self._store
        for i, base_offset in enumerate(base_offsets):
            # With a log start checkpoint, the first segment starts at or below it (retention and
            # DeleteRecords persist the start before deleting). Above it, a segment never flushed was
            # lost in a crash; every later one was never flushed either, since flush covers them all.
            # Without one (a fresh log, or a directory Kafka wrote) the first segment is the start.
            if self._segments:
                previous_end = self._segments[-1].next_offset
                # A cleaned segment may end short of the next base (cleaning happens below the recovery
                # point only); above it a hole is an unflushed segment lost in a crash.
                lost = base_offset < previous_end or (
                    base_offset > previous_end and base_offset > self._recovery_point
                )
            else:
                lost = checkpoint_start is not None and base_offset > checkpoint_start
            if lost:
                # Overlaps its predecessor, or leaves a hole (a crash kept a newer segment but lost
                # an older one's tail): nothing from here on can be trusted.
                self._delete_files(base_offsets[i:])
                return
            segment = _Segment(base_offset)
            stored_bytes = store.segment_size(base_offset)
            is_last = i == len(base_offsets) - 1
            check_crc = is_last or base_offset >= self._recovery_point
            self._rebuild_segment(segment, stored_bytes, check_crc=check_crc)
            self._segments.append(segment)
            if check_crc:
                self._unflushed.add(base_offset)
            if segment.size_bytes < stored_bytes:
                store.truncate_segment(base_offset, segment.size_bytes)
                self._unflushed.add(base_offset)
                self._delete_files(base_offsets[i + 1 :])
                return

    def _rebuild_segment(self, segment: _Segment, stored_bytes: int, *, check_crc: bool) -> None:
        interval_bytes = self._config.index_interval_bytes
        expected_offset = segment.base_offset
        for _, header in _scan_headers(
            self._store,
            segment.base_offset,
            0,
            stored_bytes,
            check_crc=check_crc,
            window_bytes=SCAN_WINDOW_BYTES,
        ):
            last_offset = header.base_offset + header.last_offset_delta
            # Offsets may skip ahead (a follower of a compacted leader, a cleaned segment), never back.
            if header.base_offset < expected_offset or last_offset - segment.base_offset > INT32_MAX:
                return  # offsets go back or do not fit the index: corrupt from here
            segment.track(last_offset, header.size_in_bytes, header.max_timestamp, interval_bytes)
            expected_offset = last_offset + 1

    def _sync_indexes(self, segment: _Segment) -> None:
        """A recovered segment's largest timestamp gets its time index entry (LogSegment.recover); then
        each stored index that differs from the one rebuilt from headers is rewritten."""
        segment.seal_time_index()
        for index in segment.indexes:
            rebuilt = index.encode(segment.base_offset, 0)
            if self._store.read_index(segment.base_offset, suffix=index.SUFFIX) != rebuilt:
                self._store.write_index(segment.base_offset, 0, rebuilt, suffix=index.SUFFIX)
                self._unflushed.add(segment.base_offset)
            index.entries_written = len(index)

    def _delete_files(self, base_offsets: list[int]) -> None:
        for base_offset in base_offsets:
            self._store.delete_segment(base_offset)
            self._unflushed.discard(base_offset)
            self._created_empty.discard(base_offset)

    # --- state ----------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""
        return self._segments[-1].next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def size_in_bytes(self) -> int:
        return self._size_bytes

    @property
    def segments(self) -> list[SegmentInfo]:
        return [segment.info() for segment in self._segments]

    @property
    def config(self) -> LogConfig:
        return self._config

    def set_config(self, config: LogConfig) -> None:
        """New topic configs: the next roll, index entry and retention run follow them."""
        self._config = config

    @property
    def store(self) -> SegmentStore:
        """The segment store, for files kept beside the segments (producer-state snapshots)."""
        return self._store

    @property
    def active_segment_base_offset(self) -> int:
        """Changes exactly when the log rolls (or is truncated fully): cheap to poll after an append."""
        return self._segments[-1].base_offset

    def stop_tracking_log_end(self) -> None:
        """The partition gained replicas: from now on only ``set_high_watermark`` moves the high
        watermark (it stays where it is, the log end a single replica had)."""
        self._high_watermark_tracks_log_end = False

    def set_high_watermark(self, offset: int) -> None:
        """Clamped to ``[log_start_offset, log_end_offset]``, as Kafka's updateHighWatermark does."""
        self._high_watermark = min(max(offset, self._log_start_offset), self.log_end_offset)

    # --- append ---------------------------------------------------------------------------------

    def append(
        self,
        records: bytearray | memoryview,
        headers: list[BatchHeader],
        *,
        leader_epoch: int | None = None,
        assign_offsets: bool = True,
    ) -> AppendInfo:
        """Append validated batches (``headers`` from ``validate_batches(records)``): assign
        consecutive offsets from the log end by rewriting each ``baseOffset`` in place (and the
        partitionLeaderEpoch when given), then write them with one store append. Without
        ``assign_offsets`` (a follower) the batches keep their offsets, which must start at or past
        the log end and increase (a compacted leader's have gaps).

        Batches longer together than ``segment_bytes`` (a follower's fetched chunk; a leader refuses
        such a produce, as Kafka's UnifiedLog.append does) are split between batches, one store append
        per segment, so no segment passes ``segment_bytes`` unless a single batch does."""
        assert headers, "append needs at least one batch"
        view = memoryview(records)
        info: AppendInfo | None = None
        start = 0
        for first, end in _runs(headers, self._config.segment_bytes):
            size = sum(header.size_in_bytes for header in headers[first:end])
            run = self._append_run(
                view[start : start + size], headers[first:end], leader_epoch, assign_offsets
            )
            start += size
            if info is None:
                info = run
            elif run.max_timestamp > info.max_timestamp:
                info = AppendInfo(
                    info.first_offset, run.last_offset, run.max_timestamp, run.offset_of_max_timestamp
                )
            else:
                info = info._replace(last_offset=run.last_offset)
        assert info is not None and start == len(view), f"headers cover {start} of {len(view)} bytes"
        return info

    def _append_run(
        self,
        records: memoryview,
        headers: list[BatchHeader],
        leader_epoch: int | None,
        assign_offsets: bool,
    ) -> AppendInfo:
        if assign_offsets:
            offset_count = sum(header.last_offset_delta + 1 for header in headers)
        else:
            offset_count = headers[-1].last_offset + 1 - self.log_end_offset
            expected = self.log_end_offset
            for header in headers:
                assert header.base_offset >= expected, (header.base_offset, expected)
                expected = header.next_offset
        newest = max(header.max_timestamp for header in headers)
        active = self._maybe_roll(len(records), offset_count, len(headers), newest)
        view = records
        first_offset = offset = active.next_offset if assign_offsets else headers[0].base_offset
        position = 0
        for header in headers:
            if assign_offsets:
                set_base_offset(view, position, offset)
                offset += header.last_offset_delta + 1
            if leader_epoch is not None:
                set_partition_leader_epoch(view, position, leader_epoch)
            position += header.size_in_bytes
        assert position == len(view), f"headers cover {position} of {len(view)} bytes"
        self._store.append(active.base_offset, view)
        # Only now, with the bytes in the store, does the in-memory state move.
        max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, NO_OFFSET
        interval_bytes = self._config.index_interval_bytes
        offset = first_offset
        for header in headers:
            if not assign_offsets:
                offset = header.base_offset
            last_offset = offset + header.last_offset_delta
            active.track(last_offset, header.size_in_bytes, header.max_timestamp, interval_bytes)
            if header.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max_timestamp = header.max_timestamp, last_offset
            offset = last_offset + 1
        self._size_bytes += position
        self._unflushed.add(active.base_offset)
        self._created_empty.discard(active.base_offset)
        if self._high_watermark_tracks_log_end:
            self._high_watermark = offset
        return AppendInfo(first_offset, offset - 1, max_timestamp, offset_of_max_timestamp)

    def _maybe_roll(
        self, append_bytes: int, offset_count: int, batch_count: int, newest_timestamp: int
    ) -> _Segment:
        active = self._segments[-1]
        config = self._config
        if active.size_bytes > 0 and (
            active.size_bytes + append_bytes > config.segment_bytes
            or active.next_offset + offset_count - 1 - active.base_offset > INT32_MAX
            or (len(active.offset_index) + batch_count) * INDEX_ENTRY_BYTES > config.segment_index_bytes
            # The time index keeps its last slot for the entry a roll adds (TimeIndex.isFull).
            or (len(active.time_index) + batch_count + 1) * TimeIndex.ENTRY_BYTES > config.segment_index_bytes
            # segment.ms, as Kafka measures it with timestamps: from the segment's first batch to the
            # batch being appended (LogSegment.shouldRoll / timeWaitedForRoll).
            or (
                active.rolling_timestamp >= 0
                and newest_timestamp - active.rolling_timestamp > config.segment_ms
            )
        ):
            self.roll()
        return self._segments[-1]

    def roll(self) -> int:
        """Start a new segment at the log end (no-op while the active segment is empty); returns the
        active segment's base offset. The rolled segment's indexes are written, its largest timestamp
        in the time index (LogSegment.onBecomeInactiveSegment); ``flush`` syncs them."""
        active = self._segments[-1]
        if active.size_bytes == 0:
            return active.base_offset
        active.seal_time_index()
        self._write_indexes(active, create_files=True)
        self._create_segment(active.next_offset)
        return active.next_offset

    def _create_segment(self, base_offset: int) -> None:
        self._store.create_segment(base_offset)
        self._segments.append(_Segment(base_offset))
        self._unflushed.add(base_offset)
        self._created_empty.add(base_offset)

    def _write_indexes(self, segment: _Segment, *, create_files: bool = False) -> None:
        """Write the entries the index files lack; with ``create_files`` an index without entries too (an
        inactive segment has both files, as Kafka's)."""
        for index in segment.indexes:
            written = index.entries_written
            if written == len(index) and not (create_files and written == 0):
                continue
            data = index.encode(segment.base_offset, written)
            self._store.write_index(
                segment.base_offset, written * index.ENTRY_BYTES, data, suffix=index.SUFFIX
            )
            index.entries_written = len(index)
            self._unflushed.add(segment.base_offset)

    def flush(self) -> None:
        """Make every appended byte and index entry durable, then move the recovery point to the
        active segment so the next open CRC-checks only what may be torn."""
        for segment in self._segments:
            if segment.base_offset in self._unflushed and segment.base_offset not in self._created_empty:
                self._write_indexes(segment)
                self._store.flush(segment.base_offset)
        self._unflushed.clear()
        self._set_recovery_point(self._segments[-1].base_offset)

    def _set_recovery_point(self, offset: int) -> None:
        if offset != self._recovery_point:
            self._store.write_checkpoint(RECOVERY_POINT_CHECKPOINT, _encode_offset_checkpoint(offset))
            self._recovery_point = offset

    def close(self) -> None:
        """Flush and let go of the store. The active segment gets its largest timestamp in the time
        index first (LogSegment.close), unless it is empty or was never used since a clean open."""
        active = self._segments[-1]
        if active.loader is None and active.size_bytes > 0:
            active.seal_time_index()
            self._write_indexes(active, create_files=True)
        self.flush()
        self._store.close()

    # --- read -----------------------------------------------------------------------------------

    def read(
        self, fetch_offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult:
        """Whole batches from the one holding ``fetch_offset``, at most ``max_bytes`` (but the first
        batch whole when ``min_one_batch``), only batches that end below ``max_offset`` (the high
        watermark, exclusive). ``fetch_offset == log_end_offset`` returns nothing."""
        if fetch_offset < self._log_start_offset or fetch_offset > self.log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"fetch offset {fetch_offset} is outside [{self._log_start_offset}, {self.log_end_offset}]",
            )
        upper = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        chunks: list[memoryview] = []
        first_offset, next_offset, total_bytes = NO_OFFSET, fetch_offset, 0
        index = self._segment_index(fetch_offset)
        while index < len(self._segments) and next_offset < upper:
            segment = self._segments[index]
            found = self._find_batch(segment, next_offset)
            if found is None:
                index += 1
                continue
            position, header = found
            budget = max_bytes - total_bytes
            if not chunks and min_one_batch:
                budget = max(budget, header.size_in_bytes)
            if header.last_offset >= upper or header.size_in_bytes > budget:
                break
            data = self._store.read(segment.base_offset, position, min(budget, segment.size_bytes - position))
            used = 0
            for batch_position, batch in scan_batches(data, check_crc=False):
                if batch.last_offset >= upper:
                    break
                used = batch_position + batch.size_in_bytes
                next_offset = batch.next_offset
            assert used > 0, (segment.base_offset, position)
            if first_offset == NO_OFFSET:
                first_offset = header.base_offset
            chunks.append(memoryview(data)[:used])
            total_bytes += used
            if position + used < segment.size_bytes:
                break  # stopped inside the segment: out of bytes or at the high watermark
            index += 1
        return ReadResult(chunks, first_offset, next_offset, total_bytes)

    def _segment_index(self, offset: int) -> int:
        index = bisect_right(self._segments, offset, key=lambda segment: segment.base_offset) - 1
        return max(index, 0)

    def _find_batch(self, segment: _Segment, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the segment's first batch with last offset >= ``offset``."""
        start = segment.offset_index.position_at_or_before(offset)
        for position, header in _scan_headers(
            self._store,
            segment.base_offset,
            start,
            segment.size_bytes,
            check_crc=False,
            window_bytes=self._lookup_window_bytes,
        ):
            if header.last_offset >= offset:
                return position, header
        return None

    def batch_headers(self, start_offset: int | None = None) -> Iterator[BatchHeader]:
        """Headers of every batch from the one holding ``start_offset`` (default: the log start) to
        the log end, as of the call. Do not append or truncate while iterating."""
        offset = self._log_start_offset if start_offset is None else start_offset
        segments = self._segments[self._segment_index(offset) :]
        for i, segment in enumerate(segments):
            start = segment.offset_index.position_at_or_before(offset) if i == 0 else 0
            for _, header in _scan_headers(
                self._store,
                segment.base_offset,
                start,
                segment.size_bytes,
                check_crc=False,
                window_bytes=SCAN_WINDOW_BYTES,
            ):
                if header.last_offset >= offset:
                    yield header

    # --- timestamps (ListOffsets) ---------------------------------------------------------------

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after the log start with timestamp >=
        ``timestamp_ms`` (ListOffsets by time); None when there is none. Decodes one batch."""
        for segment in self._segments:
            if segment.max_timestamp < timestamp_ms or segment.next_offset <= self._log_start_offset:
                continue
            # LogSegment.findOffsetByTimestamp: every batch before the one the time index names has only
            # smaller timestamps; the offset index gives a position at or before it (or the log start).
            indexed = segment.time_index.offset_at_or_before(timestamp_ms)
            from_offset = max(segment.base_offset if indexed is None else indexed, self._log_start_offset)
            start = segment.offset_index.position_at_or_before(from_offset)
            # The answer is usually within an index interval or two of ``start``: read as a fetch does.
            for position, header in _scan_headers(
                self._store,
                segment.base_offset,
                start,
                segment.size_bytes,
                check_crc=False,
                window_bytes=self._lookup_window_bytes,
            ):
                if header.max_timestamp < timestamp_ms or header.next_offset <= self._log_start_offset:
                    continue
                found = self._first_record_at_or_after(segment, position, header, timestamp_ms)
                if found is not None:
                    return found
        return None

    def _first_record_at_or_after(
        self, segment: _Segment, position: int, header: BatchHeader, timestamp_ms: int
    ) -> tuple[int, int] | None:
        if header.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME:
            # Every record of a LogAppendTime batch carries the batch's max timestamp.
            return max(header.base_offset, self._log_start_offset), header.max_timestamp
        data = self._store.read(segment.base_offset, position, header.size_in_bytes)
        try:
            records = decode_records(data)
        except ValueError:
            # Undecodable records (the CRC only proves we stored what the client sent): the batch.
            return max(header.base_offset, self._log_start_offset), header.max_timestamp
        for record in records:
            if record.timestamp >= timestamp_ms and record.offset >= self._log_start_offset:
                return record.offset, record.timestamp
        return None

    def max_timestamp_offset(self) -> tuple[int, int]:
        """``(offset, timestamp)`` of the first record with the largest timestamp (ListOffsets
        MAX_TIMESTAMP, -3); ``(-1, -1)`` for a log without timestamps."""
        best: _Segment | None = None
        for segment in self._segments:
            if segment.max_timestamp > (NO_TIMESTAMP if best is None else best.max_timestamp):
                best = segment
        if best is None:
            return NO_OFFSET, NO_TIMESTAMP
        found = self._find_batch(best, best.offset_of_max_timestamp)
        assert found is not None, (best.base_offset, best.offset_of_max_timestamp)
        position, header = found
        exact = self._first_record_at_or_after(best, position, header, header.max_timestamp)
        return exact if exact is not None else (header.last_offset, header.max_timestamp)

    # --- removing data --------------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to ``offset`` (persisted before this returns) and
        delete the segments wholly below it. Returns the log start offset."""
        if offset > self._high_watermark or offset < 0:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"cannot delete records before {offset}: the high watermark is {self._high_watermark}",
            )
        if offset > self._log_start_offset:
            self._set_log_start_offset(offset)
            self._delete_segments_below_log_start()
        return self._log_start_offset

    def _set_log_start_offset(self, offset: int) -> None:
        self._store.write_checkpoint(LOG_START_OFFSET_CHECKPOINT, _encode_offset_checkpoint(offset))
        self._log_start_offset = offset

    def _delete_segments_below_log_start(self) -> list[int]:
        count = 0
        while (
            count + 1 < len(self._segments)
            and self._segments[count + 1].base_offset <= self._log_start_offset
        ):
            count += 1
        return self._delete_oldest(count)

    def _delete_oldest(self, count: int) -> list[int]:
        assert count < len(self._segments), "the active segment is never deleted"
        self._generation += count > 0
        deleted = [segment.base_offset for segment in self._segments[:count]]
        self._size_bytes -= sum(segment.size_bytes for segment in self._segments[:count])
        del self._segments[:count]
        self._delete_files(deleted)
        return deleted

    def apply_retention(self, now_ms: int) -> list[int]:
        """Delete the oldest segments that break retention.ms (their largest timestamp is older) or
        retention.bytes (the log stays at least that big), or lie wholly below the log start. Never
        the active segment, nor one holding offsets at or above the high watermark. Returns the
        deleted base offsets; the log start offset moves to the first remaining segment."""
        config = self._config
        candidates = self._segments[:-1]
        limit = 0
        while limit < len(candidates) and candidates[limit].next_offset <= self._high_watermark:
            limit += 1
        by_time = 0
        # cleanup.policy without "delete": retention never deletes (the cleaner keeps it small).
        if config.cleanup_policy_delete and config.retention_ms >= 0:
            while (
                by_time < limit
                and candidates[by_time].max_timestamp != NO_TIMESTAMP
                and now_ms - candidates[by_time].max_timestamp > config.retention_ms
            ):
                by_time += 1
        by_size = 0
        if config.cleanup_policy_delete and config.retention_bytes >= 0:
            excess_bytes = self._size_bytes - config.retention_bytes
            while by_size < limit and excess_bytes - candidates[by_size].size_bytes >= 0:
                excess_bytes -= candidates[by_size].size_bytes
                by_size += 1
        by_start = 0
        while by_start < limit and self._segments[by_start + 1].base_offset <= self._log_start_offset:
            by_start += 1
        count = max(by_time, by_size, by_start)
        if count == 0:
            return []
        new_start = max(self._log_start_offset, self._segments[count].base_offset)
        if new_start != self._log_start_offset:
            self._set_log_start_offset(new_start)
        return self._delete_oldest(count)

    def truncate_to(self, offset: int) -> None:
        """Drop every batch that holds an offset >= ``offset`` (raft follower divergence). A batch
        straddling ``offset`` goes whole, so the log end may end up below ``offset``."""
        if offset >= self.log_end_offset:
            return
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self._generation += 1
        doomed = [segment for segment in self._segments[1:] if segment.base_offset > offset]
        if doomed:
            del self._segments[len(self._segments) - len(doomed) :]
            self._size_bytes -= sum(segment.size_bytes for segment in doomed)
            self._delete_files([segment.base_offset for segment in doomed])
        active = self._segments[-1]
        found = self._find_batch(active, offset)
        cut = active.size_bytes if found is None else found[0]
        self._store.truncate_segment(active.base_offset, cut)
        rebuilt = _Segment(active.base_offset)
        self._rebuild_segment(rebuilt, cut, check_crc=False)
        assert rebuilt.size_bytes == cut, (rebuilt.size_bytes, cut)
        # Offset index entries below the cut are the same as before; the time index keeps its entries
        # below it (TimeIndex.truncateTo: they may include one a recovery or a close added). Any stored
        # entry past the cut goes.
        written_before = [index.entries_written for index in active.indexes]
        rebuilt.offset_index.entries_written = min(written_before[0], len(rebuilt.offset_index))
        rebuilt.time_index = active.time_index
        rebuilt.time_index.truncate_to_offset(rebuilt.next_offset)
        for index, written in zip(rebuilt.indexes, written_before, strict=True):
            if index.entries_written < written:
                self._store.write_index(
                    active.base_offset, index.entries_written * index.ENTRY_BYTES, b"", suffix=index.SUFFIX
                )
        self._segments[-1] = rebuilt
        self._size_bytes -= active.size_bytes - cut
        self._unflushed.add(active.base_offset)
        self._high_watermark = min(self._high_watermark, self.log_end_offset)
        # The truncated segment must be CRC-checked on the next open until a flush covers it.
        self._set_recovery_point(min(self._recovery_point, active.base_offset))
        # New batches will follow in the (now active) segment: it is dirty again.
        if self._cleaner_offset > active.base_offset:
            self.set_cleaner_offset(active.base_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (a raft follower installing a snapshot, or a
        log start past everything that survived a crash)."""
        assert offset >= 0, offset
        # The new start is durable first: a crash in between leaves a log the next open resets.
        self._generation += 1
        self._set_log_start_offset(offset)
        self._set_recovery_point(offset)
        if self._cleaner_offset:
            self._store.delete_checkpoint(CLEANER_OFFSET_CHECKPOINT)
            self._cleaner_offset = 0
        self._delete_files([segment.base_offset for segment in self._segments])
        self._segments = []
        self._size_bytes = 0
        self._create_segment(offset)
        self._high_watermark = offset

    # --- compaction: what pykraft.log.cleaner writes through ----------------------------------------

    @property
    def cleaner_offset(self) -> int:
        """The first offset the cleaner has not cleaned (its dirty section starts here)."""
        return max(self._cleaner_offset, self._log_start_offset)

    def set_cleaner_offset(self, offset: int) -> None:
        """A cleaning pass covered everything below ``offset`` (a segment base); written when the
        pass ends, so a crash during one makes the next start over."""
        if offset != self._cleaner_offset:
            self._store.write_checkpoint(CLEANER_OFFSET_CHECKPOINT, _encode_offset_checkpoint(offset))
            self._cleaner_offset = offset

    @property
    def generation(self) -> int:
        """Changes whenever a segment is deleted, cut or replaced: a cleaning pass checks it."""
        return self._generation

    @property
    def recovery_point(self) -> int:
        """Segments below it were flushed whole."""
        return self._recovery_point

    def segment_batches(self, base_offset: int, chunk_bytes: int) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every batch of a (non-active) segment with its bytes, read ``chunk_bytes`` at a time (a
        batch larger than that alone). Do not change the log while iterating."""
        segment = self._segments[self._segment_index(base_offset)]
        assert segment.base_offset == base_offset, (segment.base_offset, base_offset)
        position, end = 0, segment.size_bytes
        while position < end:
            first = read_batch_header(self._store.read(base_offset, position, BATCH_HEADER_SIZE))
            data = memoryview(
                self._store.read(
                    base_offset, position, min(max(chunk_bytes, first.size_in_bytes), end - position)
                )
            )
            used = 0
            for batch_position, header in scan_batches(data, check_crc=False):
                yield header, data[batch_position : batch_position + header.size_in_bytes]
                used = batch_position + header.size_in_bytes
            assert used > 0, (base_offset, position)
            position += used

    def begin_cleaned(self, base_offset: int) -> CleanedSegment:
        """Start ``<base>.log.cleaned``, the cleaned copy of the segments from ``base_offset`` on."""
        self._store.create_cleaned(base_offset)
        return CleanedSegment(_Segment(base_offset))

    def append_cleaned(self, cleaned: CleanedSegment, header: BatchHeader, data: BytesLike) -> None:
        """One batch (as the cleaner kept it) at the end of the cleaned segment."""
        segment = cleaned.segment
        assert header.base_offset >= segment.next_offset, (header.base_offset, segment.next_offset)
        self._store.append_cleaned(segment.base_offset, data)
        segment.track(
            header.last_offset, header.size_in_bytes, header.max_timestamp, self._config.index_interval_bytes
        )

    def abort_cleaned(self, cleaned: CleanedSegment) -> None:
        self._store.discard_cleaning(cleaned.segment.base_offset)

    def replace_with_cleaned(self, cleaned: CleanedSegment, replaced: list[int], generation: int) -> bool:
        """Swap the cleaned segment in for the consecutive segments ``replaced`` (below the recovery
        point, the first at the cleaned segment's base), crash-safely: seal it, name what it replaces,
        delete the old ones, rename it into place. False, with the cleaned files gone, when the log
        changed since ``generation``."""
        new = cleaned.segment
        bases = [segment.base_offset for segment in self._segments]
        first = bisect_left(bases, replaced[0])
        end = first + len(replaced)
        if (
            generation != self._generation
            or bases[first:end] != replaced
            or end >= len(bases)
            or bases[end] > self._recovery_point
        ):
            self.abort_cleaned(cleaned)
            return False
        assert new.base_offset == replaced[0], (new.base_offset, replaced)
        store = self._store
        new.seal_time_index()  # LogCleaner.cleanSegments: cleaned.onBecomeInactiveSegment()
        for index in new.indexes:
            store.write_cleaned_index(new.base_offset, index.encode(new.base_offset, 0), suffix=index.SUFFIX)
        store.seal_cleaned(new.base_offset)
        store.write_checkpoint(CLEANER_SWAP_CHECKPOINT, _encode_swap_plan(new.base_offset, replaced))
        for base_offset in replaced:
            store.delete_segment(base_offset)
            self._unflushed.discard(base_offset)
        store.install_swap(new.base_offset)
        store.delete_checkpoint(CLEANER_SWAP_CHECKPOINT)
        for index in new.indexes:
            index.entries_written = len(index)
        self._size_bytes += new.size_bytes - sum(segment.size_bytes for segment in self._segments[first:end])
        self._segments[first:end] = [new]
        self._generation += 1
        return True

    def append_bytes(self, data: BytesLike) -> AppendInfo:
        """Validate nothing, assign offsets: for callers that built ``data`` themselves (tests,
        the metadata log writer). ``data`` is copied so the caller's buffer is left alone."""
        buf = bytearray(data)
        headers = [header for _, header in scan_batches(buf, check_crc=False)]
        assert sum(header.size_in_bytes for header in headers) == len(buf), "torn batch in append_bytes"
        return self.append(buf, headers)


def _runs(headers: list[BatchHeader], segment_bytes: int) -> list[tuple[int, int]]:
    """``headers`` cut into runs (first index, end index) of at most ``segment_bytes`` each, a run
    always holding at least one batch."""
    runs = []
    first = size = 0
    for index, header in enumerate(headers):
        if size and size + header.size_in_bytes > segment_bytes:
            runs.append((first, index))
            first, size = index, 0
        size += header.size_in_bytes
    runs.append((first, len(headers)))
    return runs
