"""DescribeConfigs (32) for brokers and topics (issue 17).

Broker resources list the server.properties settings the node applies, among them
KIP-758's duplicate window, which clients read here as the seed proposes ("the broker will piggyback the
value of max.in.flight.sequence.number.per.connection"), and the TLS/SASL settings with their secrets
sensitive (never sent); the dynamic ones (``DYNAMIC_BROKER_CONFIGS``) are writable and show a value set
for this broker (DYNAMIC_BROKER_CONFIG) or every broker (DYNAMIC_DEFAULT_BROKER_CONFIG); the resource
``""`` lists the cluster-wide dynamic defaults. Topic resources list every topic config with its
effective value and where it comes from, as Kafka does: the topic's own ConfigRecord
(DYNAMIC_TOPIC_CONFIG), the broker's synonym set dynamically or in server.properties, or Kafka's default
(DEFAULT_CONFIG), with synonyms when asked (``include_synonyms``). Group resources (type 32, any group
name) list every group config: the group's own value (GROUP_CONFIG) or the broker's (DEFAULT_CONFIG),
as Kafka's ConfigHelper.createGroupConfigEntry (core/group_configs.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsResponse,
    CreateTopicsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)

from pykraft.broker.handlers import BrokerContext
from pykraft.controller.configs import AlterConfigOp, ConfigAlteration, ConfigAlterationResult
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode
from pykraft.core.group_configs import effective_group_configs, group_coordinator_settings
from pykraft.core.topic_configs import (
    CONFIG_TYPE_BOOLEAN,
    CONFIG_TYPE_INT,
    CONFIG_TYPE_LIST,
    CONFIG_TYPE_LONG,
    CONFIG_TYPE_STRING,
    DYNAMIC_BROKER_CONFIGS,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_BROKER_CONFIG,
    SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    TOPIC_CONFIGS,
    broker_level_values,
    effective_topic_configs,
)
from pykraft.metadata.image import ConfigResource

# ConfigResource.Type (clients/.../config/ConfigResource.java).
RESOURCE_TYPE_TOPIC = 2
RESOURCE_TYPE_BROKER = 4
RESOURCE_TYPE_BROKER_LOGGER = 8
RESOURCE_TYPE_GROUP = 32
# A broker logger's level (Kafka's ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG); its type is left UNKNOWN
SOURCE_DYNAMIC_BROKER_LOGGER_CONFIG = 6
CONFIG_TYPE_UNKNOWN = 0
CONFIG_TYPE_PASSWORD = 9

# (name, value, Kafka's/pykraft's default, type) of a broker setting; a PASSWORD's value is never sent.
BrokerRow = tuple[str, str | None, str | None, int]


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    config_type: int
    read_only: bool = True
    # (name, value, source), most specific first, as DescribeConfigs' synonyms.
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)

    @property
    def sensitive(self) -> bool:
        return self.config_type == CONFIG_TYPE_PASSWORD


def security_config_rows(config: NodeConfig) -> list[BrokerRow]:
    """TLS, SASL and authorizer settings (issue 16). Passwords and JAAS texts are PASSWORD configs:
    DescribeConfigs says they are set (sensitive) and never what they are, as Kafka does."""
    ssl = config.ssl
    rows: list[BrokerRow] = [
        ("ssl.keystore.location", ssl.keystore_location, None, CONFIG_TYPE_STRING),
        ("ssl.key.password", ssl.key_password, None, CONFIG_TYPE_PASSWORD),
        ("ssl.truststore.location", ssl.truststore_location, None, CONFIG_TYPE_STRING),
        ("ssl.client.auth", ssl.client_auth, "none", CONFIG_TYPE_STRING),
        ("ssl.enabled.protocols", ",".join(ssl.enabled_protocols), "TLSv1.2,TLSv1.3", CONFIG_TYPE_LIST),
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer" if config.authorizer.enabled else "",
            "",
            CONFIG_TYPE_STRING,
        ),
        ("super.users", ";".join(sorted(config.authorizer.super_users)), "", CONFIG_TYPE_STRING),
    ]
    for listener, sasl in sorted(config.listener_sasl.items()):
        prefix = f"listener.name.{listener.lower()}."
        rows.append(
            (prefix + "sasl.enabled.mechanisms", ",".join(sasl.enabled_mechanisms), None, CONFIG_TYPE_LIST)
        )
        if sasl.plain_jaas_config is not None:
            rows.append((sasl.plain_jaas_key, sasl.plain_jaas_config, None, CONFIG_TYPE_PASSWORD))
    return rows


def broker_config_rows(config: NodeConfig) -> list[BrokerRow]:
    return [
        # KIP-758: the duplicate window clients must stay within, and the mode it applies in.
        (
            "max.in.flight.sequence.number.per.connection",
            str(config.max_in_flight_sequence_number_per_connection),
            "10000000",
            CONFIG_TYPE_INT,
        ),
        (
            "producer.state.retained.batches",
            str(config.producer_state_retained_batches),
            "1",
            CONFIG_TYPE_INT,
        ),
        ("producer.id.expiration.ms", str(config.producer_id_expiration_ms), "86400000", CONFIG_TYPE_INT),
        (
            "producer.id.expiration.check.interval.ms",
            str(config.producer_id_expiration_check_interval_ms),
            "600000",
            CONFIG_TYPE_INT,
        ),
        ("message.max.bytes", str(config.message_max_bytes), "1048588", CONFIG_TYPE_INT),
        ("log.segment.bytes", str(config.log_segment_bytes), "1073741824", CONFIG_TYPE_INT),
        # Kafka's log.retention.ms is null unless set (its default comes from log.retention.hours)
        (
            "log.retention.ms",
            None if config.log_retention_ms_property is None else str(config.log_retention_ms_property),
            None,
            CONFIG_TYPE_LONG,
        ),
        ("log.retention.hours", str(config.log_retention_hours), "168", CONFIG_TYPE_INT),
        ("log.retention.bytes", str(config.log_retention_bytes), "-1", CONFIG_TYPE_LONG),
        ("num.partitions", str(config.num_partitions), "1", CONFIG_TYPE_INT),
        # compression.type and its KIP-390 levels: the broker's defaults of the topic configs of the
        # same names (Kafka's ServerTopicConfigSynonyms).
        *(
            (name, definition.broker_value(config), definition.default, definition.config_type)
            for name in (
                "compression.type",
                "compression.gzip.level",
                "compression.lz4.level",
                "compression.zstd.level",
            )
            if (definition := TOPIC_CONFIGS[name]).broker_value is not None
        ),
        (
            "auto.create.topics.enable",
            str(config.auto_create_topics_enable).lower(),
            "true",
            CONFIG_TYPE_BOOLEAN,
        ),
    ]


def broker_entries(
    config: NodeConfig, dynamic_default: Mapping[str, str], dynamic_broker: Mapping[str, str]
) -> list[ConfigEntry]:
    """This broker's settings: static rows, with the dynamic values over them, and the dynamic
    configs set that are not among the rows."""
    entries = []
    listed = set()
    for name, value, default, config_type in broker_config_rows(config) + security_config_rows(config):
        listed.add(name)
        source = SOURCE_DEFAULT_CONFIG if value == default else SOURCE_STATIC_BROKER_CONFIG
        synonyms: list[tuple[str, str | None, int]] = []
        for dynamic, dynamic_source in (
            (dynamic_broker, SOURCE_DYNAMIC_BROKER_CONFIG),
            (dynamic_default, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG),
        ):
            if name in dynamic:
                synonyms.append((name, dynamic[name], dynamic_source))
        synonyms.append((name, value, source))
        top_value, top_source = synonyms[0][1], synonyms[0][2]
        entries.append(
            ConfigEntry(
                name, top_value, top_source, config_type, name not in DYNAMIC_BROKER_CONFIGS, synonyms
            )
        )
    for name in sorted((set(dynamic_broker) | set(dynamic_default)) - listed):
        definition = DYNAMIC_BROKER_CONFIGS.get(name)
        if definition is None:
            continue
        levels = broker_level_values(definition, config, dynamic_default, dynamic_broker)
        _, value, source = levels[0]
        entries.append(
            ConfigEntry(name, value, source, definition.config_type, False, [(n, v, s) for n, v, s in levels])
        )
    return entries


def cluster_default_entries(dynamic_default: Mapping[str, str]) -> list[ConfigEntry]:
    """The resource ``""``: the dynamic configs set for every broker."""
    return [
        ConfigEntry(
            name,
            value,
            SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
            DYNAMIC_BROKER_CONFIGS[name].config_type,
            False,
            [(name, value, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)],
        )
        for name, value in sorted(dynamic_default.items())
        if name in DYNAMIC_BROKER_CONFIGS
    ]


def topic_entries(
    overrides: Mapping[str, str],
    config: NodeConfig,
    dynamic_default: Mapping[str, str] | None = None,
    dynamic_broker: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    entries = []
    for effective in effective_topic_configs(overrides, config, dynamic_default, dynamic_broker).values():
        synonyms: list[tuple[str, str | None, int]] = []
        if effective.source == SOURCE_DYNAMIC_TOPIC_CONFIG:
            synonyms.append((effective.name, effective.value, SOURCE_DYNAMIC_TOPIC_CONFIG))
        if effective.broker_synonym is not None:
            synonyms.extend(
                broker_level_values(
                    TOPIC_CONFIGS[effective.name], config, dynamic_default or {}, dynamic_broker or {}
                )
            )
        entries.append(
            ConfigEntry(
                effective.name, effective.value, effective.source, effective.config_type, False, synonyms
            )
        )
    return entries


def group_entries(overrides: Mapping[str, str], config: NodeConfig) -> list[ConfigEntry]:
    """Every group config of a group with its own ``overrides``; the synonym is the entry itself, as
    Kafka lists it."""
    return [
        ConfigEntry(v.name, v.value, v.source, v.config_type, False, [(v.name, v.value, v.source)])
        for v in effective_group_configs(overrides, group_coordinator_settings(config))
    ]


def created_topic_configs(
    overrides: Mapping[str, str | None],
    config: NodeConfig,
    dynamic_default: Mapping[str, str],
    dynamic_broker: Mapping[str, str],
) -> list[Any]:
    """CreateTopics v5+ answers each created topic with every config, its value and source, as
    Kafka's ReplicationControlManager.createTopic does (the Java Admin's CreateTopicsResult.config)."""
    config_cls = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
    own = {name: value for name, value in overrides.items() if value is not None}
    return [
        config_cls(
            name=entry.name,
            value=None if entry.sensitive else entry.value,
            read_only=entry.read_only,
            config_source=entry.source,
            is_sensitive=entry.sensitive,
        )
        for entry in topic_entries(own, config, dynamic_default, dynamic_broker)
    ]


def handle_describe_configs(
    request: Any,
    version: int,
    ctx: BrokerContext,
    config: NodeConfig,
    topic_overrides: Callable[[str], Mapping[str, str]],
    broker_overrides: Callable[[str], Mapping[str, str]] = lambda _name: {},
    group_overrides: Callable[[str], Mapping[str, str]] = lambda _name: {},
    logger_levels: Callable[[], Mapping[str, str]] = dict,
) -> Any:
    """``broker_overrides(name)``: the dynamic configs of the BROKER resource ``name`` (``""``: every
    broker's) as the metadata image has them; ``group_overrides(group id)``: a group's configs;
    ``logger_levels()``: this broker's loggers and their levels (the BROKER_LOGGER resource)."""
    results = []
    dynamic_default = broker_overrides("")
    dynamic_broker = broker_overrides(str(ctx.node_id))
    for resource in request.resources:
        error, message, entries = ErrorCode.NONE, None, []
        if resource.resource_type == RESOURCE_TYPE_BROKER:
            # "" is the cluster-wide default resource; otherwise it must be this broker's id.
            if resource.resource_name == "":
                entries = cluster_default_entries(dynamic_default)
            elif resource.resource_name != str(ctx.node_id):
                error = ErrorCode.INVALID_REQUEST
                message = f"unexpected broker id {resource.resource_name!r}, this is broker {ctx.node_id}"
            else:
                entries = broker_entries(config, dynamic_default, dynamic_broker)
        elif resource.resource_type == RESOURCE_TYPE_TOPIC:
            if resource.resource_name not in ctx.cluster.topics:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                message = f"topic {resource.resource_name!r} does not exist"
            else:
                entries = topic_entries(
                    topic_overrides(resource.resource_name), config, dynamic_default, dynamic_broker
                )
        elif resource.resource_type == RESOURCE_TYPE_BROKER_LOGGER:
            # Kafka's ConfigHelper: this broker's loggers (Log4jController.loggers), each at its level
            if resource.resource_name != str(ctx.node_id):
                error = ErrorCode.INVALID_REQUEST
                message = f"unexpected broker id {resource.resource_name!r}, this is broker {ctx.node_id}"
            else:
                entries = [
                    ConfigEntry(name, level, SOURCE_DYNAMIC_BROKER_LOGGER_CONFIG, CONFIG_TYPE_UNKNOWN, False)
                    for name, level in sorted(logger_levels().items())
                ]
        elif resource.resource_type == RESOURCE_TYPE_GROUP:
            # Any group name, whether the group exists or not (Kafka's ConfigHelper).
            if not resource.resource_name:
                error, message = ErrorCode.INVALID_REQUEST, "Group name must not be empty"
            else:
                entries = group_entries(group_overrides(resource.resource_name), config)
        else:
            error = ErrorCode.INVALID_REQUEST
            message = (
                f"resource type {resource.resource_type} is not described by pykraft "
                "(topic 2, broker 4, broker logger 8, group 32)"
            )
        keys = resource.configuration_keys
        if keys is not None:
            wanted = set(keys)
            entries = [entry for entry in entries if entry.name in wanted]
        results.append(
            DescribeConfigsResponse.DescribeConfigsResult(
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[
                    _config_result(entry, bool(getattr(request, "include_synonyms", False)))
                    for entry in entries
                ],
            )
        )
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)


def _config_result(entry: ConfigEntry, include_synonyms: bool = False) -> Any:
    result_cls = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    return result_cls(
        name=entry.name,
        value=None if entry.sensitive else entry.value,
        read_only=entry.read_only,
        config_source=entry.source,
        is_default=entry.source == SOURCE_DEFAULT_CONFIG,
        is_sensitive=entry.sensitive,
        synonyms=[
            result_cls.DescribeConfigsSynonym(
                name=name, value=None if entry.sensitive else value, source=source
            )
            for name, value, source in (entry.synonyms if include_synonyms else [])
        ],
        config_type=entry.config_type,
        documentation=None,
    )


# --- IncrementalAlterConfigs (44) and AlterConfigs (33) ---------------------------------------------------


def incremental_alterations(request: Any) -> list[ConfigAlteration]:
    alterations = []
    for resource in request.resources:
        changes = [(config.name, int(config.config_operation), config.value) for config in resource.configs]
        alterations.append(
            ConfigAlteration(ConfigResource(resource.resource_type, resource.resource_name), changes)
        )
    return alterations


def replacing_alterations(request: Any) -> list[ConfigAlteration]:
    """AlterConfigs: each resource's configs become exactly the ones given."""
    return [
        ConfigAlteration(
            ConfigResource(resource.resource_type, resource.resource_name),
            [(config.name, AlterConfigOp.SET, config.value) for config in resource.configs],
            replace_all=True,
        )
        for resource in request.resources
    ]


def alter_configs_response(incremental: bool, version: int, results: list[ConfigAlterationResult]) -> Any:
    cls: Any = IncrementalAlterConfigsResponse if incremental else AlterConfigsResponse
    return cls(
        version=version,
        throttle_time_ms=0,
        responses=[
            cls.AlterConfigsResourceResponse(
                error_code=result.error_code,
                error_message=result.error_message,
                resource_type=result.resource.resource_type,
                resource_name=result.resource.resource_name,
            )
            for result in results
        ],
    )


def alter_configs_refusal(incremental: bool) -> Callable[..., Any]:
    """The answer refusing every resource of an alter request (no controller reachable, ...)."""

    def refusal(request: Any, version: int, error: ErrorCode, message: str | None = None) -> Any:
        return alter_configs_response(
            incremental,
            version,
            [
                ConfigAlterationResult(ConfigResource(r.resource_type, r.resource_name), error, message)
                for r in request.resources
            ],
        )

    return refusal
