"""The Prometheus endpoint (issue 18): ``metrics.port`` serves ``GET /metrics`` in the text format.

Names are those the Prometheus JMX exporter's usual Kafka rules give Kafka's own metrics
(``kafka_server_brokertopicmetrics_messagesin_total``, ``kafka_network_requestmetrics_totaltimems``,
``kafka_controller_kafkacontroller_activecontrollercount``...), so Kafka dashboards and alerts read a
pykraft node unchanged; what Kafka has no metric for is named ``pykraft_*``. Request times are
Prometheus histograms in milliseconds (the JMX exporter shows Kafka's as percentile gauges).

Why a collector and not live metric objects: almost everything is state the node already keeps
(partitions, ISRs, groups, the raft log, the connection counters of ``io/server.py``), so a scrape reads
it and nothing on the request path changes for it. What must be counted as it happens is counted in
plain ints (``io/request_metrics.py``, ``broker/topic_stats.py``), once per request or per partition of
a request, never per record. Each node has its own ``CollectorRegistry`` (tests run several nodes in one
process), and the endpoint is served by the node's own event loop (``asyncio.start_server``): no thread.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import sys
import time
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from pykraft.coordinator.consumer_group import ConsumerGroupState
from pykraft.coordinator.group_coordinator import GroupState
from pykraft.coordinator.share_group import ShareGroupState
from pykraft.coordinator.share_partition import AcknowledgeType
from pykraft.io.request_metrics import OTHER_VERSION, Histogram, request_name

if TYPE_CHECKING:
    from pykraft.io.node import Node
    from pykraft.io.server import KafkaServer

log = logging.getLogger("pykraft.metrics")

# The event-loop timer: how often it wakes (lag is how late it wakes), and the idle ratio's smoothing
# (an exponentially weighted mean over about ten seconds, as Kafka's idle meters smooth over time).
LOOP_SAMPLE_INTERVAL_S = 0.25
LOOP_IDLE_WINDOW_S = 10.0
LOOP_LAG_BUCKETS_MS: tuple[float, ...] = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)

# A scrape request's line and headers must arrive within this, and fit in the reader's buffer.
SCRAPE_REQUEST_TIMEOUT_S = 10.0
SCRAPE_REQUEST_LIMIT_BYTES = 16 * 1024


class EventLoopMonitor:
    """Lag and idleness of the node's event loop, from a periodic timer.

    The loop is pykraft's network thread and request handler pool in one, so its lag (how late a timer
    due now runs) is the latency every request pays on top of its own work; it also catches a blocking
    call such as an fsync. The idle ratio is Kafka's NetworkProcessorAvgIdlePercent analogue: 1 minus
    the loop thread's CPU time over wall time (a blocking syscall counts as idle here: lag shows it)."""

    def __init__(self) -> None:
        self.lag_ms = Histogram(LOOP_LAG_BUCKETS_MS)
        self.idle_ratio = 1.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="event-loop-monitor")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        alpha = 1 - math.exp(-LOOP_SAMPLE_INTERVAL_S / LOOP_IDLE_WINDOW_S)
        wall_s, cpu_s = loop.time(), time.thread_time()
        while True:
            due_s = loop.time() + LOOP_SAMPLE_INTERVAL_S
            await asyncio.sleep(LOOP_SAMPLE_INTERVAL_S)
            now_s, now_cpu_s = loop.time(), time.thread_time()
            self.lag_ms.observe(max(0.0, now_s - due_s) * 1000)
            if now_s > wall_s:
                idle = min(1.0, max(0.0, 1 - (now_cpu_s - cpu_s) / (now_s - wall_s)))
                self.idle_ratio += alpha * (idle - self.idle_ratio)
            wall_s, cpu_s = now_s, now_cpu_s


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _histogram(family: HistogramMetricFamily, labels: list[str], histogram: Histogram) -> None:
    family.add_metric(labels, histogram.cumulative(), histogram.sum)


def producer_state_bytes(producer_state: object) -> int:
    """Memory of one partition's producer-state columns, hash table and side dicts (their containers,
    as ``sys.getsizeof`` counts them): the state is rows of ``array`` columns (KIP-758), so this is
    close to all of it."""
    try:
        fields = vars(producer_state).values()
    except TypeError:
        return 0
    return sum(sys.getsizeof(v) for v in fields if isinstance(v, array | dict))


# BrokerTopicMetrics counters: (metric name, TopicCounters field, help).
_TOPIC_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("kafka_server_brokertopicmetrics_messagesin", "messages_in", "Records appended by produce requests"),
    ("kafka_server_brokertopicmetrics_bytesin", "bytes_in", "Bytes appended by produce requests"),
    ("kafka_server_brokertopicmetrics_bytesout", "bytes_out", "Record bytes sent in fetch responses"),
    (
        "kafka_server_brokertopicmetrics_totalproducerequests",
        "total_produce_requests",
        "Partitions of produce requests",
    ),
    (
        "kafka_server_brokertopicmetrics_failedproducerequests",
        "failed_produce_requests",
        "Partitions of produce requests answered with an error",
    ),
    (
        "kafka_server_brokertopicmetrics_totalfetchrequests",
        "total_fetch_requests",
        "Partitions of fetch requests",
    ),
    (
        "kafka_server_brokertopicmetrics_failedfetchrequests",
        "failed_fetch_requests",
        "Partitions of fetch requests answered with an error",
    ),
)

_GROUP_STATES: tuple[tuple[str, GroupState], ...] = (
    ("numgroupsstable", GroupState.STABLE),
    ("numgroupspreparingrebalance", GroupState.PREPARING_REBALANCE),
    ("numgroupscompletingrebalance", GroupState.COMPLETING_REBALANCE),
    ("numgroupsempty", GroupState.EMPTY),
    ("numgroupsdead", GroupState.DEAD),
)


# The rate attribute of each quota type's sensor (Kafka's ClientQuotaManager / ClientRequestQuotaManager /
# ControllerMutationQuotaManager metric names).
_QUOTA_RATE_NAMES = {
    "Produce": "byte_rate",
    "Fetch": "byte_rate",
    "Request": "request_time",
    "ControllerMutation": "mutation_rate",
}


class NodeCollector(Collector):
    """Everything one node exports, read from its state at scrape time (on its event loop)."""

    def __init__(self, node: Node, loop_monitor: EventLoopMonitor) -> None:
        self.node = node
        self.loop_monitor = loop_monitor

    def describe(self) -> list[Metric]:
        return []  # names vary with the node's roles; nothing to check against other collectors

    def collect(self) -> Iterator[Metric]:
        node = self.node
        servers = node.listeners.servers
        yield from self._requests(servers)
        yield from self._connections(servers)
        yield from self._event_loop()
        if node.ctx is not None:
            yield from self._broker()
            yield from self._quotas()
        if node.groups is not None:
            yield from self._groups()
        if node.shares is not None:
            yield from self._shares()
        if node.metadata is not None and node.metadata.raft is not None:
            yield from self._metadata()

    # --- the listeners ------------------------------------------------------------------------------

    def _requests(self, servers: list[KafkaServer]) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests received, by API and version",
            labels=["request", "version", "listener"],
        )
        total_time = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Milliseconds from a request read to its response handed to the socket",
            labels=["request", "listener"],
        )
        queue_time = HistogramMetricFamily(
            "kafka_network_requestmetrics_requestqueuetimems",
            "Milliseconds a request waited for a queued.max.requests slot",
            labels=["request", "listener"],
        )
        queue_size = GaugeMetricFamily(
            "kafka_network_requestchannel_requestqueuesize",
            "Requests read and waiting for a queued.max.requests slot",
            labels=["listener"],
        )
        in_progress = GaugeMetricFamily(
            "pykraft_socketserver_requests_in_progress",
            "Requests holding a queued.max.requests slot (read, not answered, not parked)",
            labels=["listener"],
        )
        bound = GaugeMetricFamily(
            "pykraft_socketserver_queued_max_requests",
            "The listener's queued.max.requests",
            labels=["listener"],
        )
        waits = CounterMetricFamily(
            "pykraft_socketserver_request_queue_waits",
            "Requests that waited for a queued.max.requests slot (backpressure, not errors)",
            labels=["listener"],
        )
        for server in servers:
            listener = server.listener_name
            queue_size.add_metric([listener], server.requests_waiting)
            in_progress.add_metric([listener], server.requests_in_progress)
            bound.add_metric([listener], server.queued_max_requests)
            waits.add_metric([listener], server.request_queue_waits)
            metrics = server.request_metrics
            if metrics is None:
                continue
            for api_key, stats in sorted(metrics.by_key.items()):
                name = request_name(api_key)
                for version, count in enumerate(stats.versions):
                    if count:
                        label = "other" if version == OTHER_VERSION else str(version)
                        requests.add_metric([name, label, listener], count)
                _histogram(total_time, [name, listener], stats.total_time_ms)
                _histogram(queue_time, [name, listener], stats.queue_time_ms)
        yield from (requests, total_time, queue_time, queue_size, in_progress, bound, waits)

    def _connections(self, servers: list[KafkaServer]) -> Iterator[Metric]:
        count = GaugeMetricFamily(
            "kafka_server_socketservermetrics_connection_count", "Open connections", labels=["listener"]
        )
        created = CounterMetricFamily(
            "kafka_server_socketservermetrics_connection_creation",
            "Connections accepted within the connection limits",
            labels=["listener"],
        )
        closed = CounterMetricFamily(
            "kafka_server_socketservermetrics_connection_close",
            "Accepted connections that ended",
            labels=["listener"],
        )
        refused = CounterMetricFamily(
            "pykraft_socketserver_connections_refused",
            "Connections closed at once for a connection limit",
            labels=["listener", "limit"],
        )
        idle = CounterMetricFamily(
            "pykraft_socketserver_idle_connections_closed",
            "Connections closed by connections.max.idle.ms",
            labels=["listener"],
        )
        for server in servers:
            listener = server.listener_name
            count.add_metric([listener], server.open_connections)
            created.add_metric([listener], server.accepted_connections)
            closed.add_metric([listener], server.closed_connections)
            refused.add_metric([listener, "max.connections"], server.refused_over_max_connections)
            refused.add_metric(
                [listener, "max.connections.per.ip"], server.refused_over_max_connections_per_ip
            )
            idle.add_metric([listener], server.idle_closed_connections)
        yield from (count, created, closed, refused, idle)

    def _event_loop(self) -> Iterator[Metric]:
        monitor = self.loop_monitor
        yield _gauge(
            "kafka_network_socketserver_networkprocessoravgidlepercent",
            "Fraction of time the event loop (network and request handling) was idle, about 10 s smoothed",
            monitor.idle_ratio,
        )
        lag = HistogramMetricFamily(
            "pykraft_eventloop_lag_ms", "Milliseconds a timer due now waited for the event loop"
        )
        _histogram(lag, [], monitor.lag_ms)
        yield lag

    # --- the broker ---------------------------------------------------------------------------------

    def _quotas(self) -> Iterator[Metric]:
        """Kafka's per quota entity sensors (ClientQuotaManager), as the JMX exporter names
        kafka.server:type=Produce|Fetch|Request|ControllerMutation,user=U,client-id=C: the measured
        rate (byte-rate, request-time in percent, mutation-rate) and the average throttle time in ms over
        the quota window. Clients sharing a quota share a series; none while no quota of the type is set."""
        now = int(time.time() * 1000)
        for manager in self.node.quotas.quotas.managers():
            group = manager.quota_type.group.lower()
            rate_name = _QUOTA_RATE_NAMES[manager.quota_type.group]
            rate = GaugeMetricFamily(
                f"kafka_server_{group}_{rate_name}",
                f"{manager.quota_type.group} quota: measured {rate_name.replace('_', '-')} per user/client-id",
                labels=["user", "client_id"],
            )
            throttle = GaugeMetricFamily(
                f"kafka_server_{group}_throttle_time",
                f"{manager.quota_type.group} quota: average throttle time (ms) per user/client-id",
                labels=["user", "client_id"],
            )
            for (user, client_id), measured, throttle_avg_ms in manager.sensors(now):
                rate.add_metric([user, client_id], measured)
                throttle.add_metric([user, client_id], throttle_avg_ms)
            yield rate
            yield throttle

    def _broker(self) -> Iterator[Metric]:
        node = self.node
        ctx = node.ctx
        assert ctx is not None
        stats = ctx.topic_stats
        stats.retain_topics(ctx.cluster.topics)
        for name, attribute, documentation in _TOPIC_COUNTERS:
            family = CounterMetricFamily(name, documentation, labels=["topic"])
            # The series without a topic label is all topics (Kafka's BrokerTopicMetrics without topic=).
            family.add_metric([], getattr(stats.all_topics, attribute))
            for topic, counters in sorted(stats.topics.items()):
                family.add_metric([topic], getattr(counters, attribute))
            yield family
        yield CounterMetricFamily(
            "kafka_server_brokertopicmetrics_replicationbytesout",
            "Record bytes sent to followers",
            value=stats.replication_bytes_out,
        )
        replicas = node.replicas
        node_id = node.config.node_id
        leaders = under_replicated = under_min_isr = 0
        for view in ctx.cluster.topics.values():
            min_isr: int | None = None
            for p in view.partitions:
                if p.leader_id != node_id:
                    continue
                leaders += 1
                if len(p.isr) < len(p.replicas):
                    under_replicated += 1
                    if min_isr is None:
                        min_isr = ctx.min_insync_replicas(view.name)
                    if len(p.isr) < min_isr:
                        under_min_isr += 1
        yield _gauge(
            "kafka_server_replicamanager_partitioncount", "Partitions hosted here", len(replicas.partitions)
        )
        yield _gauge("kafka_server_replicamanager_leadercount", "Partitions led here", leaders)
        # Kafka's FetchSessionCache gauges: the KIP-227 sessions of the followers fetching from here.
        sessions = node.fetch_sessions
        yield _gauge(
            "kafka_server_fetchsessioncache_numincrementalfetchsessions",
            "Incremental fetch sessions (KIP-227) this broker keeps",
            len(sessions),
        )
        yield _gauge(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "Partitions in those sessions",
            sessions.partitions_cached,
        )
        yield _gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replica set",
            under_replicated,
        )
        yield _gauge(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions led here whose ISR is smaller than min.insync.replicas",
            under_min_isr,
        )
        yield _gauge(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "Log dirs offline after a failed write",
            len(replicas.offline_log_dirs),
        )
        # Kafka's per-dir gauge (LogManager LogDirectoryOffline, tagged logDirectory): 1 while offline.
        per_dir = GaugeMetricFamily(
            "kafka_log_logmanager_logdirectoryoffline",
            "1 while the log dir is offline after a failed write",
            labels=["logDirectory"],
        )
        for log_dir in dict.fromkeys(os.path.abspath(d) for d in node.config.log_dirs):
            per_dir.add_metric([log_dir], 1 if log_dir in replicas.offline_log_dirs else 0)
        yield per_dir
        entries = state_bytes = 0
        for part in replicas.partitions.values():
            if part.opened_producer_state is not None:  # a deferred log's state is not loaded yet
                entries += len(part.opened_producer_state)
                state_bytes += producer_state_bytes(part.opened_producer_state)
        yield _gauge("kafka_server_replicamanager_produceridcount", "Producer-state entries", entries)
        yield _gauge("pykraft_producerstate_memory_bytes", "Memory of the producer-state tables", state_bytes)
        # The log cleaner (issue 17): what its passes did since the node started.
        cleaner = replicas.cleaner_stats
        for name, help_text, value in (
            ("passes", "Cleaning passes run", cleaner.passes),
            ("bytes_read", "Bytes the cleaner read", cleaner.bytes_read),
            ("bytes_written", "Bytes the cleaner wrote back", cleaner.bytes_written),
            ("records_removed", "Records compaction removed", cleaner.records_removed),
        ):
            counter = CounterMetricFamily(f"pykraft_logcleaner_{name}", help_text)
            counter.add_metric([], value)
            yield counter

    def _groups(self) -> Iterator[Metric]:
        groups = self.node.groups
        assert groups is not None
        by_state: dict[GroupState, int] = {}
        offsets = 0
        consumer_groups = groups.coordinator.consumer.groups
        share_groups = groups.coordinator.share.groups
        for group_id, group in groups.coordinator.groups.items():
            offsets += len(group.offsets)
            # A KIP-848 group's committed offsets live in an entry of this table too: not a classic group.
            if group_id not in consumer_groups:
                by_state[group.state] = by_state.get(group.state, 0) + 1
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        yield _gauge(
            prefix + "numgroups",
            "Groups this node coordinates",
            sum(by_state.values()) + len(consumer_groups) + len(share_groups),
        )
        for suffix, state in _GROUP_STATES:
            yield _gauge(prefix + suffix, f"Groups in state {state.value}", by_state.get(state, 0))
        yield _gauge(prefix + "numoffsets", "Committed offsets of the groups this node coordinates", offsets)
        # Kafka 4's group coordinator metrics: groups by protocol, KIP-848 groups by state.
        by_protocol = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_group_count",
            "Groups this node coordinates, by protocol",
            labels=["protocol"],
        )
        by_protocol.add_metric(["classic"], sum(by_state.values()))
        by_protocol.add_metric(["consumer"], len(consumer_groups))
        by_protocol.add_metric(["share"], len(share_groups))
        yield by_protocol
        consumer_by_state = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_consumer_group_count",
            "KIP-848 consumer groups this node coordinates, by state",
            labels=["state"],
        )
        for consumer_state in ConsumerGroupState:
            consumer_by_state.add_metric(
                [consumer_state.value.lower()],
                sum(1 for group in consumer_groups.values() if group.state() is consumer_state),
            )
        yield consumer_by_state
        # KIP-932 share groups by state (Kafka's share-group-count).
        share_by_state = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_share_group_count",
            "KIP-932 share groups this node coordinates, by state",
            labels=["state"],
        )
        for share_state in (ShareGroupState.EMPTY, ShareGroupState.STABLE):
            share_by_state.add_metric(
                [share_state.value.lower()],
                sum(1 for group in share_groups.values() if group.state() is share_state),
            )
        yield share_by_state

    def _shares(self) -> Iterator[Metric]:
        shares = self.node.shares
        assert shares is not None
        # Kafka's kafka.server:type=ShareGroupMetrics,name=RecordAcknowledgementsPerSec,ackType=...
        acknowledged = CounterMetricFamily(
            "kafka_server_sharegroupmetrics_recordacknowledgements",
            "Records acknowledged on the share partitions this node leads, by acknowledgement type",
            labels=["acktype"],
        )
        for ack_type in (
            AcknowledgeType.ACCEPT,
            AcknowledgeType.RELEASE,
            AcknowledgeType.REJECT,
            AcknowledgeType.RENEW,
        ):
            acknowledged.add_metric(
                [ack_type.name.capitalize()], shares.manager.acknowledged_records[ack_type]
            )
        yield acknowledged

    # --- the metadata log and the controller --------------------------------------------------------

    def _metadata(self) -> Iterator[Metric]:
        node = self.node
        metadata = node.metadata
        assert metadata is not None and metadata.raft is not None
        raft = metadata.raft
        log_end = metadata.raft_log.end_offset if metadata.raft_log is not None else 0
        yield _gauge("kafka_server_raftmetrics_log_end_offset", "Metadata log end offset", log_end)
        yield _gauge(
            "kafka_server_raftmetrics_high_watermark", "Metadata log high watermark", raft.high_watermark
        )
        yield _gauge("kafka_server_raftmetrics_current_epoch", "Raft epoch this node knows", raft.epoch)
        yield _gauge(
            "kafka_server_raftmetrics_current_leader",
            "Raft leader this node knows (-1: none)",
            raft.leader_id,
        )
        last_applied = metadata.applied_end_offset - 1
        if node.config.is_broker:
            yield _gauge(
                "kafka_server_brokermetadatametrics_last_applied_record_offset",
                "Offset of the last metadata record in this broker's image",
                last_applied,
            )
        snapshots = metadata.snapshots
        if snapshots is not None:
            yield _gauge(
                "kafka_server_snapshotemitter_latestsnapshotgeneratedagems",
                "Milliseconds since this node wrote its latest metadata snapshot (or started)",
                max(0, time.time_ns() // 1_000_000 - snapshots.generated_ms),
            )
            yield _gauge(
                "kafka_server_snapshotemitter_latestsnapshotgeneratedbytes",
                "Size of the latest metadata snapshot this node wrote (0: none yet)",
                snapshots.generated_bytes,
            )
        if not node.config.is_controller:
            return
        active = metadata.is_active
        prefix = "kafka_controller_kafkacontroller_"
        yield _gauge(prefix + "activecontrollercount", "1 on the active controller", 1 if active else 0)
        yield _gauge(
            prefix + "lastappliedrecordoffset", "Offset of the last metadata record applied", last_applied
        )
        # Cluster-wide counts come from the active controller only, as in Kafka (0 elsewhere).
        topics = partitions = offline = 0
        active_brokers = fenced_brokers = 0
        if active:
            image = metadata.image
            for topic in image.topics.topics_by_name.values():
                topics += 1
                for registration in topic.partitions.values():
                    partitions += 1
                    if registration.leader < 0:
                        offline += 1
            for broker in image.cluster.brokers.values():
                if broker.fenced:
                    fenced_brokers += 1
                else:
                    active_brokers += 1
        yield _gauge(prefix + "offlinepartitionscount", "Partitions without a leader", offline)
        yield _gauge(prefix + "globaltopiccount", "Topics in the cluster", topics)
        yield _gauge(prefix + "globalpartitioncount", "Partitions in the cluster", partitions)
        yield _gauge(prefix + "activebrokercount", "Registered, unfenced brokers", active_brokers)
        yield _gauge(prefix + "fencedbrokercount", "Registered, fenced brokers", fenced_brokers)


def node_registry(node: Node, loop_monitor: EventLoopMonitor) -> CollectorRegistry:
    """A registry of its own for one node: its collector, and the process's CPU, memory and GC
    (shared by the nodes of one test process, which is what they measure)."""
    registry = CollectorRegistry()
    registry.register(NodeCollector(node, loop_monitor))
    ProcessCollector(registry=registry)
    GCCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


class MetricsServer:
    """``GET /metrics`` (or ``/``) over HTTP/1.1 on the node's event loop, one response per
    connection. Scraping runs the collector on the loop, which is what makes its reads consistent."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, limit=SCRAPE_REQUEST_LIMIT_BYTES
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            async with asyncio.timeout(SCRAPE_REQUEST_TIMEOUT_S):
                request_line = await reader.readline()
                while (await reader.readline()).strip():
                    pass  # headers: nothing in them changes the answer
            parts = request_line.decode("latin-1").split()
            method, path = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
            if not method:
                status, content_type, body = "400 Bad Request", "text/plain", b"GET /metrics\n"
            elif method not in ("GET", "HEAD"):
                status, content_type, body = "405 Method Not Allowed", "text/plain", b"GET /metrics\n"
            elif path.split("?", 1)[0] not in ("/metrics", "/"):
                status, content_type, body = "404 Not Found", "text/plain", b"GET /metrics\n"
            else:
                status, content_type, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.registry)
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            ).encode("latin-1")
            writer.write(head if method == "HEAD" else head + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, ValueError, asyncio.IncompleteReadError):
            pass  # a client that sent nothing useful, too slowly, or went away: nothing to answer
        except asyncio.CancelledError:
            pass
        except Exception:  # a bug in a collector: logged, the next scrape tries again
            log.exception("metrics scrape failed")
        finally:
            self._connections.discard(task)
            writer.close()
