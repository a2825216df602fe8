"""The raft RPCs on the wire (``pykraft.raft.wire``): every message round-trips, every decoder is fed
whole, one byte at a time (every truncation fails cleanly), with trailing bytes, and fuzzed; our
DescribeQuorum answer decodes with kafka-python's own schema. Then a few of Kafka's raft scenarios
(kafka-facts.md §8.10, §8.12) against a real node's controller listener over TCP."""

from __future__ import annotations

import struct
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
    response = {
        VoteRequest: VoteResponse(ErrorCode.NONE, 1, 3, True),
        BeginQuorumEpochRequest: BeginQuorumEpochResponse(ErrorCode.NONE, 1, 3),
        EndQuorumEpochRequest: EndQuorumEpochResponse(ErrorCode.NONE, 1, 3),
        FetchRequest: FetchResponse(ErrorCode.NONE, 1, 3, 10, 0, b"abc"),
        FetchSnapshotRequest: FetchSnapshotResponse(ErrorCode.NONE, 1, 3, OffsetAndEpoch(7, 2), 9, 0, b"xyz"),
    }[request_type]
    frame = bytearray(_response_frame(request_type, response))
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
