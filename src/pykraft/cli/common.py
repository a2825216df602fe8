"""What the Kafka-shaped tools share: ``--bootstrap-server`` and ``--command-config``, client properties
mapped to pykraft's clients, the exit codes, ``rich`` tables for people and JSON for scripts, and the
admin requests more than one tool sends (Metadata, ListOffsets at each partition's leader).

Exit codes as Kafka's tools and argparse: 0 done, 1 the cluster said no (or could not be reached),
2 bad input (one line naming the flag and the value), 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import ssl
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.client.connection import ConnectionSecurity
from pykraft.client.errors import ConnectionLost, KafkaClientError
from pykraft.core.config import ConfigError, parse_properties
from pykraft.core.errors import ErrorCode
from pykraft.core.partitions import by_topic
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError, ClientSecurity

TopicPartition = tuple[str, int]
METADATA_VERSION = 9
# v7 knows -3 (the record with the largest timestamp, KIP-734); v4 is the oldest with leader epochs.
LIST_OFFSETS_VERSION = 7
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class UsageError(Exception):
    """Bad input: exit status 2 with one line naming the flag and the value."""


class ToolError(Exception):
    """The cluster refused or could not answer: exit status 1 with one line."""


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def run_tool(tool: str, func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``func`` with the tools' error handling: every failure is one line on stderr, never a traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(func(args))
        except UsageError as exc:
            print(f"pykraft {tool}: {exc}", file=sys.stderr)
            return 2
        except (ToolError, BrokerConnectionError, ConnectionLost) as exc:
            print(f"pykraft {tool}: {exc}", file=sys.stderr)
            return 1
        except KafkaClientError as exc:
            print(f"pykraft {tool}: {exc}", file=sys.stderr)
            return 1
        except BrokenPipeError:  # `| head`: the reader has all it wanted
            return 0
        except KeyboardInterrupt:
            return 130

    return run


# --- connecting -------------------------------------------------------------------------------------------


def add_connection_arguments(parser: argparse.ArgumentParser, *config_aliases: str) -> None:
    """Kafka's ``--bootstrap-server`` and ``--command-config`` (plus the older per-tool names of the
    latter, such as ``--producer.config``)."""
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help="REQUIRED: The server(s) to connect to.",
    )
    parser.add_argument(
        "--command-config",
        *config_aliases,
        dest="command_config",
        metavar="FILE",
        help="Property file containing configs to be passed to the client (security.protocol, "
        "sasl.mechanism, sasl.jaas.config, ssl.truststore.location / ssl.ca.location).",
    )


def client_properties(path: str | None) -> dict[str, str]:
    """The ``--command-config`` file as properties ({} without one)."""
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as exc:
        raise UsageError(f"--command-config: cannot read {path}: {exc.strerror}") from None
    except ConfigError as exc:
        raise UsageError(f"--command-config: {exc}") from None


def security_of(properties: dict[str, str], source: str = "--command-config") -> ClientSecurity | None:
    """Kafka's client security properties as the blocking admin connection takes them."""
    if not properties:
        return None
    try:
        return ClientSecurity.from_properties(properties, source)
    except BrokerConnectionError as exc:
        raise UsageError(str(exc)) from None


def connection_security(security: ClientSecurity | None) -> ConnectionSecurity | None:
    """The same settings for pykraft's asyncio client (producers and consumers)."""
    if security is None or security.security_protocol == "PLAINTEXT":
        return None
    context = None
    if security.security_protocol in ("SSL", "SASL_SSL"):
        try:
            context = ssl.create_default_context(cafile=security.ca_location)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(
                f"--command-config: ssl.truststore.location {security.ca_location}: {exc}"
            ) from None
    mechanism = security.sasl_mechanism if security.security_protocol.startswith("SASL_") else None
    return ConnectionSecurity(context, mechanism, security.username or "", security.password or "")


def bootstrap_of(text: str, flag: str = "--bootstrap-server") -> str:
    """A ``--bootstrap-server`` list checked up front, so a typo is a usage error, not a traceback."""
    servers = [s.strip() for s in text.split(",") if s.strip()]
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise UsageError(f"{flag}: {server!r} is not HOST:PORT")
    if not servers:
        raise UsageError(f"{flag}: {text!r} is not HOST:PORT")
    return ",".join(servers)


def parse_acks(text: str, flag: str) -> int:
    value = "-1" if text.strip().lower() == "all" else text.strip()
    if value not in ("-1", "0", "1"):
        raise UsageError(f"{flag}: {text!r} is not -1 (all), 0 or 1")
    return int(value)


def admin_security(args: argparse.Namespace) -> ClientSecurity | None:
    """The ``--command-config`` of a tool's arguments, for its admin connections."""
    return security_of(client_properties(args.command_config))


# --- properties on the command line -----------------------------------------------------------------------


def key_values(items: Iterable[str], flag: str) -> dict[str, str]:
    """``--property k=v`` (repeatable, or several after one flag) as a dict; a bad item is a usage error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag}: {item!r} is not KEY=VALUE")
        out[key.strip()] = value
    return out


def flag_bool(properties: dict[str, str], key: str, default: bool = False) -> bool:
    value = properties.get(key)
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise UsageError(f"--property {key}={value}: expected true or false")


def unescape(text: str) -> str:
    """Separators as typed in a shell (``key.separator=\\t``) mean the control character, as in Kafka."""
    return text.encode("utf-8").decode("unicode_escape") if "\\" in text else text


# --- output -------------------------------------------------------------------------------------------------


def print_table(headers: list[str], rows: Iterable[Iterable[object]]) -> None:
    """Columns as Kafka's tools print them (no borders, left-aligned, a header row), drawn by ``rich``;
    never wrapped or cut when stdout is a pipe or a file, so scripts and tests see whole values."""
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, show_edge=False, pad_edge=False, header_style="bold", padding=(0, 2, 0, 0))
    for header in headers:
        table.add_column(header, no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*("-" if cell is None else str(cell) for cell in row))
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 1_000_000, highlight=False)
    console.print(table)


@contextlib.contextmanager
def progress_bar(total: int, description: str) -> Iterator[Callable[[int], None]]:
    """A ``rich`` progress bar on stderr while a person watches (stderr is a terminal); it disappears
    when done, so stdout keeps only Kafka's lines. Yields ``advance(n)``; a no-op for pipes and tests."""
    if not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n: progress.advance(task, n)


def print_json(value: Any) -> None:
    print(json.dumps(value, sort_keys=False))


# --- admin requests several tools send ----------------------------------------------------------------------


def metadata(conn: BrokerConnection, topics: list[str] | None) -> Any:
    """Metadata for ``topics`` (None: every topic); never creates a topic."""
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return conn.request(
        MetadataRequest(topics=wanted, allow_auto_topic_creation=False), MetadataResponse, METADATA_VERSION
    )


def topic_partitions(meta: Any, topic: str) -> list[int]:
    for t in meta.topics:
        if t.name == topic:
            if t.error_code:
                raise ToolError(f"topic {topic}: {error_name(t.error_code)}")
            return sorted(p.partition_index for p in t.partitions)
    raise ToolError(f"topic {topic}: {error_name(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}")


def list_offsets(
    conn: BrokerConnection,
    wanted: dict[TopicPartition, int],
    *,
    security: ClientSecurity | None = None,
    isolation_level: int = 0,
) -> dict[TopicPartition, tuple[int, int]]:
    """ListOffsets for each partition at its leader: ``{tp: (offset, timestamp)}`` for ``{tp: spec}``,
    a spec being -1 (latest), -2 (earliest), -3 (max timestamp) or a timestamp in ms (the first offset
    whose timestamp is at or after it; offset -1 when there is none). A partition error is a ToolError."""
    if not wanted:
        return {}
    meta = metadata(conn, sorted({t for t, _ in wanted}))
    brokers = {b.node_id: (b.host, b.port) for b in meta.brokers}
    leaders: dict[TopicPartition, int] = {}
    for t in meta.topics:
        if t.error_code and any(topic == t.name for topic, _ in wanted):
            raise ToolError(f"topic {t.name}: {error_name(t.error_code)}")
        for p in t.partitions:
            leaders[(t.name, p.partition_index)] = p.leader_id
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp in wanted:
        if tp not in leaders:
            raise ToolError(f"partition {tp[0]}-{tp[1]}: {error_name(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)}")
        if leaders[tp] not in brokers:
            raise ToolError(f"partition {tp[0]}-{tp[1]}: {error_name(ErrorCode.LEADER_NOT_AVAILABLE)}")
        by_leader.setdefault(leaders[tp], []).append(tp)
    topic_cls: Any = ListOffsetsRequest.ListOffsetsTopic
    out: dict[TopicPartition, tuple[int, int]] = {}
    for leader, tps in by_leader.items():
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[
                topic_cls(
                    name=topic,
                    partitions=[
                        topic_cls.ListOffsetsPartition(
                            partition_index=p, current_leader_epoch=-1, timestamp=wanted[(topic, p)]
                        )
                        for p in parts
                    ],
                )
                for topic, parts in by_topic(tps).items()
            ],
        )
        broker = BrokerConnection(*brokers[leader], client_id=conn.client_id, security=security)
        try:
            response = broker.request(request, ListOffsetsResponse, LIST_OFFSETS_VERSION)
        finally:
            broker.close()
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    raise ToolError(f"ListOffsets {t.name}-{p.partition_index}: {error_name(p.error_code)}")
                out[(t.name, p.partition_index)] = (p.offset, p.timestamp)
    return out
