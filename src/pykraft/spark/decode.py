"""Stored RecordBatch v2 bytes -> Arrow columns with the Spark Kafka source's schema.

The per-record loop is the source's hot path, so uncompressed batches are decoded here with a
single-byte varint fast path (most lengths and deltas of small records fit 7 bits) straight into
column lists; compressed batches go through ``protocol.records.decode_records``. Control batches
(transaction markers, snapshot header/footer) are skipped, so offsets may be sparse.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pykraft.protocol.records import (
    BATCH_HEADER_SIZE,
    INT32_MAX,
    NO_SEQUENCE,
    BatchHeader,
    decode_records,
    scan_batches,
)

BASE_COLUMNS = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
HEADERS_COLUMN = "headers array<struct<key:string,value:binary>>"
PRODUCER_COLUMNS = "producerId long, producerEpoch int, sequence int"


def schema_ddl(include_headers: bool, include_producer: bool) -> str:
    parts = [BASE_COLUMNS]
    if include_headers:
        parts.append(HEADERS_COLUMN)
    if include_producer:
        parts.append(PRODUCER_COLUMNS)
    return ", ".join(parts)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


@dataclass
class Columns:
    """Column lists for one Arrow batch; ``to_arrow`` turns them into a RecordBatch."""

    include_headers: bool
    include_producer: bool
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    timestamps_ms: list[int] = field(default_factory=list)
    timestamp_types: list[int] = field(default_factory=list)
    headers: list[list[dict[str, Any]]] = field(default_factory=list)
    producer_ids: list[int] = field(default_factory=list)
    producer_epochs: list[int] = field(default_factory=list)
    sequences: list[int] = field(default_factory=list)
    value_bytes: int = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def add_batch(self, buf: memoryview | Any, pos: int, header: BatchHeader, start: int, end: int) -> None:
        """Append the records of the batch at ``buf[pos:]`` whose offsets lie in ``[start, end)``."""
        if header.is_control or header.next_offset <= start or header.base_offset >= end:
            return
        base = header.base_offset
        ts_type = header.timestamp_type
        n_before = len(self.offsets)
        want_headers = self.include_headers
        if header.compression_type:
            for rec in decode_records(buf[pos : pos + header.size_in_bytes]):
                if start <= rec.offset < end:
                    self.keys.append(rec.key)
                    self.values.append(rec.value)
                    self.value_bytes += len(rec.value) if rec.value else 0
                    self.offsets.append(rec.offset)
                    self.timestamps_ms.append(rec.timestamp)
                    if want_headers:
                        self.headers.append([{"key": k, "value": v} for k, v in rec.headers])
        else:
            body = bytes(buf[pos + BATCH_HEADER_SIZE : pos + header.size_in_bytes])
            base_ts = header.base_timestamp
            keys, values, offsets, stamps = self.keys, self.values, self.offsets, self.timestamps_ms
            p = 0
            nbytes = 0
            for _ in range(header.record_count):
                # record: length, attributes(1), timestampDelta, offsetDelta, key, value, headers
                b = body[p]
                if b < 0x80:
                    length = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    length, p = _varint(body, p)
                rec_end = p + length
                p += 1
                b = body[p]
                if b < 0x80:
                    ts_delta = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    ts_delta, p = _varint(body, p)
                b = body[p]
                if b < 0x80:
                    off_delta = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    off_delta, p = _varint(body, p)
                offset = base + off_delta
                if not start <= offset < end:
                    p = rec_end
                    continue
                b = body[p]
                if b < 0x80:
                    klen = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    klen, p = _varint(body, p)
                if klen < 0:
                    keys.append(None)
                else:
                    keys.append(body[p : p + klen])
                    p += klen
                b = body[p]
                if b < 0x80:
                    vlen = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    vlen, p = _varint(body, p)
                if vlen < 0:
                    values.append(None)
                else:
                    values.append(body[p : p + vlen])
                    p += vlen
                    nbytes += vlen
                offsets.append(offset)
                stamps.append(base_ts + ts_delta)
                if want_headers:
                    count, p = _varint(body, p)
                    hdrs: list[dict[str, Any]] = []
                    for _h in range(count):
                        n, p = _varint(body, p)
                        name = body[p : p + n].decode("utf-8")
                        p += n
                        n, p = _varint(body, p)
                        if n < 0:
                            hvalue = None
                        else:
                            hvalue = body[p : p + n]
                            p += n
                        hdrs.append({"key": name, "value": hvalue})
                    self.headers.append(hdrs)
                if p > rec_end:
                    raise ValueError(f"record at offset {offset} runs past its length")
                p = rec_end
            self.value_bytes += nbytes
        added = len(self.offsets) - n_before
        self.timestamp_types.extend([ts_type] * added)
        if self.include_producer:
            self.producer_ids.extend([header.producer_id] * added)
            self.producer_epochs.extend([header.producer_epoch] * added)
            if header.base_sequence == NO_SEQUENCE:
                self.sequences.extend([NO_SEQUENCE] * added)
            else:
                for off in self.offsets[n_before:]:
                    seq = header.base_sequence + (off - base)
                    self.sequences.append(seq if seq <= INT32_MAX else seq - INT32_MAX - 1)

    def to_arrow(self, arrow_schema: Any, topic: str, partition: int) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        n = len(self.offsets)
        stamps = pc.multiply(pa.array(self.timestamps_ms, pa.int64()), 1000)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            stamps.view(arrow_schema.field("timestamp").type),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, arrow_schema.field("headers").type))
        if self.include_producer:
            arrays.append(pa.array(self.producer_ids, pa.int64()))
            arrays.append(pa.array(self.producer_epochs, pa.int32()))
            arrays.append(pa.array(self.sequences, pa.int32()))
        return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


def decode_into(
    columns: Columns, buf: bytes | bytearray | memoryview, start: int, end: int, *, check_crc: bool = True
) -> int:
    """Add every record of ``buf``'s complete batches with offset in ``[start, end)``; return the
    offset after the last complete batch seen (``start`` if there was none)."""
    view = memoryview(buf)
    next_offset = start
    for pos, header in scan_batches(view, check_crc=check_crc):
        columns.add_batch(view, pos, header, start, end)
        next_offset = max(next_offset, header.next_offset)
        if next_offset >= end:
            break
    return next_offset
