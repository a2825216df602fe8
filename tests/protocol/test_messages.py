"""Request header, request body and response codecs over kafka-python's classes, and our JSON schemas.

The client side of every round trip is kafka-python itself, as a real client would send the bytes.
Messages are filled from their own schemas (every field valid at the version, tagged ones included,
non-default values), so each (api, version) exercises every field the broker can receive or send.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from pykraft.core.errors import ErrorCode, RemoteProtocolError
from pykraft.protocol import messages
from pykraft.protocol.messages import (
    OUR_MESSAGE_CLASSES,
    SUPPORTED_VERSIONS,
    ApiKey,
    ApiVersionsFeatures,
    RequestHeader,
    api_versions_response,
    decode_request,
    encode_response,
    parse_request_header,
    request_class,
    response_class,
)

# --- building messages from their schemas --------------------------------------------------------------

_SIMPLE_VALUES: dict[str, Any] = {
    "int8": -7,
    "int16": 1234,
    "uint16": 9092,
    "int32": -123456,
    "int64": 1 << 40,
    "float64": 1.5,
    "bool": True,
    "uuid": uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF),
    "string": "tøpic-é",
    "bytes": b"\x00\x01byte",
    "records": b"\x00\x00records",
    "bitfield": {1, 3},
}


def _simple_value(type_str: str, index: int) -> Any:
    value = _SIMPLE_VALUES[type_str]
    if type_str in ("int8", "int16", "uint16", "int32", "int64"):
        return value + index
    if type_str == "string":
        return f"{value}{index}"
    return value


def _field_value(field: Any, version: int, index: int = 0) -> Any:
    if field.is_struct_array():
        return [_struct_value(field.array_of, version, i) for i in range(2)]
    if field.is_array():
        return [_simple_value(field.array_of.type_str, i) for i in range(2)]
    if field.is_struct():
        return _struct_value(field, version, index)
    return _simple_value(field.type_str, index)


def _struct_value(struct_field: Any, version: int, index: int) -> Any:
    kwargs = {
        sub.name: _field_value(sub, version, index)
        for sub in struct_field._fields
        if sub.for_version_q(version)
    }
    return struct_field.data_class(**kwargs)


def build_message(cls: Any, version: int, **overrides: Any) -> Any:
    kwargs = {
        field.name: _field_value(field, version)
        for field in cls._struct._fields
        if field.for_version_q(version)
    }
    kwargs.update(overrides)
    return cls(version=version, **kwargs)


def client_request_bytes(request: Any, correlation_id: int = 42, client_id: str | None = "client-1") -> bytes:
    """What a kafka-python client writes after the 4-byte size."""
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True))


ADVERTISED = [
    (api_key, version)
    for api_key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(low, high + 1)
]


def _our_versions() -> list[tuple[Any, int]]:
    pairs: list[tuple[Any, int]] = []
    for cls in OUR_MESSAGE_CLASSES:
        low, high = messages._schema_version_range(cls)
        pairs.extend((cls, v) for v in range(low, high + 1))
    return pairs


OUR_VERSIONS = _our_versions()


def _id(pair: tuple[Any, int]) -> str:
    key, version = pair
    name = key.name if isinstance(key, ApiKey) else key.__name__
    return f"{name}-v{version}"


# --- ApiKey and the table ---------------------------------------------------------------------------------


def test_api_keys_match_kafka() -> None:
    expected = {
        "PRODUCE": 0, "FETCH": 1, "LIST_OFFSETS": 2, "METADATA": 3, "OFFSET_COMMIT": 8, "OFFSET_FETCH": 9,
        "FIND_COORDINATOR": 10, "JOIN_GROUP": 11, "HEARTBEAT": 12, "LEAVE_GROUP": 13, "SYNC_GROUP": 14,
        "DESCRIBE_GROUPS": 15, "LIST_GROUPS": 16, "API_VERSIONS": 18, "CREATE_TOPICS": 19,
        "DELETE_TOPICS": 20, "DELETE_RECORDS": 21, "INIT_PRODUCER_ID": 22, "DESCRIBE_CONFIGS": 32,
        "VOTE": 52, "BEGIN_QUORUM_EPOCH": 53, "END_QUORUM_EPOCH": 54, "DESCRIBE_QUORUM": 55,
        "FETCH_SNAPSHOT": 59, "DESCRIBE_PRODUCERS": 61, "BROKER_REGISTRATION": 62, "BROKER_HEARTBEAT": 63,
        "ALLOCATE_PRODUCER_IDS": 67,
    }  # fmt: skip
    for name, value in expected.items():
        assert ApiKey[name] == value


def test_supported_versions_table() -> None:
    assert SUPPORTED_VERSIONS == {
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.METADATA: (0, 13),
        ApiKey.PRODUCE: (3, 11),
        ApiKey.FETCH: (4, 18),
        ApiKey.LIST_OFFSETS: (1, 11),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.DELETE_RECORDS: (0, 2),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
        ApiKey.END_TXN: (0, 3),
        ApiKey.WRITE_TXN_MARKERS: (1, 1),
        ApiKey.TXN_OFFSET_COMMIT: (0, 3),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 1),
        ApiKey.ELECT_LEADERS: (0, 2),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.UNREGISTER_BROKER: (0, 0),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
        ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.FIND_COORDINATOR: (0, 4),
        ApiKey.OFFSET_FETCH: (1, 9),
        ApiKey.OFFSET_COMMIT: (2, 9),
        ApiKey.JOIN_GROUP: (0, 9),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 6),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.DESCRIBE_ACLS: (1, 3),
        ApiKey.CREATE_ACLS: (1, 3),
        ApiKey.DELETE_ACLS: (1, 3),
        ApiKey.DESCRIBE_CLUSTER: (0, 2),
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
        ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
        # Forwarded to the active controller, at the version its listener serves.
        ApiKey.DESCRIBE_QUORUM: (1, 2),
        # KIP-848 consumer groups (issue 19).
        ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
        ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
        ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
        ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
        ApiKey.SHARE_FETCH: (1, 1),
        ApiKey.SHARE_ACKNOWLEDGE: (1, 1),
        ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
        ApiKey.WRITE_SHARE_GROUP_STATE: (0, 0),
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 0),
        ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
        ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
        ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
        ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 0),
        ApiKey.UPDATE_FEATURES: (0, 2),
    }
    assert ApiKey.GET_TELEMETRY_SUBSCRIPTIONS not in SUPPORTED_VERSIONS


def test_every_advertised_version_has_schema_classes() -> None:
    for api_key, (low, high) in SUPPORTED_VERSIONS.items():
        for cls in (request_class(api_key), response_class(api_key)):
            assert cls is not None and cls.API_KEY == api_key
            schema_low, schema_high = messages._schema_version_range(cls)
            assert schema_low <= low and high <= schema_high, cls


def test_class_lookup() -> None:
    assert request_class(ApiKey.ALLOCATE_PRODUCER_IDS) is messages.AllocateProducerIdsRequest
    assert response_class(ApiKey.VOTE) is messages.VoteResponse
    assert request_class(ApiKey.DESCRIBE_QUORUM).__module__.startswith("kafka.")
    assert request_class(ApiKey.DESCRIBE_PRODUCERS) is not None
    assert request_class(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS) is None
    assert request_class(9999) is None and response_class(-1) is None


# --- request header ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("client_id", ["client-1", "", None, "kliënt"])
@pytest.mark.parametrize("version", [0, 9, 12])
def test_parse_request_header_whole(version: int, client_id: str | None) -> None:
    frame = client_request_bytes(MetadataRequest(version=version, topics=[]), 77, client_id)
    header = parse_request_header(memoryview(frame))
    assert header.api_key == ApiKey.METADATA
    assert header.api_version == version
    assert header.correlation_id == 77
    assert header.client_id == client_id
    assert header.flexible == (version >= 9)
    client_id_len = -1 if client_id is None else len(client_id.encode())
    assert header.body_offset == 10 + max(client_id_len, 0) + (1 if version >= 9 else 0)


def test_parse_request_header_skips_header_tags() -> None:
    frame = struct.pack(">hhih", 3, 12, 5, 1) + b"c" + b"\x02\x00\x01x\x05\x02yz" + b"BODY"
    header = parse_request_header(memoryview(frame))
    assert header.body_offset == len(frame) - 4
    assert header.client_id == "c"


def test_parse_request_header_unknown_api_is_not_flexible() -> None:
    frame = struct.pack(">hhih", 999, 3, 1, 2) + b"ab\x00"
    header = parse_request_header(memoryview(frame))
    assert (header.api_key, header.flexible, header.body_offset) == (999, False, 12)


@pytest.mark.parametrize("pair", ADVERTISED, ids=_id)
def test_parse_request_header_every_truncation_raises(pair: tuple[ApiKey, int]) -> None:
    api_key, version = pair
    cls: Any = request_class(api_key)
    frame = client_request_bytes(cls(version=version), client_id="abc")
    header = parse_request_header(memoryview(frame))
    for size in range(header.body_offset):
        with pytest.raises(RemoteProtocolError):
            parse_request_header(memoryview(frame[:size]))


def test_parse_request_header_garbage() -> None:
    for frame in (
        struct.pack(">hhih", 3, 0, 1, -2),
        struct.pack(">hhih", 3, 0, 1, 2) + b"\xff\xfe",
        struct.pack(">hhih", 3, 12, 1, -1) + b"\xff\xff\xff\xff\xff\xff",
        struct.pack(">hhih", 3, 12, 1, -1) + b"\x01\x00\x05ab",
    ):
        with pytest.raises(RemoteProtocolError):
            parse_request_header(memoryview(frame))


# --- request bodies ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", ADVERTISED, ids=_id)
def test_request_round_trip(pair: tuple[ApiKey, int]) -> None:
    api_key, version = pair
    cls = request_class(api_key)
    sent = build_message(cls, version)
    frame = client_request_bytes(sent, correlation_id=123)
    header = parse_request_header(memoryview(frame))
    assert (header.api_key, header.api_version, header.correlation_id) == (api_key, version, 123)
    received = decode_request(header, memoryview(frame))
    assert received == sent


@pytest.mark.parametrize("pair", ADVERTISED, ids=_id)
def test_request_truncations_raise_and_trailing_bytes_are_tolerated(pair: tuple[ApiKey, int]) -> None:
    api_key, version = pair
    message = build_message(request_class(api_key), version)
    frame = client_request_bytes(message)
    header = parse_request_header(memoryview(frame))
    for size in range(header.body_offset, len(frame)):
        with pytest.raises(RemoteProtocolError):
            decode_request(header, memoryview(frame[:size]))
    # Kafka's parser ignores bytes past the schema (librdkafka sends some with Metadata v12).
    assert decode_request(header, memoryview(frame + b"\x00")) is not None


def test_decode_request_rejects_unknown_key_and_versions_outside_the_schema() -> None:
    with pytest.raises(RemoteProtocolError, match="no schema"):
        decode_request(RequestHeader(9999, 0, 1, None, 10, False), memoryview(bytes(10)))
    # kafka-python would accept Produce v0 (gotcha 2); the schema starts at v3.
    with pytest.raises(RemoteProtocolError, match="outside"):
        decode_request(RequestHeader(0, 0, 1, None, 10, False), memoryview(bytes(20)))
    with pytest.raises(RemoteProtocolError, match="outside"):
        decode_request(RequestHeader(18, 5, 1, None, 10, True), memoryview(bytes(20)))


def test_decode_request_reads_a_view_without_the_size_prefix_copy() -> None:
    # A frame inside a larger receive buffer: decode from a slice, nothing before it is touched.
    frame = client_request_bytes(build_message(MetadataRequest, 12))
    buf = bytearray(b"\xee" * 7 + frame)
    view = memoryview(buf)[7:]
    header = parse_request_header(view)
    assert decode_request(header, view).topics[0].name == "tøpic-é0"


# --- responses --------------------------------------------------------------------------------------------


def _client_decode_response(cls: Any, version: int, framed: bytes) -> Any:
    (size,) = struct.unpack_from(">i", framed)
    assert size == len(framed) - 4
    return cls.decode(framed[4:], version=version, header=True)


@pytest.mark.parametrize("pair", ADVERTISED, ids=_id)
def test_response_round_trip(pair: tuple[ApiKey, int]) -> None:
    api_key, version = pair
    cls = response_class(api_key)
    # A nonzero ApiVersions error makes clients parse the body as v0 (KIP-511), so keep it NONE here.
    overrides = {"error_code": 0} if api_key == ApiKey.API_VERSIONS else {}
    sent = build_message(cls, version, **overrides)
    header = RequestHeader(api_key, version, 9001, "c", 0, messages.is_flexible(api_key, version))
    framed = bytes(encode_response(header, sent))
    received = _client_decode_response(cls, version, framed)
    assert received.header.correlation_id == 9001
    assert received == sent
    # Response header v1 (one empty tagged-field byte) only for flexible versions, never for ApiVersions.
    header_v1 = header.flexible and api_key != ApiKey.API_VERSIONS
    sent._header = None
    assert framed[8:] == (b"\x00" if header_v1 else b"") + bytes(sent.encode(version=version))


def test_encode_response_reuses_a_response_object() -> None:
    response = build_message(response_class(ApiKey.METADATA), 12)
    first = encode_response(RequestHeader(3, 12, 1, None, 0, True), response)
    second = encode_response(RequestHeader(3, 9, 2, None, 0, True), response)  # gotcha 1 would raise here
    assert struct.unpack_from(">i", first, 4)[0] == 1
    assert struct.unpack_from(">i", second, 4)[0] == 2


# --- ApiVersions -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_supported(version: int) -> None:
    frame = client_request_bytes(
        ApiVersionsRequest(version=version, client_software_name="x", client_software_version="1"), 5
    )
    header = parse_request_header(memoryview(frame))
    decode_request(header, memoryview(frame))
    framed = bytes(api_versions_response(header))
    response = _client_decode_response(ApiVersionsResponse, version, framed)
    assert response.header.correlation_id == 5
    assert response.error_code == ErrorCode.NONE
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == SUPPORTED_VERSIONS
    assert framed[8:10] == b"\x00\x00"  # v0 response header even for v3+ (KIP-511): error code follows
    if version >= 1:
        assert response.throttle_time_ms == 0
    if version >= 3:
        # No tagged fields with default values: throttle 0, then an empty top-level tag section.
        assert framed[-5:] == b"\x00\x00\x00\x00\x00"
        assert response.tags is None and response.unknown_tags is None


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_carries_features_from_v3(version: int) -> None:
    """KIP-584: the supported ranges, the finalized levels (as min and max) and their epoch, which the
    Java Admin's describeFeatures reads; older versions have no place for them."""
    frame = client_request_bytes(
        ApiVersionsRequest(version=version, client_software_name="x", client_software_version="1"), 5
    )
    header = parse_request_header(memoryview(frame))
    features = ApiVersionsFeatures(
        {"metadata.version": (1, 21)}, {"metadata.version": 21}, finalized_features_epoch=42
    )
    response = _client_decode_response(
        ApiVersionsResponse, version, bytes(api_versions_response(header, features=features))
    )
    if version < 3:
        assert not response.supported_features and not response.finalized_features
        return
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("metadata.version", 1, 21)
    ]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
        ("metadata.version", 21, 21)
    ]
    assert response.finalized_features_epoch == 42


@pytest.mark.parametrize("version", [5, 127, -1])
def test_api_versions_unsupported_version_gets_v0_error_reply(version: int) -> None:
    # A future client sends header v2 (client_id, tags) for its ApiVersions request.
    frame = struct.pack(">hhih", 18, version, 31, 3) + b"cli" + (b"\x00" if version >= 3 else b"")
    frame += b"\x02\x00"  # some body we cannot parse
    header = parse_request_header(memoryview(frame))
    assert header.flexible == (version >= 3)
    framed = bytes(api_versions_response(header))
    # Exact Kafka v0 layout: size, correlation_id, error 35, [api_key 18, 0, 4].
    assert framed == struct.pack(">iihihhh", 16, 31, 35, 1, 18, 0, 4)
    # A client that sent v3 parses the v0 layout because of the error code.
    response = _client_decode_response(ApiVersionsResponse, 3, framed)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]


# --- our JSON schema classes --------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", OUR_VERSIONS, ids=_id)
def test_our_schema_classes_round_trip(pair: tuple[Any, int]) -> None:
    cls, version = pair
    sent = build_message(cls, version)
    flexible = cls.flexible_version_q(version)
    if cls.is_request():
        frame = client_request_bytes(sent, correlation_id=8)
        header = parse_request_header(memoryview(frame))
        assert header.flexible == flexible
        assert decode_request(header, memoryview(frame)) == sent
        for size in range(header.body_offset, len(frame)):
            with pytest.raises(RemoteProtocolError):
                decode_request(header, memoryview(frame[:size]))
    else:
        header = RequestHeader(cls.API_KEY, version, 8, None, 0, flexible)
        received = _client_decode_response(cls, version, bytes(encode_response(header, sent)))
        assert received == sent


def test_our_schema_facts() -> None:
    m = messages
    assert m.VoteRequest.API_KEY == 52 and m.VoteRequest.valid_versions == (0, 1)
    assert m.BeginQuorumEpochRequest.flexible_version_q(0) is False
    assert m.BeginQuorumEpochRequest.flexible_version_q(1) is True
    assert m.FetchSnapshotRequest.API_KEY == 59
    assert m.BrokerRegistrationRequest.valid_versions == (0, 4)
    assert m.BrokerHeartbeatResponse.API_KEY == 63
    assert m.BrokerHeartbeatResponse(version=0).is_fenced is True
    assert m.FetchSnapshotRequest(version=0).max_bytes == 0x7FFFFFFF
    # AllocateProducerIds v0 (kafka-facts.md §1.1): BrokerId, BrokerEpoch -> ThrottleTimeMs, ErrorCode,
    # ProducerIdStart, ProducerIdLen.
    request = m.AllocateProducerIdsRequest(version=0, broker_id=1, broker_epoch=5)
    assert bytes(request.encode()) == struct.pack(">iq", 1, 5) + b"\x00"
    response = m.AllocateProducerIdsResponse(
        version=0, throttle_time_ms=0, error_code=0, producer_id_start=1000, producer_id_len=1000
    )
    assert bytes(response.encode()) == struct.pack(">ihqi", 0, 0, 1000, 1000) + b"\x00"
    # Tagged ClusterId (tag 0) in FetchSnapshotRequest: absent when null, written when set.
    assert m.FetchSnapshotRequest(version=0, replica_id=1, topics=[]).encode()[-1:] == b"\x00"
    with_tag = bytes(m.FetchSnapshotRequest(version=0, cluster_id="abc", topics=[]).encode())
    assert with_tag.endswith(b"\x01\x00\x04\x04abc")  # count, tag 0, size, compact "abc"


# --- fuzzing -----------------------------------------------------------------------------------------------


def _decode_or_protocol_error(frame: bytes) -> None:
    try:
        header = parse_request_header(memoryview(frame))
    except RemoteProtocolError:
        return
    try:
        decode_request(header, memoryview(frame))
    except RemoteProtocolError:
        pass


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(frame: bytes) -> None:
    _decode_or_protocol_error(frame)


_KNOWN_KEYS = sorted({*SUPPORTED_VERSIONS, *(cls.API_KEY for cls in OUR_MESSAGE_CLASSES)})


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(
    api_key=st.sampled_from(_KNOWN_KEYS),
    version=st.integers(0, 13),
    client_id=st.one_of(st.none(), st.text(max_size=5)),
    body=st.binary(max_size=200),
)
def test_fuzz_valid_header_random_body(
    api_key: int, version: int, client_id: str | None, body: bytes
) -> None:
    encoded_id = (
        b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    )
    tags = b"\x00" if messages.is_flexible(api_key, version) else b""
    _decode_or_protocol_error(struct.pack(">hhi", api_key, version, 1) + encoded_id + tags + body)


_VALID_FRAMES = [
    client_request_bytes(build_message(request_class(api_key), version)) for api_key, version in ADVERTISED
]


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(
    frame=st.sampled_from(_VALID_FRAMES),
    position=st.integers(0, 10_000),
    replacement=st.binary(min_size=1, max_size=4),
    delete=st.integers(0, 4),
)
def test_fuzz_mutated_valid_requests(frame: bytes, position: int, replacement: bytes, delete: int) -> None:
    position %= len(frame)
    _decode_or_protocol_error(frame[:position] + replacement + frame[position + delete :])
