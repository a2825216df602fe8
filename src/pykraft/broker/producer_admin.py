"""Admin views of producer state: DescribeProducers (api 61, KIP-664) and DescribeConfigs (api 32).

DescribeConfigs is how the broker advertises KIP-758's duplicate window to clients, as the seed
proposes ("the broker will piggyback the value of max.in.flight.sequence.number.per.connection"):
a read-only broker config, next to ``producer.state.retained.batches`` and the other configs the
broker actually applies. Topic resources answer with the topic-level values this broker applies to
every topic (pykraft has no per-topic overrides yet).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeConfigsResponse, DescribeProducersResponse

from pykraft.broker.handlers import BrokerContext
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode

# ConfigResource.Type (clients/.../config/ConfigResource.java).
RESOURCE_TYPE_TOPIC = 2
RESOURCE_TYPE_BROKER = 4
# DescribeConfigsResponse.ConfigSource.
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
# ConfigDef.Type as DescribeConfigs v3+ encodes it.
CONFIG_TYPE_BOOLEAN = 1
CONFIG_TYPE_INT = 3
CONFIG_TYPE_LONG = 5
CONFIG_TYPE_STRING = 2
CONFIG_TYPE_LIST = 7
CONFIG_TYPE_PASSWORD = 9

# (name, value, Kafka's/pykraft's default, type); a PASSWORD's value is never sent (sensitive).
ConfigRow = tuple[str, str | None, str | None, int]


def security_config_rows(config: NodeConfig) -> list[ConfigRow]:
    """TLS, SASL and authorizer settings (issue 16). Passwords and JAAS texts are PASSWORD configs:
    DescribeConfigs says they are set (sensitive) and never what they are, as Kafka does."""
    ssl = config.ssl
    rows: list[ConfigRow] = [
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


def broker_config_rows(config: NodeConfig) -> list[ConfigRow]:
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
        ("log.retention.ms", str(config.log_retention_ms), "604800000", CONFIG_TYPE_LONG),
        ("log.retention.bytes", str(config.log_retention_bytes), "-1", CONFIG_TYPE_LONG),
        ("num.partitions", str(config.num_partitions), "1", CONFIG_TYPE_INT),
        (
            "auto.create.topics.enable",
            str(config.auto_create_topics_enable).lower(),
            "true",
            CONFIG_TYPE_BOOLEAN,
        ),
    ]


def topic_config_rows(config: NodeConfig) -> list[ConfigRow]:
    return [
        ("cleanup.policy", "delete", "delete", CONFIG_TYPE_STRING),
        ("max.message.bytes", str(config.message_max_bytes), "1048588", CONFIG_TYPE_INT),
        ("segment.bytes", str(config.log_segment_bytes), "1073741824", CONFIG_TYPE_INT),
        ("retention.ms", str(config.log_retention_ms), "604800000", CONFIG_TYPE_LONG),
        ("retention.bytes", str(config.log_retention_bytes), "-1", CONFIG_TYPE_LONG),
    ]


def handle_describe_configs(request: Any, version: int, ctx: BrokerContext, config: NodeConfig) -> Any:
    results = []
    for resource in request.resources:
        error, message, rows = ErrorCode.NONE, None, []
        if resource.resource_type == RESOURCE_TYPE_BROKER:
            # "" is the cluster-wide default resource; otherwise it must be this broker's id.
            if resource.resource_name not in ("", str(ctx.node_id)):
                error = ErrorCode.INVALID_REQUEST
                message = f"unexpected broker id {resource.resource_name!r}, this is broker {ctx.node_id}"
            else:
                rows = broker_config_rows(config) + security_config_rows(config)
        elif resource.resource_type == RESOURCE_TYPE_TOPIC:
            if resource.resource_name not in ctx.cluster.topics:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                message = f"topic {resource.resource_name!r} does not exist"
            else:
                rows = topic_config_rows(config)
        else:
            error = ErrorCode.INVALID_REQUEST
            message = (
                f"resource type {resource.resource_type} is not described by pykraft (topic 2, broker 4)"
            )
        keys = resource.configuration_keys
        if keys is not None:
            wanted = set(keys)
            rows = [row for row in rows if row[0] in wanted]
        results.append(
            DescribeConfigsResponse.DescribeConfigsResult(
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[_config_result(row) for row in rows],
            )
        )
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=results)


def _config_result(row: ConfigRow) -> Any:
    name, value, default, config_type = row
    sensitive = config_type == CONFIG_TYPE_PASSWORD
    return DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult(
        name=name,
        value=None if sensitive else value,
        read_only=True,  # no AlterConfigs: every value comes from server.properties
        config_source=SOURCE_DEFAULT_CONFIG if value == default else SOURCE_STATIC_BROKER_CONFIG,
        is_default=value == default,
        is_sensitive=sensitive,
        synonyms=[],
        config_type=config_type,
        documentation=None,
    )


def handle_describe_producers(request: Any, version: int, ctx: BrokerContext) -> Any:
    """Each requested partition's active producers (DescribeProducersResponse v0)."""
    Topic = DescribeProducersResponse.TopicResponse
    Partition = Topic.PartitionResponse
    topics = []
    for topic in request.topics:
        partitions = []
        for partition_index in topic.partition_indexes:
            part = ctx.replicas.get(topic.name, partition_index)
            if part is None:
                partitions.append(
                    Partition(
                        partition_index=partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=f"{topic.name}-{partition_index} is not hosted here",
                        active_producers=[],
                    )
                )
                continue
            producers = [
                Partition.ProducerState(
                    producer_id=entry.producer_id,
                    producer_epoch=entry.producer_epoch,
                    last_sequence=entry.last_seq,
                    last_timestamp=entry.last_timestamp_ms,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=-1
                    if entry.current_txn_first_offset is None
                    else entry.current_txn_first_offset,
                )
                for entry in part.producer_state.active_producers()
            ]
            partitions.append(
                Partition(
                    partition_index=partition_index,
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    active_producers=producers,
                )
            )
        topics.append(Topic(name=topic.name, partitions=partitions))
    return DescribeProducersResponse(version=version, throttle_time_ms=0, topics=topics)
