"""Roles of a KRaft replica and the durable quorum state (Kafka's QuorumState / EpochState).

Every legal role change is in ``ALLOWED_TRANSITIONS`` (QuorumState.java's class comment), and
``RaftNode`` asserts against it on every change:

* Unattached: after learning of a higher epoch with no known leader (also at start).
* Voted: after granting a vote to a candidate in the current epoch.
* Candidate: after the election timeout (Unattached, Voted, Resigned), the fetch timeout (Follower),
  or the backoff after a lost election (Candidate, with a new epoch).
* Leader: after a majority of votes (Candidate only).
* Follower: after learning of a leader with an equal (from an electing role) or higher epoch.
* Resigned: a leader that lost check-quorum, or shut down gracefully; it never leads that epoch again.

``QuorumState`` is what survives a restart (the ``quorum-state`` file): ``leader_epoch``,
``leader_id``, ``voted_id`` and the voter set. A vote is persisted before the response that grants
it is sent, an epoch before anything written in it is flushed (the Ready contract, raft/node.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from pykraft.raft.messages import UNKNOWN_ID, OffsetAndEpoch


class Role(enum.Enum):
    UNATTACHED = "unattached"
    VOTED = "voted"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


ALLOWED_TRANSITIONS: dict[Role, frozenset[Role]] = {
    Role.UNATTACHED: frozenset({Role.UNATTACHED, Role.VOTED, Role.CANDIDATE, Role.FOLLOWER}),
    Role.VOTED: frozenset({Role.UNATTACHED, Role.CANDIDATE, Role.FOLLOWER}),
    Role.CANDIDATE: frozenset({Role.UNATTACHED, Role.CANDIDATE, Role.LEADER, Role.FOLLOWER}),
    Role.LEADER: frozenset({Role.UNATTACHED, Role.RESIGNED, Role.FOLLOWER}),
    Role.FOLLOWER: frozenset({Role.UNATTACHED, Role.CANDIDATE, Role.FOLLOWER}),
    Role.RESIGNED: frozenset({Role.UNATTACHED, Role.CANDIDATE, Role.FOLLOWER}),
}


@dataclass(frozen=True, slots=True)
class QuorumState:
    """The durable election state; ``-1`` is "none" as in the quorum-state file."""

    leader_epoch: int
    leader_id: int = UNKNOWN_ID
    voted_id: int = UNKNOWN_ID
    voters: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        assert self.leader_epoch >= 0
        # Kafka's ElectionState: a leader and a vote for someone else never coexist in one epoch.
        if self.leader_id != UNKNOWN_ID and self.voted_id != UNKNOWN_ID:
            assert self.leader_id == self.voted_id, (self.leader_id, self.voted_id)


# --- role state (mutable: timers and tallies change while the role lasts) --------------------


@dataclass(slots=True)
class Unattached:
    epoch: int
    election_deadline_ms: int
    role: Role = Role.UNATTACHED


@dataclass(slots=True)
class Voted:
    epoch: int
    voted_id: int
    election_deadline_ms: int
    role: Role = Role.VOTED


@dataclass(slots=True)
class Candidate:
    epoch: int
    retries: int
    election_deadline_ms: int
    granting_voters: set[int] = field(default_factory=set)
    rejecting_voters: set[int] = field(default_factory=set)
    # Set once the election is lost (timeout or a majority rejected): campaign again at this time.
    backoff_deadline_ms: int | None = None
    role: Role = Role.CANDIDATE


# LeaderState.OBSERVER_SESSION_TIMEOUT_MS: how long the leader remembers an observer that stopped fetching.
OBSERVER_SESSION_TIMEOUT_MS = 300_000


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one voter or observer (LeaderState.ReplicaState)."""

    end_offset: int | None = None  # the last valid fetch offset: flushed on the follower
    last_fetch_ms: int | None = None
    begin_quorum_acked: bool = False
    # DescribeQuorum's LastCaughtUpTimestamp: the last time the replica had everything the leader had.
    last_caught_up_ms: int | None = None
    # The leader's (flushed) end offset at the previous fetch (ReplicaState.lastFetchLeaderLogEndOffset).
    last_fetch_leader_end_offset: int = -1

    def update_follower_state(self, now_ms: int, fetch_offset: int, leader_end_offset: int) -> None:
        """A valid fetch at ``fetch_offset`` (LeaderState.ReplicaState.updateFollowerState).

        Caught up means "at the leader's end offset of this fetch", or "at the leader's end offset of
        the previous fetch", which then dates the catch-up to that previous fetch. Without the second
        rule a follower of a leader that appends all the time (NoOpRecords every 500 ms, KIP-835) is
        almost never exactly at the end, and kafka-metadata-quorum would show it lagging ever more.
        """
        caught_up_ms: int | None = None
        if fetch_offset >= leader_end_offset:
            caught_up_ms = now_ms
        elif self.last_fetch_leader_end_offset > 0 and fetch_offset >= self.last_fetch_leader_end_offset:
            caught_up_ms = self.last_fetch_ms
        if caught_up_ms is not None and (
            self.last_caught_up_ms is None or caught_up_ms > self.last_caught_up_ms
        ):
            self.last_caught_up_ms = caught_up_ms
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_ms = now_ms  # the core's clock never goes back (RaftNode._set_now)
        self.end_offset = fetch_offset


def is_active_observer(observer: ReplicaState, now_ms: int) -> bool:
    return (
        observer.last_fetch_ms is not None and now_ms - observer.last_fetch_ms < OBSERVER_SESSION_TIMEOUT_MS
    )


@dataclass(slots=True)
class Leader:
    epoch: int
    epoch_start_offset: int
    granting_voters: frozenset[int]
    check_quorum_deadline_ms: int
    begin_quorum_deadline_ms: int
    replicas: dict[int, ReplicaState] = field(default_factory=dict)
    # Non-voters that fetch (brokers, KIP-595 observers): reported by DescribeQuorum, never counted.
    observers: dict[int, ReplicaState] = field(default_factory=dict)
    # Voters that fetched since the check-quorum timer was last reset.
    fetched_voters: set[int] = field(default_factory=set)
    role: Role = Role.LEADER

    def forget_inactive_observers(self, now_ms: int) -> None:
        """LeaderState.clearInactiveObservers: an observer that has not fetched for
        ``OBSERVER_SESSION_TIMEOUT_MS`` is gone (a stopped broker, a one-off fetch), so the map stays
        as small as the set of live observers."""
        for observer_id in [i for i, r in self.observers.items() if not is_active_observer(r, now_ms)]:
            del self.observers[observer_id]


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    fetch_deadline_ms: int
    # The fetch in flight (its correlation id), or None when the next one is due at ``fetch_sent_ms``.
    fetch_correlation_id: int | None = None
    # With a fetch in flight: when it was sent. Without: the earliest time to send the next one
    # (retry_backoff_ms after an error).
    fetch_sent_ms: int = 0
    # KIP-630: the snapshot being downloaded (FetchSnapshot instead of Fetch until it is installed or
    # abandoned) and the bytes received so far. Like Kafka's invisible .part file, it lives only in
    # this role state: leaving the Follower role discards it, and votes use the real log.
    fetching_snapshot: OffsetAndEpoch | None = None
    snapshot_bytes: bytearray = field(default_factory=bytearray)
    role: Role = Role.FOLLOWER


@dataclass(slots=True)
class Resigned:
    epoch: int
    election_deadline_ms: int
    preferred_successors: tuple[int, ...] = ()
    role: Role = Role.RESIGNED


RoleState = Unattached | Voted | Candidate | Leader | Follower | Resigned


def majority_size(voter_count: int) -> int:
    """Votes (or replicas) that make a majority of ``voter_count`` voters."""
    assert voter_count >= 1
    return voter_count // 2 + 1


def majority_end_offset(end_offsets: list[int], voter_count: int) -> int:
    """The largest offset that a majority of voters have reached (LeaderState.maybeUpdateHighWatermark):
    the ``majority_size``-th largest of the voters' end offsets; absent voters count as 0."""
    assert len(end_offsets) <= voter_count
    ranked = sorted(end_offsets, reverse=True) + [0] * (voter_count - len(end_offsets))
    return ranked[majority_size(voter_count) - 1]
