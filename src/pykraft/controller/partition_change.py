"""One partition's next PartitionChangeRecord, pure (Kafka ``PartitionChangeBuilder``,
``PartitionReassignmentReplicas`` and ``PartitionReassignmentRevert``; KIP-455).

A reassignment (AlterPartitionReassignments) moves a partition from its replicas to a target set:

1. Start: the replicas become ``target + (current - target)``, ``adding_replicas`` the target brokers
   not yet replicas, ``removing_replicas`` the current ones not in the target. The ISR stays as it is:
   the adding replicas join as followers and the leader adds them to the ISR (AlterPartition) once they
   caught up.
2. Complete: as soon as every adding replica is in the ISR (which may be at once, e.g. a replication
   factor going down, or later with the AlterPartition that adds the last one), the removing replicas
   leave the replicas and the ISR, adding and removing become empty, and a leader that was removed
   hands leadership to the first target replica in the ISR. A removed replica bumps the leader epoch
   even when the leader stays, so the removed broker's fetches are fenced.
3. Cancel: the adding replicas leave the replicas and the ISR, the removing ones stay; a revert that
   would leave the ISR empty needs unclean leader election (``PartitionReassignmentRevert.unclean``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pykraft.metadata.image import NO_LEADER, PartitionRegistration
from pykraft.metadata.records import PartitionChangeRecord


@dataclass(frozen=True, slots=True)
class ReassignmentReplicas:
    """Kafka PartitionReassignmentReplicas: the replicas, adding and removing of a started reassignment."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @classmethod
    def of(cls, current: Sequence[int], target: Sequence[int]) -> ReassignmentReplicas:
        removing = tuple(r for r in current if r not in target)
        adding = tuple(r for r in target if r not in current)
        return cls((*target, *removing), adding, removing)


@dataclass(frozen=True, slots=True)
class ReassignmentRevert:
    """Kafka PartitionReassignmentRevert: what cancelling a reassignment leaves (rule 3)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    unclean: bool

    @classmethod
    def of(cls, part: PartitionRegistration) -> ReassignmentRevert:
        adding = set(part.adding_replicas)
        replicas = tuple(r for r in part.replicas if r not in adding)
        isr = tuple(r for r in part.isr if r not in adding)
        if isr:
            return cls(replicas, isr, False)
        # Every ISR member was being added: Kafka reverts the ISR to the whole original set, unclean.
        return cls(replicas, replicas, True)


def is_reassigning(part: PartitionRegistration) -> bool:
    return bool(part.adding_replicas or part.removing_replicas)


def build_partition_change(
    topic_id: Any,
    partition_id: int,
    part: PartitionRegistration,
    is_active: Callable[[int], bool],
    *,
    target_replicas: Sequence[int] | None = None,
    target_isr: Sequence[int] | None = None,
    target_adding: Sequence[int] | None = None,
    target_removing: Sequence[int] | None = None,
    preferred_election: bool = False,
) -> PartitionChangeRecord | None:
    """Kafka PartitionChangeBuilder.build (without ELR): the record taking ``part`` to the targets (None:
    unchanged), completing a reassignment whose adding replicas are all in the ISR (rule 2), electing a
    leader when the current one leaves the ISR (or, with ``preferred_election``, the first replica when
    it is an active ISR member). None when nothing changes."""
    replicas = tuple(part.replicas if target_replicas is None else target_replicas)
    isr = tuple(part.isr if target_isr is None else target_isr)
    adding = tuple(part.adding_replicas if target_adding is None else target_adding)
    removing = tuple(part.removing_replicas if target_removing is None else target_removing)
    if adding or removing:
        # PartitionReassignmentReplicas.maybeCompleteReassignment.
        kept_isr = tuple(r for r in isr if r not in removing)
        if kept_isr and all(r in kept_isr for r in adding):
            replicas = tuple(r for r in replicas if r not in removing)
            isr, adding, removing = kept_isr, (), ()
    record = PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id)
    changed = False
    leader = part.leader
    if part.leader not in isr or (preferred_election and part.leader != replicas[0]):

        def eligible(replica: int) -> bool:
            return replica in isr and is_active(replica)

        if preferred_election and eligible(replicas[0]):
            leader = replicas[0]
        elif not eligible(part.leader):
            leader = next((r for r in replicas if eligible(r)), NO_LEADER)
    if leader != part.leader:
        record.leader = leader
        changed = True
    elif not set(part.replicas) <= set(replicas) and part.leader != NO_LEADER:
        # Kafka triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: a removed replica must not keep
        # fetching at the current epoch.
        record.leader = part.leader
        changed = True
    if isr != part.isr and isr:
        record.isr = list(isr)
        changed = True
    if replicas != part.replicas:
        record.replicas = list(replicas)
        changed = True
    if adding != part.adding_replicas:
        record.adding_replicas = list(adding)
        changed = True
    if removing != part.removing_replicas:
        record.removing_replicas = list(removing)
        changed = True
    return record if changed else None
