"""`python -m bench.share_groups`: share consumers (KIP-932) against a consumer group on the same broker
and data (issue 31).

One pykraft node (a process on 127.0.0.1), topics of 1 and 12 partitions holding the same records, and
N confluent-kafka consumers in this process, one thread each: either ShareConsumers of one share group
(implicit acknowledgement: each poll accepts the previous one's records; max.poll.records 500) or
Consumers of one KIP-848 consumer group (group.protocol=consumer, auto.offset.reset earliest). The
figure is the time from the first subscribe() to every record received (each exactly once for the share
group: a duplicate fails the run), and records/s over it. Rounds interleave the two; medians. Results:
bench/results/share_groups.md. Every process started is stopped.

    python -m bench.share_groups [--rounds 3] [--records 20000] [--consumers 1,4]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from bench.__main__ import Peer, pykraft_peer

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("share group", "consumer group")
PARTITIONS = (1, 12)
RECORD_BYTES = 100
LIMIT_S = 300.0


def _topic(broker: Peer, partitions: int, records: int) -> str:
    topic = f"share-bench-{partitions}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(timeout=60)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    payload = b"x" * RECORD_BYTES
    for i in range(records):
        producer.produce(topic, value=payload, partition=i % partitions)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(60)
    return topic


def _share_group(broker: Peer) -> str:
    group = f"sg-{uuid.uuid4().hex[:8]}"
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]
    ).values():
        fut.result(timeout=30)
    return group


def one_round(broker: Peer, kind: str, topic: str, records: int, consumers: int) -> float:
    """Seconds from the first subscribe to every record received."""
    if kind == "share group":
        group = _share_group(broker)
        clients: list[Any] = [
            ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
            for _ in range(consumers)
        ]
    else:
        group = f"cg-{uuid.uuid4().hex[:8]}"
        clients = [
            Consumer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": group,
                    "group.protocol": "consumer",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            for _ in range(consumers)
        ]
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


Results = dict[tuple[int, int], dict[str, list[float]]]


def run(args: argparse.Namespace) -> Results:
    consumer_counts = [int(c) for c in args.consumers.split(",")]
    results: Results = {(p, c): {k: [] for k in KINDS} for p in PARTITIONS for c in consumer_counts}
    broker = pykraft_peer()
    broker.start()
    try:
        topics = {p: _topic(broker, p, args.records) for p in PARTITIONS}
        for round_index in range(args.rounds):
            for (partitions, consumers), by_kind in results.items():
                for kind in KINDS:
                    seconds = one_round(broker, kind, topics[partitions], args.records, consumers)
                    by_kind[kind].append(seconds)
                    print(
                        f"round {round_index + 1} {partitions:2d} partition(s) {consumers} consumer(s)"
                        f" {kind:15s} {seconds * 1000:7.0f} ms {args.records / seconds:9.0f} records/s",
                        flush=True,
                    )
    finally:
        broker.stop()
    return results


def render(results: Results, args: argparse.Namespace) -> str:
    lines = [
        f"# Share group against consumer group: {args.records} records of {RECORD_BYTES} bytes",
        "",
        "From the first subscribe() to every record received, one thread per consumer (confluent-kafka "
        f"{confluent_kafka.version()}, librdkafka {confluent_kafka.libversion()[0]}, one pykraft process on "
        f"127.0.0.1, {platform.machine()}, {os.cpu_count()} cores; `python -m bench.share_groups`).",
        "",
        "| partitions | consumers | group | rounds | median ms | records/s (median) | min ms | max ms |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for (partitions, consumers), by_kind in results.items():
        for kind, rounds in by_kind.items():
            if not rounds:
                continue
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
        "acknowledgement. The machine is shared: compare rows of one run, not runs.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--consumers", default="1,4")
    args = parser.parse_args()
    results = run(args)
    text = render(results, args)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "share_groups.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
