"""decode_records (the metadata log and snapshot reader's record decoder, with one- and two-byte varints
read inline) against build_batch and kafka-python's own batch reader, across varint size boundaries."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from pykraft.protocol.records import Record, build_batch, decode_records

# Lengths around the zig-zag varint boundaries: 1 byte below 64, 2 bytes below 8192, 3 above.
_BYTES = st.one_of(
    st.none(),
    st.integers(0, 70).map(bytes),
    st.sampled_from([63, 64, 65, 8191, 8192, 8193]).map(bytes),
)
_HEADERS = st.lists(st.tuples(st.text(max_size=5), _BYTES), max_size=2).map(tuple)
_RECORDS = st.lists(st.tuples(_BYTES, _BYTES, _HEADERS, st.integers(-5000, 5000)), min_size=1, max_size=80)


@settings(max_examples=150, deadline=None)
@given(_RECORDS, st.integers(0, 2**40))
def test_decode_records__round_trips_and_matches_kafka_python(
    specs: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]], base: int
) -> None:
    now = 1_700_000_000_000
    records = [Record(k, v, h, timestamp=now + ts) for k, v, h, ts in specs]
    batch = bytes(build_batch(records, base_offset=base, timestamp_ms=now))
    decoded = decode_records(batch)
    assert [(r.key, r.value, r.headers) for r in decoded] == [(r.key, r.value, r.headers) for r in records]
    assert [r.offset for r in decoded] == list(range(base, base + len(records)))
    assert [r.timestamp for r in decoded] == [r.timestamp for r in records]
    reference = list(DefaultRecordBatch(batch))
    assert [(r.key, r.value, r.offset, r.timestamp) for r in reference] == [
        (r.key, r.value, r.offset, r.timestamp) for r in decoded
    ]
