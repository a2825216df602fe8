"""Share groups (KIP-932) on the group coordinator: membership through ShareGroupHeartbeat, as a pure
state machine. Time is ``now_ms`` passed in.

As Kafka's GroupMetadataManager.shareGroupHeartbeat: a member joins with epoch 0 (its member id its
own, or one the coordinator makes), leaves with -1, and otherwise must send the epoch it was last given
(FENCED_MEMBER_EPOCH if not, UNKNOWN_MEMBER_ID for a member the group does not have). A member joining
or leaving, a subscription changing, or a subscribed topic appearing or growing bumps the **group
epoch**; the target assignment is then recomputed by Kafka's ``simple`` share assignor, which may give
every member every partition of the topics it subscribes to (share groups have no exclusive ownership:
the share partitions hand out records, not partitions). There is nothing to revoke, so a member takes
the new assignment and epoch at its next heartbeat. The response carries the assignment when the
member joined or its assignment changed. A member whose heartbeats stop for
``group.share.session.timeout.ms`` (or the group's ``share.session.timeout.ms``) is removed.

Members whose session expired are reported through :meth:`ShareGroupCoordinator.take_departed` so the
share sessions of theirs on this node end and their acquired records are released (Kafka's
ShareGroupListener.onMemberLeave). A member that leaves is not: it closes its share sessions itself
(ShareFetch/ShareAcknowledge with epoch -1) carrying its last acknowledgements, which may reach the
partition leader after the leave.

The group is kept as Kafka's ShareGroup* records in ``__consumer_offsets``
(coordinator/share_group_records.py): its epoch, the topics it has state in, and each member's metadata
and current assignment; a new coordinator replays them, and its members carry on with their epochs.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from pykraft.coordinator import share_group_records as rec
from pykraft.coordinator.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    Partitions,
    Topics,
    kafka_uuid_string,
)
from pykraft.coordinator.consumer_group_records import (
    SHARE_CURRENT_MEMBER_ASSIGNMENT_KEY,
    SHARE_MEMBER_METADATA_KEY,
    SHARE_METADATA_KEY,
    SHARE_STATE_PARTITION_METADATA_KEY,
    ConsumerGroupKey,
    decode_epoch_value,
    encode_epoch_value,
    encode_key,
)
from pykraft.core.errors import ErrorCode
from pykraft.core.group_configs import group_config_int

SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
# The one assignor share groups have (Kafka's group.share.assignors default).
SIMPLE_ASSIGNOR = "simple"
SHARE_PROTOCOL_TYPE = "share"


class ShareGroupState(StrEnum):
    """Kafka's ShareGroup.ShareGroupState names."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    session_timeout_ms: int = 45000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None


@dataclass(slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: Partitions = field(default_factory=dict)
    session_deadline_ms: int = 0


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    partition: int  # of __consumer_offsets
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    # Subscribed topic name -> (topic id, partition count) when the epoch was last bumped.
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    target_assignment: dict[str, Partitions] = field(default_factory=dict)
    # Every topic the group ever subscribed to or had offsets altered in: name -> (topic id, partition
    # count); what DescribeShareGroupOffsets lists when asked for all (Kafka's
    # ShareGroupStatePartitionMetadata, kept in memory here).
    initialized_topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    # The value each of the group's records was last written with (key -> value).
    written: dict[bytes, bytes] = field(default_factory=dict)

    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    member_id: str
    member_epoch: int
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: Partitions


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    error_code: ErrorCode
    group_id: str
    error_message: str | None = None
    state: str = ShareGroupState.DEAD.value
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = SIMPLE_ASSIGNOR
    members: tuple[ShareMemberDescription, ...] = ()


def simple_assignment(group: ShareGroup) -> dict[str, Partitions]:
    """Kafka's share SimpleAssignor as KIP-932 states it: a member may get every partition of every
    topic it subscribes to."""
    out: dict[str, Partitions] = {}
    for member in group.members.values():
        partitions: Partitions = {}
        for name in member.subscribed_topic_names:
            metadata = group.subscription_metadata.get(name)
            if metadata is not None and metadata[1] > 0:
                partitions[metadata[0]] = frozenset(range(metadata[1]))
        out[member.member_id] = partitions
    return out


class ShareGroupCoordinator:
    def __init__(
        self, config: ShareGroupConfig, partition_for: Callable[[str], int], rng: random.Random
    ) -> None:
        self.config = config
        self.partition_for = partition_for
        self.rng = rng
        self.groups: dict[str, ShareGroup] = {}
        # Group id -> its own configs (the GROUP resource's ConfigRecords).
        self._group_configs: Mapping[str, Mapping[str, str]] = {}
        self._departed: list[tuple[str, str]] = []
        self._writes: list[tuple[int, list[tuple[bytes, bytes | None]]]] = []

    def set_group_configs(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        self._group_configs = configs

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        return self._group_configs.get(group_id, {})

    def session_timeout_ms(self, group_id: str) -> int:
        return group_config_int(
            self.group_configs(group_id), SHARE_SESSION_TIMEOUT_MS, self.config.session_timeout_ms
        )

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return group_config_int(
            self.group_configs(group_id), SHARE_HEARTBEAT_INTERVAL_MS, self.config.heartbeat_interval_ms
        )

    def take_writes(self) -> list[tuple[int, list[tuple[bytes, bytes | None]]]]:
        """Records for ``__consumer_offsets`` (partition, [(key, value or None)]) since the last call."""
        out, self._writes = self._writes, []
        return out

    def _sync(self, group: ShareGroup, member_ids: list[str]) -> None:
        """Queue the records of the group and of ``member_ids`` whose value changed since written (a
        member gone: its tombstones)."""
        wanted: dict[bytes, bytes | None] = {
            encode_key(ConsumerGroupKey(SHARE_METADATA_KEY, group.group_id)): encode_epoch_value(
                group.group_epoch
            ),
            encode_key(
                ConsumerGroupKey(SHARE_STATE_PARTITION_METADATA_KEY, group.group_id)
            ): rec.encode_state_partition_metadata_value(group.initialized_topics),
        }
        for member_id in member_ids:
            member = group.members.get(member_id)
            metadata_key = encode_key(ConsumerGroupKey(SHARE_MEMBER_METADATA_KEY, group.group_id, member_id))
            assignment_key = encode_key(
                ConsumerGroupKey(SHARE_CURRENT_MEMBER_ASSIGNMENT_KEY, group.group_id, member_id)
            )
            if member is None:
                wanted[metadata_key] = wanted[assignment_key] = None
                continue
            wanted[metadata_key] = rec.encode_member_metadata_value(
                rec.ShareMemberMetadataValue(
                    member.rack_id, member.client_id, member.client_host, member.subscribed_topic_names
                )
            )
            wanted[assignment_key] = rec.encode_current_assignment_value(
                member.member_epoch, member.member_epoch, member.assignment
            )
        records: list[tuple[bytes, bytes | None]] = []
        for key, value in wanted.items():
            if value is None:
                if group.written.pop(key, None) is not None:
                    records.append((key, None))
            elif group.written.get(key) != value:
                group.written[key] = value
                records.append((key, value))
        if records:
            self._writes.append((group.partition, records))

    def replay(self, partition: int, key: ConsumerGroupKey, value: bytes | None, now_ms: int) -> None:
        """Apply one share group record read from ``__consumer_offsets`` (the load path). The target
        assignment is the simple assignor's again at the members' next heartbeats."""
        gid = key.group_id
        group = self.groups.get(gid)
        if value is None:
            if group is None:
                return
            if key.version == SHARE_METADATA_KEY:
                del self.groups[gid]
            elif key.version == SHARE_MEMBER_METADATA_KEY:
                group.members.pop(key.member_id, None)
            return
        if group is None:
            group = self.groups[gid] = ShareGroup(gid, partition)
        group.written[encode_key(key)] = value
        if key.version == SHARE_METADATA_KEY:
            group.group_epoch = group.assignment_epoch = decode_epoch_value(value)
        elif key.version == SHARE_STATE_PARTITION_METADATA_KEY:
            group.initialized_topics = rec.decode_state_partition_metadata_value(value)
        elif key.version in (SHARE_MEMBER_METADATA_KEY, SHARE_CURRENT_MEMBER_ASSIGNMENT_KEY):
            member = group.members.get(key.member_id)
            if member is None:
                member = group.members[key.member_id] = ShareGroupMember(key.member_id, 0, "", "")
            # A loaded member gets a whole session to heartbeat to its new coordinator (as Kafka does).
            member.session_deadline_ms = now_ms + self.session_timeout_ms(gid)
            if key.version == SHARE_MEMBER_METADATA_KEY:
                v = rec.decode_member_metadata_value(value)
                member.rack_id, member.client_id, member.client_host = v.rack_id, v.client_id, v.client_host
                member.subscribed_topic_names = v.subscribed_topic_names
            else:
                member.member_epoch, member.assignment = rec.decode_current_assignment_value(value)
                group.target_assignment[key.member_id] = member.assignment

    def take_departed(self) -> list[tuple[str, str]]:
        """(group id, member id) of every member removed since the last call."""
        out, self._departed = self._departed, []
        return out

    # --- ShareGroupHeartbeat ------------------------------------------------------------------------

    def heartbeat(self, req: ShareHeartbeatRequest, topics: Topics, now_ms: int) -> ShareHeartbeatResult:
        """The caller has checked that this node coordinates the group and the id is no other type's."""
        error = self._validate(req)
        if error is not None:
            return error
        group = self.groups.get(req.group_id)
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if group is not None and req.member_id in group.members:
                # Not departed: a member leaving closes its share sessions itself, with its last
                # acknowledgements (which releasing its records first would refuse).
                self._remove_member(group, req.member_id, expired=False)
            return ShareHeartbeatResult(
                ErrorCode.NONE, member_id=req.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH
            )
        if group is None:
            if req.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                return ShareHeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Share group {req.group_id} not found."
                )
            group = self.groups[req.group_id] = ShareGroup(req.group_id, self.partition_for(req.group_id))
        member = group.members.get(req.member_id) if req.member_id else None
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if member is None:
            if not joining:
                return ShareHeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {req.group_id}.",
                )
            if len(group.members) >= self.config.max_size:
                return ShareHeartbeatResult(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of {self.config.max_size} members.",
                )
            member_id = req.member_id or kafka_uuid_string(
                uuid.UUID(int=self.rng.getrandbits(128), version=4)
            )
            member = ShareGroupMember(member_id, 0, req.client_id, req.client_host)
            group.members[member_id] = member
            bump = True
        elif not joining and req.member_epoch != member.member_epoch:
            # Kafka's throwIfShareGroupMemberEpochIsInvalid: a share member's epoch must be its own.
            return ShareHeartbeatResult(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a member epoch ({req.member_epoch}) different from the one "
                f"the coordinator knows ({member.member_epoch}).",
            )
        else:
            bump = joining
        member.client_id, member.client_host = req.client_id, req.client_host
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.subscribed_topic_names is not None:
            names = tuple(sorted(set(req.subscribed_topic_names)))
            if names != member.subscribed_topic_names:
                member.subscribed_topic_names = names
                bump = True
        if self._refresh_metadata(group, topics) or bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            group.target_assignment = simple_assignment(group)
            group.assignment_epoch = group.group_epoch
        previous = member.assignment
        member.assignment = group.target_assignment.get(member.member_id, {})
        member.member_epoch = group.assignment_epoch
        member.session_deadline_ms = now_ms + self.session_timeout_ms(group.group_id)
        send_assignment = joining or member.assignment != previous
        self._sync(group, [member.member_id])
        return ShareHeartbeatResult(
            ErrorCode.NONE,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=member.assignment if send_assignment else None,
        )

    def _validate(self, req: ShareHeartbeatRequest) -> ShareHeartbeatResult | None:
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""

        def invalid(message: str) -> ShareHeartbeatResult:
            return ShareHeartbeatResult(ErrorCode.INVALID_REQUEST, message)

        if not req.group_id:
            return ShareHeartbeatResult(ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty.")
        if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if not req.subscribed_topic_names:
                return invalid("SubscribedTopicNames must be set in first request.")
        elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            return invalid(f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -1.")
        elif not req.member_id:
            return invalid("MemberId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            return invalid("RackId can't be empty.")
        return None

    def _refresh_metadata(self, group: ShareGroup, topics: Topics) -> bool:
        """Recompute the subscribed topics' ids and partition counts; True when they changed."""
        names = {n for m in group.members.values() for n in m.subscribed_topic_names}
        metadata = {
            name: (info.topic_id, info.num_partitions)
            for name in names
            if (info := topics.get(name)) is not None
        }
        group.initialized_topics.update(metadata)
        if metadata == group.subscription_metadata:
            return False
        group.subscription_metadata = metadata
        return True

    def _remove_member(self, group: ShareGroup, member_id: str, *, expired: bool) -> None:
        del group.members[member_id]
        names = {n for m in group.members.values() for n in m.subscribed_topic_names}
        group.subscription_metadata = {n: v for n, v in group.subscription_metadata.items() if n in names}
        group.group_epoch += 1
        group.target_assignment = simple_assignment(group)
        group.assignment_epoch = group.group_epoch
        if expired:
            self._departed.append((group.group_id, member_id))
        self._sync(group, [member_id])

    # --- timers ------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Remove every member whose session expired."""
        for group in list(self.groups.values()):
            for member in list(group.members.values()):
                if member.session_deadline_ms <= now_ms:
                    self._remove_member(group, member.member_id, expired=True)

    def next_deadline_ms(self) -> int | None:
        deadlines = [m.session_deadline_ms for g in self.groups.values() for m in g.members.values()]
        return min(deadlines) if deadlines else None

    # --- admin -------------------------------------------------------------------------------------

    def describe(self, group_id: str) -> ShareGroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return ShareGroupDescription(
                ErrorCode.GROUP_ID_NOT_FOUND, group_id, f"Group {group_id} not found."
            )
        return ShareGroupDescription(
            ErrorCode.NONE,
            group_id,
            state=group.state().value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            members=tuple(
                ShareMemberDescription(
                    m.member_id,
                    m.member_epoch,
                    m.rack_id,
                    m.client_id,
                    m.client_host,
                    m.subscribed_topic_names,
                    m.assignment,
                )
                for m in group.members.values()
            ),
        )

    def empty_group(self, group_id: str) -> ShareGroup | None:
        """The share group ``group_id`` for AlterShareGroupOffsets: made if it does not exist, None if
        it has members (NON_EMPTY_GROUP)."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id, self.partition_for(group_id))
        return None if group.members else group

    def initialize_topic(self, group: ShareGroup, name: str, topic_id: uuid.UUID, partitions: int) -> None:
        """The group has state in this topic now (AlterShareGroupOffsets)."""
        group.initialized_topics[name] = (topic_id, partitions)
        self._sync(group, [])

    def forget_topic(self, group: ShareGroup, name: str) -> None:
        """The group's state in this topic is deleted (DeleteShareGroupOffsets)."""
        group.initialized_topics.pop(name, None)
        self._sync(group, [])

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups on a share group: only an empty one (NON_EMPTY_GROUP otherwise)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        self._writes.append((group.partition, [(key, None) for key in group.written]))
        return ErrorCode.NONE

    def unload(self, partition: int) -> None:
        """Another node coordinates these groups now; their members stay members there (they are not
        departed: what they hold stays theirs)."""
        for group_id, group in list(self.groups.items()):
            if group.partition == partition:
                del self.groups[group_id]
