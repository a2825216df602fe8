"""server.properties parsing: Kafka's names and samples, one-line errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.core.config import DEFAULT_PROPERTIES, ConfigError, load_config, parse_properties

DATA = Path(__file__).resolve().parent.parent / "data"


def test_embedded_default_is_the_single_node_server() -> None:
    config = load_config(DEFAULT_PROPERTIES)
    assert config.node_id == 1
    assert config.process_roles == ("broker", "controller")
    assert (config.client_listener.host, config.client_listener.port) == ("127.0.0.1", 9092)
    assert config.controller_quorum_voters == {1: ("127.0.0.1", 9093)}
    assert config.log_dirs == ("./data",) and config.metadata_log_dir == "./data"
    assert config.ignored == ()


@pytest.mark.parametrize("sample", ["kafka-3.9-kraft-server.properties", "kafka-4.0-server.properties"])
def test_kafkas_sample_configs_load_and_report_what_is_ignored(sample: str) -> None:
    config = load_config((DATA / sample).read_text())
    assert config.node_id == 1
    assert config.client_listener.listener_name == "PLAINTEXT"
    assert config.client_listener.port == 9092
    assert config.advertised_for("PLAINTEXT").host == "localhost"
    assert config.controller_quorum_voters[1][1] == 9093
    assert config.log_dirs == ("/tmp/kraft-combined-logs",)
    assert config.log_retention_ms == 168 * 3_600_000
    assert "num.network.threads" in config.ignored
    assert "log.dirs" not in config.ignored


def test_overrides_win() -> None:
    config = load_config(DEFAULT_PROPERTIES, {"num.partitions": "4", "log.dirs": "/x,/y"})
    assert config.num_partitions == 4
    assert config.log_dirs == ("/x", "/y")


def test_properties_syntax() -> None:
    text = "# comment\n! also\na=1\nb : two\nc=long\\\n   value\nempty=\n"
    assert parse_properties(text) == {"a": "1", "b": "two", "c": "longvalue", "empty": ""}


_PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b" user_a="b";'
)


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ({"num.partitions": "many"}, "num.partitions"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"node.id": "-3"}, "node.id"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
        ({"listeners": "PLAINTEXT://127.0.0.1:notaport"}, "listeners"),
        ({"listeners": "127.0.0.1:9092"}, "listeners"),
        ({"listeners": "SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}, "ssl.keystore.location"),
        (
            {"listeners": "SASL_PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"},
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        ({"listeners": "KERBEROS://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}, "listeners"),
        ({"process.roles": "zookeeper"}, "process.roles"),
        ({"controller.quorum.voters": "2@127.0.0.1:9093"}, "controller.quorum.voters"),
        ({"controller.quorum.voters": "one@x"}, "controller.quorum.voters"),
        ({"socket.request.max.bytes": "1e9"}, "socket.request.max.bytes"),
        ({"log.segment.bytes": "10"}, "log.segment.bytes"),
        # Security between the nodes (issue 16).
        (
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
                "listener.name.controller.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            },
            "listener.name.controller.sasl.enabled.mechanisms",
        ),
        (
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
                "sasl.jaas.config": _PLAIN_JAAS,
                "sasl.mechanism.controller.protocol": "SCRAM-SHA-256",
            },
            "sasl.mechanism.controller.protocol",
        ),
        (
            {
                "process.roles": "broker",
                "listener.security.protocol.map": "PLAINTEXT:SASL_SSL,CONTROLLER:PLAINTEXT",
                "ssl.keystore.location": "/k.pem",
                "listener.name.plaintext.plain.sasl.jaas.config": _PLAIN_JAAS.replace(
                    'username="a" password="b" ', ""
                ),
            },
            "listener.name.plaintext.plain.sasl.jaas.config",
        ),
        ({"inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name"),
        ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_key(override: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        load_config(DEFAULT_PROPERTIES, override)
    message = str(excinfo.value)
    assert message.startswith(names + ":")
    assert "\n" not in message


def test_quorum_properties_take_kafkas_names_and_defaults() -> None:
    base = (
        "node.id=2\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:19094\n"
        "controller.quorum.voters=1@127.0.0.1:19093,2@127.0.0.1:19094,3@127.0.0.1:19095\n"
    )
    config = load_config(base)
    assert config.controller_quorum_voters[3] == ("127.0.0.1", 19095)
    assert (config.controller_quorum_election_timeout_ms, config.controller_quorum_fetch_timeout_ms) == (
        1000,
        2000,
    )
    assert (config.controller_quorum_request_timeout_ms, config.metadata_max_idle_interval_ms) == (2000, 500)
    assert config.broker_session_timeout_ms == 9000 and config.is_controller and not config.is_broker
    tuned = load_config(base + "controller.quorum.election.timeout.ms=300\nbroker.session.timeout.ms=1500\n")
    assert (tuned.controller_quorum_election_timeout_ms, tuned.broker_session_timeout_ms) == (300, 1500)
    with pytest.raises(ConfigError, match=r"^controller.quorum.request.timeout.ms: 400 must be above"):
        load_config(base + "controller.quorum.request.timeout.ms=400\n")


def test_bootstrap_servers_without_voters__one_controller_is_standalone__several_are_dynamic() -> None:
    lone = "node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:19093\n"
    config = load_config(lone + "controller.quorum.bootstrap.servers=127.0.0.1:19093\n")
    assert config.controller_quorum_voters == {1: ("127.0.0.1", 19093)} and not config.dynamic_quorum
    assert config.controller_quorum_bootstrap_servers == (("127.0.0.1", 19093),)
    # KIP-853: several servers and no static voters: the voter set is the metadata log's.
    dynamic = load_config(lone + "controller.quorum.bootstrap.servers=h1:1,h2:2,h3:3\n")
    assert dynamic.dynamic_quorum and dynamic.controller_quorum_voters == {}
    assert dynamic.controller_quorum_bootstrap_servers == (("h1", 1), ("h2", 2), ("h3", 3))
    broker = "node.id=101\nprocess.roles=broker\nlisteners=PLAINTEXT://127.0.0.1:19092\n"
    assert load_config(broker + "controller.quorum.bootstrap.servers=h1:1\n").dynamic_quorum
    with pytest.raises(ConfigError, match=r"^controller.quorum.voters: empty"):
        load_config(broker)
    with pytest.raises(ConfigError, match=r"^controller.quorum.bootstrap.servers: 'nope' is not host:port"):
        load_config(
            lone + "controller.quorum.voters=1@127.0.0.1:19093\ncontroller.quorum.bootstrap.servers=nope\n"
        )


def test_a_node_takes_its_own_credentials_for_the_listeners_it_connects_to() -> None:
    config = load_config(
        DEFAULT_PROPERTIES,
        {
            "process.roles": "broker",
            "listeners": "SASL_SSL://127.0.0.1:9092",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
            "ssl.keystore.location": "/k.pem",
            "listener.name.controller.plain.sasl.jaas.config": _PLAIN_JAAS,
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="broker" password="p\\"w";'
            ),
        },
    )
    assert (config.controller_client.security_protocol, config.controller_client.sasl_mechanism) == (
        "SASL_SSL",
        "PLAIN",
    )
    assert (config.controller_client.username, config.controller_client.password) == ("a", "b")
    inter_broker = config.inter_broker_client
    assert (inter_broker.sasl_mechanism, inter_broker.username, inter_broker.password) == (
        "SCRAM-SHA-512",
        "broker",
        'p"w',
    )
    assert config.sasl_for("SASL_SSL") is not None and config.sasl_for("CONTROLLER") is None
    assert 'p"w' not in repr(config) and "password='b'" not in repr(config)
    assert not config.ignored


def test_listener_prefixed_ssl_settings_win_over_the_global_ones() -> None:
    config = load_config(
        DEFAULT_PROPERTIES,
        {
            "listeners": "SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL",
            "ssl.keystore.location": "/etc/node.pem",
            "ssl.truststore.location": "/etc/ca.pem",
            "listener.name.controller.ssl.keystore.location": "/etc/controller.pem",
            "listener.name.controller.ssl.client.auth": "required",
            "listener.name.ssl.ssl.key.password": "only-for-ssl",
        },
    )
    clients, controllers = config.ssl_for("SSL"), config.ssl_for("CONTROLLER")
    assert (clients.keystore_location, clients.key_password, clients.client_auth) == (
        "/etc/node.pem",
        "only-for-ssl",
        "none",
    )
    assert (controllers.keystore_location, controllers.key_password, controllers.client_auth) == (
        "/etc/controller.pem",
        None,
        "required",
    )
    assert controllers.truststore_location == "/etc/ca.pem"
    assert config.controller_client.uses_tls and config.controller_client.listener_name == "CONTROLLER"
    assert not config.ignored
    with pytest.raises(ConfigError, match=r"^listener\.name\.controller\.ssl\.client\.auth: 'maybe'"):
        load_config(
            DEFAULT_PROPERTIES,
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
                "ssl.keystore.location": "/k.pem",
                "listener.name.controller.ssl.client.auth": "maybe",
            },
        )


def test_connection_limits_take_kafkas_names() -> None:
    config = load_config(
        DEFAULT_PROPERTIES,
        {
            "max.connections": "1000",
            "max.connections.per.ip": "50",
            "max.connections.per.ip.overrides": "127.0.0.1:200, [::1]:5",
            "connections.max.idle.ms": "30000",
        },
    )
    assert (config.max_connections, config.max_connections_per_ip, config.connections_max_idle_ms) == (
        1000,
        50,
        30000,
    )
    assert config.max_connections_per_ip_overrides == {"127.0.0.1": 200, "::1": 5}
    with pytest.raises(ConfigError, match=r"^max\.connections\.per\.ip\.overrides: 'host' is not host:count"):
        load_config(DEFAULT_PROPERTIES, {"max.connections.per.ip.overrides": "host"})


def test_metrics_endpoint_and_queued_max_requests() -> None:
    """Issue 18: the Prometheus endpoint is off unless metrics.port is set, binds 127.0.0.1 unless
    metrics.host says otherwise; queued.max.requests has Kafka's default; bad values name their key."""
    default = load_config(DEFAULT_PROPERTIES)
    assert (default.metrics_port, default.metrics_host, default.queued_max_requests) == (-1, "127.0.0.1", 500)
    config = load_config(
        DEFAULT_PROPERTIES, {"metrics.port": "9404", "metrics.host": "[::1]", "queued.max.requests": "16"}
    )
    assert (config.metrics_port, config.metrics_host, config.queued_max_requests) == (9404, "::1", 16)
    assert not config.ignored
    assert load_config(DEFAULT_PROPERTIES, {"metrics.port": "-1"}).metrics_port == -1
    assert load_config(DEFAULT_PROPERTIES, {"metrics.host": ""}).metrics_host == "127.0.0.1"
    for override in (
        {"metrics.port": "on"},
        {"metrics.port": "70000"},
        {"metrics.port": "-2"},
        {"metrics.host": "local host"},
        {"metrics.host": "http://localhost"},
        {"queued.max.requests": "0"},
        {"queued.max.requests": "many"},
    ):
        with pytest.raises(ConfigError) as excinfo:
            load_config(DEFAULT_PROPERTIES, override)
        message = str(excinfo.value)
        assert message.startswith(next(iter(override)) + ":"), message
        assert "\n" not in message


def test_group_consumer_keys_are_known_and_the_migration_policy_takes_kafkas_four_values() -> None:
    config = load_config(DEFAULT_PROPERTIES, {"group.consumer.heartbeat.interval.ms": "700"})
    assert config.group_consumer_heartbeat_interval_ms == 700
    assert "group.consumer.heartbeat.interval.ms" not in config.ignored
    # Kafka 4's default is bidirectional (KIP-848 online upgrade and downgrade).
    assert config.group_consumer_migration_policy == "bidirectional"
    for value in ("disabled", "upgrade", "Downgrade", "bidirectional"):
        config = load_config(DEFAULT_PROPERTIES, {"group.consumer.migration.policy": value})
        assert config.group_consumer_migration_policy == value.lower()
    with pytest.raises(ConfigError, match="group.consumer.migration.policy: 'sideways': not one of"):
        load_config(DEFAULT_PROPERTIES, {"group.consumer.migration.policy": "sideways"})
