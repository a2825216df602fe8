"""The share coordinator (KIP-932): the durable state of every share partition, kept in
``__share_group_state`` and served to partition leaders by ReadShareGroupState (84) and
WriteShareGroupState (85), DeleteShareGroupState (86), InitializeShareGroupState (83) and
ReadShareGroupStateSummary (87), as Kafka's ShareCoordinatorShard. Pure.

A share partition's state lives in the ``__share_group_state`` partition its key
``groupId:topicId:partition`` hashes to (Kafka's SharePartitionKey.asCoordinatorKey, the topic id as
Kafka prints it); that partition's leader is its share coordinator. Its state is the share-partition
start offset, the state and leader epochs, and the in-flight records as state batches (first, last,
AVAILABLE/ACKNOWLEDGED/ARCHIVED, delivery count).

Records, in Kafka's layouts (share-coordinator/src/main/resources/common/message): the key is an int16
version, 0 for ShareSnapshotKey, then GroupId (string), TopicId (uuid), Partition (int32); the value is
an int16 version (0) then a flexible ShareSnapshotValue: SnapshotEpoch (uint16), StateEpoch, LeaderEpoch
(int32), StartOffset (int64), StateBatches [FirstOffset, LastOffset int64, DeliveryState int8,
DeliveryCount int16]. A partition leader writes the whole state of a share partition each time (its
in-flight records are bounded by ``group.share.partition.max.record.locks``), so every write is a
snapshot; pykraft writes no ShareUpdate records (Kafka's deltas between snapshots) and a loaded
partition takes each key's last snapshot.

A write with an older state epoch than the state's is fenced (FENCED_STATE_EPOCH), and so is one with
the same state epoch from an older leader epoch (FENCED_LEADER_EPOCH): a deposed leader can never
overwrite its successor's state, nor a leader the state the group coordinator started over with a new
state epoch (AlterShareGroupOffsets).
The shell applies a write once the ISR has its record, and only then answers it. DeleteShareGroupState
(86) writes the key's tombstone: the share partition starts over from ``share.auto.offset.reset``.
InitializeShareGroupState (83), from the group coordinator (AlterShareGroupOffsets), writes a snapshot
starting the state over at a state epoch from a start offset with nothing in flight; an older state
epoch than the state's is fenced. ReadShareGroupStateSummary (87) answers the state epoch and start
offset only (DescribeShareGroupOffsets).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from pykraft.coordinator.consumer_group import kafka_uuid_string
from pykraft.coordinator.consumer_group_records import FlexibleReader
from pykraft.coordinator.offsets_records import RecordFormatError, partition_for
from pykraft.coordinator.share_partition import RecordState, StateBatch
from pykraft.core.errors import ErrorCode
from pykraft.protocol import wire

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY_VERSION = 0  # ShareSnapshotKey
UPDATE_KEY_VERSION = 1  # ShareUpdateKey (Kafka's deltas; read as nothing here)
# ReadShareGroupState's StartOffset of a share partition no state was written for.
UNINITIALIZED_START_OFFSET = -1

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_DURABLE_STATES = {int(s) for s in (RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)}


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        return f"{self.group_id}:{kafka_uuid_string(self.topic_id)}:{self.partition}"


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()


def state_partition_for(key: ShareStateKey, num_partitions: int) -> int:
    """The ``__share_group_state`` partition of ``key`` (Utils.abs(hashCode) % n, as for groups)."""
    return partition_for(key.coordinator_key(), num_partitions)


# --- records ------------------------------------------------------------------------------------------


def encode_key(key: ShareStateKey) -> bytes:
    out = bytearray(_I16.pack(SNAPSHOT_KEY_VERSION))
    wire.put_string(out, key.group_id, False)
    out += key.topic_id.bytes
    out += _I32.pack(key.partition)
    return bytes(out)


def decode_key(data: bytes) -> tuple[int, ShareStateKey]:
    """(key version, key) of a ``__share_group_state`` record."""
    r = FlexibleReader(data)
    version = r.i16()
    if version not in (SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION):
        raise RecordFormatError(f"unknown __share_group_state key version {version}")
    return version, ShareStateKey(r.string(), r.uuid(), r.i32())


def encode_snapshot(value: ShareSnapshot) -> bytes:
    out = bytearray(_I16.pack(0))
    out += _U16.pack(value.snapshot_epoch & 0xFFFF)
    out += _I32.pack(value.state_epoch)
    out += _I32.pack(value.leader_epoch)
    out += _I64.pack(value.start_offset)
    wire.put_array_count(out, len(value.state_batches), True)
    for b in value.state_batches:
        out += _I64.pack(b.first_offset) + _I64.pack(b.last_offset)
        out += _I8.pack(b.delivery_state) + _I16.pack(b.delivery_count)
        wire.put_uvarint(out, 0)
    wire.put_uvarint(out, 0)
    return bytes(out)


def decode_snapshot(data: bytes) -> ShareSnapshot:
    r = FlexibleReader(data)
    r.value_version("ShareSnapshotValue")
    snapshot_epoch = r.i16() & 0xFFFF
    state_epoch, leader_epoch, start_offset = r.i32(), r.i32(), r.i64()
    batches = []
    for _ in range(r.count()):
        first, last, state, count = r.i64(), r.i64(), r.i8(), r.i16()
        if state not in _DURABLE_STATES:
            raise RecordFormatError(f"delivery state {state} in a ShareSnapshotValue")
        batches.append(StateBatch(first, last, RecordState(state), count))
        r.tagged_fields()
    r.tagged_fields()
    return ShareSnapshot(snapshot_epoch, state_epoch, leader_epoch, start_offset, tuple(batches))


# --- the coordinator ----------------------------------------------------------------------------------


@dataclass(slots=True)
class ShareWritePlan:
    """What a WriteShareGroupState asks for: the record to append, then the state to apply."""

    error_code: ErrorCode
    partition: int = -1  # of __share_group_state
    key: ShareStateKey | None = None
    snapshot: ShareSnapshot | None = None
    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)


class ShareCoordinator:
    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        self.states: dict[ShareStateKey, ShareSnapshot] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()

    def coordinator_error(self, key: ShareStateKey) -> ErrorCode:
        partition = state_partition_for(key, self.num_partitions)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned_partitions:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # --- loading ------------------------------------------------------------------------------------

    def begin_load(self, partition: int) -> None:
        self.loading_partitions.add(partition)

    def replay(self, partition: int, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            raise RecordFormatError("a __share_group_state record without a key")
        version, decoded = decode_key(key)
        if value is None:
            self.states.pop(decoded, None)
        elif version == SNAPSHOT_KEY_VERSION:
            self.states[decoded] = decode_snapshot(value)

    def finish_load(self, partition: int) -> None:
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)

    def unload(self, partition: int) -> None:
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        for key in [k for k in self.states if state_partition_for(k, self.num_partitions) == partition]:
            del self.states[key]

    # --- ReadShareGroupState / WriteShareGroupState --------------------------------------------------

    def read(self, key: ShareStateKey) -> tuple[ErrorCode, ShareSnapshot | None]:
        """The state (None: never written; the leader starts it from share.auto.offset.reset)."""
        error = self.coordinator_error(key)
        if error != ErrorCode.NONE:
            return error, None
        return ErrorCode.NONE, self.states.get(key)

    def plan_write(
        self,
        key: ShareStateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[StateBatch, ...],
    ) -> ShareWritePlan:
        error = self.coordinator_error(key)
        if error != ErrorCode.NONE:
            return ShareWritePlan(error)
        if start_offset < 0 or any(
            b.first_offset > b.last_offset or int(b.delivery_state) not in _DURABLE_STATES for b in batches
        ):
            return ShareWritePlan(ErrorCode.INVALID_REQUEST)
        current = self.states.get(key)
        if current is not None:
            if state_epoch < current.state_epoch:
                return ShareWritePlan(ErrorCode.FENCED_STATE_EPOCH)
            if state_epoch == current.state_epoch and leader_epoch < current.leader_epoch:
                return ShareWritePlan(ErrorCode.FENCED_LEADER_EPOCH)
            # A new state epoch is a state started over (InitializeShareGroupState): the leaders' writes
            # at the old one are fenced from now, and a deposed leader's at the new one still are.
            leader_epoch = max(leader_epoch, current.leader_epoch)
        return self._plan_snapshot(key, state_epoch, leader_epoch, start_offset, batches)

    def plan_initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> ShareWritePlan:
        """InitializeShareGroupState (Kafka's ShareCoordinatorShard.initializeState): the state starts
        over at ``state_epoch`` from ``start_offset`` with nothing in flight; a state epoch older than
        the state's is fenced (FENCED_STATE_EPOCH). Kafka's StartOffset -1 (the leader decides by
        share.auto.offset.reset) is refused: pykraft's leaders start a share partition never written
        themselves, and only AlterShareGroupOffsets initializes, always with an offset."""
        error = self.coordinator_error(key)
        if error != ErrorCode.NONE:
            return ShareWritePlan(error)
        if start_offset < 0:
            return ShareWritePlan(ErrorCode.INVALID_REQUEST)
        current = self.states.get(key)
        if current is not None and state_epoch < current.state_epoch:
            return ShareWritePlan(ErrorCode.FENCED_STATE_EPOCH)
        # The last leader epoch stays: a deposed leader's writes at the new state epoch are fenced too.
        leader_epoch = current.leader_epoch if current is not None else -1
        return self._plan_snapshot(key, state_epoch, leader_epoch, start_offset, ())

    def _plan_snapshot(
        self,
        key: ShareStateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[StateBatch, ...],
    ) -> ShareWritePlan:
        current = self.states.get(key)
        snapshot = ShareSnapshot(
            (current.snapshot_epoch + 1) & 0xFFFF if current is not None else 0,
            state_epoch,
            leader_epoch,
            start_offset,
            batches,
        )
        return ShareWritePlan(
            ErrorCode.NONE,
            state_partition_for(key, self.num_partitions),
            key,
            snapshot,
            [(encode_key(key), encode_snapshot(snapshot))],
        )

    def plan_delete(self, key: ShareStateKey) -> ShareWritePlan:
        """DeleteShareGroupState: the key's tombstone (nothing to write when it has no state)."""
        error = self.coordinator_error(key)
        if error != ErrorCode.NONE:
            return ShareWritePlan(error)
        partition = state_partition_for(key, self.num_partitions)
        records: list[tuple[bytes, bytes | None]] = [(encode_key(key), None)] if key in self.states else []
        return ShareWritePlan(ErrorCode.NONE, partition, key, None, records)

    def apply(self, plan: ShareWritePlan) -> None:
        """The plan's record is replicated: its state (none: deleted) is the share partition's now."""
        if plan.key is None or plan.partition not in self.owned_partitions:
            return
        if plan.snapshot is None:
            self.states.pop(plan.key, None)
        else:
            self.states[plan.key] = plan.snapshot
