"""`python -m bench.compression`: what topic compression.type costs on produce (issue 27 item 4).

Two tables, medians over rounds:

1. The leader's append alone, in CPU time (``ReplicaManager.append`` over real segment files in a
   temp dir, no network): the same batches of JSON-like records, pre-built in the producer's codec, appended to a
   topic whose compression.type matches them (the hot path: the bytes are appended as they came) or
   names another codec (each batch inflated and compressed again, as Kafka's LogValidator does). The
   matching rows are the check that the hot path kept its speed: ``producer`` is today's path.
2. End to end: an idempotent confluent-kafka producer (acks=all) against a pykraft process, messages
   per second into topics of each kind.

    python -m bench.compression [--rounds 12] [--batches 800] [--messages 100000] [--produce-rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.__main__ import pykraft_peer
from bench.results_file import write_results
from pykraft.broker.replica_manager import ReplicaManager, topic_log_config
from pykraft.io.log_dirs import FileLogOpener
from pykraft.log.partition_log import LogConfig
from pykraft.protocol import compression
from pykraft.protocol.records import Record, build_batch, in_codec, read_batch_header, rewrite_batch

RESULTS = Path(__file__).resolve().parent / "results"
RECORDS_PER_BATCH = 100
# (producer codec, topic compression.type): matching pairs first, then recompressions.
APPEND_CASES = [
    ("none", "producer"),
    ("none", "uncompressed"),
    ("zstd", "producer"),
    ("zstd", "zstd"),
    ("lz4", "lz4"),
    ("none", "zstd"),
    ("none", "lz4"),
    ("none", "snappy"),
    ("none", "gzip"),
    ("zstd", "uncompressed"),
    ("lz4", "zstd"),
    ("gzip", "zstd"),
]
PRODUCE_CASES = [
    ("zstd", "producer"),
    ("zstd", "zstd"),
    ("none", "producer"),
    ("none", "zstd"),
    ("lz4", "gzip"),
]
CODEC_IDS = {"none": compression.NONE, "gzip": compression.GZIP, "snappy": compression.SNAPPY}
CODEC_IDS |= {"lz4": compression.LZ4, "zstd": compression.ZSTD}


def json_value(rng: random.Random, i: int) -> bytes:
    """A record value that compresses as application data does (~3-4x), about 200 bytes."""
    return json.dumps(
        {
            "order_id": 1_000_000 + i,
            "customer": f"customer-{rng.randrange(5000)}",
            "status": rng.choice(["new", "paid", "shipped", "delivered", "returned"]),
            "amount": round(rng.uniform(1, 500), 2),
            "items": [{"sku": f"SKU-{rng.randrange(900)}", "qty": rng.randrange(1, 5)} for _ in range(2)],
            "note": "".join(rng.choice("abcdef ") for _ in range(20)),
        }
    ).encode()


def batches_in(codec: str, count: int, seed: int = 1) -> tuple[list[bytes], int]:
    """``count`` batches of RECORDS_PER_BATCH records in ``codec``, and their uncompressed bytes."""
    rng = random.Random(seed)
    out: list[bytes] = []
    raw_bytes = 0
    for b in range(count):
        records = [Record(None, json_value(rng, b * RECORDS_PER_BATCH + i)) for i in range(RECORDS_PER_BATCH)]
        plain = build_batch(records, timestamp_ms=int(time.time() * 1000))
        raw_bytes += len(plain)
        header = read_batch_header(plain)
        codec_id = CODEC_IDS[codec]
        out.append(
            bytes(plain)
            if not codec_id
            else bytes(rewrite_batch(header._replace(attributes=codec_id), records))
        )
    return out, raw_bytes


def append_round(batches: list[bytes], topic_type: str) -> tuple[float, int]:
    """CPU seconds to append every batch to a fresh partition of a topic with ``topic_type``, and the
    bytes stored."""
    with tempfile.TemporaryDirectory(prefix="pykraft-bench-compression-") as directory:
        base = LogConfig(retention_ms=-1)
        replicas = ReplicaManager(FileLogOpener([directory]), base, producer_id_expiration_ms=1 << 40)
        replicas.topic_log_config = lambda _t: topic_log_config(base, {"compression.type": topic_type})
        now_ms = int(time.time() * 1000)
        part = replicas.ensure_partition("t", 0, now_ms)
        views = [memoryview(bytearray(b)) for b in batches]  # writable, as a request buffer is
        # CPU seconds of this process (user + system, the segment writes included), not wall time: the
        # machine is shared, and a wall clock counts the time other processes held the cores.
        started = time.process_time()
        for view in views:
            result = replicas.append(part, view, now_ms)
            assert not result.error_code, result
        elapsed = time.process_time() - started
        stored_bytes = sum(segment.size_bytes for segment in part.log.segments)
        replicas.close_all()
        return elapsed, stored_bytes


def matching_check_ns(batches: list[bytes]) -> float:
    """CPU nanoseconds per batch of the one thing the hot path gained: finding that a batch is already
    in the topic's codec (``in_codec``)."""
    headers = [[read_batch_header(b)] for b in batches]
    best_ns = float("inf")
    for _ in range(5):  # the best of five: the machine is shared
        started = time.process_time_ns()
        for header in headers:
            assert in_codec(header, compression.ZSTD)
        best_ns = min(best_ns, (time.process_time_ns() - started) / len(batches))
    return best_ns


def produce_round(bootstrap: str, topic: str, codec: str, messages: int) -> float:
    """Messages per second from one idempotent confluent-kafka producer (acks=all) in ``codec``."""
    rng = random.Random(7)
    values = [json_value(rng, i) for i in range(1000)]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1000000,
            "compression.type": codec,
        }
    )
    producer.produce(topic, values[0])
    producer.flush(30)
    started = time.monotonic()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, values[i % 1000])
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(120)
    elapsed = time.monotonic() - started
    if left:
        raise RuntimeError(f"{left} messages not flushed")
    return messages / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--batches", type=int, default=800)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--produce-rounds", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "compression.md"))
    args = parser.parse_args()
    load_before = os.getloadavg()[0]

    built = {codec: batches_in(codec, args.batches) for codec in {c for c, _ in APPEND_CASES}}
    raw_mb = built["none"][1] / 1e6
    check_ns = matching_check_ns(built["zstd"][0])
    append_round(built["none"][0], "producer")  # warm-up: imports, page cache, allocator
    append_s: dict[tuple[str, str], list[float]] = {case: [] for case in APPEND_CASES}
    stored_mb: dict[tuple[str, str], float] = {}
    for index in range(args.rounds):
        # Interleaved, each round starting at another case, so drift hits every case alike.
        shift = index % len(APPEND_CASES)
        for codec, topic_type in APPEND_CASES[shift:] + APPEND_CASES[:shift]:
            seconds, stored_bytes = append_round(built[codec][0], topic_type)
            append_s[(codec, topic_type)].append(seconds)
            stored_mb[(codec, topic_type)] = stored_bytes / 1e6
        print(f"append round {index + 1}/{args.rounds} done", flush=True)

    peer = pykraft_peer()
    peer.start()
    produced: dict[tuple[str, str], list[float]] = {case: [] for case in PRODUCE_CASES}
    try:
        admin = AdminClient({"bootstrap.servers": peer.bootstrap})
        for index in range(args.produce_rounds):
            for codec, topic_type in PRODUCE_CASES:
                topic = f"bench-{codec}-{topic_type}-{index}"
                new = NewTopic(topic, 1, 1, config={"compression.type": topic_type})
                admin.create_topics([new])[topic].result(30)
                produced[(codec, topic_type)].append(
                    produce_round(peer.bootstrap, topic, codec, args.messages)
                )
            print(f"produce round {index + 1}/{args.produce_rounds} done", flush=True)
    finally:
        peer.stop()

    baseline = {
        codec: statistics.median(append_s[(codec, "producer")])
        for codec, topic_type in APPEND_CASES
        if topic_type == "producer"
    }
    lines = [
        f"# Topic compression.type on produce (medians of {args.rounds} append rounds, "
        f"{args.produce_rounds} produce rounds)",
        "",
        f"## The leader's append: {args.batches:,} batches of {RECORDS_PER_BATCH} JSON records "
        f"({raw_mb:.1f} MB uncompressed), real segment files",
        "",
        "| producer codec | topic compression.type | path | CPU us per batch (min..max) | uncompressed MB/s "
        "| stored MB | vs producer (same codec) |",
        "|---|---|---|---|---|---|---|",
    ]
    for codec, topic_type in APPEND_CASES:
        rounds = append_s[(codec, topic_type)]
        seconds = statistics.median(rounds)
        spread = f"{min(rounds) * 1e6 / args.batches:.0f}..{max(rounds) * 1e6 / args.batches:.0f}"
        matching = topic_type == "producer" or CODEC_IDS[codec] == compression.TOPIC_CODECS[topic_type]
        ratio = f"{seconds / baseline[codec]:.2f}x" if codec in baseline else "-"
        lines.append(
            f"| {codec} | {topic_type} | {'as sent' if matching else 'recompressed'} "
            f"| {seconds * 1e6 / args.batches:.0f} ({spread}) | {raw_mb / seconds:.0f} | {stored_mb[(codec, topic_type)]:.2f} "
            f"| {ratio} |"
        )
    lines += [
        "",
        f"Load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after (2 cores, shared).",
        "",
        f"What the hot path gained when the codecs match: {check_ns:.0f} ns per batch (finding every batch "
        "already in the topic's codec); the bytes are then appended as they came.",
        "",
        f"## End to end: {args.messages:,} messages (~200 B JSON) from an idempotent confluent-kafka "
        "producer, acks=all, one partition",
        "",
        "| producer codec | topic compression.type | messages/s |",
        "|---|---|---|",
    ]
    for codec, topic_type in PRODUCE_CASES:
        lines.append(f"| {codec} | {topic_type} | {statistics.median(produced[(codec, topic_type)]):,.0f} |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    write_results(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
