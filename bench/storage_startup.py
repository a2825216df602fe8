"""KIP-1262 startup checks: what reading/writing meta.properties and finding the cluster id cost (a table).

* first start: write V2 meta.properties into 3 dirs (temp, fsync, rename, fsync dir each);
* restart: read and check them (no writes) and find the ClusterIdRecord in the metadata log;
* worst case: a metadata log of ``--records`` records with no ClusterIdRecord (a pre-KIP-1262 log whose
  meta.properties carries a formatted id), scanned whole, next to reading the same bytes raw.

    python -m bench.storage_startup [--records 1000000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

from pykraft.io.meta_properties_files import prepare_log_dirs, read_logged_cluster_id, write_meta_properties
from pykraft.metadata.records import ApiMessageAndVersion, NoOpRecord, encode_metadata_record
from pykraft.raft.log import build_leader_batch
from pykraft.storage.meta_properties import MetaProperties, MetaPropertiesVersion


def _median_ms(fn, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="pykraft-bench-")
    try:
        rows: list[tuple[str, float]] = []

        def first_start() -> None:
            base = tempfile.mkdtemp(dir=root)
            prepare_log_dirs([f"{base}/a", f"{base}/b"], f"{base}/c", 1, random.Random())

        rows.append(("first start: write 3 meta.properties V2", _median_ms(first_start)))

        data = os.path.join(root, "data")
        part = os.path.join(data, "__cluster_metadata-0")
        os.makedirs(part)
        write_meta_properties(data, MetaProperties(MetaPropertiesVersion.V1, "formatted", 1))
        value = encode_metadata_record(ApiMessageAndVersion.of(NoOpRecord()))
        segment = os.path.join(part, "00000000000000000000.log")
        with open(segment, "wb") as fh:
            for base_offset in range(0, args.records, 50):
                fh.write(
                    build_leader_batch(
                        [value] * 50, base_offset=base_offset, epoch=1, now_ms=0, is_control=False
                    )
                )
        size_mb = os.path.getsize(segment) / 1e6

        def raw_read() -> None:
            with open(segment, "rb") as fh:
                while fh.read(1 << 20):
                    pass

        rows.append(
            (
                "restart: check 1 dir + scan the log",
                _median_ms(lambda: prepare_log_dirs([data], data, 1, random.Random())),
            )
        )
        scan_ms = _median_ms(lambda: read_logged_cluster_id(data))
        raw_ms = _median_ms(raw_read)
        rows.append((f"scan {args.records} records / {size_mb:.1f} MB, no ClusterIdRecord", scan_ms))
        rows.append((f"read the same {size_mb:.1f} MB raw", raw_ms))
        print("| step | median ms |")
        print("|---|---|")
        for name, ms in rows:
            print(f"| {name} | {ms:.2f} |")
        print(f"\nscan / raw read: {scan_ms / raw_ms:.1f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
