"""pykraft's own asyncio producer: the client side of KIP-360 and KIP-758, idempotent or transactional.

KIP-360 (the seed's client rules, kafka-facts.md §3.6):

- a batch's sequence is fixed the first time it is sent and never changes; a retry resends it as it was;
- a fatal error for a batch (OUT_OF_ORDER_SEQUENCE_NUMBER on the batch that is next in line,
  INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID, a delivery timeout) fails that batch and every later batch
  of the partition that has a sequence, so what reaches the log is always a prefix, in order;
- the idempotent producer then bumps its epoch (InitProducerId with its producer id and epoch) and
  restarts that partition's sequences at 0; the transactional producer becomes *abortable*:
  ``abort_transaction()`` ends the transaction and bumps the epoch the same way;
- PRODUCER_FENCED / INVALID_PRODUCER_EPOCH from the coordinator are fatal (:class:`ProducerFencedError`);
  a retried InitProducerId repeats the same (producer id, epoch), which KIP-360 answers with the same
  result even across a coordinator failover.

KIP-758: DUPLICATE_SEQUENCE_NUMBER (46) is success with offset -1, and a broker that advertises
``max.in.flight.sequence.number.per.connection`` (DescribeConfigs) can take far more than Kafka's 5
batches in flight per partition: the default window here is 50 there, 5 elsewhere. A lost connection
retries every unacknowledged batch in order with its original sequence; the broker answers the ones it
already has with their offsets or 46.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from kafka.partitioner.default import murmur2
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from pykraft.client.connection import Connection, ConnectionSecurity
from pykraft.client.errors import (
    RETRIABLE_COORDINATOR_ERRORS,
    RETRIABLE_PRODUCE_ERRORS,
    ConnectionLost,
    DeliveryError,
    KafkaClientError,
    ProducerFencedError,
    TransactionAbortableError,
)
from pykraft.core.errors import ErrorCode
from pykraft.protocol.records import INT32_MAX, Record, build_batch

TopicPartition = tuple[str, int]
WINDOW_CONFIG = "max.in.flight.sequence.number.per.connection"
KAFKA_MAX_IN_FLIGHT = 5
KIP758_MAX_IN_FLIGHT = 50
PRODUCE_VERSION = 9
METADATA_VERSION = 9
RETRY_BACKOFF_S = 0.05


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    # -1 when the broker answered DUPLICATE_SEQUENCE_NUMBER (KIP-758: appended before, offset unknown).
    offset: int


@dataclass(slots=True)
class _Batch:
    tp: TopicPartition
    records: list[Record]
    futures: list[asyncio.Future[RecordMetadata]]
    deadline: float
    size_bytes: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1  # fixed at the first send (KIP-360)
    encoded: bytes = b""


@dataclass(slots=True)
class _PartitionState:
    queue: list[_Batch] = field(default_factory=list)  # sealed, not yet acknowledged, in order
    open: _Batch | None = None
    next_sequence: int = 0
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out = []
    for item in servers.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bootstrap_servers: {item!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    return out


class Producer:
    def __init__(
        self,
        bootstrap_servers: str,
        *,
        transactional_id: str | None = None,
        acks: int = -1,
        max_in_flight: int | None = None,
        linger_ms: int = 5,
        batch_size: int = 16384,
        transaction_timeout_ms: int = 60000,
        request_timeout_ms: int = 30000,
        delivery_timeout_ms: int = 120000,
        client_id: str = "pykraft-client",
        security: ConnectionSecurity | None = None,
    ) -> None:
        # TLS and SASL for every connection (the tools' --command-config); None: PLAINTEXT.
        self.security = security
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.transactional_id = transactional_id
        if transactional_id is not None and acks != -1:
            raise ValueError("a transactional producer needs acks=-1")
        self.acks = acks
        self.requested_max_in_flight = max_in_flight
        self.max_in_flight = max_in_flight or KAFKA_MAX_IN_FLIGHT
        self.linger_s = linger_ms / 1000
        self.batch_size = batch_size
        self.transaction_timeout_ms = transaction_timeout_ms
        self.request_timeout_s = request_timeout_ms / 1000
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.client_id = client_id
        self.producer_id = -1
        self.producer_epoch = -1
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._partition_counts: dict[str, int] = {}
        self._connections: dict[int, Connection] = {}
        self._partitions: dict[TopicPartition, _PartitionState] = {}
        self._round_robin = itertools.count()
        self._coordinator: Connection | None = None
        self._in_transaction = False
        self._txn_partitions: set[TopicPartition] = set()
        self._abortable: KafkaClientError | None = None
        self._fatal: KafkaClientError | None = None
        self._bump_needed = False
        self._bump_task: asyncio.Task[None] | None = None
        self._closed = False

    # --- lifecycle -------------------------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        await self._refresh_metadata([])
        if self.requested_max_in_flight is None:
            self.max_in_flight = await self._broker_window()
        if self.transactional_id is None:
            await self._init_producer_id()

    async def _broker_window(self) -> int:
        """KIP-758: a broker advertising its duplicate window takes many batches in flight."""
        node_id = next(iter(self._brokers))
        conn = await self._connection(node_id)
        request = DescribeConfigsRequest(
            resources=[
                DescribeConfigsRequest.DescribeConfigsResource(
                    resource_type=4, resource_name=str(node_id), configuration_keys=[WINDOW_CONFIG]
                )
            ]
        )
        try:
            response = await conn.call(request, DescribeConfigsResponse, 1, self.request_timeout_s)
        except KafkaClientError:
            return KAFKA_MAX_IN_FLIGHT
        for result in response.results:
            for config in result.configs if result.error_code == 0 else ():
                if config.name == WINDOW_CONFIG and config.value and config.value.isdigit():
                    # Each in-flight batch holds at most batch_size records' sequences.
                    return max(KAFKA_MAX_IN_FLIGHT, min(KIP758_MAX_IN_FLIGHT, int(config.value)))
        return KAFKA_MAX_IN_FLIGHT

    async def close(self) -> None:
        if self._closed:
            return
        try:
            if self._fatal is None:
                await self.flush()
        finally:
            self._closed = True
            for state in self._partitions.values():
                if state.task is not None:
                    state.task.cancel()
            for conn in [*self._connections.values(), *([self._coordinator] if self._coordinator else [])]:
                conn.close()

    # --- connections and metadata -----------------------------------------------------------------------

    async def _connection(self, node_id: int) -> Connection:
        conn = self._connections.get(node_id)
        if conn is None or conn.closed:
            host, port = self._brokers[node_id]
            conn = Connection(host, port, client_id=self.client_id, node_id=node_id, security=self.security)
            await conn.connect(self.request_timeout_s)
            self._connections[node_id] = conn
        return conn

    async def _bootstrap_call(self, request: Any, response_class: Any, version: int) -> Any:
        last: Exception | None = None
        for node_id in list(self._brokers) or [-1]:
            try:
                if node_id == -1:
                    raise KeyError
                conn = await self._connection(node_id)
                return await conn.call(request, response_class, version, self.request_timeout_s)
            except (KeyError, ConnectionLost) as exc:
                last = exc
        for host, port in self.bootstrap:
            conn = Connection(host, port, client_id=self.client_id, security=self.security)
            try:
                await conn.connect(self.request_timeout_s)
                return await conn.call(request, response_class, version, self.request_timeout_s)
            except ConnectionLost as exc:
                last = exc
            finally:
                conn.close()
        raise ConnectionLost(f"no broker answered: {last}")

    async def _refresh_metadata(self, topics: list[str]) -> None:
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=True,
        )
        response = await self._bootstrap_call(request, MetadataResponse, METADATA_VERSION)
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for t in response.topics:
            if t.error_code == ErrorCode.NONE and t.partitions:
                self._partition_counts[t.name] = len(t.partitions)
                for p in t.partitions:
                    self._leaders[(t.name, p.partition_index)] = p.leader_id

    async def _partition_for(self, topic: str, key: bytes | None) -> int:
        deadline = time.monotonic() + self.request_timeout_s
        while topic not in self._partition_counts:
            await self._refresh_metadata([topic])
            if topic in self._partition_counts:
                break
            if time.monotonic() > deadline:
                raise KafkaClientError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r}")
            await asyncio.sleep(RETRY_BACKOFF_S)
        count = self._partition_counts[topic]
        if key is None:
            return next(self._round_robin) % count
        partition: int = (murmur2(key) & 0x7FFFFFFF) % count
        return partition

    # --- InitProducerId and the coordinator -------------------------------------------------------------

    async def _find_coordinator(self) -> Connection:
        assert self.transactional_id is not None
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            if self._coordinator is not None and not self._coordinator.closed:
                return self._coordinator
            request = FindCoordinatorRequest(key_type=1, coordinator_keys=[self.transactional_id])
            try:
                response = await self._bootstrap_call(request, FindCoordinatorResponse, 4)
                found = response.coordinators[0]
                if found.error_code == ErrorCode.NONE:
                    conn = Connection(
                        found.host,
                        found.port,
                        client_id=self.client_id,
                        node_id=found.node_id,
                        security=self.security,
                    )
                    await conn.connect(self.request_timeout_s)
                    self._coordinator = conn
                    return conn
                error: Exception = KafkaClientError(found.error_code, "FindCoordinator")
            except ConnectionLost as exc:
                error = exc
            if time.monotonic() > deadline:
                raise error
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _coordinator_call(self, request: Any, response_class: Any, version: int, error_of: Any) -> Any:
        """Send to the transaction coordinator, retrying (with rediscovery) retriable errors."""
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            try:
                conn = await self._find_coordinator()
                response = await conn.call(request, response_class, version, self.request_timeout_s)
                code = error_of(response)
            except ConnectionLost:
                code = ErrorCode.NETWORK_EXCEPTION
                response = None
            if code not in RETRIABLE_COORDINATOR_ERRORS:
                return response, code
            if code in (
                ErrorCode.NOT_COORDINATOR,
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.NETWORK_EXCEPTION,
            ):
                if self._coordinator is not None:
                    self._coordinator.close()
                self._coordinator = None
            if time.monotonic() > deadline:
                raise KafkaClientError(code, f"{type(request).__name__} kept failing")
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _init_producer_id(self, producer_id: int | None = None, producer_epoch: int = -1) -> None:
        """InitProducerId with the current (producer id, epoch) (-1, -1 the first time): KIP-360's bump.
        A retry after a lost answer sends the same pair and gets the same result."""
        if producer_id is None:
            producer_id, producer_epoch = self.producer_id, self.producer_epoch
        request = InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms if self.transactional_id else 2**31 - 1,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
        if self.transactional_id is None:
            deadline = time.monotonic() + self.request_timeout_s
            while True:
                response = await self._bootstrap_call(request, InitProducerIdResponse, 4)
                if response.error_code not in RETRIABLE_COORDINATOR_ERRORS or time.monotonic() > deadline:
                    break
                await asyncio.sleep(RETRY_BACKOFF_S)
            code = response.error_code
        else:
            response, code = await self._coordinator_call(
                request, InitProducerIdResponse, 4, lambda r: r.error_code
            )
        if code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
            self._fatal = ProducerFencedError(code, "InitProducerId")
            raise self._fatal
        if code != ErrorCode.NONE:
            raise KafkaClientError(code, "InitProducerId")
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        for state in self._partitions.values():
            state.next_sequence = 0
        self._bump_needed = False

    # --- transactions ------------------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        if self._closed:
            raise KafkaClientError(ErrorCode.UNKNOWN_SERVER_ERROR, "the producer is closed")

    async def init_transactions(self) -> None:
        if self.transactional_id is None:
            raise KafkaClientError(ErrorCode.INVALID_REQUEST, "init_transactions needs a transactional_id")
        self._check_usable()
        await self._init_producer_id()

    def begin_transaction(self) -> None:
        self._check_usable()
        if self.transactional_id is None or self.producer_id < 0:
            raise KafkaClientError(ErrorCode.INVALID_TXN_STATE, "call init_transactions() first")
        if self._in_transaction:
            raise KafkaClientError(ErrorCode.INVALID_TXN_STATE, "a transaction is already open")
        self._in_transaction = True
        self._txn_partitions = set()
        self._abortable = None

    async def _add_partition(self, tp: TopicPartition) -> None:
        if tp in self._txn_partitions:
            return
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=tp[0], partitions=[tp[1]])
            ],
        )

        def error_of(r: Any) -> int:
            return max(
                (
                    p.partition_error_code
                    for t in r.results_by_topic_v3_and_below
                    for p in t.results_by_partition
                ),
                default=0,
            )

        _, code = await self._coordinator_call(request, AddPartitionsToTxnResponse, 3, error_of)
        self._raise_txn_error(code, "AddPartitionsToTxn")
        self._txn_partitions.add(tp)

    def _raise_txn_error(self, code: int, what: str) -> None:
        if code == ErrorCode.NONE:
            return
        if code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
            self._fatal = ProducerFencedError(code, what)
            raise self._fatal
        error = TransactionAbortableError(code, what)
        self._abortable = error
        self._bump_needed = True
        raise error

    async def send_offsets_to_transaction(self, offsets: dict[TopicPartition, int], group_id: str) -> None:
        """Commit ``offsets`` for ``group_id`` with the transaction (AddOffsetsToTxn, then TxnOffsetCommit
        to the group's coordinator; generation -1: a standalone writer)."""
        self._check_usable()
        if not self._in_transaction:
            raise KafkaClientError(ErrorCode.INVALID_TXN_STATE, "no open transaction")
        request = AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            group_id=group_id,
        )
        _, code = await self._coordinator_call(request, AddOffsetsToTxnResponse, 3, lambda r: r.error_code)
        self._raise_txn_error(code, "AddOffsetsToTxn")
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))
        topic_cls: Any = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        commit = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                topic_cls(
                    name=topic,
                    partitions=[
                        topic_cls.TxnOffsetCommitRequestPartition(
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for p, o in parts
                    ],
                )
                for topic, parts in by_topic.items()
            ],
        )
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            found = await self._bootstrap_call(
                FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id]), FindCoordinatorResponse, 4
            )
            coordinator = found.coordinators[0]
            code = coordinator.error_code
            if code == ErrorCode.NONE:
                conn = Connection(
                    coordinator.host, coordinator.port, client_id=self.client_id, security=self.security
                )
                try:
                    await conn.connect(self.request_timeout_s)
                    response = await conn.call(commit, TxnOffsetCommitResponse, 3, self.request_timeout_s)
                    code = max((p.error_code for t in response.topics for p in t.partitions), default=0)
                except ConnectionLost:
                    code = ErrorCode.NETWORK_EXCEPTION
                finally:
                    conn.close()
            if code not in RETRIABLE_COORDINATOR_ERRORS or time.monotonic() > deadline:
                break
            await asyncio.sleep(RETRY_BACKOFF_S)
        self._raise_txn_error(code, "TxnOffsetCommit")

    async def commit_transaction(self) -> None:
        await self._end_transaction(commit=True)

    async def abort_transaction(self) -> None:
        await self._end_transaction(commit=False)

    async def _end_transaction(self, commit: bool) -> None:
        self._check_usable()
        if not self._in_transaction:
            raise KafkaClientError(ErrorCode.INVALID_TXN_STATE, "no open transaction")
        if commit:
            await self.flush()
            if self._abortable is not None:
                raise self._abortable
        else:
            await self._drain(fail_with=TransactionAbortableError(ErrorCode.INVALID_TXN_STATE, "aborted"))
        if self._txn_partitions or commit:
            request = EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                committed=commit,
            )
            _, code = await self._coordinator_call(request, EndTxnResponse, 3, lambda r: r.error_code)
            if code == ErrorCode.INVALID_TXN_STATE and not self._txn_partitions:
                code = ErrorCode.NONE  # nothing was added: the coordinator never saw this transaction
            if code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
                self._fatal = ProducerFencedError(code, "EndTxn")
                raise self._fatal
            if code != ErrorCode.NONE and commit:
                self._raise_txn_error(code, "EndTxn")
        self._in_transaction = False
        self._txn_partitions = set()
        if not commit and self._bump_needed:
            # KIP-360: after an abortable error, bump the epoch and restart sequences.
            await self._init_producer_id()
        self._abortable = None

    # --- sending ------------------------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the future resolves once the broker acknowledged it."""
        self._check_usable()
        if self.transactional_id is not None:
            if not self._in_transaction:
                raise KafkaClientError(ErrorCode.INVALID_TXN_STATE, "send outside a transaction")
            if self._abortable is not None:
                raise self._abortable
        if partition is None:
            partition = await self._partition_for(topic, key)
        tp = (topic, partition)
        if self.transactional_id is not None:
            await self._add_partition(tp)
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = _PartitionState()
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        record = Record(
            key,
            value,
            tuple(headers or ()),
            # Stamped at send() as Kafka's producer does, so a batch's base and max timestamps are its
            # records' (ListOffsets -3 and time lookups use them), not the time the batch was built.
            timestamp=timestamp_ms if timestamp_ms is not None else int(time.time() * 1000),
        )
        batch = state.open
        if batch is None:
            batch = state.open = _Batch(tp, [], [], time.monotonic() + self.delivery_timeout_s)
            asyncio.get_running_loop().call_later(self.linger_s, self._seal, tp, batch)
        batch.records.append(record)
        batch.futures.append(fut)
        batch.size_bytes += len(value or b"") + len(key or b"") + 16
        if batch.size_bytes >= self.batch_size:
            self._seal(tp, batch)
        if state.task is None or state.task.done():
            state.task = asyncio.get_running_loop().create_task(self._sender(tp, state))
        return fut

    async def send_and_wait(self, topic: str, value: bytes | None, **kwargs: Any) -> RecordMetadata:
        return await (await self.send(topic, value, **kwargs))

    def _seal(self, tp: TopicPartition, batch: _Batch) -> None:
        state = self._partitions.get(tp)
        if state is None or state.open is not batch:
            return
        state.open = None
        state.queue.append(batch)
        state.wakeup.set()

    async def flush(self) -> None:
        for tp, state in list(self._partitions.items()):
            if state.open is not None:
                self._seal(tp, state.open)
        futures = [f for s in self._partitions.values() for b in s.queue for f in b.futures]
        if futures:
            await asyncio.gather(*futures, return_exceptions=True)

    async def _drain(self, fail_with: KafkaClientError) -> None:
        """Abort: records not yet acknowledged fail; the batches already in flight are awaited."""
        await self.flush()
        for state in self._partitions.values():
            for batch in state.queue:
                for fut in batch.futures:
                    if not fut.done():
                        fut.set_exception(fail_with)

    def _assign_sequence(self, state: _PartitionState, batch: _Batch) -> None:
        """KIP-360: a batch's producer id, epoch and sequence are fixed at its first send."""
        if batch.base_sequence >= 0 or self.producer_id < 0:
            return
        batch.producer_id, batch.producer_epoch = self.producer_id, self.producer_epoch
        batch.base_sequence = state.next_sequence
        state.next_sequence = (state.next_sequence + len(batch.records)) % (INT32_MAX + 1)
        batch.encoded = bytes(
            build_batch(
                batch.records,
                timestamp_ms=batch.records[0].timestamp,
                producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence,
                is_transactional=self.transactional_id is not None,
            )
        )

    def _produce_request(self, batch: _Batch) -> Any:
        topic_cls: Any = ProduceRequest.TopicProduceData
        return ProduceRequest(
            transactional_id=self.transactional_id,
            acks=self.acks,
            timeout_ms=int(self.request_timeout_s * 1000),
            topic_data=[
                topic_cls(
                    name=batch.tp[0],
                    partition_data=[topic_cls.PartitionProduceData(index=batch.tp[1], records=batch.encoded)],
                )
            ],
        )

    async def _sender(self, tp: TopicPartition, state: _PartitionState) -> None:
        """Send the partition's batches in order, up to ``max_in_flight`` at once; on a retriable error
        resend from the first unacknowledged batch with the same sequences."""
        while not self._closed:
            if not state.queue:
                state.wakeup.clear()
                if state.open is None and not state.queue:
                    return
                await state.wakeup.wait()
                continue
            try:
                leader = self._leaders.get(tp, -1)
                if leader < 0 or leader not in self._brokers:
                    await self._refresh_metadata([tp[0]])
                    leader = self._leaders.get(tp, -1)
                    if leader < 0:
                        raise ConnectionLost(f"no leader for {tp[0]}-{tp[1]}")
                conn = await self._connection(leader)
            except ConnectionLost:
                if self._expire(tp, state):
                    continue
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            if self.producer_id < 0:
                # An epoch bump is in flight (idempotent producer): sequences wait for its answer.
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            window = state.queue[: self.max_in_flight]
            in_flight = []
            for batch in window:
                self._assign_sequence(state, batch)
                in_flight.append(
                    (batch, conn.request(self._produce_request(batch), ProduceResponse, PRODUCE_VERSION))
                )
            retry = False
            for batch, fut in in_flight:
                try:
                    async with asyncio.timeout(self.request_timeout_s):
                        response = await fut
                    answer = response.responses[0].partition_responses[0]
                    code, offset = answer.error_code, answer.base_offset
                except (ConnectionLost, TimeoutError):
                    conn.close("request failed")
                    code, offset = ErrorCode.NETWORK_EXCEPTION, -1
                if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    # KIP-758: 46 is success; the offset is unknown (-1).
                    state.queue.remove(batch)
                    for i, record_future in enumerate(batch.futures):
                        if not record_future.done():
                            record_future.set_result(
                                RecordMetadata(
                                    tp[0], tp[1], offset + i if code == ErrorCode.NONE and offset >= 0 else -1
                                )
                            )
                    continue
                if code in RETRIABLE_PRODUCE_ERRORS or (
                    code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and batch is not state.queue[0]
                ):
                    # Resend from the first unacknowledged batch, same sequences (later answers of this
                    # window are ignored: the resend covers them).
                    retry = True
                    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                        self._leaders.pop(tp, None)
                    break
                self._fail_from(tp, state, batch, code)
                break
            for _, fut in in_flight:
                # Answers this loop did not read (it resends from the first unacknowledged batch).
                if not fut.done():
                    fut.cancel()
                elif not fut.cancelled():
                    fut.exception()
            if retry:
                if not self._expire(tp, state):
                    await asyncio.sleep(RETRY_BACKOFF_S)

    def _expire(self, tp: TopicPartition, state: _PartitionState) -> bool:
        """A batch past its delivery timeout fails, with every later one (KIP-360)."""
        if state.queue and time.monotonic() > state.queue[0].deadline:
            self._fail_from(tp, state, state.queue[0], ErrorCode.REQUEST_TIMED_OUT)
            return True
        return False

    def _fail_from(self, tp: TopicPartition, state: _PartitionState, batch: _Batch, code: int) -> None:
        """Fail ``batch`` and every later batch of the partition that has a sequence; the idempotent
        producer bumps its epoch (sequences restart at 0), the transactional one becomes abortable."""
        index = state.queue.index(batch)
        failed = [b for b in state.queue[index:] if b is batch or b.base_sequence >= 0]
        error = DeliveryError(code, f"{tp[0]}-{tp[1]}")
        for b in failed:
            state.queue.remove(b)
            for fut in b.futures:
                if not fut.done():
                    fut.set_exception(error)
        state.next_sequence = 0
        for b in state.queue:
            b.base_sequence = -1  # not sent yet: they take new sequences after the bump
        if self.transactional_id is not None:
            self._abortable = TransactionAbortableError(code, f"{tp[0]}-{tp[1]}")
            self._bump_needed = True
        elif self.producer_id >= 0:
            previous = (self.producer_id, self.producer_epoch)
            self.producer_id = -1  # no sequences are assigned until the bump is answered
            self._bump_task = asyncio.get_running_loop().create_task(self._bump_idempotent(*previous))

    async def _bump_idempotent(self, producer_id: int, producer_epoch: int) -> None:
        while not self._closed:
            try:
                await self._init_producer_id(producer_id, producer_epoch)
                break
            except ProducerFencedError:
                break
            except KafkaClientError:
                await asyncio.sleep(RETRY_BACKOFF_S)
        for state in self._partitions.values():
            state.wakeup.set()
