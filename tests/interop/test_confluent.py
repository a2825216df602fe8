"""confluent-kafka (librdkafka) against a real in-process pykraft node."""

from __future__ import annotations

import hashlib
import random
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.slow


def _value(i: int, size: int = 1024) -> bytes:
    seed = hashlib.sha256(i.to_bytes(8, "big")).digest()
    return (seed * (size // len(seed) + 1))[:size]


def consume_all(bootstrap: str, topic: str, partition: int, count: int, timeout_s: float = 60.0) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "pykraft-test",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10000, timeout=1.0):
                if msg.error():
                    raise AssertionError(f"consumer error: {msg.error()}")
                out.append(msg)
    finally:
        consumer.close()
    return out


def test_idempotent_producer_100k_then_assign_consumer_reads_all_in_order(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    topic = "auto-created-100k"
    count = 100_000
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1000000,
        }
    )
    errors: list = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(err)

    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=_value(i), key=str(i).encode(), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []

    messages = consume_all(bootstrap, topic, 0, count)
    assert len(messages) == count
    for i, msg in enumerate(messages):
        assert msg.offset() == i
        assert msg.key() == str(i).encode()
        assert msg.value() == _value(i)


def test_admin_create_list_delete_topics(pykraft_node) -> None:
    admin = AdminClient({"bootstrap.servers": pykraft_node.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic("admin-a", num_partitions=3), NewTopic("admin-b", num_partitions=1)]
    )
    for fut in futures.values():
        fut.result(timeout=30)
    topics = admin.list_topics(timeout=10).topics
    assert {"admin-a", "admin-b"} <= set(topics)
    assert len(topics["admin-a"].partitions) == 3

    again = admin.create_topics([NewTopic("admin-a", num_partitions=1)])
    with pytest.raises(Exception) as excinfo:
        again["admin-a"].result(timeout=30)
    assert excinfo.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    bad = admin.create_topics([NewTopic("bad/name", num_partitions=1)])
    with pytest.raises(Exception) as excinfo:
        bad["bad/name"].result(timeout=30)
    assert excinfo.value.args[0].code() == KafkaError.TOPIC_EXCEPTION

    for fut in admin.delete_topics(["admin-a"]).values():
        fut.result(timeout=30)
    deadline = time.monotonic() + 10
    while "admin-a" in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "admin-a" not in admin.list_topics(timeout=10).topics
    assert "admin-b" in admin.list_topics(timeout=10).topics


def test_watermarks_and_offsets_for_times(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
    base_ts = 1_700_000_000_000
    for i in range(10):
        producer.produce("times", value=b"x%d" % i, timestamp=base_ts + i * 1000)
        producer.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("times", 0), timeout=10)
        assert (low, high) == (0, 10)
        found = consumer.offsets_for_times([TopicPartition("times", 0, base_ts + 4500)], timeout=10)
        assert found[0].offset == 5
        beyond = consumer.offsets_for_times([TopicPartition("times", 0, base_ts + 999_999)], timeout=10)
        assert beyond[0].offset == -1
    finally:
        consumer.close()


def test_random_sized_batches_round_trip(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    rng = random.Random(7)
    values = [rng.randbytes(rng.randint(0, 20000)) for _ in range(2000)]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for v in values:
        producer.produce("random-sizes", value=v)
    assert producer.flush(30) == 0
    got = [m.value() for m in consume_all(bootstrap, "random-sizes", 0, len(values))]
    assert got == [v if v else None for v in values] or got == values
