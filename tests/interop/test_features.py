"""Feature versions through real requests (issue 30 item 5, KIP-584/KIP-778): ApiVersions v3+ reports the
supported ranges and the finalized levels with their epoch, UpdateFeatures (57) v0-2 built from Kafka's
own schemas (kafka-python's classes) answers as Kafka's ControllerApis, kafka-python's admin client reads
and updates them, and ``pykraft features`` prints what kafka-features prints. One single node for the
module; the tests leave metadata.version at 3.9-IV0 (21)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from pykraft.cli import main
from pykraft.core.errors import ErrorCode
from pykraft.testing import RunningNode, running_node
from tests.raw_client import RawClient

pytestmark = pytest.mark.slow

MV = "metadata.version"


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node() as running:
        yield running


def _api_versions(address: str, version: int) -> ApiVersionsResponse:
    with RawClient(address) as client:
        return client.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1"),
            ApiVersionsResponse,
            version,
        )


def _update(
    address: str, version: int, *updates: tuple[str, int, int], validate_only: bool = False
) -> object:
    key = UpdateFeaturesRequest.FeatureUpdateKey
    request = UpdateFeaturesRequest(
        timeout_ms=5000,
        feature_updates=[
            key(feature=name, max_version_level=level, allow_downgrade=kind > 1, upgrade_type=kind)
            for name, level, kind in updates
        ],
        validate_only=validate_only,
    )
    with RawClient(address) as client:
        return client.request(request, UpdateFeaturesResponse, version)


@pytest.mark.parametrize("listener", ["client", "controller"])
def test_api_versions_v3_v4__supported_and_finalized_features(node: RunningNode, listener: str) -> None:
    address = node.bootstrap_servers if listener == "client" else node.controller_address
    v3 = _api_versions(address, 3)
    # v3 omits features whose minimum is 0 (the schema's note); v4 lists them all.
    assert {f.name: (f.min_version, f.max_version) for f in v3.supported_features} == {MV: (7, 21)}
    v4 = _api_versions(address, 4)
    supported = {f.name: (f.min_version, f.max_version) for f in v4.supported_features}
    assert supported[MV] == (7, 21)
    assert supported["transaction.version"] == supported["kraft.version"] == (0, 0)
    assert [(f.name, f.min_version_level, f.max_version_level) for f in v4.finalized_features] == [
        (MV, 21, 21)
    ]
    assert v4.finalized_features_epoch >= 0
    assert not v4.zk_migration_ready
    # Before v3 the fields do not exist: a v2 answer still parses with only the api keys.
    assert _api_versions(address, 2).error_code == ErrorCode.NONE


def test_update_features_raw_v0_v1_v2__kafkas_answers(node: RunningNode) -> None:
    address = node.bootstrap_servers
    # v1 validate_only: a safe downgrade that changes no metadata would be accepted, and nothing changes.
    dry = _update(address, 1, (MV, 20, 2), validate_only=True)
    assert (dry.error_code, [(r.feature, r.error_code) for r in dry.results]) == (0, [(MV, 0)])
    assert _api_versions(address, 4).finalized_features[0].max_version_level == 21
    # v2: the top-level error alone; a downgrade across 3.7-IV2 (directory assignment) is refused.
    refused = _update(address, 2, (MV, 16, 2))
    assert refused.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert refused.error_message.startswith("Unsupported metadata.version downgrade from 21 to 16.")
    assert refused.results == []
    unsupported = _update(address, 2, ("transaction.version", 1, 1))
    assert unsupported.error_message == (
        "Invalid update version 1 for feature transaction.version. Local controller 1 does not support this feature."
    )
    # v0: AllowDowngrade is a safe downgrade; written, then the finalized level and its epoch move.
    before = _api_versions(address, 4).finalized_features_epoch
    done = _update(address, 0, (MV, 20, 2))
    assert (done.error_code, [(r.feature, r.error_code) for r in done.results]) == (0, [(MV, 0)])
    after = _api_versions(address, 4)
    assert after.finalized_features[0].max_version_level == 20
    assert after.finalized_features_epoch > before
    assert _update(address, 2, (MV, 21, 1)).error_code == ErrorCode.NONE


def test_kafka_python_admin__describe_and_update_features(node: RunningNode) -> None:
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap_servers)
    try:
        described = admin.describe_features()
        assert described[MV]["supported"] == (7, 21)
        assert described[MV]["finalized"] == (21, 21)
        assert described[MV]["finalized_epoch"] >= 0
        assert admin.update_features({MV: ("SAFE_DOWNGRADE", 19)}, validate_only=True) == {MV: "OK"}
        assert admin.describe_features()[MV]["finalized"] == (21, 21)
    finally:
        admin.close()


@pytest.fixture
def features(node: RunningNode, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str]]:
    def run(*args: str) -> tuple[int, str]:
        status = main(["features", "--bootstrap-server", node.bootstrap_servers, *args])
        out, err = capsys.readouterr()
        return status, out + err

    return run


def test_cli__describe_upgrade_downgrade_as_kafka_features(features: Callable[..., tuple[int, str]]) -> None:
    status, out = features("describe")
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith("Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 0\t")
    epoch = lines[2].rsplit("Epoch: ", 1)[1]
    assert lines[2] == (
        "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 3.9-IV0\t"
        f"FinalizedVersionLevel: 3.9-IV0\tEpoch: {epoch}"
    )
    assert features("downgrade", "--metadata", "3.8", "--dry-run") == (
        0,
        "metadata.version can be downgraded to 20.\n",
    )
    status, out = features("downgrade", "--metadata", "3.7-IV1")
    assert status == 1
    assert out.splitlines() == [
        "Could not downgrade metadata.version to 16. Unsupported metadata.version downgrade from 21 to 16. "
        "Refusing to perform the requested downgrade because it might delete metadata information.",
        "pykraft features: 1 out of 1 operation(s) failed.",
    ]
    assert features("downgrade", "--release-version", "3.8") == (
        0,
        "metadata.version was downgraded to 20.\n",
    )
    assert features("upgrade", "--metadata", "3.9-IV0") == (0, "metadata.version was upgraded to 21.\n")
    status, out = features("upgrade", "--metadata", "4.0")
    assert status == 2
    assert "--metadata: unknown metadata.version '4.0'" in out
    status, out = features("disable", "--feature", "transaction.version", "--dry-run")
    assert (status, out.splitlines()[0]) == (0, "transaction.version can be disabled.")


def test_cli__bootstrap_controller__a_controller_listener_answers(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["features", "--bootstrap-controller", node.controller_address]
    assert main([*args, "upgrade", "--metadata", "3.9", "--dry-run"]) == 0
    assert capsys.readouterr().out == "metadata.version can be upgraded to 21.\n"
    assert main([*args, "describe"]) == 0
    assert "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3" in capsys.readouterr().out
    assert main(["features", *args[1:], "--bootstrap-server", node.bootstrap_servers, "describe"]) == 2
