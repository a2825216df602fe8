"""Backpressure in the listener (issue 18): one request in progress per connection, answered in order;
queued.max.requests bounds the requests in progress on the listener (a request over it waits, is
counted and timed, is never refused); a request parked in a timed wait gives its slot back. And its
framing (issue 29: frames read in place by io.frame_reader): large requests arrive whole and writable,
a frame over socket.request.max.bytes drops only its connection, a client that half-closes after its
requests still gets every answer.

A KafkaServer on 127.0.0.1 with a scripted handler, driven by raw sockets in one event loop."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable, Sequence

import pytest

from pykraft.io.request_metrics import RequestMetrics
from pykraft.io.server import ConnectionInfo, KafkaServer
from pykraft.io.waiting import wait_event

API_KEY = 3  # any Kafka api key: the server reads only the header's key and version
Script = Callable[[int], Awaitable[None]]


def _frame(correlation_id: int) -> bytes:
    body = struct.pack(">hhi", API_KEY, 0, correlation_id)
    return struct.pack(">i", len(body)) + body


async def _answer(reader: asyncio.StreamReader) -> int:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    (correlation_id,) = struct.unpack(">i", await reader.readexactly(size))
    return int(correlation_id)


def _run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 10))


async def _server(
    script: Script, queued_max_requests: int, frames: list[bytearray] | None = None
) -> KafkaServer:
    async def handler(frame: bytearray, conn: ConnectionInfo) -> Sequence[bytes]:
        if frames is not None:
            frames.append(frame)
        (correlation_id,) = struct.unpack_from(">i", frame, 4)
        await script(correlation_id)
        return [struct.pack(">ii", 4, correlation_id)]

    server = KafkaServer(
        handler,
        host="127.0.0.1",
        port=0,
        listener_name="PLAINTEXT",
        socket_request_max_bytes=1 << 20,
        queued_max_requests=queued_max_requests,
        request_metrics=RequestMetrics(),
    )
    await server.start()
    return server


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.005)


def test_one_request_per_connection_at_a_time_answered_in_order() -> None:
    async def test() -> None:
        running: list[int] = []
        most = 0

        async def script(correlation_id: int) -> None:
            nonlocal most
            running.append(correlation_id)
            most = max(most, len(running))
            await asyncio.sleep(0.01)
            running.remove(correlation_id)

        server = await _server(script, queued_max_requests=500)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"".join(_frame(i) for i in range(10)))  # pipelined: nothing read in between
        assert [await _answer(reader) for _ in range(10)] == list(range(10))
        assert most == 1
        assert sum(server.request_metrics.by_key[API_KEY].versions) == 10  # type: ignore[union-attr]
        writer.close()
        await server.stop()

    _run(test)


def test_queued_max_requests_makes_the_next_request_wait_and_counts_it() -> None:
    async def test() -> None:
        release = asyncio.Event()
        started: list[int] = []

        async def script(correlation_id: int) -> None:
            started.append(correlation_id)
            await release.wait()  # held in progress (not a timed wait: it does not park)

        server = await _server(script, queued_max_requests=2)
        connections = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(3)]
        for i, (_, writer) in enumerate(connections):
            writer.write(_frame(i))
            await writer.drain()
            await _until(
                lambda i=i: len(started) == min(i + 1, 2) and server.requests_waiting == max(0, i - 1)
            )
        # Two in progress, the third read and waiting: backpressure, not an error.
        assert sorted(started) == [0, 1] and server.requests_in_progress == 2
        assert (server.requests_waiting, server.request_queue_waits) == (1, 1)
        await asyncio.sleep(0.05)
        release.set()
        assert [await _answer(reader) for reader, _ in connections] == [0, 1, 2]
        assert sorted(started) == [0, 1, 2]
        assert (server.requests_in_progress, server.requests_waiting) == (0, 0)
        queue_time = server.request_metrics.by_key[API_KEY].queue_time_ms  # type: ignore[union-attr]
        assert queue_time.count == 3 and queue_time.sum >= 40  # the third waited its ~50 ms
        for _, writer in connections:
            writer.close()
        await server.stop()

    _run(test)


def test_a_parked_request_gives_its_slot_back() -> None:
    async def test() -> None:
        wake = asyncio.Event()
        began: list[int] = []
        answered: list[int] = []

        async def script(correlation_id: int) -> None:
            began.append(correlation_id)
            if correlation_id == 0:
                await wait_event(wake, 5)  # a timed wait: a long poll, parked
            answered.append(correlation_id)

        server = await _server(script, queued_max_requests=1)
        (reader0, writer0), (reader1, writer1) = [
            await asyncio.open_connection("127.0.0.1", server.port) for _ in range(2)
        ]
        writer0.write(_frame(0))
        await _until(lambda: began == [0] and server.requests_in_progress == 0)
        # The only slot is free again while request 0 waits: request 1 is served at once.
        writer1.write(_frame(1))
        assert await _answer(reader1) == 1
        assert answered == [1] and server.request_queue_waits == 0
        wake.set()
        assert await _answer(reader0) == 0
        assert server.requests_in_progress == 0
        writer0.close()
        writer1.close()
        await server.stop()

    _run(test)


async def _no_wait(correlation_id: int) -> None:
    return None


def test_large_pipelined_requests_arrive_whole_and_writable() -> None:
    async def test() -> None:
        frames: list[bytearray] = []
        server = await _server(_no_wait, queued_max_requests=500, frames=frames)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        bodies = [struct.pack(">hhi", API_KEY, 0, i) + bytes([i]) * 700_000 for i in range(4)]
        writer.write(b"".join(struct.pack(">i", len(body)) + body for body in bodies))
        assert [await _answer(reader) for _ in range(4)] == [0, 1, 2, 3]
        assert frames == bodies and all(isinstance(frame, bytearray) for frame in frames)
        writer.close()
        await server.stop()

    _run(test)


def test_a_frame_over_socket_request_max_bytes_drops_only_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def test() -> None:
        server = await _server(_no_wait, queued_max_requests=500)
        good_reader, good_writer = await asyncio.open_connection("127.0.0.1", server.port)
        bad_reader, bad_writer = await asyncio.open_connection("127.0.0.1", server.port)
        bad_writer.write(struct.pack(">i", (1 << 20) + 1) + b"\x00" * 64)
        assert await bad_reader.read() == b""  # closed without an answer
        good_writer.write(_frame(7))
        assert await _answer(good_reader) == 7
        good_writer.close()
        bad_writer.close()
        await server.stop()

    with caplog.at_level(logging.WARNING, logger="pykraft.server"):
        _run(test)
    assert any(
        f"a frame of {(1 << 20) + 1} bytes" in r.getMessage()
        and "socket.request.max.bytes=1048576" in r.getMessage()
        for r in caplog.records
    )


def test_a_client_that_half_closes_after_its_requests_still_gets_every_answer() -> None:
    async def test() -> None:
        async def script(correlation_id: int) -> None:
            await asyncio.sleep(0.01)  # answered after the end of the stream was read

        server = await _server(script, queued_max_requests=500)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"".join(_frame(i) for i in range(3)))
        writer.write_eof()
        assert [await _answer(reader) for _ in range(3)] == [0, 1, 2]
        assert await reader.read() == b""  # then the server closes its side
        writer.close()
        await server.stop()

    _run(test)
