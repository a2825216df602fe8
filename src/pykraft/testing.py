"""Real pykraft nodes for tests: in-process on ephemeral ports over a temp dir.

    from pykraft.testing import running_node

    with running_node() as node:
        producer = confluent_kafka.Producer({"bootstrap.servers": node.bootstrap_servers})

The node runs its own asyncio loop in a background thread, so blocking clients (confluent-kafka,
kafka-python) can be used from the test thread. ``pytest`` users get the ``pykraft_node`` fixture
from ``pykraft.testing`` (add ``pytest_plugins = ["pykraft.testing"]`` to a conftest).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from pykraft.core.config import NodeConfig, load_config


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def node_properties(data_dir: str, client_port: int, controller_port: int, node_id: int = 1) -> str:
    return (
        f"node.id={node_id}\n"
        "process.roles=broker,controller\n"
        f"listeners=PLAINTEXT://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{controller_port}\n"
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{client_port}\n"
        "controller.listener.names=CONTROLLER\n"
        f"controller.quorum.voters={node_id}@127.0.0.1:{controller_port}\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
        f"log.dirs={data_dir}\n"
    )


@dataclass
class RunningNode:
    config: NodeConfig
    data_dir: str
    bootstrap_servers: str
    _loop: asyncio.AbstractEventLoop
    _thread: threading.Thread
    _node: object

    def stop(self) -> None:
        """Clean shutdown (flush and close), as SIGTERM does."""
        if not self._thread.is_alive():
            return
        from pykraft.io.node import SHUTDOWN_BUDGET_S, Node

        node = self._node
        assert isinstance(node, Node)
        fut = asyncio.run_coroutine_threadsafe(node.stop(), self._loop)
        # Node.stop bounds itself (SHUTDOWN_BUDGET_S); the margin is for closing the logs after it.
        fut.result(timeout=SHUTDOWN_BUDGET_S + 5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)


@contextlib.contextmanager
def running_node(
    data_dir: str | None = None, *, overrides: dict[str, str] | None = None, client_port: int = 0
) -> Iterator[RunningNode]:
    """Start a single-node (broker+controller) pykraft; stop it on exit. ``data_dir`` None = a temp
    dir removed afterwards; pass one to restart a node over the same data."""
    from pykraft.io.node import Node

    own_dir = data_dir is None
    directory = tempfile.mkdtemp(prefix="pykraft-") if data_dir is None else data_dir
    port = client_port or free_port()
    config = load_config(node_properties(directory, port, free_port()), overrides)
    loop = asyncio.new_event_loop()
    node = Node(config)
    started = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(node.start())
        except BaseException as exc:  # reported to the caller below
            failure.append(exc)
            started.set()
            loop.run_until_complete(node.stop())
            loop.close()
            return
        started.set()
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name="pykraft-node", daemon=True)
    thread.start()
    started.wait(timeout=60)
    if failure:
        raise failure[0]
    running = RunningNode(config, directory, f"127.0.0.1:{node.client_port}", loop, thread, node)
    try:
        yield running
    finally:
        running.stop()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


try:  # the pytest fixture, when pytest is present
    import pytest

    @pytest.fixture
    def pykraft_node() -> Iterator[RunningNode]:
        with running_node() as node:
            yield node

except ImportError:  # pragma: no cover
    pass
