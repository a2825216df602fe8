"""Kafka's topic-level configs (TopicConfig / LogConfig): names, types, defaults, the broker property each
one falls back to, and how a value is checked. Pure.

A topic's effective value of a config is, as in Kafka: its own ConfigRecord (DYNAMIC_TOPIC_CONFIG), else
the broker's synonym set dynamically for this broker (DYNAMIC_BROKER_CONFIG) or for every broker
(DYNAMIC_DEFAULT_BROKER_CONFIG), else set in server.properties (STATIC_BROKER_CONFIG), else Kafka's
default (DEFAULT_CONFIG).

Dynamic broker configs (KIP-226, as KRaft keeps them: ConfigRecords of the BROKER resource ``"<id>"`` or
``""`` for the cluster default) are the broker-level synonyms of the applied topic configs
(``DYNAMIC_BROKER_CONFIGS``): ``log.retention.ms``, ``log.cleanup.policy``, ``message.max.bytes``, ... Unknown names and bad values are refused with INVALID_CONFIG and Kafka's messages
("Unknown topic config name: x", "Invalid value v for configuration x: why").

``APPLIED`` lists what pykraft acts on; the rest are checked, stored and described, and said to be
stored only in the docs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from pykraft.core.config import NodeConfig

# DescribeConfigsResponse.ConfigSource.
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
# ConfigDef.Type as DescribeConfigs v3+ encodes it.
CONFIG_TYPE_BOOLEAN = 1
CONFIG_TYPE_STRING = 2
CONFIG_TYPE_INT = 3
CONFIG_TYPE_LONG = 5
CONFIG_TYPE_DOUBLE = 6
CONFIG_TYPE_LIST = 7

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class TopicConfigError(ValueError):
    """Kafka's INVALID_CONFIG message for one config."""


def _number(
    kind: type, minimum: float | None = None, maximum: float | None = None
) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            number = kind(value.strip())
        except ValueError:
            return f"Not a number of type {'DOUBLE' if kind is float else 'INT/LONG'}"
        if minimum is not None and number < minimum:
            return (
                f"Value must be at least {minimum:g}"
                if kind is float
                else f"Value must be at least {minimum}"
            )
        if maximum is not None and number > maximum:
            return (
                f"Value must be no more than {maximum:g}"
                if kind is float
                else f"Value must be no more than {maximum}"
            )
        return None

    return check


def _one_of(*allowed: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value.strip() in allowed else f"String must be one of: {', '.join(allowed)}"

    return check


def _list_of(*allowed: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        items = [item.strip() for item in value.split(",") if item.strip()]
        bad = [item for item in items if item not in allowed]
        return f"Invalid value(s) {', '.join(bad)}; allowed: {', '.join(allowed)}" if bad else None

    return check


def _boolean(value: str) -> str | None:
    return None if value.strip().lower() in ("true", "false") else "Expected value to be either true or false"


def _gzip_level(value: str) -> str | None:
    """GzipCompression.LevelValidator: 1..9, or -1 (Deflater.DEFAULT_COMPRESSION)."""
    problem = _number(int)(value)
    if problem is not None:
        return problem
    level = int(value.strip())
    return None if 1 <= level <= 9 or level == -1 else "Value must be between 1 and 9 or equal to -1"


def _any(_value: str) -> str | None:
    return None


def _throttled_replicas(value: str) -> str | None:
    """Kafka's ThrottledReplicaListValidator: ``*`` or ``partition:broker`` pairs separated by commas."""
    items = [item.strip() for item in value.split(",")]
    if value.strip() == "*" or all(re.fullmatch(r"([0-9]+:[0-9]+)?", item) for item in items):
        return None
    return (
        "Must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    name: str
    config_type: int
    default: str  # Kafka's default
    check: Callable[[str], str | None]
    # The broker property a topic without its own value takes (LogConfig's synonyms), and its value
    # from this node's server.properties when pykraft reads it.
    broker_synonym: str | None = None
    broker_value: Callable[[NodeConfig], str] | None = None


def _def(
    name: str,
    config_type: int,
    default: str,
    check: Callable[[str], str | None],
    broker_synonym: str | None = None,
    broker_value: Callable[[NodeConfig], str] | None = None,
) -> TopicConfigDef:
    return TopicConfigDef(name, config_type, default, check, broker_synonym, broker_value)


TOPIC_CONFIGS: Final[dict[str, TopicConfigDef]] = {
    d.name: d
    for d in (
        _def(
            "cleanup.policy",
            CONFIG_TYPE_LIST,
            "delete",
            _list_of("delete", "compact"),
            "log.cleanup.policy",
            lambda c: ",".join(c.log_cleanup_policy),
        ),
        _def(
            "compression.type",
            CONFIG_TYPE_STRING,
            "producer",
            _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
            "compression.type",
            lambda c: c.compression_type,
        ),
        # KIP-390: the level a batch recompressed to compression.type gets (Kafka's GzipCompression,
        # Lz4Compression, ZstdCompression); the broker properties have the same names.
        _def(
            "compression.gzip.level",
            CONFIG_TYPE_INT,
            "-1",
            _gzip_level,
            "compression.gzip.level",
            lambda c: str(c.compression_gzip_level),
        ),
        _def(
            "compression.lz4.level",
            CONFIG_TYPE_INT,
            "9",
            _number(int, 1, 17),
            "compression.lz4.level",
            lambda c: str(c.compression_lz4_level),
        ),
        _def(
            "compression.zstd.level",
            CONFIG_TYPE_INT,
            "3",
            _number(int, -131072, 22),
            "compression.zstd.level",
            lambda c: str(c.compression_zstd_level),
        ),
        _def(
            "delete.retention.ms",
            CONFIG_TYPE_LONG,
            "86400000",
            _number(int, 0),
            "log.cleaner.delete.retention.ms",
            lambda c: str(c.log_cleaner_delete_retention_ms),
        ),
        _def(
            "file.delete.delay.ms", CONFIG_TYPE_LONG, "60000", _number(int, 0), "log.segment.delete.delay.ms"
        ),
        _def(
            "flush.messages", CONFIG_TYPE_LONG, str(INT64_MAX), _number(int, 1), "log.flush.interval.messages"
        ),
        _def("flush.ms", CONFIG_TYPE_LONG, str(INT64_MAX), _number(int, 0), "log.flush.interval.ms"),
        _def("follower.replication.throttled.replicas", CONFIG_TYPE_LIST, "", _throttled_replicas),
        _def(
            "index.interval.bytes",
            CONFIG_TYPE_INT,
            "4096",
            _number(int, 0, INT32_MAX),
            "log.index.interval.bytes",
        ),
        _def("leader.replication.throttled.replicas", CONFIG_TYPE_LIST, "", _throttled_replicas),
        _def("local.retention.bytes", CONFIG_TYPE_LONG, "-2", _number(int, -2), "log.local.retention.bytes"),
        _def("local.retention.ms", CONFIG_TYPE_LONG, "-2", _number(int, -2), "log.local.retention.ms"),
        _def(
            "max.compaction.lag.ms",
            CONFIG_TYPE_LONG,
            str(INT64_MAX),
            _number(int, 1),
            "log.cleaner.max.compaction.lag.ms",
        ),
        _def(
            "max.message.bytes",
            CONFIG_TYPE_INT,
            "1048588",
            _number(int, 0, INT32_MAX),
            "message.max.bytes",
            lambda c: str(c.message_max_bytes),
        ),
        _def(
            "message.timestamp.after.max.ms",
            CONFIG_TYPE_LONG,
            "3600000",  # one hour since Kafka 4.0 (KIP-1030)
            _number(int, 0),
            "log.message.timestamp.after.max.ms",
        ),
        _def(
            "message.timestamp.before.max.ms",
            CONFIG_TYPE_LONG,
            str(INT64_MAX),
            _number(int, 0),
            "log.message.timestamp.before.max.ms",
        ),
        _def(
            "message.timestamp.type",
            CONFIG_TYPE_STRING,
            "CreateTime",
            _one_of("CreateTime", "LogAppendTime"),
            "log.message.timestamp.type",
        ),
        _def(
            "min.cleanable.dirty.ratio",
            CONFIG_TYPE_DOUBLE,
            "0.5",
            _number(float, 0.0, 1.0),
            "log.cleaner.min.cleanable.ratio",
            lambda c: str(c.log_cleaner_min_cleanable_ratio),
        ),
        _def(
            "min.compaction.lag.ms",
            CONFIG_TYPE_LONG,
            "0",
            _number(int, 0),
            "log.cleaner.min.compaction.lag.ms",
            lambda c: str(c.log_cleaner_min_compaction_lag_ms),
        ),
        _def(
            "min.insync.replicas",
            CONFIG_TYPE_INT,
            "1",
            _number(int, 1, INT32_MAX),
            "min.insync.replicas",
            lambda c: str(c.min_insync_replicas),
        ),
        _def("preallocate", CONFIG_TYPE_BOOLEAN, "false", _boolean, "log.preallocate"),
        # KIP-950's switches of tiered storage, which Kafka lists for every topic
        _def("remote.log.copy.disable", CONFIG_TYPE_BOOLEAN, "false", _boolean),
        _def("remote.log.delete.on.disable", CONFIG_TYPE_BOOLEAN, "false", _boolean),
        _def("remote.storage.enable", CONFIG_TYPE_BOOLEAN, "false", _boolean),
        _def(
            "retention.bytes",
            CONFIG_TYPE_LONG,
            "-1",
            _number(int),
            "log.retention.bytes",
            lambda c: str(c.log_retention_bytes),
        ),
        _def(
            "retention.ms",
            CONFIG_TYPE_LONG,
            "604800000",
            _number(int, -1),
            "log.retention.ms",
            lambda c: str(c.log_retention_ms),
        ),
        _def(
            "segment.bytes",
            CONFIG_TYPE_INT,
            "1073741824",
            _number(int, 14, INT32_MAX),
            "log.segment.bytes",
            lambda c: str(c.log_segment_bytes),
        ),
        _def(
            "segment.index.bytes",
            CONFIG_TYPE_INT,
            "10485760",
            _number(int, 4, INT32_MAX),
            "log.index.size.max.bytes",
        ),
        _def("segment.jitter.ms", CONFIG_TYPE_LONG, "0", _number(int, 0), "log.roll.jitter.ms"),
        _def("segment.ms", CONFIG_TYPE_LONG, "604800000", _number(int, 1), "log.roll.ms"),
        _def(
            "unclean.leader.election.enable",
            CONFIG_TYPE_BOOLEAN,
            "false",
            _boolean,
            "unclean.leader.election.enable",
            lambda c: str(c.unclean_leader_election_enable).lower(),
        ),
    )
}

# What pykraft acts on (the rest are checked, stored and described).
APPLIED: Final[frozenset[str]] = frozenset(
    {
        "cleanup.policy",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.type",
        "compression.zstd.level",
        "delete.retention.ms",
        "follower.replication.throttled.replicas",
        "index.interval.bytes",
        "leader.replication.throttled.replicas",
        "max.message.bytes",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.type",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "min.insync.replicas",
        "retention.bytes",
        "retention.ms",
        "segment.bytes",
        "segment.index.bytes",
        "segment.ms",
    }
)

# Values pykraft refuses although Kafka takes them: a clear INVALID_CONFIG instead of a setting that
# would be stored and silently not honoured.
_UNSUPPORTED: Final[dict[tuple[str, str], str]] = {
    ("remote.storage.enable", "true"): "tiered storage (KIP-405) is not supported",
}


def check_topic_config(name: str, value: str | None) -> str | None:
    """Kafka's INVALID_CONFIG message for setting ``name`` to ``value``, or None when it may be set.
    ``value`` None (a delete) is fine for any known name."""
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return None
    problem = definition.check(value)
    if problem is None:
        unsupported = _UNSUPPORTED.get(
            (name, value.strip().lower() if definition.config_type == CONFIG_TYPE_BOOLEAN else value.strip())
        )
        if unsupported is not None:
            problem = unsupported
    return None if problem is None else f"Invalid value {value} for configuration {name}: {problem}"


LEADER_REPLICATION_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_REPLICATION_THROTTLED_RATE: Final = "follower.replication.throttled.rate"
# Dynamic broker configs that are no topic's default (Kafka's DynamicConfig.Broker): the replication
# throttles' rates in bytes/s (Long.MAX_VALUE, unthrottled, by default), defined as their own synonym.
BROKER_ONLY_CONFIGS: Final[dict[str, TopicConfigDef]] = {
    name: _def(name, CONFIG_TYPE_LONG, str(INT64_MAX), _number(int, 0), name)
    for name in (LEADER_REPLICATION_THROTTLED_RATE, FOLLOWER_REPLICATION_THROTTLED_RATE)
}

# Broker config name -> the topic config it is the default of, for those a broker applies dynamically.
DYNAMIC_BROKER_CONFIGS: Final[dict[str, TopicConfigDef]] = {
    **{
        definition.broker_synonym: definition
        for definition in TOPIC_CONFIGS.values()
        if definition.broker_synonym is not None and definition.name in APPLIED
    },
    **BROKER_ONLY_CONFIGS,
}


def check_broker_config(name: str, value: str | None) -> tuple[bool, str | None]:
    """``(dynamic, problem)``: whether ``name`` may be set dynamically at all (Kafka answers
    INVALID_REQUEST otherwise) and Kafka's INVALID_CONFIG message for ``value`` (None: fine)."""
    definition = DYNAMIC_BROKER_CONFIGS.get(name)
    if definition is None:
        return False, f"Cannot update these configs dynamically: {name}"
    if value is None:
        return True, None
    problem = definition.check(value)
    return True, None if problem is None else f"Invalid value {value} for configuration {name}: {problem}"


def topic_names_of_broker_configs(values: Mapping[str, str]) -> dict[str, str]:
    """Dynamic broker configs as the topic configs they are defaults of."""
    return {
        DYNAMIC_BROKER_CONFIGS[name].name: value
        for name, value in values.items()
        if name in DYNAMIC_BROKER_CONFIGS and name not in BROKER_ONLY_CONFIGS
    }


def check_topic_configs(configs: Mapping[str, str | None]) -> str | None:
    """The first problem (sorted by name) of a set of topic configs, or None."""
    for name in sorted(configs):
        problem = check_topic_config(name, configs[name])
        if problem is not None:
            return problem
    return None


@dataclass(frozen=True, slots=True)
class EffectiveConfig:
    name: str
    value: str
    source: int
    config_type: int
    default: str
    broker_synonym: str | None


def broker_level_values(
    definition: TopicConfigDef,
    config: NodeConfig,
    dynamic_default: Mapping[str, str],
    dynamic_broker: Mapping[str, str],
) -> list[tuple[str, str, int]]:
    """``(broker config name, value, source)`` a topic without its own value could take, the one that
    applies first (Kafka's synonyms, most specific first; the last is always Kafka's default)."""
    out: list[tuple[str, str, int]] = []
    synonym = definition.broker_synonym
    if synonym is not None:
        if synonym in dynamic_broker:
            out.append((synonym, dynamic_broker[synonym], SOURCE_DYNAMIC_BROKER_CONFIG))
        if synonym in dynamic_default:
            out.append((synonym, dynamic_default[synonym], SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG))
        if definition.broker_value is not None and definition.broker_value(config) != definition.default:
            out.append((synonym, definition.broker_value(config), SOURCE_STATIC_BROKER_CONFIG))
    out.append((synonym or definition.name, definition.default, SOURCE_DEFAULT_CONFIG))
    return out


def effective_topic_configs(
    overrides: Mapping[str, str],
    config: NodeConfig,
    dynamic_default: Mapping[str, str] | None = None,
    dynamic_broker: Mapping[str, str] | None = None,
) -> dict[str, EffectiveConfig]:
    """Every topic config's value for a topic with ``overrides``, and where it comes from."""
    result: dict[str, EffectiveConfig] = {}
    for name, definition in TOPIC_CONFIGS.items():
        if name in overrides:
            value, source = overrides[name], SOURCE_DYNAMIC_TOPIC_CONFIG
        else:
            _, value, source = broker_level_values(
                definition, config, dynamic_default or {}, dynamic_broker or {}
            )[0]
        result[name] = EffectiveConfig(
            name, value, source, definition.config_type, definition.default, definition.broker_synonym
        )
    return result
