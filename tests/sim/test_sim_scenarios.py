"""Targeted simulation scenarios: fixed options, the same world and invariants as the swarm.

The scripted crash scenarios at the end steer one world by hand (held links, a stalled fsync, a
crash at a chosen moment) into the window a specific raft bug needs; each passes on the real core and
fails with an invariant violation when its bug is switched on (test_sim_fault_switches.py). A failure
names its seed; ``pytest tests/sim/test_sim_scenarios.py -k <name>`` replays it exactly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace

import pytest

from pykraft.raft.state import Role

from .harness import SimOptions, World, replay_hint, run_seed

QUIET = SimOptions(
    voter_count=3, drop_rate=0.0, duplicate_rate=0.0, crash_interval_ms=0, partition_interval_ms=0
)


def _leader(world: World) -> int:
    leader = world.current_leader()
    assert leader is not None and leader.node is not None
    return leader.node_id


def test_single_voter__start__leads_at_once_and_commits_after_flush() -> None:
    world = World(1, SimOptions(voter_count=1, propose_interval_ms=10))
    node = world.nodes[1].node
    assert node is not None
    assert node.role == Role.LEADER
    assert node.epoch == 1
    world.run_until(500)
    assert node.high_watermark == world.nodes[1].log.end_offset > 1
    assert world.nodes[1].applied_end_offset == node.high_watermark


def test_single_voter__restart__bumps_epoch_and_keeps_log() -> None:
    world = World(2, SimOptions(voter_count=1, propose_interval_ms=10))
    world.run_until(300)
    sim_node = world.nodes[1]
    end_offset = sim_node.log.end_offset
    world.restart(sim_node)
    assert sim_node.node is not None
    assert sim_node.node.role == Role.LEADER
    assert sim_node.node.epoch == 2
    assert sim_node.log.end_offset == end_offset + 1  # kept everything, plus the new LeaderChange
    world.run_until(600)
    assert sim_node.applied_end_offset == sim_node.node.high_watermark == sim_node.log.end_offset


def test_three_voters__message_loss__elect_and_commit() -> None:
    world = run_seed(3, SimOptions(voter_count=3, drop_rate=0.2, duplicate_rate=0.1, delay_ms_max=40))
    assert world.committed_end_offset > 20


def test_three_voters__leader_crash__new_leader_keeps_committed_data() -> None:
    world = World(4, QUIET)
    world.run_until(2000)
    old_leader = _leader(world)
    committed_before = world.committed_end_offset
    assert committed_before > 0
    world.crash(world.nodes[old_leader])
    world.run_until(5000)
    new_leader = _leader(world)
    assert new_leader != old_leader
    assert world.committed_end_offset > committed_before  # leader completeness is checked on election
    world.heal_and_restart_all()
    target: list[tuple[int, int] | None] = [None]
    assert world.run_until(15000, lambda: world.converged(target))


def test_five_voters__partitions__heal_and_converge() -> None:
    options = SimOptions(
        voter_count=5, drop_rate=0.05, partition_interval_ms=800, partition_duration_ms_max=2000
    )
    world = run_seed(5, options)
    assert len(world.leader_by_epoch) > 1


def test_crashes_inside_ready__durability_holds() -> None:
    options = SimOptions(
        voter_count=3, crash_interval_ms=1000, drive_delay_ms_max=20, crash_in_ready_rate=0.02
    )
    for seed in range(20):
        with replay_hint(seed, "pytest tests/sim/test_sim_scenarios.py -k crashes_inside_ready"):
            run_seed(seed, options)


def test_lagging_follower__log_cleaned__catches_up_via_snapshot() -> None:
    options = SimOptions(
        voter_count=3,
        drop_rate=0.0,
        crash_interval_ms=0,
        partition_interval_ms=0,
        propose_interval_ms=20,
        snapshot_every_records=10,
    )
    world = World(6, options)
    world.run_until(1500)
    leader = _leader(world)
    follower = next(s for s in world.nodes.values() if s.node_id != leader)
    world.crash(follower)
    world.run_until(4000)  # the others snapshot and clean far past what the follower holds
    leader_node = world.nodes[leader]
    assert leader_node.log.start_offset > follower.log.end_offset
    installed_before = world.snapshots_installed
    world.restart(follower)
    world.heal_and_restart_all()
    target: list[tuple[int, int] | None] = [None]
    assert world.run_until(12000, lambda: world.converged(target))
    assert world.snapshots_installed > installed_before
    assert follower.log.start_offset > 0 and follower.snapshots.snapshot_ids()


def test_snapshots_with_faults__invariants_hold() -> None:
    options = SimOptions(
        voter_count=3,
        drop_rate=0.1,
        duplicate_rate=0.05,
        crash_interval_ms=1200,
        partition_interval_ms=2000,
        snapshot_every_records=8,
        crash_in_ready_rate=0.005,
    )
    installed = 0
    for seed in range(100, 110):
        with replay_hint(seed, "pytest tests/sim/test_sim_scenarios.py -k snapshots_with_faults"):
            installed += run_seed(seed, options).snapshots_installed
    assert installed > 0


# --- scripted crash scenarios, one per raft bug the swarm must not miss ------------------------------

SCRIPTED_SEEDS = range(3)


def _others(world: World, *node_ids: int) -> list[int]:
    return [node_id for node_id in sorted(world.nodes) if node_id not in node_ids]


def _settled_world(seed: int, options: SimOptions) -> World:
    """A cluster that elected a leader and committed the active controller's records (activation,
    registrations, producer-ID blocks, topics), then stopped proposing until every voter holds and has
    applied the leader's whole log."""
    world = World(seed, options)
    assert world.run_until(
        10_000, lambda: world.current_leader() is not None and world.committed_end_offset > 10
    )
    world.proposals_enabled = False

    def caught_up() -> bool:
        leader = world.current_leader()
        if leader is None or leader.node is None:
            return False
        end_offset = leader.log.end_offset
        return all(
            s.node is not None
            and s.node.leader_id == leader.node_id
            and s.log.end_offset == s.node.high_watermark == s.applied_end_offset == end_offset
            for s in world.nodes.values()
        )

    assert world.run_until(world.now_ms + 5000, caught_up), "the cluster did not settle"
    return world


def _heal_and_converge(world: World) -> None:
    world.heal_and_restart_all()
    target: list[tuple[int, int] | None] = [None]
    assert world.run_until(world.now_ms + 20_000, lambda: world.converged(target)), "did not converge"


def _campaigning(world: World, epoch: int, *node_ids: int) -> Callable[[], bool]:
    def check() -> bool:
        nodes = [world.nodes[node_id].node for node_id in node_ids]
        return all(n is not None and n.role == Role.CANDIDATE and n.epoch == epoch for n in nodes)

    return check


def _voted_for(world: World, voter_id: int, candidate_id: int, epoch: int) -> Callable[[], bool]:
    def check() -> bool:
        node = world.nodes[voter_id].node
        return node is not None and node.epoch == epoch and node.quorum_state().voted_id == candidate_id

    return check


def leader_crashes_before_its_fsync(seed: int) -> World:
    """The leader counts only its *flushed* log toward the high watermark (Ready contract step 2;
    Kafka's LeaderState.updateLocalState takes the flushed end offset; KIP-595).

    The leader sends a batch while its fsync is still running (Kafka serves followers from the page
    cache) and its disk hangs; one follower flushes the batch, the other hears nothing. The batch is
    durable on one voter of three: not committed. The leader crashes (the batch is gone from its
    disk), the follower that has it is cut off, and the other two elect a leader without it. A leader
    that counted its unflushed log would have committed the batch: leader completeness fails."""
    world = _settled_world(seed, replace(QUIET, leader_sends_before_flush=True))
    leader_id = _leader(world)
    follower_id, other_id = _others(world, leader_id)
    leader = world.nodes[leader_id]
    assert leader.node is not None
    epoch = leader.node.epoch
    world.stall_fsync(leader_id)
    world.blocked |= {(leader_id, other_id), (other_id, leader_id)}
    proposed = world.propose(leader)
    assert proposed is not None
    _epoch, last_offset = proposed
    world.run_until(world.now_ms + 300)
    assert world.nodes[follower_id].log.flushed_offset > last_offset, "the follower never flushed it"
    assert leader.log.flushed_offset <= last_offset, "the leader's fsync was supposed to hang"

    world.crash(leader)
    world.blocked = {(follower_id, n) for n in world.nodes} | {(n, follower_id) for n in world.nodes}
    world.restart(leader)

    def new_leader_elected() -> bool:
        current = world.current_leader()
        return current is not None and current.node is not None and current.node.epoch > epoch

    assert world.run_until(world.now_ms + 10_000, new_leader_elected), "the two voters never elected"
    assert world.committed_end_offset <= last_offset, "a batch on one voter of three was committed"
    _heal_and_converge(world)
    return world


def voter_restarts_after_granting(seed: int) -> World:
    """A vote is durable before the response that grants it leaves (Ready contract step 1; Raft §5.2;
    Kafka's QuorumState persists the election state before the VoteResponse is sent).

    The leader stalls (every link held), both followers time out and campaign in the same epoch. The
    old leader grants the first one, which becomes leader; then the voter crashes and restarts and
    hears the second candidate in that same epoch. Having persisted its vote, it refuses; a voter that
    forgot its vote grants again and two leaders share one epoch (election safety fails)."""
    world = _settled_world(seed, replace(QUIET, election_timeout_ms=1000))
    voter_id = _leader(world)
    first_id, second_id = _others(world, voter_id)
    voter = world.nodes[voter_id]
    assert voter.node is not None
    epoch = voter.node.epoch + 1
    world.hold_all()
    assert world.run_until(world.now_ms + 5000, _campaigning(world, epoch, first_id, second_id))

    world.release(first_id, voter_id)
    assert world.run_until(world.now_ms + 100, _voted_for(world, voter_id, first_id, epoch))
    world.release(voter_id, first_id)
    first = world.nodes[first_id]
    assert world.run_until(
        world.now_ms + 100, lambda: first.node is not None and first.node.role == Role.LEADER
    )

    world.restart(voter)
    world.release(second_id, voter_id)
    world.run_until(world.now_ms + 100)
    world.release(voter_id, second_id)
    world.run_until(world.now_ms + 100)
    second = world.nodes[second_id].node
    assert second is not None and second.role != Role.LEADER
    _heal_and_converge(world)
    return world


def duplicated_vote_response(seed: int) -> World:
    """A candidate counts voters, not VoteResponses (Raft §5.2; Kafka's CandidateState keeps the
    granting voters as a set): the network may deliver one response twice.

    Five voters. Two followers are cut off, time out and campaign in the same epoch. The old leader
    grants the first one, and its response arrives twice: one vote plus the candidate's own is two of
    five, no majority. The other two voters grant the second candidate, which wins with three. A
    candidate that counted the duplicate would lead too: two leaders in one epoch."""
    world = _settled_world(seed, replace(QUIET, voter_count=5, election_timeout_ms=1000))
    voter_id = _leader(world)
    first_id, second_id, *helper_ids = _others(world, voter_id)
    voter = world.nodes[voter_id]
    assert voter.node is not None
    epoch = voter.node.epoch + 1
    for candidate_id in (first_id, second_id):
        for node_id in _others(world, candidate_id):
            world.hold(candidate_id, node_id)
            world.hold(node_id, candidate_id)
    assert world.run_until(world.now_ms + 5000, _campaigning(world, epoch, first_id, second_id))

    world.release(first_id, voter_id)
    assert world.run_until(world.now_ms + 100, _voted_for(world, voter_id, first_id, epoch))
    world.release(voter_id, first_id, copies=2)
    world.run_until(world.now_ms + 100)

    for helper_id in helper_ids:
        world.release(second_id, helper_id)
    for helper_id in helper_ids:
        assert world.run_until(world.now_ms + 100, _voted_for(world, helper_id, second_id, epoch))
        world.release(helper_id, second_id)
    second = world.nodes[second_id]
    assert world.run_until(
        world.now_ms + 100, lambda: second.node is not None and second.node.role == Role.LEADER
    )
    first = world.nodes[first_id].node
    assert first is not None and first.role == Role.CANDIDATE, first.role if first else None
    _heal_and_converge(world)
    return world


SCRIPTED_SCENARIOS: dict[str, Callable[[int], World]] = {
    "leader_crashes_before_its_fsync": leader_crashes_before_its_fsync,
    "voter_restarts_after_granting": voter_restarts_after_granting,
    "duplicated_vote_response": duplicated_vote_response,
}


@pytest.mark.parametrize("seed", SCRIPTED_SEEDS)
@pytest.mark.parametrize("name", sorted(SCRIPTED_SCENARIOS))
def test_scripted_crash_scenario__invariants_hold(name: str, seed: int) -> None:
    test_id = f"tests/sim/test_sim_scenarios.py::test_scripted_crash_scenario__invariants_hold[{name}-{seed}]"
    with replay_hint(seed, f"pytest '{test_id}'"):
        SCRIPTED_SCENARIOS[name](seed)


def test_observers__find_the_leader_follow_it_through_failover_and_never_vote() -> None:
    """KIP-595 observers (brokers following the metadata log): no leader known at start, so each asks
    a voter and follows the leader named in the answer; after the leader crashes they find the next
    one; they apply everything, and never campaign (the invariants check election safety)."""
    options = SimOptions(
        voter_count=3,
        observer_count=2,
        drop_rate=0.05,
        crash_interval_ms=0,
        partition_interval_ms=0,
        snapshot_every_records=20,
    )
    for seed in range(3):
        with replay_hint(seed, "pytest tests/sim/test_sim_scenarios.py -k observers"):
            world = World(seed, options)
            observers = [world.nodes[4], world.nodes[5]]

            def observers_follow(world: World = world, observers: list = observers) -> bool:  # type: ignore[type-arg]
                current = world.current_leader()
                return current is not None and all(
                    o.node is not None and o.node.leader_id == current.node_id and o.applied_end_offset > 0
                    for o in observers
                )

            assert world.run_until(10_000, observers_follow), "the observers never found the leader"
            leader = _leader(world)
            for observer in observers:
                assert observer.node is not None and not observer.node.is_voter
                assert observer.node.role == Role.FOLLOWER
            world.crash(world.nodes[leader])

            def observers_follow_a_new_leader(
                world: World = world, old: int = leader, observers: list = observers
            ) -> bool:  # type: ignore[type-arg]
                current = world.current_leader()
                return (
                    current is not None
                    and current.node_id != old
                    and all(o.node is not None and o.node.leader_id == current.node_id for o in observers)
                )

            assert world.run_until(world.now_ms + 10_000, observers_follow_a_new_leader)
            assert all(world.leader_by_epoch[e] in (1, 2, 3) for e in world.leader_by_epoch)
            world.heal_and_restart_all()
            target: list[tuple[int, int] | None] = [None]
            assert world.run_until(world.now_ms + 20_000, functools.partial(world.converged, target))
