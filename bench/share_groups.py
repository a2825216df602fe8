"""`python -m bench.share_groups`: share consumers (KIP-932) against a consumer group on the same broker
and data (issue 31).

One pykraft node (a process on 127.0.0.1), topics of 1 and 12 partitions holding the same records, and
N confluent-kafka consumers in this process, one thread each: either ShareConsumers of one share group
(implicit acknowledgement: each poll accepts the previous one's records; max.poll.records 500) or
Consumers of one KIP-848 consumer group (group.protocol=consumer, auto.offset.reset earliest). The
figure is the time from the first subscribe() to every record received (each exactly once for the share
group: a duplicate fails the run), and records/s over it. Rounds interleave the two; medians.

Then the latency from produce to ACCEPT while a producer in this process sends at a steady rate: each
record carries its send time (time.monotonic_ns() when produce() is called); share consumers acknowledge
explicitly (acknowledge() each record, then commit_sync(): the ACCEPT is answered when it returns),
consumer-group members commit synchronously after each consume() (the commit covering a record is
answered). Records sent during the warm-up (the consumer group settling its assignment) are not counted.

Last, Kafka's default lock duration (group.share.record.lock.duration.ms, 30 s): a member acquires
records and then holds them without acknowledging, either alive (its client keeps heartbeating, which
renews no lock) or killed -9; the figure is the time from its acquisition to another member receiving
them, with the default and with share.record.lock.duration.ms=2000 as a group config.

Results: bench/results/share_groups.md. Every process started is stopped.

    python -m bench.share_groups [--rounds 3] [--records 20000] [--consumers 1,4] [--rates 1000,5000]
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import struct
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from bench.__main__ import Peer, pykraft_peer
from bench.results_file import write_results

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("share group", "consumer group")
PARTITIONS = (1, 12)
RECORD_BYTES = 100
LIMIT_S = 300.0


def _topic(broker: Peer, partitions: int, records: int = 0) -> str:
    """A new topic of ``partitions``, holding ``records`` records (spread round-robin) if any."""
    topic = f"share-bench-{partitions}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=60)
    if records:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        payload = b"x" * RECORD_BYTES
        for i in range(records):
            producer.produce(topic, value=payload, partition=i % partitions)
            if i % 10000 == 0:
                producer.poll(0)
        producer.flush(60)
    return topic


def _share_group(broker: Peer, record_lock_duration_ms: int | None = None) -> str:
    """A new share group starting from the earliest offset, with its own lock duration if given."""
    group = f"sg-{uuid.uuid4().hex[:8]}"
    configs = {"share.auto.offset.reset": "earliest"}
    if record_lock_duration_ms is not None:
        configs["share.record.lock.duration.ms"] = str(record_lock_duration_ms)
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]
    ).values():
        fut.result(timeout=30)
    return group


def _clients(
    broker: Peer, kind: str, consumers: int, share_settings: dict[str, str] | None = None
) -> list[Any]:
    """``consumers`` members of a new share group (with ``share_settings``) or of a new KIP-848 consumer
    group reading from the earliest offset without commits."""
    if kind == "share group":
        group = _share_group(broker)
        return [
            ShareConsumer(
                {"bootstrap.servers": broker.bootstrap, "group.id": group, **(share_settings or {})}
            )
            for _ in range(consumers)
        ]
    group = f"cg-{uuid.uuid4().hex[:8]}"
    settings = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    return [Consumer(settings) for _ in range(consumers)]


def one_round(broker: Peer, kind: str, topic: str, records: int, consumers: int) -> float:
    """Seconds from the first subscribe to every record received."""
    clients = _clients(broker, kind, consumers)
    seen: Counter[tuple[int, int]] = Counter()
    lock = threading.Lock()
    done = threading.Event()
    started = time.monotonic()

    def work(client: Any) -> None:
        client.subscribe([topic])
        while not done.is_set():
            if kind == "share group":
                messages = list(client.poll(0.2))
            else:
                messages = client.consume(500, 0.2)
            keys = [(m.partition(), m.offset()) for m in messages if m.error() is None]
            with lock:
                seen.update(keys)
                if len(seen) >= records:
                    done.set()
            if time.monotonic() - started > LIMIT_S:
                done.set()

    threads = [threading.Thread(target=work, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    for c in clients:
        c.close()
    if len(seen) < records:
        raise TimeoutError(f"{kind}: {len(seen)} of {records} records within {LIMIT_S} s")
    if kind == "share group" and max(seen.values()) > 1:
        raise AssertionError(f"share group delivered a record twice: {seen.most_common(1)}")
    return elapsed


SEND_TIME = struct.Struct(">q")  # a record's value starts with its send time, time.monotonic_ns()
WARMUP_S = 10.0  # longer than a consumer group's settling (heartbeat interval 5 s, one revocation round)
MEASURE_S = 10.0


@dataclass
class Steady:
    """Produce-to-ACCEPT latencies (ms) of the records sent in the measured window."""

    latencies_ms: list[float]
    produced: int
    broker_cpu_s: float  # the broker process's CPU time over the round (warm-up included)


def steady_round(broker: Peer, kind: str, partitions: int, consumers: int, rate: int) -> Steady:
    """A producer sends ``rate`` records/s for WARMUP_S + MEASURE_S while the consumers accept them."""
    topic = _topic(broker, partitions)
    clients = _clients(broker, kind, consumers, {"share.acknowledgement.mode": "explicit"})
    seen: Counter[tuple[int, int]] = Counter()
    latencies_ms: list[float] = []
    lock = threading.Lock()
    produced_all = threading.Event()
    done = threading.Event()
    produced = 0
    cpu_before_s = broker.cpu_s() or 0.0
    started_ns = time.monotonic_ns()
    window_ns = (started_ns + int(WARMUP_S * 1e9), started_ns + int((WARMUP_S + MEASURE_S) * 1e9))

    errors: list[BaseException] = []

    def accept(client: Any) -> None:
        try:
            accept_until_done(client)
        except BaseException as e:
            errors.append(e)
            done.set()

    def accept_until_done(client: Any) -> None:
        client.subscribe([topic])
        while not done.is_set():
            if kind == "share group":
                messages = [m for m in client.poll(0.2) if m.error() is None]
                for m in messages:
                    client.acknowledge(m)
                if messages:
                    failed = [tp for tp, err in client.commit_sync().items() if err is not None]
                    if failed:
                        raise RuntimeError(f"ACCEPT failed: {failed}")
            else:
                # What is there as soon as anything is (consume() alone waits for 500 or its timeout).
                first = client.poll(0.2)
                messages = [
                    m for m in [first, *client.consume(499, 0)] if m is not None and m.error() is None
                ]
                if messages:
                    client.commit(asynchronous=False)
            accepted_ns = time.monotonic_ns()
            with lock:
                for m in messages:
                    key = (m.partition(), m.offset())
                    seen[key] += 1
                    (sent_ns,) = SEND_TIME.unpack_from(m.value())
                    if seen[key] == 1 and window_ns[0] <= sent_ns < window_ns[1]:
                        latencies_ms.append((accepted_ns - sent_ns) / 1e6)
                if produced_all.is_set() and len(seen) >= produced:
                    done.set()
            if (accepted_ns - started_ns) / 1e9 > LIMIT_S:
                done.set()

    threads = [threading.Thread(target=accept, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    padding = b"x" * (RECORD_BYTES - SEND_TIME.size)
    while (now_ns := time.monotonic_ns()) < window_ns[1] and not done.is_set():
        due = int((now_ns - started_ns) / 1e9 * rate)
        for i in range(produced, due):
            producer.produce(
                topic, value=SEND_TIME.pack(time.monotonic_ns()) + padding, partition=i % partitions
            )
        produced = max(produced, due)
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(60)
    produced_all.set()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    if errors:
        raise errors[0]
    if len(seen) < produced:
        raise TimeoutError(f"{kind}: {len(seen)} of {produced} records accepted within {LIMIT_S} s")
    if kind == "share group" and max(seen.values()) > 1:
        raise AssertionError(f"share group delivered a record twice: {seen.most_common(1)}")
    return Steady(latencies_ms, produced, (broker.cpu_s() or 0.0) - cpu_before_s)


# A member in another process that acquires records, says how many, and holds them until killed.
HOLDER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    got = 0
    while got == 0:
        got = len([m for m in c.poll(0.2) if m.error() is None])
    print(got, flush=True)
    time.sleep(600)
    """
)
LOCK_RECORDS = 10
HOLDERS = ("alive, not acknowledging", "killed -9")


@dataclass
class Redelivery:
    seconds: float  # from the holder's acquisition to another member receiving every record
    delivery_counts: list[int]
    late_ack: str  # what the holder's acknowledgement after the redelivery was answered ("" if killed)


def lock_round(broker: Peer, holder: str, record_lock_duration_ms: int | None) -> Redelivery:
    """One member acquires LOCK_RECORDS records and holds them; another joins and polls."""
    topic = _topic(broker, 1)
    group = _share_group(broker, record_lock_duration_ms)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(LOCK_RECORDS):
        producer.produce(topic, value=f"r{i}".encode())
    producer.flush(30)
    explicit = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "share.acknowledgement.mode": "explicit",
    }
    held: list[Any] = []
    process: subprocess.Popen[str] | None = None
    alive: ShareConsumer | None = None
    if holder == "killed -9":
        process = subprocess.Popen(
            [sys.executable, "-c", HOLDER_SCRIPT, broker.bootstrap, group, topic],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None
        acquired_count = int(process.stdout.readline())
        acquired = time.monotonic()
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    else:
        alive = ShareConsumer(explicit)
        alive.subscribe([topic])
        while not held:
            held = [m for m in alive.poll(0.2) if m.error() is None]
        acquired_count = len(held)
        acquired = time.monotonic()
    other = ShareConsumer(explicit)
    other.subscribe([topic])
    counts: dict[int, int] = {}
    try:
        while len(counts) < LOCK_RECORDS:
            if time.monotonic() - acquired > LIMIT_S:
                raise TimeoutError(f"{len(counts)} of {LOCK_RECORDS} records redelivered within {LIMIT_S} s")
            messages = [m for m in other.poll(0.2) if m.error() is None]
            for m in messages:
                counts[m.offset()] = m.delivery_count()
                other.acknowledge(m)
            if messages:
                other.commit_sync()
        seconds = time.monotonic() - acquired
        late_ack = ""
        if alive is not None:
            for m in held:
                alive.acknowledge(m)
            try:
                outcome = {
                    "NONE" if err is None else err.args[0].name() for err in alive.commit_sync().values()
                }
                late_ack = ", ".join(sorted(outcome))
            except KafkaException as e:
                late_ack = e.args[0].name()
    finally:
        other.close()
        if alive is not None:
            alive.close()
    if acquired_count != LOCK_RECORDS:
        raise AssertionError(f"the holder acquired {acquired_count} of {LOCK_RECORDS} records")
    return Redelivery(seconds, sorted(counts.values()), late_ack)


PARTS = ("drain", "steady", "lock")
LOCK_SETTINGS: tuple[int | None, ...] = (None, 2000)  # None: the broker's default, Kafka's 30 s


@dataclass
class Results:
    drain: dict[tuple[int, int], dict[str, list[float]]]  # (partitions, consumers) -> kind -> seconds
    steady: dict[tuple[int, int, int], dict[str, list[Steady]]]  # (records/s, partitions, consumers)
    lock: dict[tuple[str, int | None], list[Redelivery]]  # (holder, group lock duration) -> rounds


def run(args: argparse.Namespace) -> Results:
    consumer_counts = [int(c) for c in args.consumers.split(",")]
    combos = [(p, c) for p in PARTITIONS for c in consumer_counts]
    parts = args.parts.split(",")
    results = Results(
        drain={combo: {k: [] for k in KINDS} for combo in combos} if "drain" in parts else {},
        steady={(int(r), *combo): {k: [] for k in KINDS} for r in args.rates.split(",") for combo in combos}
        if "steady" in parts
        else {},
        lock={(h, ms): [] for h in HOLDERS for ms in LOCK_SETTINGS} if "lock" in parts else {},
    )
    # A group may set a lock duration down to the broker's minimum (Kafka's default minimum is 15 s).
    broker = pykraft_peer("group.share.min.record.lock.duration.ms=1000\n")
    broker.start()
    try:
        topics = {p: _topic(broker, p, args.records) for p in PARTITIONS} if results.drain else {}
        for round_index in range(args.rounds if results.drain else 0):
            for (partitions, consumers), by_kind in results.drain.items():
                for kind in KINDS:
                    seconds = one_round(broker, kind, topics[partitions], args.records, consumers)
                    by_kind[kind].append(seconds)
                    print(
                        f"round {round_index + 1} {partitions:2d} partition(s) {consumers} consumer(s)"
                        f" {kind:15s} {seconds * 1000:7.0f} ms {args.records / seconds:9.0f} records/s",
                        flush=True,
                    )
        for round_index in range(args.steady_rounds if results.steady else 0):
            for (rate, partitions, consumers), by_steady_kind in results.steady.items():
                for kind in KINDS:
                    steady = steady_round(broker, kind, partitions, consumers, rate)
                    by_steady_kind[kind].append(steady)
                    p50, p99 = _p50_p99(steady.latencies_ms)
                    print(
                        f"steady {round_index + 1} {partitions:2d} partition(s) {consumers} consumer(s)"
                        f" {kind:15s} {rate} records/s: p50 {p50:.0f} ms p99 {p99:.0f} ms",
                        flush=True,
                    )
        for round_index in range(args.lock_rounds if results.lock else 0):
            for (holder, lock_ms), redeliveries in results.lock.items():
                redelivery = lock_round(broker, holder, lock_ms)
                redeliveries.append(redelivery)
                print(
                    f"lock {round_index + 1} {holder:25s} lock {_lock_label(lock_ms):22s}"
                    f" redelivered after {redelivery.seconds:.2f} s, delivery counts"
                    f" {sorted(set(redelivery.delivery_counts))}, late ack: {redelivery.late_ack or '-'}",
                    flush=True,
                )
    finally:
        broker.stop()
    return results


def _p50_p99(latencies_ms: list[float]) -> tuple[float, float]:
    percentiles = statistics.quantiles(latencies_ms, n=100, method="inclusive")
    return percentiles[49], percentiles[98]


def _lock_label(lock_ms: int | None) -> str:
    return "default (30000 ms)" if lock_ms is None else f"{lock_ms} ms (group config)"


def render(results: Results, args: argparse.Namespace) -> str:
    lines = [
        "# Share group against consumer group",
        "",
        f"confluent-kafka {confluent_kafka.version()}, librdkafka {confluent_kafka.libversion()[0]}, one pykraft"
        f" process on 127.0.0.1, {platform.machine()}, {os.cpu_count()} cores shared with other work;"
        " `python -m bench.share_groups`, every table from one run. The machine is shared and noisy:"
        " compare rows of one run, not runs.",
    ]
    if results.drain:
        lines += [
            "",
            f"## Draining {args.records} records of {RECORD_BYTES} bytes",
            "",
            "From the first subscribe() to every record received, one thread per consumer.",
            "",
            "| partitions | consumers | group | rounds | median ms | records/s (median) | min ms | max ms |",
            "|---:|---:|---|---:|---:|---:|---:|---:|",
        ]
        for (partitions, consumers), by_kind in results.drain.items():
            for kind, rounds in by_kind.items():
                ms = [s * 1000 for s in rounds]
                median_ms = statistics.median(ms)
                lines.append(
                    f"| {partitions} | {consumers} | {kind} | {len(ms)} | {median_ms:.0f} |"
                    f" {args.records / (median_ms / 1000):.0f} | {min(ms):.0f} | {max(ms):.0f} |"
                )
        lines += [
            "",
            "Share group: implicit acknowledgement (every record ACCEPTed by the next poll), each record",
            "delivered once (checked). Consumer group: group.protocol=consumer, no commits. Both start from",
            "the earliest offset (share.auto.offset.reset=earliest set as a group config). A consumer group's",
            "time includes settling its assignment (members learn of new epochs at",
            "group.consumer.heartbeat.interval.ms, 5 s), unless its first member reads everything before the",
            "others are assigned anything; a share group has nothing to settle: every member may fetch every",
            "partition from its first heartbeat, and each record costs the broker an acquisition and an",
            "acknowledgement.",
        ]
    if results.steady:
        lines += [
            "",
            "## Produce to ACCEPT under a steady producer",
            "",
            f"A producer sends at a steady rate ({RECORD_BYTES} bytes, its send time in the value) for"
            f" {WARMUP_S:.0f} s of warm-up and {MEASURE_S:.0f} s measured; the latency of each record sent in"
            " the measured window is from produce() to the answer of the acknowledgement that ACCEPTs it"
            " (share group: explicit acknowledge() then commit_sync() after each poll) or of the offset"
            " commit that covers it (consumer group: commit(asynchronous=False) after each poll() and the"
            " consume(499, 0) of what else is there). Broker CPU: the pykraft process's CPU time over the"
            " round (warm-up included) per 1000 records produced.",
            "",
            "| records/s | partitions | consumers | group | records measured | p50 ms | p99 ms | max ms |"
            " broker CPU ms per 1000 records |",
            "|---:|---:|---:|---|---:|---:|---:|---:|---:|",
        ]
        for (rate, partitions, consumers), by_steady_kind in results.steady.items():
            for kind, steadies in by_steady_kind.items():
                latencies_ms = [ms for steady in steadies for ms in steady.latencies_ms]
                p50, p99 = _p50_p99(latencies_ms)
                lines.append(
                    f"| {rate} | {partitions} | {consumers} | {kind} | {len(latencies_ms)} | {p50:.0f} | {p99:.0f} |"
                    f" {max(latencies_ms):.0f} |"
                    f" {1e6 * sum(t.broker_cpu_s for t in steadies) / sum(t.produced for t in steadies):.0f} |"
                )
    if results.lock:
        lines += [
            "",
            "## Kafka's default record lock duration",
            "",
            f"A member acquires all {LOCK_RECORDS} records of a 1-partition topic (explicit acknowledgement) and"
            " holds them; another member of the group then joins and polls. Seconds from the acquisition to"
            " the other member having received every record, the delivery counts it saw, and what the"
            " holder's own acknowledgement (ACCEPT, commit_sync) of its records was answered afterwards.",
            "",
            "| holder | record lock duration | rounds | redelivered after s (median) | delivery counts | late ACCEPT |",
            "|---|---|---:|---:|---|---|",
        ]
        for (holder, lock_ms), redeliveries in results.lock.items():
            seconds = statistics.median(r.seconds for r in redeliveries)
            counts = sorted({c for r in redeliveries for c in r.delivery_counts})
            late = sorted({r.late_ack for r in redeliveries if r.late_ack})
            lines.append(
                f"| {holder} | {_lock_label(lock_ms)} | {len(redeliveries)} | {seconds:.2f} |"
                f" {', '.join(map(str, counts))} | {'; '.join(late) or '-'} |"
            )
        lines += [
            "",
            "What Kafka's default means: a member that stops acknowledging but stays alive (librdkafka keeps"
            " sending ShareGroupHeartbeat from its background thread) keeps its records for the whole"
            " group.share.record.lock.duration.ms, 30 s by default, and nothing it does implicitly renews a"
            " lock (Kafka renews only on an explicit RENEW acknowledgement, which ShareAcknowledge v1 does not"
            " carry). After that the records go to another member with delivery count 2, and the holder's"
            " late ACCEPT is refused. A group config (share.record.lock.duration.ms, here 2 s; Kafka's floor"
            " group.share.min.record.lock.duration.ms is 15 s by default, lowered to 1 s for this run) shortens"
            " the wait. A member killed -9 holds nothing for that long: its share session ends with its"
            " connection and its records are released at once (Kafka 4.1+'s ShareSessionCache disconnect"
            " listener), whatever the lock duration.",
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the drain")
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--consumers", default="1,4")
    parser.add_argument("--rates", default="1000,5000", help="records/s of the steady producer")
    parser.add_argument("--steady-rounds", type=int, default=1)
    parser.add_argument("--lock-rounds", type=int, default=1)
    parser.add_argument("--parts", default=",".join(PARTS), help="which of drain,steady,lock to run")
    args = parser.parse_args()
    results = run(args)
    text = render(results, args)
    print(text)
    if set(args.parts.split(",")) == set(PARTS):  # the results file holds tables of one run only
        RESULTS.mkdir(exist_ok=True)
        write_results(RESULTS / "share_groups.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
