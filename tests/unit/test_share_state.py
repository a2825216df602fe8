"""The share coordinator (KIP-932, coordinator/share_state.py): ShareSnapshot records in Kafka's layout,
writes fenced by leader and state epochs, a write visible only once applied, and a loaded partition
replaying each key's last snapshot."""

from __future__ import annotations

import uuid

from pykraft.coordinator.share_partition import RecordState, StateBatch
from pykraft.coordinator.share_state import (
    ShareCoordinator,
    ShareSnapshot,
    ShareStateKey,
    decode_key,
    decode_snapshot,
    encode_key,
    encode_snapshot,
    state_partition_for,
)
from pykraft.core.errors import ErrorCode

KEY = ShareStateKey("sg", uuid.UUID(int=7), 0)
BATCHES = (StateBatch(10, 12, RecordState.ACKNOWLEDGED, 1), StateBatch(13, 13, RecordState.AVAILABLE, 2))


def _owning() -> ShareCoordinator:
    coordinator = ShareCoordinator(3)
    partition = state_partition_for(KEY, 3)
    coordinator.begin_load(partition)
    coordinator.finish_load(partition)
    return coordinator


def test_records_round_trip_in_kafkas_layout():
    key = encode_key(KEY)
    # int16 version 0, then GroupId as an int16-length string, the uuid, the partition.
    assert key[:2] == b"\x00\x00" and key[2:6] == b"\x00\x02sg" and len(key) == 2 + 4 + 16 + 4
    assert decode_key(key) == (0, KEY)
    snapshot = ShareSnapshot(3, 0, 5, 10, BATCHES)
    assert decode_snapshot(encode_snapshot(snapshot)) == snapshot


def test_the_coordinator_key_is_kafkas():
    # SharePartitionKey.asCoordinatorKey: groupId:topicId:partition with Kafka's base64 topic id.
    assert KEY.coordinator_key() == "sg:AAAAAAAAAAAAAAAAAAAABw:0"


def test_a_write_is_visible_once_applied_and_fenced_by_older_epochs():
    coordinator = _owning()
    assert coordinator.read(KEY) == (ErrorCode.NONE, None)
    plan = coordinator.plan_write(KEY, 0, 5, 10, BATCHES)
    assert plan.error_code == ErrorCode.NONE and len(plan.records) == 1
    assert coordinator.read(KEY) == (ErrorCode.NONE, None)  # not yet replicated
    coordinator.apply(plan)
    error, state = coordinator.read(KEY)
    assert (
        error == ErrorCode.NONE
        and state is not None
        and state.start_offset == 10
        and state.state_batches == BATCHES
    )
    assert coordinator.plan_write(KEY, 0, 4, 11, ()).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert coordinator.plan_write(KEY, -1, 5, 11, ()).error_code == ErrorCode.FENCED_STATE_EPOCH
    assert coordinator.plan_write(KEY, 0, 5, -1, ()).error_code == ErrorCode.INVALID_REQUEST
    newer = coordinator.plan_write(KEY, 0, 6, 14, ())
    assert newer.snapshot is not None and newer.snapshot.snapshot_epoch == 1
    # The group coordinator starts the state over at a new state epoch, whatever the leader epoch;
    # the leader's writes at the old state epoch are fenced from then on.
    reset = coordinator.plan_write(KEY, 1, -1, 0, ())
    assert reset.snapshot is not None and reset.snapshot.leader_epoch == 5
    coordinator.apply(reset)
    assert coordinator.plan_write(KEY, 0, 9, 20, ()).error_code == ErrorCode.FENCED_STATE_EPOCH


def test_loading_replays_the_last_snapshot_and_other_partitions_are_not_ours():
    source = _owning()
    first = source.plan_write(KEY, 0, 5, 10, BATCHES)
    second = source.plan_write(KEY, 0, 5, 14, ())
    loaded = ShareCoordinator(3)
    partition = state_partition_for(KEY, 3)
    assert loaded.read(KEY)[0] == ErrorCode.NOT_COORDINATOR
    loaded.begin_load(partition)
    assert loaded.read(KEY)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    for plan in (first, second):
        for key, value in plan.records:
            loaded.replay(partition, key, value)
    loaded.finish_load(partition)
    error, state = loaded.read(KEY)
    assert error == ErrorCode.NONE and state is not None and state.start_offset == 14
    loaded.unload(partition)
    assert loaded.read(KEY)[0] == ErrorCode.NOT_COORDINATOR and not loaded.states


def test_deleting_a_state_writes_its_tombstone():
    coordinator = _owning()
    assert coordinator.plan_delete(KEY).records == []  # nothing to delete
    coordinator.apply(coordinator.plan_write(KEY, 0, 5, 10, BATCHES))
    plan = coordinator.plan_delete(KEY)
    assert plan.records == [(encode_key(KEY), None)]
    coordinator.apply(plan)
    assert coordinator.read(KEY) == (ErrorCode.NONE, None)
    # A new state may start at state epoch 0 again.
    assert coordinator.plan_write(KEY, 0, 0, 3, ()).error_code == ErrorCode.NONE


def test_initializing_starts_the_state_over_and_fences_older_state_epochs():
    coordinator = _owning()
    # A share partition never written: its state starts at the given epoch and offset, nothing in flight.
    plan = coordinator.plan_initialize(KEY, 0, 7)
    assert plan.error_code == ErrorCode.NONE and len(plan.records) == 1
    coordinator.apply(plan)
    assert coordinator.read(KEY) == (ErrorCode.NONE, ShareSnapshot(0, 0, -1, 7, ()))
    coordinator.apply(coordinator.plan_write(KEY, 0, 5, 10, BATCHES))
    # AlterShareGroupOffsets: a new state epoch from a new start offset; the leader epoch stays, so a
    # deposed leader's writes at the new state epoch are fenced as before.
    reset = coordinator.plan_initialize(KEY, 1, 3)
    assert reset.snapshot == ShareSnapshot(2, 1, 5, 3, ())
    assert decode_snapshot(reset.records[0][1]) == reset.snapshot  # a ShareSnapshot record
    coordinator.apply(reset)
    assert coordinator.plan_write(KEY, 0, 6, 20, ()).error_code == ErrorCode.FENCED_STATE_EPOCH
    assert coordinator.plan_write(KEY, 1, 4, 20, ()).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert coordinator.plan_initialize(KEY, 0, 3).error_code == ErrorCode.FENCED_STATE_EPOCH
    # StartOffset -1 (Kafka's "not initialized": the leader decides) is not something pykraft sends.
    assert coordinator.plan_initialize(KEY, 2, -1).error_code == ErrorCode.INVALID_REQUEST
    elsewhere = next(
        key
        for index in range(1, 20)
        if state_partition_for(key := ShareStateKey("sg", KEY.topic_id, index), 3)
        != state_partition_for(KEY, 3)
    )
    assert coordinator.plan_initialize(elsewhere, 0, 0).error_code == ErrorCode.NOT_COORDINATOR
