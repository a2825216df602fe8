"""ACLs (issue 16): a node with Kafka's StandardAuthorizer (``authorizer.class.name``), ``super.users`` and
SASL/PLAIN users. The matrix: for each API a client uses, ``alice`` (no ACL) is refused with Kafka's error
code and ``bob`` (with the ACLs, most of them prefixed, added with ``pykraft acls``) gets through; then
real clients, deny-over-allow, super users, and Metadata hiding what a principal may not describe."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
)
from kafka.protocol.admin.acl import DescribeAclsRequest, DescribeAclsResponse
from kafka.protocol.admin.users import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
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
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnection, ClientSecurity
from pykraft.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from pykraft.testing import free_port
from tests.interop.test_restart import _start_server, _stop_server

pytestmark = pytest.mark.slow

TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
AUTH_ERRORS = {TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED}

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
    + ";"
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pykraft.cli", *args], capture_output=True, text=True, timeout=60
    )


class AclNode:
    def __init__(self, directory: Path, bootstrap: str) -> None:
        self.directory = directory
        self.bootstrap = bootstrap
        self._connections: dict[str, BrokerConnection] = {}

    def config_file(self, user: str) -> Path:
        path = self.directory / f"{user}.properties"
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{PASSWORDS[user]}";\n'
        )
        return path

    def acls(self, *args: str, as_user: str = "admin") -> subprocess.CompletedProcess[str]:
        return _cli(
            "acls",
            "--bootstrap-server",
            self.bootstrap,
            "--command-config",
            str(self.config_file(as_user)),
            *args,
        )

    def call(self, user: str, request: Any, response_class: Any, version: int) -> Any:
        conn = self._connections.get(user)
        if conn is None:
            conn = self._connections[user] = BrokerConnection.to(
                self.bootstrap,
                client_id=f"acl-{user}",
                security=ClientSecurity("SASL_PLAINTEXT", "PLAIN", user, PASSWORDS[user]),
            )
        return conn.request(request, response_class, version)

    def confluent(self, user: str) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
            "log_level": 0,
        }

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()


def _snake(name: str) -> str:
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def build(cls: Any, **data: Any) -> Any:
    """A kafka-python request from plain values; lists of dicts become the schema's nested classes."""
    return _build(cls, cls.json["fields"], data)


def _build(cls: Any, schema: list[dict[str, Any]], data: dict[str, Any]) -> Any:
    fields = {_snake(f["name"]): f for f in schema}
    kwargs = {}
    for key, value in data.items():
        field = fields[key]
        if "fields" in field and value is not None:
            nested = getattr(cls, field["type"].removeprefix("[]"))
            kwargs[key] = [_build(nested, field["fields"], item) for item in value]
        else:
            kwargs[key] = value
    return cls(**kwargs)


@pytest.fixture(scope="module")
def acl_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclNode]:
    directory = tmp_path_factory.mktemp("acls")
    port, controller = free_port(), free_port()
    config = directory / "server.properties"
    config.write_text(
        "\n".join(
            [
                "node.id=1",
                "process.roles=broker,controller",
                f"listeners=SASL_PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
                f"advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"controller.quorum.voters=1@127.0.0.1:{controller}",
                f"log.dirs={directory / 'data'}",
                "sasl.enabled.mechanisms=PLAIN",
                f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users=User:admin",
                "transaction.state.log.replication.factor=1",
                "offsets.topic.replication.factor=1",
            ]
        )
        + "\n"
    )
    proc = _start_server(str(config), port)
    node = AclNode(directory, f"127.0.0.1:{port}")
    try:
        # bob: everything on topics m-*, groups g-* and transactional ids t-* (prefixed ACLs).
        for resource in ("--topic", "--group", "--transactional-id"):
            name = {"--topic": "m-", "--group": "g-", "--transactional-id": "t-"}[resource]
            added = node.acls(
                "add", "--allow-principal", "User:bob", "--operation", "All", resource, name,
                "--resource-pattern-type", "prefixed",
            )  # fmt: skip
            assert added.returncode == 0, added.stderr
        created = node.call(
            "admin",
            build(
                CreateTopicsRequest,
                topics=[
                    {"name": n, "num_partitions": 1, "replication_factor": 1}
                    for n in ("m-topic", "m-doomed", "other")
                ],
                timeout_ms=10000,
            ),
            CreateTopicsResponse,
            7,
        )
        assert [t.error_code for t in created.topics] == [0, 0, 0]
        _wait_for_leader(node, "m-topic")
        yield node
    finally:
        node.close()
        _stop_server(proc)


def _wait_for_leader(node: AclNode, topic: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        response = node.call("admin", build(MetadataRequest, topics=[{"name": topic}]), MetadataResponse, 12)
        if response.topics[0].error_code == 0 and response.topics[0].partitions[0].leader_id >= 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic} has no leader")


# --- the matrix ------------------------------------------------------------------------------------------------

# Each row: the API, the request for a user, the response class and version, and the error codes it
# answers (one per entry). alice must get exactly ``refusal`` in every entry; bob no authorization error.
Row = tuple[str, Callable[[AclNode, str], Any], Any, int, Callable[[Any], list[int]], ErrorCode]


def _req(cls: Any, **data: Any) -> Callable[[AclNode, str], Any]:
    return lambda node, user: build(cls, **data)


ROWS: list[Row] = [
    (
        "Metadata",
        _req(MetadataRequest, topics=[{"name": "m-topic"}]),
        MetadataResponse,
        12,
        lambda r: [t.error_code for t in r.topics],
        TOPIC_DENIED,
    ),
    (
        "ListOffsets",
        _req(
            ListOffsetsRequest,
            replica_id=-1,
            topics=[{"name": "m-topic", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        ),
        ListOffsetsResponse,
        7,
        lambda r: [p.error_code for t in r.topics for p in t.partitions],
        TOPIC_DENIED,
    ),
    (
        "FindCoordinator(group)",
        _req(FindCoordinatorRequest, key_type=0, coordinator_keys=["g-1"]),
        FindCoordinatorResponse,
        4,
        lambda r: [c.error_code for c in r.coordinators],
        GROUP_DENIED,
    ),
    (
        "FindCoordinator(txn)",
        _req(FindCoordinatorRequest, key_type=1, coordinator_keys=["t-1"]),
        FindCoordinatorResponse,
        4,
        lambda r: [c.error_code for c in r.coordinators],
        TXN_DENIED,
    ),
    (
        "OffsetCommit",
        _req(
            OffsetCommitRequest,
            group_id="g-1",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[{"name": "m-topic", "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
        ),
        OffsetCommitResponse,
        8,
        lambda r: [p.error_code for t in r.topics for p in t.partitions],
        GROUP_DENIED,
    ),
    (
        "OffsetFetch",
        _req(OffsetFetchRequest, groups=[{"group_id": "g-1", "topics": None}]),
        OffsetFetchResponse,
        8,
        lambda r: [g.error_code for g in r.groups],
        GROUP_DENIED,
    ),
    (
        "JoinGroup",
        _req(
            JoinGroupRequest,
            group_id="g-join",
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            member_id="",
            protocol_type="consumer",
            protocols=[{"name": "range", "metadata": b""}],
        ),
        JoinGroupResponse,
        5,
        lambda r: [r.error_code],
        GROUP_DENIED,
    ),
    (
        "Heartbeat",
        _req(HeartbeatRequest, group_id="g-1", generation_id=1, member_id="nobody"),
        HeartbeatResponse,
        4,
        lambda r: [r.error_code],
        GROUP_DENIED,
    ),
    (
        "SyncGroup",
        _req(SyncGroupRequest, group_id="g-1", generation_id=1, member_id="nobody", assignments=[]),
        SyncGroupResponse,
        5,
        lambda r: [r.error_code],
        GROUP_DENIED,
    ),
    (
        "LeaveGroup",
        _req(LeaveGroupRequest, group_id="g-1", members=[{"member_id": "nobody"}]),
        LeaveGroupResponse,
        5,
        lambda r: [r.error_code],
        GROUP_DENIED,
    ),
    (
        # KIP-848 (issue 19): READ on the group; a member nobody knows, so bob's answer changes nothing.
        "ConsumerGroupHeartbeat",
        _req(ConsumerGroupHeartbeatRequest, group_id="g-1", member_id="nobody", member_epoch=5),
        ConsumerGroupHeartbeatResponse,
        1,
        lambda r: [r.error_code],
        GROUP_DENIED,
    ),
    (
        # KIP-932 (issue 31): READ on the group for the share group's heartbeat, fetch and acknowledge,
        # DESCRIBE for its describe. A share group nobody joined: bob's answers change nothing.
        "ShareGroupHeartbeat",
        _req(ShareGroupHeartbeatRequest, group_id="g-share", member_id="nobody", member_epoch=5),
        ShareGroupHeartbeatResponse,
        1,
        lambda r: [r.error_code],
        GROUP_DENIED,
    ),
    (
        "ShareGroupDescribe",
        _req(ShareGroupDescribeRequest, group_ids=["g-share"], include_authorized_operations=False),
        ShareGroupDescribeResponse,
        1,
        lambda r: [g.error_code for g in r.groups],
        GROUP_DENIED,
    ),
    (
        "ShareFetch",
        _req(
            ShareFetchRequest,
            group_id="g-share",
            member_id="nobody",
            share_session_epoch=0,
            max_wait_ms=0,
            min_bytes=1,
            max_records=10,
            batch_size=10,
            topics=[],
            forgotten_topics_data=[],
        ),
        ShareFetchResponse,
        1,
        lambda r: [r.error_code],
        GROUP_DENIED,
    ),
    (
        "ShareAcknowledge",
        _req(
            ShareAcknowledgeRequest, group_id="g-share", member_id="nobody", share_session_epoch=-1, topics=[]
        ),
        ShareAcknowledgeResponse,
        1,
        lambda r: [r.error_code],
        GROUP_DENIED,
    ),
    (
        "ConsumerGroupDescribe",
        _req(ConsumerGroupDescribeRequest, group_ids=["g-1"], include_authorized_operations=False),
        ConsumerGroupDescribeResponse,
        0,
        lambda r: [g.error_code for g in r.groups],
        GROUP_DENIED,
    ),
    (
        "DescribeGroups",
        _req(DescribeGroupsRequest, groups=["g-1"]),
        DescribeGroupsResponse,
        5,
        lambda r: [g.error_code for g in r.groups],
        GROUP_DENIED,
    ),
    (
        "OffsetDelete",
        _req(
            OffsetDeleteRequest,
            group_id="g-1",
            topics=[{"name": "m-topic", "partitions": [{"partition_index": 0}]}],
        ),
        OffsetDeleteResponse,
        0,
        lambda r: [r.error_code],
        GROUP_DENIED,
    ),
    (
        "DeleteGroups",
        _req(DeleteGroupsRequest, groups_names=["g-gone"]),
        DeleteGroupsResponse,
        2,
        lambda r: [g.error_code for g in r.results],
        GROUP_DENIED,
    ),
    (
        "CreateTopics",
        _req(
            CreateTopicsRequest,
            topics=[{"name": "m-new", "num_partitions": 1, "replication_factor": 1}],
            timeout_ms=10000,
        ),
        CreateTopicsResponse,
        7,
        lambda r: [t.error_code for t in r.topics],
        TOPIC_DENIED,
    ),
    (
        "DeleteRecords",
        _req(
            DeleteRecordsRequest,
            topics=[{"name": "m-topic", "partitions": [{"partition_index": 0, "offset": 0}]}],
            timeout_ms=10000,
        ),
        DeleteRecordsResponse,
        2,
        lambda r: [p.error_code for t in r.topics for p in t.partitions],
        TOPIC_DENIED,
    ),
    (
        "DescribeConfigs(topic)",
        _req(
            DescribeConfigsRequest,
            resources=[{"resource_type": 2, "resource_name": "m-topic", "configuration_keys": None}],
        ),
        DescribeConfigsResponse,
        4,
        lambda r: [x.error_code for x in r.results],
        TOPIC_DENIED,
    ),
    (
        "IncrementalAlterConfigs(topic)",
        _req(
            IncrementalAlterConfigsRequest,
            resources=[
                {
                    "resource_type": 2,
                    "resource_name": "m-topic",
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "3600000"}],
                }
            ],
            validate_only=False,
        ),
        IncrementalAlterConfigsResponse,
        1,
        lambda r: [x.error_code for x in r.responses],
        TOPIC_DENIED,
    ),
    (
        "AlterConfigs(topic)",
        _req(
            AlterConfigsRequest,
            resources=[
                {
                    "resource_type": 2,
                    "resource_name": "m-topic",
                    "configs": [{"name": "retention.ms", "value": "7200000"}],
                }
            ],
            validate_only=False,
        ),
        AlterConfigsResponse,
        2,
        lambda r: [x.error_code for x in r.responses],
        TOPIC_DENIED,
    ),
    (
        # Group configs (KIP-848): DESCRIBE_CONFIGS / ALTER_CONFIGS on the group, as Kafka's ConfigHelper.
        "DescribeConfigs(group)",
        _req(
            DescribeConfigsRequest,
            resources=[{"resource_type": 32, "resource_name": "g-1", "configuration_keys": None}],
        ),
        DescribeConfigsResponse,
        4,
        lambda r: [x.error_code for x in r.results],
        GROUP_DENIED,
    ),
    (
        "IncrementalAlterConfigs(group)",
        _req(
            IncrementalAlterConfigsRequest,
            resources=[
                {
                    "resource_type": 32,
                    "resource_name": "g-1",
                    "configs": [
                        {"name": "consumer.session.timeout.ms", "config_operation": 0, "value": "50000"}
                    ],
                }
            ],
            validate_only=True,
        ),
        IncrementalAlterConfigsResponse,
        1,
        lambda r: [x.error_code for x in r.responses],
        GROUP_DENIED,
    ),
    (
        "DescribeProducers",
        _req(DescribeProducersRequest, topics=[{"name": "m-topic", "partition_indexes": [0]}]),
        DescribeProducersResponse,
        0,
        lambda r: [p.error_code for t in r.topics for p in t.partitions],
        TOPIC_DENIED,
    ),
    (
        "InitProducerId(idempotent)",
        _req(InitProducerIdRequest, transactional_id=None, transaction_timeout_ms=-1),
        InitProducerIdResponse,
        4,
        lambda r: [r.error_code],
        CLUSTER_DENIED,
    ),
    (
        "DescribeTransactions",
        _req(DescribeTransactionsRequest, transactional_ids=["t-1"]),
        DescribeTransactionsResponse,
        0,
        lambda r: [t.error_code for t in r.transaction_states],
        TXN_DENIED,
    ),
    (
        "DeleteTopics",
        _req(DeleteTopicsRequest, topics=[{"name": "m-doomed"}], timeout_ms=10000),
        DeleteTopicsResponse,
        6,
        lambda r: [t.error_code for t in r.responses],
        TOPIC_DENIED,
    ),
    (
        # ALTER on the topic (validate_only, so bob's answer leaves m-topic as it is).
        "CreatePartitions",
        _req(
            CreatePartitionsRequest,
            topics=[{"name": "m-topic", "count": 2, "assignments": None}],
            timeout_ms=10000,
            validate_only=True,
        ),
        CreatePartitionsResponse,
        3,
        lambda r: [t.error_code for t in r.results],
        TOPIC_DENIED,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_matrix_without_the_acl_refused_with_it_allowed(acl_node: AclNode, row: Row) -> None:
    name, request, response_class, version, errors_of, refusal = row
    refused = errors_of(acl_node.call("alice", request(acl_node, "alice"), response_class, version))
    assert refused and all(e == refusal for e in refused), f"{name}: alice got {refused}"
    allowed = errors_of(acl_node.call("bob", request(acl_node, "bob"), response_class, version))
    assert not AUTH_ERRORS & set(allowed), f"{name}: bob got {allowed}"


def test_transactional_apis_matrix(acl_node: AclNode) -> None:
    """A whole transaction by bob (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit,
    EndTxn); alice is refused at each step with TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    init = build(InitProducerIdRequest, transactional_id="t-1", transaction_timeout_ms=60000)
    assert acl_node.call("alice", init, InitProducerIdResponse, 4).error_code == TXN_DENIED
    deadline = time.monotonic() + 30
    while True:
        got = acl_node.call("bob", init, InitProducerIdResponse, 4)
        if got.error_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # the coordinator loads __transaction_state first
    assert got.error_code == 0
    pid, epoch = got.producer_id, got.producer_epoch
    add = build(
        AddPartitionsToTxnRequest,
        v3_and_below_transactional_id="t-1",
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[{"name": "m-topic", "partitions": [0]}, {"name": "other", "partitions": [0]}],
    )

    def partition_errors(user: str) -> dict[str, int]:
        response = acl_node.call(user, add, AddPartitionsToTxnResponse, 3)
        return {
            t.name: p.partition_error_code
            for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    assert partition_errors("alice") == {"m-topic": TXN_DENIED, "other": TXN_DENIED}
    # bob may not write "other": it is refused and nothing is added (Kafka's OPERATION_NOT_ATTEMPTED).
    assert partition_errors("bob") == {"m-topic": ErrorCode.OPERATION_NOT_ATTEMPTED, "other": TOPIC_DENIED}
    add.v3_and_below_topics = add.v3_and_below_topics[:1]
    assert partition_errors("bob") == {"m-topic": 0}
    offsets = build(
        AddOffsetsToTxnRequest, transactional_id="t-1", producer_id=pid, producer_epoch=epoch, group_id="g-1"
    )
    assert acl_node.call("alice", offsets, AddOffsetsToTxnResponse, 3).error_code == TXN_DENIED
    assert acl_node.call("bob", offsets, AddOffsetsToTxnResponse, 3).error_code == 0
    commit = build(
        TxnOffsetCommitRequest,
        transactional_id="t-1",
        group_id="g-1",
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        topics=[{"name": "m-topic", "partitions": [{"partition_index": 0, "committed_offset": 0}]}],
    )
    errors = lambda user: [  # noqa: E731
        p.error_code
        for t in acl_node.call(user, commit, TxnOffsetCommitResponse, 3).topics
        for p in t.partitions
    ]
    assert errors("alice") == [TXN_DENIED]
    assert errors("bob") == [0]
    listed = acl_node.call(
        "alice",
        build(ListTransactionsRequest, state_filters=[], producer_id_filters=[]),
        ListTransactionsResponse,
        0,
    )
    assert [t.transactional_id for t in listed.transaction_states] == []
    listed = acl_node.call(
        "bob",
        build(ListTransactionsRequest, state_filters=[], producer_id_filters=[]),
        ListTransactionsResponse,
        0,
    )
    assert "t-1" in [t.transactional_id for t in listed.transaction_states]
    end = build(EndTxnRequest, transactional_id="t-1", producer_id=pid, producer_epoch=epoch, committed=False)
    assert acl_node.call("alice", end, EndTxnResponse, 3).error_code == TXN_DENIED
    assert acl_node.call("bob", end, EndTxnResponse, 3).error_code == 0


def test_cluster_apis_are_for_super_users_and_cluster_acls(acl_node: AclNode) -> None:
    elect = build(
        ElectLeadersRequest,
        election_type=0,
        topic_partitions=[{"topic": "m-topic", "partitions": [0]}],
        timeout_ms=5000,
    )
    assert acl_node.call("alice", elect, ElectLeadersResponse, 2).error_code == CLUSTER_DENIED
    assert acl_node.call("admin", elect, ElectLeadersResponse, 2).error_code == 0
    # UpdateFeatures: ALTER on the cluster (KafkaApis); validate_only, so admin's answer changes nothing.
    features = build(
        UpdateFeaturesRequest,
        timeout_ms=5000,
        feature_updates=[{"feature": "metadata.version", "max_version_level": 20, "upgrade_type": 2}],
        validate_only=True,
    )
    assert acl_node.call("alice", features, UpdateFeaturesResponse, 1).error_code == CLUSTER_DENIED
    assert acl_node.call("admin", features, UpdateFeaturesResponse, 1).error_code == 0
    markers = build(
        WriteTxnMarkersRequest,
        markers=[{"producer_id": 1, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
                  "topics": [{"name": "m-topic", "partition_indexes": [0]}]}],
    )  # fmt: skip
    refused = acl_node.call("bob", markers, WriteTxnMarkersResponse, 1)
    assert [p.error_code for m in refused.markers for t in m.topics for p in t.partitions] == [CLUSTER_DENIED]
    describe = build(DescribeAclsRequest, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                     principal_filter=None, host_filter=None, operation=1, permission_type=1)  # fmt: skip
    assert acl_node.call("bob", describe, DescribeAclsResponse, 3).error_code == CLUSTER_DENIED
    assert acl_node.call("admin", describe, DescribeAclsResponse, 3).error_code == 0
    scram = build(DescribeUserScramCredentialsRequest, users=None)
    assert acl_node.call("alice", scram, DescribeUserScramCredentialsResponse, 0).error_code == CLUSTER_DENIED
    broker_configs = build(
        DescribeConfigsRequest,
        resources=[{"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
    )
    assert [
        r.error_code for r in acl_node.call("bob", broker_configs, DescribeConfigsResponse, 4).results
    ] == [CLUSTER_DENIED]
    assert [
        r.error_code for r in acl_node.call("admin", broker_configs, DescribeConfigsResponse, 4).results
    ] == [0]
    # A cluster ACL for bob lets him describe the ACLs (and the tool lists them, kafka-acls style).
    assert (
        acl_node.acls(
            "add", "--allow-principal", "User:bob", "--operation", "Describe", "--cluster"
        ).returncode
        == 0
    )
    assert acl_node.call("bob", describe, DescribeAclsResponse, 3).error_code == 0
    # DescribeQuorum on the client listener: DESCRIBE on the cluster, as Kafka's controller checks it.
    quorum = build(
        DescribeQuorumRequest,
        topics=[{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}],
    )
    assert acl_node.call("alice", quorum, DescribeQuorumResponse, 1).error_code == CLUSTER_DENIED
    answered = acl_node.call("bob", quorum, DescribeQuorumResponse, 1)
    assert answered.error_code == 0 and answered.topics[0].partitions[0].leader_id == 1
    listing = acl_node.acls("list", "--topic", "m-", "--resource-pattern-type", "prefixed")
    assert "principal=User:bob, host=*, operation=ALL, permissionType=ALLOW" in listing.stdout
    assert "ResourcePattern(resourceType=TOPIC, name=m-, patternType=PREFIXED)" in listing.stdout
    assert acl_node.acls("list", as_user="alice").returncode == 1


def test_metadata_hides_topics_and_listings_hide_groups(acl_node: AclNode) -> None:
    every = build(MetadataRequest, topics=None)

    def seen(user: str) -> set[str]:
        return {t.name for t in acl_node.call(user, every, MetadataResponse, 12).topics}

    assert "m-topic" not in seen("alice") and "other" not in seen("alice")
    assert "m-topic" in seen("bob") and "other" not in seen("bob")
    assert {"m-topic", "other"} <= seen("admin")

    def groups(user: str) -> set[str]:
        return {
            g.group_id for g in acl_node.call(user, build(ListGroupsRequest), ListGroupsResponse, 4).groups
        }

    assert acl_node.call("bob", ROWS[4][1](acl_node, "bob"), OffsetCommitResponse, 8)  # g-1 exists
    assert "g-1" in groups("bob") and "g-1" not in groups("alice")

    # OffsetFetch: a topic bob named but may not describe answers TOPIC_AUTHORIZATION_FAILED per
    # partition; fetching every topic of the group leaves it out (KafkaApis.handleOffsetFetchRequest).
    named = build(
        OffsetFetchRequest,
        groups=[
            {
                "group_id": "g-1",
                "topics": [
                    {"name": "m-topic", "partition_indexes": [0]},
                    {"name": "other", "partition_indexes": [0]},
                ],
            }
        ],
    )
    answer = acl_node.call("bob", named, OffsetFetchResponse, 8).groups[0]
    errors = {t.name: [(p.error_code, p.committed_offset) for p in t.partitions] for t in answer.topics}
    assert errors == {"m-topic": [(0, 0)], "other": [(ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)]}
    every_topic = build(OffsetFetchRequest, groups=[{"group_id": "g-1", "topics": None}])
    assert {t.name for t in acl_node.call("bob", every_topic, OffsetFetchResponse, 8).groups[0].topics} == {
        "m-topic"
    }


def test_real_clients_refused_then_allowed_and_deny_wins_over_allow(acl_node: AclNode) -> None:
    def produce(user: str, topic: str) -> KafkaError | None:
        outcome: list[KafkaError | None] = []
        producer = Producer({**acl_node.confluent(user), "message.timeout.ms": 10000})
        producer.produce(topic, b"v", partition=0, on_delivery=lambda err, msg: outcome.append(err))
        producer.flush(15)
        return outcome[0] if outcome else KafkaError(KafkaError._MSG_TIMED_OUT)

    assert produce("alice", "m-topic").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce("bob", "m-topic") is None
    # confluent-kafka's consumer group as alice: refused at the group; as bob: it reads.
    for user, expected in (("alice", KafkaError.GROUP_AUTHORIZATION_FAILED), ("bob", None)):
        consumer = Consumer(
            {**acl_node.confluent(user), "group.id": "g-real", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["m-topic"])
        got, error = None, None
        deadline = time.monotonic() + 30
        while got is None and error is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                if message.error():
                    error = message.error().code()
                else:
                    got = message.value()
        consumer.close()
        if expected is None:
            assert got == b"v"
        else:
            assert error == expected
    # Deny over allow: bob's prefixed ALLOW does not beat a literal DENY.
    assert (
        acl_node.acls(
            "add", "--deny-principal", "User:bob", "--operation", "Write", "--topic", "m-topic"
        ).returncode
        == 0
    )
    assert produce("bob", "m-topic").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    removed = acl_node.acls(
        "remove", "--deny-principal", "User:bob", "--topic", "m-topic", "--resource-pattern-type", "literal"
    )
    assert removed.returncode == 0 and "Removed 1 ACL(s)" in removed.stdout
    assert produce("bob", "m-topic") is None
    # The super user needs no ACL at all.
    assert produce("admin", "other") is None
