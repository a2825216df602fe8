"""The KIP-848 consumer group state machine (coordinator/consumer_group.py) on a virtual clock: joins,
incremental reconciliation (revoke before reassign), session and rebalance timeouts, fencing, static
members, subscription and metadata changes, Kafka's errors, and records that rebuild the group
(issue 19)."""

from __future__ import annotations

import random
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.coordinator import consumer_group_records as rec
from pykraft.coordinator.consumer_group import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
    TopicInfo,
)
from pykraft.core.errors import ErrorCode

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)
GROUP = "g"


def _topics(t: int = 6, **more: int) -> dict[str, TopicInfo]:
    topics = {"t": TopicInfo(T, t)}
    for i, (name, n) in enumerate(sorted(more.items())):
        topics[name] = TopicInfo(uuid.UUID(int=10 + i), n)
    return topics


def _coordinator(**config: int) -> ConsumerGroupCoordinator:
    return ConsumerGroupCoordinator(ConsumerGroupConfig(**config), lambda g: 0, random.Random(7))


class Client:
    """A well-behaved consumer: revokes at once, reports what it owns on every heartbeat."""

    def __init__(self, coordinator: ConsumerGroupCoordinator, name: str, **join: object) -> None:
        self.c = coordinator
        self.member_id = name
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.join = join
        self.history: list[set[tuple[uuid.UUID, int]]] = []

    def heartbeat(self, now_ms: int, topics: dict[str, TopicInfo], **fields: object) -> HeartbeatResult:
        if self.epoch == 0:
            args: dict[str, object] = {
                "rebalance_timeout_ms": 30000,
                "subscribed_topic_names": ("t",),
                "topic_partitions": (),
                **self.join,
            }
        else:
            args = {"topic_partitions": tuple((t, tuple(sorted(ps))) for t, ps in self.owned.items())}
        args.update(fields)
        result = self.c.heartbeat(
            HeartbeatRequest(GROUP, self.member_id, self.epoch, **args),  # type: ignore[arg-type]
            topics,
            now_ms,
        )
        if result.error_code == ErrorCode.NONE:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = dict(result.assignment)
                self.history.append(self.flat())
        return result

    def flat(self) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def _converge(clients: list[Client], now_ms: int, topics: dict[str, TopicInfo], rounds: int = 6) -> None:
    for _ in range(rounds):
        for client in clients:
            assert client.heartbeat(now_ms, topics).error_code == ErrorCode.NONE


def _no_partition_twice(clients: list[Client]) -> None:
    seen: set[tuple[uuid.UUID, int]] = set()
    for client in clients:
        assert not (client.flat() & seen), "a partition with two owners"
        seen |= client.flat()


def test_three_members_split_six_partitions_two_each() -> None:
    c = _coordinator()
    topics = _topics()
    clients = [Client(c, name) for name in ("a", "b", "c")]
    _converge(clients, 0, topics)
    assert sorted(len(x.flat()) for x in clients) == [2, 2, 2]
    group = c.groups[GROUP]
    assert group.state().value == "Stable"
    assert {x.epoch for x in clients} == {group.group_epoch} == {group.assignment_epoch}
    assert group.group_epoch == 3  # one bump per join


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    c = _coordinator()
    topics = _topics()
    a = Client(c, "a")
    _converge([a], 0, topics)
    assert len(a.flat()) == 6
    epoch_a = a.epoch
    b = Client(c, "b")
    first = b.heartbeat(1, topics)
    # The joiner gets the new epoch but nothing yet: a still owns everything.
    assert first.assignment == {} and first.member_epoch == 2
    assert c.groups[GROUP].members["b"].state == MemberState.UNRELEASED_PARTITIONS
    # a is asked to revoke three partitions and keeps its epoch until it has.
    reply = c.heartbeat(
        HeartbeatRequest(GROUP, "a", epoch_a, topic_partitions=((T, tuple(range(6))),)), topics, 2
    )
    assert reply.member_epoch == epoch_a and reply.assignment is not None
    assert len(reply.assignment[T]) == 3
    assert c.groups[GROUP].members["a"].state == MemberState.UNREVOKED_PARTITIONS
    # b asks again: the partitions are still a's (its heartbeat has not shown them revoked).
    assert b.heartbeat(3, topics).assignment is None
    assert b.flat() == set()
    # a's heartbeat without them: a moves to the new epoch, and then b gets them.
    a.owned = dict(reply.assignment)
    assert a.heartbeat(4, topics).member_epoch == 2
    b.heartbeat(5, topics)
    assert len(b.flat()) == 3 and not (a.flat() & b.flat())
    assert c.groups[GROUP].state().value == "Stable"


def test_a_fourth_member_takes_partitions_without_anyone_losing_one_it_keeps() -> None:
    c = _coordinator()
    topics = _topics(t=12)
    clients = [Client(c, name) for name in ("a", "b", "c")]
    _converge(clients, 0, topics)
    before = {x.member_id: x.flat() for x in clients}
    d = Client(c, "d")
    clients.append(d)
    for _ in range(6):
        for x in clients:
            x.heartbeat(1, topics)
            _no_partition_twice(clients)
    assert sorted(len(x.flat()) for x in clients) == [3, 3, 3, 3]
    for x in clients[:3]:
        kept = before[x.member_id] & x.flat()
        # Every assignment the member saw kept what it ends up keeping: never revoked and given back.
        assert all(kept <= seen for seen in x.history[-2:])
        assert len(kept) == 3


def test_session_expiry_on_the_virtual_clock_fences_the_member() -> None:
    c = _coordinator(session_timeout_ms=45000)
    topics = _topics()
    a, b = Client(c, "a"), Client(c, "b")
    _converge([a, b], 0, topics)
    epoch = c.groups[GROUP].group_epoch
    assert c.next_deadline_ms() == 45000
    a.heartbeat(44999, topics)  # b is silent
    c.tick(44999)
    assert "b" in c.groups[GROUP].members
    c.tick(45000)
    assert "b" not in c.groups[GROUP].members
    assert c.groups[GROUP].group_epoch == epoch + 1
    _converge([a], 45001, topics)
    assert len(a.flat()) == 6
    assert b.heartbeat(45002, topics).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() -> None:
    c = _coordinator()
    topics = _topics()
    a = Client(c, "a", rebalance_timeout_ms=1000)
    _converge([a], 0, topics)
    Client(c, "b").heartbeat(10, topics)
    # a hears about the revocation but keeps reporting all six partitions.
    a.heartbeat(20, topics, topic_partitions=((T, tuple(range(6))),))
    assert c.groups[GROUP].members["a"].state == MemberState.UNREVOKED_PARTITIONS
    c.tick(1019)
    assert "a" in c.groups[GROUP].members
    c.tick(1020)
    assert "a" not in c.groups[GROUP].members


def test_fencing_by_member_epoch() -> None:
    c = _coordinator()
    topics = _topics()
    a = Client(c, "a")
    _converge([a], 0, topics)
    b = Client(c, "b")
    _converge([a, b], 1, topics)
    assert a.epoch == 2
    owned = tuple((t, tuple(sorted(ps))) for t, ps in a.owned.items())
    ahead = c.heartbeat(HeartbeatRequest(GROUP, "a", 3, topic_partitions=owned), topics, 2)
    assert ahead.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    # One epoch behind with a subset of what it owns: a lost response, accepted.
    lost = c.heartbeat(HeartbeatRequest(GROUP, "a", 1, topic_partitions=owned), topics, 3)
    assert lost.error_code == ErrorCode.NONE and lost.member_epoch == 2
    # Behind and claiming partitions it does not have: fenced.
    other = ((T, tuple(range(6))),)
    assert c.heartbeat(HeartbeatRequest(GROUP, "a", 1, topic_partitions=other), topics, 4).error_code == (
        ErrorCode.FENCED_MEMBER_EPOCH
    )
    assert c.heartbeat(HeartbeatRequest(GROUP, "zz", 2), topics, 5).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.heartbeat(HeartbeatRequest("other", "a", 2), topics, 5).error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_bad_first_heartbeats_are_invalid_requests() -> None:
    c = _coordinator()
    topics = _topics()
    cases = [
        HeartbeatRequest(
            "", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",), topic_partitions=()
        ),
        HeartbeatRequest(GROUP, "m", 0, subscribed_topic_names=("t",), topic_partitions=()),
        HeartbeatRequest(GROUP, "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",)),
        HeartbeatRequest(GROUP, "m", 0, rebalance_timeout_ms=1, topic_partitions=()),
        HeartbeatRequest(GROUP, "", 3),
        HeartbeatRequest(GROUP, "m", -2),
        HeartbeatRequest(GROUP, "m", -3),
        HeartbeatRequest(
            GROUP,
            "m",
            0,
            instance_id="",
            rebalance_timeout_ms=1,
            subscribed_topic_names=(),
            topic_partitions=(),
        ),
    ]
    for request in cases:
        result = c.heartbeat(request, topics, 0)
        assert result.error_code == ErrorCode.INVALID_REQUEST, request
        assert result.error_message
    assert not c.groups
    assignor = HeartbeatRequest(
        GROUP,
        "m",
        0,
        rebalance_timeout_ms=1,
        subscribed_topic_names=("t",),
        topic_partitions=(),
        server_assignor="x",
    )
    assert c.heartbeat(assignor, topics, 0).error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    regex = HeartbeatRequest(
        GROUP, "m", 0, rebalance_timeout_ms=1, subscribed_topic_regex="(", topic_partitions=()
    )
    assert c.heartbeat(regex, topics, 0).error_code == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_a_new_member_id_is_generated_when_none_is_sent_and_the_group_has_a_size_limit() -> None:
    c = _coordinator(max_size=1)
    topics = _topics()
    first = Client(c, "")
    result = first.heartbeat(0, topics)
    assert result.error_code == ErrorCode.NONE and result.member_id and len(result.member_id) == 22
    assert Client(c, "b").heartbeat(1, topics).error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_leave_frees_the_partitions_for_the_others() -> None:
    c = _coordinator()
    topics = _topics()
    a, b = Client(c, "a"), Client(c, "b")
    _converge([a, b], 0, topics)
    left = c.heartbeat(HeartbeatRequest(GROUP, "b", -1), topics, 1)
    assert left.error_code == ErrorCode.NONE and left.member_epoch == -1
    _converge([a], 2, topics)
    assert len(a.flat()) == 6


def test_static_member_leaves_and_its_next_instance_takes_its_partitions_without_a_rebalance() -> None:
    c = _coordinator()
    topics = _topics()
    a = Client(c, "a1", instance_id="A")
    b = Client(c, "b")
    _converge([a, b], 0, topics)
    epoch = c.groups[GROUP].group_epoch
    a_partitions = a.flat()
    # A second instance while the first is active: refused.
    assert (
        Client(c, "a2", instance_id="A").heartbeat(1, topics).error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    )
    left = c.heartbeat(HeartbeatRequest(GROUP, "a1", -2, instance_id="A"), topics, 2)
    assert left.error_code == ErrorCode.NONE and left.member_epoch == -2
    assert c.groups[GROUP].group_epoch == epoch  # no rebalance
    b.heartbeat(3, topics)
    assert len(b.flat()) == 3
    a2 = Client(c, "a2", instance_id="A")
    _converge([a2, b], 4, topics)
    assert a2.flat() == a_partitions
    assert c.groups[GROUP].group_epoch == epoch
    assert "a1" not in c.groups[GROUP].members


def test_subscription_change_and_new_partitions_rebalance() -> None:
    c = _coordinator()
    topics = _topics(t=4, u=4)
    a, b = Client(c, "a"), Client(c, "b")
    _converge([a, b], 0, topics)
    epoch = c.groups[GROUP].group_epoch
    a.heartbeat(1, topics, subscribed_topic_names=("t", "u"))
    b.heartbeat(1, topics, subscribed_topic_names=("t", "u"))
    _converge([a, b], 2, topics)
    assert c.groups[GROUP].group_epoch == epoch + 2
    assert len(a.flat()) + len(b.flat()) == 8
    grown = {**topics, "t": TopicInfo(T, 6)}
    _converge([a, b], 3, grown)
    assert c.groups[GROUP].group_epoch == epoch + 3
    assert len(a.flat()) == len(b.flat()) == 5


def test_regex_subscription_picks_up_new_matching_topics() -> None:
    c = _coordinator()
    topics = {"orders-1": TopicInfo(T, 2), "other": TopicInfo(U, 2)}
    a = Client(c, "a", subscribed_topic_names=None, subscribed_topic_regex="orders-.*")
    _converge([a], 0, topics)
    assert a.flat() == {(T, 0), (T, 1)}
    more = {**topics, "orders-2": TopicInfo(uuid.UUID(int=3), 1), "__orders": TopicInfo(uuid.UUID(int=4), 1)}
    _converge([a], 1, more)
    assert a.flat() == {(T, 0), (T, 1), (uuid.UUID(int=3), 0)}


def test_offset_commit_checks_the_member_epoch() -> None:
    c = _coordinator()
    topics = _topics()
    a = Client(c, "a")
    _converge([a], 0, topics)
    assert c.validate_offset_commit(GROUP, "a", None, a.epoch) == ErrorCode.NONE
    assert c.validate_offset_commit(GROUP, "a", None, a.epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert c.validate_offset_commit(GROUP, "zz", None, a.epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.validate_offset_commit(GROUP, "", None, -1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert c.validate_offset_fetch(GROUP, "a", a.epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert c.validate_offset_fetch(GROUP, "", -1) == ErrorCode.NONE


def test_records_rebuild_the_group_on_load() -> None:
    c = _coordinator()
    topics = _topics()
    clients = [Client(c, "a"), Client(c, "b", instance_id="B"), Client(c, "c", subscribed_topic_regex="t")]
    _converge(clients, 0, topics)
    c.heartbeat(HeartbeatRequest(GROUP, "c", -1), topics, 1)
    Client(c, "d").heartbeat(2, topics)  # mid-reconciliation: pending revocations in the records
    loaded = _coordinator()
    for _, records in c.take_writes():
        for key, value in records:
            loaded.replay(0, rec.decode_key(key), value, 10)
    assert loaded.describe(GROUP) == c.describe(GROUP)
    assert loaded.groups[GROUP].partition_epochs == c.groups[GROUP].partition_epochs
    assert loaded.groups[GROUP].subscription_metadata == c.groups[GROUP].subscription_metadata
    # Deleting the group leaves nothing behind once its tombstones are replayed.
    for key, value in c.delete_records(GROUP):
        loaded.replay(0, rec.decode_key(key), value, 11)
    assert GROUP not in loaded.groups


def test_subscription_regexes_that_could_backtrack_for_ever_are_refused() -> None:
    # Kafka matches with RE2J (linear); Python's re backtracks, so explosive patterns are refused.
    from pykraft.coordinator.consumer_group import regex_refusal

    for accepted in ("orders-.*", "(foo|bar)-.*", r"metrics\.[a-z]+", "x.*?y", "(ab){2,}", "a|b"):
        assert regex_refusal(accepted) is None, accepted
    for refused in ("(a+)+$", "(a|a)*b", "((a)+b)+", ".*.*.*.*x", r"(\w+)\1", "(?=x)a", "(", "a" * 1001):
        assert regex_refusal(refused) is not None, refused


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["join", "heartbeat", "leave", "wait", "grow", "stale"]), st.integers(0, 4)
        ),
        max_size=40,
    )
)
def test_random_histories_never_give_a_partition_two_owners_and_always_converge(
    ops: list[tuple[str, int]],
) -> None:
    """Joins, leaves, silent members expiring, stale epochs and growing topics in any order: the
    coordinator never has a partition assigned or revoking at two members, a member's view never holds a
    partition the coordinator gave someone else, and heartbeats alone always settle the group."""
    c = _coordinator(session_timeout_ms=10_000)
    partitions = 6
    topics = _topics(t=partitions)
    clients = [Client(c, f"m{i}") for i in range(5)]
    joined: set[int] = set()
    now = 0

    def check() -> None:
        group = c.groups.get(GROUP)
        if group is None:
            return
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for m in group.members.values():
            for tp in {(t, p) for t, ps in (*m.assigned.items(), *m.pending_revocation.items()) for p in ps}:
                assert tp not in seen, f"{tp} at {seen.get(tp)} and {m.member_id}"
                seen[tp] = m.member_id
        for i in joined:
            member = group.members.get(clients[i].member_id)
            if member is not None and clients[i].epoch == member.member_epoch:
                mine = {tp for tp, owner in seen.items() if owner == member.member_id}
                assert clients[i].flat() <= mine

    for op, i in ops:
        client = clients[i]
        if op == "join" and i not in joined:
            client.epoch, client.owned = 0, {}
            if client.heartbeat(now, topics).error_code == ErrorCode.NONE:
                joined.add(i)
        elif op == "heartbeat" and i in joined:
            if client.heartbeat(now, topics).error_code != ErrorCode.NONE:
                joined.discard(i)  # fenced or expired: it drops everything, as a real client does
                client.owned = {}
        elif op == "stale" and i in joined:
            result = c.heartbeat(HeartbeatRequest(GROUP, client.member_id, client.epoch + 1), topics, now)
            # Fenced; or unknown when its session already expired.
            assert result.error_code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID)
        elif op == "leave" and i in joined:
            c.heartbeat(HeartbeatRequest(GROUP, client.member_id, -1), topics, now)
            joined.discard(i)
            client.owned = {}
        elif op == "wait":
            now += 6_000
            c.tick(now)
        elif op == "grow":
            partitions += 1
            topics = _topics(t=partitions)
        check()
    # Everyone still in heartbeats a few times (no time passes): the group settles, balanced.
    for _ in range(8):
        for i in sorted(joined):
            if clients[i].heartbeat(now, topics).error_code != ErrorCode.NONE:
                joined.discard(i)
                clients[i].owned = {}
            check()
    if joined:
        group = c.groups[GROUP]
        assert group.state().value == "Stable"
        loads = [len(clients[i].flat()) for i in joined]
        assert sum(loads) == partitions and max(loads) - min(loads) <= 1


def test_a_join_whose_answer_was_lost_is_answered_again_and_a_fenced_member_rejoins_fresh() -> None:
    c = _coordinator()
    topics = _topics()
    join = HeartbeatRequest(
        GROUP, "a", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("t",), topic_partitions=()
    )
    first = c.heartbeat(join, topics, 0)
    epoch = c.groups[GROUP].group_epoch
    again = c.heartbeat(join, topics, 1)  # the client never saw `first`
    assert (again.member_id, again.member_epoch, again.assignment) == (
        first.member_id,
        first.member_epoch,
        first.assignment,
    )
    assert c.groups[GROUP].group_epoch == epoch
    b = Client(c, "b")
    _converge([Client(c, "a"), b], 2, topics)
    # Fenced (say its epoch ran ahead), b rejoins with epoch 0 under its own id: a fresh member.
    assert (
        c.heartbeat(HeartbeatRequest(GROUP, "b", b.epoch + 5), topics, 3).error_code
        == ErrorCode.FENCED_MEMBER_EPOCH
    )
    b.epoch, b.owned = 0, {}
    assert b.heartbeat(4, topics).error_code == ErrorCode.NONE
