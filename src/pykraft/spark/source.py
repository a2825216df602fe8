"""The ``pykraft`` Spark data source: batch and streaming reads and writes, pure Python.

Read::

    pykraft.spark.register(spark)
    df = (spark.read.format("pykraft")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events")               # or subscribePattern / assign
          .option("startingOffsets", "earliest")       # earliest | latest | {"events":{"0":23}}
          .load())

Columns are those of Spark's Kafka source (key, value, topic, partition, offset, timestamp,
timestampType, and headers with ``includeHeaders``), plus producerId, producerEpoch and sequence with
``includeProducerInfo``. Other options: ``endingOffsets`` (batch), ``maxOffsetsPerTrigger``
(streaming admission control through ``latestOffset(start, limit)``), ``failOnDataLoss`` (default
true), ``minPartitions``, ``maxRecordsPerPartition`` (default 1,000,000: larger offset ranges are
split), ``fetchMaxBytes`` (default 1 MiB), and ``path``: a broker data dir (``log.dirs``) read
directly from its segment files, one Spark task per segment (batch only; the node may be stopped).

Failover (``pykraft.spark.retry``, as Spark's Kafka source): every Metadata, ListOffsets and Fetch call
is retried on a retriable error (leader moved or not available, connection refused/reset/timed out,
FENCED/UNKNOWN_LEADER_EPOCH) after fresh metadata, backing off from ``kafka.retry.backoff.ms`` (100) to
``kafka.retry.backoff.max.ms`` (1000); the driver's offset look-ups for ``kafka.default.api.timeout.ms``
(60000) and then ``fetchOffset.numRetries`` (3) more times ``fetchOffset.retryIntervalMs`` (1000)
apart, a task's fetches while ``kafkaConsumer.pollTimeoutMs`` (120000) passes without progress. Each
request waits ``kafka.request.timeout.ms`` (30000; ``requestTimeoutMs`` is the older name). A log that
ends before the planned range still does once the retries are spent is data loss: ``failOnDataLoss``.

Security: ``kafka.security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
``kafka.sasl.mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), ``kafka.sasl.jaas.config`` (or
``kafka.sasl.username``/``kafka.sasl.password``) and ``kafka.ssl.truststore.location`` (a PEM CA file;
``kafka.ssl.ca.location`` too); mutual TLS with a PEM ``kafka.ssl.keystore.location`` (certificate chain
and key in one file; ``kafka.ssl.key.password``), for the source and the sink alike. Spark's plans (and so its UI) show
no option values of a Python data source, and the source's errors name the user, never the password.

Transport: executors fetch with pykraft's own Fetch v5 client (``spark.client``), one request ahead,
and decode the stored RecordBatch bytes straight into Arrow buffers, with no Python object per record
(``spark.decode``). Chosen by measurement (bench/spark_source.py, 1M x 1 KiB, local[2], 2 cores
shared with the broker): 5x as fast as a confluent-kafka consumer per offset range inside the same
Spark tasks (librdkafka hands Python one object per message), and only it can fill the producer-info
columns. With ``path`` the tasks read segment files and the broker does no work: ~1.25x the fetch
transport. Large reads gain ~10% from ``spark.buffer.size=1m`` (Spark's JVM<->Python socket buffer,
64 KiB by default; set it before the session starts). Results: bench/results/spark_source.md.

Streaming offsets are ``{"topic": {"partition": next_offset}}``; Spark's checkpoint is the only
source of truth. ``commit(end)`` does nothing on the broker: Spark calls it one batch late and never
for the last batch (pyspark-facts.md §0.5), so a consumer group kept from it would be misleading.

Write: ``df.write.format("pykraft")`` / ``writeStream.format("pykraft")`` with columns ``value``
(binary or string), optional ``key``, ``topic`` (or the ``topic`` option, which wins, as in Spark),
``partition`` and ``headers``. Each task runs one idempotent confluent-kafka producer
(acks=all; ``kafka.*`` options are passed to it) and flushes before it reports success; a delivery
error fails the task with the broker's error name (e.g. ``MESSAGE_TOO_LARGE``).

What a retried task leaves behind (the same as Spark's Kafka sink, at-least-once): a task that fails
part-way has already delivered the records it produced before the failure (its producer is flushed
on the way out, as Spark's KafkaDataWriter.close() does). Spark then runs the task again from the
first row of its partition, so the topic holds that prefix twice; other tasks' records once. The
idempotent producer only removes duplicates of one producer's retries, not those of a new task
attempt. A streaming batch that is replayed after a crash re-writes the whole batch the same way.

Exactly-once (``exactlyOnce=true``, with ``topic`` and ``queryName`` — a streaming query's id is used
when it has no name): each task writes its rows in one Kafka transaction (transactional id
``pykraft-sink-<query>-<task partition>``) and commits, in the same transaction, a marker of (query,
partition, batch id) with TxnOffsetCommit (group ``pykraft-sink-<query>-<partition>``, offset
batch id + 1 on partition 0 of the topic). A retried or speculative attempt first fences every earlier
one (``init_transactions``: an open transaction of theirs is aborted, a committing one completes), then
reads the marker and writes nothing when its batch is already committed. So read_committed readers see
every row exactly once, whatever tasks fail and however often a micro-batch is replayed. The batch id
is the micro-batch id when streaming, else the ``batchId`` option (default 0: re-running the same batch
write with the same queryName writes nothing). Cost: one transaction per task. Read the output with
``kafka.isolation.level=read_committed`` (an option of this source too: it reads up to the last stable
offset and drops aborted transactions). ``simulateFailureAfterCommit=DIR`` makes the first attempt of
every task fail after its records are committed (``pykraft pipeline eos-demo`` and the tests use it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from pykraft.core.errors import ErrorCode
from pykraft.protocol.records import BatchHeader, committed_batches, scan_batches
from pykraft.spark import offsets as off
from pykraft.spark.client import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    BrokerConnection,
    KafkaClientError,
    PartitionMetadata,
    client_security,
    connect_any,
    error_name,
    now_ms,
    parse_bootstrap,
    with_retries,
)
from pykraft.spark.retry import Retrying, RetryOptionError, RetryPolicy
from pykraft.spark.schema import schema_ddl

if TYPE_CHECKING:
    from pykraft.io.kafka_connection import ClientSecurity
    from pykraft.spark.decode import ArrowDecoder

T = TypeVar("T")

SOURCE_NAME = "pykraft"
# Small fetches stay in the CPU cache on both ends: the broker's copy and the decoder's walk read
# bytes just written. Measured (1M x 1 KiB, one client): broker CPU 0.24 s at 1 MiB, 0.31 s at 8 MiB,
# 0.43 s at 32 MiB. The decoder still hands Spark batches of 8192 rows.
DEFAULT_FETCH_MAX_BYTES = 1024 * 1024
DEFAULT_MAX_RECORDS_PER_PARTITION = 1_000_000
# Path mode checks and decodes a segment about this many bytes at a time, so the bytes the CRC check
# reads are still in the CPU cache when the decoder walks and copies them.
SEGMENT_WINDOW_BYTES = 1024 * 1024
# A path-mode partition with no end reads its segment to the end.
_NO_END = 2**63 - 1


class PykraftDataLossError(RuntimeError):
    """Offsets the query needs are gone from the log (failOnDataLoss=true)."""


@dataclass(frozen=True)
class ReadSettings:
    include_headers: bool
    include_producer: bool
    fail_on_data_loss: bool
    fetch_max_bytes: int
    # A task's retries (executor policy: kafkaConsumer.pollTimeoutMs without progress).
    retry: RetryPolicy
    # Where a task looks up a partition's new leader after a failover.
    bootstrap: tuple[tuple[str, int], ...] = ()
    security: ClientSecurity | None = None
    # 0 read_uncommitted (default, as Spark's Kafka source), 1 read_committed (kafka.isolation.level).
    isolation_level: int = 0

    @property
    def timeout_s(self) -> float:
        return self.retry.request_timeout_ms / 1000.0


def parse_isolation_level(options: Any) -> int:
    raw = str(options.get("kafka.isolation.level") or "read_uncommitted").strip().lower()
    if raw not in ("read_uncommitted", "read_committed"):
        raise off.OptionError(
            f"option kafka.isolation.level: {raw!r} is not read_uncommitted or read_committed"
        )
    return 1 if raw == "read_committed" else 0


def retry_policy(options: Any, *, executor: bool = False) -> RetryPolicy:
    try:
        return RetryPolicy.from_options(options, executor=executor)
    except RetryOptionError as exc:
        raise off.OptionError(str(exc)) from None


def _read_settings(options: Any) -> ReadSettings:
    fetch_max = off.parse_int(options, "fetchMaxBytes", DEFAULT_FETCH_MAX_BYTES, minimum=1024)
    assert fetch_max is not None
    servers = options.get("kafka.bootstrap.servers")
    return ReadSettings(
        include_headers=off.parse_bool(options, "includeHeaders", False),
        include_producer=off.parse_bool(options, "includeProducerInfo", False),
        fail_on_data_loss=off.parse_bool(options, "failOnDataLoss", True),
        fetch_max_bytes=fetch_max,
        retry=retry_policy(options, executor=True),
        bootstrap=tuple(parse_bootstrap(str(servers))) if servers else (),
        security=client_security(options),
        isolation_level=parse_isolation_level(options),
    )


class OffsetRangePartition(InputPartition):
    """Everything ``read()`` needs: the reader object is pickled before planning (pyspark-facts §3.6)."""

    def __init__(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        leader: tuple[str, int] | None,
        settings: ReadSettings,
        segment_file: str | None = None,
    ) -> None:
        super().__init__((topic, partition, start, end, segment_file))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.leader = leader
        self.settings = settings
        self.segment_file = segment_file


# --- driver side: what the broker has --------------------------------------------------------------


class BrokerView:
    """Partitions, leaders and offsets for a subscription, from the first reachable bootstrap server.
    Every look-up is retried through a failover as Spark's Kafka source does (``pykraft.spark.retry``):
    each try asks for fresh metadata, so it reaches the partitions' new leaders."""

    def __init__(self, options: Any) -> None:
        servers = options.get("kafka.bootstrap.servers")
        if not servers:
            raise off.OptionError("option kafka.bootstrap.servers is required (or path for a data dir)")
        self.bootstrap = parse_bootstrap(str(servers))
        self.subscription = off.parse_subscription(options)
        self.retry = retry_policy(options)
        self.security = client_security(options)
        self.isolation_level = parse_isolation_level(options)

    def snapshot(self) -> tuple[dict[off.TopicPartition, PartitionMetadata], off.Offsets, off.Offsets]:
        """(partitions with their leaders, log start offsets, log end offsets), retried as one look-up."""

        def look_up() -> tuple[dict[off.TopicPartition, PartitionMetadata], off.Offsets, off.Offsets]:
            parts = self.partitions()
            earliest, latest = self.offsets(parts)
            return parts, earliest, latest

        return with_retries(self.retry, "offset look-up", look_up)

    def _connect(self, address: tuple[str, int] | None = None) -> BrokerConnection:
        return connect_any(
            [address] if address else self.bootstrap, self.retry.request_timeout_ms / 1000.0, self.security
        )

    def partitions(self) -> dict[off.TopicPartition, PartitionMetadata]:
        with self._connect() as conn:
            sub = self.subscription
            wanted = (
                None if sub.pattern is not None else sorted({t for t, _ in sub.assigned} | set(sub.topics))
            )
            topics, errors = conn.metadata(wanted)
        missing = [t for t in errors if errors[t] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        if missing and not sub.pattern:
            raise KafkaClientError(f"topic {missing[0]}: broker answered UNKNOWN_TOPIC_OR_PARTITION", 3)
        for name, code in errors.items():
            if code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise KafkaClientError(f"topic {name}: broker answered {error_name(code)}", code)
        available = {t: [p.partition for p in parts] for t, parts in topics.items()}
        by_tp = {(p.topic, p.partition): p for parts in topics.values() for p in parts}
        selected = self.subscription.select(available)
        unknown = [tp for tp in selected if tp not in by_tp]
        if unknown:
            raise KafkaClientError(
                f"partition {unknown[0][0]}-{unknown[0][1]}: broker answered UNKNOWN_TOPIC_OR_PARTITION", 3
            )
        return {tp: by_tp[tp] for tp in selected}

    def offsets(self, parts: dict[off.TopicPartition, PartitionMetadata]) -> tuple[off.Offsets, off.Offsets]:
        """(log start, log end) per partition, asking each partition's leader."""
        earliest: off.Offsets = {}
        latest: off.Offsets = {}
        by_leader: dict[tuple[str, int] | None, dict[str, list[int]]] = {}
        for (topic, p), meta in parts.items():
            if meta.leader is None:
                raise KafkaClientError(
                    f"partition {topic}-{p}: broker answered LEADER_NOT_AVAILABLE",
                    ErrorCode.LEADER_NOT_AVAILABLE,
                )
            by_leader.setdefault(meta.leader, {}).setdefault(topic, []).append(p)
        for leader, topics in by_leader.items():
            with self._connect(leader) as conn:
                for topic, plist in topics.items():
                    for p, o in conn.list_offsets(topic, plist, EARLIEST_TIMESTAMP).items():
                        earliest[(topic, p)] = o
                    # read_committed ends at the last stable offset (KIP-98).
                    latest_offsets = conn.list_offsets(
                        topic, plist, LATEST_TIMESTAMP, isolation_level=self.isolation_level
                    )
                    for p, o in latest_offsets.items():
                        latest[(topic, p)] = o
        return earliest, latest


def _check_data_loss(start: off.Offsets, earliest: off.Offsets, fail: bool) -> off.Offsets:
    out = dict(start)
    for tp, s in start.items():
        if s < earliest.get(tp, 0):
            if fail:
                raise PykraftDataLossError(
                    f"partition {tp[0]}-{tp[1]}: offset {s} is below the log start offset {earliest[tp]} "
                    "(OFFSET_OUT_OF_RANGE: records were deleted by retention or DeleteRecords); "
                    "set failOnDataLoss=false to skip to the log start"
                )
            out[tp] = earliest[tp]
    return out


# --- executor side -----------------------------------------------------------------------------------


def _arrow_schema(schema: Any) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    # The Python data source worker checks batches against exactly this (types and nullability).
    return to_arrow_schema(schema, timezone="UTC")


class _LogEndsEarly(KafkaClientError):
    """The partition's log ends before the planned range does: a new leader whose high watermark has
    not caught up yet (retried), or a truncated log (once the retries are spent: failOnDataLoss)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transport=True)


class _Cursor:
    """The next offset a task has still to read; it moves only once records before it were handed on."""

    __slots__ = ("offset",)

    def __init__(self, offset: int) -> None:
        self.offset = offset


def read_partition(part: OffsetRangePartition, schema: Any) -> Any:
    from pykraft.spark.decode import ArrowDecoder  # here, not at planning (pykraft.spark.schema says why)

    settings = part.settings
    decoder = ArrowDecoder(
        _arrow_schema(schema),
        part.topic,
        part.partition,
        include_headers=settings.include_headers,
        include_producer=settings.include_producer,
    )
    if part.segment_file is not None:
        yield from _read_segment(part, decoder)
        return
    if part.start >= part.end:
        return
    cursor = _Cursor(part.start)
    leader = part.leader
    # Failover (issue 28): a retriable failure (the leader died or moved, a connection was reset or
    # timed out) looks the leader up again and resumes at the cursor, as Kafka's consumer follows a
    # leader change inside Spark's poll; kafkaConsumer.pollTimeoutMs without progress fails the task.
    retrying: Retrying | None = None
    retrying_at = -1
    while True:
        try:
            if leader is None:
                raise KafkaClientError(
                    f"partition {part.topic}-{part.partition}: no leader", ErrorCode.LEADER_NOT_AVAILABLE
                )
            with BrokerConnection(*leader, timeout_s=settings.timeout_s, security=settings.security) as conn:
                yield from _fetch_range(conn, part, cursor, decoder)
            break
        except KafkaClientError as exc:
            if retrying is None or retrying_at != cursor.offset:
                retrying, retrying_at = Retrying(settings.retry, now_ms()), cursor.offset
            wait_ms = retrying.after_failure(now_ms(), exc.retriable)
            if wait_ms is None:
                if isinstance(exc, _LogEndsEarly):
                    if settings.fail_on_data_loss:
                        raise PykraftDataLossError(f"{exc}; set failOnDataLoss=false to accept it") from None
                    break
                if not exc.retriable:
                    raise
                raise KafkaClientError(
                    f"fetch {part.topic}-{part.partition} at offset {cursor.offset}: {exc} "
                    f"({retrying.describe()})",
                    exc.error_code,
                ) from None
            time.sleep(wait_ms / 1000.0)
            leader = _current_leader(part)
    yield from decoder.finish()


def _current_leader(part: OffsetRangePartition) -> tuple[str, int] | None:
    """The partition's leader by fresh metadata from a bootstrap server; None while there is none or
    no server answers (the next try fails retriably and asks again)."""
    settings = part.settings
    try:
        with connect_any(list(settings.bootstrap), settings.timeout_s, settings.security) as conn:
            topics, _errors = conn.metadata([part.topic])
    except KafkaClientError:
        return None
    for meta in topics.get(part.topic, []):
        if meta.partition == part.partition:
            return meta.leader
    return None


def _fetch_range(
    conn: BrokerConnection, part: OffsetRangePartition, cursor: _Cursor, decoder: ArrowDecoder
) -> Any:
    """Fetch and decode from ``cursor.offset`` to the end of the range over one connection, one
    request ahead."""
    settings = part.settings
    offset = cursor.offset

    def send_fetch(at: int) -> int:
        return conn.send_fetch(
            part.topic,
            part.partition,
            at,
            max_bytes=settings.fetch_max_bytes,
            isolation_level=settings.isolation_level,
        )

    pending = send_fetch(offset)
    while True:
        fetched = conn.receive_fetch(
            pending, part.topic, part.partition, isolation_level=settings.isolation_level
        )
        if fetched.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if settings.fail_on_data_loss:
                raise PykraftDataLossError(
                    f"partition {part.topic}-{part.partition}: fetch at offset {offset} answered "
                    "OFFSET_OUT_OF_RANGE (records deleted since the batch was planned); "
                    "set failOnDataLoss=false to skip them"
                )
            log_start = conn.list_offsets(part.topic, [part.partition], EARLIEST_TIMESTAMP)[part.partition]
            if log_start <= offset:  # the end moved back (truncation): nothing more to read
                return
            offset = cursor.offset = log_start
            pending = send_fetch(offset)
            continue
        if fetched.error_code:
            raise KafkaClientError(
                f"fetch {part.topic}-{part.partition} at offset {offset}: broker answered "
                f"{error_name(fetched.error_code)}",
                fetched.error_code,
            )
        batches, next_offset = _batches_up_to(fetched.records, offset, part.end)
        if next_offset <= offset:
            if fetched.high_watermark <= offset:
                raise _LogEndsEarly(
                    f"partition {part.topic}-{part.partition}: the log ends at {fetched.high_watermark} "
                    f"but the batch was planned up to {part.end} (log truncated)"
                )
            raise KafkaClientError(
                f"fetch {part.topic}-{part.partition} at offset {offset}: no complete record batch "
                f"(CORRUPT_MESSAGE, or a batch larger than fetchMaxBytes={settings.fetch_max_bytes})"
            )
        if next_offset < part.end:
            # One fetch ahead: the broker serves it while these records are decoded and shipped.
            pending = send_fetch(next_offset)
        if fetched.aborted_transactions is not None:
            # read_committed: whole batches of aborted transactions (and markers) are dropped.
            batches = committed_batches(fetched.records, batches, fetched.aborted_transactions)
        yield from decoder.decode(fetched.records, batches, offset, part.end)
        offset = cursor.offset = next_offset
        if next_offset >= part.end:
            return


def _batches_up_to(records: memoryview, start: int, end: int) -> tuple[list[tuple[int, BatchHeader]], int]:
    """The complete batches of a fetch up to the one holding ``end - 1``, and the offset after them."""
    batches: list[tuple[int, BatchHeader]] = []
    next_offset = start
    for pos, header in scan_batches(records):
        batches.append((pos, header))
        next_offset = max(next_offset, header.next_offset)
        if next_offset >= end:
            break
    return batches, next_offset


def _read_segment(part: OffsetRangePartition, decoder: ArrowDecoder) -> Any:
    """Decode one segment file through a read-only memory map, a window of batches at a time."""
    import pyarrow as pa

    assert part.segment_file is not None
    if os.path.getsize(part.segment_file) == 0:
        return
    # pyarrow's map is released when the last buffer over it goes; decoded batches own their bytes.
    with pa.memory_map(part.segment_file) as mapped:
        data = mapped.read_buffer()
    batches: list[tuple[int, BatchHeader]] = []
    window_pos = 0
    for pos, header in scan_batches(data):
        if header.next_offset <= part.start:
            continue
        if not batches:
            window_pos = pos
        batches.append((pos, header))
        if pos + header.size_in_bytes - window_pos >= SEGMENT_WINDOW_BYTES:
            yield from decoder.decode(data, batches, part.start, part.end)
            batches = []
        if header.next_offset >= part.end:
            break
    yield from decoder.decode(data, batches, part.start, part.end)
    yield from decoder.finish()


def segment_partitions(
    data_dir: str, subscription: off.Subscription, start: Any, end: Any, settings: ReadSettings
) -> list[OffsetRangePartition]:
    """One partition per ``<topic>-<p>/<base>.log`` segment of the subscribed topics in ``data_dir``."""
    if not os.path.isdir(data_dir):
        raise off.OptionError(f"option path: {data_dir!r} is not a directory")
    available: dict[str, list[int]] = {}
    for name in os.listdir(data_dir):
        topic, sep, num = name.rpartition("-")
        if (
            sep
            and num.isdigit()
            and os.path.isdir(os.path.join(data_dir, name))
            and not topic.startswith("__")
        ):
            available.setdefault(topic, []).append(int(num))
    parts: list[OffsetRangePartition] = []
    for topic, p in subscription.select(available):
        directory = os.path.join(data_dir, f"{topic}-{p}")
        lo = 0 if start in ("earliest", "latest") else start.get((topic, p), 0)
        hi = _NO_END if end in ("earliest", "latest") else end.get((topic, p), _NO_END)
        lo = max(lo, 0)
        hi = _NO_END if hi < 0 else hi
        for seg in sorted(f for f in os.listdir(directory) if f.endswith(".log")):
            parts.append(OffsetRangePartition(topic, p, lo, hi, None, settings, os.path.join(directory, seg)))
    if not parts:
        raise off.OptionError(f"option path: {data_dir!r} holds no segment of the subscribed topics")
    return parts


# --- the data source ----------------------------------------------------------------------------------


class PykraftDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        settings = _read_settings(self.options)
        return schema_ddl(settings.include_headers, settings.include_producer)

    def reader(self, schema: Any) -> DataSourceReader:
        return PykraftBatchReader(self.options, schema)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        if self.options.get("path"):
            raise off.OptionError("option path: reading segment files is for batch reads only")
        return PykraftStreamReader(self.options, schema)

    def writer(self, schema: Any, overwrite: bool) -> PykraftWriter:
        return PykraftWriter(self.options, schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> PykraftStreamWriter:
        return PykraftStreamWriter(self.options, schema)


class PykraftBatchReader(DataSourceReader):
    def __init__(self, options: Any, schema: Any) -> None:
        self.options = off.Options(options)
        self.schema = schema
        self.settings = _read_settings(options)
        self.starting = off.parse_offsets_spec("startingOffsets", options.get("startingOffsets"), "earliest")
        self.ending = off.parse_offsets_spec("endingOffsets", options.get("endingOffsets"), "latest")
        if self.starting == "latest":
            raise off.OptionError("option startingOffsets: latest is not valid for batch reads")
        if self.ending == "earliest":
            raise off.OptionError("option endingOffsets: earliest is not valid for batch reads")
        self.min_partitions = off.parse_int(options, "minPartitions", None, minimum=1)
        self.max_records = off.parse_int(
            options, "maxRecordsPerPartition", DEFAULT_MAX_RECORDS_PER_PARTITION, minimum=1
        )
        off.parse_subscription(options)  # fail on the driver, with the option's name

    def partitions(self) -> list[InputPartition]:
        path = self.options.get("path")
        if path:
            sub = off.parse_subscription(self.options)
            return list(segment_partitions(str(path), sub, self.starting, self.ending, self.settings))
        parts, earliest, latest = BrokerView(self.options).snapshot()
        start = off.resolve(self.starting, parts, earliest, latest)
        end = off.resolve(self.ending, parts, earliest, latest)
        start = _check_data_loss(start, earliest, self.settings.fail_on_data_loss)
        ranges = [off.Range(t, p, start[(t, p)], end[(t, p)]) for t, p in parts]
        assert self.max_records is not None
        return [
            OffsetRangePartition(
                r.topic, r.partition, r.start, r.end, parts[(r.topic, r.partition)].leader, self.settings
            )
            for r in off.split_ranges(ranges, self.min_partitions, self.max_records)
        ]

    def read(self, partition: InputPartition) -> Any:
        if not isinstance(partition, OffsetRangePartition):
            # Nothing to read (an empty topic, or start == end): partitions() returned no ranges and
            # PySpark's planner passed its placeholder InputPartition(None) instead.
            return iter(())
        return read_partition(partition, self.schema)


class PykraftStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Runs in one long-lived driver-side process per query; ``read`` runs on executors."""

    def __init__(self, options: Any, schema: Any) -> None:
        self.options = off.Options(options)
        self.schema = schema
        self.settings = _read_settings(options)
        self.starting = off.parse_offsets_spec("startingOffsets", options.get("startingOffsets"), "latest")
        self.max_per_trigger = off.parse_int(options, "maxOffsetsPerTrigger", None, minimum=1)
        self.max_records = off.parse_int(
            options, "maxRecordsPerPartition", DEFAULT_MAX_RECORDS_PER_PARTITION, minimum=1
        )
        self.min_partitions = off.parse_int(options, "minPartitions", None, minimum=1)
        if options.get("endingOffsets"):
            raise off.OptionError("option endingOffsets is for batch reads only")
        off.parse_subscription(options)
        # Pinned by prepareForTriggerAvailableNow: the end an availableNow query stops at.
        self._target: off.Offsets | None = None

    def _snapshot(self) -> tuple[dict[off.TopicPartition, PartitionMetadata], off.Offsets, off.Offsets]:
        return BrokerView(self.options).snapshot()

    def initialOffset(self) -> dict[str, dict[str, int]]:
        parts, earliest, latest = self._snapshot()
        return off.to_json(off.resolve(self.starting, parts, earliest, latest))

    def getDefaultReadLimit(self) -> Any:
        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        _, _, latest = self._snapshot()
        self._target = latest

    def latestOffset(self, start: Any = None, limit: Any = None) -> dict[str, dict[str, int]]:
        _, earliest, latest = self._snapshot()
        if self._target is not None:
            latest = {tp: min(o, latest.get(tp, o)) for tp, o in self._target.items()}
        begin = off.from_json(start)
        # A partition that appeared after the query started is read from its log start, as Spark does.
        for tp in latest:
            begin.setdefault(tp, earliest.get(tp, 0))
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if start is None and limit is None:  # a 4.0/4.1 engine: no admission control in the API
            max_rows = self.max_per_trigger
        return off.to_json(off.admit(begin, latest, max_rows))

    def reportLatestOffset(self) -> dict[str, dict[str, int]]:
        return off.to_json(self._snapshot()[2])

    def partitions(self, start: Any, end: Any) -> list[InputPartition]:
        begin = off.from_json(start)
        stop = off.from_json(end)
        if not stop or all(begin.get(tp) == o for tp, o in stop.items()):
            return []
        parts, earliest, _latest = self._snapshot()
        for tp in stop:
            begin.setdefault(tp, earliest.get(tp, 0))
        begin = _check_data_loss(begin, earliest, self.settings.fail_on_data_loss)
        ranges = [off.Range(t, p, begin[(t, p)], stop[(t, p)]) for t, p in sorted(stop) if (t, p) in parts]
        assert self.max_records is not None
        return [
            OffsetRangePartition(
                r.topic, r.partition, r.start, r.end, parts[(r.topic, r.partition)].leader, self.settings
            )
            for r in off.split_ranges(ranges, self.min_partitions, self.max_records)
        ]

    def commit(self, end: Any) -> None:
        # Deliberately nothing: the checkpoint is the truth, and this call arrives one batch late.
        return None

    def read(self, partition: InputPartition) -> Any:
        assert isinstance(partition, OffsetRangePartition)
        return read_partition(partition, self.schema)


# --- the sink -------------------------------------------------------------------------------------------


class KafkaSinkError(RuntimeError):
    """A record could not be delivered; the message carries the broker's (or librdkafka's) error name."""


@dataclass
class SinkCommit(WriterCommitMessage):
    records: int
    value_bytes: int


# Java-client properties a Spark user passes as kafka.* that librdkafka names otherwise or lacks.
_JAVA_ONLY_PROPERTIES = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.keystore.location",  # librdkafka's is PKCS#12; Kafka's PEM keystore is cert and key
        "ssl.keystore.type",
        "default.api.timeout.ms",
    }
)
# Consumer-side options of this source that mean nothing to a producer.
_READ_ONLY_PROPERTIES = frozenset({"isolation.level"})


def _client_config(options: dict[str, str]) -> dict[str, Any]:
    """bootstrap.servers and the security settings of the ``kafka.*`` options, as librdkafka takes them:
    ``kafka.sasl.jaas.config``'s user and password become sasl.username/sasl.password, a PEM
    ``kafka.ssl.truststore.location`` becomes ssl.ca.location and a PEM ``kafka.ssl.keystore.location``
    ssl.certificate.location and ssl.key.location (issue 28)."""
    servers = options.get("kafka.bootstrap.servers")
    if not servers:
        raise off.OptionError("option kafka.bootstrap.servers is required")
    config: dict[str, Any] = {"bootstrap.servers": servers}
    security = client_security(options)
    if security is not None:
        config["security.protocol"] = security.security_protocol
        if security.security_protocol.startswith("SASL_"):
            config["sasl.mechanism"] = security.sasl_mechanism
            config["sasl.username"] = security.username
            config["sasl.password"] = security.password
        if security.ca_location:
            config["ssl.ca.location"] = security.ca_location
        if security.certificate_location:  # mutual TLS
            config["ssl.certificate.location"] = security.certificate_location
            config["ssl.key.location"] = security.key_location
        if security.key_password:
            config["ssl.key.password"] = security.key_password
    for key, value in options.items():
        name = key[len("kafka.") :]
        if key.startswith("kafka.") and name.startswith("ssl.") and name not in _JAVA_ONLY_PROPERTIES:
            config[name] = value
    return config


def admin_config(options: dict[str, str]) -> dict[str, Any]:
    """A confluent-kafka client's configuration (admin, consumer) for ``kafka.*`` options."""
    return _client_config(off.Options(options))


def _producer_config(options: dict[str, str]) -> dict[str, Any]:
    config = _client_config(options)
    config.update({"linger.ms": 5, "batch.num.messages": 10000, "queue.buffering.max.messages": 200000})
    for key, value in options.items():
        name = key[len("kafka.") :]
        if key.startswith("kafka.") and name not in _JAVA_ONLY_PROPERTIES | _READ_ONLY_PROPERTIES:
            config.setdefault(name, value)
    # Not overridable: the sink promises an idempotent producer with acks=all.
    config["enable.idempotence"] = True
    config["acks"] = "all"
    return config


def _name_of(err: Any) -> str:
    code = err.code()
    return error_name(code) if code > 0 else str(err.name())


def _produce_rows(
    producer: Any, options: dict[str, str], iterator: Any, failures: list[str]
) -> tuple[int, int]:
    """Hand every row of the Arrow batches to ``producer``; (records, value bytes)."""
    from confluent_kafka import KafkaException

    topic_option = options.get("topic")
    sent = 0
    nbytes = 0

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None and len(failures) < 5:
            failures.append(f"{msg.topic()}-{msg.partition()}: {_name_of(err)}: {err.str()}")

    for batch in iterator:
        names = batch.schema.names
        if "value" not in names:
            raise off.OptionError("the pykraft sink needs a value column (binary or string)")
        if topic_option is None and "topic" not in names:
            raise off.OptionError("the pykraft sink needs a topic column or the topic option")
        values = batch.column("value").to_pylist()
        n = len(values)
        keys = batch.column("key").to_pylist() if "key" in names else [None] * n
        topics = [topic_option] * n if topic_option else batch.column("topic").to_pylist()
        partitions = batch.column("partition").to_pylist() if "partition" in names else [None] * n
        headers = batch.column("headers").to_pylist() if "headers" in names else [None] * n
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise KafkaSinkError("a row has a null topic and no topic option is set")
            kwargs: dict[str, Any] = {"on_delivery": on_delivery}
            if partitions[i] is not None:
                kwargs["partition"] = partitions[i]
            row_headers = headers[i]
            if row_headers:
                kwargs["headers"] = [(h["key"], h["value"]) for h in row_headers]
            while True:
                try:
                    producer.produce(topic, values[i], keys[i], **kwargs)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(0.05)
                except KafkaException as exc:
                    raise KafkaSinkError(f"produce to {topic}: {_name_of(exc.args[0])}") from None
            sent += 1
            if values[i] is not None:
                nbytes += len(values[i])
        producer.poll(0)
        if failures:
            break
    return sent, nbytes


def _simulate_failure_after_commit(options: dict[str, str]) -> None:
    """``simulateFailureAfterCommit=DIR`` (demos and tests of what a retried task leaves): the first
    attempt of every task fails after its records are committed and before Spark hears of it."""
    directory = options.get("simulateFailureAfterCommit")
    if not directory:
        return
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None or ctx.attemptNumber() != 0:
        return
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"stage{ctx.stageId()}-task{ctx.partitionId()}"), "w") as fh:
        fh.write("failed after commit\n")
    raise RuntimeError("simulated task failure after commit (simulateFailureAfterCommit)")


def write_batches(options: dict[str, str], iterator: Any) -> SinkCommit:
    from confluent_kafka import Producer

    if off.parse_bool(options, "exactlyOnce", False):
        return write_batches_exactly_once(options, iterator)
    producer = Producer(_producer_config(options))
    failures: list[str] = []
    try:
        sent, nbytes = _produce_rows(producer, options, iterator, failures)
    finally:
        # Deliver what was produced even when the input failed, as Spark's Kafka writer does on close.
        remaining = producer.flush(60.0)
    if failures:
        raise KafkaSinkError("pykraft sink: delivery failed: " + "; ".join(failures))
    if remaining:
        raise KafkaSinkError(
            f"pykraft sink: {remaining} record(s) not acknowledged within 60 s (REQUEST_TIMED_OUT)"
        )
    _simulate_failure_after_commit(options)
    return SinkCommit(sent, nbytes)


def _sink_identity(options: dict[str, str]) -> tuple[str, int, int]:
    """(query, task partition, batch id) of this task's exactly-once write."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise KafkaSinkError("the exactly-once sink runs inside Spark tasks only")
    streaming_batch = ctx.getLocalProperty("streaming.sql.batchId")
    query = options.get("queryName") or ctx.getLocalProperty("sql.streaming.queryId")
    if not query:
        raise off.OptionError("exactlyOnce=true needs the option queryName (it names the transactional ids)")
    if streaming_batch is not None:
        batch_id = int(streaming_batch)
    else:
        parsed = off.parse_int(options, "batchId", 0, minimum=0)
        assert parsed is not None
        batch_id = parsed
    return query, ctx.partitionId(), batch_id


def write_batches_exactly_once(options: dict[str, str], iterator: Any) -> SinkCommit:
    """``exactlyOnce=true``: this task's rows in one Kafka transaction, with a marker of (query, task
    partition, batch id) committed in the same transaction (TxnOffsetCommit: group
    ``pykraft-sink-<query>-<partition>``, offset batch id + 1 on partition 0 of the topic). A retried or
    speculative attempt first fences every earlier attempt (init_transactions with the same
    transactional id: an open transaction of theirs is aborted, a committing one completes) and then, if
    the marker shows the batch committed, writes nothing."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    topic = options.get("topic")
    if not topic:
        raise off.OptionError("exactlyOnce=true needs the topic option (its partition 0 holds the markers)")
    query, partition_id, batch_id = _sink_identity(options)
    name = f"pykraft-sink-{query}-{partition_id}"
    config = _producer_config(options)
    config["transactional.id"] = name
    timeout_s = 60.0
    producer = Producer(config)
    consumer = Consumer(
        {
            **_client_config(options),
            "group.id": name,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    marker = TopicPartition(topic, 0)
    try:
        try:
            _retrying(lambda: producer.init_transactions(timeout_s), timeout_s)
            committed = _retrying(lambda: consumer.committed([marker], timeout=timeout_s)[0], timeout_s)
        except KafkaException as exc:
            raise KafkaSinkError(f"exactly-once sink {name}: {_name_of(exc.args[0])}") from None
        if committed.error is None and committed.offset >= batch_id + 1:
            return SinkCommit(0, 0)  # this batch was committed by an earlier attempt
        failures: list[str] = []
        try:
            producer.begin_transaction()
            sent, nbytes = _produce_rows(producer, options, iterator, failures)
            if producer.flush(timeout_s) or failures:
                producer.abort_transaction(timeout_s)
                raise KafkaSinkError(
                    "pykraft sink: delivery failed: " + "; ".join(failures or ["flush timed out"])
                )
            offsets = [
                TopicPartition(
                    topic,
                    0,
                    batch_id + 1,
                    f'{{"query":"{query}","partition":{partition_id},"batch":{batch_id}}}',
                )
            ]
            group = consumer.consumer_group_metadata()
            _retrying(lambda: producer.send_offsets_to_transaction(offsets, group, timeout_s), timeout_s)
            _retrying(lambda: producer.commit_transaction(timeout_s), timeout_s)
        except KafkaException as exc:
            error = exc.args[0]
            if error.txn_requires_abort():
                # An abortable error (e.g. a partition's leader changed under a produce): abort, and
                # let Spark retry the task, whose attempt writes the batch again in a new transaction.
                producer.abort_transaction(timeout_s)
            raise KafkaSinkError(f"exactly-once sink {name}: {_name_of(error)}") from None
    finally:
        consumer.close()
    _simulate_failure_after_commit(options)
    return SinkCommit(sent, nbytes)


def _retrying(call: Callable[[], T], timeout_s: float) -> T:
    """``call()`` again while librdkafka says its error is retriable (a transaction coordinator or
    group coordinator moving: librdkafka's documented pattern for init/commit/send_offsets), up to
    ``timeout_s``; any other error is raised."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    backoff_s = 0.1
    while True:
        try:
            return call()
        except KafkaException as exc:
            if not exc.args[0].retriable() or time.monotonic() + backoff_s > deadline:
                raise
        time.sleep(backoff_s)
        backoff_s = min(backoff_s * 2, 1.0)


class PykraftWriter(DataSourceArrowWriter):
    def __init__(self, options: Any, schema: Any) -> None:
        self.options = off.Options(options)
        _producer_config(self.options)  # fail on the driver for a missing bootstrap

    def write(self, iterator: Any) -> SinkCommit:
        return write_batches(self.options, iterator)

    def commit(self, messages: Any) -> None:
        return None  # every record was acknowledged (acks=all) before its task reported success

    def abort(self, messages: Any) -> None:
        return None  # delivered records cannot be taken back: at-least-once (see module docstring)


class PykraftStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: Any, schema: Any) -> None:
        self.options = off.Options(options)
        _producer_config(self.options)

    def write(self, iterator: Any) -> SinkCommit:
        return write_batches(self.options, iterator)

    def commit(self, messages: Any, batchId: int) -> None:
        return None

    def abort(self, messages: Any, batchId: int) -> None:
        return None
