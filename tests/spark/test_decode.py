"""spark.decode.ArrowDecoder (stored batches -> Arrow, vectorised) against decode_records, the
per-record reference decoder: every column, across varint size boundaries, null keys and values,
headers, compressed and control batches, LogAppendTime, offset-range cuts, and corrupt records."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from pykraft.protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    TIMESTAMP_TYPE_MASK,
    Record,
    build_batch,
    decode_records,
    scan_batches,
)
from pykraft.spark.decode import ArrowDecoder, CorruptRecordError
from pykraft.spark.schema import schema_ddl

pa = pytest.importorskip("pyarrow")

TOPIC = "t\u00e9st"
NOW = 1_700_000_000_000


_SCHEMAS: dict[tuple[bool, bool], Any] = {}


@pytest.fixture(scope="module", autouse=True)
def _arrow_schemas(spark: Any) -> None:
    """The Arrow schemas the Python data source worker checks batches against (DDL parsing needs the JVM)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    for key in [(h, p) for h in (False, True) for p in (False, True)]:
        _SCHEMAS[key] = to_arrow_schema(_parse_datatype_string(schema_ddl(*key)), timezone="UTC")


def _schema(headers: bool, producer: bool) -> Any:
    return _SCHEMAS[(headers, producer)]


def _decode(buf: bytes, start: int = 0, end: int = 2**62, headers: bool = True, producer: bool = True) -> Any:
    decoder = ArrowDecoder(
        _schema(headers, producer), TOPIC, 3, include_headers=headers, include_producer=producer
    )
    batches = [*decoder.decode(buf, list(scan_batches(buf)), start, end), *decoder.finish()]
    if not batches:
        return []
    return pa.Table.from_batches(batches).to_pylist()


def _expected(buf: bytes, start: int = 0, end: int = 2**62) -> list[dict[str, Any]]:
    rows = []
    for pos, header in scan_batches(buf):
        if header.is_control:
            continue
        for r in decode_records(buf[pos : pos + header.size_in_bytes]):
            if not start <= r.offset < end:
                continue
            seq = (
                -1
                if header.base_sequence == -1
                else (header.base_sequence + r.offset - header.base_offset) % 2**31
            )
            rows.append(
                {
                    "key": r.key,
                    "value": r.value,
                    "topic": TOPIC,
                    "partition": 3,
                    "offset": r.offset,
                    "timestamp_ms": r.timestamp,
                    "timestampType": header.timestamp_type,
                    "headers": [{"key": k, "value": v} for k, v in r.headers] or None,  # as format("kafka")
                    "producerId": header.producer_id,
                    "producerEpoch": header.producer_epoch,
                    "sequence": seq,
                }
            )
    return rows


def _normalise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        row = dict(row)
        ts = row.pop("timestamp")
        row["timestamp_ms"] = int(ts.timestamp() * 1000)
        out.append(row)
    return out


_BYTES = st.one_of(
    st.none(),
    st.integers(0, 70).map(bytes),
    st.sampled_from([63, 64, 65, 8191, 8192, 8193]).map(bytes),
)
_HEADERS = st.lists(st.tuples(st.text(max_size=5), _BYTES), max_size=2).map(tuple)
_BATCH = st.lists(st.tuples(_BYTES, _BYTES, _HEADERS, st.integers(-5000, 5000)), min_size=1, max_size=150)


@settings(max_examples=120, deadline=None)
@given(
    st.lists(_BATCH, min_size=1, max_size=4),
    st.integers(0, 2**40),
    st.integers(0, 2**31 - 1),
    st.data(),
)
def test_decoder__matches_the_reference_decoder(
    batches: list[list[Any]], base: int, base_sequence: int, data: st.DataObject
) -> None:
    buf = bytearray()
    offset = base
    for specs in batches:
        records = [Record(k, v, h, timestamp=NOW + ts) for k, v, h, ts in specs]
        buf += build_batch(
            records,
            base_offset=offset,
            timestamp_ms=NOW,
            producer_id=77,
            producer_epoch=2,
            base_sequence=base_sequence,
        )
        offset += len(records)
    raw = bytes(buf)
    start = data.draw(st.integers(base, offset))
    end = data.draw(st.integers(start, offset + 1))
    assert _normalise(_decode(raw, start, end)) == _expected(raw, start, end)


def test_decoder__without_optional_columns() -> None:
    raw = bytes(build_batch([Record(b"k", b"v", (("h", b"x"),)), Record(None, None)], timestamp_ms=NOW))
    rows = _decode(raw, headers=False, producer=False)
    assert [(r["key"], r["value"], r["offset"]) for r in rows] == [(b"k", b"v", 0), (None, None, 1)]
    assert "headers" not in rows[0] and "producerId" not in rows[0]


def test_decoder__skips_control_batches_and_reads_compressed_ones() -> None:
    marker = build_batch(
        [Record(b"\x00\x00\x00\x00", b"\x00" * 6)], base_offset=0, timestamp_ms=NOW, is_control=True
    )
    builder = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 20)  # magic 2, gzip
    for i in range(300):
        builder.append(i, NOW + i, b"key-%d" % i, b"value-%d" % i * 7, [("h", b"%d" % i)])
    gz = bytearray(builder.build())
    struct.pack_into(">q", gz, 0, 1)  # base offset 1, after the marker
    raw = bytes(marker + gz)
    rows = _normalise(_decode(raw))
    assert len(rows) == 300 and rows[0]["offset"] == 1 and rows[-1]["value"] == b"value-299" * 7
    assert rows == _expected(raw)


def test_decoder__log_append_time_uses_the_batch_max_timestamp() -> None:
    batch = build_batch([Record(b"a", b"1"), Record(b"b", b"2")], timestamp_ms=NOW)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, TIMESTAMP_TYPE_MASK)
    struct.pack_into(">q", batch, 35, NOW + 999)  # maxTimestamp
    from crc32c import crc32c

    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    rows = _normalise(_decode(bytes(batch)))
    assert [(r["timestamp_ms"], r["timestampType"]) for r in rows] == [(NOW + 999, 1), (NOW + 999, 1)]
    assert rows == _expected(bytes(batch))


def test_decoder__sequence_wraps_past_int_max() -> None:
    raw = bytes(
        build_batch([Record(b"a", b"1")] * 3, timestamp_ms=NOW, producer_id=5, base_sequence=2**31 - 2)
    )
    assert [r["sequence"] for r in _decode(raw)] == [2**31 - 2, 2**31 - 1, 0]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b.__setitem__(61, 0x7E), id="record length too large"),
        pytest.param(lambda b: b.__setitem__(61 + 4, 0x7E), id="key length past the record"),
        pytest.param(lambda b: b.__setitem__(-1, 0x02), id="header count past the record"),
    ],
)
def test_decoder__corrupt_records_fail_with_the_batch_offset(damage: Any) -> None:
    batch = build_batch([Record(b"k", b"v"), Record(b"k2", b"v2")], base_offset=40, timestamp_ms=NOW)
    damage(batch)
    decoder = ArrowDecoder(_schema(False, False), TOPIC, 0, include_headers=False, include_producer=False)
    header = next(iter(scan_batches(bytes(batch), check_crc=False)))[1]
    with pytest.raises(CorruptRecordError, match="offset 40"):
        list(decoder.decode(bytes(batch), [(0, header)], 0, 100))


def test_decoder__reads_from_a_pyarrow_buffer() -> None:
    """Segment files arrive as a pyarrow memory map, whose buffer exports signed bytes ("b")."""
    raw = bytes(build_batch([Record(b"k" * 200, b"v" * 300)] * 3, timestamp_ms=NOW))
    decoder = ArrowDecoder(_schema(False, False), TOPIC, 0, include_headers=False, include_producer=False)
    buffer = pa.py_buffer(raw)
    [batch] = [*decoder.decode(buffer, list(scan_batches(buffer)), 0, 10), *decoder.finish()]
    assert batch.column("value").to_pylist() == [b"v" * 300] * 3


def _many_batches(seed: int, batches: int, big_every: int = 0) -> bytes:
    import random

    rng = random.Random(seed)
    buf = bytearray()
    offset = 0
    for b in range(batches):
        size = 9000 if big_every and b % big_every == 0 else rng.choice([0, 5, 63, 64, 200, 1000])
        records = [
            Record(rng.choice([None, b"k%d" % i]), bytes(rng.randrange(size + 1)), timestamp=NOW + i)
            for i in range(rng.randrange(1, 40))
        ]
        buf += build_batch(records, base_offset=offset, timestamp_ms=NOW, producer_id=9, base_sequence=offset)
        offset += len(records)
    return bytes(buf)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("big_every", [0, 17], ids=["short records", "some of 9 KiB"])
def test_decoder__runs_of_many_batches_match_the_reference(seed: int, big_every: int) -> None:
    """Many batches walked in one compiled call, with record lengths of one, two and three varint bytes."""
    raw = _many_batches(seed, 120, big_every)
    assert _normalise(_decode(raw)) == _expected(raw)
    assert _normalise(_decode(raw, 100, 900)) == _expected(raw, 100, 900)


def test_decoder__detects_record_lengths_that_miss_the_batch_end() -> None:
    raw = bytearray(_many_batches(1, 60))
    positions = list(scan_batches(bytes(raw)))
    pos, header = positions[30]
    raw[pos + 61] = 0x02  # first record's length: 1 byte, so the walk ends inside the batch
    decoder = ArrowDecoder(_schema(False, False), TOPIC, 0, include_headers=False, include_producer=False)
    with pytest.raises(CorruptRecordError, match=f"batch at offset {header.base_offset}"):
        list(decoder.decode(bytes(raw), positions, 0, 2**40))


def test_decoder__long_timestamp_deltas() -> None:
    """Timestamp deltas are varlongs: up to ten bytes each way."""
    records = [Record(b"k", b"v", timestamp=NOW + d) for d in (0, 2**40, -(2**40), 2**49)]
    raw = bytes(build_batch(records, timestamp_ms=NOW))
    assert [r["timestamp_ms"] for r in _expected(raw)] == [r.timestamp for r in records]
    decoder = ArrowDecoder(_schema(False, False), TOPIC, 0, include_headers=False, include_producer=False)
    [batch] = [*decoder.decode(raw, list(scan_batches(raw)), 0, 10), *decoder.finish()]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [r.timestamp * 1000 for r in records]


def test_decoder__cuts_batches_at_the_row_and_byte_limits() -> None:
    raw = _many_batches(5, 60)
    expected = _expected(raw)
    for limits in ({"max_rows_per_batch": 100}, {"max_bytes_per_batch": 4096}):
        decoder = ArrowDecoder(
            _schema(True, True), TOPIC, 3, include_headers=True, include_producer=True, **limits
        )
        batches = [*decoder.decode(raw, list(scan_batches(raw)), 0, 2**40), *decoder.finish()]
        assert len(batches) > 5
        if "max_rows_per_batch" in limits:
            assert max(b.num_rows for b in batches) < 2 * 100 + 40  # cut after the run that crosses the limit
        assert _normalise(pa.Table.from_batches(batches).to_pylist()) == expected


def _batch_of_raw_records(records: list[bytes], base_offset: int = 7) -> bytes:
    """A valid batch (CRC and all) whose records section is ``records``, each framed by its length."""
    from crc32c import crc32c

    from pykraft.protocol.records import _write_varint

    body = bytearray()
    for rec in records:
        _write_varint(body, len(rec))
        body += rec
    batch = build_batch([Record(b"k", b"v")] * len(records), base_offset=base_offset, timestamp_ms=NOW)
    batch = batch[:61] + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)  # batchLength
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def _raw_record(*fields: int, tail: bytes = b"") -> bytes:
    from pykraft.protocol.records import _write_varint

    out = bytearray(b"\x00")  # attributes
    for value in fields:
        _write_varint(out, value)
    return bytes(out + tail)


_HUGE = 2**62 - 1  # the largest length a zig-zag varint decodes to in an int64


@pytest.mark.parametrize(
    "record",
    [
        pytest.param(_raw_record(0, 0, _HUGE, tail=b"kv\x00"), id="huge key length"),
        pytest.param(_raw_record(0, 0, 1, tail=b"k") + _raw_record(_HUGE)[1:], id="huge value length"),
        pytest.param(_raw_record(0, 0, 1, tail=b"k\x02v") + _raw_record(_HUGE)[1:], id="huge header count"),
    ],
)
def test_decoder__huge_varint_lengths_are_corrupt(record: bytes) -> None:
    """Ten-byte varints far past the record fail its bounds, with or without headers wanted."""
    raw = _batch_of_raw_records([record])
    for headers in (False, True):
        decoder = ArrowDecoder(
            _schema(headers, False), TOPIC, 0, include_headers=headers, include_producer=False
        )
        with pytest.raises(CorruptRecordError, match="offset 7"):
            list(decoder.decode(raw, list(scan_batches(raw)), 0, 100))


def test_decoder__unparseable_header_names_the_record() -> None:
    # one header whose key is not UTF-8
    record = _raw_record(0, 0, 1, tail=b"k\x02v\x02\x02\xff\x02x")
    raw = _batch_of_raw_records([record])
    assert _decode(raw, headers=False)[0]["value"] == b"v"  # without includeHeaders, headers are not read
    decoder = ArrowDecoder(_schema(True, False), TOPIC, 0, include_headers=True, include_producer=False)
    with pytest.raises(CorruptRecordError, match="record at offset 7: its headers do not parse"):
        list(decoder.decode(raw, list(scan_batches(raw)), 0, 100))


def test_decoder__corrupt_compressed_body_names_the_batch() -> None:
    builder = DefaultRecordBatchBuilder(2, 1, False, -1, -1, -1, 1 << 20)  # gzip
    builder.append(0, NOW, b"k", b"v" * 100, [])
    batch = bytearray(builder.build())
    struct.pack_into(">q", batch, 0, 9)
    batch[70:80] = b"\xff" * 10  # inside the gzip stream
    from crc32c import crc32c

    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    raw = bytes(batch)
    decoder = ArrowDecoder(_schema(False, False), TOPIC, 0, include_headers=False, include_producer=False)
    with pytest.raises(CorruptRecordError, match="batch at offset 9: gzip body does not inflate"):
        list(decoder.decode(raw, list(scan_batches(raw)), 0, 100))
