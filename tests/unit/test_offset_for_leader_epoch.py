"""OffsetForLeaderEpoch (23, KIP-101/KIP-320): where a leader epoch ends on the leader, the fencing of
the caller's current epoch, and the partitions it cannot answer for."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.consumer import OffsetForLeaderEpochRequest

from pykraft.broker import handlers
from pykraft.core.errors import ErrorCode
from pykraft.protocol.records import Record, build_batch, validate_batches
from tests.unit.test_cluster_admin import _ctx, _exchange, _topic


def _ask(
    ctx: Any, topic: str, partitions: list[tuple[int, int, int]], version: int = 4
) -> list[tuple[int, int, int]]:
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic=topic,
                partitions=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                        partition=index, current_leader_epoch=current, leader_epoch=epoch
                    )
                    for index, current, epoch in partitions
                ],
            )
        ],
    )
    response = _exchange(request, version, lambda r, v: handlers.handle_offset_for_leader_epoch(r, v, ctx))
    return [(p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions]


def _leader_of(ctx: Any, topic: str, epoch_starts: list[tuple[int, int]]) -> None:
    """A replicated partition whose log holds one batch of 5 records per (epoch, start offset)."""
    part = ctx.replicas.ensure_partition(topic, 0, 0, replicated=True, broker_id=1)
    for epoch, start in epoch_starts:
        part.epochs.assign(epoch, start)
        batch = build_batch([Record(None, b"v")] * 5, timestamp_ms=1)
        part.log.append(batch, validate_batches(memoryview(batch)), leader_epoch=epoch)
    ctx.replicas.apply_partition(
        part,
        leader_id=1,
        leader_epoch=epoch_starts[-1][0],
        partition_epoch=1,
        replicas=[1],
        isr=[1],
        now_ms=0,
    )


def test_end_offsets_of_epochs_on_a_replicated_leader() -> None:
    topic = _topic("t", 1, leader=1, replicas=(1,))
    ctx = _ctx(topic)
    _leader_of(ctx, "t", [(1, 0), (3, 5), (4, 10)])
    current = 4
    assert _ask(ctx, "t", [(0, current, 1), (0, current, 2), (0, current, 3), (0, current, 4)]) == [
        (ErrorCode.NONE, 1, 5),
        (ErrorCode.NONE, 1, 5),  # epoch 2 never led: the largest epoch below it, ended where 3 began
        (ErrorCode.NONE, 3, 10),
        (ErrorCode.NONE, 4, 15),  # the latest epoch ends at the log end
    ]
    # Older than the first epoch: Kafka's endOffsetFor answers the requested epoch and where the
    # first one starts.
    assert _ask(ctx, "t", [(0, current, 0)]) == [(ErrorCode.NONE, 0, 0)]
    assert _ask(ctx, "t", [(0, current, 9)]) == [(ErrorCode.NONE, -1, -1)]  # newer than any: undefined
    assert _ask(ctx, "t", [(0, 2, 3)]) == [(ErrorCode.FENCED_LEADER_EPOCH, -1, -1)]
    assert _ask(ctx, "t", [(0, 7, 3)]) == [(ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)]
    assert _ask(ctx, "t", [(0, -1, 3)]) == [(ErrorCode.NONE, 3, 10)]  # no current epoch: not fenced


@pytest.mark.parametrize("version", [2, 3, 4])
def test_partitions_it_cannot_answer_for(version: int) -> None:
    ctx = _ctx(_topic("t", 1, leader=2, replicas=(1, 2)))
    assert _ask(ctx, "t", [(0, -1, 0)], version) == [(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)]
    assert _ask(ctx, "nope", [(0, -1, 0)], version) == [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    assert _ask(ctx, "t", [(5, -1, 0)], version) == [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]


def test_a_single_replica_partition_has_had_one_epoch_since_its_log_start() -> None:
    ctx = _ctx(_topic("s", 1, leader=1, replicas=(1,)))  # leader epoch 3 in the image
    part = ctx.replicas.ensure_partition("s", 0, 0)
    batch = build_batch([Record(None, b"v")] * 4, timestamp_ms=1)
    part.log.append(batch, validate_batches(memoryview(batch)))
    assert _ask(ctx, "s", [(0, 3, 3), (0, -1, 2), (0, 3, 4)]) == [
        (ErrorCode.NONE, 3, 4),
        (ErrorCode.NONE, 2, 0),
        (ErrorCode.NONE, -1, -1),
    ]
