"""Stop + restart keeps topics, data and producer-ID monotonicity; kill -9 loses nothing acknowledged."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from pykraft.testing import free_port, node_properties, running_node
from tests.interop.test_confluent import consume_all
from tests.raw_client import RawClient

pytestmark = pytest.mark.slow


def _init_producer_id(bootstrap: str) -> int:
    with RawClient(bootstrap) as client:
        for _ in range(100):
            resp = client.request(
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
                InitProducerIdResponse,
                version=4,
            )
            if resp.error_code == 0:
                return resp.producer_id
            assert resp.error_code == 14  # COORDINATOR_LOAD_IN_PROGRESS while the first block arrives
            time.sleep(0.05)
    raise AssertionError("no producer id")


def test_restart_keeps_topics_data_and_producer_id_monotonicity(tmp_path) -> None:
    data_dir = str(tmp_path / "data")
    with running_node(data_dir) as node:
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        for fut in admin.create_topics([NewTopic("kept", num_partitions=2)]).values():
            fut.result(timeout=30)
        producer = Producer({"bootstrap.servers": node.bootstrap_servers, "enable.idempotence": True})
        for i in range(500):
            producer.produce("kept", value=b"m%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        pids_before = [_init_producer_id(node.bootstrap_servers) for _ in range(3)]
    assert pids_before == sorted(pids_before) and len(set(pids_before)) == 3

    with running_node(data_dir) as node:
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        topics = admin.list_topics(timeout=10).topics
        assert "kept" in topics and len(topics["kept"].partitions) == 2
        got = [m.value() for m in consume_all(node.bootstrap_servers, "kept", 0, 250)]
        assert got == [b"m%d" % i for i in range(0, 500, 2)]
        pid_after = _init_producer_id(node.bootstrap_servers)
        assert pid_after > max(pids_before)
        # The topic keeps taking writes after the restart, at the next offsets.
        producer = Producer({"bootstrap.servers": node.bootstrap_servers, "enable.idempotence": True})
        producer.produce("kept", value=b"after", partition=0)
        assert producer.flush(30) == 0
        got = consume_all(node.bootstrap_servers, "kept", 0, 251)
        assert got[-1].value() == b"after" and got[-1].offset() == 250


def _wait_port(port: int, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"port {port} did not open")


def _start_server(config_path: str, port: int) -> subprocess.Popen:
    """The server's log goes to ``<config>.log`` (a pipe nobody reads would fill and stall the server)."""
    log_path = config_path + ".log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pykraft.cli", "server", "start", "--config", config_path],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
    try:
        _wait_port(port)
    except AssertionError:
        proc.kill()
        proc.wait(timeout=10)
        with open(log_path, encoding="utf-8", errors="replace") as f:
            raise AssertionError(f.read()) from None
    return proc


def _stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM (a clean stop), or kill -9 when that does not end it within 30 s."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_kill_9_during_produce_keeps_every_acknowledged_message(tmp_path) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(node_properties(str(tmp_path / "data"), port, free_port()))
    bootstrap = f"127.0.0.1:{port}"
    proc = _start_server(str(config), port)
    acked: list[bytes] = []
    try:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 5000,
            }
        )

        def on_delivery(err, msg) -> None:
            if err is None:
                acked.append(msg.value())

        i = 0
        while len(acked) < 20000:
            try:
                producer.produce("crash", value=b"c%08d" % i, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.01)
            if i % 500 == 0:
                producer.poll(0)
        # Kill while the producer still has requests in flight.
        for _ in range(2000):
            producer.produce("crash", value=b"c%08d" % i, on_delivery=on_delivery)
            i += 1
        producer.poll(0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        producer.flush(6)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    acked_set = set(acked)
    proc = _start_server(str(config), port)
    try:
        got = [m.value() for m in consume_all(bootstrap, "crash", 0, len(acked_set), timeout_s=30)]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert acked_set <= set(got), f"{len(acked_set - set(got))} acknowledged messages lost"
    # In order and without duplicates: the idempotent producer's sequence checks hold across the crash.
    assert got == sorted(got)
    assert len(got) == len(set(got))


def test_producer_state_is_rebuilt_on_restart(tmp_path) -> None:
    from tests.protocol.test_raw_requests import _batch, _pid, _produce
    from tests.raw_client import create_topic

    data_dir = str(tmp_path / "data")
    with running_node(data_dir) as node, RawClient(node.bootstrap_servers) as client:
        create_topic(client, "dup")
        pid = _pid(client)
        assert _produce(client, "dup", _batch(pid, 0, 0, n=4)).base_offset == 0
        assert _produce(client, "dup", _batch(pid, 0, 4, n=2)).base_offset == 4
    with running_node(data_dir) as node, RawClient(node.bootstrap_servers) as client:
        retry = _produce(client, "dup", _batch(pid, 0, 4, n=2))
        assert (retry.error_code, retry.base_offset) == (0, 4)  # a pre-restart batch is still a duplicate
        assert _produce(client, "dup", _batch(pid, 0, 9)).error_code == 45
        assert _produce(client, "dup", _batch(pid, 0, 6)).base_offset == 6
