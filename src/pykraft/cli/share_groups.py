"""``pykraft share-groups``, shaped like kafka-share-groups.sh (KIP-932): ``--list [--state]``,
``--describe [--offsets|--members|--state]``, ``--reset-offsets`` (``--to-earliest``, ``--to-latest``,
``--to-offset``; ``--topic T[:P,P]`` or ``--all-topics``; ``--dry-run`` or ``--execute``),
``--delete-offsets --topic T`` and ``--delete`` of share groups.

ListGroups v5 with the ``share`` type on every broker; for a group, FindCoordinator ->
ShareGroupDescribe (state, epochs, members and their assignments), DescribeShareGroupOffsets (each
partition's share-partition start offset; lag = log end - start offset) or AlterShareGroupOffsets, as
the tool prints them; ``--delete-offsets`` (DeleteShareGroupOffsets) deletes an inactive group's state in
whole topics, which then start over from ``share.auto.offset.reset``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from pykraft.cli.common import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ToolError,
    TopicPartition,
    UsageError,
    add_connection_arguments,
    admin_security,
    error_name,
    list_offsets,
    metadata,
    print_json,
    print_table,
    run_tool,
    topic_partitions,
)
from pykraft.cli.groups import parse_topic_scope
from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnection, ClientSecurity
from pykraft.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)

CLIENT_ID = "pykraft-share-groups"


def list_share_groups(bootstrap: str, security: ClientSecurity | None = None) -> list[tuple[str, str]]:
    """(group id, state) of every share group, from every broker."""
    with BrokerConnection.to(bootstrap, client_id=CLIENT_ID, security=security) as conn:
        brokers = [(b.host, b.port) for b in metadata(conn, []).brokers]
    groups: list[tuple[str, str]] = []
    for host, port in brokers:
        broker = BrokerConnection(host, port, client_id=CLIENT_ID, security=security)
        try:
            response = broker.request(
                ListGroupsRequest(states_filter=[], types_filter=["share"]), ListGroupsResponse, version=5
            )
        finally:
            broker.close()
        if response.error_code:
            raise ToolError(f"ListGroups on {host}:{port}: {error_name(response.error_code)}")
        groups.extend((g.group_id, g.group_state) for g in response.groups)
    return sorted(groups)


def _coordinator(
    conn: BrokerConnection, group: str, security: ClientSecurity | None
) -> tuple[BrokerConnection, Any]:
    found = conn.request(FindCoordinatorRequest(key=group, key_type=0), FindCoordinatorResponse, version=3)
    if found.error_code:
        raise ToolError(f"FindCoordinator for group {group!r}: {error_name(found.error_code)}")
    return BrokerConnection(found.host, found.port, client_id=CLIENT_ID, security=security), found


def describe_share_group(
    bootstrap: str, group: str, security: ClientSecurity | None = None
) -> dict[str, Any]:
    with BrokerConnection.to(bootstrap, client_id=CLIENT_ID, security=security) as conn:
        coordinator, found = _coordinator(conn, group, security)
    try:
        response = coordinator.request(
            ShareGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
            ShareGroupDescribeResponse,
            version=1,
        )
    finally:
        coordinator.close()
    (described,) = response.groups
    if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        raise ToolError(f"Share group '{group}' does not exist.")
    if described.error_code:
        raise ToolError(f"ShareGroupDescribe of {group!r}: {error_name(described.error_code)}")
    return {
        "group": group,
        "coordinator": {"id": found.node_id, "host": found.host, "port": found.port},
        "state": described.group_state,
        "group_epoch": described.group_epoch,
        "assignment_epoch": described.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assignment": [
                    (t.topic_name or str(t.topic_id), sorted(t.partitions))
                    for t in m.assignment.topic_partitions
                ],
            }
            for m in described.members
        ],
    }


def share_group_offsets(
    bootstrap: str, group: str, security: ClientSecurity | None = None
) -> list[tuple[str, int, int, int, int | None]]:
    """(topic, partition, leader epoch, start offset, lag) of every partition the group has state in."""
    request_cls: Any = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    with BrokerConnection.to(bootstrap, client_id=CLIENT_ID, security=security) as conn:
        coordinator, _ = _coordinator(conn, group, security)
        try:
            response = coordinator.request(
                DescribeShareGroupOffsetsRequest(groups=[request_cls(group_id=group, topics=None)]),
                DescribeShareGroupOffsetsResponse,
                version=0,
            )
        finally:
            coordinator.close()
        (described,) = response.groups
        if described.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            raise ToolError(f"Share group '{group}' does not exist.")
        if described.error_code:
            raise ToolError(f"DescribeShareGroupOffsets of {group!r}: {error_name(described.error_code)}")
        rows = [(t.topic_name, p) for t in described.topics for p in t.partitions]
        ends = list_offsets(
            conn, {(name, p.partition_index): LATEST_TIMESTAMP for name, p in rows}, security=security
        )
    out = []
    for name, p in sorted(rows, key=lambda r: (r[0], r[1].partition_index)):
        if p.error_code:
            raise ToolError(f"{name}-{p.partition_index}: {error_name(p.error_code)}")
        end = ends[(name, p.partition_index)][0]
        lag = None if p.start_offset < 0 else max(end - p.start_offset, 0)
        out.append((name, p.partition_index, p.leader_epoch, p.start_offset, lag))
    return out


def _groups_of(args: argparse.Namespace, security: ClientSecurity | None) -> list[str]:
    if args.all_groups:
        return [g for g, _ in list_share_groups(args.bootstrap_server, security)]
    if not args.group:
        raise UsageError("--group: give a group (or --all-groups)")
    return list(args.group)


def _list(args: argparse.Namespace, security: ClientSecurity | None) -> int:
    groups = list_share_groups(args.bootstrap_server, security)
    if args.state not in (None, ""):
        wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
        groups = [g for g in groups if g[1].lower() in wanted]
    if args.json:
        print_json([{"group": g, "state": s} for g, s in groups])
    elif args.state is not None:
        print_table(["GROUP", "STATE"], groups)
    else:
        for group, _ in groups:
            print(group)
    return 0


def _describe(args: argparse.Namespace, security: ClientSecurity | None) -> int:
    infos = [describe_share_group(args.bootstrap_server, g, security) for g in _groups_of(args, security)]
    if args.json:
        print_json(infos)
        return 0
    for info in infos:
        if args.members:
            headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
            rows: list[tuple[object, ...]] = [
                (
                    info["group"],
                    m["member_id"],
                    m["client_host"],
                    m["client_id"],
                    sum(len(ps) for _, ps in m["assignment"]),
                    ",".join(f"{t}:{','.join(map(str, ps))}" for t, ps in m["assignment"]) or "-",
                )
                for m in info["members"]
            ]
            if args.verbose:
                headers.insert(4, "MEMBER-EPOCH")
                rows = [
                    (*r[:4], m["member_epoch"], *r[4:]) for r, m in zip(rows, info["members"], strict=True)
                ]
            print_table(headers, rows)
        elif args.state is not None:
            coordinator = info["coordinator"]
            headers = ["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"]
            row: tuple[object, ...] = (
                info["group"],
                f"{coordinator['host']}:{coordinator['port']} ({coordinator['id']})",
                info["state"],
                len(info["members"]),
            )
            if args.verbose:
                headers[2:2] = ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
                row = (*row[:2], info["group_epoch"], info["assignment_epoch"], *row[2:])
            print_table(headers, [row])
        else:
            offsets = share_group_offsets(args.bootstrap_server, info["group"], security)
            if info["state"] == "Empty":
                print(f"\nShare group '{info['group']}' has no active members.", file=sys.stderr)
            print_table(
                ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"],
                [
                    (info["group"], t, p, epoch, "-" if start < 0 else start, "-" if lag is None else lag)
                    for t, p, epoch, start, lag in offsets
                ],
            )
    return 0


def _reset(args: argparse.Namespace, security: ClientSecurity | None) -> int:
    """kafka-share-groups --reset-offsets: the new start offsets of an inactive share group's partitions,
    planned (--dry-run) or set (--execute, AlterShareGroupOffsets)."""
    specs = [args.to_earliest, args.to_latest, args.to_offset is not None]
    if sum(specs) != 1:
        raise UsageError("--reset-offsets: give exactly one of --to-earliest, --to-latest, --to-offset")
    if bool(args.topic) == bool(args.all_topics):
        raise UsageError("--reset-offsets: give --topic (one or more) or --all-topics")
    if args.dry_run and args.execute:
        raise UsageError("--reset-offsets: --dry-run and --execute exclude each other")
    groups = _groups_of(args, security)
    if len(groups) != 1:
        raise UsageError("--reset-offsets: give one --group")
    group = groups[0]
    with BrokerConnection.to(args.bootstrap_server, client_id=CLIENT_ID, security=security) as conn:
        if args.all_topics:
            names = sorted(
                {t for t, _, _, _, _ in share_group_offsets(args.bootstrap_server, group, security)}
            )
            scope: list[tuple[str, list[int] | None]] = [(t, None) for t in names]
        else:
            scope = parse_topic_scope(args.topic)
        meta = metadata(conn, sorted({t for t, parts in scope if parts is None})) if scope else None
        partitions: list[TopicPartition] = []
        for topic, parts in scope:
            partitions += [
                (topic, p) for p in (parts if parts is not None else topic_partitions(meta, topic))
            ]
        if args.to_offset is not None:
            planned = {tp: args.to_offset for tp in partitions}
        else:
            spec = EARLIEST_TIMESTAMP if args.to_earliest else LATEST_TIMESTAMP
            found = list_offsets(conn, {tp: spec for tp in partitions}, security=security)
            planned = {tp: found[tp][0] for tp in partitions}
        if args.execute:
            coordinator, _ = _coordinator(conn, group, security)
            topic_cls: Any = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
            by_topic: dict[str, list[Any]] = {}
            for (topic, p), offset in sorted(planned.items()):
                by_topic.setdefault(topic, []).append(
                    topic_cls.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=offset)
                )
            try:
                response = coordinator.request(
                    AlterShareGroupOffsetsRequest(
                        group_id=group,
                        topics=[topic_cls(topic_name=t, partitions=ps) for t, ps in by_topic.items()],
                    ),
                    AlterShareGroupOffsetsResponse,
                    version=0,
                )
            finally:
                coordinator.close()
            if response.error_code == ErrorCode.NON_EMPTY_GROUP:
                raise ToolError(
                    f"Share group '{group}' is not empty: its members must stop before its offsets are reset."
                )
            if response.error_code:
                raise ToolError(f"AlterShareGroupOffsets of {group!r}: {error_name(response.error_code)}")
            for t in response.responses:
                for p in t.partitions:
                    if p.error_code:
                        raise ToolError(f"{t.topic_name}-{p.partition_index}: {error_name(p.error_code)}")
    print_table(
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        [(group, t, p, offset) for (t, p), offset in sorted(planned.items())],
    )
    return 0


def _delete_offsets(args: argparse.Namespace, security: ClientSecurity | None) -> int:
    """kafka-share-groups --delete-offsets: an inactive group's state in whole topics."""
    groups = _groups_of(args, security)
    if len(groups) != 1 or not args.topic:
        raise UsageError("--delete-offsets: give one --group and one or more --topic")
    group = groups[0]
    topic_cls: Any = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
    with BrokerConnection.to(args.bootstrap_server, client_id=CLIENT_ID, security=security) as conn:
        coordinator, _ = _coordinator(conn, group, security)
    try:
        response = coordinator.request(
            DeleteShareGroupOffsetsRequest(
                group_id=group, topics=[topic_cls(topic_name=t) for t in args.topic]
            ),
            DeleteShareGroupOffsetsResponse,
            version=0,
        )
    finally:
        coordinator.close()
    if response.error_code == ErrorCode.NON_EMPTY_GROUP:
        raise ToolError(
            f"Share group '{group}' is not empty: its members must stop before its offsets are deleted."
        )
    if response.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
        raise ToolError(f"Share group '{group}' does not exist.")
    if response.error_code:
        raise ToolError(f"DeleteShareGroupOffsets of {group!r}: {error_name(response.error_code)}")
    rows = []
    for t in response.responses:
        errors = {error_name(p.error_code) for p in t.partitions if p.error_code}
        rows.append((t.topic_name, "Successful" if not errors else "Error: " + ", ".join(sorted(errors))))
    print_table(["TOPIC", "STATUS"], rows)
    return 1 if any(status != "Successful" for _, status in rows) else 0


def _delete(args: argparse.Namespace, security: ClientSecurity | None) -> int:
    groups = _groups_of(args, security)
    failures: dict[str, str] = {}
    with BrokerConnection.to(args.bootstrap_server, client_id=CLIENT_ID, security=security) as conn:
        for group in groups:
            coordinator, _ = _coordinator(conn, group, security)
            try:
                response = coordinator.request(
                    DeleteGroupsRequest(groups_names=[group]), DeleteGroupsResponse, version=2
                )
            finally:
                coordinator.close()
            for result in response.results:
                if result.error_code:
                    failures[result.group_id] = error_name(result.error_code)
    done = [g for g in groups if g not in failures]
    if done:
        print(
            "Deletion of requested share groups (" + ", ".join(f"'{g}'" for g in done) + ") was successful."
        )
    if failures:
        print("Deletion of some share groups failed:", file=sys.stderr)
        for group, error in failures.items():
            print(f"* Share group '{group}' could not be deleted due to: {error}", file=sys.stderr)
    return 1 if failures else 0


def _run(args: argparse.Namespace) -> int:
    if sum([args.list, args.describe, args.reset_offsets, args.delete_offsets, args.delete]) != 1:
        raise UsageError(
            "give exactly one of --list, --describe, --reset-offsets, --delete-offsets, --delete"
        )
    security = admin_security(args)
    if args.list:
        return _list(args, security)
    if args.describe:
        return _describe(args, security)
    if args.reset_offsets:
        return _reset(args, security)
    if args.delete_offsets:
        return _delete_offsets(args, security)
    return _delete(args, security)


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "share-groups",
        help="list, describe, delete share groups (kafka-share-groups)",
        description="List all share groups, describe a share group, reset share group offsets or delete "
        "share group info (as kafka-share-groups.sh).",
    )
    add_connection_arguments(parser)
    actions = parser.add_argument_group("actions")
    actions.add_argument("--list", action="store_true", help="List all share groups.")
    actions.add_argument("--describe", action="store_true", help="Describe share group(s).")
    actions.add_argument(
        "--reset-offsets",
        action="store_true",
        help="Reset offsets of share group. The instances should be inactive. --dry-run (the default) "
        "plans, --execute sets them; one of --to-earliest, --to-latest, --to-offset; --all-topics or --topic.",
    )
    actions.add_argument(
        "--delete-offsets",
        action="store_true",
        help="Delete offsets of share group in --topic (inactive groups).",
    )
    actions.add_argument("--delete", action="store_true", help="Delete share group(s) (empty ones only).")
    parser.add_argument(
        "--group", action="append", metavar="GROUP", help="The share group we wish to act on."
    )
    parser.add_argument("--all-groups", action="store_true", help="Apply to all share groups.")
    parser.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        metavar="STATES",
        help="When specified with '--describe', includes the state of the group. When specified with "
        "'--list', it displays the state of all groups (or only those in the given comma-separated states).",
    )
    parser.add_argument("--members", action="store_true", help="Describe members of the group.")
    parser.add_argument(
        "--offsets", action="store_true", help="Describe the group and list its offsets (default)."
    )
    parser.add_argument(
        "--topic", action="append", metavar="TOPIC[:P,P]", help="The topic (and partitions) to reset."
    )
    parser.add_argument(
        "--all-topics", action="store_true", help="Reset every topic the group has offsets in."
    )
    parser.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    parser.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    parser.add_argument("--to-offset", type=int, metavar="OFFSET", help="Reset offsets to a specific offset.")
    parser.add_argument("--dry-run", action="store_true", help="Only show the result (the default).")
    parser.add_argument("--execute", action="store_true", help="Execute the reset.")
    parser.add_argument("--verbose", action="store_true", help="Provide additional information (epochs).")
    parser.add_argument("--json", action="store_true", help="one JSON document, for scripts (pykraft)")
    parser.set_defaults(func=run_tool("share-groups", _run))
