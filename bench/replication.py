"""P9, replication cost and failover (issue 14): a 3-controller + 3-broker cluster of processes on
127.0.0.1, all on this machine's cores.

1. Produce throughput with acks=all to a topic with replication factor 3 (min.insync.replicas=2) against
   replication factor 1 on the same cluster, for 1 KiB and 100 B records on one partition and on three
   (one led by each broker): messages/s, MB/s, and the brokers' CPU seconds per MB (every broker
   process's utime+stime from /proc, before and after), with the RF=3/RF=1 ratio. RF=1 and RF=3 runs of
   each case follow each other, so the machine's load hits both alike (issue 29 item 4). The producer's
   own CPU per MB (this process: librdkafka's threads and the Python loop feeding it) is a column too:
   the producer shares the two cores with the brokers. The default cases use an idempotent producer;
   ``--plain-cases`` (default 1024x1) repeats cases with ``enable.idempotence=false``, still acks=all,
   because librdkafka's idempotent producer keeps at most one Produce per partition in flight and polls
   without sleeping while it waits (below, and bench/results/replication.md). The same cases run on
   Apache Kafka 4.3.1, three combined KRaft nodes (bench.kafka_peer.running_kafka_cluster; skipped with
   ``--no-kafka`` or without Java and Maven), with the same producer: the peer's RF=3/RF=1 ratio on these
   cores and with this client, measured in the same run. Each cluster first takes ``--megabytes`` / 2
   of unmeasured RF=3 records (the JVM's JIT, the brokers' page cache).
2. Failover: an idempotent acks=all producer writes continuously to the RF=3 topic; the partition's
   leader is killed (kill -9); the figure is the time from the kill to the first acknowledgement of a
   record produced after it (detection is the broker session timeout, 2000 ms here). The killed broker is
   restarted and back in the ISR before the next kill.

Prints tables; writes bench/results/replication.md.

    python -m bench.replication [--megabytes 100] [--kills 3] [--cases 1024x1,1024x3,100x1,100x3]
                                [--plain-cases 1024x1] [--rounds 3] [--no-kafka]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic
from tests.interop.maven_build import MavenError

from bench.kafka_peer import KAFKA_VERSION, running_kafka_cluster
from bench.results_file import write_results
from pykraft.testing import ProcessCluster, running_cluster

RESULTS = Path(__file__).resolve().parent / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")
Row = tuple[float, float, float, float]  # msgs/s, MB/s, broker CPU s per MB, producer CPU s per MB
Case = tuple[int, int, bool]  # record bytes, partitions, idempotent producer
Rows = dict[Case, dict[int, list[Row]]]  # case -> replication factor -> one row per round
KAFKA = f"Apache Kafka {KAFKA_VERSION}"
SESSION_TIMEOUT_MS = 2000
OVERRIDES = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "5000",
}
VALUE = b"x" * 100  # the failover producer's records
# (record bytes, partitions) measured by default: 1 KiB and 100 B, on one partition and on three.
CASES = ((1024, 1), (1024, 3), (100, 1), (100, 3))
# Cases repeated with a producer that is not idempotent. librdkafka's idempotent producer caps a
# partition's in-flight Produce requests by RD_KAFKA_IDEMP_MAX_INFLIGHT (5) minus the partition's
# in-flight *messages* (rd_kafka_toppar_producer_serve), so with batches of five or more records it
# keeps one request in flight and, the next batch being ready, polls with a zero timeout until the
# answer comes: the slower the acks (RF=3), the more of the two cores its broker thread takes.
PLAIN_CASES = ((1024, 1),)


def _process_cpu_s() -> float:
    """This process's utime+stime in seconds, every thread's, ended ones included (librdkafka's)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Brokers(Protocol):
    @property
    def bootstrap_servers(self) -> str: ...


def _pykraft_pids(cluster: ProcessCluster) -> dict[int, int]:
    """Each live broker's pid (the controllers' CPU is not the replication's)."""
    return {
        node_id: node.process.pid
        for node_id, node in cluster.brokers.items()
        if node.process is not None and node.alive
    }


def _cpu_by_broker(pids: dict[int, int]) -> dict[int, float]:
    """Each broker's utime+stime in seconds."""
    cpu = {}
    for node_id, pid in pids.items():
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        cpu[node_id] = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    return cpu


def _create(cluster: Brokers, topic: str, replication_factor: int, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics(
        [
            NewTopic(
                topic,
                partitions,
                replication_factor,
                config={"min.insync.replicas": str(min(2, replication_factor))},
            )
        ]
    )[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # A broker that has not applied the topic's records yet answers without the partition.
        found = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(found) == partitions and all(len(p.isrs) == replication_factor for p in found.values()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"{topic}: ISR never reached {replication_factor}")


def throughput(
    cluster: Brokers,
    pids: Callable[[], dict[int, int]],
    topic: str,
    messages: int,
    value: bytes,
    *,
    idempotent: bool = True,
) -> Row:
    """(messages/s, MB/s, broker CPU s per MB, producer CPU s per MB) for ``messages`` acks=all records
    of ``value``, spread over the topic's partitions by librdkafka's partitioner (no key: sticky
    batches)."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            "enable.idempotence": idempotent,
        }
    )
    producer.produce(topic, value)  # connections and producer id first
    producer.flush(30)
    failures: list[object] = []
    cpu_before = _cpu_by_broker(pids())
    producer_cpu_before = _process_cpu_s()
    started = time.monotonic()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda err, msg: err and failures.append(err))
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(120)
    elapsed = time.monotonic() - started
    producer_cpu = _process_cpu_s() - producer_cpu_before
    by_broker = {b: c - cpu_before.get(b, 0.0) for b, c in _cpu_by_broker(pids()).items()}
    print(f"{topic}: CPU s by broker {by_broker} in {elapsed:.1f} s", flush=True)
    cpu = sum(by_broker.values())
    if left or failures:
        raise RuntimeError(f"{topic}: {left} undelivered, failures {failures[:3]}")
    megabytes = messages * len(value) / 1e6
    return messages / elapsed, megabytes / elapsed, cpu / megabytes, producer_cpu / megabytes


def failover(cluster: ProcessCluster, topic: str, kills: int) -> list[float]:
    """Seconds from each leader kill to the first acknowledgement of a record produced after it."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 1,
        }
    )
    acked: list[tuple[float, float]] = []  # (produced at, acknowledged at)
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            produced_at = time.monotonic()
            producer.produce(
                topic,
                VALUE,
                on_delivery=lambda err, msg, t=produced_at: (
                    err is None and acked.append((t, time.monotonic()))
                ),
            )
            producer.poll(0.005)
        producer.flush(60)

    thread = threading.Thread(target=writer)
    thread.start()
    results = []
    try:
        for _ in range(kills):
            time.sleep(1.0)
            leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
            killed_at = time.monotonic()
            cluster.kill(leader)
            deadline = killed_at + 60
            while time.monotonic() < deadline and not any(p > killed_at for p, _ in list(acked)):
                time.sleep(0.005)
            first = min(a for p, a in list(acked) if p > killed_at)
            results.append(first - killed_at)
            print(f"killed leader {leader}: first ack after {results[-1] * 1000:.0f} ms", flush=True)
            cluster.start(leader)
            cluster.wait_for_brokers()
            isr_deadline = time.monotonic() + 60
            while time.monotonic() < isr_deadline:
                if len(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs) == 3:
                    break
                time.sleep(0.1)
    finally:
        stop.set()
        thread.join(timeout=120)
    return results


def render(
    rows: dict[str, Rows],
    kills: list[float],
    megabytes: float,
    loads: list[float],
    kafka_note: str,
    rounds: int,
) -> str:
    lines = [
        "# P9: replication (3 controllers + 3 brokers, separate processes on 127.0.0.1, 2 cores)",
        "",
        f"`python -m bench.replication`: {megabytes:g} MB of acks=all records per case from one",
        "confluent-kafka producer (linger.ms=5, no key), idempotent unless the row says otherwise; broker CPU",
        "is the three brokers' utime+stime, producer CPU the bench process's (librdkafka and the Python loop",
        f"feeding it). RF=1 and RF=3 of each case run back to back on the same cluster, {rounds} rounds of",
        "every case (medians below; the ratio row is the median of each round's ratio); three partitions are",
        f"led one per broker. {KAFKA}: three combined KRaft nodes (broker and controller in each JVM),",
        f"the same cases after pykraft's.{' ' + kafka_note if kafka_note else ''}",
        f"Load average (1 min) at the start {loads[0]:.1f}, at the end {loads[-1]:.1f}.",
        "",
        "| broker | record | partitions | producer | replication factor | msgs/s | MB/s | broker CPU s per MB "
        "| producer CPU s per MB |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    for system, by_case in rows.items():
        for (size, partitions, idempotent), by_factor in by_case.items():
            rf1, rf3 = _median_row(by_factor[1]), _median_row(by_factor[3])
            ratio = _median_row(_paired_ratios(by_factor))
            row = (
                f"| {system} | {size} B | {partitions} | {'idempotent' if idempotent else 'not idempotent'} "
            )
            lines += [
                f"{row}| 1 | {rf1[0]:.0f} | {rf1[1]:.2f} | {rf1[2]:.3f} | {rf1[3]:.3f} |",
                f"{row}| 3 (min.insync.replicas=2) | {rf3[0]:.0f} | {rf3[1]:.2f} | {rf3[2]:.3f} | {rf3[3]:.3f} |",
                f"{row}| **ratio RF3 / RF1** | {ratio[0]:.2f} | {ratio[1]:.2f} | {ratio[2]:.2f} | {ratio[3]:.2f} |",
            ]
    systems = list(rows)
    lines += [
        "",
        "RF3 / RF1 MB/s, side by side: the median of the rounds, and each round's (RF=1 and RF=3 back to back)",
        "",
        "| record | partitions | producer | " + " | ".join(systems) + " |",
        "|---:|---:|---|" + "---|" * len(systems),
    ]
    for case in rows["pykraft"]:
        size, partitions, idempotent = case
        cells = []
        for system in systems:
            if case not in rows[system]:
                cells.append("-")
                continue
            ratios = [r[1] for r in _paired_ratios(rows[system][case])]
            cells.append(f"**{statistics.median(ratios):.2f}** ({', '.join(f'{r:.2f}' for r in ratios)})")
        lines.append(
            f"| {size} B | {partitions} | {'idempotent' if idempotent else 'not idempotent'} | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        f"Leader kill -9 to the first acknowledged produce on the new leader (broker.session.timeout.ms={SESSION_TIMEOUT_MS}):",
        "",
        "| kills | median ms | min ms | max ms |",
        "|---:|---:|---:|---:|",
    ]
    if kills:
        ms = [k * 1000 for k in kills]
        lines.append(f"| {len(ms)} | {statistics.median(ms):.0f} | {min(ms):.0f} | {max(ms):.0f} |")
    return "\n".join(lines) + "\n"


def _cases(text: str) -> list[tuple[int, int]]:
    if not text:
        return []
    try:
        return [(int(size), int(partitions)) for size, partitions in (c.split("x") for c in text.split(","))]
    except ValueError:
        raise SystemExit(f"--cases {text!r}: expected SIZExPARTITIONS[,...], e.g. 1024x1,100x3") from None


def _median_row(rows: list[Row]) -> Row:
    a, b, c, d = (statistics.median(column) for column in zip(*rows, strict=True))
    return a, b, c, d


def _paired_ratios(by_factor: dict[int, list[Row]]) -> list[Row]:
    """Each round's RF=3 row over its RF=1 row (run back to back, so under about the same load)."""
    return [
        (r3[0] / r1[0], r3[1] / r1[1], r3[2] / r1[2], r3[3] / r1[3])
        for r1, r3 in zip(by_factor[1], by_factor[3], strict=True)
    ]


def measure(
    system: str,
    cluster: Brokers,
    pids: Callable[[], dict[int, int]],
    cases: list[Case],
    megabytes: float,
    rounds: int,
) -> Rows:
    """``rounds`` times every case at RF=1 then RF=3 (a fresh topic each), after ``megabytes`` / 2 of
    unmeasured RF=3 records."""
    _create(cluster, "warm-up", 3)
    throughput(cluster, pids, "warm-up", int(megabytes * 1e6 / 2 / 1024), b"x" * 1024)
    rows: Rows = {}
    for round_number in range(rounds):
        for size, partitions, idempotent in cases:
            for factor in (1, 3):
                topic = f"rf{factor}-{size}b-{partitions}p{'' if idempotent else '-plain'}-{round_number}"
                _create(cluster, topic, factor, partitions)
                messages = int(megabytes * 1e6 / size)
                row = throughput(cluster, pids, topic, messages, b"x" * size, idempotent=idempotent)
                rows.setdefault((size, partitions, idempotent), {}).setdefault(factor, []).append(row)
                print(
                    f"{system} round {round_number}: {size} B x {partitions} partitions RF={factor} idempotent={idempotent}: "
                    f"{row[0]:.0f} msgs/s, {row[1]:.1f} MB/s, {row[2]:.3f} broker CPU s/MB, "
                    f"{row[3]:.3f} producer CPU s/MB",
                    flush=True,
                )
    return rows


def _rounds(text: str) -> int:
    try:
        rounds = int(text)
    except ValueError:
        rounds = 0
    if rounds < 1:
        raise SystemExit(f"--rounds {text!r}: expected a whole number of at least 1")
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--megabytes", type=float, default=100.0, help="record bytes produced per case and factor"
    )
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument(
        "--cases",
        type=_cases,
        default=list(CASES),
        help="record bytes x partitions, comma-separated (default 1024x1,1024x3,100x1,100x3)",
    )
    parser.add_argument(
        "--plain-cases",
        type=_cases,
        default=list(PLAIN_CASES),
        help="the same, with a producer that is not idempotent (default 1024x1; '' for none)",
    )
    parser.add_argument(
        "--rounds", type=_rounds, default=3, help="times each case runs at RF=1 then RF=3 (medians reported)"
    )
    parser.add_argument("--no-kafka", action="store_true", help=f"do not measure {KAFKA} beside pykraft")
    args = parser.parse_args()
    cases: list[Case] = [(size, partitions, True) for size, partitions in args.cases]
    cases += [(size, partitions, False) for size, partitions in args.plain_cases]
    loads = [os.getloadavg()[0]]
    rows: dict[str, Rows] = {}
    with tempfile.TemporaryDirectory(prefix="pykraft-replication-") as directory:
        with running_cluster(controllers=3, brokers=3, directory=directory, overrides=OVERRIDES) as cluster:
            rows["pykraft"] = measure(
                "pykraft", cluster, lambda: _pykraft_pids(cluster), cases, args.megabytes, args.rounds
            )
            kills = []
            if args.kills:
                _create(cluster, "failover", 3)
                kills = failover(cluster, "failover", args.kills)
    kafka_note = "Not measured: --no-kafka."
    if not args.no_kafka:
        try:
            with running_kafka_cluster(nodes=3) as kafka:
                rows[KAFKA] = measure(KAFKA, kafka, lambda: kafka.pids, cases, args.megabytes, args.rounds)
            kafka_note = ""
        except (MavenError, subprocess.TimeoutExpired, TimeoutError, RuntimeError) as exc:
            # No Java or Maven, a storage format or a start-up that failed, a produce that did not
            # finish: the peer's rows are missing and say why; pykraft's are written all the same.
            kafka_note = f"Not measured: {exc}."
            print(f"kafka: {exc}; skipping", file=sys.stderr)
    loads.append(os.getloadavg()[0])
    table = render(rows, kills, args.megabytes, loads, kafka_note, args.rounds)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    write_results(RESULTS / "replication.md", table)


if __name__ == "__main__":
    main()
