"""kafka-python 3.0.12 against a real in-process pykraft node."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.slow


def test_idempotent_produce_and_assign_consume(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("kp", num_partitions=2, replication_factor=1)])
    assert "kp" in admin.list_topics()
    admin.close()

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5)
    count = 5000
    futures = [producer.send("kp", value=b"v%06d" % i, partition=i % 2) for i in range(count)]
    producer.flush(30)
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert sorted(offsets[0::2]) == list(range(count // 2))

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("kp", 0), TopicPartition("kp", 1)])
    consumer.seek_to_beginning()
    got = {0: [], 1: []}
    for msg in consumer:
        got[msg.partition].append(msg.value)
        if len(got[0]) + len(got[1]) == count:
            break
    consumer.close()
    assert got[0] == [b"v%06d" % i for i in range(0, count, 2)]
    assert got[1] == [b"v%06d" % i for i in range(1, count, 2)]


def test_check_version_reads_pykraft_as_the_newest_kafka_it_knows(pykraft_node) -> None:
    """kafka-python infers the broker's version from the highest ApiVersions entry it recognises
    (kafka/protocol/broker_version_data.py: 4.3 needs DescribeLogDirs v5, 3.8 Produce v11; 2.2's table
    tops out at 2.6 on DescribeClientQuotas v0); pykraft serves each of those for real."""
    from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

    admin = KafkaAdminClient(bootstrap_servers=pykraft_node.bootstrap_servers)
    try:
        assert admin._client.check_version() == max(BROKER_API_VERSIONS) == (4, 3)
    finally:
        admin.close()
