"""Spark's own Kafka connector, ``format("kafka")`` (spark-sql-kafka-0-10, Kafka's Java consumer,
producer and admin client), against one pykraft node (issue 33 item 4): batch read of every column,
batch write with keys, headers and partitions, and a streaming copy with a checkpoint, each checked
against what pykraft's own ``format("pykraft")`` reads.

The connector's jars come from Maven Central through tests/spark/connector/pom.xml (cached in ~/.m2
and target/lib, as the Java client tests) and join the shared session with ``ADD JAR``, so no second
JVM starts. Maven Central has no connector for PySpark 4.3.0; its 4.2.0 links against 4.3.0."""

from __future__ import annotations

import glob
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from pykraft.testing import RunningNode, running_node
from tests.interop.maven_build import maven_classpath
from tests.spark.helpers import create_topic, produce

CONNECTOR = Path(__file__).parent / "connector"


def connector_jars() -> list[str]:
    """The connector's jars, built (downloaded) once into tests/spark/connector/target/lib."""
    lib = maven_classpath(CONNECTOR).rsplit(":", 1)[1].removesuffix("/*")
    return sorted(glob.glob(f"{lib}/*.jar"))


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node() as n:
        yield n


@pytest.fixture(scope="module")
def kafka_spark(spark: Any) -> Any:
    for jar in connector_jars():
        spark.sql(f"ADD JAR '{jar}'")
    return spark


def _read(spark: Any, fmt: str, node: RunningNode, topic: str, **options: str) -> Any:
    reader = spark.read.format(fmt).option("kafka.bootstrap.servers", node.bootstrap_servers)
    for k, v in {"subscribe": topic, **options}.items():
        reader = reader.option(k, v)
    return reader.load()


_COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]


def _rows(df: Any) -> list[tuple[Any, ...]]:
    """Every column the two sources share, as plain tuples, in (partition, offset) order."""
    out = []
    for r in df.select(*_COLUMNS).collect():
        headers = None if r.headers is None else [(h.key, h.value) for h in r.headers]
        out.append((r.partition, r.offset, r.key, r.value, r.topic, r.timestamp, r.timestampType, headers))
    return sorted(out, key=lambda row: (row[0], row[1]))


def test_batch_read_of_every_column_equals_pykraft_source(kafka_spark: Any, node: RunningNode) -> None:
    topic = "connector-read"
    create_topic(node.bootstrap_servers, topic, 2)
    records = [
        (
            None if i % 7 == 0 else f"k{i}".encode(),
            f"value-{i}".encode(),
            i % 2,
            [("n", str(i).encode()), ("null", None)] if i % 5 == 0 else None,
        )
        for i in range(200)
    ]
    produce(node.bootstrap_servers, topic, records)  # type: ignore[arg-type]
    kafka = _read(kafka_spark, "kafka", node, topic, includeHeaders="true")
    assert kafka.columns == _COLUMNS
    got = _rows(kafka)
    assert len(got) == 200
    assert got == _rows(_read(kafka_spark, "pykraft", node, topic, includeHeaders="true"))
    first = got[0]  # partition 0, offset 0 is record 0
    assert first[:5] == (0, 0, None, b"value-0", topic)
    assert first[7] == [("n", b"0"), ("null", None)]
    # Offset ranges: the Java consumer's ListOffsets for -2/-1 and explicit offsets per partition.
    ranges = {
        "startingOffsets": f'{{"{topic}":{{"0":10,"1":-2}}}}',
        "endingOffsets": f'{{"{topic}":{{"0":20,"1":-1}}}}',
        "includeHeaders": "true",
    }
    ranged = _rows(_read(kafka_spark, "kafka", node, topic, **ranges))
    assert [(p, o) for p, o, *_ in ranged] == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(100)]
    assert ranged == _rows(_read(kafka_spark, "pykraft", node, topic, **ranges))


def test_batch_write_with_keys_headers_and_partitions(kafka_spark: Any, node: RunningNode) -> None:
    topic = "connector-write"
    create_topic(node.bootstrap_servers, topic, 3)
    df = kafka_spark.createDataFrame(
        [(f"k{i}".encode(), f"v{i}".encode(), i % 3, [("i", str(i).encode())]) for i in range(60)],
        "key binary, value binary, partition int, headers array<struct<key:string,value:binary>>",
    )
    df.write.format("kafka").option("kafka.bootstrap.servers", node.bootstrap_servers).option(
        "topic", topic
    ).save()
    got = _rows(_read(kafka_spark, "pykraft", node, topic, includeHeaders="true"))
    assert sorted((p, k, v, h) for p, _o, k, v, _t, _ts, _tt, h in got) == sorted(
        (i % 3, f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())]) for i in range(60)
    )
    # Each partition's records got consecutive offsets from 0 (one Spark task per input partition).
    for partition in range(3):
        assert [o for p, o, *_ in got if p == partition] == list(range(20))
    assert got == _rows(_read(kafka_spark, "kafka", node, topic, includeHeaders="true"))


def test_timestamp_window_read(kafka_spark: Any, node: RunningNode) -> None:
    """startingTimestamp / endingTimestamp: the connector's admin client finds offsets with ListOffsets
    by timestamp (OffsetSpec.forTimestamp)."""
    topic = "connector-times"
    create_topic(node.bootstrap_servers, topic, 3)
    base_ms = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    producer = Producer({"bootstrap.servers": node.bootstrap_servers, "enable.idempotence": True})
    for i in range(60):
        producer.produce(topic, f"v{i}".encode(), partition=i % 3, timestamp=base_ms + i * 1000)
    assert producer.flush(30) == 0
    window = _read(
        kafka_spark,
        "kafka",
        node,
        topic,
        startingTimestamp=str(base_ms + 30_000),
        endingTimestamp=str(base_ms + 45_000),
    )
    rows = window.selectExpr("partition", "offset", "value", "unix_millis(timestamp) AS ms").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in range(3) for o in range(10, 15)]
    assert sorted((r.value, r.ms) for r in rows) == sorted(
        (f"v{i}".encode(), base_ms + i * 1000) for i in range(30, 45)
    )


def test_streaming_copy_with_checkpoint(kafka_spark: Any, node: RunningNode, tmp_path: Path) -> None:
    source, sink = "connector-stream-in", "connector-stream-out"
    create_topic(node.bootstrap_servers, source, 2)
    create_topic(node.bootstrap_servers, sink, 2)

    def run_copy() -> None:
        stream = (
            kafka_spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", node.bootstrap_servers)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .load()
            .selectExpr("key", "value", "headers", "partition")
        )
        query = (
            stream.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", node.bootstrap_servers)
            .option("topic", sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        assert query.exception() is None

    def produce_range(start: int, stop: int) -> None:
        produce(
            node.bootstrap_servers,
            source,
            [
                (f"k{i}".encode(), f"v{i}".encode(), i % 2, [("i", str(i).encode())])
                for i in range(start, stop)
            ],
        )

    def copied() -> list[tuple[Any, ...]]:
        rows = _rows(_read(kafka_spark, "pykraft", node, sink, includeHeaders="true"))
        return sorted((p, k, v, h) for p, _o, k, v, _t, _ts, _tt, h in rows)

    produce_range(0, 50)
    run_copy()
    produce_range(50, 80)
    run_copy()  # resumes from the checkpoint: the first 50 are not copied again
    want = sorted((i % 2, f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())]) for i in range(80))
    assert copied() == want
    in_rows = _rows(_read(kafka_spark, "kafka", node, source, includeHeaders="true"))
    assert sorted((p, k, v, h) for p, _o, k, v, _t, _ts, _tt, h in in_rows) == want
