"""The hand-written codecs of the hot metadata record types against kafka-python's generic path.

For PartitionRecord, PartitionChangeRecord, TopicRecord, FeatureLevelRecord, ProducerIdsRecord and the
empty markers, at every version: the fast decoder builds the same message object as the generic one
(every field, ``tags``, ``unknown_tags``, version), rejects every truncation and trailing bytes, and never
accepts bytes the generic decoder rejects; the fast encoders write the generic encoder's bytes.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pykraft.metadata.records as records_module
from pykraft.metadata.records import (
    RECORD_TYPES_BY_API_KEY,
    ApiMessageAndVersion,
    MetadataRecordError,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    decode_metadata_record,
    decode_metadata_record_generic,
    encode_metadata_record,
    encode_metadata_record_generic,
    valid_versions,
)
from tests.unit.test_metadata_records import _record

FAST_KEYS = sorted(records_module._DECODERS)
FAST_TYPES_AND_VERSIONS = [
    (key, RECORD_TYPES_BY_API_KEY[key], version)
    for key in FAST_KEYS
    for version in range(
        valid_versions(RECORD_TYPES_BY_API_KEY[key])[0], valid_versions(RECORD_TYPES_BY_API_KEY[key])[1] + 1
    )
]
ANY_FAST_RECORD = st.sampled_from(FAST_TYPES_AND_VERSIONS).flatmap(lambda kv: _record(kv[1], kv[2]))
TOPIC_ID = uuid.UUID(int=(7 << 64) | 9)


def _same(fast: ApiMessageAndVersion, generic: ApiMessageAndVersion) -> None:
    """Equal as records, and field by field (value and type), with the same bookkeeping slots."""
    assert fast == generic
    assert (fast.api_key, fast.version) == (generic.api_key, generic.version)
    message, reference = fast.message, generic.message
    assert type(message) is type(reference)
    if not hasattr(reference, "_struct"):
        return
    for name in reference._struct.fields:
        mine, theirs = getattr(message, name), getattr(reference, name)
        assert mine == theirs, name
        assert type(mine) is type(theirs), name
    assert message.version == reference.version
    assert message.tags == reference.tags
    assert message.unknown_tags == reference.unknown_tags


def _uses_fast_path(value: bytes) -> ApiMessageAndVersion:
    def refuse(*_args: Any) -> Any:
        raise AssertionError("the generic decoder was used")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(records_module, "_decode_body", refuse)
        return decode_metadata_record(value)


def test_fast_codecs__cover_the_hot_record_types() -> None:
    # The types a large log and a snapshot are made of; RegisterBrokerRecord (one per broker) stays generic.
    assert FAST_KEYS == [2, 3, 5, 12, 15, 20, 24]
    assert sorted(records_module._ENCODERS) == [2, 3, 5]


@pytest.mark.parametrize(("api_key", "record_type", "version"), FAST_TYPES_AND_VERSIONS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fast_decoder__equals_generic__whole_truncated_and_with_garbage(
    api_key: int, record_type: Any, version: int, data: st.DataObject
) -> None:
    record = data.draw(_record(record_type, version))
    encoded = encode_metadata_record_generic(record)
    assert encode_metadata_record(record) == encoded
    fast = _uses_fast_path(encoded)
    _same(fast, decode_metadata_record_generic(encoded))
    assert fast == record
    _same(decode_metadata_record(memoryview(encoded)), fast)
    _same(decode_metadata_record(bytearray(encoded)), fast)
    for cut in range(len(encoded)):
        with pytest.raises(MetadataRecordError):
            decode_metadata_record(encoded[:cut])
    with pytest.raises(MetadataRecordError, match=rf"Found 1 byte\(s\) of garbage after {api_key}$"):
        decode_metadata_record(encoded + b"\x00")
    with pytest.raises(MetadataRecordError, match=rf"Found 2 byte\(s\) of garbage after {api_key}$"):
        decode_metadata_record(encoded + b"\x01\x02")


@settings(max_examples=400, deadline=None)
@given(ANY_FAST_RECORD, st.integers(0, 10_000), st.integers(0, 255))
def test_fast_decoder__one_flipped_byte__never_accepts_what_generic_rejects(
    record: ApiMessageAndVersion, position: int, byte: int
) -> None:
    encoded = bytearray(encode_metadata_record(record))
    encoded[position % len(encoded)] = byte
    _agree_or_stricter(bytes(encoded))


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(FAST_TYPES_AND_VERSIONS), st.binary(max_size=80))
def test_fast_decoder__random_bodies__never_accepts_what_generic_rejects(
    kind: tuple[int, Any, int], body: bytes
) -> None:
    api_key, _, version = kind
    _agree_or_stricter(bytes((1, api_key, version)) + body)


def _agree_or_stricter(value: bytes) -> None:
    try:
        generic: ApiMessageAndVersion | None = decode_metadata_record_generic(value)
    except MetadataRecordError:
        generic = None
    try:
        fast = decode_metadata_record(value)
    except MetadataRecordError:
        return  # stricter than (or as strict as) the generic path: fine
    assert generic is not None, f"fast path accepted {value.hex()} which kafka-python rejects"
    _same(fast, generic)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_unknown_and_later_version_tags__kept_as_kafka_python_keeps_them(version: int) -> None:
    record = PartitionRecord(
        partition_id=3,
        topic_id=TOPIC_ID,
        replicas=[1],
        isr=[1],
        removing_replicas=[],
        adding_replicas=[],
        leader=1,
        leader_epoch=0,
        partition_epoch=0,
        directories=[TOPIC_ID],
    )
    encoded = encode_metadata_record(ApiMessageAndVersion.of(record, version))
    assert encoded.endswith(b"\x00")
    # Tag 1 (EligibleLeaderReplicas, known from v2) and tag 9 (unknown everywhere), then LeaderRecoveryState.
    tagged = bytes.fromhex("03010502000000020902abcd000101")
    value = encoded[:-1] + tagged
    fast = decode_metadata_record(value)
    _same(fast, decode_metadata_record_generic(value))
    assert fast.message.leader_recovery_state == 1
    assert fast.message.unknown_tags == (
        {"_9": b"\xab\xcd"} if version >= 2 else {"_1": bytes.fromhex("0200000002"), "_9": b"\xab\xcd"}
    )
    assert fast.message.eligible_leader_replicas == ([2] if version >= 2 else None)


def test_null_in_a_non_nullable_field__rejected_naming_it() -> None:
    record = PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1)
    encoded = encode_metadata_record(ApiMessageAndVersion.of(record, 0))
    body = encoded[3 + 20 :]
    assert body.startswith(bytes.fromhex("0200000001"))  # replicas [1]
    with pytest.raises(MetadataRecordError, match="non-nullable field replicas was serialized as null"):
        decode_metadata_record(encoded[: 3 + 20] + b"\x00" + body[5:])


def test_known_tag_with_a_wrong_size__rejected() -> None:
    change = PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=3)
    encoded = encode_metadata_record(ApiMessageAndVersion.of(change, 0))
    assert encoded.endswith(bytes.fromhex("01010400000003"))
    bad = encoded[:-7] + bytes.fromhex("0101050000000300")  # Leader declared as 5 bytes
    with pytest.raises(MetadataRecordError, match="tagged field leader declares 5 byte"):
        decode_metadata_record(bad)


def test_empty_markers__fast_path_skips_unknown_tags() -> None:
    assert _uses_fast_path(bytes.fromhex("011400010902abcd")).message == NoOpRecord()
    with pytest.raises(MetadataRecordError):
        decode_metadata_record(bytes.fromhex("011400010903abcd"))


def test_decoded_topic_ids__cached_but_equal_and_zero_is_none() -> None:
    record = PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, isr=[1, 2])
    value = encode_metadata_record(ApiMessageAndVersion.of(record, 0))
    first, second = decode_metadata_record(value).message, decode_metadata_record(value).message
    assert first.topic_id == TOPIC_ID and first.topic_id is second.topic_id
    zero = PartitionChangeRecord(partition_id=1, topic_id=None)
    assert (
        decode_metadata_record(encode_metadata_record(ApiMessageAndVersion.of(zero, 0))).message.topic_id
        is None
    )
