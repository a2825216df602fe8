"""Swarm simulation: many seeds, every fault knob picked by the seed, invariants after every event.

``SEED=<n> pytest tests/sim`` replays exactly seed n; ``SIM_SEEDS=<count>`` changes how many run and
``SIM_SEED_START=<n>`` where they start (``make sim SEEDS=N`` for long runs).
"""

from __future__ import annotations

import os

import pytest

from .harness import replay_hint, run_seed

SEED_COUNT_DEFAULT = 1000


def _seeds() -> list[int]:
    if "SEED" in os.environ:
        return [int(os.environ["SEED"])]
    start = int(os.environ.get("SIM_SEED_START", "0"))
    return list(range(start, start + int(os.environ.get("SIM_SEEDS", SEED_COUNT_DEFAULT))))


@pytest.mark.parametrize("seed", _seeds())
def test_swarm__random_faults__invariants_hold_and_healed_cluster_converges(seed: int) -> None:
    with replay_hint(seed, "pytest tests/sim/test_sim_swarm.py"):
        run_seed(seed)
