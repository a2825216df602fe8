"""`python -m bench.consumer_groups`: how long a consumer group takes to settle after its last member
joins, KIP-848's consumer protocol against the classic protocol, on the same broker and data (issue 19).

One pykraft node (a process on 127.0.0.1), one topic of 500 partitions, 50 confluent-kafka consumers
in this process. 49 members join and settle first; then the 50th subscribes, and the figure is the time
from its subscribe() to every member's assignment() being balanced (10 partitions each, all 500
owned, none twice), every consumer polled in a loop. Protocols:

- ``consumer``: group.protocol=consumer (ConsumerGroupHeartbeat, server-side uniform assignor,
  incremental reconciliation; members hear of the new epoch at their next heartbeat);
- ``classic eager``: the classic protocol with librdkafka's default range assignor (every member revokes
  everything and rejoins);
- ``classic cooperative``: classic with cooperative-sticky (KIP-429: two rebalances, only moved
  partitions revoked).

Two settings: Kafka's defaults (group.consumer.heartbeat.interval.ms 5000 on the broker;
heartbeat.interval.ms 3000 on classic clients) and short heartbeats (500 ms for both). Rounds interleave
the protocols; medians. Results: bench/results/consumer_groups.md. Every process started is stopped.

    python -m bench.consumer_groups [--rounds 3] [--members 50] [--partitions 500]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.__main__ import Peer, pykraft_peer
from bench.results_file import write_results

RESULTS = Path(__file__).resolve().parent / "results"
PROTOCOLS = ("consumer", "classic eager", "classic cooperative")
SETTINGS = {"defaults": None, "500 ms heartbeats": 500}
SETTLE_LIMIT_S = 120.0


def _broker(heartbeat_ms: int | None) -> Peer:
    extra = "" if heartbeat_ms is None else f"group.consumer.heartbeat.interval.ms={heartbeat_ms}\n"
    broker = pykraft_peer(extra)
    broker.start()
    return broker


def _consumer(bootstrap: str, group: str, protocol: str, heartbeat_ms: int | None) -> Consumer:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    if protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config["partition.assignment.strategy"] = (
            "cooperative-sticky" if "cooperative" in protocol else "range"
        )
        config["session.timeout.ms"] = 45000
        if heartbeat_ms is not None:
            config["heartbeat.interval.ms"] = heartbeat_ms
    return Consumer(config)


def _balanced(consumers: list[Consumer], partitions: int) -> bool:
    share, extra = divmod(partitions, len(consumers))
    owned: set[int] = set()
    total = 0
    for c in consumers:
        mine = {tp.partition for tp in c.assignment()}
        if len(mine) not in (share, share + 1):
            return False
        total += len(mine)
        owned |= mine
    return total == partitions and len(owned) == partitions


def _settle(consumers: list[Consumer], partitions: int) -> float:
    started = time.monotonic()
    while not _balanced(consumers, partitions):
        if time.monotonic() - started > SETTLE_LIMIT_S:
            raise TimeoutError(f"not balanced within {SETTLE_LIMIT_S} s")
        for c in consumers:
            c.poll(0)
        time.sleep(0.002)
    return time.monotonic() - started


def one_round(
    broker: Peer, protocol: str, heartbeat_ms: int | None, members: int, partitions: int
) -> tuple[float, int]:
    """(seconds to settle after the last join, partitions the earlier members gave up meanwhile)."""
    topic = f"rebalance-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(topic, num_partitions=partitions)]).values():
        fut.result(timeout=60)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumers = [_consumer(broker.bootstrap, group, protocol, heartbeat_ms) for _ in range(members)]
    revoked = [0]

    def on_revoke(consumer: Consumer, lost: list[Any]) -> None:
        revoked[0] += len(lost)

    try:
        for c in consumers[:-1]:
            c.subscribe([topic], on_revoke=on_revoke)
        _settle(consumers[:-1], partitions)
        revoked[0] = 0
        started = time.monotonic()
        consumers[-1].subscribe([topic])
        _settle(consumers, partitions)
        return time.monotonic() - started, revoked[0]
    finally:
        for c in consumers:
            c.close()


Results = dict[str, dict[str, list[tuple[float, int]]]]


def run(args: argparse.Namespace) -> Results:
    results: Results = {s: {p: [] for p in PROTOCOLS} for s in SETTINGS}
    for setting, heartbeat_ms in SETTINGS.items():
        broker = _broker(heartbeat_ms)
        try:
            for round_index in range(args.rounds):
                for protocol in PROTOCOLS:
                    seconds, revoked = one_round(
                        broker, protocol, heartbeat_ms, args.members, args.partitions
                    )
                    results[setting][protocol].append((seconds, revoked))
                    print(
                        f"{setting:18s} round {round_index + 1} {protocol:20s} {seconds * 1000:7.0f} ms"
                        f" {revoked:4d} revoked",
                        flush=True,
                    )
        finally:
            broker.stop()
    return results


def render(results: Results, args: argparse.Namespace) -> str:
    lines = [
        f"# Rebalance after the last join: {args.members} members, {args.partitions} partitions",
        "",
        "From the last member's subscribe() to every member holding its balanced share (confluent-kafka "
        f"{confluent_kafka.version()}, librdkafka {confluent_kafka.libversion()[0]}, one pykraft process on "
        "127.0.0.1, "
        f"{platform.machine()}, {os.cpu_count()} cores; `python -m bench.consumer_groups`).",
        "",
        "| heartbeats | protocol | rounds | median ms | min ms | max ms | partitions revoked (median) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for setting, by_protocol in results.items():
        for protocol, rounds in by_protocol.items():
            if not rounds:
                continue
            ms = [s * 1000 for s, _ in rounds]
            revoked = statistics.median(r for _, r in rounds)
            lines.append(
                f"| {setting} | {protocol} | {len(ms)} | {statistics.median(ms):.0f} | {min(ms):.0f} |"
                f" {max(ms):.0f} | {revoked:.0f} |"
            )
    lines += [
        "",
        "Defaults: group.consumer.heartbeat.interval.ms=5000 (broker) for the consumer protocol,",
        "heartbeat.interval.ms=3000 (client) for the classic one; 500 ms: both at 500. Partitions revoked:",
        "what the earlier members gave up (on_revoke) until the group settled; the newcomer's share is",
        f"{args.partitions // args.members}, and a revoked partition is consumed by nobody until reassigned.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=500)
    args = parser.parse_args()
    results = run(args)
    text = render(results, args)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    write_results(RESULTS / "consumer_groups.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
