"""A small blocking Kafka client for the Spark source: Metadata v4, ListOffsets v1 and Fetch v5.

Why our own client and not confluent-kafka's consumer: the source needs the raw RecordBatch bytes
(batch headers carry producer id, epoch and base sequence, which librdkafka does not expose), and
decoding stored batches straight into Arrow columns skips a Python object per message. The requests
are the oldest non-flexible versions that carry what the source needs (Fetch v5 is the first with
``log_start_offset``), so the hand-written codec stays short. Every socket call has a timeout, so a
dead broker fails a task or a plan in bounded time (user-needs.md item 28).
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from pykraft.core.errors import ErrorCode
from pykraft.spark.offsets import OptionError
from pykraft.spark.retry import RETRIABLE_ERROR_CODES, Retrying, RetryPolicy

if TYPE_CHECKING:  # imported where security is used: kafka-python's codec takes seconds to import
    from pykraft.io.kafka_connection import ClientSecurity

T = TypeVar("T")

_API_FETCH = 1
_API_LIST_OFFSETS = 2
_API_METADATA = 3

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_FETCH_PARTITION = struct.Struct(">ihqqq")  # partition, error, high watermark, last stable, log start
_LIST_OFFSETS_PARTITION = struct.Struct(">ihqq")  # partition, error, timestamp, offset

# Bounded waits: connect and every request (seconds).
DEFAULT_TIMEOUT_S = 30.0


class KafkaClientError(RuntimeError):
    """A broker answered with an error code, or could not be reached; the message names both.

    ``retriable``: another try may succeed (a refused, reset or timed-out connection, or one of
    Kafka's retriable error codes); ``pykraft.spark.retry`` decides whether and when."""

    def __init__(self, message: str, error_code: int | None = None, *, transport: bool = False) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.retriable = transport or (error_code is not None and error_code in RETRIABLE_ERROR_CODES)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"kafka.bootstrap.servers: {item!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("kafka.bootstrap.servers is empty")
    return out


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: tuple[str, int] | None  # host, port; None while the partition has no leader


@dataclass(frozen=True)
class FetchedPartition:
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview  # stored RecordBatch bytes, possibly ending in a partial batch
    # read_committed: (producer id, first offset) of the aborted transactions the read overlaps.
    aborted_transactions: list[tuple[int, int]] | None = None


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def int16(self) -> int:
        (v,) = _INT16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return int(v)

    def int32(self) -> int:
        (v,) = _INT32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def int64(self) -> int:
        (v,) = _INT64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(v)

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        s = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8")
        self.pos += n
        return s

    def bytes_(self) -> memoryview:
        n = self.int32()
        if n < 0:
            return memoryview(b"")
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v


def _string(text: str | None) -> bytes:
    if text is None:
        return _INT16.pack(-1)
    raw = text.encode("utf-8")
    return _INT16.pack(len(raw)) + raw


class BrokerConnection:
    """One blocking connection to one broker; not thread-safe (one per task)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        client_id: str = "pykraft-spark",
        security: ClientSecurity | None = None,
    ) -> None:
        self.address = (host, port)
        if security is None or security.security_protocol == "PLAINTEXT":
            try:
                self._sock = socket.create_connection((host, port), timeout=timeout_s)
            except OSError as exc:
                raise KafkaClientError(f"cannot reach broker {host}:{port}: {exc}", transport=True) from None
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            # TLS and SASL (PLAIN, SCRAM) exactly as pykraft's command-line tools connect; then this
            # client speaks its own requests over the authenticated socket.
            from pykraft.io.kafka_connection import BrokerConnection as SecureConnection
            from pykraft.io.kafka_connection import BrokerConnectionError, BrokerUnreachableError

            try:
                self._sock = SecureConnection(
                    host, port, client_id=client_id, timeout_s=timeout_s, security=security
                ).sock
            except BrokerUnreachableError as exc:
                raise KafkaClientError(f"cannot reach broker {host}:{port}: {exc}", transport=True) from None
            except BrokerConnectionError as exc:
                raise KafkaClientError(f"broker {host}:{port}: {exc}") from None
        self._sock.settimeout(timeout_s)
        self._client_id = _string(client_id)
        self._buffer = bytearray(64 * 1024)
        self._correlation = 0

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exactly(self, n: int) -> memoryview:
        """The next ``n`` bytes, in this connection's receive buffer: valid until the next receive.

        One buffer per connection, reused: a fresh bytearray per fetch would be zero-filled and
        first-touched page by page each time. A larger answer gets a new buffer, never a resize,
        since views of the old one may still be alive."""
        if n > len(self._buffer):
            self._buffer = bytearray(max(n, 2 * len(self._buffer)))
        view = memoryview(self._buffer)[:n]
        got = 0
        while got < n:
            k = self._sock.recv_into(view[got:], n - got)
            if k == 0:
                raise KafkaClientError(
                    f"broker {self.address[0]}:{self.address[1]} closed the connection", transport=True
                )
            got += k
        return view

    def request(self, api_key: int, api_version: int, body: bytes) -> _Reader:
        return self.receive(self.send(api_key, api_version, body), api_key)

    def send(self, api_key: int, api_version: int, body: bytes) -> int:
        """Send one request; return its correlation id. Answers come back in the order sent."""
        self._correlation += 1
        header = _HEADER.pack(api_key, api_version, self._correlation) + self._client_id
        frame = header + body
        try:
            self._sock.sendall(_INT32.pack(len(frame)) + frame)
        except OSError as exc:
            raise KafkaClientError(
                f"broker {self.address[0]}:{self.address[1]}: {exc}", transport=True
            ) from None
        return self._correlation

    def receive(self, correlation: int, api_key: int) -> _Reader:
        """The answer to the request sent as ``correlation`` (the oldest one not yet received). It
        reads the connection's receive buffer, so it is valid until the next receive."""
        try:
            (size,) = _INT32.unpack(self._recv_exactly(4))
            data = self._recv_exactly(size)
        except TimeoutError:
            raise KafkaClientError(
                f"broker {self.address[0]}:{self.address[1]} did not answer api key {api_key} in time",
                transport=True,
            ) from None
        except OSError as exc:
            raise KafkaClientError(
                f"broker {self.address[0]}:{self.address[1]}: {exc}", transport=True
            ) from None
        reader = _Reader(data)
        answered = reader.int32()
        if answered != correlation:
            raise KafkaClientError(
                f"broker {self.address[0]}:{self.address[1]} answered request {answered}, expected {correlation}"
            )
        return reader

    # --- Metadata v4: the first with allow_auto_topic_creation (reading must not create topics) ---

    def metadata(self, topics: list[str] | None) -> tuple[dict[str, list[PartitionMetadata]], dict[str, int]]:
        """(partitions per topic, error code per topic that has one). ``None`` = every topic."""
        if topics is None:
            body = _INT32.pack(-1)
        else:
            body = _INT32.pack(len(topics)) + b"".join(_string(t) for t in topics)
        body += b"\x00"  # allow_auto_topic_creation = false, as Spark's Kafka source
        r = self.request(_API_METADATA, 4, body)
        r.int32()  # throttle
        brokers: dict[int, tuple[str, int]] = {}
        for _ in range(r.int32()):
            node_id = r.int32()
            host = r.string() or ""
            port = r.int32()
            r.string()  # rack
            brokers[node_id] = (host, port)
        r.string()  # cluster id
        r.int32()  # controller id
        out: dict[str, list[PartitionMetadata]] = {}
        errors: dict[str, int] = {}
        for _ in range(r.int32()):
            error = r.int16()
            name = r.string() or ""
            r.pos += 1  # is_internal
            parts: list[PartitionMetadata] = []
            for _p in range(r.int32()):
                r.int16()  # partition error (LEADER_NOT_AVAILABLE shows as leader -1)
                index = r.int32()
                leader = r.int32()
                for _list in ("replicas", "isr"):
                    count = r.int32()  # read before moving pos: `pos += 4 * int32()` would lose 4 bytes
                    r.pos += 4 * count
                parts.append(PartitionMetadata(name, index, brokers.get(leader)))
            if error:
                errors[name] = error
            else:
                out[name] = sorted(parts, key=lambda p: p.partition)
        return out, errors

    # --- ListOffsets v1 ----------------------------------------------------------------------------

    def list_offsets(
        self, topic: str, partitions: list[int], timestamp: int, *, isolation_level: int = 0
    ) -> dict[int, int]:
        """Offset per partition for ``timestamp`` (EARLIEST_TIMESTAMP = log start, LATEST = end; with
        isolation_level 1 the end is the last stable offset: ListOffsets v2)."""
        version = 2 if isolation_level else 1
        body = (
            _INT32.pack(-1)
            + (bytes([isolation_level]) if version >= 2 else b"")
            + _INT32.pack(1)
            + _string(topic)
            + _INT32.pack(len(partitions))
            + b"".join(_INT32.pack(p) + _INT64.pack(timestamp) for p in partitions)
        )
        r = self.request(_API_LIST_OFFSETS, version, body)
        if version >= 2:
            r.int32()  # throttle
        out: dict[int, int] = {}
        for _ in range(r.int32()):
            name = r.string()
            for _p in range(r.int32()):
                part, error, _ts, offset = _LIST_OFFSETS_PARTITION.unpack_from(r.buf, r.pos)
                r.pos += _LIST_OFFSETS_PARTITION.size
                if error:
                    raise KafkaClientError(
                        f"ListOffsets {name}-{part}: broker answered {error_name(error)}", error
                    )
                out[part] = offset
        return out

    # --- Fetch v5 ----------------------------------------------------------------------------------

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int,
        max_wait_ms: int = 100,
        isolation_level: int = 0,
    ) -> FetchedPartition:
        sent = self.send_fetch(
            topic,
            partition,
            offset,
            max_bytes=max_bytes,
            max_wait_ms=max_wait_ms,
            isolation_level=isolation_level,
        )
        return self.receive_fetch(sent, topic, partition, isolation_level=isolation_level)

    def send_fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int,
        max_wait_ms: int = 100,
        isolation_level: int = 0,
    ) -> int:
        """Send a Fetch without waiting for it, so the broker reads the next records while the caller
        decodes the last ones; ``receive_fetch`` takes the answer."""
        body = (
            _INT32.pack(-1)  # replica id: a consumer
            + _INT32.pack(max_wait_ms)
            + _INT32.pack(1)  # min bytes
            + _INT32.pack(max_bytes)
            + bytes([isolation_level])  # 0 read_uncommitted (Spark's Kafka source default), 1 read_committed
            + _INT32.pack(1)
            + _string(topic)
            + _INT32.pack(1)
            + _INT32.pack(partition)
            + _INT64.pack(offset)
            + _INT64.pack(-1)  # log start offset: only followers send it
            + _INT32.pack(max_bytes)
        )
        return self.send(_API_FETCH, 5, body)

    def receive_fetch(
        self, correlation: int, topic: str, partition: int, *, isolation_level: int = 0
    ) -> FetchedPartition:
        r = self.receive(correlation, _API_FETCH)
        r.int32()  # throttle
        for _ in range(r.int32()):
            r.string()
            for _p in range(r.int32()):
                part, error, high_watermark, _lso, log_start = _FETCH_PARTITION.unpack_from(r.buf, r.pos)
                r.pos += _FETCH_PARTITION.size
                aborted: list[tuple[int, int]] = []
                for _a in range(max(r.int32(), 0)):
                    aborted.append((r.int64(), r.int64()))
                records = r.bytes_()
                if part == partition:
                    return FetchedPartition(
                        error, high_watermark, log_start, records, aborted if isolation_level else None
                    )
        raise KafkaClientError(f"Fetch {topic}-{partition}: the response does not name the partition")


# --- retries and security: what the source and the sink share ------------------------------------------


def with_retries(policy: RetryPolicy, what: str, call: Callable[[], T]) -> T:
    """``call()``, tried again on a retriable failure as ``policy`` says (``pykraft.spark.retry``);
    ``call`` must look the cluster up afresh each time (metadata refresh). The error that ends it
    names the call, the last broker error and how many attempts were made."""
    retrying = Retrying(policy, now_ms())
    while True:
        try:
            return call()
        except KafkaClientError as exc:
            wait_ms = retrying.after_failure(now_ms(), exc.retriable)
            if wait_ms is None:
                if not exc.retriable:
                    raise
                raise KafkaClientError(f"{what}: {exc} ({retrying.describe()})", exc.error_code) from None
            time.sleep(wait_ms / 1000.0)


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def client_security(options: Mapping[str, str]) -> ClientSecurity | None:
    """Spark's ``kafka.``-prefixed client options (``kafka.security.protocol``, ``kafka.sasl.mechanism``,
    ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location`` or ``kafka.ssl.ca.location`` for a PEM
    CA file) as pykraft's client security; None for PLAINTEXT."""
    props = {k[len("kafka.") :]: str(v) for k, v in options.items() if k.lower().startswith("kafka.")}
    if props.get("security.protocol", "PLAINTEXT").strip().upper() == "PLAINTEXT":
        return None
    from pykraft.io.kafka_connection import BrokerConnectionError, ClientSecurity

    truststore_type = props.get("ssl.truststore.type", "PEM").strip().upper()
    if truststore_type != "PEM":
        raise OptionError(
            f"option kafka.ssl.truststore.type: {truststore_type} is not supported; give a PEM file "
            "(kafka.ssl.truststore.location or kafka.ssl.ca.location)"
        )
    try:
        return ClientSecurity.from_properties(props, "options kafka.*")
    except BrokerConnectionError as exc:
        raise OptionError(str(exc)) from None


def connect_any(
    addresses: list[tuple[str, int]], timeout_s: float, security: ClientSecurity | None
) -> BrokerConnection:
    """A connection to the first of ``addresses`` that answers; the error names every one tried."""
    errors: list[KafkaClientError] = []
    for host, port in addresses:
        try:
            return BrokerConnection(host, port, timeout_s=timeout_s, security=security)
        except KafkaClientError as exc:
            errors.append(exc)
    raise KafkaClientError(
        "; ".join(str(e) for e in errors), transport=all(e.retriable for e in errors) and bool(errors)
    )
