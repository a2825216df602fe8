"""The fault campaign's checker on synthetic histories: a clean history has no anomaly, and each
anomaly class is found where it was planted."""

from __future__ import annotations

from tests.faults.checker import check
from tests.faults.history import (
    Consumed,
    EpochBump,
    Fault,
    FinalRecord,
    History,
    OffsetCommit,
    OffsetObservation,
    Send,
    Txn,
)


def _acked(value: str, seq: int, offset: int, topic: str = "t", partition: int = 0, t: float = 0.0) -> Send:
    return Send("p", topic, value, seq, True, partition, offset, t_ack_s=t)


def _log(*values: str, topic: str = "t", partition: int = 0) -> dict[tuple[str, int], list[FinalRecord]]:
    return {(topic, partition): [FinalRecord(i, None, v) for i, v in enumerate(values)]}


def _found(history: History) -> dict[str, int]:
    return {name: count for name, count in check(history).counts().items() if count}


def test_a_clean_history_has_no_anomaly() -> None:
    history = History(sends=[_acked("a", 0, 0), _acked("b", 1, 1)], final=_log("a", "b"))
    history.sends.append(Send("p", "t", "c", 2, False))  # unknown outcome, absent: fine
    result = check(history)
    assert result.ok and result.acknowledged == 2


def test_lost_moved_duplicate_and_reordered_values_are_found() -> None:
    lost = History(sends=[_acked("a", 0, 0), _acked("b", 1, 1)], final=_log("a"))
    assert _found(lost) == {"LOST": 1}
    moved = History(sends=[_acked("a", 0, 0)], final=_log("x", "a"))
    assert _found(moved) == {"LOST": 1}
    duplicate = History(sends=[_acked("a", 0, 0), Send("p", "t", "b", 1, False)], final=_log("a", "b", "b"))
    assert _found(duplicate) == {"DUPLICATE": 1}
    reordered = History(
        sends=[Send("p", "t", "a", 0, False), Send("p", "t", "b", 1, False)], final=_log("b", "a")
    )
    assert _found(reordered) == {"REORDER": 1}


def test_a_resend_across_a_skipped_sequence_epoch_bump_is_librdkafkas_and_nothing_else_is() -> None:
    """Seed 1's failure shape: "a" and "b" appended in epoch 0 but answered with a possibly-persisted
    error, "x" from another producer, then librdkafka bumps the epoch after an OUT_OF_ORDER answer on
    another partition and writes "a", "b", "c" again in epoch 1, acknowledged there."""
    final = _log("a", "b", "x", "a", "b", "c")
    resent = [_acked("a", 0, 3, t=5.0), _acked("b", 1, 4, t=5.0), _acked("c", 2, 5, t=5.0)]
    bump = EpochBump("p", 1002, 0, "skipped sequence numbers", 4.0)
    result = check(History(sends=list(resent), bumps=[bump], final=final))
    assert result.ok and len(result.resent_across_bump) == 2
    # Without the bump in the client's log, or for another reason, or before it: the broker's doing.
    assert _found(History(sends=list(resent), final=final)) == {"DUPLICATE": 2, "REORDER": 1}
    other = EpochBump("p", 1002, 0, "message sequence gap", 4.0)
    assert _found(History(sends=list(resent), bumps=[other], final=final)) == {"DUPLICATE": 2, "REORDER": 1}
    late = EpochBump("p", 1002, 0, "skipped sequence numbers", 6.0)
    assert _found(History(sends=list(resent), bumps=[late], final=final)) == {"DUPLICATE": 2, "REORDER": 1}
    # Acknowledged at the first copy: the re-send cannot have been librdkafka's renumbering.
    acked_first = [_acked("a", 0, 0, t=1.0), _acked("b", 1, 4, t=5.0), _acked("c", 2, 5, t=5.0)]
    assert _found(History(sends=acked_first, bumps=[bump], final=final)) == {"DUPLICATE": 1}


def test_a_never_acknowledged_resend_across_a_timed_out_epoch_bump_is_librdkafkas() -> None:
    """Seed 13's shape: a batch ("a", "b") appended in epoch 0 and never acknowledged; messages of
    another partition expire, librdkafka bumps the epoch and writes "a", "b" again from sequence 0."""
    final = _log("a", "b", "x", "a", "b")
    unacked = [Send("p", "t", "a", 0, False), Send("p", "t", "b", 1, False)]
    timed_out = EpochBump("p", 1002, 0, "16 message(s) timed out on t [1]", 4.0)
    result = check(History(sends=list(unacked), bumps=[timed_out], final=final))
    assert result.ok and len(result.resent_across_bump) == 2
    # No such bump in the client's log: the broker wrote them twice.
    assert _found(History(sends=list(unacked), final=final)) == {"DUPLICATE": 2, "REORDER": 1}
    gap = EpochBump("p", 1002, 0, "message sequence gap", 4.0)
    assert _found(History(sends=list(unacked), bumps=[gap], final=final)) == {"DUPLICATE": 2, "REORDER": 1}


def test_compacted_topics_keep_the_latest_acknowledged_value_per_key() -> None:
    sends = [
        Send("p", "c", "v1", 0, True, 0, 0, key="k"),
        Send("p", "c", "v2", 1, True, 0, 1, key="k"),
    ]
    kept = History(sends=list(sends), compacted_topics={"c"}, final={("c", 0): [FinalRecord(1, "k", "v2")]})
    assert check(kept).ok
    rolled_back = History(sends=sends, compacted_topics={"c"}, final={("c", 0): [FinalRecord(0, "k", "v1")]})
    assert _found(rolled_back) == {"LOST": 1}


def test_transactions_are_all_or_nothing_and_aborted_ones_invisible() -> None:
    sends = [Send("tx", "t", v, i, True, 0, i, txn=name) for i, (v, name) in enumerate(
        [("c1", "T1"), ("c2", "T1"), ("a1", "T2"), ("u1", "T3"), ("u2", "T3")]
    )]  # fmt: skip
    txns = [Txn("T1", "tx", "commit", 1.0), Txn("T2", "tx", "abort", 2.0), Txn("T3", "tx", "unknown", 3.0)]
    assert check(History(sends=list(sends), txns=list(txns), final=_log("c1", "c2"))).ok
    assert check(History(sends=list(sends), txns=list(txns), final=_log("c1", "c2", "u1", "u2"))).ok
    assert _found(History(sends=list(sends), txns=list(txns), final=_log("c1", "c2", "a1"))) == {
        "ABORTED_VISIBLE": 1
    }
    assert _found(History(sends=list(sends), txns=list(txns), final=_log("c1", "c2", "u2"))) == {
        "TXN_ATOMICITY": 1
    }
    assert _found(History(sends=list(sends), txns=list(txns), final=_log("c1"))) == {"TXN_ATOMICITY": 1}
    assert _found(History(sends=list(sends), txns=list(txns), final=_log())) == {"LOST": 1}
    fatal = [Txn("T4", "tx", "unknown", 4.0, error="INVALID_TXN_STATE", fatal=True)]
    assert _found(History(sends=list(sends), txns=txns + fatal, final=_log("c1", "c2"))) == {
        "FATAL_CLIENT_ERROR": 1
    }


def test_an_abort_refused_as_kafka_refuses_it_is_listed_apart_while_nothing_of_it_is_visible() -> None:
    # Seed 61: T828's AddPartitionsToTxn went to a stopping coordinator and was never answered; the next
    # coordinator had T826 committing, and answered the EndTxn(abort) INVALID_TXN_STATE, as Kafka does.
    sends = [Send("tx", "t", v, i, False, 0, -1, txn=name) for i, (v, name) in enumerate(
        [("c1", "T826"), ("r1", "T828"), ("r2", "T828")]
    )]  # fmt: skip
    refused = "abort: INVALID_TXN_STATE: Failed to end transaction"
    txns = [Txn("T826", "tx", "commit", 1.0), Txn("T828", "tx", "unknown", 2.0, refused, fatal=True)]
    result = check(History(sends=list(sends), txns=list(txns), final=_log("c1")))
    assert result.ok and result.abort_refused == [f"tx T828: {refused}"]
    # Had the refused transaction reached a partition, the refusal is not Kafka's "never began" case.
    found = _found(History(sends=list(sends), txns=list(txns), final=_log("c1", "r1", "r2")))
    assert found == {"FATAL_CLIENT_ERROR": 1}


def test_a_transform_loop_writing_an_aborted_transactions_values_again_is_not_an_anomaly() -> None:
    # Seed 42: T0's records went to a stale leader and were truncated; after the abort the loop re-read
    # its input and T1 wrote the same values, committed. One copy each in the log is right; two are not.
    sends = [Send("ctp", "t", v, i, False, 0, -1, txn=name) for i, (v, name) in enumerate(
        [("x1", "T0"), ("x2", "T0"), ("x1", "T1"), ("x2", "T1"), ("x3", "T1")]
    )]  # fmt: skip
    txns = [Txn("T0", "ctp", "abort", 1.0), Txn("T1", "ctp", "commit", 2.0)]
    assert check(History(sends=list(sends), txns=list(txns), final=_log("x1", "x2", "x3"))).ok
    assert _found(History(sends=list(sends), txns=list(txns), final=_log("x1", "x2", "x1", "x2", "x3"))) == {
        "DUPLICATE": 2,
        "REORDER": 1,  # x1 (T1's first) is also found after x2
    }
    assert _found(History(sends=list(sends), txns=list(txns), final=_log("x2", "x1", "x3"))) == {"REORDER": 1}


def test_an_offset_fetch_below_an_acknowledged_or_answered_offset_is_backwards() -> None:
    commits = [OffsetCommit("g", "t", 0, 5, True, 1.0, 1.1), OffsetCommit("g", "t", 0, 9, False, 2.0, 2.5)]
    fine = [
        OffsetObservation(101, "g", "t", 0, 5, 1.2, 1.3),
        OffsetObservation(102, "g", "t", 0, 9, 1.4, 1.5),  # an unacknowledged commit may already show
        OffsetObservation(101, "g", "t", 0, 5, 1.45, 1.6),  # concurrent with the answer of 9: no order
    ]
    assert check(History(commits=list(commits), observations=list(fine))).ok
    stale = [OffsetObservation(103, "g", "t", 0, 3, 1.2, 1.3)]
    assert _found(History(commits=list(commits), observations=stale)) == {"OFFSET_BACKWARDS": 1}
    forgotten = [*fine, OffsetObservation(103, "g", "t", 0, 5, 1.7, 1.8)]
    assert _found(History(commits=list(commits), observations=forgotten)) == {"OFFSET_BACKWARDS": 1}


def test_a_committed_offset_past_an_unconsumed_record_is_a_skip() -> None:
    commits = [OffsetCommit("g", "t", 0, 3, True, 1.0, 1.1)]
    consumed = [Consumed("g", "t", 0, 0, "a"), Consumed("g", "t", 0, 2, "c")]
    history = History(commits=commits, consumed=consumed, final=_log("a", "b", "c", "d"))
    assert _found(history) == {"CONSUMER_SKIP": 1}
    history.consumed.append(Consumed("g", "t", 0, 1, "b"))
    assert check(history).ok


def test_diverging_replicas_and_availability_per_fault() -> None:
    history = History(
        sends=[_acked("a", 0, 0, t=1.0), _acked("b", 1, 1, t=2.0), _acked("c", 2, 2, t=9.0)],
        final=_log("a", "b", "c"),
        faults=[Fault("kill", (101,), 3.0, 5.0), Fault("pause", (102,), 0.5, 1.5)],
        replicas={("t", 0): {101: "x", 102: "x", 103: "y"}},
    )
    result = check(history)
    assert result.counts()["REPLICA_DIVERGENCE"] == 1
    assert result.unavailable_s == {"kill": 7.0, "pause": 1.0}


def test_a_transform_writes_one_output_per_copy_of_its_input() -> None:
    # Seed 31 in CI: idem-2 re-sent 'v' across an epoch bump (both copies in the input), and the loop
    # read each copy once, in T0 and T1, both committed: two outputs are right, in send order.
    input_log = [FinalRecord(0, None, "v"), FinalRecord(1, None, "w"), FinalRecord(2, None, "v")]
    sends = [Send("ctp", "out", f"ctp:{v}", i, False, 0, -1, txn=name, source=v) for i, (v, name) in enumerate(
        [("v", "T0"), ("w", "T0"), ("v", "T1")]
    )]  # fmt: skip
    txns = [Txn("T0", "ctp", "commit", 1.0), Txn("T1", "ctp", "commit", 2.0)]
    resent = [Send("idem", "in", "v", 0, False), EpochBump("idem", 1, 0, "skipped sequence numbers", 0.5)]

    def history(*output: str, read: list[FinalRecord] = input_log) -> History:
        final = {("in", 0): list(read), **_log(*output, topic="out")}
        return History(sends=[resent[0], *sends], txns=list(txns), final=final, bumps=[resent[1]])

    result = check(history("ctp:v", "ctp:w", "ctp:v"))
    assert result.ok and result.copies_of_copied_input == [
        "'ctp:v' at out-0@0, out-0@2: its input 'v' is in the log 2 times"
    ]
    # The input once: its two outputs are a transform that ran twice.
    assert _found(history("ctp:v", "ctp:w", "ctp:v", read=input_log[:2])) == {"DUPLICATE": 1}
    # Three outputs of an input held twice; and the copies out of send order.
    assert _found(history("ctp:v", "ctp:w", "ctp:v", "ctp:v"))["DUPLICATE"] == 1
    assert _found(history("ctp:v", "ctp:v", "ctp:w")) == {"REORDER": 1}


def test_a_fatal_sequence_error_after_librdkafka_reused_a_dropped_brokers_sequences() -> None:
    # Seed 31 in CI: T99's batch was in flight to the paused broker 103 when librdkafka dropped it
    # (_DESTROY_BROKER, taken as not persisted); the abort re-used its sequences, the new leader
    # answered OUT_OF_ORDER_SEQUENCE_NUMBER and librdkafka made T100 fatal.
    error = (
        "OUT_OF_ORDER_SEQUENCE_NUMBER: ProduceRequest for ctp-out [0] with 10 message(s) failed due to "
        "sequence desynchronization with broker 102 (PID{Id:0,Epoch:0}, base seq 639, idemp state change "
        "38547ms ago, last partition error _DESTROY_BROKER (actions Refresh,MsgNotPersisted, base seq "
        "639..650, base msgid 640, 5129ms ago)"
    )
    sends = [Send("tx", "t", v, i, False, 0, -1, txn="T100") for i, v in enumerate(["a", "b"])]
    txns = [Txn("T100", "tx", "unknown", 2.0, error, fatal=True)]
    for log in [(), ("a", "b")]:
        result = check(History(sends=list(sends), txns=list(txns), final=_log(*log)))
        assert result.ok and result.sequence_reused == [f"tx T100: {error}"]
    # Still all or nothing.
    assert _found(History(sends=list(sends), txns=list(txns), final=_log("a"))) == {"TXN_ATOMICITY": 1}
    other = error.replace("_DESTROY_BROKER", "_TRANSPORT")
    assert _found(
        History(sends=list(sends), txns=[Txn("T100", "tx", "unknown", 2.0, other, fatal=True)])
    ) == {"FATAL_CLIENT_ERROR": 1}


def test_a_committed_transaction_owns_the_values_it_wrote_again_after_an_unknown_one() -> None:
    # Seed 31 in CI: T100 (fatal, unknown) sent b then a; the loop re-read its input, and T101 and T102
    # (committed) wrote a then b, which is where they are. T100 left nothing, so no order is broken.
    sends = [Send("ctp", "t", v, i, False, 0, -1, txn=name) for i, (v, name) in enumerate(
        [("b", "T100"), ("a", "T100"), ("a", "T101"), ("b", "T102")]
    )]  # fmt: skip
    txns = [
        Txn("T100", "ctp", "unknown", 1.0, "OUT_OF_ORDER_SEQUENCE_NUMBER", fatal=True),
        Txn("T101", "ctp", "commit", 2.0),
        Txn("T102", "ctp", "commit", 3.0),
    ]
    assert _found(History(sends=list(sends), txns=list(txns), final=_log("a", "b"))) == {
        "FATAL_CLIENT_ERROR": 1
    }
    assert _found(History(sends=list(sends), txns=list(txns), final=_log("b", "a"))) == {
        "FATAL_CLIENT_ERROR": 1,
        "REORDER": 1,
    }
