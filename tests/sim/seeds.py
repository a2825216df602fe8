"""Which seeds a simulation test runs: every failure prints ``SEED=...``, and ``SEED=N`` replays that one;
otherwise ``count_variable`` of them (``default_count`` unless set), from ``start_variable`` (0)."""

from __future__ import annotations

import os


def seeds(count_variable: str, default_count: int, start_variable: str | None = None) -> list[int]:
    if "SEED" in os.environ:
        return [int(os.environ["SEED"])]
    start = int(os.environ.get(start_variable, "0")) if start_variable else 0
    return list(range(start, start + int(os.environ.get(count_variable, default_count))))
