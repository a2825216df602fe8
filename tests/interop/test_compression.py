"""Topic compression.type applied (issue 27 item 4): topics in every compression.type take batches from
producers in every codec, store them in the topic's codec (Kafka's LogValidator recompresses on append),
and confluent-kafka, kafka-python and aiokafka read the same records at the same offsets. The broker's
own compression.type (server.properties) is the default of a topic without one, described as such."""

from __future__ import annotations

import asyncio
import glob
import os
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from pykraft.protocol import compression
from pykraft.protocol.records import scan_batches
from pykraft.testing import RunningNode, running_node
from tests.interop.cluster_support import wait_until

pytestmark = pytest.mark.slow

PRODUCER_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_PRODUCER = 30
# Topic -> its compression.type ("" = none of its own: the broker's, zstd here).
TOPICS = {f"c-{name}": name for name in (*compression.TOPIC_CODECS, "producer")} | {"c-default": ""}
Row = tuple[int, bytes | None, bytes | None]


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node(overrides={"compression.type": "zstd", "compression.zstd.level": "7"}) as running:
        yield running


def _produce(
    node: RunningNode, topics: list[str], codec: str, count: int, tag: str
) -> list[tuple[bytes, bytes]]:
    """``count`` records to each of ``topics`` from one idempotent confluent-kafka producer in ``codec``,
    in batches of 10; the (key, value) pairs each topic got, in order."""
    producer = Producer(
        {
            "bootstrap.servers": node.bootstrap_servers,
            "compression.type": codec,
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.num.messages": 10,
        }
    )
    sent = [
        (b"%s-%s-%d" % (tag.encode(), codec.encode(), i), b"value %d in %s; " % (i, codec.encode()) * 8)
        for i in range(count)
    ]
    errors: list[object] = []
    for topic in topics:
        for key, value in sent:
            producer.produce(topic, value, key=key, on_delivery=lambda err, _m: err and errors.append(err))
    assert producer.flush(30) == 0 and errors == []
    return sent


def _confluent(node: RunningNode, topic: str, count: int) -> list[Row]:
    consumer = Consumer(
        {"bootstrap.servers": node.bootstrap_servers, "group.id": "compression", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    rows: list[Row] = []
    deadline = time.monotonic() + 30
    while len(rows) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            rows.append((message.offset(), message.key(), message.value()))
    consumer.close()
    return rows


def _kafka_python(node: RunningNode, topic: str, count: int) -> list[Row]:
    consumer = KafkaConsumer(
        bootstrap_servers=node.bootstrap_servers, enable_auto_commit=False, consumer_timeout_ms=10000
    )
    consumer.assign([KpTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    rows: list[Row] = []
    for message in consumer:
        rows.append((message.offset, message.key, message.value))
        if len(rows) == count:
            break
    consumer.close()
    return rows


def _aiokafka(node: RunningNode, topic: str, count: int) -> list[Row]:
    async def run() -> list[Row]:
        consumer = AIOKafkaConsumer(bootstrap_servers=node.bootstrap_servers, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            rows: list[Row] = []
            while len(rows) < count:
                batches = await consumer.getmany(tp, timeout_ms=10000)
                if not batches:
                    break
                rows.extend((m.offset, m.key, m.value) for m in batches[tp])
            return rows
        finally:
            await consumer.stop()

    return asyncio.run(run())


def _stored_codecs(node: RunningNode, topic: str) -> list[int]:
    """The codec of every batch in the partition's segment files, in offset order."""
    codecs: list[int] = []
    for path in sorted(glob.glob(os.path.join(node.data_dir, f"{topic}-0", "*.log"))):
        with open(path, "rb") as segment:
            data = segment.read()
        codecs.extend(header.compression_type for _pos, header in scan_batches(data))
    return codecs


def test_every_compression_type_stores_its_codec_and_three_clients_read_it_back(node: RunningNode) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
    new = [
        NewTopic(topic, 1, 1, config={"compression.type": ct} if ct else {}) for topic, ct in TOPICS.items()
    ]
    for future in admin.create_topics(new).values():
        future.result(30)
    sent = [pair for codec in PRODUCER_CODECS for pair in _produce(node, [*TOPICS], codec, PER_PRODUCER, "c")]
    want = [(offset, key, value) for offset, (key, value) in enumerate(sent)]
    for topic, compression_type in TOPICS.items():
        assert _confluent(node, topic, len(want)) == want, topic
        assert _kafka_python(node, topic, len(want)) == want, topic
        assert _aiokafka(node, topic, len(want)) == want, topic
        codecs = _stored_codecs(node, topic)
        assert len(codecs) >= len(PRODUCER_CODECS), codecs
        if compression_type == "producer":
            # Each producer's batches as it sent them, in the order they came.
            named = [compression.CODEC_NAMES[c] for c in codecs]
            assert sorted(set(named), key=named.index) == ["none", "gzip", "snappy", "lz4", "zstd"], named
        else:
            assert set(codecs) == {compression.TOPIC_CODECS[compression_type or "zstd"]}, (topic, codecs)
    # The broker's compression.type is the default of a topic without one, and says where it is from.
    resource = ConfigResource(ConfigResource.Type.TOPIC, "c-default")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["compression.type"].value == "zstd"
    assert configs["compression.type"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["compression.zstd.level"].value == "7"
    assert configs["compression.gzip.level"].value == "-1"
    assert configs["compression.gzip.level"].source == ConfigSource.DEFAULT_CONFIG.value
    resource = ConfigResource(ConfigResource.Type.TOPIC, "c-gzip")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["compression.type"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    broker = ConfigResource(ConfigResource.Type.BROKER, str(node.config.node_id))
    assert admin.describe_configs([broker])[broker].result(30)["compression.type"].value == "zstd"


def test_compression_type_altered_at_runtime_applies_to_the_next_batches(node: RunningNode) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
    admin.create_topics([NewTopic("c-altered", 1, 1, config={"compression.type": "uncompressed"})])[
        "c-altered"
    ].result(30)
    first = _produce(node, ["c-altered"], "lz4", 10, "before")
    entry = ConfigEntry("compression.type", "snappy", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "c-altered", incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(30)
    described = ConfigResource(ConfigResource.Type.TOPIC, "c-altered")
    wait_until(
        lambda: (
            admin.describe_configs([described])[described].result(30)["compression.type"].value == "snappy"
        ),
        10,
        "the new compression.type",
    )
    then = _produce(node, ["c-altered"], "gzip", 10, "after")
    codecs = _stored_codecs(node, "c-altered")
    assert codecs[0] == compression.NONE and codecs[-1] == compression.SNAPPY, codecs
    assert set(codecs) == {compression.NONE, compression.SNAPPY}, codecs
    want = [(offset, key, value) for offset, (key, value) in enumerate(first + then)]
    assert _kafka_python(node, "c-altered", len(want)) == want
