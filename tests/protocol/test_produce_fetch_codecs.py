"""The hand-written hot-path codecs agree with kafka-python byte for byte, without copying records."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceRequest

from pykraft.core.errors import RemoteProtocolError
from pykraft.protocol.fetch import (
    FetchPartitionResponse,
    FetchResponseData,
    FetchTopicResponse,
    decode_fetch_response,
    encode_fetch_response,
)
from pykraft.protocol.produce import (
    ProduceRequestData,
    decode_produce_request,
)
from pykraft.protocol.records import Record, build_batch, read_batch_header, set_base_offset
from pykraft.protocol.wire import NodeEndpoint, WireFormatError

PRODUCE_VERSIONS = range(3, 12)
FETCH_VERSIONS = range(4, 19)

_Topic = ProduceRequest.TopicProduceData
_Partition = ProduceRequest.TopicProduceData.PartitionProduceData


def _batch(count: int, base_sequence: int = 0) -> bytes:
    records = [Record(key=f"k{i}".encode(), value=b"v" * i) for i in range(count)]
    return bytes(
        build_batch(records, timestamp_ms=1_700_000_000_000, producer_id=7, base_sequence=base_sequence)
    )


def _kp_produce_body(
    version: int, transactional_id: str | None, topics: list[tuple[str, list[tuple[int, bytes | None]]]]
) -> bytearray:
    request = ProduceRequest(
        version=version,
        transactional_id=transactional_id,
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            _Topic(name=name, partition_data=[_Partition(index=i, records=r) for i, r in partitions])
            for name, partitions in topics
        ],
    )
    return bytearray(request.encode())


def _assert_same_as_kafka_python(ours: ProduceRequestData, body: bytes | bytearray, version: int) -> None:
    theirs = ProduceRequest.decode(bytes(body), version=version)
    assert ours.transactional_id == theirs.transactional_id
    assert (ours.acks, ours.timeout_ms) == (theirs.acks, theirs.timeout_ms)
    assert [t.name for t in ours.topics] == [t.name for t in theirs.topic_data]
    for our_topic, their_topic in zip(ours.topics, theirs.topic_data, strict=True):
        assert len(our_topic.partitions) == len(their_topic.partition_data)
        for our_part, their_part in zip(our_topic.partitions, their_topic.partition_data, strict=True):
            assert our_part.index == their_part.index
            if their_part.records is None:
                assert our_part.records is None
            else:
                assert our_part.records is not None
                assert bytes(our_part.records) == bytes(their_part.records)


_SAMPLE_TOPICS: list[tuple[str, list[tuple[int, bytes | None]]]] = [
    ("orders", [(0, _batch(3)), (1, _batch(1, 5) + _batch(2, 6))]),
    ("ünïcode-topic", [(2, None), (3, b"")]),
]


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@pytest.mark.parametrize("transactional_id", [None, "txn-1"])
def test_produce_decode_matches_kafka_python(version: int, transactional_id: str | None) -> None:
    body = _kp_produce_body(version, transactional_id, _SAMPLE_TOPICS)
    ours = decode_produce_request(memoryview(body), version)
    _assert_same_as_kafka_python(ours, body, version)
    assert ours.acks == -1 and ours.timeout_ms == 30_000


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_records_are_writable_views_into_the_request(version: int) -> None:
    body = _kp_produce_body(version, None, _SAMPLE_TOPICS)
    ours = decode_produce_request(memoryview(body), version)
    records = ours.topics[0].partitions[1].records
    assert isinstance(records, memoryview) and records.obj is body and not records.readonly
    # The broker rewrites base offsets in place: the request buffer itself changes, in those 8 bytes only.
    before = bytes(body)
    set_base_offset(records, 0, 1000)
    assert read_batch_header(records, 0).base_offset == 1000
    changed = [i for i in range(len(body)) if body[i] != before[i]]
    assert changed and changed[-1] - changed[0] < 8
    assert body[changed[-1] - 7 : changed[-1] + 1] == struct.pack(">q", 1000)


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_every_truncation_raises(version: int) -> None:
    body = _kp_produce_body(version, "t", _SAMPLE_TOPICS)
    for size in range(len(body)):
        with pytest.raises(RemoteProtocolError):
            decode_produce_request(memoryview(body)[:size], version)


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_trailing_bytes_raise(version: int) -> None:
    body = _kp_produce_body(version, None, _SAMPLE_TOPICS)
    with pytest.raises(RemoteProtocolError, match="body ends"):
        decode_produce_request(memoryview(body + b"\x00"), version)


def test_produce_unsupported_version_and_garbage() -> None:
    body = _kp_produce_body(9, None, _SAMPLE_TOPICS)
    for version in (0, 2, 12, 13):
        with pytest.raises(RemoteProtocolError, match="outside"):
            decode_produce_request(memoryview(body), version)
    garbage = [
        struct.pack(">hhii", -1, 1, 100, -1),  # null topic_data array
        struct.pack(">hhi", -5, 1, 100),  # transactional_id length -5
        struct.pack(">hhii", -1, 1, 100, 1) + struct.pack(">h", -1) + struct.pack(">i", 0),  # null topic name
        struct.pack(">hhii", -1, 1, 100, 1) + b"\x00\x01\xff" + struct.pack(">i", 0),  # name not UTF-8
        struct.pack(">hhii", -1, 1, 100, 1) + b"\x00\x01a" + struct.pack(">iii", 1, 0, -2),  # records len -2
    ]
    for raw in garbage:
        with pytest.raises(RemoteProtocolError):
            decode_produce_request(memoryview(raw), 3)
    # Flexible: an unsigned varint longer than 5 bytes.
    with pytest.raises(RemoteProtocolError, match="varint"):
        decode_produce_request(memoryview(b"\x80\x80\x80\x80\x80\x80\x01"), 9)


def test_produce_skips_unknown_tagged_fields() -> None:
    batch = _batch(2)
    tags = b"\x02\x05\x02hi\x63\x00"  # two unknown tags: 5 -> b"hi", 99 -> b""
    body = (
        b"\x00"  # transactional_id null
        + struct.pack(">hi", 1, 500)
        + b"\x02"  # one topic
        + b"\x02t"  # name "t"
        + b"\x02"  # one partition
        + struct.pack(">i", 4)
        + bytes([len(batch) + 1])
        + batch
        + tags  # partition tags
        + tags  # topic tags
        + tags  # top-level tags
    )
    ours = decode_produce_request(memoryview(body), 9)
    assert ours.topics[0].name == "t"
    assert ours.topics[0].partitions[0].index == 4
    assert bytes(ours.topics[0].partitions[0].records or b"") == batch
    _assert_same_as_kafka_python(ours, body, 9)


_names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_records = st.one_of(
    st.none(),
    st.binary(max_size=64),
    st.integers(1, 4).map(_batch),
)
_produce_topics = st.lists(
    st.tuples(_names, st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), _records), max_size=4)),
    max_size=4,
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.sampled_from(list(PRODUCE_VERSIONS)),
    transactional_id=st.one_of(st.none(), _names),
    topics=_produce_topics,
)
def test_produce_round_trip_hypothesis(
    version: int, transactional_id: str | None, topics: list[tuple[str, list[tuple[int, bytes | None]]]]
) -> None:
    body = _kp_produce_body(version, transactional_id, topics)
    ours = decode_produce_request(memoryview(body), version)
    _assert_same_as_kafka_python(ours, body, version)
    for topic in ours.topics:
        for partition in topic.partitions:
            assert partition.records is None or partition.records.obj is body


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(version=st.sampled_from(list(PRODUCE_VERSIONS)), raw=st.binary(max_size=120))
def test_produce_fuzz_decodes_or_raises_protocol_error(version: int, raw: bytes) -> None:
    try:
        decode_produce_request(memoryview(raw), version)
    except RemoteProtocolError:
        pass


# --- Fetch ----------------------------------------------------------------------------------------------

_FTopic = FetchResponse.FetchableTopicResponse
_FPartition = FetchResponse.FetchableTopicResponse.PartitionData
_FAborted = FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction


_FEndpoint = FetchResponse.NodeEndpoint


def _kp_fetch_response(correlation_id: int, version: int, data: FetchResponseData) -> Any:
    endpoints = {}
    if version >= 16 and data.node_endpoints:
        endpoints["node_endpoints"] = [
            _FEndpoint(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack) for e in data.node_endpoints
        ]
    response = FetchResponse(
        version=version,
        throttle_time_ms=data.throttle_time_ms,
        error_code=data.error_code,
        session_id=data.session_id,
        **endpoints,
        responses=[
            _FTopic(
                **(
                    {"topic": topic.topic}
                    if version < 13
                    else {"topic_id": topic.topic_id or uuid.UUID(int=0)}
                ),
                partitions=[
                    _FPartition(
                        partition_index=p.partition_index,
                        error_code=p.error_code,
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset,
                        log_start_offset=p.log_start_offset,
                        aborted_transactions=None
                        if p.aborted_transactions is None
                        else [_FAborted(producer_id=a, first_offset=b) for a, b in p.aborted_transactions],
                        preferred_read_replica=p.preferred_read_replica,
                        records=b"".join(bytes(c) for c in p.records),
                        **(
                            {}
                            if p.diverging_epoch is None
                            else {"diverging_epoch": _FPartition.EpochEndOffset(*p.diverging_epoch)}
                        ),
                        **(
                            {}
                            if p.current_leader is None
                            else {"current_leader": _FPartition.LeaderIdAndEpoch(*p.current_leader)}
                        ),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in data.topics
        ],
    )
    response.with_header(correlation_id=correlation_id)
    return response


def _check_fetch(correlation_id: int, version: int, data: FetchResponseData) -> None:
    parts = encode_fetch_response(correlation_id, version, data)
    ours = b"".join(bytes(p) for p in parts)
    expected = bytes(_kp_fetch_response(correlation_id, version, data).encode(header=True, framed=True))
    assert ours == expected
    assert struct.unpack_from(">i", ours)[0] == len(ours) - 4
    # Every non-empty record chunk is passed through as the very same object, never copied.
    chunk_ids = {id(p) for p in parts}
    for topic in data.topics:
        for partition in topic.partitions:
            for chunk in partition.records:
                if len(chunk):
                    assert id(chunk) in chunk_ids
    decoded = FetchResponse.decode(ours[4:], version=version, header=True)
    assert decoded.header.correlation_id == correlation_id
    assert decoded.throttle_time_ms == data.throttle_time_ms
    if version >= 13:
        zero = uuid.UUID(int=0)  # kafka-python decodes the zero uuid as None
        assert [t.topic_id or zero for t in decoded.responses] == [t.topic_id or zero for t in data.topics]
    else:
        assert [t.topic for t in decoded.responses] == [t.topic for t in data.topics]
    for our_topic, their_topic in zip(data.topics, decoded.responses, strict=True):
        for ours_p, theirs_p in zip(our_topic.partitions, their_topic.partitions, strict=True):
            assert theirs_p.partition_index == ours_p.partition_index
            assert theirs_p.high_watermark == ours_p.high_watermark
            assert bytes(theirs_p.records) == b"".join(bytes(c) for c in ours_p.records)
            if version >= 12 and ours_p.diverging_epoch is not None:
                diverging = theirs_p.diverging_epoch
                assert (diverging.epoch, diverging.end_offset) == ours_p.diverging_epoch
            if version >= 12 and ours_p.current_leader is not None:
                leader = theirs_p.current_leader
                assert (leader.leader_id, leader.leader_epoch) == ours_p.current_leader
    if version >= 16:
        assert [(e.node_id, e.host, e.port, e.rack) for e in decoded.node_endpoints or []] == [
            (e.node_id, e.host, e.port, e.rack) for e in data.node_endpoints
        ]


def _sample_fetch() -> FetchResponseData:
    batch = bytearray(_batch(3))
    return FetchResponseData(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        topics=[
            FetchTopicResponse(
                "orders",
                [
                    FetchPartitionResponse(0, 0, 10, 10, 0, [batch, memoryview(batch)[:0], _batch(1)]),
                    FetchPartitionResponse(1, 1, -1, -1, -1, [], aborted_transactions=[(7, 3)]),
                    FetchPartitionResponse(2, 0, 5, 4, 0, [memoryview(batch)], preferred_read_replica=2),
                    FetchPartitionResponse(3, 0, 9, 9, 0, [], diverging_epoch=(4, 7)),
                    FetchPartitionResponse(4, 6, -1, -1, -1, [], current_leader=(2, 11)),
                    FetchPartitionResponse(5, 0, 9, 9, 0, [], diverging_epoch=(4, 7), current_leader=(1, 3)),
                ],
                uuid.UUID(int=0x1234),
            ),
            FetchTopicResponse("empty", [], uuid.UUID(int=7)),
        ],
        node_endpoints=[NodeEndpoint(2, "127.0.0.1", 9093, None), NodeEndpoint(1, "localhost", 9092, "r1")],
    )


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_encode_matches_kafka_python(version: int) -> None:
    _check_fetch(12345, version, _sample_fetch())
    _check_fetch(1, version, FetchResponseData(5, 0, 0, []))


def test_fetch_parts_layout() -> None:
    data = _sample_fetch()
    parts = encode_fetch_response(3, 12, data)
    chunks = data.topics[0].partitions[0].records
    assert parts[1] is chunks[0] and parts[2] is chunks[2]
    assert isinstance(parts[0], bytearray) and parts[0][4:9] == b"\x00\x00\x00\x03\x00"
    assert all(len(p) for p in parts)


_int16 = st.integers(-(2**15), 2**15 - 1)
_int32 = st.integers(-(2**31), 2**31 - 1)
_int64 = st.integers(-(2**63), 2**63 - 1)
_chunks = st.lists(
    st.one_of(
        st.binary(max_size=40),
        st.binary(max_size=40).map(bytearray),
        st.binary(max_size=40).map(lambda raw: memoryview(raw)),
    ),
    max_size=3,
)
_fetch_partitions = st.builds(
    FetchPartitionResponse,
    partition_index=_int32,
    error_code=_int16,
    high_watermark=_int64,
    last_stable_offset=_int64,
    log_start_offset=_int64,
    records=_chunks,
    aborted_transactions=st.one_of(st.none(), st.lists(st.tuples(_int64, _int64), max_size=3)),
    preferred_read_replica=_int32,
    current_leader=st.one_of(st.none(), st.tuples(_int32, _int32)),
)
_fetch_data = st.builds(
    FetchResponseData,
    throttle_time_ms=_int32,
    error_code=_int16,
    session_id=_int32,
    topics=st.lists(
        st.builds(
            FetchTopicResponse,
            topic=_names,
            partitions=st.lists(_fetch_partitions, max_size=3),
            topic_id=st.one_of(st.none(), st.uuids()),
        ),
        max_size=3,
    ),
    node_endpoints=st.lists(
        st.builds(NodeEndpoint, node_id=_int32, host=_names, port=_int32, rack=st.one_of(st.none(), _names)),
        max_size=3,
    ),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(correlation_id=_int32, version=st.sampled_from(list(FETCH_VERSIONS)), data=_fetch_data)
def test_fetch_encode_hypothesis(correlation_id: int, version: int, data: FetchResponseData) -> None:
    _check_fetch(correlation_id, version, data)


def _fetch_fields(data: FetchResponseData) -> Any:
    """What a decoded response must give back: every field, each partition's records as one bytes."""
    return (
        data.throttle_time_ms,
        data.error_code,
        data.session_id,
        [
            (
                t.topic,
                [
                    (
                        p.partition_index,
                        p.error_code,
                        p.high_watermark,
                        p.last_stable_offset,
                        p.log_start_offset,
                        b"".join(bytes(c) for c in p.records),
                        None
                        if p.aborted_transactions is None
                        else [tuple(a) for a in p.aborted_transactions],
                        p.preferred_read_replica,
                        None if p.diverging_epoch is None else tuple(p.diverging_epoch),
                    )
                    for p in t.partitions
                ],
            )
            for t in data.topics
        ],
    )


def _check_fetch_decode(correlation_id: int, data: FetchResponseData) -> None:
    frame = b"".join(bytes(p) for p in encode_fetch_response(correlation_id, 12, data))[4:]
    decoded = decode_fetch_response(frame, 12)
    assert _fetch_fields(decoded) == _fetch_fields(data)
    for topic in decoded.topics:
        for partition in topic.partitions:
            # The follower appends these: views of the received frame, not copies (issue 29).
            assert all(isinstance(c, memoryview) and c.obj is frame and len(c) for c in partition.records)


def test_fetch_decode_round_trips_what_the_leader_encodes() -> None:
    _check_fetch_decode(12345, _sample_fetch())
    _check_fetch_decode(1, FetchResponseData(5, 0, 0, []))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    correlation_id=_int32,
    data=_fetch_data,
    diverging=st.lists(st.one_of(st.none(), st.tuples(_int32, _int64)), max_size=9),
)
def test_fetch_decode_hypothesis(
    correlation_id: int, data: FetchResponseData, diverging: list[tuple[int, int] | None]
) -> None:
    partitions = [p for t in data.topics for p in t.partitions]
    for partition, epoch in zip(partitions, diverging, strict=False):
        partition.diverging_epoch = epoch
    _check_fetch_decode(correlation_id, data)


def test_fetch_decode_reads_diverging_epoch_among_other_tags_and_rejects_truncation() -> None:
    """Kafka's leader may also send CurrentLeader (tag 1) and SnapshotId (tag 2): skipped."""
    batch = _batch(2)
    response = FetchResponse(
        version=12,
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            _FTopic(
                topic="t",
                partitions=[
                    _FPartition(
                        partition_index=4,
                        error_code=0,
                        high_watermark=9,
                        last_stable_offset=9,
                        log_start_offset=1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=batch,
                        diverging_epoch=_FPartition.EpochEndOffset(epoch=3, end_offset=8),
                        current_leader=_FPartition.LeaderIdAndEpoch(leader_id=2, leader_epoch=5),
                        snapshot_id=_FPartition.SnapshotId(end_offset=7, epoch=3),
                    )
                ],
            )
        ],
    )
    response.with_header(correlation_id=9)
    frame = bytes(response.encode(header=True, framed=False))
    partition = decode_fetch_response(frame, 12).topics[0].partitions[0]
    assert (partition.partition_index, partition.high_watermark, partition.log_start_offset) == (4, 9, 1)
    assert partition.diverging_epoch == (3, 8)
    assert [bytes(c) for c in partition.records] == [batch]
    for end in (len(frame) - 1, len(frame) - len(batch) - 2, 12):
        with pytest.raises(WireFormatError):
            decode_fetch_response(frame[:end], 12)


# --- Produce response: hand-encoded, byte-identical to kafka-python ----------------------------------

from kafka.protocol.producer import ProduceResponse  # noqa: E402

from pykraft.protocol.produce import (  # noqa: E402
    ProducePartitionResult,
    ProduceTopicResult,
    encode_produce_response,
)

_produce_partition = st.builds(
    ProducePartitionResult,
    index=st.integers(0, 2**31 - 1),
    error_code=st.integers(-1, 130),
    base_offset=st.integers(-1, 2**63 - 1),
    log_append_time_ms=st.integers(-1, 2**63 - 1),
    log_start_offset=st.integers(-1, 2**63 - 1),
    error_message=st.none() | st.text(max_size=20),
    current_leader=st.none() | st.tuples(_int32, _int32),
)
_produce_topics = st.lists(
    st.builds(
        ProduceTopicResult,
        name=st.text(min_size=1, max_size=20),
        partitions=st.lists(_produce_partition, max_size=4),
    ),
    max_size=4,
)


def _library_produce_response(
    correlation_id: int,
    version: int,
    topics: list[ProduceTopicResult],
    throttle_time_ms: int,
    endpoints: list[NodeEndpoint],
) -> bytes:
    leader_discovery = version >= 10
    response = ProduceResponse(
        version=version,
        throttle_time_ms=throttle_time_ms,
        **(
            {
                "node_endpoints": [
                    ProduceResponse.NodeEndpoint(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack)
                    for e in endpoints
                ]
            }
            if leader_discovery and endpoints
            else {}
        ),
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
                        index=p.index,
                        error_code=p.error_code,
                        base_offset=p.base_offset,
                        log_append_time_ms=p.log_append_time_ms,
                        log_start_offset=p.log_start_offset,
                        record_errors=[],
                        error_message=p.error_message,
                        **(
                            {
                                "current_leader": ProduceResponse.TopicProduceResponse.PartitionProduceResponse.LeaderIdAndEpoch(
                                    *p.current_leader
                                )
                            }
                            if leader_discovery and p.current_leader is not None
                            else {}
                        ),
                    )
                    for p in t.partitions
                ],
            )
            for t in topics
        ],
    )
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(3, 11),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    topics=_produce_topics,
    throttle_time_ms=st.integers(0, 2**31 - 1),
    endpoints=st.lists(
        st.builds(NodeEndpoint, node_id=_int32, host=_names, port=_int32, rack=st.none() | _names),
        max_size=3,
    ),
)
def test_produce_response_is_byte_identical_to_kafka_python(
    version: int,
    correlation_id: int,
    topics: list[ProduceTopicResult],
    throttle_time_ms: int,
    endpoints: list[NodeEndpoint],
) -> None:
    """KIP-951's CurrentLeader and NodeEndpoints included (written from v10 only)."""
    ours = bytes(encode_produce_response(correlation_id, version, topics, throttle_time_ms, endpoints))
    assert ours == _library_produce_response(correlation_id, version, topics, throttle_time_ms, endpoints)
    decoded = ProduceResponse.decode(ours[4:], version=version, header=True)
    assert decoded.header.correlation_id == correlation_id


def test_produce_response_rejects_versions_outside_the_range() -> None:
    for version in (2, 12):
        with pytest.raises(ValueError):
            encode_produce_response(1, version, [])
