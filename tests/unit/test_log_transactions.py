"""The log side of transactions (KIP-98, KIP-890): markers, the last stable offset, the aborted-
transaction index (in memory, on disk, after a crash), read_committed reads, a follower replaying the
leader's bytes, truncation, and the verification guard; pure, over in-memory stores."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.broker.replica_manager import Partition, ReplicaManager
from pykraft.core.errors import ErrorCode
from pykraft.log.partition_log import LogConfig
from pykraft.log.txn_index import AbortedTxn, TransactionIndex, decode_entries, encode_entries, recover
from pykraft.protocol.records import (
    Record,
    build_batch,
    committed_batches,
    end_txn_marker,
    scan_batches,
)
from tests.unit.test_producer_snapshot import MemoryOpener

NOW = 1_000_000
TOPIC = "t"


def manager(opener: MemoryOpener, segment_bytes: int = 1 << 20) -> ReplicaManager:
    config = LogConfig(segment_bytes=segment_bytes, retention_ms=-1, retention_bytes=-1)
    return ReplicaManager(opener, config, producer_id_expiration_ms=1 << 40)


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0, transactional: bool = True) -> memoryview:
    records = [Record(None, b"p%d-s%d-%d" % (pid, seq, i)) for i in range(n)]
    return memoryview(
        build_batch(
            records,
            timestamp_ms=NOW,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=transactional,
        )
    )


class Log:
    def __init__(self, segment_bytes: int = 1 << 20) -> None:
        self.opener = MemoryOpener()
        self.segment_bytes = segment_bytes
        self.replicas = manager(self.opener, segment_bytes)
        self.part = self.replicas.ensure_partition(TOPIC, 0, NOW)
        self.sequences: dict[int, int] = {}

    def write(self, pid: int, n: int = 2, epoch: int = 0) -> int:
        """A transactional batch, verified first when it opens a transaction; returns its base offset."""
        guard = None
        if self.replicas.needs_verification(self.part, pid):
            guard = self.replicas.begin_verification(self.part, pid)
        seq = self.sequences.get(pid, 0)
        result = self.replicas.append(self.part, txn_batch(pid, seq, n, epoch), NOW, verification_guard=guard)
        assert result.error_code == ErrorCode.NONE, result
        self.sequences[pid] = seq + n
        return result.base_offset

    def end(self, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
        result = self.replicas.append_txn_marker(self.part, pid, epoch, coordinator_epoch, commit, NOW)
        assert result.error_code == ErrorCode.NONE, result
        return result.base_offset

    def lso(self) -> int:
        return self.replicas.last_stable_offset(self.part)

    def reopen(self, without_index: bool = False) -> Partition:
        """Closed and opened again; ``without_index``: its .txnindex files deleted in between, so the
        aborted list is rebuilt from the log."""
        self.replicas.close_all()
        if without_index:
            store = self.opener.stores[(TOPIC, 0)]
            for name in store.list_checkpoints(".txnindex"):
                store.delete_checkpoint(name)
        self.replicas = manager(self.opener, self.segment_bytes)
        self.part = self.replicas.ensure_partition(TOPIC, 0, NOW)
        return self.part

    def read_committed(self, offset: int = 0) -> tuple[list[bytes], list[tuple[int, int]]]:
        result = self.replicas.read(self.part, offset, 1 << 20, min_one_batch=True, isolation_level=1)
        assert result.error_code == ErrorCode.NONE
        data = b"".join(bytes(c) for c in result.chunks)
        batches = committed_batches(data, list(scan_batches(data)), result.aborted_transactions)
        from pykraft.protocol.records import decode_records

        values = [
            r.value or b""
            for pos, h in batches
            for r in decode_records(data[pos : pos + h.size_in_bytes])
            if r.offset >= offset
        ]
        return values, result.aborted_transactions or []


def test_an_open_transaction_holds_the_last_stable_offset() -> None:
    log = Log()
    plain = log.replicas.append(
        log.part, memoryview(build_batch([Record(None, b"x")], timestamp_ms=NOW)), NOW
    )
    assert plain.error_code == ErrorCode.NONE
    assert log.lso() == 1
    first = log.write(7)
    log.write(7)
    assert log.lso() == first == 1
    log.end(7, commit=True)
    assert log.lso() == log.part.log.log_end_offset == 6


def test_read_committed_drops_aborted_transactions_of_interleaved_producers() -> None:
    log = Log()
    log.write(1)  # 0-1
    log.write(2)  # 2-3
    log.write(1)  # 4-5
    log.end(1, commit=False)  # 6
    log.write(2)  # 7-8
    log.end(2, commit=True)  # 9
    log.write(1)  # 10-11: a new transaction of producer 1
    log.end(1, commit=True)  # 12
    values, aborted = log.read_committed()
    assert aborted == [(1, 0)]
    assert values == [b"p2-s0-0", b"p2-s0-1", b"p2-s2-0", b"p2-s2-1", b"p1-s4-0", b"p1-s4-1"]
    # Fetching after the aborted transaction's marker lists no aborted transaction.
    assert log.read_committed(7)[1] == []
    assert log.part.transactions.aborted == [AbortedTxn(1, 0, 6, 2)]


def test_read_uncommitted_reads_to_the_high_watermark_read_committed_to_the_lso() -> None:
    log = Log()
    log.write(3)
    uncommitted = log.replicas.read(log.part, 0, 1 << 20, min_one_batch=True)
    committed = log.replicas.read(log.part, 0, 1 << 20, min_one_batch=True, isolation_level=1)
    assert uncommitted.chunks and uncommitted.aborted_transactions is None
    assert not committed.chunks and committed.last_stable_offset == 0


def test_the_first_transactional_batch_needs_a_live_verification_guard() -> None:
    log = Log()
    result = log.replicas.append(log.part, txn_batch(5, 0), NOW)
    assert result.error_code == ErrorCode.INVALID_TXN_STATE
    guard = log.replicas.begin_verification(log.part, 5)
    # A marker lands between the verification and the write: the guard is void.
    log.replicas.append_txn_marker(log.part, 5, 0, 0, False, NOW)
    result = log.replicas.append(log.part, txn_batch(5, 0), NOW, verification_guard=guard)
    assert result.error_code == ErrorCode.INVALID_TXN_STATE
    guard = log.replicas.begin_verification(log.part, 5)
    assert (
        log.replicas.append(log.part, txn_batch(5, 0), NOW, verification_guard=guard).error_code
        == ErrorCode.NONE
    )
    # Later batches of the open transaction need none.
    assert log.replicas.append(log.part, txn_batch(5, 2), NOW).error_code == ErrorCode.NONE
    assert not log.replicas.needs_verification(log.part, 5)


def test_clients_cannot_write_control_batches() -> None:
    log = Log()
    control = build_batch([end_txn_marker(True, 0)], timestamp_ms=NOW, is_control=True, is_transactional=True)
    assert log.replicas.append(log.part, memoryview(control), NOW).error_code == ErrorCode.INVALID_RECORD


def test_markers_from_a_stale_epoch_or_coordinator_are_fenced() -> None:
    log = Log()
    log.write(9, epoch=3)
    result = log.replicas.append_txn_marker(log.part, 9, 2, 0, True, NOW)
    assert result.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    log.end(9, commit=True, epoch=3, coordinator_epoch=5)
    result = log.replicas.append_txn_marker(log.part, 9, 3, 4, True, NOW)
    assert result.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    # A fence bumped the epoch: the coordinator's abort marker at epoch + 1 is accepted.
    log.write(9, epoch=3)
    log.end(9, commit=False, epoch=4, coordinator_epoch=5)
    assert log.lso() == log.part.log.log_end_offset


@pytest.mark.parametrize("segment_bytes", [1 << 20, 150])
def test_a_restart_restores_the_index_and_open_transactions(segment_bytes: int) -> None:
    log = Log(segment_bytes)
    log.write(1)
    log.end(1, commit=False)
    log.write(2)
    log.write(1)
    log.end(1, commit=False)
    before = (list(log.part.transactions.aborted), log.lso(), log.read_committed())
    log.reopen()
    # The high watermark of a restarted single-replica log is its end; everything is decided but 2's.
    assert (list(log.part.transactions.aborted), log.lso(), log.read_committed()) == before
    log.end(2, commit=True)
    assert log.lso() == log.part.log.log_end_offset


def test_a_restart_without_an_index_file_rebuilds_it_from_the_log() -> None:
    log = Log()
    log.write(1)
    log.end(1, commit=False)
    log.write(1)
    log.end(1, commit=True)
    aborted = list(log.part.transactions.aborted)
    part = log.reopen(without_index=True)
    assert part.transactions.aborted == aborted == [AbortedTxn(1, 0, 2, 3)]


def test_a_crash_that_loses_the_tail_drops_its_index_entries() -> None:
    log = Log()
    log.write(1)
    log.part.log.flush()
    durable_end = log.part.log.log_end_offset
    log.end(1, commit=False)
    store = log.opener.stores[(TOPIC, 0)]
    store.crash()
    log.replicas = manager(log.opener)
    part = log.replicas.ensure_partition(TOPIC, 0, NOW)
    assert part.log.log_end_offset == durable_end
    assert part.transactions.aborted == []
    # The transaction is open again (its marker was lost with the tail).
    assert log.replicas.last_stable_offset(part) == 0


def test_a_follower_replaying_the_leaders_bytes_reaches_the_same_state() -> None:
    leader = Log()
    leader.write(1)
    leader.write(2)
    leader.end(1, commit=False)
    leader.end(2, commit=True)
    leader.write(3)
    follower_opener = MemoryOpener()
    follower = manager(follower_opener)
    part = follower.ensure_partition(TOPIC, 0, NOW, replicated=True, broker_id=2)
    data = leader.replicas.read_for_replica(leader.part, 0, 1 << 20)
    assert follower.append_as_follower(part, b"".join(bytes(c) for c in data.chunks), NOW) == ErrorCode.NONE
    follower.update_follower_high_watermark(part, leader.part.log.high_watermark)
    assert part.transactions.aborted == leader.part.transactions.aborted
    assert follower.last_stable_offset(part) == leader.lso()
    # Truncating below producer 2's commit marker (offset 5) re-opens its transaction.
    follower.truncate(part, 5, NOW)
    assert part.producer_state.open_transactions() == {2: 2}
    assert [a[:3] for a in part.transactions.aborted] == [(1, 0, 4)]


def test_a_marker_without_records_is_no_transaction_on_leader_follower_or_restart() -> None:
    """An ABORT (or COMMIT) of a producer with nothing open here -- a transaction that wrote to other
    partitions only, or a fence's abort -- gets no aborted entry and holds no last stable offset
    (Kafka's appendEndTxnMarker emits no CompletedTxn for it)."""
    leader = Log()
    leader.end(5, commit=False)  # 0: empty abort
    leader.write(1)  # 1-2
    leader.end(6, commit=True)  # 3: empty commit
    leader.end(1, commit=False)  # 4: aborts 1-2
    leader.end(1, commit=False)  # 5: empty again (a retried marker)
    expected = [AbortedTxn(1, 1, 4, 5)]
    assert leader.part.transactions.aborted == expected
    assert leader.part.transactions.unreplicated == [(1, 4)]
    assert leader.read_committed()[1] == [(1, 1)]

    follower = manager(MemoryOpener())
    part = follower.ensure_partition(TOPIC, 0, NOW, replicated=True, broker_id=2)
    data = leader.replicas.read_for_replica(leader.part, 0, 1 << 20)
    assert follower.append_as_follower(part, b"".join(bytes(c) for c in data.chunks), NOW) == ErrorCode.NONE
    assert part.transactions.aborted == expected
    assert [first for first, _ in part.transactions.unreplicated] == [1]

    # Rebuilt from the log (no index file) and restored from the index file alike.
    assert leader.reopen().transactions.aborted == expected
    assert leader.reopen(without_index=True).transactions.aborted == expected


def test_a_restart_below_a_commit_marker_still_holds_the_last_stable_offset() -> None:
    """A replica restarted with its high watermark below a COMMIT marker holds the last stable offset
    at that transaction's first offset until the high watermark passes the marker, as for an ABORT
    (Kafka's unreplicatedTxns): a read_committed consumer never reads a transaction whose marker may
    not be replicated."""
    leader = Log()
    leader.write(1)  # 0-1
    leader.write(2)  # 2-3
    leader.end(1, commit=True)  # 4
    leader.end(2, commit=True)  # 5
    follower = manager(MemoryOpener())
    part = follower.ensure_partition(TOPIC, 0, NOW, replicated=True, broker_id=2)
    data = leader.replicas.read_for_replica(leader.part, 0, 1 << 20)
    assert follower.append_as_follower(part, b"".join(bytes(c) for c in data.chunks), NOW) == ErrorCode.NONE
    follower.update_follower_high_watermark(part, 3)
    assert follower.last_stable_offset(part) == 0
    index, problems = recover(part.log, follower._new_producer_state(), NOW)
    assert problems == [] and index.aborted == []
    assert index.unreplicated == [(0, 4), (2, 5)]
    assert index.last_stable_offset(None, 3) == 0
    assert index.last_stable_offset(None, 5) == 2
    assert index.last_stable_offset(None, 6) == 6


def test_retention_drops_entries_below_the_log_start() -> None:
    index = TransactionIndex([AbortedTxn(1, 0, 4, 0), AbortedTxn(2, 5, 9, 5)])
    index.drop_below(5)
    assert index.aborted == [AbortedTxn(2, 5, 9, 5)]
    assert index.collect_aborted(0, 100) == [(2, 5)]
    assert index.collect_aborted(10, 100) == []
    assert index.collect_aborted(0, 5) == []


def test_index_entries_round_trip_and_bad_files_are_refused() -> None:
    entries = [AbortedTxn(1, 0, 4, 0), AbortedTxn(2**40, 5, 9, 5)]
    data = encode_entries(entries)
    assert len(data) == 34 * 2  # Kafka's TransactionIndex entry size
    assert decode_entries(data) == entries
    for cut in range(1, len(data)):
        if cut % 34:
            assert decode_entries(data[:cut]) is None
    assert decode_entries(b"\x00\x01" + data[2:34]) is None  # unknown version


@given(st.binary(max_size=120))
def test_index_decoder_never_raises(data: bytes) -> None:
    decoded = decode_entries(data)
    assert decoded is None or len(decoded) == len(data) // 34
