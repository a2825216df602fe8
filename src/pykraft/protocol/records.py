"""RecordBatch v2 (magic 2): header parsing, validation, in-place offset assignment, building.

The broker never touches individual records on produce or fetch (docs/architecture.md, "The hot path"): it reads
the 61-byte batch header, checks the CRC-32C with a C extension and rewrites ``baseOffset`` in place.
Building and decoding individual records is for the metadata log, tools and tests only.

Layout (clients/.../record/DefaultRecordBatch.java)::

    baseOffset:int64 batchLength:int32 partitionLeaderEpoch:int32 magic:int8 crc:uint32
    attributes:int16 lastOffsetDelta:int32 baseTimestamp:int64 maxTimestamp:int64
    producerId:int64 producerEpoch:int16 baseSequence:int32 recordCount:int32

The CRC covers ``attributes`` to the end of the batch, so rewriting ``baseOffset`` or
``partitionLeaderEpoch`` never invalidates it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from crc32c import crc32c

from pykraft.core.errors import ErrorCode
from pykraft.protocol import compression

BATCH_HEADER_SIZE = 61
# baseOffset + batchLength: the bytes that batchLength does not count.
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
PARTITION_LEADER_EPOCH_OFFSET = 12
CURRENT_MAGIC = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

TIMESTAMP_TYPE_CREATE_TIME = 0
TIMESTAMP_TYPE_LOG_APPEND_TIME = 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_MAGIC_PEEK = struct.Struct(">qiib")


class InvalidBatchError(Exception):
    """A batch a client sent fails validation; ``error_code`` is what the produce response carries."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
MAX_TIMESTAMP_OFFSET = 35


def stamp_log_append_time(
    records: bytes | bytearray | memoryview, headers: Sequence[BatchHeader], now_ms: int
) -> tuple[bytearray, list[BatchHeader]]:
    """The batches as a topic with message.timestamp.type=LogAppendTime keeps them: the timestamp-type
    attribute set, maxTimestamp the broker's clock, the CRC recomputed (Kafka's
    MemoryRecords/DefaultRecordBatch.setMaxTimestamp); the records' own timestamps stay."""
    out = bytearray(records)
    stamped: list[BatchHeader] = []
    pos = 0
    for header in headers:
        attributes = header.attributes | TIMESTAMP_TYPE_MASK
        _ATTRIBUTES.pack_into(out, pos + ATTRIBUTES_OFFSET, attributes)
        _MAX_TIMESTAMP.pack_into(out, pos + MAX_TIMESTAMP_OFFSET, now_ms)
        end = pos + header.size_in_bytes
        crc = crc32c(memoryview(out)[pos + ATTRIBUTES_OFFSET : end])
        struct.pack_into(">I", out, pos + CRC_OFFSET, crc)
        stamped.append(header._replace(attributes=attributes, max_timestamp=now_ms, crc=crc))
        pos = end
    return out, stamped


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping past Int.MAX back to 0 (DefaultRecordBatch.incrementSequence)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """The mirror image of :func:`increment_sequence`."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def compression_type(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def read_batch_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at ``pos``; the caller guarantees the bytes are there."""
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def check_produce_records(buf: bytes | bytearray | memoryview) -> None:
    """Kafka's ProduceRequest.validateRecords (Produce v3+), checked before any batch is read: exactly
    one batch per partition, of magic 2, else INVALID_RECORD (87) — not UNSUPPORTED_FOR_MESSAGE_FORMAT,
    which Kafka 4 no longer answers to a produce. A batch whose length runs past the end is no batch
    (Kafka's batch iterator stops there)."""
    view = memoryview(buf)
    total = len(view)
    if total < LOG_OVERHEAD or (first_end := LOG_OVERHEAD + _INT32.unpack_from(view, 8)[0]) > total:
        raise InvalidBatchError(ErrorCode.INVALID_RECORD, "produce request carries no record batch")
    if first_end < total:
        raise InvalidBatchError(
            ErrorCode.INVALID_RECORD, "a produce request carries exactly one batch per partition"
        )
    if total > MAGIC_OFFSET and view[MAGIC_OFFSET] != CURRENT_MAGIC:
        raise InvalidBatchError(
            ErrorCode.INVALID_RECORD,
            f"record batch magic {view[MAGIC_OFFSET]} is not supported; only magic 2",
        )


def validate_batches(buf: bytes | bytearray | memoryview, *, from_leader: bool = False) -> list[BatchHeader]:
    """Validate a client's ``records`` field whole: every batch, header only plus CRC-32C.

    Raises :class:`InvalidBatchError` with the code Kafka answers:
    magic < 2 -> UNSUPPORTED_FOR_MESSAGE_FORMAT (43); bad CRC -> CORRUPT_MESSAGE (2);
    a length that runs past the end, or garbage -> CORRUPT_MESSAGE (2); record count that disagrees
    with lastOffsetDelta, or an empty batch list -> INVALID_RECORD (87). ``from_leader``: batches a
    leader replicates may have been compacted (fewer records than their offset range, even none).
    """
    view = memoryview(buf)
    total = len(view)
    headers: list[BatchHeader] = []
    pos = 0
    while pos < total:
        if total - pos < BATCH_HEADER_SIZE:
            # A message-format v0/v1 record can be shorter than a v2 header: report the magic first.
            if total - pos >= MAGIC_OFFSET + 1 and view[pos + MAGIC_OFFSET] < CURRENT_MAGIC:
                raise InvalidBatchError(
                    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                    f"record batch magic {view[pos + MAGIC_OFFSET]} is not supported; only magic 2",
                )
            raise InvalidBatchError(
                ErrorCode.CORRUPT_MESSAGE, f"truncated record batch header at byte {pos} of {total}"
            )
        header = read_batch_header(view, pos)
        if header.magic != CURRENT_MAGIC:
            code = (
                ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
                if 0 <= header.magic < CURRENT_MAGIC
                else ErrorCode.CORRUPT_MESSAGE
            )
            raise InvalidBatchError(code, f"record batch magic {header.magic} is not supported; only magic 2")
        end = pos + header.size_in_bytes
        if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or end > total:
            raise InvalidBatchError(
                ErrorCode.CORRUPT_MESSAGE,
                f"record batch length {header.batch_length} at byte {pos} does not fit {total} bytes",
            )
        if crc32c(view[pos + ATTRIBUTES_OFFSET : end]) != header.crc:
            raise InvalidBatchError(ErrorCode.CORRUPT_MESSAGE, f"record batch CRC mismatch at byte {pos}")
        if header.last_offset_delta < 0 or (
            header.record_count > header.last_offset_delta + 1
            if from_leader
            else header.record_count != header.last_offset_delta + 1
        ):
            raise InvalidBatchError(
                ErrorCode.INVALID_RECORD,
                f"record count {header.record_count} disagrees with last offset delta "
                f"{header.last_offset_delta}",
            )
        headers.append(header)
        pos = end
    if not headers:
        raise InvalidBatchError(ErrorCode.INVALID_RECORD, "produce request carries no record batch")
    return headers


def scan_batches(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for each complete, valid batch from ``pos``; stop at the first
    torn or corrupt one. Log recovery truncates to the end of the last batch yielded."""
    view = memoryview(buf)
    total = len(view)
    while total - pos >= BATCH_HEADER_SIZE:
        header = read_batch_header(view, pos)
        end = pos + header.size_in_bytes
        if (
            header.magic != CURRENT_MAGIC
            or header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD
            or end > total
            or header.last_offset_delta < 0
        ):
            return
        if check_crc and crc32c(view[pos + ATTRIBUTES_OFFSET : end]) != header.crc:
            return
        yield pos, header
        pos = end


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign offsets by rewriting ``baseOffset`` in place; the CRC does not cover it."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


# --- varints (zig-zag, as records use them) -------------------------------------------------------


def _write_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        if pos >= len(buf):
            raise ValueError("varint runs past the end of the record")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
    return (result >> 1) ^ -(result & 1), pos


class Record(NamedTuple):
    """One record to build into a batch, or one decoded from a batch (``offset``/``timestamp`` set)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    offset: int = -1
    timestamp: int = NO_TIMESTAMP


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _encode_record(out: bytearray, record: Record, timestamp_delta: int, offset_delta: int) -> None:
    """Append one record (length-prefixed) to ``out``; its attributes byte is unused (0) in v2."""
    rec = bytearray(b"\x00")
    _write_varint(rec, timestamp_delta)
    _write_varint(rec, offset_delta)
    _write_bytes(rec, record.key)
    _write_bytes(rec, record.value)
    _write_varint(rec, len(record.headers))
    for name, value in record.headers:
        _write_bytes(rec, name.encode("utf-8"))
        _write_bytes(rec, value)
    _write_varint(out, len(rec))
    out += rec


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    timestamp_ms: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytearray:
    """Build one uncompressed RecordBatch v2. Every record gets ``timestamp_ms`` (or its own
    ``timestamp`` when set) and consecutive offset deltas."""
    assert records, "a record batch holds at least one record"
    body = bytearray()
    max_timestamp = timestamp_ms
    for delta, record in enumerate(records):
        ts = record.timestamp if record.timestamp != NO_TIMESTAMP else timestamp_ms
        max_timestamp = max(max_timestamp, ts)
        _encode_record(body, record, ts - timestamp_ms, delta)
    attributes = (TRANSACTIONAL_MASK if is_transactional else 0) | (CONTROL_MASK if is_control else 0)
    out = bytearray(BATCH_HEADER_SIZE) + body
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        len(records) - 1,
        timestamp_ms,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


def read_nullable_bytes(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise ValueError("record field runs past the end of the record")
    return bytes(buf[pos:end]), end


def inflate_records(header: BatchHeader, batch: bytes | bytearray | memoryview) -> bytes | memoryview:
    """The records section of ``batch`` (whole, header included), decompressed when the batch is.

    Raises ``ValueError`` (:class:`compression.CodecError`) naming the codec and the batch when it is
    unknown or the body does not inflate.
    """
    body = memoryview(batch)[BATCH_HEADER_SIZE : header.size_in_bytes]
    codec = header.compression_type
    if not codec:
        return body
    try:
        return compression.decompress(codec, body)
    except compression.CodecError as exc:
        raise compression.CodecError(f"batch at offset {header.base_offset}: {exc}") from None


def in_codec(headers: Sequence[BatchHeader], codec: int) -> bool:
    """Whether every batch is in ``codec`` already (control batches count as in any): the hot path's one
    question about a topic's compression.type, asked of the headers alone."""
    for header in headers:
        attributes = header.attributes
        if attributes & COMPRESSION_MASK != codec and not attributes & CONTROL_MASK:
            return False
    return True


def recompress_batches(
    records: bytes | bytearray | memoryview, headers: Sequence[BatchHeader], codec: int, level: int | None
) -> tuple[bytearray, list[BatchHeader]]:
    """The batches with their records in ``codec`` (at ``level``), as Kafka's LogValidator rebuilds a
    batch whose codec is not the topic's compression.type (validateMessagesAndAssignOffsetsCompressed,
    buildRecordsAndAssignOffsets): the records section is inflated and compressed again, while the base
    offset, last offset delta, timestamps, producer id, epoch, base sequence, partition leader epoch and
    the transactional and timestamp-type bits stay; the CRC is computed anew. Batches in ``codec``
    already and control batches (LogValidator never compresses them) are copied as they are; when
    :func:`in_codec` says every batch is, the caller appends the bytes as they came instead (the hot
    path). Kafka refuses a compressed produce with more than one batch per partition
    (getFirstBatchAndMaybeValidateNoMoreBatches); pykraft takes several, as it does uncompressed, and
    rebuilds each on its own, so each keeps its producer fields."""
    view = memoryview(records)
    out = bytearray()
    rebuilt: list[BatchHeader] = []
    pos = 0
    for header in headers:
        end = pos + header.size_in_bytes
        if header.compression_type == codec or header.is_control:
            out += view[pos:end]
            rebuilt.append(header)
            pos = end
            continue
        body = inflate_records(header, view[pos:end])
        if codec != compression.NONE:
            body = compression.compress(codec, body, level)
        start = len(out)
        out += view[pos : pos + BATCH_HEADER_SIZE]
        out += body
        attributes = (header.attributes & ~COMPRESSION_MASK) | codec
        batch_length = len(out) - start - LOG_OVERHEAD
        _INT32.pack_into(out, start + 8, batch_length)
        _ATTRIBUTES.pack_into(out, start + ATTRIBUTES_OFFSET, attributes)
        crc = crc32c(memoryview(out)[start + ATTRIBUTES_OFFSET :])
        struct.pack_into(">I", out, start + CRC_OFFSET, crc)
        rebuilt.append(header._replace(batch_length=batch_length, attributes=attributes, crc=crc))
        pos = end
    return out, rebuilt


def decode_records(batch: bytes | bytearray | memoryview) -> list[Record]:
    """Decode the records of one batch (tools, the metadata log, tests; never the data hot path).

    Compressed batches are inflated (:mod:`pykraft.protocol.compression`). Raises ``ValueError`` on
    malformed records.
    """
    view = memoryview(batch)
    header = read_batch_header(view)
    # Indexing and slicing bytes is cheaper than a memoryview, and slices are bytes.
    body = bytes(inflate_records(header, view[: header.size_in_bytes]))
    records: list[Record] = []
    size = len(body)
    base_offset, base_timestamp = header.base_offset, header.base_timestamp
    # LogAppendTime: every record's timestamp is the batch's maxTimestamp, as Kafka's consumer reports it.
    append_time = header.max_timestamp if header.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME else None
    pos = 0
    try:
        for _ in range(header.record_count):
            # One- and two-byte varints inline (zig-zag: z >> 1 ^ -(z & 1)); longer ones take _read_varint.
            b = body[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif body[pos + 1] < 0x80:
                z = (b & 0x7F) | (body[pos + 1] << 7)
                length, pos = (z >> 1) ^ -(z & 1), pos + 2
            else:
                length, pos = _read_varint(body, pos)
            end = pos + length
            if length < 0 or end > size:
                raise ValueError(f"record length {length} runs past the end of the batch")
            p = pos + 1  # record attributes
            b = body[p]
            if b < 0x80:
                ts_delta, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                ts_delta, p = _read_varint(body, p)
            b = body[p]
            if b < 0x80:
                offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
            elif body[p + 1] < 0x80:
                z = (b & 0x7F) | (body[p + 1] << 7)
                offset_delta, p = (z >> 1) ^ -(z & 1), p + 2
            else:
                offset_delta, p = _read_varint(body, p)
            if body[p] == 1:  # null key
                key: bytes | None = None
                p += 1
            else:
                key, p = read_nullable_bytes(body, p)
            b = body[p]
            if b < 0x80:
                z, q = b, p + 1
            elif body[p + 1] < 0x80:
                z, q = (b & 0x7F) | (body[p + 1] << 7), p + 2
            else:
                z, q = 1, p
            if not z & 1:  # a non-negative length (a null value or a long varint takes read_nullable_bytes)
                value: bytes | None = body[q : q + (z >> 1)]
                p = q + (z >> 1)
            else:
                value, p = read_nullable_bytes(body, p)
            if p < end and body[p] == 0:  # no headers
                headers: tuple[tuple[str, bytes | None], ...] = ()
                p += 1
            else:
                count, p = _read_varint(body, p)
                hdrs: list[tuple[str, bytes | None]] = []
                for _h in range(count):
                    name, p = read_nullable_bytes(body, p)
                    hval, p = read_nullable_bytes(body, p)
                    hdrs.append(((name or b"").decode("utf-8"), hval))
                headers = tuple(hdrs)
            if p > end:
                raise ValueError("record field runs past the end of the record")
            if p != end:
                raise ValueError(f"{end - p} byte(s) of garbage after a record")
            timestamp = base_timestamp + ts_delta if append_time is None else append_time
            records.append(Record(key, value, headers, base_offset + offset_delta, timestamp))
            pos = end
    except IndexError:
        raise ValueError("record runs past the end of the batch") from None
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} byte(s) of garbage after the last record")
    return records


def rewrite_batch(
    header: BatchHeader, records: Sequence[Record], *, delete_horizon_ms: int | None = None
) -> bytearray:
    """The batch ``header`` heads, holding only ``records`` (decoded from it), as Kafka's log cleaner
    rewrites a batch (MemoryRecords.filterTo): the same base offset and last offset delta, so offsets
    keep their gaps and a producer's sequence range stays whole; the same producer id, epoch, base
    sequence, leader epoch, attributes, max timestamp and codec. ``delete_horizon_ms`` (KIP-534) takes
    the base timestamp's place with the delete-horizon attribute; every record keeps its timestamp.
    No records: Kafka's empty batch, a header alone, kept so the producer's last sequence survives."""
    attributes = header.attributes
    base_timestamp = header.base_timestamp
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = delete_horizon_ms
    body = bytearray()
    for record in records:
        _encode_record(body, record, record.timestamp - base_timestamp, record.offset - header.base_offset)
    codec = header.compression_type
    if not records:
        attributes &= ~COMPRESSION_MASK
    elif codec:
        body = bytearray(compression.compress(codec, body))
    out = bytearray(BATCH_HEADER_SIZE) + body
    _HEADER.pack_into(
        out,
        0,
        header.base_offset,
        len(out) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        header.last_offset_delta,
        base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(records),
    )
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return out


# --- control records (ControlRecordType.java): key = version int16 (0) + type int16 ----------------------

CONTROL_KEY_VERSION = 0
CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER_VALUE = struct.Struct(">hi")  # version int16 (0), coordinator epoch int32


def control_key(control_type: int) -> bytes:
    return _CONTROL_KEY.pack(CONTROL_KEY_VERSION, control_type)


def control_type_of(key: bytes | None) -> int:
    """The control type of a control record's key; -1 (unknown) when the key is malformed."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return -1
    _version, control_type = _CONTROL_KEY.unpack_from(key)
    return int(control_type)


def end_txn_marker(commit: bool, coordinator_epoch: int) -> Record:
    """Kafka's EndTransactionMarker: the one record of a COMMIT/ABORT control batch."""
    return Record(
        control_key(CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT),
        _END_TXN_MARKER_VALUE.pack(0, coordinator_epoch),
    )


def is_abort_marker_batch(batch: bytes | bytearray | memoryview) -> bool:
    """A control batch whose EndTransactionMarker says ABORT."""
    records = decode_records(batch)
    return bool(records) and control_type_of(records[0].key) == CONTROL_TYPE_ABORT


def committed_batches(
    records: bytes | bytearray | memoryview,
    batches: Sequence[tuple[int, BatchHeader]],
    aborted_transactions: Sequence[tuple[int, int]] | None,
) -> list[tuple[int, BatchHeader]]:
    """The data batches of a Fetch answer a consumer may see: control batches never, and with
    read_committed (``aborted_transactions`` a list of (producer id, first offset)) not the batches of
    those aborted transactions. The Java consumer's walk: in offset order, a producer counts as aborted
    once a batch ends at or past its aborted transaction's first offset, its transactional batches are
    skipped, and its ABORT marker ends that (a later transaction of it may commit)."""
    pending = sorted((first, pid) for pid, first in aborted_transactions or ())
    aborted_producers: set[int] = set()
    out: list[tuple[int, BatchHeader]] = []
    for position, header in batches:
        if aborted_transactions is not None:
            while pending and pending[0][0] <= header.last_offset:
                aborted_producers.add(pending.pop(0)[1])
        if header.is_control:
            if header.producer_id in aborted_producers and is_abort_marker_batch(
                records[position : position + header.size_in_bytes]
            ):
                aborted_producers.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborted_producers:
            continue
        out.append((position, header))
    return out
