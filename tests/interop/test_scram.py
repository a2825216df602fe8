"""SASL/SCRAM over TLS (issue 16): a node whose client listener is SASL_SSL with SCRAM-SHA-256 and
SCRAM-SHA-512 only. The first user comes from ``pykraft storage format --add-scram`` (written by the first
controller into the metadata log); the others are added with ``pykraft scram`` and with confluent-kafka's
AdminClient (AlterUserScramCredentials, KIP-554). confluent-kafka, kafka-python and aiokafka produce and
consume; a wrong password, an unknown user, a deleted credential and a plaintext client each fail, and
the broker keeps serving the others."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError, ClientSecurity
from pykraft.testing import free_port
from tests.interop.test_restart import _start_server, _stop_server
from tests.interop.test_tls import _produce_and_consume_confluent, kcat_produce_and_consume

pytestmark = pytest.mark.slow


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pykraft.cli", *args], capture_output=True, text=True, timeout=60
    )


class ScramNode:
    def __init__(self, directory: Path, bootstrap: str, certs_dir: Path) -> None:
        self.directory = directory
        self.bootstrap = bootstrap
        self.certs = certs_dir

    def client_config(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> Path:
        """A --command-config file, as Kafka's tools take it."""
        path = self.directory / f"{user}-{mechanism}.properties"
        path.write_text(
            "security.protocol=SASL_SSL\n"
            f"sasl.mechanism={mechanism}\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";\n'
            f"ssl.truststore.location={self.certs / 'ca.pem'}\n"
        )
        return path

    def scram(
        self, *args: str, as_user: str = "admin", password: str = "admin-secret"
    ) -> subprocess.CompletedProcess[str]:
        config = self.client_config(as_user, password)
        return _cli("scram", "--bootstrap-server", self.bootstrap, "--command-config", str(config), *args)

    def confluent(self, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
        return {
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.certs / "ca.pem"),
            "sasl.mechanisms": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }


@pytest.fixture(scope="module")
def scram_node(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramNode]:
    with _scram_node(tmp_path_factory.mktemp("scram"), certs) as node:
        yield node


@contextlib.contextmanager
def _scram_node(directory: Path, certs: Path, *extra: str) -> Iterator[ScramNode]:
    port, controller = free_port(), free_port()
    config = directory / "server.properties"
    config.write_text(
        "\n".join(
            [
                "node.id=1",
                "process.roles=broker,controller",
                f"listeners=SASL_SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
                f"advertised.listeners=SASL_SSL://127.0.0.1:{port}",
                "controller.listener.names=CONTROLLER",
                "listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
                f"controller.quorum.voters=1@127.0.0.1:{controller}",
                f"log.dirs={directory / 'data'}",
                "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
                f"ssl.keystore.location={certs / 'keystore.pem'}",
                "ssl.key.password=s3cret-pass",
                *extra,
            ]
        )
        + "\n"
    )
    formatted = _cli(
        "storage",
        "format",
        "-c",
        str(config),
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=admin-secret]",
    )
    assert formatted.returncode == 0, formatted.stderr
    assert (directory / "data" / "bootstrap.checkpoint").exists()
    proc = _start_server(str(config), port)
    try:
        yield ScramNode(directory, f"127.0.0.1:{port}", certs)
    finally:
        _stop_server(proc)


def test_three_clients_produce_and_consume_over_sasl_ssl_with_scram_sha_512(scram_node: ScramNode) -> None:
    added = scram_node.scram("add", "--user", "alice", "--password", "alice-secret", "--iterations", "8192")
    assert added.returncode == 0, added.stderr
    alice = scram_node.confluent("alice", "alice-secret")
    assert _produce_and_consume_confluent(scram_node.bootstrap, alice, "scram-ck", 100) == [
        b"scram-ck-%d" % i for i in range(100)
    ]

    from aiokafka import AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition

    settings = {
        "bootstrap_servers": scram_node.bootstrap,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "alice-secret",
    }
    producer = KafkaProducer(**settings, ssl_cafile=str(scram_node.certs / "ca.pem"))
    for i in range(20):
        producer.send("scram-kp", value=b"kp-%d" % i, partition=0)
    producer.flush(30)
    producer.close()

    async def aio() -> None:
        p = AIOKafkaProducer(
            **settings, ssl_context=create_ssl_context(cafile=str(scram_node.certs / "ca.pem"))
        )
        await p.start()
        try:
            for i in range(20, 40):
                await p.send_and_wait("scram-kp", b"kp-%d" % i, partition=0)
        finally:
            await p.stop()

    asyncio.run(aio())
    consumer = KafkaConsumer(
        **settings, ssl_cafile=str(scram_node.certs / "ca.pem"), enable_auto_commit=False
    )
    tp = TopicPartition("scram-kp", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 40 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(r.value for r in records)
    consumer.close()
    assert got == [b"kp-%d" % i for i in range(40)]


def _auth_error(scram_node: ScramNode, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> str:
    """The authentication error confluent-kafka reports (empty when it connected)."""
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": scram_node.bootstrap,
            **scram_node.confluent(user, password, mechanism),
            "error_cb": lambda e: errors.append(e.str()),
            "message.timeout.ms": 3000,
            "log_level": 0,
        }
    )
    producer.produce("scram-refused", b"x", partition=0)
    producer.flush(5)
    return next((e for e in errors if "uthentication" in e), "")


def test_kcat_over_sasl_ssl_with_scram_sha_512(scram_node: ScramNode) -> None:
    assert scram_node.scram("add", "--user", "kit", "--password", "kit-secret").returncode == 0
    settings = scram_node.confluent("kit", "kit-secret")
    assert kcat_produce_and_consume(scram_node.bootstrap, settings, "scram-kcat", 20) == [
        b"scram-kcat-%d" % i for i in range(20)
    ]
    wrong = {**settings, "sasl.password": "nope"}
    failed = subprocess.run(
        [
            "kcat",
            "-b",
            scram_node.bootstrap,
            *[a for k, v in wrong.items() for a in ("-X", f"{k}={v}")],
            "-L",
        ],
        capture_output=True,
        timeout=60,
    )
    assert failed.returncode != 0 and b"Authentication failed" in failed.stderr


def test_wrong_password_unknown_user_and_plaintext_client_fail_and_others_keep_working(
    scram_node: ScramNode,
) -> None:
    assert scram_node.scram("add", "--user", "carol", "--password", "carol-secret").returncode == 0
    wrong = _auth_error(scram_node, "carol", "not-her-password")
    unknown = _auth_error(scram_node, "nobody", "carol-secret")
    expected = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    # Both say the same thing: nothing tells which part was wrong.
    assert expected in wrong and expected in unknown
    # The other mechanism has no credential for carol.
    assert "SCRAM-SHA-256" in _auth_error(scram_node, "carol", "carol-secret", "SCRAM-SHA-256")
    # A plaintext client on the TLS port: the connection ends, the broker stays up.
    host, port = scram_node.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
        sock.settimeout(10)
        try:
            answer = sock.recv(100)
        except ConnectionResetError:
            answer = b""
        assert not answer.startswith(b"\x00\x00"), "a plaintext request was answered on a TLS port"
    assert _auth_error(scram_node, "carol", "carol-secret") == ""


def test_credentials_are_managed_with_the_cli_and_confluent_kafka_admin_client(scram_node: ScramNode) -> None:
    admin = AdminClient(
        {"bootstrap.servers": scram_node.bootstrap, **scram_node.confluent("admin", "admin-secret")}
    )
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"dave-pw"
            )
        ]
    )
    for future in futures.values():
        future.result(timeout=30)
    assert _auth_error(scram_node, "dave", "dave-pw", "SCRAM-SHA-256") == ""
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(timeout=30)
    info = described.scram_credential_infos[0]
    assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_256, 8192)

    listing = scram_node.scram("describe", "--user", "dave")
    assert listing.returncode == 0, listing.stderr
    assert "SCRAM-SHA-256-iterations=8192" in listing.stdout
    missing = scram_node.scram("describe", "--user", "ghost")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    bad = scram_node.scram("add", "--user", "eve", "--password", "x", "--iterations", "100")
    assert bad.returncode == 1 and "Too few iterations" in bad.stderr

    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)]
    )
    for future in futures.values():
        future.result(timeout=30)
    assert "invalid credentials" in _auth_error(scram_node, "dave", "dave-pw", "SCRAM-SHA-256")
    assert scram_node.scram("delete", "--user", "dave", "--mechanism", "SCRAM-SHA-256").returncode == 1


def test_describe_configs_marks_secrets_sensitive_and_no_log_line_holds_one(scram_node: ScramNode) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient(
        {"bootstrap.servers": scram_node.bootstrap, **scram_node.confluent("admin", "admin-secret")}
    )
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    configs = admin.describe_configs([resource])[resource].result(30)
    password = configs["ssl.key.password"]
    assert password.is_sensitive and password.value is None
    assert configs["ssl.keystore.location"].value.endswith("keystore.pem")
    assert not configs["ssl.keystore.location"].is_sensitive
    assert configs["listener.name.sasl_ssl.sasl.enabled.mechanisms"].value == "SCRAM-SHA-256,SCRAM-SHA-512"
    # The key password, the admin's password and alice's appear in no line the node wrote.
    log = (scram_node.directory / "server.properties.log").read_text()
    assert log and not any(secret in log for secret in ("s3cret-pass", "admin-secret", "alice-secret"))


def test_librdkafka_re_authenticates_before_its_session_expires(certs: Path, tmp_path: Path) -> None:
    """KIP-368: with connections.max.reauth.ms the broker grants 1.5 s sessions; confluent-kafka
    re-authenticates on the same connections and keeps producing and consuming for several lifetimes,
    while a client that does not is closed at its first request after the session ended."""
    import confluent_kafka

    with _scram_node(tmp_path, certs, "connections.max.reauth.ms=1500") as node:
        admin = {"bootstrap.servers": node.bootstrap, **node.confluent("admin", "admin-secret")}
        producer = confluent_kafka.Producer(admin)
        failures: list[object] = []
        deadline = time.monotonic() + 5
        sent = 0
        while time.monotonic() < deadline:
            producer.produce(
                "reauth", b"r-%d" % sent, on_delivery=lambda err, _m: err and failures.append(err)
            )
            producer.poll(0.1)
            sent += 1
        assert producer.flush(30) == 0 and not failures
        consumer = confluent_kafka.Consumer({**admin, "group.id": "reauth", "auto.offset.reset": "earliest"})
        consumer.subscribe(["reauth"])
        got: list[bytes] = []
        end = time.monotonic() + 30
        try:
            while len(got) < sent and time.monotonic() < end:
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    got.append(message.value())
        finally:
            consumer.close()
        assert got == [b"r-%d" % i for i in range(sent)]
        security = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "admin", "admin-secret", str(certs / "ca.pem"))
        with BrokerConnection.to(node.bootstrap, security=security) as raw:
            raw.request(MetadataRequest(topics=[]), MetadataResponse, 9)
            time.sleep(1.8)
            with pytest.raises(BrokerConnectionError):
                raw.request(MetadataRequest(topics=[]), MetadataResponse, 9)
        log = (tmp_path / "server.properties.log").read_text().splitlines()
        expired = [line for line in log if "after the SASL session expired" in line]
        assert len(expired) == 1, expired  # the raw client's, not librdkafka's
