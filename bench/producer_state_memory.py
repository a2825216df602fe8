"""Bytes per producer held by one partition's producer state (KIP-758's reason to exist).

    .venv/bin/python bench/producer_state_memory.py [--counts 10000,100000,1000000] [--retained 1,5]

Each (retained.batches, producers) cell runs in a fresh subprocess: it creates a ProducerStateManager,
appends one batch per producer (plus, for retained.batches > 1, enough further batches that every
producer holds all of them), and reports

* tracemalloc: bytes Python allocated for the state (after gc), i.e. what the manager holds;
* RSS delta: the process's resident set growth over the same work (includes allocator slack).

Producer ids are consecutive from 1,000,000 as KIP-730 blocks hand them out. Prints a table; never a
timed assertion.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(count: int, retained: int) -> dict[str, float]:
    from pykraft.log.producer_state import ProducerStateManager
    from pykraft.protocol.records import Record, build_batch, read_batch_header

    template = read_batch_header(
        build_batch(
            [Record(None, b"v")],
            timestamp_ms=1_700_000_000_000,
            producer_id=1,
            producer_epoch=0,
            base_sequence=0,
        )
    )
    gc.collect()
    rss_before = _rss_bytes()
    tracemalloc.start()
    start = time.perf_counter()
    manager = ProducerStateManager(retained_batches=retained)
    offset = 0
    for round_ in range(retained):
        for i in range(count):
            manager.on_append(
                [template._replace(producer_id=1_000_000 + i, base_offset=offset, base_sequence=round_)],
                now_ms=offset,
            )
            offset += 1
    build_s = time.perf_counter() - start
    gc.collect()
    traced, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = _rss_bytes()
    assert len(manager) == count
    # Timing without tracemalloc, which slows every allocation: a second manager, same appends.
    timed = ProducerStateManager(retained_batches=retained)
    headers = [template._replace(producer_id=1_000_000 + i, base_offset=i) for i in range(count)]
    start = time.perf_counter()
    for header in headers:
        timed.on_append([header], now_ms=0)
    build_s = time.perf_counter() - start
    del timed, headers
    # Lookups on the hot path: one check per produce.
    probe = [template._replace(producer_id=1_000_000 + i, base_sequence=retained) for i in range(0, count, 7)]
    start = time.perf_counter()
    for header in probe:
        manager.check_append([header])
    check_us = (time.perf_counter() - start) / len(probe) * 1e6
    start = time.perf_counter()
    # The expiration timer when half the producers are due: one scan of the column plus the removals.
    removed = manager.remove_expired(offset - count // 2 - 1 + manager.producer_id_expiration_ms)
    assert len(removed) == count // 2, len(removed)
    expire_scan_ms = (time.perf_counter() - start) * 1e3
    return {
        "traced_b_per_entry": traced / count,
        "rss_b_per_entry": (rss_after - rss_before) / count,
        "build_us_per_append": build_s / count * 1e6,
        "check_us": check_us,
        "expire_scan_ms": expire_scan_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="10000,100000,1000000")
    parser.add_argument("--retained", default="1,5")
    parser.add_argument("--one", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], args.one[1])))
        return
    print(
        f"{'retained.batches':>16} {'producers':>10} {'tracemalloc B/entry':>20} {'RSS delta B/entry':>18} "
        f"{'insert us':>10} {'check us':>9} {'expire half ms':>15}"
    )
    for retained in (int(r) for r in args.retained.split(",")):
        for count in (int(c) for c in args.counts.split(",")):
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(count), str(retained)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            r = json.loads(out)
            print(
                f"{retained:>16} {count:>10} {r['traced_b_per_entry']:>20.1f} {r['rss_b_per_entry']:>18.1f} "
                f"{r['build_us_per_append']:>10.2f} {r['check_us']:>9.2f} {r['expire_scan_ms']:>15.1f}"
            )


if __name__ == "__main__":
    main()
