"""``pykraft features``: describe, upgrade and downgrade finalized features, as kafka-features does
(Kafka FeatureCommand):

    pykraft features --bootstrap-server H:P describe
    pykraft features --bootstrap-server H:P upgrade --metadata 3.9 [--feature transaction.version=1] [--dry-run]
    pykraft features --bootstrap-server H:P downgrade --metadata 3.8 [--unsafe] [--dry-run]
    pykraft features --bootstrap-controller H:P disable --feature NAME

``--bootstrap-controller`` talks to a controller listener, which serves both RPCs too.

``describe`` reads ApiVersions v3+'s feature fields; ``upgrade`` / ``downgrade`` send UpdateFeatures v1
(forwarded to the active controller). Failures print "Could not <op> <feature> to <level>. <why>" and
exit 1, as FeatureCommand's TerseException.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from pykraft.cli.common import ToolError, UsageError, admin_security, bootstrap_of, run_tool
from pykraft.controller.features import UpgradeType
from pykraft.io.kafka_connection import BrokerConnection

# v4 lists features whose minimum is 0 too (v3 omits them).
API_VERSIONS_VERSION = 4
UPDATE_FEATURES_VERSION = 1
CLIENT_ID = "pykraft-features"
METADATA_VERSION = "metadata.version"
# Kafka MetadataVersion's names of the levels pykraft supports (3.3-IV3 .. 3.9-IV0).
METADATA_VERSION_NAMES: dict[int, str] = dict(
    enumerate(
        (
            "3.3-IV3",
            "3.4-IV0",
            "3.5-IV0",
            "3.5-IV1",
            "3.5-IV2",
            "3.6-IV0",
            "3.6-IV1",
            "3.6-IV2",
            "3.7-IV0",
            "3.7-IV1",
            "3.7-IV2",
            "3.7-IV3",
            "3.7-IV4",
            "3.8-IV0",
            "3.9-IV0",
        ),
        start=7,
    )
)


def metadata_level(text: str, flag: str) -> int:
    """``3.9-IV0`` or a release ``3.9`` (its last level), as MetadataVersion.fromVersionString."""
    for level, name in sorted(METADATA_VERSION_NAMES.items(), reverse=True):
        if text in (name, name.split("-")[0]):
            return level
    known = ", ".join(METADATA_VERSION_NAMES.values())
    raise UsageError(f"{flag}: unknown metadata.version {text!r} (known: {known})")


def _level_text(feature: str, level: int) -> str:
    """FeatureCommand.levelToString: metadata.version by name, other features by number."""
    if feature == METADATA_VERSION:
        return METADATA_VERSION_NAMES.get(level, str(level))
    return str(level)


def describe_lines(response: Any) -> list[str]:
    """FeatureCommand.handleDescribe's lines, one per supported feature, sorted by name."""
    finalized = {f.name: f.max_version_level for f in response.finalized_features or []}
    epoch = response.finalized_features_epoch
    epoch_text = "-" if epoch is None or epoch < 0 else str(epoch)
    return [
        f"Feature: {f.name}\tSupportedMinVersion: {_level_text(f.name, f.min_version)}\t"
        f"SupportedMaxVersion: {_level_text(f.name, f.max_version)}\t"
        f"FinalizedVersionLevel: {_level_text(f.name, finalized.get(f.name, 0))}\tEpoch: {epoch_text}"
        for f in sorted(response.supported_features or [], key=lambda f: f.name)
    ]


def _connect(args: argparse.Namespace) -> BrokerConnection:
    """A broker (which forwards UpdateFeatures) or, as kafka-features' --bootstrap-controller, a controller."""
    if (args.bootstrap_server is None) == (args.bootstrap_controller is None):
        raise UsageError("give one of --bootstrap-server or --bootstrap-controller")
    flag = "--bootstrap-server" if args.bootstrap_server is not None else "--bootstrap-controller"
    address = bootstrap_of(args.bootstrap_server or args.bootstrap_controller, flag)
    return BrokerConnection.to(address, client_id=CLIENT_ID, security=admin_security(args))


def _describe(args: argparse.Namespace) -> int:
    with _connect(args) as conn:
        response = conn.request(
            ApiVersionsRequest(client_software_name="pykraft", client_software_version="1"),
            ApiVersionsResponse,
            API_VERSIONS_VERSION,
        )
    for line in describe_lines(response):
        print(line)
    return 0


def _updates(args: argparse.Namespace) -> dict[str, int]:
    updates: dict[str, int] = {}
    metadata = args.metadata or args.release_version
    if metadata is not None:
        updates[METADATA_VERSION] = metadata_level(metadata, "--metadata")
    for item in args.feature or []:
        name, sep, level = item.partition("=")
        if not sep or not name or not level.lstrip("-").isdigit():
            raise UsageError(f"--feature: {item!r} is not NAME=LEVEL")
        if name in updates:
            raise UsageError(f"--feature: {name} given twice")
        updates[name] = int(level)
    if not updates:
        raise UsageError("give --metadata, --release-version or at least one --feature NAME=LEVEL")
    return updates


def _update(args: argparse.Namespace) -> int:
    op = args.features_command
    # FeatureCommand: disable is a downgrade of each named feature to level 0.
    updates = dict.fromkeys(args.feature, 0) if op == "disable" else _updates(args)
    if op == "upgrade":
        upgrade_type = UpgradeType.UPGRADE
    else:
        upgrade_type = UpgradeType.UNSAFE_DOWNGRADE if args.unsafe else UpgradeType.SAFE_DOWNGRADE
    key = UpdateFeaturesRequest.FeatureUpdateKey
    request = UpdateFeaturesRequest(
        timeout_ms=60000,
        feature_updates=[
            key(feature=name, max_version_level=level, upgrade_type=int(upgrade_type))
            for name, level in updates.items()
        ],
        validate_only=args.dry_run,
    )
    with _connect(args) as conn:
        response = conn.request(request, UpdateFeaturesResponse, UPDATE_FEATURES_VERSION)
    errors = {r.feature: r.error_message or str(r.error_code) for r in response.results or [] if r.error_code}
    if response.error_code and not errors:
        errors = dict.fromkeys(updates, response.error_message or str(response.error_code))
    for name, level in updates.items():
        target = f"{op} {name}" if op == "disable" else f"{op} {name} to {level}"
        if name in errors:
            print(f"{'Can not' if args.dry_run else 'Could not'} {target}. {errors[name]}")
        else:
            done = "disabled." if op == "disable" else f"{op}d to {level}."
            print(f"{name}{' can be ' if args.dry_run else ' was '}{done}")
    if errors:
        raise ToolError(f"{len(errors)} out of {len(updates)} operation(s) failed.")
    return 0


def add_subcommands(subparsers: Any) -> None:
    parser = subparsers.add_parser("features", help="describe and update finalized features (kafka-features)")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]", help="a broker")
    parser.add_argument("--bootstrap-controller", metavar="HOST:PORT", help="a controller listener")
    parser.add_argument(
        "--command-config", metavar="FILE", help="client properties: security.protocol, sasl.*, ssl.*"
    )
    sub = parser.add_subparsers(dest="features_command", required=True)
    sub.add_parser("describe", help="each feature's supported range and finalized level")
    for op in ("upgrade", "downgrade", "disable"):
        update = sub.add_parser(op, help=f"{op} finalized feature levels (UpdateFeatures)")
        if op != "disable":
            update.add_argument("--metadata", help="the metadata.version, e.g. 3.9 or 3.9-IV0")
            update.add_argument("--release-version", help="as --metadata")
        update.add_argument(
            "--feature",
            action="append",
            required=op == "disable",
            metavar="NAME" if op == "disable" else "NAME=LEVEL",
            help="repeatable",
        )
        update.add_argument(
            "--dry-run", action="store_true", help="validate only (UpdateFeatures ValidateOnly)"
        )
        if op != "upgrade":
            update.add_argument("--unsafe", action="store_true", help="an unsafe (lossy) downgrade")
    parser.set_defaults(func=run_tool("features", _run))


def _run(args: argparse.Namespace) -> int:
    return _describe(args) if args.features_command == "describe" else _update(args)
