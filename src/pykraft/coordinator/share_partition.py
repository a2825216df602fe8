"""One share partition (KIP-932) on the leader of a topic partition: which records of the log a share
group has delivered, to whom, how often, and what became of them. Pure: time is ``now_ms`` passed in.

As Kafka's SharePartition (core/.../share/SharePartition.java), per offset rather than per batch (the
same states, without the batch/offset split):

- the **share-partition start offset** (SPSO, ``start_offset``): every record before it is done with;
- the **end offset** (``end_offset``, exclusive here: Kafka's SPEO is ``end_offset - 1``): every record
  from it on has never been acquired;
- between them, each record that exists is AVAILABLE, ACQUIRED (by one member, until its acquisition
  lock expires ``record_lock_duration_ms`` after it was acquired), ACKNOWLEDGED or ARCHIVED, with the
  number of times it was delivered. An offset between them without a record (a transaction marker, an
  aborted record under read_committed, a compacted-away offset) is never acquired and counts as
  ARCHIVED.

A fetch acquires AVAILABLE records and records past the end offset, at most ``max_in_flight_records``
between SPSO and the end offset (``group.share.partition.max.record.locks``; Kafka's
maxInFlightRecords). Each acquisition adds one to the record's delivery count. An acknowledgement from
the member holding the record ACCEPTs it (ACKNOWLEDGED), RELEASEs it (AVAILABLE again, or ARCHIVED once
delivered ``delivery_count_limit`` times), REJECTs it (ARCHIVED) or RENEWs its lock (KIP-1222); a
lock that expires releases the record the same way (SharePartition.releaseAcquisitionLockOnTimeout),
as does the member's share session ending (releaseAcquiredRecords). Acknowledgements of one partition
in one request apply all or none (SharePartition.acknowledge rolls back on the first invalid batch).
The SPSO moves past every leading record that is ACKNOWLEDGED or ARCHIVED, and only forwards.

:meth:`SharePartition.state_batches` and :meth:`SharePartition.from_state` are the durable view
(Kafka's ShareSnapshot state batches): acquisitions are not durable, so an ACQUIRED record is saved as
released (AVAILABLE with its delivery count, or ARCHIVED once delivered ``delivery_count_limit``
times), and a new leader hands it out again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from pykraft.core.errors import ErrorCode


class RecordState(IntEnum):
    """Kafka's RecordState ids (the DeliveryState of ShareSnapshot/ShareUpdate state batches)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """AcknowledgeTypes of ShareFetch/ShareAcknowledge (Kafka's AcknowledgeType, 0 is a gap)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


TERMINAL_STATES = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass(frozen=True, slots=True)
class SharePartitionConfig:
    """The broker's ``group.share.*`` settings a share partition follows (Kafka's defaults)."""

    record_lock_duration_ms: int = 30000  # group.share.record.lock.duration.ms (or the group's own)
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_in_flight_records: int = 2000  # group.share.partition.max.record.locks


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState
    delivery_count: int
    member_id: str | None = None  # who holds it while ACQUIRED
    lock_deadline_ms: int = 0  # when its acquisition lock expires, while ACQUIRED


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """A run of acquired offsets with one delivery count (ShareFetchResponse.AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    """FirstOffset..LastOffset (inclusive) and one type for all of them or one per offset."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets in one durable state with one delivery count (Kafka's PersisterStateBatch)."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int


class SharePartition:
    def __init__(self, start_offset: int, config: SharePartitionConfig | None = None) -> None:
        self.config = config or SharePartitionConfig()
        self.start_offset = start_offset
        self.end_offset = start_offset
        # Offsets in [start_offset, end_offset) that hold a record, ascending (dicts keep insertion order
        # and records are only ever added past the end offset).
        self._records: dict[int, InFlightRecord] = {}

    # --- the durable view -----------------------------------------------------------------------------

    @classmethod
    def from_state(
        cls, start_offset: int, batches: Iterable[StateBatch], config: SharePartitionConfig | None = None
    ) -> SharePartition:
        """A partition as a new leader loads it (SharePartition.maybeInitialize): records at or past
        ``start_offset`` in the batches' states; the end offset after the last of them."""
        partition = cls(start_offset, config)
        for batch in sorted(batches, key=lambda b: b.first_offset):
            state = partition._durable_state(batch.delivery_state, batch.delivery_count)
            for offset in range(max(batch.first_offset, partition.end_offset), batch.last_offset + 1):
                partition._records[offset] = InFlightRecord(state, batch.delivery_count)
            partition.end_offset = max(partition.end_offset, batch.last_offset + 1)
        partition._advance_start()
        return partition

    def state_batches(self) -> list[StateBatch]:
        """The in-flight records as durable runs (ACQUIRED saved as AVAILABLE)."""
        out: list[StateBatch] = []
        for offset, record in self._records.items():
            state = self._durable_state(record.state, record.delivery_count)
            last = out[-1] if out else None
            if (
                last is not None
                and last.last_offset == offset - 1
                and last.delivery_state == state
                and last.delivery_count == record.delivery_count
            ):
                out[-1] = StateBatch(last.first_offset, offset, state, record.delivery_count)
            else:
                out.append(StateBatch(offset, offset, state, record.delivery_count))
        return out

    def _durable_state(self, state: RecordState, delivery_count: int) -> RecordState:
        """An acquisition is not durable: saved, the record is released (archived once delivered
        ``delivery_count_limit`` times)."""
        if state not in (RecordState.ACQUIRED, RecordState.AVAILABLE):
            return state
        if delivery_count >= self.config.delivery_count_limit:
            return RecordState.ARCHIVED
        return RecordState.AVAILABLE

    # --- reading -------------------------------------------------------------------------------------

    def record(self, offset: int) -> InFlightRecord | None:
        return self._records.get(offset)

    def records(self) -> Iterable[tuple[int, InFlightRecord]]:
        return self._records.items()

    def next_fetch_offset(self) -> int:
        """Where the next fetch reads the log from: the first AVAILABLE record, else the end offset."""
        for offset, record in self._records.items():
            if record.state == RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether a fetch may acquire anything: an AVAILABLE record, or room for new ones."""
        if self.end_offset - self.start_offset < self.config.max_in_flight_records:
            return True
        return any(r.state == RecordState.AVAILABLE for r in self._records.values())

    def next_deadline_ms(self) -> int | None:
        """The earliest acquisition lock deadline, or None when nothing is acquired."""
        deadlines = [r.lock_deadline_ms for r in self._records.values() if r.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def acquired_by(self, member_id: str) -> int:
        return sum(
            1 for r in self._records.values() if r.state == RecordState.ACQUIRED and r.member_id == member_id
        )

    # --- changes -------------------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        record_offsets: Sequence[tuple[int, int]],
        fetched_end_offset: int,
        max_records: int,
        now_ms: int,
    ) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` the records a fetch read: ``record_offsets`` are the (first, last)
        runs of deliverable records, ascending, and the read covered the log up to
        ``fetched_end_offset`` (exclusive). Offsets past the end offset that are not in a run are gaps
        and are never acquired. At most ``max_records`` records are acquired (ShareFetch MaxRecords)."""
        deadline_ms = now_ms + self.config.record_lock_duration_ms
        acquired: list[tuple[int, int]] = []  # (offset, delivery count)
        complete = True
        for first, last in record_offsets:
            for offset in range(max(first, self.start_offset), last + 1):
                if len(acquired) >= max_records:
                    complete = False
                    break
                if offset < self.end_offset:
                    record = self._records.get(offset)
                    if record is None or record.state != RecordState.AVAILABLE:
                        continue
                    record.delivery_count += 1
                else:
                    if offset - self.start_offset >= self.config.max_in_flight_records:
                        complete = False
                        break
                    record = self._records[offset] = InFlightRecord(RecordState.ACQUIRED, 1)
                    self.end_offset = offset + 1
                record.state = RecordState.ACQUIRED
                record.member_id = member_id
                record.lock_deadline_ms = deadline_ms
                acquired.append((offset, record.delivery_count))
            if not complete:
                break
        if complete and fetched_end_offset > self.end_offset:
            # Trailing offsets without records, within the in-flight span.
            self.end_offset = max(
                self.end_offset,
                min(fetched_end_offset, self.start_offset + self.config.max_in_flight_records),
            )
        self._advance_start()
        return _runs(acquired)

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: int) -> ErrorCode:
        """Apply a member's acknowledgements of this partition, all or none: INVALID_REQUEST for a
        malformed batch, INVALID_RECORD_STATE when a record is not ACQUIRED by ``member_id``."""
        planned: list[tuple[int, AcknowledgeType]] = []
        for batch in batches:
            count = batch.last_offset - batch.first_offset + 1
            types = batch.acknowledge_types
            if count < 1 or len(types) not in (1, count):
                return ErrorCode.INVALID_REQUEST
            if any(t not in AcknowledgeType._value2member_map_ for t in types):
                return ErrorCode.INVALID_REQUEST
            if batch.last_offset >= self.end_offset:
                return ErrorCode.INVALID_RECORD_STATE  # never acquired
            if len(types) == 1:
                ack = AcknowledgeType(types[0])
                if ack != AcknowledgeType.GAP and batch.first_offset < self.start_offset:
                    return ErrorCode.INVALID_RECORD_STATE  # done with already
                # One type for the run: walk the records in it (not every offset: the run may be long).
                held = [o for o in self._records if batch.first_offset <= o <= batch.last_offset]
                if ack != AcknowledgeType.GAP and len(held) != count:
                    return ErrorCode.INVALID_RECORD_STATE  # offsets without a record in it
                pairs = [(o, ack) for o in held]
            else:
                pairs = [
                    (offset, AcknowledgeType(types[i]))
                    for i, offset in enumerate(range(batch.first_offset, batch.last_offset + 1))
                ]
            for offset, ack in pairs:
                record = self._records.get(offset) if offset >= self.start_offset else None
                if record is None and ack == AcknowledgeType.GAP:
                    continue  # an offset without a record: nothing to do
                if record is None or record.state != RecordState.ACQUIRED or record.member_id != member_id:
                    return ErrorCode.INVALID_RECORD_STATE
                planned.append((offset, ack))
        for offset, ack in planned:
            record = self._records[offset]
            if ack == AcknowledgeType.ACCEPT:
                self._finish(record, RecordState.ACKNOWLEDGED)
            elif ack in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
                self._finish(record, RecordState.ARCHIVED)
            elif ack == AcknowledgeType.RELEASE:
                self._release(record)
            else:
                record.lock_deadline_ms = now_ms + self.config.record_lock_duration_ms
        self._advance_start()
        return ErrorCode.NONE

    def expire_locks(self, now_ms: int) -> int:
        """Release every record whose acquisition lock has expired; how many were."""
        expired = 0
        for record in self._records.values():
            if record.state == RecordState.ACQUIRED and record.lock_deadline_ms <= now_ms:
                self._release(record)
                expired += 1
        if expired:
            self._advance_start()
        return expired

    def release_member(self, member_id: str) -> int:
        """Release every record ``member_id`` holds (its share session ended); how many were."""
        released = 0
        for record in self._records.values():
            if record.state == RecordState.ACQUIRED and record.member_id == member_id:
                self._release(record)
                released += 1
        if released:
            self._advance_start()
        return released

    def reset_start_offset(self, offset: int) -> None:
        """Start over at ``offset`` with nothing in flight (AlterShareGroupOffsets on an empty group,
        or the SPSO initialized by ``share.auto.offset.reset``)."""
        self._records.clear()
        self.start_offset = self.end_offset = offset

    # --- internals -----------------------------------------------------------------------------------

    def _release(self, record: InFlightRecord) -> None:
        if record.delivery_count >= self.config.delivery_count_limit:
            self._finish(record, RecordState.ARCHIVED)
        else:
            self._finish(record, RecordState.AVAILABLE)

    @staticmethod
    def _finish(record: InFlightRecord, state: RecordState) -> None:
        record.state = state
        record.member_id = None
        record.lock_deadline_ms = 0

    def _advance_start(self) -> None:
        records = self._records
        while records:
            offset = next(iter(records))
            if records[offset].state not in TERMINAL_STATES:
                self.start_offset = offset
                return
            del records[offset]
        self.start_offset = self.end_offset


def _runs(acquired: list[tuple[int, int]]) -> list[AcquiredRecords]:
    out: list[AcquiredRecords] = []
    for offset, count in acquired:
        last = out[-1] if out else None
        if last is not None and last.last_offset == offset - 1 and last.delivery_count == count:
            out[-1] = AcquiredRecords(last.first_offset, offset, count)
        else:
            out.append(AcquiredRecords(offset, offset, count))
    return out
