"""Connection limits (issue 18): max.connections.per.ip holds under 5,000 connection attempts, the
connections over it are closed at once, and the node serves again as soon as some go;
connections.max.idle.ms closes a connection that says nothing while an active one is kept."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from pykraft.testing import free_port, node_properties
from tests.interop.cluster_support import wait_until
from tests.interop.test_restart import _start_server, _stop_server

pytestmark = pytest.mark.slow

PER_IP = 200
ATTEMPTS = 5000


def _still_open(sock: socket.socket) -> bool:
    """Open unless the node closed it (EOF or reset); never blocks."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _node(tmp_path: Path, **extra: str) -> tuple[object, int]:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(
        node_properties(str(tmp_path / "data"), port, free_port())
        + "".join(f"{k}={v}\n" for k, v in extra.items())
    )
    return _start_server(str(config), port), port


def test_max_connections_per_ip_holds_under_5000_attempts(tmp_path: Path) -> None:
    proc, port = _node(tmp_path, **{"max.connections.per.ip": str(PER_IP)})
    held: list[socket.socket] = []
    try:
        for _ in range(ATTEMPTS):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
            except OSError:
                pass  # refused outright under the load: also not a connection the node keeps
        # The node accepts PER_IP of them and closes every other one at once.
        wait_until(lambda: sum(_still_open(s) for s in held) == PER_IP, 60, f"{PER_IP} connections left open")
        # At the limit a new client from this address is turned away ...
        extra = socket.create_connection(("127.0.0.1", port), timeout=10)
        wait_until(lambda: not _still_open(extra), 10, "the connection over the limit to be closed")
        extra.close()
        # ... and served again once some of them go.
        for sock in held[:10]:
            sock.close()
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        assert admin.list_topics(timeout=30).brokers
        log = (tmp_path / "server.properties.log").read_text()
        closing_lines = [line for line in log.splitlines() if "over max.connections" in line]
        assert (
            1 <= len(closing_lines) <= 14
        )  # logged at the 1st, 2nd, 4th, 8th... refusal, not per connection
    finally:
        for sock in held:
            sock.close()
        _stop_server(proc)


def test_connections_max_idle_ms_closes_a_silent_connection(tmp_path: Path) -> None:
    proc, port = _node(tmp_path, **{"connections.max.idle.ms": "500"})
    try:
        silent = socket.create_connection(("127.0.0.1", port), timeout=10)
        started = time.monotonic()
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        # An active client (metadata every 100 ms) is never idle that long.
        while time.monotonic() - started < 2.0:
            assert admin.list_topics(timeout=10).brokers
            time.sleep(0.1)
        assert not _still_open(silent)
        assert admin.list_topics(timeout=10).brokers
        silent.close()
    finally:
        _stop_server(proc)
