"""Hand-written Produce request decoder (versions 3-11, flexible from 9): the data hot path.

Why not the generic codec: kafka-python copies every ``records`` field into ``bytes``; the broker
rewrites base offsets in place and appends the client's bytes as they are (docs/architecture.md, "The hot path"),
so ``records`` here is a memoryview slice into the request buffer. When the buffer is a bytearray the
slice is writable and the rewrite costs no copy at all.

Layout (ProduceRequest.json)::

    transactional_id:nullable string  acks:int16  timeout_ms:int32
    topic_data:[ name:string  partition_data:[ index:int32  records:nullable records  <tags> ]  <tags> ]
    <tags>

Non-flexible versions use int16 string lengths and int32 array counts/record lengths; flexible ones use
unsigned varints of length + 1 (0 = null) and end every struct with a tagged-field section. Produce has
no known tagged fields up to v11, so every tag is skipped.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from pykraft.core.errors import RemoteProtocolError
from pykraft.protocol.wire import (
    EMPTY_TAGGED_FIELDS,
    NodeEndpoint,
    WireFormatError,
    put_array_count,
    put_current_leader_tag,
    put_node_endpoints_tags,
    put_nullable_string,
    put_string,
    read_uvarint,
    skip_tagged_fields,
)

PRODUCE_MIN_VERSION = 3
PRODUCE_MAX_VERSION = 11
PRODUCE_FIRST_FLEXIBLE_VERSION = 9
# CurrentLeader and NodeEndpoints (KIP-951).
PRODUCE_FIRST_LEADER_DISCOVERY_VERSION = 10

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


@dataclass(slots=True)
class ProducePartitionData:
    index: int
    # A view into the request buffer, not a copy (None if the client sent null records).
    records: memoryview | None


@dataclass(slots=True)
class ProduceTopicData:
    name: str
    partitions: list[ProducePartitionData]


@dataclass(slots=True)
class ProduceRequestData:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopicData]


class _Truncated(Exception):
    """Internal: a read ran past the end of the body (turned into RemoteProtocolError once)."""


def _string(buf: memoryview, pos: int, flexible: bool, what: str) -> tuple[str | None, int]:
    if flexible:
        length, pos = read_uvarint(buf, pos)
        length -= 1
    else:
        (length,) = _INT16.unpack_from(buf, pos)
        pos += 2
    if length < 0:
        if length < -1:
            raise RemoteProtocolError(f"produce request: {what} has length {length}")
        return None, pos
    end = pos + length
    if end > len(buf):
        raise _Truncated
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError:
        raise RemoteProtocolError(f"produce request: {what} is not valid UTF-8") from None


def _array_count(buf: memoryview, pos: int, flexible: bool, what: str) -> tuple[int, int]:
    if flexible:
        count, pos = read_uvarint(buf, pos)
        count -= 1
    else:
        (count,) = _INT32.unpack_from(buf, pos)
        pos += 4
    if count < 0:
        raise RemoteProtocolError(f"produce request: {what} array is null or negative ({count})")
    return count, pos


def decode_produce_request(body: memoryview, version: int) -> ProduceRequestData:
    """Decode a Produce request body (after the request header) at ``version`` 3-11.

    ``records`` of each partition is a slice of ``body``. Raises RemoteProtocolError on malformed input,
    an unsupported version or bytes after the body.
    """
    if not PRODUCE_MIN_VERSION <= version <= PRODUCE_MAX_VERSION:
        raise RemoteProtocolError(f"produce request version {version} is outside 3-11")
    flexible = version >= PRODUCE_FIRST_FLEXIBLE_VERSION
    try:
        return _decode(body, flexible)
    except (_Truncated, IndexError, struct.error):
        raise RemoteProtocolError(f"produce request v{version} runs past the end of its body") from None
    except WireFormatError as exc:
        raise RemoteProtocolError(f"produce request v{version}: {exc}") from None


def _decode(buf: memoryview, flexible: bool) -> ProduceRequestData:
    end_of_body = len(buf)
    transactional_id, pos = _string(buf, 0, flexible, "transactional_id")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += _ACKS_TIMEOUT.size
    topic_count, pos = _array_count(buf, pos, flexible, "topic_data")
    topics: list[ProduceTopicData] = []
    for _ in range(topic_count):
        name, pos = _string(buf, pos, flexible, "topic name")
        if name is None:
            raise RemoteProtocolError("produce request: topic name is null")
        partition_count, pos = _array_count(buf, pos, flexible, "partition_data")
        partitions: list[ProducePartitionData] = []
        for _ in range(partition_count):
            (index,) = _INT32.unpack_from(buf, pos)
            pos += 4
            if flexible:
                length, pos = read_uvarint(buf, pos)
                length -= 1
            else:
                (length,) = _INT32.unpack_from(buf, pos)
                pos += 4
            records: memoryview | None
            if length < 0:
                if length < -1:
                    raise RemoteProtocolError(f"produce request: records length {length}")
                records = None
            else:
                end = pos + length
                if end > end_of_body:
                    raise _Truncated
                records = buf[pos:end]
                pos = end
            if flexible:
                pos = skip_tagged_fields(buf, pos)
            partitions.append(ProducePartitionData(index, records))
        if flexible:
            pos = skip_tagged_fields(buf, pos)
        topics.append(ProduceTopicData(name, partitions))
    if flexible:
        pos = skip_tagged_fields(buf, pos)
    if pos != end_of_body:
        raise RemoteProtocolError(f"produce request: body ends at byte {pos}, request has {end_of_body}")
    return ProduceRequestData(transactional_id, acks, timeout_ms, topics)


# --- the response ---------------------------------------------------------------------------------

_PARTITION_HEAD = struct.Struct(">ihq")  # index, error_code, base_offset
_INT64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class ProducePartitionResult:
    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    # (leader_id, leader_epoch) for a partition answered NOT_LEADER_OR_FOLLOWER (v10+, KIP-951).
    current_leader: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class ProduceTopicResult:
    name: str
    partitions: list[ProducePartitionResult]


def encode_produce_response(
    correlation_id: int,
    version: int,
    topics: list[ProduceTopicResult],
    throttle_time_ms: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> bytearray:
    """The framed ProduceResponse, versions 3-11, byte-identical to kafka-python's encoding.

    Small produce requests are answered thousands of times a second; building kafka-python response
    objects for them costs ~10% of the broker's time on that path (bench P4), so it is written by hand.
    RecordErrors (v8+) are always empty; CurrentLeader (partition tag 0) and NodeEndpoints (top-level
    tag 0) are written from v10 where given (KIP-951, broker/leader_discovery.py).
    """
    if not PRODUCE_MIN_VERSION <= version <= PRODUCE_MAX_VERSION:
        raise ValueError(
            f"produce response version {version} is outside {PRODUCE_MIN_VERSION}-{PRODUCE_MAX_VERSION}"
        )
    flexible = version >= PRODUCE_FIRST_FLEXIBLE_VERSION
    out = bytearray(8)  # frame size, correlation id
    _INT32.pack_into(out, 4, correlation_id)
    if flexible:
        out += EMPTY_TAGGED_FIELDS  # response header v1
    put_array_count(out, len(topics), flexible)
    for topic in topics:
        put_string(out, topic.name, flexible)
        put_array_count(out, len(topic.partitions), flexible)
        for p in topic.partitions:
            out += _PARTITION_HEAD.pack(p.index, p.error_code, p.base_offset)
            out += _INT64.pack(p.log_append_time_ms)
            if version >= 5:
                out += _INT64.pack(p.log_start_offset)
            if version >= 8:
                put_array_count(out, 0, flexible)  # record_errors
                put_nullable_string(out, p.error_message, flexible)
            if version >= PRODUCE_FIRST_LEADER_DISCOVERY_VERSION and p.current_leader is not None:
                out.append(1)  # one tagged field
                put_current_leader_tag(out, 0, p.current_leader)
            elif flexible:
                out += EMPTY_TAGGED_FIELDS
        if flexible:
            out += EMPTY_TAGGED_FIELDS
    out += _INT32.pack(throttle_time_ms)
    if version >= PRODUCE_FIRST_LEADER_DISCOVERY_VERSION:
        put_node_endpoints_tags(out, node_endpoints)
    elif flexible:
        out += EMPTY_TAGGED_FIELDS
    _INT32.pack_into(out, 0, len(out) - 4)
    return out


__all__ = [
    "ProducePartitionData",
    "ProducePartitionResult",
    "ProduceTopicResult",
    "encode_produce_response",
    "ProduceRequestData",
    "ProduceTopicData",
    "decode_produce_request",
]
