"""The pure transaction coordinator: kafka-facts.md §8.7 (TransactionMetadataTest) and §8.8
(TransactionCoordinatorTest, KIP-360 parts), plus what pykraft does on purpose differently (the last
epoch survives a reload) and the full transaction cycle with markers."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.coordinator.offsets_records import OFFSETS_TOPIC, partition_for
from pykraft.coordinator.txn_coordinator import (
    EPOCH_EXHAUSTED,
    MarkerJob,
    TransactionCoordinator,
    TxnConfig,
    TxnMetadata,
    TxnOutcome,
    TxnState,
    TxnWrite,
)
from pykraft.coordinator.txn_records import (
    TxnLogValue,
    TxnRecordError,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from pykraft.core.errors import ErrorCode

TXN = "txn-1"
TIMEOUT_MS = 60_000
NOW = 1_000_000


class Harness:
    """A coordinator owning every partition, with a log: every write is 'appended' (kept) and
    applied unless told to fail, so a reload replays exactly what was written."""

    def __init__(self, partitions: int = 4) -> None:
        self.config = TxnConfig(transaction_state_num_partitions=partitions, offsets_topic_num_partitions=3)
        self.coordinator = self._fresh(epoch=0)
        self.log: list[TxnWrite] = []
        self.ids = itertools.count(1000)
        self.markers: list[MarkerJob] = []

    def _fresh(self, epoch: int) -> TransactionCoordinator:
        coordinator = TransactionCoordinator(self.config)
        for p in range(self.config.transaction_state_num_partitions):
            coordinator.begin_load(p, epoch)
            coordinator.finish_load(p)
        return coordinator

    def new_id(self) -> tuple[ErrorCode, int]:
        return ErrorCode.NONE, next(self.ids)

    def settle(self, outcome: TxnOutcome, *, fail: bool = False) -> TxnOutcome:
        if outcome.write is not None:
            if not fail:
                self.log.append(outcome.write)
            self.markers += self.coordinator.complete_write(
                outcome.write, ErrorCode.NOT_ENOUGH_REPLICAS if fail else ErrorCode.NONE
            )
        return outcome

    def init(self, pid: int = -1, epoch: int = -1, *, fail: bool = False, txn: str = TXN) -> TxnOutcome:
        return self.settle(
            self.coordinator.init_producer_id(txn, TIMEOUT_MS, pid, epoch, NOW, self.new_id), fail=fail
        )

    def reload(self) -> list[MarkerJob]:
        """A coordinator failover: a new coordinator replays the log at a higher coordinator epoch."""
        coordinator = TransactionCoordinator(self.config)
        jobs = []
        for p in range(self.config.transaction_state_num_partitions):
            coordinator.begin_load(p, 1)
            for w in self.log:
                if w.partition == p:
                    coordinator.replay(p, w.key, w.value)
            jobs += coordinator.finish_load(p)
        self.coordinator = coordinator
        return jobs

    def md(self, txn: str = TXN) -> TxnMetadata:
        return self.coordinator.transactions[txn]

    def set_state(self, epoch: int, last_epoch: int = -1, state: TxnState = TxnState.EMPTY) -> int:
        """Put TXN at a given epoch (as if persisted) and return its producer id."""
        self.init()
        md = self.md()
        md.producer_epoch, md.last_producer_epoch, md.state = epoch, last_epoch, state
        if state == TxnState.ONGOING:
            md.partitions = {("t", 0)}
            md.txn_start_timestamp_ms = NOW
        return md.producer_id


def answer(outcome: TxnOutcome) -> tuple[ErrorCode, int, int]:
    if outcome.error_code != ErrorCode.NONE:
        return outcome.error_code, -1, -1
    if outcome.write is not None and outcome.write.answer != ErrorCode.NONE:
        return outcome.write.answer, -1, -1
    return ErrorCode.NONE, outcome.producer_id, outcome.producer_epoch


# --- §8.7 TransactionMetadataTest ----------------------------------------------------------------------


def test_initialize_epoch_of_a_new_id_is_zero_with_no_last_epoch() -> None:
    h = Harness()
    error, pid, epoch = answer(h.init())
    assert (error, epoch) == (ErrorCode.NONE, 0)
    assert h.md().last_producer_epoch == -1 and pid == 1000


def test_normal_bump_without_expected_epoch() -> None:
    h = Harness()
    pid = h.set_state(735)
    assert answer(h.init()) == (ErrorCode.NONE, pid, 736)
    assert h.md().last_producer_epoch == -1


def test_bump_with_current_epoch_remembers_it_as_last_epoch() -> None:
    h = Harness()
    pid = h.set_state(735)
    assert answer(h.init(pid, 735)) == (ErrorCode.NONE, pid, 736)
    assert h.md().last_producer_epoch == 735


def test_bump_with_last_epoch_is_a_retry_and_changes_nothing() -> None:
    h = Harness()
    pid = h.set_state(735, last_epoch=734)
    outcome = h.init(pid, 734)
    assert answer(outcome) == (ErrorCode.NONE, pid, 735) and outcome.write is None


def test_bump_with_a_fenced_epoch() -> None:
    h = Harness()
    pid = h.set_state(735, last_epoch=734)
    assert answer(h.init(pid, 733))[0] == ErrorCode.PRODUCER_FENCED


def test_exhausted_epoch_rotates_the_producer_id() -> None:
    h = Harness()
    pid = h.set_state(EPOCH_EXHAUSTED)
    error, new_pid, epoch = answer(h.init(pid, EPOCH_EXHAUSTED))
    assert (error, epoch) == (ErrorCode.NONE, 0) and new_pid != pid
    md = h.md()
    assert (md.last_producer_id, md.last_producer_epoch) == (pid, EPOCH_EXHAUSTED)


def test_fence_at_an_exhausted_epoch_uses_the_last_epoch_32767() -> None:
    h = Harness()
    h.set_state(EPOCH_EXHAUSTED, state=TxnState.ONGOING)
    outcome = h.init()
    assert answer(outcome) == (ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
    md = h.md()
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (TxnState.PREPARE_ABORT, 32767, -1)


def test_attempted_bump_on_newly_created_metadata_gives_epoch_zero() -> None:
    h = Harness()
    error, _, epoch = answer(h.init(4242, 735))
    assert (error, epoch) == (ErrorCode.NONE, 0)
    assert h.md().last_producer_epoch == -1


def test_state_ids_and_names() -> None:
    from pykraft.coordinator.txn_coordinator import STATE_NAMES

    assert [int(s) for s in TxnState] == list(range(8))
    assert STATE_NAMES[TxnState.PREPARE_EPOCH_FENCE] == "PrepareEpochFence"
    assert set(STATE_NAMES) == set(TxnState)


# --- §8.8 TransactionCoordinatorTest (KIP-360 parts) ---------------------------------------------------


def test_empty_transactional_id_and_bad_timeouts() -> None:
    h = Harness()
    c = h.coordinator
    assert c.init_producer_id("", TIMEOUT_MS, -1, -1, NOW, h.new_id).error_code == ErrorCode.INVALID_REQUEST
    assert (
        c.init_producer_id(TXN, 0, -1, -1, NOW, h.new_id).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    )
    too_long = h.config.transaction_max_timeout_ms + 1
    assert c.init_producer_id(TXN, too_long, -1, -1, NOW, h.new_id).error_code == (
        ErrorCode.INVALID_TRANSACTION_TIMEOUT
    )
    # Producer id and epoch are both given or both absent.
    assert c.init_producer_id(TXN, TIMEOUT_MS, 5, -1, NOW, h.new_id).error_code == ErrorCode.INVALID_REQUEST


def test_not_coordinator_and_loading() -> None:
    config = TxnConfig(transaction_state_num_partitions=1)
    c = TransactionCoordinator(config)
    new_id = lambda: (ErrorCode.NONE, 1)  # noqa: E731
    assert c.init_producer_id(TXN, TIMEOUT_MS, -1, -1, NOW, new_id).error_code == ErrorCode.NOT_COORDINATOR
    c.begin_load(0, 3)
    assert c.init_producer_id(TXN, TIMEOUT_MS, -1, -1, NOW, new_id).error_code == (
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    )
    c.finish_load(0)
    assert c.init_producer_id(TXN, TIMEOUT_MS, -1, -1, NOW, new_id).error_code == ErrorCode.NONE


def test_no_producer_id_available_is_answered() -> None:
    h = Harness()
    outcome = h.coordinator.init_producer_id(
        TXN, TIMEOUT_MS, -1, -1, NOW, lambda: (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1)
    )
    assert outcome.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_unknown_id_with_a_producer_id_and_epoch_gets_a_new_producer_id_at_epoch_zero() -> None:
    h = Harness()
    error, pid, epoch = answer(h.init(77, 3))
    assert (error, epoch) == (ErrorCode.NONE, 0) and pid != 77


def test_exhausted_epoch_without_expected_epoch_rotates() -> None:
    h = Harness()
    pid = h.set_state(EPOCH_EXHAUSTED)
    error, new_pid, epoch = answer(h.init())
    assert (error, epoch) == (ErrorCode.NONE, 0) and new_pid != pid
    assert h.md().last_producer_epoch == -1


@pytest.mark.parametrize("state", [TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT])
def test_init_waits_while_a_transaction_completes(state: TxnState) -> None:
    h = Harness()
    h.set_state(5, state=state)
    assert answer(h.init())[0] == ErrorCode.CONCURRENT_TRANSACTIONS


def test_init_during_an_ongoing_transaction_fences_and_aborts_it() -> None:
    h = Harness()
    pid = h.set_state(5, state=TxnState.ONGOING)
    outcome = h.init()
    assert answer(outcome) == (ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1)
    assert h.md().state == TxnState.PREPARE_ABORT and h.md().producer_epoch == 6
    assert h.markers == [MarkerJob(TXN, pid, 6, 0, False, frozenset({("t", 0)}))]
    complete = h.coordinator.markers_written(h.markers[0], NOW + 1)
    assert complete is not None
    h.settle(TxnOutcome(write=complete))
    assert h.md().state == TxnState.COMPLETE_ABORT
    # The retry now bumps (the old producer's epoch 5 is fenced).
    assert answer(h.init()) == (ErrorCode.NONE, pid, 7)
    assert answer(h.init(pid, 5))[0] == ErrorCode.PRODUCER_FENCED


def test_a_failed_fence_write_does_not_bump_twice() -> None:
    h = Harness()
    h.set_state(5, state=TxnState.ONGOING)
    h.init(fail=True)
    assert h.md().producer_epoch == 5 and h.md().state == TxnState.ONGOING and not h.md().pending
    outcome = h.init()
    assert outcome.write is not None and outcome.write.target is not None
    assert outcome.write.target.producer_epoch == 6


def test_a_pending_write_makes_other_requests_wait() -> None:
    h = Harness()
    outcome = h.coordinator.init_producer_id(TXN, TIMEOUT_MS, -1, -1, NOW, h.new_id)
    assert outcome.write is not None
    again = h.coordinator.init_producer_id(TXN, TIMEOUT_MS, -1, -1, NOW, h.new_id)
    assert again.error_code == ErrorCode.CONCURRENT_TRANSACTIONS


def test_kafka_written_values_without_a_last_epoch_fence_an_old_retry() -> None:
    """testInitProducerIdWithNoLastProducerData: what Kafka persisted cannot tell a retry apart."""
    h = Harness()
    pid = h.set_state(10)
    value = TxnLogValue(pid, 11, TIMEOUT_MS, int(TxnState.EMPTY), (), NOW, -1)  # no last epoch
    c = TransactionCoordinator(h.config)
    partition = c.partition_for(TXN)
    c.begin_load(partition, 1)
    c.replay(partition, encode_txn_key(TXN), encode_txn_value(value))
    c.finish_load(partition)
    outcome = c.init_producer_id(TXN, TIMEOUT_MS, pid, 10, NOW, h.new_id)
    assert outcome.error_code == ErrorCode.PRODUCER_FENCED


def test_a_different_producer_id_is_fenced() -> None:
    h = Harness()
    pid = h.set_state(10)
    assert answer(h.init(pid + 1, 10))[0] == ErrorCode.PRODUCER_FENCED


def test_current_epoch_bump_and_its_retry() -> None:
    h = Harness()
    pid = h.set_state(10, last_epoch=9)
    assert answer(h.init(pid, 10)) == (ErrorCode.NONE, pid, 11)
    assert answer(h.init(pid, 10)) == (ErrorCode.NONE, pid, 11)


def test_stale_current_epoch_after_another_producer_bumped() -> None:
    h = Harness()
    pid = h.set_state(10)
    assert answer(h.init()) == (ErrorCode.NONE, pid, 11)
    assert answer(h.init(pid, 10))[0] == ErrorCode.PRODUCER_FENCED


def test_retry_after_rotation_and_a_fenced_epoch_after_it() -> None:
    h = Harness()
    pid = h.set_state(EPOCH_EXHAUSTED)
    first = answer(h.init(pid, EPOCH_EXHAUSTED))
    assert first[0] == ErrorCode.NONE and first[2] == 0
    assert answer(h.init(pid, EPOCH_EXHAUSTED)) == first
    assert answer(h.init(pid, EPOCH_EXHAUSTED - 1))[0] == ErrorCode.PRODUCER_FENCED


def test_32767_consecutive_init_calls_rotate_and_the_last_retry_still_succeeds() -> None:
    """The issue's acceptance line: after the first call (epoch 0), 32,767 InitProducerId calls, each
    with the previous answer: 32,766 bumps reach the exhausted epoch, the next rotates."""
    h = Harness()
    _, pid, epoch = answer(h.init())
    first_pid = pid
    for _ in range(32_767):
        previous = (pid, epoch)
        error, pid, epoch = answer(h.init(*previous))
        assert error == ErrorCode.NONE
    assert pid != first_pid and epoch == 0 and previous == (first_pid, EPOCH_EXHAUSTED)
    assert answer(h.init(*previous)) == (ErrorCode.NONE, pid, 0)
    # ... after a coordinator failover too (the last epoch and producer id are in the log).
    h.reload()
    assert answer(h.init(*previous)) == (ErrorCode.NONE, pid, 0)


# --- KIP-360 as the seed designs it: the retry spans a failover -------------------------------------------


def test_a_bump_retried_after_a_coordinator_failover_gets_the_same_answer() -> None:
    h = Harness()
    _, pid, epoch = answer(h.init())
    bumped = answer(h.init(pid, epoch))
    assert bumped == (ErrorCode.NONE, pid, epoch + 1)
    h.reload()
    assert answer(h.init(pid, epoch)) == bumped
    # A third producer's epoch is still fenced.
    assert answer(h.init(pid, epoch - 1 if epoch else 99))[0] == ErrorCode.PRODUCER_FENCED


# --- transactions: add, end, markers, timeouts, expiration ---------------------------------------------


def begin(h: Harness, *partitions: tuple[str, int]) -> tuple[int, int]:
    _, pid, epoch = answer(h.init())
    outcome = h.settle(h.coordinator.add_partitions(TXN, pid, epoch, list(partitions), NOW))
    assert outcome.error_code == ErrorCode.NONE
    return pid, epoch


def test_add_partitions_checks_the_producer() -> None:
    h = Harness()
    pid, epoch = begin(h, ("t", 0))
    c = h.coordinator
    assert c.add_partitions("unknown", pid, epoch, [("t", 1)], NOW).error_code == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    assert c.add_partitions(TXN, pid + 1, epoch, [("t", 1)], NOW).error_code == (
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    assert c.add_partitions(TXN, pid, epoch - 1, [("t", 1)], NOW).error_code == ErrorCode.PRODUCER_FENCED
    # Partitions already in the transaction need no write.
    assert c.add_partitions(TXN, pid, epoch, [("t", 0)], NOW) == TxnOutcome(ErrorCode.NONE)
    h.settle(c.add_partitions(TXN, pid, epoch, [("t", 1)], NOW + 5))
    md = h.md()
    assert md.partitions == {("t", 0), ("t", 1)} and md.txn_start_timestamp_ms == NOW


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    h = Harness()
    pid, epoch = begin(h, ("t", 0))
    h.settle(h.coordinator.add_offsets(TXN, pid, epoch, "group-a", NOW))
    assert (OFFSETS_TOPIC, partition_for("group-a", 3)) in h.md().partitions


def test_verify_only_reports_each_partition() -> None:
    h = Harness()
    pid, epoch = begin(h, ("t", 0))
    error, verdict = h.coordinator.verify_partitions(TXN, pid, epoch, [("t", 0), ("t", 1)])
    assert error == ErrorCode.NONE
    assert verdict == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.INVALID_TXN_STATE}
    assert h.coordinator.verify_partitions(TXN, pid, epoch - 1, [("t", 0)])[0] == ErrorCode.PRODUCER_FENCED


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_prepares_writes_markers_then_completes(commit: bool) -> None:
    h = Harness()
    pid, epoch = begin(h, ("t", 0), ("u", 2))
    outcome = h.settle(h.coordinator.end_txn(TXN, pid, epoch, commit, NOW))
    assert answer(outcome)[0] == ErrorCode.NONE
    assert h.md().state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    (job,) = h.markers
    assert job == MarkerJob(TXN, pid, epoch, 0, commit, frozenset({("t", 0), ("u", 2)}))
    # Retries while completing, and a conflicting decision.
    assert h.coordinator.end_txn(TXN, pid, epoch, commit, NOW).error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.coordinator.end_txn(TXN, pid, epoch, not commit, NOW).error_code == ErrorCode.INVALID_TXN_STATE
    complete = h.coordinator.markers_written(job, NOW + 1)
    assert complete is not None
    h.settle(TxnOutcome(write=complete))
    md = h.md()
    assert md.state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    assert md.partitions == set()
    assert h.coordinator.end_txn(TXN, pid, epoch, commit, NOW).error_code == ErrorCode.NONE
    assert h.coordinator.end_txn(TXN, pid, epoch, not commit, NOW).error_code == ErrorCode.INVALID_TXN_STATE


def test_end_txn_invalid_mappings_and_states() -> None:
    h = Harness()
    _, pid, epoch = answer(h.init())
    c = h.coordinator
    assert c.end_txn("nope", pid, epoch, True, NOW).error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn(TXN, pid + 9, epoch, True, NOW).error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn(TXN, pid, epoch, True, NOW).error_code == ErrorCode.INVALID_TXN_STATE  # Empty


def test_a_reloaded_coordinator_finishes_prepared_transactions() -> None:
    h = Harness()
    pid, epoch = begin(h, ("t", 0))
    h.settle(h.coordinator.end_txn(TXN, pid, epoch, True, NOW))
    jobs = h.reload()
    assert jobs == [MarkerJob(TXN, pid, epoch, 1, True, frozenset({("t", 0)}))]
    # A job from the previous coordinator epoch completes nothing.
    assert h.coordinator.markers_written(h.markers[0], NOW) is None
    assert h.coordinator.markers_written(jobs[0], NOW) is not None


def test_timed_out_transactions_are_fenced_and_aborted() -> None:
    h = Harness()
    pid, epoch = begin(h, ("t", 0))
    assert h.coordinator.abort_timed_out(NOW + TIMEOUT_MS) == []
    (write,) = h.coordinator.abort_timed_out(NOW + TIMEOUT_MS + 1)
    h.settle(TxnOutcome(write=write))
    md = h.md()
    assert (md.state, md.producer_epoch) == (TxnState.PREPARE_ABORT, epoch + 1)
    assert h.markers[-1].commit is False and h.markers[-1].producer_epoch == epoch + 1
    # The producer's own EndTxn is now fenced.
    assert h.coordinator.end_txn(TXN, pid, epoch, True, NOW).error_code == ErrorCode.PRODUCER_FENCED


def test_idle_ids_expire_with_a_tombstone() -> None:
    h = Harness()
    answer(h.init())
    expiration = h.config.transactional_id_expiration_ms
    assert h.coordinator.expire_ids(NOW + expiration - 1) == []
    (write,) = h.coordinator.expire_ids(NOW + expiration)
    assert write.value is None
    h.settle(TxnOutcome(write=write))
    assert TXN not in h.coordinator.transactions
    h.reload()
    assert TXN not in h.coordinator.transactions
    # An ongoing transaction does not expire.
    begin(h, ("t", 0))
    assert h.coordinator.expire_ids(NOW + 10 * expiration) == []


def test_describe_and_list() -> None:
    h = Harness()
    pid, epoch = begin(h, ("t", 0))
    d = h.coordinator.describe(TXN)
    assert (d.error_code, d.state, d.producer_id, d.partitions) == (
        ErrorCode.NONE,
        "Ongoing",
        pid,
        (("t", 0),),
    )
    assert h.coordinator.describe("nope").error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert [t.transactional_id for t in h.coordinator.list_transactions({"Ongoing"})] == [TXN]
    assert h.coordinator.list_transactions({"Empty"}) == []
    assert h.coordinator.list_transactions(producer_ids={pid + 1}) == []
    assert len(h.coordinator.list_transactions(min_duration_ms=10, now_ms=NOW + 10)) == 1
    assert h.coordinator.list_transactions(min_duration_ms=10, now_ms=NOW + 9) == []


def test_unload_forgets_the_partitions_ids() -> None:
    h = Harness()
    begin(h, ("t", 0))
    partition = h.coordinator.partition_for(TXN)
    h.coordinator.unload(partition)
    assert TXN not in h.coordinator.transactions
    assert h.coordinator.coordinator_error(TXN) == ErrorCode.NOT_COORDINATOR


# --- the record codec -------------------------------------------------------------------------------------

VALUE = TxnLogValue(
    producer_id=42,
    producer_epoch=7,
    txn_timeout_ms=60000,
    state=int(TxnState.ONGOING),
    partitions=(("a", (0, 2)), ("b", (1,))),
    txn_last_update_timestamp_ms=NOW + 5,
    txn_start_timestamp_ms=NOW,
    last_producer_id=41,
    last_producer_epoch=32766,
)


def test_value_round_trips_and_matches_kafkas_layout() -> None:
    data = encode_txn_value(VALUE)
    assert decode_txn_value(data) == VALUE
    # version 1, then Kafka's fields in order.
    assert data[:2] == b"\x00\x01" and data[2:10] == (42).to_bytes(8, "big")
    empty = TxnLogValue(42, 7, 60000, 0, (), NOW, -1)
    assert decode_txn_value(encode_txn_value(empty)) == empty
    assert encode_txn_value(empty).endswith(b"\x00")  # no tagged fields: every default is omitted


def test_version_0_values_decode() -> None:
    v0 = (
        b"\x00\x00"
        + (42).to_bytes(8, "big")
        + (7).to_bytes(2, "big")
        + (60000).to_bytes(4, "big")
        + b"\x01"
        + (1).to_bytes(4, "big")
        + b"\x00\x01a"
        + (1).to_bytes(4, "big")
        + (3).to_bytes(4, "big")
        + (NOW + 5).to_bytes(8, "big")
        + NOW.to_bytes(8, "big")
    )
    assert decode_txn_value(v0) == TxnLogValue(42, 7, 60000, 1, (("a", (3,)),), NOW + 5, NOW)


def test_key_round_trip_and_errors() -> None:
    assert decode_txn_key(encode_txn_key("héllo")) == "héllo"
    with pytest.raises(TxnRecordError):
        decode_txn_key(encode_txn_key("x") + b"!")
    with pytest.raises(TxnRecordError):
        decode_txn_key(b"\x00\x01\x00\x00")


def test_value_decoder_refuses_every_truncation_and_trailing_bytes() -> None:
    data = encode_txn_value(VALUE)
    for cut in range(len(data)):
        with pytest.raises(TxnRecordError):
            decode_txn_value(data[:cut])
    with pytest.raises(TxnRecordError):
        decode_txn_value(data + b"\x00")


@given(st.binary(max_size=80))
def test_value_decoder_never_raises_anything_else(data: bytes) -> None:
    try:
        decode_txn_value(data)
    except TxnRecordError:
        pass
