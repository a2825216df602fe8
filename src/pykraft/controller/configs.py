"""ConfigurationControlManager: explicitly set configs per resource (ConfigRecord).

Rules: a ConfigRecord with a null Value deletes the key; removing a topic deletes its configs (Kafka
ReplicationControlManager.replay(RemoveTopicRecord) -> deleteTopicConfigs). Replay is the only mutation.

IncrementalAlterConfigs (44, KIP-339: SET, DELETE, APPEND, SUBTRACT per key) and AlterConfigs (33: the
resource's whole set, anything not named is deleted) generate ConfigRecords for topics and for dynamic
broker configs (KIP-226: resource ``"<broker id>"`` or ``""`` for every broker), all of a resource's
changes or none, checked as Kafka's ConfigurationControlManager does (unknown topic config names and
bad values are INVALID_CONFIG, a broker config that is not dynamic INVALID_REQUEST, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION); ``validate_only`` checks and generates nothing. Group configs (resource
type 32, KIP-848) may be set on any group name, existing or not; the group's whole resulting set is
checked against the controller's group coordinator settings, as Kafka's ControllerConfigurationValidator
does with GroupConfigManager.validate (core/group_configs.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from pykraft.core.errors import ErrorCode
from pykraft.core.group_configs import (
    GROUP_CONFIGS,
    KAFKA_GROUP_COORDINATOR_SETTINGS,
    GroupConfigDef,
    check_group_config_name,
    check_group_configs,
)
from pykraft.core.topic_configs import (
    CONFIG_TYPE_LIST,
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    TopicConfigDef,
    check_broker_config,
    check_topic_config,
)
from pykraft.metadata.image import (
    CONFIG_RESOURCE_TYPE_GROUP,
    CONFIG_RESOURCE_TYPE_TOPIC,
    ConfigResource,
)
from pykraft.metadata.records import ApiMessageAndVersion, ConfigRecord

CONFIG_RESOURCE_TYPE_BROKER = 4


class AlterConfigOp(IntEnum):
    """IncrementalAlterConfigs' ConfigOperation (AlterConfigOp.OpType)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigAlteration:
    """One resource's changes: (name, operation, value) per key; AlterConfigs is SET of every key
    given plus DELETE of every other key the resource has (``replace_all``)."""

    resource: ConfigResource
    # (name, AlterConfigOp as the request carries it, value)
    changes: Sequence[tuple[str, int, str | None]]
    replace_all: bool = False


@dataclass(frozen=True, slots=True)
class ConfigAlterationResult:
    resource: ConfigResource
    error_code: ErrorCode
    error_message: str | None = None


class ConfigurationControlManager:
    def __init__(self, group_settings: Mapping[str, int] = KAFKA_GROUP_COORDINATOR_SETTINGS) -> None:
        self._configs: dict[ConfigResource, dict[str, str]] = {}
        # The group.consumer.* (...) settings group configs are checked against (core/group_configs.py).
        self._group_settings = dict(group_settings)

    def configs(self) -> dict[ConfigResource, dict[str, str]]:
        return {resource: dict(values) for resource, values in self._configs.items()}

    def configs_for(self, resource: ConfigResource) -> dict[str, str]:
        return dict(self._configs.get(resource, {}))

    def generate_topic_config_records(
        self, topic_name: str, configs: Mapping[str, str]
    ) -> list[ApiMessageAndVersion]:
        """One ConfigRecord per key (sorted, so the log is deterministic)."""
        return [
            ApiMessageAndVersion.of(
                ConfigRecord(
                    resource_type=CONFIG_RESOURCE_TYPE_TOPIC,
                    resource_name=topic_name,
                    name=key,
                    value=configs[key],
                )
            )
            for key in sorted(configs)
        ]

    def alter(
        self,
        alterations: Sequence[ConfigAlteration],
        topic_exists: Callable[[str], bool],
        validate_only: bool,
    ) -> tuple[list[ApiMessageAndVersion], list[ConfigAlterationResult]]:
        records: list[ApiMessageAndVersion] = []
        results: list[ConfigAlterationResult] = []
        seen: set[ConfigResource] = set()
        for alteration in alterations:
            resource = alteration.resource
            if resource in seen:
                results.append(
                    ConfigAlterationResult(
                        resource, ErrorCode.INVALID_REQUEST, "Duplicate resource in the request"
                    )
                )
                continue
            seen.add(resource)
            error, message, generated = self._alter_one(alteration, topic_exists)
            results.append(ConfigAlterationResult(resource, error, message))
            if error == ErrorCode.NONE and not validate_only:
                records.extend(generated)
        return records, results

    def _alter_one(
        self, alteration: ConfigAlteration, topic_exists: Callable[[str], bool]
    ) -> tuple[ErrorCode, str | None, list[ApiMessageAndVersion]]:
        resource = alteration.resource
        broker = resource.resource_type == CONFIG_RESOURCE_TYPE_BROKER
        group = resource.resource_type == CONFIG_RESOURCE_TYPE_GROUP
        if broker:
            name = resource.resource_name
            if name and not (name.isdigit() and name.isascii()):
                return ErrorCode.INVALID_REQUEST, f"Invalid broker name {name!r}: not a broker id or ''", []
        elif group:
            if not resource.resource_name:
                return ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.", []
        elif resource.resource_type != CONFIG_RESOURCE_TYPE_TOPIC:
            return ErrorCode.INVALID_REQUEST, f"Unexpected resource type {resource.resource_type}", []
        elif not topic_exists(resource.resource_name):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.resource_name} does not exist", []
        names = [name for name, _op, _value in alteration.changes]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            return ErrorCode.INVALID_REQUEST, f"Duplicate config keys: {', '.join(duplicated)}", []
        current = self.configs_for(resource)
        wanted = dict(current) if not alteration.replace_all else {}
        for name, op_code, value in alteration.changes:
            try:
                op = AlterConfigOp(op_code)
            except ValueError:
                return ErrorCode.INVALID_REQUEST, f"Unknown config operation {op_code} for {name}", []
            definition: TopicConfigDef | GroupConfigDef | None
            if group:
                unknown = check_group_config_name(name)
                if unknown is not None:
                    return ErrorCode.INVALID_CONFIG, unknown, []
                definition = GROUP_CONFIGS[name]
            elif broker:
                definition = DYNAMIC_BROKER_CONFIGS.get(name)
                if definition is None and op == AlterConfigOp.DELETE:
                    # Kafka's ConfigAdminManager.prepareIncrementalConfigs removes a deleted name
                    # before DynamicBrokerConfig validates what is left: clearing a broker config that
                    # is not set succeeds (kafka-reassign-partitions --verify clears the replication
                    # throttle rates, which pykraft does not apply, on every broker).
                    wanted.pop(name, None)
                    continue
                if definition is None:
                    return ErrorCode.INVALID_REQUEST, check_broker_config(name, None)[1], []
            else:
                definition = TOPIC_CONFIGS.get(name)
                if definition is None:
                    return ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}", []
            if (
                op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT)
                and definition.config_type != CONFIG_TYPE_LIST
            ):
                return (
                    ErrorCode.INVALID_CONFIG,
                    f"Config value append/subtract is not allowed for config key {name} (not a list)",
                    [],
                )
            if op == AlterConfigOp.DELETE:
                wanted.pop(name, None)
                continue
            if value is None:
                return ErrorCode.INVALID_CONFIG, f"Null value not supported for: {name}", []
            if op == AlterConfigOp.SET:
                wanted[name] = value
                continue
            base = current.get(name, definition.default)
            items = [item.strip() for item in base.split(",") if item.strip()]
            given = [item.strip() for item in value.split(",") if item.strip()]
            if op == AlterConfigOp.APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            wanted[name] = ",".join(items)
        if group:
            # The group's whole set over the broker's values (GroupConfigManager.validate).
            problem = check_group_configs(wanted, self._group_settings)
            if problem is not None:
                return ErrorCode.INVALID_CONFIG, problem, []
        else:
            for name in sorted(wanted):
                problem = (
                    check_broker_config(name, wanted[name])[1]
                    if broker
                    else check_topic_config(name, wanted[name])
                )
                if problem is not None and wanted[name] != current.get(name):
                    return ErrorCode.INVALID_CONFIG, problem, []
        records = [
            ApiMessageAndVersion.of(
                ConfigRecord(
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    name=name,
                    value=wanted.get(name),
                )
            )
            for name in sorted(set(current) | set(wanted))
            if wanted.get(name) != current.get(name)
        ]
        return ErrorCode.NONE, None, records

    def restore(self, configs: dict[ConfigResource, dict[str, str]]) -> None:
        """Set the saved state (AbortTransactionRecord, and QuorumController.load_image)."""
        self._configs = {resource: dict(values) for resource, values in configs.items()}

    def replay(self, record: Any) -> None:
        resource = ConfigResource(record.resource_type, record.resource_name)
        values = self._configs.setdefault(resource, {})
        if record.value is None:
            values.pop(record.name, None)
        else:
            values[record.name] = record.value
        if not values:
            del self._configs[resource]

    def delete_topic_configs(self, topic_name: str) -> None:
        self._configs.pop(ConfigResource(CONFIG_RESOURCE_TYPE_TOPIC, topic_name), None)
