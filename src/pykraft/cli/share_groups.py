"""``pykraft share-groups``, shaped like kafka-share-groups.sh (KIP-932): ``--list [--state]``,
``--describe [--members|--state]`` and ``--delete`` of share groups.

ListGroups v5 with the ``share`` type on every broker; for a group, FindCoordinator ->
ShareGroupDescribe (state, epochs, members and their assignments) as the tool prints them. Offsets
(``--describe --offsets``, ``--reset-offsets``, ``--delete-offsets``) need the share-group state
(DescribeShareGroupOffsets and friends, over ``__share_group_state``), which pykraft does not keep yet.
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
    ToolError,
    UsageError,
    add_connection_arguments,
    admin_security,
    error_name,
    metadata,
    print_json,
    print_table,
    run_tool,
)
from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnection, ClientSecurity
from pykraft.protocol.messages import ShareGroupDescribeRequest, ShareGroupDescribeResponse

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
        else:
            # kafka-share-groups --describe --state (also the default here: offsets are not kept yet).
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
    return 0


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
    if sum([args.list, args.describe, args.delete]) != 1:
        raise UsageError("give exactly one of --list, --describe, --delete")
    security = admin_security(args)
    if args.list:
        return _list(args, security)
    if args.describe:
        return _describe(args, security)
    return _delete(args, security)


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "share-groups",
        help="list, describe, delete share groups (kafka-share-groups)",
        description="List all share groups, describe a share group or delete share group info "
        "(as kafka-share-groups.sh; offsets are not kept yet).",
    )
    add_connection_arguments(parser)
    actions = parser.add_argument_group("actions")
    actions.add_argument("--list", action="store_true", help="List all share groups.")
    actions.add_argument("--describe", action="store_true", help="Describe share group(s).")
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
    parser.add_argument("--verbose", action="store_true", help="Provide additional information (epochs).")
    parser.add_argument("--json", action="store_true", help="one JSON document, for scripts (pykraft)")
    parser.set_defaults(func=run_tool("share-groups", _run))
