"""A segment's two sparse index files, kept whole in memory: the offset index (``.index``) and the time
index (``.timeindex``), as Kafka's OffsetIndex and TimeIndex over their shared AbstractIndex.

Both are columns of int64 pairs in memory and fixed-size big-endian entries on disk, one of the two
fields stored relative to the segment's base offset. ``entries_written`` counts the entries the stored
file holds: the log writes the rest (``encode(base, entries_written)``) at ``entries_written *
ENTRY_BYTES`` and cuts the file there, so a file is always exactly its entries (never preallocated).
Neither file is checksummed: the log rebuilds both from batch headers when it recovers a segment.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from typing import ClassVar

from pykraft.log.store import INDEX_SUFFIX, TIME_INDEX_SUFFIX
from pykraft.protocol.records import NO_TIMESTAMP


class SparseIndex:
    """Entries ``(key, value)`` in ascending order of both (Kafka's AbstractIndex)."""

    __slots__ = ("entries_written", "keys", "values")

    SUFFIX: ClassVar[str]
    ENTRY_FORMAT: ClassVar[str]  # struct codes of one entry, big-endian
    ENTRY_BYTES: ClassVar[int]
    RELATIVE_COLUMN: ClassVar[int]  # 0: the key is stored relative to the base offset, 1: the value

    def __init__(self) -> None:
        self.keys = array("q")
        self.values = array("q")
        self.entries_written = 0

    def __len__(self) -> int:
        return len(self.keys)

    def append(self, key: int, value: int) -> None:
        self.keys.append(key)
        self.values.append(value)

    def encode(self, base_offset: int, first_entry: int) -> bytes:
        """The file bytes of entries ``first_entry..``."""
        count = len(self.keys) - first_entry
        columns: list[list[int]] = [list(self.keys[first_entry:]), list(self.values[first_entry:])]
        columns[self.RELATIVE_COLUMN] = [offset - base_offset for offset in columns[self.RELATIVE_COLUMN]]
        flat = [0] * (2 * count)
        flat[0::2], flat[1::2] = columns
        return struct.pack(">" + self.ENTRY_FORMAT * count, *flat)

    def truncate_to_entries(self, entries: int) -> None:
        del self.keys[entries:], self.values[entries:]
        self.entries_written = min(self.entries_written, entries)


class OffsetIndex(SparseIndex):
    """``(last offset of the batch at a position, position)``; int32 relative offset, int32 position."""

    __slots__ = ()
    SUFFIX = INDEX_SUFFIX
    ENTRY_FORMAT = "ii"
    ENTRY_BYTES = 8
    RELATIVE_COLUMN = 0

    def position_at_or_before(self, offset: int) -> int:
        """The position of the last entry with offset <= ``offset``; 0 without one (OffsetIndex.lookup)."""
        entry = bisect_right(self.keys, offset) - 1
        return self.values[entry] if entry >= 0 else 0


class TimeIndex(SparseIndex):
    """``(largest timestamp so far, last offset of the first batch that had it)``; int64 timestamp,
    int32 relative offset. Every batch before that offset's batch has only smaller timestamps."""

    __slots__ = ()
    SUFFIX = TIME_INDEX_SUFFIX
    ENTRY_FORMAT = "qi"
    ENTRY_BYTES = 12
    RELATIVE_COLUMN = 1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """An entry only when ``timestamp`` is larger than the last one's (TimeIndex.maybeAppend: a
        segment without timestamps keeps an empty time index)."""
        last = self.keys[-1] if self.keys else NO_TIMESTAMP
        if timestamp > last:
            assert not self.values or offset > self.values[-1], (offset, self.values[-1])
            self.append(timestamp, offset)

    def offset_at_or_before(self, timestamp: int) -> int | None:
        """The offset of the last entry with timestamp <= ``timestamp``; None without one (TimeIndex.lookup)."""
        entry = bisect_right(self.keys, timestamp) - 1
        return self.values[entry] if entry >= 0 else None

    def truncate_to_offset(self, offset: int) -> None:
        """Drop the entries with offset >= ``offset`` (TimeIndex.truncateTo)."""
        self.truncate_to_entries(bisect_left(self.values, offset))
