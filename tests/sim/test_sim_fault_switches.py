"""Fault switches: three raft bugs put back into the core, one at a time, and the simulation must
catch each within its CI seed budget. A swarm that cannot see these bugs proves nothing.

* ``unflushed_high_watermark``: a leader counts its unflushed log toward the high watermark (Ready
  contract step 2; Kafka's LeaderState counts the leader's flushed end only);
* ``unpersisted_vote``: a vote is sent without being persisted first (step 1: a voter that crashes
  and restarts may vote again in the same epoch);
* ``double_counted_vote``: a duplicated VoteResponse is counted as a second vote.

Each switch has a targeted crash scenario (fixed options that provoke the bug's window: crashes
inside the Ready sequence, slow fsyncs, duplicated messages) searched over a bounded number of
seeds; the test fails if no seed shows a violation. ``SEED=n`` replays one seed of every scenario.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from pykraft.raft.messages import Inbound, VoteRequest, VoteResponse
from pykraft.raft.node import RaftNode
from pykraft.raft.state import Candidate, Leader, Voted, majority_end_offset

from .harness import InvariantViolation, SimOptions, run_seed

# Seeds each targeted scenario may use to find its bug.
SEARCH_SEEDS = 150


def _unflushed_high_watermark(self: RaftNode, state: Leader) -> None:
    end_offsets = [self.log.end_offset]  # the bug: not min(flushed end, log end)
    end_offsets += [r.end_offset for r in state.replicas.values() if r.end_offset is not None]
    majority_offset = majority_end_offset(end_offsets, len(self.voter_ids))
    if majority_offset > state.epoch_start_offset and majority_offset > self._high_watermark:
        self._high_watermark = majority_offset
        self._complete_parked_fetches()


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
            and inbound.source_id in state.granting_voters
        ):
            state.granting_voters.add(-1000 - len(state.granting_voters))  # the bug: a duplicate counts again
        original(self, inbound, response, now_ms)

    return handle


SWITCHES: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], SimOptions]] = {
    "unflushed_high_watermark": (
        lambda mp: mp.setattr(RaftNode, "_maybe_update_high_watermark", _unflushed_high_watermark),
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
    "unpersisted_vote": (
        lambda mp: mp.setattr(
            RaftNode, "_handle_vote_request", _unpersisted_vote(RaftNode._handle_vote_request)
        ),
        SimOptions(
            voter_count=3,
            drop_rate=0.1,
            delay_ms_max=20,
            crash_interval_ms=400,
            restart_delay_ms_max=50,
            partition_interval_ms=1500,
            propose_interval_ms=50,
            safety_duration_ms=6000,
        ),
    ),
    "double_counted_vote": (
        lambda mp: mp.setattr(
            RaftNode, "_handle_vote_response", _double_counted_vote(RaftNode._handle_vote_response)
        ),
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


def _seeds() -> Iterator[int]:
    if "SEED" in os.environ:
        yield int(os.environ["SEED"])
        return
    yield from range(SEARCH_SEEDS)


def _first_violation(options: SimOptions) -> tuple[int, str] | None:
    for seed in _seeds():
        try:
            run_seed(seed, options)
        except InvariantViolation as exc:
            return seed, str(exc).splitlines()[0]
    return None


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_scenario__passes_on_the_real_core(switch: str) -> None:
    """The targeted scenario itself is sound: without the bug, no seed of it fails."""
    _install, options = SWITCHES[switch]
    for seed in list(_seeds())[:20]:
        try:
            run_seed(seed, options)
        except AssertionError as e:
            raise AssertionError(f"SEED={seed} (scenario {switch})\n{e}") from e


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_fault_switch__is_caught_within_the_seed_budget(switch: str, monkeypatch: pytest.MonkeyPatch) -> None:
    install, options = SWITCHES[switch]
    install(monkeypatch)
    found = _first_violation(options)
    assert found is not None, f"{switch}: no violation in {SEARCH_SEEDS} seeds of {options}"
    seed, message = found
    print(f"{switch}: caught by SEED={seed}: {message}")
