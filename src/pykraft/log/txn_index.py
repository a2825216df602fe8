"""A partition's transactions as readers see them: aborted transactions and the last stable offset.

Kafka keeps, per partition (UnifiedLog, ProducerStateManager, TransactionIndex):

- the **aborted transactions**: (producer id, first offset, last offset = the ABORT marker's offset,
  last stable offset when it was written). A read_committed Fetch returns those overlapping what it
  read, so the consumer drops their records (``collect_aborted``);
- the **last stable offset** (LSO): below it every transaction is decided *and* its marker replicated.
  It is the lowest first offset of an open transaction (producer state) or of a decided one whose
  marker is not below the high watermark yet (Kafka's ``unreplicatedTxns``), else the high watermark.

Persistence. Kafka writes a ``.txnindex`` file per segment. pykraft writes the aborted list once per
producer-state snapshot (segment roll, clean shutdown), as ``<offset>.txnindex`` beside
``<offset>.snapshot``, entries in Kafka's TransactionIndex layout (version int16 0, producer id int64,
first offset int64, last offset int64, last stable offset int64). On start (:func:`recover`) the
snapshot and the index at the same offset are loaded and only the log after them is read, as for
producer state; without a matching index the aborted list is rebuilt from the log's batch headers
(a control batch's marker type is read from its one record).
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import NamedTuple

from pykraft.log.partition_log import PartitionLog
from pykraft.log.producer_snapshot import load_latest_snapshot, snapshot_file_name, snapshot_offset
from pykraft.log.producer_state import ProducerStateManager
from pykraft.log.store import SegmentStore
from pykraft.protocol.records import CONTROL_TYPE_ABORT, BatchHeader, Record, control_type_of, decode_records

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def txn_index_file_name(offset: int) -> str:
    return snapshot_file_name(offset).replace(".snapshot", TXN_INDEX_SUFFIX)


def encode_entries(entries: list[AbortedTxn]) -> bytes:
    return b"".join(_ENTRY.pack(0, *entry) for entry in entries)


def decode_entries(data: bytes) -> list[AbortedTxn] | None:
    """The entries, or None for a file that is not a whole number of version-0 entries."""
    if len(data) % _ENTRY.size:
        return None
    out = []
    for pos in range(0, len(data), _ENTRY.size):
        version, *fields = _ENTRY.unpack_from(data, pos)
        if version != 0:
            return None
        out.append(AbortedTxn(*fields))
    return out


@dataclass(slots=True)
class TransactionIndex:
    # Sorted by last_offset (markers are appended in offset order).
    aborted: list[AbortedTxn] = field(default_factory=list)
    # (first offset, marker offset) of decided transactions whose marker is not below the high
    # watermark yet: they still hold the last stable offset back.
    unreplicated: list[tuple[int, int]] = field(default_factory=list)

    def on_marker(
        self, producer_id: int, first_offset: int | None, marker_offset: int, commit: bool, lso: int
    ) -> None:
        """A COMMIT/ABORT marker of the producer's transaction that began at ``first_offset`` (None:
        no record of it here). Only a transaction with records is completed: a marker alone neither
        holds the last stable offset nor is an aborted entry (Kafka's appendEndTxnMarker emits no
        CompletedTxn for it)."""
        if first_offset is None:
            return
        self.unreplicated.append((first_offset, marker_offset))
        if not commit:
            self.aborted.append(AbortedTxn(producer_id, first_offset, marker_offset, lso))

    def last_stable_offset(self, first_unstable: int | None, high_watermark: int) -> int:
        if self.unreplicated:
            self.unreplicated = [(f, m) for f, m in self.unreplicated if m >= high_watermark]
        lso = high_watermark
        if first_unstable is not None:
            lso = min(lso, first_unstable)
        for first, _ in self.unreplicated:
            lso = min(lso, first)
        return lso

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions a read of [fetch_offset,
        upper_bound_offset) overlaps (Kafka's collectAbortedTransactions)."""
        start = bisect_left(self.aborted, fetch_offset, key=lambda entry: entry.last_offset)
        return [
            (entry.producer_id, entry.first_offset)
            for entry in self.aborted[start:]
            if entry.first_offset < upper_bound_offset
        ]

    def truncate_to(self, end_offset: int) -> None:
        """Entries whose marker is at or past ``end_offset`` are gone with the log's tail."""
        self.aborted = [e for e in self.aborted if e.last_offset < end_offset]
        self.unreplicated = [(f, m) for f, m in self.unreplicated if m < end_offset]

    def drop_below(self, log_start_offset: int) -> None:
        """Entries wholly below the log start describe records no reader can fetch any more."""
        if self.aborted and self.aborted[0].last_offset < log_start_offset:
            self.aborted = [e for e in self.aborted if e.last_offset >= log_start_offset]


def write_index(store: SegmentStore, index: TransactionIndex, offset: int) -> None:
    """Write the aborted list as of ``offset`` (the producer snapshot's) and drop older index files."""
    entries = [e for e in index.aborted if e.last_offset < offset]
    store.write_checkpoint(txn_index_file_name(offset), encode_entries(entries))
    for name in store.list_checkpoints(TXN_INDEX_SUFFIX):
        if name != txn_index_file_name(offset):
            store.delete_checkpoint(name)


def _marker_in(log: PartitionLog, header: BatchHeader) -> Record | None:
    result = log.read(header.base_offset, header.size_in_bytes, max_offset=log.log_end_offset)
    for chunk in result.chunks:
        records = decode_records(chunk[: header.size_in_bytes])
        if records:
            return records[0]
    return None


def recover(
    log: PartitionLog, state: ProducerStateManager, now_ms: int
) -> tuple[TransactionIndex, list[str]]:
    """Producer state and the transaction index on start (or after truncation): the newest usable
    snapshot with its index, then the log after them; without an index at that offset the aborted list
    is rebuilt from the whole log. Returns one line per file given up."""
    loaded, problems = load_latest_snapshot(log.store, state, log.log_end_offset, now_ms)
    index = TransactionIndex()
    index_from = log.log_start_offset
    open_txns: dict[int, int] = {}
    # (first offset, marker offset) of every transaction decided in the part of the log read here.
    completed: list[tuple[int, int]] = []
    if loaded is not None:
        data = log.store.read_checkpoint(txn_index_file_name(loaded))
        entries = decode_entries(data) if data is not None else None
        if entries is not None:
            index.aborted = entries
            index_from = max(loaded, log.log_start_offset)
            open_txns = state.open_transactions()
        elif data is not None:
            problems.append(f"{txn_index_file_name(loaded)}: not a transaction index; rebuilt from the log")
    state_from = log.log_start_offset if loaded is None else max(loaded, log.log_start_offset)
    start = min(index_from, state_from)
    if start < log.log_end_offset:
        for header in log.batch_headers(start):
            if header.base_offset >= index_from and header.has_producer_id:
                pid = header.producer_id
                if header.is_control and header.record_count > 0:
                    marker = _marker_in(log, header)
                    first = open_txns.pop(pid, None)
                    if first is not None:
                        completed.append((first, header.base_offset))
                    if (
                        first is not None
                        and marker is not None
                        and control_type_of(marker.key) == CONTROL_TYPE_ABORT
                    ):
                        lso = min(open_txns.values(), default=header.base_offset + 1)
                        index.aborted.append(AbortedTxn(pid, first, header.base_offset, lso))
                elif header.is_transactional:
                    open_txns.setdefault(pid, header.base_offset)
            # A snapshot older than the log start leaves a gap the log no longer holds (KIP-360: the
            # state it has is still worth keeping); never re-apply what the snapshot already holds.
            if header.base_offset >= state.map_end_offset:
                state.replay(header, now_ms)
    if state.map_end_offset < log.log_end_offset:
        state.map_end_offset = log.log_end_offset
    index.truncate_to(log.log_end_offset)
    index.drop_below(log.log_start_offset)
    # Decided transactions whose markers may not be replicated yet hold the LSO until the high
    # watermark passes them, committed ones as much as aborted ones (Kafka's unreplicatedTxns, filled
    # by the transactions completed while the log after the snapshot is read).
    decided = {(e.first_offset, e.last_offset) for e in index.aborted}
    decided.update(completed)
    index.unreplicated = sorted((f, m) for f, m in decided if m >= log.high_watermark)
    for name in log.store.list_checkpoints(TXN_INDEX_SUFFIX):
        offset = snapshot_offset(name.replace(TXN_INDEX_SUFFIX, ".snapshot"))
        if offset is not None and offset > log.log_end_offset:
            log.store.delete_checkpoint(name)
    return index, problems
