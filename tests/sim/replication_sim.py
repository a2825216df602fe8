"""Deterministic simulation of partition replication (issue 14): the real pure cores — ReplicaManager
with its PartitionReplication and LeaderEpochCache on in-memory logs, and the QuorumController's
AlterPartition, fencing and election — driven from one seed through message delay and loss, stale
metadata, broker crashes and restarts, with acks=all producers.

The controller is one in-process QuorumController (its own failover is the raft simulation's job). A
broker learns partition state from "metadata" that reaches it late; replica Fetch requests and answers,
AlterPartition requests and answers, and produce requests travel with random delay and loss. A crashed
broker keeps its log (what it appended is on disk) and comes back as a new incarnation: the controller
fenced it, elected a leader from the ISR, and unfences it when it registers again.

With ``reassign``, a fourth broker is registered and the partition is reassigned now and then to three
random brokers of the four, or its reassignment cancelled (KIP-455): adding replicas catch up as
followers, the AlterPartition taking in the last one completes the move, and a broker that learns it is
no longer a replica deletes its log (as a real one does), starting empty if it is added again.

Invariants, after every event:
  1. nothing below a high watermark is ever lost or changed: every batch that was below some leader's
     high watermark is, at the same offsets with the same epoch and CRC, in every later leader's log and
     in every replica's log below that replica's high watermark;
  2. an acks=all produce is acknowledged only for batches below the high watermark (so by 1 never lost);
  3. at most one broker appends as leader in each leader epoch.
Every failure names ``SEED=n``; ``SEED=n pytest tests/sim/test_sim_replication.py`` replays it.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pykraft.broker.replica_manager import Partition, ReplicaManager
from pykraft.broker.replication import IsrProposal
from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replication import CreatableTopic, IsrChangeRequest, ReassignableTopic
from pykraft.core.errors import ErrorCode
from pykraft.log.partition_log import LogConfig
from pykraft.metadata.image import BrokerEndpoint, PartitionRegistration
from pykraft.protocol.records import Record, build_batch
from tests.unit.test_producer_snapshot import MemoryOpener

from .events import EventQueue

TOPIC = "t"
BROKERS = (1, 2, 3)
SPARE_BROKER = 4  # registered when reassignments run, a replica only once a reassignment adds it
LAG_MS = 400
SESSION_MS = 300
STEP_MS = 5
PRODUCER_ID = 42

BatchId = tuple[int, int, int, int]  # base offset, last offset, leader epoch, crc


@dataclass
class Broker:
    broker_id: int
    opener: MemoryOpener
    rm: ReplicaManager
    part: Partition
    alive: bool = True
    broker_epoch: int = -1
    fetch_token: int = 0  # the fetch in flight (0: none); answers to any other are dropped
    alter_in_flight: bool = False
    last_contact_ms: int = 0
    # Its log or high watermark may have changed since the invariants last looked at it.
    dirty: bool = True
    # The invariants' incremental view of its log: its batches, read up to cached_end, the first
    # ``verified`` of them checked; ``rescan`` after a truncation.
    batches: list[BatchId] = field(default_factory=list)
    cached_end: int = 0
    cached_rm: object = None
    verified: int = 0
    rescan: bool = False


class ReplicationWorld:
    def __init__(self, seed: int, *, steps: int = 1500, reassign: bool = False) -> None:
        self.seed = seed
        self.reassign = reassign
        self.reassignments = 0  # started or cancelled, for the tests to see the runs did some
        self.rng = random.Random(seed)
        self.steps = steps
        self.now_ms = 0
        self.events = EventQueue()
        self.loss = self.rng.choice((0.0, 0.05, 0.2))
        self.max_delay_ms = self.rng.choice((1, 10, 50))
        self.crash_rate = self.rng.choice((0.0, 0.002, 0.01))
        self.controller = QuorumController(rng=random.Random(seed), default_replication_factor=3)
        self.controller.activate()
        self.brokers: dict[int, Broker] = {}
        for broker_id in BROKERS:
            opener = MemoryOpener()
            rm = self._replica_manager(opener)
            part = rm.ensure_partition(TOPIC, 0, 0, replicated=True, broker_id=broker_id)
            self.brokers[broker_id] = Broker(broker_id, opener, rm, part)
            self._register(broker_id)
        created = self.controller.create_topics([CreatableTopic(name=TOPIC, assignments={0: BROKERS})])
        if reassign:
            opener = MemoryOpener()
            rm = self._replica_manager(opener)
            part = rm.ensure_partition(TOPIC, 0, 0, replicated=True, broker_id=SPARE_BROKER)
            self.brokers[SPARE_BROKER] = Broker(SPARE_BROKER, opener, rm, part)
            self._register(SPARE_BROKER)
        topic_id = created.response[0].topic_id
        assert topic_id is not None
        self.topic_id: uuid.UUID = topic_id
        # Invariant state.
        self.committed: dict[int, BatchId] = {}  # base offset -> batch, for every batch ever below a HW
        self.committed_end = 0
        self.leader_of_epoch: dict[int, int] = {}
        self.acked: list[tuple[int, int]] = []  # (broker, last offset) acknowledged with acks=all
        self.pending_acks: list[tuple[Broker, int, int]] = []  # (leader, leader epoch, last offset)
        self.sequence = 0

    # --- setup --------------------------------------------------------------------------------------

    @staticmethod
    def _replica_manager(opener: MemoryOpener) -> ReplicaManager:
        config = LogConfig(segment_bytes=600, retention_ms=-1, retention_bytes=-1)
        return ReplicaManager(opener, config, producer_id_expiration_ms=1 << 40)

    def _register(self, broker_id: int) -> None:
        endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, 0)
        result = self.controller.register_broker(
            broker_id, uuid.UUID(int=self.rng.getrandbits(128)), [endpoint], None, self.now_ms
        )
        broker = self.brokers[broker_id]
        broker.broker_epoch = result.response.broker_epoch
        broker.last_contact_ms = self.now_ms

    def fail(self, message: str) -> None:
        raise AssertionError(
            f"SEED={self.seed} t={self.now_ms}ms loss={self.loss} delay<={self.max_delay_ms}: {message}"
        )

    # --- the network ---------------------------------------------------------------------------------

    def _later(self, action: Callable[[], None], *, lossy: bool = True) -> None:
        if lossy and self.rng.random() < self.loss:
            return
        self.events.at(self.now_ms + self.rng.randint(1, self.max_delay_ms), action)

    def _registration(self) -> PartitionRegistration:
        info = self.controller.replication_control.topic(self.topic_id)
        assert info is not None
        return info.partitions[0]

    # --- run --------------------------------------------------------------------------------------------

    def run(self) -> None:
        for step in range(self.steps):
            self.now_ms += STEP_MS
            self.events.run_due(self.now_ms)
            self._step(healing=step > self.steps * 3 // 4)
            self.check()
        self.check_converged()

    def _step(self, *, healing: bool) -> None:
        rng = self.rng
        for broker in self.brokers.values():
            if not broker.alive:
                if rng.random() < 0.02 or healing:
                    self._restart(broker)
                continue
            if not healing and rng.random() < self.crash_rate:
                broker.alive = False
                continue
            broker.last_contact_ms = self.now_ms  # heartbeats (the controller side of KIP-631)
            if rng.random() < 0.3:
                self._propagate_metadata(broker)
            if not broker.fetch_token:
                self._fetch(broker)
            self._maybe_alter_isr(broker)
        self._fence_expired()
        if self.reassign and not healing and rng.random() < 0.01:
            self._alter_reassignment()
        if not healing and rng.random() < 0.4:
            self._produce()
        self._complete_acks()

    # --- controller ---------------------------------------------------------------------------------

    def _fence_expired(self) -> None:
        expired = [
            b.broker_id
            for b in self.brokers.values()
            if not b.alive and self.now_ms - b.last_contact_ms > SESSION_MS
        ]
        if expired:
            self.controller.fence_brokers(expired)

    def _restart(self, broker: Broker) -> None:
        """A new incarnation over the same (persisted) log; registers fenced, unfenced once caught up."""
        broker.rm = self._replica_manager(broker.opener)
        broker.part = broker.rm.ensure_partition(
            TOPIC, 0, self.now_ms, replicated=True, broker_id=broker.broker_id
        )
        broker.alive = True
        broker.dirty = True
        broker.fetch_token = 0
        broker.alter_in_flight = False
        self.controller.fence_brokers([broker.broker_id])
        endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker.broker_id, 0)
        result = self.controller.register_broker(
            broker.broker_id,
            uuid.UUID(int=self.rng.getrandbits(128)),
            [endpoint],
            None,
            self.now_ms,
            unfence=False,
        )
        broker.broker_epoch = result.response.broker_epoch
        self.controller.broker_heartbeat(
            broker.broker_id, broker.broker_epoch, current_metadata_offset=1 << 40
        )
        broker.last_contact_ms = self.now_ms

    def _alter_reassignment(self) -> None:
        """A move of the partition to three random brokers of the four, or (a third of the time) a
        cancel; refusals (nothing to cancel) change nothing."""
        target = None if self.rng.random() < 0.3 else tuple(self.rng.sample(sorted(self.brokers), 3))
        result = self.controller.alter_partition_reassignments([ReassignableTopic(TOPIC, [(0, target)])])
        if result.records:
            self.reassignments += 1

    def _propagate_metadata(self, broker: Broker) -> None:
        """The partition as the controller has it now reaches the broker later (metadata lag)."""
        registration = self._registration()

        def apply() -> None:
            # A broker applies the metadata log in order: an older snapshot that arrives late is gone.
            if broker.alive and registration.partition_epoch >= broker.part.replication.partition_epoch:
                broker.dirty = True
                broker.rm.apply_partition(
                    broker.part,
                    leader_id=registration.leader,
                    leader_epoch=registration.leader_epoch,
                    partition_epoch=registration.partition_epoch,
                    replicas=registration.replicas,
                    isr=registration.isr,
                    now_ms=self.now_ms,
                )
                self._note_high_watermark(broker)
                if broker.broker_id not in registration.replicas:
                    self._delete_replica(broker, registration.partition_epoch)

        self._later(apply, lossy=False)

    def _delete_replica(self, broker: Broker, partition_epoch: int) -> None:
        """No longer a replica: the log goes (Kafka's StopReplica with delete); an empty one waits in
        case a later reassignment adds the broker again, ignoring metadata older than the removal."""
        if broker.part.log.log_end_offset == 0 and broker.part.replication.partition_epoch == partition_epoch:
            return
        broker.rm.remove_partition(TOPIC, 0)
        broker.part = broker.rm.ensure_partition(
            TOPIC, 0, self.now_ms, replicated=True, broker_id=broker.broker_id
        )
        broker.part.replication.partition_epoch = partition_epoch
        broker.fetch_token = 0
        broker.rescan = True

    # --- produce ------------------------------------------------------------------------------------------

    def _produce(self) -> None:
        """A client sends to whichever broker it believes leads (possibly stale)."""
        broker = self.brokers[self.rng.choice(sorted(self.brokers))]
        self.sequence += 1
        batch = build_batch([Record(None, b"v%d" % self.sequence)], timestamp_ms=self.now_ms)

        def arrive() -> None:
            if not broker.alive or not broker.part.replication.is_leader:
                return
            part = broker.part
            if len(part.replication.isr) < 2:  # min.insync.replicas=2
                return
            epoch = part.replication.leader_epoch
            broker.dirty = True
            result = broker.rm.append(part, memoryview(bytearray(batch)), self.now_ms)
            if result.error_code != ErrorCode.NONE:
                return
            owner = self.leader_of_epoch.setdefault(epoch, broker.broker_id)
            if owner != broker.broker_id:
                self.fail(f"brokers {owner} and {broker.broker_id} both appended as leader in epoch {epoch}")
            self.pending_acks.append((broker, epoch, result.last_offset))

        self._later(arrive)

    def _complete_acks(self) -> None:
        still = []
        for broker, epoch, last_offset in self.pending_acks:
            part = broker.part
            if not broker.alive or part.replication.leader_epoch != epoch or not part.replication.is_leader:
                continue  # NOT_LEADER_OR_FOLLOWER: the client retries, nothing was promised
            if last_offset < part.log.high_watermark:
                if len(part.replication.isr) >= 2:
                    self.acked.append((broker.broker_id, last_offset))
                continue
            still.append((broker, epoch, last_offset))
        self.pending_acks = still

    # --- replication --------------------------------------------------------------------------------------

    def _fetch(self, follower: Broker) -> None:
        part = follower.part
        leader_id = part.replication.leader_id
        if part.replication.is_leader or leader_id not in self.brokers:
            return
        leader = self.brokers[leader_id]
        token = follower.fetch_token = self.events.seq + 1
        request = (part.log.log_end_offset, part.epochs.latest_epoch, part.replication.leader_epoch)

        def at_leader() -> None:
            if not leader.alive:
                self._later(lambda: self._fetch_failed(follower, token))
                return
            fetch_offset, last_epoch, leader_epoch = request
            leader.dirty = True
            check = leader.rm.check_replica_fetch(
                leader.part, follower.broker_id, fetch_offset, last_epoch, leader_epoch, self.now_ms
            )
            self._note_high_watermark(leader)
            data = b""
            if check.error_code == ErrorCode.NONE and check.diverging_epoch is None:
                read = leader.rm.read_for_replica(leader.part, fetch_offset, 2000)
                data = b"".join(bytes(c) for c in read.chunks)
            answer = (check.error_code, check.diverging_epoch, data, leader.part.log.high_watermark)
            self._later(lambda: self._fetched(follower, token, request[2], *answer))

        self._later(at_leader)
        # A lost request or answer: the follower's fetch times out and it fetches again.
        self.events.at(self.now_ms + 4 * self.max_delay_ms + 20, lambda: self._fetch_failed(follower, token))

    def _fetch_failed(self, follower: Broker, token: int) -> None:
        if follower.fetch_token == token:
            follower.fetch_token = 0

    def _fetched(
        self,
        follower: Broker,
        token: int,
        leader_epoch: int,
        error: ErrorCode,
        diverging: tuple[int, int] | None,
        data: bytes,
        leader_high_watermark: int,
    ) -> None:
        if not follower.alive or follower.fetch_token != token:
            return
        follower.fetch_token = 0
        follower.dirty = True
        part = follower.part
        # An answer for the leadership the request was made under, or none (as the real fetcher).
        if (
            part.replication.is_leader
            or part.replication.leader_epoch != leader_epoch
            or error != ErrorCode.NONE
        ):
            return
        if diverging is not None:
            follower.rm.truncate_for_divergence(part, diverging[0], diverging[1], self.now_ms)
            follower.rescan = True
            return
        if data:
            if follower.rm.append_as_follower(part, data, self.now_ms) != ErrorCode.NONE:
                return  # overlapping answers (a late duplicate): the next fetch resumes from our end
        follower.rm.update_follower_high_watermark(part, leader_high_watermark)
        self._note_high_watermark(follower)

    def _maybe_alter_isr(self, broker: Broker) -> None:
        part = broker.part
        if broker.alter_in_flight or not part.replication.is_leader:
            return
        proposal = part.replication.isr_change(self.now_ms, part.log.high_watermark, LAG_MS)
        if proposal is not None:
            self._send_alter(broker, proposal)

    def _send_alter(self, broker: Broker, proposal: IsrProposal) -> None:
        broker.alter_in_flight = True
        incarnation = broker.rm
        epoch = broker.broker_epoch

        def at_controller() -> None:
            change = IsrChangeRequest(
                self.topic_id, 0, proposal.leader_epoch, proposal.partition_epoch, proposal.new_isr
            )
            result = self.controller.alter_partition(broker.broker_id, epoch, [change])
            error, results = result.response
            outcome = error if error != ErrorCode.NONE else results[0].error_code
            self._later(lambda: self._altered(broker, incarnation, proposal, outcome))

        self._later(at_controller)
        self.events.at(
            self.now_ms + 4 * self.max_delay_ms + 20,
            lambda: self._altered(broker, incarnation, proposal, ErrorCode.REQUEST_TIMED_OUT),
        )

    def _altered(
        self, broker: Broker, incarnation: ReplicaManager, proposal: IsrProposal, error: ErrorCode
    ) -> None:
        if broker.rm is not incarnation or not broker.alter_in_flight:
            return
        broker.alter_in_flight = False
        again = broker.part.replication.isr_change_answered(error, self.now_ms)
        if error == ErrorCode.NONE:
            self._propagate_metadata(broker)
        elif again is not None:
            self._send_alter(broker, again)

    # --- invariants ---------------------------------------------------------------------------------------

    def _refresh(self, broker: Broker) -> list[BatchId]:
        """The broker's batches, read incrementally: appends extend the cached list; a truncation or a
        restart (new incarnation) reads the log again."""
        log = broker.part.log
        if broker.rescan or broker.cached_rm is not broker.rm or log.log_end_offset < broker.cached_end:
            broker.batches, broker.verified = [], 0
            broker.cached_rm, broker.rescan = broker.rm, False
            start = None
        else:
            start = broker.cached_end
        if start is None or start < log.log_end_offset:
            broker.batches.extend(
                (h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc)
                for h in log.batch_headers(start)
                if start is None or h.base_offset >= start
            )
        broker.cached_end = log.log_end_offset
        return broker.batches

    def _note_high_watermark(self, broker: Broker) -> None:
        broker.dirty = True

    def check(self) -> None:
        """Invariant 1 for every broker that changed: batches below its high watermark (its whole log
        when it is the leader) equal what was committed at those offsets; a leader's batches below its
        high watermark become committed."""
        registration = self._registration()
        for broker in self.brokers.values():
            if not broker.dirty:
                continue
            broker.dirty = False
            part = broker.part
            batches = self._refresh(broker)
            leading = part.replication.is_leader and registration.leader == broker.broker_id
            high_watermark = part.log.high_watermark
            limit = part.log.log_end_offset if leading else high_watermark
            i = broker.verified
            while i < len(batches) and batches[i][1] < limit:
                batch = batches[i]
                known = self.committed.get(batch[0])
                if known is None and part.replication.is_leader and batch[1] < high_watermark:
                    self.committed[batch[0]] = known = batch
                    self.committed_end = max(self.committed_end, batch[1] + 1)
                if known is not None and known != batch:
                    self.fail(f"broker {broker.broker_id} holds {batch} where {known} was committed")
                i += 1
            # Only a prefix every batch of which is committed (or below the HW) is done with.
            broker.verified = i if not leading else min(i, self._below(batches, high_watermark))
            if leading and part.replication.leader_epoch == registration.leader_epoch:
                if part.log.log_end_offset < self.committed_end:
                    self.fail(
                        f"leader {broker.broker_id} (epoch {registration.leader_epoch}) ends at "
                        f"{part.log.log_end_offset}, below committed offset {self.committed_end}"
                    )

    @staticmethod
    def _below(batches: list[BatchId], offset: int) -> int:
        n = 0
        while n < len(batches) and batches[n][1] < offset:
            n += 1
        return n

    def check_converged(self) -> None:
        """After healing (no crashes, no new writes, every broker up): every replica holds exactly the
        leader's batches, and every acknowledged offset is committed."""
        registration = self._registration()
        leader = self.brokers.get(registration.leader)
        if leader is None:
            self.fail(f"no leader after healing: {registration}")
        if registration.adding_replicas or registration.removing_replicas:
            self.fail(f"a reassignment is still in progress after healing: {registration}")
        expected = self._refresh(leader)
        for broker in self.brokers.values():
            if broker.broker_id not in registration.replicas:
                continue  # a removed replica deleted its log
            held = self._refresh(broker)
            if held != expected:
                self.fail(
                    f"after healing broker {broker.broker_id} holds {len(held)} batches ending "
                    f"{held[-1:] or None}, the leader {leader.broker_id} {len(expected)} ending {expected[-1:] or None}"
                )
        for _, last_offset in self.acked:
            if not any(b[0] <= last_offset <= b[1] for b in self.committed.values()):
                self.fail(f"acknowledged offset {last_offset} is not committed")


def run_replication_seed(seed: int, **options: Any) -> ReplicationWorld:
    world = ReplicationWorld(seed, **options)
    world.run()
    return world
