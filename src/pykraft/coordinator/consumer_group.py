"""Consumer groups of the next-generation protocol (KIP-848) as a pure state machine.

A member speaks only ConsumerGroupHeartbeat. The coordinator keeps, per group (Kafka's ConsumerGroup,
GroupMetadataManager.consumerGroupHeartbeat):

- the **group epoch**, bumped whenever a member joins, leaves, changes its subscription, or the
  partitions of the subscribed topics change (new partitions; new topics matching a regex);
- the **target assignment** and its epoch: when the group epoch passes the assignment epoch, the
  server-side assignor (coordinator/assignors.py) computes where every partition should be;
- per member, its **member epoch** and current assignment. A member moves towards its target one
  heartbeat at a time (Kafka's CurrentAssignmentBuilder): partitions it must give up are first
  *revoked* (the member keeps its epoch, state UNREVOKED_PARTITIONS) and only once its heartbeat no
  longer lists them as owned does it move to the new epoch; a partition still owned by another member
  (its partition epoch is set) is *unreleased* and handed over only once that owner has revoked it.
  So no partition ever has two owners, which is what KIP-848's incremental reconciliation promises.

Time is ``now_ms`` passed in: each heartbeat pushes the member's session deadline
(``group.consumer.session.timeout.ms``, or the group's own ``consumer.session.timeout.ms`` group config;
the heartbeat interval it answers likewise: Kafka's GroupMetadataManager.consumerGroupSessionTimeoutMs
and consumerGroupHeartbeatIntervalMs, read at each heartbeat); a member revoking partitions must finish
within its rebalance timeout; :meth:`ConsumerGroupCoordinator.tick` fences members whose deadlines
passed. Every change is also a record for ``__consumer_offsets`` in Kafka's layout
(coordinator/consumer_group_records.py), queued for the shell to append; :meth:`ConsumerGroupCoordinator.replay` rebuilds the groups from them
when a partition is loaded.
"""

from __future__ import annotations

import base64
import random
import re
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from pykraft.coordinator import consumer_group_records as rec
from pykraft.coordinator.assignors import DEFAULT_ASSIGNORS, assign
from pykraft.coordinator.offsets_records import RecordFormatError
from pykraft.core.errors import ErrorCode
from pykraft.core.group_configs import (
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    group_config_int,
)

# Member epochs with a meaning of their own (ConsumerGroupHeartbeatRequest.json).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

Partitions = dict[uuid.UUID, frozenset[int]]


class MemberState(IntEnum):
    """Kafka's MemberState (the State int8 of ConsumerGroupCurrentMemberAssignmentValue)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(StrEnum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MigrationPolicy(StrEnum):
    """group.consumer.migration.policy (Kafka's ConsumerGroupMigrationPolicy, KIP-848): may a classic
    group become a consumer group when a consumer-protocol member joins it (upgrade), and a consumer
    group a classic one when its last consumer-protocol member leaves (downgrade)?"""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """Kafka's group.consumer.* settings (GroupCoordinatorConfig), same names and defaults."""

    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 2**31 - 1
    # The first is the default when members name none (group.consumer.assignors).
    assignors: tuple[str, ...] = DEFAULT_ASSIGNORS
    # Kafka 4's default: classic and consumer groups convert into each other online.
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """What the assignment needs of a topic in the metadata image."""

    topic_id: uuid.UUID
    num_partitions: int


Topics = Mapping[str, TopicInfo]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """ConsumerGroupHeartbeat's fields; None means "unchanged since the last heartbeat"."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error_code: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # None: unchanged (not sent); else the partitions the member may use now.
    assignment: Partitions | None = None


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # Set when the member speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside this group.
    classic: rec.ClassicMemberMetadata | None = None
    # Timers (not persisted; a loaded member gets a full session).
    session_deadline_ms: int = 0
    rebalance_deadline_ms: int | None = None
    # A classic member must send SyncGroup after its JoinGroup, or JoinGroup after being told to
    # rebalance, within its rebalance timeout (Kafka's consumer group sync and join timeouts).
    classic_deadline_ms: int | None = None

    def metadata_value(self) -> rec.MemberMetadataValue:
        return rec.MemberMetadataValue(
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
            self.classic,
        )

    def assignment_value(self) -> rec.CurrentAssignmentValue:
        return rec.CurrentAssignmentValue(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            self.assigned,
            self.pending_revocation,
        )


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    partition: int
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    # Topic name -> (topic id, partition count) of every subscribed topic: a change bumps the epoch.
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    # (topic id, partition) -> epoch of the member that owns it (assigned or still revoking).
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)

    def state(self) -> ConsumerGroupState:
        """Kafka's ConsumerGroup.maybeUpdateGroupState."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members name, else the configured default (Kafka's preferredServerAssignor)."""
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        return votes.most_common(1)[0][0] if votes else default


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Partitions
    target_assignment: Partitions
    state: MemberState


@dataclass(frozen=True, slots=True)
class GroupDescription:
    error_code: ErrorCode
    group_id: str
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[MemberDescription, ...] = ()


class Refused(Exception):
    """A request answered with an error code and message (Kafka's ApiException)."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


Writes = list[tuple[bytes, bytes | None]]


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, no padding (member ids, KIP-848)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def _flat(partitions: Partitions) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in partitions.items() for p in ps}


def _group(pairs: set[tuple[uuid.UUID, int]]) -> Partitions:
    out: dict[uuid.UUID, set[int]] = {}
    for t, p in pairs:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


# Kafka matches subscription regexes with RE2J (linear time); Python's re backtracks, so a pattern a
# client sends could stall the coordinator. Patterns are kept to what cannot explode on a topic name
# (at most 249 characters): no backreferences or lookarounds (RE2 has none either), no quantified group
# that itself holds a quantifier, at most a few unbounded quantifiers.
MAX_REGEX_LENGTH = 1000
MAX_UNBOUNDED_QUANTIFIERS = 3


def regex_refusal(pattern: str) -> str | None:
    """Why ``pattern`` is refused as a subscription regex, or None when it is accepted."""
    if len(pattern) > MAX_REGEX_LENGTH:
        return f"longer than {MAX_REGEX_LENGTH} characters"
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    stack: list[bool] = []  # per open group: does it hold a quantifier or alternatives?
    unbounded = 0
    last_group_quantified = False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        quantifier = False
        if c == "\\":
            if i + 1 < n and pattern[i + 1].isdigit():
                return "backreferences are not supported"
            i += 2
            last_group_quantified = False
            continue
        if c == "[":
            # Skip a character class ("]" right after "[" or "[^" is a literal).
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            last_group_quantified = False
            continue
        if c == "(":
            if pattern.startswith(("(?=", "(?!", "(?<=", "(?<!", "(?P="), i):
                return "lookarounds and backreferences are not supported"
            stack.append(False)
            last_group_quantified = False
        elif c == "|":
            if stack:
                stack[-1] = True  # alternatives repeated can overlap ((a|a)*): as risky as a quantifier
        elif c == ")":
            last_group_quantified = stack.pop() if stack else False
            if stack and last_group_quantified:
                stack[-1] = True
            i += 1
            continue
        elif c in "*+?{":
            if c == "?" and i > 0 and pattern[i - 1] in "*+?}":
                i += 1  # a lazy modifier, not a quantifier of its own
                continue
            quantifier = True
            if c in "*+" or (c == "{" and re.match(r"\{\d*,\}", pattern[i:])):
                unbounded += 1
            if i > 0 and pattern[i - 1] == ")" and last_group_quantified:
                return "a repeated group may not hold a quantifier or alternatives (nested repetition)"
        if quantifier and stack:
            stack[-1] = True
        last_group_quantified = False
        i += 1
    if unbounded > MAX_UNBOUNDED_QUANTIFIERS:
        return f"more than {MAX_UNBOUNDED_QUANTIFIERS} unbounded repetitions"
    return None


def _matches(regex: str, name: str) -> bool:
    # Java's Matcher.matches(): the whole name; internal topics are never matched by a pattern.
    return not name.startswith("__") and re.fullmatch(regex, name) is not None


class ConsumerGroupCoordinator:
    """Every consumer group this node coordinates. The classic coordinator (group_coordinator.py)
    owns the ``__consumer_offsets`` partitions and their loading; it hands this one the consumer group
    records and asks it which ids are consumer groups."""

    def __init__(
        self, config: ConsumerGroupConfig, partition_for: Callable[[str], int], rng: random.Random
    ) -> None:
        self.config = config
        self.partition_for = partition_for
        self.rng = rng
        self.groups: dict[str, ConsumerGroup] = {}
        self._writes: list[tuple[int, Writes]] = []
        # Group id -> its own group configs (the metadata image's GROUP resources), any group name.
        self.group_configs: Mapping[str, Mapping[str, str]] = {}
        # Called when a member is fenced or leaves; True when it converted the group to a classic one
        # instead (KIP-848 online downgrade, coordinator/group_migration.py), which also wrote the records.
        self.on_fence: Callable[[ConsumerGroup, ConsumerMember, Writes, int], bool] | None = None

    def set_group_configs(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """The group configs changed: each group's new values apply from its members' next heartbeat."""
        self.group_configs = configs

    def session_timeout_ms(self, group_id: str) -> int:
        return group_config_int(
            self.group_configs.get(group_id, {}), CONSUMER_SESSION_TIMEOUT_MS, self.config.session_timeout_ms
        )

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return group_config_int(
            self.group_configs.get(group_id, {}),
            CONSUMER_HEARTBEAT_INTERVAL_MS,
            self.config.heartbeat_interval_ms,
        )

    def take_writes(self) -> list[tuple[int, Writes]]:
        out, self._writes = self._writes, []
        return out

    def queue_writes(self, partition: int, records: Writes) -> None:
        self._writes.append((partition, records))

    # --- the heartbeat ------------------------------------------------------------------------------

    def heartbeat(
        self, req: HeartbeatRequest, topics: Topics, now_ms: int, conversion: Writes | None = None
    ) -> HeartbeatResult:
        """One ConsumerGroupHeartbeat (the coordinator checks and the group type are the caller's).
        ``conversion``: the records of a classic group just converted into this group (online upgrade);
        written before the heartbeat's own, or dropped with the group when the heartbeat is refused."""
        records: Writes = list(conversion or ())
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req, now_ms)
            return self._heartbeat(req, topics, now_ms, records)
        except Refused as refused:
            if conversion:
                # Kafka writes nothing of a refused heartbeat: the classic group stays as it was.
                self.groups.pop(req.group_id, None)
                records.clear()
            return HeartbeatResult(refused.error_code, refused.message)
        finally:
            if records:
                self._writes.append((self.partition_for(req.group_id), records))

    def _validate(self, req: HeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid: INVALID_REQUEST with its messages."""

        def invalid(message: str) -> Refused:
            return Refused(ErrorCode.INVALID_REQUEST, message)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        epoch = req.member_epoch
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id:
                raise invalid("MemberId can't be empty.")
        elif epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not req.member_id:
                raise invalid("MemberId can't be empty.")
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise Refused(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.assignors)}.",
            )
        if req.subscribed_topic_regex:
            why = regex_refusal(req.subscribed_topic_regex)
            if why is not None:
                raise Refused(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular expression: {why}.",
                )

    def _heartbeat(
        self, req: HeartbeatRequest, topics: Topics, now_ms: int, records: Writes
    ) -> HeartbeatResult:
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self.groups.get(req.group_id)
        if group is None:
            if not joining:
                # The member's group is gone (expired, deleted, or lost): it must rejoin from epoch 0.
                raise Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Group {req.group_id} has no member {req.member_id}."
                )
            group = ConsumerGroup(req.group_id, self.partition_for(req.group_id))
            self.groups[req.group_id] = group
        try:
            return self._heartbeat_in(group, req, topics, now_ms, records)
        finally:
            if not group.members and group.group_epoch == 0:
                # A first heartbeat that was refused leaves no group behind.
                self.groups.pop(group.group_id, None)

    def _heartbeat_in(
        self, group: ConsumerGroup, req: HeartbeatRequest, topics: Topics, now_ms: int, records: Writes
    ) -> HeartbeatResult:
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        member_id = req.member_id or kafka_uuid_string(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        is_new = False
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is not None and joining and member.previous_member_epoch != 0:
                # A member rejoining under its own id (KIP-1082 ids are the client's; it rejoins with
                # epoch 0 after being fenced, holding nothing): its old incarnation goes first. (Still at
                # its first epoch, epoch 0 is its previous one: a join whose answer was lost, answered
                # again below as Kafka's epoch check allows.)
                self._remove_member(group, member, records)
                member = None
            if member is None:
                if not joining:
                    raise Refused(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Member {member_id} is not a member of group {group.group_id}.",
                    )
                member = ConsumerMember(member_id)
                is_new = True
            else:
                self._check_epoch(member, req)
        else:
            existing_id = group.static_members.get(req.instance_id)
            existing = group.members.get(existing_id) if existing_id is not None else None
            if joining:
                if (
                    existing is not None
                    and existing.member_id == member_id
                    and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                ):
                    # The same instance rejoining under its own id after being fenced.
                    self._remove_member(group, existing, records)
                    existing = None
                if existing is None:
                    member = ConsumerMember(member_id)
                    is_new = True
                else:
                    # A classic static member never sends the -2 epoch: its instance is taken over at
                    # once (Kafka's getOrMaybeSubscribeStaticConsumerGroupMember, a rolling upgrade).
                    if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and existing.classic is None:
                        raise Refused(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {member_id} with instance id {req.instance_id} cannot join the "
                            f"group because the instance id is owned by {existing.member_id} member.",
                        )
                    # KIP-848 static membership: the new instance takes the old one's place and its
                    # partitions without a rebalance (epoch 0, so it reconciles to the same target).
                    member = self.replace_static(group, existing, member_id, records)
            else:
                if existing is None:
                    raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
                if existing.member_id != member_id:
                    raise Refused(
                        ErrorCode.FENCED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {req.instance_id} was fenced by member "
                        f"{existing.member_id}.",
                    )
                self._check_epoch(existing, req)
                member = existing
        if is_new:
            self.check_capacity(group)
        # 1. The member's subscription and metadata.
        old_metadata = None if is_new else member.metadata_value()
        old_subscription = (member.subscribed_topic_names, member.subscribed_topic_regex)
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            member.server_assignor = req.server_assignor
        if req.subscribed_topic_names is not None:
            member.subscribed_topic_names = tuple(req.subscribed_topic_names)
        if req.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = req.subscribed_topic_regex or None
        member.client_id = req.client_id
        member.client_host = req.client_host
        # A classic member upgraded in place (same id) speaks the consumer protocol from now on.
        member.classic = None
        before = dict(member.assigned)
        self.update_member(
            group,
            member,
            is_new,
            old_metadata,
            old_subscription,
            topics,
            req.topic_partitions,
            now_ms,
            records,
        )
        full_request = joining or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        return HeartbeatResult(
            ErrorCode.NONE,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=dict(member.assigned) if full_request or member.assigned != before else None,
        )

    def check_capacity(self, group: ConsumerGroup) -> None:
        if len(group.members) >= self.config.max_size:
            raise Refused(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )

    def update_member(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        is_new: bool,
        old_metadata: rec.MemberMetadataValue | None,
        old_subscription: tuple[tuple[str, ...], str | None],
        topics: Topics,
        owned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None,
        now_ms: int,
        records: Writes,
    ) -> None:
        """Kafka's consumerGroupHeartbeat steps 1-4 after the member's fields were updated (also run for
        a classic member's JoinGroup, classicGroupJoinToConsumerGroup): its record, the subscription
        metadata and group epoch, a new target assignment, and the member reconciled towards it."""
        if is_new:
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        bump = is_new or (member.subscribed_topic_names, member.subscribed_topic_regex) != old_subscription
        if member.metadata_value() != old_metadata:
            records.append(self.member_record(group, member))
        # 2. Metadata: the partitions of what the group subscribes to (KIP-848 rebalances on new
        # partitions and on new topics matching a regex, found here at the next heartbeat).
        metadata = self.subscription_metadata(group, topics)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            records.append(
                (
                    rec.encode_key(rec.ConsumerGroupKey(rec.PARTITION_METADATA_KEY, group.group_id)),
                    rec.encode_partition_metadata_value(metadata),
                )
            )
            bump = True
        if bump:
            self._bump_group_epoch(group, records)
        # 3. A new target assignment when the group epoch moved past it.
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, records)
        # 4. Reconcile this member towards its target.
        self._reconcile(group, member, owned, now_ms, records)
        self.touch(group, member, now_ms)

    def touch(self, group: ConsumerGroup, member: ConsumerMember, now_ms: int) -> None:
        """A new session for the member: the group's session timeout (its group config, else the
        broker's); a classic member's is its JoinGroup session timeout."""
        timeout_ms = (
            self.session_timeout_ms(group.group_id)
            if member.classic is None
            else member.classic.session_timeout_ms
        )
        member.session_deadline_ms = now_ms + timeout_ms

    @staticmethod
    def _check_epoch(member: ConsumerMember, req: HeartbeatRequest) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member ahead of us, or behind us other
        than by one lost response (its previous epoch, owning a subset of what it has now), is fenced."""
        received = req.member_epoch
        if received > member.member_epoch:
            raise Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({received}) than the one known by "
                f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions "
                "and rejoin.",
            )
        if received < member.member_epoch:
            owned = {(t, p) for t, ps in req.topic_partitions or () for p in ps}
            subset = req.topic_partitions is not None and owned <= _flat(member.assigned)
            if received != member.previous_member_epoch or not subset:
                raise Refused(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The consumer group member has a smaller member epoch ({received}) than the one known "
                    f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                    "partitions and rejoin.",
                )

    def subscription_metadata(self, group: ConsumerGroup, topics: Topics) -> dict[str, tuple[uuid.UUID, int]]:
        names: set[str] = set()
        regexes: set[str] = set()
        for m in group.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                regexes.add(m.subscribed_topic_regex)
        for regex in regexes:
            names.update(n for n in topics if _matches(regex, n))
        return {n: (topics[n].topic_id, topics[n].num_partitions) for n in sorted(names) if n in topics}

    def _member_topics(self, group: ConsumerGroup, member: ConsumerMember) -> set[uuid.UUID]:
        metadata = group.subscription_metadata
        names = {n for n in member.subscribed_topic_names if n in metadata}
        if member.subscribed_topic_regex:
            names.update(n for n in metadata if _matches(member.subscribed_topic_regex, n))
        return {metadata[n][0] for n in names}

    def _bump_group_epoch(self, group: ConsumerGroup, records: Writes) -> None:
        group.group_epoch += 1
        records.append(
            (
                rec.encode_key(rec.ConsumerGroupKey(rec.METADATA_KEY, group.group_id)),
                rec.encode_epoch_value(group.group_epoch),
            )
        )

    def _assign(self, group: ConsumerGroup, records: Writes) -> None:
        counts = {topic_id: n for topic_id, n in group.subscription_metadata.values()}
        subscriptions = {m.member_id: self._member_topics(group, m) for m in group.members.values()}
        target = assign(
            group.preferred_assignor(self.config.assignors[0]), subscriptions, counts, group.target
        )
        for member_id, partitions in target.items():
            if group.target.get(member_id, {}) != partitions or member_id not in group.target:
                records.append(
                    (
                        rec.encode_key(
                            rec.ConsumerGroupKey(rec.TARGET_ASSIGNMENT_MEMBER_KEY, group.group_id, member_id)
                        ),
                        rec.encode_target_member_value(partitions),
                    )
                )
        group.target = {m: dict(ps) for m, ps in target.items()}
        group.assignment_epoch = group.group_epoch
        records.append(
            (
                rec.encode_key(rec.ConsumerGroupKey(rec.TARGET_ASSIGNMENT_METADATA_KEY, group.group_id)),
                rec.encode_epoch_value(group.assignment_epoch),
            )
        )

    # --- reconciliation (Kafka's CurrentAssignmentBuilder) -----------------------------------------------

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        owned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None,
        now_ms: int,
        records: Writes,
    ) -> None:
        target_epoch = group.assignment_epoch
        if member.state == MemberState.STABLE and member.member_epoch == target_epoch:
            return
        owned_set = None if owned is None else {(t, p) for t, ps in owned for p in ps}

        def still_owns(pairs: set[tuple[uuid.UUID, int]]) -> bool:
            # Without its owned partitions in the request, a member is assumed to still hold them.
            return owned_set is None or bool(owned_set & pairs)

        if member.state == MemberState.UNREVOKED_PARTITIONS:
            if still_owns(_flat(member.pending_revocation)):
                return
            next_epoch = member.member_epoch + 1
        else:
            next_epoch = member.member_epoch
        target = _flat(group.target.get(member.member_id, {}))
        current = _flat(member.assigned)
        keep = current & target
        revoke = current - target
        wanted = target - current
        # A partition another member still owns (assigned or revoking) waits until it is released.
        own = current | _flat(member.pending_revocation)
        unreleased = {tp for tp in wanted if tp in group.partition_epochs and tp not in own}
        gain = wanted - unreleased
        previous = (
            member.member_epoch,
            member.previous_member_epoch,
            member.state,
            _flat(member.assigned),
            _flat(member.pending_revocation),
        )
        if revoke and still_owns(revoke):
            # Revoke first, keep the epoch: the partitions move on only once this member lets go.
            member.state = MemberState.UNREVOKED_PARTITIONS
            if next_epoch != member.member_epoch:
                member.previous_member_epoch = member.member_epoch
                member.member_epoch = next_epoch
            new_assigned, new_pending = keep, revoke
        else:
            member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = target_epoch
            new_assigned, new_pending = keep | gain, set()
        self.set_assignment(group, member, new_assigned, new_pending)
        now = (member.member_epoch, member.previous_member_epoch, member.state, new_assigned, new_pending)
        if now != previous:
            records.append(self.current_assignment_record(group, member))
            if member.state == MemberState.UNREVOKED_PARTITIONS:
                # KIP-848: a member gets its rebalance timeout to revoke, else it is fenced.
                member.rebalance_deadline_ms = now_ms + max(member.rebalance_timeout_ms, 0)
            else:
                member.rebalance_deadline_ms = None

    @staticmethod
    def set_assignment(
        group: ConsumerGroup,
        member: ConsumerMember,
        assigned: set[tuple[uuid.UUID, int]],
        pending: set[tuple[uuid.UUID, int]],
    ) -> None:
        for tp in _flat(member.assigned) | _flat(member.pending_revocation):
            group.partition_epochs.pop(tp, None)
        member.assigned = _group(assigned)
        member.pending_revocation = _group(pending)
        for tp in assigned | pending:
            group.partition_epochs[tp] = member.member_epoch

    # --- leaving and fencing ------------------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest, now_ms: int) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {req.group_id} has no member {req.member_id}.")
        member = group.members.get(req.member_id)
        if member is None:
            raise Refused(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {req.member_id} is not a member of group {req.group_id}.",
            )
        if req.instance_id is not None and member.instance_id != req.instance_id:
            raise Refused(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Instance id {req.instance_id} does not own member {member.member_id}.",
            )
        records: Writes = []
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A static member leaving temporarily (KIP-848): it keeps its partitions and the group does
            # not rebalance until its session expires or its next instance takes over.
            member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            member.rebalance_deadline_ms = None
            records.append(self.current_assignment_record(group, member))
        else:
            self.fence(group, member, records, now_ms)
        self._writes.append((group.partition, records))
        return HeartbeatResult(
            ErrorCode.NONE,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            heartbeat_interval_ms=0,
        )

    def fence(self, group: ConsumerGroup, member: ConsumerMember, records: Writes, now_ms: int) -> None:
        """Kafka's consumerGroupFenceMember: the group converts to a classic one when this was its last
        consumer-protocol member (and the policy allows it), else the member is removed."""
        if self.on_fence is None or not self.on_fence(group, member, records, now_ms):
            self._remove_member(group, member, records)

    def _remove_member(
        self, group: ConsumerGroup, member: ConsumerMember, records: Writes, *, bump: bool = True
    ) -> None:
        """Kafka's fencing: tombstones for the member's assignment, target and metadata, its partitions
        freed, and a new group epoch so the others are reassigned."""
        key = rec.ConsumerGroupKey
        gid, mid = group.group_id, member.member_id
        records.append((rec.encode_key(key(rec.CURRENT_MEMBER_ASSIGNMENT_KEY, gid, mid)), None))
        records.append((rec.encode_key(key(rec.TARGET_ASSIGNMENT_MEMBER_KEY, gid, mid)), None))
        records.append((rec.encode_key(key(rec.MEMBER_METADATA_KEY, gid, mid)), None))
        self.set_assignment(group, member, set(), set())
        del group.members[mid]
        group.target.pop(mid, None)
        if member.instance_id is not None and group.static_members.get(member.instance_id) == mid:
            del group.static_members[member.instance_id]
        if bump:
            self._bump_group_epoch(group, records)

    def remove_members(self, group: ConsumerGroup, members: list[ConsumerMember], records: Writes) -> None:
        """Several members leave at once (a classic LeaveGroup): one new group epoch for them all."""
        for member in members:
            self._remove_member(group, member, records, bump=False)
        if members:
            self._bump_group_epoch(group, records)

    def replace_static(
        self, group: ConsumerGroup, old: ConsumerMember, member_id: str, records: Writes
    ) -> ConsumerMember:
        key = rec.ConsumerGroupKey
        gid = group.group_id
        records.append((rec.encode_key(key(rec.CURRENT_MEMBER_ASSIGNMENT_KEY, gid, old.member_id)), None))
        records.append((rec.encode_key(key(rec.TARGET_ASSIGNMENT_MEMBER_KEY, gid, old.member_id)), None))
        records.append((rec.encode_key(key(rec.MEMBER_METADATA_KEY, gid, old.member_id)), None))
        new = ConsumerMember(
            member_id,
            instance_id=old.instance_id,
            rack_id=old.rack_id,
            client_id=old.client_id,
            client_host=old.client_host,
            subscribed_topic_names=old.subscribed_topic_names,
            subscribed_topic_regex=old.subscribed_topic_regex,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            server_assignor=old.server_assignor,
            member_epoch=0,
            previous_member_epoch=0,
            state=old.state,
            assigned=dict(old.assigned),
            pending_revocation=dict(old.pending_revocation),
        )
        del group.members[old.member_id]
        group.members[member_id] = new
        assert old.instance_id is not None
        group.static_members[old.instance_id] = member_id
        target = group.target.pop(old.member_id, None)
        if target is not None:
            group.target[member_id] = target
            records.append(
                (
                    rec.encode_key(key(rec.TARGET_ASSIGNMENT_MEMBER_KEY, gid, member_id)),
                    rec.encode_target_member_value(target),
                )
            )
        # The old instance's partitions stay owned (now by the new id) at epoch 0 until it reconciles.
        self.set_assignment(group, new, _flat(new.assigned), _flat(new.pending_revocation))
        records.append(self.member_record(group, new))
        records.append(self.current_assignment_record(group, new))
        return new

    # --- timers -----------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """Fence members whose session expired, who did not revoke within their rebalance timeout, or
        (classic members) who did not sync or rejoin in time."""
        for group in list(self.groups.values()):
            records: Writes = []
            for member in list(group.members.values()):
                if self.groups.get(group.group_id) is not group or member.member_id not in group.members:
                    break  # converted to a classic group by the previous fencing
                deadlines = (member.rebalance_deadline_ms, member.classic_deadline_ms)
                if now_ms >= member.session_deadline_ms or any(
                    d is not None and now_ms >= d for d in deadlines
                ):
                    self.fence(group, member, records, now_ms)
            if records:
                self._writes.append((group.partition, records))

    def next_deadline_ms(self) -> int | None:
        best: int | None = None
        for group in self.groups.values():
            for m in group.members.values():
                for c in (m.session_deadline_ms, m.rebalance_deadline_ms, m.classic_deadline_ms):
                    if c is not None and (best is None or c < best):
                        best = c
        return best

    # --- offsets (Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch) ----------------------

    def validate_offset_commit(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        *,
        transactional: bool = False,
    ) -> ErrorCode:
        group = self.groups[group_id]
        if member_epoch < 0 and not group.members:
            # The admin client, or a consumer using assign(): allowed while the group is empty.
            return ErrorCode.NONE
        if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            # TxnOffsetCommit v0-2 names no member: it is validated only when it does (Kafka's
            # ConsumerGroup.validateOffsetCommit).
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            # TxnOffsetCommit, and a classic member's commit, answer a stale epoch as the classic
            # generation error (Kafka's ConsumerGroup.validateOffsetCommit and
            # OffsetMetadataManager.validateTransactionalOffsetCommit).
            classic = transactional or member.classic is not None
            return ErrorCode.ILLEGAL_GENERATION if classic else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_offset_fetch(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None or member_epoch == -1:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    # --- describe, delete ------------------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription:
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(ErrorCode.GROUP_ID_NOT_FOUND, group_id, f"Group {group_id} not found.")
        members = tuple(
            MemberDescription(
                m.member_id,
                m.instance_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                m.subscribed_topic_names,
                m.subscribed_topic_regex,
                dict(m.assigned),
                dict(group.target.get(m.member_id, {})),
                m.state,
            )
            for m in group.members.values()
        )
        return GroupDescription(
            ErrorCode.NONE,
            group_id,
            None,
            group.state().value,
            group.group_epoch,
            group.assignment_epoch,
            group.preferred_assignor(self.config.assignors[0]),
            members,
        )

    def delete_records(self, group_id: str) -> Writes:
        """Tombstones deleting an empty group (DeleteGroups, or a classic JoinGroup taking the id over);
        the group is gone from memory at once."""
        group = self.groups.pop(group_id)
        key = rec.ConsumerGroupKey
        records: Writes = []
        for member_id in sorted(set(group.members) | set(group.target)):
            records.append(
                (rec.encode_key(key(rec.CURRENT_MEMBER_ASSIGNMENT_KEY, group_id, member_id)), None)
            )
            records.append((rec.encode_key(key(rec.TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id)), None))
            records.append((rec.encode_key(key(rec.MEMBER_METADATA_KEY, group_id, member_id)), None))
        records.append((rec.encode_key(key(rec.TARGET_ASSIGNMENT_METADATA_KEY, group_id)), None))
        records.append((rec.encode_key(key(rec.PARTITION_METADATA_KEY, group_id)), None))
        records.append((rec.encode_key(key(rec.METADATA_KEY, group_id)), None))
        return records

    def unload(self, partition: int) -> None:
        for group_id, group in list(self.groups.items()):
            if group.partition == partition:
                del self.groups[group_id]

    # --- records ----------------------------------------------------------------------------------------

    @staticmethod
    def member_record(group: ConsumerGroup, member: ConsumerMember) -> tuple[bytes, bytes]:
        key = rec.ConsumerGroupKey(rec.MEMBER_METADATA_KEY, group.group_id, member.member_id)
        return rec.encode_key(key), rec.encode_member_metadata_value(member.metadata_value())

    @staticmethod
    def current_assignment_record(group: ConsumerGroup, member: ConsumerMember) -> tuple[bytes, bytes]:
        key = rec.ConsumerGroupKey(rec.CURRENT_MEMBER_ASSIGNMENT_KEY, group.group_id, member.member_id)
        return rec.encode_key(key), rec.encode_current_assignment_value(member.assignment_value())

    def replay(self, partition: int, key: rec.ConsumerGroupKey, value: bytes | None, now_ms: int) -> None:
        """Apply one consumer group record read from ``__consumer_offsets`` (the load path)."""
        gid = key.group_id
        group = self.groups.get(gid)
        if value is None:
            if group is None:
                return
            if key.version == rec.METADATA_KEY:
                del self.groups[gid]
            elif key.version == rec.MEMBER_METADATA_KEY:
                member = group.members.pop(key.member_id, None)
                if member is not None and member.instance_id is not None:
                    group.static_members.pop(member.instance_id, None)
            elif key.version == rec.TARGET_ASSIGNMENT_MEMBER_KEY:
                group.target.pop(key.member_id, None)
            elif key.version == rec.CURRENT_MEMBER_ASSIGNMENT_KEY:
                member = group.members.get(key.member_id)
                if member is not None:
                    self.set_assignment(group, member, set(), set())
            return
        if group is None:
            group = self.groups[gid] = ConsumerGroup(gid, partition)
        if key.version == rec.METADATA_KEY:
            group.group_epoch = rec.decode_epoch_value(value)
        elif key.version == rec.PARTITION_METADATA_KEY:
            group.subscription_metadata = rec.decode_partition_metadata_value(value)
        elif key.version == rec.TARGET_ASSIGNMENT_METADATA_KEY:
            group.assignment_epoch = rec.decode_epoch_value(value)
        elif key.version == rec.TARGET_ASSIGNMENT_MEMBER_KEY:
            group.target[key.member_id] = rec.decode_target_member_value(value)
        else:
            member = group.members.get(key.member_id)
            if member is None:
                member = group.members[key.member_id] = ConsumerMember(key.member_id)
            if key.version == rec.MEMBER_METADATA_KEY:
                v = rec.decode_member_metadata_value(value)
                member.instance_id, member.rack_id = v.instance_id, v.rack_id
                member.client_id, member.client_host = v.client_id, v.client_host
                member.subscribed_topic_names = v.subscribed_topic_names
                member.subscribed_topic_regex = v.subscribed_topic_regex
                member.rebalance_timeout_ms = v.rebalance_timeout_ms
                member.server_assignor = v.server_assignor
                member.classic = v.classic_member_metadata
                if v.instance_id is not None:
                    group.static_members[v.instance_id] = member.member_id
            elif key.version == rec.CURRENT_MEMBER_ASSIGNMENT_KEY:
                a = rec.decode_current_assignment_value(value)
                member.member_epoch, member.previous_member_epoch = a.member_epoch, a.previous_member_epoch
                try:
                    member.state = MemberState(a.state)
                except ValueError:
                    member.state = MemberState.UNKNOWN
                self.set_assignment(
                    group, member, _flat(a.assigned_partitions), _flat(a.partitions_pending_revocation)
                )
            else:
                raise RecordFormatError(f"unknown consumer group key version {key.version}")
            # A loaded member gets a whole session to heartbeat to its new coordinator (as Kafka does).
            self.touch(group, member, now_ms)


__all__ = [
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "ConsumerGroup",
    "MigrationPolicy",
    "Refused",
    "ConsumerGroupConfig",
    "ConsumerGroupCoordinator",
    "ConsumerGroupState",
    "ConsumerMember",
    "GroupDescription",
    "HeartbeatRequest",
    "HeartbeatResult",
    "MemberDescription",
    "MemberState",
    "TopicInfo",
    "Topics",
    "kafka_uuid_string",
]
