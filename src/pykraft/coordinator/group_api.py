"""The group APIs on the wire: kafka-python request objects in, response objects out, per version.

Pure translation around :class:`GroupCoordinator`; the shell supplies tokens, ``now_ms``, the client
id/host and the outcome of appends to ``__consumer_offsets``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.consumer import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)
from kafka.protocol.producer import TxnOffsetCommitResponse

from pykraft.coordinator.group_coordinator import (
    CommitOffset,
    CommitRequest,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    LeaveMember,
    SyncRequest,
    SyncResult,
    WritePlan,
)
from pykraft.core.errors import ErrorCode
from pykraft.security.acls import ResourceType, authorized_operations

# DescribeGroups: authorized operations not requested (kafka-python encodes None as Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = None


def authorized_group_operations(group_id: str) -> set[int]:
    """KIP-430, as Kafka's KafkaApis answers include_authorized_operations: the group operations the
    principal may do (every one the group supports without an authorizer)."""
    return {int(op) for op in authorized_operations(ResourceType.GROUP, group_id)}


def append_error_for_commit(error: ErrorCode) -> ErrorCode:
    """How Kafka answers a commit whose ``__consumer_offsets`` append failed (GroupMetadataManager)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


# --- JoinGroup / SyncGroup -----------------------------------------------------------------------------


def join_request(request: Any, version: int, client_id: str, client_host: str) -> JoinRequest:
    return JoinRequest(
        group_id=request.group_id or "",
        member_id=request.member_id or "",
        group_instance_id=request.group_instance_id if version >= 5 else None,
        session_timeout_ms=request.session_timeout_ms,
        # v0 has no rebalance timeout: it is the session timeout.
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type or "",
        protocols=tuple((p.name, bytes(p.metadata or b"")) for p in request.protocols),
        client_id=client_id,
        client_host=client_host,
        require_known_member_id=version >= 4,
    )


def join_response(result: JoinResult, version: int) -> Any:
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # non-nullable before v7
    return JoinGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )


def sync_request(request: Any, version: int) -> SyncRequest:
    return SyncRequest(
        group_id=request.group_id or "",
        generation_id=request.generation_id,
        member_id=request.member_id or "",
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments=tuple((a.member_id, bytes(a.assignment or b"")) for a in request.assignments),
    )


def sync_response(result: SyncResult, version: int) -> Any:
    return SyncGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=result.error_code,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


# --- Heartbeat / LeaveGroup -----------------------------------------------------------------------------


def handle_heartbeat(coordinator: GroupCoordinator, request: Any, version: int, now_ms: int) -> Any:
    error = coordinator.heartbeat(
        request.group_id or "",
        request.generation_id,
        request.member_id or "",
        request.group_instance_id if version >= 3 else None,
        now_ms,
    )
    return HeartbeatResponse(version=version, throttle_time_ms=0, error_code=error)


def handle_leave_group(coordinator: GroupCoordinator, request: Any, version: int, now_ms: int) -> Any:
    if version >= 3:
        leaving = [LeaveMember(m.member_id or "", m.group_instance_id) for m in request.members]
    else:
        leaving = [LeaveMember(request.member_id or "", None)]
    error, results = coordinator.leave_group(request.group_id or "", leaving, now_ms)
    if version < 3:
        # One member: its error is the response's error.
        if error == ErrorCode.NONE and results:
            error = results[0][1]
        return LeaveGroupResponse(version=version, throttle_time_ms=0, error_code=error)
    return LeaveGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        members=[
            LeaveGroupResponse.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=member_error
            )
            for m, member_error in results
        ],
    )


# --- OffsetCommit / OffsetFetch / OffsetDelete -------------------------------------------------------------


def _commit_offsets(request: Any, with_leader_epoch: bool) -> tuple[CommitOffset, ...]:
    """The offsets of an OffsetCommit or TxnOffsetCommit (the same topic/partition layout)."""
    return tuple(
        CommitOffset(
            t.name,
            p.partition_index,
            p.committed_offset,
            p.committed_leader_epoch if with_leader_epoch else -1,
            p.committed_metadata,
        )
        for t in request.topics
        for p in t.partitions
    )


def commit_request(request: Any, version: int, partition_exists: Callable[[str, int], bool]) -> CommitRequest:
    """The offsets of partitions that exist: Kafka's KafkaApis.handleOffsetCommitRequest answers the others
    UNKNOWN_TOPIC_OR_PARTITION itself and gives the coordinator only the rest (see commit_response)."""
    return CommitRequest(
        group_id=request.group_id or "",
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id or "",
        group_instance_id=request.group_instance_id if version >= 7 else None,
        offsets=tuple(
            o for o in _commit_offsets(request, version >= 6) if partition_exists(o.topic, o.partition)
        ),
    )


def commit_response(
    request: Any,
    plan: WritePlan | None,
    version: int,
    append_error: ErrorCode,
    partition_exists: Callable[[str, int], bool],
) -> Any:
    """``plan`` None: no partition of the request exists, so the coordinator was not asked (Kafka)."""

    def error_for(topic: str, partition: int) -> ErrorCode:
        if plan is None or not partition_exists(topic, partition):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        error = plan.partition_errors.get((topic, partition), ErrorCode.NONE)
        if error == ErrorCode.NONE and append_error != ErrorCode.NONE:
            return append_error_for_commit(append_error)
        return error

    topics = [
        OffsetCommitResponse.OffsetCommitResponseTopic(
            name=t.name,
            partitions=[
                OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=error_for(t.name, p.partition_index)
                )
                for p in t.partitions
            ],
        )
        for t in request.topics
    ]
    return OffsetCommitResponse(version=version, throttle_time_ms=0, topics=topics)


def txn_commit_request(request: Any, version: int) -> CommitRequest:
    """TxnOffsetCommit as a commit: v3+ carry the member (KIP-447), older ones commit as a standalone
    writer (generation -1)."""
    return CommitRequest(
        group_id=request.group_id or "",
        generation_id=request.generation_id if version >= 3 else -1,
        member_id=(request.member_id or "") if version >= 3 else "",
        group_instance_id=request.group_instance_id if version >= 3 else None,
        offsets=_commit_offsets(request, version >= 2),
        transactional=True,
    )


def txn_commit_response(request: Any, plan: WritePlan, version: int, append_error: ErrorCode) -> Any:
    def error_for(topic: str, partition: int) -> ErrorCode:
        error = plan.partition_errors.get((topic, partition), plan.error_code)
        if error == ErrorCode.NONE and append_error != ErrorCode.NONE:
            return append_error_for_commit(append_error)
        return error

    topic_cls: Any = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    partition_cls: Any = topic_cls.TxnOffsetCommitResponsePartition
    return TxnOffsetCommitResponse(
        version=version,
        throttle_time_ms=0,
        topics=[
            topic_cls(
                name=t.name,
                partitions=[
                    partition_cls(
                        partition_index=p.partition_index, error_code=error_for(t.name, p.partition_index)
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


def handle_offset_fetch(coordinator: GroupCoordinator, request: Any, version: int) -> Any:
    if version >= 8:
        groups = []
        for group in request.groups:
            wanted = (
                None if group.topics is None else [(t.name, list(t.partition_indexes)) for t in group.topics]
            )
            error, offsets = coordinator.fetch_offsets(group.group_id or "", wanted)
            if error == ErrorCode.NONE and version >= 9:
                # KIP-848: a consumer group member's fetch carries its member epoch.
                error = coordinator.consumer_offset_fetch_error(
                    group.group_id or "", group.member_id or "", group.member_epoch
                )
            unstable = (
                coordinator.unstable_partitions(group.group_id or "") if request.require_stable else set()
            )
            groups.append(
                OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=group.group_id,
                    topics=_fetch_topics(offsets, version, grouped=True, unstable=unstable)
                    if error == ErrorCode.NONE
                    else [],
                    error_code=error,
                )
            )
        return OffsetFetchResponse(version=version, throttle_time_ms=0, groups=groups)
    wanted = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
    error, offsets = coordinator.fetch_offsets(request.group_id or "", wanted)
    if error != ErrorCode.NONE and version < 2:
        # v1 has no top-level error: every requested partition carries it.
        offsets = [(t, p, None) for t, parts in (wanted or []) for p in parts]
        return OffsetFetchResponse(
            version=version, topics=_fetch_topics(offsets, version, grouped=False, error=error)
        )
    unstable = (
        coordinator.unstable_partitions(request.group_id or "")
        if version >= 7 and request.require_stable
        else set()
    )
    return OffsetFetchResponse(
        version=version,
        throttle_time_ms=0,
        topics=_fetch_topics(offsets, version, grouped=False, unstable=unstable)
        if error == ErrorCode.NONE
        else [],
        error_code=error,
    )


def _fetch_topics(
    offsets: list[tuple[str, int, Any]],
    version: int,
    *,
    grouped: bool,
    error: ErrorCode = ErrorCode.NONE,
    unstable: set[tuple[str, int]] | None = None,
) -> list[Any]:
    if grouped:
        topic_cls: Any = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
        partition_cls: Any = topic_cls.OffsetFetchResponsePartitions
    else:
        topic_cls = OffsetFetchResponse.OffsetFetchResponseTopic
        partition_cls = topic_cls.OffsetFetchResponsePartition
    by_topic: dict[str, list[Any]] = {}
    for topic, partition, value in offsets:
        if unstable and (topic, partition) in unstable:
            # KIP-447: a transaction may still commit an offset here; the client retries.
            value = None
            partition_error = ErrorCode.UNSTABLE_OFFSET_COMMIT
        else:
            partition_error = error
        by_topic.setdefault(topic, []).append(
            partition_cls(
                partition_index=partition,
                committed_offset=value.offset if value is not None else -1,
                committed_leader_epoch=value.leader_epoch if value is not None else -1,
                metadata=value.metadata if value is not None else "",
                error_code=partition_error,
            )
        )
    return [topic_cls(name=topic, partitions=parts) for topic, parts in by_topic.items()]


def offset_delete_plan(coordinator: GroupCoordinator, request: Any) -> WritePlan:
    topics = [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]
    return coordinator.delete_offsets(request.group_id or "", topics)


def offset_delete_response(request: Any, plan: WritePlan, version: int, append_error: ErrorCode) -> Any:
    error = plan.error_code
    if error == ErrorCode.NONE and append_error != ErrorCode.NONE:
        error = append_error_for_commit(append_error)
    topics = []
    if error == ErrorCode.NONE:
        topic_cls: Any = OffsetDeleteResponse.OffsetDeleteResponseTopic
        topics = [
            topic_cls(
                name=t.name,
                partitions=[
                    topic_cls.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=plan.partition_errors.get((t.name, p.partition_index), ErrorCode.NONE),
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    return OffsetDeleteResponse(version=version, error_code=error, throttle_time_ms=0, topics=topics)


# --- ListGroups / DescribeGroups / DeleteGroups ------------------------------------------------------------


def handle_list_groups(coordinator: GroupCoordinator, request: Any, version: int) -> Any:
    states = {s.lower() for s in request.states_filter} if version >= 4 and request.states_filter else None
    types = {t.lower() for t in request.types_filter} if version >= 5 and request.types_filter else None
    groups = [
        ListGroupsResponse.ListedGroup(
            group_id=group_id, protocol_type=protocol_type, group_state=state, group_type="classic"
        )
        for group_id, protocol_type, state in coordinator.list_groups(states)
        if types is None or "classic" in types
    ]
    # KIP-848 consumer groups: type "consumer" (ListGroups v5, KIP-1043), protocol type "consumer".
    groups += [
        ListGroupsResponse.ListedGroup(
            group_id=group_id, protocol_type="consumer", group_state=state, group_type="consumer"
        )
        for group_id, state in coordinator.list_consumer_groups(states)
        if types is None or "consumer" in types
    ]
    # KIP-932 share groups: type and protocol type "share".
    groups += [
        ListGroupsResponse.ListedGroup(
            group_id=group_id, protocol_type="share", group_state=state, group_type="share"
        )
        for group_id, state in coordinator.list_share_groups(states)
        if types is None or "share" in types
    ]
    return ListGroupsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, groups=groups)


def handle_describe_groups(coordinator: GroupCoordinator, request: Any, version: int) -> Any:
    described = []
    for group_id in request.groups:
        d = coordinator.describe_group(group_id or "")
        error = d.error_code
        state = d.state
        message = None
        if error == ErrorCode.GROUP_ID_NOT_FOUND and version < 6:
            # Before v6 an unknown group is described as Dead with no error (Kafka).
            error = ErrorCode.NONE
        elif error == ErrorCode.GROUP_ID_NOT_FOUND:
            message = f"Group {group_id} not found."
        described.append(
            DescribeGroupsResponse.DescribedGroup(
                error_code=error,
                error_message=message,
                group_id=group_id,
                group_state=state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_data,
                members=[
                    DescribeGroupsResponse.DescribedGroup.DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in d.members
                ],
                # kafka-python's bit-field type: a set of operation codes.
                authorized_operations=authorized_group_operations(group_id)
                if version >= 3 and request.include_authorized_operations and error == ErrorCode.NONE
                else AUTHORIZED_OPERATIONS_OMITTED,
            )
        )
    return DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=described)


def delete_groups_plans(coordinator: GroupCoordinator, request: Any) -> list[WritePlan]:
    return coordinator.delete_groups([g or "" for g in request.groups_names])


def delete_groups_response(request: Any, results: dict[str, ErrorCode], version: int) -> Any:
    return DeleteGroupsResponse(
        version=version,
        throttle_time_ms=0,
        results=[
            DeleteGroupsResponse.DeletableGroupResult(
                group_id=g, error_code=results.get(g or "", ErrorCode.GROUP_ID_NOT_FOUND)
            )
            for g in request.groups_names
        ],
    )
