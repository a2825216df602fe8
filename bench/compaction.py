"""`python -m bench.compaction`: what log compaction costs per MB cleaned (issue 17).

A partition of keyed updates on real files (FileSegmentStore in a temp dir, 1 MiB segments) is cleaned
by one pass of ``pykraft.log.cleaner.clean``, as the node's cleaner task runs it. Measured in the same
run, per round: the pass (offset map + rewrite), and the floor it is compared with -- the same
segments read and written back whole through the same store (what any copying cleaner must pay).
Also: the longest the pass held the caller between two yields (the node hands the event loop back at
those points) and the key map's measured bytes per key.

    python -m bench.compaction [--rounds 3] [--records 300000] [--keys 10000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from bench.results_file import write_results
from pykraft.io.file_store import FileSegmentStore
from pykraft.log.cleaner import CleanerConfig, CleanerStats, clean
from pykraft.log.partition_log import LogConfig, PartitionLog
from pykraft.protocol.records import Record, build_batch, validate_batches

RESULTS = Path(__file__).resolve().parent / "results"
CONFIG = LogConfig(segment_bytes=1 << 20, cleanup_policy_compact=True, cleanup_policy_delete=False)


def build_log(directory: str, records: int, keys: int, seed: int) -> PartitionLog:
    rng = random.Random(seed)
    log = PartitionLog.open(FileSegmentStore(directory), CONFIG)
    for start in range(0, records, 500):
        batch = build_batch(
            [
                Record(b"key-%d" % rng.randrange(keys), b"value-%d-" % i + bytes(rng.randrange(60)))
                for i in range(start, min(start + 500, records))
            ],
            timestamp_ms=1_000_000,
        )
        log.append(batch, validate_batches(batch))
    log.roll()
    log.flush()
    return log


def copy_floor(log: PartitionLog, directory: str) -> float:
    """Seconds to read every non-active segment and write it to a new file, fsynced."""
    store = FileSegmentStore(directory)
    started = time.perf_counter()
    for segment in log.segments[:-1]:
        store.create_cleaned(segment.base_offset)
        for _, data in log.segment_batches(segment.base_offset, 524288):
            store.append_cleaned(segment.base_offset, data)
        store.write_cleaned_index(segment.base_offset, b"")
        store.seal_cleaned(segment.base_offset)
    elapsed = time.perf_counter() - started
    for segment in log.segments[:-1]:
        store.discard_cleaning(segment.base_offset)
    return elapsed


def one_round(records: int, keys: int, seed: int, *, trace_memory: bool = False) -> dict[str, float]:
    """One pass timed; with ``trace_memory`` (slow: tracemalloc hooks every allocation) only the
    peak traced memory is worth reading."""
    with tempfile.TemporaryDirectory(prefix="pykraft-bench-compaction-") as directory:
        log = build_log(directory + "/p", records, keys, seed)
        dirty_mb = sum(s.size_bytes for s in log.segments[:-1]) / 1e6
        floor_s = copy_floor(log, directory + "/copy")
        stats = CleanerStats()
        longest_step_s = 0.0
        if trace_memory:
            tracemalloc.start()
        started = last = time.perf_counter()
        for _ in clean(
            log,
            2_000_000,
            config=CleanerConfig(),
            first_unstable_offset=None,
            aborted=[],
            producer_last_offsets={},
            stats=stats,
        ):
            now = time.perf_counter()
            longest_step_s = max(longest_step_s, now - last)
            last = now
        elapsed = time.perf_counter() - started
        peak_bytes = 0
        if trace_memory:
            _, peak_bytes = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        log.close()
        return {
            "dirty_mb": dirty_mb,
            "clean_s": elapsed,
            "floor_s": floor_s,
            "ms_per_mb": elapsed * 1000 / dirty_mb,
            "floor_ms_per_mb": floor_s * 1000 / dirty_mb,
            "records_per_s": stats.records_read / elapsed,
            "written_mb": stats.bytes_written / 1e6,
            "longest_step_ms": longest_step_s * 1000,
            "peak_bytes_per_key": peak_bytes / keys,
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--out", default=str(RESULTS / "compaction.md"))
    args = parser.parse_args()
    rounds = []
    for index in range(args.rounds):
        rounds.append(one_round(args.records, args.keys, seed=index))
        print(f"round {index + 1}/{args.rounds}: {rounds[-1]['ms_per_mb']:.0f} ms/MB", flush=True)
    peak_bytes_per_key = one_round(args.records, args.keys, seed=0, trace_memory=True)["peak_bytes_per_key"]

    def median(name: str) -> float:
        return statistics.median(r[name] for r in rounds)

    lines = [
        f"# Log compaction cost ({args.records:,} updates over {args.keys:,} keys, 1 MiB segments, "
        f"median of {args.rounds} rounds)",
        "",
        "| figure | value |",
        "|---|---|",
        f"| dirty MB cleaned per pass | {median('dirty_mb'):.1f} |",
        f"| cleaner ms per MB (map + rewrite + swap) | {median('ms_per_mb'):.0f} |",
        f"| floor: read + write + fsync, ms per MB | {median('floor_ms_per_mb'):.1f} |",
        f"| cleaner / floor | {median('ms_per_mb') / median('floor_ms_per_mb'):.1f}x |",
        f"| records per second | {median('records_per_s'):,.0f} |",
        f"| MB left after the pass | {median('written_mb'):.2f} |",
        f"| longest hold between yields, ms | {median('longest_step_ms'):.2f} |",
        f"| peak traced bytes per key (map and buffers; a separate traced pass) | {peak_bytes_per_key:.0f} |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    write_results(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
