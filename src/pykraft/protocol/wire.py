"""Primitive writers for the hand-coded hot-path encoders (Fetch and Produce responses).

Kafka's wire primer (kafka-facts §0): classic strings are int16 length + UTF-8, arrays int32 count;
flexible versions use unsigned varints of length + 1 (0 = null) and end every struct with tagged
fields, which these encoders always write empty (default values are never written).
"""

from __future__ import annotations

import struct

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
