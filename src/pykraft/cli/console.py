"""``pykraft console-producer`` and ``pykraft console-consumer``, shaped like kafka-console-producer and
kafka-console-consumer, over pykraft's own asyncio client (so they need no dev extras).

The producer reads stdin a line a record, as Kafka's LineMessageReader: ``--property parse.key=true``
with ``key.separator`` (a tab by default), ``parse.headers=true`` with ``headers.delimiter``,
``headers.separator`` and ``headers.key.separator``, ``null.marker`` and ``ignore.error``. pykraft adds
``parse.timestamp=true``: each line starts with the record's timestamp in ms (a ``CreateTime:`` prefix is
allowed) and ``key.separator``, so the consumer's ``print.timestamp`` output can be produced again.

The consumer prints each record as Kafka's DefaultMessageFormatter: ``print.timestamp``,
``print.partition``, ``print.offset``, ``print.headers``, ``print.key``, ``print.value``, each column
followed by ``key.separator``, headers as ``k:v,k:v`` (``NO_HEADERS``), ``null.literal`` for nulls.
``--group`` starts at the group's committed offsets and commits what was printed on exit; it does not
join the group (pykraft's consumer is assign()-style), so partitions are not shared with other members.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pykraft.cli.common import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ToolError,
    UsageError,
    add_connection_arguments,
    bootstrap_of,
    client_properties,
    connection_security,
    flag_bool,
    key_values,
    parse_acks,
    run_tool,
    security_of,
    unescape,
)
from pykraft.client import Consumer, ConsumerRecord, KafkaClientError, Producer
from pykraft.client.connection import ConnectionSecurity

NO_HEADERS = "NO_HEADERS"
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
# How long the consumer's long poll waits at most before looking at --timeout-ms and --max-messages.
POLL_WAIT_MS = 500
# Client properties a --command-config / --producer-property may hold that configure security, not the
# client itself.
SECURITY_PREFIXES = ("security.protocol", "sasl.", "ssl.")


def _security(args: argparse.Namespace, extra: dict[str, str]) -> ConnectionSecurity | None:
    props = {**client_properties(args.command_config), **extra}
    security_props = {k: v for k, v in props.items() if k.startswith(SECURITY_PREFIXES)}
    return connection_security(security_of(security_props))


def _int_property(props: dict[str, str], key: str, default: int, flag: str) -> int:
    value = props.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{flag} {key}={value}: not a whole number") from None


# --- producer ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LineFormat:
    """How kafka-console-producer's LineMessageReader splits a line (with pykraft's parse.timestamp)."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    parse_timestamp: bool = False
    null_marker: str | None = None
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineFormat:
        known = {
            "parse.key",
            "key.separator",
            "parse.headers",
            "headers.delimiter",
            "headers.separator",
            "headers.key.separator",
            "parse.timestamp",
            "null.marker",
            "ignore.error",
        }
        for key in props:
            if key not in known:
                raise UsageError(f"--property {key}: not a reader property ({', '.join(sorted(known))})")
        null_marker = props.get("null.marker")
        return cls(
            parse_key=flag_bool(props, "parse.key"),
            key_separator=unescape(props.get("key.separator", "\t")),
            parse_headers=flag_bool(props, "parse.headers"),
            headers_delimiter=unescape(props.get("headers.delimiter", "\t")),
            headers_separator=unescape(props.get("headers.separator", ",")),
            headers_key_separator=unescape(props.get("headers.key.separator", ":")),
            parse_timestamp=flag_bool(props, "parse.timestamp"),
            null_marker=null_marker,
            ignore_error=flag_bool(props, "ignore.error"),
        )


@dataclass(frozen=True, slots=True)
class LineRecord:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int | None


class LineError(ValueError):
    """A line that does not have the parts the properties ask for."""


def parse_line(line: str, fmt: LineFormat, number: int) -> LineRecord:
    rest = line
    timestamp_ms = None
    if fmt.parse_timestamp:
        stamp, sep, after = rest.partition(fmt.key_separator)
        text = stamp.removeprefix("CreateTime:")
        if not sep or not text.lstrip("-").isdigit():
            if not fmt.ignore_error:
                raise LineError(f"No timestamp found on line number {number}: '{line}'")
        else:
            timestamp_ms, rest = int(text), after
    headers: list[tuple[str, bytes | None]] = []
    if fmt.parse_headers:
        part, sep, after = rest.partition(fmt.headers_delimiter)
        if not sep:
            if not fmt.ignore_error:
                raise LineError(f"No headers delimiter found on line number {number}: '{line}'")
        else:
            rest = after
            for pair in part.split(fmt.headers_separator) if part else []:
                name, sep, value = pair.partition(fmt.headers_key_separator)
                if not sep:
                    if not fmt.ignore_error:
                        raise LineError(
                            f"No header key separator found in pair '{pair}' on line number {number}"
                        )
                    headers.append((pair, None))
                    continue
                if name == fmt.null_marker:
                    raise LineError(
                        f"Header keys can not be equal to the null marker on line number {number}"
                    )
                headers.append((name, None if value == fmt.null_marker else value.encode("utf-8")))
    key = None
    if fmt.parse_key:
        part, sep, after = rest.partition(fmt.key_separator)
        if not sep:
            if not fmt.ignore_error:
                raise LineError(f"No key separator found on line number {number}: '{line}'")
        else:
            key = None if part == fmt.null_marker else part.encode("utf-8")
            rest = after
    return LineRecord(key, None if rest == fmt.null_marker else rest.encode("utf-8"), headers, timestamp_ms)


def _read_lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
    """stdin, a line at a time, in a thread (a blocking read; asyncio has no portable stdin reader)."""
    try:
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\r\n"))
        loop.call_soon_threadsafe(queue.put_nowait, None)
    except RuntimeError:  # the producer stopped first (a bad line, an error): nobody reads any more
        return


async def _produce(args: argparse.Namespace) -> int:
    fmt = LineFormat.from_properties(
        key_values([*(args.property or []), *(args.reader_property or [])], "--property")
    )
    props = key_values(args.producer_property or [], "--producer-property")
    linger_ms = _int_property(props, "linger.ms", args.timeout, "--producer-property")
    acks_text = props.get("acks", args.request_required_acks)
    acks = parse_acks(
        acks_text, "--request-required-acks" if "acks" not in props else "--producer-property acks"
    )
    producer = Producer(
        bootstrap_of(args.bootstrap_server),
        acks=acks,
        linger_ms=0 if args.sync else linger_ms,
        batch_size=_int_property(props, "batch.size", args.batch_size, "--producer-property"),
        request_timeout_ms=_int_property(
            props, "request.timeout.ms", args.request_timeout_ms, "--producer-property"
        ),
        client_id=props.get("client.id", "console-producer"),
        security=_security(args, props),
    )
    failures = 0

    def delivered(fut: asyncio.Future[Any]) -> None:
        nonlocal failures
        if not fut.cancelled() and fut.exception() is not None:
            failures += 1
            print(
                f"ERROR Error when sending message to topic {args.topic}: {fut.exception()}", file=sys.stderr
            )

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    await producer.start()
    try:
        threading.Thread(target=_read_lines, args=(loop, queue), name="stdin", daemon=True).start()
        number = 0
        while (line := await queue.get()) is not None:
            number += 1
            try:
                record = parse_line(line, fmt, number)
            except LineError as exc:
                raise ToolError(str(exc)) from None
            fut = await producer.send(
                args.topic,
                record.value,
                key=record.key,
                headers=record.headers,
                timestamp_ms=record.timestamp_ms,
            )
            fut.add_done_callback(delivered)
            if args.sync:
                await asyncio.gather(fut, return_exceptions=True)
        await producer.flush()
    finally:
        await producer.close()
    return 1 if failures else 0


def _console_producer(args: argparse.Namespace) -> int:
    return asyncio.run(_produce(args))


# --- consumer ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordFormat:
    """kafka-console-consumer's DefaultMessageFormatter properties."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: str = "\t"
    line_separator: str = "\n"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    null_literal: str = "null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> RecordFormat:
        known = {
            "print.timestamp",
            "print.partition",
            "print.offset",
            "print.headers",
            "print.key",
            "print.value",
            "key.separator",
            "line.separator",
            "headers.separator",
            "headers.key.separator",
            "null.literal",
            # Kafka's deserializer choices: pykraft prints bytes as UTF-8 whatever they say.
            "key.deserializer",
            "value.deserializer",
            "headers.deserializer",
        }
        for key in props:
            if key not in known:
                raise UsageError(f"--property {key}: not a formatter property ({', '.join(sorted(known))})")
        return cls(
            print_timestamp=flag_bool(props, "print.timestamp"),
            print_partition=flag_bool(props, "print.partition"),
            print_offset=flag_bool(props, "print.offset"),
            print_headers=flag_bool(props, "print.headers"),
            print_key=flag_bool(props, "print.key"),
            print_value=flag_bool(props, "print.value", True),
            key_separator=unescape(props.get("key.separator", "\t")),
            line_separator=unescape(props.get("line.separator", "\n")),
            headers_separator=unescape(props.get("headers.separator", ",")),
            headers_key_separator=unescape(props.get("headers.key.separator", ":")),
            null_literal=props.get("null.literal", "null"),
        )


def format_record(record: ConsumerRecord, fmt: RecordFormat) -> str:
    """One record as DefaultMessageFormatter.writeTo writes it: the chosen columns in Kafka's order, each
    followed by key.separator except the last, which ends with line.separator."""

    def text(data: bytes | None) -> str:
        return fmt.null_literal if data is None else data.decode("utf-8", errors="backslashreplace")

    columns: list[str] = []
    if fmt.print_timestamp:
        kind = TIMESTAMP_TYPES.get(record.timestamp_type)
        columns.append(
            f"{kind}:{record.timestamp_ms}" if kind and record.timestamp_ms >= 0 else "NO_TIMESTAMP"
        )
    if fmt.print_partition:
        columns.append(f"Partition:{record.partition}")
    if fmt.print_offset:
        columns.append(f"Offset:{record.offset}")
    if fmt.print_headers:
        columns.append(
            fmt.headers_separator.join(f"{k}{fmt.headers_key_separator}{text(v)}" for k, v in record.headers)
            if record.headers
            else NO_HEADERS
        )
    if fmt.print_key:
        columns.append(text(record.key))
    if fmt.print_value:
        columns.append(text(record.value))
    return fmt.key_separator.join(columns) + (fmt.line_separator if fmt.print_value else fmt.key_separator)


def _start_offset(text: str) -> int:
    """--offset: earliest, latest or a non-negative offset."""
    if text == "earliest":
        return EARLIEST_TIMESTAMP
    if text == "latest":
        return LATEST_TIMESTAMP
    if text.isdigit():
        return int(text)
    raise UsageError(f"--offset: {text!r} is not earliest, latest or a non-negative offset")


async def _consume(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    fmt = RecordFormat.from_properties(
        key_values([*(args.property or []), *(args.formatter_property or [])], "--property")
    )
    props = key_values(args.consumer_property or [], "--consumer-property")
    if args.offset is not None and args.partition is None:
        raise UsageError("--offset: the partition is required when offset is specified (--partition)")
    if args.offset is not None and args.from_beginning:
        raise UsageError("--from-beginning and --offset: give one")
    if args.max_messages is not None and args.max_messages < 0:
        raise UsageError(f"--max-messages: {args.max_messages} is negative")
    start = _start_offset(args.offset) if args.offset is not None else None
    isolation = props.get("isolation.level", args.isolation_level)
    reset = props.get("auto.offset.reset", "earliest" if args.from_beginning else "latest")
    if reset not in ("earliest", "latest"):
        raise UsageError(f"--consumer-property auto.offset.reset={reset}: expected earliest or latest")
    if isolation not in ("read_committed", "read_uncommitted"):
        raise UsageError(f"--isolation-level: {isolation!r} is not read_committed or read_uncommitted")
    group = args.group or props.get("group.id")
    consumer = Consumer(
        bootstrap_of(args.bootstrap_server),
        isolation_level=isolation,
        client_id=props.get("client.id", "console-consumer"),
        security=_security(args, props),
    )
    processed = 0
    consumed: dict[tuple[str, int], int] = {}
    try:
        partitions = (
            [args.partition] if args.partition is not None else await consumer.partitions_for(args.topic)
        )
        tps = [(args.topic, p) for p in partitions]
        consumer.assign(tps)
        committed = await consumer.committed(group, tps) if group else {}
        for tp in tps:
            if start is not None and start >= 0:
                consumer.seek(tp, start)
            elif start == LATEST_TIMESTAMP or (
                start is None and committed.get(tp, -1) < 0 and reset == "latest"
            ):
                await consumer.seek_to_end(tp)
            elif start is None and committed.get(tp, -1) >= 0:
                consumer.seek(tp, committed[tp])
            else:
                await consumer.seek_to_beginning(tp)
            consumed[tp] = await consumer.position(tp)
        loop = asyncio.get_running_loop()
        idle_deadline = None if args.timeout_ms is None else loop.time() + args.timeout_ms / 1000
        while args.max_messages is None or processed < args.max_messages:
            wait_ms = POLL_WAIT_MS
            if idle_deadline is not None:
                wait_ms = max(0, min(wait_ms, int((idle_deadline - loop.time()) * 1000)))
            records = await consumer.getmany(timeout_ms=wait_ms)
            for record in records:
                if args.max_messages is not None and processed >= args.max_messages:
                    break
                out(format_record(record, fmt))
                processed += 1
                consumed[(record.topic, record.partition)] = record.offset + 1
            if records and args.timeout_ms is not None:
                idle_deadline = loop.time() + args.timeout_ms / 1000
            elif idle_deadline is not None and loop.time() >= idle_deadline:
                print(
                    f"ERROR Error processing message, terminating consumer process: no message for "
                    f"{args.timeout_ms} ms (--timeout-ms)",
                    file=sys.stderr,
                )
                break
        if group:
            await consumer.commit(group, consumed)
    except KafkaClientError as exc:
        raise ToolError(str(exc)) from None
    finally:
        await consumer.close()
        print(f"Processed a total of {processed} messages", file=sys.stderr)
    return 0


def _console_consumer(args: argparse.Namespace) -> int:
    def out(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    return asyncio.run(_consume(args, out))


# --- parsers ----------------------------------------------------------------------------------------------


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    producer = subparsers.add_parser(
        "console-producer",
        help="read records from standard input and produce them (kafka-console-producer)",
        description="Read data from standard input and publish it to Kafka (as kafka-console-producer.sh).",
    )
    add_connection_arguments(producer, "--producer.config")
    producer.add_argument("--topic", required=True, help="REQUIRED: The topic id to produce messages to.")
    producer.add_argument(
        "--property",
        action="append",
        metavar="PROP=VALUE",
        help="A mechanism to pass user-defined properties in the form key=value to the message reader: "
        "parse.key, key.separator, parse.headers, headers.delimiter, headers.separator, "
        "headers.key.separator, null.marker, ignore.error (and pykraft's parse.timestamp).",
    )
    producer.add_argument("--reader-property", action="append", metavar="PROP=VALUE", help="As --property.")
    producer.add_argument(
        "--producer-property",
        action="append",
        metavar="PROP=VALUE",
        help="A mechanism to pass user-defined properties in the form key=value to the producer "
        "(acks, linger.ms, batch.size, client.id, request.timeout.ms, security.protocol, sasl.*, ssl.*).",
    )
    producer.add_argument(
        "--request-required-acks",
        default="-1",
        metavar="ACKS",
        help="The required acks of the producer requests (default: -1)",
    )
    producer.add_argument(
        "--sync",
        action="store_true",
        help="If set message send requests to the brokers are synchronously, one at a time as they arrive.",
    )
    producer.add_argument(
        "--batch-size",
        type=int,
        default=16384,
        metavar="BYTES",
        help="Number of bytes to send in a single batch if they are not being sent synchronously. (default: 16384)",
    )
    producer.add_argument(
        "--timeout",
        type=int,
        default=1000,
        metavar="MS",
        help="If set and the producer is running in asynchronous mode, this gives the maximum amount of time "
        "a message will queue awaiting sufficient batch size. The value is given in ms. (default: 1000)",
    )
    producer.add_argument(
        "--request-timeout-ms",
        type=int,
        default=1500,
        metavar="MS",
        help="The ack timeout of the producer requests. Value must be non-negative and non-zero. (default: 1500)",
    )
    producer.set_defaults(func=run_tool("console-producer", _console_producer))

    consumer = subparsers.add_parser(
        "console-consumer",
        help="consume records and print them (kafka-console-consumer)",
        description="Consume records from a topic and print them (as kafka-console-consumer.sh).",
    )
    add_connection_arguments(consumer, "--consumer.config")
    consumer.add_argument("--topic", required=True, help="The topic to consume on.")
    consumer.add_argument(
        "--partition",
        type=int,
        metavar="PARTITION",
        help="The partition to consume from. Consumption starts from the end of the partition unless "
        "'--offset' is specified.",
    )
    consumer.add_argument(
        "--offset",
        metavar="OFFSET",
        help="The offset to consume from (a non-negative number), or 'earliest' which means from beginning, "
        "or 'latest' which means from end (default: latest)",
    )
    consumer.add_argument(
        "--from-beginning",
        action="store_true",
        help="If the consumer does not already have an established offset to consume from, start with the "
        "earliest message present in the log rather than the latest message.",
    )
    consumer.add_argument(
        "--max-messages",
        type=int,
        metavar="N",
        help="The maximum number of messages to consume before exiting. If not set, consumption is continual.",
    )
    consumer.add_argument(
        "--timeout-ms",
        type=int,
        metavar="MS",
        help="If specified, exit if no message is available for consumption for the specified interval.",
    )
    consumer.add_argument(
        "--group",
        metavar="GROUP",
        help="The consumer group id of the consumer: start at its committed offsets and commit what was "
        "printed (pykraft: without joining the group).",
    )
    consumer.add_argument(
        "--property",
        action="append",
        metavar="PROP=VALUE",
        help="The properties to initialize the message formatter: print.timestamp=true|false, "
        "print.key=true|false, print.offset=true|false, print.partition=true|false, "
        "print.headers=true|false, print.value=true|false, key.separator=<key.separator>, "
        "line.separator=<line.separator>, headers.separator=<line.separator>, "
        "headers.key.separator=<key.separator>, null.literal=<null.literal>",
    )
    consumer.add_argument(
        "--formatter-property", action="append", metavar="PROP=VALUE", help="As --property."
    )
    consumer.add_argument(
        "--consumer-property",
        action="append",
        metavar="PROP=VALUE",
        help="A mechanism to pass user-defined properties in the form key=value to the consumer "
        "(group.id, client.id, auto.offset.reset, isolation.level, security.protocol, sasl.*, ssl.*).",
    )
    consumer.add_argument(
        "--isolation-level",
        default="read_uncommitted",
        help="Set to read_committed in order to filter out transactional messages which are not committed. "
        "Set to read_uncommitted to read all messages. (default: read_uncommitted)",
    )
    consumer.set_defaults(func=run_tool("console-consumer", _console_consumer))
