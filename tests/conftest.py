from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from hypothesis import settings

# tests.spark.session: the one SparkSession of the run, for tests/spark and any Spark test beside a cluster fixture.
pytest_plugins = ["pykraft.testing", "tests.spark.session"]

# In CI every property test draws the same examples on every run: a failure there replays exactly, and
# a green run cannot turn red because a new random example was drawn. Locally the draws stay random, to
# keep exploring (a failure prints the example to pin with @example).
# No per-example deadline anywhere: hypothesis's 200 ms default is a timed assertion, and an example
# that is slow only because the machine is busy (two cores, cluster processes) is not a failure.
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("local", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "local")


def _children_of(pid: int) -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and "defunct" not in stat:
            found.append((int(entry.name), cmdline.strip()))
    return found


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every process a test starts, it stops: stop any leftover child and fail the run."""
    # Servers the tests start (`python -m pykraft.cli server start`, peers from bench/). PySpark's gateway
    # JVM is not one of them: PySpark stops it when the interpreter exits.
    ours = ("pykraft.cli", "bench.null_broker", "/tansu ")
    leftovers = [(pid, cmd) for pid, cmd in _children_of(os.getpid()) if any(tag in cmd for tag in ours)]
    for pid, cmd in leftovers:
        print(f"\nleftover process from the tests, killed: {pid} {cmd}")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if leftovers and session.exitstatus == 0:
        session.exitstatus = 1
