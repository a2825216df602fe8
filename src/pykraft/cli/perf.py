"""``pykraft producer-perf-test`` and ``pykraft consumer-perf-test``, shaped like Kafka's
kafka-producer-perf-test and kafka-consumer-perf-test, over pykraft's asyncio client.

The producer sends ``--num-records`` records of ``--record-size`` random capital letters (or lines of
``--payload-file``), at most ``--throughput`` a second (-1: as fast as it can), and prints what Kafka's
ProducerPerformance prints: a line every 5 s, then ``N records sent, X records/sec (Y MB/sec), Z ms avg
latency, W ms max latency, A ms 50th, B ms 95th, C ms 99th, D ms 99.9th.``; latency runs from the send
call to the acknowledgement, as Kafka measures it. The consumer reads ``--messages`` records and prints
ConsumerPerformance's CSV line (it does not join a group: rebalance.time.ms is 0).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pykraft.cli.common import (
    ToolError,
    UsageError,
    bootstrap_of,
    client_properties,
    connection_security,
    key_values,
    parse_acks,
    progress_bar,
    run_tool,
    security_of,
)
from pykraft.client import Consumer, KafkaClientError, Producer

MIB = 1024 * 1024
REPORTING_INTERVAL_MS = 5000
# Kafka's Stats keeps at most this many latency samples for the percentiles.
MAX_LATENCY_SAMPLES = 500_000
# Kafka's producer buffers buffer.memory (32 MiB) of records before send() blocks; the same bound here
# keeps an unthrottled run from queueing every record before the first one is sent.
BUFFER_MEMORY_BYTES = 32 * MIB
# Let the partition senders run at least this often while queueing an unthrottled run.
YIELD_EVERY_RECORDS = 256
SECURITY_PREFIXES = ("security.protocol", "sasl.", "ssl.")
PRODUCER_PROPERTIES = {
    "bootstrap.servers",
    "acks",
    "linger.ms",
    "batch.size",
    "client.id",
    "request.timeout.ms",
    "delivery.timeout.ms",
    "max.in.flight.requests.per.connection",
    "buffer.memory",
}


def _now_ms() -> float:
    return time.monotonic() * 1000


@dataclass
class ProducerStats:
    """Kafka's ProducerPerformance.Stats: totals, a reporting window, and every ``sampling``-th latency
    for the percentiles."""

    num_records: int
    reporting_interval_ms: int = REPORTING_INTERVAL_MS
    start_ms: float = field(default_factory=_now_ms)
    window_start_ms: float = field(default_factory=_now_ms)
    count: int = 0
    bytes: int = 0
    total_latency_ms: float = 0.0
    max_latency_ms: float = 0.0
    window_count: int = 0
    window_bytes: int = 0
    window_total_latency_ms: float = 0.0
    window_max_latency_ms: float = 0.0
    iteration: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    @property
    def sampling(self) -> int:
        return max(1, self.num_records // min(max(self.num_records, 1), MAX_LATENCY_SAMPLES))

    def record(self, latency_ms: float, size_bytes: int, now_ms: float) -> None:
        self.count += 1
        self.bytes += size_bytes
        self.total_latency_ms += latency_ms
        self.max_latency_ms = max(self.max_latency_ms, latency_ms)
        self.window_count += 1
        self.window_bytes += size_bytes
        self.window_total_latency_ms += latency_ms
        self.window_max_latency_ms = max(self.window_max_latency_ms, latency_ms)
        if self.iteration % self.sampling == 0:
            self.latencies_ms.append(latency_ms)
        self.iteration += 1
        if now_ms - self.window_start_ms >= self.reporting_interval_ms:
            print(self.window_line(now_ms), flush=True)
            self.window_start_ms = now_ms
            self.window_count = self.window_bytes = 0
            self.window_total_latency_ms = self.window_max_latency_ms = 0.0

    def window_line(self, now_ms: float) -> str:
        elapsed_ms = max(now_ms - self.window_start_ms, 1e-3)
        return (
            f"{self.window_count} records sent, {1000.0 * self.window_count / elapsed_ms:.1f} records/sec "
            f"({1000.0 * self.window_bytes / elapsed_ms / MIB:.2f} MB/sec), "
            f"{self.window_total_latency_ms / max(self.window_count, 1):.1f} ms avg latency, "
            f"{self.window_max_latency_ms:.1f} ms max latency."
        )

    def summary_line(self, now_ms: float) -> str:
        elapsed_ms = max(now_ms - self.start_ms, 1e-3)
        ordered = sorted(self.latencies_ms)

        def percentile(p: float) -> int:
            return int(ordered[min(int(p * len(ordered)), len(ordered) - 1)]) if ordered else 0

        return (
            f"{self.count} records sent, {1000.0 * self.count / elapsed_ms:f} records/sec "
            f"({1000.0 * self.bytes / elapsed_ms / MIB:.2f} MB/sec), "
            f"{self.total_latency_ms / max(self.count, 1):.2f} ms avg latency, "
            f"{self.max_latency_ms:.2f} ms max latency, {percentile(0.5)} ms 50th, {percentile(0.95)} ms 95th, "
            f"{percentile(0.99)} ms 99th, {percentile(0.999)} ms 99.9th."
        )


def _payloads(args: argparse.Namespace) -> list[bytes]:
    if (args.record_size is None) == (args.payload_file is None):
        raise UsageError("give one of --record-size or --payload-file")
    if args.record_size is not None:
        if args.record_size < 0:
            raise UsageError(f"--record-size: {args.record_size} is negative")
        # As Kafka: one random payload of capital letters, sent every time.
        return [bytes(random.randint(65, 90) for _ in range(args.record_size))]
    try:
        with open(args.payload_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise UsageError(f"--payload-file: cannot read {args.payload_file}: {exc.strerror}") from None
    delimiter = args.payload_delimiter.encode().decode("unicode_escape")
    payloads = [p.encode("utf-8") for p in text.split(delimiter) if p]
    if not payloads:
        raise UsageError(f"--payload-file: {args.payload_file} holds no payload")
    return payloads


def _int_prop(props: dict[str, str], key: str, default: int) -> int:
    try:
        return int(props.get(key, default))
    except ValueError:
        raise UsageError(f"--producer-props {key}={props[key]}: not a whole number") from None


async def _produce(args: argparse.Namespace, advance: Callable[[int], None]) -> int:
    if args.num_records < 0:
        raise UsageError(f"--num-records: {args.num_records} is negative")
    if args.throughput == 0:
        raise UsageError("--throughput: 0 sends nothing; give a rate per second or -1 for no limit")
    payloads = _payloads(args)
    props = {
        **client_properties(args.command_config),
        **key_values(args.producer_props or [], "--producer-props"),
    }
    bootstrap = args.bootstrap_server or props.get("bootstrap.servers")
    if not bootstrap:
        raise UsageError("--bootstrap-server: required (or bootstrap.servers in --producer-props)")
    for key in props:
        if key not in PRODUCER_PROPERTIES and not key.startswith(SECURITY_PREFIXES):
            print(f"WARN: ignoring producer property {key} (not used by pykraft's client)", file=sys.stderr)
    max_in_flight = props.get("max.in.flight.requests.per.connection")
    producer = Producer(
        bootstrap_of(bootstrap),
        acks=parse_acks(props.get("acks", "all"), "--producer-props acks"),
        linger_ms=_int_prop(props, "linger.ms", 5),
        batch_size=_int_prop(props, "batch.size", 16384),
        request_timeout_ms=_int_prop(props, "request.timeout.ms", 30000),
        delivery_timeout_ms=_int_prop(props, "delivery.timeout.ms", 120000),
        max_in_flight=_int_prop(props, "max.in.flight.requests.per.connection", 5) if max_in_flight else None,
        client_id=props.get("client.id", "perf-producer-client"),
        security=connection_security(
            security_of({k: v for k, v in props.items() if k.startswith(SECURITY_PREFIXES)})
        ),
    )
    buffer_bytes = _int_prop(props, "buffer.memory", BUFFER_MEMORY_BYTES)
    max_outstanding = max(1, buffer_bytes // max(1, max(len(p) for p in payloads) + 70))
    stats = ProducerStats(args.num_records)
    outstanding = 0
    failures: list[BaseException] = []
    room = asyncio.Event()

    def acknowledged(sent_ms: float, size: int, fut: asyncio.Future[Any]) -> None:
        nonlocal outstanding
        outstanding -= 1
        if outstanding < max_outstanding:
            room.set()
        if fut.cancelled() or fut.exception() is not None:
            failures.append(fut.exception() or asyncio.CancelledError())
            return
        now_ms = _now_ms()
        stats.record(now_ms - sent_ms, size, now_ms)
        advance(1)

    await producer.start()
    try:
        started = time.monotonic()
        stats.start_ms = stats.window_start_ms = started * 1000
        for i in range(args.num_records):
            payload = payloads[0] if len(payloads) == 1 else random.choice(payloads)
            sent_ms = _now_ms()
            fut = await producer.send(args.topic, payload)
            outstanding += 1
            fut.add_done_callback(functools.partial(acknowledged, sent_ms, len(payload)))
            if failures:
                break
            if outstanding >= max_outstanding:
                room.clear()
                await room.wait()
            elif i % YIELD_EVERY_RECORDS == 0:
                await asyncio.sleep(0)
            if args.throughput > 0:
                ahead_s = (i + 1) / args.throughput - (time.monotonic() - started)
                if ahead_s > 0:
                    await asyncio.sleep(ahead_s)
        await producer.flush()
    finally:
        await producer.close()
    print(stats.summary_line(_now_ms()), flush=True)
    if failures:
        raise ToolError(f"{len(failures)} record(s) failed, the first with: {failures[0]}")
    return 0


def _producer_perf_test(args: argparse.Namespace) -> int:
    with progress_bar(max(args.num_records, 0), f"producing to {args.topic}") as advance:
        return asyncio.run(_produce(args, advance))


# --- consumer ---------------------------------------------------------------------------------------------

CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
DETAILED_HEADER = (
    "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
    "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)


def _java_date_format(pattern: str) -> str:
    """The few SimpleDateFormat letters --date-format uses, as strftime (milliseconds added after)."""
    out = pattern
    for java, py in (("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S")):
        out = out.replace(java, py)
    return out


def _format_time(epoch_ms: float, pattern: str) -> str:
    moment = datetime.fromtimestamp(epoch_ms / 1000)
    return moment.strftime(_java_date_format(pattern)).replace("SSS", f"{int(epoch_ms) % 1000:03d}")


def consumer_line(
    start_ms: float, end_ms: float, fetch_ms: float, total_bytes: int, messages: int, pattern: str
) -> str:
    """ConsumerPerformance's result: times, MB and messages, their rates over the whole run and over the
    fetching (rebalance time is 0: no group join)."""
    elapsed_s = max((end_ms - start_ms) / 1000, 1e-6)
    fetch_s = max(fetch_ms / 1000, 1e-6)
    mb = total_bytes / MIB
    return (
        f"{_format_time(start_ms, pattern)}, {_format_time(end_ms, pattern)}, {mb:.4f}, {mb / elapsed_s:.4f}, "
        f"{messages}, {messages / elapsed_s:.4f}, 0, {int(fetch_ms)}, {mb / fetch_s:.4f}, {messages / fetch_s:.4f}"
    )


async def _consume(args: argparse.Namespace, advance: Callable[[int], None]) -> int:
    if args.messages < 0:
        raise UsageError(f"--messages: {args.messages} is negative")
    props = {
        **client_properties(args.command_config),
        **key_values(args.consumer_props or [], "--consumer-props"),
    }
    consumer = Consumer(
        bootstrap_of(args.bootstrap_server),
        max_partition_fetch_bytes=args.fetch_size,
        client_id=props.get("client.id", "perf-consumer-client"),
        security=connection_security(
            security_of({k: v for k, v in props.items() if k.startswith(SECURITY_PREFIXES)})
        ),
    )
    group = args.group or f"perf-consumer-{uuid.uuid4().int % 100000}"
    total_bytes = messages = 0
    start_ms = time.time() * 1000
    try:
        partitions = await consumer.partitions_for(args.topic)
        tps = [(args.topic, p) for p in partitions]
        consumer.assign(tps)
        if args.from_latest:
            await consumer.seek_to_end()
        else:
            await consumer.seek_to_beginning()
        if not args.hide_header and args.show_detailed_stats:
            print(DETAILED_HEADER)
        fetch_start = time.monotonic()
        last_record = last_report = fetch_start
        report_bytes = report_messages = 0
        while messages < args.messages and (time.monotonic() - last_record) * 1000 <= args.timeout:
            records = await consumer.getmany(timeout_ms=min(1000, args.timeout))
            now = time.monotonic()
            if records:
                last_record = now
            taken = records[: args.messages - messages]
            for record in taken:
                total_bytes += len(record.value or b"") + len(record.key or b"")
            messages += len(taken)
            advance(len(taken))
            if args.show_detailed_stats and (now - last_report) * 1000 >= args.reporting_interval:
                span_s = max(now - last_report, 1e-6)
                mb = total_bytes / MIB
                print(
                    f"{_format_time(time.time() * 1000, args.date_format)}, 0, {mb:.4f}, "
                    f"{(total_bytes - report_bytes) / MIB / span_s:.4f}, {messages}, "
                    f"{(messages - report_messages) / span_s:.4f}, 0, {int((now - last_report) * 1000)}, "
                    f"{(total_bytes - report_bytes) / MIB / span_s:.4f}, {(messages - report_messages) / span_s:.4f}"
                )
                last_report, report_bytes, report_messages = now, total_bytes, messages
        fetch_ms = (time.monotonic() - fetch_start) * 1000
        if args.group:
            await consumer.commit(group, {tp: await consumer.position(tp) for tp in tps})
    except KafkaClientError as exc:
        raise ToolError(str(exc)) from None
    finally:
        await consumer.close()
    end_ms = time.time() * 1000
    if messages < args.messages:
        print(
            f"WARNING: Exiting before consuming the expected number of messages: timeout ({args.timeout} ms) "
            "exceeded. You can use the --timeout option to increase the timeout.",
            file=sys.stderr,
        )
    if not args.show_detailed_stats:
        if not args.hide_header:
            print(CONSUMER_HEADER)
        print(consumer_line(start_ms, end_ms, fetch_ms, total_bytes, messages, args.date_format))
    return 0


def _consumer_perf_test(args: argparse.Namespace) -> int:
    with progress_bar(max(args.messages, 0), f"consuming {args.topic}") as advance:
        return asyncio.run(_consume(args, advance))


# --- parsers ----------------------------------------------------------------------------------------------


def add_subcommands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    producer = subparsers.add_parser(
        "producer-perf-test",
        help="produce records as fast as asked and report throughput and latency (kafka-producer-perf-test)",
        description="This tool is used to verify the producer performance (as kafka-producer-perf-test.sh).",
    )
    producer.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT]",
        help="The server(s) to connect to. This config takes precedence over bootstrap.servers specified "
        "via --command-config or --producer-props.",
    )
    producer.add_argument("--topic", required=True, help="produce messages to this topic")
    producer.add_argument(
        "--num-records", type=int, required=True, metavar="NUM-RECORDS", help="number of messages to produce"
    )
    producer.add_argument(
        "--record-size",
        type=int,
        metavar="RECORD-SIZE",
        help="message size in bytes. Note that you must provide exactly one of --record-size or --payload-file.",
    )
    producer.add_argument(
        "--payload-file",
        metavar="PAYLOAD-FILE",
        help="file to read the message payloads from. This works only for UTF-8 encoded text files. "
        "Payloads will be read from this file and a payload will be randomly selected when sending messages.",
    )
    producer.add_argument(
        "--payload-delimiter",
        default="\\n",
        metavar="PAYLOAD-DELIMITER",
        help="provides delimiter to be used when --payload-file is provided. Defaults to new line.",
    )
    producer.add_argument(
        "--throughput",
        type=float,
        required=True,
        metavar="THROUGHPUT",
        help="throttle maximum message throughput to *approximately* THROUGHPUT messages/sec. Set this to -1 "
        "to disable throttling.",
    )
    producer.add_argument(
        "--producer-props",
        nargs="+",
        metavar="PROP-NAME=PROP-VALUE",
        help="kafka producer related configuration properties like bootstrap.servers, client.id etc. These "
        "configs take precedence over those passed via --command-config.",
    )
    producer.add_argument(
        "--command-config",
        "--producer.config",
        dest="command_config",
        metavar="CONFIG-FILE",
        help="producer config properties file (security.protocol, sasl.*, ssl.*, acks, linger.ms, ...).",
    )
    producer.set_defaults(func=run_tool("producer-perf-test", _producer_perf_test))

    consumer = subparsers.add_parser(
        "consumer-perf-test",
        help="consume records as fast as possible and report throughput (kafka-consumer-perf-test)",
        description="This tool is used to verify the consumer performance (as kafka-consumer-perf-test.sh).",
    )
    consumer.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help="REQUIRED. The server(s) to connect to.",
    )
    consumer.add_argument("--topic", required=True, help="REQUIRED: The topic to consume from.")
    consumer.add_argument(
        "--messages",
        type=int,
        required=True,
        metavar="COUNT",
        help="REQUIRED: The number of messages to consume.",
    )
    consumer.add_argument(
        "--group",
        metavar="GID",
        help="The group id to consume on; the offsets reached are committed to it at the end (pykraft: "
        "without joining the group). (default: perf-consumer-<random>)",
    )
    consumer.add_argument(
        "--fetch-size",
        type=int,
        default=1048576,
        metavar="SIZE",
        help="The amount of data to fetch in a single request. (default: 1048576)",
    )
    consumer.add_argument(
        "--from-latest",
        action="store_true",
        help="If the consumer does not already have an established offset to consume from, start with the "
        "latest message present in the log rather than the earliest message.",
    )
    consumer.add_argument(
        "--timeout",
        type=int,
        default=10000,
        metavar="MILLISECONDS",
        help="The maximum allowed time in milliseconds between returned records. (default: 10000)",
    )
    consumer.add_argument(
        "--reporting-interval",
        type=int,
        default=5000,
        metavar="INTERVAL-MS",
        help="Interval in milliseconds at which to print progress info. (default: 5000)",
    )
    consumer.add_argument(
        "--show-detailed-stats",
        action="store_true",
        help="If set, stats are reported for each reporting interval as configured by reporting-interval",
    )
    consumer.add_argument(
        "--hide-header", action="store_true", help="If set, skips printing the header for the stats"
    )
    consumer.add_argument(
        "--date-format",
        default="yyyy-MM-dd HH:mm:ss:SSS",
        metavar="DATE-FORMAT",
        help="The date format to use for formatting the time field. (default: yyyy-MM-dd HH:mm:ss:SSS)",
    )
    consumer.add_argument(
        "--consumer-props",
        nargs="+",
        metavar="PROP-NAME=PROP-VALUE",
        help="consumer related configuration properties (client.id, security.protocol, sasl.*, ssl.*).",
    )
    consumer.add_argument(
        "--command-config",
        "--consumer.config",
        dest="command_config",
        metavar="CONFIG-FILE",
        help="Consumer config properties file (security.protocol, sasl.*, ssl.*).",
    )
    consumer.set_defaults(func=run_tool("consumer-perf-test", _consumer_perf_test))
