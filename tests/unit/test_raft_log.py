from __future__ import annotations

from pykraft.protocol.records import decode_records, read_batch_header, scan_batches
from pykraft.raft.log import MemoryRaftLog
from pykraft.raft.messages import OffsetAndEpoch


def _log_with_epochs(epochs: list[tuple[int, int]]) -> MemoryRaftLog:
    """``epochs``: (epoch, record count) per batch."""
    log = MemoryRaftLog()
    for epoch, count in epochs:
        log.append_as_leader([b"v%d" % i for i in range(count)], epoch, 1000)
    return log


def test_append_as_leader__returns_offsets_and_sets_partition_leader_epoch() -> None:
    log = MemoryRaftLog()
    assert log.append_as_leader([b"a", b"b"], 3, 10) == (0, 1)
    assert log.append_as_leader([b"c"], 3, 11) == (2, 2)
    assert (log.end_offset, log.last_fetched_epoch) == (3, 3)
    header = read_batch_header(log.read(0, 1 << 20))
    assert header.partition_leader_epoch == 3
    assert [r.value for r in decode_records(log.read(2, 1 << 20))] == [b"c"]


def test_read__small_max_bytes__returns_one_whole_batch() -> None:
    log = _log_with_epochs([(1, 2), (1, 2)])
    data = log.read(0, 1)
    assert [h.base_offset for _pos, h in scan_batches(data)] == [0]
    assert log.read(4, 100) == b""


def test_append_as_follower__copies_batches() -> None:
    leader = _log_with_epochs([(1, 1), (2, 3)])
    follower = MemoryRaftLog()
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.batches() == leader.batches()


def test_truncate_to__mid_batch__drops_whole_batch_and_flush_mark() -> None:
    log = _log_with_epochs([(1, 2), (2, 3)])
    log.flush(5)
    log.truncate_to(3)
    assert log.end_offset == 2
    assert log.flushed_offset == 2


def test_lose_unflushed__keeps_only_flushed_batches() -> None:
    log = _log_with_epochs([(1, 2), (1, 2)])
    log.flush(2)
    log.append_as_leader([b"x"], 2, 0)
    log.lose_unflushed()
    assert (log.end_offset, log.last_fetched_epoch) == (2, 1)


def test_end_offset_for_epoch__kafka_epoch_cache_semantics() -> None:
    # epoch 1: [0, 2), epoch 3: [2, 5), epoch 4: [5, 6)
    log = _log_with_epochs([(1, 2), (3, 3), (4, 1)])
    assert log.end_offset_for_epoch(4) == OffsetAndEpoch(6, 4)  # latest: the log end
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(5, 3)
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)  # between: floor epoch, next start
    assert log.end_offset_for_epoch(0) == OffsetAndEpoch(0, 0)  # below all: first start
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(6, 4)  # above all: log end
    assert MemoryRaftLog().end_offset_for_epoch(2) == OffsetAndEpoch(0, 0)
