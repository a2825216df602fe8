"""The Kafka listener: length-prefixed frames in, responses out, one connection at a time in order.

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


class ConnectionInfo:
    __slots__ = ("peer", "listener_name", "principal", "sasl", "close_after_response")

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
    ) -> None:
        self.handler = handler
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
        return self.port

    async def stop(self) -> None:
        """Stop listening and end every connection: a handler still running is cancelled, and a
        connection accepted during the stop closes before it reads anything."""
        self._closing = True
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
        self._connections.add(task)
        peername = writer.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        ssl_object = writer.get_extra_info("ssl_object")
        principal = principal_of(ssl_object.getpeercert()) if ssl_object is not None else ANONYMOUS
        info = ConnectionInfo(peer, self.listener_name, principal)
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
                try:
                    chunks = await self.handler(frame, info)
                except RemoteProtocolError as exc:
                    log.warning("closing %s: %s", peer, exc)
                    return
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
            if self._closing:
                # Do not wait for a client that stopped reading to take what is buffered.
                writer.transport.abort()
            else:
                writer.close()
