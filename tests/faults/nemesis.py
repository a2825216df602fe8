"""The seeded nemesis: a schedule of faults drawn from one seed, run against a ProcessCluster whose
brokers are reached through :class:`FaultProxy`s (clients on each broker's client listener, the other
brokers on its replication listener, and each broker's path to each controller).

Every fault heals itself before the next one starts (overlapping faults are one fault of kind
``overlap`` that runs two others at once), and :meth:`Nemesis.heal_all` undoes whatever is left when
the run stops: paused processes are continued, cut proxies healed, dead nodes started.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pykraft.testing import ProcessCluster
from tests.faults.history import Fault
from tests.faults.proxy import FaultProxy

# Every kind of fault; a run with all of them enabled draws each with equal weight.
KINDS = (
    "kill_broker",
    "kill_leader",
    "kill_controller",
    "pause_broker",
    "pause_leader",
    "pause_controller",
    "pause_txn_coordinator",
    "kill_two_brokers",
    "rolling_restart",
    "kill_all",
    "partition_broker_controllers",
    "partition_broker_clients",
    "partition_broker_replication",
    "latency",
    "drop_connections",
    "disk_full",
    "overlap",
)
# What ``overlap`` may combine (two at once, on different nodes when it can).
_OVERLAPPABLE = ("kill_broker", "pause_controller", "pause_leader", "partition_broker_controllers", "latency")


@dataclass(frozen=True)
class Step:
    kind: str
    duration_s: float
    pick: int  # chooses the target among the candidates at run time
    then_s: float  # quiet time after healing


def schedule(seed: int, duration_s: float, kinds: tuple[str, ...] = KINDS) -> list[Step]:
    """The faults a seed draws, enough to fill ``duration_s``."""
    rng = random.Random(seed)
    steps: list[Step] = []
    total = 0.0
    while total < duration_s:
        step = Step(rng.choice(kinds), rng.uniform(2.0, 10.0), rng.randrange(1 << 30), rng.uniform(1.0, 4.0))
        steps.append(step)
        total += step.duration_s + step.then_s + 3.0  # a restart costs a few seconds on top
    return steps


class Nemesis:
    def __init__(
        self,
        cluster: ProcessCluster,
        client_proxies: dict[int, FaultProxy],
        replication_proxies: dict[int, FaultProxy],
        controller_proxies: dict[int, dict[int, FaultProxy]],
        log_dirs: dict[int, str],
        leader_of: Callable[[str, int], int | None],
        txn_coordinator: Callable[[], int | None],
        record: Callable[[Fault], None],
        started_at: float,
    ) -> None:
        self.cluster = cluster
        self.client_proxies = client_proxies
        self.replication_proxies = replication_proxies
        self.controller_proxies = controller_proxies
        self.log_dirs = log_dirs
        self.leader_of = leader_of
        self.txn_coordinator = txn_coordinator
        self.record = record
        self.started_at = started_at
        self.stopped = threading.Event()
        self._paused: set[int] = set()
        self._lock = threading.Lock()

    # --- the run ------------------------------------------------------------------------------------

    def run(self, steps: list[Step], deadline: float) -> None:
        for step in steps:
            if self.stopped.is_set() or time.monotonic() + step.duration_s > deadline:
                return
            self.apply(step)
            self.stopped.wait(step.then_s)

    def apply(self, step: Step) -> None:
        start = time.monotonic() - self.started_at
        nodes = self._fault(step.kind, step.duration_s, random.Random(step.pick))
        self.record(Fault(step.kind, tuple(nodes), start, time.monotonic() - self.started_at))

    def _fault(self, kind: str, duration_s: float, rng: random.Random) -> list[int]:
        brokers = sorted(self.cluster.brokers)
        if kind == "overlap":
            first, second = rng.sample(_OVERLAPPABLE, 2)
            picked: list[list[int]] = [[], []]
            threads = [
                threading.Thread(target=lambda i=i, k=k: picked[i].extend(self._fault(k, duration_s, rng)))
                for i, k in enumerate((first, second))
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return picked[0] + picked[1]
        if kind in ("kill_broker", "pause_broker"):
            target = rng.choice(brokers)
        elif kind in ("kill_leader", "pause_leader"):
            target = self.leader_of(rng.choice(("idem", "txn", "kv")), 0) or rng.choice(brokers)
        elif kind in ("kill_controller", "pause_controller"):
            target = self._active_controller() or rng.choice(sorted(self.cluster.controllers))
        elif kind == "pause_txn_coordinator":
            target = self.txn_coordinator() or rng.choice(brokers)
        else:
            target = rng.choice(brokers)
        if kind.startswith("kill_") and kind not in ("kill_two_brokers", "kill_all"):
            self._kill_for(target, duration_s)
            return [target]
        if kind.startswith("pause_"):
            self._pause_for(target, duration_s)
            return [target]
        if kind == "kill_two_brokers":
            pair = rng.sample(brokers, 2)
            for node in pair:
                self.cluster.kill(node)
            self.stopped.wait(duration_s)
            for node in pair:
                self.cluster.start(node)
            return pair
        if kind == "kill_all":
            for node in sorted(self.cluster.nodes):
                self.cluster.kill(node)
            self.stopped.wait(min(duration_s, 3.0))
            self.cluster.start()
            return sorted(self.cluster.nodes)
        if kind == "rolling_restart":
            for node in brokers:
                self.cluster.stop(node)
                self.cluster.start(node)
                self._wait_registered(node)
            return brokers
        if kind == "partition_broker_controllers":
            proxies = list(self.controller_proxies[target].values())
            self._cut_for(proxies, duration_s)
            return [target]
        if kind == "partition_broker_clients":
            self._cut_for([self.client_proxies[target]], duration_s)
            return [target]
        if kind == "partition_broker_replication":
            # The other brokers cannot reach this one's replication listener: its followers stop
            # fetching from it and its transaction markers to it wait; clients still reach it.
            self._cut_for([self.replication_proxies[target]], duration_s)
            return [target]
        if kind == "disk_full":
            self._fill_disk_for(target, duration_s)
            return [target]
        if kind == "latency":
            proxy = self.client_proxies[target]
            proxy.latency_s = rng.uniform(0.05, 0.3)
            self.stopped.wait(duration_s)
            proxy.latency_s = 0.0
            return [target]
        if kind == "drop_connections":
            end = time.monotonic() + duration_s
            while time.monotonic() < end and not self.stopped.is_set():
                self.client_proxies[target].reset()
                self.stopped.wait(rng.uniform(0.5, 2.0))
            return [target]
        raise ValueError(f"unknown fault kind {kind!r}")

    # --- the faults' pieces -----------------------------------------------------------------------------

    def _kill_for(self, node_id: int, duration_s: float) -> None:
        self.cluster.kill(node_id)
        self.stopped.wait(duration_s)
        self.cluster.start(node_id)

    def _pause_for(self, node_id: int, duration_s: float) -> None:
        process = self.cluster.nodes[node_id].process
        if process is None or process.poll() is not None:
            return
        with self._lock:
            self._paused.add(node_id)
        os.kill(process.pid, signal.SIGSTOP)
        self.stopped.wait(duration_s)
        self._continue(node_id)

    def _continue(self, node_id: int) -> None:
        with self._lock:
            if node_id not in self._paused:
                return
            self._paused.discard(node_id)
        process = self.cluster.nodes[node_id].process
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)

    def _ballast(self, node_id: int) -> str:
        return os.path.join(self.log_dirs[node_id], "ballast")

    def _fill_disk_for(self, node_id: int, duration_s: float) -> None:
        """The broker's partition data filesystem (a tmpfs, tests/faults/campaign.py) filled to the last
        block: its next append fails with ENOSPC and takes the log dir offline, which only a restart with
        space undoes (as Kafka's LogDirFailureChannel); so space is freed, then the broker restarted."""
        with open(self._ballast(node_id), "wb", buffering=0) as fh:
            chunk = b"\0" * (1 << 20)
            try:
                while True:
                    fh.write(chunk)
            except OSError:
                pass
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:
                pass
        self.stopped.wait(duration_s)
        self._free_disk(node_id)
        self.cluster.stop(node_id)
        self.cluster.start(node_id)
        self._wait_registered(node_id)

    def _free_disk(self, node_id: int) -> None:
        try:
            os.remove(self._ballast(node_id))
        except FileNotFoundError:
            pass

    def _cut_for(self, proxies: list[FaultProxy], duration_s: float) -> None:
        for proxy in proxies:
            proxy.set_cut(True)
        self.stopped.wait(duration_s)
        for proxy in proxies:
            proxy.set_cut(False)

    def _active_controller(self) -> int | None:
        try:
            leader = self.cluster.describe_quorum().leader_id
        except Exception:
            return None
        return leader if leader in self.cluster.controllers else None

    def _wait_registered(self, node_id: int) -> None:
        try:
            self.cluster.wait_for_brokers(60, expected={node_id})
        except TimeoutError:
            pass  # availability, reported by the gaps in acknowledgments; the checker judges safety

    def heal_all(self) -> None:
        for node_id in list(self._paused):
            self._continue(node_id)
        for node_id in self.log_dirs:
            self._free_disk(node_id)
        for proxy in [
            *self.client_proxies.values(),
            *self.replication_proxies.values(),
            *(p for d in self.controller_proxies.values() for p in d.values()),
        ]:
            proxy.latency_s = 0.0
            proxy.set_cut(False)
        self.cluster.start()
