"""The group coordinator for Kafka's classic group protocol, as a pure state machine.

It follows Kafka's ClassicGroup (GroupMetadataManager): states Empty -> PreparingRebalance ->
CompletingRebalance -> Stable (and Dead once deleted); KIP-394 member ids (a first JoinGroup without a
member id gets MEMBER_ID_REQUIRED and a generated id); the leader receives every member's protocol
metadata and assigns partitions client-side; SyncGroup hands the assignment out; static members
(``group.instance.id``, KIP-345) are replaced in place without a rebalance where Kafka does.

Nothing here waits, sleeps or writes. Time is ``now_ms`` passed in; timers (initial rebalance delay,
rebalance timeout, session expiry, pending-sync timeout) fire from :meth:`GroupCoordinator.tick`.
JoinGroup and SyncGroup park until the rebalance moves on: the shell passes a ``token`` and collects
``(token, result)`` pairs from :meth:`take_completions` after every call. Records for
``__consumer_offsets`` come out two ways: offset commits and deletions are a :class:`WritePlan` the
shell appends first and then :meth:`apply`-s (nothing is acknowledged before it is in the log);
group metadata snapshots (after a generation completes) are queued in :meth:`take_writes`.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from pykraft.coordinator import consumer_group_records, group_migration
from pykraft.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    ConsumerMember,
    HeartbeatRequest,
    HeartbeatResult,
    Refused,
    Topics,
)
from pykraft.coordinator.consumer_group import GroupDescription as ConsumerGroupDescription
from pykraft.coordinator.offsets_records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_value,
    encode_key,
    encode_offset_value,
    partition_for,
    subscribed_topics,
)
from pykraft.coordinator.share_group import (
    ShareGroup,
    ShareGroupConfig,
    ShareGroupCoordinator,
    ShareGroupDescription,
    ShareHeartbeatRequest,
    ShareHeartbeatResult,
)
from pykraft.core.errors import ErrorCode

CONSUMER_PROTOCOL_TYPE = "consumer"
UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_topic_num_partitions: int = 50
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    # KIP-394: a member that got its id but never rejoins, or a new member stuck in a join, goes away.
    group_new_member_join_timeout_ms: int = 300000
    offset_metadata_max_bytes: int = 4096
    # group.consumer.* (KIP-848 consumer groups, coordinator/consumer_group.py).
    consumer: ConsumerGroupConfig = ConsumerGroupConfig()
    # group.share.* (KIP-932 share groups, coordinator/share_group.py).
    share: ShareGroupConfig = ShareGroupConfig()


# --- requests and results (plain data; the protocol layer translates per version) --------------------


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    client_id: str
    client_host: str
    # JoinGroup v4+: a new member must come back with the id it is given (KIP-394).
    require_known_member_id: bool = True


@dataclass(frozen=True, slots=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error_code: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class SyncResult:
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class LeaveMember:
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class CommitOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True, slots=True)
class CommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: tuple[CommitOffset, ...]
    # TxnOffsetCommit: checked as Kafka's validateTransactionalOffsetCommit (member-less: any group state).
    transactional: bool = False


@dataclass(slots=True)
class WritePlan:
    """Records to append to one ``__consumer_offsets`` partition before answering; ``errors`` holds
    what to answer per (topic, partition) or per group id once the append succeeded."""

    partition: int
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    error_code: ErrorCode = ErrorCode.NONE
    partition_errors: dict[tuple[str, int], ErrorCode] = field(default_factory=dict)
    group_errors: dict[str, ErrorCode] = field(default_factory=dict)
    # A TxnOffsetCommit: the records go in a transactional batch of this producer (-1: not one).
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    error_code: ErrorCode
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: tuple[MemberDescription, ...]


Completion = tuple[int, JoinResult | SyncResult]


# --- group state ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    last_heartbeat_ms: int
    assignment: bytes = b""
    join_token: int | None = None
    join_started_ms: int = 0
    sync_token: int | None = None
    is_new: bool = False

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        return self.protocols == protocols


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    partition: int
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # Member ids handed out with MEMBER_ID_REQUIRED, each with the time it lapses.
    pending_members: dict[str, int] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    # Members of this generation that have not sent SyncGroup yet (Kafka's pendingSyncMembers).
    pending_sync: set[str] = field(default_factory=set)
    join_deadline_ms: int | None = None
    # InitialDelayedJoin (an Empty group's first rebalance): what is left of the rebalance timeout.
    initial_delay_remaining_ms: int | None = None
    new_member_added: bool = False
    sync_deadline_ms: int | None = None
    state_timestamp_ms: int = -1
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    # TxnOffsetCommit offsets per producer id, visible once that producer's transaction commits (its
    # COMMIT marker reaches this group's partition); an ABORT drops them (Kafka's
    # pendingTransactionalOffsetCommits).
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetValue]] = field(default_factory=dict)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.join_token is not None for m in self.members.values())

    def candidate_protocols(self) -> list[str]:
        return group_migration.common_protocols([m.protocols for m in self.members.values()])

    def supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {name for name, _ in protocols}
        return any(c in names for c in self.candidate_protocols())

    def select_protocol(self) -> str:
        return group_migration.select_protocol([m.protocols for m in self.members.values()])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, or None when the group is not a consumer group."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= subscribed_topics(m.metadata_for(self.protocol_name))
            except RecordFormatError:
                return None
        return topics


# --- the coordinator -----------------------------------------------------------------------------------


class GroupCoordinator:
    def __init__(self, config: GroupConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        self.groups: dict[str, ClassicGroup] = {}
        # __consumer_offsets partitions this node leads and has loaded, and those still loading.
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        self._completions: list[Completion] = []
        self._writes: list[tuple[int, list[tuple[bytes, bytes | None]]]] = []
        # KIP-848 consumer groups live beside the classic ones; a group id is one or the other, and
        # converts into the other online (coordinator/group_migration.py).
        self.consumer = ConsumerGroupCoordinator(config.consumer, self.partition_for, rng)
        # ... and so do share groups (KIP-932).
        self.share = ShareGroupCoordinator(config.share, self.partition_for, rng)
        # OffsetCommits appended and not yet replicated, per group (Kafka's pendingOffsetCommits): not
        # visible to OffsetFetch until the ISR has them, and require_stable answers UNSTABLE_OFFSET_COMMIT
        # for their partitions meanwhile (issue 32).
        self.pending_offset_commits: dict[str, Counter[tuple[str, int]]] = {}
        # False while the broker's coordinator lease does not hold (broker/coordinator_lease.py: it may
        # have been fenced and its groups moved): every group answers NOT_COORDINATOR (issue 32).
        self.serving = True
        self.consumer.on_fence = self._downgrade

    # --- outputs for the shell ------------------------------------------------------------------------

    def take_completions(self) -> list[Completion]:
        out, self._completions = self._completions, []
        return out

    def take_writes(self) -> list[tuple[int, list[tuple[bytes, bytes | None]]]]:
        out, self._writes = self._writes, []
        return out + self.consumer.take_writes() + self.share.take_writes()

    # --- ownership and loading ---------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def coordinator_error(self, group_id: str) -> ErrorCode:
        partition = self.partition_for(group_id)
        if not self.serving:
            return ErrorCode.NOT_COORDINATOR
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned_partitions:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def begin_load(self, partition: int) -> None:
        self.loading_partitions.add(partition)

    def replay(
        self, partition: int, key: bytes | None, value: bytes | None, now_ms: int, producer_id: int = -1
    ) -> None:
        """Apply one record of ``__consumer_offsets`` (load path and after our own appends); a record
        of a transactional batch (``producer_id`` >= 0) waits for its transaction's marker."""
        if key is None:
            raise RecordFormatError("a __consumer_offsets record without a key")
        if consumer_group_records.key_version(key) in consumer_group_records.CONSUMER_GROUP_KEY_VERSIONS:
            self.consumer.replay(partition, consumer_group_records.decode_key(key), value, now_ms)
            return
        if consumer_group_records.key_version(key) in consumer_group_records.SHARE_GROUP_KEY_VERSIONS:
            self.share.replay(partition, consumer_group_records.decode_key(key), value, now_ms)
            return
        decoded = decode_key(key)
        group = self.groups.get(decoded.group_id)
        if isinstance(decoded, OffsetKey):
            tp = (decoded.topic, decoded.partition)
            if producer_id >= 0 and value is not None:
                if group is None:
                    group = self._new_group(decoded.group_id, now_ms)
                group.pending_txn_offsets.setdefault(producer_id, {})[tp] = decode_offset_value(value)
                return
            if value is None:
                if group is not None:
                    group.offsets.pop(tp, None)
                return
            if group is None:
                group = self._new_group(decoded.group_id, now_ms)
            group.offsets[tp] = decode_offset_value(value)
            return
        assert isinstance(decoded, GroupKey)
        if value is None:
            if group is not None and (group.offsets or group.pending_txn_offsets):
                # The group's metadata goes (deleted, or converted to a consumer group); not its offsets.
                self._reset_membership(group, now_ms)
            elif group is not None:
                group.state = GroupState.DEAD
                del self.groups[decoded.group_id]
            return
        if partition in self.loading_partitions:
            self._load_group(decoded.group_id, partition, decode_group_value(value), now_ms, group)

    def finish_load(self, partition: int, now_ms: int) -> None:
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)

    def unload(self, partition: int) -> None:
        """This node no longer leads ``partition``: forget its groups; waiting members must look for
        the new coordinator."""
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        self.consumer.unload(partition)
        self.share.unload(partition)
        for group_id, group in list(self.groups.items()):
            if group.partition != partition:
                continue
            for m in group.members.values():
                if m.join_token is not None:
                    self._completions.append((m.join_token, JoinResult(ErrorCode.NOT_COORDINATOR)))
                if m.sync_token is not None:
                    self._completions.append((m.sync_token, SyncResult(ErrorCode.NOT_COORDINATOR)))
            del self.groups[group_id]

    def _load_group(
        self, group_id: str, partition: int, value: GroupValue, now_ms: int, existing: ClassicGroup | None
    ) -> None:
        group = existing or self._new_group(group_id, now_ms)
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.state_timestamp_ms = value.current_state_timestamp_ms
        group.members = {}
        group.static_members = {}
        for mv in value.members:
            member = Member(
                mv.member_id,
                mv.group_instance_id,
                mv.client_id,
                mv.client_host,
                mv.rebalance_timeout_ms,
                mv.session_timeout_ms,
                ((value.protocol or "", mv.subscription),),
                # Members get a whole session from the load to heartbeat again (as Kafka does).
                last_heartbeat_ms=now_ms,
                assignment=mv.assignment,
            )
            group.members[mv.member_id] = member
            if mv.group_instance_id is not None:
                group.static_members[mv.group_instance_id] = mv.member_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY

    def _reset_membership(self, group: ClassicGroup, now_ms: int) -> None:
        """An empty group in place of ``group``, with its offsets (after its GroupMetadata tombstone)."""
        fresh = self._new_group(group.group_id, now_ms)
        fresh.offsets, fresh.pending_txn_offsets = group.offsets, group.pending_txn_offsets

    def _new_group(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = ClassicGroup(group_id, self.partition_for(group_id), state_timestamp_ms=now_ms)
        self.groups[group_id] = group
        return group

    # --- JoinGroup --------------------------------------------------------------------------------------

    def join_group(self, req: JoinRequest, token: int, now_ms: int, topics: Topics | None = None) -> None:
        """Always yields exactly one completion for ``token``, now or when the rebalance moves on.
        ``topics``: the metadata image, for a member joining a consumer group."""

        def fail(error: ErrorCode, member_id: str = "") -> None:
            self._completions.append((token, JoinResult(error, member_id=member_id)))

        error = self.coordinator_error(req.group_id) if req.group_id else ErrorCode.INVALID_GROUP_ID
        if error != ErrorCode.NONE:
            return fail(error)
        if not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        if not req.protocol_type or not req.protocols:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if req.group_id in self.share.groups:
            # Kafka's classicGroupJoin: the group exists and is not a consumer group.
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                # A consumer group (KIP-848) in use: the classic member joins it as Kafka 4's
                # classicGroupJoinToConsumerGroup does, whatever the migration policy.
                joined = group_migration.join(self.consumer, consumer_group, req, topics or {}, now_ms)
                if joined.replaced_consumer_member:
                    # The last consumer-protocol member was replaced: classic again, without a rebalance.
                    records: list[tuple[bytes, bytes | None]] = []
                    if self._downgrade(consumer_group, None, records, now_ms):
                        self.consumer.queue_writes(consumer_group.partition, records)
                self._completions.append(
                    (
                        token,
                        JoinResult(
                            joined.error_code,
                            generation_id=joined.generation_id,
                            protocol_type=CONSUMER_PROTOCOL_TYPE if joined.protocol_name else None,
                            protocol_name=joined.protocol_name,
                            member_id=joined.member_id,
                        ),
                    )
                )
                return None
            # An empty consumer group gives its id over to the classic protocol (Kafka deletes it).
            self._writes.append((consumer_group.partition, self.consumer.delete_records(req.group_id)))
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id != UNKNOWN_MEMBER_ID:
                # GroupMetadataManager.classicGroupJoin answers a new group's unknown member with its id
                return fail(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id)
            group = self._new_group(req.group_id, now_ms)
        if group.state == GroupState.DEAD:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports(req.protocol_type, req.protocols):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if req.member_id == UNKNOWN_MEMBER_ID:
            self._join_new_member(group, req, token, now_ms)
        else:
            self._join_current_member(group, req, token, now_ms)

    def _generate_member_id(self, req: JoinRequest) -> str:
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        return f"{prefix}-{uuid.UUID(int=self.rng.getrandbits(128), version=4)}"

    def _join_new_member(self, group: ClassicGroup, req: JoinRequest, token: int, now_ms: int) -> None:
        member_id = self._generate_member_id(req)
        if req.group_instance_id is not None:
            old_member_id = group.static_members.get(req.group_instance_id)
            if old_member_id is not None and old_member_id in group.members:
                self._replace_static_member(group, req, old_member_id, member_id, token, now_ms)
            else:
                self._add_member_and_rebalance(group, req, member_id, token, now_ms)
        elif req.require_known_member_id:
            group.pending_members[member_id] = now_ms + req.session_timeout_ms
            self._completions.append((token, JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)))
        else:
            self._add_member_and_rebalance(group, req, member_id, token, now_ms)

    def _join_current_member(self, group: ClassicGroup, req: JoinRequest, token: int, now_ms: int) -> None:
        if req.member_id in group.pending_members:
            del group.pending_members[req.member_id]
            return self._add_member_and_rebalance(group, req, req.member_id, token, now_ms)
        error = self._validate_member(group, req.member_id, req.group_instance_id)
        if error != ErrorCode.NONE:
            self._completions.append((token, JoinResult(error, member_id=req.member_id)))
            return
        member = group.members[req.member_id]
        state = group.state
        if state == GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, token, now_ms)
        elif state == GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # The member lost its JoinGroup response: give it the same answer again.
                self._completions.append((token, self._join_result(group, member)))
            else:
                self._update_member_and_rebalance(group, member, req, token, now_ms)
        elif state == GroupState.STABLE:
            if member.member_id == group.leader_id or not member.matches(req.protocols):
                # The leader rejoining (say, for new topics) or new metadata: rebalance.
                self._update_member_and_rebalance(group, member, req, token, now_ms)
            else:
                self._completions.append((token, self._join_result(group, member, with_members=False)))
        else:  # Empty: a member id from before the group emptied
            self._completions.append(
                (token, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id))
            )

    def _validate_member(
        self, group: ClassicGroup, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """Kafka's ClassicGroup.validateMember: the instance id is checked only when the request carries
        one. Heartbeat v0-2, SyncGroup v0-2, OffsetCommit v0-6 and TxnOffsetCommit v0-2 have no such
        field, so a static member using them (aiokafka does) is known by its member id alone."""
        if group_instance_id is not None:
            static_id = group.static_members.get(group_instance_id)
            if static_id is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if static_id != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def _add_member_and_rebalance(
        self, group: ClassicGroup, req: JoinRequest, member_id: str, token: int, now_ms: int
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms,
            req.session_timeout_ms,
            req.protocols,
            last_heartbeat_ms=now_ms,
            join_token=token,
            join_started_ms=now_ms,
            is_new=True,
        )
        if not group.members:
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        if group.leader_id is None:
            group.leader_id = member_id
        if req.group_instance_id is not None:
            group.static_members[req.group_instance_id] = member_id
        if group.state == GroupState.PREPARING_REBALANCE and group.initial_delay_remaining_ms is not None:
            group.new_member_added = True
        self._maybe_prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms)

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, req: JoinRequest, token: int, now_ms: int
    ) -> None:
        if member.join_token is not None:
            # A second JoinGroup from the same member: the first one's connection is gone.
            self._completions.append(
                (member.join_token, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
            )
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        if req.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.join_token = token
        member.join_started_ms = now_ms
        self._maybe_prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms)

    def _replace_static_member(
        self,
        group: ClassicGroup,
        req: JoinRequest,
        old_member_id: str,
        new_member_id: str,
        token: int,
        now_ms: int,
    ) -> None:
        old = group.members.pop(old_member_id)
        # The old instance is fenced: whatever it was waiting for answers FENCED_INSTANCE_ID.
        if old.join_token is not None:
            self._completions.append(
                (old.join_token, JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id))
            )
        if old.sync_token is not None:
            self._completions.append((old.sync_token, SyncResult(ErrorCode.FENCED_INSTANCE_ID)))
        old_protocols = old.protocols
        member = Member(
            new_member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 else req.session_timeout_ms,
            req.session_timeout_ms,
            req.protocols,
            last_heartbeat_ms=now_ms,
            assignment=old.assignment,
        )
        group.members[new_member_id] = member
        assert req.group_instance_id is not None
        group.static_members[req.group_instance_id] = new_member_id
        if group.leader_id == old_member_id:
            group.leader_id = new_member_id
        if old_member_id in group.pending_sync:
            group.pending_sync.discard(old_member_id)
            group.pending_sync.add(new_member_id)
        if group.state == GroupState.STABLE:
            if group.protocol_name == group.select_protocol() and old_protocols == req.protocols:
                # Same instance, same subscription: no rebalance (KIP-345). The leader gets the members
                # back with skip_assignment so it does not recompute what is already in place.
                is_leader = group.leader_id == new_member_id
                result = self._join_result(group, member, with_members=is_leader)
                self._completions.append((token, dataclasses.replace(result, skip_assignment=is_leader)))
                self._write_group(group, now_ms)
                return
            member.join_token = token
            member.join_started_ms = now_ms
            self._prepare_rebalance(group, now_ms)
        elif group.state == GroupState.COMPLETING_REBALANCE:
            member.join_token = token
            member.join_started_ms = now_ms
            self._prepare_rebalance(group, now_ms)
        else:  # PreparingRebalance: the new id waits for the join like everyone else
            member.join_token = token
            member.join_started_ms = now_ms
        self._maybe_complete_join(group, now_ms)

    def _join_result(
        self, group: ClassicGroup, member: Member, with_members: bool | None = None
    ) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        include = is_leader if with_members is None else with_members
        members = (
            tuple(
                JoinMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            )
            if include
            else ()
        )
        return JoinResult(
            ErrorCode.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member.member_id,
            members=members,
        )

    # --- rebalance ------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state == GroupState.COMPLETING_REBALANCE:
            # Assignments of the generation that never became stable are void.
            for m in group.members.values():
                m.assignment = b""
                if m.sync_token is not None:
                    self._completions.append((m.sync_token, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)))
                    m.sync_token = None
        delay_ms = self.config.group_initial_rebalance_delay_ms
        if group.state == GroupState.EMPTY and delay_ms > 0:
            # Kafka's InitialDelayedJoin: give the other members of a starting group time to arrive.
            group.join_deadline_ms = now_ms + delay_ms
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
            group.new_member_added = False
        else:
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
            group.initial_delay_remaining_ms = None
        group.pending_sync.clear()
        group.sync_deadline_ms = None
        self._transition(group, GroupState.PREPARING_REBALANCE, now_ms)

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state != GroupState.PREPARING_REBALANCE:
            return
        if group.initial_delay_remaining_ms is not None:
            return  # the initial delay only ends on its timer
        if group.all_members_joined():
            self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        # Dynamic members that did not rejoin in time leave; static ones stay (they may come back).
        for m in list(group.members.values()):
            if m.join_token is None and m.group_instance_id is None:
                self._remove_member(group, m, now_ms, rebalance=False)
        joined = [m for m in group.members.values() if m.join_token is not None]
        if group.members and not joined:
            # Nobody rejoined: wait another rebalance timeout for session expiry to clear them out.
            group.join_deadline_ms = now_ms + group.rebalance_timeout_ms()
            group.initial_delay_remaining_ms = None
            return
        if group.leader_id is None or group.members[group.leader_id].join_token is None:
            group.leader_id = joined[0].member_id if joined else None
        group.generation_id += 1
        group.join_deadline_ms = None
        group.initial_delay_remaining_ms = None
        if not group.members:
            group.protocol_name = None
            self._transition(group, GroupState.EMPTY, now_ms)
            self._write_group(group, now_ms)
            return
        group.protocol_name = group.select_protocol()
        self._transition(group, GroupState.COMPLETING_REBALANCE, now_ms)
        for m in group.members.values():
            if m.join_token is not None:
                self._completions.append((m.join_token, self._join_result(group, m)))
                m.join_token = None
            m.is_new = False
            m.last_heartbeat_ms = now_ms
        group.pending_sync = set(group.members)
        group.sync_deadline_ms = now_ms + group.rebalance_timeout_ms()

    def _transition(self, group: ClassicGroup, state: GroupState, now_ms: int) -> None:
        group.state = state
        group.state_timestamp_ms = now_ms

    def _remove_member(
        self, group: ClassicGroup, member: Member, now_ms: int, *, rebalance: bool = True
    ) -> None:
        if member.join_token is not None:
            self._completions.append(
                (member.join_token, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
            )
        if member.sync_token is not None:
            self._completions.append((member.sync_token, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)))
        del group.members[member.member_id]
        if member.group_instance_id is not None:
            group.static_members.pop(member.group_instance_id, None)
        group.pending_sync.discard(member.member_id)
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)
        if not rebalance:
            return
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)
        self._maybe_complete_join(group, now_ms)

    # --- SyncGroup ------------------------------------------------------------------------------------

    def sync_group(self, req: SyncRequest, token: int, now_ms: int) -> None:
        """Always yields exactly one completion for ``token``."""

        def answer(error: ErrorCode) -> None:
            self._completions.append((token, SyncResult(error)))

        error = self.coordinator_error(req.group_id) if req.group_id else ErrorCode.INVALID_GROUP_ID
        if error != ErrorCode.NONE:
            return answer(error)
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None:
            synced = group_migration.sync(consumer_group, req, self.consumer, now_ms)
            self._completions.append(
                (
                    token,
                    SyncResult(
                        synced.error_code, synced.protocol_type, synced.protocol_name, synced.assignment
                    ),
                )
            )
            return None
        group = self.groups.get(req.group_id)
        if group is None:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        error = self._validate_member(group, req.member_id, req.group_instance_id)
        if error != ErrorCode.NONE:
            return answer(error)
        if req.generation_id != group.generation_id:
            return answer(ErrorCode.ILLEGAL_GENERATION)
        if (req.protocol_type is not None and req.protocol_type != group.protocol_type) or (
            req.protocol_name is not None and req.protocol_name != group.protocol_name
        ):
            return answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        group.pending_sync.discard(req.member_id)
        member = group.members[req.member_id]
        if group.state == GroupState.EMPTY:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state == GroupState.PREPARING_REBALANCE:
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state == GroupState.STABLE:
            member.last_heartbeat_ms = now_ms
            self._completions.append((token, self._sync_result(group, member)))
            return
        assert group.state == GroupState.COMPLETING_REBALANCE
        if member.sync_token is not None:
            self._completions.append((member.sync_token, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)))
        member.sync_token = token
        if req.member_id != group.leader_id:
            return
        assignments = dict(req.assignments)
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        self._write_group(group, now_ms)
        self._transition(group, GroupState.STABLE, now_ms)
        for m in group.members.values():
            if m.sync_token is not None:
                self._completions.append((m.sync_token, self._sync_result(group, m)))
                m.sync_token = None
                m.last_heartbeat_ms = now_ms

    def _sync_result(self, group: ClassicGroup, member: Member) -> SyncResult:
        return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)

    # --- Heartbeat and LeaveGroup ------------------------------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None, now_ms: int
    ) -> ErrorCode:
        error = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if error != ErrorCode.NONE:
            return error
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return group_migration.heartbeat(
                consumer_group, member_id, group_instance_id, generation_id, self.consumer, now_ms
            )
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self._validate_member(group, member_id, group_instance_id)
        if error != ErrorCode.NONE:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        group.members[member_id].last_heartbeat_ms = now_ms
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        # CompletingRebalance counts as alive: members may heartbeat between JoinGroup and SyncGroup.
        return ErrorCode.NONE

    def leave_group(
        self, group_id: str, members: Iterable[LeaveMember], now_ms: int
    ) -> tuple[ErrorCode, list[tuple[LeaveMember, ErrorCode]]]:
        error = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if error != ErrorCode.NONE:
            return error, []
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            named = list(members)
            return ErrorCode.NONE, list(
                zip(named, group_migration.leave(consumer_group, named, self.consumer), strict=True)
            )
        group = self.groups.get(group_id)
        results: list[tuple[LeaveMember, ErrorCode]] = []
        for leaving in members:
            if group is None:
                results.append((leaving, ErrorCode.UNKNOWN_MEMBER_ID))
                continue
            results.append((leaving, self._leave_one(group, leaving, now_ms)))
        return ErrorCode.NONE, results

    def _leave_one(self, group: ClassicGroup, leaving: LeaveMember, now_ms: int) -> ErrorCode:
        member_id = leaving.member_id
        if leaving.group_instance_id is not None:
            static_id = group.static_members.get(leaving.group_instance_id)
            if static_id is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id != UNKNOWN_MEMBER_ID and member_id != static_id:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = static_id
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
            self._maybe_complete_join(group, now_ms)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove_member(group, member, now_ms)
        return ErrorCode.NONE

    # --- timers ------------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Fire every timer due at ``now_ms``: session expiry, join and sync deadlines."""
        self.consumer.tick(now_ms)
        self.share.tick(now_ms)
        for group in list(self.groups.values()):
            self._expire_members(group, now_ms)
            if (
                group.state == GroupState.PREPARING_REBALANCE
                and group.join_deadline_ms is not None
                and now_ms >= group.join_deadline_ms
            ):
                remaining = group.initial_delay_remaining_ms
                if remaining is not None and group.new_member_added and remaining > 0:
                    # More members arrived during the initial delay: wait once more, within the timeout.
                    delay_ms = min(self.config.group_initial_rebalance_delay_ms, remaining)
                    group.join_deadline_ms = now_ms + delay_ms
                    group.initial_delay_remaining_ms = max(remaining - delay_ms, 0)
                    group.new_member_added = False
                else:
                    self._complete_join(group, now_ms)
            if (
                group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
                and group.sync_deadline_ms is not None
                and now_ms >= group.sync_deadline_ms
            ):
                group.sync_deadline_ms = None
                stragglers = [group.members[m] for m in group.pending_sync if m in group.members]
                group.pending_sync.clear()
                for m in stragglers:
                    self._remove_member(group, m, now_ms)

    def _expire_members(self, group: ClassicGroup, now_ms: int) -> None:
        for member_id, deadline_ms in list(group.pending_members.items()):
            if now_ms >= deadline_ms:
                del group.pending_members[member_id]
                self._maybe_complete_join(group, now_ms)
        for m in list(group.members.values()):
            if m.member_id not in group.members:
                continue
            if m.join_token is not None:
                # A member waiting in JoinGroup is alive, unless it is new and has waited too long.
                expired = (
                    m.is_new and now_ms >= m.join_started_ms + self.config.group_new_member_join_timeout_ms
                )
            elif m.sync_token is not None:
                expired = False
            else:
                expired = now_ms >= m.last_heartbeat_ms + m.session_timeout_ms
            if expired:
                self._remove_member(group, m, now_ms)

    def next_deadline_ms(self) -> int | None:
        """The earliest time :meth:`tick` has something to do (for the shell's timer)."""
        best: int | None = self.consumer.next_deadline_ms()
        share_deadline = self.share.next_deadline_ms()
        if share_deadline is not None and (best is None or share_deadline < best):
            best = share_deadline
        for group in self.groups.values():
            candidates = [group.join_deadline_ms, group.sync_deadline_ms, *group.pending_members.values()]
            for m in group.members.values():
                if m.join_token is None and m.sync_token is None:
                    candidates.append(m.last_heartbeat_ms + m.session_timeout_ms)
                elif m.join_token is not None and m.is_new:
                    candidates.append(m.join_started_ms + self.config.group_new_member_join_timeout_ms)
            for c in candidates:
                if c is not None and (best is None or c < best):
                    best = c
        return best

    # --- group metadata records -----------------------------------------------------------------------

    def _group_record(self, group: ClassicGroup) -> tuple[bytes, bytes]:
        value = GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp_ms=group.state_timestamp_ms,
            members=tuple(
                MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata_for(group.protocol_name),
                    m.assignment,
                )
                for m in group.members.values()
            ),
        )
        return encode_key(GroupKey(group.group_id)), encode_group_value(value)

    def _write_group(self, group: ClassicGroup, now_ms: int) -> None:
        self._writes.append((group.partition, [self._group_record(group)]))

    # --- offsets -------------------------------------------------------------------------------------

    def commit_offsets(self, req: CommitRequest, now_ms: int) -> WritePlan:
        """Validate a commit; the plan's records must be appended before :meth:`apply` and the answer."""
        plan = WritePlan(self.partition_for(req.group_id))
        error = self.coordinator_error(req.group_id) if req.group_id else ErrorCode.INVALID_GROUP_ID
        if error == ErrorCode.NONE:
            error = self._validate_commit(req, now_ms)
        if error != ErrorCode.NONE:
            plan.error_code = error
            for o in req.offsets:
                plan.partition_errors[(o.topic, o.partition)] = error
            return plan
        for o in req.offsets:
            metadata = o.metadata or ""
            if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                plan.partition_errors[(o.topic, o.partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            plan.partition_errors[(o.topic, o.partition)] = ErrorCode.NONE
            value = OffsetValue(o.offset, o.leader_epoch, metadata, now_ms)
            plan.records.append(
                (encode_key(OffsetKey(req.group_id, o.topic, o.partition)), encode_offset_value(value))
            )
        return plan

    def _validate_commit(self, req: CommitRequest, now_ms: int) -> ErrorCode:
        if req.group_id in self.consumer.groups:
            # KIP-848: a consumer group's commits carry the member epoch (STALE_MEMBER_EPOCH).
            return self.consumer.validate_offset_commit(
                req.group_id,
                req.member_id,
                req.group_instance_id,
                req.generation_id,
                transactional=req.transactional,
            )
        group = self.groups.get(req.group_id)
        if group is None:
            # Only a commit outside group management (generation -1) creates a group (Kafka).
            return ErrorCode.NONE if req.generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
        if group.state == GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and group.state == GroupState.EMPTY:
            return ErrorCode.NONE  # the admin client or a consumer using assign()
        # Kafka's ClassicGroup.validateOffsetCommit: the member is validated only when the request
        # names one. TxnOffsetCommit v0-2 cannot (no member id, no generation), so a member-less
        # transactional commit is accepted for a group in any state: the consume-transform-produce
        # loop commits for its own, active, group that way (aiokafka's send_offsets_to_transaction).
        if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            error = self._validate_member(group, req.member_id, req.group_instance_id)
            if error != ErrorCode.NONE:
                return error
            if req.generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not req.transactional and group.state != GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if req.transactional:
            return ErrorCode.NONE  # nor is the group's state enforced for a transactional commit
        if group.state == GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(req.member_id)
        if member is not None:
            # Kafka's OffsetMetadataManager.commitOffset: an OffsetCommit keeps the session alive.
            member.last_heartbeat_ms = now_ms
        return ErrorCode.NONE

    def apply(self, plan: WritePlan, now_ms: int) -> None:
        """The plan's records are in the log: make them visible (a TxnOffsetCommit's, pending)."""
        for key, value in plan.records:
            self.replay(plan.partition, key, value, now_ms, plan.producer_id)

    def txn_commit_offsets(
        self, req: CommitRequest, producer_id: int, producer_epoch: int, now_ms: int
    ) -> WritePlan:
        """TxnOffsetCommit: validated as a commit; its records are appended as a transactional batch of
        the producer and stay pending until the transaction's marker (:meth:`complete_txn`)."""
        plan = self.commit_offsets(req, now_ms)
        plan.producer_id = producer_id
        plan.producer_epoch = producer_epoch
        return plan

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker of ``producer_id`` is in ``__consumer_offsets`` partition ``partition``
        (written by WriteTxnMarkers or read on load): its pending offsets become committed or go."""
        for group in self.groups.values():
            if group.partition != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if pending and commit:
                group.offsets.update(pending)

    def begin_pending_commit(self, group_id: str, partitions: list[tuple[str, int]]) -> None:
        """An OffsetCommit of ``partitions`` is appended and waits for the ISR."""
        self.pending_offset_commits.setdefault(group_id, Counter()).update(partitions)

    def end_pending_commit(self, group_id: str, partitions: list[tuple[str, int]]) -> None:
        """That commit was applied (replicated) or failed: it is pending no more."""
        pending = self.pending_offset_commits.get(group_id)
        if pending is None:
            return
        pending.subtract(partitions)
        for tp in partitions:
            if pending[tp] <= 0:
                del pending[tp]
        if not pending:
            del self.pending_offset_commits[group_id]

    def unstable_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions with a TxnOffsetCommit whose transaction is undecided, or an OffsetCommit not yet
        replicated: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT (88) for them
        (KIP-447; Kafka's GroupMetadataManager.hasPendingOffsetCommitsForTopicPartition)."""
        unstable = set(self.pending_offset_commits.get(group_id, ()))
        group = self.groups.get(group_id)
        if group is not None:
            unstable.update(tp for pending in group.pending_txn_offsets.values() for tp in pending)
        return unstable

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None
    ) -> tuple[ErrorCode, list[tuple[str, int, OffsetValue | None]]]:
        """Committed offsets (None where there is none); ``topics`` None means all of them."""
        error = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if error != ErrorCode.NONE:
            return error, []
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if topics is None:
            return ErrorCode.NONE, [(t, p, v) for (t, p), v in sorted(offsets.items())]
        return ErrorCode.NONE, [(t, p, offsets.get((t, p))) for t, parts in topics for p in parts]

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]) -> WritePlan:
        plan = WritePlan(self.partition_for(group_id))
        error = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if error == ErrorCode.NONE and (group is None or group.state == GroupState.DEAD):
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error != ErrorCode.NONE or group is None:
            plan.error_code = error
            return plan
        subscribed: set[str] = set()
        if group.state != GroupState.EMPTY:
            topics_in_use = group.subscribed_topics()
            if topics_in_use is None:
                plan.error_code = ErrorCode.NON_EMPTY_GROUP
                return plan
            subscribed = topics_in_use
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None and consumer_group.members:
            # A KIP-848 group: the topics its members subscribe to (names and regex matches) are in use.
            subscribed = set(consumer_group.subscription_metadata)
        for topic, partitions in topics:
            for p in partitions:
                if topic in subscribed:
                    plan.partition_errors[(topic, p)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                    continue
                plan.partition_errors[(topic, p)] = ErrorCode.NONE
                if (topic, p) in group.offsets:
                    plan.records.append((encode_key(OffsetKey(group_id, topic, p)), None))
        return plan

    # --- admin: list, describe, delete -------------------------------------------------------------------

    def list_groups(self, states_filter: set[str] | None = None) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group this node coordinates."""
        out = []
        for group in self.groups.values():
            if group.partition not in self.owned_partitions or group.state == GroupState.DEAD:
                continue
            if group.group_id in self.consumer.groups:
                continue  # only offsets kept here: listed as the consumer group it is
            if states_filter and group.state.value.lower() not in states_filter:
                continue
            out.append((group.group_id, group.protocol_type or "", group.state.value))
        return out

    def describe_group(self, group_id: str) -> GroupDescription:
        error = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if error != ErrorCode.NONE:
            return GroupDescription(error, group_id, "", "", "", ())
        if group_id in self.consumer.groups:
            return self._describe_consumer_group_classically(group_id)
        if group is None:
            return GroupDescription(ErrorCode.GROUP_ID_NOT_FOUND, group_id, GroupState.DEAD.value, "", "", ())
        stable = group.state == GroupState.STABLE
        members = tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata_for(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return GroupDescription(
            ErrorCode.NONE,
            group_id,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def delete_groups(self, group_ids: list[str]) -> list[WritePlan]:
        """One plan per ``__consumer_offsets`` partition: tombstones for each deletable group."""
        plans: dict[int, WritePlan] = {}
        for group_id in group_ids:
            partition = self.partition_for(group_id)
            plan = plans.setdefault(partition, WritePlan(partition))
            error = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
            if error == ErrorCode.NONE and group_id in self.share.groups:
                # A share group: only an empty one; its records' tombstones go with the share writes.
                plan.group_errors[group_id] = self.share.delete(group_id)
                continue
            group = self.groups.get(group_id)
            consumer_group = self.consumer.groups.get(group_id)
            if error == ErrorCode.NONE and consumer_group is not None:
                if consumer_group.members:
                    plan.group_errors[group_id] = ErrorCode.NON_EMPTY_GROUP
                    continue
                plan.records.extend(self.consumer.delete_records(group_id))
                if group is None:
                    plan.group_errors[group_id] = ErrorCode.NONE
                    continue
            if error == ErrorCode.NONE:
                if group is None or group.state == GroupState.DEAD:
                    error = ErrorCode.GROUP_ID_NOT_FOUND
                elif group.state != GroupState.EMPTY:
                    error = ErrorCode.NON_EMPTY_GROUP
            plan.group_errors[group_id] = error
            if error != ErrorCode.NONE or group is None:
                continue
            for topic, p in sorted(group.offsets):
                plan.records.append((encode_key(OffsetKey(group_id, topic, p)), None))
            plan.records.append((encode_key(GroupKey(group_id)), None))
        return list(plans.values())

    # --- KIP-848 consumer groups: the group-type checks around coordinator/consumer_group.py ---------

    def consumer_group_heartbeat(self, req: HeartbeatRequest, topics: Topics, now_ms: int) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: the coordinator checks, then a classic group with members becomes a
        consumer group when the member joins and group.consumer.migration.policy allows it (Kafka's
        getOrMaybeCreateConsumerGroup), else keeps its id (GROUP_ID_NOT_FOUND)."""
        error = self.coordinator_error(req.group_id) if req.group_id else ErrorCode.NONE
        if error != ErrorCode.NONE:
            return HeartbeatResult(error)
        if req.group_id in self.share.groups:
            return HeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."
            )
        classic = self.groups.get(req.group_id)
        conversion = None
        if (
            req.group_id not in self.consumer.groups
            and classic is not None
            and (classic.members or classic.state not in (GroupState.EMPTY, GroupState.DEAD))
        ):
            config = self.config.consumer
            why = "the member is not joining" if req.member_epoch != 0 else None
            why = why or group_migration.upgrade_refusal(classic, config.migration_policy, config.max_size)
            if why is not None:
                return HeartbeatResult(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group: {why}."
                )
            try:
                conversion = group_migration.upgrade(self.consumer, classic, topics, now_ms)
            except Refused as refused:
                return HeartbeatResult(refused.error_code, refused.message)
        # An empty classic group (perhaps only committed offsets) becomes a consumer group: its offsets
        # stay where they are, the consumer group's records take the id over.
        result = self.consumer.heartbeat(req, topics, now_ms, conversion)
        if classic is not None and conversion and result.error_code == ErrorCode.NONE:
            # Converted (Kafka's convertToConsumerGroup): whoever waited in a rebalance is told to rejoin,
            # now into the consumer group; the classic group keeps only the offsets.
            for m in classic.members.values():
                if m.join_token is not None:
                    self._completions.append(
                        (m.join_token, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=m.member_id))
                    )
                if m.sync_token is not None:
                    self._completions.append((m.sync_token, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)))
            self._reset_membership(classic, now_ms)
        return result

    def _downgrade(
        self,
        group: ConsumerGroup,
        leaving: ConsumerMember | None,
        records: list[tuple[bytes, bytes | None]],
        now_ms: int,
    ) -> bool:
        """The consumer group's last consumer-protocol member leaves (or a classic static member took its
        place): if the migration policy allows it, the group becomes a classic group of the classic
        members (Kafka's convertToClassicGroup), which rebalances unless nobody left."""
        if not group_migration.downgrade_allowed(group, leaving, self.config.consumer.migration_policy):
            return False
        value = group_migration.downgraded_group_value(group, leaving.member_id if leaving else "", now_ms)
        protocols = {m.member_id: m.classic.supported_protocols for m in group.members.values() if m.classic}
        records.extend(self.consumer.delete_records(group.group_id))
        records.append(group_migration.group_record(group.group_id, value))
        classic = self.groups.get(group.group_id) or self._new_group(group.group_id, now_ms)
        self._load_group(group.group_id, group.partition, value, now_ms, classic)
        for m in classic.members.values():
            m.protocols = protocols[m.member_id]
        if leaving is not None:
            self._prepare_rebalance(classic, now_ms)
        return True

    def describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        """ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for an unknown or classic group, as Kafka."""
        error = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if error != ErrorCode.NONE:
            return ConsumerGroupDescription(error, group_id)
        if group_id not in self.consumer.groups and group_id in self.groups:
            return ConsumerGroupDescription(
                ErrorCode.GROUP_ID_NOT_FOUND, group_id, f"Group {group_id} is not a consumer group."
            )
        return self.consumer.describe(group_id)

    def list_consumer_groups(self, states_filter: set[str] | None = None) -> list[tuple[str, str]]:
        """(group id, state) of every consumer group this node coordinates."""
        out = []
        for group in self.consumer.groups.values():
            if group.partition not in self.owned_partitions:
                continue
            state = group.state().value
            if states_filter and state.lower() not in states_filter:
                continue
            out.append((group.group_id, state))
        return out

    def consumer_offset_fetch_error(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9 from a consumer group member: its epoch must be current (Kafka's
        ConsumerGroup.validateOffsetFetch)."""
        return self.consumer.validate_offset_fetch(group_id, member_id, member_epoch)

    # --- KIP-932 share groups: the group-type checks around coordinator/share_group.py ----------------

    def share_group_heartbeat(
        self, req: ShareHeartbeatRequest, topics: Topics, now_ms: int
    ) -> ShareHeartbeatResult:
        """ShareGroupHeartbeat: a group id that is a classic or consumer group is not a share group
        (Kafka's getOrMaybeCreateShareGroup: GROUP_ID_NOT_FOUND)."""
        error = self.coordinator_error(req.group_id) if req.group_id else ErrorCode.NONE
        if error != ErrorCode.NONE:
            return ShareHeartbeatResult(error)
        classic = self.groups.get(req.group_id)
        if req.group_id in self.consumer.groups or (classic is not None and classic.state != GroupState.DEAD):
            return ShareHeartbeatResult(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group."
            )
        return self.share.heartbeat(req, topics, now_ms)

    def describe_share_group(self, group_id: str) -> ShareGroupDescription:
        error = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if error != ErrorCode.NONE:
            return ShareGroupDescription(error, group_id)
        if group_id not in self.share.groups and (
            group_id in self.groups or group_id in self.consumer.groups
        ):
            return ShareGroupDescription(
                ErrorCode.GROUP_ID_NOT_FOUND, group_id, f"Group {group_id} is not a share group."
            )
        return self.share.describe(group_id)

    def share_group_for_offsets(self, group_id: str, *, alter: bool) -> tuple[ErrorCode, ShareGroup | None]:
        """The share group whose offsets DescribeShareGroupOffsets (``alter`` False) or
        AlterShareGroupOffsets (made if new; only when empty: NON_EMPTY_GROUP) works on."""
        error = self.coordinator_error(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if error != ErrorCode.NONE:
            return error, None
        classic = self.groups.get(group_id)
        if group_id in self.consumer.groups or (classic is not None and classic.state != GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, None
        if not alter:
            group = self.share.groups.get(group_id)
            return (ErrorCode.NONE, group) if group is not None else (ErrorCode.GROUP_ID_NOT_FOUND, None)
        group = self.share.empty_group(group_id)
        return (ErrorCode.NONE, group) if group is not None else (ErrorCode.NON_EMPTY_GROUP, None)

    def list_share_groups(self, states_filter: set[str] | None = None) -> list[tuple[str, str]]:
        """(group id, state) of every share group this node coordinates."""
        out = []
        for group in self.share.groups.values():
            if group.partition not in self.owned_partitions:
                continue
            state = group.state().value
            if states_filter and state.lower() not in states_filter:
                continue
            out.append((group.group_id, state))
        return out

    def _describe_consumer_group_classically(self, group_id: str) -> GroupDescription:
        """DescribeGroups on a consumer group: Kafka 4.0 answers it in the classic shape, with each
        member's subscription and assignment in the consumer protocol's encodings."""
        d = self.consumer.describe(group_id)
        names = {
            topic_id: name
            for name, (topic_id, _) in self.consumer.groups[group_id].subscription_metadata.items()
        }
        members = tuple(
            MemberDescription(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                _consumer_subscription(sorted(m.subscribed_topic_names)),
                group_migration.encode_assignment(
                    sorted((names[t], sorted(ps)) for t, ps in m.assignment.items() if t in names)
                ),
            )
            for m in d.members
        )
        return GroupDescription(
            ErrorCode.NONE, group_id, d.state, CONSUMER_PROTOCOL_TYPE, d.assignor_name, members
        )


def _consumer_subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: topics, null user data."""
    out = bytearray(b"\x00\x00") + len(topics).to_bytes(4, "big")
    for t in topics:
        raw = t.encode("utf-8")
        out += len(raw).to_bytes(2, "big") + raw
    return bytes(out + b"\xff\xff\xff\xff")


__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "ClassicGroup",
    "CommitOffset",
    "CommitRequest",
    "Completion",
    "GroupConfig",
    "GroupCoordinator",
    "GroupDescription",
    "GroupState",
    "JoinMember",
    "JoinRequest",
    "JoinResult",
    "LeaveMember",
    "Member",
    "MemberDescription",
    "SyncRequest",
    "SyncResult",
    "WritePlan",
]
