"""The shell around the transaction coordinator: ``__transaction_state`` I/O, markers, timers, verification.

The pure :class:`TransactionCoordinator` decides; this module

- appends the records it asks for to the id's ``__transaction_state`` partition and, once the ISR has
  them, tells it (:meth:`TransactionCoordinator.complete_write`) and answers the client;
- writes the COMMIT/ABORT markers of a prepared transaction to the leader of every partition in it with
  WriteTxnMarkers (this node's own handler for partitions it leads, the leader's client listener for the
  others), retrying until each is written or its topic is gone, then writes the Complete state;
- loads (replays) every ``__transaction_state`` partition this node comes to lead, at that leader epoch
  (the coordinator epoch markers carry), and finishes the transactions a previous coordinator left prepared;
- aborts transactions older than their timeout and expires idle transactional ids on timers;
- answers KIP-890 verification for the produce path and TxnOffsetCommit (:meth:`TxnService.verify`): the
  coordinator's own view when this node is the coordinator, AddPartitionsToTxn v4 ``verify_only`` to the
  coordinator otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kafka.protocol.admin import DescribeTransactionsResponse, ListTransactionsResponse
from kafka.protocol.producer import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    WriteTxnMarkersRequest,
)

from pykraft.broker.handlers import BrokerContext
from pykraft.coordinator.txn_coordinator import (
    STATE_NAMES,
    MarkerJob,
    TransactionCoordinator,
    TxnConfig,
    TxnOutcome,
    TxnWrite,
)
from pykraft.coordinator.txn_records import TRANSACTION_STATE_TOPIC, TxnRecordError
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode
from pykraft.core.partitions import by_topic as group_by_topic
from pykraft.io.internal_topics import CreateTopics, InternalTopic, iter_batches
from pykraft.io.rpc_channel import ChannelSecurity, PeerUnavailable, RpcClient
from pykraft.io.waiting import wait_event
from pykraft.protocol.messages import ApiKey
from pykraft.protocol.records import Record, build_batch

log = logging.getLogger("pykraft.transactions")

RequestHandler = Callable[[Any, int], Awaitable[Any]]
TopicPartition = tuple[str, int]

# Kafka appends transaction state with acks=all and request.timeout.ms of the coordinator's choosing.
TXN_WRITE_TIMEOUT_MS = 5000
MARKER_RETRY_BACKOFF_S = 0.05
MARKER_RETRY_BACKOFF_MAX_S = 1.0
MARKER_REQUEST_TIMEOUT_MS = 5000
# How long a request waits for the id's previous transaction to complete before it answers
# CONCURRENT_TRANSACTIONS (the client then retries after its back-off).
COMPLETION_WAIT_S = 1.0
WRITE_TXN_MARKERS_VERSION = 1
ADD_PARTITIONS_VERIFY_VERSION = 4


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def txn_append_error(error: ErrorCode) -> ErrorCode:
    """How Kafka answers a request whose ``__transaction_state`` append failed
    (TransactionStateManager.appendTransactionToLog): retriable coordinator errors for the client."""
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return ErrorCode.COORDINATOR_NOT_AVAILABLE


def verification_error(error: ErrorCode) -> ErrorCode:
    """A failed KIP-890 verification as the produce path answers it to clients that predate
    TRANSACTION_ABORTABLE (Kafka's AddPartitionsToTxnManager): retriable while the coordinator moves or
    is busy, INVALID_PRODUCER_EPOCH when the producer was fenced."""
    if error in (
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def fenced_for_version(error: ErrorCode, version: int, first_version_with_fenced: int) -> ErrorCode:
    """KIP-588: PRODUCER_FENCED (90) is INVALID_PRODUCER_EPOCH (47) to request versions before it."""
    if error == ErrorCode.PRODUCER_FENCED and version < first_version_with_fenced:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


class TxnService:
    def __init__(
        self,
        config: NodeConfig,
        ctx: BrokerContext,
        create_topics: CreateTopics,
        *,
        wait_replicated: Callable[[str, int, int, int], Awaitable[ErrorCode]],
        write_markers_locally: RequestHandler,
        after_producer_id: Callable[[], None] = lambda: None,
        broker_security: ChannelSecurity | None = None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.ctx = ctx
        self.coordinator = TransactionCoordinator(
            TxnConfig(
                transaction_state_num_partitions=config.transaction_state_log_num_partitions,
                transaction_max_timeout_ms=config.transaction_max_timeout_ms,
                transactional_id_expiration_ms=config.transactional_id_expiration_ms,
                offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            )
        )
        self.topic = InternalTopic(
            TRANSACTION_STATE_TOPIC,
            config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor,
            ctx,
            create_topics,
            config.transaction_state_log_segment_bytes,
        )
        self._wait_replicated = wait_replicated
        self._write_markers_locally = write_markers_locally
        # The broker's producer-id block may need a refill after an id was handed out (KIP-730).
        self._after_producer_id = after_producer_id
        self.rpc = RpcClient(
            {},
            client_id=f"pykraft-txn-{config.node_id}",
            request_timeout_ms=MARKER_REQUEST_TIMEOUT_MS,
            security=broker_security,
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self._wakeup = asyncio.Event()
        # Transactional ids whose transaction is being completed (markers, Complete write) here.
        self._completing: dict[str, asyncio.Event] = {}

    # --- wiring -----------------------------------------------------------------------------------------

    def request_handlers(self) -> dict[int, RequestHandler]:
        return {
            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            ApiKey.END_TXN: self.end_txn,
            ApiKey.DESCRIBE_TRANSACTIONS: self.describe_transactions,
            ApiKey.LIST_TRANSACTIONS: self.list_transactions,
        }

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def run_timers(self) -> None:
        """Abort timed-out transactions and expire idle ids, at Kafka's two intervals."""
        config = self.config
        next_abort = now_ms() + config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        next_expire = now_ms() + config.transaction_remove_expired_transaction_cleanup_interval_ms
        while True:
            wait_ms = max(min(next_abort, next_expire) - now_ms(), 0)
            await wait_event(self._wakeup, wait_ms / 1000)
            self._wakeup.clear()
            now = now_ms()
            writes: list[TxnWrite] = []
            if now >= next_abort:
                next_abort = now + config.transaction_abort_timed_out_transaction_cleanup_interval_ms
                writes += self.coordinator.abort_timed_out(now)
            if now >= next_expire:
                next_expire = now + config.transaction_remove_expired_transaction_cleanup_interval_ms
                writes += self.coordinator.expire_ids(now)
            for write in writes:
                self._spawn(self._perform(write))

    async def stop(self) -> None:
        await self.topic.stop()
        tasks, self._tasks = set(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.rpc.close()

    # --- loading ------------------------------------------------------------------------------------------

    def on_image(self) -> None:
        """Load the ``__transaction_state`` partitions this node now leads (again, at a new leader epoch);
        drop the others."""
        topic = self.ctx.cluster.topics.get(TRANSACTION_STATE_TOPIC)
        led = {
            p.partition_index: p.leader_epoch
            for p in (topic.partitions if topic is not None else ())
            if p.leader_id == self.node_id and not self.ctx.fenced
        }
        coordinator = self.coordinator
        known = {**coordinator.owned_partitions, **coordinator.loading_partitions}
        for partition in sorted(set(known) - set(led)):
            coordinator.unload(partition)
        for partition, epoch in sorted(led.items()):
            if known.get(partition) != epoch:
                self._load(partition, epoch)

    def _load(self, partition: int, coordinator_epoch: int) -> None:
        part = self.ctx.replicas.get(TRANSACTION_STATE_TOPIC, partition)
        if part is None:
            return  # not hosted here yet; a later image brings it
        started = time.monotonic()
        coordinator = self.coordinator
        coordinator.begin_load(partition, coordinator_epoch)
        records = 0
        for header, batch_records in iter_batches(part.log):
            if header.is_control:
                continue
            for record in batch_records:
                if record.key is None:
                    continue
                try:
                    coordinator.replay(partition, record.key, record.value)
                except (TxnRecordError, ValueError) as exc:
                    log.warning(
                        "%s-%d offset %d: skipping a record that does not decode: %s",
                        TRANSACTION_STATE_TOPIC,
                        partition,
                        record.offset,
                        exc,
                    )
                records += 1
        for job in coordinator.finish_load(partition):
            self._spawn(self._complete_transaction(job))
        if records:
            log.info(
                "loaded %d record(s) of %s-%d at coordinator epoch %d in %.0f ms",
                records,
                TRANSACTION_STATE_TOPIC,
                partition,
                coordinator_epoch,
                (time.monotonic() - started) * 1000,
            )

    # --- writes and markers ----------------------------------------------------------------------------

    async def _perform(self, write: TxnWrite) -> ErrorCode:
        """Append ``write``, wait for the ISR, apply it; start the markers it calls for."""
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        part = self.ctx.replicas.get(TRANSACTION_STATE_TOPIC, write.partition)
        if part is not None:
            now = now_ms()
            batch = build_batch([Record(write.key, write.value)], timestamp_ms=now)
            result = self.ctx.replicas.append(part, memoryview(batch), now)
            error = result.error_code
            if error == ErrorCode.NONE and result.last_offset >= 0:
                error = await self._wait_replicated(
                    TRANSACTION_STATE_TOPIC, write.partition, result.last_offset, TXN_WRITE_TIMEOUT_MS
                )
        if error != ErrorCode.NONE:
            log.info(
                "transaction state write for %r failed: %s", write.transactional_id, ErrorCode(error).name
            )
        for job in self.coordinator.complete_write(write, error):
            self._spawn(self._complete_transaction(job))
        return ErrorCode.NONE if error == ErrorCode.NONE else txn_append_error(error)

    async def _settle(
        self, transactional_id: str, decide: Callable[[], TxnOutcome]
    ) -> tuple[TxnOutcome, ErrorCode]:
        """Decide, write, answer. A request that finds the id's previous transaction still being
        completed here (markers, then the Complete write) waits for that, bounded, and decides again,
        instead of sending the client into its CONCURRENT_TRANSACTIONS back-off: the next transaction
        of a producer usually starts a millisecond after EndTxn was answered."""
        outcome = decide()
        completing = self._completing.get(transactional_id)
        if outcome.error_code == ErrorCode.CONCURRENT_TRANSACTIONS and completing is not None:
            await wait_event(completing, COMPLETION_WAIT_S)
            outcome = decide()
        return outcome, await self._answer(outcome)

    async def _answer(self, outcome: TxnOutcome) -> ErrorCode:
        if outcome.write is None:
            return outcome.error_code
        error = await self._perform(outcome.write)
        return outcome.write.answer if error == ErrorCode.NONE else error

    def _still_coordinator(self, job: MarkerJob) -> bool:
        partition = self.coordinator.partition_for(job.transactional_id)
        return self.coordinator.owned_partitions.get(partition) == job.coordinator_epoch

    async def _complete_transaction(self, job: MarkerJob) -> None:
        """Markers to every partition of the transaction, then the Complete state."""
        completing = self._completing.setdefault(job.transactional_id, asyncio.Event())
        try:
            await self._write_markers_then_complete(job)
        finally:
            if self._completing.get(job.transactional_id) is completing:
                del self._completing[job.transactional_id]
            completing.set()

    async def _write_markers_then_complete(self, job: MarkerJob) -> None:
        remaining = set(job.partitions)
        backoff_s = MARKER_RETRY_BACKOFF_S
        while remaining:
            if not self._still_coordinator(job):
                return
            by_leader: dict[int, list[TopicPartition]] = {}
            for topic, partition in sorted(remaining):
                view = self.ctx.cluster.topics.get(topic)
                if view is None or not 0 <= partition < len(view.partitions):
                    # The topic was deleted: there is nothing left to mark (Kafka drops it too).
                    remaining.discard((topic, partition))
                    continue
                by_leader.setdefault(view.partitions[partition].leader_id, []).append((topic, partition))
            for leader, partitions in by_leader.items():
                if leader < 0:
                    continue
                for tp in await self._send_markers(job, leader, partitions):
                    remaining.discard(tp)
            if remaining:
                await asyncio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, MARKER_RETRY_BACKOFF_MAX_S)
        backoff_s = MARKER_RETRY_BACKOFF_S
        while self._still_coordinator(job):
            write = self.coordinator.markers_written(job, now_ms())
            if write is None:
                return
            if await self._perform(write) == ErrorCode.NONE:
                return
            await asyncio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, MARKER_RETRY_BACKOFF_MAX_S)

    async def _send_markers(
        self, job: MarkerJob, leader: int, partitions: list[TopicPartition]
    ) -> list[TopicPartition]:
        """One WriteTxnMarkers to ``leader``; the partitions whose marker is written."""
        by_topic = group_by_topic(partitions)
        marker_cls: Any = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(
            version=WRITE_TXN_MARKERS_VERSION,
            markers=[
                marker_cls(
                    producer_id=job.producer_id,
                    producer_epoch=job.producer_epoch,
                    transaction_result=job.commit,
                    topics=[
                        marker_cls.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                    coordinator_epoch=job.coordinator_epoch,
                )
            ],
        )
        try:
            if leader == self.node_id:
                response = await self._write_markers_locally(request, WRITE_TXN_MARKERS_VERSION)
            else:
                broker = next((b for b in self.ctx.cluster.brokers if b.node_id == leader), None)
                if broker is None:
                    return []
                self.rpc.channels.set_address(leader, (broker.host, broker.port))
                response = await self.rpc.call(leader, request, WRITE_TXN_MARKERS_VERSION)
        except PeerUnavailable as exc:
            log.debug("markers for %r to node %d: %s", job.transactional_id, leader, exc)
            return []
        written: list[TopicPartition] = []
        for marker in response.markers:
            for topic in marker.topics:
                for p in topic.partitions:
                    if p.error_code == ErrorCode.NONE:
                        written.append((topic.name, p.partition_index))
                    elif p.error_code in (
                        ErrorCode.INVALID_PRODUCER_EPOCH,
                        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                    ):
                        # A newer epoch or coordinator has been there: this marker is moot.
                        log.info(
                            "marker for %r on %s-%d refused: %s",
                            job.transactional_id,
                            topic.name,
                            p.partition_index,
                            ErrorCode(p.error_code).name,
                        )
                        written.append((topic.name, p.partition_index))
        return written

    # --- KIP-890 verification ---------------------------------------------------------------------------

    def _coordinator_node(self, transactional_id: str) -> int:
        topic = self.ctx.cluster.topics.get(TRANSACTION_STATE_TOPIC)
        index = self.coordinator.partition_for(transactional_id)
        if topic is None or index >= len(topic.partitions):
            return -1
        return topic.partitions[index].leader_id

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Whether each partition is in the producer's ongoing transaction, as the produce path answers it
        (:func:`verification_error`)."""
        leader = self._coordinator_node(transactional_id)
        if leader == self.node_id:
            error, verdict = self.coordinator.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions
            )
        else:
            error, verdict = await self._verify_remotely(
                leader, transactional_id, producer_id, producer_epoch, partitions
            )
        if error != ErrorCode.NONE:
            return {tp: verification_error(error) for tp in partitions}
        return {tp: verification_error(verdict.get(tp, ErrorCode.INVALID_TXN_STATE)) for tp in partitions}

    async def _verify_remotely(
        self,
        leader: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        broker = next((b for b in self.ctx.cluster.brokers if b.node_id == leader), None)
        if broker is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
        by_topic = group_by_topic(partitions)
        txn_cls: Any = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        request = AddPartitionsToTxnRequest(
            version=ADD_PARTITIONS_VERIFY_VERSION,
            transactions=[
                txn_cls(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    verify_only=True,
                    topics=[
                        AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ],
        )
        self.rpc.channels.set_address(leader, (broker.host, broker.port))
        try:
            response = await self.rpc.call(leader, request, ADD_PARTITIONS_VERIFY_VERSION)
        except PeerUnavailable:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
        if response.error_code != ErrorCode.NONE:
            return ErrorCode(response.error_code), {}
        verdict: dict[TopicPartition, ErrorCode] = {}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    verdict[(topic.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return ErrorCode.NONE, verdict

    # --- handlers -------------------------------------------------------------------------------------------

    async def find_coordinator_ready(self) -> None:
        """FindCoordinator for a transactional id: create ``__transaction_state`` on first use."""
        await self.topic.ensure()

    async def init_producer_id(self, request: Any, version: int) -> Any:
        """InitProducerId with a transactional id (KIP-360; the idempotent path is the node's)."""
        given = version >= 3
        producer_id = request.producer_id if given else -1
        producer_epoch = request.producer_epoch if given else -1
        outcome, error = await self._settle(
            request.transactional_id,
            lambda: self.coordinator.init_producer_id(
                request.transactional_id,
                request.transaction_timeout_ms,
                producer_id,
                producer_epoch,
                now_ms(),
                lambda: self.ctx.producer_ids.generate_producer_id(now_ms()),
            ),
        )
        self._after_producer_id()
        ok = error == ErrorCode.NONE
        return InitProducerIdResponse(
            version=version,
            throttle_time_ms=0,
            error_code=fenced_for_version(error, version, 4),
            producer_id=outcome.producer_id if ok else -1,
            producer_epoch=outcome.producer_epoch if ok else -1,
        )

    async def add_partitions_to_txn(self, request: Any, version: int) -> Any:
        topic_result: Any = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
        partition_result: Any = topic_result.AddPartitionsToTxnPartitionResult

        def results(per_partition: dict[TopicPartition, ErrorCode]) -> list[Any]:
            by_topic: dict[str, list[Any]] = {}
            for (topic, p), error in per_partition.items():
                by_topic.setdefault(topic, []).append(
                    partition_result(
                        partition_index=p, partition_error_code=fenced_for_version(error, version, 2)
                    )
                )
            return [topic_result(name=t, results_by_partition=ps) for t, ps in by_topic.items()]

        async def one(
            txn_id: str, producer_id: int, producer_epoch: int, topics: Any, verify_only: bool
        ) -> Any:
            wanted = [(t.name, p) for t in topics for p in t.partitions]
            if verify_only:
                error, verdict = self.coordinator.verify_partitions(
                    txn_id, producer_id, producer_epoch, wanted
                )
                if error != ErrorCode.NONE:
                    verdict = {tp: error for tp in wanted}
                return results(verdict)
            unknown = [tp for tp in wanted if not self._partition_exists(tp)]
            if unknown:
                # Kafka's answer (KafkaApis.handleAddPartitionsToTxnRequest): the unknown partitions
                # say so, the others were not attempted; nothing joins the transaction.
                return results(
                    {
                        tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        if tp in unknown
                        else ErrorCode.OPERATION_NOT_ATTEMPTED
                        for tp in wanted
                    }
                )
            _, error = await self._settle(
                txn_id,
                lambda: self.coordinator.add_partitions(
                    txn_id, producer_id, producer_epoch, wanted, now_ms()
                ),
            )
            return results({tp: error for tp in wanted})

        if version < 4:
            topics = await one(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                request.v3_and_below_topics,
                False,
            )
            return AddPartitionsToTxnResponse(
                version=version, throttle_time_ms=0, results_by_topic_v3_and_below=topics
            )
        result_cls: Any = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
        answers = []
        for txn in request.transactions:
            topics = await one(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics, bool(txn.verify_only)
            )
            answers.append(result_cls(transactional_id=txn.transactional_id, topic_results=topics))
        return AddPartitionsToTxnResponse(
            version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, results_by_transaction=answers
        )

    def _partition_exists(self, tp: TopicPartition) -> bool:
        view = self.ctx.cluster.topics.get(tp[0])
        return view is not None and 0 <= tp[1] < len(view.partitions)

    async def add_offsets_to_txn(self, request: Any, version: int) -> Any:
        _, error = await self._settle(
            request.transactional_id,
            lambda: self.coordinator.add_offsets(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                request.group_id,
                now_ms(),
            ),
        )
        return AddOffsetsToTxnResponse(
            version=version, throttle_time_ms=0, error_code=fenced_for_version(error, version, 2)
        )

    async def end_txn(self, request: Any, version: int) -> Any:
        _, error = await self._settle(
            request.transactional_id,
            lambda: self.coordinator.end_txn(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                bool(request.committed),
                now_ms(),
            ),
        )
        return EndTxnResponse(
            version=version, throttle_time_ms=0, error_code=fenced_for_version(error, version, 2)
        )

    async def describe_transactions(self, request: Any, version: int) -> Any:
        state_cls: Any = DescribeTransactionsResponse.TransactionState
        states = []
        for transactional_id in request.transactional_ids:
            d = self.coordinator.describe(transactional_id)
            by_topic = group_by_topic(d.partitions)
            states.append(
                state_cls(
                    error_code=d.error_code,
                    transactional_id=transactional_id,
                    transaction_state=d.state,
                    transaction_timeout_ms=d.txn_timeout_ms,
                    transaction_start_time_ms=d.txn_start_timestamp_ms,
                    producer_id=d.producer_id,
                    producer_epoch=d.producer_epoch,
                    topics=[
                        state_cls.TopicData(topic=t, partitions=ps) for t, ps in sorted(by_topic.items())
                    ],
                )
            )
        return DescribeTransactionsResponse(version=version, throttle_time_ms=0, transaction_states=states)

    async def list_transactions(self, request: Any, version: int) -> Any:
        known = set(STATE_NAMES.values())
        filters = set(request.state_filters or [])
        unknown = sorted(filters - known)
        duration = request.duration_filter if version >= 1 and request.duration_filter is not None else -1
        listings = self.coordinator.list_transactions(
            filters & known if filters else None,
            set(request.producer_id_filters or []) or None,
            duration,
            now_ms(),
        )
        state_cls: Any = ListTransactionsResponse.TransactionState
        return ListTransactionsResponse(
            version=version,
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            unknown_state_filters=unknown,
            transaction_states=[
                state_cls(
                    transactional_id=t.transactional_id, producer_id=t.producer_id, transaction_state=t.state
                )
                for t in listings
            ]
            if not (filters and not filters & known)
            else [],
        )
