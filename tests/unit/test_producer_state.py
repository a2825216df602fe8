"""Producer state of one partition: Kafka's rules (kafka-facts.md §2.2-§2.5), the scenarios of
ProducerStateManagerTest (§8.5) and UnifiedLogTest (§8.6) that apply to data batches, and a hypothesis
state machine checked against an independent reference model.

Not applicable yet (no snapshots, no marker validation, no verification guard): the snapshot file,
reload and truncation scenarios (§8.5 items 33-38, 40, 43-48, 55-56, 58-60, 63), coordinator fencing and
marker epoch checks (53-54), late transactions / LSO (27-28, 46, 50, 62), verification entries (61).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from pykraft.core.errors import ErrorCode
from pykraft.log.producer_state import (
    CLASSIC_RETAINED_BATCHES,
    AppendCheck,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    in_sequence,
)
from pykraft.protocol.records import INT32_MAX, BatchHeader, Record, build_batch, read_batch_header

PID = 1000
OK = ErrorCode.NONE
OUT_OF_ORDER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
INVALID_EPOCH = ErrorCode.INVALID_PRODUCER_EPOCH
DUPLICATE = ErrorCode.DUPLICATE_SEQUENCE_NUMBER
EXPIRATION_MS = 86_400_000
# producer.state.retained.batches=5: Kafka's classic mode.
CLASSIC = CLASSIC_RETAINED_BATCHES


def header(
    producer_id: int = PID,
    producer_epoch: int = 0,
    base_sequence: int = 0,
    record_count: int = 1,
    *,
    base_offset: int = 0,
    timestamp_ms: int = 1_000,
    is_transactional: bool = False,
    is_control: bool = False,
) -> BatchHeader:
    """A real RecordBatch v2 header, as the produce path reads it from the request."""
    records = [Record(None, b"v")] * record_count
    return read_batch_header(
        build_batch(
            records,
            base_offset=base_offset,
            timestamp_ms=timestamp_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=is_transactional,
            is_control=is_control,
        )
    )


class FakeLog:
    """The leader's produce path in miniature: check, assign offsets, append, then on_append."""

    def __init__(self, manager: ProducerStateManager, log_end_offset: int = 0) -> None:
        self.manager = manager
        self.log_end_offset = log_end_offset
        self.appended: list[BatchHeader] = []

    def produce(
        self, headers: Sequence[BatchHeader], now_ms: int = 0
    ) -> tuple[AppendCheck, list[BatchHeader]]:
        check = self.manager.check_append(headers)
        if check.error_code != OK or check.duplicate is not None:
            return check, []
        assigned = []
        for h in headers:
            assigned.append(h._replace(base_offset=self.log_end_offset))
            self.log_end_offset += h.last_offset_delta + 1
        self.manager.on_append(assigned, now_ms)
        self.appended.extend(assigned)
        return check, assigned

    def code(self, *headers: BatchHeader, now_ms: int = 0) -> ErrorCode:
        return self.produce(headers, now_ms)[0].error_code


def new_log(retained_batches: int = CLASSIC, **kwargs: int) -> FakeLog:
    """Kafka's classic mode unless asked: the tests taken from Kafka's suites run in it unchanged."""
    return FakeLog(ProducerStateManager(retained_batches=retained_batches, **kwargs))


# --- sequence arithmetic ---------------------------------------------------------------------------


def test_in_sequence__next_and_wraparound_only() -> None:
    assert in_sequence(-1, 0)
    assert in_sequence(4, 5)
    assert in_sequence(INT32_MAX, 0)
    assert not in_sequence(INT32_MAX, 1)
    assert in_sequence(INT32_MAX - 1, INT32_MAX)
    assert not in_sequence(4, 4)
    assert not in_sequence(4, 6)


def test_batch_metadata__first_seq_and_first_offset_are_derived_wrap_aware() -> None:
    batch = BatchMetadata(last_seq=9, last_offset=2020, offset_delta=20, timestamp_ms=5)
    assert batch.first_seq == INT32_MAX - 10
    assert batch.first_offset == 2000


def test_constructor__rejects_zero_retained_batches() -> None:
    with pytest.raises(ValueError, match="retained_batches"):
        ProducerStateManager(retained_batches=0)


# --- ProducerStateManagerTest (§8.5) ------------------------------------------------------------------


def test_basic_id_mapping() -> None:
    log = new_log()
    assert log.code(header(producer_epoch=0, base_sequence=0)) == OK
    assert log.code(header(producer_epoch=0, base_sequence=1)) == OK
    # Not a duplicate here: a different (but overlapping) range of 2 records.
    assert log.code(header(producer_epoch=0, base_sequence=1, record_count=2)) == OUT_OF_ORDER
    assert log.code(header(producer_epoch=0, base_sequence=5)) == OUT_OF_ORDER
    assert log.code(header(producer_epoch=1, base_sequence=0)) == OK
    assert log.code(header(producer_epoch=0, base_sequence=2)) == INVALID_EPOCH


def test_append_txn_marker_with_no_producer_state() -> None:
    manager = ProducerStateManager(retained_batches=CLASSIC)
    manager.replay(header(producer_epoch=2, is_control=True, base_offset=27), now_ms=0)
    entry = manager.entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 2
    assert entry.last_seq == -1
    log = FakeLog(manager, log_end_offset=28)
    assert log.code(header(producer_epoch=0, base_sequence=0)) == INVALID_EPOCH
    assert log.code(header(producer_epoch=2, base_sequence=17)) == OUT_OF_ORDER
    assert log.code(header(producer_epoch=2, base_sequence=0)) == OK


def test_producer_sequence_wrap_around() -> None:
    manager = ProducerStateManager(retained_batches=CLASSIC)
    manager.replay(header(producer_epoch=15, base_sequence=INT32_MAX, base_offset=9), now_ms=0)
    log = FakeLog(manager, log_end_offset=10)
    assert log.code(header(producer_epoch=15, base_sequence=0)) == OK
    entry = manager.entry(PID)
    assert entry is not None
    assert entry.first_seq == INT32_MAX
    assert entry.last_seq == 0


def test_producer_sequence_with_wrap_around_batch_record() -> None:
    log = FakeLog(ProducerStateManager(retained_batches=CLASSIC), log_end_offset=2000)
    assert log.code(header(producer_epoch=15, base_sequence=INT32_MAX - 10, record_count=21)) == OK
    entry = log.manager.entry(PID)
    assert entry is not None
    assert (entry.first_seq, entry.last_seq) == (INT32_MAX - 10, 9)
    assert (entry.first_data_offset, entry.last_data_offset) == (2000, 2020)
    assert log.code(header(producer_epoch=15, base_sequence=10)) == OK


def test_producer_sequence_invalid_wrap_around() -> None:
    manager = ProducerStateManager(retained_batches=CLASSIC)
    manager.replay(header(producer_epoch=15, base_sequence=INT32_MAX, base_offset=9), now_ms=0)
    log = FakeLog(manager, log_end_offset=10)
    assert log.code(header(producer_epoch=15, base_sequence=1)) == OUT_OF_ORDER


def test_no_validation_on_first_entry_when_loading_log() -> None:
    manager = ProducerStateManager(retained_batches=CLASSIC)
    manager.replay(header(producer_epoch=5, base_sequence=16, base_offset=735), now_ms=0)
    entry = manager.entry(PID)
    assert entry is not None
    assert (entry.producer_epoch, entry.first_seq, entry.last_seq) == (5, 16, 16)
    assert (entry.first_data_offset, entry.last_data_offset) == (735, 735)
    assert manager.map_end_offset == 736


def test_control_record_bumps_producer_epoch() -> None:
    log = new_log()
    assert log.code(header(producer_epoch=0, base_sequence=0)) == OK
    log.manager.replay(header(producer_epoch=1, is_control=True, base_offset=log.log_end_offset), now_ms=0)
    log.log_end_offset += 1
    entry = log.manager.entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 1
    assert entry.is_empty
    assert entry.last_seq == -1
    assert log.code(header(producer_epoch=1, base_sequence=0)) == OK


def test_prepare_update_does_not_mutate() -> None:
    log = new_log()
    assert log.code(header(base_sequence=0)) == OK
    before = log.manager.entry(PID)
    assert before is not None
    snapshot = (before.producer_epoch, list(before.batches), before.last_timestamp_ms)
    check = log.manager.check_append([header(base_sequence=1), header(producer_id=PID + 1, base_sequence=3)])
    assert check.error_code == OK
    after = log.manager.entry(PID)
    assert after is not None
    assert (after.producer_epoch, list(after.batches), after.last_timestamp_ms) == snapshot
    assert log.manager.entry(PID + 1) is None
    assert len(log.manager) == 1
    assert log.manager.map_end_offset == 1


def test_update_producer_transaction_state() -> None:
    log = FakeLog(ProducerStateManager(retained_batches=CLASSIC), log_end_offset=16)
    assert log.code(header(producer_epoch=1, base_sequence=0, is_transactional=True)) == OK
    assert log.code(header(producer_epoch=1, base_sequence=1, record_count=5, is_transactional=True)) == OK
    entry = log.manager.entry(PID)
    assert entry is not None
    assert entry.current_txn_first_offset == 16
    log.manager.replay(header(producer_epoch=1, is_control=True, base_offset=40, timestamp_ms=77), now_ms=0)
    entry = log.manager.entry(PID)
    assert entry is not None
    assert entry.current_txn_first_offset is None
    assert entry.last_timestamp_ms == 77
    # The marker has the same epoch: the batch metadata is kept.
    assert (entry.first_seq, entry.last_seq) == (0, 5)
    assert entry.last_data_offset == 21


def test_out_of_sequence_after_control_record_epoch_bump() -> None:
    log = new_log()
    assert log.code(header(producer_epoch=0, base_sequence=0)) == OK
    assert log.code(header(producer_epoch=0, base_sequence=1)) == OK
    log.manager.replay(header(producer_epoch=1, is_control=True, base_offset=2), now_ms=0)
    log.log_end_offset = 3
    assert log.code(header(producer_epoch=1, base_sequence=2)) == OUT_OF_ORDER
    assert log.code(header(producer_epoch=2, base_sequence=2)) == OUT_OF_ORDER
    assert log.code(header(producer_epoch=1, base_sequence=0)) == OK


def test_non_transactional_append_with_ongoing_transaction() -> None:
    log = new_log()
    assert log.code(header(base_sequence=0, is_transactional=True)) == OK
    check, appended = log.produce([header(base_sequence=1)])
    assert check.error_code == ErrorCode.INVALID_TXN_STATE
    assert appended == []


def test_producer_state_after_fencing_abort_marker() -> None:
    log = new_log()
    assert log.code(header(producer_epoch=0, base_sequence=0, is_transactional=True), now_ms=100) == OK
    # The coordinator fences the producer: ABORT at a bumped epoch.
    log.manager.replay(header(producer_epoch=1, is_control=True, base_offset=1), now_ms=200)
    entry = log.manager.entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 1
    assert entry.is_empty
    assert entry.current_txn_first_offset is None
    assert log.manager.remove_expired(200 + EXPIRATION_MS - 1) == []
    assert log.manager.entry(PID) == entry


def test_accept_append_without_producer_state_on_replica() -> None:
    manager = ProducerStateManager(retained_batches=CLASSIC)
    manager.replay(header(producer_epoch=0, base_sequence=2, base_offset=0), now_ms=0)
    entry = manager.entry(PID)
    assert entry is not None
    assert (entry.first_seq, entry.last_seq) == (2, 2)


def test_accept_append_with_sequence_gaps_on_replica() -> None:
    log = new_log()
    assert log.code(header(base_sequence=0)) == OK
    assert log.code(header(base_sequence=3)) == OUT_OF_ORDER
    log.manager.replay(header(base_sequence=3, base_offset=1), now_ms=0)
    entry = log.manager.entry(PID)
    assert entry is not None
    assert entry.last_seq == 3


def test_pid_expiration_timeout() -> None:
    log = new_log(producer_id_expiration_ms=5_000)
    assert log.code(header(base_sequence=0), now_ms=1_000) == OK
    assert log.manager.remove_expired(1_000 + 5_000 - 1) == []
    assert log.manager.remove_expired(1_000 + 5_000 + 1) == [PID]
    assert log.manager.entry(PID) is None
    # No state any more: sequence 1 (or any) is accepted as a new producer.
    assert log.code(header(base_sequence=1), now_ms=7_000) == OK


def test_producers_with_ongoing_transactions_dont_expire() -> None:
    log = new_log(producer_id_expiration_ms=5_000)
    assert log.code(header(base_sequence=0, is_transactional=True), now_ms=0) == OK
    assert log.manager.remove_expired(10_000_000) == []
    assert log.manager.entry(PID) is not None


def test_append_empty_control_batch() -> None:
    manager = ProducerStateManager(retained_batches=CLASSIC)
    empty_marker = header(producer_epoch=3, is_control=True, base_offset=0)._replace(record_count=0)
    manager.replay(empty_marker, now_ms=0)
    assert manager.entry(PID) is None
    assert manager.map_end_offset == 1


# --- UnifiedLogTest (§8.6) ------------------------------------------------------------------------------


def test_duplicate_appends() -> None:
    log = new_log()
    sent: list[tuple[BatchHeader, BatchHeader]] = []
    for seq in range(0, 20, 2):
        request = header(producer_epoch=0, base_sequence=seq, record_count=2, timestamp_ms=1_000 + seq)
        check, (appended,) = log.produce([request])
        assert check == AppendCheck(OK)
        sent.append((request, appended))
    end = log.log_end_offset

    # The tail batch re-sent: its original offsets, nothing appended.
    request, appended = sent[-1]
    check, new = log.produce([request])
    assert new == []
    assert check.error_code == OK
    assert check.duplicate == BatchMetadata(19, appended.last_offset, 1, appended.max_timestamp)
    assert log.log_end_offset == end

    # A partial duplicate.
    assert log.code(
        header(producer_epoch=0, base_sequence=sent[-1][0].base_sequence + 1, record_count=2)
    ) == (OUT_OF_ORDER)
    # The 4th from last.
    request, appended = sent[-4]
    check, _ = log.produce([request])
    assert check.duplicate is not None
    assert check.duplicate.first_offset == appended.base_offset
    # Older than the 5 retained batches.
    assert log.code(sent[-6][0]) == OUT_OF_ORDER
    assert log.log_end_offset == end


@pytest.mark.parametrize("age", [1, 2, 3, 4, 5])
def test_duplicate_appends__each_retained_batch__original_offsets(age: int) -> None:
    log = new_log()
    sent = []
    for i in range(7):
        request = header(base_sequence=3 * i, record_count=3, timestamp_ms=500 + i)
        sent.append((request, log.produce([request], now_ms=i)[1][0]))
    request, appended = sent[-age]
    check, new = log.produce([request], now_ms=99)
    assert new == []
    assert check.error_code == OK
    assert check.duplicate is not None
    assert (check.duplicate.first_offset, check.duplicate.last_offset) == (
        appended.base_offset,
        appended.last_offset,
    )
    assert (check.duplicate.first_seq, check.duplicate.last_seq) == (
        request.base_sequence,
        request.last_sequence,
    )
    assert check.duplicate.timestamp_ms == 500 + len(sent) - age
    entry = log.manager.entry(PID)
    assert entry is not None
    assert entry.last_write_ms == 6  # a duplicate is not a write


def test_duplicate_appends__older_than_retained__out_of_order() -> None:
    log = new_log()
    sent = [header(base_sequence=i) for i in range(6)]
    for request in sent:
        assert log.code(request) == OK
    assert log.code(sent[0]) == OUT_OF_ORDER
    assert log.manager.check_append([sent[1]]).duplicate is not None


def test_duplicate_appends__partial_overlap_inside_a_batch__out_of_order() -> None:
    log = new_log()
    assert log.code(header(base_sequence=0, record_count=5)) == OK
    assert log.code(header(base_sequence=1, record_count=3)) == OUT_OF_ORDER
    assert log.code(header(base_sequence=0, record_count=4)) == OUT_OF_ORDER
    assert log.code(header(base_sequence=3, record_count=4)) == OUT_OF_ORDER


def test_duplicate_appends__retry_from_older_epoch__invalid_epoch() -> None:
    log = new_log()
    old = header(producer_epoch=0, base_sequence=0)
    assert log.code(old) == OK
    assert log.code(header(producer_epoch=1, base_sequence=0)) == OK
    assert log.code(old) == INVALID_EPOCH


def test_duplicate_append_to_follower() -> None:
    manager = ProducerStateManager(retained_batches=CLASSIC)
    for offset in range(3):
        # The same sequence three times: replication does no duplicate or sequence checks.
        manager.replay(header(base_sequence=0, base_offset=offset), now_ms=0)
    assert manager.map_end_offset == 3
    entry = manager.entry(PID)
    assert entry is not None
    assert len(entry.batches) == 3


def test_multiple_producers_with_duplicates_in_single_append() -> None:
    manager = ProducerStateManager(retained_batches=CLASSIC)
    headers = [
        header(producer_id=1, base_sequence=0, base_offset=0),
        header(producer_id=2, base_sequence=0, base_offset=1),
        header(producer_id=1, base_sequence=0, base_offset=2),
        header(producer_id=2, base_sequence=0, base_offset=3),
    ]
    for h in headers:
        manager.replay(h, now_ms=0)
    assert len(manager) == 2
    assert manager.map_end_offset == 4


def test_old_producer_epoch() -> None:
    log = new_log()
    assert log.code(header(producer_epoch=1, base_sequence=0)) == OK
    check = log.manager.check_append([header(producer_epoch=0, base_sequence=1)])
    assert check.error_code == INVALID_EPOCH
    assert "epoch" in check.error_message


def test_periodic_producer_id_expiration() -> None:
    log = new_log(producer_id_expiration_ms=200)
    assert log.code(header(producer_id=1, base_sequence=0), now_ms=0) == OK
    assert log.code(header(producer_id=2, base_sequence=0), now_ms=150) == OK
    removed: list[int] = []
    for now_ms in range(0, 600, 50):
        removed += log.manager.remove_expired(now_ms)
        if now_ms == 200:
            assert removed == [1]
    assert removed == [1, 2]
    assert len(log.manager) == 0


def test_allow_non_zero_sequence_on_first_append_non_zero_epoch() -> None:
    log = new_log()
    assert log.code(header(producer_epoch=1, base_sequence=3, is_transactional=True)) == OK
    entry = log.manager.entry(PID)
    assert entry is not None
    assert (entry.producer_epoch, entry.first_seq, entry.current_txn_first_offset) == (1, 3, 0)


# --- the rules one by one -------------------------------------------------------------------------------


def test_check_append__in_order__accepted() -> None:
    log = new_log()
    for seq in range(0, 50, 5):
        assert log.code(header(base_sequence=seq, record_count=5)) == OK
    entry = log.manager.entry(PID)
    assert entry is not None
    assert (entry.first_seq, entry.last_seq) == (25, 49)
    assert len(entry.batches) == 5
    assert log.manager.map_end_offset == 50


def test_check_append__gap__out_of_order_and_nothing_appended() -> None:
    log = new_log()
    assert log.code(header(base_sequence=0)) == OK
    check, appended = log.produce([header(base_sequence=2)])
    assert check.error_code == OUT_OF_ORDER
    assert "current end sequence number" in check.error_message
    assert appended == []
    assert log.code(header(base_sequence=1)) == OK


def test_check_append__new_epoch__must_start_at_zero() -> None:
    log = new_log()
    assert log.code(header(producer_epoch=0, base_sequence=0, record_count=10)) == OK
    check = log.manager.check_append([header(producer_epoch=1, base_sequence=10)])
    assert check.error_code == OUT_OF_ORDER
    assert "new epoch" in check.error_message
    assert log.code(header(producer_epoch=1, base_sequence=0)) == OK
    entry = log.manager.entry(PID)
    assert entry is not None
    assert len(entry.batches) == 1


@pytest.mark.parametrize("base_sequence", [0, 1, 42, INT32_MAX - 3, INT32_MAX])
@pytest.mark.parametrize("producer_epoch", [0, 7])
def test_check_append__unknown_producer__any_sequence_accepted(
    base_sequence: int, producer_epoch: int
) -> None:
    log = new_log()
    assert log.code(header(producer_epoch=producer_epoch, base_sequence=base_sequence, record_count=4)) == OK


def test_check_append__sequence_wraps_max_to_zero() -> None:
    log = new_log()
    assert log.code(header(base_sequence=INT32_MAX - 1, record_count=2)) == OK
    assert log.code(header(base_sequence=0, record_count=3)) == OK
    assert log.code(header(base_sequence=3)) == OK
    # A retry of the batch that ended at MAX is still recognised.
    assert (
        log.manager.check_append([header(base_sequence=INT32_MAX - 1, record_count=2)]).duplicate is not None
    )


def test_check_append__batch_wrapping_inside__retry_is_duplicate() -> None:
    log = new_log()
    assert log.code(header(base_sequence=INT32_MAX - 5, record_count=3)) == OK
    wrapping = header(base_sequence=INT32_MAX - 2, record_count=6)
    assert wrapping.last_sequence == 2
    check, (appended,) = log.produce([wrapping])
    assert check.error_code == OK
    assert log.code(header(base_sequence=3)) == OK
    duplicate = log.manager.check_append([wrapping]).duplicate
    assert duplicate is not None
    assert (duplicate.first_seq, duplicate.last_seq) == (INT32_MAX - 2, 2)
    assert duplicate.first_offset == appended.base_offset


def test_check_append__two_batches_one_producer__second_checked_against_first() -> None:
    log = new_log()
    assert log.code(header(base_sequence=0, record_count=2)) == OK
    # In order across the two batches.
    assert log.code(header(base_sequence=2, record_count=3), header(base_sequence=5)) == OK
    # The second one leaves a gap after the first: the whole request fails, nothing appended.
    check, appended = log.produce([header(base_sequence=6), header(base_sequence=8)])
    assert check.error_code == OUT_OF_ORDER
    assert appended == []
    # The second repeats the first: not in sequence with it (and not a stored duplicate).
    assert log.code(header(base_sequence=6), header(base_sequence=6)) == OUT_OF_ORDER
    # An epoch bump in the second batch must start at 0.
    assert log.code(header(base_sequence=6), header(producer_epoch=1, base_sequence=1)) == OUT_OF_ORDER
    assert log.code(header(base_sequence=6), header(producer_epoch=1, base_sequence=0)) == OK
    # The second batch may not go back to the first's (older) epoch.
    assert log.code(header(producer_epoch=2, base_sequence=0), header(producer_epoch=1, base_sequence=1)) == (
        INVALID_EPOCH
    )
    entry = log.manager.entry(PID)
    assert entry is not None
    assert entry.producer_epoch == 1
    assert [(b.first_seq, b.last_seq) for b in entry.batches] == [(0, 0)]


def test_check_append__two_batches_unknown_producer__second_not_sequence_checked() -> None:
    # Kafka tests currentEntry's epoch (none) rather than the request's first batch: with no stored
    # state the second batch is accepted at any sequence of the same epoch.
    log = new_log()
    assert log.code(header(base_sequence=10), header(base_sequence=50)) == OK
    # But a bump inside the request still has to start at 0.
    assert log.code(
        header(producer_id=2, base_sequence=10), header(producer_id=2, producer_epoch=1, base_sequence=3)
    ) == (OUT_OF_ORDER)


def test_check_append__duplicate_in_second_batch__whole_request_is_the_duplicate() -> None:
    # UnifiedLog returns at the first batch that matches a stored one, even after a valid new batch.
    log = new_log()
    original = header(base_sequence=0)
    _, (appended,) = log.produce([original])
    check = log.manager.check_append([header(base_sequence=1), original])
    assert check.error_code == OK
    assert check.duplicate is not None
    assert check.duplicate.last_offset == appended.last_offset


def test_check_append__non_transactional_after_transactional_in_one_request__invalid_txn_state() -> None:
    log = new_log()
    check = log.manager.check_append(
        [header(base_sequence=0, is_transactional=True), header(base_sequence=1)]
    )
    assert check.error_code == ErrorCode.INVALID_TXN_STATE


def test_check_append__batches_without_producer_id__not_checked() -> None:
    log = new_log()
    plain = header(producer_id=-1, producer_epoch=-1, base_sequence=-1)
    assert log.code(plain, plain) == OK
    assert len(log.manager) == 0
    assert log.manager.map_end_offset == 2


def test_check_append__control_batch_from_client__invalid_record() -> None:
    log = new_log()
    assert log.code(header(is_control=True)) == ErrorCode.INVALID_RECORD


def test_check_append__producers_are_independent() -> None:
    log = new_log()
    assert log.code(header(producer_id=1, base_sequence=0), header(producer_id=2, base_sequence=7)) == OK
    assert log.code(header(producer_id=2, base_sequence=8), header(producer_id=1, base_sequence=1)) == OK
    assert (
        log.code(header(producer_id=2, base_sequence=9), header(producer_id=1, base_sequence=3))
        == OUT_OF_ORDER
    )


def test_on_append__records_max_timestamp_and_broker_write_time() -> None:
    log = new_log()
    request = read_batch_header(
        build_batch(
            [Record(None, b"a"), Record(None, b"b", timestamp=9_000)],
            timestamp_ms=5_000,
            producer_id=PID,
            producer_epoch=0,
            base_sequence=0,
        )
    )
    assert log.code(request, now_ms=123) == OK
    entry = log.manager.entry(PID)
    assert entry is not None
    assert entry.last_timestamp_ms == 9_000
    assert entry.batches[-1].timestamp_ms == 9_000
    assert entry.last_write_ms == 123


@pytest.mark.parametrize(("duplicate_window", "older_retry"), [(0, OUT_OF_ORDER), (10_000_000, DUPLICATE)])
def test_retained_batches_one__keeps_only_the_latest_batch(
    duplicate_window: int, older_retry: ErrorCode
) -> None:
    log = new_log(retained_batches=1, duplicate_window=duplicate_window)
    sent = [header(base_sequence=i) for i in range(3)]
    for request in sent:
        assert log.code(request) == OK
    entry = log.manager.entry(PID)
    assert entry is not None
    assert list(entry.batches) == [BatchMetadata(2, 2, 0, 1_000)]
    assert log.manager.check_append([sent[2]]).duplicate is not None
    # Without a window one batch is Kafka's rules with N=1; with one, older sequences are duplicates.
    assert log.code(sent[1]) == older_retry


def test_replay__rebuilds_the_state_on_append_built() -> None:
    log = new_log(retained_batches=3)
    requests = [
        [header(producer_id=1, base_sequence=0, record_count=3, timestamp_ms=10)],
        [header(producer_id=2, base_sequence=INT32_MAX, record_count=2, is_transactional=True)],
        [header(producer_id=-1, producer_epoch=-1, base_sequence=-1)],
        [header(producer_id=1, base_sequence=3), header(producer_id=1, base_sequence=4, record_count=4)],
        [header(producer_id=1, producer_epoch=1, base_sequence=0, timestamp_ms=30)],
        [
            header(producer_id=1, producer_epoch=1, base_sequence=1),
            header(producer_id=2, base_sequence=1, is_transactional=True),
        ],
    ]
    for request in requests:
        assert log.produce(request, now_ms=500)[0].error_code == OK
    rebuilt = ProducerStateManager(retained_batches=3)
    for h in log.appended:
        rebuilt.replay(h, now_ms=500)
    assert rebuilt.map_end_offset == log.manager.map_end_offset == log.log_end_offset
    assert rebuilt.active_producers() == log.manager.active_producers()
    assert len(rebuilt) == 2


def test_remove_expired__moving_clock() -> None:
    log = new_log(producer_id_expiration_ms=1_000)
    assert log.code(header(producer_id=1, base_sequence=0), now_ms=0) == OK
    assert log.code(header(producer_id=2, base_sequence=0), now_ms=400) == OK
    assert log.code(header(producer_id=1, base_sequence=1), now_ms=800) == OK
    assert log.manager.remove_expired(999) == []
    assert log.manager.remove_expired(1_399) == []
    assert log.manager.remove_expired(1_400) == [2]
    assert log.manager.remove_expired(1_799) == []
    assert log.manager.remove_expired(1_800) == [1]
    assert [e.producer_id for e in log.manager.active_producers()] == []


# --- KIP-758: one batch and a duplicate window (the default) -------------------------------------------


def kip758(window: int = 10_000_000) -> FakeLog:
    return FakeLog(ProducerStateManager(duplicate_window=window))


def test_kip758__is_the_default() -> None:
    manager = ProducerStateManager()
    assert (manager.retained_batches, manager.duplicate_window) == (1, 10_000_000)
    # The window belongs to one-batch mode: five batches is Kafka's classic broker whatever it says.
    assert ProducerStateManager(retained_batches=CLASSIC, duplicate_window=7).duplicate_window == 0


def test_kip758__exact_retry_of_latest__original_offsets() -> None:
    log = kip758()
    for seq in range(0, 9, 3):
        assert log.code(header(base_sequence=seq, record_count=3)) == OK
    check, appended = log.produce([header(base_sequence=6, record_count=3)])
    assert appended == []
    assert check.duplicate is not None
    assert (check.duplicate.first_offset, check.duplicate.last_offset) == (6, 8)


@pytest.mark.parametrize(("first", "count"), [(0, 3), (3, 3), (0, 9), (4, 1), (7, 2), (0, 1)])
def test_kip758__older_sequences_within_window__duplicate_sequence_number(first: int, count: int) -> None:
    log = kip758()
    for seq in range(0, 9, 3):
        assert log.code(header(base_sequence=seq, record_count=3)) == OK
    check, appended = log.produce([header(base_sequence=first, record_count=count)])
    assert check.error_code == DUPLICATE and check.duplicate is None and appended == []
    assert "KIP-758" in check.error_message
    assert log.log_end_offset == 9


@pytest.mark.parametrize(("first", "count"), [(7, 3), (8, 2), (10, 1), (11, 1), (INT32_MAX, 1)])
def test_kip758__runs_past_latest_or_gap__out_of_order(first: int, count: int) -> None:
    log = kip758()
    for seq in range(0, 9, 3):
        assert log.code(header(base_sequence=seq, record_count=3)) == OK
    # INT32_MAX lies 9 sequences behind 8 through the wrap: KIP-758 defines the window modulo 2**31,
    # so it counts as appended (46) even though this epoch never reached it.
    expected = DUPLICATE if first == INT32_MAX else OUT_OF_ORDER
    assert log.code(header(base_sequence=first, record_count=count)) == expected


def test_kip758__window_edge() -> None:
    log = kip758(window=10)
    assert log.code(header(base_sequence=0, record_count=20)) == OK  # latest = 19
    assert log.code(header(base_sequence=10)) == DUPLICATE  # 9 behind
    assert log.code(header(base_sequence=9)) == OUT_OF_ORDER  # 10 behind: outside the window
    assert log.code(header(base_sequence=10, record_count=10)) == DUPLICATE  # 10..19
    assert log.code(header(base_sequence=9, record_count=11)) == OUT_OF_ORDER


def test_kip758__window_wraps_int_max_to_zero() -> None:
    log = kip758()
    assert log.code(header(base_sequence=INT32_MAX - 4, record_count=3)) == OK  # ..MAX-2
    assert log.code(header(base_sequence=INT32_MAX - 1, record_count=4)) == OK  # MAX-1, MAX, 0, 1
    assert log.code(header(base_sequence=2)) == OK  # latest = 2, past the wrap
    assert log.code(header(base_sequence=INT32_MAX - 4, record_count=3)) == DUPLICATE
    assert log.code(header(base_sequence=INT32_MAX - 1, record_count=4)) == DUPLICATE
    assert log.code(header(base_sequence=0, record_count=2)) == DUPLICATE
    duplicate = log.manager.check_append([header(base_sequence=2)]).duplicate
    assert duplicate is not None and duplicate.first_offset == 7
    assert log.code(header(base_sequence=4)) == OUT_OF_ORDER
    assert log.code(header(base_sequence=3)) == OK


def test_kip758__epoch_rules_unchanged() -> None:
    log = kip758()
    assert log.code(header(producer_epoch=1, base_sequence=0, record_count=5)) == OK
    assert log.code(header(producer_epoch=0, base_sequence=0)) == INVALID_EPOCH
    assert log.code(header(producer_epoch=2, base_sequence=3)) == OUT_OF_ORDER  # new epoch, not 0
    assert log.code(header(producer_epoch=2, base_sequence=0)) == OK
    # The window is per epoch: epoch 1's sequences are not duplicates of epoch 2's.
    assert log.code(header(producer_epoch=1, base_sequence=2)) == INVALID_EPOCH


def test_kip758__state_loaded_from_a_snapshot__window_still_applies() -> None:
    log = kip758()
    for seq in range(0, 12, 3):
        assert log.code(header(base_sequence=seq, record_count=3)) == OK
    reloaded = ProducerStateManager()
    reloaded.load_snapshot(log.manager.snapshot_entries(), log.manager.map_end_offset, now_ms=0)
    assert reloaded.entry(PID) == log.manager.entry(PID)
    after = FakeLog(reloaded, log_end_offset=12)
    assert after.code(header(base_sequence=3, record_count=3)) == DUPLICATE
    duplicate = reloaded.check_append([header(base_sequence=9, record_count=3)]).duplicate
    assert duplicate is not None and duplicate.first_offset == 9
    assert after.code(header(base_sequence=13)) == OUT_OF_ORDER
    assert after.code(header(base_sequence=12)) == OK


def test_kip758__a_transactional_window_ends_at_its_open_transaction() -> None:
    # Fault campaign seed 71: a transaction's batch (sequences 250..259) was written, but librdkafka
    # never learned it (the connection was destroyed) and aborted the transaction. In the same epoch it
    # then sent sequences 250..251 again with the next transaction's records. The window answered 46,
    # librdkafka took them as written, and a committed transaction lacked them. Kafka answers 45.
    log = kip758()
    txn = {"is_transactional": True}
    assert log.code(header(base_sequence=240, record_count=10, **txn)) == OK  # T37: 240..249, open
    log.manager.replay(header(is_control=True, base_offset=log.log_end_offset), now_ms=0)  # committed
    log.log_end_offset += 1
    assert log.code(header(base_sequence=250, record_count=10, **txn)) == OK  # T38: 250..259
    log.manager.replay(header(is_control=True, base_offset=log.log_end_offset), now_ms=0)  # aborted
    log.log_end_offset += 1
    assert log.code(header(base_sequence=250, record_count=2, **txn)) == OUT_OF_ORDER
    assert log.code(header(base_sequence=245, record_count=2, **txn)) == OUT_OF_ORDER
    # An exact retry of the latest batch keeps its original offsets, as Kafka's findDuplicateBatch.
    duplicate = log.manager.check_append([header(base_sequence=250, record_count=10, **txn)]).duplicate
    assert duplicate is not None and duplicate.first_offset == 11
    # Inside an open transaction the window covers its own earlier batches, and only those.
    assert log.code(header(base_sequence=260, record_count=3, **txn)) == OK  # T39: 260..262
    assert log.code(header(base_sequence=263, record_count=3, **txn)) == OK  # 263..265
    assert log.code(header(base_sequence=260, record_count=2, **txn)) == DUPLICATE
    assert log.code(header(base_sequence=258, record_count=4, **txn)) == OUT_OF_ORDER
    # After a restart the open transaction's first sequence is unknown: exact retries only.
    reloaded = ProducerStateManager()
    reloaded.load_snapshot(log.manager.snapshot_entries(), log.manager.map_end_offset, now_ms=0)
    assert reloaded.check_append([header(base_sequence=263, record_count=3, **txn)]).duplicate is not None
    after = reloaded.check_append([header(base_sequence=260, record_count=2, **txn)])
    assert after.error_code == OUT_OF_ORDER
    # A non-transactional producer keeps the whole window.
    assert log.code(header(producer_id=7, base_sequence=0, record_count=10)) == OK
    assert log.code(header(producer_id=7, base_sequence=2, record_count=2)) == DUPLICATE


def test_classic_mode__never_answers_duplicate_sequence_number() -> None:
    log = new_log(retained_batches=CLASSIC)
    for seq in range(10):
        assert log.code(header(base_sequence=seq)) == OK
    assert [log.code(header(base_sequence=seq)) for seq in range(10)] == [OUT_OF_ORDER] * 5 + [OK] * 5


def test_expired_producer__any_sequence_accepted() -> None:
    log = kip758()
    assert log.code(header(base_sequence=0, record_count=5), now_ms=0) == OK
    assert log.manager.remove_expired(EXPIRATION_MS) == [PID]
    assert log.code(header(base_sequence=77), now_ms=EXPIRATION_MS) == OK
    assert log.code(header(base_sequence=3), now_ms=EXPIRATION_MS) == DUPLICATE  # behind 77 now


def test_compact_rows__many_producers_insert_remove_and_lookup() -> None:
    # The open-addressing table across growth, backward-shift deletes and row moves.
    manager = ProducerStateManager(producer_id_expiration_ms=100)
    log = FakeLog(manager)
    pids = list(range(10_000, 10_600)) + [2**62 + i * 2**40 for i in range(50)]
    for i, pid in enumerate(pids):
        assert log.code(header(producer_id=pid, base_sequence=i), now_ms=i % 2 * 1_000) == OK
    assert len(manager) == len(pids)
    removed = manager.remove_expired(100)  # the even-indexed producers wrote at 0
    assert sorted(removed) == sorted(pids[0::2])
    for i, pid in enumerate(pids):
        entry = manager.entry(pid)
        if i % 2:
            assert entry is not None and entry.last_seq == i and entry.last_data_offset == i
        else:
            assert entry is None
    assert {e.producer_id for e in manager.active_producers()} == set(pids[1::2])


# --- property: random producer behaviour against a reference model -----------------------------------


@dataclass
class ModelProducer:
    producer_epoch: int
    # (first_seq, last_seq, first_offset, last_offset, timestamp_ms) of every batch in this epoch.
    batches: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    last_write_ms: int = 0


def wrap(sequence: int) -> int:
    return sequence - (INT32_MAX + 1) if sequence > INT32_MAX else sequence


def next_expected(last_seq: int) -> int:
    return 0 if last_seq == INT32_MAX else last_seq + 1


def sequences_back_from(latest: int, window: int) -> set[int]:
    """The ``window`` sequences ending at ``latest``, walking back through Int.MAX -> 0."""
    return {latest - k if latest - k >= 0 else latest - k + INT32_MAX + 1 for k in range(window)}


class ReferenceModel:
    """Kafka's rules restated directly: dedupe over the last N batches, expected next sequence; with
    one batch and a window (KIP-758), a batch whose sequences all lie among the last ``window``
    sequences up to the latest is an older duplicate (46)."""

    def __init__(self, retained_batches: int, expiration_ms: int, window: int = 0) -> None:
        self.retained_batches = retained_batches
        self.window = window if retained_batches == 1 else 0
        self.expiration_ms = expiration_ms
        self.producers: dict[int, ModelProducer] = {}
        self.log_end_offset = 0

    def verdict(
        self, request: list[tuple[int, int, int, int]]
    ) -> tuple[ErrorCode, tuple[int, int, int] | None]:
        """(error, (first_offset, last_offset, timestamp) of the duplicate or None)."""
        # pid -> (epoch, last sequence of this request's batches or None)
        seen: dict[int, tuple[int, int | None]] = {}
        for pid, epoch, first, count in request:
            last = wrap(first + count - 1)
            known = self.producers.get(pid)
            if known is not None and known.producer_epoch == epoch:
                for b_first, b_last, o_first, o_last, ts in known.batches[-self.retained_batches :]:
                    if (b_first, b_last) == (first, last):
                        return OK, (o_first, o_last, ts)
                if self.window and known.batches:
                    recent = sequences_back_from(known.batches[-1][1], self.window)
                    if all(wrap(first + i) in recent for i in range(count)):
                        return DUPLICATE, None
            seen_epoch, seen_last = seen.get(pid, (known.producer_epoch if known else -1, None))
            if epoch < seen_epoch:
                return INVALID_EPOCH, None
            if epoch > seen_epoch:
                if seen_epoch != -1 and first != 0:
                    return OUT_OF_ORDER, None
            elif known is not None:
                if seen_last is None:
                    seen_last = (
                        known.batches[-1][1] if known.batches and known.producer_epoch == epoch else -1
                    )
                if first != next_expected(seen_last):
                    return OUT_OF_ORDER, None
            seen[pid] = (epoch, last)
        return OK, None

    def append(self, request: list[tuple[int, int, int, int]], timestamp_ms: int, now_ms: int) -> None:
        for pid, epoch, first, count in request:
            producer = self.producers.setdefault(pid, ModelProducer(epoch))
            if producer.producer_epoch != epoch:
                producer.producer_epoch = epoch
                producer.batches = []
            offset = self.log_end_offset
            producer.batches.append(
                (first, wrap(first + count - 1), offset, offset + count - 1, timestamp_ms)
            )
            producer.last_write_ms = now_ms
            self.log_end_offset += count

    def expire(self, now_ms: int) -> set[int]:
        gone = {p for p, m in self.producers.items() if now_ms - m.last_write_ms >= self.expiration_ms}
        for pid in gone:
            del self.producers[pid]
        return gone


@dataclass
class Client:
    producer_epoch: int
    next_seq: int
    sent: list[tuple[int, int, int]] = field(default_factory=list)  # (epoch, first_seq, count)


PIDS = st.sampled_from([1, 2, 3])
COUNTS = st.integers(min_value=1, max_value=4)
EXPIRATION_MS_SMALL = 10_000


class ProducerStateMachine(RuleBasedStateMachine):
    @initialize(
        retained_batches=st.sampled_from([1, 1, 1, 2, 5, 6]),
        window=st.sampled_from([0, 3, 7]),
        start_seqs=st.lists(st.sampled_from([0, 0, 9, INT32_MAX - 4, INT32_MAX]), min_size=3, max_size=3),
    )
    def start(self, retained_batches: int, window: int, start_seqs: list[int]) -> None:
        # A small window so that retries fall both inside it (46) and beyond it (45).
        self.manager = ProducerStateManager(
            retained_batches=retained_batches,
            producer_id_expiration_ms=EXPIRATION_MS_SMALL,
            duplicate_window=window,
        )
        self.model = ReferenceModel(retained_batches, EXPIRATION_MS_SMALL, window)
        self.clients = {pid: Client(0, seq) for pid, seq in zip([1, 2, 3], start_seqs, strict=True)}
        self.now_ms = 0
        self.history: list[tuple[str, list[BatchHeader], int]] = []

    def send(self, request: list[tuple[int, int, int, int]]) -> None:
        timestamp_ms = 1_000 + self.now_ms
        headers = [
            header(pid, epoch, first, count, timestamp_ms=timestamp_ms)
            for pid, epoch, first, count in request
        ]
        expected_code, expected_duplicate = self.model.verdict(request)
        check = self.manager.check_append(headers)
        assert check.error_code == expected_code, (request, check)
        if expected_duplicate is None:
            assert check.duplicate is None
        else:
            assert check.duplicate is not None
            duplicate = check.duplicate
            assert (
                duplicate.first_offset,
                duplicate.last_offset,
                duplicate.timestamp_ms,
            ) == expected_duplicate
        if check.error_code != OK or check.duplicate is not None:
            return
        assigned = []
        offset = self.model.log_end_offset
        for h in headers:
            assigned.append(h._replace(base_offset=offset))
            offset += h.record_count
        self.manager.on_append(assigned, self.now_ms)
        self.history.append(("append", assigned, self.now_ms))
        self.model.append(request, timestamp_ms, self.now_ms)
        for pid, epoch, first, count in request:
            client = self.clients[pid]
            client.sent.append((epoch, first, count))
            if epoch == client.producer_epoch:
                client.next_seq = wrap(first + count)

    @rule(pid=PIDS, count=COUNTS)
    def send_in_order(self, pid: int, count: int) -> None:
        client = self.clients[pid]
        self.send([(pid, client.producer_epoch, client.next_seq, count)])

    @rule(pid=PIDS, count1=COUNTS, count2=COUNTS, gap=st.sampled_from([0, 0, 1, -1]))
    def send_two_batches(self, pid: int, count1: int, count2: int, gap: int) -> None:
        client = self.clients[pid]
        first = client.next_seq
        second = wrap(first + count1 + gap) if first + count1 + gap >= 0 else 0
        self.send([(pid, client.producer_epoch, first, count1), (pid, client.producer_epoch, second, count2)])

    @rule(pid=PIDS, age=st.integers(min_value=1, max_value=8))
    def retry(self, pid: int, age: int) -> None:
        client = self.clients[pid]
        if len(client.sent) >= age:
            epoch, first, count = client.sent[-age]
            self.send([(pid, epoch, first, count)])

    @rule(pid=PIDS, shift=st.integers(min_value=1, max_value=3), count=COUNTS)
    def overlap(self, pid: int, shift: int, count: int) -> None:
        client = self.clients[pid]
        first = client.next_seq - shift
        first = first if first >= 0 else INT32_MAX + 1 + first
        self.send([(pid, client.producer_epoch, first, count)])

    @rule(pid=PIDS, gap=st.integers(min_value=1, max_value=3), count=COUNTS)
    def send_with_gap(self, pid: int, gap: int, count: int) -> None:
        client = self.clients[pid]
        self.send([(pid, client.producer_epoch, wrap(client.next_seq + gap), count)])

    @rule(pid=PIDS, start_seq=st.sampled_from([0, 0, 0, 5]), count=COUNTS)
    def bump_epoch(self, pid: int, start_seq: int, count: int) -> None:
        client = self.clients[pid]
        client.producer_epoch += 1
        client.next_seq = start_seq
        self.send([(pid, client.producer_epoch, start_seq, count)])

    @rule(pid=PIDS, count=COUNTS)
    def send_stale_epoch(self, pid: int, count: int) -> None:
        client = self.clients[pid]
        if client.producer_epoch > 0:
            self.send([(pid, client.producer_epoch - 1, client.next_seq, count)])

    @rule(elapsed_ms=st.sampled_from([1, 1_000, 4_999, 9_999, 10_000]))
    def advance_clock_and_expire(self, elapsed_ms: int) -> None:
        self.now_ms += elapsed_ms
        removed = self.manager.remove_expired(self.now_ms)
        assert len(removed) == len(set(removed))
        assert set(removed) == self.model.expire(self.now_ms)
        self.history.append(("expire", [], self.now_ms))

    @invariant()
    def state_matches_model(self) -> None:
        if not hasattr(self, "manager"):
            return
        assert self.manager.map_end_offset == self.model.log_end_offset
        assert len(self.manager) == len(self.model.producers)
        for pid, expected in self.model.producers.items():
            entry = self.manager.entry(pid)
            assert entry is not None
            assert entry.producer_epoch == expected.producer_epoch
            assert len(entry.batches) <= self.manager.retained_batches
            retained = expected.batches[-self.manager.retained_batches :]
            assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches] == [
                r[:4] for r in retained
            ]

    def teardown(self) -> None:
        if not hasattr(self, "manager"):
            return
        # Replaying the log (with expirations at the same moments) rebuilds exactly the same state.
        rebuilt = ProducerStateManager(
            retained_batches=self.manager.retained_batches,
            producer_id_expiration_ms=EXPIRATION_MS_SMALL,
            duplicate_window=self.manager.duplicate_window,
        )
        for kind, headers, now_ms in self.history:
            if kind == "append":
                for h in headers:
                    rebuilt.replay(h, now_ms)
            else:
                rebuilt.remove_expired(now_ms)
        assert sorted(rebuilt.active_producers(), key=_by_id) == sorted(
            self.manager.active_producers(), key=_by_id
        )


def _by_id(entry: ProducerStateEntry) -> int:
    return entry.producer_id


ProducerStateMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_producer_state_machine = ProducerStateMachine.TestCase
