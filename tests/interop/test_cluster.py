"""A cluster of separate processes: three controllers (the KRaft quorum) and three brokers that follow
the metadata log as observers, register and heartbeat with the active controller (KIP-631), and get
producer-id blocks from it over the network (KIP-730). Real kill -9, real clients.

One cluster for the module (six processes on a two-core machine); the tests run in file order and each
leaves every node running again.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from pykraft.cli.metadata import iter_log
from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnectionError
from pykraft.io.raft_log import METADATA_PARTITION_DIR
from pykraft.protocol.messages import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from pykraft.testing import ProcessCluster, broker_properties, free_port, running_cluster
from tests.interop.cluster_support import three_by_three, wait_until
from tests.raw_client import RawClient, register_broker

SESSION_TIMEOUT_MS = 3000
OVERRIDES = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
}
BROKERS = (101, 102, 103)
PARTITIONS = 12
PER_CLIENT = 60  # messages each producer client writes, spread over the partitions


# Racks (issue 30): each broker in its own rack, named in id order (so placement is the rack-unaware
# round robin the other tests expect), each with its own metrics endpoint.
RACK_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    per_broker = {b: {"broker.rack": f"rack-{b}", "metrics.port": str(free_port())} for b in BROKERS}
    overrides = {**OVERRIDES, "replica.selector.class": RACK_SELECTOR}
    with three_by_three(tmp_path_factory, "cluster", overrides, per_broker_overrides=per_broker) as running:
        yield running


def _metadata(address: str, topics: list[str] | None = None) -> MetadataResponse:
    request = MetadataRequest(
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
    )
    with RawClient(address, timeout_s=5) as client:
        return client.request(request, MetadataResponse, 9)


def _leaders(cluster: ProcessCluster, topic: str, via: int) -> dict[int, int]:
    response = _metadata(cluster.nodes[via].address, [topic])
    return {p.partition_index: p.leader_id for p in response.topics[0].partitions}


def _active_controller(cluster: ProcessCluster) -> int:
    return int(cluster.wait_for_leader().leader_id)


# --- clients --------------------------------------------------------------------------------------


def test_three_clients_produce_idempotently_and_consume_in_groups_across_all_brokers(
    cluster: ProcessCluster,
) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = cluster.bootstrap_servers
    topic = "spread"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    # Placed round-robin over the unfenced brokers: every broker leads some partitions, and every
    # broker's image already has the topic (CreateTopics answers once the answering broker sees it).
    leaders = _leaders(cluster, topic, via=BROKERS[2])
    assert sorted(leaders) == list(range(PARTITIONS)) and set(leaders.values()) == set(BROKERS)

    expected: set[bytes] = set()

    # confluent-kafka (librdkafka), idempotent.
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    failures: list[object] = []
    for i in range(PER_CLIENT):
        value = f"confluent-{i}".encode()
        expected.add(value)
        producer.produce(
            topic, value, partition=i % PARTITIONS, on_delivery=lambda err, msg: err and failures.append(err)
        )
    assert producer.flush(30) == 0 and not failures

    # kafka-python, idempotent.
    from kafka import KafkaProducer

    kp = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    futures = []
    for i in range(PER_CLIENT):
        value = f"kafka-python-{i}".encode()
        expected.add(value)
        futures.append(kp.send(topic, value, partition=i % PARTITIONS))
    for future in futures:
        future.get(timeout=30)
    kp.close()

    # aiokafka, idempotent.
    from aiokafka import AIOKafkaProducer

    async def aio_produce() -> None:
        aio = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
        await aio.start()
        try:
            for i in range(PER_CLIENT):
                value = f"aiokafka-{i}".encode()
                expected.add(value)
                await aio.send_and_wait(topic, value, partition=i % PARTITIONS)
        finally:
            await aio.stop()

    asyncio.run(aio_produce())

    # Each producer got its own id from a broker's block (KIP-730); the partitions' logs show them.
    # Group consumers of each client read everything back, their coordinators on any broker.
    assert _confluent_group(bootstrap, topic) == expected
    # KIP-848 (issue 19): the consumer protocol too, its coordinator and its assignment's topic ids
    # resolved through whichever broker leads the group's __consumer_offsets partition.
    assert _confluent_group(bootstrap, topic, "g-confluent-848", {"group.protocol": "consumer"}) == expected
    assert _kafka_python_group(bootstrap, topic) == expected
    assert _aiokafka_group(bootstrap, topic) == expected


def _confluent_group(
    bootstrap: str, topic: str, group: str = "g-confluent", extra: dict[str, str] | None = None
) -> set[bytes]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **(extra or {}),
        }
    )
    consumer.subscribe([topic])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while len(seen) < 3 * PER_CLIENT and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.add(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


def _kafka_python_group(bootstrap: str, topic: str) -> set[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id="g-kafka-python",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while len(seen) < 3 * PER_CLIENT and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                seen.update(r.value for r in records)
        consumer.commit()
    finally:
        consumer.close()
    return seen


def _aiokafka_group(bootstrap: str, topic: str) -> set[bytes]:
    from aiokafka import AIOKafkaConsumer

    async def consume() -> set[bytes]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id="g-aiokafka",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        seen: set[bytes] = set()
        deadline = time.monotonic() + 60
        try:
            while len(seen) < 3 * PER_CLIENT and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    seen.update(r.value for r in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return seen

    return asyncio.run(consume())


def test_topics_are_auto_created_and_deleted_through_any_broker(cluster: ProcessCluster) -> None:
    from confluent_kafka.admin import AdminClient

    first, second = (cluster.nodes[b].address for b in BROKERS[:2])
    # Auto-creation on a broker process goes to the active controller; the topic then shows on all.
    with RawClient(first) as client:
        client.request(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name="auto")], allow_auto_topic_creation=True
            ),
            MetadataResponse,
            9,
        )
    wait_until(
        lambda: _metadata(second, ["auto"]).topics[0].error_code == ErrorCode.NONE,
        30,
        "the auto-created topic",
    )
    admin = AdminClient({"bootstrap.servers": second})
    admin.delete_topics(["auto"])["auto"].result(30)
    # Answered once the answering broker no longer has it; every broker follows the same log.
    assert _metadata(second, ["auto"]).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    wait_until(
        lambda: _metadata(first, ["auto"]).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        30,
        "the deletion to reach the other broker",
    )


def test_partitions_are_added_through_any_broker(cluster: ProcessCluster) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    first, second = (cluster.nodes[b].address for b in BROKERS[:2])
    admin = AdminClient({"bootstrap.servers": second})
    admin.create_topics([NewTopic("grown", num_partitions=2, replication_factor=2)])["grown"].result(30)
    # CreatePartitions on a broker process goes to the active controller; the answer comes once the
    # answering broker's own image has the new partitions, placed with partition 0's replication factor.
    admin.create_partitions([NewPartitions("grown", 5)])["grown"].result(30)
    partitions = _metadata(second, ["grown"]).topics[0].partitions
    assert sorted(p.partition_index for p in partitions) == [0, 1, 2, 3, 4]
    for p in partitions:
        assert len(set(p.replica_nodes)) == 2 and set(p.replica_nodes) <= set(BROKERS), p
    wait_until(
        lambda: len(_metadata(first, ["grown"]).topics[0].partitions) == 5,
        30,
        "the new partitions to reach the other broker",
    )
    future = admin.create_partitions([NewPartitions("grown", 3)])["grown"]
    with pytest.raises(KafkaException) as excinfo:
        future.result(30)
    assert excinfo.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    assert "currently has 5 partition(s); 3 would not be an increase" in excinfo.value.args[0].str()


def _topic_counter(cluster: ProcessCluster, broker_id: int, name: str, topic: str) -> float:
    """One broker's kafka_server_brokertopicmetrics_<name>_total{topic=...} from its metrics endpoint."""
    from prometheus_client.parser import text_string_to_metric_families

    port = _metrics_port(cluster, broker_id)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"kafka_server_brokertopicmetrics_{name}_total" and sample.labels == {
                "topic": topic
            }:
                return float(sample.value)
    return 0.0


def _metrics_port(cluster: ProcessCluster, broker_id: int) -> int:
    return int(cluster.per_broker_overrides[broker_id]["metrics.port"])


def test_describe_cluster_shows_racks_and_a_consumer_reads_from_the_follower_in_its_rack(
    cluster: ProcessCluster,
) -> None:
    """KIP-36 / KIP-392 through confluent-kafka: describe_cluster lists each broker's broker.rack; a
    consumer with client.rack naming a follower's rack is sent there by the leader (preferred read
    replica) and reads every record from it: the follower's bytes-out for the topic grows by the
    records, the leader's does not."""
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_cluster().result(30)
    assert sorted((n.id, n.rack) for n in described.nodes) == [(b, f"rack-{b}") for b in BROKERS]

    topic = "racks"
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3)])[topic].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = [f"rack-record-{i}".encode() for i in range(200)]
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0
    (partition,) = _metadata(cluster.nodes[BROKERS[0]].address, [topic]).topics[0].partitions
    leader = partition.leader_id
    follower = next(b for b in partition.replica_nodes if b != leader)
    assert set(partition.isr_nodes) == set(BROKERS)  # acks=all: every replica holds every record
    before = {b: _topic_counter(cluster, b, "bytesout", topic) for b in (leader, follower)}

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "g-racks",
            "client.rack": f"rack-{follower}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(bytes(message.value() or b""))
    finally:
        consumer.close()
    assert got == values
    follower_bytes = _topic_counter(cluster, follower, "bytesout", topic) - before[follower]
    assert follower_bytes >= sum(len(v) for v in values)
    assert _topic_counter(cluster, leader, "bytesout", topic) == before[leader]


def test_client_quotas_are_altered_through_any_broker_and_every_broker_describes_them(
    cluster: ProcessCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """AlterClientQuotas on a broker process goes to the active controller (issue 27 item 7); the
    ClientQuotaRecord reaches every broker's image."""
    from pykraft.cli import main

    first, second = (cluster.nodes[b].address for b in BROKERS[:2])
    user = ["--entity-type", "users", "--entity-name", "carol"]
    assert (
        main(
            [
                "configs",
                "--bootstrap-server",
                first,
                *user,
                "--alter",
                "--add-config",
                "consumer_byte_rate=4096",
            ]
        )
        == 0
    )
    expected = "Quota configs for user-principal 'carol' are consumer_byte_rate=4096.0"

    def described() -> bool:
        capsys.readouterr()
        assert main(["configs", "--bootstrap-server", second, *user, "--describe"]) == 0
        return capsys.readouterr().out.strip() == expected

    wait_until(described, 30, "the quota to reach the other broker")


# --- DescribeQuorum through a broker ------------------------------------------------------------------


def test_metadata_quorum_describe_through_a_broker_is_forwarded_to_the_active_controller(
    cluster: ProcessCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from pykraft.cli import main

    leader = _active_controller(cluster)
    voters = sorted(cluster.controllers)
    broker = cluster.nodes[BROKERS[1]].address
    # kafka-metadata-quorum --bootstrap-server: the broker forwards DescribeQuorum to the active
    # controller (Kafka's KafkaApis), whose answer names every voter and every broker as an observer.
    assert main(["metadata-quorum", "--bootstrap-server", broker, "describe", "--status"]) == 0
    status = {k: v.strip() for k, v in (line.split(":", 1) for line in capsys.readouterr().out.splitlines())}
    assert status["LeaderId"] == str(leader)
    assert [v["id"] for v in json.loads(status["CurrentVoters"])] == voters
    assert {o["id"] for o in json.loads(status["CurrentObservers"])} >= set(BROKERS)
    assert main(["metadata-quorum", "--bootstrap-server", broker, "describe", "--replication"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows[0][0] == str(leader) and rows[0][-1] == "Leader"
    assert sorted(int(r[0]) for r in rows if r[-1] == "Follower") == [v for v in voters if v != leader]
    assert {int(r[0]) for r in rows if r[-1] == "Observer"} >= set(BROKERS)


# --- AllocateProducerIds (KIP-730) ---------------------------------------------------------------------


def _allocate(address: str, broker_id: int, broker_epoch: int) -> AllocateProducerIdsResponse:
    with RawClient(address) as client:
        return client.request(
            AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch),
            AllocateProducerIdsResponse,
            0,
        )


def test_allocate_producer_ids_checks_the_broker_and_its_epoch_and_rate(cluster: ProcessCluster) -> None:
    controller = cluster.nodes[_active_controller(cluster)].address
    cluster_id = _cluster_id(cluster)
    registered = register_broker(controller, 150, cluster_id)
    assert registered.error_code == ErrorCode.NONE
    epoch = registered.broker_epoch
    assert _allocate(controller, 150, epoch - 1).error_code == ErrorCode.STALE_BROKER_EPOCH
    assert _allocate(controller, 4242, 0).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # A broker's client listener never serves it, whoever asks.
    assert _allocate(cluster.nodes[BROKERS[0]].address, 150, epoch).error_code == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    # 30 requests at once, each on its own connection (one request at a time per connection): the
    # bucket holds 10 and refills 10 a second, so they would have to arrive spread over 2 s for none to
    # be throttled. One after another, each waiting for its block's commit, a busy machine spread 15
    # of them over more than 0.5 s and none was throttled.
    connections = [RawClient(controller) for _ in range(30)]
    answers: list[AllocateProducerIdsResponse] = []
    start = threading.Barrier(len(connections))

    def allocate(client: RawClient) -> None:
        request = AllocateProducerIdsRequest(broker_id=150, broker_epoch=epoch)
        start.wait()
        answers.append(client.request(request, AllocateProducerIdsResponse, 0))

    threads = [threading.Thread(target=allocate, args=(c,)) for c in connections]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for client in connections:
            client.close()
    assert len(answers) == len(connections)
    granted = [a for a in answers if a.error_code == ErrorCode.NONE]
    throttled = [a for a in answers if a.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED]
    assert granted and throttled and all(a.throttle_time_ms > 0 for a in throttled)
    # Blocks that never overlap (answered in any order, the threads racing).
    starts = sorted(a.producer_id_start for a in granted)
    assert all(b - a >= granted[0].producer_id_len for a, b in zip(starts, starts[1:], strict=False))


def _cluster_id(cluster: ProcessCluster) -> str:
    response = _metadata(cluster.nodes[BROKERS[0]].address, [])
    return str(response.cluster_id)


# --- producer ids under controller failover ---------------------------------------------------------


PRODUCERS = 300


def _init_producer_id(addresses: list[str], rng: random.Random, deadline: float) -> tuple[int, list[int]]:
    """InitProducerId (idempotent) through any broker until one answers with an id: (id, errors seen)."""
    errors: list[int] = []
    while time.monotonic() < deadline:
        address = rng.choice(addresses)
        try:
            with RawClient(address, timeout_s=5) as client:
                response = client.request(
                    InitProducerIdRequest(
                        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
                    ),
                    InitProducerIdResponse,
                    4,
                )
        except (BrokerConnectionError, OSError):
            errors.append(-1)  # that broker is down (killed): another one
            time.sleep(0.02)
            continue
        if response.error_code == ErrorCode.NONE:
            return int(response.producer_id), errors
        errors.append(response.error_code)
        time.sleep(0.05)
    raise AssertionError(f"no producer id before the deadline; errors {errors[-10:]}")


def test_300_producers_get_distinct_ids_while_the_active_controller_is_killed_twice(
    cluster: ProcessCluster, tmp_path: object
) -> None:
    addresses = [cluster.nodes[b].address for b in BROKERS]
    results: list[int] = []
    errors_seen: list[int] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    start = time.monotonic()

    def producer(index: int) -> None:
        rng = random.Random(index)
        # Spread over ~4 s, so producers initialise before, during and after each kill.
        time.sleep(rng.uniform(0, 4.0))
        try:
            producer_id, errors = _init_producer_id(addresses, rng, start + 90)
        except BaseException as exc:
            failures.append(exc)
            return
        with lock:
            results.append(producer_id)
            errors_seen.extend(errors)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(PRODUCERS)]
    for thread in threads:
        thread.start()
    try:
        for round_no in range(2):
            time.sleep(0.8)
            leader = _active_controller(cluster)
            cluster.kill(leader)
            # A broker restarted now has no block: it must get one from the next active controller.
            restarted = BROKERS[round_no]
            cluster.kill(restarted)
            cluster.start(restarted)
            time.sleep(0.3)
            cluster.start(leader)
            cluster.wait_for_leader(exclude=frozenset({leader}))
    finally:
        for thread in threads:
            thread.join(timeout=120)
    assert not failures, failures[:3]
    assert len(results) == PRODUCERS
    # One more producer through each broker: a restarted broker asks the controller for its first block
    # on registration, or (if that answer was lost with a killed controller) on its first InitProducerId.
    cluster.wait_for_brokers(expected=set(BROKERS))
    for broker_id in BROKERS:
        results.append(
            _init_producer_id([cluster.nodes[broker_id].address], random.Random(0), time.monotonic() + 60)[0]
        )
    assert len(set(results)) == len(results) == PRODUCERS + len(BROKERS), "a producer id was handed out twice"

    # The metadata log: blocks never overlap and only grow, each naming a registered broker and the
    # epoch it had (a broker's epoch is the offset of its RegisterBrokerRecord).
    copy = _quiet_copy_of_a_controller_log(cluster, str(tmp_path))
    registrations: set[tuple[int, int]] = set()
    blocks: list[tuple[int, int, int]] = []
    for record in iter_log(copy):
        if record.record_type == "RegisterBrokerRecord":
            registrations.add((record.fields["broker_id"], record.offset))
        elif record.record_type == "ProducerIdsRecord":
            fields = record.fields
            blocks.append((fields["broker_id"], fields["broker_epoch"], fields["next_producer_id"]))
    assert len(blocks) >= 5  # three first blocks, two more for the restarted brokers
    next_ids = [b[2] for b in blocks]
    assert next_ids == sorted(next_ids) and len(set(next_ids)) == len(next_ids)
    assert all((broker_id, epoch) in registrations for broker_id, epoch, _ in blocks)
    assert all(p < next_ids[-1] for p in results)

    out = os.path.join(str(tmp_path), "audit")
    audit = subprocess.run(
        [sys.executable, "-m", "pykraft.cli", "pipeline", "pid-audit", "--metadata-dir", copy, "--out", out],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "OK: no violations" in audit.stdout


def _quiet_copy_of_a_controller_log(cluster: ProcessCluster, directory: str) -> str:
    """A follower controller stopped cleanly (its log flushed and closed), its metadata log copied, and
    the controller started again."""
    leader = _active_controller(cluster)
    follower = next(i for i in cluster.controllers if i != leader)
    cluster.stop(follower)
    copy = os.path.join(directory, "metadata")
    shutil.copytree(os.path.join(cluster.nodes[follower].data_dir, METADATA_PARTITION_DIR), copy)
    cluster.start(follower)
    cluster.wait_for_leader()
    return copy


# --- broker failures ------------------------------------------------------------------------------------


def _listed_brokers(address: str) -> list[int]:
    return sorted(b.node_id for b in _metadata(address, []).brokers)


def _broker_epochs(cluster: ProcessCluster, broker_id: int) -> list[int]:
    with open(cluster.nodes[broker_id].log_path, encoding="utf-8") as fh:
        return [int(line.rsplit(" ", 1)[1]) for line in fh if "registered with broker epoch" in line]


def test_a_killed_broker_is_fenced_its_partitions_unavailable_and_it_returns_with_a_new_epoch(
    cluster: ProcessCluster,
) -> None:
    topic = "spread"
    victim, observer = BROKERS[2], BROKERS[0]
    led = sorted(p for p, leader in _leaders(cluster, topic, observer).items() if leader == victim)
    assert led
    epochs_before = _broker_epochs(cluster, victim)
    killed_at = time.monotonic()
    cluster.kill(victim)
    wait_until(
        lambda: victim not in _listed_brokers(cluster.nodes[observer].address), 30, "the broker's fencing"
    )
    fenced_after_s = time.monotonic() - killed_at
    # Fenced by its session expiring (not before: nothing told the controller), well within bounds.
    assert fenced_after_s < SESSION_TIMEOUT_MS / 1000 + 5, fenced_after_s
    response = _metadata(cluster.nodes[observer].address, [topic])
    by_index = {p.partition_index: p for p in response.topics[0].partitions}
    for index in led:
        assert by_index[index].error_code == ErrorCode.LEADER_NOT_AVAILABLE
        assert by_index[index].leader_id == -1

    cluster.start(victim)
    cluster.wait_for_brokers(expected=set(BROKERS))
    epochs_after = _broker_epochs(cluster, victim)
    assert len(epochs_after) > len(epochs_before) and epochs_after[-1] > epochs_before[-1]
    wait_until(
        lambda: all(_leaders(cluster, topic, observer)[p] == victim for p in led), 30, "leadership back"
    )
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True}
    )
    delivered: list[object] = []
    for index in led:
        producer.produce(topic, b"back", partition=index, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0 and delivered == [None] * len(led)


def test_sigterm_of_a_broker_moves_leadership_off_it_before_it_stops(cluster: ProcessCluster) -> None:
    victim, observer = BROKERS[1], BROKERS[0]
    cluster.stop(victim)
    # Controlled shutdown (want_shut_down): the controller fenced it and moved leadership off it before
    # the process exited, rather than after its session timed out.
    with open(cluster.nodes[victim].log_path, encoding="utf-8") as fh:
        assert f"controlled shutdown of broker {victim} done" in fh.read()
    wait_until(lambda: victim not in _listed_brokers(cluster.nodes[observer].address), 30, "the broker gone")
    cluster.start(victim)
    cluster.wait_for_brokers(expected=set(BROKERS))


def test_a_restarted_broker_answers_nothing_before_it_has_caught_up_with_the_metadata_log(
    cluster: ProcessCluster,
) -> None:
    """Kafka's BrokerServer processes requests only once the controller says it has caught up
    (initialCatchUpFuture). A broker restarted while no controller answers has no committed image yet:
    answering from it told clients their topics were gone (issue 32's campaign, seed 13: after every
    node was killed at once, consumers saw "partition count changed from 3 to 0" and a broker asked for
    __consumer_offsets with replication factor 1). Its first Metadata answer comes after the
    controllers return, and lists the topic whole, and the broker itself: it answers only once the
    controller has unfenced it (initialUnfenceFuture) and its own image says so too. Answered in
    between, after a full-cluster restart, the Metadata named no broker at all and librdkafka dropped
    every broker it knew (issue 32's campaign, seed 63: a KIP-848 consumer's synchronous commit never
    returned)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, victim, partitions = "caught-up", BROKERS[0], 3
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)
    wait_until(
        lambda: len(_metadata(cluster.nodes[victim].address, [topic]).topics[0].partitions) == partitions,
        30,
        "the topic on the broker",
    )
    for controller in sorted(cluster.controllers):
        cluster.kill(controller)
    cluster.kill(victim)
    cluster.start(victim)
    address = cluster.nodes[victim].address
    host, port = address.rsplit(":", 1)
    wait_until(lambda: _accepts(host, int(port)), 30, "the restarted broker's listener")
    answers: list[MetadataResponse] = []
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            with RawClient(address, timeout_s=120) as client:
                request = MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
                )
                answers.append(client.request(request, MetadataResponse, 9))
        except BaseException as exc:
            errors.append(exc)

    asking = threading.Thread(target=ask)
    asking.start()
    try:
        asking.join(2.0)
        assert not answers and not errors, (answers, errors)  # no controller: nothing to answer from yet
    finally:
        cluster.start()
    asking.join(120)
    assert not errors and answers, errors
    (answered,) = answers[0].topics
    assert (answered.error_code, len(answered.partitions)) == (ErrorCode.NONE, partitions)
    assert victim in {b.node_id for b in answers[0].brokers}, answers[0].brokers
    cluster.wait_for_leader()
    cluster.wait_for_brokers(expected=set(BROKERS))


def _accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def test_a_broker_from_another_cluster_is_refused_with_both_ids(
    cluster: ProcessCluster, tmp_path: object
) -> None:
    data = os.path.join(str(tmp_path), "stranger")
    os.makedirs(data)
    with open(os.path.join(data, "meta.properties"), "w", encoding="utf-8") as fh:
        fh.write("version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=199\n")
    voters = {i: n.port for i, n in cluster.controllers.items()}
    config = os.path.join(str(tmp_path), "stranger.properties")
    with open(config, "w", encoding="utf-8") as fh:
        fh.write(broker_properties(199, data, 0, voters))
    proc = subprocess.run(
        [sys.executable, "-m", "pykraft.cli", "server", "start", "--config", config],
        capture_output=True,
        text=True,
        timeout=60,
    )
    ours = _cluster_id(cluster)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("pykraft: INCONSISTENT_CLUSTER_ID"), last
    assert "AAAAAAAAAAAAAAAAAAAAAA" in last and ours in last and data in last


def test_a_broker_that_was_down_catches_up_from_a_snapshot(tmp_path: object) -> None:
    """KIP-630 for observers: while a broker is down the controller snapshots and cleans its log past
    the broker's end; back up, the broker fetches the snapshot (FetchSnapshot) and serves what it holds."""
    from tests.interop.test_quorum import FAST_METADATA

    with running_cluster(
        controllers=1, brokers=1, directory=os.path.join(str(tmp_path), "small"), overrides=FAST_METADATA
    ) as small:
        broker, controller = small.brokers[BROKERS[0]], small.controllers[1]
        broker_meta = os.path.join(broker.data_dir, METADATA_PARTITION_DIR)
        controller_meta = os.path.join(controller.data_dir, METADATA_PARTITION_DIR)
        small.stop(broker.node_id)
        broker_end = max(_segment_offsets(broker_meta))
        created = [f"while-down-{i}" for i in range(3)]
        for name in created:
            with RawClient(controller.address) as client:
                answer = client.request(
                    CreateTopicsRequest(
                        topics=[
                            CreateTopicsRequest.CreatableTopic(
                                name=name, num_partitions=1, replication_factor=-1, assignments=[], configs=[]
                            )
                        ],
                        timeout_ms=10000,
                        validate_only=False,
                    ),
                    CreateTopicsResponse,
                    5,
                )
            # The broker is fenced (its controlled shutdown), so there is no broker to place on.
            assert answer.topics[0].error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        wait_until(
            lambda: min(_segment_offsets(controller_meta)) > broker_end, 30, "the controller's log cleaning"
        )

        small.start(broker.node_id)
        small.wait_for_brokers(expected={broker.node_id})
        snapshots = [f for f in os.listdir(broker_meta) if f.endswith(".checkpoint")]
        assert any(int(f.split("-")[0]) > broker_end for f in snapshots), snapshots
        auto = "after-catch-up"
        with RawClient(broker.address) as client:
            client.request(
                MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=auto)], allow_auto_topic_creation=True
                ),
                MetadataResponse,
                9,
            )
        try:
            wait_until(
                lambda: _metadata(broker.address, [auto]).topics[0].error_code == ErrorCode.NONE,
                30,
                "the topic",
            )
        except AssertionError:
            print(small.logs())
            raise


def _segment_offsets(directory: str) -> list[int]:
    return [int(f.split(".")[0]) for f in os.listdir(directory) if f.endswith(".log")]


# --- feature versions (issue 30 item 5) -------------------------------------------------------------


def test_update_features_forwarded_by_a_broker_and_registration_outside_the_finalized_level_refused(
    cluster: ProcessCluster,
) -> None:
    """KafkaApis forwards UpdateFeatures to the active controller; ClusterControlManager.registerBroker
    refuses a broker whose supported range leaves out a finalized level (UNSUPPORTED_VERSION)."""
    from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

    broker = cluster.nodes[BROKERS[0]].address
    key = UpdateFeaturesRequest.FeatureUpdateKey
    with RawClient(broker) as client:
        versions = client.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1"), ApiVersionsResponse, 4
        )
        assert [(f.name, f.max_version_level) for f in versions.finalized_features] == [
            ("metadata.version", 21)
        ]
        # Checked against every registered broker's range (all pykraft: 7-21), written by nobody.
        dry = client.request(
            UpdateFeaturesRequest(
                timeout_ms=5000,
                feature_updates=[key(feature="metadata.version", max_version_level=20, upgrade_type=2)],
                validate_only=True,
            ),
            UpdateFeaturesResponse,
            1,
        )
        assert [(r.feature, r.error_code) for r in dry.results] == [("metadata.version", ErrorCode.NONE)]
        refused = client.request(
            UpdateFeaturesRequest(
                timeout_ms=5000, feature_updates=[key(feature="metadata.version", max_version_level=22)]
            ),
            UpdateFeaturesResponse,
            2,
        )
        assert refused.error_code == ErrorCode.INVALID_UPDATE_VERSION
        assert "only supports versions 7-21" in refused.error_message
    controller = cluster.nodes[_active_controller(cluster)].address
    old = register_broker(controller, 151, _cluster_id(cluster), features=[("metadata.version", 7, 20)])
    assert old.error_code == ErrorCode.UNSUPPORTED_VERSION
