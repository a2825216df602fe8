"""Producer-state snapshot files, ``<20-digit offset>.snapshot``, in Kafka's layout (kafka-facts.md §2.6).

Why: without them a partition's producer state is rebuilt on start by reading every batch header of
the log. A snapshot taken at segment roll (and at clean shutdown) holds the state as of its offset, so
start-up reads the snapshot and only the log after it (Kafka's ProducerStateManager.takeSnapshot /
loadFromSnapshot, ProducerSnapshot.json).

File layout (version 1, not flexible, big-endian)::

    version:int16 = 1
    crc:uint32            CRC-32C of every byte from offset 6 to the end
    count:int32           then ``count`` entries of 46 bytes:
      ProducerId:int64 Epoch:int16 LastSequence:int32 LastOffset:int64 OffsetDelta:int32
      Timestamp:int64 CoordinatorEpoch:int32 CurrentTxnFirstOffset:int64

The offset in the name is the producer map's end offset (exclusive): the next offset to apply. A file
that does not decode exactly (bad version, CRC, count, length, trailing bytes) raises
:class:`CorruptSnapshotError`; the loader then deletes it and falls back to an older snapshot, or to
a rebuild from the log. Storage goes through the partition's ``SegmentStore`` (checkpoint files), so
this module stays pure.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from crc32c import crc32c

from pykraft.log.producer_state import ProducerStateManager, SnapshotEntry
from pykraft.log.store import SEGMENT_NAME_DIGITS, SegmentStore

SNAPSHOT_SUFFIX = ".snapshot"
PRODUCER_SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_CRC_START = 6  # version (2) + crc (4)
_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_ENTRY_BYTES = _ENTRY.size
assert SNAPSHOT_ENTRY_BYTES == 46


class CorruptSnapshotError(ValueError):
    """A snapshot file that does not decode; the message names what is wrong."""


def snapshot_file_name(offset: int) -> str:
    """``snapshot_file_name(2) == "00000000000000000002.snapshot"`` (LogFileUtils.producerSnapshotFile)."""
    assert offset >= 0, offset
    return f"{offset:0{SEGMENT_NAME_DIGITS}d}{SNAPSHOT_SUFFIX}"


def snapshot_offset(name: str) -> int | None:
    """The offset of a snapshot file name, or None when ``name`` is not one."""
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == SEGMENT_NAME_DIGITS and stem.isdigit():
        return int(stem)
    return None


def encode_producer_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    body = bytearray(4)
    count = 0
    pack = _ENTRY.pack
    for entry in entries:
        body += pack(*entry)
        count += 1
    struct.pack_into(">i", body, 0, count)
    return struct.pack(">hI", PRODUCER_SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_producer_snapshot(data: bytes | bytearray | memoryview) -> list[SnapshotEntry]:
    view = memoryview(data).cast("B")
    if len(view) < _HEADER.size:
        raise CorruptSnapshotError(
            f"snapshot of {len(view)} bytes is shorter than its {_HEADER.size}-byte header"
        )
    version, crc, count = _HEADER.unpack_from(view, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot version {version}, expected {PRODUCER_SNAPSHOT_VERSION}")
    computed = crc32c(view[_CRC_START:])
    if crc != computed:
        raise CorruptSnapshotError(f"snapshot CRC-32C is {crc:#010x} but the bytes give {computed:#010x}")
    if count < 0:
        raise CorruptSnapshotError(f"snapshot entry count {count} is negative")
    expected = _HEADER.size + count * SNAPSHOT_ENTRY_BYTES
    if len(view) != expected:
        raise CorruptSnapshotError(
            f"snapshot of {count} entries should be {expected} bytes, the file has {len(view)}"
        )
    return [SnapshotEntry(*fields) for fields in _ENTRY.iter_unpack(view[_HEADER.size :])]


# --- snapshots of one partition, through its segment store ---------------------------------------------


def list_snapshot_offsets(store: SegmentStore) -> list[int]:
    offsets = (snapshot_offset(name) for name in store.list_checkpoints(SNAPSHOT_SUFFIX))
    return sorted(offset for offset in offsets if offset is not None)


def write_snapshot(store: SegmentStore, manager: ProducerStateManager) -> int:
    """Write the manager's state as ``<map_end_offset>.snapshot`` (atomically); returns the offset."""
    offset = manager.map_end_offset
    store.write_checkpoint(snapshot_file_name(offset), encode_producer_snapshot(manager.snapshot_entries()))
    return offset


def load_latest_snapshot(
    store: SegmentStore, manager: ProducerStateManager, log_end_offset: int, now_ms: int
) -> tuple[int | None, list[str]]:
    """Load the newest usable snapshot into the empty ``manager``.

    Snapshots past ``log_end_offset`` (the log lost its tail in a crash) and corrupt ones are deleted,
    as Kafka's loader does; the next older one is tried. Returns the loaded offset (None: rebuild from
    the log) and one line per file given up, for the shell to log."""
    problems: list[str] = []
    for offset in reversed(list_snapshot_offsets(store)):
        name = snapshot_file_name(offset)
        if offset > log_end_offset:
            problems.append(f"{name}: beyond the log end offset {log_end_offset}, deleted")
            store.delete_checkpoint(name)
            continue
        data = store.read_checkpoint(name)
        try:
            entries = decode_producer_snapshot(data if data is not None else b"")
        except CorruptSnapshotError as exc:
            problems.append(f"{name}: {exc}; deleted, falling back to an older snapshot or the log")
            store.delete_checkpoint(name)
            continue
        manager.load_snapshot(entries, offset, now_ms)
        return offset, problems
    return None, problems


def delete_snapshots_below(store: SegmentStore, offset: int) -> list[int]:
    """Delete snapshots below ``offset`` but always keep the newest one: with KIP-360 prolonged
    retention it may be the only record of producers whose batches the log no longer holds."""
    offsets = list_snapshot_offsets(store)
    doomed = [o for o in offsets[:-1] if o < offset]
    for doomed_offset in doomed:
        store.delete_checkpoint(snapshot_file_name(doomed_offset))
    return doomed
