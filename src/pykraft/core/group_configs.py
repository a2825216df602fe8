"""Kafka's group configs (ConfigResource type GROUP, KIP-848 / KIP-932 / KIP-1071): names, types, the
broker setting each one defaults to, and how a group's set of them is checked. Pure.

As Kafka 4.2's GroupConfig and GroupConfigManager: a group's configs are ConfigRecords of the resource
(32, group id), set whether or not the group exists, and kept when the group is deleted (they belong to
the metadata log, not to the group). A config the group does not set takes the broker's value
(``group.consumer.session.timeout.ms`` for ``consumer.session.timeout.ms``, ...); DescribeConfigs
says GROUP_CONFIG (8) for a value the group sets and DEFAULT_CONFIG otherwise. A change is checked on
the group's whole resulting set over the broker's values, as GroupConfigManager.validate does: an
unknown name, a value of the wrong type, a value outside the broker's
``group.consumer.min/max.*`` bounds, or a session timeout not above the heartbeat interval is
INVALID_CONFIG with Kafka's message.

pykraft's KIP-848 coordinator applies ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` per group, its share groups (KIP-932) the ``share.*`` ones; the
``streams.*`` ones are checked, stored and described (streams groups are not served), and their
broker-side defaults and bounds are Kafka's (pykraft reads the ``group.share.*`` ones, not
``group.streams.*``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from pykraft.core.config import NodeConfig
from pykraft.core.topic_configs import (
    CONFIG_TYPE_INT,
    CONFIG_TYPE_STRING,
    INT32_MAX,
    SOURCE_DEFAULT_CONFIG,
    _number,
    _one_of,
)

# DescribeConfigsResponse.ConfigSource.GROUP_CONFIG (the Admin client's DYNAMIC_GROUP_CONFIG).
SOURCE_GROUP_CONFIG = 8

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"

# Kafka's GroupCoordinatorConfig / ShareGroupConfig defaults of the broker settings group configs take
# (pykraft reads the group.consumer.* ones from server.properties: group_coordinator_settings).
KAFKA_GROUP_COORDINATOR_SETTINGS: Final[dict[str, int]] = {
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.min.session.timeout.ms": 45000,
    "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.min.heartbeat.interval.ms": 5000,
    "group.consumer.max.heartbeat.interval.ms": 15000,
    "group.share.session.timeout.ms": 45000,
    "group.share.min.session.timeout.ms": 45000,
    "group.share.max.session.timeout.ms": 60000,
    "group.share.heartbeat.interval.ms": 5000,
    "group.share.min.heartbeat.interval.ms": 5000,
    "group.share.max.heartbeat.interval.ms": 15000,
    "group.share.record.lock.duration.ms": 30000,
    "group.share.min.record.lock.duration.ms": 15000,
    "group.share.max.record.lock.duration.ms": 60000,
    "group.streams.session.timeout.ms": 45000,
    "group.streams.min.session.timeout.ms": 45000,
    "group.streams.max.session.timeout.ms": 60000,
    "group.streams.heartbeat.interval.ms": 5000,
    "group.streams.min.heartbeat.interval.ms": 5000,
    "group.streams.max.heartbeat.interval.ms": 15000,
    "group.streams.num.standby.replicas": 0,
    "group.streams.max.standby.replicas": 2,
    "group.streams.initial.rebalance.delay.ms": 3000,
}


def group_coordinator_settings(config: NodeConfig) -> dict[str, int]:
    """The broker settings group configs default to and are bounded by, by their Kafka names: this
    node's group.consumer.* and group.share.* ones, Kafka's defaults for streams groups."""
    return {
        **KAFKA_GROUP_COORDINATOR_SETTINGS,
        "group.consumer.session.timeout.ms": config.group_consumer_session_timeout_ms,
        "group.consumer.min.session.timeout.ms": config.group_consumer_min_session_timeout_ms,
        "group.consumer.max.session.timeout.ms": config.group_consumer_max_session_timeout_ms,
        "group.consumer.heartbeat.interval.ms": config.group_consumer_heartbeat_interval_ms,
        "group.consumer.min.heartbeat.interval.ms": config.group_consumer_min_heartbeat_interval_ms,
        "group.consumer.max.heartbeat.interval.ms": config.group_consumer_max_heartbeat_interval_ms,
        "group.share.session.timeout.ms": config.group_share_session_timeout_ms,
        "group.share.min.session.timeout.ms": config.group_share_min_session_timeout_ms,
        "group.share.max.session.timeout.ms": config.group_share_max_session_timeout_ms,
        "group.share.heartbeat.interval.ms": config.group_share_heartbeat_interval_ms,
        "group.share.min.heartbeat.interval.ms": config.group_share_min_heartbeat_interval_ms,
        "group.share.max.heartbeat.interval.ms": config.group_share_max_heartbeat_interval_ms,
        "group.share.record.lock.duration.ms": config.group_share_record_lock_duration_ms,
        "group.share.min.record.lock.duration.ms": config.group_share_min_record_lock_duration_ms,
        "group.share.max.record.lock.duration.ms": config.group_share_max_record_lock_duration_ms,
    }


# Java's Duration.parse (ISO-8601 PnDTnHnMn.nS), for share.auto.offset.reset's by_duration:.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def duration_ns(text: str) -> int | None:
    """Java's Duration.parse in nanoseconds, or None when ``text`` is not one."""
    match = _DURATION.fullmatch(text)
    if match is None or match.group(3) == "T" or not any(match.group(2, 4, 5, 6)):
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in match.group(2, 4, 5, 6))
    fraction_ns = int((match.group(7) or "").ljust(9, "0"))
    if (match.group(6) or "").startswith("-"):
        fraction_ns = -fraction_ns
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    return (-1 if match.group(1) == "-" else 1) * (total * 1_000_000_000 + fraction_ns)


def _share_auto_offset_reset(value: str) -> str | None:
    """ShareGroupAutoOffsetResetStrategy.Validator: earliest, latest or by_duration:<ISO-8601>, not
    negative."""
    text = value.strip().lower()
    if text in ("earliest", "latest"):
        return None
    if text.startswith("by_duration:"):
        duration = duration_ns(value.strip()[len("by_duration:") :])
        if duration is not None and duration >= 0:
            return None
    return (
        f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be either "
        "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
    )


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    config_type: int
    check: Callable[[str], str | None]
    # The broker setting a group without its own value takes (Kafka's extractGroupConfigMap), else
    # ``default`` (GroupConfig's own).
    broker_setting: str | None
    default: str = ""


def _int_at_least(minimum: int) -> Callable[[str], str | None]:
    return _number(int, minimum, INT32_MAX)


# In Kafka 4.2's GroupConfig order.
GROUP_CONFIGS: Final[dict[str, GroupConfigDef]] = {
    d.name: d
    for d in (
        GroupConfigDef(
            CONSUMER_SESSION_TIMEOUT_MS,
            CONFIG_TYPE_INT,
            _int_at_least(1),
            "group.consumer.session.timeout.ms",
        ),
        GroupConfigDef(
            CONSUMER_HEARTBEAT_INTERVAL_MS,
            CONFIG_TYPE_INT,
            _int_at_least(1),
            "group.consumer.heartbeat.interval.ms",
        ),
        GroupConfigDef(
            "share.session.timeout.ms", CONFIG_TYPE_INT, _int_at_least(1), "group.share.session.timeout.ms"
        ),
        GroupConfigDef(
            "share.heartbeat.interval.ms",
            CONFIG_TYPE_INT,
            _int_at_least(1),
            "group.share.heartbeat.interval.ms",
        ),
        GroupConfigDef(
            "share.record.lock.duration.ms",
            CONFIG_TYPE_INT,
            _int_at_least(1000),
            "group.share.record.lock.duration.ms",
        ),
        GroupConfigDef(
            "share.auto.offset.reset", CONFIG_TYPE_STRING, _share_auto_offset_reset, None, "latest"
        ),
        GroupConfigDef(
            "share.isolation.level",
            CONFIG_TYPE_STRING,
            _one_of("read_committed", "read_uncommitted"),
            None,
            "read_uncommitted",
        ),
        GroupConfigDef(
            "streams.session.timeout.ms",
            CONFIG_TYPE_INT,
            _int_at_least(1),
            "group.streams.session.timeout.ms",
        ),
        GroupConfigDef(
            "streams.heartbeat.interval.ms",
            CONFIG_TYPE_INT,
            _int_at_least(1),
            "group.streams.heartbeat.interval.ms",
        ),
        GroupConfigDef(
            "streams.num.standby.replicas",
            CONFIG_TYPE_INT,
            _int_at_least(0),
            "group.streams.num.standby.replicas",
        ),
        GroupConfigDef(
            "streams.initial.rebalance.delay.ms",
            CONFIG_TYPE_INT,
            _int_at_least(0),
            "group.streams.initial.rebalance.delay.ms",
        ),
    )
}

# GroupConfig.validateValues, in its order: (group config, broker lower bound, broker upper bound).
_BOUNDS: Final[tuple[tuple[str, str | None, str], ...]] = (
    (CONSUMER_HEARTBEAT_INTERVAL_MS, "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    (CONSUMER_SESSION_TIMEOUT_MS, "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    ("streams.heartbeat.interval.ms", "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    ("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
)  # fmt: skip
# ... then each session timeout must be above its heartbeat interval.
_SESSION_OVER_HEARTBEAT: Final[tuple[tuple[str, str], ...]] = (
    (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)


def _default(definition: GroupConfigDef, settings: Mapping[str, int]) -> str:
    if definition.broker_setting is not None and definition.broker_setting in settings:
        return str(settings[definition.broker_setting])
    return definition.default


def check_group_config_name(name: str) -> str | None:
    return None if name in GROUP_CONFIGS else f"Unknown group config name: {name}"


def check_group_configs(configs: Mapping[str, str], settings: Mapping[str, int]) -> str | None:
    """Kafka's INVALID_CONFIG message for a group whose own configs would be ``configs``, or None
    (GroupConfigManager.validate: the names, each value, then the whole set over the broker's
    values against the broker's bounds)."""
    for name in configs:
        problem = check_group_config_name(name)
        if problem is not None:
            return problem
    values: dict[str, str] = {}
    for name, definition in GROUP_CONFIGS.items():
        value = configs.get(name)
        if value is None:
            values[name] = _default(definition, settings)
            continue
        problem = definition.check(value)
        if problem is not None:
            # Kafka's ConfigException(name, value, why) wording.
            return f"Invalid value {value} for configuration {name}: {problem}"
        values[name] = value.strip()
    for name, lowest, highest in _BOUNDS:
        number = int(values[name])
        if lowest is not None and number < settings[lowest]:
            return f"{name} must be greater than or equal to {lowest}"
        if number > settings[highest]:
            return f"{name} must be less than or equal to {highest}"
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if int(values[session]) <= int(values[heartbeat]):
            return f"{session} must be greater than {heartbeat}"
    return None


@dataclass(frozen=True, slots=True)
class GroupConfigValue:
    name: str
    value: str
    source: int  # SOURCE_GROUP_CONFIG or topic_configs.SOURCE_DEFAULT_CONFIG
    config_type: int


def effective_group_configs(
    overrides: Mapping[str, str], settings: Mapping[str, int]
) -> list[GroupConfigValue]:
    """Every group config's value for a group with ``overrides`` and where it comes from (Kafka's
    ConfigHelper.createGroupConfigEntry)."""
    out = []
    for name, definition in GROUP_CONFIGS.items():
        if name in overrides:
            out.append(GroupConfigValue(name, overrides[name], SOURCE_GROUP_CONFIG, definition.config_type))
        else:
            out.append(
                GroupConfigValue(
                    name, _default(definition, settings), SOURCE_DEFAULT_CONFIG, definition.config_type
                )
            )
    return out


def group_config_int(overrides: Mapping[str, str], name: str, default: int) -> int:
    """A group's own value of an int config, else ``default`` (the broker's)."""
    value = overrides.get(name)
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        return default
