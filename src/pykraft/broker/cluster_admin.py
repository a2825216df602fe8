"""The admin describe APIs a broker answers from its own state, pure: DescribeCluster (60),
DescribeTopicPartitions (75, KIP-966) and DescribeLogDirs (35).

DescribeCluster and DescribeTopicPartitions read the same ``ClusterView`` Metadata does (the broker's
copy of the metadata image); DescribeLogDirs reads the replica manager's partition logs (their sizes
are tracked segment by segment in memory) and the log dirs' volume figures, which the shell measures
(``os.statvfs``) and passes in.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    DescribeClusterResponse,
    DescribeLogDirsResponse,
    DescribeTopicPartitionsResponse,
)

from pykraft.broker.handlers import (
    ENCODED_TOPICS_SLACK,
    BrokerContext,
    BrokerView,
    TopicView,
    is_valid_topic_name,
)
from pykraft.broker.replica_manager import Partition, ReplicaManager
from pykraft.coordinator.offsets_records import OFFSETS_TOPIC
from pykraft.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from pykraft.core.errors import ErrorCode
from pykraft.core.uuid import ZERO_UUID
from pykraft.protocol.messages import (
    AUTHORIZED_OPERATIONS_OMITTED,
    SplicedResponse,
    UnregisterBrokerResponse,
    array_entry_encoder,
)
from pykraft.security.acls import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    ResourceType,
    allowed,
    allowed_on_cluster,
    authorized_operations,
    to_32_bit_field,
)

# KIP-919's EndpointType (clients/.../admin/EndpointType.java).
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2
# Kafka's max.request.partition.size.limit (ServerConfigs, default 2000): DescribeTopicPartitions never
# answers more partitions than this, whatever ResponsePartitionLimit asks.
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000
# Kafka's Topic.isInternal (the share-group state topic is not served by pykraft).
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


# --- DescribeCluster ------------------------------------------------------------------------------------


def endpoint_type_refusal(version: int, requested: int, expected: int) -> tuple[ErrorCode, str] | None:
    """AuthHelper.computeDescribeClusterResponse: an unknown endpoint type is UNSUPPORTED_ENDPOINT_TYPE,
    a known one this listener does not serve MISMATCHED_ENDPOINT_TYPE (a broker describes brokers, a
    controller controllers); v0 predates both codes (KIP-919) and gets INVALID_REQUEST."""
    names = {ENDPOINT_TYPE_BROKER: "BROKER", ENDPOINT_TYPE_CONTROLLER: "CONTROLLER"}
    if requested not in names:
        error = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        return error, f"Unsupported endpoint type {requested}"
    if requested != expected:
        error = ErrorCode.INVALID_REQUEST if version == 0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
        return error, (
            f"The request was sent to an endpoint of type {names[expected]}, but we wanted an endpoint "
            f"of type {names[requested]}"
        )
    return None


def describe_cluster_refusal(version: int, error: ErrorCode, message: str) -> Any:
    """The bare answer Kafka gives a refused DescribeCluster: the error, its message, schema defaults."""
    return DescribeClusterResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        endpoint_type=ENDPOINT_TYPE_BROKER,
        cluster_id="",
        controller_id=-1,
        brokers=[],
        authorized_operations=None,
    )


def handle_describe_cluster(request: Any, version: int, ctx: BrokerContext, rng: random.Random) -> Any:
    """KafkaApis.handleDescribeCluster: the brokers with this listener's endpoint (the fenced ones too
    when v2 asks, KIP-1073), the cluster id, and as controller id a random live broker (KRaft clients
    never reach the controllers; KRaftMetadataCache.getRandomAliveBrokerId). No ACL is needed to
    describe the cluster from a broker (unlike a controller, which wants ALTER); the authorized
    operations, when asked, are those on the cluster, or none without DESCRIBE on it."""
    requested = request.endpoint_type if version >= 1 else ENDPOINT_TYPE_BROKER
    refusal = endpoint_type_refusal(version, requested, ENDPOINT_TYPE_BROKER)
    if refusal is not None:
        return describe_cluster_refusal(version, *refusal)
    cluster = ctx.cluster
    include_fenced = version >= 2 and bool(request.include_fenced_brokers)
    listed: list[tuple[BrokerView, bool]] = [(b, False) for b in cluster.brokers]
    if include_fenced:
        listed.extend((b, True) for b in cluster.fenced_brokers)
    listed.sort(key=lambda entry: entry[0].node_id)
    alive = [b.node_id for b in cluster.brokers]
    operations: frozenset[AclOperation] | None = None  # not asked: Int.MIN on the wire
    if request.include_cluster_authorized_operations:
        operations = (
            authorized_operations(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)
            if allowed_on_cluster(AclOperation.DESCRIBE)
            else frozenset()
        )
    return DescribeClusterResponse(
        version=version,
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=ENDPOINT_TYPE_BROKER,
        cluster_id=cluster.cluster_id or "",
        controller_id=rng.choice(alive) if alive else -1,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=fenced
            )
            for b, fenced in listed
        ],
        authorized_operations=None if operations is None else {int(op) for op in operations},
    )


# --- DescribeTopicPartitions (KIP-966) ------------------------------------------------------------------

_Topic: Any = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
_Partition: Any = _Topic.DescribeTopicPartitionsResponsePartition
_Cursor: Any = DescribeTopicPartitionsResponse.Cursor


def _topic_error(name: str, error: ErrorCode) -> Any:
    return _Topic(
        error_code=error,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[],
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _invalid_request(request: Any, version: int) -> Any:
    """DescribeTopicPartitionsRequest.getErrorResponse: every named topic with INVALID_REQUEST and
    nothing else (the schema has no error message to say why)."""
    return DescribeTopicPartitionsResponse(
        version=version,
        throttle_time_ms=0,
        topics=[_topic_error(t.name or "", ErrorCode.INVALID_REQUEST) for t in request.topics],
        next_cursor=None,
    )


def _partitions(view: TopicView, start: int, max_count: int, live: frozenset[int]) -> tuple[list[Any], int]:
    """KRaftMetadataCache.getPartitionMetadataForDescribeTopicResponse: partitions ``start`` on, at most
    ``max_count``, and the next index not answered (-1 when the topic is done). A leader that is not a
    live broker is -1, as in Metadata; replicas on brokers that are not live (unregistered, fenced, or
    without this listener) are offline. pykraft has no ELR (KIP-966's eligible leader replicas need
    eligible.leader.replicas.version), so both ELR lists are empty."""
    count = len(view.partitions)
    upper = min(count, start + max_count)
    answered = [
        _Partition(
            error_code=ErrorCode.NONE,
            partition_index=p.partition_index,
            leader_id=p.leader_id if p.leader_id in live else -1,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            eligible_leader_replicas=[],
            last_known_elr=[],
            offline_replicas=[r for r in p.replicas if r not in live],
        )
        for p in view.partitions[start:upper]
    ]
    return answered, (upper if upper < count else -1)


def handle_describe_topic_partitions(
    request: Any,
    version: int,
    ctx: BrokerContext,
    max_partitions: int = MAX_REQUEST_PARTITION_SIZE_LIMIT,
) -> Any:
    """DescribeTopicPartitionsRequestHandler (Kafka 3.8+): the named topics, or every topic when none
    is named, in name order from the cursor's topic on, at most ResponsePartitionLimit partitions (kept
    within [1, max.request.partition.size.limit]); when the limit cuts a topic short, or topics are left
    over, NextCursor names where the next page starts.

    A named topic the principal may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED (whether it exists or
    not); when listing every topic it is left out. A named topic that does not exist is
    UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name Kafka could never create). A cursor
    outside the named topics, or with a negative partition, is INVALID_REQUEST for every named topic."""
    cluster = ctx.cluster
    cursor = request.cursor
    cursor_topic: str = cursor.topic_name if cursor is not None and cursor.topic_name is not None else ""
    fetch_all = not request.topics
    if fetch_all:
        names = {n for n in cluster.topics if n >= cursor_topic}
    else:
        if any(t.name is None for t in request.topics):
            return _invalid_request(request, version)  # a null name: Kafka's parser refuses it
        names = {t.name for t in request.topics if t.name >= cursor_topic}
        if cursor is not None and cursor_topic not in names:
            # "DescribeTopicPartitionsRequest topic list should contain the cursor topic"
            return _invalid_request(request, version)
    if cursor is not None and cursor.partition_index < 0:
        # "DescribeTopicPartitionsRequest cursor partition must be valid"
        return _invalid_request(request, version)

    # Topics the principal may not describe: not even whether they exist is disclosed.
    unauthorized: list[Any] = []
    authorized: list[str] = []
    for name in sorted(names):
        if allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            authorized.append(name)
        elif not fetch_all:
            unauthorized.append(_topic_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))

    live = frozenset(b.node_id for b in cluster.brokers)
    remaining = max(min(max_partitions, request.response_partition_limit), 1)
    entries: list[bytes] = []
    next_cursor: Any = None

    def operations_on(name: str) -> int:
        # Every answered topic (unknown ones too) carries the principal's operations on it (KIP-430).
        return to_32_bit_field(authorized_operations(ResourceType.TOPIC, name))

    def answer(topic: Any) -> None:
        topic.topic_authorized_operations = operations_on(topic.name)
        entries.append(_encode_topic(topic, version))

    for name in authorized:
        if remaining <= 0:
            # The page is full: the next one starts at this topic (which may since have gone).
            next_cursor = _Cursor(topic_name=name, partition_index=0)
            break
        view = cluster.topics.get(name)
        if view is None:
            if not fetch_all:
                error = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if is_valid_topic_name(name)
                    else ErrorCode.INVALID_TOPIC_EXCEPTION
                )
                answer(_topic_error(name, error))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        if start == 0 and len(view.partitions) <= remaining:
            # The whole topic: encoded once per change of it (issue 29, as Metadata).
            operations = operations_on(name)
            encode = functools.partial(_encode_whole_topic, version, name, view, live, operations)
            entries.append(ctx.described_topics.get(live, name, (version, operations), view, encode))
            remaining -= len(view.partitions)
            continue
        partitions, next_partition = _partitions(view, start, remaining, live)
        answer(_described_topic(name, view, partitions))
        if next_partition != -1:
            next_cursor = _Cursor(topic_name=name, partition_index=next_partition)
            break
        remaining -= len(partitions)
    if len(ctx.described_topics) > ENCODED_TOPICS_SLACK * len(cluster.topics) + 64:
        ctx.described_topics.forget_except(cluster.topics.__contains__)
    for topic in unauthorized:
        entries.append(_encode_topic(topic, version))
    shell = DescribeTopicPartitionsResponse(
        version=version, throttle_time_ms=0, topics=[], next_cursor=next_cursor
    )
    # The body: throttle_time_ms, then the topics.
    return SplicedResponse(shell, entries, flexible=True, head_bytes=4)


_encode_topic = array_entry_encoder(_Topic, flexible=True)


def _described_topic(name: str, view: TopicView, partitions: list[Any]) -> Any:
    return _Topic(
        error_code=ErrorCode.NONE,
        name=name,
        topic_id=view.topic_id,
        is_internal=name in INTERNAL_TOPICS,
        partitions=partitions,
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _encode_whole_topic(
    version: int, name: str, view: TopicView, live: frozenset[int], operations: int
) -> bytes:
    topic = _described_topic(name, view, _partitions(view, 0, len(view.partitions), live)[0])
    topic.topic_authorized_operations = operations
    return _encode_topic(topic, version)


# --- DescribeLogDirs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LogDirUsage:
    """One of log.dirs as the shell found it: its absolute path, and its volume's total and usable
    bytes (``os.statvfs``), or KAFKA_STORAGE_ERROR when the directory cannot be read."""

    path: str
    total_bytes: int = -1
    usable_bytes: int = -1
    error_code: ErrorCode = ErrorCode.NONE


def _offset_lag(part: Partition) -> int:
    """How far the replica's log end is behind the partition's high watermark (the schema's
    OffsetLag). On the leader, and in Kafka (ReplicaManager.getLogEndOffsetLag: its own high
    watermark, never past its log end), that is 0; a follower here knows the leader's high watermark
    from its last fetch, so a follower behind it reports how far."""
    log = part.log
    high_watermark = log.high_watermark
    if part.replicated and not part.replication.is_leader:
        high_watermark = max(high_watermark, part.leader_high_watermark)
    return max(high_watermark - log.log_end_offset, 0)


def handle_describe_log_dirs(
    request: Any,
    version: int,
    replicas: ReplicaManager,
    log_dirs: Sequence[LogDirUsage],
) -> Any:
    """ReplicaManager.describeLogDirs: one result per log dir, listing the partitions whose log is in it
    (every one when Topics is null, else those named; partitions this broker does not host are left
    out, and so are topics left with none) with the bytes of their log segments. A dir that is offline
    or cannot be read answers KAFKA_STORAGE_ERROR and nothing else, the others as usual. A partition
    is in the dir its ``log_dir`` names (the shell names each dir by its absolute path, as
    ``LogDirUsage.path`` does). A log being moved between dirs (AlterReplicaLogDirs) does not exist,
    so IsFutureKey is always false. DESCRIBE on the cluster is checked before (authorization.refuse)."""
    wanted: set[tuple[str, int]] | None = None
    if request.topics is not None:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    # log dir -> topic -> partitions, in topic and partition order.
    by_dir: dict[str, dict[str, list[Any]]] = {}
    for topic, index in sorted(replicas.partitions):
        if wanted is not None and (topic, index) not in wanted:
            continue
        part = replicas.get(topic, index)  # opens a log a restart deferred
        if part is None:
            continue  # it could not be opened: its dir is offline now
        by_dir.setdefault(part.log_dir, {}).setdefault(topic, []).append(
            DescribeLogDirsResponse.DescribeLogDirsResult.DescribeLogDirsTopic.DescribeLogDirsPartition(
                partition_index=index,
                partition_size=part.log.size_in_bytes,
                offset_lag=_offset_lag(part),
                is_future_key=False,
            )
        )
    results = []
    for usage in log_dirs:
        ok = usage.error_code == ErrorCode.NONE
        topics = (
            [
                DescribeLogDirsResponse.DescribeLogDirsResult.DescribeLogDirsTopic(
                    name=name, partitions=parts
                )
                for name, parts in by_dir.get(usage.path, {}).items()
            ]
            if ok
            else []
        )
        results.append(
            DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=usage.error_code,
                log_dir=usage.path,
                topics=topics,
                total_bytes=usage.total_bytes if ok else -1,
                usable_bytes=usage.usable_bytes if ok else -1,
                is_cordoned=False,
            )
        )
    return DescribeLogDirsResponse(
        version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, results=results
    )


def unregister_broker_response(version: int, error: ErrorCode, message: str | None = None) -> Any:
    """UnregisterBroker (64)'s answer; also the refusal a broker process sends when no controller answers
    (NOT_CONTROLLER) or the principal may not ALTER the cluster."""
    return UnregisterBrokerResponse(
        version=version, throttle_time_ms=0, error_code=error, error_message=message
    )


def unregister_broker_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    return unregister_broker_response(version, error, message)
