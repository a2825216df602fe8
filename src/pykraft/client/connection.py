"""One asyncio connection to a broker: pipelined requests over kafka-python's client-side codec.

Requests are written in order and answered in order (Kafka answers a connection's requests in the order
it sent them); ``request()`` returns a future per request, so a caller can keep many in flight. A lost
connection fails every pending future with :class:`ConnectionLost`; the caller decides what to resend.

A :class:`ConnectionSecurity` adds TLS (Kafka's ``SSL``/``SASL_SSL``) and SASL PLAIN or SCRAM
(SaslHandshake v1 then SaslAuthenticate v2, KIP-152) before the connection is handed to its user, so the
command-line tools' ``--command-config`` works for the data plane too (issue 18).
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from pykraft.client.errors import ConnectionLost
from pykraft.security.sasl import SaslClient, SaslClientError

_SIZE = struct.Struct(">i")
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2


@dataclass(frozen=True, slots=True)
class ConnectionSecurity:
    """How to reach a secured listener: ``ssl_context`` for SSL and SASL_SSL; ``sasl_mechanism``
    (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) with its user for SASL_PLAINTEXT and SASL_SSL."""

    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""

    def __repr__(self) -> str:  # never the password
        return (
            f"ConnectionSecurity(tls={self.ssl_context is not None}, sasl={self.sasl_mechanism}, "
            f"user={self.username!r})"
        )


class Connection:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str,
        node_id: int = -1,
        security: ConnectionSecurity | None = None,
    ) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        self.client_id = client_id
        self.security = security
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: deque[tuple[int, Any, int, asyncio.Future[Any]]] = deque()
        self._correlation_id = 0
        self._read_task: asyncio.Task[None] | None = None
        self.closed = False

    async def connect(self, timeout_s: float) -> None:
        try:
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation (gh-86296).
            async with asyncio.timeout(timeout_s):
                context = self.security.ssl_context if self.security is not None else None
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, ssl=context, server_hostname=self.host if context else None
                )
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            self.closed = True
            raise ConnectionLost(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        if self.security is not None and self.security.sasl_mechanism is not None:
            try:
                await self._authenticate(self.security, timeout_s)
            except ConnectionLost:
                self.close("SASL authentication failed")
                raise

    async def _authenticate(self, security: ConnectionSecurity, timeout_s: float) -> None:
        mechanism = security.sasl_mechanism or ""
        handshake = await self.call(
            SaslHandshakeRequest(mechanism=mechanism),
            SaslHandshakeResponse,
            SASL_HANDSHAKE_VERSION,
            timeout_s,
        )
        if handshake.error_code:
            raise ConnectionLost(
                f"{self.host}:{self.port}: SASL mechanism {mechanism} refused "
                f"(the broker offers {', '.join(handshake.mechanisms)})"
            )
        try:
            client = SaslClient(mechanism, security.username, security.password)
            token: bytes | None = client.first_token()
            while token is not None:
                answer = await self.call(
                    SaslAuthenticateRequest(auth_bytes=token),
                    SaslAuthenticateResponse,
                    SASL_AUTHENTICATE_VERSION,
                    timeout_s,
                )
                if answer.error_code:
                    raise ConnectionLost(
                        f"{self.host}:{self.port}: SASL authentication failed: {answer.error_message}"
                    )
                token = client.next_token(bytes(answer.auth_bytes or b""))
        except (SaslClientError, ValueError) as exc:
            raise ConnectionLost(f"{self.host}:{self.port}: {exc}") from None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def request(self, request: Any, response_class: Any, version: int) -> asyncio.Future[Any]:
        """Send ``request`` at ``version``; the future resolves to the decoded response."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.closed or self._writer is None:
            fut.set_exception(ConnectionLost(f"connection to {self.host}:{self.port} is closed"))
            return fut
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        request._header = None
        request.API_VERSION = version
        request.with_header(correlation_id=self._correlation_id, client_id=self.client_id)
        self._pending.append((self._correlation_id, response_class, version, fut))
        self._writer.write(bytes(request.encode(header=True, framed=True)))
        return fut

    async def call(self, request: Any, response_class: Any, version: int, timeout_s: float) -> Any:
        fut = self.request(request, response_class, version)
        try:
            async with asyncio.timeout(timeout_s):
                return await fut
        except TimeoutError:
            self.close("request timed out")
            raise ConnectionLost(f"{type(request).__name__} to {self.host}:{self.port} timed out") from None

    async def _read_loop(self) -> None:
        assert self._reader is not None
        reason = "closed by the broker"
        try:
            while True:
                size = _SIZE.unpack(await self._reader.readexactly(4))[0]
                frame = await self._reader.readexactly(size)
                if not self._pending:
                    reason = "an answer nobody asked for"
                    break
                correlation_id, response_class, version, fut = self._pending.popleft()
                if _SIZE.unpack_from(frame)[0] != correlation_id:
                    reason = (
                        f"answer for correlation id {_SIZE.unpack_from(frame)[0]}, expected {correlation_id}"
                    )
                    if not fut.done():
                        fut.set_exception(ConnectionLost(reason))
                    break
                if not fut.done():
                    try:
                        fut.set_result(response_class.decode(frame, version=version, header=True))
                    except Exception as exc:  # a response that does not decode ends the connection
                        fut.set_exception(ConnectionLost(f"undecodable response: {exc}"))
                        reason = "undecodable response"
                        break
        except (asyncio.IncompleteReadError, OSError) as exc:
            reason = f"connection lost: {exc}"
        except asyncio.CancelledError:
            reason = "closed"
        self._fail_pending(reason)
        self.closed = True
        if self._writer is not None:
            self._writer.close()

    def _fail_pending(self, reason: str) -> None:
        while self._pending:
            _, _, _, fut = self._pending.popleft()
            if not fut.done():
                fut.set_exception(ConnectionLost(f"{self.host}:{self.port}: {reason}"))

    def close(self, reason: str = "closed") -> None:
        if self.closed and self._read_task is None:
            return
        self.closed = True
        self._fail_pending(reason)
        if self._writer is not None:
            self._writer.close()
        if self._read_task is not None and not self._read_task.done():
            self._read_task.cancel()
        self._read_task = None
