"""``pykraft topics --bootstrap-server HOST:PORT list|describe|create|delete|alter``, shaped like
``kafka-topics``: describe prints each partition's leader, leader epoch, replicas and ISR (issue 14), so
replication can be watched from a shell; ``--alter --topic T --partitions N`` (or ``alter``) adds
partitions with CreatePartitions (KIP-195). A small blocking client over kafka-python's codec; exit
status 1 with one line naming what failed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.cli.common import UsageError, admin_security, print_json
from pykraft.core.errors import ErrorCode
from pykraft.core.uuid import uuid_to_str
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError, ClientSecurity

METADATA_VERSION = 10  # the first with topic ids, which kafka-topics --describe prints
CREATE_TOPICS_VERSION = 5
DELETE_TOPICS_VERSION = 4
CREATE_PARTITIONS_VERSION = 3
TIMEOUT_MS = 30_000


class TopicsError(BrokerConnectionError):
    """One line for the user: what failed and where."""


def fetch_metadata(bootstrap: str, topic: str | None, security: ClientSecurity | None = None) -> Any:
    with BrokerConnection.to(bootstrap, client_id="pykraft-topics", security=security) as conn:
        topics = None if topic is None else [MetadataRequest.MetadataRequestTopic(name=topic)]
        return conn.request(
            MetadataRequest(topics=topics, allow_auto_topic_creation=False),
            MetadataResponse,
            METADATA_VERSION,
        )


def describe_lines(metadata: Any) -> list[str]:
    """kafka-topics --describe's layout: a line per topic, then a tab-indented line per partition."""
    lines = []
    for t in sorted(metadata.topics, key=lambda t: t.name):
        if t.error_code:
            raise TopicsError(f"topic {t.name}: {_error_name(t.error_code)}")
        partitions = sorted(t.partitions, key=lambda p: p.partition_index)
        factor = len(partitions[0].replica_nodes) if partitions else 0
        lines.append(
            f"Topic: {t.name}\tTopicId: {_topic_id(t.topic_id)}\tPartitionCount: {len(partitions)}\t"
            f"ReplicationFactor: {factor}"
        )
        for p in partitions:
            error = f"\tError: {_error_name(p.error_code)}" if p.error_code else ""
            lines.append(
                f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {_leader(p.leader_id)}\t"
                f"LeaderEpoch: {p.leader_epoch}\tReplicas: {_ids(p.replica_nodes)}\tIsr: {_ids(p.isr_nodes)}{error}"
            )
    return lines


def _topic_id(topic_id: Any) -> str:
    return uuid_to_str(topic_id) if topic_id is not None else ""


def _leader(leader_id: int) -> str:
    return "none" if leader_id < 0 else str(leader_id)


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _describe(args: argparse.Namespace) -> int:
    metadata = fetch_metadata(args.bootstrap_server, args.topic, admin_security(args))
    if getattr(args, "json", False):
        print_json(describe_json(metadata))
        return 0
    for line in describe_lines(metadata):
        print(line)
    return 0


def describe_json(metadata: Any) -> list[dict[str, Any]]:
    out = []
    for t in sorted(metadata.topics, key=lambda t: t.name):
        if t.error_code:
            raise TopicsError(f"topic {t.name}: {_error_name(t.error_code)}")
        out.append(
            {
                "topic": t.name,
                "topic_id": _topic_id(t.topic_id),
                "partitions": [
                    {
                        "partition": p.partition_index,
                        "leader": p.leader_id,
                        "leader_epoch": p.leader_epoch,
                        "replicas": list(p.replica_nodes),
                        "isr": list(p.isr_nodes),
                    }
                    for p in sorted(t.partitions, key=lambda p: p.partition_index)
                ],
            }
        )
    return out


def _list(args: argparse.Namespace) -> int:
    metadata = fetch_metadata(args.bootstrap_server, None, admin_security(args))
    for t in sorted(metadata.topics, key=lambda t: t.name):
        print(t.name)
    return 0


def _create(args: argparse.Namespace) -> int:
    configs = []
    for item in args.config or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise TopicsError(f"--config: {item!r} is not KEY=VALUE")
        configs.append(CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=key, value=value))
    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=args.topic,
                num_partitions=args.partitions,
                replication_factor=args.replication_factor,
                assignments=[],
                configs=configs,
            )
        ],
        timeout_ms=TIMEOUT_MS,
        validate_only=False,
    )
    with BrokerConnection.to(
        args.bootstrap_server, client_id="pykraft-topics", security=admin_security(args)
    ) as conn:
        response = conn.request(request, CreateTopicsResponse, CREATE_TOPICS_VERSION)
    result = response.topics[0]
    if result.error_code:
        raise TopicsError(
            f"topic {args.topic}: {_error_name(result.error_code)}: {result.error_message or ''}".rstrip(": ")
        )
    print(f"Created topic {args.topic}.")
    return 0


def _delete(args: argparse.Namespace) -> int:
    request = DeleteTopicsRequest(topic_names=[args.topic], timeout_ms=TIMEOUT_MS)
    with BrokerConnection.to(
        args.bootstrap_server, client_id="pykraft-topics", security=admin_security(args)
    ) as conn:
        response = conn.request(request, DeleteTopicsResponse, DELETE_TOPICS_VERSION)
    result = response.responses[0]
    if result.error_code:
        raise TopicsError(f"topic {args.topic}: {_error_name(result.error_code)}")
    print(f"Deleted topic {args.topic}.")
    return 0


def _replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics' --replica-assignment: partitions separated by ',', each one's brokers by ':'."""
    try:
        return [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise TopicsError(
            f"--replica-assignment: {text!r} is not a list like 1:2,2:3 (the brokers of each partition)"
        ) from None


def _alter(args: argparse.Namespace) -> int:
    """kafka-topics --alter: CreatePartitions up to ``--partitions``. As kafka-topics, a
    ``--replica-assignment`` lists every partition and only those past the current count are sent; success
    prints nothing."""
    if args.topic is None or args.partitions is None:
        raise TopicsError("--alter needs --topic and --partitions")
    assignments = None
    if args.replica_assignment is not None:
        metadata = fetch_metadata(args.bootstrap_server, args.topic, admin_security(args))
        (topic,) = metadata.topics
        if topic.error_code:
            raise TopicsError(f"topic {args.topic}: {_error_name(topic.error_code)}")
        assignments = [
            CreatePartitionsRequest.CreatePartitionsTopic.CreatePartitionsAssignment(broker_ids=brokers)
            for brokers in _replica_assignment(args.replica_assignment)[len(topic.partitions) :]
        ]
    request = CreatePartitionsRequest(
        topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(
                name=args.topic, count=args.partitions, assignments=assignments
            )
        ],
        timeout_ms=TIMEOUT_MS,
        validate_only=False,
    )
    with BrokerConnection.to(
        args.bootstrap_server, client_id="pykraft-topics", security=admin_security(args)
    ) as conn:
        response = conn.request(request, CreatePartitionsResponse, CREATE_PARTITIONS_VERSION)
    result = response.results[0]
    if result.error_code:
        raise TopicsError(
            f"topic {args.topic}: {_error_name(result.error_code)}: {result.error_message or ''}".rstrip(": ")
        )
    return 0


def _run(func: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(func(args))
        except UsageError as exc:
            print(f"pykraft topics: {exc}", file=sys.stderr)
            return 2
        except BrokerConnectionError as exc:
            print(f"pykraft topics: {exc}", file=sys.stderr)
            return 1

    return run


def _kafka_mode(args: argparse.Namespace) -> int:
    """kafka-topics' own form: one of --list, --describe, --create, --delete, --alter."""
    actions = {"list": args.list, "describe": args.describe, "create": args.create, "delete": args.delete}
    chosen = [name for name, on in actions.items() if on] + (["alter"] if args.alter else [])
    if len(chosen) != 1:
        raise UsageError(
            "give exactly one of --list, --describe, --create, --delete, --alter (or the subcommands list, "
            "describe, create, delete, alter)"
        )
    action = chosen[0]
    if action in ("create", "delete") and args.topic is None:
        raise UsageError(f"--{action} needs --topic")
    if action == "list":
        return _list(args)
    if action == "describe":
        return _describe(args)
    if action == "create":
        if args.partitions is None:
            args.partitions = -1
        return _create(args)
    if action == "delete":
        return _delete(args)
    return _alter(args)


def add_subcommands(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "topics",
        help="list, describe (leaders, replicas, ISR), create, delete or alter (add partitions to) topics",
        description="Create, delete, describe, or change a topic (as kafka-topics.sh).",
    )
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help="REQUIRED: The Kafka server to connect to.",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="Property file containing configs to be passed to Admin Client (security.protocol, sasl.*, "
        "ssl.*).",
    )
    parser.add_argument("--list", action="store_true", help="List all available topics.")
    parser.add_argument("--describe", action="store_true", help="List details for the given topics.")
    parser.add_argument("--create", action="store_true", help="Create a new topic.")
    parser.add_argument("--delete", action="store_true", help="Delete a topic")
    parser.add_argument(
        "--alter",
        action="store_true",
        help="Alter the number of partitions and replica assignment (with --topic and --partitions).",
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        help="The replication factor for each partition in the topic being created. If not supplied, "
        "defaults to the cluster default.",
    )
    parser.add_argument(
        "--config",
        action="append",
        metavar="NAME=VALUE",
        help="A topic configuration override for the topic being created (repeatable).",
    )
    parser.add_argument("--json", action="store_true", help="with --describe: JSON, for scripts (pykraft)")
    _add_alter_arguments(parser, required=False)
    sub = parser.add_subparsers(dest="topics_command")

    def without_subcommand(args: argparse.Namespace) -> int:
        if not any((args.list, args.describe, args.create, args.delete, args.alter)):
            parser.error("give an action (--list, --describe, --create, --delete, --alter) or a command")
        return int(_run(_kafka_mode)(args))

    parser.set_defaults(func=without_subcommand)
    sub.add_parser("list", help="topic names").set_defaults(func=_run(_list))
    describe = sub.add_parser("describe", help="partitions: leader, leader epoch, replicas, ISR")
    describe.add_argument("--topic", help="only this topic (default: all)")
    describe.add_argument("--json", action="store_true", help="JSON, for scripts")
    describe.set_defaults(func=_run(_describe))
    create = sub.add_parser("create", help="create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=-1, help="default: num.partitions")
    create.add_argument(
        "--replication-factor", type=int, default=-1, help="default: default.replication.factor"
    )
    create.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config (repeatable)")
    create.set_defaults(func=_run(_create))
    delete = sub.add_parser("delete", help="delete a topic")
    delete.add_argument("--topic", required=True)
    delete.set_defaults(func=_run(_delete))
    alter = sub.add_parser("alter", help="add partitions to a topic (as --alter)")
    _add_alter_arguments(alter, required=True)
    alter.set_defaults(func=_run(_alter))


def _add_alter_arguments(parser: Any, *, required: bool) -> None:
    parser.add_argument("--topic", required=required, help="The topic to create, alter, describe or delete.")
    parser.add_argument(
        "--partitions",
        type=int,
        required=required,
        help="The number of partitions for the topic being created or altered. If not supplied for "
        "create, defaults to the cluster default.",
    )
    parser.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="the brokers of every partition, the existing ones first (only the new ones are used)",
    )


__all__ = ["add_subcommands", "describe_lines"]
