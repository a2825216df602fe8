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
   without sleeping while it waits (below, and bench/results/replication.md).
2. Failover: an idempotent acks=all producer writes continuously to the RF=3 topic; the partition's
   leader is killed (kill -9); the figure is the time from the kill to the first acknowledgement of a
   record produced after it (detection is the broker session timeout, 2000 ms here). The killed broker is
   restarted and back in the ISR before the next kill.

Prints tables; writes bench/results/replication.md.

    python -m bench.replication [--megabytes 100] [--kills 3] [--cases 1024x1,1024x3,100x1,100x3]
                                [--plain-cases 1024x1]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from bench.results_file import write_results
from pykraft.testing import ProcessCluster, running_cluster

RESULTS = Path(__file__).resolve().parent / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")
Row = tuple[float, float, float, float]  # msgs/s, MB/s, broker CPU s per MB, producer CPU s per MB
Case = tuple[int, int, bool]  # record bytes, partitions, idempotent producer
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


def _cpu_by_broker(cluster: ProcessCluster) -> dict[int, float]:
    """Each live broker's utime+stime in seconds."""
    cpu = {}
    for node_id, node in cluster.brokers.items():
        if node.process is None or not node.alive:
            continue
        with open(f"/proc/{node.process.pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        cpu[node_id] = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    return cpu


def _create(cluster: ProcessCluster, topic: str, replication_factor: int, partitions: int = 1) -> None:
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
    cluster: ProcessCluster, topic: str, messages: int, value: bytes, *, idempotent: bool = True
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
    cpu_before = _cpu_by_broker(cluster)
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
    by_broker = {b: c - cpu_before.get(b, 0.0) for b, c in _cpu_by_broker(cluster).items()}
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


def render(rows: dict[Case, dict[int, Row]], kills: list[float], megabytes: float, loads: list[float]) -> str:
    lines = [
        "# P9: replication (3 controllers + 3 brokers, separate processes on 127.0.0.1, 2 cores)",
        "",
        f"`python -m bench.replication`: {megabytes:g} MB of acks=all records per case from one",
        "confluent-kafka producer (linger.ms=5, no key), idempotent unless the row says otherwise; broker CPU",
        "is the three brokers' utime+stime, producer CPU the bench process's (librdkafka and the Python loop",
        "feeding it). RF=1 and RF=3 of each case run back to back on the same cluster; three partitions are",
        "led one per broker.",
        f"Load average (1 min) at the start {loads[0]:.1f}, at the end {loads[-1]:.1f}.",
        "",
        "| record | partitions | producer | replication factor | msgs/s | MB/s | broker CPU s per MB "
        "| producer CPU s per MB |",
        "|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    for (size, partitions, idempotent), by_factor in rows.items():
        rf1, rf3 = by_factor[1], by_factor[3]
        case = f"| {size} B | {partitions} | {'idempotent' if idempotent else 'not idempotent'} "
        lines += [
            f"{case}| 1 | {rf1[0]:.0f} | {rf1[1]:.2f} | {rf1[2]:.3f} | {rf1[3]:.3f} |",
            f"{case}| 3 (min.insync.replicas=2) | {rf3[0]:.0f} | {rf3[1]:.2f} | {rf3[2]:.3f} | {rf3[3]:.3f} |",
            f"{case}| **ratio RF3 / RF1** | {rf3[0] / rf1[0]:.2f} | {rf3[1] / rf1[1]:.2f} | "
            f"{rf3[2] / rf1[2]:.2f} | {rf3[3] / rf1[3]:.2f} |",
        ]
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
    args = parser.parse_args()
    cases: list[Case] = [(size, partitions, True) for size, partitions in args.cases]
    cases += [(size, partitions, False) for size, partitions in args.plain_cases]
    loads = [os.getloadavg()[0]]
    rows: dict[Case, dict[int, Row]] = {}
    with tempfile.TemporaryDirectory(prefix="pykraft-replication-") as directory:
        with running_cluster(controllers=3, brokers=3, directory=directory, overrides=OVERRIDES) as cluster:
            for size, partitions, idempotent in cases:
                for factor in (1, 3):
                    topic = f"rf{factor}-{size}b-{partitions}p{'' if idempotent else '-plain'}"
                    _create(cluster, topic, factor, partitions)
                    messages = int(args.megabytes * 1e6 / size)
                    row = throughput(cluster, topic, messages, b"x" * size, idempotent=idempotent)
                    rows.setdefault((size, partitions, idempotent), {})[factor] = row
                    print(
                        f"{size} B x {partitions} partitions RF={factor} idempotent={idempotent}: "
                        f"{row[0]:.0f} msgs/s, {row[1]:.1f} MB/s, {row[2]:.3f} broker CPU s/MB, "
                        f"{row[3]:.3f} producer CPU s/MB",
                        flush=True,
                    )
            kills = []
            if args.kills:
                _create(cluster, "failover", 3)
                kills = failover(cluster, "failover", args.kills)
    loads.append(os.getloadavg()[0])
    table = render(rows, kills, args.megabytes, loads)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    write_results(RESULTS / "replication.md", table)


if __name__ == "__main__":
    main()
