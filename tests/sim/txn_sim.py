"""A seeded simulation of transactions: the pure transaction coordinator, its ``__transaction_state``
writes, marker delivery, and the data partitions' logs (ReplicaManager), under lost answers, failed and
half-failed writes, coordinator failovers (a new coordinator replays the log at a higher epoch while the
old one's marker jobs may still arrive), zombie producer instances and transaction timeouts.

After the faults stop and everything in flight is delivered, it checks:

- atomicity: every record of one client transaction has the same fate in every partition (all
  committed or all aborted), read from the logs with the read_committed walk;
- what a client was told holds: a commit that returned success is visible, an abort that returned
  success is not;
- no hanging transaction: every partition's last stable offset is its log end.

No asyncio, no clock but ``now_ms``; a failure prints ``SEED=<n>`` and replays exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pykraft.broker.replica_manager import ReplicaManager
from pykraft.coordinator.txn_coordinator import MarkerJob, TransactionCoordinator, TxnConfig, TxnWrite
from pykraft.core.errors import ErrorCode
from pykraft.log.partition_log import LogConfig
from pykraft.protocol.records import Record, build_batch, committed_batches, decode_records, scan_batches
from tests.unit.test_producer_snapshot import MemoryOpener

TOPIC = "data"
PARTITIONS = 3
TXN_TIMEOUT_MS = 5_000
RETRIABLE = {
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


@dataclass
class Client:
    """One producer instance of a transactional id (a newer one fences it: a zombie)."""

    transactional_id: str
    producer_id: int = -1
    producer_epoch: int = -1
    phase: str = "init"  # init -> idle -> open -> ending -> idle ...; dead once fenced
    txn_uid: int = -1
    added: set[int] = field(default_factory=set)
    sequence: dict[int, int] = field(default_factory=dict)
    ending_commit: bool = False
    waiting: TxnWrite | None = None  # a write whose answer this client waits for


@dataclass
class World:
    seed: int
    rng: random.Random
    now_ms: int = 1_000_000
    log: list[TxnWrite] = field(default_factory=list)  # the replicated __transaction_state records
    pending: list[TxnWrite] = field(default_factory=list)
    jobs: list[tuple[MarkerJob, set[int]]] = field(default_factory=list)
    coordinator_epoch: int = 0
    next_pid: int = 100
    next_txn_uid: int = 0
    told_committed: set[int] = field(default_factory=set)
    told_aborted: set[int] = field(default_factory=set)
    clients: list[Client] = field(default_factory=list)
    faults: bool = True
    # Produce requests still on the network: (client, partition, batch, guard).
    delayed: list[tuple[Client, int, bytearray, object | None]] = field(default_factory=list)
    # The Complete write a finished marker job asked for, so a failed one is asked for again.
    job_writes: dict[int, MarkerJob] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.config = TxnConfig(transaction_state_num_partitions=1, offsets_topic_num_partitions=1)
        self.coordinator = self._load()
        self.replicas = ReplicaManager(
            MemoryOpener(),
            LogConfig(segment_bytes=4096, retention_ms=-1, retention_bytes=-1),
            producer_id_expiration_ms=1 << 40,
        )
        self.parts = [self.replicas.ensure_partition(TOPIC, p, self.now_ms) for p in range(PARTITIONS)]

    # --- the coordinator and its log ------------------------------------------------------------------

    def _load(self) -> TransactionCoordinator:
        coordinator = TransactionCoordinator(self.config)
        coordinator.begin_load(0, self.coordinator_epoch)
        for w in self.log:
            coordinator.replay(0, w.key, w.value)
        for job in coordinator.finish_load(0):
            self.jobs.append((job, {p for _, p in job.partitions}))
        return coordinator

    def failover(self) -> None:
        """The coordinator's broker dies: a write in flight is in the new leader's log or not."""
        for w in self.pending:
            if self.rng.random() < 0.5:
                self.log.append(w)
        self.pending = []
        for c in self.clients:
            c.waiting = None  # their answers are lost; they retry
        self.coordinator_epoch += 1
        self.coordinator = self._load()

    def new_producer_id(self) -> tuple[ErrorCode, int]:
        self.next_pid += 1
        return ErrorCode.NONE, self.next_pid

    def complete_one_write(self) -> None:
        w = self.pending.pop(self.rng.randrange(len(self.pending)))
        roll = self.rng.random() if self.faults else 0.0
        if roll < 0.8:
            self.log.append(w)
            error = ErrorCode.NONE
        elif roll < 0.9:
            self.log.append(w)  # appended and replicated, but the wait for the ISR timed out
            error = ErrorCode.REQUEST_TIMED_OUT
        else:
            error = ErrorCode.NOT_ENOUGH_REPLICAS
        job_done = self.job_writes.pop(id(w), None)
        if job_done is not None and error != ErrorCode.NONE:
            self.jobs.append((job_done, set()))  # the shell asks for the Complete write again
        for job in self.coordinator.complete_write(w, error):
            self.jobs.append((job, {p for _, p in job.partitions}))
        for c in self.clients:
            if c.waiting is w:
                c.waiting = None
                self._answered(c, w, error)

    # --- markers ----------------------------------------------------------------------------------------

    def deliver_one_marker(self) -> None:
        index = self.rng.randrange(len(self.jobs))
        job, remaining = self.jobs[index]
        if remaining:
            p = self.rng.choice(sorted(remaining))
            if self.faults and self.rng.random() < 0.2:
                return  # lost; the coordinator sends it again
            result = self.replicas.append_txn_marker(
                self.parts[p],
                job.producer_id,
                job.producer_epoch,
                job.coordinator_epoch,
                job.commit,
                self.now_ms,
            )
            if result.error_code in (
                ErrorCode.NONE,
                ErrorCode.INVALID_PRODUCER_EPOCH,
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
            ):
                remaining.discard(p)
        if not remaining:
            self.jobs.pop(index)
            if job.coordinator_epoch != self.coordinator_epoch:
                return  # a dead coordinator's job: the new one sent its own
            write = self.coordinator.markers_written(job, self.now_ms)
            if write is not None:
                self.pending.append(write)
                self.job_writes[id(write)] = job

    # --- clients ----------------------------------------------------------------------------------------

    def _answered(self, c: Client, w: TxnWrite, error: ErrorCode) -> None:
        """The client hears the answer to the request that caused ``w`` (lost answers: it does not)."""
        if self.faults and self.rng.random() < 0.1:
            return  # the answer is lost; the client retries the request
        if error != ErrorCode.NONE:
            return  # retriable: it retries
        if w.answer == ErrorCode.CONCURRENT_TRANSACTIONS:
            return
        if c.phase == "init" and w.target is not None:
            c.producer_id, c.producer_epoch = w.target.producer_id, w.target.producer_epoch
            c.phase, c.sequence = "idle", {}
        elif c.phase == "ending":
            (self.told_committed if c.ending_commit else self.told_aborted).add(c.txn_uid)
            c.phase = "idle"

    def _outcome(self, c: Client, error: ErrorCode, write: TxnWrite | None) -> bool:
        """False when the client is done with this step (fenced or a write to wait for)."""
        if error in (
            ErrorCode.PRODUCER_FENCED,
            ErrorCode.INVALID_PRODUCER_EPOCH,
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ):
            c.phase = "dead"
            return False
        if write is not None:
            self.pending.append(write)
            c.waiting = write
            return False
        return error == ErrorCode.NONE

    def step_client(self, c: Client) -> None:
        if c.phase == "dead" or c.waiting is not None:
            return
        coordinator = self.coordinator
        if c.phase == "init":
            outcome = coordinator.init_producer_id(
                c.transactional_id,
                TXN_TIMEOUT_MS,
                c.producer_id,
                c.producer_epoch,
                self.now_ms,
                self.new_producer_id,
            )
            if self._outcome(c, outcome.error_code, outcome.write) and outcome.write is None:
                c.producer_id, c.producer_epoch = outcome.producer_id, outcome.producer_epoch
                c.phase, c.sequence = "idle", {}
            return
        if c.phase == "idle":
            if not self.faults:
                return
            self.next_txn_uid += 1
            c.txn_uid, c.added, c.phase = self.next_txn_uid, set(), "open"
            return
        if c.phase == "open":
            roll = self.rng.random()
            if roll < 0.6 or not c.added:
                self._produce(c, self.rng.randrange(PARTITIONS))
            elif any(d[0] is c for d in self.delayed) and self.rng.random() < 0.7:
                # Abort with produce requests still in flight (a client may; KIP-890's hanging case).
                c.ending_commit, c.phase = False, "ending"
            elif not any(d[0] is c for d in self.delayed):
                c.ending_commit = self.rng.random() < 0.7
                c.phase = "ending"
            return
        if c.phase == "ending":
            outcome = coordinator.end_txn(
                c.transactional_id, c.producer_id, c.producer_epoch, c.ending_commit, self.now_ms
            )
            if self._outcome(c, outcome.error_code, outcome.write):
                (self.told_committed if c.ending_commit else self.told_aborted).add(c.txn_uid)
                c.phase = "idle"
            elif outcome.error_code == ErrorCode.INVALID_TXN_STATE:
                c.phase = (
                    "dead"  # e.g. its transaction was aborted by a timeout: a real client aborts and bumps
                )

    def _produce(self, c: Client, p: int) -> None:
        if p not in c.added:
            outcome = self.coordinator.add_partitions(
                c.transactional_id, c.producer_id, c.producer_epoch, [(TOPIC, p)], self.now_ms
            )
            if self._outcome(c, outcome.error_code, outcome.write) or (
                outcome.error_code == ErrorCode.NONE and outcome.write is None
            ):
                c.added.add(p)
            return
        part = self.parts[p]
        guard = None
        if self.replicas.needs_verification(part, c.producer_id):
            guard = self.replicas.begin_verification(part, c.producer_id)
            error, verdict = self.coordinator.verify_partitions(
                c.transactional_id, c.producer_id, c.producer_epoch, [(TOPIC, p)]
            )
            if error != ErrorCode.NONE or verdict[(TOPIC, p)] != ErrorCode.NONE:
                if error in (ErrorCode.PRODUCER_FENCED,):
                    c.phase = "dead"
                return
            if self.faults and self.rng.random() < 0.3:
                # The verified write is delayed: a marker may land first and void the guard.
                self.deliver_some_markers()
        seq = c.sequence.get(p, 0)
        batch = build_batch(
            [Record(None, b"%d:%d:%d" % (c.txn_uid, p, seq))],
            timestamp_ms=self.now_ms,
            producer_id=c.producer_id,
            producer_epoch=c.producer_epoch,
            base_sequence=seq,
            is_transactional=True,
        )
        if self.faults and self.rng.random() < 0.2:
            # The request is slow on the network; the client counts it as sent.
            self.delayed.append((c, p, batch, guard))
            c.sequence[p] = seq + 1
            return
        result = self.replicas.append(part, memoryview(batch), self.now_ms, verification_guard=guard)
        if result.error_code == ErrorCode.NONE:
            c.sequence[p] = seq + 1
        elif result.error_code == ErrorCode.INVALID_PRODUCER_EPOCH:
            c.phase = "dead"

    def land_one_delayed(self) -> None:
        c, p, batch, guard = self.delayed.pop(self.rng.randrange(len(self.delayed)))
        self.replicas.append(self.parts[p], memoryview(batch), self.now_ms, verification_guard=guard)

    def deliver_some_markers(self) -> None:
        for _ in range(self.rng.randrange(3)):
            if self.jobs:
                self.deliver_one_marker()

    # --- the run ----------------------------------------------------------------------------------------

    def run(self, steps: int) -> None:
        ids = [f"txn-{i}" for i in range(3)]
        self.clients = [Client(t) for t in ids]
        for _ in range(steps):
            self.now_ms += self.rng.randrange(1, 200)
            roll = self.rng.random()
            if roll < 0.004:
                self.failover()
            elif roll < 0.012:
                # A new instance of a transactional id starts (its old process is presumed dead); an
                # old one that already had a producer id and is still working becomes a zombie.
                transactional_id = self.rng.choice(ids)
                self.clients = [
                    c
                    for c in self.clients
                    if not (c.transactional_id == transactional_id and c.phase == "init")
                ]
                self.clients.append(Client(transactional_id))
            elif roll < 0.02:
                for w in self.coordinator.abort_timed_out(self.now_ms):
                    self.pending.append(w)
            elif roll < 0.35 and self.pending:
                self.complete_one_write()
            elif roll < 0.55 and self.jobs:
                self.deliver_one_marker()
            elif roll < 0.62 and self.delayed:
                self.land_one_delayed()
            else:
                client = self.rng.choice(self.clients)
                if client.phase == "dead":
                    # Fenced: it exits; the application restarts one if no instance of its id is left.
                    self.clients.remove(client)
                    if not any(c.transactional_id == client.transactional_id for c in self.clients):
                        self.clients.append(Client(client.transactional_id))
                else:
                    self.step_client(client)
        self.quiesce()

    def quiesce(self) -> None:
        """No more faults: finish every write and marker; time out whatever is still open."""
        self.faults = False
        for _ in range(10_000):
            if self.delayed:
                self.land_one_delayed()
            elif self.pending:
                self.complete_one_write()
            elif self.jobs:
                self.deliver_one_marker()
            else:
                self.now_ms += TXN_TIMEOUT_MS + 1
                timed_out = self.coordinator.abort_timed_out(self.now_ms)
                if not timed_out:
                    return
                self.pending += timed_out
        raise AssertionError(f"SEED={self.seed}: the world never settled")

    # --- the checks ------------------------------------------------------------------------------------

    def check(self) -> None:
        fates: dict[int, set[bool]] = {}
        for p, part in enumerate(self.parts):
            lso = self.replicas.last_stable_offset(part)
            assert lso == part.log.log_end_offset, (
                f"SEED={self.seed}: partition {p} has a hanging transaction: LSO {lso}, "
                f"log end {part.log.log_end_offset}, open {part.producer_state.open_transactions()}"
            )
            everything = self.replicas.read(part, 0, 1 << 30, min_one_batch=True)
            data = b"".join(bytes(c) for c in everything.chunks)
            committed = self.replicas.read(part, 0, 1 << 30, min_one_batch=True, isolation_level=1)
            visible = set()
            for pos, h in committed_batches(data, list(scan_batches(data)), committed.aborted_transactions):
                for r in decode_records(data[pos : pos + h.size_in_bytes]):
                    visible.add(r.value)
            for pos, h in scan_batches(data):
                if h.is_control:
                    continue
                for r in decode_records(data[pos : pos + h.size_in_bytes]):
                    txn_uid = int((r.value or b"").split(b":")[0])
                    fates.setdefault(txn_uid, set()).add(r.value in visible)
        for txn_uid, fate in fates.items():
            assert len(fate) == 1, f"SEED={self.seed}: transaction {txn_uid} is committed in part only"
            if txn_uid in self.told_committed:
                assert fate == {True}, (
                    f"SEED={self.seed}: transaction {txn_uid} was acknowledged but is not visible"
                )
            if txn_uid in self.told_aborted:
                assert fate == {False}, f"SEED={self.seed}: transaction {txn_uid} was aborted but is visible"


def run_txn_seed(seed: int, steps: int = 1500) -> World:
    world = World(seed, random.Random(seed))
    world.run(steps)
    world.check()
    return world
