"""Consumer group (KIP-848) records of ``__consumer_offsets``, in Kafka's layouts.

Kafka's group-coordinator/src/main/resources/common/message/ConsumerGroup*Key/Value.json: every key is
an int16 version (which names the record type) followed by non-flexible fields; every value is an
int16 version (0) followed by a *flexible* body (compact strings and arrays, tagged fields):

====  ==========================================  ==========================================================
key   record                                      value v0
====  ==========================================  ==========================================================
3     ConsumerGroupMetadata (group)               Epoch int32
4     ConsumerGroupPartitionMetadata (group)      Topics [TopicId uuid, TopicName, NumPartitions int32,
                                                  PartitionMetadata [Partition int32, Racks [string]]]
5     ConsumerGroupMemberMetadata (group, member) InstanceId?, RackId?, ClientId, ClientHost,
                                                  SubscribedTopicNames [string], SubscribedTopicRegex?,
                                                  RebalanceTimeoutMs int32, ServerAssignor?,
                                                  tag 0: ClassicMemberMetadata? [SessionTimeoutMs int32,
                                                  SupportedProtocols [Name, Metadata bytes]]
6     ConsumerGroupTargetAssignmentMetadata       AssignmentEpoch int32
7     ConsumerGroupTargetAssignmentMember         TopicPartitions [TopicId uuid, Partitions [int32]]
8     ConsumerGroupCurrentMemberAssignment        MemberEpoch, PreviousMemberEpoch int32, State int8,
                                                  AssignedPartitions, PartitionsPendingRevocation
====  ==========================================  ==========================================================

A null value is a tombstone. Keys 3-8 are told apart from the classic ones (0-2) by their version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pykraft.coordinator.offsets_records import RecordFormatError, RecordReader
from pykraft.protocol import wire

METADATA_KEY = 3
PARTITION_METADATA_KEY = 4
MEMBER_METADATA_KEY = 5
TARGET_ASSIGNMENT_METADATA_KEY = 6
TARGET_ASSIGNMENT_MEMBER_KEY = 7
CURRENT_MEMBER_ASSIGNMENT_KEY = 8
CONSUMER_GROUP_KEY_VERSIONS = frozenset(range(METADATA_KEY, CURRENT_MEMBER_ASSIGNMENT_KEY + 1))
# Share groups (KIP-932), coordinator/share_group_records.py: keys 9-15 in the same layout.
SHARE_PARTITION_METADATA_KEY = 9
SHARE_MEMBER_METADATA_KEY = 10
SHARE_METADATA_KEY = 11
SHARE_TARGET_ASSIGNMENT_METADATA_KEY = 12
SHARE_TARGET_ASSIGNMENT_MEMBER_KEY = 13
SHARE_CURRENT_MEMBER_ASSIGNMENT_KEY = 14
SHARE_STATE_PARTITION_METADATA_KEY = 15
SHARE_GROUP_KEY_VERSIONS = frozenset(
    range(SHARE_PARTITION_METADATA_KEY, SHARE_STATE_PARTITION_METADATA_KEY + 1)
)
# Keys with a member id after the group id.
_MEMBER_KEYS = (
    MEMBER_METADATA_KEY,
    TARGET_ASSIGNMENT_MEMBER_KEY,
    CURRENT_MEMBER_ASSIGNMENT_KEY,
    SHARE_MEMBER_METADATA_KEY,
    SHARE_TARGET_ASSIGNMENT_MEMBER_KEY,
    SHARE_CURRENT_MEMBER_ASSIGNMENT_KEY,
)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# topic id -> partitions
TopicPartitions = Mapping[uuid.UUID, Iterable[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """A consumer group record's key: ``version`` names the record; ``member_id`` is "" for the
    group-level records (3, 4, 6)."""

    version: int
    group_id: str
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A member speaking the classic protocol inside a consumer group (KIP-848 online migration): its
    session timeout and its JoinGroup protocols (name, ConsumerProtocolSubscription)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: dict[uuid.UUID, frozenset[int]]
    partitions_pending_revocation: dict[uuid.UUID, frozenset[int]]


# --- keys -----------------------------------------------------------------------------------------------


def encode_key(key: ConsumerGroupKey) -> bytes:
    out = bytearray(_I16.pack(key.version))
    wire.put_string(out, key.group_id, False)
    if key.version in _MEMBER_KEYS:
        wire.put_string(out, key.member_id, False)
    return bytes(out)


def key_version(data: bytes) -> int:
    """The int16 version a ``__consumer_offsets`` key starts with (which record it is)."""
    if len(data) < 2:
        raise RecordFormatError(f"a {len(data)}-byte __consumer_offsets key")
    version: int = _I16.unpack_from(data, 0)[0]
    return version


def decode_key(data: bytes) -> ConsumerGroupKey:
    """A consumer (3-8) or share (9-15) group record's key."""
    version = key_version(data)
    if version not in CONSUMER_GROUP_KEY_VERSIONS and version not in SHARE_GROUP_KEY_VERSIONS:
        raise RecordFormatError(f"key version {version} is not a consumer or share group record")
    r = FlexibleReader(data, 2)
    group_id = r.classic_string()
    member_id = r.classic_string() if version in _MEMBER_KEYS else ""
    return ConsumerGroupKey(version, group_id, member_id)


# --- flexible values ------------------------------------------------------------------------------------


class FlexibleReader(RecordReader):
    """Adds the flexible versions' fields (varints, compact strings, uuids, tagged fields)."""

    __slots__ = ()

    def uvarint(self) -> int:
        try:
            value, self.pos = wire.read_uvarint(self.buf, self.pos)
        except wire.WireFormatError as exc:
            raise RecordFormatError(str(exc)) from None
        return value

    def classic_string(self) -> str:
        return self.string()

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._text(n - 1)

    def compact_string(self) -> str:
        value = self.compact_nullable_string()
        if value is None:
            raise RecordFormatError("null where a string is required")
        return value

    def count(self) -> int:
        n = self.uvarint() - 1
        if n < 0 or n > len(self.buf):
            raise RecordFormatError(f"array count {n} in a {len(self.buf)}-byte record")
        return n

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def tagged_fields(self) -> None:
        try:
            self.pos = wire.skip_tagged_fields(self.buf, self.pos)
        except wire.WireFormatError as exc:
            raise RecordFormatError(str(exc)) from None

    def tagged_field_spans(self) -> dict[int, tuple[int, int]]:
        """The tagged fields at the reader's position: tag -> (start, end) of each one's bytes."""
        out: dict[int, tuple[int, int]] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            out[tag] = (self.pos, self.pos + size)
            self._take(size)
        return out

    def compact_bytes(self) -> bytes:
        n = self.uvarint() - 1
        if n < 0:
            raise RecordFormatError("null where bytes are required")
        return self._take(n)

    def value_version(self, name: str) -> None:
        version = self.i16()
        if version != 0:
            raise RecordFormatError(f"unknown {name} version {version}")


def put_no_tags(out: bytearray) -> None:
    wire.put_uvarint(out, 0)  # no tagged fields


def value_header(version: int = 0) -> bytearray:
    return bytearray(_I16.pack(version))


def put_topic_partitions(out: bytearray, partitions: TopicPartitions) -> None:
    items = sorted(((t, sorted(ps)) for t, ps in partitions.items()), key=lambda item: str(item[0]))
    wire.put_array_count(out, len(items), True)
    for topic_id, parts in items:
        out += topic_id.bytes
        wire.put_array_count(out, len(parts), True)
        for p in parts:
            out += _I32.pack(p)
        put_no_tags(out)


def read_topic_partitions(r: FlexibleReader) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(r.count()):
        topic_id = r.uuid()
        out[topic_id] = frozenset(r.i32() for _ in range(r.count()))
        r.tagged_fields()
    return out


def encode_epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue: one int32."""
    out = value_header()
    out += _I32.pack(epoch)
    put_no_tags(out)
    return bytes(out)


def decode_epoch_value(data: bytes) -> int:
    r = FlexibleReader(data)
    r.value_version("epoch value")
    epoch = r.i32()
    r.tagged_fields()
    return epoch


def encode_partition_metadata_value(topics: Mapping[str, tuple[uuid.UUID, int]]) -> bytes:
    """ConsumerGroupPartitionMetadataValue: topic name -> (topic id, partition count); no racks."""
    out = value_header()
    wire.put_array_count(out, len(topics), True)
    for name in sorted(topics):
        topic_id, count = topics[name]
        out += topic_id.bytes
        wire.put_string(out, name, True)
        out += _I32.pack(count)
        wire.put_array_count(out, 0, True)  # PartitionMetadata: deprecated since 4.0, left empty
        put_no_tags(out)
    put_no_tags(out)
    return bytes(out)


def decode_partition_metadata_value(data: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    r = FlexibleReader(data)
    r.value_version("ConsumerGroupPartitionMetadataValue")
    out: dict[str, tuple[uuid.UUID, int]] = {}
    for _ in range(r.count()):
        topic_id = r.uuid()
        name = r.compact_string()
        count = r.i32()
        for _ in range(r.count()):
            r.i32()
            for _ in range(r.count()):
                r.compact_string()
            r.tagged_fields()
        r.tagged_fields()
        out[name] = (topic_id, count)
    r.tagged_fields()
    return out


def encode_member_metadata_value(value: MemberMetadataValue) -> bytes:
    out = value_header()
    wire.put_nullable_string(out, value.instance_id, True)
    wire.put_nullable_string(out, value.rack_id, True)
    wire.put_string(out, value.client_id, True)
    wire.put_string(out, value.client_host, True)
    wire.put_array_count(out, len(value.subscribed_topic_names), True)
    for name in value.subscribed_topic_names:
        wire.put_string(out, name, True)
    wire.put_nullable_string(out, value.subscribed_topic_regex, True)
    out += _I32.pack(value.rebalance_timeout_ms)
    wire.put_nullable_string(out, value.server_assignor, True)
    classic = value.classic_member_metadata
    if classic is None:
        put_no_tags(out)  # ClassicMemberMetadata (tag 0) is absent: the member speaks the consumer protocol
        return bytes(out)
    # A nullable struct in a tagged field: a presence varint (1) before the struct (Kafka's generated
    # writers; 0 would be null).
    body = bytearray(b"\x01")
    body += _I32.pack(classic.session_timeout_ms)
    wire.put_array_count(body, len(classic.supported_protocols), True)
    for name, metadata in classic.supported_protocols:
        wire.put_string(body, name, True)
        wire.put_uvarint(body, len(metadata) + 1)
        body += metadata
        put_no_tags(body)
    put_no_tags(body)
    wire.put_uvarint(out, 1)  # one tagged field: tag 0, its size, its bytes
    wire.put_uvarint(out, 0)
    wire.put_uvarint(out, len(body))
    return bytes(out + body)


def decode_member_metadata_value(data: bytes) -> MemberMetadataValue:
    r = FlexibleReader(data)
    r.value_version("ConsumerGroupMemberMetadataValue")
    instance_id = r.compact_nullable_string()
    rack_id = r.compact_nullable_string()
    client_id = r.compact_string()
    client_host = r.compact_string()
    names = tuple(r.compact_string() for _ in range(r.count()))
    regex = r.compact_nullable_string()
    rebalance_timeout_ms = r.i32()
    assignor = r.compact_nullable_string()
    classic = None
    span = r.tagged_field_spans().get(0)
    if span is not None:
        c = FlexibleReader(data[: span[1]], span[0])
        if c.uvarint() == 0:
            return MemberMetadataValue(
                instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout_ms, assignor
            )
        session_timeout_ms = c.i32()
        protocols = []
        for _ in range(c.count()):
            protocols.append((c.compact_string(), c.compact_bytes()))
            c.tagged_fields()
        c.tagged_fields()
        classic = ClassicMemberMetadata(session_timeout_ms, tuple(protocols))
    return MemberMetadataValue(
        instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout_ms, assignor, classic
    )


def encode_target_member_value(partitions: TopicPartitions) -> bytes:
    out = value_header()
    put_topic_partitions(out, partitions)
    put_no_tags(out)
    return bytes(out)


def decode_target_member_value(data: bytes) -> dict[uuid.UUID, frozenset[int]]:
    r = FlexibleReader(data)
    r.value_version("ConsumerGroupTargetAssignmentMemberValue")
    out = read_topic_partitions(r)
    r.tagged_fields()
    return out


def encode_current_assignment_value(value: CurrentAssignmentValue) -> bytes:
    out = value_header()
    out += _I32.pack(value.member_epoch)
    out += _I32.pack(value.previous_member_epoch)
    out += _I8.pack(value.state)
    put_topic_partitions(out, value.assigned_partitions)
    put_topic_partitions(out, value.partitions_pending_revocation)
    put_no_tags(out)
    return bytes(out)


def decode_current_assignment_value(data: bytes) -> CurrentAssignmentValue:
    r = FlexibleReader(data)
    r.value_version("ConsumerGroupCurrentMemberAssignmentValue")
    member_epoch = r.i32()
    previous = r.i32()
    state = r.i8()
    assigned = read_topic_partitions(r)
    pending = read_topic_partitions(r)
    r.tagged_fields()
    return CurrentAssignmentValue(member_epoch, previous, state, assigned, pending)


__all__ = [
    "CONSUMER_GROUP_KEY_VERSIONS",
    "CURRENT_MEMBER_ASSIGNMENT_KEY",
    "ClassicMemberMetadata",
    "MEMBER_METADATA_KEY",
    "METADATA_KEY",
    "PARTITION_METADATA_KEY",
    "TARGET_ASSIGNMENT_MEMBER_KEY",
    "TARGET_ASSIGNMENT_METADATA_KEY",
    "ConsumerGroupKey",
    "CurrentAssignmentValue",
    "MemberMetadataValue",
    "decode_current_assignment_value",
    "decode_epoch_value",
    "decode_key",
    "decode_member_metadata_value",
    "decode_partition_metadata_value",
    "decode_target_member_value",
    "encode_current_assignment_value",
    "encode_epoch_value",
    "encode_key",
    "encode_member_metadata_value",
    "encode_partition_metadata_value",
    "encode_target_member_value",
    "key_version",
]
