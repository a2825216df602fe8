"""Fault switches: three raft bugs put back into the core, one at a time (pytest monkeypatch on
RaftNode internals; nothing in src knows about them), and the simulation must catch each within its
CI budget. A swarm that cannot see these bugs proves nothing.

* ``unflushed_high_watermark``: a leader counts its unflushed log toward the high watermark (Ready
  contract step 2; Kafka's LeaderState counts the leader's flushed end only);
* ``unpersisted_vote``: a vote is sent without being persisted first (Ready contract step 1; it
  reaches disk only with the node's next role change, so a voter that crashes and restarts in
  between may vote again in the same epoch);
* ``double_counted_vote``: a duplicated VoteResponse is counted as a second vote.

Each switch is caught two ways: by its scripted crash scenario (test_sim_scenarios.py; every scripted
seed must fail, with the invariant named below), and by a bounded search over random runs with fixed
options that open the bug's window (crashes inside the Ready sequence, slow fsyncs, duplicated
messages). A catch prints ``SEED=n``; ``SEED=n pytest tests/sim/test_sim_fault_switches.py -s``
replays it (a seed that does not catch a switch skips that switch's search).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from pykraft.raft.messages import Inbound, VoteRequest, VoteResponse
from pykraft.raft.node import RaftNode
from pykraft.raft.state import Candidate, Leader, Voted

from .harness import SimOptions, World, run_seed
from .test_sim_scenarios import (
    SCRIPTED_SEEDS,
    duplicated_vote_response,
    leader_crashes_before_its_fsync,
    voter_restarts_after_granting,
)

# Seeds each random search may use to find its bug.
SEARCH_SEEDS = 150


def _unflushed_high_watermark(
    original: Callable[[RaftNode, Leader], None],
) -> Callable[[RaftNode, Leader], None]:
    def update(self: RaftNode, state: Leader) -> None:
        flushed_end_offset = self._flushed_end_offset
        self._flushed_end_offset = self.log.end_offset  # the bug: the unflushed tail counts
        try:
            original(self, state)
        finally:
            self._flushed_end_offset = flushed_end_offset

    return update


def _unpersisted_vote(original: Callable[..., None]) -> Callable[..., None]:
    def handle(self: RaftNode, inbound: Inbound, request: VoteRequest, now_ms: int) -> None:
        original(self, inbound, request, now_ms)
        if isinstance(self._state, Voted):
            self._persisted_quorum_state = self.quorum_state()  # the bug: the vote never reaches disk

    return handle


def _double_counted_vote(original: Callable[..., None]) -> Callable[..., None]:
    def handle(self: RaftNode, inbound: Inbound, response: VoteResponse, now_ms: int) -> None:
        state = self._state
        if (
            response.vote_granted
            and isinstance(state, Candidate)
            and response.leader_epoch == state.epoch
            and inbound.source_id in state.granting_voters
        ):
            state.granting_voters.add(-1000 - len(state.granting_voters))  # the bug: a duplicate counts again
        original(self, inbound, response, now_ms)

    return handle


@dataclass(frozen=True)
class Switch:
    install: Callable[[pytest.MonkeyPatch], None]
    scenario: Callable[[int], World]
    # The invariant the scripted scenario must report.
    violation: str
    # Random runs that open the bug's window.
    search_options: SimOptions


SWITCHES: dict[str, Switch] = {
    "unflushed_high_watermark": Switch(
        lambda mp: mp.setattr(
            RaftNode,
            "_maybe_update_high_watermark",
            _unflushed_high_watermark(RaftNode._maybe_update_high_watermark),
        ),
        leader_crashes_before_its_fsync,
        "lacks committed batch",
        SimOptions(
            voter_count=3,
            delay_ms_max=5,
            crash_interval_ms=600,
            restart_delay_ms_max=300,
            propose_interval_ms=20,
            drive_delay_ms_max=40,
            crash_in_ready_rate=0.05,
            leader_sends_before_flush=True,
            safety_duration_ms=6000,
        ),
    ),
    "unpersisted_vote": Switch(
        lambda mp: mp.setattr(
            RaftNode, "_handle_vote_request", _unpersisted_vote(RaftNode._handle_vote_request)
        ),
        voter_restarts_after_granting,
        "two leaders in epoch",
        # Frequent crashes with quick restarts and short partitions: many elections, each a chance
        # for a voter to forget its vote.
        SimOptions(
            voter_count=3,
            drop_rate=0.2,
            delay_ms_max=30,
            crash_interval_ms=200,
            restart_delay_ms_max=20,
            partition_interval_ms=800,
            partition_duration_ms_max=1000,
            propose_interval_ms=50,
            safety_duration_ms=6000,
        ),
    ),
    "double_counted_vote": Switch(
        lambda mp: mp.setattr(
            RaftNode, "_handle_vote_response", _double_counted_vote(RaftNode._handle_vote_response)
        ),
        duplicated_vote_response,
        "two leaders in epoch",
        SimOptions(
            voter_count=5,
            drop_rate=0.1,
            duplicate_rate=0.3,
            delay_ms_max=20,
            crash_interval_ms=800,
            restart_delay_ms_max=300,
            partition_interval_ms=1500,
            propose_interval_ms=50,
            safety_duration_ms=6000,
        ),
    ),
}


def _search_seeds() -> Iterator[int]:
    if "SEED" in os.environ:
        yield int(os.environ["SEED"])
        return
    yield from range(SEARCH_SEEDS)


def _first_violation(options: SimOptions) -> tuple[int, str] | None:
    for seed in _search_seeds():
        try:
            run_seed(seed, options)
        except AssertionError as exc:  # an invariant, or one of the core's own asserts
            return seed, str(exc).splitlines()[0]
    return None


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_fault_switch__caught_by_its_scripted_crash_scenario(
    switch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = SWITCHES[switch]
    spec.install(monkeypatch)
    for seed in SCRIPTED_SEEDS:
        with pytest.raises(AssertionError) as caught:
            spec.scenario(seed)
        message = str(caught.value)
        assert spec.violation in message, (
            f"SEED={seed} {switch}: caught, but not as {spec.violation!r}:\n{message}"
        )
        print(f"{switch}: {spec.scenario.__name__} SEED={seed}: {message.splitlines()[0]}")


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_search_options__pass_on_the_real_core(switch: str) -> None:
    """The random search is sound: without the bug, none of its first seeds fails."""
    options = SWITCHES[switch].search_options
    for seed in list(_search_seeds())[:20]:
        try:
            run_seed(seed, options)
        except AssertionError as e:
            raise AssertionError(f"SEED={seed} (search of {switch})\n{e}") from e


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_fault_switch__caught_by_random_runs_within_the_seed_budget(
    switch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = SWITCHES[switch]
    spec.install(monkeypatch)
    found = _first_violation(spec.search_options)
    if found is None and "SEED" in os.environ:
        pytest.skip(f"SEED={os.environ['SEED']} does not catch {switch}")
    assert found is not None, f"{switch}: no violation in {SEARCH_SEEDS} seeds of {spec.search_options}"
    seed, message = found
    print(f"{switch}: caught by SEED={seed}: {message}")
