"""The source and the sink on an SSL listener that requires client certificates, with a PEM
``kafka.ssl.keystore.location`` (issue 28). SASL_SSL with SCRAM (Spark's ``kafka.security.protocol``,
``kafka.sasl.*`` and ``kafka.ssl.truststore.location``, a streaming query into the exactly-once sink,
``eos-verify``, a wrong password) runs on the 3+3 SASL_SSL cluster in tests/interop/test_secure_cluster.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.conftest import certs  # noqa: F401  (the fixture: a CA and the broker's keystore)
from tests.interop.test_tls import _confluent_tls, tls_node  # noqa: F401  (an mTLS node fixture)

pytestmark = pytest.mark.slow


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
