"""Hand-written Fetch response encoder (versions 4-18, flexible from 12): the consume hot path.

A generic codec copies every stored batch into its output buffer (125-200 us per MiB here); this
encoder writes only the non-record parts and passes each partition's stored record chunks through as
separate list elements for ``writelines``/``sendmsg`` (peers-and-clients.md §6, gotcha 5). The
concatenation of the elements is byte for byte what kafka-python's FetchResponse encodes.

Layout (FetchResponse.json, v4-18)::

    <response header: correlation_id [tags in v12+]>
    throttle_time_ms:int32  [v7+ error_code:int16 session_id:int32]
    responses:[ topic:string (v4-12) | topic_id:uuid (v13+, KIP-516)
      partitions:[ partition_index:int32 error_code:int16 high_watermark:int64 last_stable_offset:int64
                   [v5+ log_start_offset:int64]
                   aborted_transactions:nullable [producer_id:int64 first_offset:int64 <tags>]
                   [v11+ preferred_read_replica:int32]  records:nullable records  <tags> ]  <tags> ]
    <tags: [v16+ tag 0 NodeEndpoints:[node_id:int32 host:string port:int32 rack:nullable string <tags>]]>

Of the partition tags DivergingEpoch (tag 0: epoch:int32 end_offset:int64 <tags>) is written for a
follower whose log diverged from the leader's (KIP-320/KIP-595), and CurrentLeader (tag 1:
leader_id:int32 leader_epoch:int32 <tags>) where the handler set it (v16+, KIP-951: a partition
answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its leader, and NodeEndpoints how to
reach it); SnapshotId (a KRaft follower's) is not.

``decode_fetch_response`` reads a v12 answer the other way for a follower (issue 29): each partition's
records come back as a memoryview of the received frame, not copied (a generic decoder copied every
fetched MiB once more on the follower's critical path); the tags other than DivergingEpoch are skipped.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from pykraft.core.uuid import ZERO_UUID
from pykraft.protocol.wire import (
    NodeEndpoint,
    WireFormatError,
    put_array_count,
    put_current_leader_tag,
    put_node_endpoints_tags,
    put_string,
    put_uvarint,
    read_uvarint,
    skip_tagged_fields,
)

FETCH_MIN_VERSION = 4
FETCH_MAX_VERSION = 18
FETCH_FIRST_FLEXIBLE_VERSION = 12
# Topics are named by id from v13 (KIP-516); NodeEndpoints and CurrentLeader are filled from v16 (KIP-951).
FETCH_FIRST_TOPIC_ID_VERSION = 13
FETCH_FIRST_LEADER_DISCOVERY_VERSION = 16

_FRAME_AND_CORRELATION = struct.Struct(">ii")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_ERROR_SESSION = struct.Struct(">hi")
_PARTITION_FIXED = struct.Struct(">ihqq")  # partition_index, error_code, high_watermark, last_stable_offset
_INT64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
# tag 0, size 13, epoch, end_offset, the struct's empty tagged fields (uvarints all < 128).
_DIVERGING_EPOCH_TAG = struct.Struct(">BBiqB")
_DIVERGING_EPOCH = struct.Struct(">iq")  # epoch, end_offset
# partition_index, error_code, high_watermark, last_stable_offset, log_start_offset
_PARTITION_FIXED_V5 = struct.Struct(">ihqqq")
_THROTTLE_ERROR_SESSION = struct.Struct(">ihi")

Chunk = bytes | bytearray | memoryview


@dataclass(slots=True)
class FetchPartitionResponse:
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    # Stored batch bytes, passed through to the socket untouched, in order.
    records: list[Chunk]
    # (producer_id, first_offset) pairs; None is written as a null array.
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    # (epoch, end_offset) for a replica fetch whose last fetched epoch the leader's log does not end
    # the same way (v12+; the follower truncates to it).
    diverging_epoch: tuple[int, int] | None = None
    # (leader_id, leader_epoch) for a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH
    # (v16+, KIP-951): the client goes to the new leader without a Metadata round trip.
    current_leader: tuple[int, int] | None = None


@dataclass(slots=True)
class FetchTopicResponse:
    topic: str
    partitions: list[FetchPartitionResponse]
    # What v13+ writes in place of the name (KIP-516).
    topic_id: uuid.UUID | None = None


@dataclass(slots=True)
class FetchResponseData:
    throttle_time_ms: int
    error_code: int
    session_id: int
    topics: list[FetchTopicResponse] = field(default_factory=list)
    # The endpoints of the leaders named by ``current_leader`` (v16+, KIP-951).
    node_endpoints: list[NodeEndpoint] = field(default_factory=list)


def encode_fetch_response(
    correlation_id: int, version: int, response: FetchResponseData
) -> list[bytes | bytearray | memoryview]:
    """Encode a framed Fetch response; the first element starts with the 4-byte frame size.

    Record chunks appear as their own elements (empty ones are left out); everything else is packed
    into a few bytearrays between them.
    """
    assert FETCH_MIN_VERSION <= version <= FETCH_MAX_VERSION, f"fetch response version {version}"
    flexible = version >= FETCH_FIRST_FLEXIBLE_VERSION
    head = bytearray(_FRAME_AND_CORRELATION.pack(0, correlation_id))
    if flexible:
        head.append(0)  # response header v1: empty tagged fields
    head += _INT32.pack(response.throttle_time_ms)
    if version >= 7:
        head += _ERROR_SESSION.pack(response.error_code, response.session_id)
    parts: list[bytes | bytearray | memoryview] = [head]
    out = head
    total_size = 0  # bytes in finished parts other than ``out``
    by_topic_id = version >= FETCH_FIRST_TOPIC_ID_VERSION
    put_array_count(out, len(response.topics), flexible)
    for topic in response.topics:
        if by_topic_id:
            out += (topic.topic_id or ZERO_UUID).bytes
        else:
            put_string(out, topic.topic, flexible)
        put_array_count(out, len(topic.partitions), flexible)
        for partition in topic.partitions:
            out += _PARTITION_FIXED.pack(
                partition.partition_index,
                partition.error_code,
                partition.high_watermark,
                partition.last_stable_offset,
            )
            if version >= 5:
                out += _INT64.pack(partition.log_start_offset)
            aborted = partition.aborted_transactions
            if aborted is None:
                if flexible:
                    out.append(0)
                else:
                    out += _INT32.pack(-1)
            else:
                put_array_count(out, len(aborted), flexible)
                for producer_id, first_offset in aborted:
                    out += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        out.append(0)
            if version >= 11:
                out += _INT32.pack(partition.preferred_read_replica)
            chunks = [chunk for chunk in partition.records if len(chunk)]
            records_size = sum(len(chunk) for chunk in chunks)
            if flexible:
                put_uvarint(out, records_size + 1)
            else:
                out += _INT32.pack(records_size)
            if chunks:
                total_size += len(out) + records_size
                parts.extend(chunks)
                out = bytearray()
                parts.append(out)
            if flexible:
                diverging, leader = partition.diverging_epoch, partition.current_leader
                out.append((diverging is not None) + (leader is not None))  # tag count, in tag order
                if diverging is not None:
                    out += _DIVERGING_EPOCH_TAG.pack(0, 13, *diverging, 0)
                if leader is not None:
                    put_current_leader_tag(out, 1, leader)
        if flexible:
            out.append(0)
    if version >= FETCH_FIRST_LEADER_DISCOVERY_VERSION:
        put_node_endpoints_tags(out, response.node_endpoints)
    elif flexible:
        out.append(0)
    total_size += len(out)
    if not out:
        parts.pop()
    # The frame size counts everything after itself.
    _INT32.pack_into(head, 0, total_size - 4)
    return parts


def decode_fetch_response(frame: bytes | bytearray | memoryview, version: int) -> FetchResponseData:
    """A Fetch response (v12, without the 4-byte size), as ``encode_fetch_response`` takes it; each
    partition's ``records`` is one memoryview into ``frame`` (none when empty). Raises
    ``WireFormatError`` on bytes that do not parse."""
    assert version == FETCH_FIRST_FLEXIBLE_VERSION, f"fetch response version {version}"
    view = memoryview(frame)
    try:
        pos = skip_tagged_fields(view, 4)  # correlation_id, response header v1 tags
        throttle_time_ms, error_code, session_id = _THROTTLE_ERROR_SESSION.unpack_from(view, pos)
        pos += _THROTTLE_ERROR_SESSION.size
        response = FetchResponseData(throttle_time_ms, error_code, session_id)
        topic_count, pos = read_uvarint(view, pos)
        for _ in range(topic_count - 1):
            name_size, pos = read_uvarint(view, pos)
            topic = FetchTopicResponse(str(view[pos : pos + name_size - 1], "utf-8"), [])
            pos += name_size - 1
            partition_count, pos = read_uvarint(view, pos)
            for _ in range(partition_count - 1):
                index, error, high_watermark, last_stable, log_start = _PARTITION_FIXED_V5.unpack_from(
                    view, pos
                )
                pos += _PARTITION_FIXED_V5.size
                aborted_count, pos = read_uvarint(view, pos)
                aborted: list[tuple[int, int]] | None = None
                if aborted_count:
                    aborted = []
                    for _ in range(aborted_count - 1):
                        aborted.append(_ABORTED.unpack_from(view, pos))
                        pos = skip_tagged_fields(view, pos + _ABORTED.size)
                (preferred_read_replica,) = _INT32.unpack_from(view, pos)
                records_size, pos = read_uvarint(view, pos + _INT32.size)
                records: list[Chunk] = []
                if records_size > 1:
                    if pos + records_size - 1 > len(view):
                        raise WireFormatError("records run past the end of the fetch response")
                    records.append(view[pos : pos + records_size - 1])
                    pos += records_size - 1
                partition = FetchPartitionResponse(
                    index,
                    error,
                    high_watermark,
                    last_stable,
                    log_start,
                    records,
                    aborted,
                    preferred_read_replica,
                )
                tag_count, pos = read_uvarint(view, pos)
                for _ in range(tag_count):
                    tag, pos = read_uvarint(view, pos)
                    size, pos = read_uvarint(view, pos)
                    if tag == 0:  # DivergingEpoch
                        partition.diverging_epoch = _DIVERGING_EPOCH.unpack_from(view, pos)
                    pos += size
                topic.partitions.append(partition)
            pos = skip_tagged_fields(view, pos)
            response.topics.append(topic)
        skip_tagged_fields(view, pos)
    except struct.error as exc:
        raise WireFormatError(f"fetch response: {exc}") from None
    return response


__all__ = [
    "FetchPartitionResponse",
    "FetchResponseData",
    "FetchTopicResponse",
    "decode_fetch_response",
    "encode_fetch_response",
]
