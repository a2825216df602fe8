"""Swarm simulation: many seeds, every fault knob picked by the seed, invariants after every event.

``SEED=<n> pytest tests/sim`` replays exactly seed n; ``SIM_SEEDS=<count>`` changes how many run and
``SIM_SEED_START=<n>`` where they start (``make sim SEEDS=N`` for long runs).
"""

from __future__ import annotations

import pytest

from .harness import replay_hint, run_seed
from .seeds import seeds

SEED_COUNT_DEFAULT = 1000


@pytest.mark.parametrize("seed", seeds("SIM_SEEDS", SEED_COUNT_DEFAULT, "SIM_SEED_START"))
def test_swarm__random_faults__invariants_hold_and_healed_cluster_converges(seed: int) -> None:
    with replay_hint(seed, "pytest tests/sim/test_sim_swarm.py"):
        run_seed(seed)
