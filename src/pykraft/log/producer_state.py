"""Idempotent-producer state of one partition: epoch and sequence checks, duplicate detection.

This is Kafka's broker-side producer state as shipped (kafka-facts.md §2.2-§2.5), from
``ProducerStateEntry``, ``ProducerAppendInfo``, ``ProducerStateManager`` (storage/.../internals/log/)
and ``UnifiedLog.analyzeAndValidateProducerState``.

Why it exists: a producer retries a batch whose response it never saw. Without state the broker would
append it twice. Kafka keeps, per producer id, the epoch and the last few batches' sequence ranges and
offsets; a retry of one of them is answered with the offsets it got the first time, and nothing is
appended. Anything else that does not continue the sequence is refused, so a producer never silently
loses or reorders data.

Rules, checked per batch in request order (only batches that carry a producer id):

1. Duplicate: the stored entry (as it was before this request) has the batch's epoch and a retained
   batch with exactly the same (first_seq, last_seq) -> the whole request succeeds with that batch's
   original offsets and timestamp and appends nothing (``AppendCheck.duplicate``). A partial overlap, or a
   retry of a batch older than the retained ones, is not a duplicate: it falls to rule 3 and gets
   OUT_OF_ORDER_SEQUENCE_NUMBER (45). The broker never answers DUPLICATE_SEQUENCE_NUMBER (46).
2. Epoch: an epoch lower than the producer's -> INVALID_PRODUCER_EPOCH (47) (KIP-588, Kafka >= 2.7).
3. Sequence: a new epoch must start at sequence 0, unless the producer has no state at all; a known
   epoch must continue the last sequence (``in_sequence``: +1, or Int.MAX -> 0). A producer with no
   entry is accepted at any sequence (KAFKA-8710, KIP-360 as shipped: its state may have been removed
   by expiration, retention or DeleteRecords, and the client cannot know).
4. Transactions: a non-transactional batch while the producer has an open transaction ->
   INVALID_TXN_STATE (48). The first transactional batch opens one (``current_txn_first_offset``).

A request may carry several batches of one producer: later batches are checked against the earlier
ones, as Kafka's ``ProducerAppendInfo`` does, but the duplicate test always looks at the stored entry.

Invariants: no entry holds more than ``retained_batches`` batches; all batches of an entry share the
entry's epoch (an epoch change clears them); ``check_append`` mutates nothing; ``on_append`` and
``replay`` apply batches without checks, in offset order (``map_end_offset`` never goes back).

The retained-batch window is the only dedupe window here (Kafka's classic 5). KIP-758 (one batch per
producer plus a large sequence window) is a later extension: it changes ``_find_duplicate`` and the
out-of-window verdict, and adds a ``duplicate_window`` constructor parameter; nothing else moves.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from pykraft.core.errors import ErrorCode
from pykraft.protocol.records import (
    INT32_MAX,
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    decrement_sequence,
)

# ProducerStateEntry.NUM_BATCHES_TO_RETAIN; also why clients cap max.in.flight at 5 with idempotence.
RETAINED_BATCHES_DEFAULT = 5
# producer.id.expiration.ms (KIP-854), 1 day.
PRODUCER_ID_EXPIRATION_MS_DEFAULT = 86_400_000
NO_COORDINATOR_EPOCH = -1


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """ProducerAppendInfo.inSequence: ``next`` follows ``last``; Int.MAX -> 0 is the only legal wrap.

    Python ints do not overflow, which matches Kafka computing ``lastSeq + 1L`` in 64 bits.
    """
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


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


@dataclass(slots=True)
class ProducerStateEntry:
    """State of one producer id in one partition (Kafka's ProducerStateEntry).

    ``last_timestamp_ms`` is Kafka's ``lastTimestamp``: the max timestamp of the last batch (or the
    marker's timestamp), kept for snapshots and DescribeProducers. ``last_write_ms`` is the broker's clock
    when this state last learned of a write; expiration uses it rather than ``last_timestamp_ms``
    (Kafka's choice) because batch timestamps come from client clocks: a producer whose clock runs a day
    behind would lose its dedupe state at once, one whose clock runs ahead would never expire.
    """

    producer_id: int
    retained_batches: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    last_timestamp_ms: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    last_write_ms: int = -1
    # Oldest first; maxlen drops the head when a new batch arrives at capacity.
    batches: deque[BatchMetadata] = field(default_factory=deque)

    def __post_init__(self) -> None:
        assert self.retained_batches >= 1
        if self.batches.maxlen != self.retained_batches:
            self.batches = deque(self.batches, maxlen=self.retained_batches)

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
        return self.batches[0].first_offset if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def maybe_update_producer_epoch(self, producer_epoch: int) -> None:
        # The retained batches belong to one epoch: sequences restart at 0 with every new epoch.
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch

    def add_batch(
        self, producer_epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp_ms: int
    ) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp_ms))
        self.last_timestamp_ms = timestamp_ms
        assert len(self.batches) <= self.retained_batches

    def find_duplicate_batch(
        self, producer_epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        """ProducerStateEntry.findDuplicateBatch: an exact (first_seq, last_seq) match in the same epoch."""
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class AppendCheck:
    """The verdict on one produce request's batches for one partition.

    ``error_code`` is NONE when the request may be appended, or when it is an exact retry; then
    ``duplicate`` holds the retried batch: answer with its first/last offset and timestamp, append nothing.
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
    without checks (Kafka's recovery and REPLICATION origin). Time comes in as ``now_ms``.
    """

    def __init__(
        self,
        *,
        retained_batches: int = RETAINED_BATCHES_DEFAULT,
        producer_id_expiration_ms: int = PRODUCER_ID_EXPIRATION_MS_DEFAULT,
    ) -> None:
        if retained_batches < 1:
            raise ValueError(f"retained_batches must be >= 1, got {retained_batches}")
        if producer_id_expiration_ms < 1:
            raise ValueError(f"producer_id_expiration_ms must be >= 1, got {producer_id_expiration_ms}")
        self.retained_batches = retained_batches
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        # Kafka's lastMapOffset: the exclusive end offset of the log the state reflects.
        self.map_end_offset = 0

    def __len__(self) -> int:
        return len(self._producers)

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The live entry (read only for callers), or None when the producer has no state."""
        return self._producers.get(producer_id)

    def active_producers(self) -> list[ProducerStateEntry]:
        return list(self._producers.values())

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
            stored = self._producers.get(header.producer_id)
            if stored is not None:
                # Against the stored entry, not this request's earlier batches (Kafka does the same).
                duplicate = self._find_duplicate(stored, header)
                if duplicate is not None:
                    return AppendCheck(ErrorCode.NONE, "", duplicate)
            updated = pending.get(header.producer_id)
            if updated is None:
                updated = _PendingEntry(
                    producer_epoch=stored.producer_epoch if stored is not None else NO_PRODUCER_EPOCH,
                    txn_open=stored is not None and stored.current_txn_first_offset is not None,
                )
                pending[header.producer_id] = updated
            verdict = _check_data_batch(stored, updated, header)
            if verdict is not None:
                return verdict
        return _APPEND_OK

    def _find_duplicate(self, stored: ProducerStateEntry, header: BatchHeader) -> BatchMetadata | None:
        # The one place the dedupe window lives: KIP-758's one-batch mode extends it here.
        return stored.find_duplicate_batch(header.producer_epoch, header.base_sequence, header.last_sequence)

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
            entry = self._producers.get(header.producer_id)
            if entry is None:
                entry = ProducerStateEntry(header.producer_id, self.retained_batches)
                self._producers[header.producer_id] = entry
            if header.is_control:
                _apply_end_txn_marker(entry, header)
            else:
                _apply_data_batch(entry, header)
            entry.last_write_ms = now_ms
        # UnifiedLog.updateMapEndOffset(lastOffset + 1) after every append, with or without producer ids.
        self.map_end_offset = header.next_offset

    # --- expiration --------------------------------------------------------------------------------

    def remove_expired(self, now_ms: int) -> list[int]:
        """Drop producers with no open transaction whose last write is ``producer_id_expiration_ms`` old
        (ProducerStateManager.isProducerExpired, measured on the broker's clock: see ProducerStateEntry).
        Returns the producer ids removed."""
        expired = [
            producer_id
            for producer_id, entry in self._producers.items()
            if entry.current_txn_first_offset is None
            and now_ms - entry.last_write_ms >= self.producer_id_expiration_ms
        ]
        for producer_id in expired:
            del self._producers[producer_id]
        return expired


def _check_data_batch(
    stored: ProducerStateEntry | None, updated: _PendingEntry, header: BatchHeader
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
    stored_epoch = stored.producer_epoch if stored is not None else NO_PRODUCER_EPOCH
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
        elif stored is not None and producer_epoch == stored_epoch:
            current_last_seq = stored.last_seq
        else:
            current_last_seq = NO_SEQUENCE
        # No stored epoch means no state (expired, retention, DeleteRecords): any sequence is accepted,
        # for this request's later batches too, exactly as Kafka tests currentEntry rather than updatedEntry.
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


def _apply_data_batch(entry: ProducerStateEntry, header: BatchHeader) -> None:
    entry.add_batch(
        header.producer_epoch,
        header.last_sequence,
        header.last_offset,
        header.last_offset_delta,
        header.max_timestamp,
    )
    if entry.current_txn_first_offset is None and header.is_transactional:
        # Kafka caches the first offset of each transaction for the last stable offset.
        entry.current_txn_first_offset = header.base_offset


def _apply_end_txn_marker(entry: ProducerStateEntry, header: BatchHeader) -> None:
    """The entry half of ProducerAppendInfo.appendEndTxnMarker: the epoch (clearing batches when it
    changes), the marker's timestamp, and the transaction closed. The marker's coordinator epoch lives in
    its record, not the header, so it is left unchanged until the transaction coordinator work reads it."""
    assert header.record_count > 0
    entry.maybe_update_producer_epoch(header.producer_epoch)
    entry.current_txn_first_offset = None
    entry.last_timestamp_ms = header.max_timestamp
