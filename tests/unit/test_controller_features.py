"""FeatureControlManager's UpdateFeatures rules through QuorumController (issue 30 item 5): Kafka 4's
FeatureControlManager.updateFeatures — supported ranges of this controller and every registered broker,
downgrades only when asked for, metadata.version downgrades refused across a level that changed the
metadata (safe or unsafe), validate_only writing nothing, and the first failure failing the request."""

from __future__ import annotations

import random
import uuid

import pytest

from pykraft.controller.features import (
    FeatureControlManager,
    FeatureUpdate,
    UpgradeType,
    metadata_changed_between,
)
from pykraft.controller.quorum_controller import QuorumController
from pykraft.core.errors import ErrorCode
from pykraft.metadata.image import BrokerEndpoint, BrokerFeature
from pykraft.metadata.records import FeatureLevelRecord, MetadataVersion

LISTENERS = [BrokerEndpoint("PLAINTEXT", "localhost", 9092, 0)]
MV = MetadataVersion.FEATURE_NAME


@pytest.fixture
def controller() -> QuorumController:
    controller = QuorumController(rng=random.Random(3))
    controller.activate()
    for record in controller.feature_control.generate_bootstrap_records(MetadataVersion.LATEST_PRODUCTION):
        controller.replay(record, controller.next_write_offset)
    assert controller.feature_control.metadata_version == 21
    return controller


def _levels(result: object) -> list[tuple[str, int]]:
    return [(r.message.name, r.message.feature_level) for r in result.records]  # type: ignore[attr-defined]


def test_metadata_version__safe_downgrade_without_metadata_change__written(
    controller: QuorumController,
) -> None:
    result = controller.update_features([FeatureUpdate(MV, 18, UpgradeType.SAFE_DOWNGRADE)])
    assert result.response.error_code is ErrorCode.NONE
    assert _levels(result) == [(MV, 18)]
    assert controller.feature_control.metadata_version == 18
    upgrade = controller.update_features([FeatureUpdate(MV, 21)])
    assert (upgrade.response.error_code, _levels(upgrade)) == (ErrorCode.NONE, [(MV, 21)])


@pytest.mark.parametrize(
    ("upgrade_type", "why"),
    [
        (UpgradeType.SAFE_DOWNGRADE, "Refusing to perform the requested downgrade because it might delete"),
        (UpgradeType.UNSAFE_DOWNGRADE, "Unsafe metadata downgrade is not supported in this version."),
    ],
)
def test_metadata_version__downgrade_across_a_metadata_change__refused(
    controller: QuorumController, upgrade_type: UpgradeType, why: str
) -> None:
    # 3.7-IV2 (17) added directory assignment: going to 16 could drop it (MetadataVersion.didMetadataChange).
    result = controller.update_features([FeatureUpdate(MV, 16, upgrade_type)])
    assert result.response.error_code is ErrorCode.INVALID_UPDATE_VERSION
    assert result.response.error_message.startswith("Unsupported metadata.version downgrade from 21 to 16. ")
    assert why in result.response.error_message
    assert result.records == []
    assert controller.feature_control.metadata_version == 21


def test_downgrade_without_a_downgrade_type__refused(controller: QuorumController) -> None:
    result = controller.update_features([FeatureUpdate(MV, 20)])
    assert result.response.error_code is ErrorCode.INVALID_UPDATE_VERSION
    assert (
        "without setting the upgrade type to either safe or unsafe downgrade" in result.response.error_message
    )
    # A "downgrade" to a newer level is refused too; to the same level it is no change at all.
    newer = controller.update_features([FeatureUpdate(MV, 21, UpgradeType.SAFE_DOWNGRADE)])
    assert newer.response.error_code is ErrorCode.NONE
    controller.feature_control.restore({MV: 18})
    upward = controller.update_features([FeatureUpdate(MV, 21, UpgradeType.SAFE_DOWNGRADE)])
    assert upward.response.error_message.endswith("Can't downgrade to a newer version.")


def test_outside_supported_ranges__refused_with_kafkas_reasons(controller: QuorumController) -> None:
    unknown = controller.update_features([FeatureUpdate(MV, 22)])
    assert unknown.response.error_message == (
        "Invalid update version 22 for feature metadata.version. Local controller 0 only supports versions 7-21"
    )
    txn = controller.update_features([FeatureUpdate("transaction.version", 1)])
    assert txn.response.error_message == (
        "Invalid update version 1 for feature transaction.version. Local controller 0 does not support this feature."
    )
    assert (
        controller.update_features([FeatureUpdate(MV, -1)]).response.error_code
        is ErrorCode.INVALID_UPDATE_VERSION
    )
    unknown_type = controller.update_features([FeatureUpdate(MV, 21, UpgradeType.UNKNOWN)])
    assert "does not support the given upgrade type" in unknown_type.response.error_message


def test_a_registered_brokers_range__limits_the_update(controller: QuorumController) -> None:
    features = [BrokerFeature(MV, 7, 21)]
    controller.register_broker(4, uuid.uuid4(), LISTENERS, None, now_ms=0, supported_features=features)
    controller.feature_control.restore({MV: 17})
    result = controller.update_features([FeatureUpdate(MV, 21)])
    assert result.response.error_code is ErrorCode.NONE
    controller.feature_control.restore({MV: 17})
    controller.register_broker(
        5, uuid.uuid4(), LISTENERS, None, now_ms=0, supported_features=[BrokerFeature(MV, 7, 19)]
    )
    result = controller.update_features([FeatureUpdate(MV, 21)])
    assert result.response.error_message == (
        "Invalid update version 21 for feature metadata.version. Broker 5 only supports versions 7-19"
    )
    assert result.records == []


def test_validate_only__answers_without_records(controller: QuorumController) -> None:
    result = controller.update_features(
        [FeatureUpdate(MV, 20, UpgradeType.SAFE_DOWNGRADE)], validate_only=True
    )
    assert (result.response.error_code, result.records) == (ErrorCode.NONE, [])
    assert controller.feature_control.metadata_version == 21


def test_other_features__written_removed_at_zero_and_all_or_nothing() -> None:
    manager = FeatureControlManager(1, {MV: (7, 21), "transaction.version": (0, 2)})
    manager.replay(FeatureLevelRecord(name=MV, feature_level=21))
    records, error = manager.update_features([FeatureUpdate("transaction.version", 2)], {}, False)
    assert error.error_code is ErrorCode.NONE
    for record in records:
        manager.replay(record.message)
    assert manager.finalized_versions() == {MV: 21, "transaction.version": 2}
    # One bad update fails the request: no records for the good one either (response v2's top-level error).
    records, error = manager.update_features(
        [FeatureUpdate("transaction.version", 0, UpgradeType.SAFE_DOWNGRADE), FeatureUpdate(MV, 99)],
        {},
        False,
    )
    assert (records, error.error_code) == ([], ErrorCode.INVALID_UPDATE_VERSION)
    records, error = manager.update_features(
        [FeatureUpdate("transaction.version", 0, UpgradeType.SAFE_DOWNGRADE)], {}, False
    )
    for record in records:
        manager.replay(record.message)
    assert manager.finalized_versions() == {MV: 21}


def test_metadata_changed_between__kafkas_did_metadata_change_levels() -> None:
    assert not metadata_changed_between(21, 17)  # 18-21 changed nothing
    assert metadata_changed_between(21, 16)  # 17 (3.7-IV2, JBOD) did
    assert metadata_changed_between(16, 21)
    assert not metadata_changed_between(21, 21)


def test_register__finalized_level_outside_the_brokers_range__unsupported_version(
    controller: QuorumController,
) -> None:
    """ClusterControlManager.registerBroker: a broker that cannot run a finalized level is refused."""
    controller.feature_control.restore({MV: 21, "transaction.version": 1})
    result = controller.register_broker(
        1, uuid.uuid4(), LISTENERS, None, now_ms=0, supported_features=[BrokerFeature(MV, 7, 21)]
    )
    assert result.response.error_code is ErrorCode.UNSUPPORTED_VERSION
    assert "does not support finalized version 1 of transaction.version" in result.response.error_message
    assert result.records == []
