"""The shell around the share coordinator (KIP-932, coordinator/share_state.py) and the partition
leaders' side of it (Kafka's DefaultStatePersister).

As a **share coordinator** this node leads some ``__share_group_state`` partitions: it loads them (replays
their snapshots) when the image says so, serves ReadShareGroupState and ReadShareGroupStateSummary from
memory and answers WriteShareGroupState, InitializeShareGroupState and DeleteShareGroupState once the
record is in the log and the ISR has it (the state is applied only then).

As a **partition leader** it reads a share partition's state before handing out its first record and
writes it before answering an acknowledgement: :meth:`ShareStateService.read` / :meth:`write` find the
coordinator (the leader of the key's ``__share_group_state`` partition, created on first use) and call it,
this node's own handler or another broker's over an :class:`RpcClient`. The group coordinator uses
:meth:`read_summary`, :meth:`initialize` and :meth:`delete` the same way (as Kafka's persister).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pykraft.broker.handlers import BrokerContext
from pykraft.coordinator.offsets_records import RecordFormatError
from pykraft.coordinator.share_partition import RecordState, StateBatch
from pykraft.coordinator.share_state import (
    SHARE_STATE_TOPIC,
    UNINITIALIZED_START_OFFSET,
    ShareCoordinator,
    ShareSnapshot,
    ShareStateKey,
    ShareWritePlan,
    state_partition_for,
)
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode
from pykraft.io.internal_topics import CreateTopics, InternalTopic, iter_batches
from pykraft.io.rpc_channel import ChannelSecurity, PeerUnavailable, RpcClient
from pykraft.protocol.messages import (
    ApiKey,
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from pykraft.protocol.records import Record, build_batch

log = logging.getLogger("pykraft.share_state")

RequestHandler = Callable[[Any, int], Awaitable[Any]]
# A state write waits this long for the ISR of its __share_group_state partition.
WRITE_TIMEOUT_MS = 5000
RPC_TIMEOUT_MS = 5000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _batches(wire_batches: Any) -> tuple[StateBatch, ...]:
    return tuple(
        StateBatch(b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count)
        for b in wire_batches
        if b.delivery_state in (0, 2, 4)
    )


def _read_result(
    p: Any, error: ErrorCode, snapshot: ShareSnapshot | None, unknown_start: int
) -> dict[str, Any]:
    """The fields ReadShareGroupState and its summary answer alike for one partition."""
    return {
        "partition": p.partition,
        "error_code": error,
        "error_message": None,
        "state_epoch": snapshot.state_epoch if snapshot else 0,
        "start_offset": snapshot.start_offset if snapshot else unknown_start,
    }


def _key(group_id: str, topic_id: Any, partition: int) -> ShareStateKey | None:
    """The share partition a request names; None for a null (zero) topic id, which names none
    (INVALID_REQUEST, as Kafka's ShareCoordinatorService checks)."""
    return ShareStateKey(group_id, topic_id, partition) if topic_id is not None else None


class ShareStateService:
    def __init__(
        self,
        config: NodeConfig,
        ctx: BrokerContext,
        create_topics: CreateTopics,
        wait_replicated: Callable[[str, int, int, int], Awaitable[ErrorCode]],
        broker_security: ChannelSecurity | None,
    ) -> None:
        self.node_id = config.node_id
        self.ctx = ctx
        self.num_partitions = config.share_coordinator_state_topic_num_partitions
        self.coordinator = ShareCoordinator(self.num_partitions)
        self.topic = InternalTopic(
            SHARE_STATE_TOPIC,
            self.num_partitions,
            config.share_coordinator_state_topic_replication_factor,
            ctx,
            create_topics,
            config.share_coordinator_state_topic_segment_bytes,
        )
        self._wait_replicated = wait_replicated
        # Loads and unloads of each partition: a write applies only if none came between its append
        # and its replication.
        self._loads: dict[int, int] = {}
        self.rpc = RpcClient(
            {},
            client_id=f"pykraft-share-{config.node_id}",
            request_timeout_ms=RPC_TIMEOUT_MS,
            security=broker_security,
        )

    def request_handlers(self) -> dict[int, RequestHandler]:
        return {
            ApiKey.READ_SHARE_GROUP_STATE: self.read_share_group_state,
            ApiKey.WRITE_SHARE_GROUP_STATE: self.write_share_group_state,
            ApiKey.DELETE_SHARE_GROUP_STATE: self.delete_share_group_state,
            ApiKey.INITIALIZE_SHARE_GROUP_STATE: self.initialize_share_group_state,
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: self.read_share_group_state_summary,
        }

    async def stop(self) -> None:
        await self.topic.stop()
        await self.rpc.close()

    # --- the coordinator's partitions ------------------------------------------------------------------

    def on_image(self) -> None:
        view = self.ctx.cluster.topics.get(SHARE_STATE_TOPIC)
        led = {p.partition_index for p in view.partitions if p.leader_id == self.node_id} if view else set()
        known = self.coordinator.owned_partitions | self.coordinator.loading_partitions
        for partition in sorted(known - led):
            self.coordinator.unload(partition)
            self._loads[partition] = self._loads.get(partition, 0) + 1
        for partition in sorted(led - known):
            part = self.ctx.replicas.get(SHARE_STATE_TOPIC, partition)
            if part is None:
                continue  # not hosted here yet; a later image brings it
            self._loads[partition] = self._loads.get(partition, 0) + 1
            self.coordinator.begin_load(partition)
            for header, records in iter_batches(part.log):
                if header.is_control:
                    continue
                for record in records:
                    try:
                        self.coordinator.replay(partition, record.key, record.value)
                    except RecordFormatError as exc:
                        log.warning(
                            "%s-%d offset %d: skipping a record that does not decode: %s",
                            SHARE_STATE_TOPIC,
                            partition,
                            record.offset,
                            exc,
                        )
            self.coordinator.finish_load(partition)

    async def _answer_each(
        self,
        request: Any,
        result_cls: Any,
        answer: Callable[[ShareStateKey | None, Any], Awaitable[Any]],
    ) -> list[Any]:
        """The five state RPCs answer per topic and partition alike: ``answer`` gets the partition's key
        (None: not a valid key, answered INVALID_REQUEST) and its request entry, and returns its result."""
        results = []
        for topic in request.topics:
            partitions = [
                await answer(_key(request.group_id, topic.topic_id, p.partition), p) for p in topic.partitions
            ]
            results.append(result_cls(topic_id=topic.topic_id, partitions=partitions))
        return results

    def _read_snapshot(self, key: ShareStateKey | None) -> tuple[ErrorCode, ShareSnapshot | None]:
        return self.coordinator.read(key) if key is not None else (ErrorCode.INVALID_REQUEST, None)

    async def read_share_group_state(self, request: Any, version: int) -> Any:
        result_cls: Any = ReadShareGroupStateResponse.ReadStateResult
        partition_cls: Any = result_cls.PartitionResult
        batch_cls: Any = partition_cls.StateBatch

        async def answer(key: ShareStateKey | None, p: Any) -> Any:
            error, snapshot = self._read_snapshot(key)
            return partition_cls(
                **_read_result(p, error, snapshot, -1),
                state_batches=[
                    batch_cls(
                        first_offset=b.first_offset,
                        last_offset=b.last_offset,
                        delivery_state=int(b.delivery_state),
                        delivery_count=b.delivery_count,
                    )
                    for b in (snapshot.state_batches if snapshot else ())
                ],
            )

        results = await self._answer_each(request, result_cls, answer)
        return ReadShareGroupStateResponse(version=version, results=results)

    async def read_share_group_state_summary(self, request: Any, version: int) -> Any:
        result_cls: Any = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult
        partition_cls: Any = result_cls.PartitionResult

        async def answer(key: ShareStateKey | None, p: Any) -> Any:
            error, snapshot = self._read_snapshot(key)
            return partition_cls(**_read_result(p, error, snapshot, UNINITIALIZED_START_OFFSET))

        results = await self._answer_each(request, result_cls, answer)
        return ReadShareGroupStateSummaryResponse(version=version, results=results)

    async def _answer_errors(
        self, request: Any, result_cls: Any, apply: Callable[[ShareStateKey, Any], Awaitable[ErrorCode]]
    ) -> list[Any]:
        """Initialize, Write and Delete answer each partition with an error code alone."""

        async def answer(key: ShareStateKey | None, p: Any) -> Any:
            error = await apply(key, p) if key is not None else ErrorCode.INVALID_REQUEST
            return result_cls.PartitionResult(partition=p.partition, error_code=error, error_message=None)

        return await self._answer_each(request, result_cls, answer)

    async def initialize_share_group_state(self, request: Any, version: int) -> Any:
        async def apply(key: ShareStateKey, p: Any) -> ErrorCode:
            return await self._apply(self.coordinator.plan_initialize(key, p.state_epoch, p.start_offset))

        result_cls: Any = InitializeShareGroupStateResponse.InitializeStateResult
        results = await self._answer_errors(request, result_cls, apply)
        return InitializeShareGroupStateResponse(version=version, results=results)

    async def write_share_group_state(self, request: Any, version: int) -> Any:
        async def apply(key: ShareStateKey, p: Any) -> ErrorCode:
            batches = _batches(p.state_batches)
            return await self._write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches)

        result_cls: Any = WriteShareGroupStateResponse.WriteStateResult
        results = await self._answer_errors(request, result_cls, apply)
        return WriteShareGroupStateResponse(version=version, results=results)

    async def delete_share_group_state(self, request: Any, version: int) -> Any:
        async def apply(key: ShareStateKey, p: Any) -> ErrorCode:
            return await self._apply(self.coordinator.plan_delete(key))

        result_cls: Any = DeleteShareGroupStateResponse.DeleteStateResult
        results = await self._answer_errors(request, result_cls, apply)
        return DeleteShareGroupStateResponse(version=version, results=results)

    async def _write(
        self,
        key: ShareStateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: tuple[StateBatch, ...],
    ) -> ErrorCode:
        return await self._apply(
            self.coordinator.plan_write(key, state_epoch, leader_epoch, start_offset, batches)
        )

    async def _apply(self, plan: ShareWritePlan) -> ErrorCode:
        """Append the plan's records, wait for the ISR, then apply it."""
        if plan.error_code != ErrorCode.NONE or not plan.records:
            return plan.error_code
        part = self.ctx.replicas.get(SHARE_STATE_TOPIC, plan.partition)
        if part is None:
            return ErrorCode.NOT_COORDINATOR
        now = now_ms()
        batch = build_batch([Record(k, v) for k, v in plan.records], timestamp_ms=now)
        result = self.ctx.replicas.append(part, memoryview(batch), now)
        if result.error_code != ErrorCode.NONE:
            return result.error_code
        loads = self._loads.get(plan.partition, 0)
        error = await self._wait_replicated(
            SHARE_STATE_TOPIC, plan.partition, result.last_offset, WRITE_TIMEOUT_MS
        )
        if error != ErrorCode.NONE:
            return error
        if self._loads.get(plan.partition, 0) != loads:
            return ErrorCode.NOT_COORDINATOR  # unloaded meanwhile: the new coordinator replays the log
        self.coordinator.apply(plan)
        return ErrorCode.NONE

    # --- the partition leaders' persister ----------------------------------------------------------------

    async def _coordinator_of(self, key: ShareStateKey) -> int | None:
        await self.topic.ensure()
        view = self.ctx.cluster.topics.get(SHARE_STATE_TOPIC)
        if view is None:
            return None
        leader = view.partitions[state_partition_for(key, self.num_partitions)].leader_id
        return leader if leader >= 0 else None

    async def _call(self, key: ShareStateKey, request: Any, handler: RequestHandler) -> Any | None:
        leader = await self._coordinator_of(key)
        if leader is None:
            return None
        if leader == self.node_id:
            return await handler(request, 0)
        broker = next((b for b in self.ctx.cluster.brokers if b.node_id == leader), None)
        if broker is None:
            return None
        self.rpc.channels.set_address(leader, (broker.host, broker.port))
        try:
            return await self.rpc.call(leader, request, 0)
        except PeerUnavailable as exc:
            log.debug("share state of %s from node %d: %s", key, leader, exc)
            return None

    async def read(self, key: ShareStateKey, leader_epoch: int) -> tuple[ErrorCode, ShareSnapshot | None]:
        """The share partition's durable state (None: never written), or why it could not be read."""
        data: Any = ReadShareGroupStateRequest.ReadStateData
        request = ReadShareGroupStateRequest(
            group_id=key.group_id,
            topics=[
                data(
                    topic_id=key.topic_id,
                    partitions=[data.PartitionData(partition=key.partition, leader_epoch=leader_epoch)],
                )
            ],
        )
        response = await self._call(key, request, self.read_share_group_state)
        if response is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        (result,) = response.results[0].partitions
        if result.error_code != ErrorCode.NONE:
            return ErrorCode(result.error_code), None
        if result.start_offset < 0:
            return ErrorCode.NONE, None
        return ErrorCode.NONE, ShareSnapshot(
            0, result.state_epoch, leader_epoch, result.start_offset, _batches(result.state_batches)
        )

    async def read_summary(self, key: ShareStateKey) -> tuple[ErrorCode, int, int]:
        """The share partition's (error, state epoch, start offset); start offset -1: never written."""
        data: Any = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
        request = ReadShareGroupStateSummaryRequest(
            group_id=key.group_id,
            topics=[
                data(
                    topic_id=key.topic_id,
                    partitions=[data.PartitionData(partition=key.partition, leader_epoch=-1)],
                )
            ],
        )
        response = await self._call(key, request, self.read_share_group_state_summary)
        if response is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, 0, UNINITIALIZED_START_OFFSET
        (result,) = response.results[0].partitions
        return ErrorCode(result.error_code), result.state_epoch, result.start_offset

    async def initialize(self, key: ShareStateKey, state_epoch: int, start_offset: int) -> ErrorCode:
        """Start the share partition's state over at ``state_epoch`` from ``start_offset``."""
        data: Any = InitializeShareGroupStateRequest.InitializeStateData
        request = InitializeShareGroupStateRequest(
            group_id=key.group_id,
            topics=[
                data(
                    topic_id=key.topic_id,
                    partitions=[
                        data.PartitionData(
                            partition=key.partition, state_epoch=state_epoch, start_offset=start_offset
                        )
                    ],
                )
            ],
        )
        response = await self._call(key, request, self.initialize_share_group_state)
        if response is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        (result,) = response.results[0].partitions
        return ErrorCode(result.error_code)

    async def delete(self, key: ShareStateKey) -> ErrorCode:
        """Delete the share partition's state (it starts over from share.auto.offset.reset)."""
        data: Any = DeleteShareGroupStateRequest.DeleteStateData
        request = DeleteShareGroupStateRequest(
            group_id=key.group_id,
            topics=[data(topic_id=key.topic_id, partitions=[data.PartitionData(partition=key.partition)])],
        )
        response = await self._call(key, request, self.delete_share_group_state)
        if response is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        (result,) = response.results[0].partitions
        return ErrorCode(result.error_code)

    async def write(
        self,
        key: ShareStateKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
    ) -> ErrorCode:
        data: Any = WriteShareGroupStateRequest.WriteStateData
        partition_cls: Any = data.PartitionData
        request = WriteShareGroupStateRequest(
            group_id=key.group_id,
            topics=[
                data(
                    topic_id=key.topic_id,
                    partitions=[
                        partition_cls(
                            partition=key.partition,
                            state_epoch=state_epoch,
                            leader_epoch=leader_epoch,
                            start_offset=start_offset,
                            state_batches=[
                                partition_cls.StateBatch(
                                    first_offset=b.first_offset,
                                    last_offset=b.last_offset,
                                    delivery_state=int(b.delivery_state),
                                    delivery_count=b.delivery_count,
                                )
                                for b in batches
                            ],
                        )
                    ],
                )
            ],
        )
        response = await self._call(key, request, self.write_share_group_state)
        if response is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        (result,) = response.results[0].partitions
        return ErrorCode(result.error_code)
