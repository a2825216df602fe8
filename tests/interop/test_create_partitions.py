"""CreatePartitions (KIP-195) from confluent-kafka's AdminClient against a single pykraft node: a topic
grows, the answer comes once Metadata shows the new partitions, a producer writes to them and a consumer
reads them back; Kafka's refusals (shrinking, unknown topics, bad assignments) keep their codes; ``pykraft
topics --alter`` does the same."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from pykraft.cli import main
from pykraft.testing import RunningNode

pytestmark = pytest.mark.slow

TOPIC = "grows"


def _grow(
    admin: AdminClient, topic: str, count: int, *, validate_only: bool = False, **new_partitions: Any
) -> None:
    futures = admin.create_partitions(
        [NewPartitions(topic, count, **new_partitions)], validate_only=validate_only
    )
    futures[topic].result(timeout=30)


def _refusal(admin: AdminClient, topic: str, count: int, **new_partitions: Any) -> KafkaError:
    future = admin.create_partitions([NewPartitions(topic, count, **new_partitions)])[topic]
    with pytest.raises(KafkaException) as excinfo:
        future.result(timeout=30)
    error: KafkaError = excinfo.value.args[0]
    return error


def _partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def _read(
    bootstrap: str, partitions: list[int], count: int, timeout_s: float = 30.0
) -> dict[int, list[bytes]]:
    """Every record of ``partitions`` until ``count`` arrived (a deadline, not a sleep, bounds the wait)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "create-partitions", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in partitions])
    seen: dict[int, list[bytes]] = {p: [] for p in partitions}
    deadline = time.monotonic() + timeout_s
    try:
        while sum(len(v) for v in seen.values()) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=1.0):
                assert msg.error() is None, msg.error()
                seen[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    return seen


def test_admin_grows_a_topic_and_clients_use_the_new_partitions(pykraft_node: RunningNode) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=3)])[TOPIC].result(timeout=30)

    # validate_only answers as the real request would and adds nothing.
    _grow(admin, TOPIC, 6, validate_only=True)
    assert _partition_count(admin, TOPIC) == 3

    _grow(admin, TOPIC, 6)
    # Answered once the node's image has them: the very next Metadata lists six, each led by the node.
    partitions = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    assert sorted(partitions) == [0, 1, 2, 3, 4, 5]
    assert {p.leader for p in partitions.values()} == {1}

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))

    for partition in (3, 4, 5):
        for i in range(5):
            producer.produce(
                TOPIC, value=f"p{partition}-{i}".encode(), partition=partition, on_delivery=on_delivery
            )
    assert producer.flush(30) == 0
    assert sorted(delivered) == [(p, i) for p in (3, 4, 5) for i in range(5)]

    seen = _read(bootstrap, [3, 4, 5], 15)
    assert seen == {p: [f"p{p}-{i}".encode() for i in range(5)] for p in (3, 4, 5)}


def test_admin_refusals_keep_kafkas_codes_and_messages(pykraft_node: RunningNode) -> None:
    admin = AdminClient({"bootstrap.servers": pykraft_node.bootstrap_servers})
    admin.create_topics([NewTopic("fixed", num_partitions=4)])["fixed"].result(timeout=30)

    shrink = _refusal(admin, "fixed", 2)
    assert shrink.code() == KafkaError.INVALID_PARTITIONS
    assert "The topic fixed currently has 4 partition(s); 2 would not be an increase." in shrink.str()
    same = _refusal(admin, "fixed", 4)
    assert same.code() == KafkaError.INVALID_PARTITIONS
    assert "Topic already has 4 partition(s)." in same.str()

    assert _refusal(admin, "no-such-topic", 2).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    unknown_broker = _refusal(admin, "fixed", 5, replica_assignment=[[7]])
    assert unknown_broker.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "includes broker 7, but no such broker is registered" in unknown_broker.str()
    too_few = _refusal(admin, "fixed", 6, replica_assignment=[[1]])
    assert too_few.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "Attempted to add 2 additional partition(s), but only 1 assignment(s)" in too_few.str()

    assert _partition_count(admin, "fixed") == 4
    # A manual assignment on the node's own broker id is served.
    _grow(admin, "fixed", 5, replica_assignment=[[1]])
    assert _partition_count(admin, "fixed") == 5


def test_pykraft_topics_alter_agrees_with_the_admin_client(pykraft_node: RunningNode, capsys: Any) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("orders", num_partitions=2)])["orders"].result(timeout=30)

    # kafka-topics' own form; success prints nothing, as kafka-topics does.
    assert (
        main(["topics", "--alter", "--topic", "orders", "--partitions", "4", "--bootstrap-server", bootstrap])
        == 0
    )
    assert capsys.readouterr() == ("", "")
    assert _partition_count(admin, "orders") == 4
    assert main(["topics", "--bootstrap-server", bootstrap, "describe", "--topic", "orders"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("PartitionCount: 4\tReplicationFactor: 1")
    assert [line.split("\t")[2] for line in lines[1:]] == [f"Partition: {p}" for p in range(4)]

    # The subcommand form; --replica-assignment lists every partition, the existing ones first.
    alter = ["topics", "--bootstrap-server", bootstrap, "alter", "--topic", "orders"]
    assert main([*alter, "--partitions", "5", "--replica-assignment", "1,1,1,1,1"]) == 0
    assert _partition_count(admin, "orders") == 5

    refusals = {
        "3": "pykraft topics: topic orders: INVALID_PARTITIONS: The topic orders currently has 5 partition(s); 3 "
        "would not be an increase.",
        "5": "pykraft topics: topic orders: INVALID_PARTITIONS: Topic already has 5 partition(s).",
    }
    for count, line in refusals.items():
        assert main([*alter, "--partitions", count]) == 1
        assert capsys.readouterr().err.strip() == line
    assert main([*alter, "--partitions", "6", "--replica-assignment", "1,1,1,1,1,7"]) == 1
    assert capsys.readouterr().err.strip() == (
        "pykraft topics: topic orders: INVALID_REPLICA_ASSIGNMENT: The manual partition assignment includes "
        "broker 7, but no such broker is registered."
    )
    assert main([*alter, "--partitions", "6", "--replica-assignment", "1,x"]) == 1
    assert "--replica-assignment: '1,x' is not a list like 1:2,2:3" in capsys.readouterr().err
    assert (
        main(["topics", "--alter", "--topic", "nope", "--partitions", "2", "--bootstrap-server", bootstrap])
        == 1
    )
    assert capsys.readouterr().err.strip() == "pykraft topics: topic nope: UNKNOWN_TOPIC_OR_PARTITION"
    assert main(["topics", "--alter", "--topic", "orders", "--bootstrap-server", bootstrap]) == 1
    assert capsys.readouterr().err.strip() == "pykraft topics: --alter needs --topic and --partitions"
    with pytest.raises(SystemExit):
        main(["topics", "--bootstrap-server", bootstrap])
    assert "--alter" in capsys.readouterr().err
    assert _partition_count(admin, "orders") == 5
