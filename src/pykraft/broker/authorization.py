"""What each API asks of the authorizer (issue 16), pure: Kafka's KafkaApis checks, API by API.

The shell calls, for every request on the client listener when an authorizer is configured:

1. ``refuse(api_key, request, version)``: the whole answer when the request is refused as a whole (the
   group, the transactional id or the cluster is not authorized), else None;
2. ``split(api_key, request, version)``: removes from the request the topics the principal may not use
   and returns them with their error, so the handler serves only the rest;
3. ``merge(api_key, response, denied)``: adds the removed topics' partitions to the answer with that
   error (Kafka answers them in the same response);
4. ``filter_response(api_key, response, version)``: drops what the principal may not see from listings
   (ListGroups, ListTransactions, an OffsetFetch of all topics).

Produce, Fetch, Metadata and FindCoordinator check inside their handlers (``security.acls.allowed``).

Operations (Kafka's): READ a group to join, sync, heartbeat, leave or commit; DESCRIBE it to find its
coordinator, describe it or fetch its offsets; DELETE it to delete it or its offsets. WRITE a
transactional id for every transactional request, DESCRIBE it to find or describe it. READ a topic to
fetch or commit offsets of it, WRITE to produce or add it to a transaction, DESCRIBE for metadata and
offsets, DELETE for DeleteTopics and DeleteRecords, CREATE (on it or the cluster) to create it, ALTER
to add partitions to it (CreatePartitions),
DESCRIBE_CONFIGS for its configs, ALTER_CONFIGS to alter them (the same on a group for its group
configs). On the cluster: IDEMPOTENT_WRITE (or WRITE on some topic) for an idempotent producer id,
CLUSTER_ACTION for inter-broker requests, ALTER for elections, ACLs and SCRAM credentials, DESCRIBE
for describing ACLs, credentials, log dirs (DescribeLogDirs) and the quorum (DescribeQuorum).
DescribeCluster and DescribeTopicPartitions check inside their handlers (cluster_admin.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pykraft.core.errors import ErrorCode
from pykraft.protocol.messages import ApiKey, response_class
from pykraft.security.acls import (
    AclOperation,
    ResourceType,
    allowed,
    allowed_on_any,
    allowed_on_cluster,
)

GROUP = ResourceType.GROUP
TOPIC = ResourceType.TOPIC
TXN = ResourceType.TRANSACTIONAL_ID

# A topic-partition listing removed from a request: (topic, partitions, error).
Denied = list[tuple[str, list[int], ErrorCode]]


@dataclass(frozen=True, slots=True)
class TopicShape:
    """Where a request keeps its topics and partitions, and how its answer is built."""

    operation: AclOperation
    topic_class: str
    partition_class: str
    # Request partitions are objects with partition_index, or plain ints in ``partition_indexes``.
    int_partitions: bool = False
    # Extra fields of an answered partition (e.g. ListOffsets' offset -1).
    partition_defaults: tuple[tuple[str, Any], ...] = ()


TOPIC_SHAPES: dict[int, TopicShape] = {
    ApiKey.OFFSET_COMMIT: TopicShape(
        AclOperation.READ, "OffsetCommitResponseTopic", "OffsetCommitResponsePartition"
    ),
    ApiKey.TXN_OFFSET_COMMIT: TopicShape(
        AclOperation.READ, "TxnOffsetCommitResponseTopic", "TxnOffsetCommitResponsePartition"
    ),
    ApiKey.LIST_OFFSETS: TopicShape(
        AclOperation.DESCRIBE,
        "ListOffsetsTopicResponse",
        "ListOffsetsPartitionResponse",
        partition_defaults=(("timestamp", -1), ("offset", -1), ("leader_epoch", -1)),
    ),
    ApiKey.DELETE_RECORDS: TopicShape(
        AclOperation.DELETE,
        "DeleteRecordsTopicResult",
        "DeleteRecordsPartitionResult",
        partition_defaults=(("low_watermark", -1),),
    ),
    ApiKey.DESCRIBE_PRODUCERS: TopicShape(
        AclOperation.READ, "TopicResponse", "PartitionResponse", int_partitions=True
    ),
    ApiKey.OFFSET_DELETE: TopicShape(
        AclOperation.READ, "OffsetDeleteResponseTopic", "OffsetDeleteResponsePartition"
    ),
}

# ConsumerGroupHeartbeat (KIP-848) needs READ on the group like the classic group APIs, and so do the
# share group's heartbeat, fetch and acknowledge (KIP-932; KafkaApis: GROUP_AUTHORIZATION_FAILED for
# the whole request, READ on each topic checked in broker/share_fetch.py).
GROUP_READ_APIS = (
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_FETCH,
    ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
)


def idempotent_write_allowed() -> bool:
    """Kafka (KIP-679): IDEMPOTENT_WRITE on the cluster, or WRITE on some topic."""
    return allowed_on_cluster(AclOperation.IDEMPOTENT_WRITE) or allowed_on_any(AclOperation.WRITE, TOPIC)


# --- 1. whole-request refusals ---------------------------------------------------------------------------


def _answer(api_key: int, version: int, **fields: Any) -> Any:
    cls = response_class(api_key)
    assert cls is not None
    return cls(version=version, **fields)


def _every_partition(api_key: int, request: Any, version: int, error: ErrorCode) -> Any:
    response = _answer(api_key, version)
    merge(api_key, response, [(t, parts, error) for t, parts in _request_topics(api_key, request)])
    return response


def cluster_action_refusal(api_key: int, version: int) -> Any:
    """CLUSTER_AUTHORIZATION_FAILED for a node-to-controller RPC (BrokerRegistration, BrokerHeartbeat,
    AllocateProducerIds, AlterPartition) from a principal without CLUSTER_ACTION."""
    fields: dict[str, Any] = {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    if api_key == ApiKey.ALLOCATE_PRODUCER_IDS:
        fields.update(producer_id_start=-1, producer_id_len=0)
    return _answer(api_key, version, **fields)


def refuse(api_key: int, request: Any, version: int) -> Any | None:
    """The answer refusing ``request`` as a whole, or None when the handler may serve (part of) it."""
    check = _REFUSALS.get(api_key)
    return None if check is None else check(request, version)


def _group_read(api_key: int) -> Callable[[Any, int], Any | None]:
    def check(request: Any, version: int) -> Any | None:
        if allowed(AclOperation.READ, GROUP, request.group_id):
            return None
        return _answer(api_key, version, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)

    return check


def _offset_commit(request: Any, version: int) -> Any | None:
    if allowed(AclOperation.READ, GROUP, request.group_id):
        return None
    return _every_partition(ApiKey.OFFSET_COMMIT, request, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _txn_offset_commit(request: Any, version: int) -> Any | None:
    if not allowed(AclOperation.WRITE, TXN, request.transactional_id):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not allowed(AclOperation.READ, GROUP, request.group_id):
        error = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        return None
    return _every_partition(ApiKey.TXN_OFFSET_COMMIT, request, version, error)


def _offset_delete(request: Any, version: int) -> Any | None:
    if allowed(AclOperation.DELETE, GROUP, request.group_id):
        return None
    return _answer(ApiKey.OFFSET_DELETE, version, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[])


def _offset_fetch(request: Any, version: int) -> Any | None:
    if version >= 8:
        return None  # per group, in filter_response
    if allowed(AclOperation.DESCRIBE, GROUP, request.group_id):
        return None
    return _answer(ApiKey.OFFSET_FETCH, version, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[])


def _init_producer_id(request: Any, version: int) -> Any | None:
    if request.transactional_id is not None:
        if allowed(AclOperation.WRITE, TXN, request.transactional_id):
            return None
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif idempotent_write_allowed():
        return None
    else:
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return _answer(ApiKey.INIT_PRODUCER_ID, version, error_code=error, producer_id=-1, producer_epoch=-1)


def _txn_write(api_key: int, group_op: bool = False) -> Callable[[Any, int], Any | None]:
    def check(request: Any, version: int) -> Any | None:
        if not allowed(AclOperation.WRITE, TXN, request.transactional_id):
            return _answer(api_key, version, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if group_op and not allowed(AclOperation.READ, GROUP, request.group_id):
            return _answer(api_key, version, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return None

    return check


def _add_partitions_to_txn(request: Any, version: int) -> Any | None:
    response_cls = response_class(ApiKey.ADD_PARTITIONS_TO_TXN)
    assert response_cls is not None
    if version >= 4:
        # The brokers' batched verify-only form (KIP-890): an inter-broker request.
        if allowed_on_cluster(AclOperation.CLUSTER_ACTION):
            return None
        return response_cls(
            version=version, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[]
        )
    topics = [(t.name, list(t.partitions)) for t in request.v3_and_below_topics or []]
    if not allowed(AclOperation.WRITE, TXN, request.v3_and_below_transactional_id):
        errors = {t: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for t, _ in topics}
    else:
        denied = {t for t, _ in topics if not allowed(AclOperation.WRITE, TOPIC, t)}
        if not denied:
            return None
        # Kafka: nothing is added; the others are OPERATION_NOT_ATTEMPTED.
        errors = {
            t: ErrorCode.TOPIC_AUTHORIZATION_FAILED if t in denied else ErrorCode.OPERATION_NOT_ATTEMPTED
            for t, _ in topics
        }
    TopicResult = response_cls.AddPartitionsToTxnTopicResult
    PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult
    return response_cls(
        version=version,
        results_by_topic_v3_and_below=[
            TopicResult(
                name=t,
                results_by_partition=[
                    PartitionResult(partition_index=p, partition_error_code=errors[t]) for p in parts
                ],
            )
            for t, parts in topics
        ],
    )


def _write_txn_markers(request: Any, version: int) -> Any | None:
    if allowed_on_cluster(AclOperation.CLUSTER_ACTION):
        return None
    response_cls = response_class(ApiKey.WRITE_TXN_MARKERS)
    assert response_cls is not None
    Marker = response_cls.WritableTxnMarkerResult
    Topic = Marker.WritableTxnMarkerTopicResult
    Partition = Topic.WritableTxnMarkerPartitionResult
    return response_cls(
        version=version,
        markers=[
            Marker(
                producer_id=m.producer_id,
                topics=[
                    Topic(
                        name=t.name,
                        partitions=[
                            Partition(partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                            for p in t.partition_indexes
                        ],
                    )
                    for t in m.topics
                ],
            )
            for m in request.markers
        ],
    )


def _elect_leaders(request: Any, version: int) -> Any | None:
    if allowed_on_cluster(AclOperation.ALTER):
        return None
    return _answer(
        ApiKey.ELECT_LEADERS,
        version,
        error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        replica_election_results=[],
    )


def _cluster(
    operation: AclOperation, build: Callable[[Any, int, ErrorCode, str], Any]
) -> Callable[[Any, int], Any | None]:
    def check(request: Any, version: int) -> Any | None:
        if allowed_on_cluster(operation):
            return None
        return build(
            request, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        )

    return check


def _security_refusals() -> dict[int, Callable[[Any, int], Any | None]]:
    from pykraft.broker import cluster_admin, features_api, quotas_api, reassignments_api, security_api

    def describe_acls(request: Any, version: int, error: ErrorCode, message: str) -> Any:
        return _answer(ApiKey.DESCRIBE_ACLS, version, error_code=error, error_message=message, resources=[])

    def describe_scram(request: Any, version: int, error: ErrorCode, message: str) -> Any:
        return _answer(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            version,
            error_code=error,
            error_message=message,
            results=[],
        )

    return {
        ApiKey.DESCRIBE_ACLS: _cluster(AclOperation.DESCRIBE, describe_acls),
        ApiKey.CREATE_ACLS: _cluster(AclOperation.ALTER, security_api.create_acls_error),
        ApiKey.DELETE_ACLS: _cluster(AclOperation.ALTER, security_api.delete_acls_error),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(AclOperation.DESCRIBE, describe_scram),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _cluster(
            AclOperation.ALTER, security_api.alter_user_scram_credentials_error
        ),
        # KafkaApis: DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster for client quotas.
        ApiKey.DESCRIBE_CLIENT_QUOTAS: _cluster(
            AclOperation.DESCRIBE_CONFIGS, quotas_api.describe_client_quotas_error
        ),
        ApiKey.ALTER_CLIENT_QUOTAS: _cluster(
            AclOperation.ALTER_CONFIGS, quotas_api.alter_client_quotas_error
        ),
        # KafkaApis / ControllerApis: ALTER on the cluster to reassign, DESCRIBE to list (KIP-455).
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster(AclOperation.ALTER, reassignments_api.alter_error),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster(AclOperation.DESCRIBE, reassignments_api.list_error),
        # ControllerApis.handleUnregisterBroker: ALTER on the cluster.
        ApiKey.UNREGISTER_BROKER: _cluster(AclOperation.ALTER, cluster_admin.unregister_broker_error),
        # KafkaApis / ControllerApis: ALTER on the cluster to update features.
        ApiKey.UPDATE_FEATURES: _cluster(AclOperation.ALTER, features_api.update_features_error),
    }


def _describe_log_dirs(request: Any, version: int) -> Any | None:
    """KafkaApis.handleDescribeLogDirsRequest: DESCRIBE on the cluster, else no log dir at all and
    CLUSTER_AUTHORIZATION_FAILED (a top-level error from v3; v1-2 clients just see no dirs)."""
    if allowed_on_cluster(AclOperation.DESCRIBE):
        return None
    return _answer(
        ApiKey.DESCRIBE_LOG_DIRS, version, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[]
    )


def _describe_quorum(request: Any, version: int) -> Any | None:
    """DESCRIBE on the cluster, as Kafka's controller checks it (ControllerApis.handleDescribeQuorum): a
    pykraft broker forwards with its own identity, so it checks the client's first."""
    if allowed_on_cluster(AclOperation.DESCRIBE):
        return None
    return _answer(
        ApiKey.DESCRIBE_QUORUM,
        version,
        error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        topics=[],
        nodes=[],
    )


def _share_state_rpc(api_key: int) -> Callable[[Any, int], Any | None]:
    """The share coordinator's RPCs (KIP-932, 83-87) are for brokers: CLUSTER_ACTION, else every
    partition answered CLUSTER_AUTHORIZATION_FAILED (KafkaApis.handleReadShareGroupStateRequest and the
    others)."""

    def check(request: Any, version: int) -> Any | None:
        if allowed_on_cluster(AclOperation.CLUSTER_ACTION):
            return None
        response_cls: Any = response_class(api_key)
        result_cls = response_cls.fields["results"].data_class
        partition_cls = result_cls.fields["partitions"].data_class
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        results = [
            result_cls(
                topic_id=t.topic_id,
                partitions=[partition_cls(partition=p.partition, error_code=error) for p in t.partitions],
            )
            for t in request.topics
        ]
        return response_cls(version=version, results=results)

    return check


_REFUSALS: dict[int, Callable[[Any, int], Any | None]] = {
    **{key: _group_read(key) for key in GROUP_READ_APIS},
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _txn_write(ApiKey.ADD_OFFSETS_TO_TXN, group_op=True),
    ApiKey.END_TXN: _txn_write(ApiKey.END_TXN),
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    **{
        key: _share_state_rpc(key)
        for key in (
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            ApiKey.READ_SHARE_GROUP_STATE,
            ApiKey.WRITE_SHARE_GROUP_STATE,
            ApiKey.DELETE_SHARE_GROUP_STATE,
            ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        )
    },
    ApiKey.ELECT_LEADERS: _elect_leaders,
    ApiKey.DESCRIBE_LOG_DIRS: _describe_log_dirs,
    ApiKey.DESCRIBE_QUORUM: _describe_quorum,
    **_security_refusals(),
}


# --- 2./3. topics removed from a request, answered with an error -----------------------------------------


def _request_topics(api_key: int, request: Any) -> list[tuple[str, list[int]]]:
    shape = TOPIC_SHAPES[api_key]
    if shape.int_partitions:
        return [(t.name, list(t.partition_indexes)) for t in request.topics or []]
    return [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics or []]


def split(api_key: int, request: Any, version: int) -> Denied:
    """Remove from ``request`` what the principal may not do; return it with its error."""
    denied: Denied = []
    shape = TOPIC_SHAPES.get(api_key)
    if shape is not None:
        kept = []
        for topic, (name, partitions) in zip(
            request.topics or [], _request_topics(api_key, request), strict=True
        ):
            if allowed(shape.operation, TOPIC, name):
                kept.append(topic)
            else:
                denied.append((name, partitions, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        if denied:
            request.topics = kept
        return denied
    if api_key == ApiKey.CREATE_TOPICS:
        if allowed_on_cluster(AclOperation.CREATE):
            return []
        kept = [t for t in request.topics if allowed(AclOperation.CREATE, TOPIC, t.name)]
        denied = [(t.name, [], ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in request.topics if t not in kept]
        request.topics = kept
        return denied
    if api_key == ApiKey.DELETE_TOPICS:
        names = [t.name for t in request.topics] if version >= 6 else list(request.topic_names or [])
        refused = {n for n in names if n is not None and not allowed(AclOperation.DELETE, TOPIC, n)}
        if not refused:
            return []
        if version >= 6:
            request.topics = [t for t in request.topics if t.name not in refused]
        else:
            request.topic_names = [n for n in request.topic_names if n not in refused]
        return [(n, [], ErrorCode.TOPIC_AUTHORIZATION_FAILED) for n in sorted(refused)]
    if api_key == ApiKey.CREATE_PARTITIONS:
        # Kafka's ControllerApis.createPartitions: ALTER on each topic; a name given twice is the
        # controller's INVALID_REQUEST whatever the ACLs say, so it stays in the request.
        names = [t.name for t in request.topics]
        refused = {n for n in names if names.count(n) == 1 and not allowed(AclOperation.ALTER, TOPIC, n)}
        request.topics = [t for t in request.topics if t.name not in refused]
        return [(n, [], ErrorCode.TOPIC_AUTHORIZATION_FAILED) for n in names if n in refused]
    if api_key in (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        op = (
            AclOperation.DESCRIBE_CONFIGS
            if api_key == ApiKey.DESCRIBE_CONFIGS
            else AclOperation.ALTER_CONFIGS
        )
        kept = []
        for resource in request.resources:
            if resource.resource_type == 2 and not allowed(op, TOPIC, resource.resource_name):
                denied.append((resource.resource_name, [2], ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif resource.resource_type == 4 and not allowed_on_cluster(op):
                denied.append((resource.resource_name, [4], ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
            elif resource.resource_type == 32 and not allowed(op, GROUP, resource.resource_name):
                # Group configs (KIP-848): the operation on the group (Kafka's ConfigHelper).
                denied.append((resource.resource_name, [32], ErrorCode.GROUP_AUTHORIZATION_FAILED))
            else:
                kept.append(resource)
        request.resources = kept
        return denied
    if api_key in (ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS):
        op = AclOperation.DESCRIBE if api_key == ApiKey.DESCRIBE_GROUPS else AclOperation.DELETE
        groups = list(request.groups if api_key == ApiKey.DESCRIBE_GROUPS else request.groups_names)
        refused_groups = [g for g in groups if not allowed(op, GROUP, g)]
        if refused_groups:
            kept_groups = [g for g in groups if g not in refused_groups]
            if api_key == ApiKey.DESCRIBE_GROUPS:
                request.groups = kept_groups
            else:
                request.groups_names = kept_groups
        return [(g, [], ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in refused_groups]
    if api_key in (ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_DESCRIBE):
        # DESCRIBE on each group, the groups refused answered GROUP_AUTHORIZATION_FAILED (KIP-848, KIP-932).
        refused_groups = [g for g in request.group_ids if not allowed(AclOperation.DESCRIBE, GROUP, g)]
        request.group_ids = [g for g in request.group_ids if g not in refused_groups]
        return [(g, [], ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in refused_groups]
    if api_key == ApiKey.DESCRIBE_TRANSACTIONS:
        ids = list(request.transactional_ids)
        refused_ids = [t for t in ids if not allowed(AclOperation.DESCRIBE, TXN, t)]
        request.transactional_ids = [t for t in ids if t not in refused_ids]
        return [(t, [], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for t in refused_ids]
    return denied


def merge(api_key: int, response: Any, denied: Denied) -> None:
    """Answer what ``split`` removed, in the same response."""
    if not denied:
        return
    cls = type(response)
    shape = TOPIC_SHAPES.get(api_key)
    if shape is not None:
        topic_cls = getattr(cls, shape.topic_class)
        partition_cls = getattr(topic_cls, shape.partition_class)
        defaults = dict(shape.partition_defaults)
        for name, partitions, error in denied:
            response.topics.append(
                topic_cls(
                    name=name,
                    partitions=[
                        partition_cls(partition_index=p, error_code=error, **defaults) for p in partitions
                    ],
                )
            )
    elif api_key == ApiKey.CREATE_TOPICS:
        for name, _, error in denied:
            response.topics.append(
                cls.CreatableTopicResult(
                    name=name,
                    error_code=error,
                    error_message="Authorization failed.",
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=[],
                )
            )
    elif api_key == ApiKey.DELETE_TOPICS:
        for name, _, error in denied:
            response.responses.append(cls.DeletableTopicResult(name=name, error_code=error))
    elif api_key == ApiKey.CREATE_PARTITIONS:
        for name, _, error in denied:
            response.results.append(
                cls.CreatePartitionsTopicResult(
                    name=name, error_code=error, error_message="Authorization failed."
                )
            )
    elif api_key == ApiKey.DESCRIBE_CONFIGS:
        for name, (resource_type,), error in denied:
            response.results.append(
                cls.DescribeConfigsResult(
                    error_code=error,
                    error_message="Authorization failed.",
                    resource_type=resource_type,
                    resource_name=name,
                    configs=[],
                )
            )
    elif api_key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        for name, (resource_type,), error in denied:
            response.responses.append(
                cls.AlterConfigsResourceResponse(
                    error_code=error,
                    error_message="Authorization failed.",
                    resource_type=resource_type,
                    resource_name=name,
                )
            )
    elif api_key == ApiKey.DESCRIBE_GROUPS:
        for name, _, error in denied:
            response.groups.append(
                cls.DescribedGroup(
                    error_code=error,
                    group_id=name,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )
            )
    elif api_key in (ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_DESCRIBE):
        for name, _, error in denied:
            response.groups.append(
                cls.DescribedGroup(
                    error_code=error,
                    error_message=None,
                    group_id=name,
                    group_state="",
                    group_epoch=0,
                    assignment_epoch=0,
                    assignor_name="",
                    members=[],
                    authorized_operations=-(2**31),
                )
            )
    elif api_key == ApiKey.DELETE_GROUPS:
        for name, _, error in denied:
            response.results.append(cls.DeletableGroupResult(group_id=name, error_code=error))
    elif api_key == ApiKey.DESCRIBE_TRANSACTIONS:
        for name, _, error in denied:
            response.transaction_states.append(
                cls.TransactionState(
                    error_code=error,
                    transactional_id=name,
                    transaction_state="",
                    transaction_timeout_ms=0,
                    transaction_start_time_ms=-1,
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=[],
                )
            )


# --- 4. listings --------------------------------------------------------------------------------------------


def filter_response(api_key: int, response: Any, version: int, request: Any) -> None:
    """Drop from a listing what the principal may not see."""
    if api_key == ApiKey.CREATE_TOPICS:
        # Kafka's ControllerApis.createTopics: a created topic's configs (and its partition count and
        # replication factor) only for a principal that may DESCRIBE_CONFIGS it.
        for topic in response.topics:
            if topic.error_code == ErrorCode.NONE and not allowed(
                AclOperation.DESCRIBE_CONFIGS, TOPIC, topic.name
            ):
                topic.configs = []
                topic.num_partitions = -1
                topic.replication_factor = -1
                topic.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    elif api_key == ApiKey.LIST_GROUPS:
        if not allowed_on_cluster(AclOperation.DESCRIBE):
            response.groups = [
                g for g in response.groups if allowed(AclOperation.DESCRIBE, GROUP, g.group_id)
            ]
    elif api_key == ApiKey.LIST_TRANSACTIONS:
        response.transaction_states = [
            t for t in response.transaction_states if allowed(AclOperation.DESCRIBE, TXN, t.transactional_id)
        ]
    elif api_key == ApiKey.OFFSET_FETCH:
        if version >= 8:
            asked = {g.group_id: g.topics for g in request.groups}
            for group in response.groups:
                if not allowed(AclOperation.DESCRIBE, GROUP, group.group_id):
                    group.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
                    group.topics = []
                else:
                    group.topics = _offset_fetch_topics(
                        group.topics, named=asked.get(group.group_id) is not None
                    )
        else:
            response.topics = _offset_fetch_topics(response.topics, named=request.topics is not None)


def _offset_fetch_topics(topics: list[Any], *, named: bool) -> list[Any]:
    """KafkaApis.handleOffsetFetchRequest: topics the request named and the principal may not describe
    answer TOPIC_AUTHORIZATION_FAILED per partition; a fetch of every topic just leaves them out."""
    if not named:
        return [t for t in topics if allowed(AclOperation.DESCRIBE, TOPIC, t.name)]
    for topic in topics:
        if not allowed(AclOperation.DESCRIBE, TOPIC, topic.name):
            for partition in topic.partitions:
                partition.committed_offset = -1
                partition.metadata = None
                partition.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                if hasattr(partition, "committed_leader_epoch"):
                    partition.committed_leader_epoch = -1
    return topics
