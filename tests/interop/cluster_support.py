"""What the cluster tests share: a wait that names what it waited for, and a 3-controller + 3-broker
cluster that prints its nodes' logs when a test in it fails."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import pytest

from pykraft.testing import ClusterSecurity, ProcessCluster, running_cluster


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``condition`` every 50 ms; an exception counts as "not yet" (a node restarting)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:
            pass
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@contextlib.contextmanager
def three_by_three(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    overrides: dict[str, str],
    security: ClusterSecurity | None = None,
    *,
    dynamic: bool = False,
    per_broker_overrides: dict[int, dict[str, str]] | None = None,
) -> Iterator[ProcessCluster]:
    directory = str(tmp_path_factory.mktemp(name))
    with running_cluster(
        controllers=3,
        brokers=3,
        directory=directory,
        overrides=overrides,
        security=security,
        dynamic=dynamic,
        per_broker_overrides=per_broker_overrides,
    ) as running:
        try:
            yield running
        except BaseException:
            print(running.logs())
            raise
