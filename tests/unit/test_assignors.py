"""The KIP-848 server-side assignors (coordinator/assignors.py), by hypothesis: balance, coverage,
stickiness when members join and leave (issue 19)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.coordinator.assignors import Assignment, assign, range_assign, uniform_assign

topics_st = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 12), min_size=1)
member_ids_st = st.lists(st.text("mnopq", min_size=1, max_size=4), min_size=1, max_size=8, unique=True)


def _owners(assignment: Assignment[str]) -> dict[tuple[str, int], list[str]]:
    owners: dict[tuple[str, int], list[str]] = {}
    for member, topics in assignment.items():
        for topic, partitions in topics.items():
            for p in partitions:
                owners.setdefault((topic, p), []).append(member)
    return owners


def _count(assignment: Assignment[str], member: str) -> int:
    return sum(len(ps) for ps in assignment.get(member, {}).values())


def _flat(assignment: Assignment[str], member: str) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in assignment.get(member, {}).items() for p in ps}


def _check_exactly_once(
    assignment: Assignment[str], subscriptions: dict[str, set[str]], counts: dict[str, int]
) -> None:
    owners = _owners(assignment)
    wanted = {
        (t, p) for subs in subscriptions.values() for t in subs if t in counts for p in range(counts[t])
    }
    assert set(owners) == wanted
    for tp, members in owners.items():
        assert len(members) == 1, f"{tp} owned by {members}"
        assert tp[0] in subscriptions[members[0]], f"{members[0]} got {tp} without subscribing"


@settings(max_examples=300, deadline=None)
@given(members=member_ids_st, counts=topics_st, data=st.data())
def test_uniform_identical_subscriptions_balance_within_one(
    members: list[str], counts: dict[str, int], data: st.DataObject
) -> None:
    topics = set(data.draw(st.sets(st.sampled_from(sorted(counts)), min_size=1)))
    subscriptions = {m: topics for m in members}
    result = uniform_assign(subscriptions, counts)
    _check_exactly_once(result, subscriptions, counts)
    loads = [_count(result, m) for m in members]
    assert max(loads) - min(loads) <= 1
    assert set(result) == set(members)


@settings(max_examples=300, deadline=None)
@given(members=member_ids_st, counts=topics_st, data=st.data())
def test_uniform_and_range_cover_each_subscribed_partition_once(
    members: list[str], counts: dict[str, int], data: st.DataObject
) -> None:
    # Different subscriptions, including topics that do not exist (skipped).
    names = [*sorted(counts), "missing"]
    subscriptions = {m: set(data.draw(st.sets(st.sampled_from(names)))) for m in members}
    for assignor in ("uniform", "range"):
        result = assign(assignor, subscriptions, counts)
        _check_exactly_once(result, subscriptions, counts)


@settings(max_examples=300, deadline=None)
@given(members=member_ids_st, counts=topics_st, joiner=st.text("xyz", min_size=1, max_size=3))
def test_uniform_join_moves_only_what_it_must(
    members: list[str], counts: dict[str, int], joiner: str
) -> None:
    subscriptions = {m: set(counts) for m in members}
    before = uniform_assign(subscriptions, counts)
    after = uniform_assign({**subscriptions, joiner: set(counts)}, counts, before)
    total = sum(counts.values())
    share = total // (len(members) + 1)
    for m in members:
        kept = _flat(before, m) & _flat(after, m)
        # A member keeps everything up to its new share; it loses only what it had above it.
        assert len(kept) >= min(_count(before, m), share)
        assert _flat(after, m) <= _flat(before, m), "a joining member only takes partitions away"
    loads = [_count(after, m) for m in [*members, joiner]]
    assert max(loads) - min(loads) <= 1


@settings(max_examples=300, deadline=None)
@given(members=member_ids_st, counts=topics_st, data=st.data())
def test_uniform_leave_keeps_every_remaining_member_whole(
    members: list[str], counts: dict[str, int], data: st.DataObject
) -> None:
    if len(members) < 2:
        return
    leaver = data.draw(st.sampled_from(members))
    subscriptions = {m: set(counts) for m in members}
    before = uniform_assign(subscriptions, counts)
    remaining = {m: s for m, s in subscriptions.items() if m != leaver}
    after = uniform_assign(remaining, counts, before)
    for m in remaining:
        assert _flat(before, m) <= _flat(after, m), f"{m} lost a partition when {leaver} left"
    loads = [_count(after, m) for m in remaining]
    assert max(loads) - min(loads) <= 1


@settings(max_examples=200, deadline=None)
@given(members=member_ids_st, counts=topics_st)
def test_uniform_is_stable_when_nothing_changes(members: list[str], counts: dict[str, int]) -> None:
    subscriptions = {m: set(counts) for m in members}
    first = uniform_assign(subscriptions, counts)
    assert uniform_assign(subscriptions, counts, first) == first


@settings(max_examples=200, deadline=None)
@given(members=member_ids_st, count=st.integers(0, 20))
def test_range_co_partitions_identical_subscriptions(members: list[str], count: int) -> None:
    counts = {"left": count, "right": count}
    result = range_assign({m: {"left", "right"} for m in members}, counts)
    for m in members:
        assert result[m].get("left", frozenset()) == result[m].get("right", frozenset())
        parts = sorted(result[m].get("left", frozenset()))
        assert parts == list(range(parts[0], parts[0] + len(parts))) if parts else True
    loads = [len(result[m].get("left", frozenset())) for m in members]
    assert max(loads) - min(loads) <= 1


def test_uniform_six_partitions_three_members_two_each() -> None:
    result = uniform_assign({"a": {"t"}, "b": {"t"}, "c": {"t"}}, {"t": 6})
    assert sorted(len(result[m]["t"]) for m in "abc") == [2, 2, 2]
