"""Primitive writers for the hand-coded hot-path encoders (Fetch and Produce responses).

Kafka's wire primer (kafka-facts §0): classic strings are int16 length + UTF-8, arrays int32 count;
flexible versions use unsigned varints of length + 1 (0 = null) and end every struct with tagged
fields, which these encoders write empty but for KIP-951's leader discovery (default values are never
written).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
EMPTY_TAGGED_FIELDS = b"\x00"


def put_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def put_string(out: bytearray, text: str, flexible: bool) -> None:
    raw = text.encode("utf-8")
    if flexible:
        put_uvarint(out, len(raw) + 1)
    else:
        out += INT16.pack(len(raw))
    out += raw


def put_nullable_string(out: bytearray, text: str | None, flexible: bool) -> None:
    if text is not None:
        put_string(out, text, flexible)
    elif flexible:
        out.append(0)
    else:
        out += INT16.pack(-1)


def put_array_count(out: bytearray, count: int, flexible: bool) -> None:
    if flexible:
        put_uvarint(out, count + 1)
    else:
        out += INT32.pack(count)


MAX_UVARINT_BYTES = 5


class WireFormatError(ValueError):
    """Bytes that do not parse as Kafka's primitives (truncated, or a varint longer than 5 bytes).
    Callers turn it into their own error kind (RemoteProtocolError for a peer's request)."""


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint (at most 5 bytes, 32 bits) at ``pos``: ``(value, position after it)``."""
    value = 0
    shift = 0
    end = len(buf)
    for _ in range(MAX_UVARINT_BYTES):
        if pos >= end:
            raise WireFormatError("unsigned varint runs past the end")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise WireFormatError("unsigned varint longer than 5 bytes")


def skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """Skip one tagged-field section (count, then tag/size/data each); the position after it."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise WireFormatError("tagged field runs past the end")
    return pos


# --- KIP-951 leader discovery (Produce v10+, Fetch v16+) ----------------------------------------------

# tag 0 (Produce) or 1 (Fetch), size 9: leader_id, leader_epoch, the struct's empty tagged fields.
_LEADER_ID_AND_EPOCH_TAG = struct.Struct(">BBiiB")


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """A broker as the response's NodeEndpoints names it: how to reach a partition's current leader."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


def put_current_leader_tag(out: bytearray, tag: int, leader: tuple[int, int]) -> None:
    """One LeaderIdAndEpoch tagged field (CurrentLeader): (leader_id, leader_epoch)."""
    out += _LEADER_ID_AND_EPOCH_TAG.pack(tag, 9, *leader, 0)


def put_node_endpoints_tags(out: bytearray, endpoints: Sequence[NodeEndpoint]) -> None:
    """A response's top-level tagged fields: none, or NodeEndpoints (tag 0) alone."""
    if not endpoints:
        out += EMPTY_TAGGED_FIELDS
        return
    field = bytearray()
    put_array_count(field, len(endpoints), True)
    for endpoint in endpoints:
        field += INT32.pack(endpoint.node_id)
        put_string(field, endpoint.host, True)
        field += INT32.pack(endpoint.port)
        put_nullable_string(field, endpoint.rack, True)
        field += EMPTY_TAGGED_FIELDS
    out += b"\x01\x00"  # one tagged field, tag 0
    put_uvarint(out, len(field))
    out += field
