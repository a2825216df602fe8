"""The outbound RPC channel against a scripted asyncio server on 127.0.0.1: every request ends in
exactly one event — an answer, a timeout, a disconnect or the in-flight limit — and the channel
reconnects after a refused or dropped connection."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable

import pytest

from pykraft.io.rpc_channel import Answered, ChannelEvent, Failed, PeerChannel
from pykraft.testing import free_port

# A server behaviour: given one request's correlation id, answer (bytes), stay silent (None), or
# close the connection ("close").
Behaviour = Callable[[int], bytes | None | str]


def _request(correlation_id: int) -> bytes:
    # A request header v1 (api key 18, version 0, correlation id, client id "t"); the body is empty.
    return struct.pack(">hhih", 18, 0, correlation_id, 1) + b"t"


async def _serve(behaviour: Behaviour, port: int) -> asyncio.base_events.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                answer = behaviour(correlation_id)
                if answer == "close":
                    writer.close()
                    return
                if isinstance(answer, bytes):
                    body = struct.pack(">i", correlation_id) + answer
                    writer.write(struct.pack(">i", len(body)) + body)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", port)


async def _collect(events: list[ChannelEvent], count: int, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while len(events) < count:
        assert asyncio.get_running_loop().time() < deadline, events
        await asyncio.sleep(0.005)


def test_answers_match_their_requests_by_correlation_id() -> None:
    async def main() -> None:
        port = free_port()
        server = await _serve(lambda cid: b"ok-%d" % cid, port)
        events: list[ChannelEvent] = []
        channel = PeerChannel(2, ("127.0.0.1", port), events.append, request_timeout_ms=2000)
        for cid in (7, 8, 9):
            channel.send(cid, _request(cid), context=f"ctx{cid}")
        await _collect(events, 3)
        assert [(e.correlation_id, e.context, e.frame[4:]) for e in events if isinstance(e, Answered)] == [
            (7, "ctx7", b"ok-7"),
            (8, "ctx8", b"ok-8"),
            (9, "ctx9", b"ok-9"),
        ]
        assert channel.in_flight == 0
        await channel.close()
        server.close()

    asyncio.run(main())


def test_an_unanswered_request_times_out_and_the_connection_is_replaced() -> None:
    async def main() -> None:
        port = free_port()
        server = await _serve(lambda cid: None if cid == 1 else b"late-ok", port)
        events: list[ChannelEvent] = []
        channel = PeerChannel(2, ("127.0.0.1", port), events.append, request_timeout_ms=100)
        channel.send(1, _request(1))
        await _collect(events, 1)
        assert events == [Failed(2, 1, None, "timeout")]
        assert not channel.connected  # dropped, as Kafka's NetworkClient does
        channel.send(2, _request(2))
        await _collect(events, 2)
        assert isinstance(events[1], Answered) and events[1].correlation_id == 2
        await channel.close()
        server.close()

    asyncio.run(main())


def test_a_closed_connection_fails_what_was_in_flight() -> None:
    async def main() -> None:
        port = free_port()
        server = await _serve(lambda cid: "close", port)
        events: list[ChannelEvent] = []
        channel = PeerChannel(2, ("127.0.0.1", port), events.append, request_timeout_ms=5000)
        channel.send(5, _request(5))
        await _collect(events, 1)
        assert events == [Failed(2, 5, None, "disconnected")]
        await channel.close()
        server.close()

    asyncio.run(main())


def test_a_refused_connection_fails_fast_then_reconnects_once_the_peer_is_up() -> None:
    async def main() -> None:
        port = free_port()
        events: list[ChannelEvent] = []
        channel = PeerChannel(
            2, ("127.0.0.1", port), events.append, request_timeout_ms=5000, reconnect_backoff_ms=10
        )
        channel.send(1, _request(1))
        await _collect(events, 1)
        assert events == [Failed(2, 1, None, "refused")]  # nothing listens: the peer's process is gone
        server = await _serve(lambda cid: b"up", port)
        channel.send(2, _request(2))
        await _collect(events, 2)
        assert isinstance(events[1], Answered)
        await channel.close()
        server.close()

    asyncio.run(main())


def test_the_in_flight_limit_refuses_at_once() -> None:
    async def main() -> None:
        port = free_port()
        server = await _serve(lambda cid: None, port)
        events: list[ChannelEvent] = []
        channel = PeerChannel(2, ("127.0.0.1", port), events.append, request_timeout_ms=5000, max_in_flight=2)
        for cid in (1, 2, 3):
            channel.send(cid, _request(cid))
        assert events == [Failed(2, 3, None, "in-flight limit")]
        await channel.close()
        assert sorted(e.correlation_id for e in events) == [1, 2, 3]
        assert {e.reason for e in events[1:] if isinstance(e, Failed)} == {"closed"}
        server.close()

    asyncio.run(main())


def test_a_new_address_for_a_peer_closes_the_old_connection_and_uses_the_new_one() -> None:
    """A broker restarted on another port: the address from the new metadata image wins."""
    from pykraft.io.rpc_channel import RpcChannels

    async def main() -> None:
        old_port, new_port = free_port(), free_port()
        old = await _serve(lambda cid: b"old", old_port)
        new = await _serve(lambda cid: b"new", new_port)
        events: list[ChannelEvent] = []
        channels = RpcChannels({5: ("127.0.0.1", old_port)}, events.append, request_timeout_ms=2000)
        channels.send(5, 1, _request(1))
        await _collect(events, 1)
        channels.set_address(5, ("127.0.0.1", new_port))
        channels.set_address(5, ("127.0.0.1", new_port))  # the same address again: nothing to do
        channels.send(5, 2, _request(2))
        await _collect(events, 2)
        assert [e.frame[4:] for e in events if isinstance(e, Answered)] == [b"old", b"new"]
        await channels.close()
        old.close()
        new.close()

    asyncio.run(main())


def test_a_connect_that_hangs_is_given_up_so_the_next_request_connects_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listener whose accept queue is full (its process not accepting: busy, stopped) drops the SYN,
    and the kernel retries it for minutes. The channel gives the attempt up after the request timeout
    (Kafka's connection setup timeout, KIP-601), so the next request tries again; before, the channel
    stayed "connecting" on the one hung attempt and every request to that peer only timed out."""
    attempts: list[tuple[str, int]] = []
    create_connection = asyncio.base_events.BaseEventLoop.create_connection

    async def counting_create_connection(
        loop: asyncio.AbstractEventLoop, factory: object, host: str, port: int, **kwargs: object
    ) -> object:
        attempts.append((host, port))
        return await create_connection(loop, factory, host, port, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "create_connection", counting_create_connection)

    async def main() -> None:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # room for one connection waiting to be accepted
        filler = socket.create_connection(listener.getsockname())  # fills the accept queue, never accepted
        events: list[ChannelEvent] = []
        channel = PeerChannel(
            2,
            listener.getsockname(),
            events.append,
            request_timeout_ms=300,
            reconnect_backoff_ms=10,
            reconnect_backoff_max_ms=10,
        )
        try:
            for correlation_id in (1, 2, 3):  # each sent once the one before it failed
                channel.send(correlation_id, _request(correlation_id))
                await _collect(events, correlation_id)
            assert all(isinstance(event, Failed) for event in events), events
            # The hung attempt was given up (failing what waited on it): a later request tried anew.
            assert len(attempts) >= 2, attempts
        finally:
            await channel.close()
            filler.close()
            listener.close()

    asyncio.run(main())
