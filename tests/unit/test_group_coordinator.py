"""The classic group coordinator as a pure state machine, driven with a virtual clock (no sleeping)."""

from __future__ import annotations

import random

import pytest

from pykraft.coordinator.group_coordinator import (
    CommitOffset,
    CommitRequest,
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinRequest,
    JoinResult,
    LeaveMember,
    SyncRequest,
    SyncResult,
)
from pykraft.coordinator.offsets_records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    assigned_partitions,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    java_string_hash,
    partition_for,
    subscribed_topics,
)
from pykraft.core.errors import ErrorCode

SESSION_MS = 10_000
REBALANCE_MS = 30_000
GROUP = "g"


class Harness:
    """One coordinator, a virtual clock and a token counter; results are collected per token."""

    def __init__(self, *, initial_delay_ms: int = 0) -> None:
        config = GroupConfig(
            offsets_topic_num_partitions=4,
            group_min_session_timeout_ms=1000,
            group_initial_rebalance_delay_ms=initial_delay_ms,
        )
        self.coord = GroupCoordinator(config, random.Random(7))
        self.coord.owned_partitions.update(range(4))
        self.now_ms = 1_000_000
        self.token = 0
        self.results: dict[int, JoinResult | SyncResult] = {}

    def _collect(self) -> None:
        for token, result in self.coord.take_completions():
            assert token not in self.results, "a token completes once"
            self.results[token] = result

    def join(
        self,
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = (("range", b"meta"),),
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        version_requires_id: bool = True,
    ) -> int:
        self.token += 1
        req = JoinRequest(
            GROUP,
            member_id,
            instance,
            session_ms,
            rebalance_ms,
            "consumer",
            protocols,
            "client",
            "/127.0.0.1",
            require_known_member_id=version_requires_id,
        )
        self.coord.join_group(req, self.token, self.now_ms)
        self._collect()
        return self.token

    def join_new(self, **kwargs: object) -> int:
        """KIP-394: join, get MEMBER_ID_REQUIRED with an id, join again with it. Returns the token."""
        first = self.result(self.join(**kwargs))  # type: ignore[arg-type]
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        return self.join(first.member_id, **kwargs)  # type: ignore[arg-type]

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: tuple[tuple[str, bytes], ...] = (),
        instance: str | None = None,
    ) -> int:
        self.token += 1
        req = SyncRequest(GROUP, generation, member_id, instance, None, None, assignments)
        self.coord.sync_group(req, self.token, self.now_ms)
        self._collect()
        return self.token

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
        error = self.coord.heartbeat(GROUP, generation, member_id, instance, self.now_ms)
        self._collect()
        return error

    def leave(self, member_id: str, instance: str | None = None) -> ErrorCode:
        error, results = self.coord.leave_group(GROUP, [LeaveMember(member_id, instance)], self.now_ms)
        self._collect()
        assert error == ErrorCode.NONE
        return results[0][1]

    def advance(self, ms: int) -> None:
        self.now_ms += ms
        self.coord.tick(self.now_ms)
        self._collect()

    def result(self, token: int) -> JoinResult | SyncResult:
        return self.results[token]

    def join_result(self, token: int) -> JoinResult:
        result = self.results[token]
        assert isinstance(result, JoinResult)
        return result

    def done(self, token: int) -> bool:
        return token in self.results

    @property
    def group(self):  # type: ignore[no-untyped-def]
        return self.coord.groups[GROUP]


def stable_group_of(h: Harness, n: int) -> list[str]:
    """Bring ``n`` members to Stable (each gets assignment b'a-<i>'); returns member ids."""
    tokens = [h.join_new() for _ in range(n)]
    # Each new member after the first triggers a rebalance the others must rejoin.
    for _ in range(n):
        pending = [t for t in tokens if not h.done(t)]
        if not pending:
            break
        for t in list(tokens):
            if h.done(t):
                result = h.join_result(t)
                if result.error_code == ErrorCode.NONE and h.group.state == GroupState.PREPARING_REBALANCE:
                    tokens[tokens.index(t)] = h.join(result.member_id)
    results = [h.join_result(t) for t in tokens]
    assert all(r.error_code == ErrorCode.NONE for r in results), results
    generation = results[0].generation_id
    leader = results[0].leader
    members = [r.member_id for r in results]
    assignments = tuple((m, b"a-%d" % i) for i, m in enumerate(members))
    sync_tokens = [h.sync(m, generation, assignments if m == leader else ()) for m in members]
    for i, t in enumerate(sync_tokens):
        result = h.result(t)
        assert isinstance(result, SyncResult) and result.error_code == ErrorCode.NONE
        assert result.assignment == b"a-%d" % i
    assert h.group.state == GroupState.STABLE
    return members


# --- KIP-394 member ids, join, sync ------------------------------------------------------------------


def test_first_join_without_member_id_gets_member_id_required_then_joins() -> None:
    h = Harness()
    first = h.join_result(h.join())
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("client-")
    assert h.group.state == GroupState.EMPTY
    second = h.join_result(h.join(first.member_id))
    assert second.error_code == ErrorCode.NONE
    assert second.member_id == first.member_id == second.leader
    assert second.generation_id == 1
    assert second.protocol_name == "range"
    assert [m.member_id for m in second.members] == [first.member_id]
    assert [m.metadata for m in second.members] == [b"meta"]
    assert h.group.state == GroupState.COMPLETING_REBALANCE


def test_old_join_versions_get_a_member_id_without_the_extra_round() -> None:
    h = Harness()
    result = h.join_result(h.join(version_requires_id=False))
    assert result.error_code == ErrorCode.NONE and result.member_id


def test_unknown_member_id_for_a_missing_group_and_bad_session_timeout() -> None:
    h = Harness()
    unknown = h.join_result(h.join("nobody"))
    # Kafka's classicGroupJoin echoes the unknown member id
    assert (unknown.error_code, unknown.member_id) == (ErrorCode.UNKNOWN_MEMBER_ID, "nobody")
    assert h.join_result(h.join(session_ms=10)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join_result(h.join(protocols=())).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_not_coordinator_for_a_partition_this_node_does_not_lead() -> None:
    h = Harness()
    h.coord.owned_partitions.clear()
    assert h.join_result(h.join()).error_code == ErrorCode.NOT_COORDINATOR
    h.coord.begin_load(h.coord.partition_for(GROUP))
    assert h.join_result(h.join()).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_leader_gets_members_followers_get_none_and_sync_hands_out_assignments() -> None:
    h = Harness()
    a, b = stable_group_of(h, 2)
    assert h.group.generation_id >= 2
    assert h.heartbeat(a, h.group.generation_id) == ErrorCode.NONE
    assert h.heartbeat(b, h.group.generation_id - 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("stranger", h.group.generation_id) == ErrorCode.UNKNOWN_MEMBER_ID


def test_follower_sync_waits_for_the_leader() -> None:
    h = Harness()
    a_token = h.join_new()
    a = h.join_result(a_token).member_id
    b_token = h.join_new()  # b's join puts the group back to PreparingRebalance; a must rejoin
    assert not h.done(b_token)
    assert h.heartbeat(a, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    a_rejoin = h.join(a)
    ra, rb = h.join_result(a_rejoin), h.join_result(b_token)
    assert ra.generation_id == rb.generation_id == 2
    assert ra.leader == a and len(ra.members) == 2 and rb.members == ()
    follower_sync = h.sync(rb.member_id, 2)
    assert not h.done(follower_sync)
    assert h.heartbeat(rb.member_id, 2) == ErrorCode.NONE  # alive between join and sync
    h.sync(a, 2, ((a, b"A"), (rb.member_id, b"B")))
    follower = h.result(follower_sync)
    assert isinstance(follower, SyncResult) and follower.assignment == b"B"
    assert follower.protocol_name == "range"


def test_sync_errors() -> None:
    h = Harness()
    a, _ = stable_group_of(h, 2)
    gen = h.group.generation_id
    assert h.result(h.sync(a, gen + 1)).error_code == ErrorCode.ILLEGAL_GENERATION
    assert h.result(h.sync("nobody", gen)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # Stable: a member that lost its sync response gets its assignment again.
    again = h.result(h.sync(a, gen))
    assert isinstance(again, SyncResult) and again.assignment == b"a-0"


def test_protocol_selection_uses_votes_over_common_protocols() -> None:
    h = Harness()
    t1 = h.join_new(protocols=(("roundrobin", b"r"), ("range", b"x")))
    m1 = h.join_result(t1).member_id
    t2 = h.join_new(protocols=(("range", b"y"), ("cooperative-sticky", b"c")))
    h.join(m1, protocols=(("roundrobin", b"r"), ("range", b"x")))
    r2 = h.join_result(t2)
    # range is the only common protocol.
    assert r2.protocol_name == "range"
    t3 = h.join(protocols=(("sticky", b"s"),))
    assert h.join_result(t3).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


# --- leave, session expiry, rebalance timeout --------------------------------------------------------


def test_leave_triggers_rebalance_and_remaining_members_take_over() -> None:
    h = Harness()
    a, b, c = stable_group_of(h, 3)
    gen = h.group.generation_id
    error, results = h.coord.leave_group(GROUP, [LeaveMember(c, None)], h.now_ms)
    assert error == ErrorCode.NONE and results[0][1] == ErrorCode.NONE
    assert h.group.state == GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    ta, tb = h.join(a), h.join(b)
    assert h.join_result(ta).generation_id == gen + 1
    assert {m.member_id for m in h.join_result(ta).members} == {a, b}
    assert h.join_result(tb).error_code == ErrorCode.NONE
    _, unknown = h.coord.leave_group(GROUP, [LeaveMember("nobody", None)], h.now_ms)
    assert unknown[0][1] == ErrorCode.UNKNOWN_MEMBER_ID


def test_member_that_stops_heartbeating_is_removed_after_its_session_timeout() -> None:
    h = Harness()
    a, b = stable_group_of(h, 2)
    gen = h.group.generation_id
    for _ in range(3):  # a keeps heartbeating; b has gone quiet
        h.advance(SESSION_MS // 3)
        assert h.heartbeat(a, gen) == ErrorCode.NONE
    assert b in h.group.members
    h.advance(SESSION_MS // 3)
    assert b not in h.group.members
    assert h.group.state == GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    result = h.join_result(h.join(a))
    assert result.generation_id == gen + 1 and [m.member_id for m in result.members] == [a]


def test_session_expiry_is_exact_on_the_virtual_clock() -> None:
    h = Harness()
    (a,) = stable_group_of(h, 1)
    h.advance(SESSION_MS - 1)
    assert a in h.group.members
    h.advance(1)
    assert a not in h.group.members
    # The last member leaving empties the group (a new, empty generation).
    assert h.group.state == GroupState.EMPTY
    assert h.coord.next_deadline_ms() is None


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    h = Harness()
    a, b = stable_group_of(h, 2)
    gen = h.group.generation_id
    ta = h.join(a, protocols=(("range", b"new-topics"),))  # a's metadata changed: rebalance
    assert not h.done(ta)
    # b keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins within the rebalance timeout.
    for _ in range(REBALANCE_MS // 5000 - 1):
        h.advance(5000)
        assert h.heartbeat(b, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    assert not h.done(ta)
    h.advance(5000)
    result = h.join_result(ta)
    assert result.error_code == ErrorCode.NONE and result.generation_id == gen + 1
    assert [m.member_id for m in result.members] == [a]
    assert b not in h.group.members


def test_members_that_never_sync_are_removed_after_the_rebalance_timeout() -> None:
    h = Harness()
    ta = h.join_new()
    a = h.join_result(ta).member_id
    tb = h.join_new()
    h.join(a)
    b = h.join_result(tb).member_id
    gen = h.group.generation_id
    h.sync(a, gen, ((a, b"A"), (b, b"B")))  # the leader syncs, b never does
    assert h.group.state == GroupState.STABLE
    for _ in range(REBALANCE_MS // 5000):
        h.advance(5000)
        h.heartbeat(a, gen)
        h.heartbeat(b, gen)
    h.advance(1)
    assert b not in h.group.members
    assert h.group.state == GroupState.PREPARING_REBALANCE


def test_pending_member_id_lapses_after_the_session_timeout() -> None:
    h = Harness()
    (a,) = stable_group_of(h, 1)
    pending = h.join_result(h.join()).member_id
    assert pending in h.group.pending_members
    h.advance(SESSION_MS // 2)
    h.heartbeat(a, h.group.generation_id)
    h.advance(SESSION_MS // 2)
    assert pending not in h.group.pending_members
    assert h.join_result(h.join(pending)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert a in h.group.members


def test_initial_rebalance_delay_waits_for_more_members_then_completes() -> None:
    h = Harness(initial_delay_ms=3000)
    t1 = h.join_new()
    h.advance(2000)
    t2 = h.join_new()  # arrives during the delay: the delay is extended once
    h.advance(1000)
    assert not h.done(t1) and not h.done(t2)
    h.advance(3000)
    r1, r2 = h.join_result(t1), h.join_result(t2)
    assert r1.generation_id == r2.generation_id == 1
    assert len(r1.members) + len(r2.members) == 2


def test_leave_during_join_answers_the_parked_request() -> None:
    h = Harness()
    a, b = stable_group_of(h, 2)
    ta = h.join(a, protocols=(("range", b"other"),))
    assert h.leave(a) == ErrorCode.NONE
    assert h.join_result(ta).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    tb = h.join(b)
    assert h.join_result(tb).members[0].member_id == b


# --- static membership (KIP-345) ------------------------------------------------------------------------


def test_static_member_rejoin_with_new_id_replaces_it_without_rebalance() -> None:
    h = Harness()
    t = h.join(instance="i-1")  # static members skip MEMBER_ID_REQUIRED
    first = h.join_result(t)
    assert first.error_code == ErrorCode.NONE
    h.sync(first.member_id, first.generation_id, ((first.member_id, b"A"),), instance="i-1")
    gen = h.group.generation_id
    # The process restarts: same instance id, no member id.
    again = h.join_result(h.join(instance="i-1"))
    assert again.error_code == ErrorCode.NONE
    assert again.member_id != first.member_id
    assert again.generation_id == gen and h.group.state == GroupState.STABLE
    assert again.skip_assignment and again.leader == again.member_id
    synced = h.result(h.sync(again.member_id, gen, instance="i-1"))
    assert isinstance(synced, SyncResult) and synced.assignment == b"A"
    # The old incarnation is fenced.
    assert h.heartbeat(first.member_id, gen, instance="i-1") == ErrorCode.FENCED_INSTANCE_ID
    error, results = h.coord.leave_group(GROUP, [LeaveMember(first.member_id, "i-1")], h.now_ms)
    assert results[0][1] == ErrorCode.FENCED_INSTANCE_ID
    _, results = h.coord.leave_group(GROUP, [LeaveMember("", "i-1")], h.now_ms)
    assert results[0][1] == ErrorCode.NONE
    assert h.group.state == GroupState.PREPARING_REBALANCE or not h.group.members


def test_static_member_is_not_removed_when_it_misses_a_rebalance() -> None:
    h = Harness()
    ts = h.join(instance="s")
    s = h.join_result(ts).member_id
    td = h.join_new()
    h.join(s, instance="s")
    d = h.join_result(td).member_id
    gen = h.group.generation_id
    h.sync(s, gen, ((s, b"S"), (d, b"D")), instance="s")
    h.sync(d, gen)
    td2 = h.join(d, protocols=(("range", b"changed"),))
    for _ in range(REBALANCE_MS // 5000):  # s heartbeats but does not rejoin in the rebalance timeout
        h.heartbeat(s, gen, instance="s")
        h.advance(5000)
    assert h.join_result(td2).error_code == ErrorCode.NONE
    assert s in h.group.members


def _static_pair(h: Harness) -> tuple[str, str, int]:
    """Static members s1 and s2 (instance ids "i-1", "i-2") in a Stable group: (s1, s2, generation)."""
    s1 = h.join_result(h.join(instance="i-1")).member_id
    t2 = h.join(instance="i-2")
    r1, r2 = h.join_result(h.join(s1, instance="i-1")), h.join_result(t2)
    assert r1.error_code == r2.error_code == ErrorCode.NONE
    gen = r1.generation_id
    h.sync(r1.member_id, gen, ((r1.member_id, b"A"), (r2.member_id, b"B")), instance="i-1")
    h.sync(r2.member_id, gen, instance="i-2")
    assert h.group.state == GroupState.STABLE
    return r1.member_id, r2.member_id, gen


def test_requests_without_an_instance_id_check_a_static_member_by_member_id() -> None:
    """Kafka's ClassicGroup.validateMember: Heartbeat v0-2, SyncGroup v0-2, OffsetCommit v0-6,
    TxnOffsetCommit v0-2 and LeaveGroup v0-2 carry no instance id; a static member using them (aiokafka,
    issue 27) is checked by member id alone rather than answered FENCED_INSTANCE_ID."""
    h = Harness()
    s1, s2, gen = _static_pair(h)
    assert h.heartbeat(s1, gen) == ErrorCode.NONE
    synced = h.result(h.sync(s1, gen))
    assert (
        isinstance(synced, SyncResult) and synced.error_code == ErrorCode.NONE and synced.assignment == b"A"
    )
    assert _commit(h, gen, s1, {("t", 0): 4}) == ErrorCode.NONE
    assert _commit(h, gen, s1, {("t", 0): 5}, transactional=True) == ErrorCode.NONE
    # Still checked: the member id and the generation.
    assert h.heartbeat("someone-else", gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat(s1, gen + 1) == ErrorCode.ILLEGAL_GENERATION
    assert _commit(h, gen, "someone-else", {("t", 0): 6}) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.group.state == GroupState.STABLE and h.group.generation_id == gen
    # LeaveGroup v0-2 by member id removes the static member and its instance id.
    assert h.leave(s2) == ErrorCode.NONE
    assert "i-2" not in h.group.static_members and s2 not in h.group.members


def test_instance_id_in_a_request_must_map_to_its_member_id() -> None:
    h = Harness()
    s1, s2, gen = _static_pair(h)
    assert h.heartbeat(s1, gen, instance="i-1") == ErrorCode.NONE
    # Another member's instance id, or an instance id the group does not know (Kafka answers the latter
    # UNKNOWN_MEMBER_ID).
    assert h.heartbeat(s1, gen, instance="i-2") == ErrorCode.FENCED_INSTANCE_ID
    assert h.heartbeat(s1, gen, instance="nobody") == ErrorCode.UNKNOWN_MEMBER_ID
    assert _commit(h, gen, s1, {("t", 0): 1}, instance="i-2") == ErrorCode.FENCED_INSTANCE_ID
    synced = h.result(h.sync(s2, gen, instance="i-1"))
    assert isinstance(synced, SyncResult) and synced.error_code == ErrorCode.FENCED_INSTANCE_ID
    # A restarted instance replaces s1: the old incarnation's member id is gone with or without the
    # instance id in its requests.
    again = h.join_result(h.join(instance="i-1"))
    assert again.error_code == ErrorCode.NONE and again.member_id != s1
    assert h.heartbeat(s1, gen, instance="i-1") == ErrorCode.FENCED_INSTANCE_ID
    assert h.heartbeat(s1, gen) == ErrorCode.UNKNOWN_MEMBER_ID
    assert _commit(h, gen, s1, {("t", 0): 1}) == ErrorCode.UNKNOWN_MEMBER_ID


# --- offsets ----------------------------------------------------------------------------------------------


def _commit(
    h: Harness,
    generation: int,
    member: str,
    offsets: dict[tuple[str, int], int],
    *,
    instance: str | None = None,
    transactional: bool = False,
) -> ErrorCode:
    req = CommitRequest(
        GROUP,
        generation,
        member,
        instance,
        tuple(CommitOffset(t, p, o, 3, "m") for (t, p), o in offsets.items()),
        transactional,
    )
    plan = h.coord.commit_offsets(req, h.now_ms)
    if plan.error_code == ErrorCode.NONE:
        h.coord.apply(plan, h.now_ms)
    return plan.error_code


def test_commit_and_fetch_offsets_with_generation_checks() -> None:
    h = Harness()
    (a,) = stable_group_of(h, 1)
    gen = h.group.generation_id
    assert _commit(h, gen, a, {("t", 0): 42, ("t", 1): 7}) == ErrorCode.NONE
    assert _commit(h, gen - 1, a, {("t", 0): 1}) == ErrorCode.ILLEGAL_GENERATION
    assert _commit(h, gen, "nobody", {("t", 0): 1}) == ErrorCode.UNKNOWN_MEMBER_ID
    assert _commit(h, -1, "", {("t", 0): 1}) == ErrorCode.UNKNOWN_MEMBER_ID  # group not empty
    error, offsets = h.coord.fetch_offsets(GROUP, [("t", [0, 1, 2])])
    assert error == ErrorCode.NONE
    assert [(t, p, v.offset if v else None) for t, p, v in offsets] == [
        ("t", 0, 42),
        ("t", 1, 7),
        ("t", 2, None),
    ]
    error, everything = h.coord.fetch_offsets(GROUP, None)
    assert [(p, v.offset if v else None) for _, p, v in everything] == [(0, 42), (1, 7)]


def test_commit_outside_group_management_creates_an_empty_group() -> None:
    h = Harness()
    assert _commit(h, -1, "", {("t", 0): 5}) == ErrorCode.NONE
    assert h.group.state == GroupState.EMPTY
    assert _commit(h, 3, "x", {("t", 0): 5}) == ErrorCode.UNKNOWN_MEMBER_ID
    h.coord.groups.clear()
    assert _commit(h, 3, "x", {("t", 0): 5}) == ErrorCode.ILLEGAL_GENERATION


def test_commit_rejects_oversized_metadata_per_partition() -> None:
    h = Harness()
    req = CommitRequest(
        GROUP, -1, "", None, (CommitOffset("t", 0, 1, -1, "x" * 5000), CommitOffset("t", 1, 2, -1, None))
    )
    plan = h.coord.commit_offsets(req, h.now_ms)
    assert plan.partition_errors == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 1): ErrorCode.NONE}
    assert len(plan.records) == 1


def test_commit_during_completing_rebalance_is_rebalance_in_progress() -> None:
    h = Harness()
    result = h.join_result(h.join_new())
    assert h.group.state == GroupState.COMPLETING_REBALANCE
    assert (
        _commit(h, result.generation_id, result.member_id, {("t", 0): 1}) == ErrorCode.REBALANCE_IN_PROGRESS
    )
    # Kafka does not enforce the group state for a transactional commit.
    assert (
        _commit(h, result.generation_id, result.member_id, {("t", 0): 1}, transactional=True)
        == ErrorCode.NONE
    )


def test_member_less_transactional_commit_is_accepted_by_an_active_group() -> None:
    """TxnOffsetCommit v0-2 has no member id or generation (aiokafka's send_offsets_to_transaction):
    Kafka's ClassicGroup.validateOffsetCommit accepts it for a group in any state, where a member-less
    OffsetCommit is refused while the group has members (issue 27)."""
    h = Harness()
    (a,) = stable_group_of(h, 1)
    gen = h.group.generation_id
    assert _commit(h, -1, "", {("t", 0): 1}) == ErrorCode.UNKNOWN_MEMBER_ID
    plan = h.coord.txn_commit_offsets(
        CommitRequest(GROUP, -1, "", None, (CommitOffset("t", 0, 9, -1, ""),), transactional=True),
        producer_id=5,
        producer_epoch=0,
        now_ms=h.now_ms,
    )
    assert plan.error_code == ErrorCode.NONE and plan.partition_errors == {("t", 0): ErrorCode.NONE}
    h.coord.apply(plan, h.now_ms)
    assert h.coord.unstable_partitions(GROUP) == {("t", 0)}
    h.coord.complete_txn(h.group.partition, 5, commit=True)
    assert h.coord.fetch_offsets(GROUP, [("t", [0])])[1][0][2].offset == 9  # type: ignore[union-attr]
    h.join(a, protocols=(("range", b"changed"),))  # the group rebalances: still accepted
    assert h.group.state != GroupState.STABLE
    assert _commit(h, -1, "", {("t", 0): 10}, transactional=True) == ErrorCode.NONE
    # A member the request does name (v3+) is validated as for OffsetCommit.
    assert _commit(h, gen, "nobody", {("t", 0): 1}, transactional=True) == ErrorCode.UNKNOWN_MEMBER_ID
    assert _commit(h, gen - 1, a, {("t", 0): 1}, transactional=True) == ErrorCode.ILLEGAL_GENERATION


def test_offsets_and_group_metadata_replay_into_a_fresh_coordinator() -> None:
    """What a restart does: every record written is replayed; a tombstone deletes."""
    h = Harness()
    (a,) = stable_group_of(h, 1)
    records: list[tuple[int, bytes, bytes | None]] = []
    for partition, recs in h.coord.take_writes():
        records.extend((partition, k, v) for k, v in recs)
    gen = h.group.generation_id
    for offsets in ({("t", 0): 10, ("t", 1): 20}, {("t", 0): 11}):
        req = CommitRequest(
            GROUP, gen, a, None, tuple(CommitOffset(t, p, o, 0, "") for (t, p), o in offsets.items())
        )
        plan = h.coord.commit_offsets(req, h.now_ms)
        h.coord.apply(plan, h.now_ms)
        records.extend((plan.partition, k, v) for k, v in plan.records)

    fresh = Harness()
    fresh.coord.owned_partitions.clear()
    partition = fresh.coord.partition_for(GROUP)
    fresh.coord.begin_load(partition)
    for p, key, value in records:
        fresh.coord.replay(p, key, value, fresh.now_ms)
    fresh.coord.finish_load(partition, fresh.now_ms)
    group = fresh.coord.groups[GROUP]
    assert {tp: v.offset for tp, v in group.offsets.items()} == {("t", 0): 11, ("t", 1): 20}
    assert group.state == GroupState.STABLE and list(group.members) == [a]
    assert group.generation_id == gen
    # A loaded member must heartbeat within a session, or it is removed.
    fresh.advance(SESSION_MS)
    assert group.state == GroupState.EMPTY


def test_delete_groups_and_offsets() -> None:
    h = Harness()
    (a,) = stable_group_of(h, 1)
    gen = h.group.generation_id
    _commit(h, gen, a, {("t", 0): 1, ("other", 0): 2})
    errors = {
        g: e for plan in h.coord.delete_groups([GROUP, "missing"]) for g, e in plan.group_errors.items()
    }
    assert errors == {GROUP: ErrorCode.NON_EMPTY_GROUP, "missing": ErrorCode.GROUP_ID_NOT_FOUND}
    # OffsetDelete on a live consumer group: subscribed topics are protected.
    h.group.members[a].protocols = (("range", _subscription(["t"])),)
    off_plan = h.coord.delete_offsets(GROUP, [("t", [0]), ("other", [0])])
    assert off_plan.partition_errors == {
        ("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
        ("other", 0): ErrorCode.NONE,
    }
    h.coord.apply(off_plan, h.now_ms)
    assert ("other", 0) not in h.group.offsets
    h.coord.leave_group(GROUP, [LeaveMember(a, None)], h.now_ms)
    assert h.group.state == GroupState.EMPTY
    (plan,) = [p for p in h.coord.delete_groups([GROUP]) if GROUP in p.group_errors]
    assert plan.group_errors[GROUP] == ErrorCode.NONE
    h.coord.apply(plan, h.now_ms)
    assert GROUP not in h.coord.groups
    assert h.coord.delete_offsets(GROUP, [("t", [0])]).error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_describe_and_list_groups() -> None:
    h = Harness()
    a, b = stable_group_of(h, 2)
    d = h.coord.describe_group(GROUP)
    assert d.state == "Stable" and d.protocol_type == "consumer" and d.protocol_data == "range"
    assert [(m.member_id, m.assignment) for m in d.members] == [(a, b"a-0"), (b, b"a-1")]
    assert d.members[0].client_host == "/127.0.0.1"
    assert h.coord.describe_group("nope").error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.coord.list_groups() == [(GROUP, "consumer", "Stable")]
    assert h.coord.list_groups({"empty"}) == []


# --- records ------------------------------------------------------------------------------------------


def _subscription(topics: list[str]) -> bytes:
    out = bytearray(b"\x00\x00") + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return bytes(out + b"\xff\xff\xff\xff")


def test_java_string_hash_matches_java() -> None:
    # Values from java.lang.String#hashCode.
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(Integer.MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_record_round_trips_and_kafka_bytes() -> None:
    key = OffsetKey("grp", "topic", 3)
    assert decode_key(encode_key(key)) == key
    assert encode_key(key) == b"\x00\x01\x00\x03grp\x00\x05topic\x00\x00\x00\x03"
    assert decode_key(encode_key(GroupKey("grp"))) == GroupKey("grp")
    value = OffsetValue(42, 5, "meta", 1700000000000)
    encoded = encode_offset_value(value)
    assert encoded[:2] == b"\x00\x03" and decode_offset_value(encoded) == value
    group = GroupValue(
        "consumer",
        4,
        "range",
        "m-1",
        123,
        (MemberValue("m-1", None, "c", "/h", 300000, 45000, b"sub", b"asg"),),
    )
    assert decode_group_value(encode_group_value(group)) == group
    assert subscribed_topics(_subscription(["a", "b"])) == {"a", "b"}
    assignment = (
        b"\x00\x00"
        + (1).to_bytes(4, "big")
        + b"\x00\x01t"
        + (2).to_bytes(4, "big")
        + (0).to_bytes(4, "big")
        + (5).to_bytes(4, "big")
    )
    assert assigned_partitions(assignment + b"\xff\xff\xff\xff") == [("t", [0, 5])]


@pytest.mark.parametrize("cut", range(1, 20))
def test_truncated_records_raise_record_format_error(cut: int) -> None:
    from pykraft.coordinator.offsets_records import RecordFormatError

    data = encode_offset_value(OffsetValue(1, 2, "m", 3))
    with pytest.raises(RecordFormatError):
        decode_offset_value(data[: len(data) - cut])
