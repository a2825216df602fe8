"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) on the wire (KIP-848): request objects
in, response objects out, around :meth:`GroupCoordinator.consumer_group_heartbeat` and the consumer
group state machine (coordinator/consumer_group.py)."""

from __future__ import annotations

from typing import Any

from pykraft.coordinator.consumer_group import HeartbeatRequest, HeartbeatResult, Partitions, TopicInfo
from pykraft.coordinator.group_api import authorized_group_operations
from pykraft.coordinator.group_coordinator import GroupCoordinator
from pykraft.core.errors import ErrorCode
from pykraft.protocol.messages import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
)
from pykraft.security.acls import to_32_bit_field


def heartbeat_request(request: Any, version: int, client_id: str, client_host: str) -> HeartbeatRequest:
    owned = request.topic_partitions
    names = request.subscribed_topic_names
    return HeartbeatRequest(
        group_id=request.group_id or "",
        member_id=request.member_id or "",
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=request.subscribed_topic_regex if version >= 1 else None,
        server_assignor=request.server_assignor,
        topic_partitions=None if owned is None else tuple((t.topic_id, tuple(t.partitions)) for t in owned),
        client_id=client_id,
        client_host=client_host,
    )


def heartbeat_response(result: HeartbeatResult, version: int) -> Any:
    assignment = None
    if result.error_code == ErrorCode.NONE and result.assignment is not None:
        cls: Any = ConsumerGroupHeartbeatResponse.Assignment
        assignment = cls(
            topic_partitions=[
                cls.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(result.assignment.items(), key=lambda item: str(item[0]))
            ]
        )
    return ConsumerGroupHeartbeatResponse(
        version=version,
        throttle_time_ms=0,
        error_code=result.error_code,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )


def topics_by_name(topics: dict[str, Any]) -> dict[str, TopicInfo]:
    """The heartbeat's view of the metadata image (handlers.TopicView by name)."""
    return {name: TopicInfo(view.topic_id, len(view.partitions)) for name, view in topics.items()}


def handle_describe(coordinator: GroupCoordinator, request: Any, version: int, topics: dict[str, Any]) -> Any:
    names = {view.topic_id: name for name, view in topics.items()}
    group_cls: Any = ConsumerGroupDescribeResponse.DescribedGroup
    member_cls: Any = group_cls.Member
    assignment_cls: Any = member_cls.Assignment

    def assignment(partitions: Partitions) -> Any:
        return assignment_cls(
            topic_partitions=[
                assignment_cls.TopicPartitions(
                    topic_id=topic_id, topic_name=names.get(topic_id, ""), partitions=sorted(parts)
                )
                for topic_id, parts in sorted(
                    partitions.items(), key=lambda item: names.get(item[0], str(item[0]))
                )
            ]
        )

    groups = []
    for group_id in request.group_ids:
        d = coordinator.describe_consumer_group(group_id or "")
        groups.append(
            group_cls(
                error_code=d.error_code,
                error_message=d.error_message,
                group_id=group_id,
                group_state=d.state,
                group_epoch=d.group_epoch,
                assignment_epoch=d.assignment_epoch,
                assignor_name=d.assignor_name,
                members=[
                    member_cls(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=assignment(m.assignment),
                        target_assignment=assignment(m.target_assignment),
                    )
                    for m in d.members
                ],
                authorized_operations=to_32_bit_field(authorized_group_operations(group_id))
                if request.include_authorized_operations and d.error_code == ErrorCode.NONE
                else AUTHORIZED_OPERATIONS_OMITTED,
            )
        )
    return ConsumerGroupDescribeResponse(version=version, throttle_time_ms=0, groups=groups)
