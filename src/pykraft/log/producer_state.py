"""Idempotent-producer state of one partition: epoch and sequence checks, duplicate detection.

Kafka's broker-side producer state (kafka-facts.md §2.2-§2.5: ``ProducerStateEntry``,
``ProducerAppendInfo``, ``ProducerStateManager`` and ``UnifiedLog.analyzeAndValidateProducerState``),
with KIP-758's one-batch mode as the default and KIP-360's prolonged retention.

Why it exists: a producer retries a batch whose response it never saw. Without state the broker would
append it twice. Per producer id we keep the epoch and the last batch(es)' sequence range and offsets;
a retry is answered without appending, and anything else that does not continue the sequence is
refused, so a producer never silently loses or reorders data.

Two modes, chosen by ``retained_batches`` (``producer.state.retained.batches``):

* ``retained_batches=1`` (default; KIP-758, seed 001): keep only the latest batch, plus a duplicate
  window of ``duplicate_window`` sequences (``max.in.flight.sequence.number.per.connection``, default
  10,000,000). An exact retry of the latest batch gets its original offsets; a batch whose sequences
  all lie within the window at or before the latest appended sequence (wrapping Int.MAX -> 0) was
  appended already and gets DUPLICATE_SEQUENCE_NUMBER (46), which clients treat as success with offset
  -1; anything else that is not next in sequence gets OUT_OF_ORDER_SEQUENCE_NUMBER (45).
  A transactional batch's window ends at its producer's open transaction: only that transaction's
  batches can be in flight, and once a transaction ends librdkafka may send its sequence numbers again
  with other records (it does after an abort whose batches' fate it never learned). Such a batch is a
  duplicate only if it is an exact retry of the latest batch, as in Kafka; otherwise it gets 45, as
  Kafka answers it, never 46, which the client would take as written (fault campaign seed 71).
* ``retained_batches=N>1`` (5 = Kafka's classic mode, exactly): keep the last N batches; a retry of
  one of them gets its original offsets; there is no window, so a retry of anything older (or a partial
  overlap) gets 45. The broker never answers 46 in this mode, as Kafka never does.

Rules, checked per batch in request order (only batches that carry a producer id):

1. Duplicate: against the stored entry (as it was before this request), in the batch's epoch, as above
   (``AppendCheck.duplicate`` or error 46). The whole request then appends nothing.
2. Epoch: an epoch lower than the producer's -> INVALID_PRODUCER_EPOCH (47) (KIP-588, Kafka >= 2.7).
3. Sequence: a new epoch must start at sequence 0, unless the producer has no state at all; a known
   epoch must continue the last sequence (``in_sequence``: +1, or Int.MAX -> 0). A producer with no
   entry is accepted at any sequence (KAFKA-8710, KIP-360 as shipped: its state may have expired and
   the client cannot know).
4. Transactions: a non-transactional batch while the producer has an open transaction ->
   INVALID_TXN_STATE (48). The first transactional batch opens one (``current_txn_first_offset``).

KIP-360 prolonged retention: nothing here looks at the log start offset. Retention and DeleteRecords
remove batches from the log, never producers from this state; only ``remove_expired`` does, once
``producer_id_expiration_ms`` has passed since the producer's last write (broker clock, ``now_ms``).

Storage (the point of KIP-758 for operators with millions of producers): no Python object per
producer. Producers are rows of ``array`` columns, found through an open-addressing hash table of
int32 row numbers (linear probing, Fibonacci hashing, backward-shift deletion, load <= 3/4). A row
costs 51 bytes of columns with one retained batch (24 bytes per further batch) plus 4-8 bytes of
table; ``bench/producer_state_memory.py`` measures it. The rare fields (an open transaction, a
coordinator epoch, a marker's timestamp) live in small side dicts keyed by producer id.
``entry()`` and ``active_producers()`` materialise read-only :class:`ProducerStateEntry` copies.

Invariants: no row holds more than ``retained_batches`` batches; a row's batches share its epoch (an
epoch change clears them); ``check_append`` mutates nothing; ``on_append``/``replay`` apply batches
without checks, in offset order (``map_end_offset`` never goes back); every row's ``last_write_ms`` is
>= ``_write_floor_ms``.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from pykraft.core.errors import ErrorCode
from pykraft.protocol.records import (
    INT32_MAX,
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    decrement_sequence,
)

# KIP-758: one batch per producer is pykraft's default (producer.state.retained.batches).
RETAINED_BATCHES_DEFAULT = 1
# ProducerStateEntry.NUM_BATCHES_TO_RETAIN: Kafka's classic mode, and why clients cap in-flight at 5.
CLASSIC_RETAINED_BATCHES = 5
# The count column is an int8.
RETAINED_BATCHES_MAX = 127
# max.in.flight.sequence.number.per.connection (KIP-758's proposed default).
DUPLICATE_WINDOW_DEFAULT = 10_000_000
# A window of half the sequence space or more would make "behind" and "ahead" ambiguous.
DUPLICATE_WINDOW_MAX = 1 << 30
# producer.id.expiration.ms (KIP-854), 1 day.
PRODUCER_ID_EXPIRATION_MS_DEFAULT = 86_400_000
NO_COORDINATOR_EPOCH = -1
NO_OFFSET = -1
# Sequences live in [0, Int.MAX]: arithmetic on them is modulo 2**31.
SEQUENCE_SPACE = INT32_MAX + 1

_EMPTY_SLOT = -1
_MASK64 = (1 << 64) - 1
# 2**64 / golden ratio: Fibonacci hashing spreads the consecutive ids of a producer-id block.
_FIBONACCI = 0x9E3779B97F4A7C15
_TABLE_BITS_MIN = 4


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """ProducerAppendInfo.inSequence: ``next`` follows ``last``; Int.MAX -> 0 is the only legal wrap.

    Python ints do not overflow, which matches Kafka computing ``lastSeq + 1L`` in 64 bits.
    """
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def sequences_behind(latest_seq: int, seq: int) -> int:
    """How many sequences ``seq`` lies before ``latest_seq``, modulo 2**31 (0 = the same sequence).

    ``sequences_behind(0, INT32_MAX) == 1``: the window wraps Int.MAX -> 0 as KIP-758 asks."""
    return (latest_seq - seq) % SEQUENCE_SPACE


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One retained batch (Kafka's BatchMetadata): enough to answer a retry with its original offsets."""

    last_seq: int
    last_offset: int
    offset_delta: int
    # The batch's max timestamp, which Kafka returns as the retry's timestamp.
    timestamp_ms: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(frozen=True, slots=True)
class ProducerStateEntry:
    """A read-only copy of one producer's state in one partition (Kafka's ProducerStateEntry).

    ``last_timestamp_ms`` is Kafka's ``lastTimestamp``: the max timestamp of the last batch (or the
    marker's timestamp), kept for snapshots and DescribeProducers. ``last_write_ms`` is the broker's clock
    when this state last learned of a write; expiration uses it rather than ``last_timestamp_ms``
    (Kafka's choice) because batch timestamps come from client clocks: a producer whose clock runs a day
    behind would lose its dedupe state at once, one whose clock runs ahead would never expire.
    """

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    last_timestamp_ms: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    last_write_ms: int = -1
    # Oldest first.
    batches: tuple[BatchMetadata, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batches[0].first_offset if self.batches else NO_OFFSET

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else NO_OFFSET

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0


class SnapshotEntry(NamedTuple):
    """One producer as a producer-state snapshot stores it (ProducerSnapshot.json v1, 46 bytes).

    Only the last batch survives a snapshot; ``last_offset == -1`` means the entry has no batch and
    ``current_txn_first_offset == -1`` means no open transaction (Kafka's encoding)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp_ms: int
    coordinator_epoch: int
    current_txn_first_offset: int


@dataclass(frozen=True, slots=True)
class AppendCheck:
    """The verdict on one produce request's batches for one partition.

    ``error_code`` is NONE when the request may be appended, or when it is an exact retry; then
    ``duplicate`` holds the retried batch: answer with its first/last offset and timestamp, append nothing.
    DUPLICATE_SEQUENCE_NUMBER (KIP-758 mode only) also appends nothing; the answer has offset -1.
    """

    error_code: ErrorCode
    error_message: str = ""
    duplicate: BatchMetadata | None = None


_APPEND_OK = AppendCheck(ErrorCode.NONE)


@dataclass(slots=True)
class _PendingEntry:
    """What ``ProducerAppendInfo.updatedEntry`` needs while checking one request: the stored epoch and
    open transaction, and the last sequence of this request's batches so far (None until one passed)."""

    producer_epoch: int
    txn_open: bool
    last_seq: int | None = None


class ProducerStateManager:
    """All producers' state for one partition (Kafka's ProducerStateManager, data-batch half).

    ``check_append`` (leader, client origin) validates and mutates nothing; the log then appends and
    calls ``on_append`` with the assigned offsets. ``replay`` rebuilds state from the log on start
    without checks (Kafka's recovery and REPLICATION origin); ``load_snapshot`` starts from a snapshot.
    Time comes in as ``now_ms``.
    """

    def __init__(
        self,
        *,
        retained_batches: int = RETAINED_BATCHES_DEFAULT,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS_DEFAULT,
        duplicate_window: int = DUPLICATE_WINDOW_DEFAULT,
    ) -> None:
        if not 1 <= retained_batches <= RETAINED_BATCHES_MAX:
            raise ValueError(f"retained_batches must be in 1..{RETAINED_BATCHES_MAX}, got {retained_batches}")
        if producer_id_expiration_ms < 1:
            raise ValueError(f"producer_id_expiration_ms must be >= 1, got {producer_id_expiration_ms}")
        if not 0 <= duplicate_window <= DUPLICATE_WINDOW_MAX:
            raise ValueError(f"duplicate_window must be in 0..{DUPLICATE_WINDOW_MAX}, got {duplicate_window}")
        self.retained_batches = retained_batches
        self.producer_id_expiration_ms = producer_id_expiration_ms
        # The window belongs to one-batch mode: with N > 1 batches the broker is Kafka's classic one.
        self.duplicate_window = duplicate_window if retained_batches == 1 else 0
        # Kafka's lastMapOffset: the exclusive end offset of the log the state reflects.
        self.map_end_offset = 0
        # --- per-producer columns, one row each ---
        self._pid = array("q")
        self._epoch = array("h")
        self._last_write_ms = array("q")
        self._batch_count = array("b")
        # --- per-batch columns: row r's batches are r*N .. r*N+count-1, oldest first ---
        self._last_seq = array("i")
        self._last_offset = array("q")
        self._offset_delta = array("i")
        self._timestamp_ms = array("q")
        self._zero_q = array("q", [0]) * retained_batches
        self._zero_i = array("i", [0]) * retained_batches
        # --- the hash table: slot -> row (or -1) ---
        self._table_bits = _TABLE_BITS_MIN
        self._table = array("i", [_EMPTY_SLOT]) * (1 << _TABLE_BITS_MIN)
        # --- rare fields, by producer id ---
        # (coordinator_epoch, current_txn_first_offset or -1), only when not (-1, -1).
        self._txn: dict[int, tuple[int, int]] = {}
        # The first sequence of the open transaction, when this manager saw it begin (not in snapshots:
        # after a restart only an exact retry of the latest batch is a duplicate, as in Kafka).
        self._txn_first_seq: dict[int, int] = {}
        # Kafka's lastTimestamp when it is not the last batch's (a marker came after it).
        self._marker_timestamp_ms: dict[int, int] = {}
        # A lower bound on every row's last_write_ms: remove_expired returns at once below it.
        self._write_floor_ms: int | None = None

    def __len__(self) -> int:
        return len(self._pid)

    # --- the hash table ------------------------------------------------------------------------------

    def _home(self, producer_id: int) -> int:
        return (((producer_id & _MASK64) * _FIBONACCI) & _MASK64) >> (64 - self._table_bits)

    def _slot_of(self, producer_id: int) -> int:
        """The table slot holding ``producer_id``'s row, or the empty slot where it would go."""
        table, pids = self._table, self._pid
        mask = (1 << self._table_bits) - 1
        slot = self._home(producer_id)
        while True:
            row = table[slot]
            if row == _EMPTY_SLOT or pids[row] == producer_id:
                return slot
            slot = (slot + 1) & mask

    def _row(self, producer_id: int) -> int:
        return self._table[self._slot_of(producer_id)]

    def _grow_table(self) -> None:
        self._table_bits += 1
        self._table = array("i", [_EMPTY_SLOT]) * (1 << self._table_bits)
        for row, producer_id in enumerate(self._pid):
            self._table[self._slot_of(producer_id)] = row

    def _insert(self, producer_id: int) -> int:
        """A new row with no epoch and no batches; the caller fills it in."""
        if (len(self._pid) + 1) * 4 > (3 << self._table_bits):
            self._grow_table()
        row = len(self._pid)
        self._pid.append(producer_id)
        self._epoch.append(NO_PRODUCER_EPOCH)
        self._last_write_ms.append(0)
        self._batch_count.append(0)
        self._last_seq.extend(self._zero_i)
        self._last_offset.extend(self._zero_q)
        self._offset_delta.extend(self._zero_i)
        self._timestamp_ms.extend(self._zero_q)
        self._table[self._slot_of(producer_id)] = row
        return row

    def _remove(self, producer_id: int) -> None:
        slot = self._slot_of(producer_id)
        row = self._table[slot]
        assert row != _EMPTY_SLOT, producer_id
        self._txn.pop(producer_id, None)
        self._txn_first_seq.pop(producer_id, None)
        self._marker_timestamp_ms.pop(producer_id, None)
        # Backward-shift deletion keeps every probe chain unbroken without tombstones.
        table, pids = self._table, self._pid
        mask = (1 << self._table_bits) - 1
        hole = slot
        probe = (slot + 1) & mask
        while table[probe] != _EMPTY_SLOT:
            home = self._home(pids[table[probe]])
            # Move the entry back into the hole unless its home lies cyclically in (hole, probe].
            if (probe - home) & mask >= (probe - hole) & mask:
                table[hole] = table[probe]
                hole = probe
            probe = (probe + 1) & mask
        table[hole] = _EMPTY_SLOT
        # Move the last row into the freed one so the columns stay dense.
        last = len(pids) - 1
        n = self.retained_batches
        if row != last:
            moved_id = pids[last]
            for column in (self._pid, self._epoch, self._last_write_ms, self._batch_count):
                column[row] = column[last]
            for batch_column in (self._last_seq, self._last_offset, self._offset_delta, self._timestamp_ms):
                batch_column[row * n : row * n + n] = batch_column[last * n : last * n + n]
            table[self._slot_of(moved_id)] = row
        for column in (self._pid, self._epoch, self._last_write_ms, self._batch_count):
            column.pop()
        for batch_column in (self._last_seq, self._last_offset, self._offset_delta, self._timestamp_ms):
            del batch_column[last * n :]

    # --- reading ---------------------------------------------------------------------------------------

    def _batch(self, index: int) -> BatchMetadata:
        return BatchMetadata(
            self._last_seq[index],
            self._last_offset[index],
            self._offset_delta[index],
            self._timestamp_ms[index],
        )

    def _entry_at(self, row: int) -> ProducerStateEntry:
        producer_id = self._pid[row]
        base = row * self.retained_batches
        batches = tuple(self._batch(base + k) for k in range(self._batch_count[row]))
        coordinator_epoch, txn_first_offset = self._txn.get(producer_id, (NO_COORDINATOR_EPOCH, NO_OFFSET))
        return ProducerStateEntry(
            producer_id=producer_id,
            producer_epoch=self._epoch[row],
            coordinator_epoch=coordinator_epoch,
            last_timestamp_ms=self._last_timestamp_at(row),
            current_txn_first_offset=None if txn_first_offset == NO_OFFSET else txn_first_offset,
            last_write_ms=self._last_write_ms[row],
            batches=batches,
        )

    def _last_timestamp_at(self, row: int) -> int:
        marker_ms = self._marker_timestamp_ms.get(self._pid[row])
        if marker_ms is not None:
            return marker_ms
        count = self._batch_count[row]
        if count == 0:
            return NO_TIMESTAMP
        return self._timestamp_ms[row * self.retained_batches + count - 1]

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        """A copy of the producer's state, or None when it has none."""
        row = self._row(producer_id)
        return None if row == _EMPTY_SLOT else self._entry_at(row)

    def active_producers(self) -> list[ProducerStateEntry]:
        return [self._entry_at(row) for row in range(len(self._pid))]

    def _txn_open(self, producer_id: int) -> bool:
        txn = self._txn.get(producer_id)
        return txn is not None and txn[1] != NO_OFFSET

    # --- transactions (KIP-98) ------------------------------------------------------------------------

    def open_transaction_first_offset(self, producer_id: int) -> int | None:
        """The first offset of the producer's open transaction in this partition, or None."""
        txn = self._txn.get(producer_id)
        return None if txn is None or txn[1] == NO_OFFSET else txn[1]

    def open_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction."""
        return {pid: first for pid, (_, first) in self._txn.items() if first != NO_OFFSET}

    def first_unstable_offset(self) -> int | None:
        """The lowest first offset of an open transaction (what holds the last stable offset back)."""
        firsts = [first for _, first in self._txn.values() if first != NO_OFFSET]
        return min(firsts) if firsts else None

    def coordinator_epoch(self, producer_id: int) -> int:
        return self._txn.get(producer_id, (NO_COORDINATOR_EPOCH, NO_OFFSET))[0]

    def set_coordinator_epoch(self, producer_id: int, coordinator_epoch: int) -> None:
        """A marker's coordinator epoch (in its record, not its header): a later marker from an older
        coordinator is fenced with it (TRANSACTION_COORDINATOR_FENCED)."""
        first = self._txn.get(producer_id, (NO_COORDINATOR_EPOCH, NO_OFFSET))[1]
        self._txn[producer_id] = (coordinator_epoch, first)

    # --- leader: check, then apply ---------------------------------------------------------------

    def check_append(self, headers: Sequence[BatchHeader]) -> AppendCheck:
        """Check one request's batches for this partition in order (UnifiedLog.analyzeAndValidateProducerState
        with CLIENT origin). Mutates nothing; batches without a producer id are not checked."""
        pending: dict[int, _PendingEntry] = {}
        for header in headers:
            if not header.has_producer_id:
                continue
            if header.is_control:
                # LogValidator refuses control batches from clients before producer state sees them.
                return AppendCheck(ErrorCode.INVALID_RECORD, "clients may not write control batches")
            producer_id = header.producer_id
            row = self._row(producer_id)
            stored_epoch, stored_last_seq = NO_PRODUCER_EPOCH, NO_SEQUENCE
            if row != _EMPTY_SLOT:
                # Against the stored entry, not this request's earlier batches (Kafka does the same).
                duplicate = self._find_duplicate(row, header)
                if duplicate is not None:
                    return duplicate
                stored_epoch = self._epoch[row]
                count = self._batch_count[row]
                if count:
                    stored_last_seq = self._last_seq[row * self.retained_batches + count - 1]
            updated = pending.get(producer_id)
            if updated is None:
                updated = _PendingEntry(stored_epoch, row != _EMPTY_SLOT and self._txn_open(producer_id))
                pending[producer_id] = updated
            verdict = _check_data_batch(stored_epoch, stored_last_seq, updated, header)
            if verdict is not None:
                return verdict
        return _APPEND_OK

    def _find_duplicate(self, row: int, header: BatchHeader) -> AppendCheck | None:
        """The dedupe window: an exact match with a retained batch (Kafka's findDuplicateBatch), or in
        one-batch mode a batch that lies wholly within ``duplicate_window`` before the latest (46)."""
        if header.producer_epoch != self._epoch[row]:
            return None
        count = self._batch_count[row]
        if count == 0:
            return None
        first_seq, last_seq = header.base_sequence, header.last_sequence
        base = row * self.retained_batches
        for index in range(base, base + count):
            stored_last = self._last_seq[index]
            if (
                stored_last == last_seq
                and decrement_sequence(stored_last, self._offset_delta[index]) == first_seq
            ):
                return AppendCheck(ErrorCode.NONE, "", self._batch(index))
        if self.duplicate_window:
            latest_seq = self._last_seq[base + count - 1]
            behind_first = sequences_behind(latest_seq, first_seq)
            window = self.duplicate_window
            if header.is_transactional:
                # Only the open transaction's own batches can be retried (module docstring).
                txn_first_seq = self._txn_first_seq.get(header.producer_id)
                if txn_first_seq is None:
                    return None
                window = min(window, sequences_behind(latest_seq, txn_first_seq) + 1)
            # behind_last <= behind_first: the batch does not run past the latest sequence (or wrap).
            if sequences_behind(latest_seq, last_seq) <= behind_first < window:
                return AppendCheck(
                    ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                    f"sequences {first_seq}..{last_seq} of producer {header.producer_id} were appended "
                    f"before (latest {latest_seq}); the broker keeps one batch, so no offset (KIP-758)",
                )
        return None

    def on_append(self, headers: Sequence[BatchHeader], now_ms: int) -> None:
        """Record batches the log has just appended; ``headers`` carry their assigned base offsets."""
        for header in headers:
            self._apply(header, now_ms)

    def replay(self, header: BatchHeader, now_ms: int) -> None:
        """Rebuild from the log on start: apply one batch with no checks (Kafka's recovery path).

        ``last_write_ms`` becomes ``now_ms``, the restart time: every recovered producer gets a full
        expiration window, since expiring a live producer early loses its duplicate detection while
        keeping an idle one longer only costs memory.
        """
        self._apply(header, now_ms)

    def _apply(self, header: BatchHeader, now_ms: int) -> None:
        assert header.base_offset >= self.map_end_offset, (header.base_offset, self.map_end_offset)
        assert header.last_offset_delta >= 0
        # An empty control batch means its whole transaction was cleaned from the log: nothing to apply
        # (Kafka's ProducerAppendInfo.append; we also create no entry for it).
        is_empty_control = header.is_control and header.record_count == 0
        if header.has_producer_id and not is_empty_control:
            producer_id = header.producer_id
            row = self._row(producer_id)
            if row == _EMPTY_SLOT:
                row = self._insert(producer_id)
            self._maybe_update_producer_epoch(row, header.producer_epoch)
            if header.is_control:
                self._apply_end_txn_marker(producer_id, header)
            else:
                self._add_batch(row, header)
            self._last_write_ms[row] = now_ms
            if self._write_floor_ms is None or now_ms < self._write_floor_ms:
                self._write_floor_ms = now_ms
        # UnifiedLog.updateMapEndOffset(lastOffset + 1) after every append, with or without producer ids.
        self.map_end_offset = header.next_offset

    def _maybe_update_producer_epoch(self, row: int, producer_epoch: int) -> None:
        # The retained batches belong to one epoch: sequences restart at 0 with every new epoch.
        if producer_epoch != self._epoch[row]:
            self._batch_count[row] = 0
            self._epoch[row] = producer_epoch

    def _add_batch(self, row: int, header: BatchHeader) -> None:
        n = self.retained_batches
        base = row * n
        count = self._batch_count[row]
        if count == n:
            # Full: drop the oldest (ProducerStateEntry.addBatch), shifting the rest down one.
            for column in (self._last_seq, self._last_offset, self._offset_delta, self._timestamp_ms):
                column[base : base + n - 1] = column[base + 1 : base + n]
            count -= 1
        index = base + count
        self._last_seq[index] = header.last_sequence
        self._last_offset[index] = header.last_offset
        self._offset_delta[index] = header.last_offset_delta
        self._timestamp_ms[index] = header.max_timestamp
        self._batch_count[row] = count + 1
        producer_id = header.producer_id
        self._marker_timestamp_ms.pop(producer_id, None)
        if header.is_transactional and not self._txn_open(producer_id):
            # Kafka caches the first offset of each transaction for the last stable offset.
            coordinator_epoch = self._txn.get(producer_id, (NO_COORDINATOR_EPOCH, NO_OFFSET))[0]
            self._txn[producer_id] = (coordinator_epoch, header.base_offset)
            self._txn_first_seq[producer_id] = header.base_sequence

    def _apply_end_txn_marker(self, producer_id: int, header: BatchHeader) -> None:
        """The entry half of ProducerAppendInfo.appendEndTxnMarker: the epoch (already updated, clearing
        batches when it changed), the marker's timestamp, and the transaction closed. The marker's
        coordinator epoch lives in its record, not the header, so it is left unchanged until the
        transaction coordinator work reads it."""
        assert header.record_count > 0
        coordinator_epoch = self._txn.pop(producer_id, (NO_COORDINATOR_EPOCH, NO_OFFSET))[0]
        self._txn_first_seq.pop(producer_id, None)
        if coordinator_epoch != NO_COORDINATOR_EPOCH:
            self._txn[producer_id] = (coordinator_epoch, NO_OFFSET)
        self._marker_timestamp_ms[producer_id] = header.max_timestamp

    # --- expiration (KIP-360: the only way a producer's state goes) --------------------------------

    def remove_expired(self, now_ms: int) -> list[int]:
        """Drop producers with no open transaction whose last write is ``producer_id_expiration_ms`` old
        (ProducerStateManager.isProducerExpired, measured on the broker's clock: see ProducerStateEntry).
        Returns the producer ids removed. O(1) while no producer can have expired yet."""
        floor = self._write_floor_ms
        if floor is None or now_ms - floor < self.producer_id_expiration_ms:
            return []
        cutoff = now_ms - self.producer_id_expiration_ms
        pids = self._pid
        expired = [
            pids[row]
            for row, last_write_ms in enumerate(self._last_write_ms)
            if last_write_ms <= cutoff and not self._txn_open(pids[row])
        ]
        for producer_id in expired:
            self._remove(producer_id)
        self._write_floor_ms = min(self._last_write_ms) if self._last_write_ms else None
        return expired

    # --- snapshots (the codec is pykraft.log.producer_snapshot) -----------------------------------

    def snapshot_entries(self) -> Iterator[SnapshotEntry]:
        """Every producer as a snapshot stores it: the last batch only (Kafka's writeSnapshot)."""
        n = self.retained_batches
        for row in range(len(self._pid)):
            producer_id = self._pid[row]
            count = self._batch_count[row]
            coordinator_epoch, txn_first_offset = self._txn.get(
                producer_id, (NO_COORDINATOR_EPOCH, NO_OFFSET)
            )
            if count:
                index = row * n + count - 1
                last_seq, last_offset = self._last_seq[index], self._last_offset[index]
                offset_delta = self._offset_delta[index]
            else:
                last_seq, last_offset, offset_delta = NO_SEQUENCE, NO_OFFSET, 0
            yield SnapshotEntry(
                producer_id,
                self._epoch[row],
                last_seq,
                last_offset,
                offset_delta,
                self._last_timestamp_at(row),
                coordinator_epoch,
                txn_first_offset,
            )

    def load_snapshot(self, entries: Iterable[SnapshotEntry], map_end_offset: int, now_ms: int) -> None:
        """Start from a snapshot taken at ``map_end_offset`` (this manager must be empty). Each producer
        gets a full expiration window from ``now_ms``, as ``replay`` gives it."""
        assert not self._pid and self.map_end_offset == 0, "load_snapshot needs an empty manager"
        for entry in entries:
            if self._row(entry.producer_id) != _EMPTY_SLOT:
                continue  # a corrupt-but-checksummed file would need this; Kafka keeps the last one
            row = self._insert(entry.producer_id)
            self._epoch[row] = entry.producer_epoch
            self._last_write_ms[row] = now_ms
            batch_timestamp_ms = NO_TIMESTAMP
            if entry.last_offset >= 0:
                index = row * self.retained_batches
                self._last_seq[index] = entry.last_sequence
                self._last_offset[index] = entry.last_offset
                self._offset_delta[index] = entry.offset_delta
                self._timestamp_ms[index] = batch_timestamp_ms = entry.timestamp_ms
                self._batch_count[row] = 1
            if entry.timestamp_ms != batch_timestamp_ms:
                self._marker_timestamp_ms[entry.producer_id] = entry.timestamp_ms
            if (entry.coordinator_epoch, entry.current_txn_first_offset) != (NO_COORDINATOR_EPOCH, NO_OFFSET):
                self._txn[entry.producer_id] = (
                    entry.coordinator_epoch,
                    max(entry.current_txn_first_offset, -1),
                )
        if self._pid:
            self._write_floor_ms = now_ms
        self.map_end_offset = map_end_offset


def _check_data_batch(
    stored_epoch: int, stored_last_seq: int, updated: _PendingEntry, header: BatchHeader
) -> AppendCheck | None:
    """ProducerAppendInfo.appendDataBatch for CLIENT origin: None if the batch is valid, and then
    ``updated`` has taken it in; otherwise the verdict for the whole request."""
    producer_id = header.producer_id
    producer_epoch = header.producer_epoch
    first_seq = header.base_sequence
    # A. Epoch check (checkProducerEpoch).
    if producer_epoch < updated.producer_epoch:
        return AppendCheck(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"epoch of producer {producer_id} is {producer_epoch}, "
            f"which is smaller than the last seen epoch {updated.producer_epoch}",
        )
    # B. Sequence check (checkSequence).
    if producer_epoch != updated.producer_epoch:
        # An epoch bump restarts sequences at 0; with no state at all any sequence is accepted.
        if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
            return AppendCheck(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"invalid sequence number for new epoch of producer {producer_id}: "
                f"{producer_epoch} (request epoch), {first_seq} (seq. number), "
                f"{updated.producer_epoch} (current producer epoch)",
            )
    else:
        if updated.last_seq is not None:
            current_last_seq = updated.last_seq
        elif producer_epoch == stored_epoch:
            current_last_seq = stored_last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # No stored epoch means no state (never seen, or expired): any sequence is accepted, for this
        # request's later batches too, exactly as Kafka tests currentEntry rather than updatedEntry.
        if not (stored_epoch == NO_PRODUCER_EPOCH or in_sequence(current_last_seq, first_seq)):
            return AppendCheck(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence number for producer {producer_id}: {first_seq} "
                f"(incoming seq. number), {current_last_seq} (current end sequence number)",
            )
    # updatedEntry.addBatch: an epoch change empties the request's batches so far.
    updated.producer_epoch = producer_epoch
    updated.last_seq = header.last_sequence
    # C. Transactions.
    if updated.txn_open and not header.is_transactional:
        return AppendCheck(
            ErrorCode.INVALID_TXN_STATE,
            f"expected transactional write from producer {producer_id}: it has an open transaction",
        )
    if header.is_transactional:
        updated.txn_open = True
    return None
