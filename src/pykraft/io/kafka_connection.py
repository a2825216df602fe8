"""A small blocking Kafka connection for command-line tools, benchmarks and tests.

Requests and responses go through kafka-python's codec (client side); every failure is a
:class:`BrokerConnectionError` with one line for the user.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

DEFAULT_TIMEOUT_S = 10.0


class BrokerConnectionError(Exception):
    """One line for the user: what failed and where."""


def parse_host_port(text: str, flag: str = "--bootstrap-server") -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise BrokerConnectionError(f"{flag}: {text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


class BrokerConnection:
    def __init__(
        self, host: str, port: int, *, client_id: str = "pykraft", timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise BrokerConnectionError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation_id = 0

    @classmethod
    def to(cls, address: str, **kwargs: Any) -> BrokerConnection:
        return cls(*parse_host_port(address), **kwargs)

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, request: Any, version: int) -> int:
        """Send a request; returns its correlation id."""
        self.correlation_id += 1
        request.API_VERSION = version
        request.with_header(correlation_id=self.correlation_id, client_id=self.client_id)
        try:
            self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        except OSError as exc:
            raise BrokerConnectionError(f"request failed: {exc.strerror or exc}") from None
        return self.correlation_id

    def receive_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._recv(4))
        return self._recv(size)

    def request(self, request: Any, response_class: Any, version: int) -> Any:
        correlation_id = self.send(request, version)
        response = response_class.decode(self.receive_frame(), version=version, header=True)
        if response.header.correlation_id != correlation_id:
            raise BrokerConnectionError(
                f"response correlation id {response.header.correlation_id} != request {correlation_id}"
            )
        return response

    def _recv(self, size: int) -> bytes:
        buf = bytearray()
        while len(buf) < size:
            try:
                chunk = self.sock.recv(size - len(buf))
            except OSError as exc:
                raise BrokerConnectionError(f"request failed: {exc.strerror or exc}") from None
            if not chunk:
                raise BrokerConnectionError("the broker closed the connection")
            buf += chunk
        return bytes(buf)
