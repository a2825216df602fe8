"""UpdateFeatures (57, KIP-584/KIP-778) and ApiVersions' feature fields, as Kafka's ControllerApis answers.

The active controller decides (controller/features.py); a broker forwards the request (KafkaApis
forwards UpdateFeatures). Responses v0-1 repeat the top-level error for each feature asked about
(UpdateFeaturesResponse.createWithErrors); v2 carries the top-level error alone.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import UpdateFeaturesResponse

from pykraft.controller.features import SUPPORTED_FEATURES, FeatureUpdate, FeatureUpdateError, UpgradeType
from pykraft.core.errors import ErrorCode
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.messages import ApiVersionsFeatures


def feature_updates(request: Any, version: int) -> list[FeatureUpdate]:
    """The request's updates, the last one per feature winning (Kafka builds a map). v0's
    AllowDowngrade is a safe downgrade (UpdateFeaturesRequest.upgradeType)."""
    updates: dict[str, FeatureUpdate] = {}
    for item in request.feature_updates:
        if version == 0:
            upgrade_type = UpgradeType.SAFE_DOWNGRADE if item.allow_downgrade else UpgradeType.UPGRADE
        else:
            known = item.upgrade_type in UpgradeType._value2member_map_
            upgrade_type = UpgradeType(item.upgrade_type) if known else UpgradeType.UNKNOWN
        updates[item.feature] = FeatureUpdate(item.feature, item.max_version_level, upgrade_type)
    return list(updates.values())


def update_features_response(request: Any, version: int, error: FeatureUpdateError) -> Any:
    result = UpdateFeaturesResponse.UpdatableFeatureResult
    return UpdateFeaturesResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error.error_code,
        error_message=error.error_message,
        results=[]
        if version >= 2
        else [
            result(feature=name, error_code=error.error_code, error_message=error.error_message)
            for name in dict.fromkeys(item.feature for item in request.feature_updates)
        ],
    )


def update_features_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    return update_features_response(request, version, FeatureUpdateError(error, message))


def api_versions_features(image: MetadataImage) -> ApiVersionsFeatures:
    """What this node's ApiVersions reports: the levels it supports, and the finalized ones of its image
    with the image's offset as epoch (Kafka FinalizedFeatures; -1 before any metadata)."""
    return ApiVersionsFeatures(
        supported=dict(SUPPORTED_FEATURES),
        finalized=dict(image.features.finalized_versions),
        finalized_features_epoch=image.offset if image.features.finalized_versions else -1,
    )
