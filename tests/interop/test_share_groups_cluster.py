"""Share groups (KIP-932, issue 31) on three controllers and three brokers, replication factor 3: five
confluent-kafka ShareConsumers acknowledge explicitly while the leader of the shared partition, the
share coordinator of its state, and then both, are killed -9 (and restarted). Every record's ACCEPT is
answered at most once, no record whose ACCEPT was answered is ever delivered again, and in the end
every record is done with (the share-partition start offset is at the log end): accepted, or its
ACCEPT written just before its answer was lost."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.cli.share_groups import share_group_offsets
from pykraft.coordinator.share_state import SHARE_STATE_TOPIC, ShareStateKey, state_partition_for
from pykraft.testing import ProcessCluster
from tests.interop.cluster_support import three_by_three, wait_until
from tests.raw_client import RawClient

pytestmark = pytest.mark.slow

STATE_PARTITIONS = 3
OVERRIDES = {
    "broker.session.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.num.partitions": "3",
    "share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "3000",
}
BROKERS = (101, 102, 103)
TOPIC, GROUP, TOTAL = "shared", "sg-cluster", 600


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with three_by_three(tmp_path_factory, "share-groups", OVERRIDES) as running:
        yield running


def _metadata(cluster: ProcessCluster, topic: str) -> object:
    for broker_id in BROKERS:
        node = cluster.nodes[broker_id]
        if not node.alive:
            continue
        try:
            with RawClient(node.address, timeout_s=5) as client:
                response = client.request(
                    MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]),
                    MetadataResponse,
                    12,
                )
        except Exception:
            continue
        return response.topics[0]
    raise AssertionError("no broker answered Metadata")


def _leader(cluster: ProcessCluster, topic: str, partition: int) -> int:
    topic_metadata = _metadata(cluster, topic)
    return next(p.leader_id for p in topic_metadata.partitions if p.partition_index == partition)  # type: ignore[attr-defined]


def _kill_and_restart(cluster: ProcessCluster, node_ids: set[int]) -> None:
    for node_id in node_ids:
        cluster.kill(node_id)
    time.sleep(1.0)  # consumers meet the dead leader or coordinator meanwhile
    for node_id in node_ids:
        cluster.start(node_id)


def test_acknowledged_records_survive_kill_9_of_leader_and_share_coordinator(cluster: ProcessCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    wait_until(lambda: len(_metadata(cluster, TOPIC).partitions[0].isr_nodes) == 3, 30, "the topic's ISR")  # type: ignore[attr-defined]
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[entry])]
    ).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(TOTAL):
        producer.produce(TOPIC, value=str(i).encode())
    assert producer.flush(30) == 0
    topic_id = _metadata(cluster, TOPIC).topic_id  # type: ignore[attr-defined]

    accepted: Counter[int] = Counter()  # offsets whose ACCEPT was answered
    unanswered: set[int] = set()  # offsets whose ACCEPT failed or got no answer
    last_delivery = [time.monotonic()]
    redelivered_after_accept: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[str] = []

    def work() -> None:
        consumer = ShareConsumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": GROUP,
                "share.acknowledgement.mode": "explicit",
                "max.poll.records": "20",
            }
        )
        consumer.subscribe([TOPIC])
        try:
            while not stop.is_set():
                try:
                    messages = [m for m in consumer.poll(0.2) if m.error() is None]
                except Exception as exc:  # a poll across a failover: try again
                    errors.append(repr(exc))
                    continue
                if not messages:
                    continue
                with lock:
                    redelivered_after_accept.extend(m.offset() for m in messages if accepted[m.offset()])
                    last_delivery[0] = time.monotonic()
                for m in messages:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                try:
                    results = consumer.commit_sync(10)
                except Exception as exc:
                    errors.append(repr(exc))
                    results = None
                with lock:
                    if results and all(error is None for error in results.values()):
                        accepted.update(m.offset() for m in messages)
                    else:
                        unanswered.update(m.offset() for m in messages)
        finally:
            consumer.close()

    threads = [threading.Thread(target=work) for _ in range(5)]
    for t in threads:
        t.start()
    try:
        key = ShareStateKey(GROUP, topic_id, 0)
        state_partition = state_partition_for(key, STATE_PARTITIONS)

        def progressed(count: int) -> None:
            wait_until(lambda: len(accepted) >= count, 120, f"{count} records accepted")

        progressed(100)
        _kill_and_restart(cluster, {_leader(cluster, TOPIC, 0)})
        progressed(250)
        _kill_and_restart(cluster, {_leader(cluster, SHARE_STATE_TOPIC, state_partition)})
        progressed(400)
        both = {_leader(cluster, TOPIC, 0), _leader(cluster, SHARE_STATE_TOPIC, state_partition)}
        _kill_and_restart(cluster, both)

        def settled() -> bool:
            # Every record accepted or unanswered, and nothing delivered for longer than a lock lasts (a
            # record still held would have come back by then).
            with lock:
                covered = set(accepted) | unanswered
                return len(covered) == TOTAL and time.monotonic() - last_delivery[0] > 5.0

        wait_until(settled, 180, "every record accepted or unanswered, and no more deliveries")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert set(accepted.values()) == {1}, "a record's ACCEPT was answered twice"
    missing = set(range(TOTAL)) - set(accepted)
    assert missing <= unanswered, f"records neither accepted nor unanswered: {sorted(missing - unanswered)}"
    # Nothing is left to deliver: the share-partition start offset is past every record (the ones whose
    # ACCEPT got no answer were accepted all the same: written just before the answer was lost).
    # (Asked until the group's coordinator, restarted last, answers.)
    last: list[object] = []

    def at_log_end() -> bool:
        try:
            last[:] = [[row[3:] for row in share_group_offsets(cluster.bootstrap_servers, GROUP)]]
        except Exception as exc:
            last[:] = [exc]
            raise
        return last[0] == [(TOTAL, 0)]

    try:
        wait_until(at_log_end, 30, "the share-partition start offset at the log end")
    except AssertionError:
        raise AssertionError(
            f"(start offset, lag) of the share partition, or the last error: {last}"
        ) from None
    assert redelivered_after_accept == [], "a record was delivered again after its ACCEPT was answered"
