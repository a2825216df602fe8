"""KIP-630 snapshots as Kafka shipped them (kafka-facts §4): names, container format, store contract.

A snapshot is identified by ``OffsetAndEpoch(end_offset, epoch)``: it covers the log below
``end_offset`` (exclusive) and ``epoch`` is the epoch of the record at ``end_offset - 1``
(Snapshots.java). Its file, in the partition directory, is
``<end_offset, 20 digits>-<epoch, 10 digits>.checkpoint``; ``.checkpoint.part`` while it is written or
downloaded, ``.checkpoint.deleted`` while it is being removed. ``(0, 0)`` is the bootstrap snapshot,
never replicated.

The bytes are RecordBatch v2 batches (RecordsSnapshotWriter): offsets inside the snapshot start at 0,
every batch's partitionLeaderEpoch is the snapshot epoch, no producer ids. The first batch is a control
batch whose first record is SnapshotHeaderRecord (control type 3: ``Version:int16=0,
LastContainedLogTimestamp:int64``), the last a control batch with SnapshotFooterRecord (type 4:
``Version:int16=0``); control values are flexible messages at version 0 with no version prefix, so
they end with an (empty) tagged-field count. A file whose footer is missing never counts.

Pure: bytes in, bytes out. The shell supplies files through ``SnapshotStore`` (io/snapshots.py); the
raft core and tests/sim use ``MemorySnapshotStore``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from pykraft.protocol.records import (
    BatchHeader,
    Record,
    build_batch,
    control_key,
    control_type_of,
    decode_records,
    read_batch_header,
    scan_batches,
)
from pykraft.raft.messages import FETCH_MAX_BYTES, OffsetAndEpoch

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
DELETED_SUFFIX = ".checkpoint.deleted"
BOOTSTRAP_SNAPSHOT_ID = OffsetAndEpoch(0, 0)

# ControlRecordType.java.
CONTROL_TYPE_SNAPSHOT_HEADER = 3
CONTROL_TYPE_SNAPSHOT_FOOTER = 4
SNAPSHOT_HEADER_VERSION = 0
SNAPSHOT_FOOTER_VERSION = 0
# KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the snapshot writer's batch limit.
SNAPSHOT_MAX_BATCH_BYTES = FETCH_MAX_BYTES

_OFFSET_DIGITS = 20
_EPOCH_DIGITS = 10
_HEADER_BODY = struct.Struct(">hq")
_FOOTER_BODY = struct.Struct(">h")


class SnapshotError(ValueError):
    """A snapshot's bytes are not a valid snapshot (one line saying what and where)."""


# --- names ----------------------------------------------------------------------------------------


def snapshot_file_name(snapshot_id: OffsetAndEpoch, suffix: str = SNAPSHOT_SUFFIX) -> str:
    assert snapshot_id.offset >= 0 and snapshot_id.epoch >= 0, snapshot_id
    return f"{snapshot_id.offset:0{_OFFSET_DIGITS}d}-{snapshot_id.epoch:0{_EPOCH_DIGITS}d}{suffix}"


class SnapshotPath(NamedTuple):
    snapshot_id: OffsetAndEpoch
    partial: bool
    deleted: bool


def parse_snapshot_file_name(name: str) -> SnapshotPath | None:
    """Snapshots.parse: the offset is the first 20 characters, the epoch characters 21-30; anything
    not ending in .checkpoint / .checkpoint.part / .checkpoint.deleted is not a snapshot. A partial
    name may carry a temp-file token after the epoch (``<offset>-<epoch>-<token>.checkpoint.part``)."""
    if name.endswith(SNAPSHOT_SUFFIX):
        partial, deleted = False, False
    elif name.endswith(PARTIAL_SUFFIX):
        partial, deleted = True, False
    elif name.endswith(DELETED_SUFFIX):
        partial, deleted = False, True
    else:
        return None
    offset_text = name[:_OFFSET_DIGITS]
    sep = name[_OFFSET_DIGITS : _OFFSET_DIGITS + 1]
    epoch_text = name[_OFFSET_DIGITS + 1 : _OFFSET_DIGITS + 1 + _EPOCH_DIGITS]
    rest = name[_OFFSET_DIGITS + 1 + _EPOCH_DIGITS :]
    if sep != "-" or not offset_text.isdigit() or not epoch_text.isdigit():
        return None
    if len(offset_text) != _OFFSET_DIGITS or len(epoch_text) != _EPOCH_DIGITS:
        return None
    if not partial and rest not in (SNAPSHOT_SUFFIX, DELETED_SUFFIX):
        return None
    return SnapshotPath(OffsetAndEpoch(int(offset_text), int(epoch_text)), partial, deleted)


# --- header and footer control records -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    """SnapshotHeaderRecord.json v0."""

    last_contained_log_timestamp: int
    version: int = SNAPSHOT_HEADER_VERSION


def encode_snapshot_header(header: SnapshotHeader) -> bytes:
    return _HEADER_BODY.pack(header.version, header.last_contained_log_timestamp) + b"\x00"


def _check_tagged_tail(value: bytes, pos: int, what: str) -> None:
    # Only an empty tagged-field section is written by Kafka at v0; skip any tagged fields a newer
    # writer adds (flexible messages ignore unknown tags), but nothing may follow them.
    count, pos = _read_uvarint(value, pos, what)
    for _ in range(count):
        _tag, pos = _read_uvarint(value, pos, what)
        size, pos = _read_uvarint(value, pos, what)
        pos += size
    if pos != len(value):
        raise SnapshotError(f"{what}: {len(value) - pos:+d} byte(s) after the message")


def _read_uvarint(buf: bytes, pos: int, what: str) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise SnapshotError(f"{what}: truncated")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise SnapshotError(f"{what}: unsigned varint longer than 5 bytes")


def decode_snapshot_header(value: bytes) -> SnapshotHeader:
    if len(value) < _HEADER_BODY.size:
        raise SnapshotError(f"SnapshotHeaderRecord: needs {_HEADER_BODY.size + 1} bytes, got {len(value)}")
    version, timestamp = _HEADER_BODY.unpack_from(value)
    _check_tagged_tail(value, _HEADER_BODY.size, "SnapshotHeaderRecord")
    return SnapshotHeader(timestamp, version)


def encode_snapshot_footer(version: int = SNAPSHOT_FOOTER_VERSION) -> bytes:
    return _FOOTER_BODY.pack(version) + b"\x00"


def decode_snapshot_footer(value: bytes) -> int:
    if len(value) < _FOOTER_BODY.size:
        raise SnapshotError(f"SnapshotFooterRecord: needs {_FOOTER_BODY.size + 1} bytes, got {len(value)}")
    (version,) = _FOOTER_BODY.unpack_from(value)
    _check_tagged_tail(value, _FOOTER_BODY.size, "SnapshotFooterRecord")
    return int(version)


# --- writer ---------------------------------------------------------------------------------------


def write_snapshot(
    snapshot_id: OffsetAndEpoch,
    values: Iterable[bytes],
    *,
    last_contained_log_timestamp: int,
    now_ms: int,
    max_batch_bytes: int = SNAPSHOT_MAX_BATCH_BYTES,
    kraft_records: Sequence[Record] = (),
) -> bytes:
    """The whole snapshot: header batch, data batches of null-key records with ``values`` (at most
    ``max_batch_bytes`` of values per batch, at least one record), footer batch. ``kraft_records``
    (KIP-853: KRaftVersionRecord and VotersRecord, ``RaftNode.kraft_control_records``) follow the
    header in its batch, as RecordsSnapshotWriter writes them."""
    epoch = snapshot_id.epoch
    out = bytearray()
    offset = 0

    def add(records: Sequence[Record], is_control: bool) -> None:
        nonlocal offset
        out.extend(
            build_batch(
                records,
                base_offset=offset,
                timestamp_ms=now_ms,
                partition_leader_epoch=epoch,
                is_control=is_control,
            )
        )
        offset += len(records)

    header = SnapshotHeader(last_contained_log_timestamp)
    add(
        [Record(control_key(CONTROL_TYPE_SNAPSHOT_HEADER), encode_snapshot_header(header)), *kraft_records],
        True,
    )
    pending: list[Record] = []
    pending_bytes = 0
    for value in values:
        if pending and pending_bytes + len(value) > max_batch_bytes:
            add(pending, False)
            pending, pending_bytes = [], 0
        pending.append(Record(None, value))
        pending_bytes += len(value) + 8  # ~ per-record framing
    if pending:
        add(pending, False)
    add([Record(control_key(CONTROL_TYPE_SNAPSHOT_FOOTER), encode_snapshot_footer())], True)
    return bytes(out)


# --- reader ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotBatch:
    header: BatchHeader
    records: list[Record]


def iter_batches(data: bytes | memoryview, what: str = "snapshot") -> Iterator[SnapshotBatch]:
    """Every batch, whole and CRC-checked; a torn or corrupt tail is an error (never skipped)."""
    end = 0
    for pos, header in scan_batches(data):
        end = pos + header.size_in_bytes
        try:
            records = decode_records(memoryview(data)[pos:end])
        except ValueError as error:
            raise SnapshotError(f"{what}: batch at byte {pos}: {error}") from None
        yield SnapshotBatch(header, records)
    if end != len(data):
        raise SnapshotError(
            f"{what}: {len(data) - end} byte(s) at byte {end} are not a whole valid batch (torn or corrupt)"
        )


@dataclass(frozen=True, slots=True)
class SnapshotContents:
    header: SnapshotHeader
    epoch: int
    # The state machine's records (values of non-control records), in order.
    values: list[bytes]
    # Every batch, control batches included (for the inspector).
    batches: list[SnapshotBatch]


def read_snapshot(data: bytes | memoryview, what: str = "snapshot") -> SnapshotContents:
    """Validate a complete snapshot (RecordsSnapshotReader): the first batch is a control batch whose
    first record is the header, the last a control batch holding the footer; raises SnapshotError."""
    batches = list(iter_batches(data, what))
    if not batches:
        raise SnapshotError(f"{what}: empty (no header)")
    first = batches[0]
    if not first.header.is_control or control_type_of(first.records[0].key) != CONTROL_TYPE_SNAPSHOT_HEADER:
        raise SnapshotError(f"{what}: the first batch is not a SnapshotHeaderRecord control batch")
    header = decode_snapshot_header(first.records[0].value or b"")
    last = batches[-1]
    if (
        len(batches) < 2
        or not last.header.is_control
        or control_type_of(last.records[-1].key) != CONTROL_TYPE_SNAPSHOT_FOOTER
    ):
        raise SnapshotError(f"{what}: no SnapshotFooterRecord at the end (incomplete snapshot)")
    decode_snapshot_footer(last.records[-1].value or b"")
    values: list[bytes] = []
    for batch in batches:
        if not batch.header.is_control:
            values.extend(r.value if r.value is not None else b"" for r in batch.records)
    return SnapshotContents(header, first.header.partition_leader_epoch, values, batches)


def read_snapshot_header(data: bytes | memoryview) -> SnapshotHeader:
    """Just the header, from the first batch (cheap: the shell reads it when it lists snapshots)."""
    if len(data) < 61:
        raise SnapshotError("snapshot: shorter than one batch header")
    header = read_batch_header(data)
    first = next(iter_batches(memoryview(data)[: header.size_in_bytes]), None)
    if first is None or not first.header.is_control:
        raise SnapshotError("snapshot: the first batch is not a SnapshotHeaderRecord control batch")
    if control_type_of(first.records[0].key) != CONTROL_TYPE_SNAPSHOT_HEADER:
        raise SnapshotError("snapshot: the first batch is not a SnapshotHeaderRecord control batch")
    return decode_snapshot_header(first.records[0].value or b"")


# --- the store contract ---------------------------------------------------------------------------


class SnapshotStore(Protocol):
    """The frozen snapshots of one partition (KafkaMetadataLog's snapshot map), as the core needs them.

    Only complete, frozen snapshots are visible. ``write`` makes one durable before it returns (the
    file: .part, fsync, rename, dir fsync); ``delete`` forgets it (.deleted, then removed)."""

    def snapshot_ids(self) -> list[OffsetAndEpoch]:
        """Ascending."""
        ...

    def size(self, snapshot_id: OffsetAndEpoch) -> int: ...

    def last_contained_log_timestamp(self, snapshot_id: OffsetAndEpoch) -> int: ...

    def read(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes: ...

    def write(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None: ...

    def delete(self, snapshot_id: OffsetAndEpoch) -> None: ...


class MemorySnapshotStore:
    """``SnapshotStore`` in memory; a simulated crash keeps it whole (writes are durable at once)."""

    def __init__(self) -> None:
        self._data: dict[OffsetAndEpoch, bytes] = {}
        self._timestamps: dict[OffsetAndEpoch, int] = {}

    def snapshot_ids(self) -> list[OffsetAndEpoch]:
        return sorted(self._data)

    def size(self, snapshot_id: OffsetAndEpoch) -> int:
        return len(self._data[snapshot_id])

    def last_contained_log_timestamp(self, snapshot_id: OffsetAndEpoch) -> int:
        return self._timestamps[snapshot_id]

    def read(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        return self._data[snapshot_id][position : position + max_bytes]

    def write(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self._timestamps[snapshot_id] = read_snapshot_header(data).last_contained_log_timestamp
        self._data[snapshot_id] = bytes(data)

    def delete(self, snapshot_id: OffsetAndEpoch) -> None:
        self._data.pop(snapshot_id, None)
        self._timestamps.pop(snapshot_id, None)

    def get(self, snapshot_id: OffsetAndEpoch) -> bytes:
        return self._data[snapshot_id]


def read_whole(store: SnapshotStore, snapshot_id: OffsetAndEpoch) -> bytes:
    return store.read(snapshot_id, 0, store.size(snapshot_id))


# --- retention (KafkaMetadataLog.maybeClean) ------------------------------------------------------


def retention_delete_before(
    store: SnapshotStore,
    log_size_bytes: int,
    now_ms: int,
    *,
    retention_bytes: int,
    retention_ms: int,
) -> OffsetAndEpoch | None:
    """The snapshot to ``deleteBeforeSnapshot`` next, or None: the second-oldest snapshot when the
    oldest breaks retention (log + snapshots bigger than ``retention_bytes``, or the oldest older
    than ``retention_ms``; < 0 disables either). The caller deletes, then asks again: each step
    removes the oldest snapshot and the log below the next one, as KafkaMetadataLog.maybeClean walks
    its pairs. The latest snapshot is always kept; nothing happens with fewer than two."""
    ids = [i for i in store.snapshot_ids() if i != BOOTSTRAP_SNAPSHOT_ID]
    if len(ids) < 2:
        return None
    oldest = ids[0]
    total_bytes = log_size_bytes + sum(store.size(i) for i in ids)
    by_size = retention_bytes >= 0 and total_bytes > retention_bytes
    by_time = retention_ms >= 0 and now_ms - store.last_contained_log_timestamp(oldest) > retention_ms
    return ids[1] if by_size or by_time else None


def inconsistent_snapshot_state(log_start_offset: int, ids: Sequence[OffsetAndEpoch]) -> str | None:
    """KafkaMetadataLog startup: a log whose start moved past 0 needs a snapshot at or after its
    start, or it cannot be rebuilt. Returns the problem, or None."""
    if log_start_offset > 0 and not any(i.offset >= log_start_offset for i in ids):
        return (
            f"inconsistent snapshot state: the log starts at offset {log_start_offset} but no snapshot "
            f"ends at or after it (snapshots: {[tuple(i) for i in ids] or 'none'})"
        )
    return None
