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

from bench.results_file import write_results
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


def run(kills: int, *, graceful: bool = False) -> list[tuple[int, int, float]]:
    """``graceful``: SIGTERM instead of SIGKILL (the leader resigns with EndQuorumEpoch); the time
    then runs from the signal, so it includes the leader's own shutdown."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="pykraft-election-") as directory:
        with process_cluster(3, directory=directory) as cluster:
            partition = cluster.wait_for_leader(timeout_s=60)
            for _ in range(kills):
                leader = partition.leader_id
                committed = partition.high_watermark
                process = cluster.nodes[leader].process
                assert process is not None
                if graceful:
                    process.terminate()
                else:
                    cluster.kill(leader)
                elapsed_s, new_leader = _elect(cluster, leader, committed)
                process.wait(timeout=30)
                rows.append((leader, new_leader, elapsed_s))
                verb = "stopped" if graceful else "killed"
                print(f"{verb} {leader}: node {new_leader} leads after {elapsed_s * 1000:.0f} ms", flush=True)
                cluster.start(leader)
                partition = cluster.wait_for_leader(timeout_s=60)
    return rows


def render(killed: list[tuple[int, int, float]], stopped: list[tuple[int, int, float]]) -> str:
    lines = [
        "# KRaft leader election (3 controller processes on 127.0.0.1, Kafka's default timeouts)",
        "",
        "From the signal to a survivor's DescribeQuorum naming a new leader that has committed at least",
        "what was committed before (`python -m bench.election`).",
        "",
        "| leader stopped by | stops | median ms | min ms | max ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, rows in (("kill -9", killed), ("SIGTERM (EndQuorumEpoch)", stopped)):
        times_ms = [r[2] * 1000 for r in rows]
        if times_ms:
            lines.append(
                f"| {name} | {len(rows)} | {statistics.median(times_ms):.0f} | {min(times_ms):.0f} | "
                f"{max(times_ms):.0f} |"
            )
    lines += ["", "| # | how | stopped | new leader | ms |", "|---:|---|---:|---:|---:|"]
    numbered = [("kill -9", r) for r in killed] + [("SIGTERM", r) for r in stopped]
    lines += [
        f"| {i + 1} | {how} | {k} | {n} | {t * 1000:.0f} |" for i, (how, (k, n, t)) in enumerate(numbered)
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--stops", type=int, default=5, help="graceful (SIGTERM) leader stops")
    args = parser.parse_args()
    table = render(run(args.kills), run(args.stops, graceful=True))
    print(table)
    RESULTS.mkdir(exist_ok=True)
    write_results(RESULTS / "election.md", table)


if __name__ == "__main__":
    main()
