"""DescribeCluster (60), DescribeTopicPartitions (75, KIP-966) and DescribeLogDirs (35) on a broker,
the pure handlers (broker/cluster_admin.py): each request goes through the wire as a client sends it,
and each answer back through the wire as a client reads it."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeLogDirsRequest,
    DescribeTopicPartitionsRequest,
)

from pykraft.broker import authorization, cluster_admin
from pykraft.broker.cluster_admin import LogDirUsage
from pykraft.broker.handlers import BrokerContext, BrokerView, ClusterView, PartitionView, TopicView
from pykraft.broker.producer_id_manager import ProducerIdManager
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.core.errors import ErrorCode
from pykraft.log.partition_log import LogConfig
from pykraft.protocol import messages
from pykraft.protocol.messages import ApiKey
from pykraft.protocol.records import Record, build_batch
from pykraft.security.acls import (
    CLUSTER_RESOURCE_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    AclPermissionType,
    AuthorizerConfig,
    PatternType,
    RequestAuthorization,
    ResourceType,
    StandardAcl,
    authorize_request,
    to_32_bit_field,
)
from tests.unit.test_producer_snapshot import MemoryOpener

INT_MIN = -(2**31)
TOPIC_OPS = to_32_bit_field(SUPPORTED_OPERATIONS[ResourceType.TOPIC])
CLUSTER_OPS = {int(op) for op in SUPPORTED_OPERATIONS[ResourceType.CLUSTER]}


def _replicas() -> ReplicaManager:
    # Two appends of three records (~230 bytes each) take two segments; one of five (~350) still fits.
    config = LogConfig(segment_bytes=400, retention_ms=-1, retention_bytes=-1)
    return ReplicaManager(MemoryOpener(), config, producer_id_expiration_ms=60_000)


def _topic(name: str, partitions: int, *, leader: int = 1, replicas: tuple[int, ...] = (1,)) -> TopicView:
    return TopicView(
        name,
        uuid.uuid5(uuid.NAMESPACE_DNS, name),
        tuple(PartitionView(i, leader, 3 + i, replicas, replicas) for i in range(partitions)),
    )


def _ctx(
    *topics: TopicView, brokers: tuple[int, ...] = (1, 2, 3), fenced: tuple[int, ...] = ()
) -> BrokerContext:
    cluster = ClusterView(
        cluster_id="cluster-xyz",
        controller_id=1,
        brokers=tuple(BrokerView(b, f"host-{b}", 9000 + b, f"rack-{b}") for b in brokers),
        topics={t.name: t for t in topics},
        fenced_brokers=tuple(BrokerView(b, f"host-{b}", 9000 + b) for b in fenced),
    )
    return BrokerContext(
        node_id=1,
        cluster=cluster,
        replicas=_replicas(),
        producer_ids=ProducerIdManager(1),
        auto_create_topics_enable=False,
    )


def _exchange(request: Any, version: int, handle: Callable[[Any, int], Any]) -> Any:
    """Client bytes -> our decoder -> the handler -> our encoder -> the client's decoder."""
    request.with_header(correlation_id=7, client_id="admin")
    frame = memoryview(bytes(request.encode(version=version, header=True)))
    header = messages.parse_request_header(frame)
    assert (header.api_key, header.api_version) == (request.API_KEY, version)
    decoded = messages.decode_request(header, frame)
    response = handle(decoded, version)
    framed = bytes(messages.encode_response(header, response))
    cls = messages.response_class(header.api_key)
    return cls.decode(framed[4:], version=version, header=True)


@pytest.fixture
def acls() -> Iterator[Callable[..., None]]:
    """Judge the requests served in this test by ACLs for User:alice (no ACL matching a resource:
    denied)."""

    def install(*rules: tuple[ResourceType, str, AclOperation]) -> None:
        entries = [
            StandardAcl(rtype, name, PatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
            for rtype, name, op in rules
        ]
        authorize_request(RequestAuthorization("User:alice", "127.0.0.1", entries, AuthorizerConfig()))

    yield install
    authorize_request(None)


# --- DescribeCluster --------------------------------------------------------------------------------------


def _describe_cluster(
    ctx: BrokerContext, version: int, rng: random.Random | None = None, **fields: Any
) -> Any:
    fields.setdefault("include_cluster_authorized_operations", False)
    request = DescribeClusterRequest(**fields)
    rng = rng or random.Random(1)
    return _exchange(request, version, lambda r, v: cluster_admin.handle_describe_cluster(r, v, ctx, rng))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster__brokers_cluster_id_and_a_live_controller(version: int) -> None:
    ctx = _ctx(brokers=(1, 2, 3), fenced=(4,))
    response = _describe_cluster(ctx, version)
    assert response.error_code == ErrorCode.NONE and response.error_message is None
    assert response.cluster_id == "cluster-xyz"
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (1, "host-1", 9001, "rack-1"),
        (2, "host-2", 9002, "rack-2"),
        (3, "host-3", 9003, "rack-3"),
    ]
    assert response.controller_id in (1, 2, 3)
    # Not asked: the schema's Int.MIN, which kafka-python reads back as None.
    assert response.authorized_operations is None
    if version >= 1:
        assert response.endpoint_type == cluster_admin.ENDPOINT_TYPE_BROKER


def test_describe_cluster__the_controller_id_is_a_random_live_broker() -> None:
    # KRaftMetadataCache.getRandomAliveBrokerId: clients spread their "controller" requests.
    ctx = _ctx(brokers=(1, 2, 3), fenced=(4,))
    rng = random.Random(5)
    seen = {_describe_cluster(ctx, 1, rng).controller_id for _ in range(60)}
    assert seen == {1, 2, 3}
    assert _describe_cluster(_ctx(brokers=(), fenced=(4,)), 1).controller_id == -1


def test_describe_cluster__v2_lists_the_fenced_brokers_only_when_asked() -> None:
    ctx = _ctx(brokers=(1, 3), fenced=(2,))
    without = _describe_cluster(ctx, 2, include_fenced_brokers=False)
    assert [(b.broker_id, b.is_fenced) for b in without.brokers] == [(1, False), (3, False)]
    with_fenced = _describe_cluster(ctx, 2, include_fenced_brokers=True)
    assert [(b.broker_id, b.is_fenced) for b in with_fenced.brokers] == [(1, False), (2, True), (3, False)]
    # A fenced broker is never the controller.
    assert all(
        _describe_cluster(ctx, 2, random.Random(i), include_fenced_brokers=True).controller_id != 2
        for i in range(20)
    )


@pytest.mark.parametrize(
    ("version", "endpoint_type", "error"),
    [
        (1, cluster_admin.ENDPOINT_TYPE_CONTROLLER, ErrorCode.MISMATCHED_ENDPOINT_TYPE),
        (2, cluster_admin.ENDPOINT_TYPE_CONTROLLER, ErrorCode.MISMATCHED_ENDPOINT_TYPE),
        (1, 7, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
        (2, 0, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
    ],
)
def test_describe_cluster__a_broker_describes_brokers_only(
    version: int, endpoint_type: int, error: ErrorCode
) -> None:
    response = _describe_cluster(_ctx(), version, endpoint_type=endpoint_type)
    # AuthHelper.computeDescribeClusterResponse: the error, a message, and nothing else.
    assert response.error_code == error
    assert response.error_message
    assert (response.cluster_id, response.controller_id, response.brokers) == ("", -1, [])


def test_describe_cluster__endpoint_type_refusals_at_v0_are_invalid_request() -> None:
    # v0 cannot carry the type (it decodes as BROKER); the rule is Kafka's all the same.
    assert cluster_admin.endpoint_type_refusal(0, 2, 1)[0] == ErrorCode.INVALID_REQUEST  # type: ignore[index]
    assert cluster_admin.endpoint_type_refusal(0, 9, 1)[0] == ErrorCode.INVALID_REQUEST  # type: ignore[index]
    assert cluster_admin.endpoint_type_refusal(1, 1, 2)[0] == ErrorCode.MISMATCHED_ENDPOINT_TYPE  # type: ignore[index]
    assert cluster_admin.endpoint_type_refusal(1, 2, 2) is None


def test_describe_cluster__authorized_operations_without_an_authorizer_are_every_cluster_operation() -> None:
    response = _describe_cluster(_ctx(), 2, include_cluster_authorized_operations=True)
    assert response.authorized_operations == CLUSTER_OPS


def test_describe_cluster__authorized_operations_follow_the_acls(acls: Callable[..., None]) -> None:
    # Without DESCRIBE on the cluster: served all the same (a broker needs no ACL for it), operations 0.
    acls((ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, AclOperation.IDEMPOTENT_WRITE))
    refused = _describe_cluster(_ctx(), 2, include_cluster_authorized_operations=True)
    assert refused.error_code == ErrorCode.NONE and len(refused.brokers) == 3
    assert refused.authorized_operations == set()
    acls(
        (ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, AclOperation.DESCRIBE),
        (ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, AclOperation.ALTER),
    )
    allowed = _describe_cluster(_ctx(), 2, include_cluster_authorized_operations=True)
    assert allowed.authorized_operations == {AclOperation.DESCRIBE, AclOperation.ALTER}
    assert authorization.refuse(ApiKey.DESCRIBE_CLUSTER, None, 2) is None


# --- DescribeTopicPartitions ------------------------------------------------------------------------------


def _dtp(
    ctx: BrokerContext,
    names: list[str],
    limit: int = 2000,
    cursor: tuple[str, int] | None = None,
    max_partitions: int = cluster_admin.MAX_REQUEST_PARTITION_SIZE_LIMIT,
) -> Any:
    request = DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else DescribeTopicPartitionsRequest.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )
    return _exchange(
        request,
        0,
        lambda r, v: cluster_admin.handle_describe_topic_partitions(r, v, ctx, max_partitions),
    )


def _layout(response: Any) -> list[tuple[str, int, list[int]]]:
    return [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in response.topics]


def test_describe_topic_partitions__named_topics_with_their_partitions() -> None:
    ctx = _ctx(_topic("orders", 3, replicas=(1, 2, 3)), _topic("__consumer_offsets", 1))
    response = _dtp(ctx, ["orders", "__consumer_offsets", "nope", "bad/name"])
    # In name order; a topic that does not exist, or could not, says so.
    assert _layout(response) == [
        ("__consumer_offsets", ErrorCode.NONE, [0]),
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION, []),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
        ("orders", ErrorCode.NONE, [0, 1, 2]),
    ]
    offsets, invalid, unknown, orders = response.topics
    assert offsets.is_internal and not orders.is_internal
    assert orders.topic_id == uuid.uuid5(uuid.NAMESPACE_DNS, "orders")
    assert unknown.topic_id is None  # the zero uuid, as kafka-python reads it
    p = orders.partitions[1]
    assert (p.error_code, p.leader_id, p.leader_epoch) == (ErrorCode.NONE, 1, 4)
    assert (p.replica_nodes, p.isr_nodes, p.offline_replicas) == ([1, 2, 3], [1, 2, 3], [])
    # No ELR in pykraft: both lists empty, not null.
    assert (p.eligible_leader_replicas, p.last_known_elr) == ([], [])
    # Every answered topic carries the operations on it (all of them without an authorizer).
    assert {t.topic_authorized_operations for t in response.topics} == {TOPIC_OPS}
    assert response.next_cursor is None


def test_describe_topic_partitions__replicas_off_live_brokers_are_offline_and_lead_nothing() -> None:
    ctx = _ctx(_topic("t", 2, leader=2, replicas=(2, 3, 9)), brokers=(1, 3), fenced=(2,))
    (topic,) = _dtp(ctx, ["t"]).topics
    for p in topic.partitions:
        # The leader's broker is fenced: no leader (Metadata says -1 too); 2 (fenced) and 9
        # (unregistered) are offline.
        assert (p.error_code, p.leader_id, p.offline_replicas) == (ErrorCode.NONE, -1, [2, 9])
        assert p.replica_nodes == [2, 3, 9]


def test_describe_topic_partitions__every_topic_when_none_is_named() -> None:
    ctx = _ctx(_topic("b", 1), _topic("a", 2), _topic("__transaction_state", 1))
    response = _dtp(ctx, [])
    assert _layout(response) == [
        ("__transaction_state", ErrorCode.NONE, [0]),
        ("a", ErrorCode.NONE, [0, 1]),
        ("b", ErrorCode.NONE, [0]),
    ]
    assert response.topics[0].is_internal


def test_describe_topic_partitions__pages_by_the_partition_limit() -> None:
    ctx = _ctx(_topic("a", 2), _topic("b", 3), _topic("c", 1))
    first = _dtp(ctx, [], limit=3)
    assert _layout(first) == [("a", 0, [0, 1]), ("b", 0, [0])]
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("b", 1)
    second = _dtp(ctx, [], limit=3, cursor=("b", 1))
    assert _layout(second) == [("b", 0, [1, 2]), ("c", 0, [0])]
    assert second.next_cursor is None
    # A page that ends exactly at a topic's end points at the next topic's first partition.
    exact = _dtp(ctx, ["a", "b", "c"], limit=2)
    assert _layout(exact) == [("a", 0, [0, 1])]
    assert (exact.next_cursor.topic_name, exact.next_cursor.partition_index) == ("b", 0)
    # The limit is kept within [1, max.request.partition.size.limit].
    assert _layout(_dtp(ctx, [], limit=0)) == [("a", 0, [0])]
    assert _layout(_dtp(ctx, [], limit=-5)) == [("a", 0, [0])]
    capped = _dtp(ctx, [], limit=100, max_partitions=4)
    assert _layout(capped) == [("a", 0, [0, 1]), ("b", 0, [0, 1])]
    # A cursor past a topic's end answers it with no partitions.
    assert _layout(_dtp(ctx, ["a", "c"], cursor=("a", 7))) == [("a", 0, []), ("c", 0, [0])]


def test_describe_topic_partitions__a_bad_cursor_is_invalid_request() -> None:
    ctx = _ctx(_topic("a", 2), _topic("b", 1))
    # The cursor's topic must be one of those named; its partition must not be negative.
    for names, cursor in ((["a", "b"], ("zzz", 0)), (["a", "b"], ("a", -1)), (["b"], ("a", 0))):
        response = _dtp(ctx, names, cursor=cursor)
        assert [(t.name, t.error_code, t.partitions) for t in response.topics] == [
            (n, ErrorCode.INVALID_REQUEST, []) for n in names
        ]
        assert response.next_cursor is None
    # Listing every topic: a negative partition refuses (nothing named, so nothing answered).
    assert _dtp(ctx, [], cursor=("a", -1)).topics == []
    # ...but a cursor on a topic that has gone just starts at the next one.
    assert _layout(_dtp(ctx, [], cursor=("aa", 0))) == [("b", 0, [0])]


def test_describe_topic_partitions__authorization(acls: Callable[..., None]) -> None:
    ctx = _ctx(_topic("public", 1), _topic("secret", 1))
    acls(
        (ResourceType.TOPIC, "public", AclOperation.READ),  # READ implies DESCRIBE
        (ResourceType.TOPIC, "ghost", AclOperation.DESCRIBE),
    )
    named = _dtp(ctx, ["secret", "public", "ghost", "hidden"])
    # Authorized topics first (in name order), then the refused ones with a zero id: whether a
    # refused topic exists is not disclosed.
    assert _layout(named) == [
        ("ghost", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
        ("public", ErrorCode.NONE, [0]),
        ("hidden", ErrorCode.TOPIC_AUTHORIZATION_FAILED, []),
        ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED, []),
    ]
    refused = named.topics[3]
    assert refused.topic_id is None and refused.topic_authorized_operations == INT_MIN
    public = named.topics[1]
    assert public.topic_authorized_operations == to_32_bit_field([AclOperation.READ, AclOperation.DESCRIBE])
    # Listing every topic leaves the refused ones out.
    assert _layout(_dtp(ctx, [])) == [("public", ErrorCode.NONE, [0])]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 6), min_size=1, max_size=6),
    limit=st.integers(1, 7),
    named=st.booleans(),
)
def test_describe_topic_partitions__following_the_cursor_visits_every_partition_once(
    sizes: list[int], limit: int, named: bool
) -> None:
    ctx = _ctx(*(_topic(f"t{i}", n) for i, n in enumerate(sizes)))
    names = [f"t{i}" for i in range(len(sizes))] if named else []
    seen: list[tuple[str, int]] = []
    cursor: tuple[str, int] | None = None
    for _ in range(sum(sizes) + len(sizes) + 2):
        response = _dtp(ctx, names, limit=limit, cursor=cursor)
        assert sum(len(t.partitions) for t in response.topics) <= limit
        seen.extend((t.name, p.partition_index) for t in response.topics for p in t.partitions)
        if response.next_cursor is None:
            break
        cursor = (response.next_cursor.topic_name, response.next_cursor.partition_index)
    else:
        raise AssertionError("the cursor never reached the end")
    assert seen == [(f"t{i}", p) for i, n in enumerate(sizes) for p in range(n)]


# --- DescribeLogDirs ---------------------------------------------------------------------------------------


def _append(rm: ReplicaManager, topic: str, partition: int, records: int) -> None:
    part = rm.get(topic, partition)
    assert part is not None
    batch = build_batch([Record(None, b"x" * 50) for _ in range(records)], timestamp_ms=1_000)
    assert rm.append(part, memoryview(batch), 1_000).error_code == ErrorCode.NONE


def _hosting(*partitions: tuple[str, int]) -> ReplicaManager:
    rm = _replicas()
    for topic, index in partitions:
        part = rm.ensure_partition(topic, index, 0)
        rm.apply_partition(
            part, leader_id=1, leader_epoch=0, partition_epoch=0, replicas=(1,), isr=(1,), now_ms=0
        )
    return rm


def _log_dirs(
    rm: ReplicaManager,
    topics: dict[str, list[int]] | None,
    version: int = 4,
    dirs: tuple[LogDirUsage, ...] = (LogDirUsage("/data/a", 1000, 400),),
) -> Any:
    request = DescribeLogDirsRequest(
        topics=None
        if topics is None
        else [
            DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in topics.items()
        ]
    )
    return _exchange(request, version, lambda r, v: cluster_admin.handle_describe_log_dirs(r, v, rm, dirs))


def _sizes(result: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_log_dirs__every_partition_with_the_bytes_of_its_segments(version: int) -> None:
    rm = _hosting(("a", 0), ("a", 1), ("b", 0))
    _append(rm, "a", 0, 3)
    _append(rm, "a", 0, 3)  # segment.bytes=400: a second segment
    _append(rm, "b", 0, 1)
    response = _log_dirs(rm, None, version)
    assert response.error_code == ErrorCode.NONE
    (result,) = response.results
    assert (result.error_code, result.log_dir) == (ErrorCode.NONE, "/data/a")
    logs = {key: p.log for key, p in rm.partitions.items()}
    assert len(logs[("a", 0)].segments) == 2
    assert _sizes(result) == {key: log.size_in_bytes for key, log in logs.items()}
    assert _sizes(result)[("a", 0)] == sum(s.size_bytes for s in logs[("a", 0)].segments) > 0
    assert _sizes(result)[("a", 1)] == 0
    assert all((p.offset_lag, p.is_future_key) == (0, False) for t in result.topics for p in t.partitions)
    if version >= 4:
        assert (result.total_bytes, result.usable_bytes) == (1000, 400)
    # More records, more bytes.
    _append(rm, "b", 0, 5)
    assert _sizes(_log_dirs(rm, None, version).results[0])[("b", 0)] > _sizes(result)[("b", 0)]


def test_describe_log_dirs__only_the_partitions_named_and_hosted() -> None:
    rm = _hosting(("a", 0), ("a", 1), ("b", 0))
    (result,) = _log_dirs(rm, {"a": [1, 5], "nope": [0], "b": []}).results
    assert _sizes(result) == {("a", 1): 0}  # b named with no partition: left out, as Kafka does
    (empty,) = _log_dirs(rm, {}).results
    assert (empty.error_code, empty.topics) == (ErrorCode.NONE, [])


def test_describe_log_dirs__each_dir_lists_its_own_partitions_and_an_offline_one_none() -> None:
    # Several log dirs (JBOD, issue 18): a, c and e in /data/a; b and d in /data/b, placed by count.
    config = LogConfig(segment_bytes=300, retention_ms=-1, retention_bytes=-1)
    rm = ReplicaManager(MemoryOpener(("/data/a", "/data/b")), config, producer_id_expiration_ms=60_000)
    for topic in "abcde":
        rm.ensure_partition(topic, 0, 0)
    dirs = (LogDirUsage("/data/a", 1000, 400), LogDirUsage("/data/b", 2000, 1500))
    a, b = _log_dirs(rm, None, dirs=dirs).results
    assert (sorted(_sizes(a)), sorted(_sizes(b))) == ([("a", 0), ("c", 0), ("e", 0)], [("b", 0), ("d", 0)])
    # The shell reports /data/b offline: its result is the error alone, /data/a's is unchanged.
    dirs = (dirs[0], LogDirUsage("/data/b", error_code=ErrorCode.KAFKA_STORAGE_ERROR))
    a, b = _log_dirs(rm, {"a": [0], "b": [0]}, dirs=dirs).results
    assert (_sizes(a), a.error_code) == ({("a", 0): 0}, ErrorCode.NONE)
    assert (b.error_code, b.topics, b.total_bytes) == (ErrorCode.KAFKA_STORAGE_ERROR, [], -1)


def test_describe_log_dirs__every_log_dir_and_an_unreadable_one() -> None:
    rm = _hosting(("a", 0))
    dirs = (
        LogDirUsage("/data/a", 1000, 400),
        LogDirUsage("/data/b", 2000, 1500),
        LogDirUsage("/data/c", error_code=ErrorCode.KAFKA_STORAGE_ERROR),
    )
    a, b, c = _log_dirs(rm, None, dirs=dirs).results
    assert _sizes(a) == {("a", 0): 0}
    assert (b.log_dir, b.error_code, b.topics, b.total_bytes, b.usable_bytes) == (
        "/data/b",
        ErrorCode.NONE,
        [],
        2000,
        1500,
    )
    assert (c.log_dir, c.error_code, c.topics, c.total_bytes, c.usable_bytes) == (
        "/data/c",
        ErrorCode.KAFKA_STORAGE_ERROR,
        [],
        -1,
        -1,
    )


def test_describe_log_dirs__a_follower_behind_the_leaders_high_watermark_lags() -> None:
    rm = _replicas()
    part = rm.ensure_partition("r", 0, 0, replicated=True, broker_id=1)
    rm.apply_partition(
        part, leader_id=2, leader_epoch=1, partition_epoch=1, replicas=(1, 2), isr=(1, 2), now_ms=0
    )
    (result,) = _log_dirs(rm, None).results
    assert result.topics[0].partitions[0].offset_lag == 0  # no fetch answered yet
    rm.update_follower_high_watermark(part, 12)
    (result,) = _log_dirs(rm, None).results
    assert result.topics[0].partitions[0].offset_lag == 12
    # Leading it again: a leader never lags (Kafka: its own high watermark is within its log).
    rm.apply_partition(
        part, leader_id=1, leader_epoch=2, partition_epoch=2, replicas=(1, 2), isr=(1,), now_ms=0
    )
    (result,) = _log_dirs(rm, None).results
    assert result.topics[0].partitions[0].offset_lag == 0


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_log_dirs__needs_describe_on_the_cluster(version: int, acls: Callable[..., None]) -> None:
    rm = _hosting(("a", 0))
    request = DescribeLogDirsRequest(topics=None)
    acls((ResourceType.TOPIC, "a", AclOperation.DESCRIBE))
    refusal = _exchange(request, version, lambda r, v: authorization.refuse(ApiKey.DESCRIBE_LOG_DIRS, r, v))
    # v3+ says why; v1-2 have no top-level error code: the client sees no log dir.
    assert refusal.results == []
    if version >= 3:
        assert refusal.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    acls((ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, AclOperation.DESCRIBE))
    assert authorization.refuse(ApiKey.DESCRIBE_LOG_DIRS, request, version) is None
    assert _sizes(_log_dirs(rm, None, version).results[0]) == {("a", 0): 0}


def test_metadata_asked_by_topic_id_ignores_the_names_sent_beside_the_ids() -> None:
    """The Java Admin's describeTopics(TopicCollection.ofTopicIds) sends "" as each topic's name (its
    generated default): Kafka's KafkaApis answers a request holding topic ids by ids only."""
    from kafka.protocol.metadata import MetadataRequest

    from pykraft.broker.handlers import handle_metadata

    orders = _topic("orders", 2)
    unknown = uuid.uuid4()
    ctx = _ctx(orders)
    request = MetadataRequest(
        topics=[
            MetadataRequest.MetadataRequestTopic(topic_id=orders.topic_id, name=""),
            MetadataRequest.MetadataRequestTopic(topic_id=unknown, name=""),
        ],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    response = _exchange(request, 12, lambda r, v: handle_metadata(r, v, ctx))
    answered = {(t.name, t.topic_id, t.error_code, len(t.partitions)) for t in response.topics}
    assert answered == {
        ("orders", orders.topic_id, ErrorCode.NONE, 2),
        (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID, 0),
    }
