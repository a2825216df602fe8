"""Replication state of one partition on one broker, pure (Kafka's Partition, Replica and
LeaderEpochFileCache; KIP-101/KIP-279 truncation by leader epoch, KIP-497 AlterPartition).

The metadata image says who leads, at which leader and partition epoch, with which replicas and ISR; this
module keeps what the image does not: the leader's view of each follower (log end offset, when it was
last caught up), the ISR change it proposed and has not seen committed yet, and the epochs of the
batches in the log. The shell feeds it (``apply_partition`` from each image, ``record_follower_fetch``
from each replica Fetch) and asks it what to do: the high watermark to set, the ISR to propose, where a
follower must truncate. Nothing here reads a clock or touches a file.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from pykraft.core.errors import ErrorCode

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

# AlterPartition answers after which nothing of the proposal can be committed: drop it.
_ISR_CHANGE_NOT_COMMITTED = frozenset(
    {
        ErrorCode.INELIGIBLE_REPLICA,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.STALE_BROKER_EPOCH,
    }
)
# No answer, or no active controller: the same proposal goes again.
_ISR_CHANGE_RETRIABLE = frozenset({ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER})
# After a refusal, the same ISR is not proposed again for this long: the leader's image can lag the
# controller's (a follower fenced a moment ago), and without a pause every fetch of that follower would
# ask again -- hundreds of refused AlterPartitions a second (issue 32).
ISR_CHANGE_REFUSED_BACKOFF_MS = 1_000


class LeaderEpochCache:
    """(epoch, start offset) of each leader epoch in the log, ascending (leader-epoch-checkpoint).
    Built from the batches' partitionLeaderEpoch; moved by appends and truncations."""

    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        self.entries: list[tuple[int, int]] = list(entries or [])
        # Changed since it was last written to (or read from) leader-epoch-checkpoint.
        self.dirty = False

    @classmethod
    def from_batches(cls, batches: list[tuple[int, int]]) -> LeaderEpochCache:
        """From (partition_leader_epoch, base_offset) of every batch, in log order."""
        cache = cls()
        for epoch, base_offset in batches:
            cache.assign(epoch, base_offset)
        cache.dirty = True
        return cache

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """A batch of ``epoch`` at ``start_offset`` (or a new leader's epoch at its log end). Older or
        equal epochs change nothing (Kafka ignores a non-increasing epoch)."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        self.entries.append((epoch, start_offset))
        self.dirty = True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka LeaderEpochFileCache.endOffsetFor: the largest epoch <= ``requested_epoch`` and the
        offset where the next higher epoch starts (the log end for the latest epoch);
        (UNDEFINED_EPOCH, UNDEFINED_OFFSET) when the requested epoch is unknown or newer than any."""
        if requested_epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        higher = next((e for e in self.entries if e[0] > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = [e for e in self.entries if e[0] <= requested_epoch]
        return (floor[-1][0] if floor else requested_epoch), higher[1]

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to ``end_offset``: epochs that started at or after it are gone."""
        kept = [e for e in self.entries if e[1] < end_offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self.dirty = True

    def clear_and_start_at(self) -> None:
        self.dirty = self.dirty or bool(self.entries)
        self.entries = []


def follower_truncation_offset(
    cache: LeaderEpochCache, log_end_offset: int, diverging_epoch: int, diverging_end_offset: int
) -> int:
    """Where a follower truncates when the leader answers DivergingEpoch(epoch, end offset) (KIP-320,
    AbstractFetcherThread.truncateOnFetchResponse): at the smaller of the leader's end offset for that
    epoch and its own; the next fetch (with its new last epoch) checks again until the logs agree."""
    follower_epoch, follower_end = cache.end_offset_for(diverging_epoch, log_end_offset)
    if follower_epoch == UNDEFINED_EPOCH:
        return min(diverging_end_offset, log_end_offset)
    return min(diverging_end_offset, follower_end, log_end_offset)


@dataclass(slots=True)
class FollowerState:
    """The leader's view of one follower (Kafka Replica.ReplicaState)."""

    log_end_offset: int = UNDEFINED_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNDEFINED_OFFSET
    last_fetch_ms: int = 0


class Transition(enum.Enum):
    UNCHANGED = "unchanged"
    BECAME_LEADER = "became leader"
    BECAME_FOLLOWER = "became follower"
    NOT_A_REPLICA = "not a replica"


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An AlterPartition the leader should send for this partition (KIP-497)."""

    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass(slots=True)
class PartitionReplication:
    broker_id: int
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    # The log end offset when this broker became leader: a follower joins the ISR only once it has
    # reached it (Kafka leaderEpochStartOffsetOpt).
    leader_epoch_start_offset: int = 0
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # The ISR proposed with AlterPartition and not yet seen in an image (one at a time).
    pending_isr: tuple[int, ...] | None = None
    # The last proposal the controller refused, the refusal, and when it may be proposed again.
    refused_isr: tuple[int, ...] | None = None
    refused_error: int = 0
    refused_until_ms: int = 0

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark must wait for: while an expansion is in flight the added replica
        counts already; while a shrink is in flight the removed one still does (Kafka maximalIsr)."""
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))

    def enough_replicas(self, min_insync_replicas: int) -> bool:
        """Whether an acks=all write the high watermark has passed is answered NONE rather than
        NOT_ENOUGH_REPLICAS_AFTER_APPEND. Kafka's Partition.checkEnoughReplicasReachOffset compares
        min.insync.replicas with the maximal ISR, the one the high watermark waited for: a replica whose
        ISR expansion is in flight already holds the write, so it counts."""
        return len(self.maximal_isr) >= min_insync_replicas

    def apply_partition(
        self,
        *,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        log_end_offset: int,
        now_ms: int,
    ) -> Transition:
        """A partition's state from a new metadata image (Kafka Partition.makeLeader/makeFollower)."""
        if self.broker_id not in replicas:
            self.leader_id = leader_id
            return Transition.NOT_A_REPLICA
        new_leadership = leader_epoch != self.leader_epoch or leader_id != self.leader_id
        self.replicas, self.isr = replicas, isr
        if partition_epoch != self.partition_epoch:
            self.pending_isr = None  # the committed ISR replaces whatever we proposed
        self.partition_epoch = partition_epoch
        self.leader_id, self.leader_epoch = leader_id, leader_epoch
        if not new_leadership:
            if self.is_leader:
                # A reassignment changed the replicas under this leadership (KIP-455): adding replicas
                # start unproven, removed ones are forgotten (Kafka Partition.updateAssignmentAndIsr).
                self.followers = {
                    r: self.followers.get(r) or FollowerState() for r in replicas if r != self.broker_id
                }
            return Transition.UNCHANGED
        if self.is_leader:
            self.leader_epoch_start_offset = log_end_offset
            # Followers in the ISR are presumed caught up now; the others must prove it.
            self.followers = {
                r: FollowerState(last_caught_up_ms=now_ms if r in isr else 0)
                for r in replicas
                if r != self.broker_id
            }
            return Transition.BECAME_LEADER
        self.followers = {}
        self.pending_isr = None
        return Transition.BECAME_FOLLOWER

    # --- the leader's side ------------------------------------------------------------------------

    def record_follower_fetch(
        self, replica_id: int, fetch_offset: int, leader_log_end_offset: int, now_ms: int
    ) -> None:
        """A follower fetched from ``fetch_offset`` (its log end) (Kafka Replica.updateFetchState)."""
        state = self.followers.get(replica_id)
        if state is None:
            return
        if fetch_offset >= leader_log_end_offset:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
        elif fetch_offset >= state.last_fetch_leader_log_end_offset >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.last_fetch_leader_log_end_offset = leader_log_end_offset
        state.last_fetch_ms = now_ms
        state.log_end_offset = fetch_offset

    def high_watermark(self, leader_log_end_offset: int) -> int:
        """The smallest log end offset of the maximal ISR (a follower not heard from yet counts as
        unknown, which holds the high watermark where it is); the caller only ever moves it up."""
        high_watermark = leader_log_end_offset
        for replica_id in self.maximal_isr:
            if replica_id == self.broker_id:
                continue
            state = self.followers.get(replica_id)
            high_watermark = min(
                high_watermark, state.log_end_offset if state is not None else UNDEFINED_OFFSET
            )
        return high_watermark

    def isr_change(
        self,
        now_ms: int,
        high_watermark: int,
        replica_lag_time_max_ms: int,
        is_isr_eligible: Callable[[int], bool] | None = None,
    ) -> IsrProposal | None:
        """The ISR to propose, if any (one AlterPartition at a time): followers that caught up to the
        high watermark and this leadership's start join; ISR members not caught up for
        ``replica.lag.time.max.ms`` leave (Kafka maybeExpandIsr / maybeShrinkIsr). A follower joins only
        while ``is_isr_eligible`` says so -- registered, unfenced, not shutting down in the leader's
        image, as Kafka's Partition.isReplicaIsrEligible checks -- since the controller would refuse it
        (INELIGIBLE_REPLICA). A proposal the controller refused waits ``ISR_CHANGE_REFUSED_BACKOFF_MS``."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        joining = [
            r
            for r, state in self.followers.items()
            if r not in self.isr
            and state.log_end_offset >= high_watermark
            and state.log_end_offset >= self.leader_epoch_start_offset
            and (is_isr_eligible is None or is_isr_eligible(r))
        ]
        leaving = [
            r
            for r, state in self.followers.items()
            if r in self.isr and now_ms - state.last_caught_up_ms > replica_lag_time_max_ms
        ]
        if not joining and not leaving:
            return None
        new_isr = tuple(sorted((set(self.isr) | set(joining)) - set(leaving)))
        if new_isr == self.refused_isr and now_ms < self.refused_until_ms:
            return None
        self.pending_isr = new_isr
        return IsrProposal(self.leader_epoch, self.partition_epoch, new_isr)

    def isr_change_answered(self, error_code: int, now_ms: int) -> IsrProposal | None:
        """The outcome of the AlterPartition for ``pending_isr``; returns the proposal to send again, if
        any. Only a refusal that cannot have committed anything drops the pending ISR. Otherwise it stays
        in the maximal ISR until an image with a newer partition epoch shows what happened: a request
        whose answer was lost may have committed, and a high watermark computed without the replica it
        added could pass a record that replica lacks — which the controller may then elect (Kafka keeps
        its PendingExpandIsr state the same way). A request that got no answer is sent again."""
        if self.pending_isr is None:
            return None
        if error_code in _ISR_CHANGE_NOT_COMMITTED:
            self.refused_isr, self.refused_error = self.pending_isr, error_code
            self.refused_until_ms = now_ms + ISR_CHANGE_REFUSED_BACKOFF_MS
            self.pending_isr = None
            return None
        if error_code in _ISR_CHANGE_RETRIABLE:
            return IsrProposal(self.leader_epoch, self.partition_epoch, self.pending_isr)
        return None  # committed (NONE), or overtaken (a newer epoch): the next image settles it
