"""One pykraft process: the shell that wires the pure cores to sockets, files and clocks.

Metadata path (the same one the multi-node cluster will use): the controller generates records, the
raft core appends them to ``__cluster_metadata-0``, this driver persists (quorum state, fsync) and
applies what is committed — into the controller (when it did not generate it) and, through
``MetadataDelta``, into the frozen ``MetadataImage`` the broker handlers read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import random
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pykraft.broker import (
    authorization,
    cluster_admin,
    configs_api,
    features_api,
    fetch_topic_ids,
    handlers,
    leader_discovery,
    partitions_api,
    quotas_api,
    reassignments_api,
    security_api,
)
from pykraft.broker.configs_api import handle_describe_configs
from pykraft.broker.fetch_sessions import FetchSessionCache
from pykraft.broker.lifecycle import BrokerState
from pykraft.broker.producer_admin import handle_describe_producers
from pykraft.broker.producer_id_manager import ProducerIdManager
from pykraft.broker.replica_manager import ReplicaManager, topic_log_config
from pykraft.broker.replication import IsrProposal, Transition
from pykraft.coordinator.offsets_records import OFFSETS_TOPIC
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode, KafkaError, RemoteProtocolError
from pykraft.core.topic_configs import topic_names_of_broker_configs
from pykraft.io.controller_link import ControllerLink
from pykraft.io.descriptor_cache import DescriptorCache, default_capacity
from pykraft.io.group_service import CURRENT_CLIENT, GroupService
from pykraft.io.heap import collection_paused
from pykraft.io.listeners import REQUEST_LISTENER, ListenerError, Listeners, listener_context
from pykraft.io.log_dirs import FileLogOpener, open_deferred_logs
from pykraft.io.meta_properties_files import prepare_log_dirs
from pykraft.io.metadata_plane import MetadataPlane, NotControllerError
from pykraft.io.metrics import EventLoopMonitor, MetricsServer, node_registry
from pykraft.io.quota_service import QuotaService
from pykraft.io.replica_fetcher import ReplicaFetchers
from pykraft.io.rpc_channel import ChannelSecurity, PeerUnavailable
from pykraft.io.server import AcceptShortageHandler, ConnectionInfo, KafkaServer
from pykraft.io.share_offsets import ShareOffsets
from pykraft.io.share_service import CURRENT_CONNECTION, ShareService
from pykraft.io.share_state_service import ShareStateService
from pykraft.io.snapshots import SnapshotStateError
from pykraft.io.tls import TlsConfigError
from pykraft.io.txn_service import TxnService
from pykraft.io.waiting import park, wait_shielded
from pykraft.log.cleaner import CleanerConfig
from pykraft.log.partition_log import LogConfig
from pykraft.metadata.image import (
    CONFIG_RESOURCE_TYPE_BROKER,
    CONFIG_RESOURCE_TYPE_GROUP,
    CONFIG_RESOURCE_TYPE_TOPIC,
    BrokerEndpoint,
    ConfigResource,
    ConfigurationsImage,
)
from pykraft.protocol import compression, messages
from pykraft.protocol.fetch import FetchResponseData, encode_fetch_response
from pykraft.protocol.messages import ApiKey, RequestHeader
from pykraft.protocol.produce import ProduceRequestData, decode_produce_request, encode_produce_response
from pykraft.protocol.records import BATCH_HEADER_SIZE, read_batch_header
from pykraft.raft import wire
from pykraft.security.acls import (
    AclOperation,
    AuthorizerConfig,
    RequestAuthorization,
    ResourceType,
    allowed,
    allowed_on_cluster,
    authorize_request,
)
from pykraft.security.sasl import SaslSession
from pykraft.security.scram import ScramCredential, ScramMechanism
from pykraft.storage.ensemble import meta_properties_path
from pykraft.storage.meta_properties import MetaPropertiesError

log = logging.getLogger("pykraft.node")


def logger_levels() -> dict[str, str]:
    """pykraft's loggers and the root logger (``root``, as Kafka's Log4jController names it), each at its
    effective level in Kafka's words (WARN, not WARNING): DescribeConfigs' BROKER_LOGGER resource."""
    loggers = [
        logging.getLogger(name) for name in logging.root.manager.loggerDict if name.startswith("pykraft")
    ]
    levels = {"root": logging.getLevelName(logging.root.getEffectiveLevel())}
    levels.update((logger.name, logging.getLevelName(logger.getEffectiveLevel())) for logger in loggers)
    return {name: "WARN" if level == "WARNING" else level for name, level in levels.items()}


@dataclasses.dataclass
class _AppliedTopic:
    """A topic as ``Node._on_image`` last applied it: its view, its log configs, whether every hosted
    partition opened, and the leaders its followed partitions fetch from."""

    view: handlers.TopicView
    log_config: LogConfig
    complete: bool = True
    followed: dict[int, set[tuple[str, int]]] = dataclasses.field(default_factory=dict)


# How long a clean stop (SIGTERM, RunningNode.stop) may wait for in-flight work before it gives up on
# it, logs what it was still waiting for in one line, and closes the logs anyway.
SHUTDOWN_BUDGET_S = 10.0
# The part of it a broker process spends on controlled shutdown (the controller moving leadership off
# it); past it the broker stops anyway and the controller fences it when its session expires.
CONTROLLED_SHUTDOWN_BUDGET_S = 5.0

# Transaction markers are appended with acks=all; the coordinator retries a marker that timed out.
MARKER_TIMEOUT_MS = 5000
# The longest the log cleaner holds the event loop before handing it back.
CLEANER_SLICE_S = 0.005

# A request handler of the dispatch table: (decoded request, version) -> response object.
RequestHandler = Callable[[Any, int], Awaitable[Any]]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class StartupError(Exception):
    """A problem that stops the process with one line naming the file/key and what to do."""


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.rng = random.Random()
        controller_endpoint = config.controller_listener if config.is_controller else None
        self.controller_host = controller_endpoint.host if controller_endpoint else ""
        self.controller_port = controller_endpoint.port if controller_endpoint else 0
        self.metadata: MetadataPlane | None = None
        # Open segment files across all partitions, bounded (log.open.files.max, issue 29).
        self.descriptors = DescriptorCache(
            config.log_open_files_max if config.log_open_files_max > 0 else default_capacity()
        )
        self._accept_shortage: AcceptShortageHandler | None = None
        # Per topic, the view and configs last applied to the partitions hosted here (_on_image).
        self._applied_topics: dict[str, _AppliedTopic] = {}
        self.log_opener = FileLogOpener(config.log_dirs, self.descriptors)
        self.replicas = ReplicaManager(
            self.log_opener,
            LogConfig(
                segment_bytes=config.log_segment_bytes,
                retention_ms=config.log_retention_ms,
                retention_bytes=config.log_retention_bytes,
                max_message_bytes=config.message_max_bytes,
                cleanup_policy_delete="delete" in config.log_cleanup_policy,
                cleanup_policy_compact="compact" in config.log_cleanup_policy,
                min_cleanable_dirty_ratio=config.log_cleaner_min_cleanable_ratio,
                delete_retention_ms=config.log_cleaner_delete_retention_ms,
                min_compaction_lag_ms=config.log_cleaner_min_compaction_lag_ms,
                compression_type=compression.TOPIC_CODECS.get(config.compression_type),
                compression_gzip_level=config.compression_gzip_level,
                compression_lz4_level=config.compression_lz4_level,
                compression_zstd_level=config.compression_zstd_level,
            ),
            producer_id_expiration_ms=config.producer_id_expiration_ms,
            retained_batches=config.producer_state_retained_batches,
            duplicate_window=config.max_in_flight_sequence_number_per_connection,
            producer_id_expiration_check_interval_ms=config.producer_id_expiration_check_interval_ms,
        )
        # server.properties' LogConfig; dynamic broker configs in the image go over it (_on_image).
        self._static_log_config = self.replicas.log_config
        self._dynamic_broker: dict[str, str] = {}
        # The configs image the replication throttles were last updated from.
        self._replication_quota_configs: ConfigurationsImage | None = None
        self.replicas.cleaner_config = CleanerConfig(
            dedupe_buffer_bytes=config.log_cleaner_dedupe_buffer_size,
            io_buffer_bytes=config.log_cleaner_io_buffer_size,
        )
        self.producer_ids = ProducerIdManager(config.node_id)
        self.ctx: handlers.BrokerContext | None = None
        # Client quotas (KIP-546): rates per user/client-id, throttle times, muted connections.
        self.quotas = QuotaService(config)
        # KIP-227 sessions of the followers fetching from this broker (issue 29).
        self.fetch_sessions = FetchSessionCache()
        self.groups: GroupService | None = None
        self.shares: ShareService | None = None
        self.share_state: ShareStateService | None = None
        self.txns: TxnService | None = None
        # TLS and SASL of the connections this node opens to controllers and to other brokers.
        self._controller_security: ChannelSecurity | None = None
        self._broker_security: ChannelSecurity | None = None
        # authorizer.class.name set: every request on the client listener is judged by the ACLs.
        self._authorizer: AuthorizerConfig | None = (
            AuthorizerConfig(config.authorizer.super_users, config.authorizer.allow_everyone_if_no_acl_found)
            if config.authorizer.enabled
            else None
        )
        self._data_arrived: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopped = False
        # Set while stopping, once the listeners are closed: images are no longer applied (stop()).
        self._images_stopped = False
        self._request_handlers: dict[int, RequestHandler] = {}
        # Kafka's BrokerServer enables request processing only once the controller says the broker has
        # caught up with the metadata log and has unfenced it (BrokerLifecycleManager.initialCatchUpFuture,
        # initialUnfenceFuture): until then its image may be empty or stale (a restart learns the log's
        # high watermark only from the leader), and answering from it tells clients their topics are
        # gone. Here also only once its own image lists it unfenced (BrokerLifecycle.serves_requests).
        # Set once, never cleared.
        self._initial_catch_up = asyncio.Event()
        # A broker process's session with the active controller (None on a node with a controller).
        self.link: ControllerLink | None = None
        # Followers fetching from leaders, and acks=all produces waiting for the ISR (issue 14).
        self.fetchers: ReplicaFetchers | None = None
        self._replication_waits: dict[tuple[str, int], list[tuple[int, asyncio.Future[ErrorCode]]]] = {}
        # Set (with one line in ``failure``) when the node cannot go on: the CLI stops it and exits 1.
        self.failure: str | None = None
        self.failed = asyncio.Event()
        # The Prometheus endpoint (issue 18), when metrics.port is set: requests are timed per API only
        # then; metrics_port is the bound port (useful with 0).
        self.metrics_enabled = config.metrics_port >= 0
        # Every listener's server (issue 27), and the SASL listeners' authenticators.
        self.listeners = Listeners(config, self._scram_credential, metrics_enabled=self.metrics_enabled)
        self.metrics_port = config.metrics_port
        self.metrics_server: MetricsServer | None = None
        self.loop_monitor: EventLoopMonitor | None = None

    @property
    def client_host(self) -> str:
        """The first client listener's host (a broker serves every client listener)."""
        return self.config.client_listener.host if self.config.is_broker else ""

    @property
    def client_port(self) -> int:
        """The first client listener's port, the one bound once it is."""
        return self.listeners.bound_port(self.config.client_listener) if self.config.is_broker else 0

    def _scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """SCRAM credentials as the latest image has them (SASL listeners read them per exchange)."""
        assert self.metadata is not None
        return self.metadata.image.scram.credential(user, mechanism)

    # --- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        config = self.config
        if config.is_broker and config.is_controller and len(config.controller_quorum_voters) != 1:
            quorum = (
                f"{len(config.controller_quorum_voters)} voters in controller.quorum.voters"
                if config.controller_quorum_voters
                else "a dynamic quorum (controller.quorum.bootstrap.servers)"
            )
            raise StartupError(
                f"process.roles=broker,controller with {quorum}: pykraft runs a combined node only as a "
                "single-node cluster; run the voters with process.roles=controller and the brokers with "
                "process.roles=broker"
            )
        if config.is_controller and config.controller_listener is None:
            raise StartupError(
                f"controller.listener.names={','.join(config.controller_listener_names)}: none of them is in "
                "listeners; a controller needs a listener for its quorum"
            )
        self._accept_shortage = AcceptShortageHandler(asyncio.get_running_loop(), self.descriptors.shed)
        try:
            # KIP-1262: check every meta.properties (and the metadata log's cluster id) before anything
            # writes to the dirs; then write V2 files where missing. A refusal changes nothing on disk.
            publisher = prepare_log_dirs(config.log_dirs, config.metadata_log_dir, config.node_id, self.rng)
        except MetaPropertiesError as exc:
            raise StartupError(str(exc)) from None
        except OSError as exc:
            raise StartupError(f"log.dirs: cannot write {exc.filename}: {exc.strerror}") from None
        for directory in (*config.log_dirs, config.metadata_log_dir):
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as exc:
                raise StartupError(f"log.dirs: cannot create {directory}: {exc.strerror}") from None
        try:
            self._controller_security = ChannelSecurity.of(
                config.controller_client, config.ssl_for(config.controller_client.listener_name)
            )
            self._broker_security = ChannelSecurity.of(
                config.inter_broker_client, config.ssl_for(config.inter_broker_client.listener_name)
            )
        except TlsConfigError as exc:
            raise StartupError(str(exc)) from None
        self.metadata = MetadataPlane(
            config,
            self.rng,
            on_image=self._on_image,
            on_fatal=self._fail,
            peer_security=self._controller_security,
        )
        self.metadata.cluster_id_publisher = publisher
        self.replicas.topic_log_config = self._topic_log_config
        self.replicas.on_storage_failure = self._on_storage_failure
        try:
            await self.metadata.start()
        except SnapshotStateError as exc:
            raise StartupError(str(exc)) from None
        if config.is_controller:
            await self._start_controller_listener()
        if config.is_broker:
            await self._start_broker()
        if self.metrics_enabled:
            await self._start_metrics()

    async def _start_metrics(self) -> None:
        """The Prometheus endpoint and the event-loop timer it reports (issue 18)."""
        config = self.config
        self.loop_monitor = EventLoopMonitor()
        self.loop_monitor.start()
        self.metrics_server = MetricsServer(
            node_registry(self, self.loop_monitor), config.metrics_host, config.metrics_port
        )
        try:
            self.metrics_port = await self.metrics_server.start()
        except OSError as exc:
            self.metrics_server = None
            raise StartupError(
                f"metrics.port: cannot listen on {config.metrics_host}:{config.metrics_port}: {exc.strerror}"
            ) from None
        log.info(
            "node %d: Prometheus metrics on http://%s:%d/metrics",
            config.node_id,
            config.metrics_host,
            self.metrics_port,
        )

    async def _start_controller_listener(self) -> None:
        """The controller listener: raft RPCs between voters, DescribeQuorum for tools, and
        CreateTopics/DeleteTopics on the active controller (Kafka's ControllerApis)."""
        try:
            server = await self.listeners.start_controller(self._handle_controller_request)
        except ListenerError as exc:
            raise StartupError(str(exc)) from None
        self.controller_port = server.port

    async def _start_broker(self) -> None:
        config = self.config
        metadata = self.metadata
        assert metadata is not None
        if not config.is_controller:
            # A broker process: its controller is the quorum's active one, over the network (KIP-631).
            self.link = ControllerLink(
                config,
                self.rng,
                leader_id=metadata.leader_id,
                cluster_id=lambda: metadata.cluster_id,
                metadata_offset=lambda: metadata.image.offset,
                listeners=self._registration_listeners,
                on_change=self._on_session_change,
                addresses=metadata.addresses,
                controller_security=self._controller_security,
            )
            metadata.on_fetch_answered = self.link.lease.on_metadata_fetch_answered
        link = self.link
        self.ctx = handlers.BrokerContext(
            node_id=config.node_id,
            cluster=metadata.cluster_view(),
            replicas=self.replicas,
            producer_ids=self.producer_ids,
            auto_create_topics_enable=config.auto_create_topics_enable,
            request_topic_creation=self._request_topic_creation,
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            transaction_state_num_partitions=config.transaction_state_log_num_partitions,
            min_insync_replicas=self._min_insync_replicas,
            replica_selector_enabled=config.replica_selector_class is not None,
        )
        self.fetchers = ReplicaFetchers(
            config,
            self.replicas,
            self.rng,
            on_high_watermark=self._on_high_watermark,
            broker_security=self._broker_security,
        )
        create_topics = link.create_topics_by_name if link is not None else metadata.create_topics_by_name
        self.txns = TxnService(
            config,
            self.ctx,
            create_topics,
            wait_replicated=self.wait_replicated,
            write_markers_locally=self._write_txn_markers,
            after_producer_id=self._pump_producer_ids,
            broker_security=self._broker_security,
        )
        self.groups = GroupService(
            config,
            self.ctx,
            create_topics,
            self.rng,
            wait_replicated=self.wait_replicated,
            verify_txn=self.txns.verify,
            lease_holds=(
                None if link is None else lambda: link.lease.holds(now_ms(), metadata.applied_end_offset)
            ),
        )
        self.share_state = ShareStateService(
            config, self.ctx, create_topics, self.wait_replicated, self._broker_security
        )
        self.shares = ShareService(config, self.ctx, self.share_state, self._wait_for_data, self._notify_data)
        self.groups.on_share_member_departed = self.shares.member_departed
        with collection_paused():  # every hosted partition opens here (issue 29)
            self._on_image()
        self._request_handlers = self._build_request_handlers()
        # The combined node registers before it listens, so its first client finds it in Metadata.
        registered = self.listeners.advertised_endpoints()
        if link is None:
            await self._register_in_process(registered)
            self._initial_catch_up.set()  # the combined node's image is its own controller's
        try:
            await self.listeners.start_clients(self._handle)
        except ListenerError as exc:
            raise StartupError(str(exc)) from None
        if link is None:
            bound = self.listeners.advertised_endpoints()
            if bound != registered:
                # Ephemeral ports (tests): registered again with the ports actually bound.
                self.producer_ids.broker_epoch = await metadata.register_broker(bound)
        else:
            # Registered with the port actually bound; served from the first image on (a fenced broker
            # answers NOT_LEADER_OR_FOLLOWER and is absent from Metadata until the controller unfences it).
            self._spawn(link.run_session())
        self._spawn(open_deferred_logs(self.replicas))
        self._spawn(self._housekeeping())
        if self.config.log_cleaner_enable:
            self._spawn(self._log_cleaner())
        self._spawn(self.groups.run_timers())
        self._spawn(self.txns.run_timers())
        self._spawn(self._isr_timer())

    async def _register_in_process(self, endpoints: list[BrokerEndpoint]) -> None:
        """The single-node cluster's broker registers with its own controller, in process, with every
        client listener as advertised (advertised.listeners wins: a proxy or NAT in front of the node)."""
        assert self.metadata is not None
        broker_epoch = await self.metadata.register_broker(endpoints)
        self.producer_ids.broker_epoch = broker_epoch
        # Ask for the first producer-id block now so the first InitProducerId rarely waits (KIP-730).
        self.producer_ids.maybe_request_next_block(now_ms())
        self._pump_producer_ids()

    def _on_storage_failure(self, log_dir: str, reason: str) -> None:
        """One line per dir, once: it is offline until a restart, the other dirs keep serving
        (Kafka's LogDirFailureHandler: "Stopped serving replicas in dir")."""
        log.error(
            "log dir %s is offline: a write failed (%s); its partitions answer KAFKA_STORAGE_ERROR until "
            "a restart, which recovers their logs; the other log dirs keep serving",
            log_dir,
            reason,
        )

    def _topic_configs(self, topic: str) -> Mapping[str, str]:
        """The topic's own configs (ConfigRecords) as the latest image has them."""
        assert self.metadata is not None
        return self.metadata.image.configs.configs_for(ConfigResource(CONFIG_RESOURCE_TYPE_TOPIC, topic))

    def _broker_configs(self, name: str) -> Mapping[str, str]:
        """The dynamic configs of the BROKER resource ``name`` ("" = every broker) in the image."""
        assert self.metadata is not None
        return self.metadata.image.configs.configs_for(ConfigResource(CONFIG_RESOURCE_TYPE_BROKER, name))

    def _group_configs(self, group_id: str) -> Mapping[str, str]:
        """The group's own configs (KIP-848 group configs) in the image, set whether or not it exists."""
        assert self.metadata is not None
        return self.metadata.image.configs.configs_for(ConfigResource(CONFIG_RESOURCE_TYPE_GROUP, group_id))

    def _dynamic_broker_configs(self) -> dict[str, str]:
        return {**self._broker_configs(""), **self._broker_configs(str(self.config.node_id))}

    def _topic_log_config(self, topic: str) -> LogConfig:
        """The topic's configs over the broker's LogConfig."""
        return topic_log_config(self.replicas.log_config, self._topic_configs(topic))

    def _min_insync_replicas(self, topic: str) -> int:
        """The topic's min.insync.replicas config, else the broker's (Kafka LogConfig)."""
        assert self.metadata is not None
        value = self.metadata.image.configs.configs_for(
            ConfigResource(CONFIG_RESOURCE_TYPE_TOPIC, topic)
        ).get("min.insync.replicas")
        if value is not None and value.isdigit():
            return int(value)
        dynamic = self._dynamic_broker.get("min.insync.replicas")
        if dynamic is not None and dynamic.isdigit():
            return int(dynamic)
        return self.config.min_insync_replicas

    def _registration_listeners(self) -> list[Any]:
        """Every client listener as BrokerRegistration names it (io/listeners.py)."""
        return [
            messages.BrokerRegistrationRequest.Listener(
                name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol
            )
            for e in self.listeners.advertised_endpoints()
        ]

    def _on_session_change(self) -> None:
        """The broker's session changed (registered, fenced/unfenced, refused): new producer-id requests
        carry the new broker epoch, and a refusal stops the process with one line."""
        link = self.link
        assert link is not None
        lifecycle = link.lifecycle
        if lifecycle.fatal_error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
            self._spawn(self._fail_cluster_id_conflict(link))
            return
        if lifecycle.fatal_error is not None:
            self._fail(lifecycle.fatal_error)
            return
        serving = lifecycle.state is BrokerState.RUNNING and not lifecycle.is_fenced
        if self.ctx is not None and self.ctx.fenced == serving:
            self._on_image()  # this broker joins (or leaves) the brokers its own Metadata lists
        if lifecycle.broker_epoch != self.producer_ids.broker_epoch:
            self.producer_ids.broker_epoch = lifecycle.broker_epoch
            if lifecycle.broker_epoch >= 0:
                # Ask for the first producer-id block now so the first InitProducerId rarely waits.
                self.producer_ids.maybe_request_next_block(now_ms())
                self._pump_producer_ids()

    async def _fail_cluster_id_conflict(self, link: ControllerLink) -> None:
        """KIP-1262: a broker whose persisted cluster id is not the quorum's never serves; the one line
        names both ids and the file that holds ours."""
        assert self.metadata is not None
        theirs = await link.quorum_cluster_id()
        ours = self.metadata.cluster_id
        where = meta_properties_path(self.config.metadata_log_dir)
        self._fail(
            f"INCONSISTENT_CLUSTER_ID: {where} has cluster.id {ours} but the controller quorum's cluster id is "
            f"{theirs or 'unknown'}; this broker's log dirs belong to another cluster (give it empty log dirs "
            "to join this one)"
        )

    def _fail(self, reason: str) -> None:
        """A condition the process cannot serve through: the CLI stops the node and exits with it."""
        if self.failure is None:
            self.failure = reason
            log.error("%s", reason)
            self.failed.set()

    async def stop(self, budget_s: float = SHUTDOWN_BUDGET_S) -> None:
        """Stop promptly whatever is in flight: pending controller writes fail with NOT_CONTROLLER,
        connections (parked fetches and joins included) are closed, background tasks cancelled; then
        the logs are flushed and closed. Past ``budget_s`` it stops waiting, logs what it was still
        waiting for, and closes the logs all the same (nothing acknowledged is lost: acknowledged
        batches are in the page cache, and the metadata log is fsynced before a write commits)."""
        if self._stopped:
            return
        self._stopped = True
        deadline = time.monotonic() + budget_s
        still_waiting: list[str] = []

        async def bounded(step: Awaitable[object], what: Callable[[], str]) -> None:
            task = asyncio.ensure_future(step)
            if not await wait_shielded(task, max(0.0, deadline - time.monotonic())):
                still_waiting.append(what())
            elif not task.cancelled() and task.exception() is not None:
                log.warning("shutdown: %s failed: %r", what(), task.exception())

        if self.link is not None:
            # Controlled shutdown (KIP-631 want_shut_down): the controller moves leadership off this
            # broker before it stops serving.
            await bounded(
                self.link.controlled_shutdown(min(CONTROLLED_SHUTDOWN_BUDGET_S, budget_s)),
                lambda: "controlled shutdown",
            )
        if self.metadata is not None:
            self.metadata.fail_pending_writes()
        if self.metrics_server is not None:
            await bounded(self.metrics_server.stop(), lambda: "the metrics endpoint")
        if self.loop_monitor is not None:
            await bounded(self.loop_monitor.stop(), lambda: "the event-loop monitor")
        for server in self.listeners.servers:
            await bounded(server.stop(), functools.partial(_connections_left, server))
        # From here no image is applied (Kafka's BrokerServer.shutdown closes the metadata publishers
        # before the replica manager and the log manager): one arriving while the steps below await
        # would start replica fetchers again and reopen logs after close_cleanly wrote their
        # checkpoints, and the bytes appended then lie past the log end the next clean start trusts.
        # Seed 51 of the fault campaign lost 7,276 acknowledged records to it (issue 32).
        self._images_stopped = True
        if self.groups is not None:
            await bounded(self.groups.stop(), lambda: "the group coordinator")
        if self.share_state is not None:
            await bounded(self.share_state.stop(), lambda: "the share coordinator")
        if self.txns is not None:
            await bounded(self.txns.stop(), lambda: "the transaction coordinator")
        if self.fetchers is not None:
            await bounded(self.fetchers.close(), lambda: "the replica fetchers")
        for key in list(self._replication_waits):
            self._fail_replication_waits(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await bounded(
                asyncio.gather(*tasks, return_exceptions=True),
                lambda: "task(s) " + ", ".join(sorted(t.get_name() for t in tasks if not t.done())),
            )
        try:
            # Kafka's LogManager.shutdown: logs closed in parallel, the offset checkpoints, then
            # .kafka_cleanshutdown (issue 29).
            self.log_opener.close_cleanly(self.replicas, self.config.num_recovery_threads_per_data_dir)
        except OSError as exc:
            log.warning("shutdown: cannot write the clean-shutdown checkpoints: %s", exc)
        if self.link is not None:
            await bounded(self.link.close(), lambda: "the channel to the controller")
        if self.metadata is not None:
            metadata = self.metadata
            await bounded(metadata.stop(), lambda: "the metadata log driver")
            metadata.close_log()
        if self._accept_shortage is not None:
            self._accept_shortage.uninstall()
        if still_waiting:
            log.warning(
                "shutdown budget of %.1f s spent; stopped without waiting for: %s",
                budget_s,
                "; ".join(still_waiting),
            )

    def _spawn(self, coro: Any) -> None:
        if self._stopped:
            coro.close()  # nothing new starts once the node is stopping
            return
        # Named after the coroutine, so a stop that cannot finish says which task it waited for.
        task = asyncio.get_running_loop().create_task(coro, name=getattr(coro, "__qualname__", None))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _housekeeping(self) -> None:
        interval_s = self.config.log_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(min(interval_s, 30.0))
            deleted = self.replicas.apply_retention(now_ms())
            if deleted:
                log.info("retention deleted %d segment(s)", deleted)

    async def _log_cleaner(self) -> None:
        """Log compaction (issue 17): every log.cleaner.backoff.ms, a pass over each compacted
        partition that needs one, the event loop handed back every CLEANER_SLICE_S so produce and fetch
        never wait on the cleaner for longer."""
        while True:
            await asyncio.sleep(self.config.log_cleaner_backoff_ms / 1000)
            for _ in range(len(self.replicas.partitions)):
                found = self.replicas.next_cleaning(now_ms())
                if found is None:
                    break
                part, job = found
                before = dataclasses.replace(self.replicas.cleaner_stats)
                started = time.monotonic()
                deadline = started + CLEANER_SLICE_S
                try:
                    for _step in job:
                        if time.monotonic() >= deadline:
                            await asyncio.sleep(0)
                            deadline = time.monotonic() + CLEANER_SLICE_S
                except Exception:  # a bug in one pass must not stop compaction for good
                    log.exception("log cleaner: %s-%d: the pass failed", part.topic, part.partition_index)
                    continue
                after = self.replicas.cleaner_stats
                log.info(
                    "log cleaner: %s-%d: %.1f MB read, %.1f MB written, %d records removed in %.0f ms",
                    part.topic,
                    part.partition_index,
                    (after.bytes_read - before.bytes_read) / 1e6,
                    (after.bytes_written - before.bytes_written) / 1e6,
                    after.records_removed - before.records_removed,
                    (time.monotonic() - started) * 1000,
                )

    # --- metadata image -> broker view --------------------------------------------------------------

    def _drop_hosted(
        self,
        topic: str,
        partitions: Sequence[handlers.PartitionView],
        gone: Callable[[handlers.PartitionView], bool],
    ) -> None:
        """Stop hosting the partitions of ``topic`` that are ``gone`` (reassigned away, or the topic is)."""
        for p in partitions:
            key = (topic, p.partition_index)
            if gone(p) and self.replicas.hosts(*key):
                self._fail_replication_waits(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
                self.replicas.remove_partition(*key)

    def _apply_topic(self, topic_view: handlers.TopicView, log_config: LogConfig, now: int) -> _AppliedTopic:
        """One topic of a new image: the partitions this broker hosts, each one's leadership and ISR."""
        node_id = self.config.node_id
        name = topic_view.name
        self._drop_hosted(name, topic_view.partitions, lambda p: node_id not in p.replicas)
        done = _AppliedTopic(topic_view, log_config)
        for p in topic_view.partitions:
            if node_id not in p.replicas:
                continue
            key = (name, p.partition_index)
            try:
                part = self.replicas.ensure_partition(
                    *key, now, replicated=len(p.replicas) > 1, broker_id=node_id
                )
                if len(p.replicas) > 1:
                    self.replicas.make_replicated(part)  # a reassignment gave it more replicas (opens it)
            except KafkaError:
                # Its log dir is offline (it answers KAFKA_STORAGE_ERROR, led_partition) or descriptors
                # ran short: the topic is applied again with the next image.
                done.complete = False
                continue
            self.replicas.apply_log_config(part, log_config)
            transition = self.replicas.apply_partition(
                part,
                leader_id=p.leader_id,
                leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch,
                replicas=p.replicas,
                isr=p.isr,
                now_ms=now,
            )
            if transition is Transition.BECAME_FOLLOWER:
                self._fail_replication_waits(key, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if part.replicated and part.replication.is_leader:
                self._on_high_watermark(part)  # an ISR change may move it
            elif part.replicated and p.leader_id >= 0:
                done.followed.setdefault(p.leader_id, set()).add(key)
        return done

    def _on_image(self) -> None:
        """Publish a new image: the handlers' view, the partitions this broker hosts, each one's
        leadership and ISR, and which leaders the replica fetchers follow."""
        if self.metadata is None or self.ctx is None or self._images_stopped:
            return
        view = self.metadata.cluster_view()
        now = now_ms()
        node_id = self.config.node_id
        # Dynamic broker configs (KIP-226): this broker's over the cluster default over server.properties.
        self._dynamic_broker = self._dynamic_broker_configs()
        self.replicas.log_config = topic_log_config(
            self._static_log_config, topic_names_of_broker_configs(self._dynamic_broker)
        )
        # Only the topics whose view or configs changed are applied again (issue 29: an image costs
        # what its changed topics cost, not what the node hosts); the others keep what they followed.
        applied = self._applied_topics
        for name in [name for name in applied if name not in view.topics]:
            self._drop_hosted(name, applied.pop(name).view.partitions, lambda _p: True)
        followed: dict[int, set[tuple[str, int]]] = {}
        for name, topic_view in view.topics.items():
            log_config = self._topic_log_config(name)
            done = applied.get(name)
            if (
                done is None
                or done.view is not topic_view
                or done.log_config != log_config
                or not done.complete
            ):
                done = applied[name] = self._apply_topic(topic_view, log_config, now)
            for leader_id, keys in done.followed.items():
                followed.setdefault(leader_id, set()).update(keys)
        for warning in self.replicas.warnings:
            log.warning("producer-state snapshot %s", warning)
        self.replicas.warnings.clear()
        for removed in self.metadata.take_removed_topics():
            for partition in removed[1]:
                self.replicas.remove_partition(removed[0], partition)
        if self.link is not None:
            # Until this incarnation is registered and unfenced, a broker process lists itself nowhere
            # and leads nothing: its metadata on disk may still show the previous incarnation unfenced.
            lifecycle = self.link.lifecycle
            self.ctx.fenced = lifecycle.state is not BrokerState.RUNNING or lifecycle.is_fenced
            if self.ctx.fenced:
                view = view.fence(node_id)
            elif not self._initial_catch_up.is_set() and lifecycle.serves_requests(
                listed_unfenced=any(b.node_id == node_id for b in view.brokers)
            ):
                log.info("broker %d caught up with the metadata log: processing requests", node_id)
                self._initial_catch_up.set()
        self.ctx.cluster = view
        self.quotas.on_image(self.metadata.image.client_quotas.entities)
        self._update_replication_quotas()
        if self.fetchers is not None:
            self.fetchers.update(followed, {b.node_id: (b.host, b.port) for b in view.brokers})
        if self.groups is not None:
            self.groups.on_image(view, self.metadata.image.configs)
        if self.share_state is not None:
            self.share_state.on_image()
        if self.shares is not None:
            self.shares.on_image(self.metadata.image.configs)
        if self.txns is not None:
            self.txns.on_image()

    def _update_replication_quotas(self) -> None:
        """The replication throttles (KIP-73) from the image's dynamic broker and topic configs, when
        those changed (Kafka's BrokerConfigHandler / TopicConfigHandler)."""
        assert self.metadata is not None and self.ctx is not None
        configs = self.metadata.image.configs
        if configs is self._replication_quota_configs:
            return
        self._replication_quota_configs = configs
        topic_configs = {
            resource.resource_name: values
            for resource, values in configs.resources.items()
            if resource.resource_type == CONFIG_RESOURCE_TYPE_TOPIC
        }
        quotas = [self.ctx.leader_quota] + ([self.fetchers.quota] if self.fetchers is not None else [])
        for quota in quotas:
            quota.update(self._dynamic_broker, topic_configs, self.config.node_id)

    # --- replication (issue 14) -------------------------------------------------------------------

    async def _wait_for_replication(
        self, results: list[Any], waits: list[handlers.ReplicationWait], timeout_ms: int
    ) -> None:
        """acks=all: each replicated partition is answered once its high watermark passes the appended
        batches; REQUEST_TIMED_OUT after the request's timeout; NOT_ENOUGH_REPLICAS_AFTER_APPEND when
        the ISR shrank below min.insync.replicas meanwhile; NOT_LEADER_OR_FOLLOWER when leadership moved."""
        futures = [self._replicated(wait.part, wait.last_offset) for wait in waits]
        park()  # Kafka's DelayedProduce: the request's queued.max.requests slot goes back meanwhile
        done, _ = await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000)
        assert self.ctx is not None
        for wait, fut in zip(waits, futures, strict=True):
            if fut in done:
                error = fut.result()
                if error is ErrorCode.NONE:
                    if not wait.part.replication.enough_replicas(
                        self.ctx.min_insync_replicas(wait.part.topic)
                    ):
                        error = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            else:
                fut.cancel()
                error = ErrorCode.REQUEST_TIMED_OUT
            if error is not ErrorCode.NONE:
                partitions = results[wait.topic_index].partitions
                partitions[wait.partition_index] = dataclasses.replace(
                    partitions[wait.partition_index], error_code=error, base_offset=-1
                )

    def _replicated(self, part: Any, last_offset: int) -> asyncio.Future[ErrorCode]:
        """Completes (NONE) once the partition's high watermark passes ``last_offset``, or with the
        error that ends the wait (leadership moved)."""
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._replication_waits.setdefault((part.topic, part.partition_index), []).append((last_offset, fut))
        self._on_high_watermark(part)
        return fut

    async def wait_replicated(
        self, topic: str, partition: int, last_offset: int, timeout_ms: int
    ) -> ErrorCode:
        """For the group coordinator: its writes to a replicated __consumer_offsets partition are
        answered once the ISR has them (REQUEST_TIMED_OUT after ``timeout_ms``)."""
        part = self.replicas.get(topic, partition)
        if part is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if not part.replicated or last_offset < part.log.high_watermark:
            return ErrorCode.NONE
        fut = self._replicated(part, last_offset)
        if not await wait_shielded(fut, timeout_ms / 1000):
            fut.cancel()
            return ErrorCode.REQUEST_TIMED_OUT
        return fut.result()

    def _on_high_watermark(self, part: Any) -> None:
        """A partition's high watermark may have moved: answer the acks=all produces it passed, and
        wake consumers' long polls."""
        key = (part.topic, part.partition_index)
        waiting = self._replication_waits.get(key)
        if waiting:
            high_watermark = part.log.high_watermark
            still = []
            for offset, fut in waiting:
                if fut.done():
                    continue
                if offset < high_watermark:
                    fut.set_result(ErrorCode.NONE)
                else:
                    still.append((offset, fut))
            if still:
                self._replication_waits[key] = still
            else:
                del self._replication_waits[key]
        # Also with no acks=all produce waiting (acks=1 or 0): a consumer's long poll waits for the
        # high watermark, not the append (Kafka's Partition.tryCompleteDelayedRequests on an increment).
        self._notify_data()

    def _fail_replication_waits(self, key: tuple[str, int], error: ErrorCode) -> None:
        for _, fut in self._replication_waits.pop(key, []):
            if not fut.done():
                fut.set_result(error)

    def _maybe_change_isr(self, part: Any) -> None:
        """Propose the ISR change the partition's state calls for (AlterPartition, KIP-497)."""
        assert self.ctx is not None
        eligible = self.ctx.cluster.isr_eligible_broker_ids
        proposal = part.replication.isr_change(
            now_ms(), part.log.high_watermark, self.config.replica_lag_time_max_ms, eligible.__contains__
        )
        if proposal is not None:
            self._send_isr_change(part, proposal)

    def _send_isr_change(self, part: Any, proposal: IsrProposal) -> None:
        link = self.link
        assert self.ctx is not None
        view = self.ctx.cluster.topics.get(part.topic)
        if link is None or view is None:
            part.replication.isr_change_answered(
                ErrorCode.INVALID_REQUEST, now_ms()
            )  # one node: nobody to add
            return

        async def alter() -> None:
            error = await link.alter_partition(view.topic_id, part.partition_index, proposal)
            replication = part.replication
            if error is ErrorCode.NONE:
                log.info("%s-%d: ISR is now %s", part.topic, part.partition_index, list(proposal.new_isr))
            elif (replication.refused_isr, replication.refused_error) != (proposal.new_isr, error):
                # One line per change of what is refused, not one per attempt (issue 32).
                log.info(
                    "%s-%d: ISR change to %s: %s",
                    part.topic,
                    part.partition_index,
                    list(proposal.new_isr),
                    error.name,
                )
            again = replication.isr_change_answered(error, now_ms())
            if again is not None and not self._stopped:
                await asyncio.sleep(self.config.replica_fetch_backoff_ms / 1000)
                if part.replication.pending_isr == again.new_isr:
                    self._send_isr_change(part, again)

        self._spawn(alter())

    async def _isr_timer(self) -> None:
        """Every half replica.lag.time.max.ms, the leader looks for followers that fell out of sync
        (Kafka's isr-expiration task)."""
        interval_s = self.config.replica_lag_time_max_ms / 2000
        while True:
            await asyncio.sleep(interval_s)
            for part in list(self.replicas.partitions.values()):
                if part.replicated and part.replication.is_leader:
                    self._maybe_change_isr(part)

    def _request_topic_creation(self, names: list[str]) -> None:
        assert self.metadata is not None
        create_topics = self.link.create_topics_by_name if self.link else self.metadata.create_topics_by_name

        async def create() -> None:
            try:
                await create_topics(names, self.config.num_partitions)
            except (NotControllerError, PeerUnavailable) as exc:
                log.info("auto-creating %s: %s", ", ".join(names), exc)

        self._spawn(create())

    def _pump_producer_ids(self) -> None:
        request = self.producer_ids.take_request()
        if request is None or self.metadata is None:
            return
        allocate_producer_ids = (
            self.link.allocate_producer_ids if self.link is not None else self.metadata.allocate_producer_ids
        )

        async def allocate() -> None:
            try:
                block = await allocate_producer_ids(request.broker_id, request.broker_epoch)
            except asyncio.CancelledError:
                self.producer_ids.on_timeout()
                raise
            except Exception:
                log.exception("AllocateProducerIds failed")
                self.producer_ids.on_timeout()
                return
            self.producer_ids.on_response(block, now_ms())

        self._spawn(allocate())

    # --- requests ---------------------------------------------------------------------------------

    def _notify_data(self) -> None:
        fut = self._data_arrived
        if fut is not None and not fut.done():
            fut.set_result(None)
        self._data_arrived = None

    async def _wait_for_data(self, timeout_s: float) -> None:
        if self._data_arrived is None:
            self._data_arrived = asyncio.get_running_loop().create_future()
        await wait_shielded(self._data_arrived, timeout_s)

    async def _handle(
        self, frame: bytearray, conn: ConnectionInfo
    ) -> Sequence[bytes | bytearray | memoryview] | None:
        if conn.sasl is not None and conn.sasl.raw_tokens:
            return self._raw_sasl_token(frame, conn)
        started = time.perf_counter()
        view = memoryview(frame)
        header = messages.parse_request_header(view)
        key, version = header.api_key, header.api_version
        if key == ApiKey.API_VERSIONS:
            return [messages.api_versions_response(header, features=self._api_versions_features())]
        if key == ApiKey.ALLOCATE_PRODUCER_IDS:
            # A controller RPC (KIP-730): a client listener refuses it rather than serve it.
            if version != 0:
                raise RemoteProtocolError(f"AllocateProducerIds v{version} does not exist")
            return [messages.encode_response(header, _allocate_producer_ids_refusal(version))]
        if not messages.is_supported(key, version):
            # Kafka's answer to an API or version it does not serve: close the connection.
            raise RemoteProtocolError(f"unsupported api key {key} version {version}")
        if key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE) or (
            conn.listener_name in self.listeners.sasl_authenticators and not self._authenticated(conn)
        ):
            return [
                messages.encode_response(
                    header, self._sasl(header, messages.decode_request(header, view), conn)
                )
            ]
        if not self._initial_catch_up.is_set():
            await self._initial_catch_up.wait()
        ctx = self.ctx
        assert ctx is not None
        authorizing = self._authorizer is not None
        if authorizing:
            self._authorize(conn)
        quotas = self.quotas
        if key == ApiKey.PRODUCE:
            # KafkaApis.handleProduceRequest: the request's bytes against producer_byte_rate.
            produce_throttle_ms = quotas.record(quotas.quotas.produce, conn, header.client_id, len(frame) + 4)
            produce = decode_produce_request(view[header.body_offset :], version)
            verification = None
            if produce.transactional_id is not None and allowed(
                AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, produce.transactional_id
            ):
                verification = await self._verify_transactional_produce(produce)
            waits: list[handlers.ReplicationWait] = []
            results = handlers.handle_produce(
                produce, version, ctx, now_ms(), waits, verification=verification
            )
            self._notify_data()
            if produce.acks == 0:
                # No answer to carry it, but the connection is muted all the same (KafkaApis).
                quotas.finish(conn, header.client_id, started, produce_throttle_ms, quotas.quotas.produce)
                return None
            if waits:
                await self._wait_for_replication(results, waits, produce.timeout_ms)
            throttle_ms = quotas.finish(
                conn, header.client_id, started, produce_throttle_ms, quotas.quotas.produce
            )
            results, endpoints = leader_discovery.produce_answer(
                results, version, ctx.cluster, ctx.cluster.live_brokers_on(conn.listener_name)
            )
            return [encode_produce_response(header.correlation_id, version, results, throttle_ms, endpoints)]
        request = messages.decode_request(header, view)
        if key in (ApiKey.JOIN_GROUP, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_HEARTBEAT):
            CURRENT_CLIENT.set((header.client_id or "", conn.peer))
        elif key in _LISTENER_SCOPED_APIS:
            REQUEST_LISTENER.set(conn.listener_name)
        elif key == ApiKey.SHARE_FETCH:
            CURRENT_CONNECTION.set(conn)
        if key == ApiKey.FETCH:
            return await self._fetch(header, request, conn, started)
        handler = self._request_handlers.get(key)
        if handler is None:
            raise RemoteProtocolError(f"api key {key} is advertised but has no handler")
        topics_before = ctx.cluster.topics
        response = quotas.refuse_mutation(key, request, version, conn, header.client_id, started)
        if response is None:
            if not authorizing:
                response = await handler(request, version)
            else:
                response = await self._serve_authorized(key, request, version, handler)
            quotas.answer(
                key,
                request,
                response,
                conn,
                header.client_id,
                started,
                topics_before,
                self.config.num_partitions,
            )
        return [messages.encode_response(header, response)]

    @staticmethod
    async def _serve_authorized(key: int, request: Any, version: int, handler: RequestHandler) -> Any:
        """Kafka's per-API checks around a handler: refused whole, or the denied parts taken out of
        the request and answered with their error in the same response, and listings filtered."""
        refusal = authorization.refuse(key, request, version)
        if refusal is not None:
            return refusal
        denied = authorization.split(key, request, version)
        response = await handler(request, version)
        authorization.merge(key, response, denied)
        authorization.filter_response(key, response, version, request)
        return response

    def _authorize(self, conn: ConnectionInfo) -> None:
        """Who sends this request, judged by the ACLs of the latest image (StandardAuthorizer)."""
        assert self._authorizer is not None and self.metadata is not None
        authorize_request(
            RequestAuthorization(
                conn.principal,
                # The ACL host: the address alone (Kafka's InetAddress.getHostAddress).
                conn.peer.rsplit(":", 1)[0].strip("[]"),
                self.metadata.image.acls.acls.values(),
                self._authorizer,
            )
        )

    def _authenticated(self, conn: ConnectionInfo) -> bool:
        """Authenticated, and the session (KIP-368) has not expired: an expired one may only
        re-authenticate, anything else closes the connection as Kafka does."""
        session = conn.sasl
        return isinstance(session, SaslSession) and session.live(now_ms())

    def _sasl(self, header: RequestHeader, request: Any, conn: ConnectionInfo) -> Any:
        """SaslHandshake / SaslAuthenticate (KIP-152), and the refusal of anything else before the
        connection authenticated on a SASL listener (Kafka closes it)."""
        from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

        key, version = header.api_key, header.api_version
        authenticator = self.listeners.sasl_authenticators.get(conn.listener_name)
        sasl = self.config.sasl_for(conn.listener_name)
        if authenticator is None or sasl is None:
            # Not a SASL listener.
            if key == ApiKey.SASL_HANDSHAKE:
                return SaslHandshakeResponse(
                    version=version, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]
                )
            return SaslAuthenticateResponse(
                version=version,
                error_code=ErrorCode.ILLEGAL_SASL_STATE,
                error_message="this listener does not use SASL",
                auth_bytes=b"",
                session_lifetime_ms=0,
            )
        session = conn.sasl
        if not isinstance(session, SaslSession):
            session = conn.sasl = SaslSession(sasl.enabled_mechanisms)
        if key == ApiKey.SASL_HANDSHAKE:
            error = authenticator.handshake(session, request.mechanism)
            if error != ErrorCode.NONE:
                conn.close_after_response = True
            elif version == 0:
                # SaslHandshake v0 (before KIP-152): the tokens follow as bare size-prefixed frames.
                session.raw_tokens = True
            return SaslHandshakeResponse(
                version=version, error_code=error, mechanisms=list(sasl.enabled_mechanisms)
            )
        if key != ApiKey.SASL_AUTHENTICATE:
            state = (
                "after the SASL session expired" if session.authenticated else "before SASL authentication"
            )
            raise RemoteProtocolError(f"{ApiKey(key).name} {state} on listener {conn.listener_name}")
        result = authenticator.authenticate(
            session, bytes(request.auth_bytes or b""), secrets.token_urlsafe(24), now_ms()
        )
        if result.close:
            conn.close_after_response = True
            log.info("SASL/%s authentication from %s failed", session.mechanism or "?", conn.peer)
        elif session.principal is not None:
            conn.principal = session.principal
        return SaslAuthenticateResponse(
            version=version,
            error_code=result.error_code,
            error_message=result.error_message,
            auth_bytes=result.auth_bytes,
            session_lifetime_ms=result.session_lifetime_ms,
        )

    def _api_versions_features(self) -> messages.ApiVersionsFeatures | None:
        return None if self.metadata is None else features_api.api_versions_features(self.metadata.image)

    def _raw_sasl_token(self, frame: bytearray, conn: ConnectionInfo) -> Sequence[bytes]:
        """A bare SASL token after SaslHandshake v0; the answer is a bare token too. A failure closes
        the connection without an answer, as Kafka's SaslServerAuthenticator does for v0 clients."""
        session = conn.sasl
        authenticator = self.listeners.sasl_authenticators.get(conn.listener_name)
        assert isinstance(session, SaslSession) and authenticator is not None
        result = authenticator.authenticate(session, bytes(frame), secrets.token_urlsafe(24), now_ms())
        if result.error_code != ErrorCode.NONE:
            log.info("SASL/%s authentication from %s failed", session.mechanism or "?", conn.peer)
            raise RemoteProtocolError(f"SASL/{session.mechanism} (v0 tokens) authentication failed")
        if session.principal is not None:
            conn.principal = session.principal
            session.raw_tokens = False  # Kafka requests from here on
        return [len(result.auth_bytes).to_bytes(4, "big") + result.auth_bytes]

    async def _handle_controller_request(
        self, frame: bytearray, conn: ConnectionInfo
    ) -> Sequence[bytes | bytearray | memoryview] | None:
        if conn.sasl is not None and conn.sasl.raw_tokens:
            return self._raw_sasl_token(frame, conn)
        view = memoryview(frame)
        header = messages.parse_request_header(view)
        key = header.api_key
        metadata = self.metadata
        assert metadata is not None
        if key == ApiKey.API_VERSIONS:
            return [
                messages.api_versions_response(
                    header, CONTROLLER_API_VERSIONS, features_api.api_versions_features(metadata.image)
                )
            ]
        if key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE) or (
            conn.listener_name in self.listeners.sasl_authenticators and not self._authenticated(conn)
        ):
            request = messages.decode_request(header, view)
            return [messages.encode_response(header, self._sasl(header, request, conn))]
        authorizing = self._authorizer is not None
        if authorizing:
            self._authorize(conn)
        # Kafka's ControllerApis: the quorum's and the brokers' RPCs need CLUSTER_ACTION on the
        # cluster, which only the nodes' principals have (super.users, or an ACL).
        node_principal = not authorizing or allowed_on_cluster(AclOperation.CLUSTER_ACTION)
        if key in wire.RAFT_API_KEYS:
            if header.api_version != wire.VERSIONS[ApiKey(key)] and key != ApiKey.FETCH:
                raise RemoteProtocolError(f"raft api key {key} at version {header.api_version} is not served")
            request = wire.decode_raft_request(header, view)
            if not node_principal:
                return [wire.encode_raft_error_response(header, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
            response = await metadata.handle_raft_request(header.correlation_id, request)
            if response is None:
                return None  # the core had no answer in time; the peer's request times out
            return [wire.encode_raft_response(header, response)]
        if key == ApiKey.DESCRIBE_QUORUM:
            wire.decode_describe_quorum_request(header, view)
            if not node_principal and not allowed_on_cluster(AclOperation.DESCRIBE):
                # Kafka's ControllerApis: DescribeQuorum needs DESCRIBE on the cluster.
                return [wire.encode_describe_quorum_error(header, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
            description, leader_id, leader_epoch = metadata.describe_quorum()
            return [wire.encode_describe_quorum_response(header, description, leader_id, leader_epoch)]
        if key in (ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER, ApiKey.UPDATE_RAFT_VOTER):
            # KIP-853 voter changes (ControllerApis.handleAddRaftVoter / handleRemoveRaftVoter /
            # handleUpdateRaftVoter): ALTER on the cluster (CLUSTER_ACTION for UpdateRaftVoter, which
            # only voters send), answered by the raft leader.
            request = messages.decode_request(header, view)
            if key == ApiKey.UPDATE_RAFT_VOTER:
                if not node_principal:
                    refusal = messages.UpdateRaftVoterResponse(
                        version=header.api_version,
                        throttle_time_ms=0,
                        error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        current_leader=None,
                    )
                    return [messages.encode_response(header, refusal)]
                response = await metadata.handle_update_raft_voter(request, header.api_version)
                return [messages.encode_response(header, response)]
            if not node_principal and not allowed_on_cluster(AclOperation.ALTER):
                response_class = (
                    messages.AddRaftVoterResponse
                    if key == ApiKey.ADD_RAFT_VOTER
                    else messages.RemoveRaftVoterResponse
                )
                refusal = response_class(
                    version=header.api_version,
                    throttle_time_ms=0,
                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=None,
                )
                return [messages.encode_response(header, refusal)]
            voter_handler = (
                metadata.handle_add_raft_voter
                if key == ApiKey.ADD_RAFT_VOTER
                else metadata.handle_remove_raft_voter
            )
            return [messages.encode_response(header, await voter_handler(request, header.api_version))]
        handlers_by_key: dict[int, RequestHandler] = {
            ApiKey.CREATE_TOPICS: metadata.handle_create_topics,
            ApiKey.DELETE_TOPICS: metadata.handle_delete_topics,
            ApiKey.CREATE_PARTITIONS: metadata.handle_create_partitions,
            ApiKey.BROKER_REGISTRATION: metadata.handle_broker_registration,
            ApiKey.ALLOCATE_PRODUCER_IDS: metadata.handle_allocate_producer_ids,
            ApiKey.BROKER_HEARTBEAT: metadata.handle_broker_heartbeat,
            ApiKey.DESCRIBE_CLUSTER: metadata.handle_describe_cluster,
            ApiKey.ALTER_PARTITION: metadata.handle_alter_partition,
            ApiKey.ELECT_LEADERS: metadata.handle_elect_leaders,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: metadata.handle_alter_user_scram_credentials,
            ApiKey.CREATE_ACLS: metadata.handle_create_acls,
            ApiKey.DELETE_ACLS: metadata.handle_delete_acls,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: metadata.handle_incremental_alter_configs,
            ApiKey.ALTER_CONFIGS: metadata.handle_alter_configs,
            ApiKey.ALTER_CLIENT_QUOTAS: metadata.handle_alter_client_quotas,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: metadata.handle_alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: metadata.handle_list_partition_reassignments,
            ApiKey.UNREGISTER_BROKER: metadata.handle_unregister_broker,
            ApiKey.UPDATE_FEATURES: metadata.handle_update_features,
        }
        handler = handlers_by_key.get(key)
        if handler is None:
            raise RemoteProtocolError(f"api key {key} is not served on the controller listener")
        request = messages.decode_request(header, view)
        version = header.api_version
        if node_principal:
            return [messages.encode_response(header, await handler(request, version))]
        if key in _NODE_RPCS:
            return [messages.encode_response(header, authorization.cluster_action_refusal(key, version))]
        # An admin request sent to the controller directly: judged as on a broker's listener.
        return [
            messages.encode_response(header, await self._serve_authorized(key, request, version, handler))
        ]

    def _build_request_handlers(self) -> dict[int, RequestHandler]:
        """One entry per API answered with a kafka-python response object (Produce and Fetch have
        their own hot paths above). Add an API here and to ``messages.SUPPORTED_VERSIONS``."""
        ctx = self.ctx
        metadata = self.metadata
        assert ctx is not None and metadata is not None

        def sync(fn: Any) -> RequestHandler:
            async def call(request: Any, version: int) -> Any:
                return fn(request, version, ctx)

            return call

        def on_listener(fn: Any) -> RequestHandler:
            """A handler that names brokers: those of the request's listener (issue 27)."""

            async def call(request: Any, version: int) -> Any:
                return fn(request, version, listener_context(ctx))

            return call

        txns = self.txns
        groups = self.groups
        shares, share_state = self.shares, self.share_state
        assert txns is not None and groups is not None and shares is not None and share_state is not None
        share_offsets = ShareOffsets(groups.coordinator, share_state, ctx)

        async def init_producer_id(request: Any, version: int) -> Any:
            if request.transactional_id is not None:
                return await txns.init_producer_id(request, version)
            response = handlers.handle_init_producer_id(request, version, ctx, now_ms())
            self._pump_producer_ids()
            return response

        return {
            ApiKey.METADATA: on_listener(handlers.handle_metadata),
            ApiKey.LIST_OFFSETS: sync(handlers.handle_list_offsets),
            ApiKey.OFFSET_FOR_LEADER_EPOCH: sync(handlers.handle_offset_for_leader_epoch),
            ApiKey.INIT_PRODUCER_ID: init_producer_id,
            # Admin requests: the node's own controller answers them, or a broker process forwards
            # them to the active controller.
            **(
                {
                    ApiKey.CREATE_TOPICS: metadata.handle_create_topics,
                    ApiKey.DELETE_TOPICS: metadata.handle_delete_topics,
                    ApiKey.ELECT_LEADERS: metadata.handle_elect_leaders,
                    ApiKey.CREATE_PARTITIONS: metadata.handle_create_partitions,
                }
                if self.link is None
                else {
                    ApiKey.CREATE_TOPICS: self._forward_create,
                    ApiKey.DELETE_TOPICS: self._forward_delete,
                    ApiKey.ELECT_LEADERS: self.link.forward_elect_leaders,
                    ApiKey.CREATE_PARTITIONS: self._forward_create_partitions,
                }
            ),
            **self._security_handlers(),
            **self._config_handlers(),
            **self._reassignment_handlers(),
            ApiKey.DELETE_RECORDS: sync(handlers.handle_delete_records),
            # Described from this broker's own state (broker/cluster_admin.py).
            ApiKey.DESCRIBE_CLUSTER: on_listener(
                lambda request, version, ctx: cluster_admin.handle_describe_cluster(
                    request, version, ctx, self.rng
                )
            ),
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: on_listener(cluster_admin.handle_describe_topic_partitions),
            ApiKey.DESCRIBE_LOG_DIRS: self._describe_log_dirs,
            ApiKey.DESCRIBE_QUORUM: self._describe_quorum,
            ApiKey.DESCRIBE_PRODUCERS: sync(handle_describe_producers),
            ApiKey.DESCRIBE_CONFIGS: sync(
                lambda request, version, ctx: handle_describe_configs(
                    request,
                    version,
                    ctx,
                    self.config,
                    self._topic_configs,
                    self._broker_configs,
                    self._group_configs,
                    logger_levels,
                )
            ),
            ApiKey.FIND_COORDINATOR: self._find_coordinator,
            ApiKey.WRITE_TXN_MARKERS: self._write_txn_markers,
            # The group APIs and committed offsets (io/group_service.py), transactions (io/txn_service.py).
            **groups.request_handlers(),
            **txns.request_handlers(),
            # Share groups' fetches and acknowledgements on partition leaders (io/share_service.py).
            **shares.request_handlers(),
            # The share coordinator's state RPCs, from partition leaders (io/share_state_service.py).
            **share_state.request_handlers(),
            # Share-group offsets on the group's coordinator (io/share_offsets.py); deleting a share
            # group deletes its share state first.
            **share_offsets.request_handlers(),
            ApiKey.DELETE_GROUPS: share_offsets.delete_groups(groups.delete_groups),
        }

    def _reassignment_handlers(self) -> dict[int, RequestHandler]:
        """AlterPartitionReassignments / ListPartitionReassignments (KIP-455) and UnregisterBroker: the
        active controller answers, this node's own or the one a broker process forwards to."""
        metadata = self.metadata
        assert metadata is not None
        link = self.link
        if link is None:
            return {
                ApiKey.ALTER_PARTITION_REASSIGNMENTS: metadata.handle_alter_partition_reassignments,
                ApiKey.LIST_PARTITION_REASSIGNMENTS: metadata.handle_list_partition_reassignments,
                ApiKey.UNREGISTER_BROKER: metadata.handle_unregister_broker,
            }

        async def alter(request: Any, version: int) -> Any:
            return await link.forward_or_refuse(
                request, version, reassignments_api.alter_errors, reassignments_api.alter_error
            )

        async def list_ongoing(request: Any, version: int) -> Any:
            return await link.forward_or_refuse(
                request, version, reassignments_api.list_errors, reassignments_api.list_error
            )

        async def unregister(request: Any, version: int) -> Any:
            return await link.forward_or_refuse(
                request, version, lambda r: [r.error_code], cluster_admin.unregister_broker_error
            )

        return {
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: list_ongoing,
            ApiKey.UNREGISTER_BROKER: unregister,
        }

    def _config_handlers(self) -> dict[int, RequestHandler]:
        """IncrementalAlterConfigs, AlterConfigs and AlterClientQuotas: the active controller writes the
        ConfigRecords / ClientQuotaRecords (this node's own, or forwarded), every broker applies them
        from its image."""
        metadata = self.metadata
        assert metadata is not None
        link = self.link

        def to_controller(local: RequestHandler, incremental: bool) -> RequestHandler:
            async def call(request: Any, version: int) -> Any:
                if link is None:
                    return await local(request, version)
                return await link.forward_or_refuse(
                    request,
                    version,
                    lambda r: [x.error_code for x in r.responses],
                    configs_api.alter_configs_refusal(incremental),
                )

            return call

        async def describe_client_quotas(request: Any, version: int) -> Any:
            return quotas_api.describe_client_quotas(request, version, metadata.image.client_quotas.entities)

        async def alter_client_quotas(request: Any, version: int) -> Any:
            if link is None:
                return await metadata.handle_alter_client_quotas(request, version)
            return await link.forward_or_refuse(
                request,
                version,
                lambda r: [x.error_code for x in r.entries],
                quotas_api.alter_client_quotas_error,
            )

        async def update_features(request: Any, version: int) -> Any:
            # KafkaApis forwards UpdateFeatures to the active controller (KIP-584).
            if link is None:
                return await metadata.handle_update_features(request, version)
            return await link.forward_or_refuse(
                request, version, lambda r: [r.error_code], features_api.update_features_error
            )

        return {
            ApiKey.UPDATE_FEATURES: update_features,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: to_controller(metadata.handle_incremental_alter_configs, True),
            ApiKey.ALTER_CONFIGS: to_controller(metadata.handle_alter_configs, False),
            # Client quotas (KIP-546): described from the image, altered by the active controller.
            ApiKey.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas,
            ApiKey.ALTER_CLIENT_QUOTAS: alter_client_quotas,
        }

    def _security_handlers(self) -> dict[int, RequestHandler]:
        """SCRAM credentials (KIP-554) and ACLs: described from the image, altered by the active
        controller (this node's own, or forwarded). Without an authorizer the ACL APIs answer
        SECURITY_DISABLED, as Kafka's do."""
        metadata = self.metadata
        assert metadata is not None
        link = self.link
        authorizer_enabled = self.config.authorizer.enabled

        async def describe_scram(request: Any, version: int) -> Any:
            return security_api.describe_user_scram_credentials(
                request, version, metadata.image.scram.credentials
            )

        async def describe_acls(request: Any, version: int) -> Any:
            acls = metadata.image.acls.acls.values() if authorizer_enabled else None
            return security_api.describe_acls(request, version, acls)

        def to_controller(
            local: RequestHandler, errors: Callable[[Any], list[int]], refusal: Any, needs_authorizer: bool
        ) -> RequestHandler:
            async def call(request: Any, version: int) -> Any:
                if needs_authorizer and not authorizer_enabled:
                    return refusal(
                        request, version, ErrorCode.SECURITY_DISABLED, security_api.NO_AUTHORIZER_MESSAGE
                    )
                if link is None:
                    return await local(request, version)
                return await link.forward_or_refuse(request, version, errors, refusal)

            return call

        return {
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_scram,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: to_controller(
                metadata.handle_alter_user_scram_credentials,
                lambda r: [x.error_code for x in r.results],
                security_api.alter_user_scram_credentials_error,
                False,
            ),
            ApiKey.DESCRIBE_ACLS: describe_acls,
            ApiKey.CREATE_ACLS: to_controller(
                metadata.handle_create_acls,
                lambda r: [x.error_code for x in r.results],
                security_api.create_acls_error,
                True,
            ),
            ApiKey.DELETE_ACLS: to_controller(
                metadata.handle_delete_acls,
                lambda r: [x.error_code for x in r.filter_results],
                security_api.delete_acls_error,
                True,
            ),
        }

    async def _describe_quorum(self, request: Any, version: int) -> Any:
        """DescribeQuorum on the client listener: Kafka's KafkaApis forwards it to the active controller,
        and so does a broker process; a combined node is the quorum's only voter and answers itself."""
        if not wire.describes_the_metadata_partition(request):
            return wire.describe_quorum_error_response(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if self.link is not None:
            return await self.link.forward_describe_quorum(request, version)
        assert self.metadata is not None
        return wire.describe_quorum_response(*self.metadata.describe_quorum())

    async def _describe_log_dirs(self, request: Any, version: int) -> Any:
        """DescribeLogDirs (35): each of log.dirs by its absolute path with its volume's total and usable
        bytes (Kafka: FileStore.getTotalSpace / getUsableSpace), or KAFKA_STORAGE_ERROR when it cannot
        be read; the partitions' sizes come from the replica manager."""
        usages = []
        for directory in dict.fromkeys(self.config.log_dirs):
            path = os.path.abspath(directory)
            if path in self.replicas.offline_log_dirs:
                # Offline after a failed write: reported as Kafka reports an offline log dir.
                usages.append(cluster_admin.LogDirUsage(path, error_code=ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            try:
                stats = os.statvfs(path)
            except OSError as exc:
                log.warning("DescribeLogDirs: log dir %s cannot be read: %s", path, exc.strerror)
                usages.append(cluster_admin.LogDirUsage(path, error_code=ErrorCode.KAFKA_STORAGE_ERROR))
                continue
            usages.append(
                cluster_admin.LogDirUsage(
                    path, stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize
                )
            )
        return cluster_admin.handle_describe_log_dirs(request, version, self.replicas, usages)

    async def _find_coordinator(self, request: Any, version: int) -> Any:
        """FindCoordinator: Kafka answers COORDINATOR_NOT_AVAILABLE until the internal topic exists;
        creating it here (bounded) saves every first client a retry round trip."""
        assert self.ctx is not None and self.groups is not None and self.txns is not None
        key_type = request.key_type if version >= 1 else handlers.COORDINATOR_KEY_TYPE_GROUP
        if key_type == handlers.COORDINATOR_KEY_TYPE_GROUP:
            await self.groups.offsets_topic.ensure()
        elif key_type == handlers.COORDINATOR_KEY_TYPE_TRANSACTION:
            await self.txns.topic.ensure()
        return handlers.handle_find_coordinator(request, version, listener_context(self.ctx))

    async def _verify_transactional_produce(
        self, produce: ProduceRequestData
    ) -> dict[tuple[str, int], object | ErrorCode]:
        """KIP-890 part 1: a transactional producer's first batch to a partition in a transaction is
        appended only once its transaction coordinator confirms the partition was added (else a write
        after the transaction ended would open a transaction no coordinator knows: a hanging one).
        The guard taken before asking is void if a marker lands meanwhile."""
        assert self.ctx is not None and self.txns is not None
        ctx = self.ctx
        guards: dict[tuple[str, int], object] = {}
        producer: tuple[int, int] | None = None
        for topic in produce.topics:
            for pdata in topic.partitions:
                records = pdata.records
                if records is None or len(records) < BATCH_HEADER_SIZE:
                    continue
                part, error = handlers.led_partition(ctx, topic.name, pdata.index)
                if part is None:
                    continue
                batch = read_batch_header(records)
                if not batch.is_transactional or batch.producer_id < 0:
                    continue
                producer = producer or (batch.producer_id, batch.producer_epoch)
                if self.replicas.needs_verification(part, batch.producer_id):
                    guards[(topic.name, pdata.index)] = self.replicas.begin_verification(
                        part, batch.producer_id
                    )
        if not guards or producer is None:
            return {}
        verdict = await self.txns.verify(
            produce.transactional_id or "", producer[0], producer[1], list(guards)
        )
        return {
            tp: guard if verdict.get(tp) == ErrorCode.NONE else verdict.get(tp, ErrorCode.INVALID_TXN_STATE)
            for tp, guard in guards.items()
        }

    async def _write_txn_markers(self, request: Any, version: int) -> Any:
        """WriteTxnMarkers (27), from a transaction coordinator (this node's or another's): markers are
        answered once the ISR has them (Kafka appends them with acks=all); a marker in
        ``__consumer_offsets`` also settles the producer's TxnOffsetCommit offsets there."""
        assert self.ctx is not None and self.groups is not None
        waits: list[handlers.ReplicationWait] = []
        outcome = handlers.handle_write_txn_markers(request, version, self.ctx, now_ms(), waits)
        self._notify_data()
        if waits:
            # Each replicated partition's marker is answered once the ISR has it.
            errors = await asyncio.gather(
                *(
                    self.wait_replicated(
                        w.part.topic, w.part.partition_index, w.last_offset, MARKER_TIMEOUT_MS
                    )
                    for w in waits
                )
            )
            failed = {
                (w.part.topic, w.part.partition_index): e
                for w, e in zip(waits, errors, strict=True)
                if e != ErrorCode.NONE
            }
            for marker in outcome.response.markers:
                for topic_result in marker.topics:
                    for p in topic_result.partitions:
                        error = failed.get((topic_result.name, p.partition_index))
                        if error is not None and p.error_code == ErrorCode.NONE:
                            p.error_code = error
        for topic, partition, producer_id, commit in outcome.written:
            if topic == OFFSETS_TOPIC:
                self.groups.on_txn_marker(partition, producer_id, commit)
        return outcome.response

    async def _forward_create(self, request: Any, version: int) -> Any:
        """CreateTopics on a broker process: forwarded to the active controller; answered once this
        broker's own image shows the created topics (bounded), so the client's next Metadata finds them."""
        assert self.link is not None and self.metadata is not None
        response = await self.link.forward_create_topics(request, version)
        if not request.validate_only:
            created = {t.name for t in response.topics if t.error_code == ErrorCode.NONE}
            await self.metadata.wait_for_image(lambda image: all(image.topics.get_topic(n) for n in created))
        return response

    async def _forward_delete(self, request: Any, version: int) -> Any:
        """DeleteTopics on a broker process: forwarded to the active controller (as CreateTopics)."""
        assert self.link is not None and self.metadata is not None
        response = await self.link.forward_delete_topics(request, version)
        deleted = {t.name for t in response.responses if t.error_code == ErrorCode.NONE and t.name}
        await self.metadata.wait_for_image(lambda image: not any(image.topics.get_topic(n) for n in deleted))
        return response

    async def _forward_create_partitions(self, request: Any, version: int) -> Any:
        """CreatePartitions on a broker process: forwarded to the active controller; answered once this
        broker's own image has the new partitions (bounded), as CreateTopics is."""
        assert self.link is not None and self.metadata is not None
        response = await self.link.forward_or_refuse(
            request, version, partitions_api.result_errors, partitions_api.create_partitions_error
        )
        grown = partitions_api.grown_counts(request, response)
        await self.metadata.wait_for_image(lambda image: partitions_api.has_partitions(image, grown))
        return response

    async def _fetch(
        self, header: RequestHeader, request: Any, conn: ConnectionInfo, started: float
    ) -> list[bytes | bytearray | memoryview]:
        ctx = self.ctx
        assert ctx is not None
        version = header.api_version
        deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
        # v15+ moved the follower's id into ReplicaState (KIP-903); the handlers read replica_id.
        replica_id = (
            request.replica_state.replica_id
            if version >= 15 and request.replica_state is not None
            else request.replica_id
            if request.replica_id is not None
            else -1
        )
        request.replica_id = replica_id
        # v13+ names topics by id (KIP-516): the handlers read names; unknown ids are answered apart.
        unknown_topics = fetch_topic_ids.name_topics(request, version, ctx.cluster.topic_names_by_id)
        session = None
        served = request  # a follower's: its session's partitions filled in (KIP-227)
        if replica_id < 0:
            self.quotas.cap_fetch(request, conn, header.client_id)
        elif header.api_version >= 7:
            # A follower's session (KIP-227): an incremental fetch names only what changed; the
            # session fills in the rest, and the answer leaves out what has nothing new.
            session = self.fetch_sessions.context(request)
            if session.request is None:
                refused = FetchResponseData(0, session.error_code, 0, [])
                return encode_fetch_response(header.correlation_id, header.api_version, refused)
            served = session.request
        while True:
            if replica_id >= 0:
                # A follower (issue 14): its log end moves the high watermark; it reads to the log end.
                outcome, advanced = handlers.handle_replica_fetch(served, ctx, now_ms())
                for moved in advanced:
                    self._on_high_watermark(moved)
                for topic in served.topics:
                    for fp in topic.partitions:
                        fetched = ctx.replicas.get(topic.topic, fp.partition)
                        if fetched is not None and fetched.replicated:
                            self._maybe_change_isr(fetched)
            else:
                outcome = handlers.handle_fetch(request, header.api_version, ctx, now_ms())
            remaining_s = deadline - time.monotonic()
            if (
                outcome.bytes_read >= request.min_bytes
                or outcome.has_error
                or outcome.redirects
                or not served.topics  # nothing to wait for (Kafka: fetchInfos.isEmpty)
                or remaining_s <= 0
            ):
                break
            await self._wait_for_data(remaining_s)
        response = (
            outcome.response if session is None else self.fetch_sessions.answer(session, outcome.response)
        )
        response = fetch_topic_ids.finish_answer(
            response,
            version,
            ctx.cluster,
            unknown_topics,
            ctx.cluster.live_brokers_on(conn.listener_name),
        )
        parts = encode_fetch_response(header.correlation_id, header.api_version, response)
        if replica_id < 0:
            # Client quotas: a throttled consumer gets an empty answer (io/quota_service.py).
            throttled = self.quotas.fetch_response(header, conn, started, outcome.response, parts)
            if throttled is not None:
                return throttled
        ctx.topic_stats.record_fetch(response, replica_id >= 0, ctx.cluster.topics)
        return parts


# The APIs that name brokers to the client: answered with the endpoints of the listener it came in on.
_LISTENER_SCOPED_APIS = frozenset(
    {ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_TOPIC_PARTITIONS}
)

# What the controller listener serves (Kafka's ControllerApis subset): the raft RPCs at the versions
# raft.wire speaks (Fetch from a Kafka peer decodes from v12), DescribeQuorum, and the active
# controller's CreateTopics/DeleteTopics/BrokerRegistration.
# SecurityProtocol.java's ids, as BrokerRegistration carries them.

# The RPCs of brokers and controllers to a controller: only a node's principal may send them.
_NODE_RPCS = frozenset(
    {
        ApiKey.BROKER_REGISTRATION,
        ApiKey.BROKER_HEARTBEAT,
        ApiKey.ALLOCATE_PRODUCER_IDS,
        ApiKey.ALTER_PARTITION,
    }
)

CONTROLLER_API_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.API_VERSIONS: messages.SUPPORTED_VERSIONS[ApiKey.API_VERSIONS],
    ApiKey.SASL_HANDSHAKE: messages.SUPPORTED_VERSIONS[ApiKey.SASL_HANDSHAKE],
    ApiKey.SASL_AUTHENTICATE: messages.SUPPORTED_VERSIONS[ApiKey.SASL_AUTHENTICATE],
    **{
        key: (version, version)
        for key, version in wire.VERSIONS.items()
        if key not in (ApiKey.FETCH, ApiKey.DESCRIBE_QUORUM)
    },
    ApiKey.FETCH: (12, wire.VERSIONS[ApiKey.FETCH]),
    ApiKey.DESCRIBE_QUORUM: messages.SUPPORTED_VERSIONS[ApiKey.DESCRIBE_QUORUM],
    ApiKey.CREATE_TOPICS: messages.SUPPORTED_VERSIONS[ApiKey.CREATE_TOPICS],
    ApiKey.DELETE_TOPICS: messages.SUPPORTED_VERSIONS[ApiKey.DELETE_TOPICS],
    ApiKey.CREATE_PARTITIONS: messages.SUPPORTED_VERSIONS[ApiKey.CREATE_PARTITIONS],
    ApiKey.BROKER_REGISTRATION: (0, 4),
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
    # KIP-853: AddRaftVoter v1 adds AckWhenCommitted (always acked when committed here).
    ApiKey.ADD_RAFT_VOTER: (0, 1),
    ApiKey.REMOVE_RAFT_VOTER: (0, 0),
    ApiKey.UPDATE_RAFT_VOTER: (0, 0),
    ApiKey.BROKER_HEARTBEAT: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.ALTER_PARTITION: (2, 3),
    ApiKey.ELECT_LEADERS: messages.SUPPORTED_VERSIONS[ApiKey.ELECT_LEADERS],
    **{
        key: messages.SUPPORTED_VERSIONS[key]
        for key in (
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
            ApiKey.CREATE_ACLS,
            ApiKey.DELETE_ACLS,
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            ApiKey.ALTER_CONFIGS,
            ApiKey.ALTER_CLIENT_QUOTAS,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            ApiKey.UNREGISTER_BROKER,
            ApiKey.UPDATE_FEATURES,
        )
    },
}


def _allocate_producer_ids_refusal(version: int) -> Any:
    return authorization.cluster_action_refusal(ApiKey.ALLOCATE_PRODUCER_IDS, version)


def _connections_left(server: KafkaServer) -> str:
    return f"{server.open_connections} connection(s) on port {server.port}"


__all__ = ["ErrorCode", "Node", "StartupError", "now_ms"]
