"""The share-partition state machine (KIP-932, coordinator/share_partition.py) on a virtual clock, and by
hypothesis: random interleavings of fetches, acknowledgements, lock expiry, members leaving and leader
changes never hand a record to two members at once, never lower a delivery count, never move the SPSO
backwards, and never deliver an ACCEPTed record again."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.coordinator.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)
from pykraft.core.errors import ErrorCode

LOCK_MS = 30_000
CONFIG = SharePartitionConfig(
    record_lock_duration_ms=LOCK_MS, delivery_count_limit=3, max_in_flight_records=10
)


def ack(first: int, last: int, *types: AcknowledgeType) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, tuple(int(t) for t in types))


def test_acquire_new_records_then_accept_moves_the_spso():
    sp = SharePartition(0, CONFIG)
    assert sp.acquire("a", [(0, 4)], 5, 500, now_ms=0) == [AcquiredRecords(0, 4, 1)]
    assert (sp.start_offset, sp.end_offset) == (0, 5)
    # Nothing left to acquire until more records arrive.
    assert sp.acquire("b", [(0, 4)], 5, 500, now_ms=0) == []
    assert sp.acknowledge("a", [ack(0, 2, AcknowledgeType.ACCEPT)], now_ms=1) == ErrorCode.NONE
    assert sp.start_offset == 3
    assert sp.record(3) is not None and sp.record(3).state == RecordState.ACQUIRED


def test_release_redelivers_with_a_higher_delivery_count_to_another_member():
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 1)], 2, 500, now_ms=0)
    assert sp.acknowledge("a", [ack(0, 1, AcknowledgeType.RELEASE)], now_ms=1) == ErrorCode.NONE
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("b", [(0, 1)], 2, 500, now_ms=2) == [AcquiredRecords(0, 1, 2)]
    # The first member no longer holds them.
    assert (
        sp.acknowledge("a", [ack(0, 1, AcknowledgeType.ACCEPT)], now_ms=3) == ErrorCode.INVALID_RECORD_STATE
    )


def test_reject_archives_for_good():
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 0)], 1, 500, now_ms=0)
    assert sp.acknowledge("a", [ack(0, 0, AcknowledgeType.REJECT)], now_ms=1) == ErrorCode.NONE
    assert sp.start_offset == 1
    assert sp.acquire("b", [(0, 0)], 1, 500, now_ms=2) == []


def test_a_record_released_delivery_count_limit_times_is_archived():
    sp = SharePartition(0, CONFIG)  # delivery_count_limit=3
    for delivery in range(1, 4):
        assert sp.acquire("a", [(0, 0)], 1, 500, now_ms=delivery) == [AcquiredRecords(0, 0, delivery)]
        assert sp.acknowledge("a", [ack(0, 0, AcknowledgeType.RELEASE)], now_ms=delivery) == ErrorCode.NONE
    assert sp.record(0) is None and sp.start_offset == 1
    assert sp.acquire("a", [(0, 0)], 1, 500, now_ms=10) == []


def test_an_expired_lock_makes_the_record_available_to_others():
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 2)], 3, 500, now_ms=1000)
    assert sp.next_deadline_ms() == 1000 + LOCK_MS
    assert sp.expire_locks(1000 + LOCK_MS - 1) == 0
    assert sp.acquire("b", [(0, 2)], 3, 500, now_ms=2000) == []
    assert sp.expire_locks(1000 + LOCK_MS) == 3
    assert sp.acquire("b", [(0, 2)], 3, 500, now_ms=1000 + LOCK_MS) == [AcquiredRecords(0, 2, 2)]
    # The late acknowledgement of the first holder is refused, whole.
    late = [ack(0, 0, AcknowledgeType.ACCEPT)]
    assert sp.acknowledge("a", late, now_ms=1000 + LOCK_MS + 1) == ErrorCode.INVALID_RECORD_STATE


def test_renew_extends_the_lock():
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 0)], 1, 500, now_ms=0)
    assert sp.acknowledge("a", [ack(0, 0, AcknowledgeType.RENEW)], now_ms=20_000) == ErrorCode.NONE
    assert sp.expire_locks(LOCK_MS) == 0
    assert sp.next_deadline_ms() == 20_000 + LOCK_MS


def test_acknowledgements_apply_all_or_none():
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 1)], 2, 500, now_ms=0)
    sp.acquire("b", [(2, 2)], 3, 500, now_ms=0)
    batches = [ack(0, 1, AcknowledgeType.ACCEPT), ack(2, 2, AcknowledgeType.ACCEPT)]
    assert sp.acknowledge("a", batches, now_ms=1) == ErrorCode.INVALID_RECORD_STATE
    assert sp.start_offset == 0 and sp.record(0).state == RecordState.ACQUIRED
    assert sp.acknowledge(
        "a", [ack(0, 1, AcknowledgeType.ACCEPT, AcknowledgeType.ACCEPT, AcknowledgeType.ACCEPT)], 1
    ) == (ErrorCode.INVALID_REQUEST)
    assert sp.acknowledge("a", [AcknowledgementBatch(0, 0, (9,))], 1) == ErrorCode.INVALID_REQUEST


def test_per_offset_types():
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 2)], 3, 500, now_ms=0)
    types = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT)
    assert sp.acknowledge("a", [ack(0, 2, *types)], now_ms=1) == ErrorCode.NONE
    assert sp.start_offset == 1 and sp.record(1).state == RecordState.AVAILABLE
    assert sp.record(2).state == RecordState.ARCHIVED


def test_gaps_and_aborted_records_are_never_acquired():
    sp = SharePartition(0, CONFIG)
    # Offsets 2-3 are an aborted transaction's records, 4 its marker: not deliverable.
    assert sp.acquire("a", [(0, 1), (5, 6)], 7, 500, now_ms=0) == [
        AcquiredRecords(0, 1, 1),
        AcquiredRecords(5, 6, 1),
    ]
    assert sp.record(3) is None and sp.end_offset == 7
    # A client acknowledging those offsets as gaps is fine; accepting the records moves past them.
    assert (
        sp.acknowledge("a", [ack(0, 6, AcknowledgeType.ACCEPT)], now_ms=1) == ErrorCode.INVALID_RECORD_STATE
    )
    assert (
        sp.acknowledge("a", [ack(0, 1, AcknowledgeType.ACCEPT), ack(2, 4, AcknowledgeType.GAP)], 1)
        == ErrorCode.NONE
    )
    assert sp.start_offset == 5
    # Trailing offsets without records (a marker at the end) move the end offset.
    sp2 = SharePartition(0, CONFIG)
    sp2.acquire("a", [(0, 0)], 2, 500, now_ms=0)
    assert sp2.end_offset == 2


def test_in_flight_limit_and_max_records():
    sp = SharePartition(0, CONFIG)  # max_in_flight_records=10
    assert sp.acquire("a", [(0, 99)], 100, 4, now_ms=0) == [AcquiredRecords(0, 3, 1)]
    assert sp.acquire("b", [(4, 99)], 100, 500, now_ms=0) == [AcquiredRecords(4, 9, 1)]
    assert sp.end_offset == 10 and not sp.can_acquire()
    sp.acknowledge("a", [ack(0, 3, AcknowledgeType.ACCEPT)], now_ms=1)
    assert sp.can_acquire()
    assert sp.acquire("a", [(10, 99)], 100, 500, now_ms=2) == [AcquiredRecords(10, 13, 1)]


def test_a_member_leaving_releases_what_it_holds():
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 1)], 2, 500, now_ms=0)
    sp.acquire("b", [(2, 2)], 3, 500, now_ms=0)
    assert sp.release_member("a") == 2
    assert sp.record(0).state == RecordState.AVAILABLE and sp.record(2).state == RecordState.ACQUIRED


def test_state_batches_round_trip_with_acquired_saved_as_available():
    sp = SharePartition(0, CONFIG)
    sp.acquire("a", [(0, 5)], 6, 500, now_ms=0)
    sp.acknowledge("a", [ack(1, 1, AcknowledgeType.ACCEPT), ack(2, 2, AcknowledgeType.RELEASE)], 1)
    batches = sp.state_batches()
    assert batches == [
        StateBatch(0, 0, RecordState.AVAILABLE, 1),
        StateBatch(1, 1, RecordState.ACKNOWLEDGED, 1),
        StateBatch(2, 5, RecordState.AVAILABLE, 1),
    ]
    loaded = SharePartition.from_state(sp.start_offset, batches, CONFIG)
    assert (loaded.start_offset, loaded.end_offset) == (0, 6)
    assert loaded.acquire("b", [(0, 9)], 10, 500, now_ms=2) == [
        AcquiredRecords(0, 0, 2),
        AcquiredRecords(2, 5, 2),
        AcquiredRecords(6, 9, 1),
    ]


MEMBERS = ("m1", "m2", "m3")
LOG_END = 30

ops = st.one_of(
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 8)),
    st.tuples(
        st.just("ack"),
        st.sampled_from(MEMBERS),
        st.integers(0, LOG_END - 1),
        st.integers(0, 4),
        st.sampled_from(list(AcknowledgeType)),
    ),
    st.tuples(st.just("advance"), st.integers(0, LOCK_MS)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("leader_change")),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(ops, max_size=60),
    st.sets(st.integers(0, LOG_END - 1), max_size=8),  # offsets without a deliverable record
)
def test_random_interleavings_keep_the_invariants(steps, holes):
    sp = SharePartition(0, CONFIG)
    now_ms = 0
    accepted: set[int] = set()
    delivery_counts: dict[int, int] = {}
    holder: dict[int, str] = {}  # offset -> member holding it, per our own bookkeeping
    last_start = 0
    runs: list[tuple[int, int]] = []
    for offset in range(LOG_END):
        if offset in holes:
            continue
        if runs and runs[-1][1] == offset - 1:
            runs[-1] = (runs[-1][0], offset)
        else:
            runs.append((offset, offset))
    for step in steps:
        kind = step[0]
        if kind == "fetch":
            _, member, max_records = step
            start = sp.next_fetch_offset()
            got = sp.acquire(member, [run for run in runs if run[1] >= start], LOG_END, max_records, now_ms)
            for run in got:
                for offset in range(run.first_offset, run.last_offset + 1):
                    assert offset not in holes, "a record that does not exist was acquired"
                    assert offset not in accepted, "an accepted record was delivered again"
                    assert offset not in holder, "a record was acquired by two members at once"
                    assert run.delivery_count > delivery_counts.get(offset, 0)
                    assert run.delivery_count <= CONFIG.delivery_count_limit
                    delivery_counts[offset] = run.delivery_count
                    holder[offset] = member
        elif kind == "ack":
            _, member, first, length, ack_type = step
            last = min(first + length, LOG_END - 1)
            expected_ok = all(
                holder.get(o) == member
                or (ack_type == AcknowledgeType.GAP and o < sp.end_offset and sp.record(o) is None)
                for o in range(first, last + 1)
            )
            error = sp.acknowledge(member, [ack(first, last, ack_type)], now_ms)
            assert (error == ErrorCode.NONE) == expected_ok
            if error == ErrorCode.NONE:
                for offset in range(first, last + 1):
                    if offset in holes:
                        continue
                    if ack_type != AcknowledgeType.RENEW:
                        holder.pop(offset, None)
                    if ack_type == AcknowledgeType.ACCEPT:
                        accepted.add(offset)
        elif kind == "advance":
            now_ms += step[1]
            sp.expire_locks(now_ms)
            for offset in list(holder):
                record = sp.record(offset)
                if record is None or record.state != RecordState.ACQUIRED:
                    del holder[offset]
        elif kind == "leave":
            sp.release_member(step[1])
            for offset in [o for o, m in holder.items() if m == step[1]]:
                del holder[offset]
        else:
            sp = SharePartition.from_state(sp.start_offset, sp.state_batches(), CONFIG)
            holder.clear()  # acquisitions are not durable: the new leader hands them out again
        assert sp.start_offset >= last_start, "the SPSO moved backwards"
        last_start = sp.start_offset
        assert sp.end_offset - sp.start_offset <= CONFIG.max_in_flight_records
        for offset, record in sp.records():
            assert record.delivery_count >= delivery_counts.get(offset, 0), "a delivery count decreased"
            if record.state == RecordState.ACQUIRED:
                assert holder.get(offset) == record.member_id
            if offset in accepted:
                assert record.state == RecordState.ACKNOWLEDGED
        assert all(o >= sp.start_offset or o not in holder for o in holder)
