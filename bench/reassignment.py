"""Moving a partition between brokers, and the replication throttle (issue 30 item 1, KIP-455 + KIP-73):
one controller and three broker processes on 127.0.0.1, all on this machine's cores.

A topic with one partition and one replica (on broker A, where the controller placed it) is filled with ``--size-mb`` of records
(1 GB by default), then:

1. unthrottled: ``pykraft reassign-partitions --execute`` moves it to broker B; the figure is the time
   from --execute to --verify saying completed, and the MB/s that makes;
2. throttled: ``--execute --throttle R`` starts moving it from B to C with each rate of
   ``--throttles-mb`` (MB/s, 1 MB = 2**20 bytes); the new replica's log (its ``.log`` files on disk) is
   sampled for ``--measure-s`` seconds after a 2-second start, the measured rate compared with R, then
   the move is cancelled (``--cancel``) and ``--verify`` clears the throttles.

Prints tables; writes bench/results/reassignment.md.

    python -m bench.reassignment [--size-mb 1024] [--throttles-mb 10,20] [--measure-s 20]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from bench.results_file import write_results
from pykraft.cli import main as cli
from pykraft.testing import ProcessCluster, running_cluster

RESULTS = Path(__file__).resolve().parent / "results"
MB = 1 << 20
TOPIC = "moved"
VALUE = b"r" * (64 << 10)
OVERRIDES = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}
WARMUP_S = 2.0


def _tool(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli(list(argv))
    if code != 0:
        raise RuntimeError(f"pykraft {' '.join(argv)} exited {code}: {out.getvalue()}")
    return out.getvalue()


def _fill(cluster: ProcessCluster, size_mb: int) -> tuple[float, int]:
    """The topic, one replica, with ``size_mb`` MB of 64 KB records: the MB/s produced, its broker."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    # (confluent-kafka 2.16's NewTopic refuses a replica assignment; the plans below start from
    # wherever the controller placed the one replica.)
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20}
    )
    failures: list[object] = []
    records = size_mb * MB // len(VALUE)
    started = time.monotonic()
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, VALUE, on_delivery=lambda err, _m: err and failures.append(err))
                break
            except BufferError:
                producer.poll(0.01)
    left = producer.flush(600)
    if left or failures:
        raise RuntimeError(f"{left} undelivered, failures {failures[:3]}")
    mb_s = size_mb / (time.monotonic() - started)
    return mb_s, admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].replicas[0]


def _log_bytes(cluster: ProcessCluster, broker: int) -> int:
    """The size of the partition's ``.log`` segment files in the broker's log dir (0 before it exists)."""
    directory = Path(cluster.brokers[broker].data_dir) / f"{TOPIC}-0"
    try:
        return sum(entry.stat().st_size for entry in directory.iterdir() if entry.suffix == ".log")
    except FileNotFoundError:
        return 0


def _plan(path: str, replicas: list[int]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": replicas}]}, fh)


def _wait_done(bootstrap: tuple[str, str], plan: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = _tool("reassign-partitions", *bootstrap, "--verify", "--reassignment-json-file", plan)
        if "is completed." in out:
            return out
        time.sleep(0.2)
    raise TimeoutError(f"the reassignment of {plan} did not complete in {timeout_s} s")


def unthrottled_move(cluster: ProcessCluster, directory: str, size_mb: int, target: int) -> float:
    """Seconds from --execute to --verify completed, moving the partition to ``target``."""
    bootstrap = ("--bootstrap-server", cluster.bootstrap_servers)
    plan = os.path.join(directory, "unthrottled.json")
    _plan(plan, [target])
    started = time.monotonic()
    _tool("reassign-partitions", *bootstrap, "--execute", "--reassignment-json-file", plan)
    _wait_done(bootstrap, plan, max(600.0, size_mb))
    return time.monotonic() - started


def throttled_rate(
    cluster: ProcessCluster, directory: str, rate_mb: int, measure_s: float, source: int, target: int
) -> float:
    """The MB/s broker ``target`` takes the partition from ``source`` with ``--throttle`` rate_mb MB/s."""
    bootstrap = ("--bootstrap-server", cluster.bootstrap_servers)
    plan = os.path.join(directory, f"throttled-{rate_mb}.json")
    _plan(plan, [target])
    _tool(
        "reassign-partitions",
        *bootstrap,
        "--execute",
        "--throttle",
        str(rate_mb * MB),
        "--reassignment-json-file",
        plan,
    )
    time.sleep(WARMUP_S)
    start_bytes, start_s = _log_bytes(cluster, target), time.monotonic()
    time.sleep(measure_s)
    end_bytes, end_s = _log_bytes(cluster, target), time.monotonic()
    if end_bytes >= _log_bytes(cluster, source):
        raise RuntimeError("the throttled move completed inside the measurement: use a larger --size-mb")
    _tool("reassign-partitions", *bootstrap, "--cancel", "--reassignment-json-file", plan)
    # Cancelled, the partition is back on its source: --verify against that clears the throttles.
    back = os.path.join(directory, "back.json")
    _plan(back, [source])
    out = _wait_done(bootstrap, back, 60)
    assert "Clearing broker-level throttles" in out, out
    deadline = time.monotonic() + 60
    while _log_bytes(cluster, target) and time.monotonic() < deadline:
        time.sleep(0.2)  # the removed replica's log is deleted before the next run
    return (end_bytes - start_bytes) / MB / (end_s - start_s)


def render(
    size_mb: int,
    fill_mb_s: float,
    move_s: float,
    throttled: dict[int, float],
    measure_s: float,
    moves: list[int],
) -> str:
    lines = [
        "# Reassignment: moving a partition and the replication throttle (1 controller + 3 brokers, "
        "separate processes on 127.0.0.1, 2 cores)",
        "",
        f"`python -m bench.reassignment --size-mb {size_mb}`: one partition, one replica, {size_mb} MB of "
        f"64 KB records (produced at {fill_mb_s:.1f} MB/s, acks=1).",
        "",
        "| move | MB | seconds | MB/s |",
        "|---|---:|---:|---:|",
        f"| {moves[0]} -> {moves[1]}, unthrottled (--execute to --verify completed) | {size_mb} | {move_s:.1f} | "
        f"{size_mb / move_s:.1f} |",
        "",
        f"Throttled {moves[1]} -> {moves[2]} (`--throttle`): the new replica's log growth over {measure_s:.0f} s after a "
        f"{WARMUP_S:.0f} s start, then --cancel and --verify (which clears the throttles):",
        "",
        "| --throttle MB/s | measured MB/s | measured / configured |",
        "|---:|---:|---:|",
    ]
    for rate_mb, measured in throttled.items():
        lines.append(f"| {rate_mb} | {measured:.1f} | {measured / rate_mb:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="MB in the moved partition (1 GB)")
    parser.add_argument("--throttles-mb", default="10,20", help="throttle rates to measure, MB/s")
    parser.add_argument("--measure-s", type=float, default=20.0)
    args = parser.parse_args()
    rates = [int(r) for r in args.throttles_mb.split(",") if r.strip()]
    with tempfile.TemporaryDirectory(prefix="pykraft-reassignment-") as directory:
        with running_cluster(
            controllers=1, brokers=3, directory=os.path.join(directory, "cluster"), overrides=OVERRIDES
        ) as cluster:
            fill_mb_s, first = _fill(cluster, args.size_mb)
            second, third = sorted(set(cluster.brokers) - {first})
            print(f"filled {args.size_mb} MB on {first} at {fill_mb_s:.1f} MB/s", flush=True)
            move_s = unthrottled_move(cluster, directory, args.size_mb, second)
            print(f"moved {args.size_mb} MB in {move_s:.1f} s", flush=True)
            throttled = {}
            for rate_mb in rates:
                throttled[rate_mb] = throttled_rate(
                    cluster, directory, rate_mb, args.measure_s, second, third
                )
                print(f"--throttle {rate_mb} MB/s: measured {throttled[rate_mb]:.1f} MB/s", flush=True)
    table = render(args.size_mb, fill_mb_s, move_s, throttled, args.measure_s, [first, second, third])
    print(table)
    RESULTS.mkdir(exist_ok=True)
    write_results(RESULTS / "reassignment.md", table)


if __name__ == "__main__":
    main()
