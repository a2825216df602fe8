"""``pykraft get-offsets``, shaped like kafka-get-offsets (GetOffsetShell): the offsets of topic
partitions at a time, printed ``topic:partition:offset``, one a line, sorted.

``--time``: -1 or ``latest`` (the log end), -2 or ``earliest`` (the log start), -3 or ``max-timestamp``
(the record with the largest timestamp), -4 ``earliest-local`` (the same as earliest: pykraft has no tiered
storage), or a timestamp in ms (the first offset whose timestamp is at or after it; an empty offset when
there is none, as Kafka prints it).
"""

from __future__ import annotations

import argparse
import re

from pykraft.cli.common import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    UsageError,
    add_connection_arguments,
    admin_security,
    bootstrap_of,
    list_offsets,
    metadata,
    print_json,
    run_tool,
)
from pykraft.io.kafka_connection import BrokerConnection

EARLIEST_LOCAL_TIMESTAMP = -4
NAMED_TIMES = {
    "latest": LATEST_TIMESTAMP,
    "earliest": EARLIEST_TIMESTAMP,
    "max-timestamp": MAX_TIMESTAMP,
    "earliest-local": EARLIEST_LOCAL_TIMESTAMP,
}
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


def parse_time(text: str) -> int:
    value = NAMED_TIMES.get(text.strip().lower())
    if value is not None:
        return value
    try:
        number = int(text)
    except ValueError:
        raise UsageError(
            f"--time: {text!r} is not -1/latest, -2/earliest, -3/max-timestamp, -4/earliest-local or a "
            "timestamp in ms"
        ) from None
    if number < EARLIEST_LOCAL_TIMESTAMP:
        raise UsageError(f"--time: {text!r} is not a timestamp in ms nor one of -1, -2, -3, -4")
    return number


def parse_partitions(text: str, flag: str = "--partitions") -> set[int]:
    """``0,1,3-5``: partition ids and inclusive ranges, as kafka-get-offsets takes them."""
    out: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        low, sep, high = item.partition("-")
        try:
            if sep:
                out.update(range(int(low), int(high) + 1))
            else:
                out.add(int(item))
        except ValueError:
            raise UsageError(f"{flag}: {item!r} is not a partition id or a range like 3-5") from None
    return out


def _topic_pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise UsageError(f"--topic: {text!r} is not a regular expression: {exc}") from None


def _get_offsets(args: argparse.Namespace) -> int:
    spec = parse_time(args.time)
    pattern = _topic_pattern(args.topic) if args.topic is not None else None
    wanted_partitions = parse_partitions(args.partitions) if args.partitions is not None else None
    security = admin_security(args)
    with BrokerConnection.to(
        bootstrap_of(args.bootstrap_server), client_id="pykraft-get-offsets", security=security
    ) as conn:
        meta = metadata(conn, None)
        chosen: list[tuple[str, int]] = []
        for t in meta.topics:
            if pattern is not None and not pattern.fullmatch(t.name):
                continue
            if args.exclude_internal_topics and (t.is_internal or t.name in INTERNAL_TOPICS):
                continue
            for p in t.partitions:
                if wanted_partitions is None or p.partition_index in wanted_partitions:
                    chosen.append((t.name, p.partition_index))
        # earliest-local is earliest where there is no remote storage.
        request_spec = EARLIEST_TIMESTAMP if spec == EARLIEST_LOCAL_TIMESTAMP else spec
        found = list_offsets(conn, dict.fromkeys(chosen, request_spec), security=security)
    rows = sorted(found.items())
    if args.json:
        print_json(
            [
                {"topic": t, "partition": p, "offset": offset if offset >= 0 else None, "timestamp": ts}
                for (t, p), (offset, ts) in rows
            ]
        )
        return 0
    for (topic, partition), (offset, _) in rows:
        print(f"{topic}:{partition}:{offset if offset >= 0 else ''}")
    return 0


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "get-offsets",
        help="offsets of topic partitions at a time: latest, earliest, max-timestamp or ms (kafka-get-offsets)",
        description="An interactive shell for getting topic-partition offsets (as kafka-get-offsets.sh).",
    )
    add_connection_arguments(parser)
    parser.add_argument(
        "--topic",
        metavar="TOPIC",
        help="The topic to get the offsets for. It also accepts a regular expression. If not present, all "
        "authorized topics are queried.",
    )
    parser.add_argument(
        "--partitions",
        metavar="PARTITIONS",
        help="Comma separated list of partition ids to get the offsets for. If not present, all partitions "
        "of the authorized topics are queried. Accepts ranges like 0,1,3-5.",
    )
    parser.add_argument(
        "--time",
        default="-1",
        metavar="TIMESTAMP",
        help="timestamp of the offsets before that. [Note: No offset is returned, if the timestamp "
        "greater than recently committed record timestamp is given.] (-1 or latest, -2 or earliest, "
        "-3 or max-timestamp, -4 or earliest-local, or a timestamp in ms) (default: -1)",
    )
    parser.add_argument(
        "--exclude-internal-topics",
        action="store_true",
        help="By default, internal topics are included. If specified, internal topics are excluded.",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document, for scripts (pykraft)")
    parser.set_defaults(func=run_tool("get-offsets", _get_offsets))
