"""DescribeCluster (60), DescribeTopicPartitions (75) and DescribeLogDirs (35) on a real node's client
listener, through real admin clients.

kafka-python's KafkaAdminClient sends all three (describe_cluster uses DescribeCluster v2 when the
broker advertises it, else Metadata; describe_topic_partitions is KIP-966's paging API). confluent-kafka
2.16 (librdkafka 2.16) answers describe_cluster and describe_topics from Metadata (its admin worker has
no DescribeCluster or DescribeTopicPartitions request, see librdkafka's rdkafka_admin.c), so its checks
here are that those keep working beside the new APIs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)

from pykraft.core.errors import ErrorCode
from pykraft.security.acls import SUPPORTED_OPERATIONS, ResourceType, to_32_bit_field
from pykraft.testing import RunningNode, running_node
from tests.interop.test_acls import AclNode, acl_node, build  # noqa: F401 (acl_node: a fixture)
from tests.raw_client import RawClient, register_broker

pytestmark = pytest.mark.slow

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], what: str, timeout_s: float = 15.0) -> T:
    """Poll ``probe`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node() as running:
        yield running


@pytest.fixture(scope="module")
def admin(node: RunningNode) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=node.bootstrap_servers)
    yield client
    client.close()


def _create(admin: KafkaAdminClient, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])


# --- DescribeCluster ------------------------------------------------------------------------------------------


def test_kafka_python_describe_cluster(node: RunningNode, admin: KafkaAdminClient) -> None:
    cluster = admin.describe_cluster()
    port = int(node.bootstrap_servers.rsplit(":", 1)[1])
    # is_fenced is DescribeCluster v2's (kafka-python's Metadata fallback has no such field).
    assert cluster["brokers"] == [
        {"broker_id": 1, "host": "127.0.0.1", "port": port, "rack": None, "is_fenced": False}
    ]
    assert cluster["controller_id"] == 1
    assert cluster["cluster_id"] and len(cluster["cluster_id"]) == 22
    # No authorizer: every cluster operation (AclEntry.supportedOperations(CLUSTER)).
    assert set(cluster["authorized_operations"]) == {
        op.name for op in SUPPORTED_OPERATIONS[ResourceType.CLUSTER]
    }


def test_describe_cluster_lists_fenced_brokers_when_asked() -> None:
    with running_node() as node:
        with RawClient(node.bootstrap_servers) as client:
            cluster_id = client.request(
                DescribeClusterRequest(include_cluster_authorized_operations=False),
                DescribeClusterResponse,
                0,
            ).cluster_id
        # A broker that registered and never heartbeat: fenced (KIP-631).
        register_broker(node.controller_address, 200, cluster_id)
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap_servers)
        try:

            def with_broker_200() -> dict[str, Any] | None:
                described: dict[str, Any] = admin.describe_cluster()
                return described if len(described["brokers"]) == 2 else None

            cluster = wait_for(with_broker_200, "broker 200 in DescribeCluster")
        finally:
            admin.close()
        assert [(b["broker_id"], b["is_fenced"]) for b in cluster["brokers"]] == [(1, False), (200, True)]
        assert cluster["controller_id"] == 1  # never a fenced broker
        with RawClient(node.bootstrap_servers) as client:
            live_only = client.request(
                DescribeClusterRequest(
                    include_cluster_authorized_operations=False, include_fenced_brokers=False
                ),
                DescribeClusterResponse,
                2,
            )
        assert [b.broker_id for b in live_only.brokers] == [1]


def test_describe_cluster_endpoint_types_on_both_listeners(node: RunningNode) -> None:
    # A broker describes brokers, a controller controllers (KIP-919, AuthHelper).
    with RawClient(node.bootstrap_servers) as client:
        refused = client.request(
            DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2),
            DescribeClusterResponse,
            1,
        )
        unknown = client.request(
            DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=9),
            DescribeClusterResponse,
            1,
        )
    assert (refused.error_code, refused.brokers) == (ErrorCode.MISMATCHED_ENDPOINT_TYPE, [])
    assert "CONTROLLER" in refused.error_message
    assert unknown.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    with RawClient(node.controller_address) as client:
        brokers_from_controller = client.request(
            DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1),
            DescribeClusterResponse,
            1,
        )
        controllers = client.request(
            DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2),
            DescribeClusterResponse,
            1,
        )
    assert brokers_from_controller.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    assert (controllers.error_code, controllers.endpoint_type, controllers.controller_id) == (0, 2, 1)
    assert [b.broker_id for b in controllers.brokers] == [1]


def test_confluent_describe_cluster_and_topics(node: RunningNode, admin: KafkaAdminClient) -> None:
    _create(admin, "confluent-described", 3)
    client = AdminClient({"bootstrap.servers": node.bootstrap_servers})
    cluster = client.describe_cluster(include_authorized_operations=True).result(timeout=15)
    assert [n.id for n in cluster.nodes] == [1]
    assert cluster.controller.id == 1 and cluster.cluster_id
    futures = client.describe_topics(TopicCollection(["confluent-described"]))
    description = futures["confluent-described"].result(timeout=15)
    assert [p.id for p in description.partitions] == [0, 1, 2]
    assert all(p.leader.id == 1 and [r.id for r in p.isr] == [1] for p in description.partitions)
    topic_id = description.topic_id
    assert topic_id is not None
    # The same id DescribeTopicPartitions answers (confluent's Uuid: two signed 64-bit halves).
    dtp = admin.describe_topic_partitions(["confluent-described"])
    expected = dtp["topics"][0]["topic_id"].int
    halves = (topic_id.get_most_significant_bits() % 2**64, topic_id.get_least_significant_bits() % 2**64)
    assert halves == (expected >> 64, expected % 2**64) and expected != 0


# --- DescribeTopicPartitions ---------------------------------------------------------------------------------


def test_kafka_python_describe_topic_partitions(admin: KafkaAdminClient) -> None:
    _create(admin, "paged", 5)
    answer = admin.describe_topic_partitions(["paged", "missing-topic"])
    assert answer["next_cursor"] is None
    missing, paged = answer["topics"]
    assert (missing["name"], missing["error_code"]) == ("missing-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert (paged["name"], paged["error_code"], paged["is_internal"]) == ("paged", 0, False)
    assert paged["topic_id"] is not None and paged["topic_id"].int != 0
    metadata_id = admin.describe_topics(["paged"])[0]["topic_id"]
    assert str(paged["topic_id"]) == str(metadata_id)
    assert [p["partition_index"] for p in paged["partitions"]] == [0, 1, 2, 3, 4]
    assert all(
        (p["leader_id"], p["replica_nodes"], p["isr_nodes"], p["offline_replicas"]) == (1, [1], [1], [])
        for p in paged["partitions"]
    )
    # Two partitions a page: the cursor walks the topic.
    seen: list[int] = []
    cursor: dict[str, Any] | None = None
    for _ in range(5):
        page = admin.describe_topic_partitions(["paged"], response_partition_limit=2, cursor=cursor)
        seen.extend(p["partition_index"] for t in page["topics"] for p in t["partitions"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert cursor["topic_name"] == "paged"
    assert seen == [0, 1, 2, 3, 4] and cursor is None


# --- DescribeLogDirs -------------------------------------------------------------------------------------------


def _partition_size(admin: KafkaAdminClient, topic: str) -> int | None:
    (broker,) = admin.describe_log_dirs({topic: [0]})
    (log_dir,) = broker["log_dirs"]
    for t in log_dir["topics"]:
        if t["name"] == topic:
            return int(t["partitions"][0]["partition_size"])
    return None


def test_describe_log_dirs_sizes_grow_after_producing(node: RunningNode, admin: KafkaAdminClient) -> None:
    _create(admin, "sized", 1)

    def hosted() -> list[dict[str, Any]] | None:
        described: list[dict[str, Any]] = admin.describe_log_dirs({"sized": [0]})
        return described if described[0]["log_dirs"][0]["topics"] else None

    (broker,) = wait_for(hosted, "the partition of sized in DescribeLogDirs")
    assert broker["broker"] == 1
    (log_dir,) = broker["log_dirs"]
    assert (log_dir["error_code"], log_dir["log_dir"]) == (0, os.path.abspath(node.data_dir))
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    (partition,) = log_dir["topics"][0]["partitions"]
    assert (partition["partition_index"], partition["offset_lag"], partition["is_future_key"]) == (
        0,
        0,
        False,
    )
    before = partition["partition_size"]

    producer = KafkaProducer(bootstrap_servers=node.bootstrap_servers, acks=1, linger_ms=5)
    for i in range(200):
        producer.send("sized", value=b"value-%04d" % i + b"x" * 200, partition=0)
    producer.flush(30)
    producer.close()
    after = wait_for(
        lambda: size if (size := _partition_size(admin, "sized")) and size > before else None,
        "sized's partition to grow",
    )
    assert after >= before + 200 * 200

    # Topics=null: every partition this broker hosts, read raw at the oldest and newest versions.
    for version in (1, 4, 5):
        with RawClient(node.bootstrap_servers) as client:
            response = client.request(DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, version)
        (result,) = response.results
        sizes = {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}
        assert sizes[("sized", 0)] >= after
        if version >= 4:
            assert result.total_bytes == log_dir["total_bytes"]
        assert not result.is_cordoned  # v5 (KIP-1066): pykraft never cordons a log dir


# --- with an authorizer ------------------------------------------------------------------------------------------


def test_authorization_of_the_three_apis(acl_node: AclNode) -> None:  # noqa: F811 (the imported fixture)
    """alice has no ACL, bob ALL on topics m-* (prefixed), admin is a super user (test_acls' node)."""
    describe_cluster = build(DescribeClusterRequest, include_cluster_authorized_operations=True)
    # DescribeCluster needs no ACL on a broker (KafkaApis); the operations say what the principal may do.
    as_alice = acl_node.call("alice", describe_cluster, DescribeClusterResponse, 2)
    assert (as_alice.error_code, [b.broker_id for b in as_alice.brokers]) == (0, [1])
    assert as_alice.authorized_operations == set()
    as_admin = acl_node.call("admin", describe_cluster, DescribeClusterResponse, 2)
    assert as_admin.authorized_operations == {int(op) for op in SUPPORTED_OPERATIONS[ResourceType.CLUSTER]}

    # DescribeLogDirs: DESCRIBE on the cluster, else nothing but CLUSTER_AUTHORIZATION_FAILED.
    log_dirs = DescribeLogDirsRequest(topics=None)
    refused = acl_node.call("bob", log_dirs, DescribeLogDirsResponse, 4)
    assert (refused.error_code, refused.results) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    served = acl_node.call("admin", log_dirs, DescribeLogDirsResponse, 4)
    assert served.error_code == 0
    assert "m-topic" in {t.name for r in served.results for t in r.topics}

    # DescribeTopicPartitions: DESCRIBE on each topic; a named one refused, the listing leaves it out.
    named = build(
        DescribeTopicPartitionsRequest,
        topics=[{"name": "other"}, {"name": "m-topic"}],
        response_partition_limit=10,
    )
    answer = acl_node.call("bob", named, DescribeTopicPartitionsResponse, 0)
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("m-topic", 0),
        ("other", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert answer.topics[0].topic_authorized_operations == to_32_bit_field(
        SUPPORTED_OPERATIONS[ResourceType.TOPIC]
    )
    listing = build(DescribeTopicPartitionsRequest, topics=[], response_partition_limit=100)
    listed = {t.name for t in acl_node.call("bob", listing, DescribeTopicPartitionsResponse, 0).topics}
    assert "m-topic" in listed and "other" not in listed
    assert {"m-topic", "other"} <= {
        t.name for t in acl_node.call("admin", listing, DescribeTopicPartitionsResponse, 0).topics
    }
