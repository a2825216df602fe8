"""Producing and consuming test data with confluent-kafka (an independent client to check against)."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=30)


def produce(
    bootstrap: str,
    topic: str,
    records: list[tuple[bytes | None, bytes, int | None, list[tuple[str, bytes]] | None]],
    **config: Any,
) -> None:
    """records: (key, value, partition or None, headers or None); idempotent, acks=all."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **config}
    )
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for key, value, partition, headers in records:
        kwargs: dict[str, Any] = {"on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                producer.produce(topic, value, key, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert not errors, errors


def consume_all(
    bootstrap: str, topic: str, partitions: int
) -> list[tuple[int, int, bytes | None, bytes, list[Any]]]:
    """Every record of ``topic`` as (partition, offset, key, value, headers), read to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "check",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    eof: set[int] = set()
    _low_high = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)
    }
    eof = {p for p, (lo, hi) in _low_high.items() if hi <= lo}
    while len(eof) < partitions:
        msg = consumer.poll(10)
        assert msg is not None, "consumer timed out"
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                eof.add(msg.partition())
                continue
            raise AssertionError(msg.error())
        out.append((msg.partition(), msg.offset(), msg.key(), msg.value(), list(msg.headers() or [])))
    consumer.close()
    return out
