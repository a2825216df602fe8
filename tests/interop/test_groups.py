"""Consumer groups with real clients: partitions shared and handed over, offsets committed, a broker
restart in between (confluent-kafka), and the same with kafka-python and aiokafka group consumers."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pykraft.testing import running_node

pytestmark = pytest.mark.slow

# Fast groups for tests: no initial rebalance delay, few offsets partitions, short sessions.
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "group.min.session.timeout.ms": "1000",
}
PER_PARTITION = 100
COMMITTED = 60  # each partition is committed up to here; the rest is consumed but not committed
# Where all members start together: one initial rebalance delay lets them join one generation.
STARTING_TOGETHER = {**GROUP_OVERRIDES, "group.initial.rebalance.delay.ms": "1000"}


def _create_and_fill(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, num_partitions=partitions)]).values():
        fut.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(PER_PARTITION):
            producer.produce(topic, value=b"%d-%d" % (p, i), partition=p)
    assert producer.flush(30) == 0


def _confluent(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 100,
            **extra,
        }
    )


def _partitions(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def test_confluent_group_shares_hands_over_and_resumes_after_restart(tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    topic, group = "shared6", "confluent-group"
    with running_node(data_dir, overrides=STARTING_TOGETHER) as node:
        bootstrap = node.bootstrap_servers
        _create_and_fill(bootstrap, topic, 6)
        consumers = [
            _confluent(bootstrap, group, **{"partition.assignment.strategy": "cooperative-sticky"})
            for _ in range(3)
        ]
        for c in consumers:
            c.subscribe([topic])
        seen: dict[int, list[int]] = {p: [] for p in range(6)}
        deadline = time.monotonic() + 60
        # Consume everything; commit each partition up to COMMITTED (commit after processing).
        while sum(len(set(v)) for v in seen.values()) < 6 * PER_PARTITION and time.monotonic() < deadline:
            for c in consumers:
                msg = c.poll(0.05)
                if msg is None or msg.error():
                    continue
                seen[msg.partition()].append(msg.offset())
                if msg.offset() < COMMITTED:
                    c.commit(message=msg, asynchronous=False)
        shares = [_partitions(c) for c in consumers]
        assert sorted(len(s) for s in shares) == [2, 2, 2], shares
        assert set().union(*shares) == set(range(6))
        for offsets in seen.values():
            assert sorted(set(offsets)) == list(range(PER_PARTITION)), "gap"
            redelivered = [o for o in set(offsets) if offsets.count(o) > 1]
            assert all(o >= COMMITTED for o in redelivered), "a committed record was delivered again"

        # One consumer leaves: the other two take over its partitions and resume at its commits.
        leaving = consumers.pop()
        handed_over = _partitions(leaving)
        leaving.close()
        first_after_handover: dict[int, int] = {}
        deadline = time.monotonic() + 60
        while len(first_after_handover) < len(handed_over) and time.monotonic() < deadline:
            for c in consumers:
                msg = c.poll(0.05)
                if msg is not None and not msg.error() and msg.partition() in handed_over:
                    first_after_handover.setdefault(msg.partition(), msg.offset())
        assert set().union(*(_partitions(c) for c in consumers)) == set(range(6))
        assert first_after_handover == dict.fromkeys(handed_over, COMMITTED)
        committed = consumers[0].committed([TopicPartition(topic, p) for p in range(6)], timeout=10)
        assert [tp.offset for tp in committed] == [COMMITTED] * 6
        for c in consumers:
            c.close()

    # Restart over the same data: a new consumer of the group resumes exactly at the commits.
    with running_node(data_dir, overrides=GROUP_OVERRIDES) as node:
        consumer = _confluent(node.bootstrap_servers, group)
        consumer.subscribe([topic])
        resumed: dict[int, list[int]] = {p: [] for p in range(6)}
        deadline = time.monotonic() + 60
        while sum(len(v) for v in resumed.values()) < 6 * (PER_PARTITION - COMMITTED):
            assert time.monotonic() < deadline, resumed
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                resumed[msg.partition()].append(msg.offset())
        consumer.close()
        assert resumed == {p: list(range(COMMITTED, PER_PARTITION)) for p in range(6)}


def test_kafka_python_group_consumers_share_and_resume() -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    topic, group = "kp4", "kafka-python-group"
    with running_node(overrides=STARTING_TOGETHER) as node:
        bootstrap = node.bootstrap_servers
        _create_and_fill(bootstrap, topic, 4)

        def make() -> KafkaConsumer:
            return KafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=100,
            )

        consumers = [make(), make()]
        stop = threading.Event()
        received: list[list[tuple[int, int]]] = [[], []]

        def run(i: int) -> None:
            c = consumers[i]
            c.subscribe([topic])
            while not stop.is_set():
                for tp, msgs in c.poll(timeout_ms=100).items():
                    for m in msgs:
                        received[i].append((tp.partition, m.offset))
                        if m.offset < COMMITTED:
                            c.commit({tp: _offset_and_metadata(m.offset + 1)})

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 60
            while (
                len(set(received[0]) | set(received[1])) < 4 * PER_PARTITION and time.monotonic() < deadline
            ):
                time.sleep(0.05)
            assert len(set(received[0]) | set(received[1])) == 4 * PER_PARTITION
            shares = [{tp.partition for tp in c.assignment()} for c in consumers]
            assert all(shares) and not (shares[0] & shares[1]) and shares[0] | shares[1] == set(range(4))
            for p, o in received[0] + received[1]:
                assert (received[0] + received[1]).count((p, o)) == 1 or o >= COMMITTED
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=30)
            for c in consumers:
                c.close()

        resumed = make()
        resumed.subscribe([topic])
        got: dict[int, list[int]] = {p: [] for p in range(4)}
        deadline = time.monotonic() + 60
        while (
            sum(len(v) for v in got.values()) < 4 * (PER_PARTITION - COMMITTED)
            and time.monotonic() < deadline
        ):
            for tp, msgs in resumed.poll(timeout_ms=100).items():
                got[tp.partition].extend(m.offset for m in msgs)
        assert resumed.committed(KTopicPartition(topic, 0)) == COMMITTED
        resumed.close()
        assert got == {p: list(range(COMMITTED, PER_PARTITION)) for p in range(4)}


def _offset_and_metadata(offset: int):  # type: ignore[no-untyped-def]
    from kafka.structs import OffsetAndMetadata

    try:
        return OffsetAndMetadata(offset, "", -1)
    except TypeError:  # older signature without leader epoch
        return OffsetAndMetadata(offset, "")


def test_aiokafka_group_consumers_share_hand_over_and_resume() -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATopicPartition

    topic, group = "aio4", "aiokafka-group"
    with running_node(overrides=GROUP_OVERRIDES) as node:
        bootstrap = node.bootstrap_servers
        _create_and_fill(bootstrap, topic, 4)

        def make() -> AIOKafkaConsumer:
            return AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=100,
                partition_assignment_strategy=_roundrobin(),
            )

        async def scenario() -> None:
            a, b = make(), make()
            await a.start()
            await b.start()
            try:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    await asyncio.gather(a.getmany(timeout_ms=50), b.getmany(timeout_ms=50))
                    if len(a.assignment()) == 2 and len(b.assignment()) == 2:
                        break
                assert {tp.partition for tp in a.assignment() | b.assignment()} == set(range(4))
                # b commits its partitions at COMMITTED and leaves; a takes them over from there.
                b_parts = {tp.partition for tp in b.assignment()}
                await b.commit({tp: COMMITTED for tp in b.assignment()})
            finally:
                await b.stop()
            try:
                first: dict[int, int] = {}
                deadline = time.monotonic() + 60
                while len(first) < 2 and time.monotonic() < deadline:
                    for tp, msgs in (await a.getmany(timeout_ms=100)).items():
                        if tp.partition in b_parts and msgs:
                            first.setdefault(tp.partition, msgs[0].offset)
                assert first == dict.fromkeys(b_parts, COMMITTED)
                assert len(a.assignment()) == 4
                assert await a.committed(ATopicPartition(topic, min(b_parts))) == COMMITTED
            finally:
                await a.stop()

        asyncio.run(scenario())


def _roundrobin():  # type: ignore[no-untyped-def]
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    return (RoundRobinPartitionAssignor,)
