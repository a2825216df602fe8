"""Raft's cluster-id check on every request (kafka-facts.md §5.6, §8.12 item 133 for Vote, BeginQuorumEpoch,
EndQuorumEpoch and Fetch; §8.17 item 161: a node with cluster id X gets 104 from a leader of Y)."""

from __future__ import annotations

import random

import pytest

from pykraft.core.errors import ErrorCode
from pykraft.raft.log import MemoryRaftLog
from pykraft.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    Inbound,
    Outbound,
    RaftRequest,
    VoteRequest,
    VoteResponse,
)
from pykraft.raft.node import RaftNode
from pykraft.raft.state import Role

VOTERS = frozenset({1, 2, 3})
CLUSTER = "zd2vLVrZQlCLJj8-k7A10w"


def _node(cluster_id: str | None) -> RaftNode:
    return RaftNode(1, VOTERS, MemoryRaftLog(), None, random.Random(7), 0, cluster_id=cluster_id)


def _leader(cluster_id: str | None) -> RaftNode:
    node = _node(cluster_id)
    node.tick(10_000)
    node.step(Inbound(2, VoteResponse(ErrorCode.NONE, -1, 1, True), 0), 10_000)
    assert node.role == Role.LEADER
    _drain(node, 10_000)
    return node


def _drain(node: RaftNode, now_ms: int) -> list[Outbound]:
    out: list[Outbound] = []
    while node.has_ready():
        ready = node.ready()
        if ready.flush_to_offset is not None:
            node.log.flush(ready.flush_to_offset)
        out += ready.messages
        node.advance(ready, now_ms)
    return out


def _answer(node: RaftNode, request: RaftRequest, now_ms: int) -> ErrorCode:
    node.step(Inbound(2, request, 77), now_ms)
    (response,) = [
        m.message for m in _drain(node, now_ms) if m.correlation_id == 77 and m.destination_id == 2
    ]
    return response.error_code  # type: ignore[union-attr]


CASES = [(None, ErrorCode.NONE), (CLUSTER, ErrorCode.NONE), ("", ErrorCode.INCONSISTENT_CLUSTER_ID)]
CASES += [("invalid-uuid", ErrorCode.INCONSISTENT_CLUSTER_ID)]


@pytest.mark.parametrize("cluster_id, expected", CASES)
def test_vote_request(cluster_id: str | None, expected: ErrorCode) -> None:
    assert _answer(_node(CLUSTER), VoteRequest(cluster_id, 1, 2, 0, 0), 0) == expected


@pytest.mark.parametrize("cluster_id, expected", CASES)
def test_begin_quorum_epoch_request(cluster_id: str | None, expected: ErrorCode) -> None:
    assert _answer(_node(CLUSTER), BeginQuorumEpochRequest(cluster_id, 2, 1), 0) == expected


@pytest.mark.parametrize("cluster_id, expected", CASES)
def test_end_quorum_epoch_request(cluster_id: str | None, expected: ErrorCode) -> None:
    node = _node(CLUSTER)
    node.step(Inbound(2, BeginQuorumEpochRequest(None, 2, 1), 1), 0)
    _drain(node, 0)
    assert _answer(node, EndQuorumEpochRequest(cluster_id, 2, 1, (1,)), 0) == expected


@pytest.mark.parametrize("cluster_id, expected", CASES)
def test_fetch_request(cluster_id: str | None, expected: ErrorCode) -> None:
    leader = _leader(CLUSTER)
    assert _answer(leader, FetchRequest(cluster_id, 2, 1, 0, 0), 10_001) == expected


def test_leader_of_y__rejects_a_follower_of_x__and_the_follower_takes_no_data() -> None:
    leader = _leader("Y")
    leader.propose([b"metadata"], 10_001)
    _drain(leader, 10_001)
    follower = RaftNode(2, VOTERS, MemoryRaftLog(), None, random.Random(1), 0, cluster_id="X")
    follower.step(Inbound(1, BeginQuorumEpochRequest(None, 1, 1), 5), 0)
    fetches = [m for m in _drain(follower, 0) if isinstance(m.message, FetchRequest)]
    assert fetches and fetches[-1].message.cluster_id == "X"  # type: ignore[union-attr]
    leader.step(Inbound(2, fetches[-1].message, fetches[-1].correlation_id), 10_002)
    (response,) = [m.message for m in _drain(leader, 10_002) if m.destination_id == 2]
    assert isinstance(response, FetchResponse)
    assert response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID and response.records == b""
    follower.step(Inbound(1, response, fetches[-1].correlation_id), 1)
    assert follower.log.end_offset == 0


def test_node_without_cluster_id_accepts_any__until_it_learns_one() -> None:
    # KIP-1262: before discovery the node cannot check; the publisher sets the id once persisted.
    leader = _leader(None)
    assert _answer(leader, FetchRequest("anything", 2, 1, 0, 0), 10_001) == ErrorCode.NONE
    leader.cluster_id = CLUSTER
    assert _answer(leader, FetchRequest("anything", 2, 1, 0, 0), 10_002) == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert _answer(leader, FetchRequest(CLUSTER, 2, 1, 0, 0), 10_003) == ErrorCode.NONE


def test_requests_sent_carry_the_nodes_cluster_id() -> None:
    node = _node(CLUSTER)
    node.tick(10_000)
    votes = [m.message for m in _drain(node, 10_000) if isinstance(m.message, VoteRequest)]
    assert votes and {v.cluster_id for v in votes} == {CLUSTER}
