"""RaftNode driven by hand: one message at a time, Ready by Ready."""

from __future__ import annotations

import random

from pykraft.core.errors import ErrorCode
from pykraft.raft.control import decode_leader_change
from pykraft.raft.log import MemoryRaftLog
from pykraft.raft.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    Inbound,
    OffsetAndEpoch,
    Outbound,
    VoteRequest,
    VoteResponse,
)
from pykraft.raft.node import RaftNode
from pykraft.raft.ready import CommittedBatch, Ready
from pykraft.raft.state import ALLOWED_TRANSITIONS, QuorumState, Role, majority_end_offset

VOTERS = frozenset({1, 2, 3})


def _node(node_id: int = 1, voters: frozenset[int] = VOTERS, **kwargs: object) -> RaftNode:
    log = kwargs.pop("log", None) or MemoryRaftLog()
    state = kwargs.pop("quorum_state", None)
    return RaftNode(node_id, voters, log, state, random.Random(7), 0, **kwargs)  # type: ignore[arg-type]


def _drain(node: RaftNode, now_ms: int = 0) -> tuple[list[Ready], list[Outbound], list[CommittedBatch]]:
    readies: list[Ready] = []
    messages: list[Outbound] = []
    committed: list[CommittedBatch] = []
    while node.has_ready():
        ready = node.ready()
        if ready.flush_to_offset is not None:
            node.log.flush(ready.flush_to_offset)
        readies.append(ready)
        messages += ready.messages
        committed += ready.committed
        node.advance(ready, now_ms)
    return readies, messages, committed


def test_single_voter__start__leader_with_leader_change_then_commits_after_flush() -> None:
    node = _node(voters=frozenset({1}))
    assert (node.role, node.epoch, node.leader_id) == (Role.LEADER, 1, 1)
    first = node.ready()
    assert first.quorum_state == QuorumState(1, leader_id=1, voters=frozenset({1}))
    assert first.flush_to_offset == 1
    assert first.committed == ()  # not flushed yet: not counted
    node.log.flush(1)
    node.advance(first, 0)
    assert node.high_watermark == 1
    (batch,) = node.ready().committed
    assert batch.is_control
    assert decode_leader_change(batch.records[0]).granting_voters == (1,)


def test_single_voter__propose__committed_after_flush() -> None:
    node = _node(voters=frozenset({1}))
    _drain(node)
    assert node.propose([b"a", b"b"], 5) == 2
    _readies, _messages, committed = _drain(node, 5)
    assert [(b.base_offset, b.records) for b in committed] == [(1, (b"a", b"b"))]
    assert node.high_watermark == 3


def test_single_voter__restart_as_leader__resigns_epoch_and_leads_next() -> None:
    log = MemoryRaftLog()
    node = _node(voters=frozenset({1}), log=log)
    _drain(node)
    restarted = _node(voters=frozenset({1}), log=log, quorum_state=node.quorum_state())
    assert (restarted.role, restarted.epoch) == (Role.LEADER, 2)


def test_propose__not_leader__returns_none() -> None:
    assert _node().propose([b"x"], 0) is None


def test_vote__granted__vote_persisted_in_the_ready_that_sends_it() -> None:
    node = _node()
    node.step(Inbound(2, VoteRequest(None, 1, 2, 0, 0), 9), 10)
    ready = node.ready()
    assert ready.quorum_state == QuorumState(1, voted_id=2, voters=VOTERS)
    (outbound,) = ready.messages
    assert outbound == Outbound(2, VoteResponse(ErrorCode.NONE, -1, 1, True), 9)


def test_vote__candidate_log_behind__rejected() -> None:
    log = MemoryRaftLog()
    log.append_as_leader([b"x"], 2, 0)
    node = _node(log=log, quorum_state=QuorumState(2, voters=VOTERS))
    node.step(Inbound(2, VoteRequest(None, 3, 2, 1, 5), 1), 0)
    _r, messages, _c = _drain(node)
    assert messages[-1].message == VoteResponse(ErrorCode.NONE, -1, 3, False)
    assert node.role == Role.UNATTACHED


def test_cluster_id__null_accepted_other_or_empty_rejected() -> None:
    for cluster_id, expected in [
        (None, ErrorCode.NONE),
        ("abc", ErrorCode.NONE),
        ("", ErrorCode.INCONSISTENT_CLUSTER_ID),
        ("other", ErrorCode.INCONSISTENT_CLUSTER_ID),
    ]:
        node = _node(cluster_id="abc")
        node.step(Inbound(2, BeginQuorumEpochRequest(cluster_id, 2, 1), 1), 0)
        _r, messages, _c = _drain(node)
        responses = [m.message for m in messages if m.destination_id == 2 and m.correlation_id == 1]
        assert responses[0].error_code == expected  # type: ignore[union-attr]


def _leader_of_three() -> RaftNode:
    node = _node()
    node.tick(10_000)  # election timeout: candidate for epoch 1
    assert node.role == Role.CANDIDATE
    node.step(Inbound(2, VoteResponse(ErrorCode.NONE, -1, 1, True), 0), 10_000)
    assert node.leader_id == 1  # now the leader
    _drain(node, 10_000)
    return node


def test_leader__high_watermark__needs_a_majority_of_flushed_offsets() -> None:
    node = _leader_of_three()
    assert node.high_watermark == 0
    node.propose([b"a"], 10_001)
    _drain(node, 10_001)
    node.step(Inbound(2, FetchRequest(None, 2, 1, 2, 1), 5), 10_002)
    assert node.high_watermark == 2
    _r, messages, committed = _drain(node, 10_002)
    assert [b.base_offset for b in committed] == [0, 1]
    assert any(isinstance(m.message, FetchResponse) and m.message.high_watermark == 2 for m in messages)


def test_leader__fetch_with_diverging_log__returns_diverging_epoch() -> None:
    node = _leader_of_three()  # log: LeaderChange at offset 0, epoch 1
    node.step(Inbound(3, FetchRequest(None, 3, 1, 4, 0), 8), 10_001)
    _r, messages, _c = _drain(node, 10_001)
    (response,) = [m.message for m in messages if m.correlation_id == 8]
    assert isinstance(response, FetchResponse)
    assert response.diverging_epoch is not None
    assert response.diverging_epoch.offset == 0


def test_follower__diverging_epoch__truncates_and_refetches() -> None:
    log = MemoryRaftLog()
    log.append_as_leader([b"old"], 1, 0)
    log.append_as_leader([b"stale"], 2, 0)
    node = _node(log=log, quorum_state=QuorumState(3, leader_id=2, voters=VOTERS))
    assert node.role == Role.FOLLOWER
    _r, messages, _c = _drain(node)
    fetch = messages[-1]
    assert isinstance(fetch.message, FetchRequest)
    assert (fetch.message.fetch_offset, fetch.message.last_fetched_epoch) == (2, 2)
    response = FetchResponse(ErrorCode.NONE, 2, 3, 0, diverging_epoch=OffsetAndEpoch(1, 1))
    node.step(Inbound(2, response, fetch.correlation_id), 1)
    assert log.end_offset == 1
    _r, messages, _c = _drain(node, 1)
    assert messages[-1].message.fetch_offset == 1  # type: ignore[union-attr]


def test_follower__stale_response__ignored() -> None:
    node = _node(quorum_state=QuorumState(3, leader_id=2, voters=VOTERS))
    _r, messages, _c = _drain(node)
    stale_correlation_id = messages[-1].correlation_id + 1
    node.step(Inbound(2, FetchResponse(ErrorCode.NONE, 2, 3, 0, records=b"garbage"), stale_correlation_id), 1)
    assert node.log.end_offset == 0


def test_transitions_table__every_role_has_an_exit() -> None:
    assert set(ALLOWED_TRANSITIONS) == set(Role)
    assert all(targets for targets in ALLOWED_TRANSITIONS.values())


def test_majority_end_offset__table() -> None:
    assert majority_end_offset([5], 1) == 5
    assert majority_end_offset([5, 3], 3) == 3
    assert majority_end_offset([5], 3) == 0
    assert majority_end_offset([9, 7, 1, 1], 5) == 1
    assert majority_end_offset([9, 7, 5, 1, 1], 5) == 5


def test_leader__old_epoch_entries_on_majority__high_watermark_waits_for_own_epoch() -> None:
    # Raft §5.4.2: entries of epoch 1 on a majority do not commit until the epoch-2 LeaderChange does.
    log = MemoryRaftLog()
    log.append_as_leader([b"old"], 1, 0)
    node = _node(log=log, quorum_state=QuorumState(2, voted_id=1, voters=VOTERS))
    node.step(Inbound(2, VoteResponse(ErrorCode.NONE, -1, 2, True), 0), 0)
    assert node.leader_id == 1
    _drain(node)
    node.step(Inbound(2, FetchRequest(None, 2, 2, 1, 1), 1), 1)  # follower holds offset 0 only
    assert node.high_watermark == 0
    node.step(Inbound(2, FetchRequest(None, 2, 2, 2, 2), 2), 2)  # now the LeaderChange too
    assert node.high_watermark == 2


def test_follower__lost_fetch__resent_after_the_retry_backoff_not_the_request_timeout() -> None:
    node = _node(quorum_state=QuorumState(3, leader_id=2, voters=VOTERS), retry_backoff_ms=20)
    _r, messages, _c = _drain(node)
    fetch = messages[-1]
    node.request_failed(2, fetch.correlation_id, 5, refused=False)
    node.tick(24)
    assert not [m for m in _drain(node, 24)[1] if isinstance(m.message, FetchRequest)]
    node.tick(25)
    (again,) = [m for m in _drain(node, 25)[1] if isinstance(m.message, FetchRequest)]
    assert again.correlation_id != fetch.correlation_id
    assert node.role == Role.FOLLOWER  # a disconnect alone does not start an election


def test_follower__leader_refuses_connections__campaigns_within_half_an_election_timeout() -> None:
    node = _node(quorum_state=QuorumState(3, leader_id=2, voters=VOTERS), election_timeout_ms=1000)
    _r, messages, _c = _drain(node)
    node.request_failed(2, messages[-1].correlation_id, 100, refused=True)
    assert node.next_deadline_ms() < 100 + 500  # not the 2000 ms fetch timeout
    node.tick(100 + 500)
    assert node.role == Role.CANDIDATE and node.epoch == 4
    _r, messages, _c = _drain(node, 600)
    assert {m.destination_id for m in messages if isinstance(m.message, VoteRequest)} == {2, 3}


def test_follower__another_peer_refuses__changes_nothing() -> None:
    node = _node(quorum_state=QuorumState(3, leader_id=2, voters=VOTERS))
    _drain(node)
    deadline = node.next_deadline_ms()
    node.request_failed(3, 12345, 10, refused=True)
    assert node.next_deadline_ms() == deadline and node.role == Role.FOLLOWER


def _leader_of_three() -> RaftNode:
    node = _node(election_timeout_ms=100)
    node.tick(1000)
    _r, messages, _c = _drain(node, 1000)
    for vote in [m for m in messages if isinstance(m.message, VoteRequest)]:
        node.step(
            Inbound(
                vote.destination_id, VoteResponse(ErrorCode.NONE, -1, node.epoch, True), vote.correlation_id
            ),
            1000,
        )
    assert node.role == Role.LEADER
    return node


def test_leader__background_flush__not_counted_until_flush_completed() -> None:
    node = _leader_of_three()
    ready = node.ready()
    assert ready.flush_to_offset == 1  # the LeaderChange batch
    node.advance(ready, 1000, flush_done=False)  # sent while the fsync runs
    assert not node.has_ready() or node.ready().flush_to_offset is None  # not asked for again
    # Both followers have it flushed; the leader's own copy is not durable yet: a majority is still
    # reached (2 of 3 followers' ends count), but only with the followers.
    node.step(Inbound(2, FetchRequest(None, 2, node.epoch, 1, node.epoch, max_wait_ms=0), 1), 1001)
    assert node.high_watermark == 0  # leader unflushed + one follower = not a flushed majority
    node.flush_completed(1, 1002)
    assert node.high_watermark == 1


def test_leader__background_flush__a_resigned_leader_flushes_again_before_it_fetches() -> None:
    node = _leader_of_three()
    ready = node.ready()
    node.advance(ready, 1000, flush_done=False)
    # A higher epoch's leader appears: this node follows; its pending fsync must be redone before any
    # fetch claims that offset.
    node.step(Inbound(3, BeginQuorumEpochRequest(None, 3, node.epoch + 1), 7), 1001)
    assert node.role == Role.FOLLOWER
    follow = node.ready()
    assert follow.flush_to_offset == 1


def test_observer__asks_a_voter_for_the_leader_then_follows_it() -> None:
    node = _node(node_id=9, request_timeout_ms=1000)
    assert not node.is_voter and node.role == Role.UNATTACHED
    node.tick(node.next_deadline_ms())
    _r, messages, _c = _drain(node, 2000)
    (ask,) = [m for m in messages if isinstance(m.message, FetchRequest)]
    assert ask.destination_id in VOTERS and ask.message.replica_id == 9  # type: ignore[union-attr]
    # A follower voter answers with the leader it knows.
    answer = FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, 2, 5)
    node.step(Inbound(ask.destination_id, answer, ask.correlation_id), 2001)
    assert (node.role, node.leader_id, node.epoch) == (Role.FOLLOWER, 2, 5)
    _r, messages, _c = _drain(node, 2001)
    assert [m.destination_id for m in messages if isinstance(m.message, FetchRequest)] == [2]


def test_observer__no_answer__asks_again_after_the_request_timeout() -> None:
    node = _node(node_id=9, request_timeout_ms=1000)
    first_deadline = node.next_deadline_ms()
    node.tick(first_deadline)
    _drain(node, first_deadline)
    assert node.next_deadline_ms() == first_deadline + 1000
    node.tick(first_deadline + 1000)
    _r, messages, _c = _drain(node, first_deadline + 1000)
    assert [type(m.message) for m in messages] == [FetchRequest]
    assert node.role == Role.UNATTACHED  # an observer never campaigns


def test_observer__a_refused_or_unanswered_question_is_asked_again_after_the_retry_backoff() -> None:
    node = _node(node_id=9, request_timeout_ms=1000)
    start = node.next_deadline_ms()
    node.tick(start)
    _r, messages, _c = _drain(node, start)
    (ask,) = [m for m in messages if isinstance(m.message, FetchRequest)]
    node.request_failed(ask.destination_id, ask.correlation_id, start + 5, refused=True)
    assert node.next_deadline_ms() == start + 5 + node.retry_backoff_ms  # not the request timeout
    # A voter that knows no leader (an election is on): also asked again soon.
    t = node.next_deadline_ms()
    node.tick(t)
    _r, messages, _c = _drain(node, t)
    (again,) = [m for m in messages if isinstance(m.message, FetchRequest)]
    no_leader = FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, 0)
    node.step(Inbound(again.destination_id, no_leader, again.correlation_id), t + 5)
    assert node.next_deadline_ms() == t + 5 + node.retry_backoff_ms


def test_observer__a_leader_that_refuses_connections_is_given_up_at_once() -> None:
    node = _node(node_id=9, request_timeout_ms=1000)
    node.tick(node.next_deadline_ms())
    _r, messages, _c = _drain(node, 2000)
    (ask,) = [m for m in messages if isinstance(m.message, FetchRequest)]
    node.step(
        Inbound(
            ask.destination_id, FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, 2, 5), ask.correlation_id
        ),
        2001,
    )
    _r, messages, _c = _drain(node, 2001)
    (fetch,) = [m for m in messages if isinstance(m.message, FetchRequest)]
    assert node.role == Role.FOLLOWER
    node.request_failed(2, fetch.correlation_id, 2010, refused=True)
    node.tick(2010)
    assert node.role == Role.UNATTACHED and node.leader_id == -1
    node.tick(node.next_deadline_ms())  # due at once
    assert node.next_deadline_ms() > 2010
    _r, messages, _c = _drain(node, 2010)
    assert [type(m.message) for m in messages] == [FetchRequest]  # asks a voter at once


def test_observer__a_broker_only_process_does_not_flush_what_it_holds_a_controller_does() -> None:
    """KafkaRaftClient.appendAsFollower flushes only on a voter or with followersAlwaysFlush (every
    controller): a broker's metadata log is flushed when it closes, not per fetch (issue 29)."""
    for always_flush, expected in ((False, None), (True, 1)):
        log = MemoryRaftLog()
        log.append_as_leader([b"x"], 1, 0)
        node = _node(node_id=9, log=log, followers_always_flush=always_flush)
        assert not node.is_voter
        assert node.ready().flush_to_offset == expected
