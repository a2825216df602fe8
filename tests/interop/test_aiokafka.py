"""aiokafka against a real in-process pykraft node."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

pytestmark = pytest.mark.slow


def test_idempotent_produce_and_assign_consume(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
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
