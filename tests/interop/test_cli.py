"""The `pykraft server start` process: Kafka's sample config starts it, bad values stop it, SIGTERM is clean."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from pykraft.testing import free_port
from tests.interop.test_confluent import consume_all
from tests.interop.test_restart import _wait_port

pytestmark = pytest.mark.slow
DATA = Path(__file__).resolve().parent.parent / "data"


def _server(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pykraft.cli", "server", "start", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize("sample", ["kafka-3.9-kraft-server.properties", "kafka-4.0-server.properties"])
def test_kafkas_sample_config_starts_and_serves(sample: str, tmp_path: Path) -> None:
    port, controller_port = free_port(), free_port()
    proc = _server(
        "--config",
        str(DATA / sample),
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "--override",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        "--override",
        f"log.dirs={tmp_path / 'data'}",
    )
    try:
        _wait_port(port)
        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        producer.produce("sample", value=b"hello")
        assert producer.flush(30) == 0
        assert [m.value() for m in consume_all(bootstrap, "sample", 0, 1)] == [b"hello"]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert "ignoring property num.network.threads" in stderr
    assert (tmp_path / "data" / "__cluster_metadata-0" / "00000000000000000000.log").exists()
    assert (tmp_path / "data" / "sample-0" / "00000000000000000000.log").exists()


def test_malformed_value_is_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    proc = _server("--override", "num.partitions=lots", "--override", f"log.dirs={tmp_path}")
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode != 0
    lines = stderr.decode().strip().splitlines()
    assert lines == ["pykraft: num.partitions: 'lots' is not an integer"]
    assert list(tmp_path.iterdir()) == []


def test_unreadable_config_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    proc = _server("--config", str(missing))
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert str(missing) in stderr.decode() and "--config" in stderr.decode()
