"""The shell around the group coordinator: parked requests, timers, ``__consumer_offsets`` I/O.

The pure :class:`GroupCoordinator` holds every group; this module gives it tokens for JoinGroup and
SyncGroup requests that wait for a rebalance (an asyncio future each, resolved from the coordinator's
completions), ticks its timers, appends the records it produces to the ``__consumer_offsets``
partition of the group (offset commits are answered only once their records are in the log), and
loads (replays) every partition this node leads when the metadata image says so.

The internal topic is created on the first FindCoordinator for a group (io/internal_topics.py).
TxnOffsetCommit (KIP-98) appends its offsets as a transactional batch of the producer; they stay pending
until the transaction's marker reaches the group's partition (:meth:`GroupService.on_txn_marker`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pykraft.broker.handlers import BrokerContext, ClusterView
from pykraft.coordinator import consumer_group_api, group_api, share_group_api
from pykraft.coordinator.consumer_group import ConsumerGroupConfig, MigrationPolicy
from pykraft.coordinator.group_coordinator import (
    GroupConfig,
    GroupCoordinator,
    JoinResult,
    SyncResult,
    WritePlan,
)
from pykraft.coordinator.offsets_records import OFFSETS_TOPIC, RecordFormatError
from pykraft.coordinator.share_group import ShareGroupConfig
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode
from pykraft.io.internal_topics import CreateTopics, InternalTopic, iter_batches
from pykraft.io.waiting import park, wait_event
from pykraft.metadata.image import CONFIG_RESOURCE_TYPE_GROUP, ConfigurationsImage
from pykraft.protocol.messages import ApiKey
from pykraft.protocol.records import CONTROL_TYPE_COMMIT, Record, build_batch, control_type_of

log = logging.getLogger("pykraft.groups")

RequestHandler = Callable[[Any, int], Awaitable[Any]]

# (client id, client host) of the request being handled; set by the node for JoinGroup, whose member
# records keep them for DescribeGroups. Each connection is its own task, so this is per connection.
CURRENT_CLIENT: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar(
    "pykraft_current_client", default=("", "")
)

# The timer loop never sleeps longer than this, so a deadline added by a request is never missed by
# more than a wakeup.
MAX_TICK_INTERVAL_S = 0.5
# How long an offset commit waits for the ISR of a replicated offsets partition (offsets.commit.timeout.ms).
OFFSET_COMMIT_TIMEOUT_MS = 5000


# (transactional id, producer id, epoch, partitions) -> the transaction coordinator's verdict per partition.
VerifyTxn = Callable[[str, int, int, list[tuple[str, int]]], Awaitable[dict[tuple[str, int], ErrorCode]]]


async def _no_transactions(
    transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], ErrorCode]:
    return {tp: ErrorCode.INVALID_TXN_STATE for tp in partitions}


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def client_host_of(peer: str) -> str:
    """Kafka reports client hosts as InetAddress.toString(): "/127.0.0.1"."""
    return "/" + peer.rsplit(":", 1)[0]


class GroupService:
    def __init__(
        self,
        config: NodeConfig,
        ctx: BrokerContext,
        create_topics: CreateTopics,
        rng: random.Random,
        wait_replicated: Callable[[str, int, int, int], Awaitable[ErrorCode]] | None = None,
        verify_txn: VerifyTxn | None = None,
        lease_holds: Callable[[], bool] | None = None,
    ) -> None:
        self.node_id = config.node_id
        self.ctx = ctx
        self.num_partitions = config.offsets_topic_num_partitions
        self.coordinator = GroupCoordinator(
            GroupConfig(
                offsets_topic_num_partitions=config.offsets_topic_num_partitions,
                group_min_session_timeout_ms=config.group_min_session_timeout_ms,
                group_max_session_timeout_ms=config.group_max_session_timeout_ms,
                group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                consumer=ConsumerGroupConfig(
                    heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                    session_timeout_ms=config.group_consumer_session_timeout_ms,
                    max_size=config.group_consumer_max_size,
                    assignors=config.group_consumer_assignors,
                    migration_policy=MigrationPolicy(config.group_consumer_migration_policy),
                ),
                share=ShareGroupConfig(
                    session_timeout_ms=config.group_share_session_timeout_ms,
                    heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
                    max_size=config.group_share_max_size,
                ),
            ),
            rng,
        )
        self.offsets_topic = InternalTopic(
            OFFSETS_TOPIC,
            config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor,
            ctx,
            create_topics,
            config.offsets_topic_segment_bytes,
        )
        # Group writes on a replicated __consumer_offsets partition are answered once the ISR has them
        # (Kafka appends them with acks=all); None: one replica, answered once appended.
        self._wait_replicated = wait_replicated
        self._verify_txn: VerifyTxn = verify_txn or _no_transactions
        # The broker's coordinator lease (broker/coordinator_lease.py): while it does not hold, every
        # group answers NOT_COORDINATOR. None: a node whose controller is in-process.
        self._lease_holds = lease_holds
        self._waiting: dict[int, asyncio.Future[JoinResult | SyncResult]] = {}
        # Loads and unloads of each __consumer_offsets partition: a write applies only if none came between
        # its append and its replication.
        self._loads: dict[int, int] = {}
        self._next_token = 0
        self._wakeup = asyncio.Event()
        # The metadata image's configs last handed to the coordinator (on_image).
        self._configs: ConfigurationsImage | None = None
        # Told of each share group member whose session expired (the share partitions it holds records
        # of release them: io/share_service.py).
        self.on_share_member_departed: Callable[[str, str], None] | None = None

    # --- wiring -----------------------------------------------------------------------------------------

    def request_handlers(self) -> dict[int, RequestHandler]:
        handlers: dict[int, RequestHandler] = {
            ApiKey.JOIN_GROUP: self.join_group,
            ApiKey.SYNC_GROUP: self.sync_group,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave_group,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
            ApiKey.OFFSET_DELETE: self.offset_delete,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            ApiKey.DELETE_GROUPS: self.delete_groups,
            ApiKey.CONSUMER_GROUP_HEARTBEAT: self.consumer_group_heartbeat,
            ApiKey.CONSUMER_GROUP_DESCRIBE: self.consumer_group_describe,
            ApiKey.SHARE_GROUP_HEARTBEAT: self.share_group_heartbeat,
            ApiKey.SHARE_GROUP_DESCRIBE: self.share_group_describe,
        }
        return {api_key: self._under_lease(handler) for api_key, handler in handlers.items()}

    def _under_lease(self, handler: RequestHandler) -> RequestHandler:
        """Each request is decided with the lease as it stands when it is handled (issue 32)."""
        lease_holds = self._lease_holds
        if lease_holds is None:
            return handler

        async def handle(request: Any, version: int) -> Any:
            self.coordinator.serving = lease_holds()
            return await handler(request, version)

        return handle

    async def run_timers(self) -> None:
        """Tick the coordinator at its next deadline (spawned by the node for its lifetime)."""
        while True:
            deadline = self.coordinator.next_deadline_ms()
            wait_s = MAX_TICK_INTERVAL_S
            if deadline is not None:
                wait_s = min(max((deadline - now_ms()) / 1000, 0.0), MAX_TICK_INTERVAL_S)
            if wait_s > 0:
                await wait_event(self._wakeup, wait_s)
            self._wakeup.clear()
            self.coordinator.tick(now_ms())
            self._after(wake_timers=False)

    async def stop(self) -> None:
        """Node shutdown: stop creating the offsets topic and drop parked joins and syncs (their
        connections are closing; the clients rejoin elsewhere or after the restart)."""
        await self.offsets_topic.stop()
        waiting, self._waiting = self._waiting, {}
        for fut in waiting.values():
            fut.cancel()

    def on_image(self, view: ClusterView, configs: ConfigurationsImage) -> None:
        """Load the ``__consumer_offsets`` partitions this node now leads; drop the others. Group configs
        (KIP-848, the GROUP resources' ConfigRecords) go to the consumer group coordinator first, when
        they changed (Kafka's DynamicConfigPublisher -> GroupCoordinator.updateGroupConfig)."""
        if configs is not self._configs:
            self._configs = configs
            group_configs = {
                resource.resource_name: values
                for resource, values in configs.resources.items()
                if resource.resource_type == CONFIG_RESOURCE_TYPE_GROUP
            }
            self.coordinator.consumer.set_group_configs(group_configs)
            self.coordinator.share.set_group_configs(group_configs)
        topic = view.topics.get(OFFSETS_TOPIC)
        led = {p.partition_index for p in topic.partitions if p.leader_id == self.node_id} if topic else set()
        known = self.coordinator.owned_partitions | self.coordinator.loading_partitions
        for partition in sorted(known - led):
            self.coordinator.unload(partition)
            self._loads[partition] = self._loads.get(partition, 0) + 1
        for partition in sorted(led - known):
            self._loads[partition] = self._loads.get(partition, 0) + 1
            self._load(partition)
        self._after()

    def _load(self, partition: int) -> None:
        part = self.ctx.replicas.get(OFFSETS_TOPIC, partition)
        if part is None:
            return  # not hosted here yet; a later image brings it
        started = time.monotonic()
        coordinator = self.coordinator
        coordinator.begin_load(partition)
        records = 0
        load_ms = now_ms()
        for header, batch_records in iter_batches(part.log):
            if header.is_control:
                # A transaction's marker decides its TxnOffsetCommit offsets (pending until here).
                if batch_records:
                    coordinator.complete_txn(
                        partition,
                        header.producer_id,
                        control_type_of(batch_records[0].key) == CONTROL_TYPE_COMMIT,
                    )
                continue
            producer_id = header.producer_id if header.is_transactional else -1
            for record in batch_records:
                try:
                    coordinator.replay(partition, record.key, record.value, load_ms, producer_id)
                except RecordFormatError as exc:
                    log.warning(
                        "%s-%d offset %d: skipping a record that does not decode: %s",
                        OFFSETS_TOPIC,
                        partition,
                        record.offset,
                        exc,
                    )
                records += 1
        coordinator.finish_load(partition, load_ms)
        if records:
            log.info(
                "loaded %d record(s) of %s-%d in %.0f ms",
                records,
                OFFSETS_TOPIC,
                partition,
                (time.monotonic() - started) * 1000,
            )

    # --- plumbing ------------------------------------------------------------------------------------

    def _park(self) -> tuple[int, asyncio.Future[JoinResult | SyncResult]]:
        self._next_token += 1
        fut: asyncio.Future[JoinResult | SyncResult] = asyncio.get_running_loop().create_future()
        self._waiting[self._next_token] = fut
        return self._next_token, fut

    def _after(self, *, wake_timers: bool = True) -> None:
        """Hand out what the coordinator completed, write what it queued, and let the timer loop see
        any new deadline."""
        for token, result in self.coordinator.take_completions():
            fut = self._waiting.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(result)
        for partition, records in self.coordinator.take_writes():
            error, _ = self._append(partition, records)
            if error != ErrorCode.NONE:
                log.warning("group metadata write to %s-%d failed: %s", OFFSETS_TOPIC, partition, error.name)
        departed = self.coordinator.share.take_departed()
        if self.on_share_member_departed is not None:
            for group_id, member_id in departed:
                self.on_share_member_departed(group_id, member_id)
        if wake_timers:
            self._wakeup.set()

    def _append(
        self,
        partition: int,
        records: list[tuple[bytes, bytes | None]],
        producer_id: int = -1,
        producer_epoch: int = -1,
        verification_guard: object | None = None,
    ) -> tuple[ErrorCode, int]:
        """(error, last offset appended; -1 when nothing was). With a producer id: one transactional
        batch of that producer (TxnOffsetCommit), its sequence continuing the producer's in this
        partition (only this coordinator writes that producer's batches here)."""
        if not records:
            return ErrorCode.NONE, -1
        part = self.ctx.replicas.get(OFFSETS_TOPIC, partition)
        if part is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        now = now_ms()
        rows = [Record(key, value) for key, value in records]
        if producer_id < 0:
            batch = build_batch(rows, timestamp_ms=now)
            result = self.ctx.replicas.append(part, memoryview(batch), now)
        else:
            entry = part.producer_state.entry(producer_id)
            sequence = 0
            if entry is not None and entry.producer_epoch == producer_epoch and not entry.is_empty:
                sequence = (entry.last_seq + 1) & 0x7FFFFFFF
            batch = build_batch(
                rows,
                timestamp_ms=now,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=sequence,
                is_transactional=True,
            )
            result = self.ctx.replicas.append(
                part, memoryview(batch), now, verification_guard=verification_guard
            )
        return result.error_code, result.last_offset

    async def _write(self, plan: WritePlan, verification_guard: object | None = None) -> ErrorCode:
        """Append a plan's records and answer once the ISR has them; only then are they visible. A write
        that fails is never applied: a paused coordinator that resumes and appends a commit its
        replacement never sees must not serve it from memory (issue 32; Kafka keeps such commits pending
        and drops them when the append fails). A write whose partition was unloaded (or unloaded and
        loaded again, replaying the log) meanwhile is not applied either."""
        error, last_offset = self._append(
            plan.partition, plan.records, plan.producer_id, plan.producer_epoch, verification_guard
        )
        if error != ErrorCode.NONE:
            return error
        loads = self._loads.get(plan.partition, 0)
        if last_offset >= 0 and self._wait_replicated is not None:
            error = await self._wait_replicated(
                OFFSETS_TOPIC, plan.partition, last_offset, OFFSET_COMMIT_TIMEOUT_MS
            )
        if error == ErrorCode.NONE and self._loads.get(plan.partition, 0) == loads:
            self.coordinator.apply(plan, now_ms())
        return error

    # --- handlers ------------------------------------------------------------------------------------

    async def join_group(self, request: Any, version: int) -> Any:
        client_id, peer = CURRENT_CLIENT.get()
        token, fut = self._park()
        self.coordinator.join_group(
            group_api.join_request(request, version, client_id, client_host_of(peer)),
            token,
            now_ms(),
            # A classic member may join a consumer group (KIP-848 online migration): its topics' ids.
            consumer_group_api.topics_by_name(self.ctx.cluster.topics),
        )
        self._after()
        park()  # waits for the other members (Kafka's DelayedJoin): its queued.max.requests slot goes back
        result = await fut
        assert isinstance(result, JoinResult)
        return group_api.join_response(result, version)

    async def sync_group(self, request: Any, version: int) -> Any:
        token, fut = self._park()
        self.coordinator.sync_group(group_api.sync_request(request, version), token, now_ms())
        self._after()
        park()  # waits for the leader's assignment: its queued.max.requests slot goes back
        result = await fut
        assert isinstance(result, SyncResult)
        return group_api.sync_response(result, version)

    async def heartbeat(self, request: Any, version: int) -> Any:
        response = group_api.handle_heartbeat(self.coordinator, request, version, now_ms())
        self._after()
        return response

    async def leave_group(self, request: Any, version: int) -> Any:
        response = group_api.handle_leave_group(self.coordinator, request, version, now_ms())
        self._after()
        return response

    async def offset_commit(self, request: Any, version: int) -> Any:
        topics = self.ctx.cluster.topics

        def partition_exists(topic: str, partition: int) -> bool:
            view = topics.get(topic)
            return view is not None and any(p.partition_index == partition for p in view.partitions)

        req = group_api.commit_request(request, version, partition_exists)
        if not req.offsets:
            return group_api.commit_response(request, None, version, ErrorCode.NONE, partition_exists)
        plan = self.coordinator.commit_offsets(req, now_ms())
        error = ErrorCode.NONE
        if plan.error_code == ErrorCode.NONE:
            committing = [tp for tp, e in plan.partition_errors.items() if e == ErrorCode.NONE]
            self.coordinator.begin_pending_commit(req.group_id, committing)
            try:
                error = await self._write(plan)
            finally:
                self.coordinator.end_pending_commit(req.group_id, committing)
        self._after()
        return group_api.commit_response(request, plan, version, error, partition_exists)

    async def txn_offset_commit(self, request: Any, version: int) -> Any:
        """TxnOffsetCommit (28): the offsets join the producer's transaction. KIP-890: the first write
        of the producer's transaction to this ``__consumer_offsets`` partition is checked with the
        transaction coordinator (the partition must have been added with AddOffsetsToTxn)."""
        req = group_api.txn_commit_request(request, version)
        plan = self.coordinator.txn_commit_offsets(req, request.producer_id, request.producer_epoch, now_ms())
        error = ErrorCode.NONE
        if plan.error_code == ErrorCode.NONE and plan.records:
            guard: object | None = None
            part = self.ctx.replicas.get(OFFSETS_TOPIC, plan.partition)
            if part is not None and self.ctx.replicas.needs_verification(part, request.producer_id):
                guard = self.ctx.replicas.begin_verification(part, request.producer_id)
                verdict = await self._verify_txn(
                    request.transactional_id or "",
                    request.producer_id,
                    request.producer_epoch,
                    [(OFFSETS_TOPIC, plan.partition)],
                )
                error = verdict.get((OFFSETS_TOPIC, plan.partition), ErrorCode.INVALID_TXN_STATE)
            if error == ErrorCode.NONE:
                error = await self._write(plan, guard)
        self._after()
        return group_api.txn_commit_response(request, plan, version, error)

    def on_txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """WriteTxnMarkers wrote a marker to ``__consumer_offsets`` partition ``partition`` here."""
        self.coordinator.complete_txn(partition, producer_id, commit)

    async def offset_fetch(self, request: Any, version: int) -> Any:
        return group_api.handle_offset_fetch(self.coordinator, request, version)

    async def offset_delete(self, request: Any, version: int) -> Any:
        plan = group_api.offset_delete_plan(self.coordinator, request)
        error = await self._write(plan) if plan.error_code == ErrorCode.NONE else ErrorCode.NONE
        self._after()
        return group_api.offset_delete_response(request, plan, version, error)

    async def consumer_group_heartbeat(self, request: Any, version: int) -> Any:
        """ConsumerGroupHeartbeat (KIP-848): answered at once; its records are appended before."""
        client_id, peer = CURRENT_CLIENT.get()
        result = self.coordinator.consumer_group_heartbeat(
            consumer_group_api.heartbeat_request(request, version, client_id, client_host_of(peer)),
            consumer_group_api.topics_by_name(self.ctx.cluster.topics),
            now_ms(),
        )
        self._after()
        return consumer_group_api.heartbeat_response(result, version)

    async def consumer_group_describe(self, request: Any, version: int) -> Any:
        return consumer_group_api.handle_describe(self.coordinator, request, version, self.ctx.cluster.topics)

    async def share_group_heartbeat(self, request: Any, version: int) -> Any:
        """ShareGroupHeartbeat (KIP-932): answered at once."""
        client_id, peer = CURRENT_CLIENT.get()
        result = self.coordinator.share_group_heartbeat(
            share_group_api.heartbeat_request(request, client_id, client_host_of(peer)),
            consumer_group_api.topics_by_name(self.ctx.cluster.topics),
            now_ms(),
        )
        self._after()
        return share_group_api.heartbeat_response(result, version)

    async def share_group_describe(self, request: Any, version: int) -> Any:
        return share_group_api.handle_describe(self.coordinator, request, version, self.ctx.cluster.topics)

    async def list_groups(self, request: Any, version: int) -> Any:
        return group_api.handle_list_groups(self.coordinator, request, version)

    async def describe_groups(self, request: Any, version: int) -> Any:
        return group_api.handle_describe_groups(self.coordinator, request, version)

    async def delete_groups(self, request: Any, version: int) -> Any:
        results: dict[str, ErrorCode] = {}
        for plan in group_api.delete_groups_plans(self.coordinator, request):
            error = await self._write(plan)
            for group_id, group_error in plan.group_errors.items():
                if group_error == ErrorCode.NONE and error != ErrorCode.NONE:
                    group_error = group_api.append_error_for_commit(error)
                results[group_id] = group_error
        self._after()
        return group_api.delete_groups_response(request, results, version)
