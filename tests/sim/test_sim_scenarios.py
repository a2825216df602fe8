"""Targeted simulation scenarios: fixed options, the same world and invariants as the swarm."""

from __future__ import annotations

from pykraft.raft.state import Role

from .harness import SimOptions, World, run_seed

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
        installed += run_seed(seed, options).snapshots_installed
    assert installed > 0
