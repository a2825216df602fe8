"""RaftNode.describe_quorum: the leader's DescribeQuorum view of voters and observers
(KafkaRaftClient.handleDescribeQuorumRequest, LeaderState.ReplicaState)."""

from __future__ import annotations

import random

from pykraft.core.errors import ErrorCode
from pykraft.raft.log import MemoryRaftLog
from pykraft.raft.messages import (
    UNKNOWN_ID,
    FetchRequest,
    FetchResponse,
    Inbound,
    QuorumDescription,
    ReplicaDescription,
    VoteRequest,
    VoteResponse,
)
from pykraft.raft.node import RaftNode
from pykraft.raft.state import OBSERVER_SESSION_TIMEOUT_MS, Leader, ReplicaState, Role


def _drain(node: RaftNode, now_ms: int) -> list[FetchResponse]:
    responses = []
    while node.has_ready():
        ready = node.ready()
        if ready.flush_to_offset is not None:
            node.log.flush(ready.flush_to_offset)
        responses += [m.message for m in ready.messages if isinstance(m.message, FetchResponse)]
        node.advance(ready, now_ms)
    return responses


def _leader(voters: frozenset[int], now_ms: int = 1000) -> RaftNode:
    node = RaftNode(1, voters, MemoryRaftLog(), None, random.Random(7), 0, election_timeout_ms=100)
    node.tick(now_ms)
    for ready_message in node.ready().messages:
        if isinstance(ready_message.message, VoteRequest):
            granted = VoteResponse(ErrorCode.NONE, UNKNOWN_ID, node.epoch, True)
            node.step(Inbound(ready_message.destination_id, granted, ready_message.correlation_id), now_ms)
    _drain(node, now_ms)
    assert node.role == Role.LEADER
    return node


def _fetch(
    node: RaftNode, replica_id: int, offset: int, now_ms: int, last_fetched_epoch: int = -1
) -> FetchResponse:
    epoch = node.epoch if last_fetched_epoch < 0 else last_fetched_epoch
    request = FetchRequest(None, replica_id, node.epoch, offset, epoch if offset > 0 else 0, max_wait_ms=0)
    node.step(Inbound(replica_id, request, 99), now_ms)
    (response,) = _drain(node, now_ms)
    return response


def _append(node: RaftNode, now_ms: int) -> None:
    assert node.propose([b"r"], now_ms) is not None
    _drain(node, now_ms)


def test_not_leader__no_description() -> None:
    node = RaftNode(1, frozenset({1, 2, 3}), MemoryRaftLog(), None, random.Random(7), 0)
    assert node.leader_id == UNKNOWN_ID  # unattached
    assert node.describe_quorum(0) is None
    node.tick(10_000)
    assert node.role == Role.CANDIDATE
    assert node.describe_quorum(10_000) is None


def test_new_leader__itself_at_its_flushed_end_and_now__voters_unknown() -> None:
    node = _leader(frozenset({1, 2, 3}))
    assert node.describe_quorum(1500) == QuorumDescription(
        leader_id=1,
        leader_epoch=node.epoch,
        high_watermark=node.high_watermark,
        current_voters=(
            ReplicaDescription(1, 1, 1500, 1500),  # the LeaderChange batch, flushed
            ReplicaDescription(2, -1, -1, -1),
            ReplicaDescription(3, -1, -1, -1),
        ),
        observers=(),
    )


def test_leader_reports_only_its_flushed_end_offset() -> None:
    node = _leader(frozenset({1, 2, 3}))
    node.propose([b"a"], 1001)
    node.advance(node.ready(), 1001, flush_done=False)  # sent while the fsync runs
    description = node.describe_quorum(1002)
    assert description is not None
    assert description.current_voters[0] == ReplicaDescription(1, 1, 1002, 1002)
    node.flush_completed(2, 1003)
    description = node.describe_quorum(1004)
    assert description is not None
    assert description.current_voters[0].log_end_offset == 2


def test_voter_fetches__end_offset_and_timestamps__high_watermark() -> None:
    node = _leader(frozenset({1, 2, 3}))
    _fetch(node, 2, 1, 1100)  # at the leader's end: caught up
    description = node.describe_quorum(1200)
    assert description is not None
    assert description.high_watermark == 1
    assert description.current_voters[1:] == (
        ReplicaDescription(2, 1, 1100, 1100),
        ReplicaDescription(3, -1, -1, -1),
    )


def test_voter_never_exactly_at_the_end__caught_up_when_it_reached_the_previous_fetchs_end() -> None:
    # LeaderState.ReplicaState.updateFollowerState: the leader appends between every two fetches.
    node = _leader(frozenset({1, 2, 3}))
    _fetch(node, 2, 1, 1100)  # leader end 1: caught up at 1100
    _append(node, 1150)  # leader end 2
    _fetch(node, 2, 1, 1200)  # behind 2; still at the previous fetch's end (1): no newer catch-up
    description = node.describe_quorum(1200)
    assert description is not None and description.current_voters[1] == ReplicaDescription(2, 1, 1200, 1100)
    _append(node, 1250)  # leader end 3
    _fetch(node, 2, 2, 1300)  # behind 3, but has what the leader had at the fetch of 1200
    description = node.describe_quorum(1300)
    assert description is not None and description.current_voters[1] == ReplicaDescription(2, 2, 1300, 1200)


def test_diverging_voter_fetch__changes_nothing() -> None:
    node = _leader(frozenset({1, 2, 3}))
    _fetch(node, 2, 1, 1100)
    response = _fetch(node, 2, 5, 1200, last_fetched_epoch=node.epoch)  # past the leader's end
    assert response.diverging_epoch is not None
    description = node.describe_quorum(1200)
    assert description is not None and description.current_voters[1] == ReplicaDescription(2, 1, 1100, 1100)


def test_observers__tracked_on_valid_fetches_only__consumers_and_own_id_ignored() -> None:
    node = _leader(frozenset({1}))  # a sole voter: no check-quorum, so time can pass
    _fetch(node, 7, 1, 2000)  # an observer (a broker) at the end
    _fetch(node, 5, 0, 2001)  # an observer behind
    _fetch(node, UNKNOWN_ID, 0, 2002)  # a consumer of the metadata log: not a replica
    _fetch(node, 1, 1, 2003)  # claims the leader's own id: not an observer
    diverging = _fetch(node, 8, 9, 2004, last_fetched_epoch=node.epoch)  # past the end: says nothing
    assert diverging.diverging_epoch is not None
    description = node.describe_quorum(2005)
    assert description is not None
    assert description.current_voters == (ReplicaDescription(1, 1, 2005, 2005),)
    assert description.observers == (ReplicaDescription(5, 0, 2001, -1), ReplicaDescription(7, 1, 2000, 2000))


def test_observers__forgotten_after_the_observer_session_timeout() -> None:
    node = _leader(frozenset({1}))
    _fetch(node, 7, 1, 2000)
    _fetch(node, 5, 1, 3000)
    timeout = OBSERVER_SESSION_TIMEOUT_MS
    description = node.describe_quorum(2000 + timeout - 1)
    assert description is not None and [o.replica_id for o in description.observers] == [5, 7]
    description = node.describe_quorum(2000 + timeout)  # read-only: 7 is hidden, not dropped
    assert description is not None and [o.replica_id for o in description.observers] == [5]
    state = node._state
    assert isinstance(state, Leader) and set(state.observers) == {5, 7}
    _fetch(node, 9, 1, 2000 + timeout)  # a new observer: the inactive ones are dropped
    assert set(state.observers) == {5, 9}
    _fetch(node, 7, 1, 2000 + timeout + 1)  # it comes back: a new session
    description = node.describe_quorum(2000 + timeout + 1)
    assert description is not None
    assert [(o.replica_id, o.last_fetch_timestamp) for o in description.observers] == [
        (5, 3000),
        (7, 2000 + timeout + 1),
        (9, 2000 + timeout),
    ]


def test_replica_state__caught_up_rules_table() -> None:
    # (time, fetch offset, leader end) of successive fetches, and the caught-up time after each: at the
    # leader's end now, or at its end of the previous fetch (then dated to that fetch), else unchanged.
    replica = ReplicaState()
    steps = [(10, 0, 5, -1), (20, 5, 5, 20), (30, 5, 8, 20), (40, 8, 9, 30), (50, 7, 9, 30), (60, 9, 12, 50)]
    for now_ms, fetch_offset, leader_end, caught_up in steps:
        replica.update_follower_state(now_ms, fetch_offset, leader_end)
        assert (replica.end_offset, replica.last_fetch_ms) == (fetch_offset, now_ms)
        assert (replica.last_caught_up_ms if replica.last_caught_up_ms is not None else -1) == caught_up, (
            now_ms
        )
