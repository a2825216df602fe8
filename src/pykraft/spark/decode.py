"""Stored RecordBatch v2 bytes -> Arrow RecordBatches with the Spark Kafka source's schema.

This is the source's hot path, so no Python object is made per record (pyspark-facts.md §3: Arrow
built from buffers reads ~1.7x as fast as Arrow built from Python lists):

1. ``_walk_records``, a numba-compiled loop, walks every record of a run of batches once and writes
   each record's field positions, lengths and deltas into one int64 table;
2. numpy turns the table and the batch headers into the fixed-width columns;
3. keys and values are gathered by one Arrow ``take`` over a "gapped" binary array whose offsets
   alternate record field / bytes between fields, laid over the stored bytes without copying them.

Why numba: the walk is sequential (a record's position depends on every length before it), so
numpy cannot vectorise it and CPython costs ~0.25 µs a record just to find the starts. Measured on
500k records of 1 KiB, one core: the per-record Python loop this replaced took 1.5 s; numpy
(a Python loop for starts, vectorised fields) 0.22 s; the compiled walk takes 0.03 s, plus 0.05 s
for the gather. The compiled code is cached on disk (``cache=True``), so a new Spark worker loads it
in ~0.2 s instead of compiling. Compressed batches are inflated first and walked the same way.
Control batches (transaction markers) are skipped, so offsets may be sparse. Headers, when asked
for, are the one per-record Python step, and only for records that carry any.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numba
import numpy as np
import pyarrow as pa

from pykraft.protocol.records import (
    BATCH_HEADER_SIZE,
    INT32_MAX,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    BatchHeader,
    inflate_records,
    read_nullable_bytes,
)

BASE_COLUMNS = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
HEADERS_COLUMN = "headers array<struct<key:string,value:binary>>"
PRODUCER_COLUMNS = "producerId long, producerEpoch int, sequence int"

# Rows per RecordBatch handed to Spark: large enough to amortise the JVM crossing (pyspark-facts.md §3
# measured 2k-50k; 8k-10k was best).
DEFAULT_ROWS_PER_BATCH = 8192
# Arrow binary arrays use int32 offsets: a run of batches decoded together spans less than this.
_MAX_RUN_BYTES = 2**31 - 1


class CorruptRecordError(ValueError):
    """A stored batch's records do not parse; the message names the batch's base offset."""


def schema_ddl(include_headers: bool, include_producer: bool) -> str:
    parts = [BASE_COLUMNS]
    if include_headers:
        parts.append(HEADERS_COLUMN)
    if include_producer:
        parts.append(PRODUCER_COLUMNS)
    return ", ".join(parts)


# Rows of the table _walk_records fills, one column per record.
_TS_DELTA, _OFFSET_DELTA, _KEY_START, _KEY_LENGTH, _VALUE_START, _VALUE_LENGTH = range(6)
_HEADER_COUNT, _HEADERS_START, _RECORD_END = range(6, 9)
_FIELDS = 9


@numba.njit(inline="always")
def _varint(data: np.ndarray, pos: int, limit: int) -> tuple[int, int]:
    """The zig-zag varint at ``pos``, and the position after it; position -1 if it runs past ``limit``."""
    z = 0
    shift = 0
    while True:
        if pos >= limit or shift > 63:
            return 0, -1
        b = data[pos]
        pos += 1
        z |= int(b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7


@numba.njit(cache=True, nogil=True)
def _walk_records(
    data: np.ndarray, los: np.ndarray, his: np.ndarray, counts: np.ndarray, table: np.ndarray
) -> int:
    """Fill ``table[:, i]`` for every record of batches ``data[los[b]:his[b]]``; return 0, or
    1 + the index of the first batch whose records do not parse or do not fill it exactly.

    Record: length, attributes(1), timestampDelta, offsetDelta, key, value, headers (DefaultRecord)."""
    i = 0
    for b in range(len(los)):
        pos = los[b]
        hi = his[b]
        for _ in range(counts[b]):
            length, pos = _varint(data, pos, hi)
            if pos < 0 or length <= 0 or pos + length > hi:
                return b + 1
            end = pos + length
            pos += 1  # attributes: unused
            ts_delta, pos = _varint(data, pos, end)
            if pos < 0:
                return b + 1
            offset_delta, pos = _varint(data, pos, end)
            if pos < 0:
                return b + 1
            key_length, pos = _varint(data, pos, end)
            if pos < 0 or key_length < -1:
                return b + 1
            key_start = pos
            pos += max(key_length, 0)
            value_length, pos = _varint(data, pos, end)
            if pos < 0 or value_length < -1:
                return b + 1
            value_start = pos
            pos += max(value_length, 0)
            header_count, pos = _varint(data, pos, end)
            # a header is at least two varints; with none, the record ends right here
            if (
                pos < 0
                or header_count < 0
                or pos + 2 * header_count > end
                or (header_count == 0 and pos != end)
            ):
                return b + 1
            table[_TS_DELTA, i] = ts_delta
            table[_OFFSET_DELTA, i] = offset_delta
            table[_KEY_START, i] = key_start
            table[_KEY_LENGTH, i] = key_length
            table[_VALUE_START, i] = value_start
            table[_VALUE_LENGTH, i] = value_length
            table[_HEADER_COUNT, i] = header_count
            table[_HEADERS_START, i] = pos
            table[_RECORD_END, i] = end
            i += 1
            pos = end
        if pos != hi:
            return b + 1
    return 0


def _gather(data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Binary array of ``data[starts[i] : starts[i] + lengths[i]]`` (null where the length is -1).

    The fields lie in order and apart in ``data``; an array whose elements alternate field and gap is
    laid over ``data`` as is, and ``take`` copies the even elements out in C++."""
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    sizes = np.maximum(lengths, 0)
    bounds = np.empty(2 * n, np.int32)
    bounds[0::2] = starts
    bounds[1::2] = starts + sizes
    gapped = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds), data])
    out = gapped.take(pa.array(np.arange(0, 2 * n - 1, 2, dtype=np.int32)))
    valid = lengths >= 0
    if valid.all():
        return out
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [bitmap, out.buffers()[1], out.buffers()[2]])


def _repeated_string(text: str, n: int) -> pa.Array:
    raw = text.encode("utf-8")
    offsets = np.arange(0, len(raw) * (n + 1), len(raw), dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def _read_headers(view: memoryview, pos: int, end: int, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(count):
        name, pos = read_nullable_bytes(view, pos)
        value, pos = read_nullable_bytes(view, pos)
        out.append({"key": (name or b"").decode("utf-8"), "value": value})
    if pos != end:
        raise CorruptRecordError(f"a record's headers end {pos - end} byte(s) away from its length")
    return out


class ArrowDecoder:
    """Decodes stored batches of one topic partition into RecordBatches of ``arrow_schema``."""

    def __init__(
        self,
        arrow_schema: pa.Schema,
        topic: str,
        partition: int,
        *,
        include_headers: bool,
        include_producer: bool,
        max_rows_per_batch: int = DEFAULT_ROWS_PER_BATCH,
    ) -> None:
        self.max_rows_per_batch = max_rows_per_batch
        self.arrow_schema = arrow_schema
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.include_producer = include_producer

    def decode(
        self, buf: Any, batches: Sequence[tuple[int, BatchHeader]], start: int, end: int
    ) -> Iterator[pa.RecordBatch]:
        """RecordBatches of the records of ``batches`` (positions in ``buf``, a buffer-protocol
        object, headers from ``scan_batches``) whose offsets lie in ``[start, end)``."""
        view = memoryview(buf).cast("B")  # unsigned bytes: a pyarrow Buffer exports format "b"
        run: list[tuple[int, int, BatchHeader]] = []
        run_lo = 0
        for pos, header in batches:
            if header.is_control or header.next_offset <= start or header.base_offset >= end:
                continue
            lo, hi = pos + BATCH_HEADER_SIZE, pos + header.size_in_bytes
            if header.compression_type:
                if run:
                    yield from self._run(view, run, start, end)
                    run = []
                try:
                    body = inflate_records(header, view[pos:hi])
                except ValueError as exc:
                    raise CorruptRecordError(str(exc)) from None
                yield from self._run(memoryview(body), [(0, len(body), header)], start, end)
                continue
            if run and hi - run_lo > _MAX_RUN_BYTES:
                yield from self._run(view, run, start, end)
                run = []
            if not run:
                run_lo = lo
            run.append((lo, hi, header))
        if run:
            yield from self._run(view, run, start, end)

    def _run(
        self, view: memoryview, run: list[tuple[int, int, BatchHeader]], start: int, end: int
    ) -> Iterator[pa.RecordBatch]:
        """Decode batches that lie in order in ``view``, spanning under 2 GiB."""
        base_pos = run[0][0]
        region = view[base_pos : run[-1][1]]
        headers = [h for _lo, _hi, h in run]
        counts = np.array([h.record_count for h in headers], np.int64)
        table = np.empty((_FIELDS, int(counts.sum())), np.int64)
        bad = _walk_records(
            np.frombuffer(region, np.uint8),
            np.array([lo - base_pos for lo, _hi, _h in run], np.int64),
            np.array([hi - base_pos for _lo, hi, _h in run], np.int64),
            counts,
            table,
        )
        if bad:
            raise CorruptRecordError(
                f"batch at offset {headers[bad - 1].base_offset}: its records do not parse or do not fill it"
            )
        batch_of = np.repeat(np.arange(len(run)), counts)

        def per_batch(values: list[int], dtype: Any) -> np.ndarray:
            return np.asarray(values, dtype=dtype)[batch_of]

        offsets = per_batch([h.base_offset for h in headers], np.int64) + table[_OFFSET_DELTA]
        keep = (offsets >= start) & (offsets < end)
        if not keep.all():
            selected = np.flatnonzero(keep)
            offsets, batch_of, table = offsets[selected], batch_of[selected], table[:, selected]
        ts_delta, offset_delta, key_start, key_length, value_start, value_length = table[:6]
        header_count, headers_start, record_end = table[6:]
        ts_type = per_batch([h.timestamp_type for h in headers], np.int32)
        timestamps_us = 1000 * np.where(
            ts_type == TIMESTAMP_TYPE_LOG_APPEND_TIME,
            per_batch([h.max_timestamp for h in headers], np.int64),
            per_batch([h.base_timestamp for h in headers], np.int64) + ts_delta,
        )
        producer: list[np.ndarray] = []
        if self.include_producer:
            base_sequence = per_batch([h.base_sequence for h in headers], np.int64)
            sequence = base_sequence + offset_delta
            sequence = np.where(
                sequence > INT32_MAX, sequence - INT32_MAX - 1, sequence
            )  # wraps past Int.MAX
            sequence = np.where(base_sequence == NO_SEQUENCE, NO_SEQUENCE, sequence)
            producer = [
                per_batch([h.producer_id for h in headers], np.int64),
                per_batch([h.producer_epoch for h in headers], np.int32),
                sequence.astype(np.int32),
            ]
        schema = self.arrow_schema
        stored = pa.py_buffer(region)
        timestamp_type = schema.field("timestamp").type
        for lo in range(0, len(offsets), self.max_rows_per_batch):
            rows = slice(lo, lo + self.max_rows_per_batch)
            n = len(offsets[rows])
            arrays = [
                _gather(stored, key_start[rows], key_length[rows]),
                _gather(stored, value_start[rows], value_length[rows]),
                _repeated_string(self.topic, n),
                pa.array(np.full(n, self.partition, np.int32)),
                pa.array(offsets[rows]),
                pa.array(timestamps_us[rows]).view(timestamp_type),
                pa.array(ts_type[rows]),
            ]
            if self.include_headers:
                arrays.append(
                    self._headers(region, header_count[rows], headers_start[rows], record_end[rows])
                )
            arrays += [pa.array(column[rows]) for column in producer]
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    def _headers(
        self, region: memoryview, counts: np.ndarray, after_count: np.ndarray, ends: np.ndarray
    ) -> pa.Array:
        rows: list[list[dict[str, Any]]] = [[] for _ in range(len(counts))]
        for i in np.flatnonzero(counts).tolist():
            rows[i] = _read_headers(region, int(after_count[i]), int(ends[i]), int(counts[i]))
        return pa.array(rows, self.arrow_schema.field("headers").type)
