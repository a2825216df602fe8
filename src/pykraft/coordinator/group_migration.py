"""Online migration between the classic and the consumer group protocols (KIP-848).

``group.consumer.migration.policy`` (coordinator/consumer_group.MigrationPolicy; Kafka 4's default
``bidirectional``) lets a consumer fleet move from ``group.protocol=classic`` to ``consumer`` one member at
a time, and back, as Kafka's GroupMetadataManager does:

- **Upgrade** (validateOnlineUpgrade, convertToConsumerGroup): the first ConsumerGroupHeartbeat joining a
  classic group that uses the consumer embedded protocol turns it into a consumer group. Every classic
  member becomes a member of it at the classic generation, keeping the partitions of its last
  assignment (ConsumerGroup.fromClassicGroup), and goes on speaking the classic protocol.
- **Classic members inside a consumer group** (classicGroupJoinToConsumerGroup,
  classicGroupSyncToConsumerGroup, classicGroupHeartbeatToConsumerGroup,
  classicGroupLeaveToConsumerGroup): JoinGroup updates the member's subscription and reconciles it like a
  heartbeat (its owned partitions come from its ConsumerProtocolSubscription) and answers at once with its
  member epoch as the generation; SyncGroup hands out its current assignment; Heartbeat answers
  REBALANCE_IN_PROGRESS when the member must rejoin to move on (the group epoch passed it, it must revoke,
  or partitions it waits for were released); OffsetCommit checks the generation against the member epoch
  (ILLEGAL_GENERATION).
- **Downgrade** (validateOnlineDowngradeWithFencedMember, convertToClassicGroup): when the last
  consumer-protocol member leaves or is fenced and classic members remain, the group becomes a classic
  group again at the group epoch, each member holding its target assignment, and a rebalance starts.

Either conversion writes Kafka's records: tombstones of the old type's records, then the new group's
records, so loading ``__consumer_offsets`` again rebuilds the same group. Pure: no I/O, ``now_ms`` in.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pykraft.coordinator import consumer_group_records as rec
from pykraft.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupCoordinator,
    ConsumerMember,
    MemberState,
    MigrationPolicy,
    Partitions,
    Refused,
    Topics,
    Writes,
    kafka_uuid_string,
)
from pykraft.coordinator.offsets_records import (
    GroupKey,
    GroupValue,
    MemberValue,
    RecordFormatError,
    RecordReader,
    encode_group_value,
    encode_key,
)
from pykraft.core.errors import ErrorCode

if TYPE_CHECKING:
    from pykraft.coordinator.group_coordinator import ClassicGroup, JoinRequest, LeaveMember, SyncRequest

CONSUMER_PROTOCOL_TYPE = "consumer"
# ConsumerProtocolAssignment's newest version: its layout is the same in every version.
MAX_ASSIGNMENT_VERSION = 3

Protocols = tuple[tuple[str, bytes], ...]


# --- the consumer embedded protocol (ConsumerProtocolSubscription / ConsumerProtocolAssignment) ----------


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...]
    rack_id: str | None


def _count(r: RecordReader) -> int:
    n = r.i32()
    if n < -1 or n > len(r.buf):
        raise RecordFormatError(f"array count {n} in a {len(r.buf)}-byte consumer protocol message")
    return max(n, 0)


def _topic_partitions(r: RecordReader) -> tuple[tuple[str, tuple[int, ...]], ...]:
    out = []
    for _ in range(_count(r)):
        topic = r.string()
        out.append((topic, tuple(r.i32() for _ in range(_count(r)))))
    return tuple(out)


def decode_subscription(data: bytes) -> Subscription:
    """ConsumerProtocolSubscription v0-v3: topics, user data, owned partitions (v1+), generation (v2+),
    rack id (v3+)."""
    r = RecordReader(data)
    version = r.i16()
    topics = tuple(r.string() for _ in range(_count(r)))
    r.bytes_()  # user data
    owned = _topic_partitions(r) if version >= 1 else ()
    if version >= 2:
        r.i32()  # generation id
    rack_id = r.nullable_string() if version >= 3 else None
    return Subscription(version, topics, owned, rack_id)


def decode_assignment(data: bytes) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], bytes]:
    """ConsumerProtocolAssignment: (partitions per topic, user data); empty bytes: nothing assigned."""
    if not data:
        return (), b""
    r = RecordReader(data)
    r.i16()
    partitions = _topic_partitions(r)
    return partitions, r.bytes_()


def encode_assignment(partitions: list[tuple[str, list[int]]], version: int = 0) -> bytes:
    """ConsumerProtocolAssignment: partitions per topic, null user data."""
    out = bytearray(min(max(version, 0), MAX_ASSIGNMENT_VERSION).to_bytes(2, "big"))
    out += len(partitions).to_bytes(4, "big")
    for topic, parts in partitions:
        raw = topic.encode("utf-8")
        out += len(raw).to_bytes(2, "big") + raw + len(parts).to_bytes(4, "big")
        for p in parts:
            out += p.to_bytes(4, "big", signed=True)
    return bytes(out + b"\xff\xff\xff\xff")


def select_protocol(members: list[Protocols]) -> str:
    """The classic group's protocol: among the names every member supports, the one most members list
    first; ties go to the first member's preference (Kafka's ClassicGroup.selectProtocol)."""
    candidates = common_protocols(members)
    assert candidates, "no protocol every member supports"
    votes = dict.fromkeys(candidates, 0)
    for protocols in members:
        votes[next(name for name, _ in protocols if name in votes)] += 1
    return max(candidates, key=lambda c: (votes[c], -candidates.index(c)))


def common_protocols(members: list[Protocols]) -> list[str]:
    if not members:
        return []
    common = [name for name, _ in members[0]]
    for protocols in members[1:]:
        names = {name for name, _ in protocols}
        common = [n for n in common if n in names]
    return common


def _metadata_for(protocols: Protocols, name: str | None) -> bytes:
    return next((metadata for n, metadata in protocols if n == name), b"")


def _by_name(partitions: Partitions, names: Mapping[uuid.UUID, str]) -> list[tuple[str, list[int]]]:
    return sorted((names[t], sorted(ps)) for t, ps in partitions.items() if t in names)


def _ids(pairs: tuple[tuple[str, tuple[int, ...]], ...], topics: Topics) -> Partitions:
    """Topic names to ids; topics no longer in the metadata are left out (Kafka's toTopicPartitionMap)."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for topic, parts in pairs:
        info = topics.get(topic)
        if info is not None:
            out[info.topic_id] = out.get(info.topic_id, frozenset()) | frozenset(parts)
    return out


# --- upgrade: classic group -> consumer group -----------------------------------------------------------


def upgrade_refusal(classic: ClassicGroup, policy: MigrationPolicy, max_size: int) -> str | None:
    """Why a classic group with members may not become a consumer group (Kafka's validateOnlineUpgrade),
    or None."""
    if not policy.upgrade_enabled:
        return "the online upgrade is disabled"
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return "the group does not use the consumer embedded protocol"
    if len(classic.members) > max_size:
        return "the group size exceeds the consumer group maximum size"
    return None


def upgrade(consumer: ConsumerGroupCoordinator, classic: ClassicGroup, topics: Topics, now_ms: int) -> Writes:
    """Kafka's convertToConsumerGroup: the consumer group made of ``classic`` is put in place and its
    records returned (the classic group's tombstone first). Raises Refused (GROUP_ID_NOT_FOUND) when a
    member's subscription or assignment does not decode, UNSUPPORTED_VERSION when an assignment carries
    a custom assignor's user data (it would be lost)."""
    generation = classic.generation_id
    group = ConsumerGroup(
        classic.group_id, classic.partition, group_epoch=generation, assignment_epoch=generation
    )
    try:
        for m in classic.members.values():
            # A group still in its first rebalance has no protocol yet: the member's first one.
            subscription = decode_subscription(m.metadata_for(classic.protocol_name or m.protocols[0][0]))
            assigned, user_data = decode_assignment(m.assignment)
            if user_data:
                raise Refused(ErrorCode.UNSUPPORTED_VERSION, "userData from a custom assignor would be lost")
            member = ConsumerMember(
                m.member_id,
                instance_id=m.group_instance_id,
                rack_id=subscription.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=subscription.topics,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                member_epoch=generation,
                previous_member_epoch=generation,
                state=MemberState.STABLE,
                classic=rec.ClassicMemberMetadata(m.session_timeout_ms, m.protocols),
            )
            partitions = _ids(assigned, topics)
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            group.target[member.member_id] = partitions
            consumer.set_assignment(
                group, member, {(t, p) for t, ps in partitions.items() for p in ps}, set()
            )
            consumer.touch(group, member, now_ms)
    except RecordFormatError as exc:
        raise Refused(
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Cannot upgrade the classic group {classic.group_id} to consumer group because the embedded "
            f"consumer protocol is malformed: {exc}.",
        ) from None
    group.subscription_metadata = consumer.subscription_metadata(group, topics)
    # ConsumerGroup.createConsumerGroupRecords (with the subscription metadata pykraft keeps as a record).
    gid = group.group_id
    records: Writes = [(encode_key(GroupKey(gid)), None)]
    records += [consumer.member_record(group, m) for m in group.members.values()]
    records.append(
        (
            rec.encode_key(rec.ConsumerGroupKey(rec.PARTITION_METADATA_KEY, gid)),
            rec.encode_partition_metadata_value(group.subscription_metadata),
        )
    )
    records.append(
        (rec.encode_key(rec.ConsumerGroupKey(rec.METADATA_KEY, gid)), rec.encode_epoch_value(generation))
    )
    for member_id in group.members:
        key = rec.ConsumerGroupKey(rec.TARGET_ASSIGNMENT_MEMBER_KEY, gid, member_id)
        records.append((rec.encode_key(key), rec.encode_target_member_value(group.target[member_id])))
    records.append(
        (
            rec.encode_key(rec.ConsumerGroupKey(rec.TARGET_ASSIGNMENT_METADATA_KEY, gid)),
            rec.encode_epoch_value(generation),
        )
    )
    records += [consumer.current_assignment_record(group, m) for m in group.members.values()]
    consumer.groups[gid] = group
    return records


# --- downgrade: consumer group -> classic group ---------------------------------------------------------


def downgrade_allowed(group: ConsumerGroup, leaving: ConsumerMember | None, policy: MigrationPolicy) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember: the leaving member was the last one speaking the
    consumer protocol, some classic members stay, and the policy allows it. With no leaving member
    (validateOnlineDowngradeWithReplacedMemberId: a classic static member took the last one's place):
    every member speaks the classic protocol."""
    others = [m for m in group.members.values() if leaving is None or m.member_id != leaving.member_id]
    return (
        (leaving is None or leaving.classic is None)
        and bool(others)
        and all(m.classic is not None for m in others)
        and policy.downgrade_enabled
    )


def downgraded_group_value(group: ConsumerGroup, leaving_member_id: str, now_ms: int) -> GroupValue:
    """Kafka's ClassicGroup.fromConsumerGroup as the GroupMetadata record it writes: generation = group
    epoch, every remaining member with its target assignment in the consumer protocol (in its
    subscription's version)."""
    members = [m for m in group.members.values() if m.member_id != leaving_member_id]
    protocols = [m.classic.supported_protocols for m in members if m.classic is not None]
    protocol = select_protocol(protocols)
    names = {topic_id: name for name, (topic_id, _) in group.subscription_metadata.items()}
    values = []
    for m, supported in zip(members, protocols, strict=True):
        assert m.classic is not None
        subscription = _metadata_for(supported, protocol)
        try:
            version = decode_subscription(subscription).version
        except RecordFormatError:
            version = 0
        values.append(
            MemberValue(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                subscription,
                encode_assignment(_by_name(group.target.get(m.member_id, {}), names), version),
            )
        )
    return GroupValue(
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        generation=group.group_epoch,
        protocol=protocol,
        leader=members[0].member_id,
        current_state_timestamp_ms=now_ms,
        members=tuple(values),
    )


def group_record(group_id: str, value: GroupValue) -> tuple[bytes, bytes]:
    return encode_key(GroupKey(group_id)), encode_group_value(value)


# --- classic members inside a consumer group ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    """What JoinGroup answers a classic member of a consumer group (no leader: nobody assigns)."""

    error_code: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_name: str | None = None
    error_message: str | None = None
    # The join replaced a static member speaking the consumer protocol (a downgrade may follow).
    replaced_consumer_member: bool = False


@dataclass(frozen=True, slots=True)
class ClassicSync:
    error_code: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


def _supports(group: ConsumerGroup, protocol_type: str, protocols: Protocols) -> bool:
    """Kafka's ConsumerGroup.supportsClassicProtocols: the consumer protocol type, and a protocol every
    classic member supports (any, in a group without members)."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
        return False
    classic = [m.classic.supported_protocols for m in group.members.values() if m.classic is not None]
    if not group.members or not classic:
        return True
    common = set(common_protocols(classic))
    return any(name in common for name, _ in protocols)


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
    """Kafka's validateConsumerGroupMember plus throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise Refused(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
            )
    else:
        static_id = group.static_members.get(instance_id)
        member = group.members.get(static_id) if static_id is not None else None
        if member is None:
            raise Refused(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member with instance id {instance_id} is not a member of group {group.group_id}.",
            )
        if member.member_id != member_id:
            raise Refused(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{member.member_id}.",
            )
    if member.classic is None:
        raise Refused(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol."
        )
    return member


def _check_generation(member: ConsumerMember, generation_id: int) -> None:
    if generation_id != member.member_epoch:
        raise Refused(
            ErrorCode.ILLEGAL_GENERATION,
            f"The request generation id {generation_id} is not equal to the member epoch "
            f"{member.member_epoch} of member {member.member_id}.",
        )


def _must_rejoin(group: ConsumerGroup, member: ConsumerMember, now_ms: int) -> bool:
    """Kafka's throwIfRebalanceInProgress: the group epoch moved past the member (unless it is revoking,
    its rejoin already under way). The member gets its rebalance timeout to rejoin."""
    if group.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
        _schedule_rejoin(member, now_ms)
        return True
    return False


def _schedule_rejoin(member: ConsumerMember, now_ms: int) -> None:
    if member.classic_deadline_ms is None:
        member.classic_deadline_ms = now_ms + max(member.rebalance_timeout_ms, 0)


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Kafka's ConsumerGroup.waitingOnUnreleasedPartition: a partition of its target is still owned."""
    assigned = {(t, p) for t, ps in member.assigned.items() for p in ps}
    return any(
        (t, p) not in assigned and (t, p) in group.partition_epochs
        for t, ps in group.target.get(member.member_id, {}).items()
        for p in ps
    )


def join(
    consumer: ConsumerGroupCoordinator,
    group: ConsumerGroup,
    req: JoinRequest,
    topics: Topics,
    now_ms: int,
) -> ClassicJoin:
    """Kafka's classicGroupJoinToConsumerGroup; answered at once (records queued on ``consumer``)."""
    records: Writes = []
    is_unknown = req.member_id == ""
    member_id = req.member_id or kafka_uuid_string(uuid.UUID(int=consumer.rng.getrandbits(128), version=4))
    try:
        existing = group.members.get(member_id)
        if existing is None and (
            req.group_instance_id is None or req.group_instance_id not in group.static_members
        ):
            consumer.check_capacity(group)
        if not _supports(group, req.protocol_type, req.protocols):
            raise Refused(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported."
            )
        if is_unknown and req.group_instance_id is None and req.require_known_member_id:
            # KIP-394: the member comes back with this id.
            return ClassicJoin(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = decode_subscription(req.protocols[0][1])
        except RecordFormatError as exc:
            raise Refused(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Malformed consumer protocol: {exc}."
            ) from None
        static_id = group.static_members.get(req.group_instance_id or "")
        replaced = group.members.get(static_id) if static_id is not None and static_id != member_id else None
        member, is_new = _join_member(consumer, group, req, member_id, is_unknown, records)
        old_metadata = None if is_new else member.metadata_value()
        old_subscription = (member.subscribed_topic_names, member.subscribed_topic_regex)
        if req.group_instance_id is not None:
            member.instance_id = req.group_instance_id
        if subscription.rack_id is not None:
            member.rack_id = subscription.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.subscribed_topic_names = subscription.topics
        member.client_id = req.client_id
        member.client_host = req.client_host
        member.classic = rec.ClassicMemberMetadata(req.session_timeout_ms, req.protocols)
        owned = tuple((t, tuple(sorted(ps))) for t, ps in _ids(subscription.owned_partitions, topics).items())
        consumer.update_member(
            group, member, is_new, old_metadata, old_subscription, topics, owned, now_ms, records
        )
        # The member must now send SyncGroup within its rebalance timeout (Kafka's sync timeout).
        member.classic_deadline_ms = now_ms + max(member.rebalance_timeout_ms, 0)
        return ClassicJoin(
            ErrorCode.NONE,
            member.member_id,
            member.member_epoch,
            req.protocols[0][0],
            replaced_consumer_member=replaced is not None and replaced.classic is None,
        )
    except Refused as refused:
        return ClassicJoin(refused.error_code, req.member_id, error_message=refused.message)
    finally:
        if records:
            consumer.queue_writes(group.partition, records)


def _join_member(
    consumer: ConsumerGroupCoordinator,
    group: ConsumerGroup,
    req: JoinRequest,
    member_id: str,
    is_unknown: bool,
    records: Writes,
) -> tuple[ConsumerMember, bool]:
    """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember for a classic JoinGroup."""
    if req.group_instance_id is None:
        member = group.members.get(member_id)
        return (member, False) if member is not None else (ConsumerMember(member_id), True)
    static_id = group.static_members.get(req.group_instance_id)
    existing = group.members.get(static_id) if static_id is not None else None
    if is_unknown:
        if existing is None:
            return ConsumerMember(member_id), True
        # A new instance of a static member takes its place and partitions without a rebalance.
        return consumer.replace_static(group, existing, member_id, records), False
    if existing is None:
        raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.group_instance_id} is unknown.")
    if existing.member_id != member_id:
        raise Refused(
            ErrorCode.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {req.group_instance_id} was fenced by member "
            f"{existing.member_id}.",
        )
    return existing, False


def sync(
    group: ConsumerGroup, req: SyncRequest, consumer: ConsumerGroupCoordinator, now_ms: int
) -> ClassicSync:
    """Kafka's classicGroupSyncToConsumerGroup: the member's current assignment, unless it must rejoin."""
    try:
        member = _member(group, req.member_id, req.group_instance_id)
        _check_generation(member, req.generation_id)
        assert member.classic is not None
        protocol_name = member.classic.supported_protocols[0][0]
        if req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "protocol type differs from the group's")
        if req.protocol_name is not None and req.protocol_name != protocol_name:
            raise Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "protocol name differs from the join's")
        if _must_rejoin(group, member, now_ms):
            return ClassicSync(ErrorCode.REBALANCE_IN_PROGRESS)
    except Refused as refused:
        return ClassicSync(refused.error_code)
    member.classic_deadline_ms = None
    consumer.touch(group, member, now_ms)
    names = {topic_id: name for name, (topic_id, _) in group.subscription_metadata.items()}
    try:
        version = decode_subscription(member.classic.supported_protocols[0][1]).version
    except RecordFormatError:
        version = 0
    return ClassicSync(
        ErrorCode.NONE,
        CONSUMER_PROTOCOL_TYPE,
        protocol_name,
        encode_assignment(_by_name(member.assigned, names), version),
    )


def heartbeat(
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    generation_id: int,
    consumer: ConsumerGroupCoordinator,
    now_ms: int,
) -> ErrorCode:
    """Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS when the member must rejoin —
    the group epoch passed it, it must revoke partitions, or partitions it waited for are free now."""
    try:
        member = _member(group, member_id, instance_id)
        _check_generation(member, generation_id)
    except Refused as refused:
        return refused.error_code
    consumer.touch(group, member, now_ms)
    if (
        member.member_epoch < group.group_epoch
        or member.state == MemberState.UNREVOKED_PARTITIONS
        or (member.state == MemberState.UNRELEASED_PARTITIONS and not _waiting_on_unreleased(group, member))
    ):
        _schedule_rejoin(member, now_ms)
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def leave(
    group: ConsumerGroup, leaving: list[LeaveMember], consumer: ConsumerGroupCoordinator
) -> list[ErrorCode]:
    """Kafka's classicGroupLeaveToConsumerGroup: each classic member named leaves (one new group epoch)."""
    errors: list[ErrorCode] = []
    gone: list[ConsumerMember] = []
    for one in leaving:
        try:
            if one.group_instance_id is None:
                member = _member(group, one.member_id, None)
            else:
                static_id = group.static_members.get(one.group_instance_id, "")
                member = _member(group, one.member_id or static_id, one.group_instance_id)
        except Refused as refused:
            errors.append(refused.error_code)
            continue
        errors.append(ErrorCode.NONE)
        if member not in gone:
            gone.append(member)
    records: Writes = []
    consumer.remove_members(group, gone, records)
    if records:
        consumer.queue_writes(group.partition, records)
    return errors


__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "ClassicJoin",
    "ClassicSync",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "downgrade_allowed",
    "downgraded_group_value",
    "encode_assignment",
    "group_record",
    "heartbeat",
    "join",
    "leave",
    "select_protocol",
    "sync",
    "upgrade",
    "upgrade_refusal",
]
