"""Request handlers for the data-plane APIs: (request, context) -> response.

Each handler is pure: it reads the broker's view of the metadata image and the replica manager and
builds the kafka-python response object (or, for Fetch, our spliced-records response data). The shell
decides when to call them (Fetch long-polls by calling again when data arrives) and encodes the answer.
"""

from __future__ import annotations

import dataclasses
import functools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.consumer import ListOffsetsResponse, OffsetForLeaderEpochResponse
from kafka.protocol.metadata import FindCoordinatorResponse, MetadataResponse
from kafka.protocol.producer import InitProducerIdResponse

from pykraft.broker.encoded_topics import EncodedTopics
from pykraft.broker.producer_id_manager import ProducerIdManager
from pykraft.broker.replica_manager import Partition, ReplicaManager
from pykraft.broker.replica_selector import NO_PREFERRED_READ_REPLICA, preferred_read_replica
from pykraft.broker.replication import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache
from pykraft.broker.replication_quota import ReplicationQuotaManager, leader_quota
from pykraft.broker.topic_stats import BrokerTopicStats
from pykraft.coordinator.offsets_records import OFFSETS_TOPIC, partition_for
from pykraft.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from pykraft.core.errors import ErrorCode
from pykraft.protocol.fetch import FetchPartitionResponse, FetchResponseData, FetchTopicResponse
from pykraft.protocol.messages import AUTHORIZED_OPERATIONS_OMITTED, SplicedResponse
from pykraft.protocol.metadata_topic import (
    METADATA_FIRST_FLEXIBLE_VERSION,
    MetadataPartition,
    encode_metadata_topic,
)
from pykraft.protocol.produce import ProducePartitionResult, ProduceRequestData, ProduceTopicResult
from pykraft.protocol.records import InvalidBatchError, check_produce_records
from pykraft.protocol.wire import NodeEndpoint
from pykraft.security.acls import AclOperation, ResourceType, allowed, allowed_on_cluster

# ListOffsets special timestamps (ListOffsetsRequest.java).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # KIP-1023 (ListOffsets v11)


@dataclass(frozen=True, slots=True)
class PartitionView:
    partition_index: int
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class TopicView:
    name: str
    topic_id: uuid.UUID
    partitions: tuple[PartitionView, ...]


# A broker's endpoint on one listener: what Metadata lists and KIP-951's NodeEndpoints name.
BrokerView = NodeEndpoint


@dataclass(slots=True)
class ClusterView:
    """What the handlers need from the metadata image, rebuilt by the shell on every image change.

    ``brokers`` are the unfenced brokers' endpoints on one listener: the inter-broker listener in the
    node's view (replica fetch, transaction markers), the client's own listener in the view
    ``on_listener`` gives the handlers that name brokers to clients (issue 27)."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerView, ...] = ()
    topics: dict[str, TopicView] = field(default_factory=dict)
    # Topic id -> name, for the requests that name topics by id (Fetch v13+, KIP-516).
    topic_names_by_id: Mapping[uuid.UUID, str] = field(default_factory=dict)
    # Registered but fenced brokers with the listener: DescribeCluster v2 lists them when asked
    # (include_fenced_brokers, KIP-1073); Metadata never does.
    fenced_brokers: tuple[BrokerView, ...] = ()
    # Every listener's (unfenced, fenced) brokers, by listener name.
    listeners: dict[str, tuple[tuple[BrokerView, ...], tuple[BrokerView, ...]]] = field(default_factory=dict)
    # Registered, unfenced and not in controlled shutdown: may join an ISR (Kafka isReplicaIsrEligible).
    isr_eligible_broker_ids: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        # A view built from topics alone (tests, tools) gets its id index from them; the shell passes
        # the image's own index instead, so an image change never walks every topic for it.
        if not self.topic_names_by_id and self.topics:
            self.topic_names_by_id = {view.topic_id: name for name, view in self.topics.items()}

    def live_brokers_on(self, listener_name: str) -> tuple[BrokerView, ...]:
        """The live brokers' endpoints on ``listener_name`` (none when no broker has it)."""
        return self.listeners.get(listener_name, ((), ()))[0]

    def on_listener(self, listener_name: str) -> ClusterView:
        """The view a client connected to ``listener_name`` gets: the brokers' endpoints of that
        listener, as Kafka's KRaftMetadataCache answers with the request's listener on every broker (a
        broker without that listener is left out)."""
        brokers, fenced = self.listeners.get(listener_name, ((), ()))
        return dataclasses.replace(self, brokers=brokers, fenced_brokers=fenced)

    def fence(self, node_id: int) -> ClusterView:
        """The view with ``node_id`` moved to the fenced brokers on every listener."""

        def moved(
            pair: tuple[tuple[BrokerView, ...], tuple[BrokerView, ...]],
        ) -> tuple[tuple[BrokerView, ...], tuple[BrokerView, ...]]:
            brokers, fenced = pair
            own = [b for b in brokers if b.node_id == node_id]
            return (
                tuple(b for b in brokers if b.node_id != node_id),
                tuple(sorted((*fenced, *own), key=lambda b: b.node_id)),
            )

        brokers, fenced = moved((self.brokers, self.fenced_brokers))
        listeners = {name: moved(pair) for name, pair in self.listeners.items()}
        return dataclasses.replace(self, brokers=brokers, fenced_brokers=fenced, listeners=listeners)


@dataclass(slots=True)
class BrokerContext:
    node_id: int
    cluster: ClusterView
    replicas: ReplicaManager
    producer_ids: ProducerIdManager
    auto_create_topics_enable: bool
    # Asks the controller to create topics (used by Metadata/Produce auto-creation); returns nothing:
    # the topics appear in a later image.
    request_topic_creation: Callable[[list[str]], None] = lambda names: None
    # Groups map to a partition of __consumer_offsets; its leader is their coordinator.
    offsets_topic_num_partitions: int = 50
    # Transactional ids map to a partition of __transaction_state the same way.
    transaction_state_num_partitions: int = 50
    # A topic's min.insync.replicas (its config, else the broker's).
    min_insync_replicas: Callable[[str], int] = lambda topic: 1
    # A broker process not (yet) registered and unfenced in this incarnation leads nothing.
    fenced: bool = False
    # Messages and bytes in/out per topic (issue 18's metrics), counted per partition of a request.
    topic_stats: BrokerTopicStats = field(default_factory=BrokerTopicStats)
    # replica.selector.class is set (KIP-392): the leader names a same-rack in-sync follower to a
    # consumer that gave its client.rack.
    replica_selector_enabled: bool = False
    # The leader replication throttle (KIP-73): what followers out of the ISR are sent.
    leader_quota: ReplicationQuotaManager = field(default_factory=leader_quota)
    # Metadata's and DescribeTopicPartitions' topic entries, encoded once per topic change (issue 29).
    metadata_topics: EncodedTopics = field(default_factory=EncodedTopics)
    described_topics: EncodedTopics = field(default_factory=EncodedTopics)


def led_partition(ctx: BrokerContext, topic: str, partition_index: int) -> tuple[Partition | None, ErrorCode]:
    """The partition when this broker leads it, else why not (Kafka ReplicaManager.getPartitionOrError):
    UNKNOWN_TOPIC_OR_PARTITION when the image has no such partition, KAFKA_STORAGE_ERROR when its log
    dir is offline (the partitions in the other dirs keep serving), NOT_LEADER_OR_FOLLOWER when
    another broker leads it or none does (its leader was fenced), so the client refreshes its
    metadata."""
    view = ctx.cluster.topics.get(topic)
    if view is None or not 0 <= partition_index < len(view.partitions):
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if ctx.replicas.is_offline(topic, partition_index):
        return None, ErrorCode.KAFKA_STORAGE_ERROR  # its log dir is offline (a write to it failed)
    if view.partitions[partition_index].leader_id != ctx.node_id or ctx.fenced:
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
    part = ctx.replicas.get(topic, partition_index)
    if part is None:
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
    return part, ErrorCode.NONE


# --- Metadata ---------------------------------------------------------------------------------


# Encoded topic entries kept, at most about this many times the topics (several versions and listeners).
ENCODED_TOPICS_SLACK = 8


def _metadata_tail_bytes(version: int) -> int:
    """What MetadataResponse encodes after its topics: cluster_authorized_operations (v8-v10), the
    top-level error_code (v13+, KIP-1102: always NONE here), then the tagged fields (v9+)."""
    return (
        (4 if 8 <= version <= 10 else 0)
        + (2 if version >= 13 else 0)
        + (1 if version >= METADATA_FIRST_FLEXIBLE_VERSION else 0)
    )


def _encode_metadata_topic(
    version: int, name: str, view: TopicView, live: frozenset[int], live_elsewhere: frozenset[int]
) -> bytes:
    # A partition whose leader is not a live (registered, unfenced) broker is unavailable: Kafka's
    # KRaftMetadataCache answers LEADER_NOT_AVAILABLE with leader -1 until one is elected, and
    # LISTENER_NOT_FOUND when the leader is live but has no endpoint on the client's listener.
    partitions = (
        MetadataPartition(
            error_code=ErrorCode.NONE
            if p.leader_id in live
            else ErrorCode.LISTENER_NOT_FOUND
            if p.leader_id in live_elsewhere
            else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p.partition_index,
            leader_id=p.leader_id if p.leader_id in live else -1,
            leader_epoch=p.leader_epoch,
            replica_nodes=p.replicas,
            isr_nodes=p.isr,
        )
        for p in view.partitions
    )
    return encode_metadata_topic(
        version,
        error_code=ErrorCode.NONE,
        name=name,
        topic_id=view.topic_id,
        is_internal=name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC),
        partitions=partitions,
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def handle_metadata(request: Any, version: int, ctx: BrokerContext) -> SplicedResponse:
    """Kafka's KafkaApis.handleTopicMetadataRequest. Each known topic's entry is encoded once per
    version and reused until the topic or the live brokers change (``ctx.metadata_topics``, issue 29)."""
    cluster = ctx.cluster
    brokers = [
        MetadataResponse.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
        for b in cluster.brokers
    ]
    live = frozenset(b.node_id for b in cluster.brokers)
    live_elsewhere = frozenset(b.node_id for brokers, _ in cluster.listeners.values() for b in brokers) - live
    flexible = version >= METADATA_FIRST_FLEXIBLE_VERSION
    asked_ids = [
        t.topic_id
        for t in request.topics or []
        if version >= 10 and t.topic_id is not None and t.topic_id.int != 0
    ]
    if request.topics is None:
        # Every topic: those the principal may not describe are left out (Kafka).
        names = sorted(n for n in cluster.topics if allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, n))
    elif asked_ids:
        # Kafka's KafkaApis.handleTopicMetadataRequest: a request naming any topic id is answered by
        # ids only; its names are ignored (the Java client sends "" beside each id, librdkafka null).
        names = []
    else:
        names = [t.name for t in request.topics if t.name is not None]
    topics: list[bytes] = []

    def failed(error: ErrorCode, name: str | None, topic_id: uuid.UUID) -> None:
        topics.append(
            encode_metadata_topic(
                version,
                error_code=error,
                name=name,
                topic_id=topic_id,
                is_internal=False,
                partitions=(),
                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
        )

    if asked_ids:
        # Topics asked for by id (KIP-516; librdkafka does so for the topic ids of a KIP-848 assignment,
        # the Java Admin for describeTopics(TopicCollection.ofTopicIds(...))): known ids are answered by
        # name like the others, unknown ones with UNKNOWN_TOPIC_ID.
        by_id = cluster.topic_names_by_id
        for topic_id in asked_ids:
            if topic_id in by_id:
                names.append(by_id[topic_id])
                continue
            failed(ErrorCode.UNKNOWN_TOPIC_ID, None, topic_id)
    to_create: list[str] = []
    allow_auto = version < 4 or bool(request.allow_auto_topic_creation)
    cache = ctx.metadata_topics
    brokers_key = (live, live_elsewhere)
    for name in names:
        view = cluster.topics.get(name)
        if request.topics is not None and not allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            failed(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, uuid.UUID(int=0))
            continue
        if view is None and allow_auto and ctx.auto_create_topics_enable and not may_create_topic(name):
            failed(ErrorCode.TOPIC_AUTHORIZATION_FAILED, name, uuid.UUID(int=0))
            continue
        if view is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if allow_auto and ctx.auto_create_topics_enable and request.topics is not None:
                if is_valid_topic_name(name):
                    # Kafka 4's DefaultAutoTopicCreationManager answers a topic it asked the controller
                    # to create UNKNOWN_TOPIC_OR_PARTITION (retriable; the creation is asynchronous)
                    to_create.append(name)
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    error = ErrorCode.INVALID_TOPIC_EXCEPTION
            failed(error, name, uuid.UUID(int=0))
            continue
        encode = functools.partial(_encode_metadata_topic, version, name, view, live, live_elsewhere)
        topics.append(cache.get(brokers_key, name, version, view, encode))
    if len(cache) > ENCODED_TOPICS_SLACK * len(cluster.topics) + 64:
        cache.forget_except(cluster.topics.__contains__)
    if to_create:
        ctx.request_topic_creation(to_create)
    shell = MetadataResponse(
        version=version,
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=[],
    )
    return SplicedResponse(shell, topics, flexible, _metadata_tail_bytes(version))


_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_TOPIC_NAME_LENGTH = 249


def may_create_topic(name: str) -> bool:
    """Kafka: CREATE on the cluster, or on the topic."""
    return allowed_on_cluster(AclOperation.CREATE) or allowed(AclOperation.CREATE, ResourceType.TOPIC, name)


def is_valid_topic_name(name: str) -> bool:
    """Kafka's Topic.validate: [a-zA-Z0-9._-], at most 249 characters, not '.' or '..'."""
    return (
        0 < len(name) <= MAX_TOPIC_NAME_LENGTH
        and name not in (".", "..")
        and all(c in _LEGAL_TOPIC_CHARS for c in name)
    )


# --- Produce ----------------------------------------------------------------------------------

VALID_ACKS = (-1, 0, 1)


@dataclass(frozen=True, slots=True)
class ReplicationWait:
    """An acks=all append to a replicated partition: answered once the high watermark passes
    ``last_offset`` (or with an error when it cannot)."""

    topic_index: int  # position in the response's topics
    partition_index: int  # position in that topic's partitions
    part: Partition
    last_offset: int


def _invalid_produce_records(records: memoryview) -> InvalidBatchError | None:
    """Why a partition's ``records`` break Kafka's one-batch-of-magic-2 rule (check_produce_records)."""
    try:
        check_produce_records(records)
    except InvalidBatchError as exc:
        return exc
    return None


def handle_produce(
    request: ProduceRequestData,
    version: int,
    ctx: BrokerContext,
    now_ms: int,
    waits: list[ReplicationWait] | None = None,
    *,
    verification: Mapping[tuple[str, int], object | ErrorCode] | None = None,
) -> list[ProduceTopicResult]:
    """Append each partition's batches; with acks=all on a replicated partition the append is
    refused while the ISR is below min.insync.replicas (NOT_ENOUGH_REPLICAS) and otherwise added to
    ``waits`` for the shell to answer once the ISR has it. ``verification`` (KIP-890, transactional
    requests): per partition, the guard its coordinator verification was started with, or the error
    the verification ended in."""
    responses: list[ProduceTopicResult] = []
    # Kafka: WRITE on the transactional id for a transactional request, then WRITE on each topic.
    txn_refused = request.transactional_id is not None and not allowed(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    )
    for topic in request.topics:
        partition_responses: list[ProducePartitionResult] = []
        view = ctx.cluster.topics.get(topic.name)
        # A produce never creates its topic (Kafka's KafkaApis.handleProduceRequest answers an unknown
        # one UNKNOWN_TOPIC_OR_PARTITION): clients create topics through Metadata's auto-creation.
        topic_refused = not allowed(AclOperation.WRITE, ResourceType.TOPIC, topic.name)
        for pdata in topic.partitions:
            error: ErrorCode = ErrorCode.NONE
            base_offset = log_start_offset = log_append_time_ms = -1
            message: str | None = None
            if txn_refused or topic_refused:
                error = (
                    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                    if txn_refused
                    else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                )
                partition_responses.append(ProducePartitionResult(pdata.index, error))
                continue
            part, lookup_error = led_partition(ctx, topic.name, pdata.index)
            verdict = verification.get((topic.name, pdata.index)) if verification else None
            appended_messages = 0
            if request.acks not in VALID_ACKS:
                error = ErrorCode.INVALID_REQUIRED_ACKS
            elif isinstance(verdict, ErrorCode):
                error = verdict
                message = "the transaction coordinator did not confirm this partition is in the transaction"
            elif part is None:
                error = lookup_error
            elif pdata.records is None:
                error, message = ErrorCode.INVALID_RECORD, "produce request carries null records"
            elif (invalid := _invalid_produce_records(pdata.records)) is not None:
                error, message = invalid.error_code, str(invalid)
            elif request.acks == -1 and (isr_size := len(part.replication.isr) if part.replicated else 1) < (
                min_isr := ctx.min_insync_replicas(topic.name)
            ):
                # Any replication factor, as Kafka's Partition.appendRecordsToLeader: a single replica
                # (its ISR is itself) with min.insync.replicas=2 cannot take an acks=all write either.
                error = ErrorCode.NOT_ENOUGH_REPLICAS
                message = f"the ISR has {isr_size} replica(s), fewer than min.insync.replicas={min_isr}"
            else:
                result = ctx.replicas.append(part, pdata.records, now_ms, verification_guard=verdict)
                error, base_offset, log_start_offset, log_append_time_ms = (
                    result.error_code,
                    result.base_offset,
                    result.log_start_offset,
                    result.log_append_time_ms,
                )
                message = result.error_message
                if error == ErrorCode.NONE:
                    # The batch's offsets give its record count: no per-record work for the metrics.
                    appended_messages = result.last_offset - result.base_offset + 1
                if (
                    waits is not None
                    and request.acks == -1
                    and part.replicated
                    and error == ErrorCode.NONE
                    and result.last_offset >= part.log.high_watermark
                ):
                    waits.append(
                        ReplicationWait(len(responses), len(partition_responses), part, result.last_offset)
                    )
            ctx.topic_stats.record_produce(
                topic.name,
                view is not None,
                len(pdata.records) if appended_messages and pdata.records is not None else 0,
                appended_messages,
                error != ErrorCode.NONE,
            )
            partition_responses.append(
                ProducePartitionResult(
                    index=pdata.index,
                    error_code=error,
                    base_offset=base_offset,
                    log_append_time_ms=log_append_time_ms,
                    log_start_offset=log_start_offset,
                    error_message=message,
                )
            )
        responses.append(ProduceTopicResult(topic.name, partition_responses))
    # Encoded by protocol.produce.encode_produce_response (hand-written: the small-request hot path).
    return responses


# --- Fetch ------------------------------------------------------------------------------------


@dataclass(slots=True)
class FetchOutcome:
    response: FetchResponseData
    bytes_read: int
    has_error: bool
    # A partition names a preferred read replica: answered at once (Kafka's fetchMessages does not wait).
    redirects: bool = False


def readable_partition(
    ctx: BrokerContext, topic: str, partition_index: int, current_leader_epoch: int
) -> tuple[Partition | None, ErrorCode]:
    """A partition a consumer may read here though another broker leads it (KIP-392: a Fetch v11+ may
    go to any replica, Kafka's fetchOnlyFromLeader false): this broker holds a replica of it. The
    consumer's leader epoch is checked as Kafka's Partition.checkCurrentLeaderEpoch does: older than
    ours is FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH (-1 skips the check)."""
    part, error = led_partition(ctx, topic, partition_index)
    if error != ErrorCode.NOT_LEADER_OR_FOLLOWER or ctx.fenced:
        return part, error
    follower = ctx.replicas.get(topic, partition_index)
    if follower is None or not follower.replicated or ctx.node_id not in follower.replication.replicas:
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
    local_epoch = follower.replication.leader_epoch
    if current_leader_epoch >= 0 and current_leader_epoch < local_epoch:
        return None, ErrorCode.FENCED_LEADER_EPOCH
    if current_leader_epoch > local_epoch:
        return None, ErrorCode.UNKNOWN_LEADER_EPOCH
    return follower, ErrorCode.NONE


def _rack_of_brokers(ctx: BrokerContext) -> dict[int, str | None]:
    return {b.node_id: b.rack for b in ctx.cluster.brokers}


def handle_fetch(request: Any, version: int, ctx: BrokerContext, now_ms: int) -> FetchOutcome:
    """One pass over the requested partitions; the shell long-polls by calling again.

    KIP-392 (Kafka ReplicaManager.readFromLog): a consumer's Fetch v11+ may be served by a follower, up
    to its high watermark; on the leader, with ``replica.selector.class`` set and the consumer's
    ``rack_id`` naming the rack of an in-sync follower, the partition is answered with that
    ``preferred_read_replica`` and no records (broker/replica_selector.py)."""
    remaining = request.max_bytes if request.max_bytes is not None else 52428800
    total = 0
    has_error = False
    topics: list[FetchTopicResponse] = []
    from_any_replica = version >= 11
    client_rack = request.rack_id if from_any_replica and ctx.replica_selector_enabled else None
    redirects = False
    racks = _rack_of_brokers(ctx) if client_rack else {}
    for topic in request.topics:
        partitions: list[FetchPartitionResponse] = []
        refused = not allowed(AclOperation.READ, ResourceType.TOPIC, topic.topic)
        for fp in topic.partitions:
            part, lookup_error = (
                (None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if refused
                else readable_partition(ctx, topic.topic, fp.partition, fp.current_leader_epoch)
                if from_any_replica
                else led_partition(ctx, topic.topic, fp.partition)
            )
            if part is None:
                has_error = True
                # Kafka's FetchResponse.partitionResponse: the schema's default, an empty (not null)
                # list of aborted transactions
                partitions.append(
                    FetchPartitionResponse(
                        partition_index=fp.partition,
                        error_code=lookup_error,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        records=[],
                        aborted_transactions=[],
                    )
                )
                continue
            if client_rack and part.replicated:
                preferred = preferred_read_replica(
                    part.replication, fp.fetch_offset, client_rack, racks, now_ms
                )
                if preferred != NO_PREFERRED_READ_REPLICA:
                    # Kafka skips the read: the consumer fetches from the preferred replica next.
                    log = part.log
                    partitions.append(
                        FetchPartitionResponse(
                            partition_index=fp.partition,
                            error_code=ErrorCode.NONE,
                            high_watermark=log.high_watermark,
                            last_stable_offset=ctx.replicas.last_stable_offset(part),
                            log_start_offset=log.log_start_offset,
                            records=[],
                            preferred_read_replica=preferred,
                        )
                    )
                    redirects = True
                    continue
            limit = min(fp.partition_max_bytes, remaining)
            # The first partition always gets at least one batch so a big batch cannot stall a consumer
            # (KIP-74); later ones only within the response budget.
            result = ctx.replicas.read(
                part,
                fp.fetch_offset,
                max(limit, 0),
                min_one_batch=(total == 0),
                isolation_level=request.isolation_level,
            )
            failed = result.error_code != ErrorCode.NONE
            has_error = has_error or failed
            size = result.size_in_bytes
            total += size
            remaining -= size
            # A failed read (OFFSET_OUT_OF_RANGE, ...) answers no offsets: Kafka's
            # ReplicaManager.readFromLog builds its LogReadResult with -1 for all three
            partitions.append(
                FetchPartitionResponse(
                    partition_index=fp.partition,
                    error_code=result.error_code,
                    high_watermark=-1 if failed else result.high_watermark,
                    last_stable_offset=-1 if failed else result.last_stable_offset,
                    log_start_offset=-1 if failed else result.log_start_offset,
                    records=list(result.chunks),
                    aborted_transactions=result.aborted_transactions,
                )
            )
        topics.append(FetchTopicResponse(topic=topic.topic, partitions=partitions))
    return FetchOutcome(
        FetchResponseData(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, topics=topics),
        total,
        has_error,
        redirects,
    )


def handle_replica_fetch(
    request: Any, ctx: BrokerContext, now_ms: int
) -> tuple[FetchOutcome, list[Partition]]:
    """One pass over a follower's Fetch (replica_id >= 0) on the leader: each partition's epochs and
    divergence are checked and the follower's log end recorded (which may move the high watermark),
    then batches are read up to the log end. Returns the outcome and the partitions whose high
    watermark moved (the shell completes acks=all produces waiting on them)."""
    remaining = request.max_bytes if request.max_bytes is not None else 52428800
    total = 0
    has_error = False
    advanced: list[Partition] = []
    topics: list[FetchTopicResponse] = []
    # Kafka: a follower's fetch needs CLUSTER_ACTION; refused, every partition is TOPIC_AUTHORIZATION_FAILED.
    refused = not allowed_on_cluster(AclOperation.CLUSTER_ACTION)
    for topic in request.topics:
        partitions: list[FetchPartitionResponse] = []
        view = ctx.cluster.topics.get(topic.topic)
        for fp in topic.partitions:
            part = (
                ctx.replicas.get(topic.topic, fp.partition)
                if view is not None and not ctx.fenced and not refused
                else None
            )
            if part is None:
                has_error = True
                error = (
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if refused
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if view is None
                    else ErrorCode.NOT_LEADER_OR_FOLLOWER
                )
                partitions.append(FetchPartitionResponse(fp.partition, error, -1, -1, -1, []))
                continue
            check = ctx.replicas.check_replica_fetch(
                part,
                request.replica_id,
                fp.fetch_offset,
                fp.last_fetched_epoch,
                fp.current_leader_epoch,
                now_ms,
            )
            if check.high_watermark_advanced:
                advanced.append(part)
            log = part.log
            if check.error_code != ErrorCode.NONE or check.diverging_epoch is not None:
                has_error = True
                partitions.append(
                    FetchPartitionResponse(
                        fp.partition,
                        check.error_code,
                        log.high_watermark,
                        log.high_watermark,
                        log.log_start_offset,
                        [],
                        diverging_epoch=check.diverging_epoch,
                    )
                )
                continue
            limit = min(fp.partition_max_bytes, remaining)
            result = ctx.replicas.read_for_replica(part, fp.fetch_offset, max(limit, 0))
            if result.error_code != ErrorCode.NONE:
                has_error = True
            quota = ctx.leader_quota
            if quota.is_throttled(topic.topic, fp.partition):
                # ReplicaManager.readFromLog: a throttled follower out of the ISR gets no records
                # while the quota is exceeded; KafkaApis records what throttled partitions are sent.
                in_sync = request.replica_id in part.replication.isr
                if quota.should_throttle(topic.topic, fp.partition, in_sync, now_ms):
                    result = dataclasses.replace(result, chunks=[])
                quota.record(result.size_in_bytes, now_ms)
            total += result.size_in_bytes
            remaining -= result.size_in_bytes
            partitions.append(
                FetchPartitionResponse(
                    fp.partition,
                    result.error_code,
                    result.high_watermark,
                    result.high_watermark,
                    result.log_start_offset,
                    list(result.chunks),
                )
            )
        topics.append(FetchTopicResponse(topic=topic.topic, partitions=partitions))
    outcome = FetchOutcome(
        FetchResponseData(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, topics=topics),
        total,
        has_error,
    )
    return outcome, advanced


# --- ListOffsets ------------------------------------------------------------------------------


def handle_list_offsets(request: Any, version: int, ctx: BrokerContext) -> Any:
    read_committed = version >= 2 and request.isolation_level == 1
    topics = []
    for topic in request.topics:
        partitions = []
        view = ctx.cluster.topics.get(topic.name)
        for lp in topic.partitions:
            part, error = led_partition(ctx, topic.name, lp.partition_index)
            ts, offset = -1, -1
            leader_epoch = _leader_epoch(view, lp.partition_index)
            if part is not None:
                log = part.log
                if lp.timestamp == LATEST_TIMESTAMP:
                    # read_committed consumers end at the last stable offset (KIP-98).
                    offset = ctx.replicas.last_stable_offset(part) if read_committed else log.high_watermark
                elif lp.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                    offset = log.log_start_offset
                elif lp.timestamp == MAX_TIMESTAMP:
                    # (-1, -1) for a log without timestamps, as Kafka answers.
                    offset, ts = log.max_timestamp_offset()
                elif lp.timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
                    # No tiered storage: UnifiedLog.fetchOffsetByTimestamp answers (-1, -1, epoch -1).
                    offset = leader_epoch = -1
                elif lp.timestamp < 0:
                    error = ErrorCode.UNSUPPORTED_VERSION
                else:
                    by_time = log.offset_for_timestamp(lp.timestamp)
                    if by_time is not None:
                        offset, ts = by_time
                    else:
                        # no record at or after the timestamp: Kafka answers offset, timestamp and
                        # leader epoch -1 (KafkaApis builds the entry from an empty TimestampAndOffset)
                        leader_epoch = -1
            entry = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                partition_index=lp.partition_index,
                error_code=error,
                timestamp=ts,
                offset=offset,
                leader_epoch=leader_epoch,
            )
            if version == 0:
                entry.old_style_offsets = [offset] if offset >= 0 else []
            partitions.append(entry)
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)


def _leader_epoch(view: TopicView | None, partition_index: int) -> int:
    if view is None:
        return -1
    for p in view.partitions:
        if p.partition_index == partition_index:
            return p.leader_epoch
    return -1


# --- OffsetForLeaderEpoch (KIP-101/KIP-320) -------------------------------------------------------


def handle_offset_for_leader_epoch(request: Any, version: int, ctx: BrokerContext) -> Any:
    """Where each requested leader epoch ends on this leader (LeaderEpochFileCache.endOffsetFor): a
    consumer checks, after a leader change, whether the offset it holds was truncated away (KIP-320).
    ``current_leader_epoch`` fences stale callers (FENCED_LEADER_EPOCH) and ones ahead of this broker
    (UNKNOWN_LEADER_EPOCH). A partition on one replica has had one epoch since its log start."""
    response_cls = OffsetForLeaderEpochResponse
    topic_cls = response_cls.OffsetForLeaderTopicResult
    partition_cls = topic_cls.EpochEndOffset
    topics = []
    for topic in request.topics:
        partitions = []
        # Kafka: DESCRIBE on the topic (a follower's request would need CLUSTER_ACTION; pykraft's
        # followers find divergence through Fetch, KIP-320, and never send this).
        described = allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
        for p in topic.partitions:
            part, error = led_partition(ctx, topic.topic, p.partition)
            if not described:
                part, error = None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
            epoch, end_offset = UNDEFINED_EPOCH, UNDEFINED_OFFSET
            if part is not None:
                current = (
                    part.replication.leader_epoch
                    if part.replicated
                    else _leader_epoch(ctx.cluster.topics.get(topic.topic), p.partition)
                )
                requested_current = p.current_leader_epoch if version >= 2 else -1
                if 0 <= requested_current < current:
                    error = ErrorCode.FENCED_LEADER_EPOCH
                elif requested_current > current:
                    error = ErrorCode.UNKNOWN_LEADER_EPOCH
                else:
                    epochs = (
                        part.epochs
                        if part.replicated
                        else LeaderEpochCache([(current, part.log.log_start_offset)])
                    )
                    epoch, end_offset = epochs.end_offset_for(p.leader_epoch, part.log.log_end_offset)
            partitions.append(
                partition_cls(
                    error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end_offset
                )
            )
        topics.append(topic_cls(topic=topic.topic, partitions=partitions))
    return response_cls(version=version, throttle_time_ms=0, topics=topics)


# --- InitProducerId (idempotent producers) ------------------------------------------------------


def handle_init_producer_id(request: Any, version: int, ctx: BrokerContext, now_ms: int) -> Any:
    if request.transactional_id is not None:
        # The transaction coordinator (KIP-360 bumps for transactional ids) is its own issue.
        error, pid = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1
    elif version >= 3 and (request.producer_id != -1 or request.producer_epoch != -1):
        # An idempotent producer asking to bump: Kafka gives it a fresh id at epoch 0 (no txn id).
        error, pid = ctx.producer_ids.generate_producer_id(now_ms)
    else:
        error, pid = ctx.producer_ids.generate_producer_id(now_ms)
    return InitProducerIdResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        producer_id=pid,
        producer_epoch=0 if error == ErrorCode.NONE else -1,
    )


# --- FindCoordinator (the group coordinator itself is pykraft.coordinator) -----------------------

COORDINATOR_KEY_TYPE_GROUP = 0
COORDINATOR_KEY_TYPE_TRANSACTION = 1


def handle_find_coordinator(request: Any, version: int, ctx: BrokerContext) -> Any:
    def answer(key_type: int, key: str) -> tuple[ErrorCode, str | None, int, str, int]:
        if key_type == COORDINATOR_KEY_TYPE_TRANSACTION:
            if not key:
                return ErrorCode.INVALID_REQUEST, "the transactional id is empty", -1, "", -1
            if not allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
                return (
                    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "Transactional Id authorization failed.",
                    -1,
                    "",
                    -1,
                )
            # The leader of the id's __transaction_state partition coordinates its transactions.
            internal_topic, num_partitions = TRANSACTION_STATE_TOPIC, ctx.transaction_state_num_partitions
        elif key_type == COORDINATOR_KEY_TYPE_GROUP:
            if not key:
                return ErrorCode.INVALID_GROUP_ID, "the group id is empty", -1, "", -1
            if not allowed(AclOperation.DESCRIBE, ResourceType.GROUP, key):
                return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", -1, "", -1
            # The leader of the group's __consumer_offsets partition coordinates the group.
            internal_topic, num_partitions = OFFSETS_TOPIC, ctx.offsets_topic_num_partitions
        else:
            return ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1
        topic = ctx.cluster.topics.get(internal_topic)
        index = partition_for(key, num_partitions)
        partitions = topic.partitions if topic is not None else ()
        leader = next((p.leader_id for p in partitions if p.partition_index == index), -1)
        broker = next((b for b in ctx.cluster.brokers if b.node_id == leader), None)
        if broker is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator is not available", -1, "", -1
        return ErrorCode.NONE, None, broker.node_id, broker.host, broker.port

    key_type = request.key_type if version >= 1 else COORDINATOR_KEY_TYPE_GROUP
    if version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, node_id, host, port = answer(key_type, key or "")
            coordinators.append(
                FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node_id, host=host, port=port, error_code=error, error_message=message
                )
            )
        return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)
    error, message, node_id, host, port = answer(key_type, request.key or "")
    return FindCoordinatorResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )


# --- WriteTxnMarkers (from transaction coordinators) ------------------------------------------------


@dataclass(slots=True)
class TxnMarkersOutcome:
    response: Any
    # (topic, partition, producer id, commit) of every marker appended.
    written: list[tuple[str, int, int, bool]]


def handle_write_txn_markers(
    request: Any, version: int, ctx: BrokerContext, now_ms: int, waits: list[ReplicationWait] | None = None
) -> TxnMarkersOutcome:
    """Append each marker to each partition this broker leads (Kafka's handleWriteTxnMarkersRequest);
    on a replicated partition the shell answers once the ISR has it (``waits``: topic_index is the
    marker's position, partition_index the partition's position in the flattened topic results)."""
    from kafka.protocol.producer import WriteTxnMarkersResponse

    result_cls: Any = WriteTxnMarkersResponse.WritableTxnMarkerResult
    topic_cls: Any = result_cls.WritableTxnMarkerTopicResult
    partition_cls: Any = topic_cls.WritableTxnMarkerPartitionResult
    markers: list[Any] = []
    written: list[tuple[str, int, int, bool]] = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions: list[Any] = []
            for index in topic.partition_indexes:
                part, error = led_partition(ctx, topic.name, index)
                if part is not None:
                    result = ctx.replicas.append_txn_marker(
                        part,
                        marker.producer_id,
                        marker.producer_epoch,
                        marker.coordinator_epoch,
                        bool(marker.transaction_result),
                        now_ms,
                    )
                    error = result.error_code
                    if error == ErrorCode.NONE:
                        written.append(
                            (topic.name, index, marker.producer_id, bool(marker.transaction_result))
                        )
                        if (
                            waits is not None
                            and part.replicated
                            and result.last_offset >= part.log.high_watermark
                        ):
                            waits.append(
                                ReplicationWait(len(markers), len(partitions), part, result.last_offset)
                            )
                partitions.append(partition_cls(partition_index=index, error_code=error))
            topics.append(topic_cls(name=topic.name, partitions=partitions))
        markers.append(result_cls(producer_id=marker.producer_id, topics=topics))
    return TxnMarkersOutcome(WriteTxnMarkersResponse(version=version, markers=markers), written)


# --- DeleteRecords ------------------------------------------------------------------------------


def handle_delete_records(request: Any, version: int, ctx: BrokerContext) -> Any:
    """Advance the log start offset (-1 = the high watermark); whole segments below it are deleted."""
    from kafka.protocol.admin import DeleteRecordsResponse

    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            part, error = led_partition(ctx, topic.name, p.partition_index)
            low_watermark = -1
            if part is not None:
                target = part.log.high_watermark if p.offset == -1 else p.offset
                if target < 0 or target > part.log.high_watermark:
                    error = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    error, low_watermark = ctx.replicas.delete_records(part, target)
            partitions.append(
                DeleteRecordsResponse.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=low_watermark, error_code=error
                )
            )
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(version=version, throttle_time_ms=0, topics=topics)
