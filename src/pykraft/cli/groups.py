"""``pykraft groups --bootstrap-server HOST:PORT list | describe GROUP``: consumer groups and their lag.

A small blocking client over kafka-python's codec (any Kafka broker answers it, not only pykraft):
ListGroups on every broker; for a group, FindCoordinator -> DescribeGroups (members, assignments) ->
OffsetFetch (committed offsets) -> ListOffsets latest on each partition's leader (lag = log end -
committed), printed as ``kafka-consumer-groups --describe`` does.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafka.protocol.admin import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)

from pykraft.coordinator.offsets_records import RecordFormatError, assigned_partitions
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError

TIMEOUT_S = 10.0


class GroupsError(BrokerConnectionError):
    """One line for the user: what failed and where."""


def _metadata(conn: BrokerConnection, topics: list[str] | None) -> Any:
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return conn.request(
        MetadataRequest(topics=wanted, allow_auto_topic_creation=False), MetadataResponse, version=9
    )


def list_groups(bootstrap: str) -> list[tuple[str, str, str]]:
    """(group id, protocol type, state) from every broker."""
    conn = BrokerConnection.to(bootstrap, client_id="pykraft-groups")
    try:
        brokers = [(b.host, b.port) for b in _metadata(conn, []).brokers]
    finally:
        conn.close()
    groups: list[tuple[str, str, str]] = []
    for host, port in brokers:
        broker = BrokerConnection(host, port, client_id="pykraft-groups")
        try:
            response = broker.request(ListGroupsRequest(states_filter=[]), ListGroupsResponse, version=4)
        finally:
            broker.close()
        groups.extend((g.group_id, g.protocol_type, g.group_state) for g in response.groups)
    return sorted(groups)


def describe_group(bootstrap: str, group: str) -> dict[str, Any]:
    """State, members (with decoded assignments) and per-partition committed offset, log end and lag."""
    conn = BrokerConnection.to(bootstrap, client_id="pykraft-groups")
    try:
        found = conn.request(
            FindCoordinatorRequest(key=group, key_type=0), FindCoordinatorResponse, version=3
        )
        if found.error_code != 0:
            raise GroupsError(f"FindCoordinator for group {group!r} failed with error {found.error_code}")
        coordinator = BrokerConnection(found.host, found.port, client_id="pykraft-groups")
        try:
            described = coordinator.request(
                DescribeGroupsRequest(groups=[group], include_authorized_operations=False),
                DescribeGroupsResponse,
                version=5,
            ).groups[0]
            fetched = coordinator.request(
                OffsetFetchRequest(group_id=group, topics=None, require_stable=False),
                OffsetFetchResponse,
                version=7,
            )
        finally:
            coordinator.close()
        if described.error_code != 0:
            raise GroupsError(f"DescribeGroups for group {group!r} failed with error {described.error_code}")
        if fetched.error_code != 0:
            raise GroupsError(f"OffsetFetch for group {group!r} failed with error {fetched.error_code}")
        owner: dict[tuple[str, int], Any] = {}
        members = []
        for m in described.members:
            try:
                assignment = assigned_partitions(bytes(m.member_assignment or b""))
            except RecordFormatError:
                assignment = []  # not a consumer-protocol assignment
            members.append(
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "assignment": assignment,
                }
            )
            for topic, partitions in assignment:
                for p in partitions:
                    owner[(topic, p)] = m
        committed = {
            (t.name, p.partition_index): p.committed_offset
            for t in fetched.topics
            for p in t.partitions
            if p.committed_offset >= 0
        }
        positions = sorted(set(committed) | set(owner))
        log_end = _log_end_offsets(conn, positions)
    finally:
        conn.close()
    rows = []
    for topic, partition in positions:
        current = committed.get((topic, partition))
        end = log_end.get((topic, partition))
        member = owner.get((topic, partition))
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "current_offset": current,
                "log_end_offset": end,
                "lag": end - current if current is not None and end is not None else None,
                "member_id": member.member_id if member is not None else None,
                "client_host": member.client_host if member is not None else None,
                "client_id": member.client_id if member is not None else None,
            }
        )
    return {
        "group": group,
        "state": described.group_state,
        "protocol": described.protocol_data,
        "members": members,
        "partitions": rows,
    }


def _log_end_offsets(conn: BrokerConnection, positions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    topics = sorted({t for t, _ in positions})
    if not topics:
        return {}
    metadata = _metadata(conn, topics)
    brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for t in metadata.topics:
        for p in t.partitions:
            if (t.name, p.partition_index) in positions:
                by_leader.setdefault(p.leader_id, []).append((t.name, p.partition_index))
    out: dict[tuple[str, int], int] = {}
    partition_cls = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    for leader, tps in by_leader.items():
        if leader not in brokers:
            continue
        grouped: dict[str, list[int]] = {}
        for t, p in tps:
            grouped.setdefault(t, []).append(p)
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=0,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=t,
                    partitions=[
                        partition_cls(partition_index=p, current_leader_epoch=-1, timestamp=-1) for p in ps
                    ],
                )
                for t, ps in grouped.items()
            ],
        )
        broker = BrokerConnection(*brokers[leader], client_id="pykraft-groups")
        try:
            response = broker.request(request, ListOffsetsResponse, version=4)
        finally:
            broker.close()
        for t in response.topics:
            for p in t.partitions:
                if p.error_code == 0:
                    out[(t.name, p.partition_index)] = p.offset
    return out


def _show(value: object) -> str:
    return "-" if value is None else str(value)


def _list(args: argparse.Namespace) -> int:
    try:
        groups = list_groups(args.bootstrap_server)
    except BrokerConnectionError as exc:
        print(f"pykraft groups: {exc}", file=sys.stderr)
        return 1
    for group_id, protocol_type, state in groups:
        print(f"{group_id}\t{protocol_type or '-'}\t{state}")
    return 0


def _describe(args: argparse.Namespace) -> int:
    try:
        info = describe_group(args.bootstrap_server, args.group)
    except BrokerConnectionError as exc:
        print(f"pykraft groups: {exc}", file=sys.stderr)
        return 1
    if info["state"] == "Dead":
        print(f"pykraft groups: group {args.group!r} does not exist", file=sys.stderr)
        return 1
    print(f"GROUP {info['group']}  STATE {info['state']}  PROTOCOL {info['protocol'] or '-'}")
    print()
    print("MEMBER-ID\tCLIENT-ID\tHOST\tASSIGNMENT")
    for m in info["members"]:
        assignment = ",".join(f"{t}-{p}" for t, parts in m["assignment"] for p in parts) or "-"
        print(f"{m['member_id']}\t{m['client_id']}\t{m['client_host']}\t{assignment}")
    print()
    print("TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
    for r in info["partitions"]:
        print(
            "\t".join(
                _show(r[k])
                for k in (
                    "topic",
                    "partition",
                    "current_offset",
                    "log_end_offset",
                    "lag",
                    "member_id",
                    "client_host",
                    "client_id",
                )
            )
        )
    return 0


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    groups = subparsers.add_parser("groups", help="list consumer groups; describe members, offsets and lag")
    groups.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="any broker")
    sub = groups.add_subparsers(dest="groups_command", required=True)
    sub.add_parser("list", help="every group: id, protocol type, state").set_defaults(func=_list)
    describe = sub.add_parser("describe", help="members, assignments, committed offsets and lag")
    describe.add_argument("group")
    describe.set_defaults(func=_describe)
