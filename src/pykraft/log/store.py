"""The segment store: the only way the pure partition log touches storage.

A partition is a directory of segments. Segment ``B`` (its base offset) is three byte strings: the log,
``<20-digit B>.log``, holding RecordBatch v2 batches back to back, and two sparse indexes, the offset
index ``<20-digit B>.index`` and the time index ``<20-digit B>.timeindex``. Small named checkpoints (the log start offset, the recovery point) sit beside
them. ``MemorySegmentStore`` keeps all of it in memory and can simulate a crash; the file-backed store
is ``pykraft.io.file_store.FileSegmentStore``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

BytesLike = bytes | bytearray | memoryview

# Digits in a segment file name: Kafka pads base offsets to the width of Long.MaxValue.
SEGMENT_NAME_DIGITS = 20
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
# Every index file a segment has (Kafka's LogSegment: offset index and time index).
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
# The log cleaner's files, as Kafka names them: a segment being written (``.cleaned``), then sealed and
# waiting to replace the segments it was cleaned from (``.swap``) -- LogFileUtils.CLEANED/SWAP_FILE_SUFFIX.
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
CLEANED = "cleaned"
SWAP = "swap"


class DescriptorShortageError(OSError):
    """The process is out of file descriptors (EMFILE/ENFILE) and the store could free none: retriable,
    never a log-dir failure (issue 29). Raised by a file-backed store; the replica manager answers the
    request with a retriable error and leaves the dir online."""


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``segment_file_name(5, ".log") == "00000000000000000005.log"`` (Kafka's LogFileUtils.filenamePrefixFromOffset)."""
    assert base_offset >= 0, base_offset
    return f"{base_offset:0{SEGMENT_NAME_DIGITS}d}{suffix}"


class SegmentStore(Protocol):
    """Storage for one partition's segments, index files and checkpoints.

    Contract:
    - Segments are named by base offset (>= 0). ``list_segments`` returns them sorted ascending.
    - ``append`` adds bytes at the end of a segment's log; the caller may reuse ``data`` once it
      returns. An appended byte is visible to ``read`` at once and survives a process kill (it is in
      the OS), but survives a machine crash only after ``flush`` of that segment returns.
    - ``read`` returns a new ``bytes`` the caller owns; it is shorter than ``size`` only at the end of
      the segment. Reading a segment that does not exist is a bug (``KeyError`` or ``OSError``).
    - ``truncate_segment`` shortens a segment's log (never lengthens it); durable after ``flush``.
    - ``delete_segment`` removes the log and the indexes of a segment, durably, at once.
    - ``write_index(base, position, data, suffix=)`` writes ``data`` at byte ``position`` of the index
      named by ``suffix`` (one of ``INDEX_SUFFIXES``) and cuts it to ``position + len(data)``;
      ``position`` is at most the index's current size. ``flush`` makes it durable. An index is only a
      hint: the log rebuilds it from batch headers.
    - ``write_checkpoint`` replaces a small file atomically and durably (temp, fsync, rename, fsync
      dir): after a crash a reader sees the old contents or the new, never a mix.
    - ``list_checkpoints(suffix)`` names the checkpoints ending with ``suffix`` (any order);
      ``delete_checkpoint`` removes one (no error if absent), durably (producer-state snapshots).
    - Cleaned segments (log compaction) are written beside the live ones, invisible to
      ``list_segments``: ``create_cleaned`` starts ``<base>.log.cleaned`` (replacing any left over),
      ``append_cleaned`` / ``write_cleaned_index`` fill it, ``seal_cleaned`` makes it durable and renames
      it to ``<base>.log.swap`` (and its indexes to ``.index.swap``, ``.timeindex.swap``) durably,
      ``install_swap`` renames the swap files over ``<base>.log`` / ``.index`` / ``.timeindex`` durably, ``discard_cleaning`` removes a base's cleaned
      and swap files. ``list_cleaning`` maps each base with such files to ``"cleaned"`` or ``"swap"``.
    - Storage failures raise ``OSError``; the caller treats them as fatal for the partition's log dir,
      except ``DescriptorShortageError`` (out of file descriptors), which is retriable.
    """

    def list_segments(self) -> list[int]: ...

    def create_segment(self, base_offset: int) -> None: ...

    def append(self, base_offset: int, data: BytesLike) -> None: ...

    def read(self, base_offset: int, position: int, size: int) -> bytes: ...

    def segment_size(self, base_offset: int) -> int: ...

    def truncate_segment(self, base_offset: int, size: int) -> None: ...

    def delete_segment(self, base_offset: int) -> None: ...

    def write_index(
        self, base_offset: int, position: int, data: BytesLike, *, suffix: str = INDEX_SUFFIX
    ) -> None: ...

    def read_index(self, base_offset: int, *, suffix: str = INDEX_SUFFIX) -> bytes | None: ...

    def flush(self, base_offset: int) -> None: ...

    def read_checkpoint(self, name: str) -> bytes | None: ...

    def write_checkpoint(self, name: str, data: bytes) -> None: ...

    def list_checkpoints(self, suffix: str) -> list[str]: ...

    def delete_checkpoint(self, name: str) -> None: ...

    def create_cleaned(self, base_offset: int) -> None: ...

    def append_cleaned(self, base_offset: int, data: BytesLike) -> None: ...

    def write_cleaned_index(
        self, base_offset: int, data: BytesLike, *, suffix: str = INDEX_SUFFIX
    ) -> None: ...

    def seal_cleaned(self, base_offset: int) -> None: ...

    def install_swap(self, base_offset: int) -> None: ...

    def discard_cleaning(self, base_offset: int) -> None: ...

    def list_cleaning(self) -> dict[int, str]: ...

    def close(self) -> None: ...


@dataclass
class _MemorySegment:
    data: bytearray = field(default_factory=bytearray)
    # What a crash leaves: the contents at the last flush; None while the segment was never flushed
    # (its directory entry is not durable yet, so a crash may take the whole file).
    durable: bytes | None = None
    # Index file suffix -> contents (absent: no such file yet), and what the last flush made durable.
    indexes: dict[str, bytearray] = field(default_factory=dict)
    durable_indexes: dict[str, bytes] = field(default_factory=dict)


class MemorySegmentStore:
    """In-memory ``SegmentStore`` for unit tests and the deterministic simulation.

    ``crash()`` models a machine crash: every segment goes back to what its last ``flush`` made
    durable; a segment never flushed disappears. With an ``rng`` the crash is harsher and nearer to
    a real disk: unflushed segments may survive, and bytes appended after the last flush survive as a
    random prefix, i.e. a torn tail. Deletions and checkpoints are durable when they return, as in
    the file store.
    """

    def __init__(self) -> None:
        self._segments: dict[int, _MemorySegment] = {}
        # The cleaner's files: base -> (state, segment); a sealed (swap) one is durable.
        self._cleaning: dict[int, tuple[str, _MemorySegment]] = {}
        self._checkpoints: dict[str, bytes] = {}
        # Counters a test or a simulation can assert on (e.g. "open reads headers, not segments").
        self.read_calls = 0
        self.read_bytes = 0
        self.append_calls = 0
        self.flush_calls = 0

    def list_segments(self) -> list[int]:
        return sorted(self._segments)

    def create_segment(self, base_offset: int) -> None:
        assert base_offset >= 0, base_offset
        assert base_offset not in self._segments, f"segment {base_offset} exists"
        self._segments[base_offset] = _MemorySegment()

    def append(self, base_offset: int, data: BytesLike) -> None:
        self.append_calls += 1
        self._segments[base_offset].data += data

    def read(self, base_offset: int, position: int, size: int) -> bytes:
        assert position >= 0 and size >= 0, (position, size)
        self.read_calls += 1
        out = bytes(self._segments[base_offset].data[position : position + size])
        self.read_bytes += len(out)
        return out

    def segment_size(self, base_offset: int) -> int:
        return len(self._segments[base_offset].data)

    def truncate_segment(self, base_offset: int, size: int) -> None:
        segment = self._segments[base_offset]
        assert 0 <= size <= len(segment.data), (size, len(segment.data))
        del segment.data[size:]

    def delete_segment(self, base_offset: int) -> None:
        del self._segments[base_offset]

    def write_index(
        self, base_offset: int, position: int, data: BytesLike, *, suffix: str = INDEX_SUFFIX
    ) -> None:
        assert suffix in INDEX_SUFFIXES, suffix
        index = self._segments[base_offset].indexes.setdefault(suffix, bytearray())
        assert 0 <= position <= len(index), (position, len(index))
        index[position:] = data

    def read_index(self, base_offset: int, *, suffix: str = INDEX_SUFFIX) -> bytes | None:
        segment = self._segments.get(base_offset)
        return None if segment is None else bytes(segment.indexes.get(suffix, b""))

    def flush(self, base_offset: int) -> None:
        self.flush_calls += 1
        segment = self._segments[base_offset]
        segment.durable = bytes(segment.data)
        segment.durable_indexes = {suffix: bytes(index) for suffix, index in segment.indexes.items()}

    def read_checkpoint(self, name: str) -> bytes | None:
        return self._checkpoints.get(name)

    def write_checkpoint(self, name: str, data: bytes) -> None:
        self._checkpoints[name] = bytes(data)

    def list_checkpoints(self, suffix: str) -> list[str]:
        return [name for name in self._checkpoints if name.endswith(suffix)]

    def delete_checkpoint(self, name: str) -> None:
        self._checkpoints.pop(name, None)

    def create_cleaned(self, base_offset: int) -> None:
        self._cleaning[base_offset] = (CLEANED, _MemorySegment())

    def append_cleaned(self, base_offset: int, data: BytesLike) -> None:
        state, segment = self._cleaning[base_offset]
        assert state == CLEANED, (base_offset, state)
        segment.data += data

    def write_cleaned_index(self, base_offset: int, data: BytesLike, *, suffix: str = INDEX_SUFFIX) -> None:
        state, segment = self._cleaning[base_offset]
        assert state == CLEANED and suffix in INDEX_SUFFIXES, (base_offset, state, suffix)
        segment.indexes[suffix] = bytearray(data)

    def seal_cleaned(self, base_offset: int) -> None:
        state, segment = self._cleaning[base_offset]
        assert state == CLEANED, (base_offset, state)
        segment.durable = bytes(segment.data)
        segment.durable_indexes = {suffix: bytes(index) for suffix, index in segment.indexes.items()}
        self._cleaning[base_offset] = (SWAP, segment)

    def install_swap(self, base_offset: int) -> None:
        state, segment = self._cleaning.pop(base_offset)
        assert state == SWAP, (base_offset, state)
        self._segments[base_offset] = segment

    def discard_cleaning(self, base_offset: int) -> None:
        self._cleaning.pop(base_offset, None)

    def list_cleaning(self) -> dict[int, str]:
        return {base: state for base, (state, _) in self._cleaning.items()}

    def close(self) -> None:
        pass

    # --- fault injection (tests and the simulation only) ------------------------------------------

    def crash(self, rng: random.Random | None = None) -> None:
        """Lose what was not flushed; see the class docstring."""
        # A cleaned segment not sealed yet was never fsynced: it may be gone, or be any prefix.
        for base_offset, (state, segment) in list(self._cleaning.items()):
            if state == CLEANED:
                if rng is None or rng.random() < 0.5:
                    del self._cleaning[base_offset]
                else:
                    del segment.data[rng.randint(0, len(segment.data)) :]
        for base_offset in list(self._segments):
            segment = self._segments[base_offset]
            durable = segment.durable
            if durable is None:
                if rng is None or rng.random() < 0.5:
                    del self._segments[base_offset]
                    continue
                durable = b""
            kept = bytearray(durable)
            if rng is not None and segment.data[: len(durable)] == durable:
                unflushed = len(segment.data) - len(durable)
                kept += segment.data[len(durable) : len(durable) + rng.randint(0, unflushed)]
            segment.data = kept
            segment.indexes = {suffix: bytearray(index) for suffix, index in segment.durable_indexes.items()}

    def corrupt(self, base_offset: int, position: int, xor_mask: int = 0xFF) -> None:
        """Flip bits of one stored byte, as a bad disk would."""
        self._segments[base_offset].data[position] ^= xor_mask

    def cut(self, base_offset: int, size: int) -> None:
        """Shorten a segment behind the log's back (a torn write that the OS kept)."""
        del self._segments[base_offset].data[size:]
