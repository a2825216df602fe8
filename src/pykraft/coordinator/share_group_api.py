"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77) on the wire (KIP-932): request objects in,
response objects out, around :meth:`GroupCoordinator.share_group_heartbeat` and the share group state
machine (coordinator/share_group.py)."""

from __future__ import annotations

from typing import Any

from pykraft.coordinator.consumer_group import Partitions
from pykraft.coordinator.group_coordinator import GroupCoordinator
from pykraft.coordinator.share_group import ShareHeartbeatRequest, ShareHeartbeatResult
from pykraft.core.errors import ErrorCode
from pykraft.protocol.messages import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatResponse,
)


def heartbeat_request(request: Any, client_id: str, client_host: str) -> ShareHeartbeatRequest:
    names = request.subscribed_topic_names
    return ShareHeartbeatRequest(
        group_id=request.group_id or "",
        member_id=request.member_id or "",
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topic_names=None if names is None else tuple(names),
        client_id=client_id,
        client_host=client_host,
    )


def heartbeat_response(result: ShareHeartbeatResult, version: int) -> Any:
    assignment = None
    if result.error_code == ErrorCode.NONE and result.assignment is not None:
        cls: Any = ShareGroupHeartbeatResponse.Assignment
        assignment = cls(
            topic_partitions=[
                cls.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(result.assignment.items(), key=lambda item: str(item[0]))
            ]
        )
    return ShareGroupHeartbeatResponse(
        version=version,
        throttle_time_ms=0,
        error_code=result.error_code,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )


def handle_describe(coordinator: GroupCoordinator, request: Any, version: int, topics: dict[str, Any]) -> Any:
    names = {view.topic_id: name for name, view in topics.items()}
    group_cls: Any = ShareGroupDescribeResponse.DescribedGroup
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
        d = coordinator.describe_share_group(group_id or "")
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
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        assignment=assignment(m.assignment),
                    )
                    for m in d.members
                ],
                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
        )
    return ShareGroupDescribeResponse(version=version, throttle_time_ms=0, groups=groups)
