"""Issue 5 fault tests: real idempotent clients retry through a response-dropping proxy and the log
still holds every message exactly once, in order, with KIP-758's DUPLICATE_SEQUENCE_NUMBER (46)
answered to them as success; and producer state survives kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from pykraft.io.kafka_connection import BrokerConnectionError
from pykraft.testing import free_port, node_properties, running_node
from tests.interop.dropping_proxy import DroppingProxy
from tests.interop.test_confluent import consume_all
from tests.protocol.test_raw_requests import _batch, _pid, _produce
from tests.raw_client import RawClient, create_topic

pytestmark = pytest.mark.slow

MESSAGES = 3000


def _check_log(node, bootstrap: str, topic: str) -> None:
    got = [m.value() for m in consume_all(bootstrap, topic, 0, MESSAGES)]
    assert got == [b"m%d" % i for i in range(MESSAGES)]
    part = node._node.replicas.get(topic, 0)
    assert part.log.log_end_offset == MESSAGES  # nothing twice


def _run_with_proxy(seed: int, produce_all) -> DroppingProxy:
    broker_port = free_port()
    with DroppingProxy(
        broker_port, seed=seed, drop_probability=0.2, max_drops=15, duplicate_probability=0.1
    ) as proxy:
        overrides = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}
        with running_node(client_port=broker_port, overrides=overrides) as node:
            bootstrap = f"127.0.0.1:{proxy.port}"
            with RawClient(f"127.0.0.1:{broker_port}") as client:
                create_topic(client, "faults")
            produce_all(bootstrap)
            _check_log(node, bootstrap, "faults")
    return proxy


def test_confluent_kafka_retries_through_dropped_responses_exactly_once() -> None:
    errors: list[object] = []

    def produce_all(bootstrap: str) -> None:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "max.in.flight.requests.per.connection": 5,
                "linger.ms": 2,
                "batch.num.messages": 20,
                "retry.backoff.ms": 20,
                "reconnect.backoff.ms": 10,
            }
        )

        def on_delivery(err: object, _msg: object) -> None:
            if err is not None:
                errors.append(err)

        for i in range(MESSAGES):
            producer.produce("faults", value=b"m%d" % i, partition=0, on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(60) == 0

    proxy = _run_with_proxy(5, produce_all)
    assert errors == []
    assert proxy.drops > 0
    # 46 reached the client and it took it as success: no error, every message once.
    assert proxy.forwarded_produce_errors[46] > 0, proxy.forwarded_produce_errors
    assert set(proxy.forwarded_produce_errors) <= {0, 46}


def test_kafka_python_retries_through_dropped_responses_exactly_once() -> None:
    def produce_all(bootstrap: str) -> None:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            enable_idempotence=True,
            max_in_flight_requests_per_connection=5,
            linger_ms=2,
            batch_size=400,
            retry_backoff_ms=20,
            reconnect_backoff_ms=10,
        )
        futures = [producer.send("faults", value=b"m%d" % i, partition=0) for i in range(MESSAGES)]
        producer.flush(60)
        offsets = [future.get(timeout=1).offset for future in futures]  # raises if the app saw an error
        producer.close(timeout=10)
        assert -1 in offsets  # a batch answered with 46 completes with offset -1 (kafka-python's Sender)

    proxy = _run_with_proxy(7, produce_all)
    assert proxy.drops > 0
    assert proxy.forwarded_produce_errors[46] > 0, proxy.forwarded_produce_errors
    assert set(proxy.forwarded_produce_errors) <= {0, 46}


def test_kill_9_keeps_producer_state(tmp_path) -> None:
    """A subprocess node, tiny segments (snapshots at roll), SIGKILL, restart: retries of pre-crash
    batches are still duplicates, the next batch in order is accepted and a gap is rejected."""
    data_dir = str(tmp_path / "data")
    client_port, controller_port = free_port(), free_port()
    config = tmp_path / "node.properties"
    config.write_text(node_properties(data_dir, client_port, controller_port) + "log.segment.bytes=300\n")
    bootstrap = f"127.0.0.1:{client_port}"

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pykraft.cli", "server", "start", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    with RawClient(bootstrap, timeout_s=1) as client:
                        _pid(client)
                    return proc
                except (OSError, BrokerConnectionError):
                    time.sleep(0.1)
            raise AssertionError("node did not start")
        except BaseException:
            proc.kill()  # whatever went wrong, the process this test started does not outlive it
            proc.wait(timeout=30)
            raise

    proc = start()
    try:
        with RawClient(bootstrap) as client:
            create_topic(client, "crash")
            pid = _pid(client)
            for i in range(10):
                assert _produce(client, "crash", _batch(pid, 0, 3 * i, n=3)).base_offset == 3 * i
        snapshots = [n for n in os.listdir(os.path.join(data_dir, "crash-0")) if n.endswith(".snapshot")]
        assert snapshots  # rolls wrote some
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    proc = start()
    try:
        with RawClient(bootstrap) as client:
            retry = _produce(client, "crash", _batch(pid, 0, 27, n=3))
            assert (retry.error_code, retry.base_offset) == (0, 27)
            assert _produce(client, "crash", _batch(pid, 0, 3, n=3)).error_code == 46
            assert _produce(client, "crash", _batch(pid, 0, 31)).error_code == 45
            assert _produce(client, "crash", _batch(pid, 0, 30)).base_offset == 30
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
