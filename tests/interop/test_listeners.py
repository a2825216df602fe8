"""Every listener served (issue 27): one node serves PLAINTEXT, SSL (mutual TLS) and SASL_SSL (PLAIN) side
by side, each with its own listener.name.<l>.* settings; confluent-kafka clients on each read the same
records, each told the endpoints of the listener it connected through (Metadata, FindCoordinator), and
the metrics carry each listener's label. A listener whose port is taken stops the start with one line
naming it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from prometheus_client.parser import text_string_to_metric_families

from pykraft.testing import ProcessCluster, free_port
from tests.interop.test_restart import _start_server, _stop_server
from tests.interop.test_sasl import JAAS
from tests.interop.test_tls import _confluent_tls

pytestmark = pytest.mark.slow

RECORDS = 100


def _properties(data_dir: Path, certs: Path, ports: dict[str, int], metrics_port: int) -> str:
    controller = free_port()
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    lines = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": f"{listeners},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
        "log.dirs": str(data_dir),
        "metrics.port": str(metrics_port),
        # The SSL listener: the unprefixed keystore, its own mutual TLS.
        "ssl.keystore.location": str(certs / "keystore.pem"),
        "ssl.key.password": "s3cret-pass",
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.ssl.ssl.truststore.location": str(certs / "ca.pem"),
        # The SASL_SSL listener: its own keystore (the same file here), mechanisms and users.
        "listener.name.sasl_ssl.ssl.keystore.location": str(certs / "keystore.pem"),
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
    }
    return "".join(f"{k}={v}\n" for k, v in lines.items())


@dataclass
class ThreeListeners:
    ports: dict[str, int]
    security: dict[str, dict[str, str]]
    metrics_url: str


@pytest.fixture(scope="module")
def node(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreeListeners]:
    directory = tmp_path_factory.mktemp("listeners")
    ports = {"PLAINTEXT": free_port(), "SSL": free_port(), "SASL_SSL": free_port()}
    metrics_port = free_port()
    config = directory / "server.properties"
    config.write_text(_properties(directory / "data", certs, ports, metrics_port))
    # The last listener is bound last: waiting for it waits for them all.
    proc = _start_server(str(config), ports["SASL_SSL"])
    security = {
        "PLAINTEXT": {},
        "SSL": _confluent_tls(certs),
        "SASL_SSL": {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
            "ssl.ca.location": str(certs / "ca.pem"),
        },
    }
    try:
        yield ThreeListeners(ports, security, f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        _stop_server(proc)


def _bootstrap(node: ThreeListeners, listener: str) -> str:
    return f"127.0.0.1:{node.ports[listener]}"


def _consume_as_group(bootstrap: str, security: dict[str, str], topic: str, group: str) -> list[bytes]:
    """A subscribed consumer: FindCoordinator, JoinGroup and Fetch on the listener it bootstrapped from."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **security,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < RECORDS and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=500, timeout=0.5):
            assert not m.error(), m.error()
            got.append(m.value())
    consumer.close()
    return got


def test_clients_on_every_listener_read_the_same_records(node: ThreeListeners) -> None:
    topic = "three-listeners"
    producer = Producer({"bootstrap.servers": _bootstrap(node, "PLAINTEXT"), "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce(topic, value=b"r-%d" % i, partition=0)
    assert producer.flush(30) == 0
    expected = [b"r-%d" % i for i in range(RECORDS)]
    for listener in ("PLAINTEXT", "SSL", "SASL_SSL"):
        got = _consume_as_group(_bootstrap(node, listener), node.security[listener], topic, f"g-{listener}")
        assert got == expected, listener


def test_metadata_names_the_brokers_on_the_clients_own_listener(node: ThreeListeners) -> None:
    for listener, port in node.ports.items():
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", **node.security[listener]})
        brokers = admin.list_topics(timeout=30).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", port)], listener


def test_metrics_carry_each_listeners_label(node: ThreeListeners) -> None:
    for listener in ("SSL", "SASL_SSL"):
        AdminClient({"bootstrap.servers": _bootstrap(node, listener), **node.security[listener]}).list_topics(
            timeout=30
        )
    with urllib.request.urlopen(node.metrics_url, timeout=10) as response:
        text = response.read().decode()
    created = {
        sample.labels["listener"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "kafka_server_socketservermetrics_connection_creation_total"
    }
    assert {"PLAINTEXT", "SSL", "SASL_SSL", "CONTROLLER"} <= created.keys()
    assert created["SSL"] > 0 and created["SASL_SSL"] > 0


def test_a_listener_that_cannot_be_bound_stops_the_start_with_one_line(certs: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = {"PLAINTEXT": free_port(), "SSL": free_port(), "SASL_SSL": taken.getsockname()[1]}
        config = tmp_path / "server.properties"
        config.write_text(_properties(tmp_path / "data", certs, ports, free_port()))
        result = subprocess.run(
            [sys.executable, "-m", "pykraft.cli", "server", "start", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("pykraft: ")]
    assert errors == [
        f"pykraft: listeners: cannot listen on 127.0.0.1:{ports['SASL_SSL']} for listener SASL_SSL: "
        "Address already in use"
    ], result.stderr
    assert "Traceback" not in result.stderr


def test_brokers_replicate_over_the_inter_broker_listener(tmp_path: Path) -> None:
    """Two broker processes with a client listener and an INTERNAL one named by
    inter.broker.listener.name: clients are told only the client endpoints, acks=all writes are
    replicated (min.insync.replicas=2), and the followers' fetch connections arrive on INTERNAL."""
    cluster = ProcessCluster.create(
        str(tmp_path), 1, {"min.insync.replicas": "2", "default.replication.factor": "2"}, brokers=2
    )
    metrics: dict[int, int] = {}
    for node_id, node in cluster.brokers.items():
        metrics[node_id] = free_port()
        with open(node.config_path, "a", encoding="utf-8") as fh:
            fh.write(
                f"listeners=PLAINTEXT://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{free_port()}\n"
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
                f"inter.broker.listener.name=INTERNAL\nmetrics.port={metrics[node_id]}\n"
            )
    try:
        cluster.start()
        cluster.wait_for_leader()
        cluster.wait_for_brokers()
        bootstrap = cluster.bootstrap_servers
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        for i in range(RECORDS):
            producer.produce("replicated", value=b"r-%d" % i, partition=0)
        assert producer.flush(60) == 0
        brokers = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).brokers
        assert sorted(b.port for b in brokers.values()) == sorted(n.port for n in cluster.brokers.values())
        created = {}
        for node_id, port in metrics.items():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                text = response.read().decode()
            created[node_id] = {
                sample.labels["listener"]: sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
                if sample.name == "kafka_server_socketservermetrics_connection_creation_total"
            }
        # The leader of the partition served its follower's fetches on INTERNAL.
        assert max(c.get("INTERNAL", 0) for c in created.values()) >= 1, created
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()
