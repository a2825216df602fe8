"""A small blocking Kafka connection for command-line tools, benchmarks and tests.

Requests and responses go through kafka-python's codec (client side); every failure is a
:class:`BrokerConnectionError` with one line for the user.
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from pykraft.core.config import ConfigError, jaas_options, parse_properties
from pykraft.security.sasl import SaslClient, SaslClientError

DEFAULT_TIMEOUT_S = 10.0


class BrokerConnectionError(Exception):
    """One line for the user: what failed and where."""


class BrokerUnreachableError(BrokerConnectionError):
    """The TCP connection itself failed (refused, reset, timed out): worth another try, unlike a
    failed TLS handshake or login."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a tool connects: Kafka's client properties (``--command-config``): ``security.protocol``,
    ``sasl.mechanism``, the user from ``sasl.jaas.config`` (or librdkafka's ``sasl.username`` /
    ``sasl.password``), and ``ssl.truststore.location`` / ``ssl.ca.location`` (PEM). Mutual TLS: Kafka's
    PEM keystore ``ssl.keystore.location`` (the certificate chain and the key in one file) or librdkafka's
    ``ssl.certificate.location`` and ``ssl.key.location``, with ``ssl.key.password`` for an encrypted key."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: str | None = None

    def __repr__(self) -> str:
        return (
            f"ClientSecurity({self.security_protocol}, {self.sasl_mechanism}, user={self.username!r}, "
            f"ca={self.ca_location!r})"
        )

    @classmethod
    def from_file(cls, path: str) -> ClientSecurity:
        """A ``--command-config`` file (Kafka's client properties)."""
        try:
            with open(path, encoding="utf-8") as f:
                props = parse_properties(f.read())
        except OSError as exc:
            raise BrokerConnectionError(f"--command-config: cannot read {path}: {exc.strerror}") from None
        except ConfigError as exc:
            raise BrokerConnectionError(f"--command-config: {exc}") from None
        return cls.from_properties(props, f"--command-config {path}")

    @classmethod
    def from_properties(cls, props: dict[str, str], source: str) -> ClientSecurity:
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise BrokerConnectionError(f"{source}: security.protocol {protocol!r} is not supported")
        username, password = props.get("sasl.username"), props.get("sasl.password")
        jaas = props.get("sasl.jaas.config")
        if jaas is not None:
            options = jaas_options(jaas)
            username, password = options.get("username"), options.get("password")
        if protocol.startswith("SASL_") and (not username or password is None):
            raise BrokerConnectionError(f"{source}: SASL needs a username and password (sasl.jaas.config)")
        keystore_type = props.get("ssl.keystore.type", "PEM").strip().upper()
        keystore = props.get("ssl.keystore.location")
        if keystore is not None and keystore_type != "PEM":
            raise BrokerConnectionError(
                f"{source}: ssl.keystore.type {keystore_type} is not supported (PEM is)"
            )
        return cls(
            protocol,
            props.get("sasl.mechanism", "PLAIN").strip().upper(),
            username,
            password,
            props.get("ssl.truststore.location") or props.get("ssl.ca.location"),
            keystore or props.get("ssl.certificate.location"),
            keystore or props.get("ssl.key.location"),
            props.get("ssl.key.password"),
        )


def parse_host_port(text: str, flag: str = "--bootstrap-server") -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise BrokerConnectionError(f"{flag}: {text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


class BrokerConnection:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "pykraft",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        security: ClientSecurity | None = None,
    ) -> None:
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise BrokerUnreachableError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock: socket.socket = sock
        self.client_id = client_id
        self.correlation_id = 0
        if security is not None and security.security_protocol in ("SSL", "SASL_SSL"):
            context = ssl.create_default_context(cafile=security.ca_location)
            try:
                if security.certificate_location:
                    context.load_cert_chain(
                        security.certificate_location, security.key_location, security.key_password
                    )
                self.sock = context.wrap_socket(sock, server_hostname=host)
            except (OSError, ssl.SSLError) as exc:
                sock.close()
                raise BrokerConnectionError(f"TLS to {host}:{port} failed: {exc}") from None
        if security is not None and security.security_protocol.startswith("SASL_"):
            try:
                self._authenticate(security)
            except BrokerConnectionError:
                self.sock.close()
                raise

    def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1 then SaslAuthenticate (KIP-152): PLAIN, or SCRAM-SHA-256/512."""
        mechanism = security.sasl_mechanism
        handshake = self.request(SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse, 1)
        if handshake.error_code:
            raise BrokerConnectionError(
                f"SASL mechanism {mechanism} refused (the broker offers {', '.join(handshake.mechanisms)})"
            )
        try:
            client = SaslClient(mechanism, security.username or "", security.password or "")
            token: bytes | None = client.first_token()
            while token is not None:
                token = client.next_token(self._sasl_step(token))
        except (SaslClientError, ValueError) as exc:
            raise BrokerConnectionError(str(exc)) from None

    def _sasl_step(self, token: bytes) -> bytes:
        response = self.request(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse, 2)
        if response.error_code:
            raise BrokerConnectionError(f"SASL authentication failed: {response.error_message}")
        return bytes(response.auth_bytes or b"")

    @classmethod
    def to(cls, address: str, **kwargs: Any) -> BrokerConnection:
        """A connection to the first server of a ``--bootstrap-server`` list (``h1:p1,h2:p2``, as
        Kafka's tools take it) that answers."""
        servers = [parse_host_port(server) for server in address.split(",") if server.strip()]
        if not servers:
            raise BrokerConnectionError(f"--bootstrap-server: {address!r} is not HOST:PORT")
        for host, port in servers[:-1]:
            try:
                return cls(host, port, **kwargs)
            except BrokerConnectionError:
                continue
        return cls(*servers[-1], **kwargs)

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
