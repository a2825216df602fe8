"""MetadataResponse's topic entry, hand-encoded (issue 29: a broker's first full Metadata after a start
encodes every partition it knows; through kafka-python's generic containers that cost ~150 us a
partition, 9 of the 33 s a 60,000-partition node took to serve after a restart).

The layout, versions 0-12 (MetadataResponse.json): ErrorCode int16; Name string (compact from v9,
nullable from v12); TopicId uuid (v10+); IsInternal bool (v1+); Partitions array of {ErrorCode int16,
PartitionIndex int32, LeaderId int32, LeaderEpoch int32 (v7+), ReplicaNodes []int32, IsrNodes []int32,
OfflineReplicas []int32 (v5+), tags (v9+)}; TopicAuthorizedOperations int32 (v8+); tags (v9+). Tagged
fields are always written empty. ``tests/protocol/test_metadata_topic.py`` checks every version against
kafka-python's encoder.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pykraft.protocol.wire import EMPTY_TAGGED_FIELDS, INT16, INT32, put_array_count, put_nullable_string

METADATA_FIRST_FLEXIBLE_VERSION = 9
_PARTITION_HEAD = struct.Struct(">hii")  # error_code, partition_index, leader_id
_INT32_BY_COUNT: dict[int, struct.Struct] = {}


@dataclass(frozen=True, slots=True)
class MetadataPartition:
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: Sequence[int]
    isr_nodes: Sequence[int]
    offline_replicas: Sequence[int] = ()


def _put_int32_array(out: bytearray, values: Sequence[int], flexible: bool) -> None:
    count = len(values)
    put_array_count(out, count, flexible)
    if count:
        packer = _INT32_BY_COUNT.get(count)
        if packer is None:
            packer = _INT32_BY_COUNT[count] = struct.Struct(f">{count}i")
        out += packer.pack(*values)


def encode_metadata_topic(
    version: int,
    *,
    error_code: int,
    name: str | None,
    topic_id: uuid.UUID,
    is_internal: bool,
    partitions: Iterable[MetadataPartition],
    authorized_operations: int,
) -> bytes:
    """One MetadataResponseTopic at ``version``, as it sits inside the response's topics array."""
    flexible = version >= METADATA_FIRST_FLEXIBLE_VERSION
    out = bytearray(INT16.pack(error_code))
    put_nullable_string(out, name, flexible)
    if version >= 10:
        out += topic_id.bytes
    if version >= 1:
        out.append(1 if is_internal else 0)
    entries = list(partitions)
    put_array_count(out, len(entries), flexible)
    for p in entries:
        out += _PARTITION_HEAD.pack(p.error_code, p.partition_index, p.leader_id)
        if version >= 7:
            out += INT32.pack(p.leader_epoch)
        _put_int32_array(out, p.replica_nodes, flexible)
        _put_int32_array(out, p.isr_nodes, flexible)
        if version >= 5:
            _put_int32_array(out, p.offline_replicas, flexible)
        if flexible:
            out += EMPTY_TAGGED_FIELDS
    if version >= 8:
        out += INT32.pack(authorized_operations)
    if flexible:
        out += EMPTY_TAGGED_FIELDS
    return bytes(out)
