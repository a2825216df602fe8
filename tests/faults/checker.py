"""The fault campaign's checker: a pure function of a :class:`History` (no cluster, no clock), so it is
unit-tested on synthetic histories (tests/faults/test_checker.py).

Anomaly classes, each a list of one-line findings naming the offending values:

- LOST: an acknowledged record is not in the log (or not at the offset its acknowledgment gave); a
  committed transaction's record is missing; on a compacted topic, a key's latest acknowledged value
  was replaced by an older one.
- DUPLICATE: one value is in the logs more than once (values are unique by construction, so a retried
  send or a transform that ran twice in committed transactions shows here). One case is librdkafka's
  own and is listed apart (``resent_across_bump``), see :func:`_resent_across_bump`, and so are a
  transform's outputs of such an input, one per copy (``copies_of_copied_input``).
- REORDER: one producer's records to one partition are in the log out of the order it sent them.
- ABORTED_VISIBLE: a read_committed reader sees a record of an aborted transaction.
- TXN_ATOMICITY: a transaction is partly visible.
- FATAL_CLIENT_ERROR: a producer was told to give up where Kafka answers an abortable or
  retriable error (the campaign runs no zombies, so nothing here should fence a producer for good).
  Two cases Kafka answers the same way are listed apart (``abort_refused``, ``sequence_reused``), see
  :data:`ABORT_REFUSED` and :data:`SEQUENCE_REUSED`.
- OFFSET_BACKWARDS: an OffsetFetch, from any broker, answered an offset below one acknowledged (or
  already answered) before it was sent.
- CONSUMER_SKIP: a group's committed offset is past a record no member of the group consumed.
- REPLICA_DIVERGENCE: the replicas of a partition hold different bytes once the faults have healed.

Every fault kind expects zero of every class: a replication-path partition
(``partition_broker_replication``) only shrinks ISRs and delays acks=all writes, and a full disk
(``disk_full``) takes one broker's log dir offline (KAFKA_STORAGE_ERROR, retried by the clients) until its
restart recovers the log; the acks=1 topic, the one place Kafka may lose acknowledged writes under such
faults, is judged on its replicas only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from tests.faults.history import FinalRecord, History, OffsetCommit, OffsetObservation, TopicPartition

ANOMALIES = (
    "LOST",
    "DUPLICATE",
    "REORDER",
    "ABORTED_VISIBLE",
    "TXN_ATOMICITY",
    "FATAL_CLIENT_ERROR",
    "OFFSET_BACKWARDS",
    "CONSUMER_SKIP",
    "REPLICA_DIVERGENCE",
)

# librdkafka sends EndTxn(abort) whenever an AddPartitionsToTxn of the transaction went unanswered
# (rd_kafka_txn_handle_AddPartitionsToTxn counts it in txn_req_cnt "as if received": the coordinator
# was stopped, paused or moved). If the coordinator never had the transaction Ongoing, it is still
# Empty, or the producer's previous transaction is PrepareCommit/CompleteCommit, and Kafka's
# TransactionCoordinator.endTransaction answers an abort there INVALID_TXN_STATE for client
# transaction version 1 (EndTxn below v5; librdkafka 2.16 sends v0-1, its issue #4849): the coordinator
# cannot tell it from an abort after a commit whose answer was lost, so refusing is the only safe answer.
# Only KIP-890's transactions V2 (an epoch bump per transaction) tells them apart. Such a transaction
# must have nothing visible (it never reached a partition); one with a visible value stays an anomaly.
ABORT_REFUSED = "abort: INVALID_TXN_STATE"

# librdkafka takes a Produce request that was in flight to a broker it drops (the broker left Metadata:
# fenced while paused) as not persisted (_DESTROY_BROKER: ERR_ACTION_MSG_NOT_PERSISTED in
# rd_kafka_err_action, rdkafka_request.c). When the transaction then aborts, it purges those messages
# and moves the epoch's base msgid past them (ADVBASE in rd_kafka_toppar_purge_queues), so the next
# transaction re-uses their sequence numbers. The leader did append them, so it answers
# OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka's ProducerAppendInfo.checkSequence does (the abort marker keeps
# the producer's last sequence), and librdkafka makes that fatal. The transaction must still be all or
# nothing, which the atomicity check judges.
SEQUENCE_REUSED = ("OUT_OF_ORDER_SEQUENCE_NUMBER", "last partition error _DESTROY_BROKER")


@dataclass
class CheckResult:
    anomalies: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in ANOMALIES})
    acknowledged: int = 0
    committed_txns: int = 0
    aborted_txns: int = 0
    # Values librdkafka wrote twice by re-sending them under a new producer epoch (not anomalies).
    resent_across_bump: list[str] = field(default_factory=list)
    # Aborts refused with INVALID_TXN_STATE as Kafka's coordinator refuses them (not anomalies).
    abort_refused: list[str] = field(default_factory=list)
    # Fatal sequence errors after librdkafka re-used the sequences of a dropped broker's request.
    sequence_reused: list[str] = field(default_factory=list)
    # A transform's output written once per copy of its input (the input's copies are judged there).
    copies_of_copied_input: list[str] = field(default_factory=list)
    # fault kind -> the longest time (s) without any acknowledgment in a gap that overlaps such a fault
    unavailable_s: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def counts(self) -> dict[str, int]:
        return {name: len(found) for name, found in self.anomalies.items()}


def check(history: History) -> CheckResult:
    result = CheckResult()
    where = _locate({tp: r for tp, r in history.final.items() if tp[0] not in history.lossy_topics})
    copies_in_log = {value: len(places) for value, places in where.items()}
    _resent_across_bump(history, where, result)
    copied = _copies_of_copied_input(history, where, copies_in_log, result)
    _check_duplicates(where, copied, result)
    _check_sends(history, where, result)
    _check_transactions(history, where, result)
    _check_offsets(history.commits, history.observations, result)
    _check_consumers(history, result)
    for tp, digests in sorted(history.replicas.items()):
        if len(set(digests.values())) > 1:
            result.anomalies["REPLICA_DIVERGENCE"].append(f"{_tp(tp)}: {digests}")
    result.unavailable_s = availability(history)
    return result


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _locate(final: dict[TopicPartition, list[FinalRecord]]) -> dict[str, list[tuple[TopicPartition, int]]]:
    where: dict[str, list[tuple[TopicPartition, int]]] = defaultdict(list)
    for tp, records in final.items():
        for record in records:
            where[record.value].append((tp, record.offset))
    return where


# librdkafka's reasons for a bump: rd_kafka_handle_idempotent_Produce_error (rdkafka_request.c), and
# rd_kafka_idemp_drain_epoch_bump after message.timeout.ms expired messages (rdkafka_partition.c).
SKIPPED_SEQUENCE_NUMBERS = "skipped sequence numbers"
MESSAGES_TIMED_OUT = "message(s) timed out"


def _renumbering_bump(reason: str) -> bool:
    return reason == SKIPPED_SEQUENCE_NUMBERS or MESSAGES_TIMED_OUT in reason


def _resent_across_bump(
    history: History, where: dict[str, list[tuple[TopicPartition, int]]], result: CheckResult
) -> None:
    """The duplicates an idempotent librdkafka producer (<= 2.16 at least) makes itself, which Kafka
    cannot prevent: moved out of ``where`` (the later copy stays) into ``result.resent_across_bump``.

    The path (librdkafka issue #4953, PR #4972 not merged): request R1 for partition A fails with a
    retriable error, so R2 behind it reaches the broker with a sequence gap and gets
    OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka's ProducerAppendInfo.checkSequence answers; librdkafka then
    bumps the producer epoch ("skipped sequence numbers") for all partitions and renumbers every
    unacknowledged message from sequence 0. A batch of partition B that the broker had appended but
    answered with a possibly-persisted error (NOT_ENOUGH_REPLICAS_AFTER_APPEND after the ISR shrank,
    REQUEST_TIMED_OUT, a dropped connection) goes out again in the new epoch, and no broker can tell it
    from new data: duplicate detection is per producer epoch.

    The same renumbering follows a bump for messages that expired (message.timeout.ms) in another
    partition's queue: a batch in flight when its connection dropped is appended, never acknowledged,
    and goes out again under the new epoch (seed 13: 777 records at epoch 0, again at epoch 71 from
    sequence 0). Such a value was never acknowledged, so no guarantee was given for it.

    Only exactly that is excused: two copies in one partition of a value of a producer whose log shows
    such a bump, either acknowledged at the later copy after the bump began, or never acknowledged.
    Anything else (a value acknowledged at its first copy, three copies, a bump for another reason, no
    bump) stays a DUPLICATE."""
    bumps: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for bump in history.bumps:
        if _renumbering_bump(bump.reason):
            bumps[bump.producer].append((bump.t_s, bump.reason))
    if not bumps:
        return
    for send in history.sends:
        places = where.get(send.value, [])
        if send.txn is not None or send.producer not in bumps or len(places) != 2:
            continue
        (first_tp, first_offset), (later_tp, later_offset) = sorted(places)
        if first_tp != later_tp:
            continue
        if send.acked:
            if (send.topic, send.partition, send.offset) != (*later_tp, later_offset):
                continue
            before_ack = [reason for t_s, reason in bumps[send.producer] if t_s <= send.t_ack_s]
            if not before_ack:
                continue
            reason = before_ack[0]
        else:
            reason = bumps[send.producer][0][1] + ", never acknowledged"
        where[send.value] = [(later_tp, later_offset)]
        result.resent_across_bump.append(
            f"{send.value!r} at {_tp(first_tp)}@{first_offset} and again at {later_offset} "
            f"({send.producer}: epoch bump, {reason})"
        )


def _copies_of_copied_input(
    history: History,
    where: dict[str, list[tuple[TopicPartition, int]]],
    copies_in_log: dict[str, int],
    result: CheckResult,
) -> set[str]:
    """A transform that reads its input exactly once writes one output per input *record*: when the
    input itself holds a value twice (a copy librdkafka re-sent across an epoch bump, listed there),
    the transform's two outputs of it are right. Returns those values, listed in
    ``result.copies_of_copied_input``: as many copies as the input has, each from its own send in a
    transaction not aborted. More copies than that, or a copy without its own send, stay a DUPLICATE."""
    copied: set[str] = set()
    aborted = _aborted_txns(history)
    sends_by_value: dict[str, int] = defaultdict(int)
    source_of: dict[str, str] = {}
    for send in history.sends:
        if send.source is not None and send.txn not in aborted:
            sends_by_value[send.value] += 1
            source_of[send.value] = send.source
    for value, sends in sends_by_value.items():
        places = where.get(value, [])
        source = source_of[value]
        if not 2 <= len(places) <= min(sends, copies_in_log.get(source, 0)):
            continue
        found = ", ".join(f"{_tp(tp)}@{offset}" for tp, offset in places)
        result.copies_of_copied_input.append(
            f"{value!r} at {found}: its input {source!r} is in the log {copies_in_log[source]} times"
        )
        copied.add(value)
    return copied


def _check_duplicates(
    where: dict[str, list[tuple[TopicPartition, int]]], copied: set[str], result: CheckResult
) -> None:
    for value, places in sorted(where.items()):
        if len(places) > 1 and value not in copied:
            found = ", ".join(f"{_tp(tp)}@{offset}" for tp, offset in places)
            result.anomalies["DUPLICATE"].append(f"{value!r} at {found}")


def _check_sends(
    history: History, where: dict[str, list[tuple[TopicPartition, int]]], result: CheckResult
) -> None:
    latest_by_key: dict[
        tuple[str, str], tuple[int, int, str]
    ] = {}  # (topic, key) -> (partition, offset, value)
    by_stream: dict[tuple[str, str, int], list[tuple[int, str, int]]] = defaultdict(list)
    aborted = _aborted_txns(history)
    owners = _owners(history, aborted)
    for send in history.sends:
        if send.acked:
            result.acknowledged += 1
        if send.topic in history.lossy_topics:
            continue
        if send.txn in aborted:
            # Not to be seen at all (judged with its transaction); the same value in the log is a
            # later transaction's copy when the transform loop re-read its input after this abort.
            continue
        places = where.get(send.value, [])
        seqs = owners[send.value]
        if send.seq not in seqs:
            continue  # an unknown transaction's value that a committed one wrote again: that one's copy
        if len(places) > 1 and len(places) == len(seqs):
            places = [sorted(places)[seqs.index(send.seq)]]
        for tp, offset in places:
            by_stream[(send.producer, tp[0], tp[1])].append((send.seq, send.value, offset))
        if not send.acked or send.txn is not None:
            continue  # unknown outcome, or judged with its transaction
        if send.topic in history.compacted_topics:
            assert send.key is not None
            best = latest_by_key.get((send.topic, send.key))
            if send.offset < 0:
                continue  # written at an unknown offset: a later value of the key may have replaced it
            if best is None or send.offset > best[1]:
                latest_by_key[(send.topic, send.key)] = (send.partition, send.offset, send.value)
            continue
        at = ((send.topic, send.partition), send.offset)
        if not places:
            result.anomalies["LOST"].append(
                f"{send.value!r} acknowledged at {_tp(at[0])}@{at[1]}, not in the log"
            )
        elif send.offset >= 0 and at not in places:
            found = ", ".join(f"{_tp(tp)}@{offset}" for tp, offset in places)
            result.anomalies["LOST"].append(
                f"{send.value!r} acknowledged at {_tp(at[0])}@{at[1]}, found at {found}"
            )
    for (topic, key), (partition, offset, value) in sorted(latest_by_key.items()):
        last = [r for r in history.final.get((topic, partition), []) if r.key == key]
        if not last or last[-1].offset < offset:
            now = f"{last[-1].value!r}@{last[-1].offset}" if last else "nothing"
            result.anomalies["LOST"].append(
                f"{topic} key {key!r}: latest acknowledged {value!r}@{offset}, the log keeps {now}"
            )
    for (producer, topic, partition), sent in sorted(by_stream.items()):
        sent.sort()
        for (seq_a, value_a, offset_a), (seq_b, value_b, offset_b) in zip(sent, sent[1:], strict=False):
            if offset_b < offset_a:
                result.anomalies["REORDER"].append(
                    f"{producer} on {topic}-{partition}: {value_a!r} (sent #{seq_a}) at {offset_a}, "
                    f"{value_b!r} (sent #{seq_b}) at {offset_b}"
                )


def _owners(history: History, aborted: set[str]) -> dict[str, list[int]]:
    """Per value, the sends (``seq``, ascending) its copies in the log belong to, for the order check.
    Not an aborted transaction's. When the transform loop re-read its input after a transaction of
    unknown outcome (a fatal error) and a committed one wrote the same values, the copy is the
    committed one's (two copies are a DUPLICATE, and the unknown one is judged whole with its
    transaction). A value sent as often as it is in the log (a transform's output of an input held
    twice) has its k-th send at its k-th copy."""
    unknown = {txn.name for txn in history.txns if txn.outcome == "unknown"}
    sends: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    for send in history.sends:
        if send.txn not in aborted:
            sends[send.value].append((send.seq, send.txn in unknown))
    owners: dict[str, list[int]] = defaultdict(list)
    for value, found in sends.items():
        known = [seq for seq, is_unknown in found if not is_unknown]
        owners[value] = sorted(known or [seq for seq, _ in found])
    return owners


def _check_transactions(
    history: History, where: dict[str, list[tuple[TopicPartition, int]]], result: CheckResult
) -> None:
    values_by_txn: dict[str, list[str]] = defaultdict(list)
    aborted = _aborted_txns(history)
    # Values a transaction not aborted also sent: the transform loop re-reads its input after an abort
    # and writes the same values again, so one of those in the log is that transaction's copy (two
    # copies are a DUPLICATE).
    sent_again: set[str] = set()
    for send in history.sends:
        if send.txn is not None:
            values_by_txn[send.txn].append(send.value)
            if send.txn not in aborted:
                sent_again.add(send.value)
    for txn in history.txns:
        values = values_by_txn.get(txn.name, [])
        visible = [v for v in values if v in where]
        if txn.fatal:
            finding = f"{txn.producer} {txn.name}: {txn.error}"
            if ABORT_REFUSED in txn.error and not visible:
                result.abort_refused.append(finding)
            elif all(part in txn.error for part in SEQUENCE_REUSED):
                result.sequence_reused.append(finding)
            else:
                result.anomalies["FATAL_CLIENT_ERROR"].append(finding)
        if txn.outcome == "commit":
            result.committed_txns += 1
            missing = [v for v in values if v not in where]
            if missing and visible:
                result.anomalies["TXN_ATOMICITY"].append(
                    f"committed {txn.name}: {missing} missing, {visible} visible"
                )
            elif missing:
                result.anomalies["LOST"].append(f"committed {txn.name}: none of {missing} in the log")
        elif txn.outcome == "abort":
            result.aborted_txns += 1
            visible = [v for v in visible if v not in sent_again]
            if visible:
                result.anomalies["ABORTED_VISIBLE"].append(f"aborted {txn.name}: {visible} visible")
        elif visible and len(visible) != len(values):
            missing = [v for v in values if v not in where]
            result.anomalies["TXN_ATOMICITY"].append(
                f"{txn.name} ({txn.error}): {missing} missing, {visible} visible"
            )


def _aborted_txns(history: History) -> set[str]:
    return {txn.name for txn in history.txns if txn.outcome == "abort"}


def _check_offsets(
    commits: list[OffsetCommit], observations: list[OffsetObservation], result: CheckResult
) -> None:
    """An observation's floor: the highest offset acknowledged, or answered, before it was sent."""
    floors: dict[tuple[str, str, int], list[tuple[float, int, str]]] = defaultdict(list)
    for commit in commits:
        if commit.acked:
            floors[(commit.group, commit.topic, commit.partition)].append(
                (commit.t_done_s, commit.offset, "acknowledged commit")
            )
    for seen in observations:
        floors[(seen.group, seen.topic, seen.partition)].append(
            (seen.t_done_s, seen.offset, f"OffsetFetch from broker {seen.broker}")
        )
    for key in floors:
        floors[key].sort()
    for seen in sorted(observations, key=lambda o: o.t_sent_s):
        known = floors[(seen.group, seen.topic, seen.partition)]
        before = [f for f in known if f[0] < seen.t_sent_s]
        if not before:
            continue
        t_floor, floor, source = max(before, key=lambda f: f[1])
        if seen.offset < floor:
            result.anomalies["OFFSET_BACKWARDS"].append(
                f"group {seen.group} {seen.topic}-{seen.partition}: broker {seen.broker} answered {seen.offset} "
                f"at t={seen.t_sent_s:.2f}s after {source} {floor} at t={t_floor:.2f}s"
            )


def _check_consumers(history: History, result: CheckResult) -> None:
    committed: dict[tuple[str, str, int], int] = {}
    for commit in history.commits:
        key = (commit.group, commit.topic, commit.partition)
        if commit.acked and commit.offset > committed.get(key, -1):
            committed[key] = commit.offset
    consumed: dict[tuple[str, str, int], set[int]] = defaultdict(set)
    for record in history.consumed:
        consumed[(record.group, record.topic, record.partition)].add(record.offset)
    for (group, topic, partition), offset in sorted(committed.items()):
        seen = consumed[(group, topic, partition)]
        skipped = [
            r for r in history.final.get((topic, partition), []) if r.offset < offset and r.offset not in seen
        ]
        if skipped:
            shown = ", ".join(f"{r.value!r}@{r.offset}" for r in skipped[:5])
            result.anomalies["CONSUMER_SKIP"].append(
                f"group {group} committed {topic}-{partition}@{offset} but consumed none of {len(skipped)}: {shown}"
            )


def availability(history: History) -> dict[str, float]:
    """Per fault kind, the longest stretch without a single acknowledgment (any workload) that overlaps
    a fault of that kind. Reported, never asserted."""
    acks = sorted(s.t_ack_s for s in history.sends if s.acked)
    gaps = list(zip(acks, acks[1:], strict=False))
    worst: dict[str, float] = {}
    for fault in history.faults:
        longest = 0.0
        for start, end in gaps:
            if end >= fault.t_start_s and start <= fault.t_end_s:
                longest = max(longest, end - start)
        worst[fault.kind] = max(worst.get(fault.kind, 0.0), longest)
    return worst
