"""Kafka Streams (org.apache.kafka:kafka-streams 4.x) against pykraft (issue 33 item 3): a word count with
processing.guarantee=exactly_once_v2 on a 3-controller + 3-broker cluster, through the kill -9 of a broker.

tests/java/streams/StreamsWordCount.java splits lines into words, re-keys them by word (a repartition
topic), counts them in a store backed by a changelog topic and writes each new count to an output topic,
committing a transaction every 100 ms. A seeded input is produced in three parts. The first part is
produced and the application starts; once it has committed counts, the leader of an input partition is
killed -9 and the second part produced. When the application has counted into the second part with that
broker down, the application itself is killed -9 while still counting, most likely with a transaction
open, and a second instance (the same static member, a new transactional.id) takes over: its OffsetFetch
with require_stable waits for any transaction left open to time out and abort, and it restores its store
from the changelog. The third part is produced, the broker restarts, and the second instance runs until
its output has counted every word. Reading the output read_committed, each word's counts must be exactly
1, 2, ..., n with n the count Python computes from the same input: a lost, doubled or aborted-but-visible
increment breaks the sequence. Kafka Streams uses CreateTopics with configs for its internal topics, a
transactional producer (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn),
a classic consumer group with its own assignor, OffsetFetch with require_stable, ListOffsets and
DeleteRecords on the repartition topic."""

from __future__ import annotations

import functools
import itertools
import json
import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pykraft.testing import ProcessCluster
from tests.interop.cluster_support import three_by_three, wait_until
from tests.interop.maven_build import java_command, maven_classpath

pytestmark = pytest.mark.slow

STREAMS_DIR = Path(__file__).resolve().parent.parent / "java" / "streams"
MAIN_CLASS = "pykraft.StreamsWordCount"
APPLICATION_ID = "pykraft-word-count"  # StreamsWordCount.APPLICATION_ID
INPUT, OUTPUT = "text-lines", "word-counts"
PARTITIONS = 3
LINES = 2000
VOCABULARY = [f"w{i:02d}" for i in range(40)]

OVERRIDES = {
    "broker.session.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    # the first instance's transaction, left open by its kill -9, aborts 3 s on (not 10 s + 10 s)
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
STREAMS_PROPERTIES = [
    "producer.transaction.timeout.ms=3000",
    # static membership: the second instance takes the first one's place without waiting for its
    # session to expire
    "group.instance.id=word-count-1",
]


def _lines() -> list[str]:
    rng = random.Random(33)
    return [" ".join(rng.choices(VOCABULARY, k=rng.randint(1, 8))) for _ in range(LINES)]


class StreamsApp:
    """One run of StreamsWordCount: its stdout (one JSON object a line) read as it comes, its stderr in a
    file. Killed (-9) if still running when the block ends."""

    def __init__(self, classpath: str, bootstrap: str, expected_words: int, workdir: Path) -> None:
        self.events: list[dict[str, Any]] = []
        self._stderr = open(workdir / "stderr.txt", "w+")  # closed by __exit__
        self.process = subprocess.Popen(
            java_command(classpath, MAIN_CLASS, bootstrap, INPUT, OUTPUT, str(expected_words),
                         str(workdir / "state"), "120000", *STREAMS_PROPERTIES),
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for text in self.process.stdout:
            if text.startswith("{"):
                self.events.append(json.loads(text))

    def words_counted(self) -> int:
        return max((e["words"] for e in list(self.events) if e.get("event") == "progress"), default=0)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def __enter__(self) -> StreamsApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
        self._reader.join(timeout=10)
        self._stderr.seek(0)
        self.stderr = self._stderr.read()
        self._stderr.close()


@dataclass
class Run:
    verdict: dict[str, Any]
    events: list[dict[str, Any]]
    stderr: str
    output: list[tuple[int, str, int]]  # (partition, word, count) in each partition's order
    topics: dict[str, Any]
    configs: dict[str, dict[str, str]]
    repartition_start_offsets: list[int]
    cluster: ProcessCluster


def _produce(cluster: ProcessCluster, lines: list[str]) -> None:
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        }
    )
    errors: list[object] = []
    for line in lines:
        producer.produce(INPUT, line.encode(), on_delivery=lambda e, m: errors.append(e) if e else None)
    assert producer.flush(60) == 0 and not errors, errors


def _leader_of(cluster: ProcessCluster, topic: str, partition: int) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    return int(admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader)


def _read_output(cluster: ProcessCluster) -> list[tuple[int, str, int]]:
    """Every committed record of the output topic, each partition read to its end."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "word-count-reader",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(OUTPUT, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(PARTITIONS)
        ]
    )
    records: list[tuple[int, str, int]] = []
    at_end: set[int] = set()
    try:
        while len(at_end) < PARTITIONS:
            message = consumer.poll(30)
            assert message is not None, f"no record nor end of partition in 30 s; ended: {at_end}"
            if message.error() is not None:
                assert message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            records.append(
                (
                    message.partition(),
                    message.key().decode(),
                    int.from_bytes(message.value(), "big", signed=True),
                )
            )
    finally:
        consumer.close()
    return records


def _log_start_offsets(cluster: ProcessCluster, topic: str) -> list[int]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused"}
    )
    try:
        return [
            consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)[0]
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    classpath = maven_classpath(STREAMS_DIR)
    lines = _lines()
    parts = [lines[: LINES // 3], lines[LINES // 3 : 2 * LINES // 3], lines[2 * LINES // 3 :]]
    words = [sum(len(line.split()) for line in part) for part in parts]
    phases: list[tuple[str, float]] = [("start", time.monotonic())]
    with three_by_three(tmp_path_factory, "streams-cluster", OVERRIDES) as cluster:
        phases.append(("cluster up", time.monotonic()))
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in (INPUT, OUTPUT)]).values():
            future.result(30)
        _produce(cluster, parts[0])
        app = functools.partial(StreamsApp, classpath, cluster.bootstrap_servers, sum(words))
        with app(tmp_path_factory.mktemp("streams-first")) as first:
            wait_until(lambda: first.words_counted() > 0, 60, "the first instance's first committed counts")
            phases.append(("first instance's first counts", time.monotonic()))
            killed = _leader_of(cluster, INPUT, 0)
            cluster.kill(killed)
            _produce(cluster, parts[1])
            wait_until(
                lambda: first.words_counted() > words[0],
                60,
                f"the first instance counting the second part with broker {killed} down",
            )
            phases.append(("second part counted into with the broker down", time.monotonic()))
        # the first instance died -9 while counting; the second takes its place
        with app(tmp_path_factory.mktemp("streams-second")) as second:
            _produce(cluster, parts[2])
            cluster.start(killed)
            second.process.wait(timeout=150)
            phases.append(("second instance done", time.monotonic()))

        cluster.wait_for_brokers(60)
        output = _read_output(cluster)
        repartition_start_offsets = _log_start_offsets(cluster, f"{APPLICATION_ID}-words-repartition")
        listed = admin.list_topics(timeout=10).topics
        internal = [t for t in listed if t.startswith(APPLICATION_ID)]
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in internal]
        configs = {
            r.name: {name: entry.value for name, entry in future.result(30).items()}
            for r, future in admin.describe_configs(resources).items()
        }
        for instance in (first, second):  # shown with -s, or by a failing test's captured output
            print("\n".join(f"streams: {event}" for event in instance.events))
            print(f"stderr:\n{instance.stderr[-4000:]}")
        print(f"killed broker {killed}")
        print("\n".join(f"{b - a:6.1f} s  {name}" for (_, a), (name, b) in itertools.pairwise(phases)))
        verdict = next((e for e in second.events if "check" in e), {"ok": False, "detail": "no verdict"})
        yield Run(
            verdict,
            first.events + second.events,
            first.stderr + second.stderr,
            output,
            listed,
            configs,
            repartition_start_offsets,
            cluster,
        )


def test_the_application_counts_every_word_through_a_broker_kill(run: Run) -> None:
    assert run.verdict["ok"], f"{run.verdict['detail']}\n{run.stderr[-4000:]}"
    assert not [e for e in run.events if e.get("event") == "error"], run.events


def test_each_words_committed_counts_are_exactly_one_to_its_reference_count(run: Run) -> None:
    """exactly_once_v2: no increment lost, none committed twice, none from an aborted transaction."""
    reference = Counter(word for line in _lines() for word in line.split())
    counts: dict[str, list[int]] = {}
    partition_of: dict[str, set[int]] = {}
    for partition, word, count in run.output:
        counts.setdefault(word, []).append(count)
        partition_of.setdefault(word, set()).add(partition)
    assert all(len(p) == 1 for p in partition_of.values()), partition_of
    assert {w: c[-1] for w, c in counts.items()} == dict(reference)
    wrong = {w: c for w, c in counts.items() if c != list(range(1, reference[w] + 1))}
    assert not wrong, {w: c[:10] for w, c in wrong.items()}


def test_internal_topics_are_made_as_streams_asks(run: Run) -> None:
    """The repartition topic (delete, its records deleted once consumed) and the store's changelog
    (compacted), both with replication.factor=3 and the input's partition count."""
    repartition = f"{APPLICATION_ID}-words-repartition"
    changelog = f"{APPLICATION_ID}-counts-changelog"
    assert {t for t in run.topics if t.startswith(APPLICATION_ID)} == {repartition, changelog}
    for name in (repartition, changelog):
        partitions = run.topics[name].partitions
        assert len(partitions) == PARTITIONS
        assert all(len(p.replicas) == 3 for p in partitions.values()), name
    assert run.configs[repartition]["cleanup.policy"] == "delete"
    assert run.configs[changelog]["cleanup.policy"] == "compact"


def test_consumed_repartition_records_are_deleted(run: Run) -> None:
    """Streams purges what it has consumed of its repartition topic with DeleteRecords."""
    assert all(offset > 0 for offset in run.repartition_start_offsets), run.repartition_start_offsets


def test_every_replica_of_the_repartition_topic_starts_where_its_leader_does(run: Run) -> None:
    """Followers move their log start up to the leader's (Kafka's ReplicaFetcherThread), including a
    broker restarted after the leader's log start passed its end: no replica keeps purged records."""
    topic = f"{APPLICATION_ID}-words-repartition"

    def replica_starts() -> dict[tuple[int, int], int]:
        starts = {}
        for broker_id, node in run.cluster.brokers.items():
            for p in range(PARTITIONS):
                text = (Path(node.data_dir) / f"{topic}-{p}" / "log-start-offset").read_text()
                starts[(broker_id, p)] = int(text.split()[1])  # pykraft's checkpoint: version, offset
        return starts

    wanted = {
        (b, p): run.repartition_start_offsets[p] for b in run.cluster.brokers for p in range(PARTITIONS)
    }
    try:
        wait_until(lambda: replica_starts() == wanted, 10, "every replica's log start at its leader's")
    except AssertionError:
        raise AssertionError(f"{replica_starts()} != {wanted}") from None
