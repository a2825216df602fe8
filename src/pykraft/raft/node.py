"""``RaftNode``: KRaft (Kafka's KafkaRaftClient / QuorumState / EpochState) as a pure state machine.

Input: ``tick(now_ms)``, ``step(inbound, now_ms)``, ``propose(records, now_ms)``, ``resign(now_ms)``.
Output: ``ready()`` -> ``Ready`` (see raft/ready.py for the order the shell must follow), then
``advance(ready, now_ms)``. The node never reads a clock, sleeps, sends or writes; randomness comes from
the injected ``random.Random``. ``next_deadline_ms()`` says when ``tick`` has work to do.

Where KRaft departs from textbook Raft (KafkaRaftClient's class comment):

* Followers pull with Fetch (fetch_offset, last_fetched_epoch); the leader checks them against its
  epoch cache and answers ``diverging_epoch`` when the follower's log diverges; the follower truncates
  and fetches again. A fetch at offset N tells the leader the follower has flushed everything below N
  (voters flush before fetching), so the leader's view of each voter is its last valid fetch offset.
* A new leader announces itself with BeginQuorumEpoch (retried until each voter acks or fetches)
  and writes a LeaderChange control batch first in its epoch (kafka-facts §7.1).
* The high watermark is the largest offset a majority of voters have flushed, and it only moves once
  it passes the leader's epoch start offset (Raft §5.4.2: a leader commits entries of older epochs
  only by committing one of its own). It never moves backwards in a node's lifetime.
* A leader that hears no Fetch from a majority within 1.5 x fetch_timeout_ms resigns (check-quorum).
* A resigning leader sends EndQuorumEpoch so the most caught-up voter campaigns at once.

The leader parks a Fetch that has nothing new (no records, the follower already knows the high
watermark) for up to its ``max_wait_ms`` and answers it on the next append, high-watermark move or
timeout, as Kafka's fetch purgatory does.

Snapshots (KIP-630, kafka-facts §4): the frozen snapshots come through an injected ``SnapshotStore``.
The leader answers a Fetch whose offset is below its log start (or 0, or in an epoch older than its
oldest snapshot) with ``snapshot_id`` = its latest snapshot, and serves FetchSnapshot in chunks. A
follower told to do so downloads the snapshot (FetchSnapshot only, until done or abandoned), installs
it (store, truncate the log fully at its end offset, high watermark = its end offset) and asks the
state machine to load it through ``Ready.load_snapshot``. ``validate_new_snapshot_id``,
``delete_before_snapshot`` and ``maybe_clean`` are KafkaMetadataLog's createNewSnapshot /
deleteBeforeSnapshot / maybeClean. Observers (non-voters) follow a known leader but never discover one.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from pykraft.core.errors import ErrorCode
from pykraft.protocol.records import Record, decode_records, scan_batches
from pykraft.raft.control import (
    KRAFT_VERSION_DYNAMIC,
    LeaderChangeMessage,
    Voter,
    kraft_version_record,
    leader_change_record,
    voters_record,
)
from pykraft.raft.log import RaftLog
from pykraft.raft.messages import (
    FETCH_MAX_BYTES,
    FETCH_MAX_WAIT_MS,
    METADATA_PARTITION,
    METADATA_TOPIC_NAME,
    UNKNOWN_ID,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Inbound,
    OffsetAndEpoch,
    Outbound,
    QuorumDescription,
    RaftMessage,
    ReplicaDescription,
    VoteRequest,
    VoteResponse,
)
from pykraft.raft.ready import CommittedBatch, Ready
from pykraft.raft.snapshot import (
    BOOTSTRAP_SNAPSHOT_ID,
    MemorySnapshotStore,
    SnapshotStore,
    retention_delete_before,
)
from pykraft.raft.state import (
    ALLOWED_TRANSITIONS,
    Candidate,
    Follower,
    Leader,
    QuorumState,
    ReplicaState,
    Resigned,
    Role,
    RoleState,
    Unattached,
    Voted,
    is_active_observer,
    majority_end_offset,
    majority_size,
)
from pykraft.raft.voter_set import ControlEntry, VoterSet, VoterSetHistory, scan_kraft_control_records

# KafkaRaftClient.RETRY_BACKOFF_BASE_MS: the unit of the exponential election backoff.
RETRY_BACKOFF_BASE_MS = 100
# LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR.
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5
# Far enough in the future to never fire (a sole voter's check-quorum timer).
NEVER_MS = 2**62


@dataclass(frozen=True, slots=True)
class VoterChange:
    """The leader's answer to AddRaftVoter / RemoveRaftVoter (KIP-853): an error (with Kafka's
    message) or the offset of the VotersRecord it appended; the change is done once that commits."""

    error: ErrorCode
    error_message: str | None = None
    voters_offset: int = -1


class RaftNode:
    def __init__(
        self,
        node_id: int,
        voter_ids: frozenset[int],
        log: RaftLog,
        quorum_state: QuorumState | None,
        rng: random.Random,
        now_ms: int,
        *,
        cluster_id: str | None = None,
        election_timeout_ms: int = 1000,
        fetch_timeout_ms: int = 2000,
        election_backoff_max_ms: int = 1000,
        request_timeout_ms: int = 2000,
        retry_backoff_ms: int = 20,
        fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS,
        fetch_max_bytes: int = FETCH_MAX_BYTES,
        snapshots: SnapshotStore | None = None,
        kraft_version: int = 0,
        bootstrap_voters: VoterSet | None = None,
        followers_always_flush: bool = True,
    ) -> None:
        """``voter_ids``: with kraft.version 0, the static voters (``controller.quorum.voters``), whose
        endpoints ``bootstrap_voters`` may give; with kraft.version 1 (KIP-853), the replicas to ask who
        leads (``controller.quorum.bootstrap.servers``) while the voter set comes from the log, its
        snapshots, or ``bootstrap_voters`` (the set a bootstrap checkpoint gives the first voter(s))
        until the log holds a VotersRecord.
        ``followers_always_flush=False`` (a broker-only process, which can never become a voter): as an
        observer, what it fetches is not flushed (Kafka's KafkaRaftClient.appendAsFollower flushes only
        on a voter or with followersAlwaysFlush, which KafkaRaftManager sets for controllers); the
        shell flushes the log when it closes it."""
        assert node_id >= 0
        assert voter_ids, "a quorum has at least one voter"
        assert election_timeout_ms > 0
        assert fetch_timeout_ms > 0
        assert fetch_max_wait_ms < request_timeout_ms, "a parked fetch must answer before it times out"
        self.node_id = node_id
        self._bootstrap_ids = voter_ids
        base_voters = bootstrap_voters or (VoterSet.static(voter_ids) if kraft_version == 0 else VoterSet(()))
        assert kraft_version != 0 or base_voters.ids == voter_ids, "static voters name the same ids"
        self.voter_history = VoterSetHistory(base_voters, kraft_version)
        self.log = log
        self.cluster_id = cluster_id
        self._rng = rng
        self._now_ms = now_ms
        self.election_timeout_ms = election_timeout_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.election_backoff_max_ms = election_backoff_max_ms
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.check_quorum_timeout_ms = int(fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)
        self.snapshots: SnapshotStore = snapshots if snapshots is not None else MemorySnapshotStore()
        self.followers_always_flush = followers_always_flush

        self._persisted_quorum_state = quorum_state
        latest = self.latest_snapshot_id()
        if latest is not None and (
            latest.epoch > log.last_fetched_epoch
            or (latest.epoch == log.last_fetched_epoch and latest.offset > log.end_offset)
        ):
            # KafkaMetadataLog.truncateToLatestSnapshot: a follower crashed after storing a downloaded
            # snapshot but before truncating its log.
            log.truncate_fully_and_start_at(latest.offset)
        # Kafka starts with an unknown high watermark; nothing below the log start needs applying.
        self._high_watermark = log.start_offset
        self._next_apply_offset = log.start_offset
        # The state machine loads the latest snapshot first (KafkaRaftClient: a listener whose next
        # offset is -1 gets handleLoadSnapshot), then the log after it. A snapshot is committed.
        self._snapshot_to_load: OffsetAndEpoch | None = None
        if latest is not None:
            assert latest.offset >= log.start_offset, (latest, log.start_offset)
            self._snapshot_to_load = latest
            self._high_watermark = self._next_apply_offset = latest.offset
        # What the shell has flushed, as far as the core knows: nothing yet since this start, so the
        # first Ready flushes whatever the log holds (cheap, and safe after a process crash).
        self._flushed_end_offset = log.start_offset
        # A flush the shell started but has not finished (advance(..., flush_done=False)): not asked
        # for again, not counted as durable until flush_completed.
        self._flush_requested_offset = log.start_offset
        if kraft_version > 0:
            self._load_voter_history(latest)
        self._outbox: list[Outbound] = []
        # Like Kafka's correlation ids; random start so a response to a request sent before a restart
        # is not mistaken for one sent after it.
        self._next_correlation_id = rng.getrandbits(31)
        self._parked_fetches: dict[int, tuple[Inbound, int]] = {}
        self._last_soft_state: tuple[Role, int, int, int] | None = None
        self._state: RoleState = self._initial_state(quorum_state, now_ms)
        if isinstance(self._state, Follower):
            self._send_fetch(self._state, now_ms)
        self._maybe_campaign_alone(now_ms)

    # --- public queries ------------------------------------------------------------------------

    @property
    def role(self) -> Role:
        return self._state.role

    @property
    def epoch(self) -> int:
        return self._state.epoch

    @property
    def leader_id(self) -> int:
        match self._state:
            case Leader():
                return self.node_id
            case Follower(leader_id=leader_id):
                return leader_id
            case _:
                return UNKNOWN_ID

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def voter_ids(self) -> frozenset[int]:
        """The voter set in effect: the latest VotersRecord of the log, committed or not (KIP-853)."""
        return self.voter_history.latest().ids

    @property
    def voter_set(self) -> VoterSet:
        return self.voter_history.latest()

    @property
    def kraft_version(self) -> int:
        return self.voter_history.kraft_version()

    def kraft_control_records(self, snapshot_end_offset: int) -> list[Record]:
        """What a snapshot ending at ``snapshot_end_offset`` carries after its header (Kafka's
        RecordsSnapshotWriter with kraft.version 1): KRaftVersionRecord and VotersRecord."""
        history = self.voter_history
        kraft_version = history.kraft_version_before(snapshot_end_offset)
        if kraft_version == 0:
            return []
        voters = history.voters_before(snapshot_end_offset)
        return [kraft_version_record(kraft_version), voters_record(voters.voters)]

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voter_ids

    @property
    def may_campaign(self) -> bool:
        """A voter, or (KIP-853) a replica that an uncommitted change removes: it may be the only one
        with the change, and until the change commits the quorum may need it to lead (Raft thesis
        §4.2.2: a server not in its latest configuration still starts elections). It counts only the
        votes of its latest voter set, so it never decides an election for a set that excludes it."""
        if self.is_voter:
            return True
        history = self.voter_history
        if not self._tracks_voters() or history.latest_offset() < self._high_watermark:
            return False
        return self.node_id in history.voters_before(history.latest_offset()).ids

    def _won(self, state: Candidate) -> bool:
        # Votes come only from voters; the candidate's own counts only if it is one.
        own_uncounted = 0 if self.is_voter else 1
        return len(state.granting_voters) - own_uncounted >= majority_size(len(self.voter_ids))

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The latest frozen snapshot other than the bootstrap one (never replicated, §4.1)."""
        ids = [i for i in self.snapshots.snapshot_ids() if i != BOOTSTRAP_SNAPSHOT_ID]
        return ids[-1] if ids else None

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        ids = [i for i in self.snapshots.snapshot_ids() if i != BOOTSTRAP_SNAPSHOT_ID]
        return ids[0] if ids else None

    def quorum_state(self) -> QuorumState:
        """The durable form of the current role."""
        state = self._state
        match state:
            case Unattached():
                return QuorumState(state.epoch, voters=self.voter_ids)
            case Voted():
                return QuorumState(state.epoch, voted_id=state.voted_id, voters=self.voter_ids)
            case Candidate():
                return QuorumState(state.epoch, voted_id=self.node_id, voters=self.voter_ids)
            case Leader() | Resigned():
                return QuorumState(state.epoch, leader_id=self.node_id, voters=self.voter_ids)
            case Follower():
                return QuorumState(state.epoch, leader_id=state.leader_id, voters=self.voter_ids)

    def next_deadline_ms(self) -> int:
        """The earliest time ``tick`` has something to do (``NEVER_MS`` when nothing is pending)."""
        state = self._state
        deadlines = [NEVER_MS] + [deadline for _inbound, deadline in self._parked_fetches.values()]
        match state:
            case Unattached() | Voted() | Resigned():
                if self.may_campaign or isinstance(state, Unattached | Resigned) or self._tracks_voters():
                    deadlines.append(state.election_deadline_ms)
            case Candidate():
                deadlines.append(
                    state.backoff_deadline_ms
                    if state.backoff_deadline_ms is not None
                    else state.election_deadline_ms
                )
            case Follower():
                deadlines.append(state.fetch_deadline_ms)
                if state.fetch_correlation_id is not None:
                    deadlines.append(state.fetch_sent_ms + self.request_timeout_ms)
                else:
                    deadlines.append(state.fetch_sent_ms)
            case Leader():
                deadlines.append(state.check_quorum_deadline_ms)
                if any(not r.begin_quorum_acked for r in state.replicas.values()):
                    deadlines.append(state.begin_quorum_deadline_ms)
        return min(deadlines)

    # --- inputs --------------------------------------------------------------------------------

    def describe_quorum(self, now_ms: int) -> QuorumDescription | None:
        """DescribeQuorum (KafkaRaftClient.handleDescribeQuorumRequest): the leader's view of every
        voter and observer; None on a non-leader (it answers NOT_LEADER_OR_FOLLOWER)."""
        state = self._state
        if not isinstance(state, Leader):
            return None

        voter_set = self.voter_set

        def directory_id(replica_id: int) -> bytes:
            voter = voter_set.get(replica_id)
            return voter.directory_id if voter is not None else bytes(16)

        def describe(replica_id: int, replica: ReplicaState) -> ReplicaDescription:
            return ReplicaDescription(
                replica_id,
                -1 if replica.end_offset is None else replica.end_offset,
                -1 if replica.last_fetch_ms is None else replica.last_fetch_ms,
                -1 if replica.last_caught_up_ms is None else replica.last_caught_up_ms,
                directory_id(replica_id),
            )

        # RaftUtil.toReplicaState: the leader reports its own (flushed, LeaderState.updateLocalState)
        # end offset and the current time for both timestamps.
        own_end_offset = min(self._flushed_end_offset, self.log.end_offset)
        own = ReplicaDescription(self.node_id, own_end_offset, now_ms, now_ms, directory_id(self.node_id))
        voters = [describe(i, r) for i, r in state.replicas.items()]
        observers = [
            describe(i, r)
            for i, r in sorted(state.observers.items())
            if is_active_observer(r, now_ms)  # read-only: the next new observer prunes the rest
        ]
        # A leader that removed itself (KIP-853) leads as an observer until the removal commits.
        (voters if self.is_voter else observers).append(own)
        return QuorumDescription(
            leader_id=self.node_id,
            leader_epoch=state.epoch,
            high_watermark=self._high_watermark,
            current_voters=tuple(sorted(voters, key=lambda v: v.replica_id)),
            observers=tuple(sorted(observers, key=lambda v: v.replica_id)),
            # v2 Nodes: the voters' endpoints as the VotersRecord lists them (KIP-853).
            nodes=tuple(
                (v.voter_id, tuple((e.name, e.host, e.port) for e in v.endpoints))
                for v in voter_set.voters
                if v.endpoints
            ),
        )

    def tick(self, now_ms: int) -> None:
        self._set_now(now_ms)
        state = self._state
        match state:
            case Unattached() | Voted() | Resigned():
                if now_ms >= state.election_deadline_ms:
                    if self.may_campaign:
                        self._become_candidate(now_ms)
                    elif isinstance(state, Unattached) or (
                        isinstance(state, Voted) and self._tracks_voters()
                    ):
                        # KIP-853: a replica that voted and then learned it is no voter asks too.
                        self._fetch_from_bootstrap(state, now_ms)
                    elif isinstance(state, Resigned):
                        # A leader that removed itself (KIP-853) goes on as an observer.
                        self._transition(Unattached(state.epoch, now_ms))
            case Candidate():
                self._tick_candidate(state, now_ms)
            case Follower():
                self._tick_follower(state, now_ms)
            case Leader():
                self._tick_leader(state, now_ms)

    def step(self, inbound: Inbound, now_ms: int) -> None:
        self._set_now(now_ms)
        message: RaftMessage = inbound.message
        match message:
            case VoteRequest():
                self._handle_vote_request(inbound, message, now_ms)
            case VoteResponse():
                self._handle_vote_response(inbound, message, now_ms)
            case BeginQuorumEpochRequest():
                self._handle_begin_quorum_epoch_request(inbound, message, now_ms)
            case BeginQuorumEpochResponse():
                self._handle_begin_quorum_epoch_response(inbound, message, now_ms)
            case EndQuorumEpochRequest():
                self._handle_end_quorum_epoch_request(inbound, message, now_ms)
            case EndQuorumEpochResponse():
                self._handle_common_response(
                    message.error_code, message.leader_id, message.leader_epoch, now_ms
                )
            case FetchRequest():
                self._handle_fetch_request(inbound, message, now_ms)
            case FetchResponse():
                self._handle_fetch_response(inbound, message, now_ms)
            case FetchSnapshotRequest():
                self._handle_fetch_snapshot_request(inbound, message, now_ms)
            case FetchSnapshotResponse():
                self._handle_fetch_snapshot_response(inbound, message, now_ms)
        self._maybe_resign_removed_leader(now_ms)

    def request_failed(self, destination_id: int, correlation_id: int, now_ms: int, *, refused: bool) -> None:
        """The shell could not get an answer to a request it sent (a disconnect or a timeout; Kafka's
        NetworkClient reports these as BROKER_NOT_AVAILABLE responses). A follower's lost fetch is
        retried after ``retry_backoff_ms`` instead of after the request timeout.

        ``refused``: nothing listens at the peer's address any more (connection refused), i.e. its
        process is gone. When that peer is a voter's leader, the voter stops waiting out the rest of
        ``fetch_timeout_ms`` and campaigns within a random part of half an election timeout — the
        randomness staggers the survivors so one of them wins the first round. Kafka waits out the
        full fetch timeout here; this only shortens an election that is certain to happen, so safety
        (votes, epochs, log matching) is untouched.
        """
        self._set_now(now_ms)
        state = self._state
        if isinstance(state, Unattached | Voted) and not self.may_campaign:
            # An observer's question to a voter went unanswered (that voter may be the dead leader):
            # ask another after the retry backoff, not the whole request timeout.
            state.election_deadline_ms = min(state.election_deadline_ms, now_ms + self.retry_backoff_ms)
            return
        if not isinstance(state, Follower) or destination_id != state.leader_id:
            return
        if state.fetch_correlation_id == correlation_id:
            state.fetch_correlation_id = None
            state.fetch_sent_ms = now_ms + self.retry_backoff_ms
        if refused and self.may_campaign:
            stagger_ms = self._rng.randrange(max(1, self.election_timeout_ms // 2))
            state.fetch_deadline_ms = min(state.fetch_deadline_ms, now_ms + stagger_ms)
        elif refused:
            # An observer (a broker) gives up on a leader that is gone at once and asks the voters who
            # leads now, so its heartbeats find the next active controller before its session expires.
            state.fetch_deadline_ms = now_ms

    def propose(self, records: Sequence[bytes], now_ms: int) -> int | None:
        """Append ``records`` as one batch at the current epoch; returns its last offset, or None
        when this node is not the leader (the caller answers NOT_CONTROLLER / NOT_LEADER)."""
        self._set_now(now_ms)
        if not isinstance(self._state, Leader):
            return None
        assert records, "propose at least one record"
        _base_offset, last_offset = self.log.append_as_leader(list(records), self._state.epoch, now_ms)
        self._complete_parked_fetches()
        return last_offset

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown of a leader: stop leading this epoch and tell the voters (EndQuorumEpoch)."""
        self._set_now(now_ms)
        if isinstance(self._state, Leader):
            self._become_resigned(self._state, now_ms)

    # --- the Ready contract --------------------------------------------------------------------

    def has_ready(self) -> bool:
        return (
            bool(self._outbox)
            or self.quorum_state() != self._persisted_quorum_state
            or self._flush_pending_from() < self.log.end_offset
            or self._high_watermark > self._next_apply_offset
            or self._snapshot_to_load is not None
            or self._soft_state() != self._last_soft_state
        )

    def ready(self) -> Ready:
        """What to do next; changes nothing until ``advance``."""
        quorum_state = self.quorum_state()
        return Ready(
            role=self._state.role,
            leader_id=self.leader_id,
            leader_epoch=self._state.epoch,
            high_watermark=self._high_watermark,
            quorum_state=quorum_state if quorum_state != self._persisted_quorum_state else None,
            flush_to_offset=self.log.end_offset if self._flush_pending_from() < self.log.end_offset else None,
            messages=tuple(self._outbox),
            load_snapshot=self._snapshot_to_load,
            committed=self._committed_batches(),
        )

    def advance(self, ready: Ready, now_ms: int, *, flush_done: bool = True) -> None:
        """The shell persisted, flushed, sent and applied ``ready``.

        ``flush_done=False``: a leader's shell started the fsync and sent its messages while it runs
        (Kafka serves followers from the page cache); it calls ``flush_completed`` when the fsync is
        done. Until then the leader does not count that part of its log toward the high watermark.
        Only a leader may do this: a follower's next fetch offset and a vote claim durability."""
        self._set_now(now_ms)
        if ready.quorum_state is not None:
            self._persisted_quorum_state = ready.quorum_state
        if ready.flush_to_offset is not None:
            assert ready.flush_to_offset <= self.log.end_offset, "the log shrank between ready and advance"
            if flush_done:
                self._flushed_end_offset = max(self._flushed_end_offset, ready.flush_to_offset)
            else:
                assert ready.role == Role.LEADER, "only a leader may send before its flush completes"
                self._flush_requested_offset = max(self._flush_requested_offset, ready.flush_to_offset)
        assert tuple(self._outbox[: len(ready.messages)]) == ready.messages
        del self._outbox[: len(ready.messages)]
        if ready.load_snapshot is not None and ready.load_snapshot == self._snapshot_to_load:
            self._snapshot_to_load = None
        if ready.committed:
            assert ready.committed[0].base_offset == self._next_apply_offset
            self._next_apply_offset = ready.committed[-1].last_offset + 1
        self._last_soft_state = (ready.role, ready.leader_id, ready.leader_epoch, ready.high_watermark)
        if isinstance(self._state, Leader):
            self._maybe_update_high_watermark(self._state)
        self._maybe_resign_removed_leader(now_ms)

    def flush_completed(self, flushed_to_offset: int, now_ms: int) -> None:
        """The fsync a shell started (``advance(..., flush_done=False)``) made the log durable below
        ``flushed_to_offset``."""
        self._set_now(now_ms)
        self._flushed_end_offset = max(self._flushed_end_offset, min(flushed_to_offset, self.log.end_offset))
        if isinstance(self._state, Leader):
            self._maybe_update_high_watermark(self._state)
        self._maybe_resign_removed_leader(now_ms)

    def _flush_pending_from(self) -> int:
        if not self.followers_always_flush and not self.is_voter:
            # An observer that can never vote claims no durability: nothing is asked to be flushed.
            return self.log.end_offset
        return max(self._flushed_end_offset, self._flush_requested_offset)

    # --- startup -------------------------------------------------------------------------------

    def _initial_state(self, quorum_state: QuorumState | None, now_ms: int) -> RoleState:
        """QuorumState.initialize: a previous leader comes back Resigned (it never leads that epoch
        again), a voter for itself comes back a Candidate, a follower a Follower."""
        last_fetched_epoch = self._last_fetched_epoch()
        if quorum_state is None:
            return Unattached(max(0, last_fetched_epoch), self._election_deadline(now_ms))
        epoch = quorum_state.leader_epoch
        if last_fetched_epoch > epoch:
            # The log saw a later epoch than the file (Kafka logs a warning and moves on).
            return Unattached(last_fetched_epoch, self._election_deadline(now_ms))
        if quorum_state.leader_id == self.node_id:
            return Resigned(epoch, self._election_deadline(now_ms))
        if quorum_state.leader_id != UNKNOWN_ID:
            return Follower(epoch, quorum_state.leader_id, now_ms + self.fetch_timeout_ms)
        if quorum_state.voted_id == self.node_id and self.may_campaign:
            candidate = Candidate(epoch, 1, self._election_deadline(now_ms), {self.node_id})
            self._send_vote_requests(candidate)
            return candidate
        if quorum_state.voted_id != UNKNOWN_ID:
            return Voted(epoch, quorum_state.voted_id, self._election_deadline(now_ms))
        return Unattached(epoch, self._election_deadline(now_ms))

    def _maybe_campaign_alone(self, now_ms: int) -> None:
        """A sole voter needs nobody: it elects itself at once (KafkaRaftClient.initialize)."""
        if self.voter_ids != frozenset({self.node_id}):
            return
        if isinstance(self._state, Candidate):
            self._become_leader(self._state, now_ms)
        elif not isinstance(self._state, Leader):
            self._become_candidate(now_ms)
        assert isinstance(self._state, Leader)

    # --- timers --------------------------------------------------------------------------------

    def _set_now(self, now_ms: int) -> None:
        assert now_ms >= self._now_ms, f"time went backwards: {now_ms} < {self._now_ms}"
        self._now_ms = now_ms

    def _election_deadline(self, now_ms: int) -> int:
        # QuorumState.randomElectionTimeoutMs: timeout + uniform jitter in [0, timeout).
        return now_ms + self.election_timeout_ms + self._rng.randrange(self.election_timeout_ms)

    def _election_backoff_ms(self, retries: int) -> int:
        # KafkaRaftClient.binaryExponentialElectionBackoffMs.
        assert retries >= 1
        return min(
            RETRY_BACKOFF_BASE_MS * self._rng.randrange(2 << min(20, retries - 1)),
            self.election_backoff_max_ms,
        )

    def _tick_candidate(self, state: Candidate, now_ms: int) -> None:
        if state.backoff_deadline_ms is not None:
            if now_ms >= state.backoff_deadline_ms:
                self._become_candidate(now_ms)
        elif now_ms >= state.election_deadline_ms:
            state.backoff_deadline_ms = now_ms + self._election_backoff_ms(state.retries)

    def _fetch_from_bootstrap(self, state: Unattached | Voted, now_ms: int) -> None:
        """An observer (a broker, KIP-595) that knows no leader asks a voter, chosen at random: the
        answer names the leader and its epoch (FENCED_LEADER_EPOCH or NOT_LEADER_OR_FOLLOWER), and the
        observer follows it. No answer in ``request_timeout_ms``: ask again (KafkaRaftClient's
        fetch from the bootstrap servers)."""
        voter_id = self._rng.choice(sorted(self._bootstrap_ids - {self.node_id} or self._bootstrap_ids))
        request = FetchRequest(
            cluster_id=self.cluster_id,
            replica_id=self.node_id,
            current_leader_epoch=state.epoch,
            fetch_offset=self.log.end_offset,
            last_fetched_epoch=self._last_fetched_epoch(),
            max_wait_ms=0,
            max_bytes=self.fetch_max_bytes,
        )
        self._send(voter_id, request)
        state.election_deadline_ms = now_ms + self.request_timeout_ms

    def _tick_follower(self, state: Follower, now_ms: int) -> None:
        if now_ms >= state.fetch_deadline_ms:
            if self.may_campaign:
                self._become_candidate(now_ms)
            else:
                # An observer asks a voter who leads at once (KafkaRaftClient.pollUnattachedAsObserver).
                self._transition(Unattached(state.epoch, now_ms))
            return
        if state.fetch_correlation_id is not None and now_ms >= state.fetch_sent_ms + self.request_timeout_ms:
            state.fetch_correlation_id = None  # lost: send another
        if state.fetch_correlation_id is None and now_ms >= state.fetch_sent_ms:
            self._send_fetch(state, now_ms)

    def _tick_leader(self, state: Leader, now_ms: int) -> None:
        if now_ms >= state.check_quorum_deadline_ms:
            self._become_resigned(state, now_ms)
            return
        if now_ms >= state.begin_quorum_deadline_ms:
            self._send_begin_quorum_epoch(state, now_ms)
        expired = [rid for rid, (_inbound, deadline) in self._parked_fetches.items() if now_ms >= deadline]
        for replica_id in expired:
            inbound, _deadline = self._parked_fetches.pop(replica_id)
            assert isinstance(inbound.message, FetchRequest)
            self._respond(inbound, self._fetch_response(state, inbound.message))

    # --- transitions ---------------------------------------------------------------------------

    def _transition(self, new_state: RoleState) -> None:
        old_state = self._state
        assert new_state.role in ALLOWED_TRANSITIONS[old_state.role], (old_state.role, new_state.role)
        assert new_state.epoch >= old_state.epoch, "epochs never go backwards"
        if isinstance(new_state, Leader | Voted):
            assert new_state.epoch == old_state.epoch
        self._state = new_state
        if isinstance(old_state, Leader):
            self._fail_parked_fetches()
            # A follower's fetch offset claims durability: whatever a leader's background fsync has
            # not finished is flushed again, synchronously, before this node fetches as a follower.
            self._flush_requested_offset = self._flushed_end_offset

    def _become_unattached(self, epoch: int, now_ms: int) -> None:
        assert epoch > self._state.epoch
        old_state = self._state
        # A node that was already waiting out an election timeout keeps its deadline (Raft §5.2: only
        # a granted vote or a live leader resets it; Kafka's QuorumState.transitionToUnattached does
        # the same for Unattached). Otherwise a candidate that can never win (stale log) bumps the
        # epoch again and again and keeps every voter from ever timing out: a livelock the
        # simulation found.
        if isinstance(old_state, Unattached | Voted | Resigned):
            deadline_ms = old_state.election_deadline_ms
        else:
            deadline_ms = self._election_deadline(now_ms)
        self._transition(Unattached(epoch, deadline_ms))

    def _become_follower(self, epoch: int, leader_id: int, now_ms: int) -> None:
        assert leader_id != self.node_id
        old_state = self._state
        if old_state.epoch == epoch:
            # Election safety: one leader per epoch. Only an electing role may learn it in-epoch.
            assert isinstance(old_state, Unattached | Voted | Candidate), (old_state, leader_id)
        state = Follower(epoch, leader_id, now_ms + self.fetch_timeout_ms)
        self._transition(state)
        self._send_fetch(state, now_ms)

    def _become_candidate(self, now_ms: int) -> None:
        assert self.may_campaign
        old_state = self._state
        retries = old_state.retries + 1 if isinstance(old_state, Candidate) else 1
        state = Candidate(old_state.epoch + 1, retries, self._election_deadline(now_ms), {self.node_id})
        self._transition(state)
        if self._won(state):
            self._become_leader(state, now_ms)
        else:
            self._send_vote_requests(state)

    def _become_leader(self, candidate: Candidate, now_ms: int) -> None:
        assert self._won(candidate)
        others = self.voter_ids - {self.node_id}
        state = Leader(
            epoch=candidate.epoch,
            epoch_start_offset=self.log.end_offset,
            granting_voters=frozenset(candidate.granting_voters),
            check_quorum_deadline_ms=now_ms + self.check_quorum_timeout_ms if others else NEVER_MS,
            begin_quorum_deadline_ms=now_ms,
            replicas={voter_id: ReplicaState() for voter_id in others},
        )
        self._transition(state)
        # The first batch of every epoch: LeaderChangeMessage (KafkaRaftClient.onBecomeLeader).
        message = LeaderChangeMessage(
            leader_id=self.node_id,
            voters=tuple(sorted(self.voter_ids)),
            granting_voters=tuple(sorted(candidate.granting_voters)),
        )
        control = [leader_change_record(message)]
        history = self.voter_history
        bootstrap_entries: list[ControlEntry] = []
        if history.kraft_version() >= KRAFT_VERSION_DYNAMIC and history.latest_offset() < 0:
            # LeaderState.appendStartOfEpochControlRecords: a voter set that is not in the log yet
            # (a bootstrap checkpoint's) is written to it, with kraft.version, in the epoch's first batch.
            control += [kraft_version_record(history.kraft_version()), voters_record(history.latest().voters)]
            base = self.log.end_offset
            bootstrap_entries = [
                ControlEntry(base + 1, kraft_version=history.kraft_version()),
                ControlEntry(base + 2, voters=history.latest()),
            ]
        self.log.append_as_leader(control, state.epoch, now_ms, is_control=True)
        for entry in bootstrap_entries:
            history.add(entry)
        self._send_begin_quorum_epoch(state, now_ms)

    def _become_resigned(self, leader: Leader, now_ms: int) -> None:
        # Most caught-up voters first, so the best successor campaigns at once.
        successors = sorted(leader.replicas, key=lambda vid: (-(leader.replicas[vid].end_offset or 0), vid))
        state = Resigned(leader.epoch, self._election_deadline(now_ms), tuple(successors))
        self._transition(state)
        for voter_id in successors:
            request = EndQuorumEpochRequest(self.cluster_id, self.node_id, state.epoch, tuple(successors))
            self._send(voter_id, request)

    # --- sending -------------------------------------------------------------------------------

    def _send(self, destination_id: int, message: RaftMessage) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (self._next_correlation_id + 1) & 0x7FFFFFFF
        self._outbox.append(Outbound(destination_id, message, correlation_id))
        return correlation_id

    def _respond(self, inbound: Inbound, message: RaftMessage) -> None:
        self._outbox.append(Outbound(inbound.source_id, message, inbound.correlation_id))

    def _send_vote_requests(self, state: Candidate) -> None:
        request = VoteRequest(
            cluster_id=self.cluster_id,
            candidate_epoch=state.epoch,
            candidate_id=self.node_id,
            last_offset_epoch=self._last_fetched_epoch(),
            last_offset=self.log.end_offset,
        )
        for voter_id in sorted(self.voter_ids - {self.node_id}):
            self._send(voter_id, request)

    def _send_begin_quorum_epoch(self, state: Leader, now_ms: int) -> None:
        # LeaderState.beginQuorumEpochTimer: resend every fetch_timeout/2 to voters not heard from.
        request = BeginQuorumEpochRequest(self.cluster_id, self.node_id, state.epoch)
        for voter_id, replica in sorted(state.replicas.items()):
            if not replica.begin_quorum_acked:
                self._send(voter_id, request)
        state.begin_quorum_deadline_ms = now_ms + self.fetch_timeout_ms // 2

    def _send_fetch(self, state: Follower, now_ms: int) -> None:
        """One Fetch in flight at a time. Its fetch offset is the log end offset, which the Ready that
        carries it flushes first: the leader may count it as durable."""
        assert state.fetch_correlation_id is None
        if state.fetching_snapshot is not None:
            # §4.4: while a snapshot downloads, the follower sends only FetchSnapshot.
            snapshot_request = FetchSnapshotRequest(
                cluster_id=self.cluster_id,
                replica_id=self.node_id,
                current_leader_epoch=state.epoch,
                snapshot_id=state.fetching_snapshot,
                position=len(state.snapshot_bytes),
                max_bytes=self.fetch_max_bytes,
            )
            state.fetch_correlation_id = self._send(state.leader_id, snapshot_request)
            state.fetch_sent_ms = now_ms
            return
        request = FetchRequest(
            cluster_id=self.cluster_id,
            replica_id=self.node_id,
            current_leader_epoch=state.epoch,
            fetch_offset=self.log.end_offset,
            last_fetched_epoch=self._last_fetched_epoch(),
            max_wait_ms=self.fetch_max_wait_ms,
            max_bytes=self.fetch_max_bytes,
            high_watermark=self._high_watermark,
        )
        state.fetch_correlation_id = self._send(state.leader_id, request)
        state.fetch_sent_ms = now_ms

    # --- request validation --------------------------------------------------------------------

    def _cluster_id_valid(self, cluster_id: str | None) -> bool:
        """kafka-facts §5.6: null is accepted, equal is accepted, anything else (even "") is not.
        A node that does not know its cluster id yet (KIP-1262) cannot check, so it accepts."""
        return cluster_id is None or self.cluster_id is None or cluster_id == self.cluster_id

    def _log_is_behind(self, last_offset_epoch: int, last_offset: int) -> bool:
        """Raft §5.4.1 as KRaft compares it: (epoch, offset) lexicographically, epoch first."""
        return (last_offset_epoch, last_offset) < (self._last_fetched_epoch(), self.log.end_offset)

    # --- Vote ----------------------------------------------------------------------------------

    def _handle_vote_request(self, inbound: Inbound, request: VoteRequest, now_ms: int) -> None:
        error = ErrorCode.NONE
        if not self._cluster_id_valid(request.cluster_id):
            error = ErrorCode.INCONSISTENT_CLUSTER_ID
        elif request.candidate_epoch < self._state.epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
        elif request.candidate_id not in self.voter_ids and not self._tracks_voters():
            # KIP-853 drops this check: this replica's voter set may be older than the candidate's.
            error = ErrorCode.INCONSISTENT_VOTER_SET
        granted = False
        if error == ErrorCode.NONE:
            if request.candidate_epoch > self._state.epoch:
                self._become_unattached(request.candidate_epoch, now_ms)
            granted = self._can_grant_vote(request)
            if granted and isinstance(self._state, Unattached):
                state = self._state
                # The vote is durable before this response leaves (Ready: persist, then send).
                self._transition(Voted(state.epoch, request.candidate_id, self._election_deadline(now_ms)))
        response = VoteResponse(error, self.leader_id, self._state.epoch, granted)
        self._respond(inbound, response)

    def _can_grant_vote(self, request: VoteRequest) -> bool:
        state = self._state
        if not self.is_voter and not self._tracks_voters():
            # KIP-853 (QuorumState.canGrantVote): a replica that does not see itself in the voter set
            # may be behind and still votes; the candidate counts only the voters of its own set.
            return False
        match state:
            case Unattached():
                return not self._log_is_behind(request.last_offset_epoch, request.last_offset)
            case Voted():
                return state.voted_id == request.candidate_id
            case _:
                return False

    def _handle_vote_response(self, inbound: Inbound, response: VoteResponse, now_ms: int) -> None:
        if self._handle_common_response(
            response.error_code, response.leader_id, response.leader_epoch, now_ms
        ):
            return
        state = self._state
        if not isinstance(state, Candidate) or response.error_code != ErrorCode.NONE:
            return
        if response.leader_epoch != state.epoch or inbound.source_id not in self.voter_ids:
            return
        if response.vote_granted:
            state.granting_voters.add(inbound.source_id)
            state.rejecting_voters.discard(inbound.source_id)
            if self._won(state):
                self._become_leader(state, now_ms)
            return
        if inbound.source_id not in state.granting_voters:
            state.rejecting_voters.add(inbound.source_id)
        rejected = len(state.rejecting_voters) >= majority_size(len(self.voter_ids))
        if rejected and state.backoff_deadline_ms is None:
            state.backoff_deadline_ms = now_ms + self._election_backoff_ms(state.retries)

    def _handle_common_response(
        self, error: ErrorCode, leader_id: int, leader_epoch: int, now_ms: int
    ) -> bool:
        """KafkaRaftClient.maybeHandleCommonResponse: learn a newer epoch or leader from any response.
        Returns True when the response was consumed (or is stale) and needs no more handling."""
        epoch = self._state.epoch
        if leader_epoch > epoch:
            assert leader_id != self.node_id, "a peer saw this node lead an epoch it never persisted"
            if leader_id != UNKNOWN_ID:
                self._become_follower(leader_epoch, leader_id, now_ms)
            else:
                self._become_unattached(leader_epoch, now_ms)
            return True
        if leader_epoch < epoch:
            return True
        if leader_id not in (UNKNOWN_ID, self.node_id) and isinstance(
            self._state, Unattached | Voted | Candidate
        ):
            self._become_follower(epoch, leader_id, now_ms)
            return True
        return error in (ErrorCode.INCONSISTENT_CLUSTER_ID, ErrorCode.INCONSISTENT_VOTER_SET)

    # --- BeginQuorumEpoch / EndQuorumEpoch -----------------------------------------------------

    def _epoch_request_error(self, cluster_id: str | None, leader_id: int, leader_epoch: int) -> ErrorCode:
        if not self._cluster_id_valid(cluster_id):
            return ErrorCode.INCONSISTENT_CLUSTER_ID
        if leader_epoch < self._state.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if leader_id == self.node_id or (leader_id not in self.voter_ids and not self._tracks_voters()):
            return ErrorCode.INCONSISTENT_VOTER_SET
        return ErrorCode.NONE

    def _handle_begin_quorum_epoch_request(
        self, inbound: Inbound, request: BeginQuorumEpochRequest, now_ms: int
    ) -> None:
        error = self._epoch_request_error(request.cluster_id, request.leader_id, request.leader_epoch)
        if error == ErrorCode.NONE:
            state = self._state
            already_following = isinstance(state, Follower) and state.epoch == request.leader_epoch
            if already_following:
                assert isinstance(state, Follower)
                assert state.leader_id == request.leader_id, "two leaders in one epoch"
            else:
                self._become_follower(request.leader_epoch, request.leader_id, now_ms)
        self._respond(inbound, BeginQuorumEpochResponse(error, self.leader_id, self._state.epoch))

    def _handle_begin_quorum_epoch_response(
        self, inbound: Inbound, response: BeginQuorumEpochResponse, now_ms: int
    ) -> None:
        if self._handle_common_response(
            response.error_code, response.leader_id, response.leader_epoch, now_ms
        ):
            return
        state = self._state
        if isinstance(state, Leader) and response.error_code == ErrorCode.NONE:
            replica = state.replicas.get(inbound.source_id)
            if replica is not None:
                replica.begin_quorum_acked = True

    def _handle_end_quorum_epoch_request(
        self, inbound: Inbound, request: EndQuorumEpochRequest, now_ms: int
    ) -> None:
        error = self._epoch_request_error(request.cluster_id, request.leader_id, request.leader_epoch)
        if error == ErrorCode.NONE:
            state = self._state
            if request.leader_epoch > state.epoch:
                self._become_follower(request.leader_epoch, request.leader_id, now_ms)
            state = self._state
            if isinstance(state, Follower) and state.leader_id == request.leader_id:
                backoff_ms = self._end_epoch_election_backoff_ms(request.preferred_successors)
                state.fetch_deadline_ms = min(state.fetch_deadline_ms, now_ms + backoff_ms)
        self._respond(inbound, EndQuorumEpochResponse(error, self.leader_id, self._state.epoch))

    def _end_epoch_election_backoff_ms(self, preferred_successors: tuple[int, ...]) -> int:
        # KafkaRaftClient.endEpochElectionBackoff: the first successor campaigns at once.
        if self.node_id not in preferred_successors:
            return self.election_backoff_max_ms
        position = preferred_successors.index(self.node_id)
        return 0 if position == 0 else self._election_backoff_ms(position)

    # --- Fetch, leader side --------------------------------------------------------------------

    def _fetch_request_error(self, request: FetchRequest) -> ErrorCode:
        if not self._cluster_id_valid(request.cluster_id):
            return ErrorCode.INCONSISTENT_CLUSTER_ID
        if (
            request.fetch_offset < 0
            or request.last_fetched_epoch < 0
            or request.last_fetched_epoch > request.current_leader_epoch
            or request.max_wait_ms < 0
        ):
            return ErrorCode.INVALID_REQUEST
        if request.current_leader_epoch < self._state.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if request.current_leader_epoch > self._state.epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if not isinstance(self._state, Leader):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    def _error_fetch_response(self, error: ErrorCode) -> FetchResponse:
        return FetchResponse(error, self.leader_id, self._state.epoch, self._high_watermark)

    def _handle_fetch_request(self, inbound: Inbound, request: FetchRequest, now_ms: int) -> None:
        error = self._fetch_request_error(request)
        if error != ErrorCode.NONE:
            self._respond(inbound, self._error_fetch_response(error))
            return
        state = self._state
        assert isinstance(state, Leader)
        replica = state.replicas.get(request.replica_id)
        if replica is not None:
            replica.begin_quorum_acked = True  # it knows the leader
            self._record_voter_fetch(state, request.replica_id, now_ms)
        diverging, snapshot_id = self._validate_offset_and_epoch(
            request.fetch_offset, request.last_fetched_epoch
        )
        # KafkaRaftClient.handleFetchRequest: only a valid fetch moves a replica's state, a voter's or
        # an observer's (a fetch that diverges or needs a snapshot says nothing of what it holds).
        if diverging is None and snapshot_id is None:
            leader_end_offset = min(self._flushed_end_offset, self.log.end_offset)
            if replica is not None:
                replica.update_follower_state(now_ms, request.fetch_offset, leader_end_offset)
                self._maybe_update_high_watermark(state)
            elif request.replica_id >= 0 and request.replica_id != self.node_id:  # not a consumer
                observer = state.observers.get(request.replica_id)
                if observer is None:
                    state.forget_inactive_observers(now_ms)
                    observer = state.observers[request.replica_id] = ReplicaState()
                observer.update_follower_state(now_ms, request.fetch_offset, leader_end_offset)
        response = self._fetch_response(state, request)
        self._parked_fetches.pop(request.replica_id, None)  # superseded by this one
        no_news = not response.records and response.diverging_epoch is None and response.snapshot_id is None
        if no_news and request.max_wait_ms > 0 and request.high_watermark >= self._high_watermark:
            self._parked_fetches[request.replica_id] = (inbound, now_ms + request.max_wait_ms)
        else:
            self._respond(inbound, response)

    def _record_voter_fetch(self, state: Leader, voter_id: int, now_ms: int) -> None:
        # LeaderState.updateCheckQuorumForFollowingVoter: the leader counts itself.
        state.fetched_voters.add(voter_id)
        if len(state.fetched_voters) + int(self.is_voter) >= majority_size(len(self.voter_ids)):
            state.fetched_voters.clear()
            state.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms

    def _validate_offset_and_epoch(
        self, fetch_offset: int, last_fetched_epoch: int
    ) -> tuple[OffsetAndEpoch | None, OffsetAndEpoch | None]:
        """ReplicatedLog.validateOffsetAndEpoch as the leader uses it (kafka-facts §4.4): returns
        ``(diverging_epoch, snapshot_id)``; both None when the fetch is valid."""
        latest = self.latest_snapshot_id()
        if fetch_offset == 0 and latest is not None:
            return None, latest  # an empty follower always takes the snapshot
        start_offset = self.log.start_offset
        if fetch_offset == 0 and start_offset == 0:
            return None, None
        earliest = self.earliest_snapshot_id()
        if earliest is not None and (
            fetch_offset < start_offset
            or (fetch_offset == start_offset and last_fetched_epoch != earliest.epoch)
            or last_fetched_epoch < earliest.epoch
        ):
            return None, latest
        assert start_offset == 0 or earliest is not None, "the log start moved without a snapshot"
        end = self._end_offset_for_epoch(last_fetched_epoch)
        if end.epoch != last_fetched_epoch or end.offset < fetch_offset:
            return end, None
        return None, None

    def _end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The log's epoch cache; an empty log that starts at a snapshot ends in the snapshot's epoch."""
        latest = self.latest_snapshot_id()
        if (
            self.log.end_offset == self.log.start_offset
            and latest is not None
            and latest.offset == self.log.end_offset
            and epoch >= latest.epoch
        ):
            return OffsetAndEpoch(latest.offset, latest.epoch)
        return self.log.end_offset_for_epoch(epoch)

    def _last_fetched_epoch(self) -> int:
        """KafkaMetadataLog.lastFetchedEpoch: the log's, or the snapshot's when the log is empty and
        starts where the latest snapshot ends."""
        if self.log.end_offset == self.log.start_offset:
            latest = self.latest_snapshot_id()
            if latest is not None and latest.offset == self.log.end_offset:
                return latest.epoch
        return self.log.last_fetched_epoch

    def _fetch_response(self, state: Leader, request: FetchRequest) -> FetchResponse:
        diverging, snapshot_id = self._validate_offset_and_epoch(
            request.fetch_offset, request.last_fetched_epoch
        )
        records = b""
        if diverging is None and snapshot_id is None:
            records = self.log.read(request.fetch_offset, request.max_bytes)
        return FetchResponse(
            ErrorCode.NONE,
            self.node_id,
            state.epoch,
            self._high_watermark,
            self.log.start_offset,
            records,
            diverging_epoch=diverging,
            snapshot_id=snapshot_id,
        )

    # --- FetchSnapshot, leader side (KafkaRaftClient.handleFetchSnapshotRequest) ---------------

    def _handle_fetch_snapshot_request(
        self, inbound: Inbound, request: FetchSnapshotRequest, now_ms: int
    ) -> None:
        def reply(error: ErrorCode, **fields: object) -> None:
            response = FetchSnapshotResponse(error, self.leader_id, self._state.epoch, **fields)  # type: ignore[arg-type]
            self._respond(inbound, response)

        if not self._cluster_id_valid(request.cluster_id):
            reply(ErrorCode.INCONSISTENT_CLUSTER_ID)
            return
        if request.topic_name != METADATA_TOPIC_NAME or request.partition != METADATA_PARTITION:
            reply(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return
        if request.current_leader_epoch < self._state.epoch:
            reply(ErrorCode.FENCED_LEADER_EPOCH)
            return
        if request.current_leader_epoch > self._state.epoch:
            reply(ErrorCode.UNKNOWN_LEADER_EPOCH)
            return
        state = self._state
        if not isinstance(state, Leader):
            reply(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        snapshot_id = request.snapshot_id
        if snapshot_id == BOOTSTRAP_SNAPSHOT_ID or snapshot_id not in self.snapshots.snapshot_ids():
            reply(ErrorCode.SNAPSHOT_NOT_FOUND, snapshot_id=snapshot_id)
            return
        size = self.snapshots.size(snapshot_id)
        if request.position < 0 or request.position >= size:
            reply(ErrorCode.POSITION_OUT_OF_RANGE, snapshot_id=snapshot_id, size=size)
            return
        # FetchSnapshot from a voter counts toward check-quorum; from an observer it does not.
        if request.replica_id in state.replicas:
            state.replicas[request.replica_id].begin_quorum_acked = True
            self._record_voter_fetch(state, request.replica_id, now_ms)
        chunk = self.snapshots.read(snapshot_id, request.position, max(0, request.max_bytes))
        reply(
            ErrorCode.NONE,
            snapshot_id=snapshot_id,
            size=size,
            position=request.position,
            unaligned_records=chunk,
        )

    def _complete_parked_fetches(self) -> None:
        state = self._state
        assert isinstance(state, Leader)
        parked, self._parked_fetches = self._parked_fetches, {}
        for inbound, _deadline in parked.values():
            assert isinstance(inbound.message, FetchRequest)
            self._respond(inbound, self._fetch_response(state, inbound.message))

    def _fail_parked_fetches(self) -> None:
        parked, self._parked_fetches = self._parked_fetches, {}
        for inbound, _deadline in parked.values():
            self._respond(inbound, self._error_fetch_response(ErrorCode.NOT_LEADER_OR_FOLLOWER))

    def _maybe_update_high_watermark(self, state: Leader) -> None:
        # KIP-853: a leader that removed itself counts only the other voters of the new set.
        end_offsets = [min(self._flushed_end_offset, self.log.end_offset)] if self.is_voter else []
        end_offsets += [r.end_offset for r in state.replicas.values() if r.end_offset is not None]
        majority_offset = majority_end_offset(end_offsets, len(self.voter_ids))
        # Raft §5.4.2: only once an entry of this epoch (the LeaderChange batch) is on a majority.
        if majority_offset > state.epoch_start_offset and majority_offset > self._high_watermark:
            self._high_watermark = majority_offset
            self._complete_parked_fetches()

    def _maybe_resign_removed_leader(self, now_ms: int) -> None:
        """KafkaRaftClient.pollLeader: a leader whose own removal has committed resigns (KIP-853)."""
        state = self._state
        if (
            isinstance(state, Leader)
            and not self.is_voter
            and self._high_watermark > self.voter_history.latest_offset()
        ):
            self._become_resigned(state, now_ms)

    # --- KIP-853: voter changes, leader side (AddVoterHandler, RemoveVoterHandler) -------------

    def _leader_for_voter_change(self, now_ms: int) -> Leader | VoterChange:
        """What every voter change checks first: the leader state when it may change the set now,
        else the refusal to answer."""
        self._set_now(now_ms)
        state = self._state
        if not isinstance(state, Leader):
            return VoterChange(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if self.voter_history.kraft_version() < KRAFT_VERSION_DYNAMIC:
            return VoterChange(
                ErrorCode.UNSUPPORTED_VERSION,
                "Cluster doesn't support adding or removing voters (kraft.version 0)",
            )
        if self._high_watermark <= state.epoch_start_offset:
            # The leader knows the committed voter set only once it has committed in its epoch.
            return VoterChange(ErrorCode.REQUEST_TIMED_OUT, "Leader hasn't committed in its current epoch")
        if self.voter_history.latest_offset() >= self._high_watermark:
            # One change at a time: the previous VotersRecord must commit first.
            return VoterChange(ErrorCode.REQUEST_TIMED_OUT, "Leader has an uncommitted voter change")
        return state

    def add_voter(self, voter: Voter, now_ms: int) -> VoterChange:
        """AddRaftVoter (API 80): append the voter set plus ``voter`` once the new voter, fetching as
        an observer, has caught up (AddVoterHandler)."""
        state = self._leader_for_voter_change(now_ms)
        if isinstance(state, VoterChange):
            return state
        current = self.voter_history.latest()
        if voter.voter_id in current.ids:
            return VoterChange(ErrorCode.DUPLICATE_VOTER, f"Voter {voter.voter_id} is already a voter")
        if voter.max_supported_kraft_version < self.voter_history.kraft_version():
            return VoterChange(
                ErrorCode.INVALID_REQUEST, f"Voter {voter.voter_id} does not support this kraft.version"
            )
        observer = state.observers.get(voter.voter_id)
        # LeaderState.isReplicaCaughtUp: the new voter had everything the leader had within the last
        # fetch timeout; otherwise adding it could stall the high watermark.
        if (
            observer is None
            or observer.last_caught_up_ms is None
            or now_ms - observer.last_caught_up_ms > self.fetch_timeout_ms
        ):
            return VoterChange(
                ErrorCode.REQUEST_TIMED_OUT,
                f"Voter {voter.voter_id} is not an observer caught up with the leader",
            )
        return self._append_voters(state, current.with_voter(voter), now_ms)

    def remove_voter(self, voter_id: int, directory_id: bytes, now_ms: int) -> VoterChange:
        """RemoveRaftVoter (API 81): the voter is named by id and directory id (RemoveVoterHandler)."""
        state = self._leader_for_voter_change(now_ms)
        if isinstance(state, VoterChange):
            return state
        current = self.voter_history.latest()
        found = current.get(voter_id)
        if found is None or found.directory_id != directory_id:
            return VoterChange(
                ErrorCode.VOTER_NOT_FOUND, f"Voter {voter_id} with that directory id is not a voter"
            )
        if current.ids == {voter_id}:
            return VoterChange(ErrorCode.VOTER_NOT_FOUND, f"Cannot remove {voter_id}, the only voter")
        return self._append_voters(state, current.without_voter(voter_id), now_ms)

    def update_voter(self, voter: Voter, listener_name: str, now_ms: int) -> VoterChange:
        """UpdateRaftVoter (API 82, UpdateVoterHandler): a voter, named by id and directory id, tells
        the leader its endpoints and supported kraft.version range changed; the leader appends the
        updated voter set and answers at once (Kafka does not wait for the commit)."""
        state = self._leader_for_voter_change(now_ms)
        if isinstance(state, VoterChange):
            return state
        kraft_version = self.voter_history.kraft_version()
        if not voter.min_supported_kraft_version <= kraft_version <= voter.max_supported_kraft_version:
            return VoterChange(
                ErrorCode.INVALID_REQUEST,
                f"Voter {voter.voter_id} does not support kraft.version {kraft_version}",
            )
        if not any(endpoint.name == listener_name for endpoint in voter.endpoints):
            # It must stay reachable on the listener the voters talk on (the default listener).
            return VoterChange(
                ErrorCode.INVALID_REQUEST,
                f"Voter {voter.voter_id} has no endpoint for listener {listener_name}",
            )
        current = self.voter_history.latest()
        found = current.get(voter.voter_id)
        if found is None or found.directory_id != voter.directory_id:
            return VoterChange(
                ErrorCode.VOTER_NOT_FOUND, f"Voter {voter.voter_id} with that directory id is not a voter"
            )
        return self._append_voters(state, current.without_voter(voter.voter_id).with_voter(voter), now_ms)

    def _append_voters(self, state: Leader, voters: VoterSet, now_ms: int) -> VoterChange:
        offset = self.log.end_offset
        self.log.append_as_leader([voters_record(voters.voters)], state.epoch, now_ms, is_control=True)
        self.voter_history.add(ControlEntry(offset, voters=voters))
        self._sync_leader_replicas(state, now_ms)
        self._complete_parked_fetches()
        self._maybe_update_high_watermark(state)
        return VoterChange(ErrorCode.NONE, voters_offset=offset)

    def _sync_leader_replicas(self, state: Leader, now_ms: int) -> None:
        """LeaderState.updateVoterAndObserverStates: voters are the latest set (the leader aside);
        a removed voter becomes an observer and a new one keeps what it did as an observer."""
        others = self.voter_ids - {self.node_id}
        for replica_id in [i for i in state.replicas if i not in others]:
            state.observers[replica_id] = state.replicas.pop(replica_id)
            state.fetched_voters.discard(replica_id)
        for replica_id in sorted(others - state.replicas.keys()):
            replica = state.observers.pop(replica_id, None) or ReplicaState()
            state.replicas[replica_id] = replica
        if not others:
            state.check_quorum_deadline_ms = NEVER_MS
        elif state.check_quorum_deadline_ms == NEVER_MS:
            state.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms

    # --- Fetch, follower side ------------------------------------------------------------------

    def _handle_fetch_response(self, inbound: Inbound, response: FetchResponse, now_ms: int) -> None:
        if self._handle_common_response(
            response.error_code, response.leader_id, response.leader_epoch, now_ms
        ):
            return
        state = self._state
        if isinstance(state, Unattached | Voted) and not self.may_campaign:
            # A voter that knows no leader yet (an election is on): ask again after the retry backoff
            # rather than the whole request timeout.
            state.election_deadline_ms = min(state.election_deadline_ms, now_ms + self.retry_backoff_ms)
            return
        if not isinstance(state, Follower) or inbound.correlation_id != state.fetch_correlation_id:
            return  # a response to a fetch this node no longer waits for
        assert inbound.source_id == state.leader_id
        state.fetch_correlation_id = None
        if response.error_code != ErrorCode.NONE:
            state.fetch_sent_ms = now_ms + self.retry_backoff_ms  # the earliest next fetch
            return
        state.fetch_deadline_ms = now_ms + self.fetch_timeout_ms
        if response.diverging_epoch is not None:
            self._truncate_to_end_offset(response.diverging_epoch)
        elif response.snapshot_id is not None:
            snapshot_id = response.snapshot_id
            if snapshot_id.offset < 0 or snapshot_id.epoch < 0:
                # testFetchResponseWithInvalidSnapshotId: ignored; fetch again after a backoff.
                state.fetch_sent_ms = now_ms + self.retry_backoff_ms
                return
            if snapshot_id in self.snapshots.snapshot_ids():
                self._install_snapshot(state, snapshot_id)  # already here (a crash before truncating)
            else:
                state.fetching_snapshot = snapshot_id
                state.snapshot_bytes = bytearray()
        else:
            self._append_as_follower(response)
        self._send_fetch(state, now_ms)

    # --- FetchSnapshot, follower side (KafkaRaftClient.handleFetchSnapshotResponse) ------------

    def _handle_fetch_snapshot_response(
        self, inbound: Inbound, response: FetchSnapshotResponse, now_ms: int
    ) -> None:
        if self._handle_common_response(
            response.error_code, response.leader_id, response.leader_epoch, now_ms
        ):
            return
        state = self._state
        if not isinstance(state, Follower) or inbound.correlation_id != state.fetch_correlation_id:
            return
        state.fetch_correlation_id = None
        fetching = state.fetching_snapshot
        if fetching is None:
            return
        if response.error_code == ErrorCode.SNAPSHOT_NOT_FOUND or response.snapshot_id.offset < 0:
            # The leader cleaned it: abandon the download; a plain Fetch finds the latest snapshot.
            self._abandon_snapshot(state)
            self._send_fetch(state, now_ms)
            return
        if response.error_code != ErrorCode.NONE:
            state.fetch_sent_ms = now_ms + self.retry_backoff_ms
            return
        state.fetch_deadline_ms = now_ms + self.fetch_timeout_ms
        if (
            response.snapshot_id != fetching
            or response.position != len(state.snapshot_bytes)
            or response.size < response.position + len(response.unaligned_records)
        ):
            # Kafka throws IllegalStateException; a leader that answers for another snapshot or
            # position is not trusted with this download: start over from a plain Fetch.
            self._abandon_snapshot(state)
            self._send_fetch(state, now_ms)
            return
        state.snapshot_bytes += response.unaligned_records
        if len(state.snapshot_bytes) == response.size:
            self.snapshots.write(fetching, bytes(state.snapshot_bytes))
            self._install_snapshot(state, fetching)
        self._send_fetch(state, now_ms)

    def _abandon_snapshot(self, state: Follower) -> None:
        state.fetching_snapshot = None
        state.snapshot_bytes = bytearray()

    def _install_snapshot(self, state: Follower, snapshot_id: OffsetAndEpoch) -> None:
        """§4.6: truncate the log fully at the snapshot's end, high watermark = that offset, forget
        older snapshots, and have the state machine load it."""
        self._abandon_snapshot(state)
        # Never below what this node already committed (Raft safety; Kafka's truncation guard).
        assert snapshot_id.offset >= self._high_watermark, (snapshot_id, self._high_watermark)
        self.log.truncate_fully_and_start_at(snapshot_id.offset)
        self._flushed_end_offset = min(self._flushed_end_offset, self.log.end_offset)
        self._flush_requested_offset = min(self._flush_requested_offset, self.log.end_offset)
        for older in self.snapshots.snapshot_ids():
            if older < snapshot_id:
                self.snapshots.delete(older)
        self._high_watermark = snapshot_id.offset
        self._next_apply_offset = snapshot_id.offset
        self._snapshot_to_load = snapshot_id
        if self._tracks_voters():
            self.voter_history.reset_to_snapshot(snapshot_id.offset, *self._snapshot_kraft_state(snapshot_id))

    # --- KIP-853: the voter set from snapshots and the log (KRaftControlRecordStateMachine) ----

    def _tracks_voters(self) -> bool:
        """Static voters (kraft.version 0 from the start) never read VotersRecords, as before KIP-853."""
        return self.voter_history.kraft_version() > 0 or self.voter_history.latest_offset() >= 0

    def _snapshot_kraft_state(self, snapshot_id: OffsetAndEpoch) -> tuple[VoterSet | None, int | None]:
        """The VotersRecord and KRaftVersionRecord of a snapshot's header batch, if it has them."""
        data = self.snapshots.read(snapshot_id, 0, self.snapshots.size(snapshot_id))
        first = next(scan_batches(data), None)
        voters: VoterSet | None = None
        kraft_version: int | None = None
        if first is not None:
            header_batch = data[first[0] : first[0] + first[1].size_in_bytes]
            for entry in scan_kraft_control_records(header_batch):
                voters = entry.voters if entry.voters is not None else voters
                kraft_version = entry.kraft_version if entry.kraft_version is not None else kraft_version
        return voters, kraft_version

    def _load_voter_history(self, latest: OffsetAndEpoch | None) -> None:
        """At startup: the latest snapshot's set, then every VotersRecord of the log after it."""
        if latest is not None:
            self.voter_history.reset_to_snapshot(latest.offset, *self._snapshot_kraft_state(latest))
        offset = self.log.start_offset
        while offset < self.log.end_offset:
            data = self.log.read(offset, self.fetch_max_bytes)
            last = offset
            for pos, header in scan_batches(data):
                last = header.last_offset + 1
                if header.is_control:
                    for entry in scan_kraft_control_records(data[pos : pos + header.size_in_bytes]):
                        if entry.offset >= offset:
                            self.voter_history.add(entry)
            assert last > offset, f"cannot read the log at {offset}"
            offset = last

    def _append_as_follower(self, response: FetchResponse) -> None:
        if response.records:
            first = next(scan_batches(response.records), None)
            assert first is not None, "the leader sent records with no whole batch"
            assert first[1].base_offset == self.log.end_offset, (first[1].base_offset, self.log.end_offset)
            self.log.append_as_follower(response.records)
            if self._tracks_voters():
                for entry in scan_kraft_control_records(response.records):
                    self.voter_history.add(entry)
        # KafkaRaftClient.updateFollowerHighWatermark: never past what this log holds.
        high_watermark = min(response.high_watermark, self.log.end_offset)
        if high_watermark > self._high_watermark:
            self._high_watermark = high_watermark

    def _truncate_to_end_offset(self, diverging: OffsetAndEpoch) -> None:
        """ReplicatedLog.truncateToEndOffset."""
        if diverging.epoch == 0:
            offset = min(diverging.offset, self.log.end_offset)
        else:
            local = self.log.end_offset_for_epoch(diverging.epoch)
            offset = min(local.offset, diverging.offset) if local.epoch == diverging.epoch else local.offset
        # Truncating committed data would be a Raft safety bug (Kafka throws a fatal KafkaException).
        assert offset >= self._high_watermark, (offset, self._high_watermark)
        self.log.truncate_to(offset)
        self.voter_history.truncate_to(offset)
        self._flushed_end_offset = min(self._flushed_end_offset, self.log.end_offset)
        self._flush_requested_offset = min(self._flush_requested_offset, self.log.end_offset)

    # --- snapshots the state machine makes, and cleaning (KafkaMetadataLog) --------------------

    def validate_new_snapshot_id(self, snapshot_id: OffsetAndEpoch) -> bool:
        """createNewSnapshot's checks: False when nothing should be written (below the log start, or
        it exists); ValueError when the id is impossible (past the high watermark, or an epoch that
        does not match the log at that offset)."""
        if snapshot_id.offset < self.log.start_offset:
            return False
        if snapshot_id.offset > self._high_watermark:
            raise ValueError(
                f"cannot snapshot to {tuple(snapshot_id)}: past the high watermark {self._high_watermark}"
            )
        if snapshot_id in self.snapshots.snapshot_ids():
            return False
        if snapshot_id.offset > self.log.start_offset:
            end = self._end_offset_for_epoch(snapshot_id.epoch)
            if end.epoch != snapshot_id.epoch or end.offset < snapshot_id.offset:
                raise ValueError(
                    f"cannot snapshot to {tuple(snapshot_id)}: the log has epoch {end.epoch} there"
                )
        return True

    def delete_before_snapshot(self, snapshot_id: OffsetAndEpoch) -> bool:
        """deleteBeforeSnapshot: move the log start to ``snapshot_id.offset`` and forget older
        snapshots; only for a known snapshot with ``log start < its offset <= latest``."""
        latest = self.latest_snapshot_id()
        if (
            latest is None
            or snapshot_id not in self.snapshots.snapshot_ids()
            or not self.log.start_offset < snapshot_id.offset <= latest.offset
            or snapshot_id.offset > self.log.end_offset
        ):
            return False
        self.log.delete_before(snapshot_id.offset)
        for older in self.snapshots.snapshot_ids():
            if older < snapshot_id:
                self.snapshots.delete(older)
        return True

    def maybe_clean(self, now_ms: int, *, retention_bytes: int, retention_ms: int) -> list[OffsetAndEpoch]:
        """maybeClean: advance the log start past snapshots that break retention by size or time,
        always keeping the latest snapshot. Returns the snapshot ids the log now starts at."""
        moved: list[OffsetAndEpoch] = []
        while True:
            target = retention_delete_before(
                self.snapshots,
                self.log.size_in_bytes,
                now_ms,
                retention_bytes=retention_bytes,
                retention_ms=retention_ms,
            )
            if target is None:
                return moved
            if not self.delete_before_snapshot(target):
                # The log start is already at or past it: just forget the older snapshots.
                for older in self.snapshots.snapshot_ids():
                    if older < target:
                        self.snapshots.delete(older)
            moved.append(target)

    # --- committed batches ---------------------------------------------------------------------

    def _committed_batches(self) -> tuple[CommittedBatch, ...]:
        if self._high_watermark <= self._next_apply_offset:
            return ()
        data = self.log.read(self._next_apply_offset, self.fetch_max_bytes)
        batches: list[CommittedBatch] = []
        for pos, header in scan_batches(data):
            if header.last_offset >= self._high_watermark:
                break
            records = decode_records(memoryview(data)[pos : pos + header.size_in_bytes])
            # A snapshot that ends inside a batch (not one this node made): skip what it covers.
            skip = max(0, self._next_apply_offset - header.base_offset) if not batches else 0
            batches.append(
                CommittedBatch(
                    base_offset=header.base_offset + skip,
                    last_offset=header.last_offset,
                    epoch=header.partition_leader_epoch,
                    records=tuple(_value(record) for record in records[skip:]),
                    is_control=header.is_control,
                    append_timestamp_ms=header.max_timestamp,
                )
            )
        if batches:
            assert batches[0].base_offset == self._next_apply_offset
        return tuple(batches)

    def _soft_state(self) -> tuple[Role, int, int, int]:
        return (self._state.role, self.leader_id, self._state.epoch, self._high_watermark)


def _value(record: Record) -> bytes:
    return record.value if record.value is not None else b""
