"""Transactions under faults, many seeds (tests/sim/txn_sim.py): atomic across partitions, what clients
were told holds, no hanging transactions.

``SEED=<n> pytest tests/sim/test_sim_transactions.py`` replays seed n; ``SIM_TXN_SEEDS`` sets how many
run (default 300)."""

from __future__ import annotations

import os

import pytest

from .txn_sim import run_txn_seed

SEED_COUNT_DEFAULT = 300


def _seeds() -> list[int]:
    if "SEED" in os.environ:
        return [int(os.environ["SEED"])]
    return list(range(int(os.environ.get("SIM_TXN_SEEDS", SEED_COUNT_DEFAULT))))


@pytest.mark.parametrize("seed", _seeds())
def test_transactions__faults__atomic_and_nothing_hangs(seed: int) -> None:
    world = run_txn_seed(seed)
    assert world.told_committed, f"SEED={seed}: no transaction ever committed"
