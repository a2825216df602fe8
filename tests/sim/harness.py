"""A deterministic world for ``RaftNode``s: one seed, a virtual clock, a lossy network, crashes.

No asyncio, no real time. Everything random comes from ``random.Random(seed)``: the swarm options
(cluster size, loss, duplication, delay, crash and partition rates; TigerBeetle's VOPR), the fault
schedule, and each node's own ``Random``. The same seed replays the same run exactly.

The world drives each node with the Ready contract (persist quorum state -> flush -> send -> apply ->
advance). A crash keeps only the flushed log and the persisted quorum-state bytes (MockLog's
``lose_unflushed``); a restart builds a fresh ``RaftNode`` over them.

Invariants, checked after every event (Kafka's RaftEventSimulationTest plus Raft's safety properties):

* election safety: at most one leader per epoch, ever;
* epochs never go backwards on a node within a lifetime, nor in its quorum-state file across restarts;
* the high watermark never goes backwards within a node's lifetime, and never passes its log end;
* log matching: flushed batches with the same (base offset, epoch) on any two nodes, at any time, have
  the same bytes and the same log before them (checked with a hash chain);
* committed data never changes: every batch below any node's high watermark, at any time, is the batch
  first seen committed at that offset; applied batches are contiguous and agree across nodes;
* leader completeness: a new leader's log holds every batch committed before it was elected (those
  below its log start are in its snapshot);
* KIP-630: a snapshot of the state machine at offset N, loaded on any node (at restart or after a
  follower downloaded it), equals the state every node reached by applying the log up to N. With
  ``snapshot_every_records`` set, every node snapshots and cleans its log at once, so a lagging or
  restarted follower catches up through FetchSnapshot.

Scripted scenarios (test_sim_scenarios.py) also steer the world by hand: ``hold`` a link so what is
sent on it waits until ``release`` (optionally delivered twice), and ``stall_fsync`` a leader so its
background fsync never finishes before it crashes.

Every failure names its seed (``SEED=n``) and replays exactly: ``World._fail`` puts it first in the
message, and ``replay_hint`` adds it to any other failure of a test.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pykraft.core.errors import ErrorCode
from pykraft.metadata.snapshots import image_snapshot_values
from pykraft.protocol.records import read_batch_header
from pykraft.raft.control import Endpoint, Voter
from pykraft.raft.log import MemoryRaftLog, StoredBatch
from pykraft.raft.messages import Inbound, Outbound, is_request
from pykraft.raft.node import RaftNode
from pykraft.raft.quorum_state import decode_quorum_state, encode_quorum_state
from pykraft.raft.ready import CommittedBatch
from pykraft.raft.snapshot import MemorySnapshotStore, read_snapshot, write_snapshot
from pykraft.raft.state import Role
from pykraft.raft.voter_set import VoterSet

from .metadata_layer import MetadataInvariants, MetadataViolation, NodeMetadata

READY_LOOP_MAX = 100
# A swarm seed's safety phase: 1000 seeds of it keep tests/sim within about a minute on 2 cores (CI
# runs more seeds rather than longer ones; ``make sim SEEDS=N`` runs more still).
SWARM_SAFETY_DURATION_MS = 8000


class InvariantViolation(AssertionError):
    pass


@contextmanager
def replay_hint(seed: int, replay: str = "pytest tests/sim") -> Iterator[None]:
    """Any failure inside names the seed and how to replay it; ``World._fail`` already names it, a
    core assert or a test's own check does not."""
    try:
        yield
    except Exception as e:
        if str(e).startswith(f"SEED={seed} "):
            raise
        raise AssertionError(f"SEED={seed} (replay: SEED={seed} {replay})\n{type(e).__name__}: {e}") from e


@dataclass(frozen=True)
class SimOptions:
    voter_count: int = 3
    # Non-voting replicas (brokers following the metadata log, KIP-595 observers): they find the
    # leader through a voter, fetch and apply like followers, and never vote.
    observer_count: int = 0
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0
    delay_ms_min: int = 1
    delay_ms_max: int = 10
    crash_interval_ms: int = 0  # mean time between crashes; 0 = none
    restart_delay_ms_max: int = 3000
    partition_interval_ms: int = 0  # mean time between partitions; 0 = none
    partition_duration_ms_max: int = 3000
    propose_interval_ms: int = 50
    # The shell may step several messages while an fsync runs: a Ready is processed up to this late.
    drive_delay_ms_max: int = 0
    # Chance that a crash lands inside the Ready sequence (after persisting, before flush or send).
    crash_in_ready_rate: float = 0.0
    # A leader's shell sends its messages while its fsync is still running (Kafka serves followers
    # from the page cache): safe only because the leader counts its *flushed* end toward the high
    # watermark. Followers and voters never do this (a fetch offset and a vote claim durability).
    leader_sends_before_flush: bool = False
    safety_duration_ms: int = 10000
    liveness_duration_ms: int = 20000
    election_timeout_ms: int = 300
    fetch_timeout_ms: int = 600
    request_timeout_ms: int = 400
    fetch_max_wait_ms: int = 200
    election_backoff_max_ms: int = 300
    # KIP-630: snapshot every N applied offsets and clean the log below the snapshot; 0 = never.
    snapshot_every_records: int = 0
    # The controller and MetadataImage on top of every node: proposals are the active controller's
    # records (activation, broker registrations, producer-ID blocks, topics); False = opaque records.
    metadata: bool = True
    # KIP-853: kraft.version 1, the first ``voter_count`` nodes start from a bootstrap voter set, the
    # others join as observers; every ``voter_change_interval_ms`` (mean; 0 = never) the leader adds
    # an observer or removes a voter, one change at a time.
    dynamic_quorum: bool = False
    voter_change_interval_ms: int = 0

    @staticmethod
    def swarm(rng: random.Random) -> SimOptions:
        """Pick every fault knob from the seed (swarm testing)."""
        return SimOptions(
            voter_count=rng.choice([1, 3, 3, 3, 5]),
            observer_count=rng.choice([0, 0, 0, 1, 2]),
            drop_rate=rng.choice([0.0, 0.02, 0.1, 0.2]),
            duplicate_rate=rng.choice([0.0, 0.02, 0.1]),
            delay_ms_min=1,
            delay_ms_max=rng.choice([5, 20, 80]),
            crash_interval_ms=rng.choice([0, 1500, 4000]),
            partition_interval_ms=rng.choice([0, 2000, 5000]),
            propose_interval_ms=rng.choice([20, 50, 150]),
            drive_delay_ms_max=rng.choice([0, 0, 5, 30]),
            crash_in_ready_rate=rng.choice([0.0, 0.0, 0.002, 0.01]),
            snapshot_every_records=rng.choice([0, 0, 8, 30]),
            leader_sends_before_flush=rng.random() < 0.5,
            safety_duration_ms=SWARM_SAFETY_DURATION_MS,
        )


@dataclass
class SimNode:
    node_id: int
    log: MemoryRaftLog = field(default_factory=MemoryRaftLog)
    persisted: bytes | None = None
    node: RaftNode | None = None
    incarnation: int = 0
    next_tick_ms: int | None = None
    drive_pending: bool = False
    # Lifetime state for the invariants.
    last_high_watermark: int = 0
    max_epoch: int = 0  # in this lifetime
    max_persisted_epoch: int = 0  # across restarts
    applied_end_offset: int = 0
    led_epochs: set[int] = field(default_factory=set)
    chain_batches: list[StoredBatch] = field(default_factory=list)
    chain_digests: list[bytes] = field(default_factory=list)
    # The chain starts at a batch other than offset 0 (the log was cleaned or a snapshot installed).
    chain_seeded: bool = False
    # KIP-630: frozen snapshots survive crashes; the state machine is a digest of what it applied.
    snapshots: MemorySnapshotStore = field(default_factory=MemorySnapshotStore)
    state_digest: bytes = b""
    last_applied_epoch: int = 0
    # The controller and image of this lifetime (SimOptions.metadata).
    meta: NodeMetadata | None = None


class World:
    def __init__(self, seed: int, options: SimOptions | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.options = options if options is not None else SimOptions.swarm(self.rng)
        self.now_ms = 0
        self._events: list[tuple[int, int, str, Any]] = []
        self._sequence = 0
        self.voter_ids = frozenset(range(1, self.options.voter_count + 1))
        observer_ids = range(
            self.options.voter_count + 1, self.options.voter_count + 1 + self.options.observer_count
        )
        self.nodes = {node_id: SimNode(node_id) for node_id in [*sorted(self.voter_ids), *observer_ids]}
        self.blocked: set[tuple[int, int]] = set()
        self.drop_rate = self.options.drop_rate
        self.duplicate_rate = self.options.duplicate_rate
        self.faults_enabled = True
        self.proposals_enabled = True
        self.event_count = 0
        self.trace: list[str] = []
        # Global registries for the invariants.
        self.leader_by_epoch: dict[int, int] = {}
        self.committed_bytes: dict[int, bytes] = {}
        self.committed_end_offset = 0
        self.applied: dict[int, tuple[int, int, tuple[bytes, ...]]] = {}
        self.chain_registry: dict[tuple[int, int], bytes] = {}
        self.batch_registry: dict[tuple[int, int], bytes] = {}
        self.state_at: dict[int, bytes] = {}
        self.snapshots_installed = 0
        self.proposal_counter = 0
        self.metadata_invariants = MetadataInvariants()
        self.refusals_delivered = 0
        # Scripted scenarios only: links whose messages wait for ``release`` (with the destination's
        # incarnation when sent), and nodes whose background fsync hangs until they crash.
        self.held_links: set[tuple[int, int]] = set()
        self.held: list[tuple[int, Outbound, int]] = []
        self.stalled_fsync_node_ids: set[int] = set()
        # KIP-853 (SimOptions.dynamic_quorum): changes made, and every (offset, voter set) seen in a log.
        self.voter_changes = 0
        self.voter_records_seen: set[tuple[int, frozenset[int]]] = set()
        for sim_node in self.nodes.values():
            self._start(sim_node)
        self._schedule(self.options.propose_interval_ms, "propose", None)
        if self.options.crash_interval_ms:
            self._schedule(self._exp(self.options.crash_interval_ms), "crash", None)
        if self.options.partition_interval_ms:
            self._schedule(self._exp(self.options.partition_interval_ms), "partition", None)
        if self.options.voter_change_interval_ms:
            self._schedule(self._exp(self.options.voter_change_interval_ms), "voter_change", None)

    def describe(self) -> str:
        return f"SEED={self.seed} options={self.options}"

    # --- events --------------------------------------------------------------------------------

    def _exp(self, mean_ms: int) -> int:
        return max(1, int(self.rng.expovariate(1.0 / mean_ms)))

    def _schedule(self, delay_ms: int, kind: str, payload: Any) -> None:
        self._sequence += 1
        heapq.heappush(self._events, (self.now_ms + delay_ms, self._sequence, kind, payload))

    def run_until(self, end_ms: int, stop: Any = None) -> bool:
        """Process events up to ``end_ms``; returns True as soon as ``stop()`` holds."""
        while self._events and self._events[0][0] <= end_ms:
            time_ms, _seq, kind, payload = heapq.heappop(self._events)
            self.now_ms = time_ms
            self.event_count += 1
            getattr(self, f"_on_{kind}")(payload)
            if stop is not None and stop():
                return True
        self.now_ms = max(self.now_ms, end_ms)
        return stop is not None and bool(stop())

    def _on_deliver(self, payload: tuple[int, int, Inbound]) -> None:
        destination_id, incarnation, inbound = payload
        sim_node = self.nodes[destination_id]
        if sim_node.node is None or sim_node.incarnation != incarnation:
            return
        sim_node.node.step(inbound, self.now_ms)
        self._after_input(sim_node)

    def _on_flushed(self, payload: tuple[int, int, int]) -> None:
        node_id, incarnation, offset = payload
        sim_node = self.nodes[node_id]
        if sim_node.node is None or sim_node.incarnation != incarnation:
            return  # crashed first: the unflushed tail is gone
        sim_node.log.flush(offset)
        sim_node.node.flush_completed(offset, self.now_ms)
        self._after_input(sim_node)

    def _on_refused(self, payload: tuple[int, int, int, int]) -> None:
        source_id, incarnation, destination_id, correlation_id = payload
        sim_node = self.nodes[source_id]
        if sim_node.node is None or sim_node.incarnation != incarnation:
            return
        self.refusals_delivered += 1
        sim_node.node.request_failed(destination_id, correlation_id, self.now_ms, refused=True)
        self._after_input(sim_node)

    def _on_tick(self, payload: tuple[int, int]) -> None:
        node_id, incarnation = payload
        sim_node = self.nodes[node_id]
        if (
            sim_node.node is None
            or sim_node.incarnation != incarnation
            or sim_node.next_tick_ms != self.now_ms
        ):
            return
        sim_node.next_tick_ms = None
        sim_node.node.tick(self.now_ms)
        self._after_input(sim_node)

    def _on_propose(self, _payload: None) -> None:
        if self.proposals_enabled:
            leaders = [s for s in self.nodes.values() if s.node is not None and s.node.role == Role.LEADER]
            if leaders:
                self.propose(self.rng.choice(leaders))
        self._schedule(self.options.propose_interval_ms, "propose", None)

    def propose(self, sim_node: SimNode) -> tuple[int, int] | None:
        """Propose 1-3 records on ``sim_node``; returns (epoch, last_offset) when it accepted them."""
        assert sim_node.node is not None
        self.proposal_counter += 1
        if sim_node.meta is not None:
            meta = sim_node.meta
            if not meta.active and not meta.can_activate(sim_node.node):
                return None  # not the active controller yet: nothing to write
            # KIP-1262: every activating leader offers its own freshly minted id; only the first sticks.
            minted = f"cluster-{self.rng.getrandbits(32):08x}"
            # Some operations write nothing (a heartbeat that changes no state): pick another.
            for _ in range(20):
                records = meta.generate(sim_node.node, self.rng, minted)
                if records:
                    break
            else:
                return None
        else:
            count = self.rng.randint(1, 3)
            records = [f"s{self.seed}-p{self.proposal_counter}-{i}".encode() for i in range(count)]
        epoch = sim_node.node.epoch
        last_offset = sim_node.node.propose(records, self.now_ms)
        self._after_input(sim_node)
        return None if last_offset is None else (epoch, last_offset)

    def _on_crash(self, _payload: None) -> None:
        if self.faults_enabled:
            alive = [s for s in self.nodes.values() if s.node is not None]
            if alive:
                victim = self.rng.choice(alive)
                self.crash(victim)
                self._schedule(
                    self.rng.randint(1, self.options.restart_delay_ms_max), "restart", victim.node_id
                )
            self._schedule(self._exp(self.options.crash_interval_ms), "crash", None)

    def _on_restart(self, node_id: int) -> None:
        sim_node = self.nodes[node_id]
        if sim_node.node is None:
            self._start(sim_node)

    def _on_partition(self, _payload: None) -> None:
        if not self.faults_enabled:
            return
        ids = sorted(self.nodes)
        side = {node_id for node_id in ids if self.rng.random() < 0.5}
        one_way = self.rng.random() < 0.2
        for a in ids:
            for b in ids:
                if (a in side) != (b in side) and (not one_way or a in side):
                    self.blocked.add((a, b))
        self.trace.append(f"{self.now_ms}: partition {sorted(side)} one_way={one_way}")
        self._schedule(self.rng.randint(1, self.options.partition_duration_ms_max), "heal", None)
        self._schedule(self._exp(self.options.partition_interval_ms), "partition", None)

    def _on_heal(self, _payload: None) -> None:
        self.blocked.clear()

    def _on_voter_change(self, _payload: None) -> None:
        """KIP-853: the leader adds an observer or removes a voter; the core refuses a change while
        another is uncommitted or before it committed in its epoch (REQUEST_TIMED_OUT)."""
        self._schedule(self._exp(self.options.voter_change_interval_ms), "voter_change", None)
        if not self.faults_enabled:
            return
        leader = self.current_leader()
        if leader is None or leader.node is None:
            return
        node = leader.node
        voters = node.voter_ids
        if len(voters) > 1 and (self.rng.random() < 0.5 or voters == frozenset(self.nodes)):
            voter_id = self.rng.choice(sorted(voters))
            change = node.remove_voter(voter_id, sim_voter(voter_id).directory_id, self.now_ms)
            what = f"remove {voter_id}"
        else:
            candidates = sorted(set(self.nodes) - voters)
            if not candidates:
                return
            voter_id = self.rng.choice(candidates)
            change = node.add_voter(sim_voter(voter_id), self.now_ms)
            what = f"add {voter_id}"
        self.trace.append(f"{self.now_ms}: leader {node.node_id} {what}: {change.error.name}")
        if change.error == ErrorCode.NONE:
            self.voter_changes += 1
            if leader.meta is not None and leader.meta.active:
                # Raft wrote a control record the active controller does not write itself.
                leader.meta.controller.note_log_end_offset(node.log.end_offset)
            self._after_input(leader)

    # --- scripted steering ---------------------------------------------------------------------

    def hold(self, source_id: int, destination_id: int) -> None:
        """From now on, what ``source_id`` sends to ``destination_id`` waits until ``release``."""
        self.held_links.add((source_id, destination_id))

    def hold_all(self) -> None:
        for a in self.nodes:
            for b in self.nodes:
                if a != b:
                    self.hold(a, b)

    def release(self, source_id: int, destination_id: int, *, copies: int = 1) -> int:
        """Stop holding the link and send what waited on it, in order, each message ``copies`` times;
        returns how many messages were released. A request reaches the destination's current process
        (the sender's channel queued it until it connected); a response meant for an earlier process
        of the destination is lost with that process's connection."""
        self.held_links.discard((source_id, destination_id))
        released = 0
        kept: list[tuple[int, Outbound, int]] = []
        for source, outbound, incarnation in self.held:
            if source != source_id or outbound.destination_id != destination_id:
                kept.append((source, outbound, incarnation))
                continue
            destination = self.nodes[destination_id]
            if is_request(outbound.message):
                incarnation = destination.incarnation
            if destination.node is not None and destination.incarnation == incarnation:
                self._transmit(source_id, outbound, copies)
                released += 1
        self.held = kept
        return released

    def stall_fsync(self, node_id: int) -> None:
        """The node's background fsyncs (``leader_sends_before_flush``) never finish: a hung disk. The
        node keeps running and sending from its page cache until it crashes."""
        self.stalled_fsync_node_ids.add(node_id)

    # --- nodes ---------------------------------------------------------------------------------

    def _start(self, sim_node: SimNode) -> None:
        quorum_state = decode_quorum_state(sim_node.persisted) if sim_node.persisted is not None else None
        sim_node.incarnation += 1
        sim_node.last_high_watermark = 0
        sim_node.max_epoch = sim_node.max_persisted_epoch
        sim_node.applied_end_offset = 0
        sim_node.state_digest = b""
        sim_node.next_tick_ms = None
        sim_node.drive_pending = False
        opts = self.options
        sim_node.meta = NodeMetadata(random.Random(self.rng.getrandbits(64))) if opts.metadata else None
        dynamic: dict[str, Any] = {}
        if opts.dynamic_quorum:
            # Every node can be asked who leads (controller.quorum.bootstrap.servers); the first
            # voters' bootstrap checkpoint holds the initial set (kafka-storage format
            # --initial-controllers), which survives restarts like any snapshot file.
            initial = sim_node.node_id in self.voter_ids
            dynamic = {
                "kraft_version": 1,
                "bootstrap_voters": VoterSet.of([sim_voter(i) for i in self.voter_ids]) if initial else None,
            }
        sim_node.node = RaftNode(
            sim_node.node_id,
            frozenset(self.nodes) if opts.dynamic_quorum else self.voter_ids,
            sim_node.log,
            quorum_state,
            random.Random(self.rng.getrandbits(64)),
            self.now_ms,
            election_timeout_ms=opts.election_timeout_ms,
            fetch_timeout_ms=opts.fetch_timeout_ms,
            request_timeout_ms=opts.request_timeout_ms,
            fetch_max_wait_ms=opts.fetch_max_wait_ms,
            election_backoff_max_ms=opts.election_backoff_max_ms,
            snapshots=sim_node.snapshots,
            **dynamic,
        )
        self.trace.append(f"{self.now_ms}: start node {sim_node.node_id} as {sim_node.node.role.value}")
        self._drive(sim_node)

    def crash(self, sim_node: SimNode) -> None:
        """Lose everything not flushed or persisted."""
        self.trace.append(f"{self.now_ms}: crash node {sim_node.node_id}")
        sim_node.node = None
        self.stalled_fsync_node_ids.discard(sim_node.node_id)
        sim_node.log.lose_unflushed()
        self._check_log_matching(sim_node)

    def restart(self, sim_node: SimNode) -> None:
        if sim_node.node is not None:
            self.crash(sim_node)
        self._start(sim_node)

    def heal_and_restart_all(self) -> None:
        self.faults_enabled = False
        self.blocked.clear()
        self.held_links.clear()
        self.held.clear()
        self.stalled_fsync_node_ids.clear()
        self.drop_rate = 0.0
        self.duplicate_rate = 0.0
        for sim_node in self.nodes.values():
            if sim_node.node is None:
                self._start(sim_node)

    def _after_input(self, sim_node: SimNode) -> None:
        """Process the Ready now, or a little later as a shell busy with an fsync would."""
        self._check_node(sim_node)
        delay_ms = self.rng.randint(0, self.options.drive_delay_ms_max) if self.faults_enabled else 0
        if delay_ms == 0:
            self._drive(sim_node)
        elif not sim_node.drive_pending:
            sim_node.drive_pending = True
            self._schedule(delay_ms, "drive", (sim_node.node_id, sim_node.incarnation))

    def _on_drive(self, payload: tuple[int, int]) -> None:
        node_id, incarnation = payload
        sim_node = self.nodes[node_id]
        if sim_node.node is None or sim_node.incarnation != incarnation:
            return
        sim_node.drive_pending = False
        self._drive(sim_node)

    def _crash_in_ready(self, sim_node: SimNode) -> bool:
        if self.faults_enabled and self.rng.random() < self.options.crash_in_ready_rate:
            self.trace.append(f"{self.now_ms}: crash inside the Ready sequence")
            self.crash(sim_node)
            self._schedule(
                self.rng.randint(1, self.options.restart_delay_ms_max), "restart", sim_node.node_id
            )
            return True
        return False

    def _drive(self, sim_node: SimNode) -> None:
        node = sim_node.node
        assert node is not None
        for _ in range(READY_LOOP_MAX):
            if not node.has_ready():
                break
            ready = node.ready()
            if ready.quorum_state is not None:
                if ready.quorum_state.leader_epoch < sim_node.max_persisted_epoch:
                    self._fail(f"node {sim_node.node_id} persisted an older epoch {ready.quorum_state}")
                sim_node.max_persisted_epoch = ready.quorum_state.leader_epoch
                sim_node.persisted = encode_quorum_state(ready.quorum_state)
            if self._crash_in_ready(sim_node):
                return
            background_flush = self.options.leader_sends_before_flush and ready.role == Role.LEADER
            if background_flush:
                # Send now; the fsync finishes a little later (flush_completed), or never if a crash
                # comes first.
                for outbound in ready.messages:
                    self._send(sim_node.node_id, outbound)
                if ready.flush_to_offset is not None and sim_node.node_id not in self.stalled_fsync_node_ids:
                    fsync_ms = self.rng.randint(1, max(1, self.options.drive_delay_ms_max))
                    payload = (sim_node.node_id, sim_node.incarnation, ready.flush_to_offset)
                    self._schedule(fsync_ms, "flushed", payload)
            else:
                if ready.flush_to_offset is not None:
                    sim_node.log.flush(ready.flush_to_offset)
                if self._crash_in_ready(sim_node):
                    return
                for outbound in ready.messages:
                    self._send(sim_node.node_id, outbound)
            if ready.load_snapshot is not None:
                self._load_snapshot(sim_node, ready.load_snapshot)
            for batch in ready.committed:
                self._apply(sim_node, batch)
            node.advance(ready, self.now_ms, flush_done=not background_flush)
            if sim_node.meta is not None:
                sim_node.meta.after_ready(node)
            self._maybe_snapshot(sim_node)
        else:
            raise InvariantViolation(f"node {sim_node.node_id}: the Ready loop did not settle")
        self._check_node(sim_node)
        deadline_ms = max(node.next_deadline_ms(), self.now_ms + 1)
        if sim_node.next_tick_ms is None or deadline_ms < sim_node.next_tick_ms:
            sim_node.next_tick_ms = deadline_ms
            self._schedule(deadline_ms - self.now_ms, "tick", (sim_node.node_id, sim_node.incarnation))

    def _send(self, source_id: int, outbound: Outbound) -> None:
        destination_id = outbound.destination_id
        if (source_id, destination_id) in self.held_links:
            self.held.append((source_id, outbound, self.nodes[destination_id].incarnation))
            return
        if destination_id not in self.nodes or (source_id, destination_id) in self.blocked:
            return
        if self.nodes[destination_id].node is None and is_request(outbound.message):
            # Nothing listens where a crashed node was: the shell's connect is refused (request_failed).
            delay_ms = self.rng.randint(self.options.delay_ms_min, self.options.delay_ms_max)
            source = self.nodes[source_id]
            self._schedule(
                delay_ms, "refused", (source_id, source.incarnation, destination_id, outbound.correlation_id)
            )
            return
        copies = 0 if self.rng.random() < self.drop_rate else 1
        if copies and self.rng.random() < self.duplicate_rate:
            copies = 2
        self._transmit(source_id, outbound, copies)

    def _transmit(self, source_id: int, outbound: Outbound, copies: int) -> None:
        destination_id = outbound.destination_id
        inbound = Inbound(source_id, outbound.message, outbound.correlation_id)
        incarnation = self.nodes[destination_id].incarnation
        for _ in range(copies):
            delay_ms = self.rng.randint(self.options.delay_ms_min, self.options.delay_ms_max)
            self._schedule(delay_ms, "deliver", (destination_id, incarnation, inbound))

    # --- invariants ----------------------------------------------------------------------------

    def _fail(self, message: str) -> None:
        tail = "\n".join(self.trace[-30:])
        raise InvariantViolation(f"{self.describe()} t={self.now_ms}ms: {message}\n{tail}")

    def _apply(self, sim_node: SimNode, batch: CommittedBatch) -> None:
        if batch.base_offset != sim_node.applied_end_offset:
            self._fail(
                f"node {sim_node.node_id} applied {batch.base_offset}, expected {sim_node.applied_end_offset}"
            )
        value = (batch.last_offset, batch.epoch, batch.records)
        first = self.applied.setdefault(batch.base_offset, value)
        if first != value:
            self._fail(
                f"node {sim_node.node_id} applied {value} at {batch.base_offset}, others applied {first}"
            )
        sim_node.applied_end_offset = batch.last_offset + 1
        sim_node.last_applied_epoch = batch.epoch
        sim_node.state_digest = hashlib.blake2b(
            sim_node.state_digest + repr(value).encode(), digest_size=16
        ).digest()
        first_state = self.state_at.setdefault(sim_node.applied_end_offset, sim_node.state_digest)
        if first_state != sim_node.state_digest:
            self._fail(f"node {sim_node.node_id} state at {sim_node.applied_end_offset} differs")
        if sim_node.meta is not None:
            try:
                applied = sim_node.meta.apply(batch)
                self.metadata_invariants.check_applied(sim_node.node_id, sim_node.meta, applied)
            except MetadataViolation as exc:
                self._fail(str(exc))

    def _load_snapshot(self, sim_node: SimNode, snapshot_id: Any) -> None:
        contents = read_snapshot(sim_node.snapshots.get(snapshot_id))
        digest = contents.values[0]
        if sim_node.meta is not None:
            try:
                sim_node.meta.load_snapshot(list(contents.values[1:]), snapshot_id.offset, snapshot_id.epoch)
                self.metadata_invariants.check_image(sim_node.node_id, sim_node.meta)
            except MetadataViolation as exc:
                self._fail(str(exc))
        first = self.state_at.setdefault(snapshot_id.offset, digest)
        if first != digest:
            self._fail(
                f"node {sim_node.node_id} loaded snapshot {tuple(snapshot_id)} != the state applied there"
            )
        sim_node.state_digest = digest
        sim_node.applied_end_offset = snapshot_id.offset
        sim_node.last_applied_epoch = snapshot_id.epoch
        if snapshot_id.offset > 0:
            self.snapshots_installed += 1
            self.trace.append(f"{self.now_ms}: node {sim_node.node_id} loads snapshot {tuple(snapshot_id)}")

    def _maybe_snapshot(self, sim_node: SimNode) -> None:
        every = self.options.snapshot_every_records
        node = sim_node.node
        if not every or node is None:
            return
        latest = node.latest_snapshot_id()
        if sim_node.applied_end_offset - (latest.offset if latest else 0) < every:
            return
        from pykraft.raft.messages import OffsetAndEpoch

        snapshot_id = OffsetAndEpoch(sim_node.applied_end_offset, sim_node.last_applied_epoch)
        if node.validate_new_snapshot_id(snapshot_id):
            values = [sim_node.state_digest]
            if sim_node.meta is not None:
                values += image_snapshot_values(sim_node.meta.image)
            data = write_snapshot(
                snapshot_id,
                values,
                last_contained_log_timestamp=0,
                now_ms=self.now_ms,
                kraft_records=node.kraft_control_records(snapshot_id.offset),
            )
            sim_node.snapshots.write(snapshot_id, data)
            # Retention 0 bytes: the log start moves to the latest snapshot at once.
            node.maybe_clean(self.now_ms, retention_bytes=0, retention_ms=-1)
            self._check_log_matching(sim_node)

    def _check_node(self, sim_node: SimNode) -> None:
        node = sim_node.node
        assert node is not None
        if node.epoch < sim_node.max_epoch:
            self._fail(f"node {sim_node.node_id} epoch went back {sim_node.max_epoch} -> {node.epoch}")
        sim_node.max_epoch = node.epoch
        if node.role == Role.LEADER:
            leader_id = self.leader_by_epoch.setdefault(node.epoch, node.node_id)
            if leader_id != node.node_id:
                self._fail(f"two leaders in epoch {node.epoch}: {leader_id} and {node.node_id}")
            if node.epoch not in sim_node.led_epochs:
                if not node.may_campaign:
                    # Only a voter, or one an uncommitted change removes (KIP-853), may be elected.
                    self._fail(f"node {node.node_id} leads epoch {node.epoch} but is not a voter")
                sim_node.led_epochs.add(node.epoch)
                self.trace.append(f"{self.now_ms}: node {node.node_id} leads epoch {node.epoch}")
                self._check_leader_completeness(sim_node)
        self._check_log_matching(sim_node)
        self._check_high_watermark(sim_node)
        if self.options.dynamic_quorum:
            self._check_voter_sets(sim_node)

    def _check_voter_sets(self, sim_node: SimNode) -> None:
        """KIP-853: consecutive voter sets in a log differ by one voter at most, and a VotersRecord
        was appended only after the one before it committed: when it first shows up anywhere, some
        node's high watermark has already passed the previous one."""
        node = sim_node.node
        assert node is not None
        previous: tuple[int, frozenset[int]] | None = None
        for offset, voters in node.voter_history.voter_entries():
            ids = voters.ids
            if previous is not None:
                previous_offset, previous_ids = previous
                if len(previous_ids ^ ids) > 1:
                    self._fail(
                        f"node {sim_node.node_id}: voter set {sorted(previous_ids)} -> {sorted(ids)} at {offset}"
                    )
                if (
                    offset,
                    ids,
                ) not in self.voter_records_seen and self.committed_end_offset <= previous_offset:
                    self._fail(
                        f"node {sim_node.node_id}: voter change at {offset} appended before the one at "
                        f"{previous_offset} committed"
                    )
            self.voter_records_seen.add((offset, ids))
            previous = (offset, ids)

    def _check_leader_completeness(self, sim_node: SimNode) -> None:
        held = {batch.base_offset: batch.data for batch in sim_node.log.batches()}
        start_offset = sim_node.log.start_offset
        latest = sim_node.snapshots.snapshot_ids()
        for base_offset, data in self.committed_bytes.items():
            if read_batch_header(data).last_offset < start_offset:
                # Below the log start: the snapshot there covers it (checked when it is loaded).
                if not latest or latest[-1].offset < start_offset:
                    self._fail(f"leader {sim_node.node_id} log starts at {start_offset} with no snapshot")
                continue
            if held.get(base_offset) != data:
                self._fail(f"leader {sim_node.node_id} lacks committed batch at {base_offset}")

    def _check_log_matching(self, sim_node: SimNode) -> None:
        # Only the flushed prefix: a batch that was neither flushed nor sent never existed, and a
        # leader that crashes before persisting its leadership may lead the same epoch again.
        # (Batches a leader sends unflushed are checked once a follower flushes them.)
        batches = sim_node.log.batches()
        flushed_count = len(batches)
        while flushed_count and batches[flushed_count - 1].last_offset >= sim_node.log.flushed_offset:
            flushed_count -= 1
        del batches[flushed_count:]
        old, old_digests = sim_node.chain_batches, sim_node.chain_digests
        if batches and old and old[0] is not batches[0]:
            # Cleaning dropped the front of the log: the chain goes on from the first kept batch.
            front = next((k for k, b in enumerate(old) if b is batches[0]), None)
            if front is None:
                old, old_digests = [], []
            else:
                old, old_digests = old[front:], old_digests[front:]
        if not old:
            sim_node.chain_seeded = bool(batches) and batches[0].base_offset > 0
        same = min(len(old), len(batches))
        while same > 0 and old[same - 1] is not batches[same - 1]:
            same -= 1
        digests = old_digests[:same]
        for batch in batches[same:]:
            data_digest = hashlib.blake2b(batch.data, digest_size=16).digest()
            if self.batch_registry.setdefault((batch.base_offset, batch.epoch), data_digest) != data_digest:
                self._fail(
                    f"log matching: node {sim_node.node_id} batch ({batch.base_offset}, {batch.epoch}) differs"
                )
            previous = digests[-1] if digests else b""
            digest = hashlib.blake2b(previous + batch.data, digest_size=16).digest()
            if sim_node.chain_seeded:
                digests.append(digest)  # a suffix of the log: checked batch by batch only
                continue
            first = self.chain_registry.setdefault((batch.base_offset, batch.epoch), digest)
            if first != digest:
                self._fail(
                    f"log matching: node {sim_node.node_id} batch ({batch.base_offset}, epoch {batch.epoch}) "
                    "differs, or follows a different log, from the same batch elsewhere"
                )
            digests.append(digest)
        sim_node.chain_batches = batches
        sim_node.chain_digests = digests

    def _check_high_watermark(self, sim_node: SimNode) -> None:
        node = sim_node.node
        assert node is not None
        high_watermark = node.high_watermark
        if high_watermark < sim_node.last_high_watermark:
            self._fail(f"node {sim_node.node_id} high watermark went back to {high_watermark}")
        if high_watermark > sim_node.log.end_offset:
            self._fail(f"node {sim_node.node_id} high watermark {high_watermark} > log end")
        if high_watermark > sim_node.last_high_watermark:
            for batch in sim_node.log.batches():
                if batch.base_offset >= high_watermark:
                    break
                if batch.last_offset < sim_node.last_high_watermark:
                    continue
                first = self.committed_bytes.setdefault(batch.base_offset, batch.data)
                if first != batch.data:
                    self._fail(f"committed batch at {batch.base_offset} changed on node {sim_node.node_id}")
            self.committed_end_offset = max(self.committed_end_offset, high_watermark)
        sim_node.last_high_watermark = high_watermark

    # --- liveness ------------------------------------------------------------------------------

    def current_leader(self) -> SimNode | None:
        leaders = [s for s in self.nodes.values() if s.node is not None and s.node.role == Role.LEADER]
        return max(leaders, key=lambda s: s.node.epoch if s.node else -1, default=None)

    def converged(self, target: list[tuple[int, int] | None]) -> bool:
        """Every node follows one leader and has applied a batch proposed in the leader's epoch."""
        leader = self.current_leader()
        if leader is None or leader.node is None:
            return False
        epoch = leader.node.epoch
        if target[0] is None or target[0][0] != epoch:
            target[0] = self.propose(leader)
            return False
        _epoch, last_offset = target[0]
        for sim_node in self.nodes.values():
            if self.options.dynamic_quorum and sim_node.node_id not in leader.node.voter_ids:
                # KIP-853 without pre-vote (KIP-996): a replica whose log holds a stale voter set may
                # campaign at ever higher epochs among its stale set and pull non-voters with it;
                # they never take a lower-epoch leader again. Only the leader's voters must converge.
                continue
            node = sim_node.node
            if node is None or node.epoch != epoch or node.leader_id != leader.node_id:
                return False
            if node.high_watermark <= last_offset or sim_node.applied_end_offset != node.high_watermark:
                return False
        return True


def run_seed(seed: int, options: SimOptions | None = None) -> World:
    """Safety phase with every fault on, then a liveness phase: heal, restart, require convergence."""
    world = World(seed, options)
    world.run_until(world.options.safety_duration_ms)
    world.heal_and_restart_all()
    world.proposals_enabled = False
    target: list[tuple[int, int] | None] = [None]
    deadline_ms = world.now_ms + world.options.liveness_duration_ms
    if not world.run_until(deadline_ms, lambda: world.converged(target)):
        world._fail("liveness: the healed cluster did not converge on one leader and commit")
    return world


def sim_voter(node_id: int) -> Voter:
    """A simulated controller's voter key: its id and a directory id fixed by the id."""
    return Voter(node_id, node_id.to_bytes(16, "big"), (Endpoint("CONTROLLER", "127.0.0.1", 9000 + node_id),))
