"""Election time after kill -9 of the KRaft leader: three controller processes on 127.0.0.1 with Kafka's
default quorum timeouts (election 1000 ms, fetch 2000 ms, backoff max 1000 ms).

Each kill: SIGKILL the leader, then poll the survivors' DescribeQuorum every 10 ms until one reports a
new live leader whose high watermark is at least what was committed before the kill. The figure is
the time from the kill to that answer (so it includes detection by the fetch timeout, the election,
and the new leader committing its epoch's first batch). The killed node is restarted and caught up
before the next kill. Prints a table; writes bench/results/election.md.

    python -m bench.election [--kills 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from pykraft.testing import process_cluster

RESULTS = Path(__file__).resolve().parent / "results"
POLL_S = 0.01


def _elect(cluster, killed: int, committed: int, timeout_s: float = 30.0) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        for node in cluster.nodes.values():
            if not node.alive:
                continue
            try:
                partition = cluster.describe_quorum(node.node_id)
            except Exception:  # no leader yet, or this one is a follower
                continue
            if partition.leader_id not in (-1, killed) and partition.high_watermark >= committed:
                return time.monotonic() - started, partition.leader_id
        time.sleep(POLL_S)
    raise TimeoutError(f"no new leader within {timeout_s} s after killing node {killed}")


def run(kills: int) -> list[tuple[int, int, float]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="pykraft-election-") as directory:
        with process_cluster(3, directory=directory) as cluster:
            partition = cluster.wait_for_leader(timeout_s=60)
            for _ in range(kills):
                leader = partition.leader_id
                committed = partition.high_watermark
                cluster.kill(leader)
                elapsed_s, new_leader = _elect(cluster, leader, committed)
                rows.append((leader, new_leader, elapsed_s))
                print(f"killed {leader}: node {new_leader} leads after {elapsed_s * 1000:.0f} ms", flush=True)
                cluster.start(leader)
                partition = cluster.wait_for_leader(timeout_s=60)
    return rows


def render(rows: list[tuple[int, int, float]]) -> str:
    times_ms = [r[2] * 1000 for r in rows]
    lines = [
        "# KRaft leader election after kill -9 (3 controller processes, Kafka's default timeouts)",
        "",
        "| kills | median ms | min ms | max ms |",
        "|---:|---:|---:|---:|",
        f"| {len(rows)} | {statistics.median(times_ms):.0f} | {min(times_ms):.0f} | {max(times_ms):.0f} |",
        "",
        "| # | killed | new leader | ms |",
        "|---:|---:|---:|---:|",
    ]
    lines += [f"| {i + 1} | {k} | {n} | {t * 1000:.0f} |" for i, (k, n, t) in enumerate(rows)]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    args = parser.parse_args()
    table = render(run(args.kills))
    print(table)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "election.md").write_text(table)


if __name__ == "__main__":
    main()
