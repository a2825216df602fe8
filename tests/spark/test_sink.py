"""The pykraft Spark sink: batch and streaming writes, errors, and what a retried task leaves."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from pykraft.testing import RunningNode, running_node
from tests.spark.helpers import consume_all, create_topic, produce


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node() as n:
        yield n


def test_batch_write_lands_byte_exact(spark: Any, node: RunningNode) -> None:
    topic = "sink-batch"
    create_topic(node.bootstrap_servers, topic, 3)
    rows = [
        (
            None if i % 50 == 0 else os.urandom(16),
            os.urandom(i % 300) + b"\x00\xff",
            i % 3,
            [{"key": "h", "value": os.urandom(4)}, {"key": "empty", "value": None}] if i % 7 == 0 else [],
        )
        for i in range(3000)
    ]
    df = spark.createDataFrame(
        rows, "key binary, value binary, partition int, headers array<struct<key:string,value:binary>>"
    ).repartition(2)
    df.write.format("pykraft").option("kafka.bootstrap.servers", node.bootstrap_servers).option(
        "topic", topic
    ).mode("append").save()
    got = consume_all(node.bootstrap_servers, topic, 3)
    want = Counter((p, k, v, tuple((h["key"], h["value"]) for h in hs)) for k, v, p, hs in rows)
    assert Counter((p, k, v, tuple(h)) for p, _o, k, v, h in got) == want


def test_streaming_write_copies_a_topic_byte_exact(spark: Any, node: RunningNode, tmp_path: Any) -> None:
    src, dst = "sink-src", "sink-dst"
    create_topic(node.bootstrap_servers, src, 2)
    create_topic(node.bootstrap_servers, dst, 2)
    produce(node.bootstrap_servers, src, [(os.urandom(8), os.urandom(100), i % 2, None) for i in range(2000)])
    q = (
        spark.readStream.format("pykraft")
        .option("kafka.bootstrap.servers", node.bootstrap_servers)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "700")
        .load()
        .selectExpr("key", "value", "partition")
        .writeStream.format("pykraft")
        .option("kafka.bootstrap.servers", node.bootstrap_servers)
        .option("topic", dst)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    assert len([p for p in q.recentProgress if p["numInputRows"]]) == 3
    source = consume_all(node.bootstrap_servers, src, 2)
    copied = consume_all(node.bootstrap_servers, dst, 2)
    # Per partition, the same records in the same order.
    assert sorted((p, o, k, v) for p, o, k, v, _h in copied) == sorted(
        (p, o, k, v) for p, o, k, v, _h in source
    )


def test_delivery_error_fails_the_task_with_the_broker_error_name(spark: Any) -> None:
    with running_node(overrides={"message.max.bytes": "2000"}) as small:
        create_topic(small.bootstrap_servers, "small", 1)
        df = spark.createDataFrame([(b"x" * 5000,)], "value binary")
        with pytest.raises(Exception, match="MESSAGE_TOO_LARGE"):
            df.write.format("pykraft").option("kafka.bootstrap.servers", small.bootstrap_servers).option(
                "topic", "small"
            ).mode("append").save()
    with pytest.raises(Exception, match="option kafka.bootstrap.servers is required"):
        df.write.format("pykraft").option("topic", "small").mode("append").save()


def test_a_retried_task_leaves_its_failed_attempt_records_behind(spark: Any, node: RunningNode) -> None:
    """At-least-once, as Spark's Kafka sink: the failed attempt's delivered prefix stays, the retry
    writes its whole partition again; nothing is lost and only the failed task's rows repeat."""
    from pyspark.sql.functions import udf

    topic = "sink-retry"
    create_topic(node.bootstrap_servers, topic, 1)

    @udf("binary", useArrow=False)
    def fail_first_attempt(v: bytes) -> bytes:
        from pyspark import TaskContext

        if v == b"v-19000" and TaskContext.get().attemptNumber() == 0:  # type: ignore[union-attr]
            raise RuntimeError("forced failure")
        return v

    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        df = spark.range(0, 20000, 1, 2).selectExpr("cast(concat('v-', id) as binary) as value")
        df.select(fail_first_attempt("value").alias("value")).write.format("pykraft").option(
            "kafka.bootstrap.servers", node.bootstrap_servers
        ).option("topic", topic).mode("append").save()
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
    counts = Counter(v for _p, _o, _k, v, _h in consume_all(node.bootstrap_servers, topic, 1))
    assert set(counts) == {f"v-{i}".encode() for i in range(20000)}  # nothing lost
    repeated = sorted(int(v[2:]) for v, c in counts.items() if c > 1)
    assert max(counts.values()) <= 2
    # Only rows of the failed task (ids 10000-19999), and only a prefix before the failing row, repeat.
    # (20000 rows: the writer gets its input in Arrow batches, so a tiny partition can fail before
    # its writer saw a row.)
    assert repeated, "the failed attempt delivered nothing before failing"
    assert min(repeated) >= 10000 and max(repeated) < 19000
    assert repeated == list(range(10000, 10000 + len(repeated)))
