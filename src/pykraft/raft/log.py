"""The replicated log contract (``RaftLog``) and a pure in-memory implementation (``MemoryRaftLog``).

The log holds RecordBatch v2 batches whose ``partitionLeaderEpoch`` is the epoch of the leader that
appended them (kafka-facts §7.1). Offsets are half-open: ``[start_offset, end_offset)``.

Who does what (the Ready contract, raft/node.py):

* The core appends and truncates; those changes are *unflushed* until the shell calls ``flush``.
* The shell flushes up to ``Ready.flush_to_offset`` before it sends that Ready's messages, and tells
  the core with ``RaftNode.advance``. The core never calls ``flush`` itself.
* A crash loses every batch at or past ``flushed_offset``; a truncation is durable at once (as a file
  truncation in Kafka's segment log is, modulo the directory fsync the shell owns).

Epochs never decrease along the log: a batch's epoch is at least the epoch of the batch before it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pykraft.protocol.records import Record, build_batch, read_batch_header, scan_batches
from pykraft.raft.messages import OffsetAndEpoch

# Kafka's UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET in LeaderEpochFileCache.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def build_leader_batch(
    records: Sequence[bytes | Record], *, base_offset: int, epoch: int, now_ms: int, is_control: bool
) -> bytearray:
    """One uncompressed batch as a KRaft leader writes it: producer id -1, partitionLeaderEpoch =
    ``epoch``. A ``bytes`` item is a record value with a null key (kafka-facts §7.1); control records
    are passed as ``Record`` so they carry their ``version, type`` key."""
    assert records, "a leader append holds at least one record"
    assert epoch >= 0
    built = [r if isinstance(r, Record) else Record(None, r) for r in records]
    return build_batch(
        built,
        base_offset=base_offset,
        timestamp_ms=now_ms,
        partition_leader_epoch=epoch,
        is_control=is_control,
    )


class RaftLog(Protocol):
    """What the core needs from the metadata partition log (Kafka's ReplicatedLog, narrowed).

    All offsets are absolute. Returned ``bytes`` are owned by the caller. No method raises for an
    expected outcome: divergence is a value (``end_offset_for_epoch``), not an exception.
    """

    @property
    def start_offset(self) -> int:
        """First offset held (0 until snapshots advance it, KIP-630)."""
        ...

    @property
    def end_offset(self) -> int:
        """The log end offset (LEO): one past the last offset held, flushed or not."""
        ...

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last batch; 0 for an empty log (4.5: the snapshot's epoch once snapshots exist)."""
        ...

    def append_as_leader(
        self, records: Sequence[bytes | Record], epoch: int, now_ms: int, *, is_control: bool = False
    ) -> tuple[int, int]:
        """Append one batch built by ``build_leader_batch`` at ``end_offset``; returns
        ``(base_offset, last_offset)``. Unflushed until the shell flushes."""
        ...

    def append_as_follower(self, batches: bytes) -> None:
        """Append whole batches a leader sent; the first must start at ``end_offset`` (the core checks)."""
        ...

    def read(self, fetch_offset: int, max_bytes: int) -> bytes:
        """Whole batches from the batch holding ``fetch_offset``; at least one batch when
        ``fetch_offset < end_offset`` even if it is bigger than ``max_bytes`` (Kafka's fetch rule);
        ``b""`` at ``end_offset``."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is ``>= offset`` (end_offset may land below ``offset``
        if it cuts a batch). Durable at once."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's epoch-cache answer (LeaderEpochFileCache.endOffsetFor as KafkaMetadataLog uses it):
        ``epoch`` = the latest epoch -> (end_offset, epoch); an epoch between known ones -> (start
        offset of the next higher epoch, the largest known epoch <= ``epoch``); below every known epoch
        -> (start of the first epoch, ``epoch``); above every known epoch, or an empty log ->
        (end_offset, last_fetched_epoch)."""
        ...

    def flush(self, offset: int) -> None:
        """Make everything below ``offset`` durable. Called by the shell / driver only, never the core."""
        ...

    # --- KIP-630 ---------------------------------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        """Bytes held (retention by size counts them with the snapshots)."""
        ...

    def delete_before(self, offset: int) -> None:
        """Move the log start offset to ``offset`` (durably) and drop whole batches / segments below
        it; the batch holding ``offset`` stays (Kafka's maybeIncrementLogStartOffset). The epoch
        cache keeps the epoch that covers the new start."""
        ...

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (installing a snapshot). Durable at once."""
        ...


@dataclass(frozen=True, slots=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    epoch: int
    data: bytes


class MemoryRaftLog:
    """``RaftLog`` in memory for unit tests and tests/sim, with a flush mark and ``lose_unflushed``
    (Kafka's MockLog): a simulated crash keeps only what was flushed."""

    def __init__(self) -> None:
        self._batches: list[StoredBatch] = []
        self._base_offsets: list[int] = []
        self._flushed_offset = 0
        self._start_offset = 0
        # The end of an empty log (after truncate_fully_and_start_at, or everything deleted).
        self._empty_end_offset = 0

    # --- RaftLog -------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start_offset

    @property
    def end_offset(self) -> int:
        return self._batches[-1].last_offset + 1 if self._batches else self._empty_end_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(len(b.data) for b in self._batches)

    def delete_before(self, offset: int) -> None:
        assert self._start_offset <= offset <= self.end_offset, (self._start_offset, offset, self.end_offset)
        keep = bisect.bisect_left([b.last_offset for b in self._batches], offset)
        if keep == len(self._batches):
            self._empty_end_offset = self.end_offset
        del self._batches[:keep]
        del self._base_offsets[:keep]
        self._start_offset = offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        assert offset >= 0
        self._batches.clear()
        self._base_offsets.clear()
        self._start_offset = offset
        self._empty_end_offset = offset
        self._flushed_offset = offset

    @property
    def last_fetched_epoch(self) -> int:
        return self._batches[-1].epoch if self._batches else 0

    @property
    def flushed_offset(self) -> int:
        return self._flushed_offset

    def append_as_leader(
        self, records: Sequence[bytes | Record], epoch: int, now_ms: int, *, is_control: bool = False
    ) -> tuple[int, int]:
        base_offset = self.end_offset
        batch = build_leader_batch(
            records, base_offset=base_offset, epoch=epoch, now_ms=now_ms, is_control=is_control
        )
        self._append_batch(bytes(batch))
        last_offset = self.end_offset - 1
        assert last_offset == base_offset + len(records) - 1
        return base_offset, last_offset

    def append_as_follower(self, batches: bytes) -> None:
        end = 0
        for pos, header in scan_batches(batches):
            end = pos + header.size_in_bytes
            self._append_batch(bytes(batches[pos:end]))
        assert end == len(batches), "a leader sent a torn or corrupt batch"

    def read(self, fetch_offset: int, max_bytes: int) -> bytes:
        assert self.start_offset <= fetch_offset <= self.end_offset, (fetch_offset, self.end_offset)
        index = self._index_of(fetch_offset)
        out = bytearray()
        for batch in self._batches[index:]:
            if out and len(out) + len(batch.data) > max_bytes:
                break
            out += batch.data
        return bytes(out)

    def truncate_to(self, offset: int) -> None:
        assert offset >= 0
        if offset >= self.end_offset:
            return
        if offset < self._start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        index = self._index_of(offset)
        if index == 0 and self._batches:
            self._empty_end_offset = max(self._start_offset, self._batches[0].base_offset)
        del self._batches[index:]
        del self._base_offsets[index:]
        self._flushed_offset = min(self._flushed_offset, self.end_offset)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        if not self._batches or epoch == UNDEFINED_EPOCH:
            return OffsetAndEpoch(self.end_offset, self.last_fetched_epoch)
        if epoch == self.last_fetched_epoch:
            return OffsetAndEpoch(self.end_offset, epoch)
        starts = self.epoch_start_offsets()
        higher = [(e, start) for e, start in starts if e > epoch]
        if not higher:
            return OffsetAndEpoch(self.end_offset, self.last_fetched_epoch)
        floor = [e for e, _start in starts if e <= epoch]
        higher_start = higher[0][1]
        if not floor:
            return OffsetAndEpoch(higher_start, epoch)
        return OffsetAndEpoch(higher_start, floor[-1])

    def flush(self, offset: int) -> None:
        self._flushed_offset = max(self._flushed_offset, min(offset, self.end_offset))

    # --- for tests and the simulation ----------------------------------------------------------

    def lose_unflushed(self) -> None:
        """A crash: drop every batch that is not wholly below the flush mark."""
        keep = bisect.bisect_right([b.last_offset for b in self._batches], self._flushed_offset - 1)
        if keep == 0 and self._batches:
            self._empty_end_offset = max(self._start_offset, self._batches[0].base_offset)
        del self._batches[keep:]
        del self._base_offsets[keep:]
        assert self.end_offset <= self._flushed_offset

    def batches(self) -> list[StoredBatch]:
        return list(self._batches)

    def epoch_start_offsets(self) -> list[tuple[int, int]]:
        """The epoch cache: ``(epoch, start_offset)`` for each epoch change along the log."""
        starts: list[tuple[int, int]] = []
        for batch in self._batches:
            if not starts or starts[-1][0] != batch.epoch:
                # The first entry starts at the log start (LeaderEpochFileCache.truncateFromStart).
                starts.append((batch.epoch, max(batch.base_offset, self._start_offset)))
        return starts

    # --- helpers -------------------------------------------------------------------------------

    def _append_batch(self, data: bytes) -> None:
        header = read_batch_header(data)
        assert header.base_offset == self.end_offset, (header.base_offset, self.end_offset)
        assert header.partition_leader_epoch >= self.last_fetched_epoch, "epochs never decrease along the log"
        self._batches.append(
            StoredBatch(header.base_offset, header.last_offset, header.partition_leader_epoch, data)
        )
        self._base_offsets.append(header.base_offset)

    def _index_of(self, offset: int) -> int:
        """Index of the batch holding ``offset``, or ``len(batches)`` at the end of the log."""
        if offset >= self.end_offset:
            return len(self._batches)
        index = bisect.bisect_right(self._base_offsets, offset) - 1
        assert index >= 0
        return index
