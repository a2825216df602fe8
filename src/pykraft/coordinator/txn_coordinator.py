"""The transaction coordinator (KIP-98 transactions with KIP-360's safe epoch bumps), pure.

It owns the transactional ids that hash to the ``__transaction_state`` partitions this node leads
(``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``, as Kafka), keeps one
:class:`TxnMetadata` per id, and answers InitProducerId, AddPartitionsToTxn (incl. KIP-890's verify-only),
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions.

Nothing changes until it is in the log. A request that changes an id's state returns a :class:`TxnWrite`:
the record to append to the id's ``__transaction_state`` partition and the target state. The shell
appends it, waits for the ISR, and calls :meth:`TransactionCoordinator.complete_write`; only then is the
target applied (replay and the load path apply the same records the same way). While a write is in
flight the id is *pending* and other requests for it get CONCURRENT_TRANSACTIONS (51), as Kafka's
``pendingState`` does. Because a failed write changes nothing in memory, retrying a failed fence computes
the same epoch again; Kafka needs ``hasFailedEpochFence`` for that (kafka-facts.md §8.8 item 90).

EndTxn writes PrepareCommit/PrepareAbort and answers; the shell then writes the transaction markers to
every partition of the transaction (:class:`MarkerJob`) and reports back with :meth:`markers_written`,
which returns the CompleteCommit/CompleteAbort write. A coordinator that loads a partition finds the
transactions left in a Prepare state and sends their markers again.

KIP-360 (the seed, followed on purpose; docs/architecture.md): the last epoch and the last producer id are part of
the record (txn_records), so a retried bump answers the same result after a coordinator failover.
InitProducerId with a transactional id, per kafka-facts.md §3.2-§3.3:

- no (producer id, epoch) given: bump the epoch, last epoch -1;
- given and current: bump, remember the given epoch as the last epoch;
- given epoch equals the last epoch (a retry of a bump that succeeded): the current result again;
- otherwise PRODUCER_FENCED (90) (the shell turns it into INVALID_PRODUCER_EPOCH 47 before v4);
- an exhausted epoch (>= 32766) rotates to a new producer id; the old one becomes the last producer id,
  so the retry of the rotating call, (old id, exhausted epoch), still gets (new id, 0);
- an Ongoing transaction is fenced (epoch + 1) and aborted first, and the caller gets
  CONCURRENT_TRANSACTIONS so it retries once the abort completes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import IntEnum

from pykraft.coordinator.offsets_records import OFFSETS_TOPIC, partition_for
from pykraft.coordinator.txn_records import (
    TxnLogValue,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from pykraft.core.errors import ErrorCode
from pykraft.core.partitions import by_topic as group_by_topic

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Short.MAX_VALUE - 1: the last epoch a producer may bump to; 32767 is kept so the coordinator can always
# fence once more (TransactionMetadata.isEpochExhausted).
EPOCH_EXHAUSTED = 32766
MAX_EPOCH = 32767


class TxnState(IntEnum):
    """TransactionState ids as Kafka writes them in TransactionStatus (kafka-facts.md §3.2)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


# The names DescribeTransactions and ListTransactions use (TransactionState.stateName).
STATE_NAMES: dict[TxnState, str] = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

_COMPLETE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
_PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= EPOCH_EXHAUSTED


@dataclass(frozen=True, slots=True)
class TxnConfig:
    transaction_state_num_partitions: int = 50
    # transaction.max.timeout.ms: the longest transaction.timeout.ms a producer may ask for (15 min).
    transaction_max_timeout_ms: int = 900_000
    # transactional.id.expiration.ms: an id idle this long (no open transaction) is forgotten (7 days).
    transactional_id_expiration_ms: int = 604_800_000
    offsets_topic_num_partitions: int = 50


TopicPartition = tuple[str, int]


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    # KIP-360: the producer id before the last rotation and the epoch the last bump came from.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # A write for this id is in flight (Kafka's pendingState).
    pending: bool = False


@dataclass(frozen=True, slots=True)
class TxnTarget:
    """The state a write moves an id to (Kafka's TxnTransitMetadata)."""

    producer_id: int
    producer_epoch: int
    last_producer_id: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int

    def log_value(self) -> TxnLogValue:
        by_topic = group_by_topic(self.partitions)
        return TxnLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms,
            state=int(self.state),
            partitions=tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items())),
            txn_last_update_timestamp_ms=self.txn_last_update_timestamp_ms,
            txn_start_timestamp_ms=self.txn_start_timestamp_ms,
            last_producer_id=self.last_producer_id,
            last_producer_epoch=self.last_producer_epoch,
        )


@dataclass(frozen=True, slots=True)
class TxnWrite:
    """A record for ``__transaction_state`` partition ``partition``; apply ``target`` (None = the id is
    removed: an expiration tombstone) once it is in the log. ``answer`` is what the request that caused
    it gets once the write succeeded (a write for a timeout or a reload answers nobody)."""

    transactional_id: str
    partition: int
    coordinator_epoch: int
    key: bytes
    value: bytes | None
    target: TxnTarget | None
    answer: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Write a COMMIT/ABORT marker for (producer_id, producer_epoch) to every partition of ``partitions``
    (WriteTxnMarkers), then call :meth:`TransactionCoordinator.markers_written`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class TxnOutcome:
    """A request's result: an error now, or a write to make (``write``) and then ``producer_id``/
    ``producer_epoch`` (InitProducerId) or ``write.answer`` to answer."""

    error_code: ErrorCode = ErrorCode.NONE
    write: TxnWrite | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TxnDescription:
    error_code: ErrorCode
    transactional_id: str
    state: str = ""
    txn_timeout_ms: int = 0
    txn_start_timestamp_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


class TransactionCoordinator:
    def __init__(self, config: TxnConfig) -> None:
        self.config = config
        self.transactions: dict[str, TxnMetadata] = {}
        # __transaction_state partition -> the coordinator epoch (its leader epoch) it was loaded at.
        self.owned_partitions: dict[int, int] = {}
        self.loading_partitions: dict[int, int] = {}

    # --- ownership and loading -----------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_num_partitions)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        partition = self.partition_for(transactional_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned_partitions:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def begin_load(self, partition: int, coordinator_epoch: int) -> None:
        self.unload(partition)
        self.loading_partitions[partition] = coordinator_epoch

    def replay(self, partition: int, key: bytes, value: bytes | None) -> None:
        """Apply one ``__transaction_state`` record (load path). Raises TxnRecordError for a record
        that does not decode."""
        transactional_id = decode_txn_key(key)
        if value is None:
            self.transactions.pop(transactional_id, None)
            return
        v = decode_txn_value(value)
        self.transactions[transactional_id] = TxnMetadata(
            transactional_id,
            v.producer_id,
            v.producer_epoch,
            v.txn_timeout_ms,
            TxnState(v.state),
            {(t, p) for t, ps in v.partitions for p in ps},
            v.txn_start_timestamp_ms,
            v.txn_last_update_timestamp_ms,
            v.last_producer_id,
            v.last_producer_epoch,
        )

    def finish_load(self, partition: int) -> list[MarkerJob]:
        """The partition is loaded: serve its ids, and finish the transactions a previous coordinator
        left prepared (their markers may not all be written)."""
        epoch = self.loading_partitions.pop(partition, None)
        if epoch is None:
            return []
        self.owned_partitions[partition] = epoch
        jobs = []
        for md in self.transactions.values():
            if self.partition_for(md.transactional_id) == partition and md.state in _PREPARE:
                jobs.append(self._marker_job(md, epoch))
        return jobs

    def unload(self, partition: int) -> None:
        self.owned_partitions.pop(partition, None)
        self.loading_partitions.pop(partition, None)
        for transactional_id in [t for t in self.transactions if self.partition_for(t) == partition]:
            del self.transactions[transactional_id]

    # --- writes ------------------------------------------------------------------------------------

    def _write(
        self, md: TxnMetadata, target: TxnTarget | None, answer: ErrorCode = ErrorCode.NONE
    ) -> TxnWrite:
        partition = self.partition_for(md.transactional_id)
        md.pending = True
        return TxnWrite(
            md.transactional_id,
            partition,
            self.owned_partitions.get(partition, -1),
            encode_txn_key(md.transactional_id),
            None if target is None else encode_txn_value(target.log_value()),
            target,
            answer,
        )

    def complete_write(self, write: TxnWrite, error: ErrorCode) -> list[MarkerJob]:
        """The shell appended ``write`` (``error`` NONE) or could not. Returns the marker jobs a
        Prepare state starts."""
        md = self.transactions.get(write.transactional_id)
        if md is None:
            return []
        md.pending = False
        if self.owned_partitions.get(write.partition) != write.coordinator_epoch:
            return []  # unloaded (or reloaded at a new epoch) meanwhile: the log is the truth now
        if error != ErrorCode.NONE:
            return []
        target = write.target
        if target is None:
            del self.transactions[write.transactional_id]
            return []
        md.producer_id = target.producer_id
        md.producer_epoch = target.producer_epoch
        md.last_producer_id = target.last_producer_id
        md.last_producer_epoch = target.last_producer_epoch
        md.txn_timeout_ms = target.txn_timeout_ms
        md.state = target.state
        md.partitions = set(target.partitions)
        md.txn_start_timestamp_ms = target.txn_start_timestamp_ms
        md.txn_last_update_timestamp_ms = target.txn_last_update_timestamp_ms
        if md.state in _PREPARE:
            return [self._marker_job(md, write.coordinator_epoch)]
        return []

    def _marker_job(self, md: TxnMetadata, coordinator_epoch: int) -> MarkerJob:
        return MarkerJob(
            md.transactional_id,
            md.producer_id,
            md.producer_epoch,
            coordinator_epoch,
            md.state == TxnState.PREPARE_COMMIT,
            frozenset(md.partitions),
        )

    def markers_written(self, job: MarkerJob, now_ms: int) -> TxnWrite | None:
        """Every partition of ``job`` has its marker: write CompleteCommit/CompleteAbort (None when the
        transaction moved on meanwhile, or another write is in flight: the caller tries again)."""
        md = self.transactions.get(job.transactional_id)
        if (
            md is None
            or md.producer_id != job.producer_id
            or md.producer_epoch != job.producer_epoch
            or md.state not in _PREPARE
            or self.owned_partitions.get(self.partition_for(md.transactional_id)) != job.coordinator_epoch
        ):
            return None
        if md.pending:
            return None
        done = TxnState.COMPLETE_COMMIT if md.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return self._write(md, self._target(md, state=done, partitions=frozenset(), update_ms=now_ms))

    def _target(
        self,
        md: TxnMetadata,
        *,
        state: TxnState,
        update_ms: int,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_id: int | None = None,
        last_producer_epoch: int | None = None,
        txn_timeout_ms: int | None = None,
        partitions: frozenset[TopicPartition] | None = None,
        start_ms: int | None = None,
    ) -> TxnTarget:
        return TxnTarget(
            producer_id=md.producer_id if producer_id is None else producer_id,
            producer_epoch=md.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_id=md.last_producer_id if last_producer_id is None else last_producer_id,
            last_producer_epoch=md.last_producer_epoch
            if last_producer_epoch is None
            else last_producer_epoch,
            txn_timeout_ms=md.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            state=state,
            partitions=frozenset(md.partitions) if partitions is None else partitions,
            txn_start_timestamp_ms=md.txn_start_timestamp_ms if start_ms is None else start_ms,
            txn_last_update_timestamp_ms=update_ms,
        )

    # --- InitProducerId ------------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        txn_timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        now_ms: int,
        new_producer_id: Callable[[], tuple[ErrorCode, int]],
    ) -> TxnOutcome:
        """KIP-360's InitProducerId for a transactional id (module docstring). ``new_producer_id`` hands
        out a fresh id from the broker's KIP-730 block (or the error to answer)."""
        if not transactional_id:
            return TxnOutcome(ErrorCode.INVALID_REQUEST)
        if not 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms:
            return TxnOutcome(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return TxnOutcome(ErrorCode.INVALID_REQUEST)
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return TxnOutcome(error)
        md = self.transactions.get(transactional_id)
        if md is None:
            error, fresh_id = new_producer_id()
            if error != ErrorCode.NONE:
                return TxnOutcome(error)
            md = TxnMetadata(transactional_id, fresh_id, NO_PRODUCER_EPOCH, txn_timeout_ms, TxnState.EMPTY)
            self.transactions[transactional_id] = md
        if md.pending:
            return TxnOutcome(ErrorCode.CONCURRENT_TRANSACTIONS)
        given = producer_id != NO_PRODUCER_ID
        if given and not (
            md.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == md.producer_id
            or (producer_id == md.last_producer_id and is_epoch_exhausted(producer_epoch))
        ):
            return TxnOutcome(ErrorCode.PRODUCER_FENCED)
        if md.state in _PREPARE:
            return TxnOutcome(ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state == TxnState.ONGOING:
            # Fence the old producer (epoch + 1) and abort its transaction; the caller retries.
            target = self._fence_and_abort(md, now_ms)
            return TxnOutcome(
                ErrorCode.NONE, self._write(md, target, answer=ErrorCode.CONCURRENT_TRANSACTIONS)
            )
        if md.state not in _COMPLETE:
            return TxnOutcome(ErrorCode.CONCURRENT_TRANSACTIONS)
        retry = (
            given
            and md.producer_epoch != NO_PRODUCER_EPOCH
            and producer_epoch != md.producer_epoch
            and producer_epoch == md.last_producer_epoch
            and producer_id in (md.producer_id, md.last_producer_id)
        )
        if retry:
            # A retry of a bump (or rotation) that succeeded: the same answer, nothing written.
            return TxnOutcome(ErrorCode.NONE, producer_id=md.producer_id, producer_epoch=md.producer_epoch)
        if given and md.producer_epoch != NO_PRODUCER_EPOCH and producer_epoch != md.producer_epoch:
            return TxnOutcome(ErrorCode.PRODUCER_FENCED)
        if given and producer_id != md.producer_id and md.producer_epoch != NO_PRODUCER_EPOCH:
            return TxnOutcome(ErrorCode.PRODUCER_FENCED)
        if is_epoch_exhausted(md.producer_epoch):
            error, fresh_id = new_producer_id()
            if error != ErrorCode.NONE:
                return TxnOutcome(error)
            target = self._target(
                md,
                state=TxnState.EMPTY,
                update_ms=now_ms,
                producer_id=fresh_id,
                producer_epoch=0,
                last_producer_id=md.producer_id,
                # A caller that named its epoch can retry this rotation and get the same answer.
                last_producer_epoch=md.producer_epoch if given else NO_PRODUCER_EPOCH,
                txn_timeout_ms=txn_timeout_ms,
                partitions=frozenset(),
                start_ms=-1,
            )
        else:
            target = self._target(
                md,
                state=TxnState.EMPTY,
                update_ms=now_ms,
                producer_epoch=md.producer_epoch + 1,
                last_producer_epoch=md.producer_epoch if given else NO_PRODUCER_EPOCH,
                txn_timeout_ms=txn_timeout_ms,
                partitions=frozenset(),
                start_ms=-1,
            )
        return TxnOutcome(
            ErrorCode.NONE,
            self._write(md, target),
            producer_id=target.producer_id,
            producer_epoch=target.producer_epoch,
        )

    def _fence_and_abort(self, md: TxnMetadata, now_ms: int) -> TxnTarget:
        """PrepareAbort at epoch + 1 with no last epoch (Kafka's prepareFenceProducerEpoch followed by
        endTransaction(ABORT)); at epoch 32767 the epoch stays (there is no higher one)."""
        return self._target(
            md,
            state=TxnState.PREPARE_ABORT,
            update_ms=now_ms,
            producer_epoch=min(md.producer_epoch + 1, MAX_EPOCH),
            last_producer_epoch=NO_PRODUCER_EPOCH,
        )

    # --- AddPartitionsToTxn / AddOffsetsToTxn / EndTxn ----------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> ErrorCode:
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return error
        md = self.transactions.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        return ErrorCode.NONE

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now_ms: int,
    ) -> TxnOutcome:
        error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if error != ErrorCode.NONE:
            return TxnOutcome(error)
        md = self.transactions[transactional_id]
        if md.pending or md.state in _PREPARE:
            return TxnOutcome(ErrorCode.CONCURRENT_TRANSACTIONS)
        wanted = set(partitions)
        if md.state == TxnState.ONGOING and wanted <= md.partitions:
            return TxnOutcome(ErrorCode.NONE)
        if md.state not in (*_COMPLETE, TxnState.ONGOING):
            return TxnOutcome(ErrorCode.INVALID_TXN_STATE)
        start_ms = md.txn_start_timestamp_ms if md.state == TxnState.ONGOING else now_ms
        partitions_after = (
            frozenset(md.partitions | wanted) if md.state == TxnState.ONGOING else frozenset(wanted)
        )
        target = self._target(
            md, state=TxnState.ONGOING, update_ms=now_ms, partitions=partitions_after, start_ms=start_ms
        )
        return TxnOutcome(ErrorCode.NONE, self._write(md, target))

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, now_ms: int
    ) -> TxnOutcome:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction, so its
        TxnOffsetCommit is committed or aborted with the rest."""
        partition = partition_for(group_id, self.config.offsets_topic_num_partitions)
        return self.add_partitions(
            transactional_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, partition)], now_ms
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """KIP-890 verify-only AddPartitionsToTxn: is each partition part of the producer's ongoing
        transaction? A partition that is not gets INVALID_TXN_STATE (the broker refuses the write, so a
        hanging transaction cannot start behind the coordinator's back)."""
        error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if error != ErrorCode.NONE:
            return error, {}
        md = self.transactions[transactional_id]
        ongoing = md.state == TxnState.ONGOING
        return ErrorCode.NONE, {
            tp: ErrorCode.NONE if ongoing and tp in md.partitions else ErrorCode.INVALID_TXN_STATE
            for tp in partitions
        }

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, now_ms: int
    ) -> TxnOutcome:
        error = self._check_producer(transactional_id, producer_id, producer_epoch)
        if error != ErrorCode.NONE:
            return TxnOutcome(error)
        md = self.transactions[transactional_id]
        if md.pending:
            return TxnOutcome(ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state == TxnState.ONGOING:
            state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            return TxnOutcome(
                ErrorCode.NONE, self._write(md, self._target(md, state=state, update_ms=now_ms))
            )
        # Retries: a finished transaction answers success for the same decision; one being finished
        # asks the client to retry (CONCURRENT_TRANSACTIONS) until it completes.
        if md.state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            return TxnOutcome(ErrorCode.NONE)
        if md.state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT):
            return TxnOutcome(ErrorCode.CONCURRENT_TRANSACTIONS)
        return TxnOutcome(ErrorCode.INVALID_TXN_STATE)

    # --- timers ----------------------------------------------------------------------------------------

    def abort_timed_out(self, now_ms: int) -> list[TxnWrite]:
        """Ongoing transactions older than their timeout: fence the producer and abort (Kafka's
        abortTimedOutTransactions)."""
        writes = []
        for md in self.transactions.values():
            if (
                md.state == TxnState.ONGOING
                and not md.pending
                and self.coordinator_error(md.transactional_id) == ErrorCode.NONE
                and md.txn_start_timestamp_ms + md.txn_timeout_ms < now_ms
            ):
                writes.append(self._write(md, self._fence_and_abort(md, now_ms)))
        return writes

    def expire_ids(self, now_ms: int) -> list[TxnWrite]:
        """transactional.id.expiration.ms: tombstones for ids with no transaction that were idle that
        long (Kafka's removeExpiredTransactionalIds)."""
        cutoff = now_ms - self.config.transactional_id_expiration_ms
        writes = []
        for md in self.transactions.values():
            if (
                md.state in _COMPLETE
                and not md.pending
                and md.txn_last_update_timestamp_ms <= cutoff
                and self.coordinator_error(md.transactional_id) == ErrorCode.NONE
            ):
                writes.append(self._write(md, None))
        return writes

    # --- admin -------------------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TxnDescription:
        error = self.coordinator_error(transactional_id)
        md = self.transactions.get(transactional_id)
        if error == ErrorCode.NONE and md is None:
            error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        if error != ErrorCode.NONE or md is None:
            return TxnDescription(error, transactional_id)
        return TxnDescription(
            ErrorCode.NONE,
            transactional_id,
            STATE_NAMES[md.state],
            md.txn_timeout_ms,
            md.txn_start_timestamp_ms,
            md.producer_id,
            md.producer_epoch,
            tuple(sorted(md.partitions)),
        )

    def list_transactions(
        self,
        states: set[str] | None = None,
        producer_ids: set[int] | None = None,
        min_duration_ms: int = -1,
        now_ms: int = 0,
    ) -> list[TxnListing]:
        out = []
        for md in self.transactions.values():
            if self.coordinator_error(md.transactional_id) != ErrorCode.NONE:
                continue
            name = STATE_NAMES[md.state]
            if states and name not in states:
                continue
            if producer_ids and md.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (
                md.state != TxnState.ONGOING or now_ms - md.txn_start_timestamp_ms < min_duration_ms
            ):
                continue
            out.append(TxnListing(md.transactional_id, md.producer_id, name))
        return sorted(out, key=lambda listing: listing.transactional_id)


__all__ = [
    "EPOCH_EXHAUSTED",
    "STATE_NAMES",
    "MarkerJob",
    "TransactionCoordinator",
    "TxnConfig",
    "TxnDescription",
    "TxnListing",
    "TxnMetadata",
    "TxnOutcome",
    "TxnState",
    "TxnTarget",
    "TxnWrite",
    "is_epoch_exhausted",
]
