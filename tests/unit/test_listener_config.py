"""Per-listener settings (issue 27): every client listener is a listener of its own, with Kafka's
listener.name.<lowercase name>.<config> keys over the unprefixed ones; the inter-broker listener is
picked as Kafka's KafkaConfig picks it. The connection limits of several listeners: each its own
max.connections, the broker-wide one across them, the inter-broker listener exempt. And the brokers a
client is told of: those of its own listener."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest

from pykraft.broker.handlers import (
    BrokerContext,
    BrokerView,
    ClusterView,
    PartitionView,
    TopicView,
    handle_metadata,
)
from pykraft.broker.producer_id_manager import ProducerIdManager
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.core.config import ConfigError, load_config
from pykraft.core.errors import ErrorCode
from pykraft.io.server import ConnectionCounts, ConnectionInfo, ConnectionLimits, KafkaServer
from pykraft.log.partition_log import LogConfig
from tests.unit.test_cluster_admin import _exchange
from tests.unit.test_producer_snapshot import MemoryOpener

_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";'
)
BASE = (
    "node.id=1\nprocess.roles=broker,controller\n"
    "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094,"
    "CONTROLLER://127.0.0.1:9095\n"
    "advertised.listeners=PLAINTEXT://broker.example:19092,SSL://broker.example:19093\n"
    "controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9095\n"
    "ssl.keystore.location=/common.pem\nsasl.enabled.mechanisms=SCRAM-SHA-512\n"
    "listener.name.sasl_ssl.ssl.keystore.location=/sasl-ssl.pem\n"
    "listener.name.sasl_ssl.ssl.client.auth=requested\n"
    "listener.name.sasl_ssl.ssl.truststore.location=/ca.pem\n"
    "listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n"
    f"listener.name.sasl_ssl.plain.sasl.jaas.config={_JAAS}\n"
    "max.connections=1000\nlistener.name.ssl.max.connections=10\n"
)


def test_every_client_listener_has_its_own_settings() -> None:
    config = load_config(BASE)
    assert [e.listener_name for e in config.client_listeners] == ["PLAINTEXT", "SSL", "SASL_SSL"]
    # listener.name.<l>.ssl.* wins; a listener without its own falls back to ssl.*.
    assert config.ssl_for("SASL_SSL").keystore_location == "/sasl-ssl.pem"
    assert config.ssl_for("SASL_SSL").client_auth == "requested"
    assert (config.ssl_for("SSL").keystore_location, config.ssl_for("SSL").client_auth) == (
        "/common.pem",
        "none",
    )
    sasl = config.sasl_for("SASL_SSL")
    assert sasl is not None and sasl.enabled_mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert config.sasl_for("SSL") is None and config.sasl_for("PLAINTEXT") is None
    # listener.name.<l>.max.connections; the others take max.connections.
    assert [config.max_connections_of(n) for n in ("PLAINTEXT", "SSL", "SASL_SSL")] == [1000, 10, 1000]
    # advertised.listeners per listener; one it does not name is advertised as it listens.
    assert config.advertised_for("SSL").host == "broker.example"
    assert (config.advertised_for("SASL_SSL").host, config.advertised_for("SASL_SSL").port) == (
        "127.0.0.1",
        9094,
    )
    assert not [key for key in config.ignored if key.startswith("listener.name.")]


def test_the_inter_broker_listener_is_kafkas_default_the_plaintext_one() -> None:
    config = load_config(BASE)
    assert config.inter_broker_listener_name == "PLAINTEXT"
    assert config.inter_broker_client.security_protocol == "PLAINTEXT"


@pytest.mark.parametrize(
    ("override", "listener", "protocol"),
    [
        ({"inter.broker.listener.name": "SSL"}, "SSL", "SSL"),
        ({"inter.broker.listener.name": "sasl_ssl"}, "SASL_SSL", "SASL_SSL"),
        # Kafka: the listener named after security.inter.broker.protocol.
        ({"security.inter.broker.protocol": "SASL_SSL"}, "SASL_SSL", "SASL_SSL"),
    ],
)
def test_the_inter_broker_listener_is_any_listener_named(
    override: dict[str, str], listener: str, protocol: str
) -> None:
    config = load_config(BASE, override)
    assert config.inter_broker_listener_name == listener
    assert config.inter_broker_client.security_protocol == protocol
    assert config.inter_broker_client.listener_name == listener


def test_a_sasl_inter_broker_listener_takes_the_nodes_own_credentials_from_its_prefixed_jaas() -> None:
    config = load_config(
        BASE,
        {
            "process.roles": "broker",
            "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="broker" password="scram-secret";'
            ),
        },
    )
    client = config.inter_broker_client
    assert (client.listener_name, client.sasl_mechanism, client.username, client.password) == (
        "SASL_SSL",
        "SCRAM-SHA-256",
        "broker",
        "scram-secret",
    )


@pytest.mark.parametrize(
    ("override", "key"),
    [
        (
            {"inter.broker.listener.name": "SSL", "security.inter.broker.protocol": "SSL"},
            "inter.broker.listener.name",
        ),
        ({"inter.broker.listener.name": "CONTROLLER"}, "inter.broker.listener.name"),
        ({"security.inter.broker.protocol": "SASL_PLAINTEXT"}, "security.inter.broker.protocol"),
        # Several listeners, none named PLAINTEXT and no choice made: Kafka refuses too.
        (
            {
                "listeners": "EXTERNAL://127.0.0.1:9092,INTERNAL://127.0.0.1:9093,CONTROLLER://127.0.0.1:9095",
                "advertised.listeners": "",
                "listener.security.protocol.map": "EXTERNAL:SSL,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
            },
            "inter.broker.listener.name",
        ),
        ({"listener.name.ssl.max.connections": "-1"}, "listener.name.ssl.max.connections"),
    ],
)
def test_inter_broker_and_listener_mistakes_are_one_line_errors(override: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(BASE, override)
    message = str(excinfo.value)
    assert message.startswith(key + ":"), message
    assert "\n" not in message


def test_connection_limits_per_listener_and_broker_wide() -> None:
    """Listener A allows 2, the broker 3 in all: A's third connection is refused for A's limit, B's
    second for the broker's; the inter-broker listener still gets one in (Kafka's ConnectionQuotas)."""

    async def test() -> None:
        async def handler(frame: bytearray, conn: ConnectionInfo) -> Sequence[bytes]:
            return []

        counts = ConnectionCounts()

        def server(name: str, listener_max: int, inter_broker: bool = False) -> KafkaServer:
            limits = ConnectionLimits(listener_max, broker_max_connections=3, inter_broker=inter_broker)
            return KafkaServer(
                handler,
                host="127.0.0.1",
                port=0,
                listener_name=name,
                socket_request_max_bytes=1 << 20,
                limits=limits,
                counts=counts,
            )

        servers = {"A": server("A", 2), "B": server("B", 10), "INTERNAL": server("INTERNAL", 10, True)}
        for s in servers.values():
            await s.start()
        opened: list[socket.socket] = []

        async def connect(name: str) -> None:
            before = servers[name].accepted_connections + servers[name].refused_connections
            sock = socket.create_connection(("127.0.0.1", servers[name].port))
            opened.append(sock)
            while servers[name].accepted_connections + servers[name].refused_connections == before:
                await asyncio.sleep(0.005)

        try:
            for name in ("A", "A", "A", "B", "B", "INTERNAL"):
                await connect(name)
            assert [(s.accepted_connections, s.refused_over_max_connections) for s in servers.values()] == [
                (2, 1),
                (1, 1),
                (1, 0),
            ]
            assert counts.total == 4
        finally:
            for sock in opened:
                sock.close()
            for s in servers.values():
                await s.stop()

    asyncio.run(asyncio.wait_for(test(), 10))


def _two_listener_ctx() -> BrokerContext:
    """Brokers 1 and 2 on EXTERNAL, broker 1 also on INTERNAL; broker 2 leads the topic's partition."""

    def on(name: str, *ids: int) -> tuple[BrokerView, ...]:
        return tuple(BrokerView(i, f"{name.lower()}-{i}", 9000 + i) for i in ids)

    external, internal = on("EXTERNAL", 1, 2), on("INTERNAL", 1)
    topic = TopicView("t", uuid.uuid5(uuid.NAMESPACE_DNS, "t"), (PartitionView(0, 2, 5, (1, 2), (1, 2)),))
    cluster = ClusterView(
        "cluster-xyz",
        1,
        internal,
        {"t": topic},
        listeners={"EXTERNAL": (external, ()), "INTERNAL": (internal, ())},
    )
    return BrokerContext(
        node_id=1,
        cluster=cluster,
        replicas=ReplicaManager(MemoryOpener(), LogConfig(), producer_id_expiration_ms=60_000),
        producer_ids=ProducerIdManager(1),
        auto_create_topics_enable=False,
    )


def _metadata(ctx: BrokerContext) -> Any:
    return _exchange(MetadataRequest[9](topics=[("t", {})]), 9, lambda r, v: handle_metadata(r, v, ctx))


def test_metadata_answers_with_the_brokers_of_the_clients_listener() -> None:
    ctx = _two_listener_ctx()
    external = _metadata(dataclasses.replace(ctx, cluster=ctx.cluster.on_listener("EXTERNAL")))
    assert [(b[0], b[1], b[2]) for b in external.brokers] == [
        (1, "external-1", 9001),
        (2, "external-2", 9002),
    ]
    assert [(p[0], p[2]) for p in external.topics[0][3]] == [(ErrorCode.NONE, 2)]
    # Kafka's KRaftMetadataCache: the leader is live but has no endpoint on this listener.
    internal = _metadata(dataclasses.replace(ctx, cluster=ctx.cluster.on_listener("INTERNAL")))
    assert [(b[0], b[1]) for b in internal.brokers] == [(1, "internal-1")]
    assert [(p[0], p[2]) for p in internal.topics[0][3]] == [(ErrorCode.LISTENER_NOT_FOUND, -1)]


def test_a_fenced_broker_is_fenced_on_every_listener() -> None:
    view = _two_listener_ctx().cluster.fence(1)
    assert [b.node_id for b in view.on_listener("EXTERNAL").brokers] == [2]
    assert [b.node_id for b in view.on_listener("EXTERNAL").fenced_brokers] == [1]
    assert view.on_listener("INTERNAL").brokers == () and view.brokers == ()
