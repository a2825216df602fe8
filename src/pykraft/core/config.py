"""Node configuration from a Kafka-style ``server.properties`` (Kafka's own property names).

Pure: it parses text handed to it by the shell. Properties pykraft does not use are returned as
``ignored`` so the shell logs them once; a malformed value of a property it uses raises
:class:`ConfigError` with one line naming the key and the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

DEFAULT_PROPERTIES: Final[str] = """\
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
advertised.listeners=PLAINTEXT://127.0.0.1:9092
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=./data
"""


class ConfigError(ValueError):
    """One line naming the property, the bad value and what is expected."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener_name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class SslConfig:
    """The ssl.* properties of SSL listeners, Kafka's names; PEM files only (ssl.keystore.type=PEM)."""

    keystore_location: str | None = None  # ssl.keystore.location: certificate chain and private key
    key_password: str | None = None  # ssl.key.password: of an encrypted private key
    truststore_location: str | None = None  # ssl.truststore.location: CA certificates for clients
    client_auth: str = "none"  # ssl.client.auth: none | requested | required
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")  # ssl.enabled.protocols

    def __repr__(self) -> str:
        # Secrets never reach a log line.
        password = "[hidden]" if self.key_password else None
        return (
            f"SslConfig(keystore_location={self.keystore_location!r}, key_password={password!r}, "
            f"truststore_location={self.truststore_location!r}, client_auth={self.client_auth!r}, "
            f"enabled_protocols={self.enabled_protocols!r})"
        )


@dataclass(frozen=True, slots=True)
class SaslConfig:
    """What one SASL listener serves: its mechanisms (``listener.name.<l>.sasl.enabled.mechanisms``,
    else ``sasl.enabled.mechanisms``) and its PLAIN users' JAAS text
    (``listener.name.<listener>.plain.sasl.jaas.config``, else ``sasl.jaas.config``)."""

    enabled_mechanisms: tuple[str, ...] = ("PLAIN",)
    plain_jaas_config: str | None = None
    # The key it came from, for error messages.
    plain_jaas_key: str = ""
    # KIP-368 ``connections.max.reauth.ms`` (listener-prefixed or not): a session lasts this long,
    # then the client re-authenticates or its next request closes the connection (0: no expiry).
    max_reauth_ms: int = 0

    def __repr__(self) -> str:
        # The JAAS text holds passwords: never in a log line.
        jaas = "[hidden]" if self.plain_jaas_config else None
        return f"SaslConfig(enabled_mechanisms={self.enabled_mechanisms!r}, plain_jaas_config={jaas!r})"


@dataclass(frozen=True, slots=True)
class InterNodeSecurity:
    """How this node connects to another node's listener (issue 16): the listener's security protocol,
    the SASL mechanism Kafka names for it (``sasl.mechanism.controller.protocol`` for the controller
    listener, ``sasl.mechanism.inter.broker.protocol`` for brokers' listener) and this node's own
    credentials: the ``username``/``password`` options of that listener's JAAS configuration, as
    Kafka's login modules take them for the connections a node opens itself."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    # The listener of the other nodes this is for (its ssl.* settings are the ones to trust).
    listener_name: str = ""

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def __repr__(self) -> str:
        password = "[hidden]" if self.password else None
        return (
            f"InterNodeSecurity({self.security_protocol}, {self.sasl_mechanism}, user={self.username!r}, "
            f"password={password!r})"
        )


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    """``authorizer.class.name`` (Kafka's StandardAuthorizer, or none), ``super.users`` and
    ``allow.everyone.if.no.acl.found``."""

    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


# The names ``authorizer.class.name`` accepts for the one authorizer pykraft has (Kafka's class name).
STANDARD_AUTHORIZER_NAMES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer", "StandardAuthorizer")


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: int
    process_roles: tuple[str, ...]
    listeners: tuple[Endpoint, ...]
    advertised_listeners: tuple[Endpoint, ...]
    controller_listener_names: tuple[str, ...]
    controller_quorum_voters: dict[int, tuple[str, int]]
    listener_security_protocol_map: dict[str, str]
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    log_segment_bytes: int = 1073741824
    log_retention_ms: int = 604800000
    # log.retention.hours as set (168 by default) and log.retention.ms as set (None: unset), which Kafka
    # describes as they are, beside the retention they yield
    log_retention_hours: int = 168
    log_retention_ms_property: int | None = None
    log_retention_bytes: int = -1
    log_retention_check_interval_ms: int = 300000
    # Log compaction (issue 17): the broker's defaults of cleanup.policy, min.cleanable.dirty.ratio,
    # delete.retention.ms and min.compaction.lag.ms, and the cleaner's own settings.
    log_cleanup_policy: tuple[str, ...] = ("delete",)
    log_cleaner_enable: bool = True
    log_cleaner_dedupe_buffer_size: int = 134217728
    log_cleaner_io_buffer_size: int = 524288
    log_cleaner_backoff_ms: int = 15000
    log_cleaner_min_cleanable_ratio: float = 0.5
    log_cleaner_delete_retention_ms: int = 86400000
    log_cleaner_min_compaction_lag_ms: int = 0
    # Segment files a node keeps open at once across all its partitions (issue 29; not a Kafka
    # config: Kafka keeps every segment open). -1: half of the soft RLIMIT_NOFILE read at start-up.
    log_open_files_max: int = -1
    # Threads per log dir that flush and close the logs at a clean shutdown (Kafka's LogManager.shutdown
    # runs its close jobs on this many per dir; Kafka 4's default, KIP-1030). pykraft recovers at start
    # on the event loop, so only the shutdown uses them.
    num_recovery_threads_per_data_dir: int = 2
    # segment.bytes of __consumer_offsets and __transaction_state (compacted internal topics).
    offsets_topic_segment_bytes: int = 104857600
    transaction_state_log_segment_bytes: int = 104857600
    socket_request_max_bytes: int = 104857600
    # The largest frame a SASL listener takes before the connection has authenticated (Kafka's
    # SaslServerAuthenticator reads with this limit), so an unauthenticated client cannot make it
    # buffer socket.request.max.bytes.
    sasl_server_max_receive_size: int = 524288
    message_max_bytes: int = 1048588
    # The broker's compression.type and KIP-390 levels: the defaults of the topic configs of those names.
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    producer_id_expiration_ms: int = 86400000
    # KIP-758 producer state (issue 5): 1 batch + a duplicate window; 5 = Kafka's classic mode.
    producer_state_retained_batches: int = 1
    max_in_flight_sequence_number_per_connection: int = 10000000
    producer_id_expiration_check_interval_ms: int = 600000
    # KIP-630 metadata snapshots and metadata-log cleaning (kafka-facts §4.5).
    metadata_log_max_record_bytes_between_snapshots: int = 20971520
    metadata_log_max_snapshot_interval_ms: int = 3600000
    metadata_max_retention_bytes: int = 104857600
    metadata_max_retention_ms: int = 604800000
    metadata_log_segment_bytes: int = 1073741824
    # Classic consumer groups (issue 7).
    offsets_topic_num_partitions: int = 50
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    # KIP-848 consumer groups (issue 19), Kafka's group.consumer.* names and defaults.
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_session_timeout_ms: int = 45000
    # The bounds a group's own consumer.session.timeout.ms / consumer.heartbeat.interval.ms (group
    # configs, KIP-848) must keep to (Kafka GroupConfig.validate).
    group_consumer_min_session_timeout_ms: int = 45000
    group_consumer_max_session_timeout_ms: int = 60000
    group_consumer_min_heartbeat_interval_ms: int = 5000
    group_consumer_max_heartbeat_interval_ms: int = 15000
    group_consumer_max_size: int = 2**31 - 1
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    # KIP-848 online migration between classic and consumer groups (Kafka 4's default).
    group_consumer_migration_policy: str = "bidirectional"
    # Share groups (KIP-932, issue 31), Kafka 4.2's group.share.* names and defaults (ShareGroupConfig).
    group_share_session_timeout_ms: int = 45000
    group_share_min_session_timeout_ms: int = 45000
    group_share_max_session_timeout_ms: int = 60000
    group_share_heartbeat_interval_ms: int = 5000
    group_share_min_heartbeat_interval_ms: int = 5000
    group_share_max_heartbeat_interval_ms: int = 15000
    group_share_max_size: int = 200
    group_share_record_lock_duration_ms: int = 30000
    group_share_min_record_lock_duration_ms: int = 15000
    group_share_max_record_lock_duration_ms: int = 60000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2000
    # The share coordinator's __share_group_state (KIP-932), Kafka's share.coordinator.state.topic.*.
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_replication_factor: int = 3
    share_coordinator_state_topic_segment_bytes: int = 104857600
    # KRaft quorum timeouts, Kafka's names and defaults (QuorumConfig; kafka-facts §7.3).
    controller_quorum_election_timeout_ms: int = 1000
    controller_quorum_fetch_timeout_ms: int = 2000
    controller_quorum_election_backoff_max_ms: int = 1000
    controller_quorum_request_timeout_ms: int = 2000
    controller_quorum_retry_backoff_ms: int = 20
    controller_quorum_append_linger_ms: int = 25
    controller_quorum_bootstrap_servers: tuple[tuple[str, int], ...] = ()
    # KIP-631 broker sessions: fenced when no heartbeat came for this long.
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    # Partition replication (issue 14), Kafka's names and defaults.
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_backoff_ms: int = 1000
    unclean_leader_election_enable: bool = False
    # Leader balance (issue 30): the controller moves leadership back to preferred replicas.
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    # Racks (KIP-36, KIP-392): broker.rack goes into the broker's registration (rack-aware placement,
    # Metadata's rack); replica.selector.class set to RackAwareReplicaSelector lets a consumer that names
    # its client.rack read from an in-sync replica of that rack (None: the leader only, Kafka's default).
    broker_rack: str | None = None
    replica_selector_class: str | None = None
    offsets_topic_replication_factor: int = 3
    # Transactions (issue 15), Kafka's names and defaults (TransactionStateManagerConfig, TransactionLogConfig).
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    # TLS on SSL and SASL_SSL listeners, SASL on SASL_* listeners (issue 16).
    ssl: SslConfig = field(default_factory=lambda: SslConfig())
    # Each TLS listener's settings (listener.name.<l>.ssl.* over ssl.*), by listener name.
    listener_ssl: dict[str, SslConfig] = field(default_factory=dict)
    # The SASL listeners by name (client and controller listener alike).
    listener_sasl: dict[str, SaslConfig] = field(default_factory=dict)
    # This node's side of connections to the controllers (raft, registration, heartbeats,
    # AllocateProducerIds) and to other brokers (replica fetch, transaction markers).
    controller_client: InterNodeSecurity = field(default_factory=lambda: InterNodeSecurity())
    inter_broker_client: InterNodeSecurity = field(default_factory=lambda: InterNodeSecurity())
    authorizer: AuthorizerSettings = field(default_factory=lambda: AuthorizerSettings())
    # Connection limits (issue 18), Kafka's names and defaults: max.connections is broker-wide (all
    # client listeners together) and each listener's own limit (listener.name.<l>.max.connections,
    # else max.connections), as in Kafka's ConnectionQuotas.
    max_connections: int = 2**31 - 1
    listener_max_connections: dict[str, int] = field(default_factory=dict)
    max_connections_per_ip: int = 2**31 - 1
    max_connections_per_ip_overrides: dict[str, int] = field(default_factory=dict)
    connections_max_idle_ms: int = 600000
    # Kafka's queued.max.requests: requests read and not yet answered per listener (timed waits such as a
    # long-polling Fetch or an acks=all produce give their slot back, as Kafka's purgatory does).
    queued_max_requests: int = 500
    # Client quotas (KIP-13/KIP-546): rates are measured over quota.window.num samples of
    # quota.window.size.seconds each (Kafka's ClientQuotaManagerConfig, defaults 11 and 1).
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    # The Prometheus endpoint (pykraft's own keys): -1 = off; bound on metrics.host.
    metrics_port: int = -1
    metrics_host: str = "127.0.0.1"
    # KIP-835: the active controller writes a NoOpRecord when the log was idle this long (0 = never).
    metadata_max_idle_interval_ms: int = 500
    ignored: tuple[str, ...] = field(default=())

    @property
    def controller_listener(self) -> Endpoint | None:
        """The first listener named in controller.listener.names (None on a broker-only node)."""
        for endpoint in self.listeners:
            if endpoint.listener_name in self.controller_listener_names:
                return endpoint
        return None

    def sasl_for(self, listener_name: str) -> SaslConfig | None:
        """The SASL settings of a listener, None when it does not use SASL."""
        return self.listener_sasl.get(listener_name)

    def ssl_for(self, listener_name: str) -> SslConfig:
        """The TLS settings of a listener, served or connected to (``ssl.*`` when it has none of its own)."""
        return self.listener_ssl.get(listener_name, self.ssl)

    def security_protocol_of(self, listener_name: str) -> str:
        return self.listener_security_protocol_map.get(listener_name, "PLAINTEXT")

    @property
    def dynamic_quorum(self) -> bool:
        """KIP-853: no static ``controller.quorum.voters``; the voter set is in the metadata log and the
        leader is found through ``controller.quorum.bootstrap.servers`` (QuorumConfig)."""
        return not self.controller_quorum_voters

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    @property
    def client_listeners(self) -> tuple[Endpoint, ...]:
        """Every listener that is not a controller listener: a broker serves each of them (issue 27)."""
        return tuple(e for e in self.listeners if e.listener_name not in self.controller_listener_names)

    @property
    def client_listener(self) -> Endpoint:
        """The first client listener (the address a test or a log line names the node by)."""
        for endpoint in self.client_listeners:
            return endpoint
        raise ConfigError("listeners: no listener for clients (all are in controller.listener.names)")

    @property
    def inter_broker_listener_name(self) -> str:
        """The listener brokers use to reach each other (replica fetch, transaction markers)."""
        return self.inter_broker_client.listener_name

    def max_connections_of(self, listener_name: str) -> int:
        """The listener's own limit: listener.name.<l>.max.connections, else max.connections."""
        return self.listener_max_connections.get(listener_name, self.max_connections)

    def advertised_for(self, listener_name: str) -> Endpoint:
        for endpoint in self.advertised_listeners:
            if endpoint.listener_name == listener_name:
                return endpoint
        for endpoint in self.listeners:
            if endpoint.listener_name == listener_name:
                return endpoint
        raise ConfigError(f"advertised.listeners: no endpoint for listener {listener_name}")


def parse_properties(text: str) -> dict[str, str]:
    """Java properties, the subset Kafka's sample files use: ``key=value`` or ``key: value``,
    ``#``/``!`` comments, trailing-backslash continuations."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line = pending + line
        pending = ""
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            key, value = line.strip(), ""
        else:
            key, value = line[:sep].strip(), line[sep + 1 :].strip()
        props[key] = value
    return props


def _int(props: dict[str, str], key: str, default: int, minimum: int | None = None) -> int:
    raw = props.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{key}: {raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{key}: {value} is below the minimum {minimum}")
    return value


def _open_files_max(props: dict[str, str]) -> int:
    """log.open.files.max: -1 (derived from RLIMIT_NOFILE by the shell) or at least 1."""
    value = _int(props, "log.open.files.max", -1, minimum=-1)
    if value == 0:
        raise ConfigError("log.open.files.max: 0: must be -1 (half the open-file limit) or at least 1")
    return value


def _migration_policy(props: dict[str, str]) -> str:
    """group.consumer.migration.policy: Kafka's ConsumerGroupMigrationPolicy values (case-insensitive)."""
    raw = (props.get("group.consumer.migration.policy") or "bidirectional").strip().lower()
    if raw not in ("disabled", "upgrade", "downgrade", "bidirectional"):
        raise ConfigError(
            f"group.consumer.migration.policy: {raw!r}: not one of disabled, upgrade, downgrade, bidirectional"
        )
    return raw


def _consumer_assignors(props: dict[str, str]) -> tuple[str, ...]:
    """group.consumer.assignors: a list of uniform/range (Kafka also takes class names; their simple
    names UniformAssignor/RangeAssignor are understood), the first being the default (KIP-848)."""
    raw = props.get("group.consumer.assignors", "")
    known = {"uniform": "uniform", "range": "range", "uniformassignor": "uniform", "rangeassignor": "range"}
    names = []
    for item in (x.strip() for x in raw.split(",")):
        if not item:
            continue
        name = known.get(item.rsplit(".", 1)[-1].lower())
        if name is None:
            raise ConfigError(f"group.consumer.assignors: {item!r} is not uniform or range")
        names.append(name)
    return tuple(dict.fromkeys(names)) or ("uniform", "range")


def _ratio(props: dict[str, str], key: str, default: float) -> float:
    raw = props.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{key}: {raw!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{key}: {value} is not between 0 and 1")
    return value


_COMPRESSION_PROPERTIES = (
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
)


def _compression(props: dict[str, str]) -> dict[str, str]:
    """compression.type and its levels as the broker's defaults, checked as the topic configs of the
    same names are (Kafka's ServerTopicConfigSynonyms: they share their names and validators)."""
    from pykraft.core.topic_configs import check_topic_config  # that module imports this one

    values = {}
    for name in _COMPRESSION_PROPERTIES:
        raw = (props.get(name) or "").strip()
        if raw:
            problem = check_topic_config(name, raw)
            if problem is not None:
                raise ConfigError(f"{name}: {problem}")
            values[name] = raw
    return values


def _cleanup_policy(props: dict[str, str]) -> tuple[str, ...]:
    raw = props.get("log.cleanup.policy") or "delete"
    policies = tuple(word.strip() for word in raw.split(",") if word.strip())
    if not policies or any(policy not in ("delete", "compact") for policy in policies):
        raise ConfigError(f"log.cleanup.policy: {raw!r} is not a list of delete and compact")
    return policies


def _bool(props: dict[str, str], key: str, default: bool) -> bool:
    raw = props.get(key)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigError(f"{key}: {raw!r} is not true or false")
    return lowered == "true"


def _endpoints(key: str, raw: str) -> tuple[Endpoint, ...]:
    endpoints: list[Endpoint] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        if not sep or not name:
            raise ConfigError(f"{key}: {item!r} is not LISTENER_NAME://host:port")
        host, colon, port_text = rest.rpartition(":")
        if not colon:
            raise ConfigError(f"{key}: {item!r} has no port")
        try:
            port = int(port_text)
        except ValueError:
            raise ConfigError(f"{key}: {item!r} has a port that is not a number") from None
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: {item!r} has a port outside 0-65535")
        host = host.strip("[]")
        endpoints.append(Endpoint(name.upper(), host or "0.0.0.0", port))
    return tuple(endpoints)


# KIP-392: the one ReplicaSelector Kafka ships (org.apache.kafka.common.replica.RackAwareReplicaSelector).
RACK_AWARE_REPLICA_SELECTOR: Final = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def _replica_selector_class(props: dict[str, str]) -> str | None:
    """replica.selector.class: unset (the leader serves every consumer) or Kafka's RackAwareReplicaSelector;
    a class pykraft cannot run is named rather than ignored."""
    value = props.get("replica.selector.class", "").strip()
    if not value:
        return None
    if value != RACK_AWARE_REPLICA_SELECTOR:
        raise ConfigError(
            f"replica.selector.class: {value!r} is not supported (only {RACK_AWARE_REPLICA_SELECTOR})"
        )
    return value


def _voters(raw: str) -> dict[int, tuple[str, int]]:
    voters: dict[int, tuple[str, int]] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        node, sep, address = item.partition("@")
        host, colon, port_text = address.rpartition(":")
        try:
            voters[int(node)] = (host.strip("[]"), int(port_text))
        except ValueError:
            raise ConfigError(f"controller.quorum.voters: {item!r} is not id@host:port") from None
        if not sep or not colon:
            raise ConfigError(f"controller.quorum.voters: {item!r} is not id@host:port")
    return voters


# The ssl.* keys a listener.name.<listener>. prefix may carry.
_LISTENER_SSL_KEYS = frozenset(
    {
        "ssl.keystore.location",
        "ssl.keystore.type",
        "ssl.key.password",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.client.auth",
        "ssl.enabled.protocols",
    }
)

# Properties pykraft reads. Anything else in the file is logged once as ignored.
USED_PROPERTIES: Final[frozenset[str]] = frozenset(
    {
        "node.id",
        "broker.id",
        "process.roles",
        "listeners",
        "advertised.listeners",
        "controller.listener.names",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "controller.quorum.election.timeout.ms",
        "controller.quorum.fetch.timeout.ms",
        "controller.quorum.election.backoff.max.ms",
        "controller.quorum.request.timeout.ms",
        "controller.quorum.retry.backoff.ms",
        "controller.quorum.append.linger.ms",
        "metadata.max.idle.interval.ms",
        "broker.session.timeout.ms",
        "broker.heartbeat.interval.ms",
        "min.insync.replicas",
        "replica.lag.time.max.ms",
        "replica.fetch.wait.max.ms",
        "replica.fetch.max.bytes",
        "replica.fetch.backoff.ms",
        "unclean.leader.election.enable",
        "auto.leader.rebalance.enable",
        "leader.imbalance.check.interval.seconds",
        "leader.imbalance.per.broker.percentage",
        "broker.rack",
        "replica.selector.class",
        "offsets.topic.replication.factor",
        "sasl.enabled.mechanisms",
        "connections.max.reauth.ms",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "connections.max.idle.ms",
        "queued.max.requests",
        "quota.window.num",
        "quota.window.size.seconds",
        "metrics.port",
        "metrics.host",
        "authorizer.class.name",
        "super.users",
        "allow.everyone.if.no.acl.found",
        "sasl.jaas.config",
        *_LISTENER_SSL_KEYS,
        "transaction.state.log.num.partitions",
        "transaction.state.log.replication.factor",
        "transaction.max.timeout.ms",
        "transactional.id.expiration.ms",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "sasl.mechanism.controller.protocol",
        "sasl.mechanism.inter.broker.protocol",
        "log.dirs",
        "log.dir",
        "metadata.log.dir",
        "num.partitions",
        "default.replication.factor",
        "auto.create.topics.enable",
        "log.segment.bytes",
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
        "log.retention.bytes",
        "log.retention.check.interval.ms",
        "socket.request.max.bytes",
        "sasl.server.max.receive.size",
        "message.max.bytes",
        "producer.id.expiration.ms",
        "producer.state.retained.batches",
        "max.in.flight.sequence.number.per.connection",
        "producer.id.expiration.check.interval.ms",
        "metadata.log.max.record.bytes.between.snapshots",
        "metadata.log.max.snapshot.interval.ms",
        "metadata.max.retention.bytes",
        "metadata.max.retention.ms",
        "metadata.log.segment.bytes",
        "offsets.topic.num.partitions",
        "offsets.topic.segment.bytes",
        "transaction.state.log.segment.bytes",
        "log.cleanup.policy",
        *_COMPRESSION_PROPERTIES,
        "log.cleaner.enable",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.size",
        "log.cleaner.backoff.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.open.files.max",
        "num.recovery.threads.per.data.dir",
        "group.min.session.timeout.ms",
        "group.max.session.timeout.ms",
        "group.initial.rebalance.delay.ms",
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
        "group.consumer.max.size",
        "group.consumer.assignors",
        "group.consumer.migration.policy",
    }
)


_TLS_PROTOCOLS = ("TLSv1.2", "TLSv1.3")


_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _per_ip_overrides(raw: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: ``host:count`` pairs, comma-separated (Kafka's format)."""
    overrides: dict[str, int] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.isdigit():
            raise ConfigError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        overrides[host.strip("[]")] = int(count)
    return overrides


def _authorizer_settings(props: dict[str, str]) -> AuthorizerSettings:
    name = props.get("authorizer.class.name", "").strip()
    if not name:
        return AuthorizerSettings()
    if name not in STANDARD_AUTHORIZER_NAMES:
        raise ConfigError(
            f"authorizer.class.name: {name} is not supported (pykraft has {STANDARD_AUTHORIZER_NAMES[0]})"
        )
    super_users = frozenset(u.strip() for u in props.get("super.users", "").split(";") if u.strip())
    for user in super_users:
        kind, sep, user_name = user.partition(":")
        if not sep or not kind or not user_name:
            raise ConfigError(f"super.users: {user!r} is not a principal (Type:name, e.g. User:admin)")
    return AuthorizerSettings(True, super_users, _bool(props, "allow.everyone.if.no.acl.found", False))


def _listener_sasl(
    props: dict[str, str],
    listeners: tuple[Endpoint, ...],
    protocol_map: dict[str, str],
    controller_names: tuple[str, ...],
) -> dict[str, SaslConfig]:
    """Each SASL listener's mechanisms and PLAIN users; Kafka's listener-prefixed keys win."""
    result: dict[str, SaslConfig] = {}
    for endpoint in listeners:
        name = endpoint.listener_name
        if not protocol_map.get(name, "").startswith("SASL_"):
            continue
        prefix = f"listener.name.{name.lower()}."
        mechanisms_key = prefix + "sasl.enabled.mechanisms"
        if mechanisms_key not in props:
            mechanisms_key = "sasl.enabled.mechanisms"
        mechanisms = tuple(
            m.strip().upper() for m in props.get(mechanisms_key, "PLAIN").split(",") if m.strip()
        )
        for mechanism in mechanisms:
            if mechanism not in _SASL_MECHANISMS:
                raise ConfigError(
                    f"{mechanisms_key}: {mechanism} is not supported (pykraft serves {', '.join(_SASL_MECHANISMS)})"
                )
            if name in controller_names and mechanism != "PLAIN":
                # As in Kafka: SCRAM credentials live in the metadata log, which a controller cannot
                # read before its quorum is up, so the controller listener authenticates with PLAIN.
                raise ConfigError(
                    f"{mechanisms_key}: {mechanism} on the controller listener {name}; KRaft controllers "
                    "serve PLAIN there (SCRAM credentials live in the metadata log)"
                )
        if not mechanisms:
            raise ConfigError(f"{mechanisms_key}: empty, but listener {name} uses SASL")
        reauth_key = prefix + "connections.max.reauth.ms"
        max_reauth_ms = _int(props, reauth_key if reauth_key in props else "connections.max.reauth.ms", 0, 0)
        if "PLAIN" not in mechanisms:
            # SCRAM only: the credentials are in the metadata log, no JAAS users needed.
            result[name] = SaslConfig(mechanisms, max_reauth_ms=max_reauth_ms)
            continue
        key = prefix + "plain.sasl.jaas.config"
        jaas = props.get(key)
        if jaas is None and "sasl.jaas.config" in props:
            key, jaas = "sasl.jaas.config", props["sasl.jaas.config"]
        if jaas is None:
            raise ConfigError(f"{key}: required by the SASL listener {name} (PLAIN users)")
        result[name] = SaslConfig(mechanisms, jaas, key, max_reauth_ms)
    return result


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_options(text: str) -> dict[str, str]:
    """The ``name="value"`` options of a JAAS configuration line (Kafka's ``sasl.jaas.config``)."""
    return {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _JAAS_OPTION.findall(text)}


def _inter_node_security(
    props: dict[str, str], listener_name: str, protocol: str, mechanism_key: str, *, needed: bool
) -> InterNodeSecurity:
    """This node's credentials for connections it opens to ``listener_name`` on other nodes."""
    if not protocol.startswith("SASL_"):
        return InterNodeSecurity(protocol, listener_name=listener_name)
    mechanism = props.get(mechanism_key, "PLAIN").strip().upper()
    if mechanism not in _SASL_MECHANISMS:
        raise ConfigError(
            f"{mechanism_key}: {mechanism} is not supported (pykraft uses {', '.join(_SASL_MECHANISMS)})"
        )
    key = f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    jaas = props.get(key)
    if jaas is None and "sasl.jaas.config" in props:
        key, jaas = "sasl.jaas.config", props["sasl.jaas.config"]
    options = jaas_options(jaas or "")
    username, password = options.get("username"), options.get("password")
    if needed and (not username or password is None):
        raise ConfigError(
            f'{key}: needs username="..." password="..." (this node\'s own {mechanism} credentials '
            f"for the {listener_name} listener of other nodes)"
        )
    return InterNodeSecurity(protocol, mechanism, username, password, listener_name)


def _ssl_settings(props: dict[str, str], listener: str | None, *, uses_ssl: bool) -> SslConfig:
    """The ssl.* properties (Kafka's names) of one listener: ``listener.name.<listener>.ssl.*`` wins
    over ``ssl.*``, as in Kafka. Checked when the listener uses TLS."""

    def key_of(name: str) -> str:
        prefixed = f"listener.name.{listener.lower()}.{name}" if listener else name
        return prefixed if prefixed in props else name

    for name in ("ssl.keystore.type", "ssl.truststore.type"):
        key = key_of(name)
        kind = props.get(key, "PEM").strip().upper()
        if kind != "PEM":
            raise ConfigError(f"{key}: {kind} is not supported; use PEM files")
    client_auth_key = key_of("ssl.client.auth")
    client_auth = props.get(client_auth_key, "none").strip().lower()
    if client_auth not in ("none", "requested", "required"):
        raise ConfigError(f"{client_auth_key}: {client_auth!r} is not none, requested or required")
    protocols_key = key_of("ssl.enabled.protocols")
    protocols = tuple(
        p.strip() for p in props.get(protocols_key, ",".join(_TLS_PROTOCOLS)).split(",") if p.strip()
    )
    for protocol in protocols:
        if protocol not in _TLS_PROTOCOLS:
            raise ConfigError(f"{protocols_key}: {protocol!r} is not one of {', '.join(_TLS_PROTOCOLS)}")
    keystore = props.get(key_of("ssl.keystore.location")) or None
    truststore_key = key_of("ssl.truststore.location")
    truststore = props.get(truststore_key) or None
    if uses_ssl and keystore is None:
        raise ConfigError(
            f"{key_of('ssl.keystore.location')}: required by the SSL listener {listener} "
            "(a PEM file: certificate chain and key)"
        )
    if uses_ssl and client_auth != "none" and truststore is None:
        raise ConfigError(f"{truststore_key}: required with ssl.client.auth={client_auth}")
    return SslConfig(
        keystore, props.get(key_of("ssl.key.password")) or None, truststore, client_auth, protocols
    )


def _inter_broker_listener(
    props: dict[str, str], client_listeners: list[str], protocol_map: dict[str, str]
) -> str:
    """The listener brokers reach each other on, as Kafka's KafkaConfig.getInterBrokerListenerNameAndSecurityProtocol
    picks it: ``inter.broker.listener.name``, else the listener named after ``security.inter.broker.protocol``
    (default PLAINTEXT; ListenerName.forSecurityProtocol). Only one of the two may be set. pykraft is
    lenient where Kafka would refuse: with neither set, a broker whose one client listener has another
    name uses it; with the protocol set, a listener of another name using that protocol, when it is the
    only one, is the inter-broker listener."""
    named = props.get("inter.broker.listener.name", "").strip().upper()
    wanted = props.get("security.inter.broker.protocol", "").strip().upper()
    if named and wanted:
        raise ConfigError(
            "inter.broker.listener.name: set together with security.inter.broker.protocol; set only one of them"
        )
    if not client_listeners:
        return named or wanted or "PLAINTEXT"
    if named:
        if named not in client_listeners:
            raise ConfigError(
                f"inter.broker.listener.name: {named} is not one of the listeners {', '.join(client_listeners)}"
            )
        return named
    protocol = wanted or "PLAINTEXT"
    if protocol in client_listeners:
        return protocol
    using = [name for name in client_listeners if protocol_map.get(name) == protocol]
    if len(using) == 1:
        return using[0]
    if not wanted and len(client_listeners) == 1:
        return client_listeners[0]
    key = "security.inter.broker.protocol" if wanted else "inter.broker.listener.name"
    raise ConfigError(
        f"{key}: no {protocol} listener among {', '.join(client_listeners)} for brokers to reach each other; "
        "set inter.broker.listener.name to one of them"
    )


def load_config(text: str, overrides: dict[str, str] | None = None) -> NodeConfig:
    props = parse_properties(text)
    props.update(overrides or {})

    node_id = _int(props, "node.id", _int(props, "broker.id", -1), minimum=0)
    if "node.id" not in props and "broker.id" not in props:
        raise ConfigError("node.id: missing (KRaft mode needs a node id)")
    roles = tuple(r.strip() for r in props.get("process.roles", "broker,controller").split(",") if r.strip())
    for role in roles:
        if role not in ("broker", "controller"):
            raise ConfigError(f"process.roles: {role!r} is not broker or controller")
    if not roles:
        raise ConfigError("process.roles: empty; use broker, controller or broker,controller")
    listeners = _endpoints("listeners", props.get("listeners", "PLAINTEXT://127.0.0.1:9092"))
    if not listeners:
        raise ConfigError("listeners: empty")
    advertised = _endpoints("advertised.listeners", props.get("advertised.listeners", "")) or listeners
    controller_names = tuple(
        n.strip().upper()
        for n in props.get("controller.listener.names", "CONTROLLER").split(",")
        if n.strip()
    )
    protocol_map: dict[str, str] = {}
    for item in props.get("listener.security.protocol.map", "").split(","):
        if item.strip():
            name, sep, proto = item.strip().partition(":")
            if not sep:
                raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
            protocol_map[name.upper()] = proto.upper()
    for name in controller_names:
        # KRaft: a controller listener missing from the map is PLAINTEXT (KafkaConfig's
        # effectiveListenerSecurityProtocolMap), so Kafka's short sample configs start.
        protocol_map.setdefault(name, "PLAINTEXT")
    for endpoint in listeners:
        # A listener missing from the map is the protocol its name says (PLAINTEXT://, SSL://...).
        proto = protocol_map.setdefault(endpoint.listener_name, endpoint.listener_name)
        if proto == "PLAINTEXT":
            continue
        if proto not in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigError(
                f"listeners: {endpoint.listener_name} uses {proto}; pykraft serves PLAINTEXT, SSL, "
                "SASL_PLAINTEXT and SASL_SSL"
            )
    voters = _voters(props.get("controller.quorum.voters", ""))
    bootstrap_listed = [
        s.strip() for s in props.get("controller.quorum.bootstrap.servers", "").split(",") if s.strip()
    ]
    if not voters and len(bootstrap_listed) == 1 and "controller" in roles:
        # Kafka 4's sample config names no static voters and one bootstrap server: a lone controller
        # is its own single voter, as `kafka-storage format --standalone` would make it (kept static,
        # kraft.version 0, as pykraft always ran it).
        controller_endpoint = next((e for e in listeners if e.listener_name in controller_names), None)
        if controller_endpoint is None:
            raise ConfigError("controller.listener.names: none of them is in listeners")
        voters = {node_id: (controller_endpoint.host, controller_endpoint.port)}
    if not voters and not bootstrap_listed:
        raise ConfigError(
            "controller.quorum.voters: empty; list the controllers as id@host:port "
            "(or set controller.quorum.bootstrap.servers for a dynamic quorum, KIP-853)"
        )
    if voters and "controller" in roles and node_id not in voters:
        raise ConfigError(
            f"controller.quorum.voters: node.id {node_id} has the controller role but is not a voter"
        )
    log_dirs_raw = props.get("log.dirs") or props.get("log.dir") or "./data"
    log_dirs = tuple(d.strip() for d in log_dirs_raw.split(",") if d.strip())
    if not log_dirs:
        raise ConfigError("log.dirs: empty")

    retention_ms = _int(props, "log.retention.ms", 0) if props.get("log.retention.ms") else None
    retention_ms_property = retention_ms
    if retention_ms is None and props.get("log.retention.minutes"):
        retention_ms = _int(props, "log.retention.minutes", 0) * 60_000
    retention_hours = _int(props, "log.retention.hours", 168)
    if retention_ms is None:
        retention_ms = retention_hours * 3_600_000

    retained_batches = _int(props, "producer.state.retained.batches", 1, minimum=1)
    if retained_batches > 127:
        raise ConfigError(f"producer.state.retained.batches: {retained_batches} is above the maximum 127")
    duplicate_window = _int(props, "max.in.flight.sequence.number.per.connection", 10000000, minimum=0)
    if duplicate_window > 1 << 30:
        # Half the sequence space or more would make "already appended" and "not yet sent" overlap.
        raise ConfigError(
            f"max.in.flight.sequence.number.per.connection: {duplicate_window} is above the maximum {1 << 30}"
        )

    bootstrap_servers: list[tuple[str, int]] = []
    for item in props.get("controller.quorum.bootstrap.servers", "").split(","):
        if item.strip():
            host, sep, port = item.strip().rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ConfigError(f"controller.quorum.bootstrap.servers: {item.strip()!r} is not host:port")
            bootstrap_servers.append((host.strip("[]"), int(port)))
    election_timeout_ms = _int(props, "controller.quorum.election.timeout.ms", 1000, minimum=1)
    fetch_timeout_ms = _int(props, "controller.quorum.fetch.timeout.ms", 2000, minimum=1)
    request_timeout_ms = _int(props, "controller.quorum.request.timeout.ms", 2000, minimum=1)
    if request_timeout_ms <= 500:
        # The raft Fetch long-polls for up to 500 ms (KafkaRaftClient.MAX_FETCH_WAIT_MS).
        raise ConfigError(
            f"controller.quorum.request.timeout.ms: {request_timeout_ms} must be above the raft fetch's 500 ms wait"
        )

    listener_sasl = _listener_sasl(props, listeners, protocol_map, controller_names)
    inter_broker_listener = _inter_broker_listener(
        props, [e.listener_name for e in listeners if e.listener_name not in controller_names], protocol_map
    )
    controller_protocol = (
        protocol_map.get(controller_names[0], "PLAINTEXT") if controller_names else "PLAINTEXT"
    )
    controller_sasl = listener_sasl.get(controller_names[0]) if controller_names else None
    controller_mechanism = props.get("sasl.mechanism.controller.protocol", "PLAIN").strip().upper()
    if controller_protocol.startswith("SASL_") and controller_mechanism != "PLAIN":
        raise ConfigError(
            f"sasl.mechanism.controller.protocol: {controller_mechanism}; the controller listener serves PLAIN"
        )
    if controller_sasl is not None and controller_mechanism not in controller_sasl.enabled_mechanisms:
        raise ConfigError(
            f"sasl.mechanism.controller.protocol: {controller_mechanism} is not enabled on the controller "
            f"listener {controller_names[0]}"
        )

    metrics_port = _int(props, "metrics.port", -1, minimum=-1)
    if metrics_port > 65535:
        raise ConfigError(f"metrics.port: {metrics_port} is outside -1 (off) and 0-65535")
    compression = _compression(props)
    # Empty or absent: loopback only (the endpoint has no authentication).
    metrics_host = props.get("metrics.host", "").strip().strip("[]") or "127.0.0.1"
    # A name or an address (IPv6 in brackets or not); a URL is a mistake worth naming.
    if any(c.isspace() or c in "/@" for c in metrics_host):
        raise ConfigError(f"metrics.host: {props.get('metrics.host')!r} is not a host name or address")

    ignored = tuple(
        sorted(
            k
            for k in props
            if k not in USED_PROPERTIES
            and not (
                k.startswith("listener.name.")
                and (
                    k.endswith(
                        (
                            ".sasl.jaas.config",
                            ".sasl.enabled.mechanisms",
                            ".connections.max.reauth.ms",
                            ".max.connections",
                        )
                    )
                    or k.split(".", 3)[-1] in _LISTENER_SSL_KEYS
                )
            )
        )
    )
    return NodeConfig(
        node_id=node_id,
        process_roles=roles,
        listeners=listeners,
        advertised_listeners=advertised,
        controller_listener_names=controller_names,
        controller_quorum_voters=voters,
        listener_security_protocol_map=protocol_map,
        log_dirs=log_dirs,
        metadata_log_dir=props.get("metadata.log.dir") or log_dirs[0],
        num_partitions=_int(props, "num.partitions", 1, minimum=1),
        default_replication_factor=_int(props, "default.replication.factor", 1, minimum=1),
        auto_create_topics_enable=_bool(props, "auto.create.topics.enable", True),
        log_segment_bytes=_int(props, "log.segment.bytes", 1073741824, minimum=14),
        log_retention_ms=retention_ms,
        log_retention_hours=retention_hours,
        log_retention_ms_property=retention_ms_property,
        log_retention_bytes=_int(props, "log.retention.bytes", -1),
        log_retention_check_interval_ms=_int(props, "log.retention.check.interval.ms", 300000, minimum=1),
        log_cleanup_policy=_cleanup_policy(props),
        log_cleaner_enable=_bool(props, "log.cleaner.enable", True),
        # Kafka's minimum is 512 KiB per cleaner thread; a smaller map just cleans in more passes.
        log_cleaner_dedupe_buffer_size=_int(props, "log.cleaner.dedupe.buffer.size", 134217728, minimum=1024),
        log_cleaner_io_buffer_size=_int(props, "log.cleaner.io.buffer.size", 524288, minimum=1024),
        log_cleaner_backoff_ms=_int(props, "log.cleaner.backoff.ms", 15000, minimum=1),
        log_cleaner_min_cleanable_ratio=_ratio(props, "log.cleaner.min.cleanable.ratio", 0.5),
        log_cleaner_delete_retention_ms=_int(props, "log.cleaner.delete.retention.ms", 86400000, minimum=0),
        log_cleaner_min_compaction_lag_ms=_int(props, "log.cleaner.min.compaction.lag.ms", 0, minimum=0),
        log_open_files_max=_open_files_max(props),
        num_recovery_threads_per_data_dir=_int(props, "num.recovery.threads.per.data.dir", 2, minimum=1),
        offsets_topic_segment_bytes=_int(props, "offsets.topic.segment.bytes", 104857600, minimum=14),
        transaction_state_log_segment_bytes=_int(
            props, "transaction.state.log.segment.bytes", 104857600, minimum=14
        ),
        socket_request_max_bytes=_int(props, "socket.request.max.bytes", 104857600, minimum=1),
        sasl_server_max_receive_size=_int(props, "sasl.server.max.receive.size", 524288, minimum=1),
        message_max_bytes=_int(props, "message.max.bytes", 1048588, minimum=0),
        compression_type=compression.get("compression.type", "producer"),
        compression_gzip_level=int(compression.get("compression.gzip.level", -1)),
        compression_lz4_level=int(compression.get("compression.lz4.level", 9)),
        compression_zstd_level=int(compression.get("compression.zstd.level", 3)),
        producer_id_expiration_ms=_int(props, "producer.id.expiration.ms", 86400000, minimum=1),
        producer_state_retained_batches=retained_batches,
        max_in_flight_sequence_number_per_connection=duplicate_window,
        producer_id_expiration_check_interval_ms=_int(
            props, "producer.id.expiration.check.interval.ms", 600000, minimum=1
        ),
        metadata_log_max_record_bytes_between_snapshots=_int(
            props, "metadata.log.max.record.bytes.between.snapshots", 20971520, minimum=1
        ),
        metadata_log_max_snapshot_interval_ms=_int(
            props, "metadata.log.max.snapshot.interval.ms", 3600000, minimum=0
        ),
        metadata_max_retention_bytes=_int(props, "metadata.max.retention.bytes", 104857600),
        metadata_max_retention_ms=_int(props, "metadata.max.retention.ms", 604800000),
        metadata_log_segment_bytes=_int(props, "metadata.log.segment.bytes", 1073741824, minimum=100),
        offsets_topic_num_partitions=_int(props, "offsets.topic.num.partitions", 50, minimum=1),
        group_min_session_timeout_ms=_int(props, "group.min.session.timeout.ms", 6000, minimum=1),
        group_max_session_timeout_ms=_int(props, "group.max.session.timeout.ms", 1800000, minimum=1),
        group_initial_rebalance_delay_ms=_int(props, "group.initial.rebalance.delay.ms", 3000, minimum=0),
        group_consumer_heartbeat_interval_ms=_int(
            props, "group.consumer.heartbeat.interval.ms", 5000, minimum=1
        ),
        group_consumer_session_timeout_ms=_int(props, "group.consumer.session.timeout.ms", 45000, minimum=1),
        group_consumer_min_session_timeout_ms=_int(
            props, "group.consumer.min.session.timeout.ms", 45000, minimum=1
        ),
        group_consumer_max_session_timeout_ms=_int(
            props, "group.consumer.max.session.timeout.ms", 60000, minimum=1
        ),
        group_consumer_min_heartbeat_interval_ms=_int(
            props, "group.consumer.min.heartbeat.interval.ms", 5000, minimum=1
        ),
        group_consumer_max_heartbeat_interval_ms=_int(
            props, "group.consumer.max.heartbeat.interval.ms", 15000, minimum=1
        ),
        group_consumer_max_size=_int(props, "group.consumer.max.size", 2**31 - 1, minimum=1),
        group_consumer_assignors=_consumer_assignors(props),
        group_consumer_migration_policy=_migration_policy(props),
        group_share_session_timeout_ms=_int(props, "group.share.session.timeout.ms", 45000, minimum=1),
        group_share_min_session_timeout_ms=_int(
            props, "group.share.min.session.timeout.ms", 45000, minimum=1
        ),
        group_share_max_session_timeout_ms=_int(
            props, "group.share.max.session.timeout.ms", 60000, minimum=1
        ),
        group_share_heartbeat_interval_ms=_int(props, "group.share.heartbeat.interval.ms", 5000, minimum=1),
        group_share_min_heartbeat_interval_ms=_int(
            props, "group.share.min.heartbeat.interval.ms", 5000, minimum=1
        ),
        group_share_max_heartbeat_interval_ms=_int(
            props, "group.share.max.heartbeat.interval.ms", 15000, minimum=1
        ),
        group_share_max_size=_int(props, "group.share.max.size", 200, minimum=1),
        group_share_record_lock_duration_ms=_int(
            props, "group.share.record.lock.duration.ms", 30000, minimum=1000
        ),
        group_share_min_record_lock_duration_ms=_int(
            props, "group.share.min.record.lock.duration.ms", 15000, minimum=1000
        ),
        group_share_max_record_lock_duration_ms=_int(
            props, "group.share.max.record.lock.duration.ms", 60000, minimum=1000
        ),
        group_share_delivery_count_limit=_int(props, "group.share.delivery.count.limit", 5, minimum=2),
        group_share_partition_max_record_locks=_int(
            props, "group.share.partition.max.record.locks", 2000, minimum=100
        ),
        share_coordinator_state_topic_num_partitions=_int(
            props, "share.coordinator.state.topic.num.partitions", 50, minimum=1
        ),
        share_coordinator_state_topic_replication_factor=_int(
            props, "share.coordinator.state.topic.replication.factor", 3, minimum=1
        ),
        share_coordinator_state_topic_segment_bytes=_int(
            props, "share.coordinator.state.topic.segment.bytes", 104857600, minimum=14
        ),
        controller_quorum_election_timeout_ms=election_timeout_ms,
        controller_quorum_fetch_timeout_ms=fetch_timeout_ms,
        controller_quorum_election_backoff_max_ms=_int(
            props, "controller.quorum.election.backoff.max.ms", 1000, minimum=1
        ),
        controller_quorum_request_timeout_ms=request_timeout_ms,
        controller_quorum_retry_backoff_ms=_int(props, "controller.quorum.retry.backoff.ms", 20, minimum=0),
        controller_quorum_append_linger_ms=_int(props, "controller.quorum.append.linger.ms", 25, minimum=0),
        controller_quorum_bootstrap_servers=tuple(bootstrap_servers),
        metadata_max_idle_interval_ms=_int(props, "metadata.max.idle.interval.ms", 500, minimum=0),
        broker_session_timeout_ms=_int(props, "broker.session.timeout.ms", 9000, minimum=1),
        broker_heartbeat_interval_ms=_int(props, "broker.heartbeat.interval.ms", 2000, minimum=1),
        min_insync_replicas=_int(props, "min.insync.replicas", 1, minimum=1),
        replica_lag_time_max_ms=_int(props, "replica.lag.time.max.ms", 30000, minimum=1),
        replica_fetch_wait_max_ms=_int(props, "replica.fetch.wait.max.ms", 500, minimum=0),
        replica_fetch_max_bytes=_int(props, "replica.fetch.max.bytes", 1048576, minimum=1),
        replica_fetch_backoff_ms=_int(props, "replica.fetch.backoff.ms", 1000, minimum=0),
        unclean_leader_election_enable=_bool(props, "unclean.leader.election.enable", False),
        auto_leader_rebalance_enable=_bool(props, "auto.leader.rebalance.enable", True),
        leader_imbalance_check_interval_seconds=_int(
            props, "leader.imbalance.check.interval.seconds", 300, minimum=1
        ),
        leader_imbalance_per_broker_percentage=_int(
            props, "leader.imbalance.per.broker.percentage", 10, minimum=0
        ),
        broker_rack=props.get("broker.rack") or None,
        replica_selector_class=_replica_selector_class(props),
        offsets_topic_replication_factor=_int(props, "offsets.topic.replication.factor", 3, minimum=1),
        transaction_state_log_num_partitions=_int(
            props, "transaction.state.log.num.partitions", 50, minimum=1
        ),
        transaction_state_log_replication_factor=_int(
            props, "transaction.state.log.replication.factor", 3, minimum=1
        ),
        transaction_max_timeout_ms=_int(props, "transaction.max.timeout.ms", 900000, minimum=1),
        transactional_id_expiration_ms=_int(props, "transactional.id.expiration.ms", 604800000, minimum=1),
        transaction_abort_timed_out_transaction_cleanup_interval_ms=_int(
            props, "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000, minimum=1
        ),
        transaction_remove_expired_transaction_cleanup_interval_ms=_int(
            props, "transaction.remove.expired.transaction.cleanup.interval.ms", 3600000, minimum=1
        ),
        ssl=_ssl_settings(props, None, uses_ssl=False),
        listener_ssl={
            name: _ssl_settings(props, name, uses_ssl=name in {e.listener_name for e in listeners})
            for name, protocol in protocol_map.items()
            if protocol in ("SSL", "SASL_SSL")
        },
        listener_sasl=listener_sasl,
        controller_client=_inter_node_security(
            props,
            controller_names[0],
            protocol_map.get(controller_names[0], "PLAINTEXT"),
            "sasl.mechanism.controller.protocol",
            # A broker process and a voter with peers open connections to controller listeners.
            needed="controller" not in roles or len(voters) > 1,
        ),
        inter_broker_client=_inter_node_security(
            props,
            inter_broker_listener,
            protocol_map.get(inter_broker_listener, "PLAINTEXT"),
            "sasl.mechanism.inter.broker.protocol",
            # Brokers in their own processes fetch from each other and write transaction markers.
            needed="broker" in roles and "controller" not in roles,
        ),
        authorizer=_authorizer_settings(props),
        max_connections=_int(props, "max.connections", 2**31 - 1, minimum=0),
        listener_max_connections={
            e.listener_name: _int(props, key, 0, minimum=0)
            for e in listeners
            if (key := f"listener.name.{e.listener_name.lower()}.max.connections") in props
        },
        max_connections_per_ip=_int(props, "max.connections.per.ip", 2**31 - 1, minimum=0),
        max_connections_per_ip_overrides=_per_ip_overrides(props.get("max.connections.per.ip.overrides", "")),
        connections_max_idle_ms=_int(props, "connections.max.idle.ms", 600000, minimum=1),
        queued_max_requests=_int(props, "queued.max.requests", 500, minimum=1),
        quota_window_num=_int(props, "quota.window.num", 11, minimum=1),
        quota_window_size_seconds=_int(props, "quota.window.size.seconds", 1, minimum=1),
        metrics_port=metrics_port,
        metrics_host=metrics_host,
        ignored=ignored,
    )
