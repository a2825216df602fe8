"""Broker sessions and producer-id blocks under faults, many seeds (tests/sim/broker_sim.py): no producer
id is ever handed to two producers, the log's blocks increase and name registered brokers, and a
healed cluster has every broker registered, unfenced and handing out ids.

``SEED=<n> pytest tests/sim/test_sim_brokers.py`` replays seed n; ``SIM_BROKER_SEEDS`` sets how many
run (default 1000)."""

from __future__ import annotations

import pytest

from .broker_sim import run_broker_seed
from .seeds import seeds

SEED_COUNT_DEFAULT = 1000


@pytest.mark.parametrize("seed", seeds("SIM_BROKER_SEEDS", SEED_COUNT_DEFAULT))
def test_brokers__faults__no_producer_id_twice_and_healed_brokers_serve(seed: int) -> None:
    world = run_broker_seed(seed)
    assert world.handed_out, f"SEED={seed}: no producer ever got an id"
