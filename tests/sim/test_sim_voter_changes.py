"""KIP-853 under faults: a dynamic quorum whose leader adds observers and removes voters, one change
at a time, while nodes crash, links drop and partitions come and go. Every invariant of the swarm
holds (one leader per epoch, committed batches never change or vanish, leader completeness, log
matching, snapshots), plus the voter-change ones (harness._check_voter_sets): consecutive voter sets
differ by one voter, each change appended only after the previous committed, and only voters lead.

``SEED=<n>`` replays one seed; ``SIM_SEEDS`` / ``SIM_SEED_START`` as in test_sim_swarm.py.
"""

from __future__ import annotations

import os
import random

import pytest

from .harness import SWARM_SAFETY_DURATION_MS, SimOptions, replay_hint, run_seed

SEED_COUNT_DEFAULT = 100


def _seeds() -> list[int]:
    if "SEED" in os.environ:
        return [int(os.environ["SEED"])]
    start = int(os.environ.get("SIM_SEED_START", "0"))
    return list(range(start, start + int(os.environ.get("SIM_SEEDS", SEED_COUNT_DEFAULT))))


def _options(seed: int) -> SimOptions:
    rng = random.Random(seed)
    return SimOptions(
        voter_count=rng.choice([1, 3, 3, 5]),
        observer_count=rng.choice([1, 2, 3]),
        drop_rate=rng.choice([0.0, 0.02, 0.1]),
        duplicate_rate=rng.choice([0.0, 0.02]),
        delay_ms_max=rng.choice([5, 20, 80]),
        crash_interval_ms=rng.choice([0, 1500, 4000]),
        partition_interval_ms=rng.choice([0, 2000, 5000]),
        propose_interval_ms=rng.choice([20, 50, 150]),
        crash_in_ready_rate=rng.choice([0.0, 0.002]),
        snapshot_every_records=rng.choice([0, 8, 30]),
        leader_sends_before_flush=rng.random() < 0.5,
        safety_duration_ms=SWARM_SAFETY_DURATION_MS,
        dynamic_quorum=True,
        voter_change_interval_ms=rng.choice([100, 300, 1000]),
    )


@pytest.mark.parametrize("seed", _seeds())
def test_voter_changes__random_faults__invariants_hold_and_healed_cluster_converges(seed: int) -> None:
    with replay_hint(seed, "pytest tests/sim/test_sim_voter_changes.py"):
        run_seed(seed, _options(seed))


def test_voter_changes__the_swarm_really_changes_voters() -> None:
    """The seeds above are not vacuous: a calm run makes many changes and ends with other voters."""
    world = run_seed(
        7, SimOptions(voter_count=3, observer_count=2, dynamic_quorum=True, voter_change_interval_ms=200)
    )
    assert world.voter_changes >= 10
    leader = world.current_leader()
    assert leader is not None and leader.node is not None
    assert leader.node.voter_history.voter_entries()
