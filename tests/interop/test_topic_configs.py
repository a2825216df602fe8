"""Topic configs that take effect (issue 17): set at creation, altered at runtime with
IncrementalAlterConfigs / AlterConfigs, and kept across a restart; DescribeConfigs says where each value
comes from; bad names and values are INVALID_CONFIG naming the key. confluent-kafka's AdminClient, as a
new user would call it."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.protocol.producer import ProduceResponse

from pykraft.core.errors import ErrorCode
from pykraft.protocol.records import Record, build_batch
from pykraft.testing import RunningNode, running_node
from tests.interop.cluster_support import wait_until
from tests.raw_client import RawClient, produce_request

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def node_dir() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="pykraft-configs-")
    yield directory


def _admin(node: RunningNode) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap_servers})


def _describe(admin: AdminClient, topic: str) -> dict[str, object]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(30)


def _segments(node: RunningNode, topic: str) -> int:
    directory = os.path.join(node.data_dir, f"{topic}-0")
    return sum(1 for name in os.listdir(directory) if name.endswith(".log"))


def _produce(node: RunningNode, topic: str, count: int, size: int) -> list[KafkaError | None]:
    producer = Producer({"bootstrap.servers": node.bootstrap_servers, "linger.ms": 5, "batch.size": 16384})
    outcomes: list[KafkaError | None] = []
    for i in range(count):
        producer.produce(
            topic, os.urandom(size), key=b"k%d" % i, on_delivery=lambda err, _m: outcomes.append(err)
        )
    producer.flush(30)
    return outcomes


def test_configs_set_at_creation_apply_and_describe_with_their_source(node_dir: str) -> None:
    with running_node(node_dir) as node:
        admin = _admin(node)
        topic = NewTopic(
            "cfg",
            1,
            1,
            config={"cleanup.policy": "delete", "segment.bytes": "100000", "retention.ms": "86400000"},
        )
        admin.create_topics([topic])["cfg"].result(30)
        configs = _describe(admin, "cfg")
        segment_bytes = configs["segment.bytes"]
        assert (
            segment_bytes.value == "100000"
            and segment_bytes.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        )
        assert not segment_bytes.is_read_only
        default = configs["max.message.bytes"]
        assert default.value == "1048588" and default.source == ConfigSource.DEFAULT_CONFIG.value
        assert _produce(node, "cfg", 1800, 1000) == [None] * 1800
        # 1.8 MB in 100 kB segments: the topic's segment.bytes, not the broker's 1 GiB.
        assert _segments(node, "cfg") >= 15


def test_incremental_alter_configs_apply_at_runtime_and_bad_ones_name_the_key(node_dir: str) -> None:
    with running_node(node_dir) as node:
        admin = _admin(node)
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            "cfg",
            incremental_configs=[
                ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
                ConfigEntry(
                    "message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET
                ),
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        wait_until(lambda: _describe(admin, "cfg")["max.message.bytes"].value == "2000", 10, "the new config")
        # A record bigger than the topic's max.message.bytes is refused; a small one is stamped with
        # the broker's clock (LogAppendTime).
        big = _produce(node, "cfg", 1, 5000)
        assert big[0] is not None and big[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
        before_ms = int(time.time() * 1000)
        assert _produce(node, "cfg", 1, 100) == [None]
        consumer = Consumer({"bootstrap.servers": node.bootstrap_servers, "group.id": "cfg-check"})
        end = consumer.get_watermark_offsets(TopicPartition("cfg", 0), timeout=10)[1]
        consumer.assign([TopicPartition("cfg", 0, end - 1)])
        message = None
        deadline = time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        consumer.close()
        assert message is not None and message.error() is None
        kind, stamp = message.timestamp()
        assert kind == 2 and stamp >= before_ms  # TIMESTAMP_LOG_APPEND_TIME
        # Unknown names and bad values: INVALID_CONFIG, naming the key; nothing changes.
        for entry, text in (
            (
                ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET),
                "no.such.config",
            ),
            (
                ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET),
                "retention.ms",
            ),
            (
                ConfigEntry("compression.gzip.level", "10", incremental_operation=AlterConfigOpType.SET),
                "compression.gzip.level",
            ),
        ):
            bad = ConfigResource(ConfigResource.Type.TOPIC, "cfg", incremental_configs=[entry])
            with pytest.raises(KafkaException) as refused:
                admin.incremental_alter_configs([bad])[bad].result(30)
            error = refused.value.args[0]
            assert error.code() == KafkaError.INVALID_CONFIG and text in error.str()
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic("bad-cfg", 1, 1, config={"segment.bytes": "10"})])[
                "bad-cfg"
            ].result(30)
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert "segment.bytes" in refused.value.args[0].str()
        assert _describe(admin, "cfg")["retention.ms"].value == "86400000"


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_alter_configs_replaces_the_set_and_everything_survives_a_restart(node_dir: str) -> None:
    with running_node(node_dir) as node:
        admin = _admin(node)
        # AlterConfigs (the legacy API) replaces the topic's whole set: what is not named goes back to
        # the default.
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            "cfg",
            set_config={"segment.bytes": "50000", "max.message.bytes": "20000"},
        )
        admin.alter_configs([resource])[resource].result(30)
        wait_until(lambda: _describe(admin, "cfg")["segment.bytes"].value == "50000", 10, "the new set")
        configs = _describe(admin, "cfg")
        assert configs["message.timestamp.type"].value == "CreateTime"
        assert configs["message.timestamp.type"].source == ConfigSource.DEFAULT_CONFIG.value
        assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    with running_node(node_dir) as node:
        admin = _admin(node)
        configs = _describe(admin, "cfg")
        assert configs["segment.bytes"].value == "50000"
        assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        before = _segments(node, "cfg")
        assert _produce(node, "cfg", 300, 1000) == [None] * 300
        assert _segments(node, "cfg") >= before + 5  # 300 kB in 50 kB segments after the restart
        big = _produce(node, "cfg", 1, 30000)
        assert big[0] is not None and big[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def _acks_all_error(node: RunningNode, topic: str, acks: int = -1) -> int:
    """The error code of one produce (acks=all unless told) to partition 0 of ``topic``."""
    with RawClient(node.bootstrap_servers) as client:
        batch = bytes(build_batch([Record(None, b"x")], timestamp_ms=int(time.time() * 1000)))
        response = client.request(produce_request(topic, batch, acks=acks), ProduceResponse, 9)
    return int(response.responses[0].partition_responses[0].error_code)


def test_min_insync_replicas_refuses_acks_all_set_at_creation_at_runtime_and_after_a_restart(
    node_dir: str,
) -> None:
    # One replica (the ISR is the leader) and min.insync.replicas=2: acks=all writes are
    # NOT_ENOUGH_REPLICAS, as Kafka answers them; acks=1 writes are not affected.
    with running_node(node_dir) as node:
        admin = _admin(node)
        admin.create_topics([NewTopic("isr", 1, 1, config={"min.insync.replicas": "2"})])["isr"].result(30)
        assert _acks_all_error(node, "isr") == ErrorCode.NOT_ENOUGH_REPLICAS
        assert _acks_all_error(node, "isr", acks=1) == ErrorCode.NONE
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            "isr",
            incremental_configs=[
                ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        wait_until(lambda: _acks_all_error(node, "isr") == ErrorCode.NONE, 10, "min.insync.replicas=1")
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            "isr",
            incremental_configs=[
                ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
    with running_node(node_dir) as node:
        assert _acks_all_error(node, "isr") == ErrorCode.NOT_ENOUGH_REPLICAS


SEGMENT_BYTES = 1048576  # Kafka 4's smallest segment.bytes (KIP-1030)


def test_an_append_larger_than_segment_bytes_is_refused_and_nothing_of_it_is_stored(node_dir: str) -> None:
    # Kafka's UnifiedLog.append: what one produce brings to a partition goes into one segment, so more
    # than segment.bytes of it is RECORD_LIST_TOO_LARGE (max.message.bytes is larger here, so it is the
    # segment's limit that refuses it), never an oversized segment the cleaner cannot work on.
    with running_node(node_dir) as node:
        admin = _admin(node)
        configs = {"segment.bytes": str(SEGMENT_BYTES), "max.message.bytes": str(4 * SEGMENT_BYTES)}
        admin.create_topics([NewTopic("seg", 1, 1, config=configs)])["seg"].result(30)
        producer = Producer(
            {"bootstrap.servers": node.bootstrap_servers, "message.max.bytes": 8 * SEGMENT_BYTES}
        )
        outcomes: list[KafkaError | None] = []
        producer.produce(
            "seg", os.urandom(SEGMENT_BYTES + 1000), on_delivery=lambda err, _m: outcomes.append(err)
        )
        producer.flush(30)
        assert len(outcomes) == 1 and outcomes[0] is not None, outcomes
        assert outcomes[0].code() == KafkaError.RECORD_LIST_TOO_LARGE, outcomes[0]
        consumer = Consumer({"bootstrap.servers": node.bootstrap_servers, "group.id": "seg"})
        try:
            assert consumer.get_watermark_offsets(TopicPartition("seg", 0), 10) == (0, 0)
        finally:
            consumer.close()
        directory = os.path.join(node.data_dir, "seg-0")
        assert [
            os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory) if n.endswith(".log")
        ] == [0]
        # What fits is stored as usual.
        outcomes.clear()
        producer.produce(
            "seg", os.urandom(SEGMENT_BYTES // 2), on_delivery=lambda err, _m: outcomes.append(err)
        )
        producer.flush(30)
        assert outcomes == [None]


def _alter_broker(admin: AdminClient, name: str, key: str, value: str | None) -> None:
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(
        ConfigResource.Type.BROKER,
        name,
        incremental_configs=[ConfigEntry(key, value, incremental_operation=op)],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def _broker_value(admin: AdminClient, name: str, key: str) -> tuple[str, int] | None:
    resource = ConfigResource(ConfigResource.Type.BROKER, name)
    entry = admin.describe_configs([resource])[resource].result(30).get(key)
    return None if entry is None else (entry.value, entry.source)


def test_dynamic_broker_configs_apply_to_topics_without_their_own_and_survive_a_restart(
    node_dir: str,
) -> None:
    with running_node(node_dir) as node:
        admin = _admin(node)
        admin.create_topics([NewTopic("dyn", 1, 1)])["dyn"].result(30)
        # message.max.bytes for broker 1 (KIP-226): the default of every topic without max.message.bytes.
        _alter_broker(admin, "1", "message.max.bytes", "20000")
        dynamic = ConfigSource.DYNAMIC_BROKER_CONFIG.value
        wait_until(
            lambda: _broker_value(admin, "1", "message.max.bytes") == ("20000", dynamic), 10, "dynamic"
        )
        described = _describe(admin, "dyn")["max.message.bytes"]
        assert (described.value, described.source) == ("20000", dynamic)
        big = _produce(node, "dyn", 1, 30000)
        assert big[0] is not None and big[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
        # The cluster-wide default (resource ""; librdkafka will not send that name, kafka-configs'
        # --entity-default does), under a per-broker value when both are set.
        done = _configs_cli(
            node,
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--add-config",
            "log.retention.ms=123456",
        )
        assert done.stdout == "Completed updating default config for brokers in the cluster.\n", done.stderr
        default = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        wait_until(
            lambda: _broker_value(admin, "1", "log.retention.ms") == ("123456", default), 10, "default"
        )
        assert (
            _describe(admin, "dyn")["retention.ms"].value,
            _describe(admin, "dyn")["retention.ms"].source,
        ) == (
            "123456",
            default,
        )
        # Only dynamic configs may be set: Kafka's INVALID_REQUEST; a bad value is INVALID_CONFIG.
        for key, value, code in (
            ("num.partitions", "3", KafkaError.INVALID_REQUEST),
            ("log.retention.ms", "soon", KafkaError.INVALID_CONFIG),
        ):
            with pytest.raises(KafkaException) as refused:
                _alter_broker(admin, "1", key, value)
            assert refused.value.args[0].code() == code and key in refused.value.args[0].str()
    with running_node(node_dir) as node:
        admin = _admin(node)
        assert _broker_value(admin, "1", "message.max.bytes") == (
            "20000",
            ConfigSource.DYNAMIC_BROKER_CONFIG.value,
        )
        big = _produce(node, "dyn", 1, 30000)
        assert big[0] is not None and big[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
        _alter_broker(admin, "1", "message.max.bytes", None)
        _configs_cli(
            node,
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--delete-config",
            "log.retention.ms",
        )
        wait_until(lambda: _produce(node, "dyn", 1, 30000) == [None], 10, "the static limit back")
        assert _describe(admin, "dyn")["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def _configs_cli(node: RunningNode, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pykraft.cli", "configs", "--bootstrap-server", node.bootstrap_servers, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_pykraft_configs_alters_and_describes_as_kafka_configs_does(node_dir: str) -> None:
    with running_node(node_dir) as node:
        topic = ["--entity-type", "topics", "--entity-name", "cfg"]
        altered = _configs_cli(
            node, *topic, "--alter", "--add-config", "retention.ms=3600000,cleanup.policy=[delete,compact]",
            "--delete-config", "max.message.bytes",
        )  # fmt: skip
        assert altered.returncode == 0, altered.stderr
        assert altered.stdout.strip() == "Completed updating config for topic cfg."
        configs = _describe(_admin(node), "cfg")
        assert configs["retention.ms"].value == "3600000"
        assert configs["cleanup.policy"].value == "delete,compact"
        assert configs["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
        described = _configs_cli(node, *topic, "--describe")
        assert described.returncode == 0, described.stderr
        lines = described.stdout.splitlines()
        assert lines[0] == "Dynamic configs for topic cfg are:"
        assert any(
            line.startswith(
                "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"
            )
            for line in lines
        )
        assert not any("max.message.bytes" in line for line in lines)
        everything = _configs_cli(node, *topic, "--describe", "--all").stdout
        assert "  max.message.bytes=1048588 sensitive=false" in everything
        bad = _configs_cli(node, *topic, "--alter", "--add-config", "retention.ms=soon")
        assert bad.returncode == 1 and bad.stderr.startswith("error: alter cfg: INVALID_CONFIG: ")
        assert "retention.ms" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
