"""The sink's exactly-once mode: every task's first attempt fails after its records are committed and
Spark retries it. exactlyOnce=true leaves every row once (the retry finds its batch's marker and writes
nothing); the at-least-once mode, same run, repeats the retried tasks' rows; eos-verify and eos-demo say
so. Streaming: a micro-batch replayed after a lost commit log entry writes nothing again."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from pykraft.cli import main
from pykraft.spark.pipelines import load_topic, run_eos_verify
from pykraft.testing import RunningNode, running_node
from tests.spark.helpers import create_topic, produce

ROWS = 2000


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node() as n:
        yield n


def _write(spark: Any, node: RunningNode, topic: str, tmp_path: Any, *, exactly_once: bool) -> None:
    create_topic(node.bootstrap_servers, topic, 2)
    df = spark.range(0, ROWS, 1, 3).selectExpr("cast(concat('row-', id) as binary) as value")
    df.write.format("pykraft").option("kafka.bootstrap.servers", node.bootstrap_servers).option(
        "topic", topic
    ).option("exactlyOnce", str(exactly_once).lower()).option("queryName", topic).option(
        "simulateFailureAfterCommit", str(tmp_path / f"failed-{topic}")
    ).mode("append").save()
    assert len(os.listdir(tmp_path / f"failed-{topic}")) == 3  # every task failed once, after commit


def _values(spark: Any, node: RunningNode, topic: str) -> Counter[bytes]:
    df = load_topic(spark, topic, bootstrap=node.bootstrap_servers, isolation_level="read_committed")
    return Counter(bytes(r.value) for r in df.select("value").collect())


def test_exactly_once_leaves_every_row_once_and_at_least_once_repeats(
    spark: Any, node: RunningNode, tmp_path: Any
) -> None:
    _write(spark, node, "eos-once", tmp_path, exactly_once=True)
    _write(spark, node, "eos-alo", tmp_path, exactly_once=False)
    want = {f"row-{i}".encode() for i in range(ROWS)}
    once = _values(spark, node, "eos-once")
    assert set(once) == want and max(once.values()) == 1
    alo = _values(spark, node, "eos-alo")
    assert set(alo) == want and max(alo.values()) == 2  # every retried task's rows twice
    expected = tmp_path / "expected.txt"
    expected.write_text("".join(f"row-{i}\n" for i in range(ROWS)))
    clean = run_eos_verify(
        spark, load_topic(spark, "eos-once", bootstrap=node.bootstrap_servers), str(expected)
    )
    assert clean.violations == []
    dirty = run_eos_verify(
        spark, load_topic(spark, "eos-alo", bootstrap=node.bootstrap_servers), str(expected)
    )
    assert any("more than once" in v for v in dirty.violations), dirty.violations


def test_read_committed_source_skips_aborted_transactions(spark: Any, node: RunningNode) -> None:
    from confluent_kafka import Producer

    topic = "eos-aborted"
    create_topic(node.bootstrap_servers, topic, 1)
    producer = Producer({"bootstrap.servers": node.bootstrap_servers, "transactional.id": "eos-aborted-1"})
    producer.init_transactions(30)
    for round_ in range(4):
        producer.begin_transaction()
        for i in range(50):
            producer.produce(topic, b"r%d-%d" % (round_, i), partition=0)
        assert producer.flush(30) == 0
        if round_ % 2:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    committed = load_topic(spark, topic, bootstrap=node.bootstrap_servers, isolation_level="read_committed")
    got = [bytes(r.value) for r in committed.orderBy("offset").select("value").collect()]
    assert got == [b"r%d-%d" % (r, i) for r in (0, 2) for i in range(50)]
    uncommitted = load_topic(spark, topic, bootstrap=node.bootstrap_servers)
    assert uncommitted.count() == 200


def test_a_replayed_streaming_batch_writes_nothing_again(
    spark: Any, node: RunningNode, tmp_path: Any
) -> None:
    src, dst = "eos-stream-src", "eos-stream-dst"
    create_topic(node.bootstrap_servers, src, 2)
    create_topic(node.bootstrap_servers, dst, 2)
    produce(node.bootstrap_servers, src, [(None, b"s-%d" % i, i % 2, None) for i in range(300)])
    checkpoint = tmp_path / "ckpt"

    def run() -> None:
        q = (
            spark.readStream.format("pykraft")
            .option("kafka.bootstrap.servers", node.bootstrap_servers)
            .option("subscribe", src)
            .option("startingOffsets", "earliest")
            .load()
            .select("value")
            .writeStream.format("pykraft")
            .option("kafka.bootstrap.servers", node.bootstrap_servers)
            .option("topic", dst)
            .option("exactlyOnce", "true")
            .option("queryName", "eos-stream")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()

    run()
    assert sorted(_values(spark, node, dst).values()) == [1] * 300
    # The sink's work for the last batch is in Kafka but Spark forgets it finished (a crash between
    # the sink's commit and the commit log write): the restarted query replays the batch.
    commits = checkpoint / "commits"
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    os.remove(commits / str(last))
    shutil.rmtree(commits / f".{last}.crc", ignore_errors=True)
    if (commits / f".{last}.crc").exists():
        os.remove(commits / f".{last}.crc")
    run()
    values = _values(spark, node, dst)
    assert len(values) == 300 and max(values.values()) == 1


def test_eos_demo_command(spark: Any, node: RunningNode, tmp_path: Any, capsys: Any) -> None:
    out = str(tmp_path / "demo")
    assert (
        main(
            [
                "pipeline",
                "eos-demo",
                "--bootstrap-server",
                node.bootstrap_servers,
                "--rows",
                "500",
                "--out",
                out,
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "exactly-once" in text and "at-least-once" in text and "OK:" in text


def test_exactly_once_needs_a_query_name_and_a_topic(spark: Any, node: RunningNode) -> None:
    df = spark.createDataFrame([(b"x",)], "value binary")
    with pytest.raises(Exception, match="queryName"):
        df.write.format("pykraft").option("kafka.bootstrap.servers", node.bootstrap_servers).option(
            "topic", "eos-once"
        ).option("exactlyOnce", "true").mode("append").save()
    with pytest.raises(Exception, match="kafka.isolation.level"):
        spark.read.format("pykraft").option("kafka.bootstrap.servers", node.bootstrap_servers).option(
            "subscribe", "eos-once"
        ).option("kafka.isolation.level", "sometimes").load().count()
