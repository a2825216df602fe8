"""Real pykraft nodes for tests: in-process on ephemeral ports over a temp dir, or a cluster of
controller and broker processes (``running_cluster``/``process_cluster``: real processes, real kill -9).

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
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pykraft.core.config import NodeConfig, load_config
from pykraft.io.kafka_connection import ClientSecurity

# Broker processes of a ProcessCluster are numbered from here (controllers from 1), as Kafka's docs do.
BROKER_ID_BASE = 100


# Linux's default ephemeral range, when /proc does not say.
_EPHEMERAL_DEFAULT = (32768, 60999)
_port_rng = random.Random()
# Ports this process handed out: never twice, so two picks before their binds cannot collide.
_handed_out: set[int] = set()


def _listener_port_range() -> tuple[int, int]:
    """Ports outside the kernel's ephemeral range. A port handed out here is bound later (a node's
    listener, often in another process); every outgoing connection meanwhile takes an ephemeral source
    port, so a pick inside that range could be taken by one before the bind ('address already in use',
    seen in CI). Below the range if there is room, else above it."""
    low, high = _EPHEMERAL_DEFAULT
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            low, high = map(int, fh.read().split())
    if low - 1 - 10000 >= 1024:
        return max(1024, low - 12000), low - 1
    return high + 1, 65535


def free_port() -> int:
    """A 127.0.0.1 port free now, outside the ephemeral range, not handed out before by this process."""
    low, high = _listener_port_range()
    for _ in range(1000):
        port = _port_rng.randint(low, high)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{high} on 127.0.0.1")


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

    @property
    def controller_address(self) -> str:
        """host:port of the node's controller listener (raft RPCs, DescribeQuorum)."""
        from pykraft.io.node import Node

        assert isinstance(self._node, Node)
        return f"{self._node.controller_host}:{self._node.controller_port}"

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


def _quorum_lines(
    voters: dict[int, int], data_dir: str, extra: dict[str, str] | None, dynamic: bool = False
) -> list[str]:
    """``dynamic``: the controllers as ``controller.quorum.bootstrap.servers`` (a KIP-853 quorum whose
    first voter is the first server listed) instead of static ``controller.quorum.voters``."""
    quorum = (
        "controller.quorum.bootstrap.servers=" + ",".join(f"127.0.0.1:{p}" for _, p in sorted(voters.items()))
        if dynamic
        else "controller.quorum.voters=" + ",".join(f"{i}@127.0.0.1:{p}" for i, p in sorted(voters.items()))
    )
    lines = ["controller.listener.names=CONTROLLER", quorum, f"log.dirs={data_dir}"]
    lines.extend(f"{key}={value}" for key, value in (extra or {}).items())
    return lines


def controller_properties(
    node_id: int,
    data_dir: str,
    controller_port: int,
    voters: dict[int, int],
    extra: dict[str, str] | None = None,
    security_protocol: str = "PLAINTEXT",
    dynamic: bool = False,
) -> str:
    """A controller-only node's server.properties, Kafka's names, every address on 127.0.0.1."""
    lines = [
        f"node.id={node_id}",
        "process.roles=controller",
        f"listeners=CONTROLLER://127.0.0.1:{controller_port}",
        f"listener.security.protocol.map=CONTROLLER:{security_protocol}",
        *_quorum_lines(voters, data_dir, extra, dynamic),
    ]
    return "\n".join(lines) + "\n"


def broker_properties(
    node_id: int,
    data_dir: str,
    client_port: int,
    voters: dict[int, int],
    extra: dict[str, str] | None = None,
    security_protocol: str = "PLAINTEXT",
    dynamic: bool = False,
) -> str:
    """A broker-only node's server.properties: clients on ``client_port``, the quorum's voters to find
    the active controller. Every listener (the broker's, named after its protocol, and the
    controllers') uses ``security_protocol``."""
    lines = [
        f"node.id={node_id}",
        "process.roles=broker",
        f"listeners={security_protocol}://127.0.0.1:{client_port}",
        f"listener.security.protocol.map={security_protocol}:{security_protocol},CONTROLLER:{security_protocol}",
        *_quorum_lines(voters, data_dir, extra, dynamic),
    ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ClusterSecurity:
    """A cluster whose every listener uses ``security_protocol`` (the TLS and SASL properties come in
    the overrides), and how a tool connects to its brokers and controllers."""

    security_protocol: str
    broker_client: ClientSecurity
    controller_client: ClientSecurity


@dataclass
class ClusterProcess:
    node_id: int
    role: str  # "controller" or "broker"
    port: int  # the controller listener of a controller, the client listener of a broker
    config_path: str
    data_dir: str
    log_path: str
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class ProcessCluster:
    """Controller and broker processes (``pykraft server start --config``), one properties file and one
    data dir per node under ``directory``; controllers are nodes 1..C, brokers 101..100+B. Used by the
    cluster tests, the benchmarks and ``pykraft dev cluster``."""

    directory: str
    nodes: dict[int, ClusterProcess] = field(default_factory=dict)
    # How the cluster's own checks (DescribeQuorum, Metadata) connect when the listeners are secured.
    security: ClusterSecurity | None = None
    # What the brokers were made with, for ``add_broker``.
    broker_overrides: dict[str, str] = field(default_factory=dict)
    # KIP-853: the nodes find the controllers through controller.quorum.bootstrap.servers (the
    # controllers made by ``create``); controller 1 starts the quorum alone, the others join as
    # observers until added (``add_controller`` makes one more).
    dynamic: bool = False
    overrides: dict[str, str] = field(default_factory=dict)
    bootstrap_ports: dict[int, int] = field(default_factory=dict)
    # One broker's own properties over broker_overrides (a broker.rack, a metrics.port), by broker id.
    per_broker_overrides: dict[int, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        directory: str,
        controllers: int = 3,
        overrides: dict[str, str] | None = None,
        *,
        brokers: int = 0,
        broker_overrides: dict[str, str] | None = None,
        security: ClusterSecurity | None = None,
        dynamic: bool = False,
        per_broker_overrides: dict[int, dict[str, str]] | None = None,
    ) -> ProcessCluster:
        os.makedirs(directory, exist_ok=True)
        voters = {node_id: free_port() for node_id in range(1, controllers + 1)}
        cluster = cls(
            directory,
            security=security,
            dynamic=dynamic,
            overrides=dict(overrides or {}),
            per_broker_overrides=dict(per_broker_overrides or {}),
        )
        cluster.bootstrap_ports = dict(voters)
        for node_id, port in voters.items():
            cluster._add_controller(node_id, port)
        cluster.broker_overrides = {**(overrides or {}), **(broker_overrides or {})}
        for _ in range(brokers):
            cluster.add_broker()
        return cluster

    def _add_controller(self, node_id: int, port: int) -> None:
        protocol = self.security.security_protocol if self.security is not None else "PLAINTEXT"
        text = controller_properties(
            node_id, "", port, self.bootstrap_ports, self.overrides, protocol, self.dynamic
        )
        self._add(node_id, "controller", port, text)

    def add_controller(self) -> int:
        """One more controller of a dynamic quorum (the next id after the highest), finding the quorum
        through the same bootstrap servers; not started. It runs as an observer until added as a voter
        (``pykraft metadata-quorum add-controller``). Returns its id."""
        assert self.dynamic, "a static quorum's voters are fixed in controller.quorum.voters"
        node_id = max(self.controllers) + 1
        self._add_controller(node_id, free_port())
        return node_id

    def add_broker(self) -> int:
        """One more broker node (the next id after the highest, 101 on), made as the others were; not
        started (``start(node_id)``). Returns its id."""
        node_id = max([BROKER_ID_BASE, *self.brokers]) + 1
        voters = self.bootstrap_ports or {i: n.port for i, n in self.controllers.items()}
        protocol = self.security.security_protocol if self.security is not None else "PLAINTEXT"
        port = free_port()
        self._add(
            node_id,
            "broker",
            port,
            broker_properties(
                node_id,
                "",
                port,
                voters,
                {**self.broker_overrides, **self.per_broker_overrides.get(node_id, {})},
                protocol,
                self.dynamic,
            ),
        )
        return node_id

    def _add(self, node_id: int, role: str, port: int, properties: str) -> None:
        name = f"{role}-{node_id}"
        config_path = os.path.join(self.directory, f"{name}.properties")
        data_dir = os.path.join(self.directory, name)
        with open(config_path, "w", encoding="utf-8") as fh:
            fh.write(properties.replace("log.dirs=\n", f"log.dirs={data_dir}\n"))
        log_path = os.path.join(self.directory, f"{name}.log")
        self.nodes[node_id] = ClusterProcess(node_id, role, port, config_path, data_dir, log_path)

    @property
    def controllers(self) -> dict[int, ClusterProcess]:
        return {i: n for i, n in self.nodes.items() if n.role == "controller"}

    @property
    def brokers(self) -> dict[int, ClusterProcess]:
        return {i: n for i, n in self.nodes.items() if n.role == "broker"}

    @property
    def bootstrap_servers(self) -> str:
        """The brokers' client listeners, for ``bootstrap.servers``."""
        return ",".join(n.address for n in self.brokers.values())

    def start(self, node_id: int | None = None) -> None:
        for node in self._select(node_id):
            if node.alive:
                continue
            with open(node.log_path, "ab") as log_file:
                node.process = subprocess.Popen(
                    [sys.executable, "-m", "pykraft.cli", "server", "start", "--config", node.config_path],
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )

    def kill(self, node_id: int) -> None:
        """kill -9: no flush, no EndQuorumEpoch, no controlled shutdown."""
        node = self.nodes[node_id]
        if node.process is not None and node.alive:
            node.process.send_signal(signal.SIGKILL)
            node.process.wait(timeout=30)

    def stop(self, node_id: int | None = None, timeout_s: float = 30.0) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL for a process still running after ``timeout_s``.
        Brokers stop first (their controlled shutdown needs the controllers)."""
        selected = [n for n in self._select(node_id) if n.process is not None]
        for group in (
            [n for n in selected if n.role == "broker"],
            [n for n in selected if n.role != "broker"],
        ):
            for node in group:
                if node.alive:
                    assert node.process is not None
                    node.process.send_signal(signal.SIGTERM)
            for node in group:
                assert node.process is not None
                try:
                    node.process.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait(timeout=30)

    def describe_quorum(self, node_id: int | None = None) -> Any:
        """DescribeQuorum from ``node_id``, or from whichever live controller answers."""
        from pykraft.cli.metadata import describe_quorum

        security = self.security.controller_client if self.security is not None else None
        if node_id is not None:
            return describe_quorum(self.nodes[node_id].address, timeout_s=5.0, security=security)
        errors = []
        for node in self.controllers.values():
            if node.alive:
                try:
                    return describe_quorum(node.address, timeout_s=5.0, security=security)
                except Exception as exc:
                    errors.append(f"{node.node_id}: {exc}")
        raise RuntimeError("no controller answered DescribeQuorum: " + "; ".join(errors))

    def wait_for_leader(self, timeout_s: float = 30.0, *, exclude: frozenset[int] = frozenset()) -> Any:
        """Poll until a live node reports a leader that is live and not in ``exclude``, and every live
        voter has caught up to the high watermark; returns that DescribeQuorum partition."""
        deadline = time.monotonic() + timeout_s
        last: object = None
        while time.monotonic() < deadline:
            try:
                partition = self.describe_quorum()
            except Exception as exc:
                last = exc
            else:
                last = partition
                leader = partition.leader_id
                live = {n.node_id for n in self.nodes.values() if n.alive}
                caught_up = all(
                    v.log_end_offset >= partition.high_watermark
                    for v in partition.current_voters
                    if v.replica_id in live
                )
                if leader in live and leader not in exclude and caught_up and partition.high_watermark > 0:
                    return partition
            time.sleep(0.05)
        raise TimeoutError(f"no leader with caught-up voters within {timeout_s} s; last answer: {last!r}")

    def wait_for_brokers(self, timeout_s: float = 60.0, *, expected: set[int] | None = None) -> list[int]:
        """Poll Metadata on every live broker until each lists ``expected`` (default: every live broker)
        as unfenced; returns the broker ids listed. Every broker must agree: a broker that was paused or
        has just restarted answers from a metadata image that may predate a fencing, so one broker's word
        is not the cluster's."""
        from kafka.protocol.metadata import MetadataRequest, MetadataResponse

        from pykraft.io.kafka_connection import BrokerConnection

        want = expected if expected is not None else {i for i, n in self.brokers.items() if n.alive}
        deadline = time.monotonic() + timeout_s
        last: object = None
        while time.monotonic() < deadline:
            views: dict[int, list[int]] = {}
            for broker_id, node in self.brokers.items():
                if not node.alive:
                    continue
                try:
                    security = self.security.broker_client if self.security is not None else None
                    with BrokerConnection.to(node.address, timeout_s=5.0, security=security) as conn:
                        response = conn.request(MetadataRequest(topics=[]), MetadataResponse, 9)
                except Exception as exc:
                    last = exc
                    break
                views[broker_id] = sorted(b.node_id for b in response.brokers)
            else:
                last = views
                if views and all(want <= set(listed) for listed in views.values()):
                    return next(iter(views.values()))
            time.sleep(0.1)
        raise TimeoutError(f"brokers {sorted(want)} not all unfenced within {timeout_s} s; last: {last!r}")

    def logs(self) -> str:
        out = []
        for node in self.nodes.values():
            with contextlib.suppress(OSError), open(node.log_path, encoding="utf-8", errors="replace") as fh:
                out.append(f"--- {node.role} {node.node_id} ---\n" + fh.read()[-4000:])
        return "\n".join(out)

    def _select(self, node_id: int | None) -> list[ClusterProcess]:
        return list(self.nodes.values()) if node_id is None else [self.nodes[node_id]]


@contextlib.contextmanager
def process_cluster(
    controllers: int = 3,
    *,
    brokers: int = 0,
    directory: str | None = None,
    overrides: dict[str, str] | None = None,
    broker_overrides: dict[str, str] | None = None,
    security: ClusterSecurity | None = None,
    dynamic: bool = False,
    per_broker_overrides: dict[int, dict[str, str]] | None = None,
) -> Iterator[ProcessCluster]:
    """Start ``controllers`` controller processes and ``brokers`` broker processes on 127.0.0.1; stop
    (then kill) all of them on exit."""
    own_dir = directory is None
    path = tempfile.mkdtemp(prefix="pykraft-cluster-") if directory is None else directory
    cluster = ProcessCluster.create(
        path,
        controllers,
        overrides,
        brokers=brokers,
        broker_overrides=broker_overrides,
        security=security,
        dynamic=dynamic,
        per_broker_overrides=per_broker_overrides,
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        if own_dir:
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def running_cluster(
    controllers: int = 3,
    brokers: int = 3,
    *,
    directory: str | None = None,
    overrides: dict[str, str] | None = None,
    broker_overrides: dict[str, str] | None = None,
    timeout_s: float = 60.0,
    security: ClusterSecurity | None = None,
    dynamic: bool = False,
    per_broker_overrides: dict[int, dict[str, str]] | None = None,
) -> Iterator[ProcessCluster]:
    """A whole cluster of separate processes, returned once a controller leads and every broker is
    registered and unfenced (Metadata lists it): ``cluster.bootstrap_servers`` is ready for clients."""
    with process_cluster(
        controllers,
        brokers=brokers,
        directory=directory,
        overrides=overrides,
        broker_overrides=broker_overrides,
        security=security,
        dynamic=dynamic,
        per_broker_overrides=per_broker_overrides,
    ) as cluster:
        try:
            cluster.wait_for_leader(timeout_s)
            if brokers:
                cluster.wait_for_brokers(timeout_s)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{cluster.logs()}") from None
        yield cluster


try:  # the pytest fixture, when pytest is present
    import pytest

    @pytest.fixture
    def pykraft_node() -> Iterator[RunningNode]:
        with running_node() as node:
            yield node

    @pytest.fixture
    def pykraft_cluster() -> Iterator[ProcessCluster]:
        """Three controller and three broker processes, ready for clients."""
        with running_cluster(controllers=3, brokers=3) as cluster:
            yield cluster

except ImportError:  # pragma: no cover
    pass
