"""The paused-coordinator scenario, many seeds (tests/sim/coordinator_sim.py, issue 32): OffsetFetch never
answers an offset whose commit was not acknowledged, nor one older than a commit acknowledged before it
was sent, on any broker, while coordinators are paused past broker.session.timeout.ms and resume.
``SEED=<n> pytest tests/sim/test_sim_coordinator.py`` replays seed n; ``SIM_COORDINATOR_SEEDS`` sets how
many run (CI: 20, the issue's twenty runs of the scenario)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.sim.coordinator_sim import World
from tests.sim.seeds import seeds

SEED_COUNT_DEFAULT = 20


@pytest.mark.parametrize("seed", seeds("SIM_COORDINATOR_SEEDS", SEED_COUNT_DEFAULT))
def test_paused_coordinators__offset_fetch_answers_only_acknowledged_current_offsets(seed: int) -> None:
    world = World(seed).run()
    assert not world.violations, world.violations[:5]
    assert world.acked and world.fetches_answered, f"SEED={seed}: nothing was committed or fetched"


def _violations(world: Callable[[int], World], kind: str) -> Iterator[str]:
    """The violations of ``kind`` over the first 20 seeds, lazily (the first one is enough)."""
    for seed in range(20):
        yield from (v for v in world(seed).run().violations if kind in v)


def test_the_model_finds_a_stale_answer_without_the_lease() -> None:
    """The checks are not vacuous: without the coordinator lease, a resumed coordinator answers the
    OffsetFetch requests queued in its socket from its stale state (what the fault campaign found)."""
    assert any(_violations(lambda seed: World(seed, lease=False), "after offset"))


def test_the_model_finds_a_commit_visible_before_it_is_committed() -> None:
    """... and with a commit applied when appended, as before issue 32's fix, a coordinator serves a
    commit that never replicated (it was paused, deposed, and its append truncated)."""
    assert any(_violations(lambda seed: World(seed, apply_on_append=True), "never acknowledged"))
