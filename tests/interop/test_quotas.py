"""Client quotas through real clients (issue 27 item 7, KIP-546/KIP-219/KIP-599): set with
``pykraft configs --entity-type clients|users``, a flat-out confluent-kafka producer is slowed to its
``producer_byte_rate`` and reports the broker's throttle times, the metrics show them per client id,
AlterClientQuotas refuses bad input with Kafka's errors, ``consumer_byte_rate`` throttles a
confluent-kafka consumer, ``request_percentage`` a client's requests, and ``controller_mutation_rate``
refuses a CreateTopics v6 over it with THROTTLING_QUOTA_EXCEEDED.

The node measures rates over 2 samples of 1 s (``quota.window.num=2``): with Kafka's 11 a client may
first send about ten seconds' worth at once (the rate's window is never shorter than 10 s), which a
test of a few seconds could not tell from no quota at all.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from prometheus_client.parser import text_string_to_metric_families

from pykraft.cli import main
from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnection
from pykraft.testing import RunningNode, free_port, running_node
from tests.raw_client import RawClient

pytestmark = pytest.mark.slow

PRODUCER_BYTE_RATE = 128 * 1024
PRODUCE_SECONDS = 7.0


@pytest.fixture(scope="module")
def node() -> Iterator[tuple[RunningNode, str]]:
    port = free_port()
    with running_node(overrides={"quota.window.num": "2", "metrics.port": str(port)}) as running:
        yield running, f"http://127.0.0.1:{port}/metrics"


@pytest.fixture
def configs(node: tuple[RunningNode, str], capsys: pytest.CaptureFixture[str]) -> Callable[..., str]:
    """``pykraft configs --bootstrap-server <node> ARGS``, in this process: its output."""

    def run(*args: str) -> str:
        status = main(["configs", "--bootstrap-server", node[0].bootstrap_servers, *args])
        out, err = capsys.readouterr()
        assert status == 0, err
        return out.strip()

    return run


def _metric(url: str, name: str, **labels: str) -> float:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"no {name}{labels} in the metrics")


def test_producer_byte_rate_slows_a_flat_out_producer_and_it_reports_the_throttle(
    node: tuple[RunningNode, str], configs: Callable[..., str]
) -> None:
    running, metrics_url = node
    client = ["--entity-type", "clients", "--entity-name", "quota-slow"]
    set_quota = configs(*client, "--alter", "--add-config", f"producer_byte_rate={PRODUCER_BYTE_RATE}")
    assert set_quota == "Completed updating config for client-id 'quota-slow'."
    assert configs(*client, "--describe") == (
        f"Quota configs for client-id 'quota-slow' are producer_byte_rate={float(PRODUCER_BYTE_RATE)}"
    )

    throttles_ms: list[int] = []

    def on_stats(text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            if broker["nodeid"] >= 0 and broker["throttle"]["cnt"]:
                throttles_ms.append(broker["throttle"]["max"])

    delivered: list[tuple[float, int]] = []

    def on_delivery(err: object, msg: object) -> None:
        assert err is None, err
        delivered.append((time.monotonic(), len(msg.value())))  # type: ignore[attr-defined]

    producer = Producer(
        {
            "bootstrap.servers": running.bootstrap_servers,
            "client.id": "quota-slow",
            "linger.ms": 5,
            "batch.size": 16384,
            "queue.buffering.max.kbytes": 256,
            "statistics.interval.ms": 500,
            "stats_cb": on_stats,
        }
    )
    value = b"q" * 1024
    started: float | None = None
    while started is None or time.monotonic() - started < PRODUCE_SECONDS:
        try:
            producer.produce("quota-produce", value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
        if started is None and delivered:
            started = delivered[0][0]  # the topic exists: the clock starts at the first delivery
    assert producer.flush(30) == 0
    # After the first second (the allowance of an empty window), deliveries keep to the quota.
    measured = sum(n for t, n in delivered if started + 1 <= t < started + PRODUCE_SECONDS)
    rate = measured / (PRODUCE_SECONDS - 1)
    assert 0.8 * PRODUCER_BYTE_RATE <= rate <= 1.2 * PRODUCER_BYTE_RATE, f"{rate:.0f} B/s"
    assert throttles_ms and max(throttles_ms) > 0  # the broker's throttle_time_ms, as librdkafka saw it
    labels = {"user": "", "client_id": "quota-slow"}
    assert _metric(metrics_url, "kafka_server_produce_throttle_time", **labels) > 0
    assert _metric(metrics_url, "kafka_server_produce_byte_rate", **labels) > 0


def test_alter_client_quotas_checks_entities_and_keys_and_the_cli_describes_defaults(
    node: tuple[RunningNode, str], configs: Callable[..., str]
) -> None:
    running, _ = node
    entry = AlterClientQuotasRequest.EntryData

    def alter(
        entity: list[tuple[str, str | None]], key: str, value: float, validate_only: bool = False
    ) -> Any:
        request = AlterClientQuotasRequest(
            entries=[
                entry(
                    entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[entry.OpData(key=key, value=value, remove=False)],
                )
            ],
            validate_only=validate_only,
        )
        with RawClient(running.bootstrap_servers) as raw:
            result = raw.request(request, AlterClientQuotasResponse, 1).entries[0]
        return result.error_code, result.error_message

    assert alter([("user", "alice")], "bogus_rate", 1.0) == (
        ErrorCode.INVALID_REQUEST,
        "Invalid configuration key bogus_rate",
    )
    assert alter([("group", "g")], "producer_byte_rate", 1.0) == (
        ErrorCode.INVALID_REQUEST,
        "Unhandled client quota entity type: group",
    )
    assert alter([("user", None)], "consumer_byte_rate", 2048.0, validate_only=True) == (ErrorCode.NONE, None)
    assert configs("--entity-type", "users", "--entity-default", "--describe") == ""
    assert alter([("user", None)], "consumer_byte_rate", 2048.0) == (ErrorCode.NONE, None)
    assert configs("--entity-type", "users", "--entity-default", "--describe") == (
        "Quota configs for the default user-principal are consumer_byte_rate=2048.0"
    )
    user_client = [
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--entity-type",
        "clients",
        "--entity-default",
    ]
    configs(*user_client, "--alter", "--add-config", "request_percentage=25.5")
    assert configs(*user_client, "--describe") == (
        "Quota configs for user-principal 'alice', the default client-id are request_percentage=25.5"
    )
    configs(*user_client, "--alter", "--delete-config", "request_percentage")
    configs("--entity-type", "users", "--entity-default", "--alter", "--delete-config", "consumer_byte_rate")
    assert configs("--entity-type", "users", "--describe") == ""


def test_controller_mutation_rate_refuses_create_topics_v6_over_it(
    node: tuple[RunningNode, str], configs: Callable[..., str]
) -> None:
    running, _ = node
    configs(
        "--entity-type",
        "clients",
        "--entity-name",
        "raw-test",
        "--alter",
        "--add-config",
        "controller_mutation_rate=1",
    )

    def create(name: str) -> tuple[int, int]:
        request = CreateTopicsRequest(
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=name, num_partitions=10, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=10000,
            validate_only=False,
        )
        with RawClient(running.bootstrap_servers) as raw:  # client id "raw-test"
            response = raw.request(request, CreateTopicsResponse, 6)
        return response.topics[0].error_code, response.throttle_time_ms

    # 10 partitions at 1 per second: the first is let through (KIP-599 checks before it records) and
    # throttled, the next is refused while the rate is over the quota.
    first_error, first_throttle_ms = create("mutation-a")
    assert first_error == ErrorCode.NONE and first_throttle_ms > 0
    second_error, second_throttle_ms = create("mutation-b")
    assert second_error == ErrorCode.THROTTLING_QUOTA_EXCEEDED and second_throttle_ms > 0


def test_consumer_byte_rate_throttles_fetches_of_one_client_only(
    node: tuple[RunningNode, str], configs: Callable[..., str]
) -> None:
    running, metrics_url = node
    configs(
        "--entity-type",
        "clients",
        "--entity-name",
        "quota-reader",
        "--alter",
        "--add-config",
        "consumer_byte_rate=32768",
    )
    # Batches smaller than the quota window's bytes: a batch is never split, and one larger than the
    # window would be throttled and dropped on every fetch (as in Kafka).
    producer = Producer(
        {"bootstrap.servers": running.bootstrap_servers, "client.id": "quota-fast", "batch.size": 16384}
    )
    for _ in range(400):
        producer.produce("quota-fetch", b"f" * 1024)
    assert producer.flush(30) == 0  # no quota for this client id: not throttled

    throttles_ms: list[int] = []

    def on_stats(text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            if broker["nodeid"] >= 0 and broker["throttle"]["cnt"]:
                throttles_ms.append(broker["throttle"]["max"])

    consumer = Consumer(
        {
            "bootstrap.servers": running.bootstrap_servers,
            "client.id": "quota-reader",
            "group.id": "quota-reader",
            "auto.offset.reset": "earliest",
            "statistics.interval.ms": 500,
            "stats_cb": on_stats,
        }
    )
    consumer.assign([TopicPartition("quota-fetch", 0, OFFSET_BEGINNING)])
    read = 0
    deadline = time.monotonic() + 30
    try:
        while not throttles_ms and time.monotonic() < deadline:
            read += len(consumer.consume(num_messages=1000, timeout=0.2))
    finally:
        consumer.close()
    assert throttles_ms and max(throttles_ms) > 0 and read > 0
    assert _metric(metrics_url, "kafka_server_fetch_throttle_time", user="", client_id="quota-reader") > 0


def test_request_percentage_throttles_a_client_that_keeps_the_broker_busy(
    node: tuple[RunningNode, str], configs: Callable[..., str]
) -> None:
    running, metrics_url = node
    # 0.001 % of a second is 10 microseconds: any request's handling goes over it.
    configs(
        "--entity-type",
        "clients",
        "--entity-name",
        "quota-busy",
        "--alter",
        "--add-config",
        "request_percentage=0.001",
    )
    host, port = running.bootstrap_servers.split(":")
    with BrokerConnection(host, int(port), client_id="quota-busy") as conn:
        response = conn.request(MetadataRequest(topics=None), MetadataResponse, 12)
    # ClientRequestQuotaManager caps the throttle at one quota window (1 s here).
    assert 0 < response.throttle_time_ms <= 1000
    assert _metric(metrics_url, "kafka_server_request_throttle_time", user="", client_id="quota-busy") > 0
    assert _metric(metrics_url, "kafka_server_request_request_time", user="", client_id="quota-busy") > 0
