"""Swarm simulation: many seeds, every fault knob picked by the seed, invariants after every event.

``SEED=<n> pytest tests/sim`` replays exactly seed n; ``SIM_SEEDS=<count>`` changes how many run.
"""

from __future__ import annotations

import os

import pytest

from .harness import run_seed

SEED_COUNT_DEFAULT = 200


def _seeds() -> list[int]:
    if "SEED" in os.environ:
        return [int(os.environ["SEED"])]
    return list(range(int(os.environ.get("SIM_SEEDS", SEED_COUNT_DEFAULT))))


@pytest.mark.parametrize("seed", _seeds())
def test_swarm__random_faults__invariants_hold_and_healed_cluster_converges(seed: int) -> None:
    try:
        run_seed(seed)
    except AssertionError as e:
        raise AssertionError(f"SEED={seed} (replay: SEED={seed} pytest tests/sim)\n{e}") from e
