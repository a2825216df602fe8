"""aiokafka against a real in-process pykraft node."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from pykraft.testing import RunningNode, running_node
from tests.interop.test_transactions import create_topic

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def aio_node() -> Iterator[RunningNode]:
    """One node for every aiokafka test here (each test uses its own topics and groups)."""
    with running_node() as node:
        yield node


def test_idempotent_produce_and_assign_consume(aio_node: RunningNode) -> None:
    bootstrap = aio_node.bootstrap_servers
    count = 3000

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
        await producer.start()
        try:
            batch = [await producer.send("aio", b"a%05d" % i) for i in range(count)]
            await asyncio.gather(*batch)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition("aio", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            out: list[bytes] = []
            while len(out) < count:
                batches = await consumer.getmany(tp, timeout_ms=5000)
                if not batches:
                    break
                out.extend(m.value for m in batches[tp])
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"a%05d" % i for i in range(count)]


class _Owners(ConsumerRebalanceListener):
    """Which member holds which partition, as the members themselves see it; a partition assigned to
    one member while another still holds it is recorded in ``overlaps``."""

    def __init__(self, owners: dict[int, str], overlaps: list[str], name: str) -> None:
        self.owners, self.overlaps, self.name = owners, overlaps, name
        self.assignments = 0

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        for tp in revoked:
            if self.owners.get(tp.partition) == self.name:
                del self.owners[tp.partition]

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.assignments += 1
        for tp in assigned:
            holder = self.owners.get(tp.partition)
            if holder is not None and holder != self.name:
                self.overlaps.append(
                    f"partition {tp.partition} assigned to {self.name} while {holder} holds it"
                )
            self.owners[tp.partition] = self.name


def test_static_members_heartbeat_and_commit_with_old_request_versions(
    aio_node: RunningNode, caplog: pytest.LogCaptureFixture
) -> None:
    """aiokafka joins with group.instance.id (JoinGroup v5) but heartbeats with Heartbeat v1 and
    commits with OffsetCommit v2, which carry no instance id: Kafka's ClassicGroup.validateMember then
    checks the member id only (issue 27). Two static members heartbeat every 100 ms and commit for a
    minute, ten session timeouts: no error, no rebalance, no partition at two members."""
    bootstrap = aio_node.bootstrap_servers
    topic, partitions, session_timeout_ms = "aio-static", 4, 6000
    create_topic(bootstrap, topic, partitions)

    async def run() -> tuple[dict[int, str], list[str], list[int], int]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for i in range(200):
                await producer.send_and_wait(topic, b"m%03d" % i, partition=i % partitions)
        finally:
            await producer.stop()
        owners: dict[int, str] = {}
        overlaps: list[str] = []
        members: list[tuple[AIOKafkaConsumer, _Owners]] = []
        for name in ("static-1", "static-2"):
            consumer = AIOKafkaConsumer(
                bootstrap_servers=bootstrap,
                group_id="aio-static-group",
                group_instance_id=name,
                heartbeat_interval_ms=100,
                session_timeout_ms=session_timeout_ms,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                max_poll_records=5,
            )
            listener = _Owners(owners, overlaps, name)
            consumer.subscribe([topic], listener=listener)
            await consumer.start()
            members.append((consumer, listener))
        try:
            # Settle: both members hold a share, the first generation they both joined.
            while len(owners) < partitions or len(set(owners.values())) < 2:
                for consumer, _ in members:
                    await consumer.getmany(timeout_ms=100)
            settled = [listener.assignments for _, listener in members]
            caplog.clear()
            loop = asyncio.get_running_loop()
            # Poll and commit for a minute (issue 27), ten session timeouts: a member whose heartbeats
            # fail is expired within one and the other one is handed its partitions.
            until = loop.time() + 60
            commits = 0
            while loop.time() < until:
                for consumer, _ in members:
                    batches = await consumer.getmany(timeout_ms=50)
                    offsets = {tp: OffsetAndMetadata(ms[-1].offset + 1, "") for tp, ms in batches.items()}
                    await consumer.commit(offsets or None)
                    commits += 1
            churn = [
                listener.assignments - before for (_, listener), before in zip(members, settled, strict=True)
            ]
            return dict(owners), overlaps, churn, commits
        finally:
            for consumer, _ in members:
                await consumer.stop()

    with caplog.at_level(logging.WARNING, logger="aiokafka"):
        owners, overlaps, churn, commits = asyncio.run(run())
        complaints = [r.getMessage() for r in caplog.records if r.name.startswith("aiokafka.consumer")]
    assert overlaps == []
    assert sorted(owners) == list(range(partitions)) and set(owners.values()) == {"static-1", "static-2"}
    assert churn == [0, 0], "a rebalance happened after the group settled"
    assert complaints == []
    assert commits > 0


def test_send_offsets_to_transaction_with_an_active_group(aio_node: RunningNode) -> None:
    """Consume-transform-produce: aiokafka's send_offsets_to_transaction sends TxnOffsetCommit v0 (no
    member id, no generation) for a group whose consumer is active; Kafka accepts a member-less
    transactional commit to any group (ClassicGroup.validateOffsetCommit, issue 27)."""
    bootstrap = aio_node.bootstrap_servers
    source, sink, group, partitions, count = "aio-eos-in", "aio-eos-out", "aio-eos-group", 2, 60
    create_topic(bootstrap, source, partitions)
    create_topic(bootstrap, sink, 1)

    async def run() -> tuple[list[bytes], dict[int, int | None]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for i in range(count):
                await producer.send_and_wait(source, b"v%02d" % i, partition=i % partitions)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            source,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            max_poll_records=7,
        )
        txn_producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-eos-txn")
        await consumer.start()
        await txn_producer.start()
        try:
            done = 0
            while done < count:
                batches = await consumer.getmany(timeout_ms=1000)
                if not batches:
                    continue
                async with txn_producer.transaction():
                    for messages in batches.values():
                        for m in messages:
                            await txn_producer.send(sink, m.value.upper())
                    offsets = {tp: OffsetAndMetadata(ms[-1].offset + 1, "") for tp, ms in batches.items()}
                    await txn_producer.send_offsets_to_transaction(offsets, group)
                done += sum(len(ms) for ms in batches.values())
            committed = {p: await consumer.committed(TopicPartition(source, p)) for p in range(partitions)}
        finally:
            await txn_producer.stop()
            await consumer.stop()
        reader = AIOKafkaConsumer(
            sink, bootstrap_servers=bootstrap, isolation_level="read_committed", auto_offset_reset="earliest"
        )
        await reader.start()
        try:
            out: list[bytes] = []
            while len(out) < count:
                batches = await reader.getmany(timeout_ms=5000)
                if not batches:
                    break
                out.extend(m.value for ms in batches.values() for m in ms)
        finally:
            await reader.stop()
        return out, committed

    out, committed = asyncio.run(run())
    assert sorted(out) == [b"V%02d" % i for i in range(count)]
    assert committed == {p: count // partitions for p in range(partitions)}
