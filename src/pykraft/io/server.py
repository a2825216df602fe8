"""The Kafka listener: length-prefixed frames in, responses out, one connection at a time in order.

Connection limits as Kafka's SocketServer has them (issue 18): ``max.connections`` for the listener and
``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``) close a connection over the
limit at once (Kafka's broker-wide limit makes the acceptor wait instead; here the client's reconnect
backoff does the waiting), and ``connections.max.idle.ms`` closes a connection that sent nothing for
that long while no request of it was in progress.

Kafka processes one request per connection at a time and answers in request order; clients pipeline
(librdkafka keeps up to 5 produce requests in flight), so requests are read ahead into the socket
buffer and handled sequentially. A frame larger than ``socket.request.max.bytes`` or one that does not
parse closes that connection with one log line; everyone else keeps being served.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from pykraft.core.errors import RemoteProtocolError
from pykraft.io.tls import ANONYMOUS, principal_of
from pykraft.security.sasl import SaslSession

log = logging.getLogger("pykraft.server")

# A handler gets the request frame (without the 4-byte size, writable) and returns the framed
# response as chunks, or None when the request gets no response (Produce with acks=0).
Handler = Callable[[bytearray, "ConnectionInfo"], Awaitable[Sequence[bytes | bytearray | memoryview] | None]]

_SIZE = struct.Struct(">i")
# A client that connects to an SSL listener and does not finish the handshake is dropped after this.
TLS_HANDSHAKE_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Kafka's names: max.connections, max.connections.per.ip (+ overrides), connections.max.idle.ms."""

    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    max_connections_per_ip_overrides: dict[str, int] = field(default_factory=dict)
    connections_max_idle_ms: int = 600_000

    def per_ip(self, ip: str) -> int:
        return self.max_connections_per_ip_overrides.get(ip, self.max_connections_per_ip)


class ConnectionInfo:
    __slots__ = ("peer", "listener_name", "principal", "sasl", "close_after_response", "last_active", "busy")

    def __init__(self, peer: str, listener_name: str, principal: str = ANONYMOUS) -> None:
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


class KafkaServer:
    def __init__(
        self,
        handler: Handler,
        *,
        host: str,
        port: int,
        listener_name: str,
        socket_request_max_bytes: int,
        ssl_context: ssl.SSLContext | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self.handler = handler
        self.limits = limits or ConnectionLimits()
        # Open connections per client address, and each connection's state (the idle reaper's view).
        self._per_ip: dict[str, int] = {}
        self._infos: dict[asyncio.Task[None], tuple[ConnectionInfo, asyncio.StreamWriter]] = {}
        self._reaper: asyncio.Task[None] | None = None
        # Connections closed for a limit, and for idleness (for logs and, later, metrics).
        self.refused_connections = 0
        self.idle_closed_connections = 0
        # An SSL listener (issue 16): every connection is TLS; a failed handshake closes only it.
        self.ssl_context = ssl_context
        self.host = host
        self.port = port
        self.listener_name = listener_name
        self.socket_request_max_bytes = socket_request_max_bytes
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._closing = False

    async def start(self) -> int:
        """Bind and listen; returns the bound port (useful with port 0)."""
        self._server = await asyncio.start_server(
            self._serve,
            self.host,
            self.port,
            limit=1 << 20,
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
            for info, writer in list(self._infos.values()):
                if not info.busy and now - info.last_active > idle_s:
                    self.idle_closed_connections += 1
                    writer.transport.abort()

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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        peername = writer.get_extra_info("peername")
        ip = str(peername[0]) if peername else "?"
        peer = f"{ip}:{peername[1]}" if peername else "?"
        if len(self._connections) >= self.limits.max_connections or self._per_ip.get(
            ip, 0
        ) >= self.limits.per_ip(ip):
            # Kafka's TooManyConnectionsException: this one is closed, the others go on.
            self.refused_connections += 1
            if self.refused_connections & (self.refused_connections - 1) == 0:  # 1st, 2nd, 4th, 8th...
                log.info(
                    "closing %s: over max.connections=%d or max.connections.per.ip=%d (%d refused so far)",
                    peer,
                    self.limits.max_connections,
                    self.limits.per_ip(ip),
                    self.refused_connections,
                )
            writer.transport.abort()
            return
        self._connections.add(task)
        self._per_ip[ip] = self._per_ip.get(ip, 0) + 1
        ssl_object = writer.get_extra_info("ssl_object")
        principal = principal_of(ssl_object.getpeercert()) if ssl_object is not None else ANONYMOUS
        info = ConnectionInfo(peer, self.listener_name, principal)
        loop = asyncio.get_running_loop()
        info.last_active = loop.time()
        self._infos[task] = (info, writer)
        try:
            while True:
                try:
                    size_bytes = await reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                (size,) = _SIZE.unpack(size_bytes)
                if size < 0 or size > self.socket_request_max_bytes:
                    log.warning(
                        "closing %s: frame of %d bytes exceeds socket.request.max.bytes=%d",
                        peer,
                        size,
                        self.socket_request_max_bytes,
                    )
                    return
                try:
                    # bytearray: the produce path rewrites base offsets in place.
                    frame = bytearray(await reader.readexactly(size))
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                info.busy = True
                try:
                    chunks = await self.handler(frame, info)
                except RemoteProtocolError as exc:
                    log.warning("closing %s: %s", peer, exc)
                    return
                finally:
                    info.busy = False
                    info.last_active = loop.time()
                if chunks:
                    writer.writelines(chunks)
                    if writer.transport.get_write_buffer_size() > (4 << 20):
                        await writer.drain()
                if info.close_after_response:
                    await writer.drain()
                    return
        except asyncio.CancelledError:
            pass
        except ConnectionError:
            pass
        except Exception:  # a bug of ours: log it, drop this connection, keep serving the others
            log.exception("closing %s after an internal error", peer)
        finally:
            self._connections.discard(task)
            self._infos.pop(task, None)
            left = self._per_ip.get(ip, 1) - 1
            if left > 0:
                self._per_ip[ip] = left
            else:
                self._per_ip.pop(ip, None)
            if self._closing:
                # Do not wait for a client that stopped reading to take what is buffered.
                writer.transport.abort()
            else:
                writer.close()
