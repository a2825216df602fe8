"""Server-side partition assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

KIP-848 moves assignment from the group leader into the coordinator: whenever the group epoch moves
past the target assignment epoch, the coordinator runs the group's assignor over every member's
subscription and the partitions of the subscribed topics. The result is the *target* assignment;
members converge to it one heartbeat at a time (coordinator/consumer_group.py).

Both assignors are pure functions of (members' subscribed topics, partitions per topic, the current
target assignment), deterministic for equal inputs, keyed by any sortable topic key (the coordinator
uses topic ids, the tests names):

- ``uniform`` (Kafka's default, UniformAssignor): every subscribed partition to exactly one member,
  partition counts as even as the subscriptions allow (differing by at most one when every member
  subscribes to the same topics), and sticky: a member keeps the partitions of the previous target
  it still subscribes to, unless it holds more than its share; partitions move only from members
  above their share.
- ``range`` (RangeAssignor): per topic, the members subscribed to it in member-id order take
  contiguous ranges, the first ``n % k`` one partition more; members with the same subscriptions get
  the same partition numbers of co-partitioned topics (joins keyed by partition work).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

# member id -> topic -> partitions
Assignment = dict[str, dict[K, frozenset[int]]]

UNIFORM = "uniform"
RANGE = "range"
# group.consumer.assignors: the first one is the default (Kafka's default list is uniform, range).
DEFAULT_ASSIGNORS = (UNIFORM, RANGE)


def _topic_order(topic: object) -> str:
    # Topic ids (uuid.UUID) and names both sort by their text: deterministic whatever the key type.
    return str(topic)


def _to_assignment(owned: Mapping[str, set[tuple[K, int]]]) -> Assignment[K]:
    out: Assignment[K] = {}
    for member_id, partitions in owned.items():
        by_topic: dict[K, set[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, set()).add(partition)
        out[member_id] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def uniform_assign(
    subscriptions: Mapping[str, Iterable[K]],
    partition_counts: Mapping[K, int],
    current: Mapping[str, Mapping[K, Iterable[int]]] | None = None,
) -> Assignment[K]:
    """The uniform assignor: balanced and sticky. ``subscriptions`` maps member ids to the topics they
    subscribe to (topics missing from ``partition_counts`` do not exist and are skipped); ``current``
    is the previous target assignment. Every member appears in the result, possibly with nothing."""
    current = current or {}
    members = sorted(subscriptions)
    subscribed: dict[str, frozenset[K]] = {
        m: frozenset(t for t in subscriptions[m] if partition_counts.get(t, 0) > 0) for m in members
    }
    eligible: dict[K, list[str]] = {}
    for m in members:
        for t in subscribed[m]:
            eligible.setdefault(t, []).append(m)
    owned: dict[str, set[tuple[K, int]]] = {m: set() for m in members}
    taken: set[tuple[K, int]] = set()
    # Stickiness first: what each member had and may still have stays where it is.
    for m in members:
        for topic, partitions in current.get(m, {}).items():
            if topic not in subscribed[m]:
                continue
            for p in partitions:
                tp = (topic, p)
                if 0 <= p < partition_counts[topic] and tp not in taken:
                    owned[m].add(tp)
                    taken.add(tp)
    homogeneous = len({subscribed[m] for m in members}) <= 1
    if homogeneous and members:
        # Identical subscriptions: every member's share is floor(n/m) or one more, and only `extra`
        # members may hold the larger share. Trimming the excess first means a member above its share
        # gives up only what it must (KIP-848: "sticky: a member keeps what it can").
        total = sum(partition_counts[t] for t in subscribed[members[0]])
        base, extra = divmod(total, len(members))
        by_load = sorted(members, key=lambda m: (-len(owned[m]), m))
        for m in by_load:
            quota = base + 1 if extra > 0 and len(owned[m]) > base else base
            if quota == base + 1:
                extra -= 1
            for tp in sorted(owned[m], key=lambda tp: (_topic_order(tp[0]), tp[1]), reverse=True)[
                : max(len(owned[m]) - quota, 0)
            ]:
                owned[m].discard(tp)
                taken.discard(tp)
    # Free partitions go to the least-loaded member subscribed to their topic.
    for topic in sorted(eligible, key=_topic_order):
        candidates = eligible[topic]
        for p in range(partition_counts[topic]):
            if (topic, p) in taken:
                continue
            target = min(candidates, key=lambda m: (len(owned[m]), m))
            owned[target].add((topic, p))
            taken.add((topic, p))
    if not homogeneous:
        _rebalance_heterogeneous(owned, subscribed)
    return _to_assignment(owned)


def _rebalance_heterogeneous(
    owned: dict[str, set[tuple[K, int]]], subscribed: Mapping[str, frozenset[K]]
) -> None:
    """Different subscriptions: move a partition from a member to a less-loaded one subscribed to its
    topic while that narrows the gap by two or more (bounded: each move lowers the sum of squares)."""
    while True:
        moved = False
        for source in sorted(owned, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[source], key=lambda tp: (_topic_order(tp[0]), tp[1]), reverse=True):
                targets = [
                    m for m in owned if tp[0] in subscribed[m] and len(owned[m]) + 2 <= len(owned[source])
                ]
                if targets:
                    target = min(targets, key=lambda m: (len(owned[m]), m))
                    owned[source].discard(tp)
                    owned[target].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


def range_assign(
    subscriptions: Mapping[str, Iterable[K]],
    partition_counts: Mapping[K, int],
    current: Mapping[str, Mapping[K, Iterable[int]]] | None = None,
) -> Assignment[K]:
    """The range assignor: per topic, contiguous ranges over the subscribed members in id order.
    ``current`` is accepted for the common signature; ranges depend only on who subscribes."""
    del current
    owned: dict[str, set[tuple[K, int]]] = {m: set() for m in sorted(subscriptions)}
    topics: dict[K, list[str]] = {}
    for m in sorted(subscriptions):
        for t in set(subscriptions[m]):
            if partition_counts.get(t, 0) > 0:
                topics.setdefault(t, []).append(m)
    for topic, members in topics.items():
        count = partition_counts[topic]
        base, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            size = base + (1 if i < extra else 0)
            owned[m].update((topic, p) for p in range(start, start + size))
            start += size
    return _to_assignment(owned)


def assign(
    assignor: str,
    subscriptions: Mapping[str, Iterable[K]],
    partition_counts: Mapping[K, int],
    current: Mapping[str, Mapping[K, Iterable[int]]] | None = None,
) -> Assignment[K]:
    """Run the assignor named ``assignor`` (one of :data:`DEFAULT_ASSIGNORS`)."""
    if assignor == RANGE:
        return range_assign(subscriptions, partition_counts, current)
    if assignor == UNIFORM:
        return uniform_assign(subscriptions, partition_counts, current)
    raise ValueError(f"unknown assignor {assignor!r}")


__all__ = [
    "DEFAULT_ASSIGNORS",
    "RANGE",
    "UNIFORM",
    "Assignment",
    "assign",
    "range_assign",
    "uniform_assign",
]
