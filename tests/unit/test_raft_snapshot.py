"""The snapshot container (kafka-facts §4.1-4.2, §8.11 SnapshotsTest / FileRawSnapshotTest /
SnapshotWriterReaderTest): names, header/footer records, writer and reader, retention choice."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from pykraft.protocol.records import control_type_of, read_batch_header
from pykraft.raft.messages import OffsetAndEpoch
from pykraft.raft.snapshot import (
    BOOTSTRAP_SNAPSHOT_ID,
    CONTROL_TYPE_SNAPSHOT_FOOTER,
    CONTROL_TYPE_SNAPSHOT_HEADER,
    MemorySnapshotStore,
    SnapshotError,
    SnapshotHeader,
    decode_snapshot_footer,
    decode_snapshot_header,
    encode_snapshot_footer,
    encode_snapshot_header,
    inconsistent_snapshot_state,
    iter_batches,
    parse_snapshot_file_name,
    read_snapshot,
    read_snapshot_header,
    retention_delete_before,
    snapshot_file_name,
    write_snapshot,
)

# --- names (§8.11 130-131) ------------------------------------------------------------------------


def test_file_name__kafka_layout() -> None:
    assert snapshot_file_name(OffsetAndEpoch(5120793, 2)) == "00000000000005120793-0000000002.checkpoint"
    assert snapshot_file_name(BOOTSTRAP_SNAPSHOT_ID) == "00000000000000000000-0000000000.checkpoint"


def test_parse__valid_partial_deleted() -> None:
    sid = OffsetAndEpoch(5120793, 2)
    assert parse_snapshot_file_name(snapshot_file_name(sid)) == (sid, False, False)
    assert parse_snapshot_file_name("00000000000005120793-0000000002.checkpoint.part") == (sid, True, False)
    # Kafka's temp file: createTempFile(prefix "<offset>-<epoch>-", suffix ".checkpoint.part").
    assert parse_snapshot_file_name("00000000000005120793-0000000002-8713.checkpoint.part") == (
        sid,
        True,
        False,
    )
    assert parse_snapshot_file_name("00000000000005120793-0000000002.checkpoint.deleted") == (
        sid,
        False,
        True,
    )


@pytest.mark.parametrize(
    "name",
    [
        "00000000000000000000.log",
        "00000000000000000000.snapshot",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
        "partition.metadata",
        "quorum-state",
        "0000000000000000001-0000000002.checkpoint",  # 19 digits
        "00000000000000000001_0000000002.checkpoint",
        "00000000000000000001-000000000x.checkpoint",
        "00000000000000000001-0000000002-x.checkpoint",
    ],
)
def test_parse__not_snapshots(name: str) -> None:
    assert parse_snapshot_file_name(name) is None


@given(st.integers(0, 10**19), st.integers(0, 2**31 - 1))
def test_name_round_trip(offset: int, epoch: int) -> None:
    sid = OffsetAndEpoch(offset, epoch)
    assert parse_snapshot_file_name(snapshot_file_name(sid)) == (sid, False, False)


# --- header and footer records ----------------------------------------------------------------------


def test_header_footer__bytes_as_kafka_encodes_them() -> None:
    # Version int16, LastContainedLogTimestamp int64, then an empty tagged-field section.
    assert encode_snapshot_header(SnapshotHeader(1234)) == struct.pack(">hq", 0, 1234) + b"\x00"
    assert encode_snapshot_footer() == b"\x00\x00\x00"


@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**15), 2**15 - 1))
def test_header__round_trip(timestamp: int, version: int) -> None:
    header = SnapshotHeader(timestamp, version)
    assert decode_snapshot_header(encode_snapshot_header(header)) == header


def test_header__truncated_at_every_byte_and_trailing_bytes() -> None:
    data = encode_snapshot_header(SnapshotHeader(99))
    for cut in range(len(data)):
        with pytest.raises(SnapshotError):
            decode_snapshot_header(data[:cut])
    with pytest.raises(SnapshotError, match="after the message"):
        decode_snapshot_header(data + b"\x00")
    with pytest.raises(SnapshotError):
        decode_snapshot_footer(encode_snapshot_footer() + b"\x01")
    for cut in range(3):
        with pytest.raises(SnapshotError):
            decode_snapshot_footer(encode_snapshot_footer()[:cut])


def test_header__unknown_tagged_field_is_skipped() -> None:
    data = struct.pack(">hq", 0, 5) + b"\x01\x07\x02ab"  # one tagged field (tag 7, 2 bytes)
    assert decode_snapshot_header(data).last_contained_log_timestamp == 5


@given(st.binary(max_size=40))
def test_header__fuzz_decodes_or_raises_snapshot_error(data: bytes) -> None:
    try:
        decode_snapshot_header(data)
    except SnapshotError:
        pass


# --- writer and reader ------------------------------------------------------------------------------


SID = OffsetAndEpoch(42, 3)


def _snapshot(values: list[bytes], sid: OffsetAndEpoch = SID, **kw: int) -> bytes:
    return write_snapshot(sid, values, last_contained_log_timestamp=777, now_ms=1000, **kw)


def test_write__delimiters_offsets_epoch_and_no_producer() -> None:
    data = _snapshot([b"a", b"b", b"c"])
    batches = list(iter_batches(data))
    first, last = batches[0], batches[-1]
    assert first.header.is_control and control_type_of(first.records[0].key) == CONTROL_TYPE_SNAPSHOT_HEADER
    assert last.header.is_control and control_type_of(last.records[-1].key) == CONTROL_TYPE_SNAPSHOT_FOOTER
    assert [b.header.base_offset for b in batches] == [0, 1, 4]  # offsets inside start at 0
    assert {b.header.partition_leader_epoch for b in batches} == {3}
    assert {b.header.producer_id for b in batches} == {-1}
    contents = read_snapshot(data)
    assert contents.values == [b"a", b"b", b"c"]
    assert contents.header.last_contained_log_timestamp == 777
    assert read_snapshot_header(data).last_contained_log_timestamp == 777


def test_write__empty_state_machine_has_header_and_footer_only() -> None:
    data = _snapshot([])
    assert len(list(iter_batches(data))) == 2
    assert read_snapshot(data).values == []


def test_write__batches_limited_by_bytes() -> None:
    data = _snapshot([b"x" * 100] * 10, max_batch_bytes=250)
    data_batches = [b for b in iter_batches(data) if not b.header.is_control]
    assert len(data_batches) == 5 and read_snapshot(data).values == [b"x" * 100] * 10


@given(st.lists(st.binary(max_size=50), max_size=30), st.integers(1, 500))
def test_write_read__round_trip(values: list[bytes], max_batch_bytes: int) -> None:
    assert read_snapshot(_snapshot(values, max_batch_bytes=max_batch_bytes)).values == values


def test_read__every_truncation_is_an_error_never_a_shorter_snapshot() -> None:
    data = _snapshot([b"a" * 10, b"b" * 10], max_batch_bytes=12)
    for cut in range(len(data)):
        with pytest.raises(SnapshotError):
            read_snapshot(data[:cut])
    with pytest.raises(SnapshotError, match="not a whole valid batch"):
        read_snapshot(data + b"\x00")


def test_read__without_footer_never_counts() -> None:
    full = _snapshot([b"a"])
    last = list(iter_batches(full))[-1]
    without_footer = full[: len(full) - last.header.size_in_bytes]
    with pytest.raises(SnapshotError, match="no SnapshotFooterRecord"):
        read_snapshot(without_footer)


def test_read__first_batch_not_a_header_is_rejected() -> None:
    full = _snapshot([b"a"])
    header_size = read_batch_header(full).size_in_bytes
    with pytest.raises(SnapshotError, match="first batch"):
        read_snapshot(full[header_size:])


def test_read__corrupt_crc_is_an_error() -> None:
    data = bytearray(_snapshot([b"abc"]))
    data[70] ^= 0xFF
    with pytest.raises(SnapshotError):
        read_snapshot(bytes(data))


def test_read__kafka_layout_built_by_hand() -> None:
    """A header batch laid out byte by byte as RecordsSnapshotWriter writes it (no shared code)."""

    def batch(base_offset: int, epoch: int, key: bytes, value: bytes, control: bool) -> bytes:
        def varint(n: int) -> bytes:
            n = (n << 1) ^ (n >> 63)
            out = bytearray()
            while n >= 0x80:
                out.append((n & 0x7F) | 0x80)
                n >>= 7
            out.append(n)
            return bytes(out)

        body = (
            b"\x00" + varint(0) + varint(0) + varint(len(key)) + key + varint(len(value)) + value + varint(0)
        )
        record = varint(len(body)) + body
        attributes = 0x20 if control else 0
        after_crc = struct.pack(">hiqqqhii", attributes, 0, 5, 5, -1, -1, -1, 1) + record
        head = struct.pack(">qiib", base_offset, 4 + 1 + 4 + len(after_crc), epoch, 2)
        return head + struct.pack(">I", crc32c(after_crc)) + after_crc

    header_value = struct.pack(">hq", 0, 4242) + b"\x00"
    data = (
        batch(0, 7, struct.pack(">hh", 0, 3), header_value, True)
        + batch(1, 7, b"", b"\x01\x14\x00\x00", False)  # a NoOpRecord, framed
        + batch(2, 7, struct.pack(">hh", 0, 4), b"\x00\x00\x00", True)
    )
    contents = read_snapshot(data)
    assert contents.header.last_contained_log_timestamp == 4242
    assert contents.epoch == 7 and len(contents.values) == 1


# --- the memory store and retention ----------------------------------------------------------------


def test_memory_store__write_read_delete_and_overwrite_same_id() -> None:
    store = MemorySnapshotStore()
    data = _snapshot([b"a"])
    store.write(OffsetAndEpoch(42, 3), data)
    store.write(OffsetAndEpoch(42, 3), data)  # creating the same id twice works
    assert store.snapshot_ids() == [OffsetAndEpoch(42, 3)]
    assert store.read(OffsetAndEpoch(42, 3), 3, 5) == data[3:8]
    assert store.last_contained_log_timestamp(OffsetAndEpoch(42, 3)) == 777
    store.delete(OffsetAndEpoch(42, 3))
    assert store.snapshot_ids() == []


def test_retention__fewer_than_two_snapshots__nothing() -> None:
    store = MemorySnapshotStore()
    store.write(OffsetAndEpoch(5, 1), _snapshot([b"a"], OffsetAndEpoch(5, 1)))
    assert retention_delete_before(store, 10**9, 10**12, retention_bytes=0, retention_ms=0) is None


def test_retention__by_size_and_time_and_disabled() -> None:
    store = MemorySnapshotStore()
    for sid in (OffsetAndEpoch(5, 1), OffsetAndEpoch(9, 1), OffsetAndEpoch(12, 2)):
        store.write(sid, _snapshot([b"a"], sid))
    sizes = sum(store.size(i) for i in store.snapshot_ids())
    assert retention_delete_before(store, 100, 0, retention_bytes=sizes + 100, retention_ms=-1) is None
    assert retention_delete_before(store, 101, 0, retention_bytes=sizes + 100, retention_ms=-1) == (9, 1)
    assert retention_delete_before(store, 0, 777 + 50, retention_bytes=-1, retention_ms=50) is None
    assert retention_delete_before(store, 0, 777 + 51, retention_bytes=-1, retention_ms=50) == (9, 1)
    assert retention_delete_before(store, 10**9, 10**12, retention_bytes=-1, retention_ms=-1) is None


def test_inconsistent_snapshot_state() -> None:
    assert inconsistent_snapshot_state(0, []) is None
    assert inconsistent_snapshot_state(100, [OffsetAndEpoch(100, 1)]) is None
    assert inconsistent_snapshot_state(100, [OffsetAndEpoch(500, 1)]) is None
    assert "log starts at offset 100" in (inconsistent_snapshot_state(100, [OffsetAndEpoch(50, 1)]) or "")
