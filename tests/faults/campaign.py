"""One fault campaign: a 3-controller + 3-broker ProcessCluster behind fault proxies, the workloads of
tests/faults/workloads.py, the seeded nemesis for ``duration_s``, then everything healed, the logs read
back, the replicas compared and the history checked.

    python -m tests.faults --seed 7 --duration 300 [--kinds kill_broker,pause_leader] [--out DIR]
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.coordinator.offsets_records import partition_for
from pykraft.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from pykraft.testing import ProcessCluster, free_port
from tests.faults import workloads
from tests.faults.checker import CheckResult, check
from tests.faults.history import FinalRecord, History
from tests.faults.nemesis import KINDS, Nemesis, schedule
from tests.faults.proxy import FaultProxy
from tests.raw_client import RawClient

OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "5000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "log.cleaner.backoff.ms": "500",
    "log.segment.bytes": "262144",
}
PARTITIONS = 3
# topic -> (partitions, extra topic configs)
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "idem": (PARTITIONS, {}),
    "txn": (PARTITIONS, {}),
    "ctp-out": (PARTITIONS, {}),
    "kv": (1, {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01"}),
    "acks1": (1, {}),
}
TXN_PRODUCERS = ("txn-a", "txn-b")
GROUPS = {"classic": "classic", "kip848": "consumer"}
# Each broker's partition data on its own small filesystem (tmpfs) when the disk_full fault is on: the
# nemesis fills it; the metadata log stays on the cluster directory's disk.
DISK_SIZE = "512m"


@dataclass
class CampaignResult:
    seed: int
    duration_s: float
    kinds: tuple[str, ...]
    history: History
    check: CheckResult
    workload_failures: list[str] = field(default_factory=list)
    directory: str = ""

    @property
    def ok(self) -> bool:
        return self.check.ok and not self.workload_failures


class Campaign:
    def __init__(self, seed: int, duration_s: float, directory: str, kinds: tuple[str, ...] = KINDS) -> None:
        self.seed = seed
        self.duration_s = duration_s
        self.directory = directory
        self.kinds = kinds
        self.history = History(compacted_topics={"kv"}, lossy_topics={"acks1"})
        self.cluster = ProcessCluster.create(directory, 3, OVERRIDES, brokers=3)
        self.client_proxies: dict[int, FaultProxy] = {}
        self.replication_proxies: dict[int, FaultProxy] = {}
        self.controller_proxies: dict[int, dict[int, FaultProxy]] = {}
        # broker -> the directory of its partition data (a tmpfs mount when disk_full is on)
        self.log_dirs = {b: node.data_dir for b, node in self.cluster.brokers.items()}
        if "disk_full" in kinds:
            self._mount_disks()
        self._wire_proxies()

    # --- the cluster behind proxies ---------------------------------------------------------------------

    def _wire_proxies(self) -> None:
        """Each broker advertises a proxy on its client listener (clients reach it through that) and one
        on a listener of its own for the other brokers (inter.broker.listener.name: followers fetch and
        transaction markers come through that), and names its own proxy to each controller in
        controller.quorum.voters."""
        controllers = self.cluster.controllers
        for broker_id, node in self.cluster.brokers.items():
            self.client_proxies[broker_id] = FaultProxy(node.port, f"clients->{broker_id}").start()
            replication_port = free_port()
            self.replication_proxies[broker_id] = FaultProxy(
                replication_port, f"brokers->{broker_id}"
            ).start()
            self.controller_proxies[broker_id] = {
                c: FaultProxy(controller.port, f"{broker_id}->{c}").start()
                for c, controller in controllers.items()
            }
            voters = ",".join(
                f"{c}@127.0.0.1:{p.port}" for c, p in sorted(self.controller_proxies[broker_id].items())
            )
            with open(node.config_path, encoding="utf-8") as fh:
                text = fh.read()
            text = re.sub(
                r"^controller\.quorum\.voters=.*$", f"controller.quorum.voters={voters}", text, flags=re.M
            )
            text = re.sub(
                r"^listeners=(.*)$",
                rf"listeners=\1,REPLICATION://127.0.0.1:{replication_port}",
                text,
                flags=re.M,
            )
            text = re.sub(
                r"^listener\.security\.protocol\.map=(.*)$", r"listener.security.protocol.map=\1,REPLICATION:PLAINTEXT",
                text, flags=re.M,
            )  # fmt: skip
            text += "inter.broker.listener.name=REPLICATION\n"
            text += (
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.client_proxies[broker_id].port},"
                f"REPLICATION://127.0.0.1:{self.replication_proxies[broker_id].port}\n"
            )
            if self.log_dirs[broker_id] != node.data_dir:
                text = re.sub(r"^log\.dirs=.*$", f"log.dirs={self.log_dirs[broker_id]}", text, flags=re.M)
                text += f"metadata.log.dir={node.data_dir}\n"
            with open(node.config_path, "w", encoding="utf-8") as fh:
                fh.write(text)

    def _mount_disks(self) -> None:
        """A tmpfs of DISK_SIZE per broker for its partition data (the nemesis fills one: disk_full)."""
        for broker_id in self.cluster.brokers:
            path = os.path.join(self.directory, f"disk-{broker_id}")
            os.makedirs(path, exist_ok=True)
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", path],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                self._unmount_disks()
                raise RuntimeError(
                    f"disk_full needs a tmpfs per broker (mount -t tmpfs, as root): {done.stderr.strip()}; "
                    "leave it out with --kinds"
                )
            self.log_dirs[broker_id] = path

    def _unmount_disks(self) -> None:
        for broker_id, path in self.log_dirs.items():
            if path != self.cluster.nodes[broker_id].data_dir:
                subprocess.run(["umount", path], capture_output=True)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p.port}" for p in self.client_proxies.values())

    def _proxies(self) -> list[FaultProxy]:
        return [
            *self.client_proxies.values(),
            *self.replication_proxies.values(),
            *(p for d in self.controller_proxies.values() for p in d.values()),
        ]

    def metadata(self, topic: str) -> Any:
        for node in self.cluster.brokers.values():
            if not node.alive:
                continue
            try:
                with RawClient(node.address, timeout_s=3) as client:
                    response = client.request(
                        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]),
                        MetadataResponse,
                        9,
                    )
                return response.topics[0]
            except Exception:
                continue
        return None

    def leader_of(self, topic: str, partition: int) -> int | None:
        described = self.metadata(topic)
        if described is None:
            return None
        leaders = [p.leader_id for p in described.partitions if p.partition_index == partition]
        return leaders[0] if leaders and leaders[0] in self.cluster.brokers else None

    def txn_coordinator(self) -> int | None:
        index = partition_for(TXN_PRODUCERS[0], int(OVERRIDES["transaction.state.log.num.partitions"]))
        return self.leader_of(TRANSACTION_STATE_TOPIC, index)

    def create_topics(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        new = [NewTopic(t, n, 3, config=c) for t, (n, c) in TOPICS.items()]
        for future in admin.create_topics(new).values():
            future.result(60)
        self._wait_full_isr(60)

    def _wait_full_isr(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            described = [self.metadata(t) for t in TOPICS]
            if all(
                d is not None and d.partitions and all(len(p.isr_nodes) == 3 for p in d.partitions)
                for d in described
            ):
                return True
            time.sleep(0.5)
        return False

    # --- the run ------------------------------------------------------------------------------------------

    def run(self) -> CampaignResult:
        nemesis: Nemesis | None = None
        threads: list[workloads.Workload] = []
        stuck: list[str] = []
        try:
            self.cluster.start()
            self.cluster.wait_for_leader(60)
            self.cluster.wait_for_brokers(60)
            self.create_topics()
            started = time.monotonic()
            stop = threading.Event()
            threads = self._workloads(started, stop)
            for thread in threads:
                thread.start()
            time.sleep(3.0)  # the clients settle (groups joined, producer ids) before the first fault
            nemesis = Nemesis(
                self.cluster, self.client_proxies, self.replication_proxies, self.controller_proxies,
                self.log_dirs, self.leader_of, self.txn_coordinator, self.history.add, started,
            )  # fmt: skip
            nemesis.run(schedule(self.seed, self.duration_s, self.kinds), time.monotonic() + self.duration_s)
            nemesis.heal_all()
            self.cluster.wait_for_leader(60)
            self.cluster.wait_for_brokers(90)
            time.sleep(3.0)  # the clients' last operations finish against a healed cluster
            stop.set()
            deadline = time.monotonic() + 90
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            frames = sys._current_frames()  # where a client that did not stop is stuck, for the report
            stuck = [
                f"{t.name}: still running at\n{''.join(traceback.format_stack(frames[t.ident]))}"
                for t in threads
                if t.is_alive() and t.ident in frames
            ]
            self._read_back()
            self._compare_replicas()
        finally:
            if nemesis is not None:
                nemesis.stopped.set()
                nemesis.heal_all()
            self.cluster.stop()
            for proxy in self._proxies():
                proxy.close()
            self._keep_disks()
        with open(os.path.join(self.directory, "history.pickle"), "wb") as fh:
            pickle.dump(self.history, fh)  # python -m tests.faults --recheck DIR checks it again
        failures = [f"{t.name}: {t.failure!r}" for t in threads if t.failure is not None]
        failures += stuck
        return CampaignResult(self.seed, self.duration_s, self.kinds, self.history, check(self.history),
                              failures, self.directory)  # fmt: skip

    def _workloads(self, started: float, stop: threading.Event) -> list[workloads.Workload]:
        def common(name: str) -> tuple[Any, ...]:
            return (name, self.history, self.bootstrap, started, stop, self.directory)

        found: list[workloads.Workload] = [
            workloads.IdempotentProducer(*common("idem-1"), topic="idem"),
            workloads.IdempotentProducer(*common("idem-2"), topic="idem"),
            workloads.IdempotentProducer(*common("kv-1"), topic="kv", keys=20, rate_per_s=20),
            workloads.IdempotentProducer(*common("acks1-1"), topic="acks1", rate_per_s=20, acks="1"),
        ]
        for i, name in enumerate(TXN_PRODUCERS):
            found.append(
                workloads.TransactionalProducer(
                    *common(name), topic="txn", partitions=PARTITIONS, seed=self.seed * 10 + i
                )
            )
        found.append(
            workloads.TransformLoop(*common("ctp-1"), topic="ctp-out", partitions=PARTITIONS, seed=self.seed * 10 + 9,
                                    abort_ratio=0.1, source="idem", group="ctp")
        )  # fmt: skip
        for group, protocol in GROUPS.items():
            for member in range(2):
                found.append(workloads.GroupConsumer(*common(f"{group}-{member}"), topic="txn", group=group,
                                                     protocol=protocol))  # fmt: skip
        brokers = {b: f"127.0.0.1:{p.port}" for b, p in self.client_proxies.items()}
        found.append(workloads.OffsetObserver(*common("observer"), brokers=brokers, groups=list(GROUPS),
                                              topic="txn", partitions=PARTITIONS))  # fmt: skip
        return found

    # --- afterwards ---------------------------------------------------------------------------------------

    def _read_back(self) -> None:
        """Every partition from offset 0 to its end, read_committed, into ``history.final``."""
        import confluent_kafka
        from confluent_kafka import TopicPartition

        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"faults-check-{self.seed}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        wanted = [(t, p) for t, (n, _) in TOPICS.items() for p in range(n)]
        consumer.assign([TopicPartition(t, p, confluent_kafka.OFFSET_BEGINNING) for t, p in wanted])
        finals: dict[tuple[str, int], list[FinalRecord]] = {tp: [] for tp in wanted}
        at_end: set[tuple[str, int]] = set()
        deadline = time.monotonic() + 120
        try:
            while len(at_end) < len(wanted) and time.monotonic() < deadline:
                for message in consumer.consume(500, 0.5):
                    tp = (message.topic(), message.partition())
                    if message.error() is not None:
                        if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                            at_end.add(tp)
                        continue
                    at_end.discard(tp)
                    key = message.key().decode() if message.key() is not None else None
                    finals[tp].append(FinalRecord(message.offset(), key, message.value().decode()))
        finally:
            consumer.close()
        if len(at_end) < len(wanted):
            raise RuntimeError(f"read back stopped before the end of {sorted(set(wanted) - at_end)}")
        self.history.final = finals

    def _compare_replicas(self) -> None:
        """Once the ISRs are whole again and the followers caught up, each partition's log bytes per
        broker (the compacted topic is cleaned on each replica on its own schedule: left out)."""
        self._wait_full_isr(90)
        deadline = time.monotonic() + 60
        while True:
            digests = {
                (t, p): {b: self._digest(b, t, p) for b in self.cluster.brokers}
                for t, (n, _) in TOPICS.items()
                if t not in self.history.compacted_topics
                for p in range(n)
            }
            if all(len(set(d.values())) == 1 for d in digests.values()) or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        self.history.replicas = digests

    def _digest(self, broker: int, topic: str, partition: int) -> str:
        directory = os.path.join(self.log_dirs[broker], f"{topic}-{partition}")
        digest = hashlib.sha256()
        for name in sorted(f for f in os.listdir(directory) if f.endswith(".log")):
            with open(os.path.join(directory, name), "rb") as fh:
                digest.update(fh.read())
        return digest.hexdigest()[:16]

    def _keep_disks(self) -> None:
        """The tmpfs contents move to the cluster directory (kept for a failed run), then unmount."""
        for broker_id, path in self.log_dirs.items():
            if path != self.cluster.nodes[broker_id].data_dir:
                shutil.copytree(path, f"{path}.data", dirs_exist_ok=True, ignore_dangling_symlinks=True)
        self._unmount_disks()


def run_campaign(
    seed: int, duration_s: float, kinds: tuple[str, ...] = KINDS, keep: str | None = None
) -> CampaignResult:
    """Run one campaign in a fresh directory (kept at ``keep`` if given, else removed when it passed)."""
    directory = keep or tempfile.mkdtemp(prefix=f"pykraft-faults-{seed}-")
    result = Campaign(seed, duration_s, directory, kinds).run()
    if result.ok and keep is None:
        shutil.rmtree(directory, ignore_errors=True)
    return result
