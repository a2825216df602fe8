"""The pykraft Spark source: batch and streaming reads against an in-process node."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from pykraft.testing import RunningNode, running_node
from tests.spark.helpers import create_topic, produce


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node() as n:
        yield n


def _reader(spark: Any, node: RunningNode, topic: str, **options: str) -> Any:
    r = spark.read.format("pykraft").option("kafka.bootstrap.servers", node.bootstrap_servers)
    r = r.option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_of_100k_records_equals_what_was_produced(spark: Any, node: RunningNode) -> None:
    topic = "read100k"
    create_topic(node.bootstrap_servers, topic, 2)
    records = [
        (
            None if i % 97 == 0 else f"k{i}".encode(),
            os.urandom(8) + f"value-{i}".encode(),
            i % 2,
            [("n", str(i).encode()), ("null", None)] if i % 1000 == 0 else None,
        )
        for i in range(100_000)
    ]
    produce(node.bootstrap_servers, topic, records)  # type: ignore[arg-type]
    # 64 KiB fetches: each task pipelines dozens of fetches through one reused receive buffer.
    df = _reader(
        spark,
        node,
        topic,
        includeHeaders="true",
        includeProducerInfo="true",
        minPartitions="4",
        fetchMaxBytes="65536",
    )
    assert df.columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
        "producerId",
        "producerEpoch",
        "sequence",
    ]
    assert df.rdd.getNumPartitions() == 4  # 2 topic partitions split to honour minPartitions
    rows = df.collect()
    assert len(rows) == 100_000
    got = sorted((r.partition, r.offset, r.key, r.value) for r in rows)
    want_by_partition: dict[int, list[tuple[bytes | None, bytes]]] = {0: [], 1: []}
    for key, value, partition, _headers in records:
        want_by_partition[partition].append((key, value))
    want = sorted((p, o, k, v) for p, kvs in want_by_partition.items() for o, (k, v) in enumerate(kvs))
    assert got == want
    by_offset = {(r.partition, r.offset): r for r in rows}
    first = by_offset[(0, 0)]
    assert [(h.key, h.value) for h in first.headers] == [("n", b"0"), ("null", None)]
    assert by_offset[(1, 0)].headers is None  # as Spark's format("kafka") has it
    assert {r.topic for r in rows} == {topic} and {r.timestampType for r in rows} == {0}
    # One idempotent producer: sequences per partition run 0..n-1 with the offsets.
    assert all(r.producerId >= 0 and r.producerEpoch == 0 and r.sequence == r.offset for r in rows)


def test_offset_ranges_and_partition_selection(spark: Any, node: RunningNode) -> None:
    topic = "ranges"
    create_topic(node.bootstrap_servers, topic, 3)
    produce(
        node.bootstrap_servers,
        topic,
        [(None, f"{p}-{i}".encode(), p, None) for p in range(3) for i in range(10)],
    )
    df = (
        spark.read.format("pykraft")
        .option("kafka.bootstrap.servers", node.bootstrap_servers)
        .option("assign", f'{{"{topic}":[0,2]}}')
        .option("startingOffsets", f'{{"{topic}":{{"0":3,"2":-2}}}}')
        .option("endingOffsets", f'{{"{topic}":{{"0":5,"2":-1}}}}')
        .load()
    )
    got = sorted((r.partition, r.offset, r.value) for r in df.collect())
    assert got == [(0, 3, b"0-3"), (0, 4, b"0-4")] + [(2, i, f"2-{i}".encode()) for i in range(10)]
    pattern = spark.read.format("pykraft").option("kafka.bootstrap.servers", node.bootstrap_servers)
    assert pattern.option("subscribePattern", "rang.*").load().count() == 30
    # An empty topic is an empty DataFrame (PySpark hands read() a placeholder partition then).
    create_topic(node.bootstrap_servers, "ranges-empty", 2)
    assert _reader(spark, node, "ranges-empty").count() == 0


def test_fail_on_data_loss(spark: Any, node: RunningNode) -> None:
    topic = "dataloss"
    create_topic(node.bootstrap_servers, topic, 1)
    produce(node.bootstrap_servers, topic, [(None, f"v{i}".encode(), 0, None) for i in range(20)])
    admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
    for fut in admin.delete_records([TopicPartition(topic, 0, 12)]).values():
        fut.result(timeout=30)
    start = f'{{"{topic}":{{"0":5}}}}'
    with pytest.raises(Exception, match="offset 5 is below the log start offset 12") as info:
        _reader(spark, node, topic, startingOffsets=start).collect()
    assert "failOnDataLoss=false" in str(info.value)
    rows = _reader(spark, node, topic, startingOffsets=start, failOnDataLoss="false").collect()
    assert sorted(r.offset for r in rows) == list(range(12, 20))


def test_bad_options_fail_with_the_option_named(spark: Any, node: RunningNode) -> None:
    def base() -> Any:  # a DataFrameReader is mutable: a fresh one per query
        return spark.read.format("pykraft").option("kafka.bootstrap.servers", node.bootstrap_servers)

    with pytest.raises(Exception, match="exactly one of the options subscribe, subscribePattern, assign"):
        base().load().collect()
    with pytest.raises(Exception, match="option startingOffsets: 'soon' is not earliest, latest or JSON"):
        base().option("subscribe", "ranges").option("startingOffsets", "soon").load().collect()
    with pytest.raises(Exception, match="topic nosuch: broker answered UNKNOWN_TOPIC_OR_PARTITION"):
        base().option("subscribe", "nosuch").load().collect()
    # Reading did not create it (Metadata with allow_auto_topic_creation=false).
    assert (
        "nosuch"
        not in AdminClient({"bootstrap.servers": node.bootstrap_servers}).list_topics(timeout=10).topics
    )
    with pytest.raises(Exception, match="option maxOffsetsPerTrigger: 'lots' is not an integer"):
        (
            spark.readStream.format("pykraft")
            .option("kafka.bootstrap.servers", node.bootstrap_servers)
            .option("subscribe", "ranges")
            .option("maxOffsetsPerTrigger", "lots")
            .load()
            .writeStream.format("noop")
            .start()
            .awaitTermination()
        )


def _stream(spark: Any, node: RunningNode, topic: str, out: str, ckpt: str, **options: str) -> Any:
    r = (
        spark.readStream.format("pykraft")
        .option("kafka.bootstrap.servers", node.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        r = r.option(k, v)
    q = (
        r.load()
        .select("partition", "offset", "value")
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", ckpt)
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    return q


def test_streaming_available_now_resumes_from_the_checkpoint(
    spark: Any, node: RunningNode, tmp_path: Any
) -> None:
    topic = "stream-resume"
    create_topic(node.bootstrap_servers, topic, 2)
    produce(node.bootstrap_servers, topic, [(None, f"a{i}".encode(), i % 2, None) for i in range(500)])
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")
    q1 = _stream(spark, node, topic, out, ckpt)
    assert sum(p["numInputRows"] for p in q1.recentProgress) == 500
    produce(node.bootstrap_servers, topic, [(None, f"b{i}".encode(), i % 2, None) for i in range(300)])
    q2 = _stream(spark, node, topic, out, ckpt)
    # The restarted query reads only the 300 new records.
    assert sum(p["numInputRows"] for p in q2.recentProgress) == 300
    rows = spark.read.parquet(out).collect()
    assert len(rows) == 800 and len({(r.partition, r.offset) for r in rows}) == 800
    assert sorted(r.value for r in rows) == sorted(
        [f"a{i}".encode() for i in range(500)] + [f"b{i}".encode() for i in range(300)]
    )
    q3 = _stream(spark, node, topic, out, ckpt)
    assert sum(p["numInputRows"] for p in q3.recentProgress) == 0


def test_max_offsets_per_trigger_bounds_each_batch(spark: Any, node: RunningNode, tmp_path: Any) -> None:
    topic = "stream-limit"
    create_topic(node.bootstrap_servers, topic, 2)
    produce(node.bootstrap_servers, topic, [(None, f"v{i}".encode(), i % 2, None) for i in range(1000)])
    q = _stream(spark, node, topic, str(tmp_path / "out"), str(tmp_path / "ckpt"), maxOffsetsPerTrigger="300")
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes == [300, 300, 300, 100]
    assert spark.read.parquet(str(tmp_path / "out")).count() == 1000
