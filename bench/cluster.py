"""The broker-controller plane of a 3-controller + 3-broker cluster of processes on 127.0.0.1
(broker.session.timeout.ms=3000, broker.heartbeat.interval.ms=500).

1. InitProducerId through the brokers (KIP-730: each broker hands out ids from blocks of 1000 it gets
   from the active controller with AllocateProducerIds, asking for the next block at 90% of the current
   one). Six client threads, two per broker, each on its own connection, loop on a raw InitProducerId
   (v4, no transactional id) and retry a retriable error (COORDINATOR_LOAD_IN_PROGRESS while the broker
   has no block, ...) after 10 ms; a call's latency runs from its first attempt to the answer with an id.
   Two phases: steady (no failure), then a few cycles in which the controller leader is killed (kill -9)
   mid-run and restarted some seconds later. The clients run flat out so that the brokers go through
   blocks (a few per second each, so they ask the controller) during the outage. Every id handed out must be distinct; that is checked.
   Metadata is polled alongside to see whether a broker is fenced during the controller failover.
2. Broker fencing: a broker is killed (kill -9), and Metadata is polled through another broker every
   20 ms until the killed broker is no longer listed (its session expires on the controller); then it is
   restarted and the time until it is listed (registered and unfenced) again is measured. The same with
   SIGTERM (controlled shutdown: the broker asks to be fenced, no session timeout).

Prints tables; writes bench/results/cluster.md.

    python -m bench.cluster [--steady-s 8] [--controller-kills 3] [--fence-reps 4]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import platform
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from bench.results_file import write_results
from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError
from pykraft.testing import ProcessCluster, running_cluster

RESULTS = Path(__file__).resolve().parent / "results"
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 500
OVERRIDES = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS),
}
CLIENTS_PER_BROKER = 2
RETRY_BACKOFF_S = 0.01
CALL_TIMEOUT_S = 30.0  # a call still without an id after this is counted as failed
BLOCK_SIZE = 1000
RETRIABLE = {
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.THROTTLING_QUOTA_EXCEEDED,
}
METADATA_POLL_S = 0.02
WATCH_POLL_S = 0.1


@dataclass
class Call:
    broker: int
    started: float  # monotonic
    latency_s: float
    attempts: int
    producer_id: int  # -1: failed
    errors: tuple[int, ...]  # the error codes of the attempts before the answer (-1: connection lost)


@dataclass
class Load:
    """The client threads and what they saw; ``calls`` only grows (read it under ``lock``)."""

    calls: list[Call] = field(default_factory=list)
    connection_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)


def _init_producer_id(conn: BrokerConnection) -> tuple[int, int]:
    request = InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
    )
    response = conn.request(request, InitProducerIdResponse, 4)
    return int(response.error_code), int(response.producer_id)


def _client(load: Load, broker: int, address: str) -> None:
    conn: BrokerConnection | None = None
    while not load.stop.is_set():
        started = time.monotonic()
        errors: list[int] = []
        producer_id = -1
        while True:
            try:
                if conn is None:
                    conn = BrokerConnection.to(address, client_id=f"bench-{broker}", timeout_s=10.0)
                error, pid = _init_producer_id(conn)
            except BrokerConnectionError as exc:
                if conn is not None:
                    conn.close()
                conn = None
                error, pid = -1, -1
                with load.lock:
                    load.connection_errors[str(exc)] += 1
            if error == ErrorCode.NONE:
                producer_id = pid
                break
            errors.append(error)
            if (error != -1 and error not in RETRIABLE) or time.monotonic() - started > CALL_TIMEOUT_S:
                break
            time.sleep(RETRY_BACKOFF_S)
        call = Call(broker, started, time.monotonic() - started, len(errors) + 1, producer_id, tuple(errors))
        with load.lock:
            load.calls.append(call)
    if conn is not None:
        conn.close()


def _error_name(code: int) -> str:
    try:
        return f"{ErrorCode(code).name} ({code})"
    except ValueError:
        return f"error {code}"


def start_load(cluster: ProcessCluster) -> Load:
    load = Load()
    for broker, node in cluster.brokers.items():
        for i in range(CLIENTS_PER_BROKER):
            thread = threading.Thread(
                target=_client, args=(load, broker, node.address), name=f"client-{broker}-{i}", daemon=True
            )
            load.threads.append(thread)
            thread.start()
    return load


def stop_load(load: Load) -> None:
    load.stop.set()
    for thread in load.threads:
        thread.join(timeout=CALL_TIMEOUT_S + 15)
        if thread.is_alive():
            raise RuntimeError(f"{thread.name} did not stop: a request hangs")


def _listed_brokers(conn: BrokerConnection) -> set[int]:
    response = conn.request(MetadataRequest(topics=[]), MetadataResponse, 9)
    return {b.node_id for b in response.brokers}


@dataclass
class Watch:
    """Metadata through each broker in turn every 100 ms: (time, through, listed) when a live broker is
    missing from the answer."""

    gaps: list[tuple[float, int, frozenset[int]]] = field(default_factory=list)
    polls: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


def _watch(cluster: ProcessCluster, watch: Watch) -> None:
    brokers = sorted(cluster.brokers)
    conns: dict[int, BrokerConnection] = {}
    i = 0
    while not watch.stop.is_set():
        through = brokers[i % len(brokers)]
        i += 1
        try:
            if through not in conns:
                conns[through] = BrokerConnection.to(cluster.nodes[through].address, timeout_s=5.0)
            listed = _listed_brokers(conns[through])
        except BrokerConnectionError:
            stale = conns.pop(through, None)
            if stale is not None:
                stale.close()
            time.sleep(WATCH_POLL_S)
            continue
        watch.polls += 1
        if not set(brokers) <= listed:
            watch.gaps.append((time.monotonic(), through, frozenset(listed)))
        time.sleep(WATCH_POLL_S)
    for conn in conns.values():
        conn.close()


def _new_leader(cluster: ProcessCluster, killed: int, timeout_s: float = 30.0) -> tuple[float, int]:
    """Seconds until a survivor reports a live leader other than ``killed`` (as bench.election)."""
    started = time.monotonic()
    while time.monotonic() < started + timeout_s:
        for node in cluster.controllers.values():
            if not node.alive:
                continue
            try:
                partition = cluster.describe_quorum(node.node_id)
            except Exception:  # no leader yet, or this one is a follower
                continue
            if partition.leader_id not in (-1, killed):
                return time.monotonic() - started, partition.leader_id
        time.sleep(0.01)
    raise TimeoutError(f"no new controller leader within {timeout_s} s after killing {killed}")


@dataclass
class Cycle:
    """One kill -9 of the controller leader and its restart (monotonic times)."""

    killed: int
    new_leader: int
    started: float
    kill_at: float
    elected_s: float
    restart_at: float
    rejoined_s: float
    end: float


@dataclass
class ProducerIdRun:
    steady: list[Call]
    failover: list[Call]
    warmup: list[Call]
    cycles: list[Cycle]
    connection_errors: collections.Counter[str]
    watch: Watch


def producer_ids(
    cluster: ProcessCluster, steady_s: float, kills: int, before_kill_s: float, down_s: float, after_s: float
) -> ProducerIdRun:
    watch = Watch()
    watcher = threading.Thread(target=_watch, args=(cluster, watch), name="metadata-watch", daemon=True)
    watcher.start()
    load = start_load(cluster)
    cycles = []
    try:
        time.sleep(1.0)  # warm-up: connections, the brokers' first blocks
        steady_from = time.monotonic()
        time.sleep(steady_s)
        failover_from = time.monotonic()
        print(f"steady: {_count_from(load, steady_from, failover_from)} ids in {steady_s:.0f} s", flush=True)
        for _ in range(kills):
            started = time.monotonic()
            time.sleep(before_kill_s)
            killed = cluster.wait_for_leader().leader_id
            kill_at = time.monotonic()
            cluster.kill(killed)
            elected_s, new_leader = _new_leader(cluster, killed)
            time.sleep(max(0.0, kill_at + down_s - time.monotonic()))
            restart_at = time.monotonic()
            cluster.start(killed)
            cluster.wait_for_leader(timeout_s=60)
            rejoined_s = time.monotonic() - restart_at
            time.sleep(max(0.0, restart_at + after_s - time.monotonic()))
            cycle = Cycle(
                killed, new_leader, started, kill_at, elected_s, restart_at, rejoined_s, time.monotonic()
            )
            cycles.append(cycle)
            gaps = ", ".join(f"{b} {g * 1000:.0f} ms" for b, (g, _) in _longest_gaps(load, cycle).items())
            wall = time.time() - (time.monotonic() - kill_at)
            print(
                f"killed controller {killed} at {time.strftime('%H:%M:%S', time.localtime(wall))},"
                f"{int(wall * 1000) % 1000:03d}: {new_leader} leads after {elected_s * 1000:.0f} ms; "
                f"restarted, caught up after {rejoined_s * 1000:.0f} ms; longest time without an id: {gaps}",
                flush=True,
            )
        end = time.monotonic()
    finally:
        stop_load(load)
        watch.stop.set()
        watcher.join(timeout=30)
    with load.lock:
        calls = list(load.calls)
    return ProducerIdRun(
        steady=[c for c in calls if steady_from <= c.started < failover_from],
        failover=[c for c in calls if failover_from <= c.started < end],
        warmup=[c for c in calls if c.started < steady_from or c.started >= end],
        cycles=cycles,
        connection_errors=load.connection_errors,
        watch=watch,
    )


def _count_from(load: Load, start: float, end: float) -> int:
    with load.lock:
        return sum(1 for c in load.calls if start <= c.started < end and c.producer_id >= 0)


def _longest_gaps(load: Load | list[Call], cycle: Cycle) -> dict[int, tuple[float, float]]:
    """Per broker, the longest time between two ids handed out during ``cycle``: (seconds, when it began
    in seconds from the kill)."""
    if isinstance(load, Load):
        with load.lock:
            calls = list(load.calls)
    else:
        calls = load
    out = {}
    for broker in sorted({c.broker for c in calls}):
        done = sorted(
            c.started + c.latency_s
            for c in calls
            if c.broker == broker
            and c.producer_id >= 0
            and cycle.started <= c.started + c.latency_s <= cycle.end
        )
        gaps = [(b - a, a - cycle.kill_at) for a, b in zip(done, done[1:], strict=False)]
        if gaps:
            out[broker] = max(gaps)
    return out


@dataclass
class Fencing:
    how: str
    victim: int
    through: int
    absent_s: float  # signal -> not listed in Metadata
    exited_s: float  # signal -> process gone
    unfenced_s: float  # restart -> listed again


def _poll_until(conn: BrokerConnection, victim: int, present: bool, timeout_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() < started + timeout_s:
        if (victim in _listed_brokers(conn)) == present:
            return time.monotonic()
        time.sleep(METADATA_POLL_S)
    state = "listed" if present else "gone from Metadata"
    raise TimeoutError(f"broker {victim} not {state} within {timeout_s} s")


def fencing(cluster: ProcessCluster, reps: int) -> list[Fencing]:
    brokers = sorted(cluster.brokers)
    rows = []
    for how in ("kill -9", "SIGTERM"):
        for rep in range(reps):
            victim = brokers[rep % len(brokers)]
            through = brokers[(rep + 1) % len(brokers)]
            process = cluster.nodes[victim].process
            assert process is not None
            with BrokerConnection.to(cluster.nodes[through].address, timeout_s=5.0) as conn:
                _poll_until(conn, victim, True, 30)
                time.sleep(HEARTBEAT_INTERVAL_MS / 1000 * 2)  # a few heartbeats since the last change
                signalled = time.monotonic()
                if how == "kill -9":
                    cluster.kill(victim)
                else:
                    process.terminate()
                absent = exited = None
                while absent is None or exited is None:
                    if time.monotonic() > signalled + 60:
                        raise TimeoutError(
                            f"broker {victim}: listed={absent is None}, exited={exited is not None}"
                        )
                    if exited is None and process.poll() is not None:
                        exited = time.monotonic()
                    if absent is None and victim not in _listed_brokers(conn):
                        absent = time.monotonic()
                    time.sleep(METADATA_POLL_S)
                restarted = time.monotonic()
                cluster.start(victim)
                unfenced = _poll_until(conn, victim, True, 60)
            row = Fencing(how, victim, through, absent - signalled, exited - signalled, unfenced - restarted)
            rows.append(row)
            print(
                f"{how} broker {victim}: gone from Metadata (via {through}) after {row.absent_s * 1000:.0f} ms, "
                f"process exited after {row.exited_s * 1000:.0f} ms; restart -> unfenced "
                f"{row.unfenced_s * 1000:.0f} ms",
                flush=True,
            )
    cluster.wait_for_brokers()
    return rows


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _latency_row(name: str, calls: list[Call], seconds: float | None) -> str:
    ok = [c for c in calls if c.producer_id >= 0]
    ms = [c.latency_s * 1000 for c in ok]
    failed = len(calls) - len(ok)
    retried = sum(1 for c in ok if c.attempts > 1)
    rate = f"{len(ok) / seconds:.0f}" if seconds else ""
    blocks = len({c.producer_id // BLOCK_SIZE for c in ok})
    if not ms:
        return f"| {name} | 0 | {rate} | | | | | {retried} | {failed} | {blocks} |"
    return (
        f"| {name} | {len(ok)} | {rate} | {statistics.median(ms):.2f} | {_pct(ms, 0.99):.2f} | "
        f"{_pct(ms, 0.999):.1f} | {max(ms):.0f} | {retried} | {failed} | {blocks} |"
    )


def _distinct(run: ProducerIdRun) -> tuple[int, int, list[int], list[int]]:
    """(ids, distinct ids, a few duplicated ids, blocks whose ids came from more than one broker)."""
    calls = [c for c in run.warmup + run.steady + run.failover if c.producer_id >= 0]
    counts = collections.Counter(c.producer_id for c in calls)
    owners: dict[int, set[int]] = collections.defaultdict(set)
    for c in calls:
        owners[c.producer_id // BLOCK_SIZE].add(c.broker)
    shared = sorted(b for b, o in owners.items() if len(o) > 1)
    return len(calls), len(counts), sorted(i for i, n in counts.items() if n > 1)[:10], shared[:10]


def _missing(run: ProducerIdRun, cycle: Cycle) -> str:
    """The brokers some Metadata answer left out during ``cycle``, with when (ms from the kill)."""
    seen: dict[int, list[float]] = collections.defaultdict(list)
    brokers = set(cycle_brokers(run))
    for at, _through, listed in run.watch.gaps:
        if cycle.started <= at <= cycle.end:
            for broker in sorted(brokers - listed):
                seen[broker].append((at - cycle.kill_at) * 1000)
    if not seen:
        return "none"
    return ", ".join(
        f"{b} ({len(t)}× {min(t):+.0f}…{max(t):+.0f})" if len(t) > 1 else f"{b} ({t[0]:+.0f})"
        for b, t in sorted(seen.items())
    )


def cycle_brokers(run: ProducerIdRun) -> list[int]:
    return sorted({c.broker for c in run.steady + run.failover})


def machine_note() -> str:
    load1, load5, _ = os.getloadavg()
    return (
        f"Machine: {os.cpu_count()} cores ({platform.machine()}, Linux {platform.release()}), Python "
        f"{platform.python_version()}; load average {load1:.2f} / {load5:.2f} (1 / 5 min) at the end of the "
        "run. The six server processes and the client threads (one Python process) share these cores."
    )


def render(run: ProducerIdRun, fences: list[Fencing], args: argparse.Namespace) -> str:
    total, distinct, dups, shared = _distinct(run)
    cycles = run.cycles
    windows: dict[str, list[Call]] = {"before": [], "down": [], "after": []}
    for c in run.failover:
        if any(y.kill_at <= c.started < y.restart_at for y in cycles):
            windows["down"].append(c)
        elif any(y.restart_at <= c.started < y.end for y in cycles):
            windows["after"].append(c)
        else:
            windows["before"].append(c)
    before, down, after = windows["before"], windows["down"], windows["after"]
    down_s = sum(y.restart_at - y.kill_at for y in cycles)
    after_s = sum(y.end - y.restart_at for y in cycles)
    failover_s = sum(y.end - y.started for y in cycles)
    brokers = cycle_brokers(run)
    errors = collections.Counter(e for c in run.steady + run.failover for e in c.errors)
    lines = [
        "# Brokers and the controller quorum (3 controllers + 3 brokers, separate processes on 127.0.0.1)",
        "",
        f"`python -m bench.cluster`: broker.session.timeout.ms={SESSION_TIMEOUT_MS}, "
        f"broker.heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS},",
        "everything else at Kafka's defaults (controller.quorum.fetch.timeout.ms 2000, election timeout 1000,",
        "request timeout 2000).",
        "",
        machine_note(),
        "",
        "## InitProducerId while the controller leader is killed",
        "",
        f"{CLIENTS_PER_BROKER * len(brokers)} client threads ({CLIENTS_PER_BROKER} per broker, one connection "
        "each) loop flat out on raw InitProducerId v4 (no",
        f"transactional id), retrying a retriable error after {RETRY_BACKOFF_S * 1000:.0f} ms; a call's latency "
        "runs from its first attempt to the answer with",
        f"an id. A broker hands out ids from blocks of {BLOCK_SIZE} it gets from the active controller "
        "(AllocateProducerIds, asked for",
        "at 90% of the current block; `blocks` counts the blocks a row's ids came from). Steady: "
        f"{args.steady_s:.0f} s, no failure.",
        f"Failover: {len(cycles)} times, the controller leader is killed (kill -9) {args.before_kill_s:.0f} s in, "
        f"restarted {args.down_s:.0f} s later, and the",
        f"clients go on for {args.after_s:.0f} s more (rows below pool the cycles).",
        "",
        "| phase | ids | ids/s | p50 ms | p99 ms | p99.9 ms | max ms | calls retried | failed | blocks |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        _latency_row("steady", run.steady, args.steady_s),
        _latency_row("failover (whole phase)", run.failover, failover_s),
        _latency_row("&nbsp;&nbsp;before a kill", before, failover_s - down_s - after_s),
        _latency_row("&nbsp;&nbsp;kill -9 → restart", down, down_s),
        _latency_row("&nbsp;&nbsp;after the restart", after, after_s),
        "",
        f"Ids handed out (warm-up included): {total}, distinct: {distinct}"
        + (" — all distinct." if total == distinct else f" — DUPLICATES, e.g. {dups}.")
        + (f" Blocks whose ids came from more than one broker: {shared}." if shared else ""),
        "Errors the clients got (each retried): "
        + (", ".join(f"{_error_name(e)} × {n}" for e, n in sorted(errors.items())) or "none")
        + (
            "; connection errors: " + ", ".join(f"{m} × {n}" for m, n in run.connection_errors.items())
            if run.connection_errors
            else ""
        )
        + ".",
        "",
        "Each kill: the new leader as DescribeQuorum names it; per broker, the longest time without an id "
        "(ms, and when it",
        "began, ms from the kill); brokers missing from Metadata, polled through the brokers in turn every "
        f"{WATCH_POLL_S * 1000:.0f} ms",
        "(answers × first…last, ms from the kill); the restarted controller caught up (ms from its restart).",
        "",
        "| # | killed | new leader | elected ms | "
        + " | ".join(f"{b}: no id for ms" for b in brokers)
        + " | fenced meanwhile | restart → caught up ms |",
        "|---:|---:|---:|---:|" + "---:|" * len(brokers) + "---|---:|",
    ]
    for i, y in enumerate(cycles):
        gaps = _longest_gaps(run.failover, y)
        cells = [f"{gaps[b][0] * 1000:.0f} ({gaps[b][1] * 1000:+.0f})" if b in gaps else "" for b in brokers]
        lines.append(
            f"| {i + 1} | {y.killed} | {y.new_leader} | {y.elected_s * 1000:.0f} | "
            + " | ".join(cells)
            + f" | {_missing(run, y)} | {y.rejoined_s * 1000:.0f} |"
        )
    steady_gaps = [g for g in run.watch.gaps if not any(y.started <= g[0] <= y.end for y in cycles)]
    lines += [
        "",
        f"Metadata answers outside the kills that missed a broker: {len(steady_gaps)} "
        f"(of {run.watch.polls} answers in all).",
        "",
        "## Broker kill -9 / SIGTERM to fencing",
        "",
        f"Metadata polled through another broker every {METADATA_POLL_S * 1000:.0f} ms from the signal until "
        "the broker is no longer listed; then it",
        "is restarted (a new process) and polled until it is listed again (registered and unfenced).",
        "",
        "| how | stops | signal → fenced median ms | min ms | max ms | process exit median ms | "
        "restart → unfenced median ms | max ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for how in ("kill -9", "SIGTERM"):
        rows = [f for f in fences if f.how == how]
        if rows:
            absent = [f.absent_s * 1000 for f in rows]
            exited = [f.exited_s * 1000 for f in rows]
            unfenced = [f.unfenced_s * 1000 for f in rows]
            lines.append(
                f"| {how} | {len(rows)} | {statistics.median(absent):.0f} | {min(absent):.0f} | "
                f"{max(absent):.0f} | {statistics.median(exited):.0f} | {statistics.median(unfenced):.0f} | "
                f"{max(unfenced):.0f} |"
            )
    lines += [
        "",
        "| # | how | broker | via | fenced ms | exited ms | restart → unfenced ms |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {i + 1} | {f.how} | {f.victim} | {f.through} | {f.absent_s * 1000:.0f} | "
        f"{f.exited_s * 1000:.0f} | {f.unfenced_s * 1000:.0f} |"
        for i, f in enumerate(fences)
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steady-s", type=float, default=8.0)
    parser.add_argument("--controller-kills", type=int, default=3)
    parser.add_argument("--before-kill-s", type=float, default=2.0)
    parser.add_argument("--down-s", type=float, default=6.0, help="controller kill -9 to its restart")
    parser.add_argument("--after-s", type=float, default=4.0, help="clients running after the restart")
    parser.add_argument("--fence-reps", type=int, default=4, help="broker stops of each kind")
    parser.add_argument("--directory", help="keep the nodes' data and logs here (default: a temp dir)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        directory = args.directory or stack.enter_context(
            tempfile.TemporaryDirectory(prefix="pykraft-cluster-bench-")
        )
        with running_cluster(controllers=3, brokers=3, directory=directory, overrides=OVERRIDES) as cluster:
            try:
                run = producer_ids(
                    cluster,
                    args.steady_s,
                    args.controller_kills,
                    args.before_kill_s,
                    args.down_s,
                    args.after_s,
                )
                fences = fencing(cluster, args.fence_reps)
            except BaseException:
                print(cluster.logs(), flush=True)
                raise
    table = render(run, fences, args)
    print(table)
    RESULTS.mkdir(exist_ok=True)
    write_results(RESULTS / "cluster.md", table)


if __name__ == "__main__":
    main()
