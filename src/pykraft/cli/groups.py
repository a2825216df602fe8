"""``pykraft consumer-groups`` (also ``pykraft groups``), shaped like kafka-consumer-groups: ``--list``,
``--describe [--offsets|--members|--state]``, ``--reset-offsets`` (``--to-earliest``, ``--to-latest``,
``--to-current``, ``--to-offset``, ``--shift-by``, ``--to-datetime``, ``--by-duration``, ``--from-file``;
``--dry-run`` or ``--execute``; ``--topic T[:P,P]`` or ``--all-topics``), ``--delete-offsets`` and
``--delete``, plus the first form ``pykraft groups --bootstrap-server HOST:PORT list | describe GROUP``.

A small blocking client over kafka-python's codec (any Kafka broker answers it, not only pykraft):
ListGroups on every broker; for a group, FindCoordinator -> DescribeGroups (members, assignments) ->
OffsetFetch (committed offsets) -> ListOffsets latest on each partition's leader (lag = log end -
committed), printed as ``kafka-consumer-groups --describe`` does.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import datetime
from typing import Any

from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)

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
from pykraft.client.consumer import memberless_offset_commit
from pykraft.coordinator.offsets_records import RecordFormatError, assigned_partitions
from pykraft.core.errors import ErrorCode
from pykraft.core.partitions import by_topic
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError, ClientSecurity
from pykraft.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse

TIMEOUT_S = 10.0


class GroupsError(BrokerConnectionError):
    """One line for the user: what failed and where."""


def _metadata(conn: BrokerConnection, topics: list[str] | None) -> Any:
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return conn.request(
        MetadataRequest(topics=wanted, allow_auto_topic_creation=False), MetadataResponse, version=9
    )


def list_groups(bootstrap: str, security: ClientSecurity | None = None) -> list[tuple[str, str, str]]:
    """(group id, protocol type, state) from every broker."""
    conn = BrokerConnection.to(bootstrap, client_id="pykraft-groups", security=security)
    try:
        brokers = [(b.host, b.port) for b in _metadata(conn, []).brokers]
    finally:
        conn.close()
    groups: list[tuple[str, str, str]] = []
    for host, port in brokers:
        broker = BrokerConnection(host, port, client_id="pykraft-groups", security=security)
        try:
            response = broker.request(ListGroupsRequest(states_filter=[]), ListGroupsResponse, version=4)
        finally:
            broker.close()
        # Share groups are kafka-share-groups' (KIP-932), not kafka-consumer-groups'.
        groups.extend(
            (g.group_id, g.protocol_type, g.group_state)
            for g in response.groups
            if g.protocol_type != "share"
        )
    return sorted(groups)


def describe_group(bootstrap: str, group: str, security: ClientSecurity | None = None) -> dict[str, Any]:
    """State, members (with decoded assignments) and per-partition committed offset, log end and lag."""
    conn = BrokerConnection.to(bootstrap, client_id="pykraft-groups", security=security)
    try:
        found = conn.request(
            FindCoordinatorRequest(key=group, key_type=0), FindCoordinatorResponse, version=3
        )
        if found.error_code != 0:
            raise GroupsError(f"FindCoordinator for group {group!r} failed with error {found.error_code}")
        coordinator = BrokerConnection(found.host, found.port, client_id="pykraft-groups", security=security)
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
            # A KIP-848 consumer group also has epochs and target assignments (ConsumerGroupDescribe);
            # a classic group answers GROUP_ID_NOT_FOUND there.
            consumer = coordinator.request(
                ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                ConsumerGroupDescribeResponse,
                version=0,
            ).groups[0]
        finally:
            coordinator.close()
        if described.error_code != 0:
            raise GroupsError(f"DescribeGroups for group {group!r} failed with error {described.error_code}")
        if fetched.error_code != 0:
            raise GroupsError(f"OffsetFetch for group {group!r} failed with error {fetched.error_code}")
        owner: dict[tuple[str, int], Any] = {}
        members = []
        epochs: dict[str, Any] = {
            m.member_id: m for m in (consumer.members if consumer.error_code == ErrorCode.NONE else [])
        }
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
                    **(_epochs(epochs[m.member_id]) if m.member_id in epochs else {}),
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
        log_end = {
            tp: offset
            for tp, (offset, _) in list_offsets(
                conn, dict.fromkeys(positions, LATEST_TIMESTAMP), security=security
            ).items()
        }
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
        "type": "consumer" if consumer.error_code == ErrorCode.NONE else "classic",
        **(
            {"group_epoch": consumer.group_epoch, "assignment_epoch": consumer.assignment_epoch}
            if consumer.error_code == ErrorCode.NONE
            else {}
        ),
        "state": described.group_state,
        "protocol": described.protocol_data,
        "coordinator": {"id": found.node_id, "host": found.host, "port": found.port},
        "members": members,
        "partitions": rows,
    }


def _epochs(member: Any) -> dict[str, Any]:
    """A KIP-848 member's epoch and target assignment, as (topic, partitions) like its assignment."""

    def partitions(assignment: Any) -> list[tuple[str, list[int]]]:
        return sorted((t.topic_name, sorted(t.partitions)) for t in assignment.topic_partitions)

    return {"member_epoch": member.member_epoch, "target_assignment": partitions(member.target_assignment)}


def _show(value: object) -> str:
    return "-" if value is None else str(value)


def _list(args: argparse.Namespace) -> int:
    try:
        groups = list_groups(args.bootstrap_server, admin_security(args))
    except (BrokerConnectionError, UsageError, ToolError) as exc:
        print(f"pykraft groups: {exc}", file=sys.stderr)
        return 1
    for group_id, protocol_type, state in groups:
        print(f"{group_id}\t{protocol_type or '-'}\t{state}")
    return 0


def _describe(args: argparse.Namespace) -> int:
    try:
        info = describe_group(args.bootstrap_server, args.group, admin_security(args))
    except (BrokerConnectionError, UsageError, ToolError) as exc:
        print(f"pykraft groups: {exc}", file=sys.stderr)
        return 1
    if info["state"] == "Dead":
        print(f"pykraft groups: group {args.group!r} does not exist", file=sys.stderr)
        return 1
    print(f"GROUP {info['group']}  STATE {info['state']}  PROTOCOL {info['protocol'] or '-'}")
    consumer = info["type"] == "consumer"
    if consumer:
        print(
            f"TYPE consumer  GROUP-EPOCH {info['group_epoch']}  ASSIGNMENT-EPOCH {info['assignment_epoch']}"
        )
    print()
    print(
        "MEMBER-ID\tCLIENT-ID\tHOST\tASSIGNMENT" + ("\tMEMBER-EPOCH\tTARGET-ASSIGNMENT" if consumer else "")
    )
    for m in info["members"]:
        assignment = ",".join(f"{t}-{p}" for t, parts in m["assignment"] for p in parts) or "-"
        line = f"{m['member_id']}\t{m['client_id']}\t{m['client_host']}\t{assignment}"
        if consumer:
            target = ",".join(f"{t}-{p}" for t, parts in m.get("target_assignment", []) for p in parts) or "-"
            line += f"\t{_show(m.get('member_epoch'))}\t{target}"
        print(line)
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


# --- kafka-consumer-groups: --list, --describe, --reset-offsets, --delete-offsets, --delete ---------------

# Kafka's ConsumerGroupCommand asks for the same versions' fields; the broker serves these.
OFFSET_COMMIT_VERSION = 8
OFFSET_DELETE_VERSION = 0
DELETE_GROUPS_VERSION = 2
INACTIVE_STATES = ("Empty", "Dead")
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_datetime_ms(text: str) -> int:
    """``--to-datetime``: Kafka's ``YYYY-MM-DDTHH:mm:SS.sss``, with an optional zone (``Z``, ``+01:00``);
    without one it is local time, as Kafka reads it."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--to-datetime: {text!r} is not YYYY-MM-DDTHH:mm:SS.sss[+HH:MM]") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """``--by-duration``: an ISO-8601 duration ``PnDTnHnMnS`` (as Java's Duration.parse), in ms."""
    match = _DURATION.match(text.strip().upper())
    if match is None or text.strip().upper() in ("P", "PT"):
        raise UsageError(f"--by-duration: {text!r} is not a duration like P1DT2H3M4S")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def parse_topic_scope(items: list[str]) -> list[tuple[str, list[int] | None]]:
    """``--topic t`` (every partition) or ``--topic t:0,1,2`` (those), repeatable, as Kafka takes them."""
    out: list[tuple[str, list[int] | None]] = []
    for item in items:
        topic, sep, parts = item.partition(":")
        if not topic:
            raise UsageError(f"--topic: {item!r} names no topic")
        if not sep:
            out.append((topic, None))
            continue
        try:
            out.append((topic, [int(p) for p in parts.split(",") if p.strip()]))
        except ValueError:
            raise UsageError(f"--topic: {item!r} is not TOPIC or TOPIC:PARTITION,PARTITION") from None
    return out


def _coordinator(conn: BrokerConnection, group: str, security: ClientSecurity | None) -> BrokerConnection:
    found = conn.request(FindCoordinatorRequest(key=group, key_type=0), FindCoordinatorResponse, version=3)
    if found.error_code:
        raise ToolError(f"FindCoordinator for group {group!r}: {error_name(found.error_code)}")
    return BrokerConnection(found.host, found.port, client_id="pykraft-consumer-groups", security=security)


def _expand(conn: BrokerConnection, scope: list[tuple[str, list[int] | None]]) -> list[TopicPartition]:
    """Topic scope -> partitions: a topic without partitions means all of them (from Metadata)."""
    whole = sorted({t for t, parts in scope if parts is None})
    meta = metadata(conn, whole) if whole else None
    out: list[TopicPartition] = []
    for topic, parts in scope:
        chosen = parts if parts is not None else topic_partitions(meta, topic)
        out.extend((topic, p) for p in chosen if (topic, p) not in out)
    return out


def _groups_of(args: argparse.Namespace, security: ClientSecurity | None) -> list[str]:
    if args.all_groups:
        return [g for g, _, _ in list_groups(args.bootstrap_server, security)]
    if not args.group:
        raise UsageError("--group: give a group (or --all-groups)")
    return list(args.group)


def _kafka_list(args: argparse.Namespace, security: ClientSecurity | None) -> int:
    groups = list_groups(args.bootstrap_server, security)
    wanted_states = None
    if args.state not in (None, ""):
        wanted_states = {s.strip().lower() for s in args.state.split(",") if s.strip()}
        groups = [g for g in groups if g[2].lower() in wanted_states]
    if args.json:
        print_json([{"group": g, "protocol_type": t, "state": s} for g, t, s in groups])
    elif args.state is not None:
        print_table(["GROUP", "STATE"], [(g, s) for g, _, s in groups])
    else:
        for group_id, _, _ in groups:
            print(group_id)
    return 0


def _kafka_describe(args: argparse.Namespace, security: ClientSecurity | None) -> int:
    infos = []
    for group in _groups_of(args, security):
        info = describe_group(args.bootstrap_server, group, security)
        if info["state"] == "Dead":
            raise ToolError(f"Consumer group '{group}' does not exist.")
        infos.append(info)
    if args.json:
        print_json(infos)
        return 0
    for info in infos:
        group = info["group"]
        if args.state is not None:
            coordinator = info["coordinator"]
            print_table(
                ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                [
                    (
                        group,
                        f"{coordinator['host']}:{coordinator['port']} ({coordinator['id']})",
                        info["protocol"] or "",
                        info["state"],
                        len(info["members"]),
                    )
                ],
            )
        elif args.members:
            headers = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            rows: list[tuple[object, ...]] = []
            for m in info["members"]:
                count = sum(len(parts) for _, parts in m["assignment"])
                row: tuple[object, ...] = (group, m["member_id"], m["client_host"], m["client_id"], count)
                if args.verbose:
                    row += (",".join(f"{t}({','.join(map(str, ps))})" for t, ps in m["assignment"]) or "-",)
                    if info["type"] == "consumer":
                        # Kafka 4's columns for a KIP-848 group: the member's epoch and where it is going.
                        target = m.get("target_assignment", [])
                        row = (*row[:-1], m.get("member_epoch"), row[-1], info["assignment_epoch"])
                        row += (",".join(f"{t}({','.join(map(str, ps))})" for t, ps in target) or "-",)
                rows.append(row)
            if args.verbose and info["type"] == "consumer":
                headers += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
            elif args.verbose:
                headers += ["ASSIGNMENT"]
            print_table(headers, rows)
        else:
            if info["state"] == "Empty":
                print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
            print_table(
                [
                    "GROUP",
                    "TOPIC",
                    "PARTITION",
                    "CURRENT-OFFSET",
                    "LOG-END-OFFSET",
                    "LAG",
                    "CONSUMER-ID",
                    "HOST",
                    "CLIENT-ID",
                ],
                [
                    (
                        group,
                        r["topic"],
                        r["partition"],
                        r["current_offset"],
                        r["log_end_offset"],
                        r["lag"],
                        r["member_id"],
                        r["client_host"],
                        r["client_id"],
                    )
                    for r in info["partitions"]
                ],
            )
    return 0


def _from_file(path: str, group: str) -> dict[TopicPartition, int]:
    """``--from-file``: Kafka's export CSV, ``topic,partition,offset`` (or ``group,topic,partition,offset``
    lines, of which this group's are taken)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError as exc:
        raise UsageError(f"--from-file: cannot read {path}: {exc.strerror}") from None
    out: dict[TopicPartition, int] = {}
    for number, line in enumerate(lines, 1):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 4:
            if cells[0] != group:
                continue
            cells = cells[1:]
        try:
            topic, partition, offset = cells[0], int(cells[1]), int(cells[2])
        except (ValueError, IndexError):
            raise UsageError(f"--from-file: line {number} {line!r} is not topic,partition,offset") from None
        out[(topic, partition)] = offset
    return out


def plan_reset(
    args: argparse.Namespace,
    conn: BrokerConnection,
    security: ClientSecurity | None,
    group: str,
    committed: dict[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """The offsets ``--reset-offsets`` would commit, as Kafka's ConsumerGroupCommand computes them:
    earliest/latest/a timestamp from ListOffsets, --to-offset and --shift-by kept inside
    [earliest, latest] (with a warning)."""
    if args.from_file is not None:
        return _from_file(args.from_file, group)
    if args.all_topics:
        partitions = sorted(committed)
    elif args.topic:
        partitions = _expand(conn, parse_topic_scope(args.topic))
    else:
        raise UsageError("--reset-offsets needs a scope: --topic TOPIC[:PARTITIONS] or --all-topics")
    if not partitions:
        return {}

    def offsets_at(spec: int) -> dict[TopicPartition, int]:
        found = list_offsets(conn, dict.fromkeys(partitions, spec), security=security)
        return {tp: offset for tp, (offset, _) in found.items()}

    if args.to_earliest:
        return offsets_at(EARLIEST_TIMESTAMP)
    if args.to_latest:
        return offsets_at(LATEST_TIMESTAMP)
    if args.to_datetime is not None or args.by_duration is not None:
        if args.to_datetime is not None:
            timestamp_ms = parse_datetime_ms(args.to_datetime)
        else:
            timestamp_ms = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
        at_time = offsets_at(timestamp_ms)
        latest = offsets_at(LATEST_TIMESTAMP)
        # No record at or after the time: the log end, as Kafka resets then.
        return {tp: at_time[tp] if at_time[tp] >= 0 else latest[tp] for tp in partitions}
    if args.to_current:
        latest = offsets_at(LATEST_TIMESTAMP)
        return {tp: committed.get(tp, latest[tp]) for tp in partitions}
    earliest, latest = offsets_at(EARLIEST_TIMESTAMP), offsets_at(LATEST_TIMESTAMP)
    wanted: dict[TopicPartition, int] = {}
    for tp in partitions:
        if args.to_offset is not None:
            wanted[tp] = args.to_offset
        else:
            if tp not in committed:
                raise ToolError(
                    f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                    "committed offset"
                )
            wanted[tp] = committed[tp] + args.shift_by
    out = {}
    for tp, offset in wanted.items():
        if offset < earliest[tp]:
            print(
                f"WARN: New offset ({offset}) is lower than earliest offset for topic partition "
                f"{tp[0]}-{tp[1]}. Value will be set to {earliest[tp]}",
                file=sys.stderr,
            )
            offset = earliest[tp]
        elif offset > latest[tp]:
            print(
                f"WARN: New offset ({offset}) is higher than latest offset for topic partition "
                f"{tp[0]}-{tp[1]}. Value will be set to {latest[tp]}",
                file=sys.stderr,
            )
            offset = latest[tp]
        out[tp] = offset
    return out


def commit_offsets(coordinator: BrokerConnection, group: str, offsets: dict[TopicPartition, int]) -> None:
    """OffsetCommit without a generation or member id: what Kafka's admin client sends for an inactive
    group (the coordinator refuses it while the group has members)."""
    request = memberless_offset_commit(group, offsets)
    response = coordinator.request(request, OffsetCommitResponse, OFFSET_COMMIT_VERSION)
    for t in response.topics:
        for p in t.partitions:
            if p.error_code:
                raise ToolError(
                    f"OffsetCommit for group {group!r} {t.name}-{p.partition_index}: {error_name(p.error_code)}"
                )


def _kafka_reset(args: argparse.Namespace, security: ClientSecurity | None) -> int:
    specs = [
        args.to_earliest,
        args.to_latest,
        args.to_current,
        args.to_offset is not None,
        args.shift_by is not None,
        args.to_datetime is not None,
        args.by_duration is not None,
        args.from_file is not None,
    ]
    if sum(specs) != 1:
        raise UsageError(
            "--reset-offsets needs exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
            "--shift-by, --to-datetime, --by-duration, --from-file"
        )
    if args.dry_run and args.execute:
        raise UsageError("--dry-run and --execute: give one")
    if args.all_topics and args.topic:
        raise UsageError("--all-topics and --topic: give one")
    if not args.dry_run and not args.execute:
        print(
            "WARN: No action will be performed as the --execute option is missing. Add --dry-run to "
            "plan explicitly, or --execute to commit the new offsets.",
            file=sys.stderr,
        )
    results: list[tuple[str, TopicPartition, int]] = []
    failed = False
    with BrokerConnection.to(
        args.bootstrap_server, client_id="pykraft-consumer-groups", security=security
    ) as conn:
        for group in _groups_of(args, security):
            info = describe_group(args.bootstrap_server, group, security)
            if info["state"] not in INACTIVE_STATES:
                print(
                    f"Error: Assignments can only be reset if the group '{group}' is inactive, but the "
                    f"current state is {info['state']}.",
                    file=sys.stderr,
                )
                failed = True
                continue
            committed = {
                (r["topic"], r["partition"]): r["current_offset"]
                for r in info["partitions"]
                if r["current_offset"] is not None
            }
            planned = plan_reset(args, conn, security, group, committed)
            if args.execute and planned:
                coordinator = _coordinator(conn, group, security)
                try:
                    commit_offsets(coordinator, group, planned)
                finally:
                    coordinator.close()
            results.extend((group, tp, offset) for tp, offset in sorted(planned.items()))
    if args.json:
        print_json([{"group": g, "topic": t, "partition": p, "new_offset": o} for g, (t, p), o in results])
    elif args.export:
        several = len({g for g, _, _ in results}) > 1
        for group, (topic, partition), offset in results:
            print(f"{group + ',' if several else ''}{topic},{partition},{offset}")
    elif results or not failed:
        print()
        print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [(g, t, p, o) for g, (t, p), o in results])
    return 1 if failed else 0


def _kafka_delete_offsets(args: argparse.Namespace, security: ClientSecurity | None) -> int:
    if not args.group or len(args.group) != 1:
        raise UsageError("--delete-offsets takes exactly one --group")
    if not args.topic:
        raise UsageError("--delete-offsets needs --topic TOPIC[:PARTITIONS]")
    group = args.group[0]
    with BrokerConnection.to(
        args.bootstrap_server, client_id="pykraft-consumer-groups", security=security
    ) as conn:
        partitions = _expand(conn, parse_topic_scope(args.topic))
        topic_cls: Any = OffsetDeleteRequest.OffsetDeleteRequestTopic
        request = OffsetDeleteRequest(
            group_id=group,
            topics=[
                topic_cls(
                    name=topic,
                    partitions=[topic_cls.OffsetDeleteRequestPartition(partition_index=p) for p in parts],
                )
                for topic, parts in by_topic(partitions).items()
            ],
        )
        coordinator = _coordinator(conn, group, security)
        try:
            response = coordinator.request(request, OffsetDeleteResponse, OFFSET_DELETE_VERSION)
        finally:
            coordinator.close()
    statuses = sorted(
        ((t.name, p.partition_index, p.error_code) for t in response.topics for p in t.partitions),
    )
    top = response.error_code
    topics = ", ".join(sorted({t for t, _ in partitions}))
    if args.json:
        print_json(
            {
                "group": group,
                "error": None if top == 0 else error_name(top),
                "partitions": [
                    {"topic": t, "partition": p, "error": None if e == 0 else error_name(e)}
                    for t, p, e in statuses
                ],
            }
        )
    else:
        if top == 0 and not any(e for _, _, e in statuses):
            print(f"Request succeed for deleting offsets with topic {topics} group {group}")
        elif top == ErrorCode.GROUP_ID_NOT_FOUND:
            print(f"Error: '{group}' does not exist.", file=sys.stderr)
        elif top == ErrorCode.NON_EMPTY_GROUP:
            print(
                f"Error: Deleting offsets of a consumer group '{group}' is forbidden if the group is not "
                "empty.",
                file=sys.stderr,
            )
        elif top == 0 or top == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC:
            print("Error: Encounter some partition level error, see the follow-up details:", file=sys.stderr)
        else:
            print(f"Error: Encounter some unknown error: {error_name(top)}", file=sys.stderr)
        print()
        print_table(
            ["TOPIC", "PARTITION", "STATUS"],
            [
                (t, p, "Successful" if e == 0 and top == 0 else f"Error: {error_name(e or top)}")
                for t, p, e in statuses
            ],
        )
    return 0 if top == 0 and not any(e for _, _, e in statuses) else 1


def _kafka_delete(args: argparse.Namespace, security: ClientSecurity | None) -> int:
    groups = _groups_of(args, security)
    failures: dict[str, str] = {}
    with BrokerConnection.to(
        args.bootstrap_server, client_id="pykraft-consumer-groups", security=security
    ) as conn:
        for group in groups:
            coordinator = _coordinator(conn, group, security)
            try:
                response = coordinator.request(
                    DeleteGroupsRequest(groups_names=[group]), DeleteGroupsResponse, DELETE_GROUPS_VERSION
                )
            finally:
                coordinator.close()
            for result in response.results:
                if result.error_code:
                    failures[result.group_id] = error_name(result.error_code)
    done = [g for g in groups if g not in failures]
    if done:
        print(
            "Deletion of requested consumer groups ("
            + ", ".join(f"'{g}'" for g in done)
            + ") was successful."
        )
    if failures:
        print("Deletion of some consumer groups failed:", file=sys.stderr)
        for group, error in failures.items():
            print(f"* Group '{group}' could not be deleted due to: {error}", file=sys.stderr)
    return 1 if failures else 0


def _kafka_mode(args: argparse.Namespace) -> int:
    actions = [args.list, args.describe, args.reset_offsets, args.delete_offsets, args.delete]
    if sum(actions) != 1:
        raise UsageError(
            "give exactly one of --list, --describe, --reset-offsets, --delete-offsets, --delete "
            "(or the subcommands list, describe GROUP)"
        )
    security = admin_security(args)
    if args.list:
        return _kafka_list(args, security)
    if args.describe:
        return _kafka_describe(args, security)
    if args.reset_offsets:
        return _kafka_reset(args, security)
    if args.delete_offsets:
        return _kafka_delete_offsets(args, security)
    return _kafka_delete(args, security)


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "consumer-groups",
        aliases=["groups"],
        help="list, describe, delete consumer groups; reset or delete their offsets (kafka-consumer-groups)",
        description="List all consumer groups, describe a consumer group, delete consumer group info, or "
        "reset consumer group offsets (as kafka-consumer-groups.sh).",
    )
    add_connection_arguments(parser)
    actions = parser.add_argument_group("actions")
    actions.add_argument("--list", action="store_true", help="List all consumer groups.")
    actions.add_argument(
        "--describe",
        action="store_true",
        help="Describe consumer group and list offset lag (number of messages not yet processed) related "
        "to given group.",
    )
    actions.add_argument(
        "--reset-offsets",
        action="store_true",
        help="Reset offsets of consumer group. Supports one consumer group at the time, and instances "
        "should be inactive. Has 2 execution options: --dry-run (the default) to plan which offsets to "
        "reset, and --execute to update the offsets. You must choose one of the following reset "
        "specifications: --to-datetime, --by-duration, --to-earliest, --to-latest, --shift-by, "
        "--from-file, --to-current, --to-offset. To define the scope use --all-topics or --topic.",
    )
    actions.add_argument(
        "--delete-offsets",
        action="store_true",
        help="Delete offsets of consumer group. Supports one consumer group at the time, and multiple "
        "topics.",
    )
    actions.add_argument(
        "--delete",
        action="store_true",
        help="Pass in groups to delete topic partition offsets and ownership information over the entire "
        "consumer group. For instance --group g1 --group g2",
    )
    parser.add_argument(
        "--group", action="append", metavar="GROUP", help="The consumer group we wish to act on."
    )
    parser.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    parser.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:PARTITIONS]",
        help="The topic whose consumer group information should be deleted or topic whose should be "
        "included in the reset offset process. In `reset-offsets` case, partitions can be specified "
        "using this format: `topic1:0,1,2`, where 0,1,2 are the partition to be included in the "
        "process. Reset-offsets also supports multiple topic inputs.",
    )
    parser.add_argument(
        "--all-topics",
        action="store_true",
        help="Consider all topics assigned to a group in the `reset-offsets` process.",
    )
    describe = parser.add_argument_group("--describe options")
    describe.add_argument(
        "--offsets",
        action="store_true",
        help="Describe the group and list all topic partitions in the group along with their offset "
        "lag. This is the default sub-action of --describe.",
    )
    describe.add_argument("--members", action="store_true", help="Describe members of the group.")
    describe.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATES",
        help="When specified with '--describe', includes the state of the group. When specified with "
        "'--list', it displays the state of all groups; it can also list groups with specific states, "
        "e.g. --state stable,empty.",
    )
    describe.add_argument(
        "--verbose", action="store_true", help="Provide additional information, if any, when describing."
    )
    reset = parser.add_argument_group("--reset-offsets options")
    reset.add_argument(
        "--dry-run",
        action="store_true",
        help="Only show results without executing changes on Consumer Groups. Supported operations: "
        "reset-offsets.",
    )
    reset.add_argument(
        "--execute", action="store_true", help="Execute operation. Supported operations: reset-offsets."
    )
    reset.add_argument(
        "--export",
        action="store_true",
        help="Export operation execution to a CSV format. Supported operations: reset-offsets.",
    )
    reset.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    reset.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    reset.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    reset.add_argument("--to-offset", type=int, metavar="OFFSET", help="Reset offsets to a specific offset.")
    reset.add_argument(
        "--shift-by",
        type=int,
        metavar="N",
        help="Reset offsets shifting current offset by 'n', where 'n' can be positive or negative.",
    )
    reset.add_argument(
        "--to-datetime",
        metavar="DATETIME",
        help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDTHH:mm:SS.sss'",
    )
    reset.add_argument(
        "--by-duration",
        metavar="DURATION",
        help="Reset offsets to offset by duration from current timestamp. Format: 'PnDTnHnMnS'",
    )
    reset.add_argument(
        "--from-file",
        metavar="CSV",
        help="Reset offsets to values defined in CSV file (topic,partition,offset).",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document, for scripts (pykraft)")
    parser.set_defaults(func=run_tool("consumer-groups", _kafka_mode))

    # pykraft's first form, kept: `pykraft groups --bootstrap-server H:P list | describe GROUP`.
    sub = parser.add_subparsers(dest="groups_command", metavar="{list,describe}")
    sub.add_parser("list", help="every group: id, protocol type, state (tab-separated)").set_defaults(
        func=_list
    )
    legacy_describe = sub.add_parser("describe", help="members, assignments, committed offsets and lag")
    legacy_describe.add_argument("group", metavar="GROUP")
    legacy_describe.set_defaults(func=_describe)
