"""Issue 28's done-when, on the 3 controller + 3 broker cluster: a Structured Streaming query (pykraft
source -> transformation -> exactly-once pykraft sink) keeps running while partition leaders are
killed -9 and restarted three times and a broker is stopped for longer than the session timeout;
afterwards ``pykraft pipeline eos-verify --isolation-level read_committed`` finds every input record
exactly once in the output. Before issue 28 the source asked a dead leader once and the query died
at planning with ``cannot reach broker``."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pykraft.cli import main
from pykraft.spark.client import connect_any, parse_bootstrap
from pykraft.testing import ProcessCluster
from tests.interop.cluster_support import three_by_three, wait_until

pytestmark = pytest.mark.slow

SESSION_TIMEOUT_MS = 3000
OVERRIDES = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "3000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
}
SRC, DST = "fo-src", "fo-dst"
PARTITIONS = 6
BEFORE, DURING = 3000, 3000  # records produced before the query starts, and while brokers die


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with three_by_three(tmp_path_factory, "spark-failover", OVERRIDES) as running:
        yield running


def _leaders(cluster: ProcessCluster) -> dict[int, int]:
    """Partition -> leader node id of SRC, by Metadata from a live broker."""
    live = [n.address for n in cluster.brokers.values() if n.alive]
    with connect_any(parse_bootstrap(",".join(live)), 5.0, None) as conn:
        topics, _ = conn.metadata([SRC])
    by_address = {("127.0.0.1", n.port): i for i, n in cluster.brokers.items()}
    return {p.partition: by_address[p.leader] for p in topics[SRC] if p.leader is not None}


def _fully_replicated(admin: AdminClient) -> bool:
    """Every partition of every topic (the internal ones too) has its three replicas in sync: the next
    kill leaves two, min.insync.replicas, so writes go on."""
    topics = admin.list_topics(timeout=5).topics
    return all(len(p.isrs) == 3 and p.leader >= 0 for t in topics.values() for p in t.partitions.values())


def _produce(bootstrap: str, first: int, count: int, pause_s: float = 0.0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    failures: list[Any] = []
    for i in range(first, first + count):
        producer.produce(
            SRC, b"in-%d" % i, partition=i % PARTITIONS, on_delivery=lambda e, m: e and failures.append(e)
        )
        if pause_s and i % 100 == 0:
            producer.poll(0)
            time.sleep(pause_s)
    assert producer.flush(120) == 0 and not failures, failures


@pytest.mark.timeout(900)
def test_a_streaming_query_survives_leader_kills_and_a_long_broker_outage_exactly_once(
    spark: Any, cluster: ProcessCluster, tmp_path: Any
) -> None:
    # Minutes, not seconds: six node processes and Spark's micro-batches share two cores, through
    # four outages that each wait for fencing (3 s) and for the ISR to fill again.
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in (SRC, DST):
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
    wait_until(lambda: set(_leaders(cluster).values()) == set(cluster.brokers), 30, "leaders on every broker")
    wait_until(lambda: _fully_replicated(admin), 60, "every ISR full")
    _produce(bootstrap, 0, BEFORE)

    query = (
        spark.readStream.format("pykraft")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", SRC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "600")
        .load()
        .selectExpr("concat(cast('out-' as binary), substring(value, 4)) as value")
        .writeStream.format("pykraft")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", DST)
        .option("exactlyOnce", "true")
        .option("queryName", "failover")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )

    def rows_so_far() -> int:
        """Records the query has read: its source's end offsets summed (SRC has no transactions)."""
        progress = query.lastProgress
        if progress is None:
            return 0
        end = progress["sources"][0]["endOffset"]
        end = json.loads(end) if isinstance(end, str) else end
        return sum(int(o) for o in end.get(SRC, {}).values())

    def progressed(since: int) -> bool:
        return rows_so_far() > since

    producing = threading.Thread(target=_produce, args=(bootstrap, BEFORE, DURING, 0.2))
    try:
        wait_until(lambda: rows_so_far() > 0, 180, "the query's first micro-batch")
        producing.start()
        for round_no in range(3):
            victim = _leaders(cluster)[round_no]
            cluster.kill(victim)
            seen = rows_so_far()
            wait_until(lambda s=seen: progressed(s), 90, f"progress with broker {victim} killed")
            assert query.isActive, query.exception()
            cluster.start(victim)
            cluster.wait_for_brokers(expected=set(cluster.brokers))
            wait_until(lambda: _fully_replicated(admin), 60, f"broker {victim} back in every ISR")
        # A broker stopped for longer than broker.session.timeout.ms: fenced, its partitions move.
        stopped = _leaders(cluster)[3]
        cluster.stop(stopped)
        seen = rows_so_far()
        time.sleep(2 * SESSION_TIMEOUT_MS / 1000)
        wait_until(lambda: progressed(seen), 90, f"progress with broker {stopped} stopped")
        assert query.isActive, query.exception()
        cluster.start(stopped)
        cluster.wait_for_brokers(expected=set(cluster.brokers))
        wait_until(lambda: _fully_replicated(admin), 60, f"broker {stopped} back in every ISR")
        producing.join()
        wait_until(lambda: rows_so_far() >= BEFORE + DURING, 180, "the query to read every input record")
        assert query.isActive, query.exception()
    finally:
        query.stop()
        if producing.is_alive():
            producing.join()
    assert query.exception() is None

    expected = tmp_path / "expected.txt"
    expected.write_text("".join(f"out-{i}\n" for i in range(BEFORE + DURING)))
    verified = main(
        ["pipeline", "eos-verify", "--bootstrap-server", bootstrap, "--topic", DST, "--expected", str(expected),
         "--isolation-level", "read_committed", "--out", str(tmp_path / "verify")]
    )  # fmt: skip
    assert verified == 0
