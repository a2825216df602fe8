"""bench/null_broker.py parks a caught-up Fetch as a broker's fetch purgatory does (Kafka's DelayedFetch):
it answers when a Produce brings data or at max_wait_ms, never at once with the last batch again, so it is
a floor for bench.latency (issue 29)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
from bench.null_broker import NullBroker
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceResponse

from pykraft.protocol.records import Record, build_batch, read_batch_header
from pykraft.testing import free_port
from tests.raw_client import RawClient, fetch_request, produce_request


@pytest.fixture(scope="module")
def null_broker() -> Iterator[tuple[NullBroker, str]]:
    """The null broker on a free 127.0.0.1 port, served by an event loop in a thread of this process."""
    port = free_port()
    broker = NullBroker("127.0.0.1", port)
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(asyncio.start_server(broker.serve, "127.0.0.1", port))
    thread = threading.Thread(target=loop.run_forever, name="null-broker")
    thread.start()
    try:
        yield broker, f"127.0.0.1:{port}"
    finally:

        async def shut() -> None:
            server.close()
            await server.wait_closed()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shut(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def _produce(client: RawClient, topic: str, values: list[bytes]) -> int:
    batch = bytes(build_batch([Record(None, v) for v in values], timestamp_ms=1000))
    response = client.request(produce_request(topic, batch), ProduceResponse, 7)
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == 0
    return int(partition.base_offset)


def test_caught_up_fetch_waits_for_the_next_produce(null_broker: tuple[NullBroker, str]) -> None:
    broker, bootstrap = null_broker
    with RawClient(bootstrap) as consumer, RawClient(bootstrap) as producer:
        assert _produce(producer, "parked", [b"a", b"b", b"c"]) == 0
        fetches = broker.fetches
        consumer.send(fetch_request("parked", 3, max_wait_ms=10000, min_bytes=1), 11)
        deadline = time.monotonic() + 5
        while broker.fetches == fetches and time.monotonic() < deadline:
            time.sleep(0.005)
        assert broker.fetches == fetches + 1  # the Fetch is in; now the data it waits for
        assert _produce(producer, "parked", [b"d", b"e"]) == 3
        response = FetchResponse.decode(consumer.receive_frame(), version=11, header=True)
    records = response.responses[0].partitions[0].records
    header = read_batch_header(records)
    # The answer is the batch produced after the Fetch arrived, alone; not the last batch sent again.
    assert (header.base_offset, header.last_offset_delta, header.size_in_bytes) == (3, 1, len(records))
    assert broker.fetches == fetches + 1


def test_caught_up_fetch_answers_empty_at_max_wait(null_broker: tuple[NullBroker, str]) -> None:
    broker, bootstrap = null_broker
    with RawClient(bootstrap) as client:
        assert _produce(client, "idle", [b"a"]) == 0
        produces = broker.produces
        response = client.request(fetch_request("idle", 1, max_wait_ms=100, min_bytes=1), FetchResponse, 11)
    partition = response.responses[0].partitions[0]
    assert (partition.error_code, partition.high_watermark, partition.records) == (0, 1, b"")
    assert broker.produces == produces
