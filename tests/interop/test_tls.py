"""TLS listeners (issue 16, first part): a node whose client listener is SSL, with mutual TLS; the
certificates are made at run time with the openssl command (nothing secret is committed).
confluent-kafka, kafka-python and aiokafka produce and consume over it; a plaintext client, a client
without a certificate and one whose certificate no trusted CA signed each fail, and the broker keeps
serving the others; configuration mistakes stop the node with one line."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from pykraft.io.tls import ANONYMOUS, principal_of
from pykraft.testing import free_port
from tests.interop.test_restart import _start_server, _stop_server

pytestmark = pytest.mark.slow


def _properties(data_dir: Path, port: int, certs: Path, **extra: str) -> str:
    lines = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": f"SSL://127.0.0.1:{port},CONTROLLER://127.0.0.1:{free_port()}",
        "advertised.listeners": f"SSL://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT",
        "controller.quorum.voters": "1@127.0.0.1:{controller}",
        "log.dirs": str(data_dir),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "keystore.pem"),
        "ssl.key.password": "s3cret-pass",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.client.auth": "required",
        **extra,
    }
    controller = lines["listeners"].rsplit(":", 1)[1]
    lines["controller.quorum.voters"] = f"1@127.0.0.1:{controller}"
    return "".join(f"{k}={v}\n" for k, v in lines.items())


@pytest.fixture(scope="module")
def tls_node(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("tls-node")
    port = free_port()
    config = directory / "server.properties"
    config.write_text(_properties(directory / "data", port, certs))
    proc = _start_server(str(config), port)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        _stop_server(proc)


def _confluent_tls(certs: Path, who: str = "alice") -> dict[str, str]:
    return {
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs / "ca.pem"),
        "ssl.certificate.location": str(certs / f"{who}.pem"),
        "ssl.key.location": str(certs / f"{who}.key"),
    }


def _produce_and_consume_confluent(
    bootstrap: str, security: dict[str, str], topic: str, n: int = 200
) -> list[bytes]:
    """Produce ``n`` records with an idempotent producer and read them back, connecting with ``security``
    (the client's security.protocol, sasl.* and ssl.* settings)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **security})
    for i in range(n):
        producer.produce(topic, value=b"%s-%d" % (topic.encode(), i), partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"tls-{topic}",
            "enable.auto.commit": False,
            **security,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        for m in consumer.consume(num_messages=500, timeout=0.5):
            assert not m.error(), m.error()
            got.append(m.value())
    consumer.close()
    return got


def test_confluent_kafka_over_mutual_tls(tls_node: str, certs: Path) -> None:
    assert _produce_and_consume_confluent(tls_node, _confluent_tls(certs), "tls-ck") == [
        b"tls-ck-%d" % i for i in range(200)
    ]


def kcat_produce_and_consume(bootstrap: str, settings: dict[str, str], topic: str, n: int) -> list[bytes]:
    """kcat (librdkafka's command-line client, Debian's package) writes ``n`` lines, then reads them back."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed (.ci/run installs Debian's kcat when it runs as root)")
    options = [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]
    lines = b"".join(b"%s-%d\n" % (topic.encode(), i) for i in range(n))
    produced = subprocess.run(
        [kcat, "-b", bootstrap, *options, "-P", "-t", topic, "-p", "0"],
        input=lines,
        capture_output=True,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [
            kcat,
            "-b",
            bootstrap,
            *options,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-c",
            str(n),
        ],
        capture_output=True,
        timeout=60,
    )
    assert consumed.returncode == 0, consumed.stderr
    return consumed.stdout.splitlines()


def test_kcat_over_mutual_tls(tls_node: str, certs: Path) -> None:
    assert kcat_produce_and_consume(tls_node, _confluent_tls(certs), "tls-kcat", 20) == [
        b"tls-kcat-%d" % i for i in range(20)
    ]


def test_kafka_python_over_mutual_tls(tls_node: str, certs: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition as KpTopicPartition

    settings = {
        "bootstrap_servers": tls_node,
        "security_protocol": "SSL",
        "ssl_cafile": str(certs / "ca.pem"),
        "ssl_certfile": str(certs / "alice.pem"),
        "ssl_keyfile": str(certs / "alice.key"),
    }
    producer = KafkaProducer(**settings)
    for i in range(50):
        producer.send("tls-kp", value=b"kp-%d" % i, partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(**settings, enable_auto_commit=False)
    tp = KpTopicPartition("tls-kp", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 50 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    consumer.close()
    assert got == [b"kp-%d" % i for i in range(50)]


def test_aiokafka_over_mutual_tls(tls_node: str, certs: Path) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    from aiokafka.structs import TopicPartition as AioTopicPartition

    context = create_ssl_context(
        cafile=str(certs / "ca.pem"), certfile=str(certs / "alice.pem"), keyfile=str(certs / "alice.key")
    )

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=tls_node, security_protocol="SSL", ssl_context=context)
        await producer.start()
        try:
            for i in range(50):
                await producer.send_and_wait("tls-aio", b"aio-%d" % i, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=tls_node, security_protocol="SSL", ssl_context=context, enable_auto_commit=False
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            tp = AioTopicPartition("tls-aio", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            deadline = time.monotonic() + 30
            while len(got) < 50 and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [r.value for r in records]
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [b"aio-%d" % i for i in range(50)]


def _tls_exchange(bootstrap: str, context: ssl.SSLContext) -> bytes:
    """An ApiVersions v0 request over TLS; what came back (b"" when the broker closed)."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as tls:
            request = b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff"
            tls.sendall(len(request).to_bytes(4, "big") + request)
            return tls.recv(4)


def test_refused_clients_fail_and_the_broker_keeps_serving(tls_node: str, certs: Path) -> None:
    host, port = tls_node.rsplit(":", 1)
    # A plaintext client on the TLS port: the broker never answers it as Kafka.
    with socket.create_connection((host, int(port)), timeout=10) as plain:
        plain.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
        answer = b""
        try:
            answer = plain.recv(64)
        except (ConnectionResetError, TimeoutError):
            pass
        assert not answer.startswith(b"\x00\x00\x00")  # no Kafka frame came back
    trusting = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    # No client certificate, one signed by a CA the broker does not trust, and an expired one: refused.
    for certificate in (None, "mallory", "expired"):
        context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        if certificate is not None:
            context.load_cert_chain(str(certs / f"{certificate}.pem"), str(certs / f"{certificate}.key"))
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            if _tls_exchange(tls_node, context) == b"":
                raise ConnectionResetError("closed")
    # A client that does not trust the broker's certificate refuses it.
    with pytest.raises(ssl.SSLCertVerificationError):
        _tls_exchange(tls_node, ssl.create_default_context(cafile=str(certs / "rogue-ca.pem")))
    # ... and a good client is still served.
    trusting.load_cert_chain(str(certs / "alice.pem"), str(certs / "alice.key"))
    assert len(_tls_exchange(tls_node, trusting)) == 4
    assert _produce_and_consume_confluent(tls_node, _confluent_tls(certs), "tls-after", 10) == [
        b"tls-after-%d" % i for i in range(10)
    ]


def test_the_principal_is_the_certificate_subject_in_rfc_2253_order(certs: Path) -> None:
    decoded = ssl._ssl._test_decode_cert(str(certs / "alice.pem"))  # type: ignore[attr-defined]
    assert principal_of(decoded) == "User:CN=alice,OU=eng,O=pykraft"
    assert principal_of(None) == ANONYMOUS
    assert principal_of({"subject": ((("commonName", "a,b"),),)}) == "User:CN=a\\,b"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"ssl.keystore.location": "/nonexistent/keystore.pem"},
            "ssl.keystore.location: /nonexistent/keystore.pem",
        ),
        ({"ssl.key.password": "wrong"}, "ssl.key.password does not decrypt the key"),
        ({"ssl.keystore.type": "JKS"}, "ssl.keystore.type: JKS is not supported"),
        ({"ssl.client.auth": "sometimes"}, "ssl.client.auth: 'sometimes'"),
        (
            {"listener.security.protocol.map": "SSL:SASL_SSL,CONTROLLER:PLAINTEXT"},
            "listener.name.ssl.plain.sasl.jaas.config: required by the SASL listener SSL",
        ),
        (
            {
                "listener.security.protocol.map": "SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
                "sasl.enabled.mechanisms": "GSSAPI",
            },
            "sasl.enabled.mechanisms: GSSAPI is not supported",
        ),
    ],
)
def test_configuration_mistakes_stop_the_node_with_one_line(
    certs: Path, tmp_path: Path, extra: dict[str, str], message: str
) -> None:
    config = tmp_path / "server.properties"
    config.write_text(_properties(tmp_path / "data", free_port(), certs, **extra))
    result = subprocess.run(
        [sys.executable, "-m", "pykraft.cli", "server", "start", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "wrong" not in result.stderr.replace("ssl.key.password does not decrypt", "")  # no secret echoed
    assert "Traceback" not in result.stderr
