"""``pykraft storage random-uuid | format | info``, shaped like Kafka's ``kafka-storage`` (kafka-facts.md §5.3).

Formatting is optional (KIP-1262): ``pykraft server start`` on empty dirs writes meta.properties itself and
the first controller mints the cluster id. ``format`` remains to fix the cluster id up front. Errors are one
line on stderr naming the flag, file or directory; the exit code is 1 (Kafka: ``TerseFailure``).
"""

from __future__ import annotations

import argparse
import os
import random
import sys

from pykraft.core.config import ConfigError
from pykraft.core.uuid import random_uuid, uuid_to_str
from pykraft.io.meta_properties_files import (
    load_ensemble,
    node_log_dirs,
    read_logged_cluster_id,
    write_meta_properties,
)
from pykraft.io.raft_log import METADATA_PARTITION_DIR
from pykraft.io.snapshots import BOOTSTRAP_CHECKPOINT, write_bootstrap_checkpoint
from pykraft.storage.formatter import BOOTSTRAP_RELEASE, FormatRequest, FormatterError, plan_format
from pykraft.storage.info import describe_storage


def _fail(message: str) -> int:
    print(f"pykraft storage: {message}", file=sys.stderr)
    return 1


def _random_uuid(args: argparse.Namespace) -> int:
    # An operator-facing id: draw from the OS, not a seeded generator.
    print(uuid_to_str(random_uuid(random.SystemRandom())))
    return 0


def _format(args: argparse.Namespace) -> int:
    from pykraft.cli import read_config

    try:
        config = read_config(args.config, [])
    except ConfigError as exc:
        return _fail(str(exc))
    request = FormatRequest(
        node_id=config.node_id,
        process_roles=config.process_roles,
        voter_ids=frozenset(config.controller_quorum_voters),
        log_dirs=config.log_dirs,
        metadata_log_dir=config.metadata_log_dir,
        cluster_id=args.cluster_id,
        release_version=args.release_version,
        standalone=args.standalone,
        ignore_formatted=args.ignore_formatted,
        add_scram=tuple(args.add_scram or ()),
    )
    ensemble = load_ensemble(config.log_dirs, config.metadata_log_dir)
    try:
        plan = plan_format(request, ensemble, random.SystemRandom())
    except FormatterError as exc:
        return _fail(str(exc))
    for line in plan.lines:
        print(line)
    for log_dir, meta in sorted(plan.writes.items()):
        try:
            write_meta_properties(log_dir, meta)
        except OSError as exc:
            return _fail(f"Error while writing meta.properties file {log_dir}: {exc.strerror}")
    if plan.scram_credentials:
        try:
            write_bootstrap_checkpoint(config.metadata_log_dir, plan.scram_credentials)
        except OSError as exc:
            return _fail(
                f"Error while writing {BOOTSTRAP_CHECKPOINT} in {config.metadata_log_dir}: {exc.strerror}"
            )
    return 0


def _info(args: argparse.Namespace) -> int:
    from pykraft.cli import read_config

    try:
        config = read_config(args.config, [])
    except ConfigError as exc:
        return _fail(str(exc))
    dirs = node_log_dirs(config.log_dirs, config.metadata_log_dir)
    ensemble = load_ensemble(config.log_dirs, config.metadata_log_dir)
    try:
        logged = read_logged_cluster_id(config.metadata_log_dir)
    except OSError as exc:
        return _fail(f"cannot read the metadata log in {config.metadata_log_dir}: {exc.strerror}")
    info = describe_storage(
        ensemble,
        {d for d in dirs if os.path.isdir(d)},
        logged,
        os.path.join(config.metadata_log_dir, METADATA_PARTITION_DIR),
    )
    sys.stdout.write(info.text())
    return info.exit_code


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    storage = subparsers.add_parser("storage", help="inspect or (optionally) format log directories")
    sub = storage.add_subparsers(dest="storage_command", required=True)

    uuid_cmd = sub.add_parser("random-uuid", help="print a new cluster id (a Kafka Uuid)")
    uuid_cmd.set_defaults(func=_random_uuid)

    fmt = sub.add_parser(
        "format", help="write meta.properties into unformatted dirs (optional: start formats by itself)"
    )
    fmt.add_argument("--config", "-c", required=True, help="the node's server.properties")
    fmt.add_argument(
        "--cluster-id", "-t", help="the cluster id (default: the first controller generates one)"
    )
    fmt.add_argument(
        "--release-version", "-r", help=f"metadata.version to bootstrap (default {BOOTSTRAP_RELEASE})"
    )
    fmt.add_argument(
        "--standalone", "-s", action="store_true", help="this controller is the quorum's only voter"
    )
    fmt.add_argument(
        "--ignore-formatted", "-g", action="store_true", help="skip dirs already formatted, format the rest"
    )
    fmt.add_argument(
        "--add-scram",
        "-S",
        action="append",
        metavar="MECHANISM=[name=N,password=P]",
        help="a SCRAM credential the first controller writes (repeatable; iterations=, salt= optional)",
    )
    fmt.set_defaults(func=_format)

    info = sub.add_parser("info", help="print each dir's meta.properties and any problem")
    info.add_argument("--config", "-c", required=True, help="the node's server.properties")
    info.set_defaults(func=_info)
