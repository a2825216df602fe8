"""SASL/PLAIN (issue 16, second part): a node whose client listener is SASL_PLAINTEXT or SASL_SSL,
with users from the listener's JAAS configuration. confluent-kafka, kafka-python and aiokafka
authenticate, produce and consume; a wrong password, an unknown user and a request sent before
authenticating each fail, and the broker keeps serving the others."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from pykraft.security.sasl import JaasConfigError, parse_plain_jaas, parse_plain_token
from pykraft.testing import free_port
from tests.interop.test_restart import _start_server, _stop_server
from tests.interop.test_tls import _produce_and_consume_confluent
from tests.raw_client import RawClient

pytestmark = pytest.mark.slow

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def _start(
    directory: Path, protocol: str, certs_dir: Path | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    controller = free_port()
    lines = [
        "node.id=1",
        "process.roles=broker,controller",
        f"listeners={protocol}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        f"advertised.listeners={protocol}://127.0.0.1:{port}",
        "controller.listener.names=CONTROLLER",
        f"listener.security.protocol.map={protocol}:{protocol},CONTROLLER:PLAINTEXT",
        f"controller.quorum.voters=1@127.0.0.1:{controller}",
        f"log.dirs={directory / 'data'}",
        "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.{protocol.lower()}.plain.sasl.jaas.config={JAAS}",
    ]
    if certs_dir is not None:
        lines += [
            f"ssl.keystore.location={certs_dir / 'keystore.pem'}",
            "ssl.key.password=s3cret-pass",
        ]
    config = directory / "server.properties"
    config.write_text("\n".join(lines) + "\n")
    return _start_server(str(config), port), f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def sasl_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, bootstrap = _start(tmp_path_factory.mktemp("sasl"), "SASL_PLAINTEXT")
    try:
        yield bootstrap
    finally:
        _stop_server(proc)


def _confluent(
    user: str = "alice", password: str = "alice-secret", protocol: str = "SASL_PLAINTEXT"
) -> dict[str, str]:
    return {
        "security.protocol": protocol,
        "sasl.mechanisms": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


def test_confluent_kafka_authenticates_produces_and_consumes(sasl_node: str) -> None:
    got = _produce_and_consume_confluent(sasl_node, _confluent(), "sasl-ck", 100)
    assert got == [b"sasl-ck-%d" % i for i in range(100)]


def test_kafka_python_and_aiokafka_authenticate(sasl_node: str) -> None:
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition

    settings = {
        "bootstrap_servers": sasl_node,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "admin",
        "sasl_plain_password": "admin-secret",
    }
    producer = KafkaProducer(**settings)
    for i in range(20):
        producer.send("sasl-kp", value=b"kp-%d" % i, partition=0)
    producer.flush(30)
    producer.close()

    async def aio() -> None:
        p = AIOKafkaProducer(**settings)
        await p.start()
        try:
            for i in range(20, 40):
                await p.send_and_wait("sasl-kp", b"kp-%d" % i, partition=0)
        finally:
            await p.stop()

    asyncio.run(aio())
    consumer = KafkaConsumer(**settings, enable_auto_commit=False)
    tp = TopicPartition("sasl-kp", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 40 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    consumer.close()
    assert got == [b"kp-%d" % i for i in range(40)]


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "alice-secret")])
def test_bad_credentials_fail_with_one_message_and_others_are_still_served(
    sasl_node: str, user: str, password: str
) -> None:
    from confluent_kafka import Producer

    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": sasl_node,
            **_confluent(user, password),
            "error_cb": lambda e: errors.append(str(e)),
        }
    )
    deadline = time.monotonic() + 20
    while not any("Authentication failed" in e for e in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    # Kafka's message, the same whether the user or the password was wrong.
    assert any("Authentication failed: Invalid username or password" in e for e in errors), errors
    good = AdminClient({"bootstrap.servers": sasl_node, **_confluent()})
    assert good.list_topics(timeout=10).brokers


def test_a_request_before_authenticating_closes_the_connection(sasl_node: str) -> None:
    host, port = sasl_node.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        # Metadata v0 (api key 3) without SaslHandshake first.
        request = b"\x00\x03\x00\x00\x00\x00\x00\x07\xff\xff" + b"\x00\x00\x00\x00"
        sock.sendall(len(request).to_bytes(4, "big") + request)
        assert sock.recv(4) == b""  # closed, no answer


def test_a_frame_over_sasl_server_max_receive_size_before_authenticating_closes_the_connection(
    sasl_node: str,
) -> None:
    """Kafka's SaslServerAuthenticator reads with sasl.server.max.receive.size (512 KiB): a larger
    frame from a client that has not authenticated closes it unanswered; 1 MiB batches after
    authenticating are served (test_confluent_kafka_authenticates_produces_and_consumes, and here)."""
    host, port = sasl_node.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall((524288 + 1).to_bytes(4, "big") + b"\x00\x11\x00\x01")  # a SaslHandshake's start
        assert sock.recv(4) == b""  # closed, no answer
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": sasl_node, "linger.ms": 50, **_confluent()})
    value = b"v" * 900_000  # one ~900 KB record: a request over 512 KiB, after authenticating
    delivered: list[object] = []
    producer.produce("sasl-large", value, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0 and delivered == [None]


def test_sasl_handshake_v0_takes_bare_tokens_as_before_kip_152(sasl_node: str) -> None:
    """SaslHandshake v0: the PLAIN token follows as a bare size-prefixed frame and the answer is a bare
    (empty) frame; Kafka requests work after it. A wrong password closes the connection unanswered."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse
    from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

    for password, accepted in (("alice-secret", True), ("wrong", False)):
        with RawClient(sasl_node) as client:
            handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse, 0)
            assert handshake.error_code == 0 and "PLAIN" in handshake.mechanisms
            client.send_frame(b"\x00alice\x00" + password.encode())
            if not accepted:
                assert client.is_closed_by_peer()
                continue
            assert client.recv_frame() == b""
            metadata = client.request(MetadataRequest(topics=[]), MetadataResponse, 9)
            assert metadata.brokers


def test_sasl_ssl(certs: Path, tmp_path: Path) -> None:
    proc, bootstrap = _start(tmp_path, "SASL_SSL", certs)
    try:
        settings = {**_confluent(protocol="SASL_SSL"), "ssl.ca.location": str(certs / "ca.pem")}
        admin = AdminClient({"bootstrap.servers": bootstrap, **settings})
        assert admin.list_topics(timeout=20).brokers
    finally:
        _stop_server(proc)


def test_jaas_and_token_parsing() -> None:
    assert parse_plain_jaas(JAAS, "k") == {"admin": "admin-secret", "alice": "alice-secret"}
    with pytest.raises(JaasConfigError, match="no users"):
        parse_plain_jaas(
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="a";', "k"
        )
    with pytest.raises(JaasConfigError, match="ends with"):
        parse_plain_jaas(JAAS[:-1], "k")
    assert parse_plain_token(b"\x00alice\x00pw") == ("", "alice", "pw")
    assert parse_plain_token(b"alice\x00pw") is None
    assert parse_plain_token(b"\x00\x00pw") is None
    assert parse_plain_token(b"\x00alice\x00\xff") is None
