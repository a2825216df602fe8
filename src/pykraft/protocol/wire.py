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
