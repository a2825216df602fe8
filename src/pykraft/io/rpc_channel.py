"""The one outbound RPC channel of the shell (docs/architecture.md, "The metadata path").

One ``PeerChannel`` per peer keeps one TCP connection: it connects on demand, reconnects with an
exponential backoff (Kafka's ``reconnect.backoff.ms`` / ``reconnect.backoff.max.ms``, jittered), sends
framed requests whose correlation ids the caller chose, matches responses to them, fails a request
that is not answered within ``request_timeout_ms`` (and then drops the connection, as Kafka's
NetworkClient does, since the peer's answers can no longer be trusted to be in order), and keeps at
most ``max_in_flight`` requests outstanding. Every outcome reaches the owner through one callback:
``Answered`` with the response frame, or ``Failed`` with why (timeout, disconnect, in-flight limit) —
the pure core decides what a failure means; the channel never retries on its own.

Raft peers, the broker's link to the active controller, replica fetchers and the transaction marker
writer all use it. On an SSL or SASL listener (issue 16) a connection is TLS from the start and
authenticates (SaslHandshake v1 + SaslAuthenticate, KIP-152) before the first request goes out, with the
node's own credentials; a refused authentication is a failed connect (logged, backed off, retried).
Answers are read with ``io.frame_reader.FrameReader``: a large one (a follower's replica Fetch answer)
lands in its own buffer without a copy.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from pykraft.core.config import InterNodeSecurity, SslConfig
from pykraft.io.frame_reader import Frame, FrameReader
from pykraft.io.tls import client_context
from pykraft.io.waiting import park
from pykraft.protocol import messages
from pykraft.security.sasl import SaslClient, SaslClientError

log = logging.getLogger("pykraft.rpc")

_SIZE = struct.Struct(">i")
_CORRELATION_ID = struct.Struct(">i")

RECONNECT_BACKOFF_MS = 50
RECONNECT_BACKOFF_MAX_MS = 1000
# Largest response frame a peer may send (raft Fetch answers at most 8 MiB of records).
RESPONSE_MAX_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class Answered:
    peer_id: int
    correlation_id: int
    context: object
    frame: Frame  # response header + body, without the size prefix


@dataclass(frozen=True, slots=True)
class Failed:
    peer_id: int
    correlation_id: int
    context: object
    # "timeout", "disconnected", "refused" (nothing listens at the address: the peer's process is
    # gone), "in-flight limit", "closed", "unknown peer".
    reason: str


ChannelEvent = Answered | Failed


@dataclass(frozen=True, slots=True)
class ChannelSecurity:
    """TLS and SASL of the connections to one kind of listener (controller or broker)."""

    ssl_context: ssl.SSLContext | None
    node: InterNodeSecurity

    @classmethod
    def of(cls, node: InterNodeSecurity, ssl_config: SslConfig) -> ChannelSecurity | None:
        """None for PLAINTEXT; a bad truststore or keystore raises TlsConfigError (one line)."""
        if not node.uses_tls and not node.uses_sasl:
            return None
        return cls(client_context(ssl_config) if node.uses_tls else None, node)


class AuthenticationFailed(Exception):
    """The peer refused this node's credentials (or its SCRAM answer did not verify)."""


async def authenticate(
    frames: FrameReader, transport: asyncio.Transport, node: InterNodeSecurity, client_id: str
) -> int:
    """SaslHandshake v1 then SaslAuthenticate v2 rounds (KIP-152) on a fresh connection; returns the
    session lifetime the peer granted (KIP-368, 0: no expiry)."""
    correlation_ids = itertools.count(-1, -1)  # negative: never one of the owner's ids

    async def call(request: Any, response_class: Any, version: int) -> Any:
        request.API_VERSION = version
        request.with_header(correlation_id=next(correlation_ids), client_id=client_id)
        frame = bytes(request.encode(header=True, framed=False))
        transport.write(_SIZE.pack(len(frame)) + frame)
        return response_class.decode(await frames.read_frame(), version=version, header=True)

    handshake = await call(SaslHandshakeRequest(mechanism=node.sasl_mechanism), SaslHandshakeResponse, 1)
    if handshake.error_code:
        raise AuthenticationFailed(
            f"SASL mechanism {node.sasl_mechanism} refused (the listener offers {', '.join(handshake.mechanisms)})"
        )
    lifetime_ms = 0
    try:
        client = SaslClient(node.sasl_mechanism, node.username or "", node.password or "")
        token: bytes | None = client.first_token()
        while token is not None:
            answer = await call(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse, 2)
            lifetime_ms = int(answer.session_lifetime_ms or 0)
            if answer.error_code:
                raise AuthenticationFailed(
                    f"SASL/{node.sasl_mechanism} as {node.username!r}: {answer.error_message}"
                )
            token = client.next_token(bytes(answer.auth_bytes or b""))
    except SaslClientError as exc:
        raise AuthenticationFailed(str(exc)) from None
    return lifetime_ms


@dataclass(slots=True)
class _InFlight:
    correlation_id: int
    context: object
    frame: bytes
    timer: asyncio.TimerHandle | None = None
    sent: bool = False


class PeerChannel:
    def __init__(
        self,
        peer_id: int,
        address: tuple[str, int],
        on_event: Callable[[ChannelEvent], None],
        *,
        request_timeout_ms: int,
        max_in_flight: int = 16,
        reconnect_backoff_ms: int = RECONNECT_BACKOFF_MS,
        reconnect_backoff_max_ms: int = RECONNECT_BACKOFF_MAX_MS,
        rng: random.Random | None = None,
        security: ChannelSecurity | None = None,
        client_id: str = "pykraft",
    ) -> None:
        self.peer_id = peer_id
        self.security = security
        self.client_id = client_id
        self._auth_failing = False
        # KIP-368: when the peer's session on this connection is due to expire, new requests go to a
        # fresh, freshly authenticated connection; the old one answers what it was sent, then closes.
        self._rotate_at: float | None = None
        self._retired: set[asyncio.Task[None]] = set()
        self.address = address
        self.on_event = on_event
        self.request_timeout_ms = request_timeout_ms
        self.max_in_flight = max_in_flight
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self._rng = rng or random.Random()
        self._in_flight: dict[int, _InFlight] = {}
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._connecting = False
        self._connect_failures = 0
        self._next_connect_at = 0.0
        self._closed = False

    @property
    def connected(self) -> bool:
        return self._transport is not None

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def send(self, correlation_id: int, frame: bytes, context: object = None) -> None:
        """Queue one request (header + body, no size prefix); its outcome arrives as an event."""
        if self._closed:
            self._fail(correlation_id, context, "closed")
            return
        if len(self._in_flight) >= self.max_in_flight or correlation_id in self._in_flight:
            self._fail(correlation_id, context, "in-flight limit")
            return
        loop = asyncio.get_running_loop()
        entry = _InFlight(correlation_id, context, frame)
        entry.timer = loop.call_later(self.request_timeout_ms / 1000, self._on_timeout, correlation_id)
        self._in_flight[correlation_id] = entry
        if self._rotate_at is not None and self._transport is not None and loop.time() >= self._rotate_at:
            self._retire_connection(loop)
        if self._transport is not None:
            self._write(entry)
        elif not self._connecting:
            self._connecting = True
            self._task = loop.create_task(self._connect_and_read(), name=f"rpc-peer-{self.peer_id}")

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        for running in (task, *self._retired):
            if running is not None:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)
        self._drop_connection("closed")

    def _retire_connection(self, loop: asyncio.AbstractEventLoop) -> None:
        transport, self._transport, self._rotate_at = self._transport, None, None
        task = self._task
        if task is not None:
            self._retired.add(task)
            task.add_done_callback(self._retired.discard)
        if transport is not None:
            loop.call_later(self.request_timeout_ms / 1000, transport.close)

    # --- internals ----------------------------------------------------------------------------------

    def _fail(self, correlation_id: int, context: object, reason: str) -> None:
        self.on_event(Failed(self.peer_id, correlation_id, context, reason))

    def _write(self, entry: _InFlight) -> None:
        assert self._transport is not None
        self._transport.write(_SIZE.pack(len(entry.frame)) + entry.frame)
        entry.sent = True

    def _on_timeout(self, correlation_id: int) -> None:
        entry = self._in_flight.pop(correlation_id, None)
        if entry is None:
            return
        self._fail(correlation_id, entry.context, "timeout")
        # Kafka's NetworkClient closes a connection whose request timed out.
        if entry.sent:
            self._drop_connection("disconnected")

    def _drop_connection(self, reason: str) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.abort()
        failed = list(self._in_flight.values())
        self._in_flight.clear()
        for entry in failed:
            if entry.timer is not None:
                entry.timer.cancel()
            self._fail(entry.correlation_id, entry.context, reason)

    async def _connect_and_read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            delay_s = self._next_connect_at - loop.time()
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            security = self.security
            # Connection setup (TCP, TLS handshake, SASL) is bounded as Kafka's NetworkClient bounds it
            # (socket.connection.setup.timeout.ms, KIP-601), here by the request timeout: a SYN the
            # peer's full accept queue drops is retried by the kernel for minutes, and meanwhile this
            # channel, "connecting", would start no other attempt for any request.
            async with asyncio.timeout(self.request_timeout_ms / 1000):
                ssl_context = security.ssl_context if security is not None else None
                transport, frames = await loop.create_connection(
                    lambda: FrameReader(RESPONSE_MAX_BYTES),
                    *self.address,
                    ssl=ssl_context,
                    server_hostname=self.address[0] if ssl_context is not None else None,
                )
                lifetime_ms = 0
                if security is not None and security.node.uses_sasl:
                    try:
                        lifetime_ms = await authenticate(frames, transport, security.node, self.client_id)
                    except BaseException:
                        transport.abort()
                        raise
            if self._auth_failing:
                self._auth_failing = False
                log.info("peer %d at %s:%d: connected again", self.peer_id, *self.address)
        except (TimeoutError, OSError, AuthenticationFailed) as exc:
            if isinstance(exc, AuthenticationFailed | ssl.SSLError) and not self._auth_failing:
                # Once per failing spell, not once per retry: a wrong password or an untrusted
                # certificate stays wrong until someone fixes it.
                self._auth_failing = True
                log.warning("peer %d at %s:%d: %s (retrying)", self.peer_id, *self.address, exc)
            self._connecting = False
            refused = isinstance(exc, ConnectionRefusedError)
            self._connect_failures += 1
            backoff_ms = min(
                self.reconnect_backoff_max_ms,
                self.reconnect_backoff_ms * 2 ** min(self._connect_failures, 16),
            )
            # Kafka jitters the backoff by +-20% so peers do not reconnect in lockstep.
            self._next_connect_at = loop.time() + backoff_ms * self._rng.uniform(0.8, 1.2) / 1000
            log.debug("peer %d at %s:%d: connect failed: %s", self.peer_id, *self.address, exc)
            self._drop_connection("refused" if refused else "disconnected")
            return
        self._connecting = False
        self._connect_failures = 0
        self._transport = transport
        # Kafka's clients re-authenticate at 85-95% of the lifetime; this one moves to a new connection.
        self._rotate_at = loop.time() + lifetime_ms * 0.85 / 1000 if lifetime_ms > 0 else None
        for entry in list(self._in_flight.values()):
            if not entry.sent:
                self._write(entry)
        # Each answer is handled as its last byte arrives (in the loop's read callback).
        frames.deliver_to(self._on_frame)
        try:
            reason = await frames.closed
            if reason and self._transport is transport:
                log.warning("peer %d at %s:%d: %s; reconnecting", self.peer_id, *self.address, reason)
        finally:
            if self._transport is transport:
                self._drop_connection("disconnected")

    def _on_frame(self, frame: Frame) -> None:
        (correlation_id,) = _CORRELATION_ID.unpack_from(frame)
        answered = self._in_flight.pop(correlation_id, None)
        if answered is None:
            return  # answered after its timeout: already failed
        if answered.timer is not None:
            answered.timer.cancel()
        self.on_event(Answered(self.peer_id, correlation_id, answered.context, frame))


class RpcChannels:
    """The channels of one node, one per peer id, created on first use from an address book (which
    ``set_address`` updates: a broker's address comes from the metadata image)."""

    def __init__(
        self,
        addresses: dict[int, tuple[str, int]],
        on_event: Callable[[ChannelEvent], None],
        *,
        request_timeout_ms: int,
        rng: random.Random | None = None,
        security: ChannelSecurity | None = None,
        client_id: str = "pykraft",
    ) -> None:
        self.addresses = dict(addresses)
        self.on_event = on_event
        self.request_timeout_ms = request_timeout_ms
        self.security = security
        self.client_id = client_id
        self._rng = rng
        self._channels: dict[int, PeerChannel] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def send(self, peer_id: int, correlation_id: int, frame: bytes, context: object = None) -> None:
        channel = self._channels.get(peer_id)
        if channel is None:
            address = self.addresses.get(peer_id)
            if address is None:
                self.on_event(Failed(peer_id, correlation_id, context, "unknown peer"))
                return
            channel = PeerChannel(
                peer_id,
                address,
                self.on_event,
                request_timeout_ms=self.request_timeout_ms,
                rng=self._rng,
                security=self.security,
                client_id=self.client_id,
            )
            self._channels[peer_id] = channel
        channel.send(correlation_id, frame, context)

    def set_address(self, peer_id: int, address: tuple[str, int]) -> None:
        if self.addresses.get(peer_id) == address:
            return
        self.addresses[peer_id] = address
        channel = self._channels.pop(peer_id, None)
        if channel is not None:
            # The old address's connection goes; ``close`` waits for it.
            task = asyncio.get_running_loop().create_task(channel.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class PeerUnavailable(Exception):
    """A request got no answer (no address, refused, timeout, disconnect): retriable."""


class RpcClient:
    """Request/response over ``RpcChannels`` with kafka-python-style message objects:
    ``await client.call(peer_id, request, version)`` returns the decoded response or raises
    ``PeerUnavailable``. A broker's link to the controllers and its replica fetchers use it."""

    def __init__(
        self,
        addresses: dict[int, tuple[str, int]],
        *,
        client_id: str,
        request_timeout_ms: int,
        rng: random.Random | None = None,
        security: ChannelSecurity | None = None,
    ) -> None:
        self.client_id = client_id
        self.channels = RpcChannels(
            addresses,
            self._on_event,
            request_timeout_ms=request_timeout_ms,
            rng=rng,
            security=security,
            client_id=client_id,
        )
        self._correlation_ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[ChannelEvent]] = {}

    async def call(self, peer_id: int, request: Any, version: int) -> Any:
        frame = await self.call_for_frame(peer_id, request, version)
        response_class: Any = messages.response_class(request.API_KEY)
        return response_class.decode(frame, version=version, header=True)

    async def call_for_frame(self, peer_id: int, request: Any, version: int) -> Frame:
        """``call``, answered with the response frame undecoded (after its size): for a caller with
        its own decoder (the replica fetcher's, which does not copy the records)."""
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        request._header = None  # a forwarded request still carries its client's header
        request.API_VERSION = version
        request.with_header(correlation_id=correlation_id, client_id=self.client_id)
        frame = bytes(request.encode(header=True, framed=False))
        fut: asyncio.Future[ChannelEvent] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = fut
        try:
            self.channels.send(peer_id, correlation_id, frame)
            park()  # a forwarded request waits on another node: its queued.max.requests slot goes back
            event = await fut
        finally:
            self._waiting.pop(correlation_id, None)
        if not isinstance(event, Answered):
            raise PeerUnavailable(f"node {peer_id}: {event.reason}")
        return event.frame

    def _on_event(self, event: ChannelEvent) -> None:
        fut = self._waiting.get(event.correlation_id)
        if fut is not None and not fut.done():
            fut.set_result(event)

    async def close(self) -> None:
        await self.channels.close()
