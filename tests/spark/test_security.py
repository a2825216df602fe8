"""The source, the sink and ``pykraft pipeline`` on a SASL_SSL listener with SCRAM-SHA-512 (issue 28):
Spark's Kafka option names (``kafka.security.protocol``, ``kafka.sasl.mechanism``,
``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``), and the password never in Spark's plan;
and on an SSL listener that requires client certificates, with a PEM ``kafka.ssl.keystore.location``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pykraft.cli import main
from tests.interop.conftest import certs  # noqa: F401  (the fixture: a CA and the broker's keystore)
from tests.interop.test_scram import ScramNode, _scram_node
from tests.interop.test_tls import _confluent_tls, tls_node  # noqa: F401  (an mTLS node fixture)

pytestmark = pytest.mark.slow

PASSWORD = "admin-secret"


@pytest.fixture(scope="module")
def node(certs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScramNode]:  # noqa: F811
    with _scram_node(tmp_path_factory.mktemp("spark-scram"), certs) as n:
        yield n


def _options(node: ScramNode) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": node.bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="admin" password="{PASSWORD}";',
        "kafka.ssl.truststore.location": str(node.certs / "ca.pem"),
    }


def test_read_stream_exactly_once_and_verify_over_sasl_ssl_scram(
    spark: Any, node: ScramNode, tmp_path: Any, capsys: Any
) -> None:
    confluent = {"bootstrap.servers": node.bootstrap, **node.confluent("admin", PASSWORD)}
    admin = AdminClient(confluent)
    for topic in ("sec-src", "sec-dst"):
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer(confluent)
    for i in range(500):
        producer.produce("sec-src", b"v-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    options = _options(node)

    batch = spark.read.format("pykraft").options(**options).option("subscribe", "sec-src").load()
    assert sorted(bytes(r.value) for r in batch.collect()) == sorted(b"v-%d" % i for i in range(500))
    plan = batch._jdf.queryExecution().toString()
    assert "pykraft" in plan and PASSWORD not in plan  # Python data sources show no option values

    query = (
        spark.readStream.format("pykraft")
        .options(**options)
        .option("subscribe", "sec-src")
        .option("startingOffsets", "earliest")
        .load()
        .select("value")
        .writeStream.format("pykraft")
        .options(**options)
        .option("topic", "sec-dst")
        .option("exactlyOnce", "true")
        .option("queryName", "sec")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None

    expected = tmp_path / "expected.txt"
    expected.write_text("".join(f"v-{i}\n" for i in range(500)))
    config = node.client_config("admin", PASSWORD)
    verify = ["pipeline", "eos-verify", "--bootstrap-server", node.bootstrap, "--topic", "sec-dst",
              "--isolation-level", "read_committed", "--expected", str(expected), "--out", str(tmp_path / "v")]  # fmt: skip
    assert main([*verify, "--command-config", str(config)]) == 0
    assert "OK: no violations" in capsys.readouterr().out


def test_a_wrong_password_fails_at_once_naming_sasl(spark: Any, node: ScramNode) -> None:
    options = _options(node)
    options["kafka.sasl.jaas.config"] = options["kafka.sasl.jaas.config"].replace(PASSWORD, "wrong")
    with pytest.raises(Exception, match="SASL authentication failed") as info:
        spark.read.format("pykraft").options(**options).option("subscribe", "sec-src").load().count()
    assert "wrong" not in str(info.value)


def test_mutual_tls_with_a_pem_keystore(spark: Any, tls_node: str, certs: Path, tmp_path: Path) -> None:  # noqa: F811
    # Kafka's PEM keystore: alice's certificate and key in one file; the broker requires a client cert.
    keystore = tmp_path / "alice-keystore.pem"
    keystore.write_text((certs / "alice.pem").read_text() + (certs / "alice.key").read_text())
    options = {
        "kafka.bootstrap.servers": tls_node,
        "kafka.security.protocol": "SSL",
        "kafka.ssl.truststore.location": str(certs / "ca.pem"),
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.location": str(keystore),
    }
    admin = AdminClient({"bootstrap.servers": tls_node, **_confluent_tls(certs)})
    admin.create_topics([NewTopic("mtls", 2, 1)])["mtls"].result(30)
    rows = spark.createDataFrame([(b"m-%d" % i,) for i in range(100)], "value binary")
    rows.write.format("pykraft").options(**options).option("topic", "mtls").mode("append").save()
    got = spark.read.format("pykraft").options(**options).option("subscribe", "mtls").load().collect()
    assert sorted(bytes(r.value) for r in got) == sorted(b"m-%d" % i for i in range(100))
