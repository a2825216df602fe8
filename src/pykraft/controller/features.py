"""FeatureControlManager: finalized feature levels, metadata.version first among them.

Rules: ``metadata.version`` is written as a FeatureLevelRecord (Kafka FeatureControlManager); a fresh
cluster's first active controller writes it in its bootstrap records (QuorumController.bootstrap_records).
Level 0 of any other feature removes it. Replay is the only mutation.
"""

from __future__ import annotations

from typing import Any

from pykraft.metadata.records import ApiMessageAndVersion, FeatureLevelRecord, MetadataVersion


class FeatureControlManager:
    def __init__(self) -> None:
        self._finalized_versions: dict[str, int] = {}

    @property
    def metadata_version(self) -> int:
        """The finalized metadata.version level; 0 until a FeatureLevelRecord for it was replayed."""
        return self._finalized_versions.get(MetadataVersion.FEATURE_NAME, 0)

    def finalized_versions(self) -> dict[str, int]:
        return dict(self._finalized_versions)

    def generate_bootstrap_records(self, metadata_version: int) -> list[ApiMessageAndVersion]:
        """The records that set ``metadata.version`` on an empty log (Kafka BootstrapMetadata)."""
        assert metadata_version > 0, "KRaft needs a metadata.version level of at least 1"
        record = FeatureLevelRecord(name=MetadataVersion.FEATURE_NAME, feature_level=metadata_version)
        return [ApiMessageAndVersion.of(record)]

    def restore(self, finalized_versions: dict[str, int]) -> None:
        """Set the saved state (AbortTransactionRecord, and QuorumController.load_image)."""
        self._finalized_versions = dict(finalized_versions)

    def replay(self, record: Any) -> None:
        if record.feature_level == 0 and record.name != MetadataVersion.FEATURE_NAME:
            self._finalized_versions.pop(record.name, None)
        else:
            self._finalized_versions[record.name] = record.feature_level
