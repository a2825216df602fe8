"""pykraft.client against a real node: idempotent produce, 50 requests in flight through a proxy that
drops responses (KIP-758), transactions with read_committed, fencing, and the KIP-360 bookkeeping."""

from __future__ import annotations

import asyncio

import pytest

from pykraft.client import (
    Consumer,
    DeliveryError,
    KafkaClientError,
    Producer,
    ProducerFencedError,
    TransactionAbortableError,
)
from pykraft.client.producer import KIP758_MAX_IN_FLIGHT, _Batch, _PartitionState
from pykraft.core.errors import ErrorCode
from pykraft.protocol.records import Record
from pykraft.testing import free_port, running_node
from tests.interop.dropping_proxy import DroppingProxy
from tests.interop.test_transactions import create_topic

pytestmark = pytest.mark.slow


async def read_all(
    bootstrap: str, tps: list[tuple[str, int]], expected: int, isolation: str = "read_uncommitted"
) -> list:
    consumer = Consumer(bootstrap, isolation_level=isolation)
    consumer.assign(tps)
    await consumer.seek_to_beginning()
    out: list = []
    try:
        for _ in range(100):
            out += await consumer.getmany(timeout_ms=200)
            if len(out) >= expected:
                # One more poll: nothing beyond what was expected may come.
                out += await consumer.getmany(timeout_ms=50)
                break
    finally:
        await consumer.close()
    return out


def test_idempotent_produce_many_partitions_in_order(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "client-idem", 3)

    async def run() -> list:
        async with Producer(bootstrap, linger_ms=2, batch_size=2000) as producer:
            assert producer.max_in_flight == KIP758_MAX_IN_FLIGHT  # the broker advertised its window
            futures = [
                await producer.send("client-idem", b"v%04d" % i, key=b"k%d" % (i % 7)) for i in range(3000)
            ]
            await producer.flush()
            offsets = [f.result() for f in futures]
        assert all(m.offset >= 0 for m in offsets)
        return await read_all(bootstrap, [("client-idem", p) for p in range(3)], 3000)

    got = asyncio.run(run())
    assert sorted(r.value for r in got) == [b"v%04d" % i for i in range(3000)]
    for p in range(3):
        mine = [int(r.value[1:]) for r in got if r.partition == p]
        assert mine == sorted(mine)  # in order per partition


def test_50_in_flight_through_a_proxy_that_drops_responses_exactly_once_in_order() -> None:
    """KIP-758: with 50 batches in flight, a lost connection resends them all with their sequences;
    the broker answers what it has with their offsets or DUPLICATE_SEQUENCE_NUMBER."""
    messages = 4000
    broker_port = free_port()
    with DroppingProxy(broker_port, seed=11, drop_probability=0.2, max_drops=15) as proxy:
        overrides = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}
        with running_node(client_port=broker_port, overrides=overrides) as node:
            bootstrap = f"127.0.0.1:{proxy.port}"
            create_topic(f"127.0.0.1:{broker_port}", "client-faults")

            async def run() -> list:
                async with Producer(bootstrap, linger_ms=1, batch_size=400, max_in_flight=50) as producer:
                    futures = [
                        await producer.send("client-faults", b"m%05d" % i, partition=0)
                        for i in range(messages)
                    ]
                    await producer.flush()
                    for f in futures:
                        f.result()  # every record acknowledged (46 counts as success)
                return await read_all(f"127.0.0.1:{broker_port}", [("client-faults", 0)], messages)

            got = asyncio.run(run())
            part = node._node.replicas.get("client-faults", 0)
            assert part.log.log_end_offset == messages  # nothing appended twice
    assert [r.value for r in got] == [b"m%05d" % i for i in range(messages)]
    assert proxy.drops > 0
    assert proxy.forwarded_produce_errors[ErrorCode.DUPLICATE_SEQUENCE_NUMBER] > 0, (
        proxy.forwarded_produce_errors
    )


def test_transactions_commit_abort_offsets_and_read_committed(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "client-txn", 2)

    async def run() -> tuple[list, list, dict]:
        committed: list[bytes] = []
        async with Producer(bootstrap, transactional_id="client-t1") as producer:
            await producer.init_transactions()
            for round_ in range(5):
                producer.begin_transaction()
                values = [b"t%d-%02d" % (round_, i) for i in range(30)]
                for i, v in enumerate(values):
                    await producer.send("client-txn", v, partition=i % 2)
                if round_ == 2:
                    await producer.flush()
                    await producer.abort_transaction()
                    continue
                await producer.send_offsets_to_transaction({("client-txn-in", 0): round_ + 1}, "client-group")
                await producer.commit_transaction()
                committed += values
        tps = [("client-txn", 0), ("client-txn", 1)]
        got = await read_all(bootstrap, tps, len(committed), "read_committed")
        everything = await read_all(bootstrap, tps, 150, "read_uncommitted")
        consumer = Consumer(bootstrap)
        offsets = await consumer.committed("client-group", [("client-txn-in", 0)])
        await consumer.close()
        return got, committed, offsets | {"everything": len(everything)}

    got, committed, extra = asyncio.run(run())
    assert sorted(r.value for r in got) == sorted(committed)
    assert extra[("client-txn-in", 0)] == 5
    assert extra["everything"] == 150


def test_a_second_producer_fences_the_first(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "client-fence")

    async def run() -> None:
        old = Producer(bootstrap, transactional_id="client-fence-1")
        await old.start()
        await old.init_transactions()
        old.begin_transaction()
        await old.send_and_wait("client-fence", b"zombie", partition=0)
        new = Producer(bootstrap, transactional_id="client-fence-1")
        await new.start()
        await new.init_transactions()
        with pytest.raises((ProducerFencedError, TransactionAbortableError)):
            await old.commit_transaction()
        new.begin_transaction()
        await new.send("client-fence", b"alive", partition=0)
        await new.commit_transaction()
        await new.close()
        got = await read_all(bootstrap, [("client-fence", 0)], 1, "read_committed")
        assert [r.value for r in got] == [b"alive"]

    asyncio.run(run())


def test_a_fatal_batch_error_fails_every_later_batch_and_bumps_the_epoch() -> None:
    """KIP-360 bookkeeping without a network: the batch and later sequenced batches of the partition
    fail; the idempotent producer bumps with its (producer id, epoch) and restarts sequences at 0."""

    async def run() -> None:
        producer = Producer("127.0.0.1:1")
        producer.producer_id, producer.producer_epoch = 7, 3
        bumped: list[tuple[int | None, int]] = []

        async def fake_init(producer_id: int | None = None, producer_epoch: int = -1) -> None:
            bumped.append((producer_id, producer_epoch))
            producer.producer_id, producer.producer_epoch = 8, 0

        producer._init_producer_id = fake_init  # type: ignore[method-assign]
        state = _PartitionState()
        loop = asyncio.get_running_loop()
        batches = []
        for _ in range(3):
            b = _Batch(("t", 0), [Record(None, b"x")], [loop.create_future()], deadline=0.0)
            batches.append(b)
            state.queue.append(b)
        unsent = _Batch(("t", 0), [Record(None, b"y")], [loop.create_future()], deadline=0.0)
        state.queue.append(unsent)
        for b in batches:
            producer._assign_sequence(state, b)
        assert [b.base_sequence for b in batches] == [0, 1, 2]
        producer._assign_sequence(state, batches[1])
        assert batches[1].base_sequence == 1  # fixed at the first send, never reassigned
        producer._fail_from(("t", 0), state, batches[1], ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        assert state.queue == [batches[0], unsent]
        for b in batches[1:]:
            with pytest.raises(DeliveryError):
                b.futures[0].result()
        assert state.next_sequence == 0 and not unsent.futures[0].done()
        assert producer.producer_id == -1  # no sequence is assigned until the bump is answered
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert bumped == [(7, 3)] and (producer.producer_id, producer.producer_epoch) == (8, 0)

    asyncio.run(run())


def test_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="not HOST:PORT"):
        Producer("nowhere")
    with pytest.raises(ValueError, match="acks=-1"):
        Producer("127.0.0.1:1", transactional_id="x", acks=1)
    assert "PRODUCER_FENCED" in str(KafkaClientError(ErrorCode.PRODUCER_FENCED, "EndTxn"))
