"""The raft RPCs on the wire (``pykraft.raft.wire``): every message round-trips, every decoder is fed
whole, one byte at a time (every truncation fails cleanly), with trailing bytes, and fuzzed; our
DescribeQuorum answer decodes with kafka-python's own schema. Golden bytes assembled by hand from
Kafka's schema layouts check the encoders and decoders independently of kafka-python; a Kafka peer's
Fetch decodes at every version from 12; a raft RPC for another partition is refused; DescribeQuorum is
checked from both sides (the controller's and the quorum tool's). Then a few of Kafka's raft scenarios
(kafka-facts.md §8.10, §8.12) against a real node's controller listener over TCP."""

from __future__ import annotations

import dataclasses
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.core.errors import ErrorCode, RemoteProtocolError
from pykraft.protocol import messages
from pykraft.protocol.messages import DescribeQuorumResponse
from pykraft.raft import wire
from pykraft.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    OffsetAndEpoch,
    QuorumDescription,
    RaftRequest,
    RaftResponse,
    ReplicaDescription,
    VoteRequest,
    VoteResponse,
)
from pykraft.testing import running_node
from tests.raw_client import RawClient

int32 = st.integers(-1, 2**31 - 1)
int64 = st.integers(-1, 2**62)
cluster_ids = st.none() | st.text(min_size=0, max_size=30)
errors = st.sampled_from([ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER])
offset_and_epochs = st.builds(OffsetAndEpoch, st.integers(0, 2**62), st.integers(0, 2**31 - 1))

requests = st.one_of(
    st.builds(VoteRequest, cluster_ids, int32, int32, int32, int64),
    st.builds(BeginQuorumEpochRequest, cluster_ids, int32, int32),
    st.builds(EndQuorumEpochRequest, cluster_ids, int32, int32, st.lists(int32, max_size=4).map(tuple)),
    st.builds(
        FetchRequest,
        cluster_ids,
        int32,
        int32,
        int64,
        int32,
        st.integers(0, 2**31 - 1),
        st.integers(0, 2**31 - 1),
        int64,
    ),
    st.builds(
        FetchSnapshotRequest, cluster_ids, int32, int32, offset_and_epochs, int64, st.integers(0, 2**31 - 1)
    ),
)
responses = st.one_of(
    st.tuples(st.just(VoteRequest), st.builds(VoteResponse, errors, int32, int32, st.booleans())),
    st.tuples(st.just(BeginQuorumEpochRequest), st.builds(BeginQuorumEpochResponse, errors, int32, int32)),
    st.tuples(st.just(EndQuorumEpochRequest), st.builds(EndQuorumEpochResponse, errors, int32, int32)),
    st.tuples(
        st.just(FetchRequest),
        st.builds(
            FetchResponse,
            errors,
            int32,
            int32,
            int64,
            int64,
            st.binary(max_size=64),
            st.none() | offset_and_epochs,
            st.none() | offset_and_epochs,
        ),
    ),
    st.tuples(
        st.just(FetchSnapshotRequest),
        st.builds(
            FetchSnapshotResponse,
            errors,
            int32,
            int32,
            offset_and_epochs,
            int64,
            int64,
            st.binary(max_size=64),
        ),
    ),
)
SAMPLE_REQUESTS: dict[type, RaftRequest] = {
    VoteRequest: VoteRequest("c", 3, 1, 2, 10),
    BeginQuorumEpochRequest: BeginQuorumEpochRequest("c", 1, 3),
    EndQuorumEpochRequest: EndQuorumEpochRequest("c", 1, 3, (2, 3)),
    FetchRequest: FetchRequest("c", 2, 3, 10, 2, 500, 1000, 7),
    FetchSnapshotRequest: FetchSnapshotRequest("c", 2, 3, OffsetAndEpoch(10, 2), 5, 100),
}


def _decode_request(frame: bytes) -> RaftRequest:
    view = memoryview(frame)
    return wire.decode_raft_request(messages.parse_request_header(view), view)


def _response_frame(request_type: type, response: RaftResponse, correlation_id: int = 42) -> bytes:
    request = wire.encode_raft_request(SAMPLE_REQUESTS[request_type], correlation_id, "t")
    header = messages.parse_request_header(memoryview(request))
    return bytes(wire.encode_raft_response(header, response)[4:])


@settings(max_examples=300, deadline=None)
@given(requests, st.integers(0, 2**31 - 1))
def test_requests_round_trip(request: RaftRequest, correlation_id: int) -> None:
    frame = wire.encode_raft_request(request, correlation_id, "raft-client-1")
    header = messages.parse_request_header(memoryview(frame))
    assert (header.api_key, header.api_version, header.correlation_id) == (
        wire.api_key_of(request),
        wire.VERSIONS[wire.api_key_of(request)],
        correlation_id,
    )
    assert _decode_request(frame) == request


@settings(max_examples=300, deadline=None)
@given(responses)
def test_responses_round_trip(pair: tuple[type, RaftResponse]) -> None:
    request_type, response = pair
    assert wire.decode_raft_response(request_type, _response_frame(request_type, response)) == (42, response)


@pytest.mark.parametrize("request_type", list(SAMPLE_REQUESTS), ids=lambda t: t.__name__)
def test_request_truncations_fail_cleanly_and_trailing_bytes_are_tolerated(request_type: type) -> None:
    frame = wire.encode_raft_request(SAMPLE_REQUESTS[request_type], 7, "t")
    for cut in range(len(frame)):
        with pytest.raises(RemoteProtocolError):
            _decode_request(frame[:cut])
    # Kafka's parser ignores bytes past the schema's end, and so do we (messages.decode_request).
    assert _decode_request(frame + b"\x00\x01\x02") == SAMPLE_REQUESTS[request_type]


@pytest.mark.parametrize(
    "pair",
    [
        (VoteRequest, VoteResponse(ErrorCode.NONE, 1, 3, True)),
        (BeginQuorumEpochRequest, BeginQuorumEpochResponse(ErrorCode.NONE, 1, 3)),
        (EndQuorumEpochRequest, EndQuorumEpochResponse(ErrorCode.NONE, 1, 3)),
        (FetchRequest, FetchResponse(ErrorCode.NONE, 1, 3, 10, 0, b"abc", OffsetAndEpoch(5, 2), None)),
        (
            FetchSnapshotRequest,
            FetchSnapshotResponse(ErrorCode.NONE, 1, 3, OffsetAndEpoch(7, 2), 9, 0, b"xyz"),
        ),
    ],
    ids=lambda p: type(p[1]).__name__,
)
def test_response_truncations_fail_cleanly_and_trailing_bytes_are_tolerated(pair: tuple[type, Any]) -> None:
    request_type, response = pair
    frame = _response_frame(request_type, response)
    for cut in range(len(frame)):
        with pytest.raises(RemoteProtocolError):
            wire.decode_raft_response(request_type, frame[:cut])
    assert wire.decode_raft_response(request_type, frame + b"\x00\x00") == (42, response)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(list(SAMPLE_REQUESTS)), st.binary(max_size=120), st.integers(0, 200))
def test_fuzzed_requests_decode_or_raise_remote_protocol_error(
    request_type: type, noise: bytes, at: int
) -> None:
    frame = bytearray(wire.encode_raft_request(SAMPLE_REQUESTS[request_type], 7, "t"))
    at = min(at, len(frame))
    mutated = bytes(frame[:at] + noise + frame[at + len(noise) :])
    try:
        _decode_request(mutated)
    except RemoteProtocolError:
        pass


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(list(SAMPLE_REQUESTS)), st.binary(max_size=120), st.integers(0, 200))
def test_fuzzed_responses_decode_or_raise_remote_protocol_error(
    request_type: type, noise: bytes, at: int
) -> None:
    samples: dict[type, RaftResponse] = {
        VoteRequest: VoteResponse(ErrorCode.NONE, 1, 3, True),
        BeginQuorumEpochRequest: BeginQuorumEpochResponse(ErrorCode.NONE, 1, 3),
        EndQuorumEpochRequest: EndQuorumEpochResponse(ErrorCode.NONE, 1, 3),
        FetchRequest: FetchResponse(ErrorCode.NONE, 1, 3, 10, 0, b"abc"),
        FetchSnapshotRequest: FetchSnapshotResponse(ErrorCode.NONE, 1, 3, OffsetAndEpoch(7, 2), 9, 0, b"xyz"),
    }
    frame = bytearray(_response_frame(request_type, samples[request_type]))
    at = min(at, len(frame))
    mutated = bytes(frame[:at] + noise + frame[at + len(noise) :])
    try:
        wire.decode_raft_response(request_type, mutated)
    except RemoteProtocolError:
        pass


def test_describe_quorum_answer_decodes_with_kafka_pythons_schema() -> None:
    request = messages.DescribeQuorumRequest(
        topics=[
            messages.DescribeQuorumRequest.TopicData(
                topic_name="__cluster_metadata",
                partitions=[messages.DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)],
            )
        ]
    )
    request.API_VERSION = 1
    request.with_header(correlation_id=5, client_id="t")
    frame = bytes(request.encode(header=True, framed=False))
    header = messages.parse_request_header(memoryview(frame))
    wire.decode_describe_quorum_request(header, memoryview(frame))
    description = QuorumDescription(
        2, 7, 40, (ReplicaDescription(1, 38, 1000, 900), ReplicaDescription(2, 40, 1001, 1001)), ()
    )
    encoded = wire.encode_describe_quorum_response(header, description, 2, 7)
    decoded = DescribeQuorumResponse.decode(bytes(encoded[4:]), version=1, header=True)
    partition = decoded.topics[0].partitions[0]
    assert (partition.leader_id, partition.leader_epoch, partition.high_watermark) == (2, 7, 40)
    assert [
        (v.replica_id, v.log_end_offset, v.last_fetch_timestamp, v.last_caught_up_timestamp)
        for v in partition.current_voters
    ] == [
        (1, 38, 1000, 900),
        (2, 40, 1001, 1001),
    ]
    not_leader = wire.encode_describe_quorum_response(header, None, 3, 8)
    partition = (
        DescribeQuorumResponse.decode(bytes(not_leader[4:]), version=1, header=True).topics[0].partitions[0]
    )
    assert (partition.error_code, partition.leader_id, partition.leader_epoch) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        3,
        8,
    )


# --- Kafka's raft scenarios against a real node over TCP ---------------------------------------------------


def _call(address: str, request: RaftRequest) -> RaftResponse:
    with RawClient(address) as client:
        client.sock.sendall(_framed(wire.encode_raft_request(request, 99, "t")))
        correlation_id, response = wire.decode_raft_response(type(request), client.receive_frame())
    assert correlation_id == 99
    return response


def _framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@pytest.fixture(scope="module")
def node():  # type: ignore[no-untyped-def]
    with running_node() as running:
        yield running


def test_over_tcp__cluster_id_is_checked_on_every_raft_request(node) -> None:  # type: ignore[no-untyped-def]
    # §8.12 item 133: a foreign or empty cluster id gets INCONSISTENT_CLUSTER_ID; null is accepted.
    address = node.controller_address
    for cluster_id in ("", "invalid-uuid"):
        for request in (
            VoteRequest(cluster_id, 1, 7, 0, 0),
            BeginQuorumEpochRequest(cluster_id, 7, 1),
            EndQuorumEpochRequest(cluster_id, 7, 1),
            FetchRequest(cluster_id, 7, 1, 0, 0, max_wait_ms=0),
            FetchSnapshotRequest(cluster_id, 7, 1, OffsetAndEpoch(1, 1), 0),
        ):
            assert _call(address, request).error_code == ErrorCode.INCONSISTENT_CLUSTER_ID, request
    fetched = _call(address, FetchRequest(None, 7, 1, 0, 0, max_wait_ms=0))
    assert fetched.error_code == ErrorCode.NONE and fetched.leader_id == node.config.node_id


def test_over_tcp__fetch_snapshot_scenarios(node) -> None:  # type: ignore[no-untyped-def]
    address = node.controller_address
    leader = _call(address, FetchRequest(None, 7, 1, 0, 0, max_wait_ms=0))
    epoch = leader.leader_epoch
    # §8.10 item 115: no such snapshot; the bootstrap id (0, 0) is never served.
    missing = _call(address, FetchSnapshotRequest(None, 7, epoch, OffsetAndEpoch(10**9, epoch), 0))
    assert missing.error_code == ErrorCode.SNAPSHOT_NOT_FOUND
    bootstrap = _call(address, FetchSnapshotRequest(None, 7, epoch, OffsetAndEpoch(0, 0), 0))
    assert bootstrap.error_code == ErrorCode.SNAPSHOT_NOT_FOUND
    # §8.10 item 116: another partition.
    other = _call(address, FetchSnapshotRequest(None, 7, epoch, OffsetAndEpoch(1, 1), 0, topic_name="other"))
    assert other.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # §8.10 item 121: an older / newer leader epoch.
    older = _call(address, FetchSnapshotRequest(None, 7, epoch - 1, OffsetAndEpoch(1, 1), 0))
    newer = _call(address, FetchSnapshotRequest(None, 7, epoch + 1, OffsetAndEpoch(1, 1), 0))
    assert (older.error_code, newer.error_code) == (
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    )
    # §8.10 item 111: a last fetched epoch above the leader's is an invalid request.
    invalid = _call(address, FetchRequest(None, 7, epoch, 1, epoch + 5, max_wait_ms=0))
    assert invalid.error_code == ErrorCode.INVALID_REQUEST


# --- golden bytes: the layouts of Kafka's JSON schemas, assembled by hand -----------------------------------
# Independent of kafka-python's encoder and of our copies of the schemas (protocol/schemas/*.json): field
# order, flexible/non-flexible encodings and tag numbers as in clients/src/main/resources/common/message.

TOPIC = "__cluster_metadata"


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(s: str | None) -> bytes:
    return b"\x00" if s is None else _uvarint(len(s.encode()) + 1) + s.encode()


def _string(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else struct.pack(">h", len(s.encode())) + s.encode()


def _tags(fields: dict[int, bytes]) -> bytes:
    return _uvarint(len(fields)) + b"".join(
        _uvarint(tag) + _uvarint(len(value)) + value for tag, value in sorted(fields.items())
    )


NO_TAGS = _tags({})


def _request_header(api_key: int, version: int, correlation_id: int, flexible: bool) -> bytes:
    # Request header v1, or v2 (v1 + tagged fields) for a flexible version; client_id "t".
    return (
        struct.pack(">hhi", api_key, version, correlation_id) + _string("t") + (NO_TAGS if flexible else b"")
    )


def _vote_v0(topic: str = TOPIC, partition: int = 0) -> bytes:
    return (
        _request_header(52, 0, 7, flexible=True)
        + _compact_string("c")  # ClusterId, nullable
        + _uvarint(2)  # Topics: one
        + _compact_string(topic)
        + _uvarint(2)  # Partitions: one
        + struct.pack(
            ">iiiiq", partition, 3, 1, 2, 10
        )  # index, CandidateEpoch, CandidateId, LastOffsetEpoch, LastOffset
        + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )


def _begin_quorum_epoch_v0(topic: str = TOPIC) -> bytes:  # v0 is not flexible
    return (
        _request_header(53, 0, 7, flexible=False)
        + _string("c")
        + struct.pack(">i", 1)
        + _string(topic)
        + struct.pack(">i", 1)
        + struct.pack(">iii", 0, 1, 3)  # index, LeaderId, LeaderEpoch
    )


def _end_quorum_epoch_v0() -> bytes:
    return (
        _request_header(54, 0, 7, flexible=False)
        + _string("c")
        + struct.pack(">i", 1)
        + _string(TOPIC)
        + struct.pack(">i", 1)
        + struct.pack(">iii", 0, 1, 3)
        + struct.pack(">iii", 2, 2, 3)  # PreferredSuccessors (v0 only): [2, 3]
    )


def _fetch_snapshot_v0() -> bytes:
    return (
        _request_header(59, 0, 7, flexible=True)
        + struct.pack(">ii", 2, 100)  # ReplicaId, MaxBytes
        + _uvarint(2)
        + _compact_string(TOPIC)
        + _uvarint(2)
        + struct.pack(">ii", 0, 3)  # Partition, CurrentLeaderEpoch
        + struct.pack(">qi", 10, 2)  # SnapshotId: EndOffset, Epoch
        + NO_TAGS
        + struct.pack(">q", 5)  # Position
        + NO_TAGS
        + NO_TAGS
        + _tags({0: _compact_string("c")})  # ClusterId is tag 0 here
    )


def _fetch(version: int, topic: str | uuid.UUID = wire.METADATA_TOPIC_ID, partition: int = 0) -> bytes:
    """The raft Fetch of SAMPLE_REQUESTS[FetchRequest] at ``version`` (12..18), as a Kafka peer sends it."""
    if version >= 13:
        assert isinstance(topic, uuid.UUID)
        topic_bytes = topic.bytes
    else:
        assert isinstance(topic, str)
        topic_bytes = _compact_string(topic)
    partition_tags = {1: struct.pack(">q", 7)} if version >= 18 else {}  # HighWatermark (KIP-1166)
    top_tags = {0: _compact_string("c")}  # ClusterId
    if version >= 15:
        top_tags[1] = struct.pack(">iq", 2, -1) + NO_TAGS  # ReplicaState: ReplicaId, ReplicaEpoch
    return (
        _request_header(1, version, 7, flexible=True)
        + (struct.pack(">i", 2) if version < 15 else b"")  # ReplicaId until v14
        + struct.pack(
            ">iiibii", 500, 0, 1000, 0, 0, -1
        )  # MaxWait, MinBytes, MaxBytes, Isolation, Session(Epoch)
        + _uvarint(2)
        + topic_bytes
        + _uvarint(2)
        + struct.pack(
            ">iiqiqi", partition, 3, 10, 2, -1, 1000
        )  # CurrentLeaderEpoch, FetchOffset, LastFetchedEpoch
        + _tags(partition_tags)
        + NO_TAGS
        + _uvarint(1)  # ForgottenTopicsData: none
        + _compact_string("")  # RackId
        + _tags(top_tags)
    )


def _describe_quorum_v1(topic: str = TOPIC) -> bytes:
    return (
        _request_header(55, 1, 7, flexible=True)
        + _uvarint(2)
        + _compact_string(topic)
        + _uvarint(2)
        + struct.pack(">i", 0)
        + NO_TAGS
        + NO_TAGS
        + NO_TAGS
    )


@pytest.mark.parametrize(
    ("request_type", "golden"),
    [
        (VoteRequest, _vote_v0()),
        (BeginQuorumEpochRequest, _begin_quorum_epoch_v0()),
        (EndQuorumEpochRequest, _end_quorum_epoch_v0()),
        (FetchRequest, _fetch(18)),
        (FetchSnapshotRequest, _fetch_snapshot_v0()),
    ],
    ids=["Vote-v0", "BeginQuorumEpoch-v0", "EndQuorumEpoch-v0", "Fetch-v18", "FetchSnapshot-v0"],
)
def test_golden_bytes__requests_encode_and_decode_as_kafkas_schemas_lay_them_out(
    request_type: type, golden: bytes
) -> None:
    assert wire.encode_raft_request(SAMPLE_REQUESTS[request_type], 7, "t") == golden
    assert _decode_request(golden) == SAMPLE_REQUESTS[request_type]


def _response_header(correlation_id: int = 42) -> bytes:
    return struct.pack(">i", correlation_id) + NO_TAGS  # response header v1 (every raft response is flexible)


def _fetch_response_v18(tags: dict[int, bytes], topic_id: uuid.UUID = wire.METADATA_TOPIC_ID) -> bytes:
    return (
        _response_header()
        + struct.pack(">ihi", 0, 0, 0)  # ThrottleTimeMs, ErrorCode, SessionId
        + _uvarint(2)
        + topic_id.bytes
        + _uvarint(2)
        + struct.pack(
            ">ihqqq", 0, 0, 10, -1, 4
        )  # index, ErrorCode, HighWatermark, LastStableOffset, LogStartOffset
        + b"\x00"  # AbortedTransactions: null
        + struct.pack(">i", -1)  # PreferredReadReplica
        + _uvarint(4)
        + b"abc"  # Records
        + _tags(tags)
        + NO_TAGS
        + NO_TAGS
    )


RAFT_FETCH_TAGS = {
    0: struct.pack(">iq", 2, 5) + NO_TAGS,  # DivergingEpoch: Epoch, EndOffset
    1: struct.pack(">ii", 1, 3) + NO_TAGS,  # CurrentLeader: LeaderId, LeaderEpoch
    2: struct.pack(">qi", 7, 2) + NO_TAGS,  # SnapshotId: EndOffset, Epoch
}


@pytest.mark.parametrize(
    ("request_type", "golden", "expected"),
    [
        (
            VoteRequest,
            _response_header()
            + struct.pack(">h", 0)
            + _uvarint(2)
            + _compact_string(TOPIC)
            + _uvarint(2)
            + struct.pack(">ihii?", 0, 0, 1, 3, True)
            + NO_TAGS * 3,
            VoteResponse(ErrorCode.NONE, 1, 3, True),
        ),
        (
            BeginQuorumEpochRequest,  # v0: not flexible, response header v0
            struct.pack(">i", 42)
            + struct.pack(">h", 0)
            + struct.pack(">i", 1)
            + _string(TOPIC)
            + struct.pack(">i", 1)
            + struct.pack(">ihii", 0, ErrorCode.FENCED_LEADER_EPOCH, 2, 4),
            BeginQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, 2, 4),
        ),
        (
            FetchRequest,
            _fetch_response_v18(RAFT_FETCH_TAGS),
            FetchResponse(ErrorCode.NONE, 1, 3, 10, 4, b"abc", OffsetAndEpoch(5, 2), OffsetAndEpoch(7, 2)),
        ),
        (
            FetchRequest,  # Kafka leaves default tagged fields out: no leader known, nothing to do
            _fetch_response_v18({}),
            FetchResponse(ErrorCode.NONE, -1, -1, 10, 4, b"abc", None, None),
        ),
        (
            FetchSnapshotRequest,
            _response_header()
            + struct.pack(">ih", 0, 0)
            + _uvarint(2)
            + _compact_string(TOPIC)
            + _uvarint(2)
            + struct.pack(">ih", 0, 0)
            + struct.pack(">qi", 7, 2)
            + NO_TAGS
            + struct.pack(">qq", 9, 0)  # Size, Position
            + _uvarint(4)
            + b"xyz"  # UnalignedRecords
            + _tags({0: struct.pack(">ii", 1, 3) + NO_TAGS})  # CurrentLeader is tag 0 here
            + NO_TAGS
            + NO_TAGS,
            FetchSnapshotResponse(ErrorCode.NONE, 1, 3, OffsetAndEpoch(7, 2), 9, 0, b"xyz"),
        ),
    ],
    ids=["Vote", "BeginQuorumEpoch", "Fetch", "Fetch-no-tags", "FetchSnapshot"],
)
def test_golden_bytes__responses_decode(request_type: type, golden: bytes, expected: RaftResponse) -> None:
    assert wire.decode_raft_response(request_type, golden) == (42, expected)


@pytest.mark.parametrize("version", range(12, 19))
def test_fetch_from_a_kafka_peer__every_version_from_12__decodes(version: int) -> None:
    # v12 names the topic, v13+ uses its id; ReplicaId moves into the tagged ReplicaState at v15 (KIP-903);
    # HighWatermark arrives at v18. The controller listener serves Fetch at any version.
    expected = SAMPLE_REQUESTS[FetchRequest]
    assert isinstance(expected, FetchRequest)
    if version < 18:
        expected = dataclasses.replace(expected, high_watermark=-1)
    assert _decode_request(_fetch(version, TOPIC if version < 13 else wire.METADATA_TOPIC_ID)) == expected


@pytest.mark.parametrize(
    "frame",
    [
        _vote_v0(topic="__cluster_metadatb"),
        _vote_v0(partition=1),
        _begin_quorum_epoch_v0(topic="other"),
        _fetch(18, topic=uuid.UUID(int=2)),
        _fetch(18, partition=3),
        _fetch(12, topic="other"),
        _fetch(12, topic=TOPIC, partition=1),
    ],
    ids=[
        "vote-topic",
        "vote-partition",
        "bqe-topic",
        "fetch-topic-id",
        "fetch-partition",
        "fetch-v12-topic",
        "fetch-v12-partition",
    ],
)
def test_raft_request_for_another_partition__refused(frame: bytes) -> None:
    # KafkaRaftClient answers INVALID_REQUEST; this codec cannot serve it as __cluster_metadata-0.
    with pytest.raises(RemoteProtocolError, match="only the metadata partition"):
        _decode_request(frame)


def test_raft_response_for_another_partition__refused() -> None:
    with pytest.raises(RemoteProtocolError, match="only the metadata partition"):
        wire.decode_raft_response(FetchRequest, _fetch_response_v18({}, topic_id=uuid.UUID(int=2)))
    other = _response_frame(VoteRequest, VoteResponse(ErrorCode.NONE, 1, 3, True)).replace(
        TOPIC.encode(), b"__cluster_metadatb"
    )
    with pytest.raises(RemoteProtocolError, match="only the metadata partition"):
        wire.decode_raft_response(VoteRequest, other)


# --- DescribeQuorum: both sides ------------------------------------------------------------------------------


def _kafka_python_describe_quorum_request() -> bytes:
    # How pykraft.cli.metadata (and any kafka-python admin) asks.
    cls = messages.DescribeQuorumRequest
    request = cls(
        topics=[cls.TopicData(topic_name=TOPIC, partitions=[cls.TopicData.PartitionData(partition_index=0)])]
    )
    request.API_VERSION = 1
    request.with_header(correlation_id=7, client_id="t")
    return bytes(request.encode(header=True, framed=False))


def test_describe_quorum_request__golden_and_kafka_python_agree() -> None:
    assert (
        wire.encode_describe_quorum_request(7, "t")
        == _describe_quorum_v1()
        == _kafka_python_describe_quorum_request()
    )


def _decode_describe_quorum_request(frame: bytes) -> None:
    view = memoryview(frame)
    wire.decode_describe_quorum_request(messages.parse_request_header(view), view)


def test_describe_quorum_request__truncations_fail__trailing_bytes_tolerated__other_partition_refused() -> (
    None
):
    frame = wire.encode_describe_quorum_request(7, "t")
    for cut in range(len(frame)):
        with pytest.raises(RemoteProtocolError):
            _decode_describe_quorum_request(frame[:cut])
    _decode_describe_quorum_request(frame + b"\x00\x01")
    with pytest.raises(RemoteProtocolError, match="only the metadata partition"):
        _decode_describe_quorum_request(_describe_quorum_v1(topic="other"))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.integers(0, 60))
def test_describe_quorum_request__fuzzed__decodes_or_raises_remote_protocol_error(
    noise: bytes, at: int
) -> None:
    frame = bytearray(wire.encode_describe_quorum_request(7, "t"))
    at = min(at, len(frame))
    try:
        _decode_describe_quorum_request(bytes(frame[:at] + noise + frame[at + len(noise) :]))
    except RemoteProtocolError:
        pass


replica_descriptions = st.builds(ReplicaDescription, int32, int64, int64, int64)
descriptions = st.builds(
    QuorumDescription,
    int32,
    int32,
    int64,
    st.lists(replica_descriptions, max_size=5).map(tuple),
    st.lists(replica_descriptions, max_size=5).map(tuple),
)
DESCRIPTION = QuorumDescription(
    2,
    7,
    40,
    (ReplicaDescription(1, 38, 1000, 900), ReplicaDescription(2, 40, 1001, 1001)),
    (ReplicaDescription(9, 12, 990, -1),),
)


def _describe_quorum_answer(
    description: QuorumDescription | None, leader_id: int = 3, leader_epoch: int = 8
) -> bytes:
    frame = wire.encode_describe_quorum_request(42, "t")
    header = messages.parse_request_header(memoryview(frame))
    return bytes(wire.encode_describe_quorum_response(header, description, leader_id, leader_epoch)[4:])


@settings(max_examples=200, deadline=None)
@given(descriptions)
def test_describe_quorum_response__round_trips(description: QuorumDescription) -> None:
    assert wire.decode_describe_quorum_response(_describe_quorum_answer(description)) == (
        42,
        ErrorCode.NONE,
        description,
    )


def test_describe_quorum_response__not_leader__names_the_known_leader() -> None:
    assert wire.decode_describe_quorum_response(_describe_quorum_answer(None, 3, 8)) == (
        42,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        QuorumDescription(3, 8, -1, (), ()),
    )


def test_describe_quorum_response__top_level_error_from_kafka_python__decodes() -> None:
    # DescribeQuorumResponse.singletonErrorResponse-style answers with no partition at all.
    response = DescribeQuorumResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=[])
    response.API_VERSION = 1
    response.with_header(correlation_id=5)
    frame = bytes(response.encode(header=True, framed=False))
    assert wire.decode_describe_quorum_response(frame) == (
        5,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        QuorumDescription(-1, -1, -1, (), ()),
    )


def test_describe_quorum_response__truncations_fail__trailing_bytes_tolerated() -> None:
    frame = _describe_quorum_answer(DESCRIPTION)
    for cut in range(len(frame)):
        with pytest.raises(RemoteProtocolError):
            wire.decode_describe_quorum_response(frame[:cut])
    assert wire.decode_describe_quorum_response(frame + b"\x00\x00") == (42, ErrorCode.NONE, DESCRIPTION)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 150))
def test_describe_quorum_response__fuzzed__decodes_or_raises_remote_protocol_error(
    noise: bytes, at: int
) -> None:
    frame = bytearray(_describe_quorum_answer(DESCRIPTION))
    at = min(at, len(frame))
    try:
        wire.decode_describe_quorum_response(bytes(frame[:at] + noise + frame[at + len(noise) :]))
    except RemoteProtocolError:
        pass


def test_over_tcp__controller_listener_advertises_the_raft_rpcs(node) -> None:  # type: ignore[no-untyped-def]
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

    with RawClient(node.controller_address) as client:
        response = client.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1"), ApiVersionsResponse, 3
        )
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert keys[52] == (0, 0) and keys[53] == (0, 0) and keys[54] == (0, 0) and keys[59] == (0, 0)
    assert keys[1] == (12, 18) and keys[55] == (1, 2) and keys[62] == (0, 4)
    assert 0 not in keys  # no Produce on the controller listener


def test_fetch_response_names_the_leaders_endpoint_in_node_endpoints() -> None:
    """KIP-853: a replica that asked a bootstrap server learns where the leader listens (Fetch v16+
    NodeEndpoints); without a leader, or on no endpoint, nothing is sent."""
    named = FetchResponse(ErrorCode.FENCED_LEADER_EPOCH, 3, 7, leader_endpoint=("127.0.0.1", 19093))
    assert wire.decode_raft_response(FetchRequest, _response_frame(FetchRequest, named)) == (42, named)
    unknown = FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, 7, leader_endpoint=("127.0.0.1", 1))
    decoded = wire.decode_raft_response(FetchRequest, _response_frame(FetchRequest, unknown))[1]
    assert isinstance(decoded, FetchResponse) and decoded.leader_endpoint is None


def test_describe_quorum_v2_answer_names_directory_ids_and_the_voters_listeners() -> None:
    """DescribeQuorum v2 (KIP-853), read with kafka-python's schema: ReplicaDirectoryId per replica and
    Nodes with each voter's listeners; the same answer at v1 has neither."""
    directory_id = uuid.UUID(int=0xD1)
    description = QuorumDescription(
        2,
        7,
        40,
        (ReplicaDescription(2, 40, 1001, 1001, directory_id.bytes),),
        (ReplicaDescription(9, 12, 990, -1),),
        nodes=((2, (("CONTROLLER", "127.0.0.1", 9093),)),),
    )
    cls = messages.DescribeQuorumRequest
    request = cls(
        topics=[cls.TopicData(topic_name=TOPIC, partitions=[cls.TopicData.PartitionData(partition_index=0)])]
    )
    request.API_VERSION = 2
    request.with_header(correlation_id=5, client_id="t")
    header = messages.parse_request_header(memoryview(bytes(request.encode(header=True, framed=False))))
    answer = bytes(wire.encode_describe_quorum_response(header, description, 2, 7)[4:])
    response = messages.DescribeQuorumResponse.decode(answer, version=2, header=True)
    partition = response.topics[0].partitions[0]
    assert partition.current_voters[0].replica_directory_id == directory_id
    assert partition.observers[0].replica_directory_id in (None, uuid.UUID(int=0))  # kafka-python: None
    assert [(n.node_id, [(e.name, e.host, e.port) for e in n.listeners]) for n in response.nodes] == [
        (2, [("CONTROLLER", "127.0.0.1", 9093)])
    ]
