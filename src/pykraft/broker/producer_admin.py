"""The admin view of producer state: DescribeProducers (api 61, KIP-664)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeProducersResponse

from pykraft.broker.handlers import BrokerContext
from pykraft.core.errors import ErrorCode


def handle_describe_producers(request: Any, version: int, ctx: BrokerContext) -> Any:
    """Each requested partition's active producers (DescribeProducersResponse v0)."""
    Topic = DescribeProducersResponse.TopicResponse
    Partition = Topic.PartitionResponse
    topics = []
    for topic in request.topics:
        partitions = []
        for partition_index in topic.partition_indexes:
            part = ctx.replicas.get(topic.name, partition_index)
            if part is None:
                partitions.append(
                    Partition(
                        partition_index=partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=f"{topic.name}-{partition_index} is not hosted here",
                        active_producers=[],
                    )
                )
                continue
            producers = [
                Partition.ProducerState(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.producer_epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=entry.last_timestamp_ms,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=-1
                    if entry.current_txn_first_offset is None
                    else entry.current_txn_first_offset,
                )
                for entry in part.producer_state.active_producers()
            ]
            partitions.append(
                Partition(
                    partition_index=partition_index,
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    active_producers=producers,
                )
            )
        topics.append(Topic(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(version=version, throttle_time_ms=0, topics=topics)
