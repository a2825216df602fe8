"""The metadata path of one node: raft driver, controller writes, image publishing.

The driver follows the raft core's Ready contract: persist the quorum state, fsync the log up to
``flush_to_offset``, send messages, apply what is committed, then ``advance``. A controller write
generates records (no mutation), replays them into the controller at append time (as Kafka's active
controller does) and completes when the raft high watermark passes them and the broker's image has
them — so a CreateTopics response is only sent once the topic is visible to Metadata.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from kafka.protocol.admin import (
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeClusterResponse,
    ElectLeadersResponse,
)

from pykraft.broker import (
    cluster_admin,
    configs_api,
    features_api,
    partitions_api,
    quotas_api,
    reassignments_api,
    security_api,
)
from pykraft.broker.handlers import BrokerView, ClusterView, PartitionView, TopicView
from pykraft.broker.producer_id_manager import AllocateProducerIdsResponseData
from pykraft.controller.cluster import BrokerHeartbeatReply, BrokerHeartbeatTracker
from pykraft.controller.producer_ids import ProducerIdAllocationLimiter
from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replication import (
    ELECTION_TYPE_PREFERRED,
    CreatableReplicaAssignment,
    CreatableTopic,
    ElectionResult,
    IsrChangeRequest,
    IsrChangeResult,
)
from pykraft.controller.result import ControllerResult
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode, RemoteProtocolError
from pykraft.core.group_configs import group_coordinator_settings
from pykraft.io.file_store import FileSegmentStore
from pykraft.io.heap import collection_paused
from pykraft.io.meta_properties_files import ClusterIdConflictError, ClusterIdPublisher
from pykraft.io.quorum_peers import (
    Address,
    ControllerAddresses,
    controller_endpoint,
    first_voters,
    highest_leader_epoch,
    local_voter,
    metadata_directory_id,
    static_voters,
)
from pykraft.io.raft_log import METADATA_PARTITION_DIR, FileRaftLog
from pykraft.io.rpc_channel import Answered, ChannelEvent, ChannelSecurity, RpcChannels
from pykraft.io.snapshots import FileSnapshotStore, MetadataSnapshots, read_bootstrap_records
from pykraft.io.voter_updater import VoterUpdater
from pykraft.io.waiting import park, wait_event, wait_shielded
from pykraft.log.partition_log import PartitionLog
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import (
    CONFIG_RESOURCE_TYPE_BROKER,
    BrokerEndpoint,
    BrokerFeature,
    ConfigResource,
    MetadataImage,
    TopicImage,
)
from pykraft.metadata.records import ApiMessageAndVersion, decode_metadata_record, encode_metadata_record
from pykraft.protocol.messages import (
    AddRaftVoterResponse,
    AllocateProducerIdsResponse,
    AlterPartitionResponse,
    BrokerHeartbeatResponse,
    BrokerRegistrationResponse,
    RemoveRaftVoterResponse,
    UpdateRaftVoterResponse,
)
from pykraft.raft import wire
from pykraft.raft.control import KRAFT_VERSION_DYNAMIC, Endpoint, Voter
from pykraft.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    Inbound,
    OffsetAndEpoch,
    Outbound,
    QuorumDescription,
    RaftRequest,
    RaftResponse,
    VoteRequest,
)
from pykraft.raft.node import RaftNode, VoterChange
from pykraft.raft.quorum_state import decode_quorum_state, encode_quorum_state
from pykraft.raft.snapshot import BOOTSTRAP_SNAPSHOT_ID
from pykraft.raft.state import Role

log = logging.getLogger("pykraft.metadata")

QUORUM_STATE_FILE = "quorum-state"
RAFT_TICK_S = 0.05
# How long a resigning leader waits for its EndQuorumEpoch requests to be answered on shutdown.
RESIGN_WAIT_S = 0.2
# Start-up has no wall-clock cap on loading a long metadata log: it fails only when nothing is loaded
# (no record applied, no snapshot loaded) for this long and the controller is still not active, e.g.
# a raft core that never becomes leader.
ACTIVATION_STALL_TIMEOUT_S = 60.0
# How often start() checks for progress while it waits.
ACTIVATION_CHECK_S = 1.0
# Progress lines while replaying the log at start-up: one every this many records.
LOAD_PROGRESS_EVERY_RECORDS = 200_000


class MetadataStartError(RuntimeError):
    """The metadata plane could not become active (one line saying what it waited for)."""


class NotControllerError(Exception):
    """A controller write that cannot complete here: this node stopped (or is not the active
    controller). Retriable: the caller answers NOT_CONTROLLER (41) and the client retries elsewhere."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _write_atomically(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class MetadataPlane:
    def __init__(
        self,
        config: NodeConfig,
        rng: random.Random,
        on_image: Callable[[], None],
        on_fatal: Callable[[str], None] = lambda reason: None,
        peer_security: ChannelSecurity | None = None,
    ) -> None:
        self.config = config
        # TLS and SASL of the connections to the other voters' controller listeners.
        self.peer_security = peer_security
        self.rng = rng
        self.on_image = on_image
        # A condition this node cannot serve through (one line): the node stops and the process exits.
        self.on_fatal = on_fatal
        self.image = MetadataImage.EMPTY
        # Each topic's view, kept while its TopicImage is the same object (an image replaces only the
        # topics a delta touched): a view costs what the changed topics cost (issue 29).
        self._topic_views: dict[str, tuple[TopicImage, TopicView]] = {}
        self._bootstrap_records: list[ApiMessageAndVersion] = []
        self.controller = self._new_controller()
        self.raft_log: FileRaftLog | None = None
        self.snapshots: MetadataSnapshots | None = None
        self.raft: RaftNode | None = None
        self._controller_active = False
        self._commit_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._stopping = False
        # Raft requests from peers waiting for the core's answer, by (source id, correlation id).
        self._pending_responses: dict[tuple[int, int], asyncio.Future[RaftResponse]] = {}
        # Our metadata Fetch requests in flight: (leader id, correlation id) -> when sent; each answer's
        # high watermark goes to ``on_fetch_answered`` with that time (the broker's coordinator lease).
        self._fetches_sent_ms: dict[tuple[int, int], int] = {}
        self.on_fetch_answered: Callable[[int, int], None] | None = None
        self.channels: RpcChannels | None = None
        # Where the controllers are: static voters, or (KIP-853) bootstrap servers, the VotersRecord's
        # endpoints and the leaders Fetch responses name.
        self.addresses = ControllerAddresses(config)
        # This controller as a voter of a dynamic quorum (its directory id is known once started).
        self.local_voter: Voter | None = None
        self._voter_updater: VoterUpdater | None = None
        self._voter_updater_task: asyncio.Task[None] | None = None
        # The commit of this leadership's activation records (KIP-1262 cluster id, bootstrap).
        self._activation: asyncio.Future[None] | None = None
        self._applied_end_offset = 0
        self._last_append_ms = 0
        # When the active controller next checks the leader balance (-1: one interval from now).
        self._next_leader_balance_ms = -1
        self.allocation_limiter = ProducerIdAllocationLimiter()
        self.heartbeats = BrokerHeartbeatTracker()
        self._wakeup = asyncio.Event()
        self._active = asyncio.Event()
        self._image_published = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._removed_topics: list[tuple[str, list[int]]] = []
        self._incarnation_id = uuid.UUID(int=rng.getrandbits(128))
        self._broker_epoch = -1
        self._meta_dir = os.path.join(config.metadata_log_dir, METADATA_PARTITION_DIR)
        self.activation_stall_timeout_s = ACTIVATION_STALL_TIMEOUT_S
        # Loading progress: records applied (log and snapshot) since start, and the start-up log end.
        self._loaded_records = 0
        self._load_first_offset: int | None = None
        self._load_end_offset = 0
        # KIP-1262: the single writer of cluster.id (set by the node before start) and the id readers see.
        self.cluster_id_publisher: ClusterIdPublisher | None = None
        self.cluster_id: str | None = None

    def _new_controller(self) -> QuorumController:
        controller = QuorumController(
            rng=self.rng,
            node_id=self.config.node_id,
            default_num_partitions=self.config.num_partitions,
            default_replication_factor=self.config.default_replication_factor,
            unclean_leader_election_enable=self.config.unclean_leader_election_enable,
            group_settings=group_coordinator_settings(self.config),
        )
        # ``storage format --add-scram``: written by the first controller, inside the bootstrap transaction.
        controller.bootstrap_extra_records = list(self._bootstrap_records)
        # Inactive until _activate: what a request makes it generate before then is refused, not applied.
        controller.active = False
        return controller

    # --- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        os.makedirs(self._meta_dir, exist_ok=True)
        self._bootstrap_records = read_bootstrap_records(self.config.metadata_log_dir)
        self.controller.bootstrap_extra_records = list(self._bootstrap_records)
        plog = PartitionLog.open(
            FileSegmentStore(self._meta_dir), FileRaftLog.config(self.config.metadata_log_segment_bytes)
        )
        self.raft_log = FileRaftLog(plog)
        # KIP-630: the snapshots (the raft core asks the first Ready to load the latest one).
        self.snapshots = MetadataSnapshots(
            self.config, FileSnapshotStore.open(self._meta_dir, plog.log_start_offset), now_ms()
        )
        quorum_state = None
        qs_path = os.path.join(self.config.metadata_log_dir, QUORUM_STATE_FILE)
        if os.path.exists(qs_path):
            with open(qs_path, "rb") as fh:
                quorum_state = decode_quorum_state(fh.read())
        if self.cluster_id_publisher is not None:
            self.cluster_id = self.cluster_id_publisher.cluster_id
        voter_ids = frozenset(self.config.controller_quorum_voters)
        kraft_version = 0
        bootstrap_voters = None if self.config.dynamic_quorum else static_voters(self.config)
        if self.config.dynamic_quorum:
            # KIP-853: the voter set is the log's; whom to ask who leads are the bootstrap servers.
            voter_ids = self.addresses.bootstrap_ids
            kraft_version = KRAFT_VERSION_DYNAMIC
            directory_id = metadata_directory_id(self.config)
            if self.config.is_controller and directory_id is not None:
                self.local_voter = local_voter(self.config, directory_id)
                log_is_empty = self.raft_log.end_offset == 0 and not any(
                    i != BOOTSTRAP_SNAPSHOT_ID for i in self.snapshots.store.snapshot_ids()
                )
                bootstrap_voters = first_voters(self.config, directory_id, log_is_empty=log_is_empty)
                if bootstrap_voters is not None and await self._quorum_already_runs():
                    bootstrap_voters = None
                if bootstrap_voters is not None:
                    log.info(
                        "node %d starts a new dynamic quorum as its first voter (the first of "
                        "controller.quorum.bootstrap.servers, an empty metadata log)",
                        self.config.node_id,
                    )
        self.raft = RaftNode(
            self.config.node_id,
            voter_ids,
            self.raft_log,
            quorum_state,
            self.rng,
            now_ms(),
            cluster_id=self.cluster_id,
            snapshots=self.snapshots.store,
            election_timeout_ms=self.config.controller_quorum_election_timeout_ms,
            fetch_timeout_ms=self.config.controller_quorum_fetch_timeout_ms,
            election_backoff_max_ms=self.config.controller_quorum_election_backoff_max_ms,
            request_timeout_ms=self.config.controller_quorum_request_timeout_ms,
            retry_backoff_ms=self.config.controller_quorum_retry_backoff_ms,
            kraft_version=kraft_version,
            bootstrap_voters=bootstrap_voters,
            # A broker-only process does not fsync the metadata it fetches (issue 29: an fsync per
            # fetched NoOp stalled every broker's event loop, and with it replication and produce).
            followers_always_flush=self.config.is_controller,
        )
        self.addresses.sync_voters(self.raft.voter_set)
        peers = {i: a for i, a in self.addresses.addresses().items() if i != self.config.node_id}
        self.channels = RpcChannels(
            peers,
            self._on_channel_event,
            request_timeout_ms=self.config.controller_quorum_request_timeout_ms,
            rng=self.rng,
            security=self.peer_security,
            client_id=f"raft-{self.config.node_id}",
        )
        self.addresses.subscribe(self._on_controller_address)
        if self.local_voter is not None:
            # KIP-853: a voter that moved tells the leader its new endpoints (UpdateRaftVoter).
            self._voter_updater = VoterUpdater(
                lambda: self.raft,
                self.local_voter,
                lambda: self.cluster_id,
                self.addresses,
                period_ms=self.config.controller_quorum_fetch_timeout_ms // 2,
                request_timeout_ms=self.config.controller_quorum_request_timeout_ms,
                rng=self.rng,
                security=self.peer_security,
            )
            self._voter_updater_task = asyncio.get_running_loop().create_task(
                self._voter_updater.run(), name="raft-voter-updater"
            )
        started = time.monotonic()
        self._load_end_offset = self.raft_log.end_offset
        self._task = asyncio.get_running_loop().create_task(self._drive(), name="metadata-log-driver")
        if not self.waits_for_activation:
            # A voter of a larger quorum serves raft requests from now on; it becomes the active
            # controller if and when it is elected (the driver activates it then).
            return
        with collection_paused(freeze=False):
            await self._wait_until_active()
        assert self._activation is not None
        await self._activation
        log.info(
            "metadata log loaded to offset %d in %.0f ms",
            self.image.offset,
            (time.monotonic() - started) * 1000,
        )

    async def _quorum_already_runs(self) -> bool:
        """pykraft's guard on the first-voter rule: the other bootstrap servers name a leader epoch."""
        others = {i: a for i, a in self.addresses.addresses().items() if i in self.addresses.bootstrap_ids}
        if not others:
            return False
        epoch = await highest_leader_epoch(
            others,
            request_timeout_ms=self.config.controller_quorum_request_timeout_ms,
            rng=self.rng,
            security=self.peer_security,
        )
        if epoch > 0:
            log.warning(
                "node %d is the first of controller.quorum.bootstrap.servers with an empty metadata log, "
                "but a quorum already runs there (leader epoch %d): it joins as an observer (add it with "
                "pykraft metadata-quorum add-controller)",
                self.config.node_id,
                epoch,
            )
        return epoch > 0

    def _on_controller_address(self, node_id: int, address: Address) -> None:
        if self.channels is not None and node_id != self.config.node_id:
            self.channels.set_address(node_id, address)

    @property
    def waits_for_activation(self) -> bool:
        """A single-voter quorum (the embedded node) starts only once its controller is active, so the
        broker in the same process can register at once."""
        return self.config.is_controller and len(self.config.controller_quorum_voters) == 1

    @property
    def is_active(self) -> bool:
        return self._controller_active

    @property
    def applied_end_offset(self) -> int:
        """The offset after the last committed record in the image (the metrics' last applied offset)."""
        return self._applied_end_offset

    async def _wait_until_active(self) -> None:
        """Wait for activation as long as loading makes progress; fail with one line when the driver
        died (its exception) or nothing was loaded for ``activation_stall_timeout_s``."""
        assert self._task is not None and self.raft is not None
        last_progress = self._loaded_records
        last_change = time.monotonic()
        while not self._active.is_set():
            waiter = asyncio.ensure_future(self._active.wait())
            await asyncio.wait(
                {waiter, self._task},
                timeout=min(ACTIVATION_CHECK_S, self.activation_stall_timeout_s),
                return_when=asyncio.FIRST_COMPLETED,
            )
            waiter.cancel()
            if self._task.done():
                error = None if self._task.cancelled() else self._task.exception()
                raise MetadataStartError(
                    f"the metadata log driver stopped before this controller became active: {error!r}"
                ) from error
            now = time.monotonic()
            if self._loaded_records != last_progress:
                last_progress, last_change = self._loaded_records, now
            elif not self._active.is_set() and now - last_change >= self.activation_stall_timeout_s:
                raft = self.raft
                raise MetadataStartError(
                    f"the metadata plane did not become active: nothing loaded for "
                    f"{now - last_change:.0f} s (raft role {raft.role.name}, epoch {raft.epoch}, leader "
                    f"{raft.leader_id}, high watermark {raft.high_watermark}, log end "
                    f"{self._log().end_offset}, {self._loaded_records} record(s) loaded); check "
                    f"controller.quorum.voters={sorted(self.config.controller_quorum_voters)}"
                )

    def fail_pending_writes(self) -> None:
        """Refuse new controller writes and fail the waiting ones with NotControllerError (shutdown:
        they may still commit from the log on restart, but nobody is told they did)."""
        self._stopping = True
        waiters, self._commit_waiters = self._commit_waiters, []
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(NotControllerError("the controller is shutting down"))

    async def stop(self) -> None:
        """Stop the raft driver, then ``close_log`` (a caller that bounds the wait calls ``close_log``
        itself when the driver does not stop in time)."""
        self.fail_pending_writes()
        raft = self.raft
        has_peers = raft is not None and bool(raft.voter_ids - {self.config.node_id})
        if raft is not None and self._task is not None and raft.role == Role.LEADER and has_peers:
            # Graceful resignation: EndQuorumEpoch tells the voters to elect a successor now rather
            # than after their fetch timeout (KafkaRaftClient.shutdown).
            raft.resign(now_ms())
            self._wakeup.set()
            await asyncio.sleep(RESIGN_WAIT_S)
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._voter_updater_task is not None and self._voter_updater is not None:
            self._voter_updater_task.cancel()
            await asyncio.gather(self._voter_updater_task, return_exceptions=True)
            await self._voter_updater.close()
            self._voter_updater_task = None
        for fut in self._pending_responses.values():
            fut.cancel()
        self._pending_responses.clear()
        if self.channels is not None:
            await self.channels.close()
        self.close_log()

    def close_log(self) -> None:
        """Flush and close the metadata log (after ``stop``; also when the driver would not stop)."""
        if self._task is not None:
            self._task.cancel()
        if self.raft_log is not None:
            self.raft_log.flush(self.raft_log.end_offset)
            self.raft_log.log.close()
            self.raft_log = None

    # --- the raft driver --------------------------------------------------------------------------

    async def _drive(self) -> None:
        assert self.raft is not None
        while True:
            self.raft.tick(now_ms())
            if self._drain_ready():
                # More committed data is waiting (a long log loading): let the loop run in between.
                await asyncio.sleep(0)
                continue
            self._maybe_write_no_op()
            self._maybe_fence_expired_brokers()
            self._maybe_balance_leaders()
            wait_s = min(RAFT_TICK_S, max(0.0, (self.raft.next_deadline_ms() - now_ms()) / 1000))
            if wait_s > 0:
                await wait_event(self._wakeup, wait_s)
            self._wakeup.clear()

    def _drain_ready(self) -> bool:
        """Handle Readies; after one that applied data, stop and return True if more are waiting."""
        raft, raft_log = self.raft, self.raft_log
        assert raft is not None and raft_log is not None
        changed = False
        more = False
        while raft.has_ready():
            if changed:
                more = True
                break
            ready = raft.ready()
            if ready.quorum_state is not None:
                _write_atomically(
                    os.path.join(self.config.metadata_log_dir, QUORUM_STATE_FILE),
                    encode_quorum_state(ready.quorum_state),
                )
            if ready.flush_to_offset is not None:
                raft_log.flush(ready.flush_to_offset)
            for outbound in ready.messages:
                self._send(outbound)
            if ready.load_snapshot is not None:
                self._load_snapshot(ready.load_snapshot)
                changed = True
            if ready.committed:
                self._apply_committed(ready.committed)
                changed = True
            raft.advance(ready, now_ms())
            if self.config.dynamic_quorum:
                self.addresses.sync_voters(raft.voter_set)
            if self._controller_active and raft.role != Role.LEADER:
                self._lose_leadership()
            if (
                not self._controller_active
                and not self._stopping
                and raft.role == Role.LEADER
                and raft.high_watermark >= raft_log.end_offset
                and self.controller.next_write_offset >= raft_log.end_offset
            ):
                self._become_active()
        if changed:
            self._publish()
        if self.snapshots is not None:
            if changed:
                self.snapshots.maybe_snapshot(self.image, raft, now_ms())
            self.snapshots.maybe_clean(raft, now_ms())
        return more

    def _become_active(self) -> None:
        """This voter leads and has applied its whole log: it is the active controller. The activation
        records (the bootstrap records into an empty log with the KIP-1262 cluster id, or the abort of a
        metadata transaction a previous leader left open; Kafka ActivationRecordsGenerator) are
        generated and appended here, synchronously, so no other write can come before them."""
        raft = self.raft
        assert raft is not None
        self._controller_active = True
        self._active.set()
        self.controller.active = True
        self.controller.note_log_end_offset(self._log().end_offset)
        publisher = self.cluster_id_publisher
        minted = publisher.activation_cluster_id(self.rng) if publisher is not None else None
        activation = self._append(self.controller.activate(cluster_id=minted))
        if activation is None:  # nothing to write: the log already holds metadata.version and the id
            activation = asyncio.get_running_loop().create_future()
            activation.set_result(None)
        self._activation = activation
        self._last_append_ms = now_ms()
        self._next_leader_balance_ms = -1  # the first check is one interval after activation
        # Every broker process gets a fresh session from a new active controller (Kafka: heartbeat
        # state is not in the log). The embedded node's own broker never heartbeats: not tracked.
        self.heartbeats = BrokerHeartbeatTracker()
        for broker_id in self.controller.cluster_control.registrations():
            if broker_id != self.config.node_id:
                self.heartbeats.touch(broker_id, now_ms())
        log.info("node %d is the active controller at epoch %d", self.config.node_id, raft.epoch)

    def _lose_leadership(self) -> None:
        """Another voter leads now: fail the writes waiting to commit with NOT_CONTROLLER (they may
        still commit under the new leader, as in Kafka) and revert the controller's uncommitted
        in-memory state to what is committed — the image at the applied offset (Kafka reverts its
        SnapshotRegistry to the last committed offset)."""
        self._controller_active = False
        self.controller.active = False
        self._active.clear()
        # What committed (and is applied) is answered as done: a leader that removed itself (KIP-853)
        # resigns as its removal commits, and RemoveRaftVoter succeeded (Kafka's RemoveVoterHandler).
        self._complete_commit_waiters(self._applied_end_offset)
        waiters, self._commit_waiters = self._commit_waiters, []
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(NotControllerError("this controller lost the leadership"))
        raft = self.raft
        if self._stopping:
            return  # resigned on shutdown: nothing will write through this controller again
        self.controller = self._new_controller()
        self.controller.load_image(self.image, self._applied_end_offset)
        assert raft is not None
        log.info(
            "node %d is no longer the active controller (epoch %d, leader %d)",
            self.config.node_id,
            raft.epoch,
            raft.leader_id,
        )

    def _maybe_write_no_op(self) -> None:
        """KIP-835: an idle active controller appends a NoOpRecord every metadata.max.idle.interval.ms,
        so followers and brokers can tell a live leader's empty log from a stalled one (not on the
        single-node cluster, whose only reader is its own broker: its log stays quiet)."""
        interval_ms = self.config.metadata_max_idle_interval_ms
        if not self._controller_active or self._stopping or interval_ms <= 0 or self.config.is_broker:
            return
        if now_ms() - self._last_append_ms < interval_ms:
            return
        self._append(self.controller.no_op())

    # --- the network between voters -----------------------------------------------------------------

    def _send(self, outbound: Outbound) -> None:
        """A request goes out through the peer's channel; a response goes back to the connection its
        request came in on (the server handler waiting in ``handle_raft_request``)."""
        message = outbound.message
        if isinstance(message, FetchResponse) and message.leader_id >= 0:
            # Fetch v16+ NodeEndpoints: where the leader it names listens (KIP-853 discovery).
            message = dataclasses.replace(
                message, leader_endpoint=self._controller_address(message.leader_id)
            )
        if isinstance(message, RaftRequestTypes):
            if self.channels is not None:
                frame = wire.encode_raft_request(
                    message, outbound.correlation_id, f"raft-client-{self.config.node_id}"
                )
                if isinstance(message, FetchRequest) and self.on_fetch_answered is not None:
                    self._fetches_sent_ms[(outbound.destination_id, outbound.correlation_id)] = now_ms()
                self.channels.send(outbound.destination_id, outbound.correlation_id, frame, type(message))
            return
        waiting = self._pending_responses.pop((outbound.destination_id, outbound.correlation_id), None)
        if waiting is not None and not waiting.done():
            waiting.set_result(message)

    def _on_channel_event(self, event: ChannelEvent) -> None:
        """Every outcome of a raft request goes back to the core: an answer as the inbound response, a
        timeout or disconnect through ``request_failed``."""
        raft = self.raft
        if raft is None or self._task is None:
            return
        fetch_sent_ms = self._fetches_sent_ms.pop((event.peer_id, event.correlation_id), None)
        if not isinstance(event, Answered):
            log.debug("raft request %d to node %d: %s", event.correlation_id, event.peer_id, event.reason)
            raft.request_failed(
                event.peer_id, event.correlation_id, now_ms(), refused=event.reason == "refused"
            )
            self._wakeup.set()
            return
        try:
            request_type: Any = event.context
            # bytes: the records it decodes are kept (a large answer arrives as a bytearray).
            correlation_id, response = wire.decode_raft_response(request_type, bytes(event.frame))
        except RemoteProtocolError as exc:
            log.warning("node %d sent a raft response that does not parse: %s", event.peer_id, exc)
            return
        if isinstance(response, FetchResponse) and response.leader_endpoint is not None:
            self.addresses.learn(response.leader_id, response.leader_endpoint)
        raft.step(Inbound(event.peer_id, response, correlation_id), now_ms())
        if (
            fetch_sent_ms is not None
            and isinstance(response, FetchResponse)
            and response.error_code == ErrorCode.NONE
            and self.on_fetch_answered is not None
        ):
            self.on_fetch_answered(fetch_sent_ms, response.high_watermark)
        self._wakeup.set()

    async def handle_raft_request(self, correlation_id: int, request: RaftRequest) -> RaftResponse | None:
        """A raft request from a peer: step the core and wait for its answer (a Fetch may park up to
        its max wait). None when the core gave no answer within the request timeout."""
        raft = self.raft
        if raft is None or self._stopping:
            return None
        source_id = _source_id(request)
        fut: asyncio.Future[RaftResponse] = asyncio.get_running_loop().create_future()
        key = (source_id, correlation_id)
        previous = self._pending_responses.pop(key, None)
        if previous is not None:
            previous.cancel()
        self._pending_responses[key] = fut
        raft.step(Inbound(source_id, request, correlation_id), now_ms())
        self._wakeup.set()
        if not await wait_shielded(fut, self.config.controller_quorum_request_timeout_ms / 1000):
            self._pending_responses.pop(key, None)
            return None
        if fut.cancelled():
            return None
        return fut.result()

    def _controller_address(self, node_id: int) -> Address | None:
        if node_id == self.config.node_id and self.config.is_controller:
            endpoint = controller_endpoint(self.config)
            return endpoint.host, endpoint.port
        return self.addresses.get(node_id)

    def leader_id(self) -> int:
        """The raft leader this node knows (the active controller), -1 if none."""
        return self.raft.leader_id if self.raft is not None else -1

    async def wait_for_image(
        self, predicate: Callable[[MetadataImage], bool], timeout_s: float = 5.0
    ) -> bool:
        """Wait (bounded) until the published image satisfies ``predicate``: a broker answers a forwarded
        CreateTopics once its own image has the topics."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self.image):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._image_published.clear()
            await wait_event(self._image_published, remaining)
        return True

    async def handle_add_raft_voter(self, request: Any, version: int) -> Any:
        """AddRaftVoter (80, KIP-853; KafkaRaftClient.handleAddVoterRequest): the raft leader adds the
        voter and answers once the new voter set is committed."""
        voter = Voter(
            request.voter_id,
            request.voter_directory_id.bytes,
            tuple(Endpoint(listener.name, listener.host, listener.port) for listener in request.listeners),
        )
        error, message = await self._change_voters(
            request.cluster_id, lambda raft: raft.add_voter(voter, now_ms())
        )
        return AddRaftVoterResponse(
            version=version, throttle_time_ms=0, error_code=error, error_message=message
        )

    async def handle_remove_raft_voter(self, request: Any, version: int) -> Any:
        """RemoveRaftVoter (81, KIP-853; KafkaRaftClient.handleRemoveVoterRequest): the voter is named by
        id and directory id; the answer waits for the new voter set to commit."""
        directory_id = request.voter_directory_id.bytes
        error, message = await self._change_voters(
            request.cluster_id, lambda raft: raft.remove_voter(request.voter_id, directory_id, now_ms())
        )
        return RemoveRaftVoterResponse(
            version=version, throttle_time_ms=0, error_code=error, error_message=message
        )

    async def _change_voters(
        self, cluster_id: str | None, change_voters: Callable[[RaftNode], VoterChange]
    ) -> tuple[ErrorCode, str | None]:
        raft = self.raft
        if raft is None or self._stopping:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, "the controller is not running"
        if cluster_id is not None and self.cluster_id is not None and cluster_id != self.cluster_id:
            return ErrorCode.INCONSISTENT_CLUSTER_ID, f"cluster id {cluster_id!r} is not this cluster's"
        change = change_voters(raft)
        if change.error != ErrorCode.NONE:
            return change.error, change.error_message
        self._note_voters_appended()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((change.voters_offset, fut))
        self._wakeup.set()
        try:
            park()  # waits for the quorum to commit the new voter set
            await fut
        except NotControllerError as exc:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, str(exc)
        return ErrorCode.NONE, None

    def _note_voters_appended(self) -> None:
        if self._controller_active:
            # Raft wrote a control record the active controller does not write itself.
            self.controller.note_log_end_offset(self._log().end_offset)
        self._wakeup.set()

    async def handle_update_raft_voter(self, request: Any, version: int) -> Any:
        """UpdateRaftVoter (82, KIP-853; KafkaRaftClient.handleUpdateVoterRequest): a voter's new
        endpoints and kraft.version range. The leader appends the updated voter set and answers at once,
        naming itself and its endpoint (CurrentLeader)."""
        raft = self.raft
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if raft is not None and not self._stopping:
            feature = request.k_raft_version_feature
            voter = Voter(
                request.voter_id,
                request.voter_directory_id.bytes,
                tuple(
                    Endpoint(listener.name, listener.host, listener.port) for listener in request.listeners
                ),
                feature.min_supported_version,
                feature.max_supported_version,
            )
            if request.cluster_id is not None and self.cluster_id not in (None, request.cluster_id):
                error = ErrorCode.INCONSISTENT_CLUSTER_ID
            elif request.current_leader_epoch < raft.epoch:
                error = ErrorCode.FENCED_LEADER_EPOCH
            elif request.current_leader_epoch > raft.epoch:
                error = ErrorCode.UNKNOWN_LEADER_EPOCH
            else:
                # The voters' listener: the first of controller.listener.names (Kafka's default listener).
                error = raft.update_voter(voter, self.config.controller_listener_names[0], now_ms()).error
                if error == ErrorCode.NONE:
                    self._note_voters_appended()
        leader_id = raft.leader_id if raft is not None else -1
        leader_address = self._controller_address(leader_id) if leader_id >= 0 else None
        host, port = leader_address or ("", -1)
        return UpdateRaftVoterResponse(
            version=version,
            throttle_time_ms=0,
            error_code=error,
            current_leader=UpdateRaftVoterResponse.CurrentLeader(
                leader_id=leader_id, leader_epoch=raft.epoch if raft is not None else -1, host=host, port=port
            ),
        )

    def describe_quorum(self) -> tuple[QuorumDescription | None, int, int]:
        """DescribeQuorum: the leader's description, or None with the leader this node knows."""
        raft = self.raft
        assert raft is not None
        return raft.describe_quorum(now_ms()), raft.leader_id, raft.epoch

    def _apply_committed(self, committed: Any) -> None:
        delta = MetadataDelta(self.image)
        loading = not self._controller_active
        applied = 0
        for batch in committed:
            applied += batch.last_offset - batch.base_offset + 1
            if batch.is_control:
                if batch.last_offset >= self.controller.next_write_offset:
                    self.controller.note_log_end_offset(batch.last_offset + 1)
                continue
            for index, value in enumerate(batch.records):
                offset = batch.base_offset + index
                record = decode_metadata_record(value)
                if offset >= self.controller.next_write_offset:
                    # Records this controller did not generate (written before this process started).
                    self.controller.replay(record, offset)
                delta.replay(record, offset, batch.epoch)
        self.image = delta.apply()
        self._applied_end_offset = committed[-1].last_offset + 1
        if self.snapshots is not None:
            self.snapshots.note_committed(committed)
        if loading:
            self._note_loaded(committed[0].base_offset, applied)

    def _note_loaded(self, first_offset: int, count: int) -> None:
        """Start-up progress: "loaded N of M records" every LOAD_PROGRESS_EVERY_RECORDS."""
        if self._load_first_offset is None:
            self._load_first_offset = first_offset
        before = self._loaded_records
        self._loaded_records += count
        total = max(0, self._load_end_offset - self._load_first_offset)
        if self._loaded_records // LOAD_PROGRESS_EVERY_RECORDS != before // LOAD_PROGRESS_EVERY_RECORDS:
            log.info(
                "loaded %d of %d records from the metadata log (offset %d)",
                min(self._loaded_records, total) if total else self._loaded_records,
                total,
                first_offset + count - 1,
            )

    def _load_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """KIP-630 handleLoadSnapshot: the image from the snapshot's records, the controller from that
        image (QuorumController.load_image: the state replay_snapshot would build, without replaying
        every record a second time), then the log after it."""
        assert self.snapshots is not None
        self.image, count = self.snapshots.load(snapshot_id)
        if self.controller.next_write_offset != 0:
            self.controller = self._new_controller()
        self.controller.load_image(self.image, snapshot_id.offset)
        self._applied_end_offset = snapshot_id.offset
        self._loaded_records += count

    def _publish(self) -> None:
        self._publish_cluster_id()
        self.on_image()
        self._image_published.set()
        self._complete_commit_waiters(self.raft.high_watermark if self.raft is not None else 0)

    def _complete_commit_waiters(self, committed_end_offset: int) -> None:
        waiting = []
        for offset, fut in self._commit_waiters:
            if offset < committed_end_offset:
                if not fut.done():
                    fut.set_result(None)
            else:
                waiting.append((offset, fut))
        self._commit_waiters = waiting

    def _publish_cluster_id(self) -> None:
        """KIP-1262 persist-before-use: every meta.properties carries the image's cluster id before
        Metadata responses or raft's cluster-id check see it."""
        discovered = self.image.cluster_id
        if discovered is None or discovered == self.cluster_id:
            return
        if self.cluster_id_publisher is not None:
            try:
                self.cluster_id = self.cluster_id_publisher.publish(discovered)
            except ClusterIdConflictError as exc:
                # KIP-1262: the log names another cluster than meta.properties does; never expose it.
                self.on_fatal(f"INCONSISTENT_CLUSTER_ID: {exc}")
                return
        else:
            self.cluster_id = discovered
        if self.raft is not None:
            self.raft.cluster_id = self.cluster_id

    def _log(self) -> FileRaftLog:
        assert self.raft_log is not None
        return self.raft_log

    async def _write(self, result: ControllerResult[Any]) -> Any:
        """Append a result's records (the controller replayed them when it generated them, at the
        offsets they take now) and wait until they are committed and in the image."""
        if self._stopping:
            raise NotControllerError("the controller is shutting down")
        if not self._controller_active:
            raise NotControllerError(f"node {self.config.node_id} is not the active controller")
        fut = self._append(result)
        if fut is not None:
            park()  # waits for the quorum to commit: the request's queued.max.requests slot goes back
            await fut
        return result.response

    async def _write_or_not_controller(self, result: ControllerResult[list[Any]]) -> list[Any]:
        """Write a per-topic result; if this node cannot complete it, every topic answers
        NOT_CONTROLLER (retriable: the client asks the active controller)."""
        try:
            return list(await self._write(result))
        except NotControllerError as exc:
            return [
                dataclasses.replace(r, error_code=ErrorCode.NOT_CONTROLLER, error_message=str(exc))
                for r in result.response
            ]

    def _append(self, result: ControllerResult[Any]) -> asyncio.Future[None] | None:
        """Propose a result's records as one batch; the future completes when they are committed and
        in the image (None when there are no records)."""
        raft = self.raft
        assert raft is not None and self._controller_active
        records: list[ApiMessageAndVersion] = list(result.records)
        if not records:
            return None
        base = self._log().end_offset
        last_offset = raft.propose([encode_metadata_record(r) for r in records], now_ms())
        if last_offset is None:
            raise NotControllerError(f"node {self.config.node_id} is not the active controller")
        assert last_offset == base + len(records) - 1 == self.controller.next_write_offset - 1, (
            last_offset,
            base,
            len(records),
            self.controller.next_write_offset,
        )
        self._last_append_ms = now_ms()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((last_offset, fut))
        self._wakeup.set()
        return fut

    # --- controller operations ----------------------------------------------------------------------

    async def register_broker(self, endpoints: Sequence[BrokerEndpoint]) -> int:
        """The combined node's broker registers with its own controller: every client listener, as
        advertised (issue 27)."""
        result = self.controller.register_broker(
            self.config.node_id, self._incarnation_id, endpoints, self.config.broker_rack, now_ms()
        )
        reply = await self._write(result)
        if reply.error_code != ErrorCode.NONE:
            raise RuntimeError(
                f"broker registration failed: {ErrorCode(reply.error_code).name} {reply.error_message}"
            )
        self._broker_epoch = int(reply.broker_epoch)
        return self._broker_epoch

    async def handle_broker_registration(self, request: Any, version: int) -> Any:
        """BrokerRegistration (62) from a broker process, answered by the active controller (KIP-631);
        a broker that names another cluster gets INCONSISTENT_CLUSTER_ID."""
        if self.cluster_id is not None and request.cluster_id != self.cluster_id:
            return BrokerRegistrationResponse(
                version=version,
                throttle_time_ms=0,
                error_code=ErrorCode.INCONSISTENT_CLUSTER_ID,
                broker_epoch=-1,
            )
        if not self._controller_active or self._stopping:
            return BrokerRegistrationResponse(
                version=version, throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, broker_epoch=-1
            )
        endpoints = [
            BrokerEndpoint(lst.name, lst.host, lst.port, lst.security_protocol) for lst in request.listeners
        ]
        result = self.controller.register_broker(
            request.broker_id,
            request.incarnation_id,
            endpoints,
            request.rack,
            now_ms(),
            log_dirs=tuple(request.log_dirs or ()) if version >= 2 else (),
            supported_features=[
                BrokerFeature(f.name, f.min_supported_version, f.max_supported_version)
                for f in request.features
            ],
            unfence=False,  # a broker process is unfenced by a heartbeat that shows it caught up
        )
        self.heartbeats.touch(request.broker_id, now_ms())
        try:
            reply = await self._write(result)
        except NotControllerError:
            return BrokerRegistrationResponse(
                version=version, throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, broker_epoch=-1
            )
        return BrokerRegistrationResponse(
            version=version, throttle_time_ms=0, error_code=reply.error_code, broker_epoch=reply.broker_epoch
        )

    async def handle_broker_heartbeat(self, request: Any, version: int) -> Any:
        """BrokerHeartbeat (63) on the active controller (KIP-631): renews the broker's session;
        unfences it once caught up, fences it when it asks (or wants to shut down). The answer is sent
        once the fencing records are committed."""

        def answer(reply: BrokerHeartbeatReply) -> Any:
            return BrokerHeartbeatResponse(
                version=version,
                throttle_time_ms=0,
                error_code=reply.error_code,
                is_caught_up=reply.is_caught_up,
                is_fenced=reply.is_fenced,
                should_shut_down=reply.should_shut_down,
            )

        if not self._controller_active or self._stopping:
            return answer(BrokerHeartbeatReply(ErrorCode.NOT_CONTROLLER))
        result = self.controller.broker_heartbeat(
            request.broker_id,
            request.broker_epoch,
            request.current_metadata_offset,
            want_fence=bool(request.want_fence),
            want_shut_down=bool(request.want_shut_down),
        )
        if result.response.error_code == ErrorCode.NONE:
            self.heartbeats.touch(request.broker_id, now_ms())
            if result.response.should_shut_down:
                self.heartbeats.forget(request.broker_id)
        try:
            await self._write(result)
        except NotControllerError:
            return answer(BrokerHeartbeatReply(ErrorCode.NOT_CONTROLLER))
        return answer(result.response)

    def _maybe_fence_expired_brokers(self) -> None:
        """Brokers whose heartbeats stopped for broker.session.timeout.ms are fenced, and their
        partitions' leadership moves off them (Kafka's BrokerHeartbeatManager + handleBrokerFenced)."""
        if not self._controller_active or self._stopping:
            return
        expired = self.heartbeats.expired(now_ms(), self.config.broker_session_timeout_ms)
        if not expired:
            return
        for broker_id in expired:
            self.heartbeats.forget(broker_id)
        result = self.controller.fence_brokers(expired)
        if result.records:
            log.info(
                "fencing broker(s) %s: no heartbeat for %d ms",
                result.response,
                self.config.broker_session_timeout_ms,
            )
            self._append(result)

    def _maybe_balance_leaders(self) -> None:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds the active
        controller moves leadership back to preferred replicas (Kafka's periodic leader balance)."""
        if not self._controller_active or self._stopping or not self.config.auto_leader_rebalance_enable:
            return
        now = now_ms()
        if self._next_leader_balance_ms < 0:
            self._next_leader_balance_ms = now + self.config.leader_imbalance_check_interval_seconds * 1000
        if now < self._next_leader_balance_ms:
            return
        self._next_leader_balance_ms = now + self.config.leader_imbalance_check_interval_seconds * 1000
        result = self.controller.balance_partition_leaders(self.config.leader_imbalance_per_broker_percentage)
        if result.records:
            log.info("leader balance: %d partition(s) back to their preferred leader", len(result.records))
            self._append(result)

    async def handle_allocate_producer_ids(self, request: Any, version: int) -> Any:
        """AllocateProducerIds (67) from a broker over the network (KIP-730), on the active controller:
        only a registered broker gets a block (else CLUSTER_AUTHORIZATION_FAILED), with its current
        epoch (else STALE_BROKER_EPOCH), at most PRODUCER_ID_BLOCKS_PER_SECOND (else
        THROTTLING_QUOTA_EXCEEDED with the throttle time); the answer is sent once the ProducerIdsRecord
        is committed."""

        def answer(error: ErrorCode, start: int = -1, length: int = 0, throttle_ms: int = 0) -> Any:
            return AllocateProducerIdsResponse(
                version=version,
                throttle_time_ms=throttle_ms,
                error_code=error,
                producer_id_start=start,
                producer_id_len=length,
            )

        if not self._controller_active or self._stopping:
            return answer(ErrorCode.NOT_CONTROLLER)
        if self.controller.cluster_control.registration(request.broker_id) is None:
            return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        throttle_ms = self.allocation_limiter.throttle_time_ms(request.broker_id, now_ms())
        if throttle_ms:
            return answer(ErrorCode.THROTTLING_QUOTA_EXCEEDED, throttle_ms=throttle_ms)
        block = await self.allocate_producer_ids(request.broker_id, request.broker_epoch)
        return answer(ErrorCode(block.error_code), block.producer_id_start, block.producer_id_len)

    async def handle_describe_cluster(self, request: Any, version: int) -> Any:
        """DescribeCluster on the controller listener (KIP-919): the cluster id, the raft leader as
        controller id, and the controllers (voters) as endpoints; brokers are described by brokers, so
        EndpointType 1 gets MISMATCHED_ENDPOINT_TYPE (an unknown type UNSUPPORTED_ENDPOINT_TYPE), as
        Kafka's AuthHelper.computeDescribeClusterResponse answers."""
        endpoint_type = request.endpoint_type if version >= 1 else cluster_admin.ENDPOINT_TYPE_BROKER
        refusal = cluster_admin.endpoint_type_refusal(
            version, endpoint_type, cluster_admin.ENDPOINT_TYPE_CONTROLLER
        )
        if refusal is not None:
            return cluster_admin.describe_cluster_refusal(version, *refusal)
        raft = self.raft
        voter_ids = raft.voter_ids if raft is not None else frozenset(self.config.controller_quorum_voters)
        voters = {i: a for i in voter_ids if (a := self._controller_address(i)) is not None}
        return DescribeClusterResponse(
            version=version,
            throttle_time_ms=0,
            error_code=ErrorCode.NONE,
            error_message=None,
            endpoint_type=endpoint_type,
            cluster_id=self.cluster_id or "",
            controller_id=self.leader_id(),
            brokers=[
                DescribeClusterResponse.DescribeClusterBroker(
                    broker_id=voter_id, host=host, port=port, rack=None, is_fenced=False
                )
                for voter_id, (host, port) in sorted(voters.items())
            ],
            authorized_operations=None,  # not requested: Int.MIN on the wire
        )

    async def handle_alter_partition(self, request: Any, version: int) -> Any:
        """AlterPartition (56, KIP-497) from a partition leader, on the active controller: the new ISR
        is committed (PartitionChangeRecord) before the answer, which carries the partition as it now
        stands. v3 names each member's broker epoch: a stale one is INELIGIBLE_REPLICA (KIP-903)."""
        changes: list[IsrChangeRequest] = []
        ineligible: set[tuple[uuid.UUID, int]] = set()
        for topic in request.topics:
            for p in topic.partitions:
                if version >= 3:
                    new_isr = tuple(b.broker_id for b in p.new_isr_with_epochs)
                    if any(
                        b.broker_epoch >= 0 and b.broker_epoch != self.controller.broker_epoch(b.broker_id)
                        for b in p.new_isr_with_epochs
                    ):
                        ineligible.add((topic.topic_id, p.partition_index))
                else:
                    new_isr = tuple(p.new_isr)
                changes.append(
                    IsrChangeRequest(
                        topic.topic_id, p.partition_index, p.leader_epoch, p.partition_epoch, new_isr
                    )
                )

        def answer(error: int, results: list[IsrChangeResult]) -> Any:
            by_topic: dict[uuid.UUID, list[IsrChangeResult]] = {}
            for r in results:
                by_topic.setdefault(r.topic_id, []).append(r)
            return AlterPartitionResponse(
                version=version,
                throttle_time_ms=0,
                error_code=error,
                topics=[
                    AlterPartitionResponse.TopicData(
                        topic_id=topic_id,
                        partitions=[
                            AlterPartitionResponse.TopicData.PartitionData(
                                partition_index=r.partition_index,
                                error_code=r.error_code,
                                leader_id=r.leader_id,
                                leader_epoch=r.leader_epoch,
                                isr=list(r.isr),
                                leader_recovery_state=0,
                                partition_epoch=r.partition_epoch,
                            )
                            for r in rs
                        ],
                    )
                    for topic_id, rs in by_topic.items()
                ],
            )

        if not self._controller_active or self._stopping:
            return answer(ErrorCode.NOT_CONTROLLER, [])
        eligible = [c for c in changes if (c.topic_id, c.partition_index) not in ineligible]
        result = self.controller.alter_partition(request.broker_id, request.broker_epoch, eligible)
        try:
            error, results = await self._write(result)
        except NotControllerError:
            return answer(ErrorCode.NOT_CONTROLLER, [])
        refused = [
            IsrChangeResult(c.topic_id, c.partition_index, ErrorCode.INELIGIBLE_REPLICA)
            for c in changes
            if (c.topic_id, c.partition_index) in ineligible
        ]
        return answer(error, [*results, *refused])

    async def handle_elect_leaders(self, request: Any, version: int) -> Any:
        """ElectLeaders (43, KIP-460) on the active controller: each partition's election is committed
        before the answer. v0 is a preferred election; null topic_partitions means every partition."""
        election_type = request.election_type if version >= 1 else ELECTION_TYPE_PREFERRED
        partitions = (
            None
            if request.topic_partitions is None
            else [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
        )

        def answer(error: int, results: list[ElectionResult]) -> Any:
            by_topic: dict[str, list[ElectionResult]] = {}
            for r in results:
                by_topic.setdefault(r.topic, []).append(r)
            return ElectLeadersResponse(
                version=version,
                throttle_time_ms=0,
                error_code=error,
                replica_election_results=[
                    ElectLeadersResponse.ReplicaElectionResult(
                        topic=topic,
                        partition_result=[
                            ElectLeadersResponse.ReplicaElectionResult.PartitionResult(
                                partition_id=r.partition_index,
                                error_code=r.error_code,
                                error_message=None
                                if r.error_code == ErrorCode.NONE
                                else ErrorCode(r.error_code).name,
                            )
                            for r in rs
                        ],
                    )
                    for topic, rs in by_topic.items()
                ],
            )

        if not self._controller_active or self._stopping:
            return answer(ErrorCode.NOT_CONTROLLER, [])
        try:
            results = await self._write(self.controller.elect_leaders(election_type, partitions))
        except NotControllerError:
            return answer(ErrorCode.NOT_CONTROLLER, [])
        return answer(ErrorCode.NONE, results)

    async def handle_alter_partition_reassignments(self, request: Any, version: int) -> Any:
        """AlterPartitionReassignments (45, KIP-455) on the active controller: answered once the
        PartitionChangeRecords that start (or complete, or cancel) them are committed."""
        allow = reassignments_api.allow_replication_factor_change(request, version)
        result = self.controller.alter_partition_reassignments(
            reassignments_api.reassignable_topics(request), allow
        )
        try:
            results = await self._write(result)
        except NotControllerError as exc:
            return reassignments_api.alter_error(request, version, ErrorCode.NOT_CONTROLLER, str(exc))
        return reassignments_api.alter_response(version, results, allow_rf_change=allow)

    async def handle_list_partition_reassignments(self, request: Any, version: int) -> Any:
        """ListPartitionReassignments (46, KIP-455): the active controller's view of the reassignments."""
        if not self._controller_active or self._stopping:
            return reassignments_api.list_error(
                request,
                version,
                ErrorCode.NOT_CONTROLLER,
                f"node {self.config.node_id} is not the active controller",
            )
        topics = self.controller.list_partition_reassignments(reassignments_api.listed_topics(request))
        return reassignments_api.list_response(version, topics)

    async def handle_unregister_broker(self, request: Any, version: int) -> Any:
        """UnregisterBroker (64) on the active controller: answered once the UnregisterBrokerRecord is
        committed; the broker's heartbeat session ends with it."""
        try:
            error, message = await self._write(self.controller.unregister_broker(request.broker_id))
        except NotControllerError as exc:
            return cluster_admin.unregister_broker_response(version, ErrorCode.NOT_CONTROLLER, str(exc))
        if error is ErrorCode.NONE:
            self.heartbeats.forget(request.broker_id)
            log.info("broker %d unregistered", request.broker_id)
        return cluster_admin.unregister_broker_response(version, error, message)

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> AllocateProducerIdsResponseData:
        result = self.controller.allocate_producer_ids(broker_id, broker_epoch)
        try:
            response = await self._write(result)
        except NotControllerError:
            return AllocateProducerIdsResponseData(ErrorCode.NOT_CONTROLLER, -1, 0)
        return AllocateProducerIdsResponseData(
            response.error_code, response.producer_id_start, response.producer_id_len
        )

    async def create_topics_by_name(
        self,
        names: list[str],
        num_partitions: int,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
    ) -> None:
        topics = [
            CreatableTopic(
                name=n,
                num_partitions=num_partitions,
                replication_factor=replication_factor,
                configs=dict(configs or {}),
            )
            for n in names
        ]
        await self._write(self.controller.create_topics(topics, validate_only=False))

    async def handle_create_topics(self, request: Any, version: int) -> Any:
        topics = [
            CreatableTopic(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments=tuple(
                    CreatableReplicaAssignment(a.partition_index, tuple(a.broker_ids))
                    for a in (t.assignments or [])
                ),
                configs={c.name: c.value for c in (t.configs or [])},
            )
            for t in request.topics
        ]
        results = await self._write_or_not_controller(
            self.controller.create_topics(topics, validate_only=bool(request.validate_only))
        )
        requested = {t.name: t.configs for t in topics}
        dynamic_default = self.image.configs.configs_for(ConfigResource(CONFIG_RESOURCE_TYPE_BROKER, ""))
        dynamic_node = self.image.configs.configs_for(
            ConfigResource(CONFIG_RESOURCE_TYPE_BROKER, str(self.config.node_id))
        )
        out = []
        for r in results:
            created = r.error_code == ErrorCode.NONE
            out.append(
                CreateTopicsResponse.CreatableTopicResult(
                    name=r.name,
                    topic_id=r.topic_id or uuid.UUID(int=0),
                    error_code=r.error_code,
                    error_message=r.error_message,
                    num_partitions=r.num_partitions if created else -1,
                    replication_factor=r.replication_factor if created else -1,
                    configs=configs_api.created_topic_configs(
                        requested.get(r.name, {}), self.config, dynamic_default, dynamic_node
                    )
                    if created
                    else [],
                )
            )
        return CreateTopicsResponse(version=version, throttle_time_ms=0, topics=out)

    async def handle_create_partitions(self, request: Any, version: int) -> Any:
        """CreatePartitions (37, KIP-195) on the active controller: answered, as CreateTopics, once the
        PartitionRecords are committed and in this node's image (its logs for them exist)."""
        results = await self._write_or_not_controller(
            self.controller.create_partitions(
                partitions_api.topics_to_grow(request), validate_only=bool(request.validate_only)
            )
        )
        return partitions_api.create_partitions_response(version, results)

    async def handle_alter_user_scram_credentials(self, request: Any, version: int) -> Any:
        """AlterUserScramCredentials (51, KIP-554): UserScramCredentialRecords from the active controller."""
        deletions, upsertions = security_api.scram_alterations(request)
        results = await self._write_or_not_controller(
            self.controller.alter_user_scram_credentials(deletions, upsertions)
        )
        return security_api.alter_user_scram_credentials_response(version, results)

    async def handle_alter_client_quotas(self, request: Any, version: int) -> Any:
        """AlterClientQuotas (49, KIP-546): ClientQuotaRecords from the active controller."""
        results = await self._write_or_not_controller(
            self.controller.alter_client_quotas(
                quotas_api.client_quota_alterations(request), bool(request.validate_only)
            )
        )
        return quotas_api.alter_client_quotas_response(request, version, results)

    async def handle_update_features(self, request: Any, version: int) -> Any:
        """UpdateFeatures (57, KIP-584/KIP-778): FeatureLevelRecords from the active controller."""
        validate_only = version >= 1 and bool(request.validate_only)
        updates = features_api.feature_updates(request, version)
        try:
            error = await self._write(self.controller.update_features(updates, validate_only))
        except NotControllerError as exc:
            return features_api.update_features_error(request, version, ErrorCode.NOT_CONTROLLER, str(exc))
        return features_api.update_features_response(request, version, error)

    async def handle_incremental_alter_configs(self, request: Any, version: int) -> Any:
        """IncrementalAlterConfigs (44, KIP-339): ConfigRecords from the active controller."""
        return await self._alter_configs(request, version, incremental=True)

    async def handle_alter_configs(self, request: Any, version: int) -> Any:
        """AlterConfigs (33): a resource's configs replaced as a whole."""
        return await self._alter_configs(request, version, incremental=False)

    async def _alter_configs(self, request: Any, version: int, *, incremental: bool) -> Any:
        alterations = (
            configs_api.incremental_alterations(request)
            if incremental
            else configs_api.replacing_alterations(request)
        )
        results = await self._write_or_not_controller(
            self.controller.alter_configs(alterations, bool(request.validate_only))
        )
        return configs_api.alter_configs_response(incremental, version, results)

    async def handle_create_acls(self, request: Any, version: int) -> Any:
        """CreateAcls (30): AccessControlEntryRecords from the active controller."""
        results = await self._write_or_not_controller(
            self.controller.create_acls(security_api.acls_to_create(request))
        )
        return security_api.create_acls_response(version, results)

    async def handle_delete_acls(self, request: Any, version: int) -> Any:
        """DeleteAcls (31): a RemoveAccessControlEntryRecord per matching ACL."""
        results = await self._write_or_not_controller(
            self.controller.delete_acls(security_api.delete_acls_filters(request, version))
        )
        return security_api.delete_acls_response(version, results)

    async def handle_delete_topics(self, request: Any, version: int) -> Any:
        names: list[str | None] = []
        ids: list[uuid.UUID | None] = []
        if version >= 6:
            for t in request.topics:
                names.append(t.name)
                ids.append(t.topic_id if t.topic_id and t.topic_id.int else None)
        else:
            for name in request.topic_names:
                names.append(name)
                ids.append(None)
        before = self.image
        by_id = [i for i in ids if i is not None]
        by_name = [n for n, i in zip(names, ids, strict=True) if i is None and n is not None]
        results = await self._write_or_not_controller(
            self.controller.delete_topics(names=by_name, topic_ids=by_id)
        )
        for r in results:
            if r.error_code == ErrorCode.NONE and r.name is not None:
                topic = before.topics.get_topic(r.name)
                if topic is not None:
                    self._removed_topics.append((r.name, list(topic.partitions)))
        self.on_image()
        responses = [
            DeleteTopicsResponse.DeletableTopicResult(
                name=r.name,
                topic_id=r.topic_id or uuid.UUID(int=0),
                error_code=r.error_code,
                error_message=r.error_message,
            )
            for r in results
        ]
        return DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=responses)

    def take_removed_topics(self) -> list[tuple[str, list[int]]]:
        removed, self._removed_topics = self._removed_topics, []
        return removed

    # --- the broker's view ------------------------------------------------------------------------

    def cluster_view(self) -> ClusterView:
        image = self.image
        by_listener: dict[str, tuple[list[BrokerView], list[BrokerView]]] = {}
        for reg in sorted(image.cluster.brokers.values(), key=lambda b: b.broker_id):
            for endpoint in reg.listeners:
                view = BrokerView(reg.broker_id, endpoint.host, endpoint.port, reg.rack)
                by_listener.setdefault(endpoint.name, ([], []))[1 if reg.fenced else 0].append(view)
        listeners = {name: (tuple(live), tuple(down)) for name, (live, down) in by_listener.items()}
        # The node's own view: brokers as they reach each other (inter.broker.listener.name).
        brokers, fenced = listeners.get(self.config.inter_broker_listener_name, ((), ()))
        # A topic's view is rebuilt only when its image changed (issue 29): the node applies again only
        # the topics whose view is a new object.
        cached = self._topic_views
        topics: dict[str, TopicView] = {}
        for name, topic in image.topics.topics_by_name.items():
            hit = cached.get(name)
            if hit is not None and hit[0] is topic:
                topics[name] = hit[1]
                continue
            topic_view = TopicView(
                name,
                topic.topic_id,
                tuple(
                    PartitionView(pid, p.leader, p.leader_epoch, p.replicas, p.isr, p.partition_epoch)
                    for pid, p in sorted(topic.partitions.items())
                ),
            )
            cached[name] = (topic, topic_view)
            topics[name] = topic_view
        if len(cached) > len(topics):
            for name in [name for name in cached if name not in topics]:
                del cached[name]
        # KRaft: clients cannot reach the controllers; a broker process names itself (or another live
        # broker) as the controller, and forwards what the client sends it (Kafka KRaftMetadataCache).
        controller_id = self.config.node_id
        if not self.config.is_controller and brokers and all(b.node_id != controller_id for b in brokers):
            controller_id = brokers[0].node_id
        return ClusterView(
            cluster_id=self.cluster_id,
            controller_id=controller_id,
            brokers=brokers,
            topics=topics,
            topic_names_by_id=_TopicNamesById(image.topics.topics_by_id),
            fenced_brokers=fenced,
            listeners=listeners,
            isr_eligible_broker_ids=frozenset(
                reg.broker_id
                for reg in image.cluster.brokers.values()
                if not reg.fenced and not reg.in_controlled_shutdown
            ),
        )


class _TopicNamesById(Mapping[uuid.UUID, str]):
    """The image's topics by id, giving their names: a view, so no image change walks every topic."""

    __slots__ = ("_topics",)

    def __init__(self, topics: Mapping[uuid.UUID, TopicImage]) -> None:
        self._topics = topics

    def __getitem__(self, topic_id: uuid.UUID) -> str:
        return self._topics[topic_id].name

    def __iter__(self) -> Iterator[uuid.UUID]:
        return iter(self._topics)

    def __len__(self) -> int:
        return len(self._topics)


RaftRequestTypes = (
    VoteRequest,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
)


def _source_id(request: RaftRequest) -> int:
    """The peer a raft request came from, as the core knows it (the request names its sender)."""
    match request:
        case VoteRequest():
            return request.candidate_id
        case BeginQuorumEpochRequest() | EndQuorumEpochRequest():
            return request.leader_id
        case FetchRequest() | FetchSnapshotRequest():
            return request.replica_id
    raise AssertionError(f"not a raft request: {request!r}")
