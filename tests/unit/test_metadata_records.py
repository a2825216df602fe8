"""Metadata record framing and schemas (kafka-facts.md §7.1-§7.2).

Every record type at every version: decoded whole, every truncation rejected, trailing bytes rejected,
and random bytes either decode or raise MetadataRecordError.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata.records import (
    CLUSTER_ID_RECORD_API_KEY,
    RECORD_TYPES_BY_API_KEY,
    ApiMessageAndVersion,
    ClusterIdRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    MetadataRecordError,
    NoOpRecord,
    PartitionChangeRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    decode_metadata_record,
    encode_metadata_record,
    valid_versions,
)

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
# kafka-python reads the all-zero uuid back as None, so generated uuids are never zero.
_UUIDS = st.integers(1, 2**128 - 1).map(lambda i: uuid.UUID(int=i))
_TEXT = st.text(max_size=12)


def _in_version(field: dict[str, Any], version: int) -> bool:
    low, _, high = field["versions"].partition("-")
    if low.endswith("+"):
        return version >= int(low[:-1])
    return int(low) <= version <= int(high or low)


def _nullable(field: dict[str, Any], version: int) -> bool:
    nullable = field.get("nullableVersions")
    return nullable is not None and _in_version({"versions": nullable}, version)


def _value(field: dict[str, Any], version: int, owner: Any) -> st.SearchStrategy[Any]:
    type_ = field["type"]
    if type_.startswith("[]"):
        inner = type_[2:]
        if "fields" in field:
            element_class = getattr(owner, inner)
            element = _struct(field["fields"], version, element_class, owner)
        else:
            element = _value({"type": inner, "versions": "0+"}, version, owner)
        values: st.SearchStrategy[Any] = st.lists(element, max_size=4)
    elif type_ in _INT_RANGES:
        values = st.integers(*_INT_RANGES[type_])
    elif type_ == "bool":
        values = st.booleans()
    elif type_ == "float64":
        # NaN is never equal to itself: round trips compare records.
        values = st.floats(allow_nan=False)
    elif type_ == "uuid":
        values = _UUIDS
    elif type_ == "string":
        values = _TEXT
    elif type_ == "bytes":
        values = st.binary(max_size=16)
    else:
        raise AssertionError(f"no strategy for {type_}")
    return st.one_of(st.none(), values) if _nullable(field, version) else values


def _struct(fields: list[dict[str, Any]], version: int, cls: Any, owner: Any) -> st.SearchStrategy[Any]:
    kwargs = {f["name"]: _value(f, version, owner) for f in fields if _in_version(f, version)}
    names = {f["name"]: cls.fields[_snake(f["name"])].name for f in fields}
    return st.fixed_dictionaries(kwargs).map(lambda values: cls(**{names[k]: v for k, v in values.items()}))


def _snake(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _record(record_type: Any, version: int) -> st.SearchStrategy[ApiMessageAndVersion]:
    if record_type in (NoOpRecord, EndTransactionRecord):
        return st.just(ApiMessageAndVersion.of(record_type(), version))
    message = _struct(record_type.json["fields"], version, record_type, record_type)
    return message.map(lambda m: ApiMessageAndVersion.of(m, version))


ALL_TYPES_AND_VERSIONS = [
    (key, record_type, version)
    for key, record_type in sorted(RECORD_TYPES_BY_API_KEY.items())
    for version in range(valid_versions(record_type)[0], valid_versions(record_type)[1] + 1)
]
ANY_RECORD = st.sampled_from(ALL_TYPES_AND_VERSIONS).flatmap(lambda kv: _record(kv[1], kv[2]))


def test_record_table__covers_the_brief() -> None:
    assert sorted(RECORD_TYPES_BY_API_KEY) == [
        0,
        1,
        2,
        3,
        4,
        5,
        7,
        8,
        9,
        11,
        12,
        14,
        15,
        17,
        18,
        19,
        20,
        22,
        23,
        24,
        25,
        29,
    ]
    assert CLUSTER_ID_RECORD_API_KEY == 29
    assert RECORD_TYPES_BY_API_KEY[29] is ClusterIdRecord
    assert valid_versions(RegisterBrokerRecord) == (0, 3)
    assert valid_versions(PartitionChangeRecord) == (0, 2)


@pytest.mark.parametrize(("api_key", "record_type", "version"), ALL_TYPES_AND_VERSIONS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_record__every_type_and_version__round_trips_truncations_and_garbage(
    api_key: int, record_type: Any, version: int, data: st.DataObject
) -> None:
    record = data.draw(_record(record_type, version))
    encoded = encode_metadata_record(record)
    decoded = decode_metadata_record(encoded)
    assert decoded == record
    assert decoded.api_key == api_key
    assert decoded.version == version
    assert decode_metadata_record(memoryview(encoded)) == record
    for cut in range(len(encoded)):
        with pytest.raises(MetadataRecordError):
            decode_metadata_record(encoded[:cut])
    with pytest.raises(MetadataRecordError, match=rf"Found 1 byte\(s\) of garbage after {api_key}"):
        decode_metadata_record(encoded + b"\x00")
    with pytest.raises(MetadataRecordError, match=rf"Found 3 byte\(s\) of garbage after {api_key}"):
        decode_metadata_record(encoded + b"abc")


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_decode__random_bytes__decode_or_raise_metadata_record_error(value: bytes) -> None:
    try:
        decode_metadata_record(value)
    except MetadataRecordError:
        pass


@settings(max_examples=300, deadline=None)
@given(ANY_RECORD, st.integers(0, 10_000), st.integers(0, 255))
def test_decode__one_flipped_byte__decode_or_raise_metadata_record_error(
    record: ApiMessageAndVersion, position: int, byte: int
) -> None:
    encoded = bytearray(encode_metadata_record(record))
    encoded[position % len(encoded)] = byte
    try:
        decode_metadata_record(bytes(encoded))
    except MetadataRecordError:
        pass


def test_producer_ids_record__matches_kafka_bytes() -> None:
    # Hand-computed from ProducerIdsRecord.json v0 and AbstractApiMessageSerde: frame 1, key 15, version 0,
    # BrokerId int32, BrokerEpoch int64, NextProducerId int64, empty tagged fields.
    record = ApiMessageAndVersion.of(ProducerIdsRecord(broker_id=1, broker_epoch=100, next_producer_id=1000))
    expected = bytes.fromhex("010f0000000001000000000000006400000000000003e800")
    assert encode_metadata_record(record) == expected
    assert decode_metadata_record(expected) == record


def test_topic_record__matches_kafka_bytes() -> None:
    topic_id = uuid.UUID(int=(1 << 64) | 2)
    record = ApiMessageAndVersion.of(TopicRecord(name="foo", topic_id=topic_id))
    # Compact string: uvarint(len + 1) then UTF-8; uuid: 16 bytes, most significant long first.
    expected = bytes.fromhex("01020004666f6f0000000000000001000000000000000200")
    assert encode_metadata_record(record) == expected


def test_feature_level_record__matches_kafka_bytes() -> None:
    record = ApiMessageAndVersion.of(FeatureLevelRecord(name="metadata.version", feature_level=21))
    expected = bytes.fromhex("010c0011") + b"metadata.version" + bytes.fromhex("001500")
    assert encode_metadata_record(record) == expected


def test_partition_change_record__tagged_fields_written_only_when_not_default() -> None:
    topic_id = uuid.UUID(int=7)
    unchanged = ApiMessageAndVersion.of(PartitionChangeRecord(partition_id=0, topic_id=topic_id), 0)
    assert encode_metadata_record(unchanged).endswith(b"\x00")
    new_leader = ApiMessageAndVersion.of(
        PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=3), 0
    )
    # One tagged field: tag 1 (Leader), size 4, int32 3.
    assert encode_metadata_record(new_leader).endswith(bytes.fromhex("01010400000003"))
    assert decode_metadata_record(encode_metadata_record(new_leader)) == new_leader


def test_empty_records__skip_unknown_tagged_fields() -> None:
    # NoOpRecord with one unknown tagged field (tag 9, 2 bytes) still decodes: tags are optional by design.
    assert decode_metadata_record(bytes.fromhex("011400010902abcd")).message == NoOpRecord()
    with pytest.raises(MetadataRecordError):
        decode_metadata_record(bytes.fromhex("011400010903abcd"))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (bytes.fromhex("000f00"), "frame version 0"),
        (bytes.fromhex("020f00"), "unknown frame version 2"),
        (bytes.fromhex("01808002"), "Value for type was too large"),
        (bytes.fromhex("010f808002"), "Value for version was too large"),
        (bytes.fromhex("010600"), "Unknown metadata id 6"),
        (bytes.fromhex("011e00"), "Unknown metadata id 30"),
        (bytes.fromhex("010f01"), "version 1 is not in 0-0"),
        (bytes.fromhex("01ffffffffff"), "Error while reading type"),
        (b"", "Error while reading frame version"),
    ],
)
def test_decode__bad_frame__raises_with_kafka_message(value: bytes, message: str) -> None:
    with pytest.raises(MetadataRecordError, match=message):
        decode_metadata_record(value)


def test_metadata_record_error__is_a_value_error() -> None:
    assert issubclass(MetadataRecordError, ValueError)


def test_user_scram_credential_record__matches_kafka_layout() -> None:
    """Kafka 3.5+ UserScramCredentialRecord (key 11, v0, flexible): Name, Mechanism, Salt, StoredKey,
    ServerKey, Iterations, then an empty tagged-field section."""
    from pykraft.metadata.records import UserScramCredentialRecord

    record = UserScramCredentialRecord(
        name="a", mechanism=2, salt=b"x", stored_key=b"y", server_key=b"z", iterations=4096
    )
    value = encode_metadata_record(ApiMessageAndVersion.of(record))
    assert (
        value == bytes.fromhex("010b00") + b"\x02a\x02\x02x\x02y\x02z" + (4096).to_bytes(4, "big") + b"\x00"
    )
    assert decode_metadata_record(value).message == record
