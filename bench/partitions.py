"""Many partitions on one node (issue 29): what each level of partitions costs, within an open-file limit.

For each level (total partitions on one node, a fresh node each), pykraft and then Apache Kafka
(bench.kafka_peer, a combined KRaft node, at ``--kafka-levels``): the process runs under
``RLIMIT_NOFILE`` = ``--open-files`` (20,000 by default) and gets topics of ``--topic-partitions``
partitions until the level is reached. Reported per level:

* create ms/partition: CreateTopics time per partition, for the first topic and for the last one (flat
  means the cost does not grow with what the node already has);
* Metadata ms: a full Metadata request (all topics), send to last byte received, median of 5;
* RSS KB/partition: the node's resident memory after creating, minus before, per partition;
* produce MB/s: 1 KiB records spread over the first 1,000 partitions (confluent-kafka, acks=1);
* SIGTERM-to-exit s, then start-to-serving s: the clean stop, and a restart until a full Metadata answers
  with every partition (the shutdown budget is 10 s);
* whether anything failed (a create, a delivery, a stop past the budget).

    python -m bench.partitions [--levels 1000,10000,50000,100000] [--kafka-levels 1000,10000]
        [--open-files 20000]

On a quiet 2-core machine pykraft's 100,000 level takes about 6 minutes.

Only 127.0.0.1; every process started here is stopped here.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from bench.__main__ import Peer, pykraft_peer
from bench.kafka_peer import kafka_peer
from pykraft.io.kafka_connection import BrokerConnection
from pykraft.io.node import SHUTDOWN_BUDGET_S
from pykraft.testing import free_port

METADATA_VERSION = 9
PRODUCE_PARTITIONS = 1000
RECORD_BYTES = 1024
# What each peer logs when a log dir goes offline (Kafka: LogDirFailureChannel's handler, ReplicaManager).
LOG_DIR_OFFLINE = {"pykraft": "offline", "kafka": "Stopping serving logs in dir"}


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class BenchNode:
    """One peer's process under ``RLIMIT_NOFILE`` = ``open_files``, restarted on the same port and data."""

    def __init__(self, peer: Peer, directory: str, open_files: int) -> None:
        self.peer = peer
        self.port = free_port()
        self.directory = directory
        self.log_path = Path(directory) / "server.log"
        self.open_files = open_files
        self.proc: subprocess.Popen[bytes] | None = None
        if peer.prepare is not None:
            peer.prepare(self.port, directory)
        self.command = peer.command(self.port, directory)  # once: a restart reads the same config

    def start(self) -> None:
        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                self.command,
                env={**os.environ, **self.peer.env},
                stdout=log_file,
                stderr=subprocess.STDOUT,
                preexec_fn=limit,
            )

    def connect(self, timeout_s: float = 300.0) -> BrokerConnection:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return BrokerConnection("127.0.0.1", self.port, timeout_s=120)
            except Exception:
                if time.monotonic() > deadline or (self.proc is not None and self.proc.poll() is not None):
                    raise
                time.sleep(0.02)

    def stop(self) -> float:
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        return time.monotonic() - started


def _partition_count(conn: BrokerConnection) -> tuple[int, float]:
    """Partitions in a full Metadata answer, and the seconds it took (request to last byte)."""
    started = time.perf_counter()
    conn.send(MetadataRequest(topics=None, allow_auto_topic_creation=False), METADATA_VERSION)
    frame = conn.receive_frame()
    elapsed = time.perf_counter() - started
    response = MetadataResponse.decode(frame, version=METADATA_VERSION, header=True)
    return sum(len(topic.partitions) for topic in response.topics), elapsed


def _create(conn: BrokerConnection, name: str, partitions: int) -> float:
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
            )
        ],
        timeout_ms=600_000,
        validate_only=False,
    )
    started = time.perf_counter()
    response = conn.request(request, CreateTopicsResponse, 5)
    elapsed = time.perf_counter() - started
    error = response.topics[0].error_code
    if error:
        raise RuntimeError(f"CreateTopics {name}: error {error}: {response.topics[0].error_message}")
    return elapsed


def _produce_mb_s(bootstrap: str, topic: str, partitions: int, seconds: float = 5.0) -> tuple[float, int]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 65536})
    failed = [0]

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failed[0] += 1

    value = b"x" * RECORD_BYTES
    sent = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            producer.produce(topic, value=value, partition=sent % partitions, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.005)
        if sent % 1000 == 0:
            producer.poll(0)
    unflushed = producer.flush(120)
    elapsed = time.monotonic() - started
    return (sent - unflushed) * RECORD_BYTES / elapsed / 1e6, failed[0] + unflushed


def run_level(peer: Peer, total: int, topic_partitions: int, open_files: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix=f"bench-partitions-{peer.name}-") as directory:
        node = BenchNode(peer, directory, open_files)
        node.start()
        try:
            conn = node.connect()
            assert node.proc is not None
            rss_before = _rss_kb(node.proc.pid)
            per_partition_ms: list[float] = []
            created = 0
            while created < total:
                count = min(topic_partitions, total - created)
                per_partition_ms.append(_create(conn, f"t{created}", count) * 1000 / count)
                created += count
            # The image reaches the broker side after the controller answers: wait until all serve.
            while _partition_count(conn)[0] < total:
                time.sleep(0.1)
            rss_after = _rss_kb(node.proc.pid)
            metadata_s = statistics.median(_partition_count(conn)[1] for _ in range(5))
            conn.close()
            mb_s, failed = _produce_mb_s(
                f"127.0.0.1:{node.port}", "t0", min(PRODUCE_PARTITIONS, topic_partitions, total)
            )
            stop_s = node.stop()
            started = time.monotonic()
            node.start()
            conn = node.connect()
            while _partition_count(conn)[0] < total:
                time.sleep(0.05)
            serving_s = time.monotonic() - started
            conn.close()
            stop2_s = node.stop()
        finally:
            if node.proc is not None:
                node.stop()
        log_text = node.log_path.read_text(errors="replace")
    problems = [line.strip()[:120] for line in log_text.splitlines() if "Too many open files" in line][:1]
    if failed:
        problems.append(f"{failed} deliveries failed or not flushed within 120 s")
    if LOG_DIR_OFFLINE[peer.name] in log_text:
        problems.append("a log dir went offline")
    if max(stop_s, stop2_s) > SHUTDOWN_BUDGET_S:
        problems.append("a stop took longer than the shutdown budget")
    return {
        "peer": peer.name,
        "partitions": total,
        "create_first": per_partition_ms[0],
        "create_last": per_partition_ms[-1],
        "metadata_ms": metadata_s * 1000,
        "rss_kb": (rss_after - rss_before) / total,
        "produce_mb_s": mb_s,
        "stop_s": stop_s,
        "serving_s": serving_s,
        "stop_after_restart_s": stop2_s,
        "problems": "; ".join(problems) or "none",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--levels", default="1000,10000,50000,100000", help="comma-separated partition counts"
    )
    parser.add_argument("--open-files", type=int, default=20_000, help="each node's RLIMIT_NOFILE")
    parser.add_argument("--topic-partitions", type=int, default=1000, help="partitions per CreateTopics")
    parser.add_argument(
        "--kafka-levels",
        default="1000,10000",
        help="the levels Apache Kafka runs too (bench.kafka_peer; empty: none)",
    )
    args = parser.parse_args()
    kafka_levels = {int(word) for word in args.kafka_levels.split(",") if word}
    kafka = kafka_peer() if kafka_levels else None
    print(f"one node, RLIMIT_NOFILE={args.open_files}, topics of {args.topic_partitions} partitions\n")
    print(
        "| partitions | peer | create ms/partition (first / last topic) | Metadata ms | RSS KB/partition "
        "| produce MB/s (1,000 partitions) | SIGTERM-to-exit s | start-to-serving s | stop after restart s "
        "| problems |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for level in (int(word) for word in args.levels.split(",")):
        peers = [pykraft_peer()] + ([kafka] if kafka is not None and level in kafka_levels else [])
        for peer in peers:
            row = run_level(peer, level, args.topic_partitions, args.open_files)
            print(
                f"| {row['partitions']:,} | {row['peer']} | {row['create_first']:.2f} / {row['create_last']:.2f} "
                f"| {row['metadata_ms']:.1f} | {row['rss_kb']:.1f} | {row['produce_mb_s']:.1f} "
                f"| {row['stop_s']:.1f} | {row['serving_s']:.1f} | {row['stop_after_restart_s']:.1f} "
                f"| {row['problems']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
