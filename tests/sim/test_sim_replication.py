"""Replication under faults, many seeds (tests/sim/replication_sim.py): nothing below a high watermark
is lost or changed, acks=all acknowledges only committed batches, one leader per epoch.

``SEED=<n> pytest tests/sim/test_sim_replication.py`` replays seed n; ``SIM_REPLICATION_SEEDS`` sets how
many run (default 500)."""

from __future__ import annotations

import pytest

from .replication_sim import run_replication_seed
from .seeds import seeds

SEED_COUNT_DEFAULT = 500


@pytest.mark.parametrize("seed", seeds("SIM_REPLICATION_SEEDS", SEED_COUNT_DEFAULT))
def test_replication__faults__committed_batches_survive(seed: int) -> None:
    world = run_replication_seed(seed)
    # The run did something: batches were committed.
    assert world.committed, f"SEED={seed}: nothing was ever committed"


@pytest.mark.parametrize("seed", seeds("SIM_REPLICATION_SEEDS", SEED_COUNT_DEFAULT)[:100])
def test_replication__reassignments__committed_batches_survive(seed: int) -> None:
    """KIP-455 under the same faults: the partition is moved among four brokers and moves are cancelled
    while producers write; the invariants hold and every move has completed or been cancelled once the
    cluster heals."""
    world = run_replication_seed(seed, reassign=True)
    assert world.committed, f"SEED={seed}: nothing was ever committed"
