"""The Kafka listener: length-prefixed frames in, responses out, one connection at a time in order.

Connection limits as Kafka's SocketServer has them (issue 18): the listener's own limit
(``listener.name.<l>.max.connections``, else ``max.connections``), ``max.connections`` for the broker's
client listeners together (the inter-broker listener exempt, issue 27) and ``max.connections.per.ip``
(with ``max.connections.per.ip.overrides``, across the listeners too) close a connection over the
limit at once (Kafka's broker-wide limit makes the acceptor wait instead; here the client's reconnect
backoff does the waiting), and ``connections.max.idle.ms`` closes a connection that sent nothing for
that long while no request of it was in progress.

Kafka processes one request per connection at a time and answers in request order; clients pipeline
(librdkafka keeps up to 5 produce requests in flight), so requests are read ahead into the socket
buffer and handled sequentially. Frames are read with ``io.frame_reader.FrameReader`` (issue 29): a
produce request of a MiB is received straight into its own buffer, not copied three times through a
StreamReader. A frame larger than ``socket.request.max.bytes`` or one that does not parse closes that
connection with one log line; everyone else keeps being served.

Backpressure (issue 18). A connection has at most one request in progress: the next frame is read only
once the previous one is answered (Kafka mutes a channel the same way), so a pipelining client waits in
its own socket buffers, which fill (the connection stops reading once ``READ_AHEAD_BYTES`` of complete
requests wait) until TCP stops it. ``queued.max.requests`` bounds the requests in progress on the whole
listener: a request read when the bound is reached waits for a slot before it is handled (counted, and
timed as its queue time) and its connection reads nothing meanwhile; nothing is refused. A request that parks in a timed wait (a
long-polling Fetch, an acks=all produce, a controller write, a group join; ``io/waiting.park``) gives
its slot back, as Kafka's purgatory holds no request-queue slot, so parked requests never keep out the
one they wait for (a follower's Fetch, the next member's JoinGroup).

Client quotas (KIP-219): a handler that finds its client over a quota sets ``throttle_time_ms`` on the
connection; the response (which carries it) goes out at once, then nothing more is read from that
connection for that long, as Kafka mutes a throttled channel (io/quota_service.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from pykraft.core.errors import RemoteProtocolError
from pykraft.io.frame_reader import FrameReader
from pykraft.io.request_metrics import RequestMetrics
from pykraft.io.tls import ANONYMOUS, principal_of
from pykraft.io.waiting import set_park_hook
from pykraft.security.sasl import SaslSession

log = logging.getLogger("pykraft.server")

# A handler gets the request frame (without the 4-byte size, writable) and returns the framed
# response as chunks, or None when the request gets no response (Produce with acks=0).
Handler = Callable[[bytearray, "ConnectionInfo"], Awaitable[Sequence[bytes | bytearray | memoryview] | None]]

# A request header starts with the api key and version (int16 each): all the metrics read of a frame.
_API_KEY_VERSION = struct.Struct(">hh")
# A client that connects to an SSL listener and does not finish the handshake is dropped after this.
TLS_HANDSHAKE_TIMEOUT_S = 10.0


# What asyncio's acceptor reports when accept() fails with EMFILE/ENFILE/ENOBUFS/ENOMEM.
ACCEPT_OUT_OF_RESOURCE = "socket.accept() out of system resource"
# At most one line (and one release of idle descriptors) per this many seconds of failing accepts.
ACCEPT_SHORTAGE_REPORT_S = 1.0


# Response chunks at least this large go to the transport on their own rather than joined.
WRITE_UNJOINED_MIN_BYTES = 64 << 10
# A connection stops reading while this many bytes of complete requests wait behind the one in
# progress (what asyncio's StreamReader held before pausing, 2 MiB, halved).
READ_AHEAD_BYTES = 1 << 20
# Each connection's reused receive buffer: small requests (Metadata, Fetch, heartbeats) are parsed out
# of it, larger ones get a buffer of their own. Small, as a broker may hold many idle connections.
LISTENER_SCRATCH_BYTES = 4 << 10
# A response buffered beyond this waits for the socket before the next request is handled.
WRITE_BUFFER_DRAIN_BYTES = 4 << 20


def write_chunks(writer: asyncio.WriteTransport, chunks: Sequence[bytes | bytearray | memoryview]) -> None:
    """``writelines(chunks)`` without its copy: Python 3.11's writelines joins every chunk into one
    bytes first, so each record chunk of a Fetch answer (a follower's MiB, issue 29) was copied once
    more before the socket copied it; large chunks are written as they are (the transport sends at
    once what the socket takes), small ones joined between them."""
    small: list[bytes | bytearray | memoryview] = []
    for chunk in chunks:
        if len(chunk) < WRITE_UNJOINED_MIN_BYTES:
            small.append(chunk)
            continue
        if small:
            writer.write(b"".join(small))
            small = []
        writer.write(chunk)
    if small:
        writer.write(b"".join(small))


class AcceptShortageHandler:
    """The loop's exception handler while a node runs: accept() out of descriptors (issue 29).

    asyncio's selector loop already backs off as Kafka's Acceptor does (it stops watching the listener
    and resumes after ``asyncio.constants.ACCEPT_RETRY_DELAY``), but reports every failed accept of a
    tick (up to its backlog, 100). Here each episode is one log line and a call to ``release`` (close
    idle segment files) so the accepts that follow get a descriptor; every other report goes to the
    handler that was there before."""

    def __init__(self, loop: asyncio.AbstractEventLoop, release: Callable[[], bool]) -> None:
        self._loop = loop
        self._release = release
        self._previous = loop.get_exception_handler()
        self._last_report = float("-inf")
        self.failed_accepts = 0
        loop.set_exception_handler(self)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        if context.get("message") != ACCEPT_OUT_OF_RESOURCE:
            if self._previous is not None:
                self._previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        self.failed_accepts += 1
        now = loop.time()
        if now - self._last_report >= ACCEPT_SHORTAGE_REPORT_S:
            self._last_report = now
            released = self._release()
            log.warning(
                "accept() failed: %s; backing off, %s",
                context.get("exception"),
                "closed idle segment files" if released else "no idle segment file to close",
            )

    def uninstall(self) -> None:
        current: object = self._loop.get_exception_handler()
        if current is self:
            self._loop.set_exception_handler(self._previous)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Kafka's names: the listener's max.connections, max.connections.per.ip (+ overrides),
    connections.max.idle.ms; and the broker-wide max.connections, which Kafka's ConnectionQuotas does
    not apply to the inter-broker listener (brokers always get through)."""

    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    max_connections_per_ip_overrides: dict[str, int] = field(default_factory=dict)
    connections_max_idle_ms: int = 600_000
    broker_max_connections: int = 2**31 - 1
    inter_broker: bool = False

    def per_ip(self, ip: str) -> int:
        return self.max_connections_per_ip_overrides.get(ip, self.max_connections_per_ip)


class ConnectionCounts:
    """Open connections of the listeners that share it, in all and per client address: what the
    broker-wide max.connections and max.connections.per.ip are checked against (Kafka's ConnectionQuotas
    counts per broker, not per listener)."""

    __slots__ = ("total", "per_ip")

    def __init__(self) -> None:
        self.total = 0
        self.per_ip: dict[str, int] = {}

    def add(self, ip: str) -> None:
        self.total += 1
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1

    def remove(self, ip: str) -> None:
        self.total -= 1
        left = self.per_ip.get(ip, 1) - 1
        if left > 0:
            self.per_ip[ip] = left
        else:
            self.per_ip.pop(ip, None)


class ConnectionInfo:
    __slots__ = (
        "peer",
        "listener_name",
        "principal",
        "sasl",
        "close_after_response",
        "last_active",
        "busy",
        "holds_slot",
        "parked_at",
        "throttle_time_ms",
        "connection_id",
        "on_close",
    )

    def __init__(
        self, peer: str, listener_name: str, principal: str = ANONYMOUS, connection_id: str = ""
    ) -> None:
        self.peer = peer
        self.listener_name = listener_name
        # Who the client is: User:ANONYMOUS on PLAINTEXT, the certificate's subject with mutual TLS,
        # User:<name> once SASL authenticated it.
        self.principal = principal
        # The connection's SASL state on a SASL listener (the node's; None elsewhere).
        self.sasl: SaslSession | None = None
        # Send this response, then close (a failed SASL authentication).
        self.close_after_response = False
        # connections.max.idle.ms: when the last request arrived (loop time), and whether one is in
        # progress (a long poll is not idleness).
        self.last_active = 0.0
        self.busy = False
        # Its request in progress holds one of the listener's queued.max.requests slots (until it is
        # answered or parks).
        self.holds_slot = False
        # When the request in progress first parked (perf_counter), None while it has not: the time it
        # spent being handled, for the request_percentage quota, ends there.
        self.parked_at: float | None = None
        # KIP-219: set by the handler when the client is over a quota; the response goes out at once
        # and the connection is not read again for this long (Kafka mutes the channel).
        self.throttle_time_ms = 0
        # Unique among the node's connections ever (listener, peer and an index, as Kafka's
        # connection ids), and what to do when it closes, by who asked (Kafka's
        # ConnectionDisconnectListener: share sessions end with their connection).
        self.connection_id = connection_id
        self.on_close: dict[str, Callable[[], None]] = {}


class _ClientConnection(FrameReader):
    """One accepted connection: request frames read in place, handled by the server's task for it."""

    def __init__(self, server: KafkaServer) -> None:
        super().__init__(
            server.sasl_max_receive_bytes or server.socket_request_max_bytes,
            LISTENER_SCRATCH_BYTES,
            mutable=True,
            pause_at_bytes=READ_AHEAD_BYTES,
            keep_open_after_eof=server.ssl_context is None,
        )
        self._server = server
        self.task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.task = asyncio.get_running_loop().create_task(self._server._serve(self))


class KafkaServer:
    def __init__(
        self,
        handler: Handler,
        *,
        host: str,
        port: int,
        listener_name: str,
        socket_request_max_bytes: int,
        sasl_max_receive_bytes: int | None = None,
        ssl_context: ssl.SSLContext | None = None,
        limits: ConnectionLimits | None = None,
        counts: ConnectionCounts | None = None,
        queued_max_requests: int = 500,
        request_metrics: RequestMetrics | None = None,
    ) -> None:
        self.handler = handler
        self.limits = limits or ConnectionLimits()
        # Open connections of the listeners sharing the limits, and each connection's state (the idle
        # reaper's view).
        self._counts = counts or ConnectionCounts()
        self._infos: dict[asyncio.Task[None], tuple[ConnectionInfo, asyncio.Transport]] = {}
        self._reaper: asyncio.Task[None] | None = None
        # Connections closed for a limit (max.connections or max.connections.per.ip), and for idleness.
        self.refused_connections = 0
        self.refused_over_max_connections = 0
        self.refused_over_max_connections_per_ip = 0
        self.idle_closed_connections = 0
        # Connections accepted (within the limits) and ended, Kafka's connection-creation/close totals.
        self.accepted_connections = 0
        self.closed_connections = 0
        # queued.max.requests: slots held by requests in progress, requests waiting for one (their
        # futures, first come first served), and how many requests ever had to wait.
        self.queued_max_requests = queued_max_requests
        self.requests_in_progress = 0
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self.request_queue_waits = 0
        # Per-API counts and times (None: the metrics endpoint is off and nothing is timed).
        self.request_metrics = request_metrics
        # An SSL listener (issue 16): every connection is TLS; a failed handshake closes only it.
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.listener_name = listener_name
        self.socket_request_max_bytes = socket_request_max_bytes
        # A SASL listener's sasl.server.max.receive.size: the frame limit until the connection has
        # authenticated (None elsewhere), as Kafka's SaslServerAuthenticator reads.
        self.sasl_max_receive_bytes = sasl_max_receive_bytes
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._closing = False

    async def start(self) -> int:
        """Bind and listen; returns the bound port (useful with port 0)."""
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _ClientConnection(self),
            self.host,
            self.port,
            ssl=self.ssl_context,
            ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if self.ssl_context is not None else None,
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        self._reaper = asyncio.get_running_loop().create_task(
            self._close_idle(), name=f"idle-{self.listener_name}"
        )
        return self.port

    async def _close_idle(self) -> None:
        """connections.max.idle.ms: a few times per period, close connections that sent nothing for
        longer and have no request in progress (Kafka's Selector closes them the same way)."""
        idle_s = self.limits.connections_max_idle_ms / 1000
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(max(0.05, min(idle_s / 4, 10.0)))
            now = loop.time()
            for info, transport in list(self._infos.values()):
                if not info.busy and now - info.last_active > idle_s:
                    self.idle_closed_connections += 1
                    transport.abort()

    async def stop(self) -> None:
        """Stop listening and end every connection: a handler still running is cancelled, and a
        connection accepted during the stop closes before it reads anything."""
        self._closing = True
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
            self._reaper = None
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    @property
    def requests_waiting(self) -> int:
        """Requests read and waiting for a queued.max.requests slot (Kafka's RequestQueueSize)."""
        return sum(1 for fut in self._slot_waiters if not fut.done())

    def _release_slot(self) -> None:
        """A request finished or parked: its slot goes to the longest-waiting request, if any."""
        while self._slot_waiters:
            waiter = self._slot_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # handed over: requests_in_progress stays the same
                return
        self.requests_in_progress -= 1

    def _park(self, info: ConnectionInfo, task: asyncio.Task[None]) -> None:
        """The connection's request started a timed wait: its slot goes back (only the connection's own
        task parks it; tasks it spawned inherit the hook and must not)."""
        if asyncio.current_task() is task and info.parked_at is None:
            info.parked_at = time.perf_counter()
        if info.holds_slot and asyncio.current_task() is task:
            info.holds_slot = False
            self._release_slot()

    async def _wait_for_slot(self) -> None:
        """Wait until a slot is handed over; a cancelled wait hands on a slot it was just given."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._slot_waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release_slot()
            raise

    async def _serve(self, conn: _ClientConnection) -> None:
        transport = conn.transport
        assert transport is not None
        if self._closing:
            transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        peername = transport.get_extra_info("peername")
        ip = str(peername[0]) if peername else "?"
        peer = f"{ip}:{peername[1]}" if peername else "?"
        limits, counts = self.limits, self._counts
        over_max = len(self._connections) >= limits.max_connections or (
            not limits.inter_broker and counts.total >= limits.broker_max_connections
        )
        if over_max or counts.per_ip.get(ip, 0) >= limits.per_ip(ip):
            # Kafka's TooManyConnectionsException: this one is closed, the others go on.
            self.refused_connections += 1
            if over_max:
                self.refused_over_max_connections += 1
            else:
                self.refused_over_max_connections_per_ip += 1
            if self.refused_connections & (self.refused_connections - 1) == 0:  # 1st, 2nd, 4th, 8th...
                log.info(
                    "closing %s on listener %s: over max.connections=%d (broker-wide %d) or "
                    "max.connections.per.ip=%d (%d refused so far)",
                    peer,
                    self.listener_name,
                    limits.max_connections,
                    limits.broker_max_connections,
                    limits.per_ip(ip),
                    self.refused_connections,
                )
            transport.abort()
            return
        self._connections.add(task)
        self.accepted_connections += 1
        counts.add(ip)
        ssl_object = transport.get_extra_info("ssl_object")
        principal = principal_of(ssl_object.getpeercert()) if ssl_object is not None else ANONYMOUS
        info = ConnectionInfo(
            peer, self.listener_name, principal, f"{self.listener_name}-{peer}-{self.accepted_connections}"
        )
        loop = asyncio.get_running_loop()
        info.last_active = loop.time()
        self._infos[task] = (info, transport)
        # Timed waits in this task's requests give the request's slot back (io/waiting.park).
        set_park_hook(functools.partial(self._park, info, task))
        metrics = self.request_metrics
        perf_counter = time.perf_counter
        try:
            while True:
                try:
                    # A bytearray: the produce path rewrites base offsets in place.
                    frame = await conn.read_frame()
                except ConnectionError:
                    if conn.refused_frame:
                        log.warning(
                            "closing %s: %s, %s=%d",
                            peer,
                            conn.refused_frame,
                            "socket.request.max.bytes"
                            if conn.max_frame_bytes == self.socket_request_max_bytes
                            else "sasl.server.max.receive.size before authentication",
                            conn.max_frame_bytes,
                        )
                    return
                if conn.lost:
                    return  # requests read before a reset: nobody to answer
                assert isinstance(frame, bytearray)
                size = len(frame)
                info.busy = True
                info.parked_at = None
                started = perf_counter() if metrics is not None else 0.0
                queue_ms = 0.0
                try:
                    if self.requests_in_progress < self.queued_max_requests:
                        self.requests_in_progress += 1
                    else:
                        # Backpressure: this connection reads nothing until a slot is free.
                        self.request_queue_waits += 1
                        waited_from = perf_counter()
                        await self._wait_for_slot()
                        queue_ms = (perf_counter() - waited_from) * 1000
                    info.holds_slot = True
                    chunks = await self.handler(frame, info)
                    if info.sasl is not None and info.sasl.authenticated:
                        # Authenticated: requests up to socket.request.max.bytes from now on (a client
                        # sends its next request only once this answer is in).
                        conn.max_frame_bytes = self.socket_request_max_bytes
                except RemoteProtocolError as exc:
                    log.warning("closing %s: %s", peer, exc)
                    return
                finally:
                    if info.holds_slot:
                        info.holds_slot = False
                        self._release_slot()
                    info.busy = False
                    info.last_active = loop.time()
                if chunks:
                    write_chunks(transport, chunks)
                    if transport.get_write_buffer_size() > WRITE_BUFFER_DRAIN_BYTES:
                        await conn.drain()
                if metrics is not None and size >= 4:
                    api_key, api_version = _API_KEY_VERSION.unpack_from(frame)
                    metrics.record(api_key, api_version, (perf_counter() - started) * 1000, queue_ms)
                if info.throttle_time_ms > 0:
                    # KIP-219: the answer (carrying throttle_time_ms) is out; read nothing more of this
                    # client until its throttle time has passed (busy: the idle reaper leaves it alone).
                    throttle_s, info.throttle_time_ms = info.throttle_time_ms / 1000, 0
                    info.busy = True
                    await asyncio.sleep(throttle_s)
                    info.busy = False
                    info.last_active = loop.time()
                if info.close_after_response:
                    await conn.drain()
                    return
        except asyncio.CancelledError:
            pass
        except ConnectionError:
            pass
        except Exception:  # a bug of ours: log it, drop this connection, keep serving the others
            log.exception("closing %s after an internal error", peer)
        finally:
            self._connections.discard(task)
            self.closed_connections += 1
            self._infos.pop(task, None)
            counts.remove(ip)
            for on_close in info.on_close.values():
                try:
                    on_close()
                except Exception:  # a bug of ours: the connection is closed all the same
                    log.exception("after closing %s", peer)
            if self._closing:
                # Do not wait for a client that stopped reading to take what is buffered.
                transport.abort()
            else:
                transport.close()
