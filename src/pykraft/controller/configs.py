"""ConfigurationControlManager: explicitly set configs per resource (ConfigRecord).

Rules: a ConfigRecord with a null Value deletes the key; removing a topic deletes its configs (Kafka
ReplicationControlManager.replay(RemoveTopicRecord) -> deleteTopicConfigs). Replay is the only mutation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pykraft.metadata.image import CONFIG_RESOURCE_TYPE_TOPIC, ConfigResource
from pykraft.metadata.records import ApiMessageAndVersion, ConfigRecord


class ConfigurationControlManager:
    def __init__(self) -> None:
        self._configs: dict[ConfigResource, dict[str, str]] = {}

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
