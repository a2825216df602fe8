"""FeatureControlManager: finalized feature levels, metadata.version first among them (KIP-584, KIP-778).

Rules: ``metadata.version`` is written as a FeatureLevelRecord (Kafka FeatureControlManager); a fresh
cluster's first active controller writes it in its bootstrap records (QuorumController.bootstrap_records).
Level 0 of any other feature removes it. Replay is the only mutation.

UpdateFeatures (57) follows Kafka 4's FeatureControlManager.updateFeatures: the updates are checked one by
one against this node's supported range and every registered broker's, a downgrade needs a safe or unsafe
upgrade type, a metadata.version downgrade is refused when a level in between changed the metadata
(MetadataVersion.checkIfMetadataChanged; unsafe downgrades are "not supported in this version", as in
Kafka 4), and the first failure fails the whole request without records (response v2's top-level error).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final

from pykraft.core.errors import ErrorCode
from pykraft.metadata.records import ApiMessageAndVersion, FeatureLevelRecord, MetadataVersion

KRAFT_VERSION: Final = "kraft.version"
TRANSACTION_VERSION: Final = "transaction.version"
GROUP_VERSION: Final = "group.version"

# The levels this software runs, by feature (Kafka BrokerFeatures / QuorumFeatures.defaultSupportedFeatureMap).
# metadata.version from Kafka 4's MINIMUM_VERSION (3.3-IV3) to the level pykraft bootstraps. The others
# stay at 0: kraft.version 1 is KIP-853's dynamic quorum; transaction.version 1+ writes the KIP-890 part 2
# log format and EndTxn v5 (not served); group.version 1 depends on metadata.version 4.0-IV0 (Kafka
# GroupVersion.GV_1), above what pykraft writes. A feature absent from the map is supported at 0 only.
SUPPORTED_FEATURES: Final[Mapping[str, tuple[int, int]]] = {
    MetadataVersion.FEATURE_NAME: (MetadataVersion.IBP_3_3_IV3, MetadataVersion.LATEST_PRODUCTION),
    KRAFT_VERSION: (0, 0),
    TRANSACTION_VERSION: (0, 0),
    GROUP_VERSION: (0, 0),
}

# Kafka MetadataVersion.didMetadataChange, by feature level (3.3-IV3 .. 3.9-IV0): a level whose records
# an older one cannot read; downgrading across one of them could lose metadata.
_METADATA_CHANGED_AT: Final = frozenset({7, 8, 11, 13, 14, 15, 17})


def metadata_changed_between(current_level: int, new_level: int) -> bool:
    """Kafka MetadataVersion.checkIfMetadataChanged: does any level in (low, high] change metadata?"""
    low, high = sorted((current_level, new_level))
    return any(level in _METADATA_CHANGED_AT for level in range(low + 1, high + 1))


class UpgradeType(IntEnum):
    """UpdateFeaturesRequest.FeatureUpdates[].UpgradeType (Kafka FeatureUpdate.UpgradeType)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    """One UpdateFeatures entry: ``max_version_level`` for ``feature``, and how."""

    feature: str
    max_version_level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@dataclass(frozen=True, slots=True)
class FeatureUpdateError:
    """The answer to an UpdateFeatures request: NONE, or the first update's failure."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


class FeatureControlManager:
    def __init__(
        self, node_id: int = 0, supported_features: Mapping[str, tuple[int, int]] = SUPPORTED_FEATURES
    ) -> None:
        self._node_id = node_id  # named in refusals: "Local controller <id> does not support ..."
        self._finalized_versions: dict[str, int] = {}
        self._supported_features = dict(supported_features)

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

    def update_features(
        self,
        updates: list[FeatureUpdate],
        broker_features: Mapping[int, Mapping[str, tuple[int, int]]],
        validate_only: bool,
    ) -> tuple[list[ApiMessageAndVersion], FeatureUpdateError]:
        """UpdateFeatures (57): the FeatureLevelRecords, or none and the first update's error.
        ``broker_features``: each registered broker's supported ranges (RegisterBrokerRecord.Features)."""
        records: list[ApiMessageAndVersion] = []
        for update in updates:
            error = self._update_feature(update, broker_features)
            if error is not None:
                return [], FeatureUpdateError(ErrorCode.INVALID_UPDATE_VERSION, error)
            records.append(
                ApiMessageAndVersion.of(
                    FeatureLevelRecord(name=update.feature, feature_level=update.max_version_level)
                )
            )
        return ([] if validate_only else records), FeatureUpdateError()

    def _update_feature(
        self, update: FeatureUpdate, broker_features: Mapping[int, Mapping[str, tuple[int, int]]]
    ) -> str | None:
        name, new_level, upgrade_type = update.feature, update.max_version_level, update.upgrade_type
        prefix = f"Invalid update version {new_level} for feature {name}."
        if upgrade_type not in (
            UpgradeType.UPGRADE,
            UpgradeType.SAFE_DOWNGRADE,
            UpgradeType.UNSAFE_DOWNGRADE,
        ):
            return f"{prefix} The controller does not support the given upgrade type."
        current_level = self._finalized_versions.get(name, 0)
        if new_level < 0:
            return f"{prefix} A feature version cannot be less than 0."
        # Kafka FeatureControlManager.reasonNotSupported: this controller, then every registered broker.
        reason = _reason_not_supported(
            new_level, f"Local controller {self._node_id}", self._supported_features.get(name)
        )
        for broker_id, features in sorted(broker_features.items()):
            reason = reason or _reason_not_supported(new_level, f"Broker {broker_id}", features.get(name))
        if reason is not None:
            return f"{prefix} {reason}"
        if new_level < current_level and upgrade_type == UpgradeType.UPGRADE:
            return (
                f"{prefix} Can't downgrade the version of this feature without setting the upgrade type "
                "to either safe or unsafe downgrade."
            )
        if new_level > current_level and upgrade_type != UpgradeType.UPGRADE:
            return f"{prefix} Can't downgrade to a newer version."
        if name == MetadataVersion.FEATURE_NAME and metadata_changed_between(current_level, new_level):
            if new_level < current_level:
                why = (
                    "Unsafe metadata downgrade is not supported in this version."
                    if upgrade_type == UpgradeType.UNSAFE_DOWNGRADE
                    else "Refusing to perform the requested downgrade because it might delete metadata "
                    "information."
                )
                return f"Unsupported metadata.version downgrade from {current_level} to {new_level}. {why}"
        return None

    def restore(self, finalized_versions: dict[str, int]) -> None:
        """Set the saved state (AbortTransactionRecord, and QuorumController.load_image)."""
        self._finalized_versions = dict(finalized_versions)

    def replay(self, record: Any) -> None:
        if record.feature_level == 0 and record.name != MetadataVersion.FEATURE_NAME:
            self._finalized_versions.pop(record.name, None)
        else:
            self._finalized_versions[record.name] = record.feature_level


def _reason_not_supported(level: int, what: str, supported: tuple[int, int] | None) -> str | None:
    """Kafka QuorumFeatures.reasonNotSupported; a feature not listed is supported at level 0 only."""
    low, high = supported if supported is not None else (0, 0)
    if low <= level <= high:
        return None
    if high == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {low}-{high}"
