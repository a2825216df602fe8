"""Share group (KIP-932) records of ``__consumer_offsets``, in Kafka's layouts
(group-coordinator/src/main/resources/common/message/ShareGroup*Key/Value.json). Keys as the consumer
group's (coordinator/consumer_group_records.py): an int16 version naming the record, the group id, and
the member id for member records. Values: an int16 version (0), then a flexible body:

====  ==========================================  ==========================================================
key   record                                      value v0
====  ==========================================  ==========================================================
10    ShareGroupMemberMetadata (group, member)    RackId?, ClientId, ClientHost, SubscribedTopicNames [string]
11    ShareGroupMetadata (group)                  Epoch int32
14    ShareGroupCurrentMemberAssignment           MemberEpoch, PreviousMemberEpoch int32, State int8,
                                                  AssignedPartitions [TopicId uuid, Partitions [int32]]
15    ShareGroupStatePartitionMetadata (group)    InitializedTopics [TopicId, TopicName, Partitions [int32]],
                                                  DeletingTopics [TopicId, TopicName]
====  ==========================================  ==========================================================

pykraft writes these four (the target assignment, 12 and 13, is the simple assignor's over the members,
recomputed on load; 9, the subscribed topics' metadata, likewise). A null value is a tombstone.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from pykraft.coordinator.consumer_group_records import (
    FlexibleReader,
    TopicPartitions,
    put_no_tags,
    put_topic_partitions,
    read_topic_partitions,
    value_header,
)
from pykraft.protocol import wire

_I8 = struct.Struct(">b")
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ShareMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


def encode_member_metadata_value(value: ShareMemberMetadataValue) -> bytes:
    out = value_header()
    wire.put_nullable_string(out, value.rack_id, True)
    wire.put_string(out, value.client_id, True)
    wire.put_string(out, value.client_host, True)
    wire.put_array_count(out, len(value.subscribed_topic_names), True)
    for name in value.subscribed_topic_names:
        wire.put_string(out, name, True)
    put_no_tags(out)
    return bytes(out)


def decode_member_metadata_value(data: bytes) -> ShareMemberMetadataValue:
    r = FlexibleReader(data)
    r.value_version("ShareGroupMemberMetadataValue")
    rack_id = r.compact_nullable_string()
    client_id, client_host = r.compact_string(), r.compact_string()
    names = tuple(r.compact_string() for _ in range(r.count()))
    r.tagged_fields()
    return ShareMemberMetadataValue(rack_id, client_id, client_host, names)


def encode_current_assignment_value(
    member_epoch: int, previous_epoch: int, partitions: TopicPartitions
) -> bytes:
    out = value_header()
    out += _I32.pack(member_epoch) + _I32.pack(previous_epoch) + _I8.pack(0)  # State: STABLE
    put_topic_partitions(out, partitions)
    put_no_tags(out)
    return bytes(out)


def decode_current_assignment_value(data: bytes) -> tuple[int, dict[uuid.UUID, frozenset[int]]]:
    """(member epoch, assigned partitions)."""
    r = FlexibleReader(data)
    r.value_version("ShareGroupCurrentMemberAssignmentValue")
    member_epoch = r.i32()
    r.i32()  # PreviousMemberEpoch
    r.i8()  # State
    partitions = read_topic_partitions(r)
    r.tagged_fields()
    return member_epoch, partitions


def encode_state_partition_metadata_value(topics: Mapping[str, tuple[uuid.UUID, int]]) -> bytes:
    out = value_header()
    wire.put_array_count(out, len(topics), True)
    for name, (topic_id, count) in sorted(topics.items()):
        out += topic_id.bytes
        wire.put_string(out, name, True)
        wire.put_array_count(out, count, True)
        for p in range(count):
            out += _I32.pack(p)
        put_no_tags(out)
    wire.put_array_count(out, 0, True)  # DeletingTopics
    put_no_tags(out)
    return bytes(out)


def decode_state_partition_metadata_value(data: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    """InitializedTopics: name -> (topic id, partition count)."""
    r = FlexibleReader(data)
    r.value_version("ShareGroupStatePartitionMetadataValue")
    out: dict[str, tuple[uuid.UUID, int]] = {}
    for _ in range(r.count()):
        topic_id, name = r.uuid(), r.compact_string()
        partitions = [r.i32() for _ in range(r.count())]
        r.tagged_fields()
        out[name] = (topic_id, max(partitions, default=-1) + 1)
    for _ in range(r.count()):
        r.uuid()
        r.compact_string()
        r.tagged_fields()
    r.tagged_fields()
    return out
