"""The Prometheus endpoint (issue 18) of a real node: counters move by what confluent-kafka produced and
consumed, pipelined requests are served in order and counted, and the Grafana dashboard in docs/ uses
only names the endpoint exports. One node for the module (scraped on 127.0.0.1 only)."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from prometheus_client.parser import text_string_to_metric_families

from pykraft.testing import RunningNode, free_port, running_node
from tests.raw_client import RawClient

pytestmark = pytest.mark.slow

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
RECORDS = 500
VALUE_BYTES = 200

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def node() -> Iterator[tuple[RunningNode, str]]:
    port = free_port()
    with running_node(overrides={"metrics.port": str(port)}) as running:
        yield running, f"http://127.0.0.1:{port}/metrics"


def _scrape_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return str(response.read().decode())


def _scrape(url: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(_scrape_text(url)):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def _total(samples: Samples, name: str, **labels: str) -> float:
    """Summed over every series of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def test_counters_move_by_what_was_produced_and_consumed(node: tuple[RunningNode, str]) -> None:
    running, url = node
    topic = "metrics-events"
    before = _scrape(url)
    producer = Producer(
        {"bootstrap.servers": running.bootstrap_servers, "enable.idempotence": True, "linger.ms": 5}
    )
    for i in range(RECORDS):
        producer.produce(topic, key=b"k%04d" % i, value=bytes([i % 256]) * VALUE_BYTES)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": running.bootstrap_servers, "group.id": "metrics", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    consumed = 0
    deadline = time.monotonic() + 30
    while consumed < RECORDS and time.monotonic() < deadline:
        consumed += sum(1 for m in consumer.consume(num_messages=RECORDS, timeout=1.0) if not m.error())
    consumer.close()
    assert consumed == RECORDS
    time.sleep(0.6)  # the event-loop timer samples every 0.25 s
    after = _scrape(url)  # the producer is still connected

    def moved(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    # The all-topics series (no topic label) and the topic's own.
    assert moved("kafka_server_brokertopicmetrics_messagesin_total") == RECORDS
    assert moved("kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == RECORDS
    bytes_in = moved("kafka_server_brokertopicmetrics_bytesin_total", topic=topic)
    # The record batches as sent: the values plus keys, record and batch headers (under 40 bytes a record
    # with linger batching).
    assert RECORDS * VALUE_BYTES < bytes_in < RECORDS * (VALUE_BYTES + 40)
    assert moved("kafka_server_brokertopicmetrics_bytesin_total") == bytes_in
    assert moved("kafka_server_brokertopicmetrics_bytesout_total", topic=topic) >= bytes_in
    assert moved("kafka_server_brokertopicmetrics_failedproducerequests_total") == 0
    assert moved("kafka_server_brokertopicmetrics_totalproducerequests_total", topic=topic) >= 1

    def requests(request: str, samples: Samples) -> float:
        return _total(samples, "kafka_network_requestmetrics_requests_total", request=request)

    for request in ("Produce", "Fetch", "Metadata", "ApiVersions", "InitProducerId"):
        assert requests(request, after) > requests(request, before), request
    assert _total(after, "kafka_network_requestmetrics_requests_total", request="Produce", version="10") > 0
    produce_count = _total(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce")
    assert produce_count == requests("Produce", after)
    assert _total(after, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") == (
        produce_count
    )
    assert _total(after, "kafka_network_requestmetrics_requestqueuetimems_count", request="Fetch") > 0

    # Every partition of this single node: the topic and the internal ones the clients caused.
    metadata = AdminClient({"bootstrap.servers": running.bootstrap_servers}).list_topics(timeout=10)
    partitions = sum(len(t.partitions) for t in metadata.topics.values())
    assert _value(after, "kafka_server_replicamanager_partitioncount") == partitions >= 1
    assert _value(after, "kafka_server_replicamanager_leadercount") == partitions
    assert _value(after, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert _value(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert _value(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert _value(after, "kafka_controller_kafkacontroller_globalpartitioncount") == partitions
    assert _value(after, "kafka_server_replicamanager_produceridcount") >= 1
    assert _value(after, "pykraft_producerstate_memory_bytes") > 0
    assert ("pykraft_logcleaner_passes_total", frozenset()) in after  # the log cleaner's counters
    groups_by_protocol = "kafka_server_group_coordinator_metrics_group_count"
    assert (groups_by_protocol, frozenset({("protocol", "consumer")})) in after
    assert (groups_by_protocol, frozenset({("protocol", "share")})) in after
    assert (
        "kafka_server_group_coordinator_metrics_share_group_count",
        frozenset({("state", "empty")}),
    ) in after
    acknowledged = "kafka_server_sharegroupmetrics_recordacknowledgements_total"
    assert (acknowledged, frozenset({("acktype", "Accept")})) in after
    assert _value(after, "kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT") > 0
    assert moved("kafka_server_socketservermetrics_connection_creation_total", listener="PLAINTEXT") >= 2
    assert _value(after, "kafka_server_raftmetrics_log_end_offset") > 0
    assert _value(after, "kafka_server_raftmetrics_high_watermark") == _value(
        after, "kafka_server_raftmetrics_log_end_offset"
    )
    assert _value(after, "kafka_server_snapshotemitter_latestsnapshotgeneratedagems") > 0
    assert 0 <= _value(after, "kafka_network_socketserver_networkprocessoravgidlepercent") <= 1
    assert _value(after, "pykraft_eventloop_lag_ms_count") >= 2
    assert _value(after, "pykraft_socketserver_queued_max_requests", listener="PLAINTEXT") == 500
    producer.flush(1)


def test_pipelined_requests_are_answered_in_order_and_counted(node: tuple[RunningNode, str]) -> None:
    running, url = node
    count = 25

    def api_versions_v0(samples: Samples) -> float:
        return _value(
            samples,
            "kafka_network_requestmetrics_requests_total",
            request="ApiVersions",
            version="0",
            listener="PLAINTEXT",
        )

    before = _scrape(url)
    with RawClient(running.bootstrap_servers) as client:
        # All sent before any is read: the node answers them one at a time, in order.
        sent = [client.send(ApiVersionsRequest(version=0), 0) for _ in range(count)]
        answered = [
            ApiVersionsResponse.decode(client.receive_frame(), version=0, header=True).header.correlation_id
            for _ in range(count)
        ]
    assert answered == sent
    after = _scrape(url)
    assert api_versions_v0(after) - api_versions_v0(before) == count
    # No request waited for a queued.max.requests slot (500) and none is in progress now.
    assert _value(after, "pykraft_socketserver_request_queue_waits_total", listener="PLAINTEXT") == 0


def test_only_get_metrics_is_served(node: tuple[RunningNode, str]) -> None:
    _, url = node
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(url.replace("/metrics", "/nothing"), timeout=10)
    assert excinfo.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as excinfo:
        urllib.request.urlopen(urllib.request.Request(url, data=b"x", method="POST"), timeout=10)
    assert excinfo.value.code == 405
    port = int(url.split(":")[2].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET\r\n\r\n")  # no path: not an HTTP request line
        assert sock.recv(100).startswith(b"HTTP/1.1 400 ")


def _dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries: list[str] = []

    def walk(item: object) -> None:
        if isinstance(item, dict):
            for key, value in item.items():
                if key in ("expr", "definition") and isinstance(value, str):
                    queries.append(value)
                walk(value)
        elif isinstance(item, list):
            for value in item:
                walk(value)

    walk(dashboard)
    return queries


def test_the_grafana_dashboard_uses_only_exported_names(node: tuple[RunningNode, str]) -> None:
    _, url = node
    exported: set[str] = set()
    suffixes = {
        "counter": ("_total",),
        "histogram": ("_bucket", "_sum", "_count"),
        "summary": ("_sum", "_count"),
        "gauge": ("",),
        "info": ("_info",),
    }
    for family in text_string_to_metric_families(_scrape_text(url)):
        exported.update(family.name + suffix for suffix in suffixes.get(family.type, ("",)))
        exported.update(sample.name for sample in family.samples)
    queries = _dashboard_queries()
    assert len(queries) >= 30
    used: set[str] = set()
    for query in queries:
        without_strings = re.sub(r'"[^"]*"', '""', query)
        used.update(re.findall(r"\b(?:kafka|pykraft|process|python)_[a-z0-9_]+", without_strings))
    assert len(used) >= 30
    assert sorted(used - exported) == []
