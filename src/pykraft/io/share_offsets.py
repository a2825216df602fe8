"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) on a
share group's coordinator (KIP-932; Kafka's GroupCoordinatorService.describeShareGroupOffsets /
alterShareGroupOffsets / deleteShareGroupOffsets): the share-partition start offsets, read from
(ReadShareGroupStateSummary), initialized at (InitializeShareGroupState) and deleted at
(DeleteShareGroupState) the share coordinators through the persister (io/share_state_service.py).

Altering needs an empty share group (NON_EMPTY_GROUP; a group id that is not a share group is
GROUP_ID_NOT_FOUND) and starts each partition's state over at a new state epoch with nothing in flight,
so the partition leader's next write at the old epoch is fenced and it loads the new state. Deleting
(an empty group too) removes the group's state in whole topics: it starts over from
``share.auto.offset.reset`` when fetched again. DeleteGroups on an empty share group deletes all its
state first (Kafka's deleteGroups through the persister), so a new group of that id starts afresh.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kafka.protocol.admin import DeleteGroupsResponse

from pykraft.broker.handlers import BrokerContext
from pykraft.coordinator.group_coordinator import GroupCoordinator
from pykraft.coordinator.share_state import ShareStateKey
from pykraft.core.errors import ErrorCode
from pykraft.io.share_state_service import ShareStateService
from pykraft.protocol.messages import (
    AlterShareGroupOffsetsResponse,
    ApiKey,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponse,
)
from pykraft.security.acls import AclOperation, ResourceType, allowed

RequestHandler = Callable[[Any, int], Awaitable[Any]]


class ShareOffsets:
    def __init__(
        self, coordinator: GroupCoordinator, persister: ShareStateService, ctx: BrokerContext
    ) -> None:
        self.coordinator = coordinator
        self.persister = persister
        self.ctx = ctx

    def request_handlers(self) -> dict[int, RequestHandler]:
        return {
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: self.describe_share_group_offsets,
            ApiKey.ALTER_SHARE_GROUP_OFFSETS: self.alter_share_group_offsets,
            ApiKey.DELETE_SHARE_GROUP_OFFSETS: self.delete_share_group_offsets,
        }

    async def describe_share_group_offsets(self, request: Any, version: int) -> Any:
        group_cls: Any = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
        topic_cls: Any = group_cls.DescribeShareGroupOffsetsResponseTopic
        partition_cls: Any = topic_cls.DescribeShareGroupOffsetsResponsePartition
        groups = []
        for wanted in request.groups:
            group_id = wanted.group_id or ""
            if not allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                error, group = ErrorCode.GROUP_AUTHORIZATION_FAILED, None
            else:
                error, group = self.coordinator.share_group_for_offsets(group_id, alter=False)
            if group is None:
                groups.append(group_cls(group_id=group_id, topics=[], error_code=error, error_message=None))
                continue
            if wanted.topics is None:
                scope = [
                    (name, list(range(count)))
                    for name, (_, count) in sorted(group.initialized_topics.items())
                ]
            else:
                scope = [(t.topic_name, list(t.partitions)) for t in wanted.topics]
            topics = []
            for name, partitions in scope:
                view = self.ctx.cluster.topics.get(name)
                rows = []
                for index in partitions:
                    start_offset, leader_epoch, partition_error = -1, -1, ErrorCode.NONE
                    if not allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                        partition_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    elif view is None or not 0 <= index < len(view.partitions):
                        partition_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    else:
                        leader_epoch = view.partitions[index].leader_epoch
                        partition_error, _, start_offset = await self.persister.read_summary(
                            ShareStateKey(group_id, view.topic_id, index)
                        )
                    rows.append(
                        partition_cls(
                            partition_index=index,
                            start_offset=start_offset,
                            leader_epoch=leader_epoch,
                            error_code=partition_error,
                            error_message=None,
                        )
                    )
                topics.append(
                    topic_cls(topic_name=name, topic_id=view.topic_id if view else None, partitions=rows)
                )
            groups.append(
                group_cls(group_id=group_id, topics=topics, error_code=ErrorCode.NONE, error_message=None)
            )
        return DescribeShareGroupOffsetsResponse(version=version, throttle_time_ms=0, groups=groups)

    async def alter_share_group_offsets(self, request: Any, version: int) -> Any:
        topic_cls: Any = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
        partition_cls: Any = topic_cls.AlterShareGroupOffsetsResponsePartition
        group_id = request.group_id or ""
        error, group = self.coordinator.share_group_for_offsets(group_id, alter=True)
        responses = []
        for topic in request.topics:
            name = topic.topic_name
            view = self.ctx.cluster.topics.get(name)
            rows = []
            for p in topic.partitions:
                partition_error = error
                if partition_error == ErrorCode.NONE:
                    partition_error = await self._start_over(
                        group_id, name, p.partition_index, p.start_offset
                    )
                rows.append(
                    partition_cls(
                        partition_index=p.partition_index, error_code=partition_error, error_message=None
                    )
                )
            if group is not None and view is not None:
                self.coordinator.share.initialize_topic(group, name, view.topic_id, len(view.partitions))
            responses.append(
                topic_cls(topic_name=name, topic_id=view.topic_id if view else None, partitions=rows)
            )
        return AlterShareGroupOffsetsResponse(
            version=version, throttle_time_ms=0, error_code=error, error_message=None, responses=responses
        )

    async def _start_over(self, group_id: str, name: str, index: int, start_offset: int) -> ErrorCode:
        if not allowed(AclOperation.READ, ResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        view = self.ctx.cluster.topics.get(name)
        if view is None or not 0 <= index < len(view.partitions):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if start_offset < 0:
            return ErrorCode.INVALID_REQUEST
        key = ShareStateKey(group_id, view.topic_id, index)
        error, state_epoch, _ = await self.persister.read_summary(key)
        if error != ErrorCode.NONE:
            return error
        return await self.persister.initialize(key, state_epoch + 1, start_offset)

    async def delete_share_group_offsets(self, request: Any, version: int) -> Any:
        topic_cls: Any = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic
        partition_cls: Any = topic_cls.DeleteShareGroupOffsetsResponsePartition
        group_id = request.group_id or ""
        error, group = self.coordinator.share_group_for_offsets(group_id, alter=False)
        if group is not None and group.members:
            error, group = ErrorCode.NON_EMPTY_GROUP, None
        responses = []
        for topic in request.topics:
            name = topic.topic_name
            view = self.ctx.cluster.topics.get(name)
            rows = []
            if (
                group is not None
                and view is not None
                and allowed(AclOperation.READ, ResourceType.TOPIC, name)
            ):
                for index in range(len(view.partitions)):
                    partition_error = await self.persister.delete(
                        ShareStateKey(group_id, view.topic_id, index)
                    )
                    rows.append(
                        partition_cls(partition_index=index, error_code=partition_error, error_message=None)
                    )
                if all(r.error_code == ErrorCode.NONE for r in rows):
                    self.coordinator.share.forget_topic(group, name)
            elif group is not None:
                missing = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if view is None
                    else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                )
                rows.append(partition_cls(partition_index=0, error_code=missing, error_message=None))
            responses.append(
                topic_cls(topic_name=name, topic_id=view.topic_id if view else None, partitions=rows)
            )
        return DeleteShareGroupOffsetsResponse(
            version=version, throttle_time_ms=0, error_code=error, error_message=None, responses=responses
        )

    def delete_groups(self, delete: RequestHandler) -> RequestHandler:
        """DeleteGroups around the group service's: an empty share group's state at the share
        coordinators goes first; a group whose state could not be deleted answers that error and
        stays."""

        async def handle(request: Any, version: int) -> Any:
            refused: dict[str, ErrorCode] = {}
            for group_id in request.groups_names:
                group = self.coordinator.share.groups.get(group_id or "")
                if group is None or group.members or self.coordinator.coordinator_error(group.group_id):
                    continue
                for topic_id, count in list(group.initialized_topics.values()):
                    for index in range(count):
                        error = await self.persister.delete(ShareStateKey(group.group_id, topic_id, index))
                        if error != ErrorCode.NONE:
                            refused[group.group_id] = error
            if refused:
                request.groups_names = [g for g in request.groups_names if g not in refused]
            response = await delete(request, version)
            response.results.extend(
                DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=e)
                for g, e in refused.items()
            )
            return response

        return handle
