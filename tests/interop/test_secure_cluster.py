"""A cluster whose every listener is SASL_SSL (issue 16): three controller and three broker processes,
TLS everywhere, PLAIN between the nodes (each presents ``admin``, a super user), SCRAM-SHA-512 for
clients, and the StandardAuthorizer judging every request. The raft quorum, registration and
heartbeats, AllocateProducerIds, replica fetching and transaction markers all run over it; the spine's
and the groups' flows run through it with real clients; a principal that is not a node is refused the
controllers' RPCs with CLUSTER_AUTHORIZATION_FAILED. The Spark pipeline (issue 28) runs on it too: a
Structured Streaming query from the pykraft source to the exactly-once pykraft sink, with Spark's Kafka
option names for SCRAM over TLS, checked by ``pykraft pipeline eos-verify``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.cli import main
from pykraft.cli.metadata import QuorumToolError, describe_quorum
from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnectionError, ClientSecurity
from pykraft.protocol.messages import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from pykraft.raft import wire
from pykraft.raft.messages import VoteRequest, VoteResponse
from pykraft.testing import ClusterSecurity, ProcessCluster
from tests.interop.cluster_support import three_by_three, wait_until
from tests.raw_client import RawClient, broker_heartbeat

pytestmark = pytest.mark.slow

BROKERS = (101, 102, 103)
REAUTH_MS = 1500
ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")  # a SCRAM user of the brokers, and a PLAIN user of the controllers
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"


def _jaas(*extra_users: tuple[str, str]) -> str:
    users = " ".join(f'user_{u}="{p}"' for u, p in (ADMIN, *extra_users))
    return f'{_PLAIN} username="{ADMIN[0]}" password="{ADMIN[1]}" {users};'


def _security(certs: Path, user: tuple[str, str], mechanism: str) -> ClientSecurity:
    return ClientSecurity("SASL_SSL", mechanism, user[0], user[1], str(certs / "ca.pem"))


def _overrides(certs: Path) -> dict[str, str]:
    return {
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
        "replica.lag.time.max.ms": "3000",
        "default.replication.factor": "3",
        "min.insync.replicas": "2",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.num.partitions": "3",
        "ssl.keystore.location": str(certs / "keystore.pem"),
        "ssl.key.password": "s3cret-pass",
        "ssl.truststore.location": str(certs / "ca.pem"),
        # The controller listener: PLAIN (KRaft's controllers serve no SCRAM there).
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": _jaas(ALICE),
        "sasl.mechanism.controller.protocol": "PLAIN",
        # KIP-368: sessions on the controller listener last 1.5 s; the nodes move to freshly
        # authenticated connections before theirs end (clients of the brokers are left out: kafka-python
        # and aiokafka do not re-authenticate).
        "listener.name.controller.connections.max.reauth.ms": str(REAUTH_MS),
        # The brokers' listener: the nodes replicate with PLAIN, clients come with SCRAM-SHA-512.
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas(),
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }


class SecureCluster:
    def __init__(self, cluster: ProcessCluster, certs: Path, directory: Path) -> None:
        self.cluster = cluster
        self.certs = certs
        self.directory = directory
        self.bootstrap = cluster.bootstrap_servers

    def command_config(self, user: tuple[str, str], mechanism: str) -> Path:
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        path = self.directory / f"{user[0]}-{mechanism}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={mechanism}\n"
            f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
            f'username="{user[0]}" password="{user[1]}";\n'
            f"ssl.truststore.location={self.certs / 'ca.pem'}\n"
        )
        return path

    def cli(self, *args: str, as_user: tuple[str, str] = ADMIN) -> None:
        config = self.command_config(as_user, "PLAIN")
        result = subprocess.run(
            [sys.executable, "-m", "pykraft.cli", args[0], "--bootstrap-server", self.bootstrap,
             "--command-config", str(config), *args[1:]],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr

    def confluent(self, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.certs / "ca.pem"),
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": ALICE[0],
            "sasl.password": ALICE[1],
            **extra,
        }

    def partition(self, topic: str, index: int) -> Any:
        security = _security(self.certs, ADMIN, "PLAIN")
        for broker_id in BROKERS:
            if not self.cluster.nodes[broker_id].alive:
                continue
            with RawClient(self.cluster.nodes[broker_id].address, timeout_s=5, security=security) as client:
                response = client.request(
                    MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]),
                    MetadataResponse,
                    9,
                )
            return next(p for p in response.topics[0].partitions if p.partition_index == index)
        raise AssertionError("no broker alive")


@pytest.fixture(scope="module")
def secure(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    security = ClusterSecurity("SASL_SSL", _security(certs, ADMIN, "PLAIN"), _security(certs, ADMIN, "PLAIN"))
    directory = tmp_path_factory.mktemp("secure-tools")
    with three_by_three(tmp_path_factory, "secure", _overrides(certs), security=security) as cluster:
        running = SecureCluster(cluster, certs, directory)
        # Alice: a SCRAM user with what a producing, consuming, transactional client needs.
        running.cli(
            "scram", "add", "--user", ALICE[0], "--mechanism", "SCRAM-SHA-512", "--password", ALICE[1]
        )
        for resource in (["--topic", "s-"], ["--group", "s-"], ["--transactional-id", "s-"]):
            running.cli("acls", "add", "--allow-principal", "User:alice", "--operation", "All",
                        *resource, "--resource-pattern-type", "prefixed")  # fmt: skip
        running.cli(
            "acls", "add", "--allow-principal", "User:alice", "--operation", "IdempotentWrite", "--cluster"
        )
        yield running


def test_three_clients_over_scram_produce_replicated_and_consume_in_groups(secure: SecureCluster) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "s-spread"
    admin = AdminClient(secure.confluent())  # kept: a collected client fails its futures
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    # Every partition's followers fetch from its leader over SASL_SSL: the ISR is all three.
    for index in range(3):
        wait_until(lambda i=index: len(secure.partition(topic, i).isr_nodes) == 3, 30, f"{topic}-{index} ISR")
    leaders = {secure.partition(topic, i).leader_id for i in range(3)}
    assert leaders == set(BROKERS)

    expected: set[bytes] = set()
    producer = confluent_kafka.Producer(secure.confluent(**{"enable.idempotence": True}))
    for i in range(60):
        expected.add(b"confluent-%d" % i)
        producer.produce(topic, b"confluent-%d" % i, partition=i % 3)
    assert producer.flush(30) == 0

    from kafka import KafkaProducer

    kafka_python = {
        "bootstrap_servers": secure.bootstrap,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": ALICE[0],
        "sasl_plain_password": ALICE[1],
        "ssl_cafile": str(secure.certs / "ca.pem"),
    }
    kp = KafkaProducer(**kafka_python, acks="all")
    for future in [kp.send(topic, b"kafka-python-%d" % i, partition=i % 3) for i in range(60)]:
        future.get(timeout=30)
    kp.close()
    expected |= {b"kafka-python-%d" % i for i in range(60)}

    from aiokafka import AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def aio_produce() -> None:
        aio = AIOKafkaProducer(
            bootstrap_servers=secure.bootstrap,
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username=ALICE[0],
            sasl_plain_password=ALICE[1],
            ssl_context=create_ssl_context(cafile=str(secure.certs / "ca.pem")),
            acks="all",
        )
        await aio.start()
        try:
            for i in range(60):
                await aio.send_and_wait(topic, b"aiokafka-%d" % i, partition=i % 3)
        finally:
            await aio.stop()

    asyncio.run(aio_produce())
    expected |= {b"aiokafka-%d" % i for i in range(60)}

    # Two groups, two clients: each reads everything, its coordinator on whichever broker.
    assert _confluent_group(secure, topic, "s-g1", len(expected)) == expected
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic, **kafka_python, group_id="s-g2", auto_offset_reset="earliest", enable_auto_commit=False
    )
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while len(seen) < len(expected) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                seen.update(r.value for r in records)
        consumer.commit()
    finally:
        consumer.close()
    assert seen == expected


def _confluent_group(secure: SecureCluster, topic: str, group: str, count: int) -> set[bytes]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        secure.confluent(**{"group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    )
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while len(seen) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.add(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


def test_a_killed_leader_returns_and_catches_up_over_sasl_ssl(secure: SecureCluster) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "s-failover"
    admin = AdminClient(secure.confluent())
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    wait_until(lambda: len(secure.partition(topic, 0).isr_nodes) == 3, 30, f"{topic} ISR")
    producer = confluent_kafka.Producer(secure.confluent(**{"enable.idempotence": True, "linger.ms": 5}))
    for i in range(100):
        producer.produce(topic, b"before-%d" % i)
    assert producer.flush(30) == 0
    leader = secure.partition(topic, 0).leader_id
    secure.cluster.kill(leader)
    try:
        wait_until(lambda: secure.partition(topic, 0).leader_id not in (leader, -1), 30, "a new leader")
        for i in range(100):
            producer.produce(topic, b"after-%d" % i)
        assert producer.flush(60) == 0
    finally:
        secure.cluster.start(leader)
    # The old leader authenticates to the new one, fetches what it missed and rejoins the ISR.
    wait_until(lambda: leader in secure.partition(topic, 0).isr_nodes, 60, f"broker {leader} back in the ISR")
    expected = {b"before-%d" % i for i in range(100)} | {b"after-%d" % i for i in range(100)}
    assert _confluent_group(secure, topic, "s-failover-check", len(expected)) == expected


def test_a_transaction_commits_with_markers_over_sasl_ssl(secure: SecureCluster) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "s-txn"
    admin = AdminClient(secure.confluent())  # kept: a collected client fails its futures
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    producer = confluent_kafka.Producer(secure.confluent(**{"transactional.id": "s-txn-1"}))
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, b"committed-%d" % i, partition=i % 3)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, b"aborted-%d" % i, partition=i % 3)
    producer.abort_transaction(60)
    consumer = confluent_kafka.Consumer(
        secure.confluent(
            **{
                "group.id": "s-txn-check",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
    )
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(seen) < 30 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.append(message.value())
        time.sleep(1)  # anything aborted would come in now
        while (message := consumer.poll(0.2)) is not None:
            if message.error() is None:
                seen.append(message.value())
    finally:
        consumer.close()
    assert sorted(seen) == sorted(b"committed-%d" % i for i in range(30))


def test_controller_rpcs_refuse_a_principal_that_is_not_a_node(secure: SecureCluster) -> None:
    cluster = secure.cluster
    controller = cluster.nodes[int(cluster.wait_for_leader().leader_id)].address
    alice = _security(secure.certs, ALICE, "PLAIN")
    # Alice authenticates on the controller listener but has no CLUSTER_ACTION.
    with RawClient(controller, security=alice) as client:
        answer = client.request(
            AllocateProducerIdsRequest(broker_id=101, broker_epoch=1), AllocateProducerIdsResponse, 0
        )
        assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        vote = VoteRequest(
            None, candidate_epoch=10**6, candidate_id=1, last_offset_epoch=10**6, last_offset=10**9
        )
        client.send_frame(wire.encode_raft_request(vote, 777, "alice"))
        correlation_id, response = wire.decode_raft_response(VoteRequest, client.recv_frame())
        assert correlation_id == 777 and isinstance(response, VoteResponse)
        assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and not response.vote_granted
    assert broker_heartbeat(controller, 101, 1, 0, security=alice).error_code == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    with pytest.raises(QuorumToolError, match="CLUSTER_AUTHORIZATION_FAILED"):
        describe_quorum(controller, security=alice)  # needs DESCRIBE on the cluster
    assert describe_quorum(controller, security=_security(secure.certs, ADMIN, "PLAIN")).leader_id >= 1
    # A wrong password, and no TLS at all, get nowhere; the quorum keeps its leader and serves on.
    with pytest.raises(BrokerConnectionError, match="Authentication failed"):
        RawClient(controller, security=_security(secure.certs, ("admin", "wrong"), "PLAIN"))
    with pytest.raises((BrokerConnectionError, OSError)):
        with RawClient(controller, timeout_s=3) as plain:
            plain.request(MetadataRequest(topics=[]), MetadataResponse, 9)
    assert cluster.wait_for_leader().leader_id >= 1


def test_node_sessions_on_the_controller_listener_expire_and_the_nodes_move_on(secure: SecureCluster) -> None:
    cluster = secure.cluster
    controller = cluster.nodes[int(cluster.wait_for_leader().leader_id)].address
    admin = _security(secure.certs, ADMIN, "PLAIN")
    with RawClient(controller, security=admin) as client:
        mine = f"127.0.0.1:{client.sock.getsockname()[1]}"
        assert client.request(
            AllocateProducerIdsRequest(broker_id=101, broker_epoch=-5), AllocateProducerIdsResponse, 0
        )
        time.sleep(REAUTH_MS / 1000 + 0.3)
        # The session ended and this client did not re-authenticate: its next request closes it.
        with pytest.raises(BrokerConnectionError):
            client.request(
                AllocateProducerIdsRequest(broker_id=101, broker_epoch=-5), AllocateProducerIdsResponse, 0
            )
    # Meanwhile every node kept its sessions fresh: the brokers are registered and unfenced, and no
    # node ever sent a request on an expired session (the controllers would have logged the closing).
    assert cluster.wait_for_brokers(10) == list(BROKERS)
    for node_id in cluster.controllers:
        log = Path(cluster.nodes[node_id].log_path).read_text().splitlines()
        assert [line for line in log if "after the SASL session expired" in line and mine not in line] == []


def _spark_options(secure: SecureCluster, password: str = ALICE[1]) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": secure.bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ALICE[0]}" password="{password}";',
        "kafka.ssl.truststore.location": str(secure.certs / "ca.pem"),
    }


def test_spark_stream_exactly_once_and_verify_over_sasl_ssl_scram(
    spark: Any, secure: SecureCluster, tmp_path: Path, capsys: Any
) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(secure.confluent())  # kept: a collected client fails its futures
    for topic in ("s-spark-src", "s-spark-dst"):
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    assert {secure.partition("s-spark-src", i).leader_id for i in range(3)} == set(BROKERS)
    # The exactly-once sink's transactional ids and marker groups are pykraft-sink-<query>-<task>.
    for resource in (["--transactional-id", "pykraft-sink-"], ["--group", "pykraft-sink-"]):
        secure.cli("acls", "add", "--allow-principal", "User:alice", "--operation", "All",
                   *resource, "--resource-pattern-type", "prefixed")  # fmt: skip
    producer = confluent_kafka.Producer(secure.confluent(**{"enable.idempotence": True, "linger.ms": 5}))
    for i in range(600):
        producer.produce("s-spark-src", b"v-%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    options = _spark_options(secure)

    # A batch read: one task per partition, each fetching from that partition's leader.
    batch = spark.read.format("pykraft").options(**options).option("subscribe", "s-spark-src").load()
    assert batch.rdd.getNumPartitions() == 3
    assert sorted(bytes(r.value) for r in batch.collect()) == sorted(b"v-%d" % i for i in range(600))
    plan = batch._jdf.queryExecution().toString()
    assert "pykraft" in plan and ALICE[1] not in plan  # Python data sources show no option values

    query = (
        spark.readStream.format("pykraft")
        .options(**options)
        .option("subscribe", "s-spark-src")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("upper(cast(value as string)) as value")
        .writeStream.format("pykraft")
        .options(**options)
        .option("topic", "s-spark-dst")
        .option("exactlyOnce", "true")
        .option("queryName", "secure")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        query.stop()  # a no-op once it ended; stops it if the test is interrupted
    assert query.exception() is None

    expected = tmp_path / "expected.txt"
    expected.write_text("".join(f"V-{i}\n" for i in range(600)))
    config = secure.command_config(ALICE, "SCRAM-SHA-512")
    verify = ["pipeline", "eos-verify", "--bootstrap-server", secure.bootstrap, "--topic", "s-spark-dst",
              "--isolation-level", "read_committed", "--expected", str(expected), "--out", str(tmp_path / "v")]  # fmt: skip
    assert main([*verify, "--command-config", str(config)]) == 0
    assert "OK: no violations" in capsys.readouterr().out


def test_spark_with_a_wrong_scram_password_fails_at_once_naming_sasl(
    spark: Any, secure: SecureCluster
) -> None:
    options = _spark_options(secure, password="wrong")
    with pytest.raises(Exception, match="SASL authentication failed") as info:
        spark.read.format("pykraft").options(**options).option("subscribe", "s-spark-src").load().count()
    assert "wrong" not in str(info.value)
