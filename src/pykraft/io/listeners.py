"""Every listener of ``listeners`` served (issue 27), as Kafka's SocketServer serves one acceptor per
listener: each with its own security protocol (``listener.security.protocol.map``), its own TLS and
SASL settings (``listener.name.<lowercase name>.<config>`` over the unprefixed key), its own
``max.connections`` (``listener.name.<l>.max.connections``) within the broker-wide one, and its own
``listener`` metrics label (the KafkaServer's name).

A broker registers every client listener as advertised (``advertised.listeners``, else the listener's
own address; the port actually bound when either says 0), and a client is answered with the endpoints
of the listener it connected through on every broker (Kafka's KRaftMetadataCache is asked with the
request's listener name): the handlers that name brokers read ``REQUEST_LISTENER``. Brokers reach each
other on ``inter.broker.listener.name``. The controller listener is served the same way, apart.

A listener that cannot be bound stops the start with one line naming it, never a silent skip.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import os
import secrets
import ssl
from collections.abc import Callable

from pykraft.broker.handlers import BrokerContext
from pykraft.core.config import Endpoint, NodeConfig
from pykraft.io.request_metrics import RequestMetrics
from pykraft.io.server import ConnectionCounts, ConnectionLimits, Handler, KafkaServer
from pykraft.io.tls import TlsConfigError, server_context
from pykraft.metadata.image import BrokerEndpoint
from pykraft.security.sasl import JaasConfigError, SaslAuthenticator, parse_plain_jaas
from pykraft.security.scram import ScramCredential, ScramMechanism

log = logging.getLogger("pykraft.listeners")

# SecurityProtocol.java's ids, as RegisterBrokerRecord and BrokerRegistration carry them.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

# The listener the request being handled came in on (set by the node for the APIs that name brokers).
REQUEST_LISTENER: contextvars.ContextVar[str] = contextvars.ContextVar("pykraft_request_listener")


class ListenerError(Exception):
    """One line naming the listener (and the key) that cannot be served."""


def listener_context(ctx: BrokerContext) -> BrokerContext:
    """The handlers' context for the request being handled: brokers as seen on its listener."""
    listener = REQUEST_LISTENER.get(None)
    if listener is None:
        return ctx
    return dataclasses.replace(ctx, cluster=ctx.cluster.on_listener(listener))


class Listeners:
    """The node's servers: one per client listener (a broker) and the controller listener (a
    controller), with the SASL authenticators of the SASL ones."""

    def __init__(
        self,
        config: NodeConfig,
        scram_credential: Callable[[str, ScramMechanism], ScramCredential | None],
        *,
        metrics_enabled: bool,
    ) -> None:
        self.config = config
        # SCRAM credentials as the latest image has them, read when an exchange starts.
        self._scram_credential = scram_credential
        self._metrics_enabled = metrics_enabled
        # Each SASL listener's PLAIN users and SCRAM lookup, by listener name.
        self.sasl_authenticators: dict[str, SaslAuthenticator] = {}
        self.client_servers: dict[str, KafkaServer] = {}
        self.controller_server: KafkaServer | None = None
        # Connections of every client listener together: the broker-wide limits count them.
        self._counts = ConnectionCounts()

    @property
    def servers(self) -> list[KafkaServer]:
        """Every server started (metrics, stop)."""
        servers = list(self.client_servers.values())
        if self.controller_server is not None:
            servers.append(self.controller_server)
        return servers

    def bound_port(self, endpoint: Endpoint) -> int:
        """The port a client listener listens on (the configured one before it is bound)."""
        server = self.client_servers.get(endpoint.listener_name)
        return server.port if server is not None else endpoint.port

    async def start_controller(self, handler: Handler) -> KafkaServer:
        config = self.config
        endpoint = config.controller_listener
        assert endpoint is not None
        self.controller_server = self._server(endpoint, handler, None)
        await self._bind(self.controller_server, endpoint)
        return self.controller_server

    async def start_clients(self, handler: Handler) -> None:
        """Bind every client listener, in the order ``listeners`` names them."""
        config = self.config
        for endpoint in config.client_listeners:
            name = endpoint.listener_name
            limits = ConnectionLimits(
                config.max_connections_of(name),
                config.max_connections_per_ip,
                config.max_connections_per_ip_overrides,
                config.connections_max_idle_ms,
                broker_max_connections=config.max_connections,
                inter_broker=name == config.inter_broker_listener_name,
            )
            server = self._server(endpoint, handler, limits)
            self.client_servers[name] = server
            await self._bind(server, endpoint)

    def advertised_endpoints(self) -> list[BrokerEndpoint]:
        """Every client listener as the broker registers it: advertised.listeners' host and port, the
        port actually bound when either says 0 (tests)."""
        config = self.config
        endpoints = []
        for endpoint in config.client_listeners:
            name = endpoint.listener_name
            advertised = config.advertised_for(name)
            port = (
                self.bound_port(endpoint) if advertised.port == 0 or endpoint.port == 0 else advertised.port
            )
            protocol = SECURITY_PROTOCOL_IDS[config.security_protocol_of(name)]
            endpoints.append(BrokerEndpoint(name, advertised.host, port, protocol))
        return endpoints

    def _server(self, endpoint: Endpoint, handler: Handler, limits: ConnectionLimits | None) -> KafkaServer:
        config = self.config
        return KafkaServer(
            handler,
            host=endpoint.host,
            port=endpoint.port,
            listener_name=endpoint.listener_name,
            socket_request_max_bytes=config.socket_request_max_bytes,
            sasl_max_receive_bytes=(
                config.sasl_server_max_receive_size if config.sasl_for(endpoint.listener_name) else None
            ),
            ssl_context=self._security(endpoint.listener_name),
            limits=limits,
            counts=self._counts if limits is not None else None,
            queued_max_requests=config.queued_max_requests,
            request_metrics=RequestMetrics() if self._metrics_enabled else None,
        )

    async def _bind(self, server: KafkaServer, endpoint: Endpoint) -> None:
        name = endpoint.listener_name
        try:
            port = await server.start()
        except OSError as exc:
            # asyncio words a failed bind at length; the errno's own text is the one line's end.
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise ListenerError(
                f"listeners: cannot listen on {endpoint.host}:{endpoint.port} for listener {name}: {reason}"
            ) from None
        log.info(
            "node %d: listener %s (%s) on %s:%d",
            self.config.node_id,
            name,
            self.config.security_protocol_of(name),
            endpoint.host,
            port,
        )

    def _security(self, listener_name: str) -> ssl.SSLContext | None:
        """A listener's TLS context (None: not SSL/SASL_SSL); a SASL listener's authenticator is kept
        in ``sasl_authenticators``."""
        config = self.config
        sasl = config.sasl_for(listener_name)
        if sasl is not None:
            plain_users: dict[str, str] = {}
            if "PLAIN" in sasl.enabled_mechanisms:
                try:
                    plain_users = parse_plain_jaas(sasl.plain_jaas_config or "", sasl.plain_jaas_key)
                except JaasConfigError as exc:
                    raise ListenerError(str(exc)) from None
            self.sasl_authenticators[listener_name] = SaslAuthenticator(
                plain_users, self._scram_credential, secrets.token_bytes(32), sasl.max_reauth_ms
            )
        if config.security_protocol_of(listener_name) not in ("SSL", "SASL_SSL"):
            return None
        try:
            return server_context(config.ssl_for(listener_name))
        except TlsConfigError as exc:
            raise ListenerError(str(exc)) from None
