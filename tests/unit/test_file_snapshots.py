"""Snapshots and the metadata log on disk (kafka-facts §4.1, §4.5; §8.11 file parts, §8.13
KafkaMetadataLogTest): FileSnapshotStore recovery and freeze/delete, FileRaftLog log start moves."""

from __future__ import annotations

import os
import random
import stat

import pytest

from pykraft.io.file_store import FileSegmentStore
from pykraft.io.raft_log import FileRaftLog
from pykraft.io.snapshots import FileSnapshotStore, SnapshotStateError
from pykraft.log.partition_log import PartitionLog
from pykraft.raft.log import build_leader_batch
from pykraft.raft.messages import OffsetAndEpoch
from pykraft.raft.node import RaftNode
from pykraft.raft.snapshot import snapshot_file_name, write_snapshot


def _data(sid: OffsetAndEpoch, ts: int = 0) -> bytes:
    return write_snapshot(sid, [b"v%d" % sid.offset], last_contained_log_timestamp=ts, now_ms=0)


def test_write__frozen_read_only_and_listed(tmp_path) -> None:
    store = FileSnapshotStore.open(str(tmp_path), 0)
    sid = OffsetAndEpoch(10, 2)
    data = _data(sid, ts=55)
    store.write(sid, data)
    path = tmp_path / snapshot_file_name(sid)
    assert path.read_bytes() == data
    assert not os.stat(path).st_mode & stat.S_IWUSR
    assert store.snapshot_ids() == [sid] and store.size(sid) == len(data)
    assert store.read(sid, 5, 10) == data[5:15]
    assert store.last_contained_log_timestamp(sid) == 55
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".part")]


def test_delete__removes_file_and_leaves_nothing(tmp_path) -> None:
    store = FileSnapshotStore.open(str(tmp_path), 0)
    sid = OffsetAndEpoch(10, 2)
    store.write(sid, _data(sid))
    store.delete(sid)
    assert os.listdir(tmp_path) == [] and store.snapshot_ids() == []
    store.delete(sid)  # deleting twice is fine


def test_open__cleans_partial_deleted_and_older_than_log_start(tmp_path) -> None:
    for sid in (OffsetAndEpoch(5, 1), OffsetAndEpoch(10, 2), OffsetAndEpoch(20, 3)):
        (tmp_path / snapshot_file_name(sid)).write_bytes(_data(sid))
    (tmp_path / "00000000000000000030-0000000003.checkpoint.part").write_bytes(b"half")
    (tmp_path / "00000000000000000030-0000000003-123.checkpoint.part").write_bytes(b"half")
    (tmp_path / "00000000000000000001-0000000001.checkpoint.deleted").write_bytes(b"old")
    (tmp_path / "00000000000000000000.log").write_bytes(b"")
    store = FileSnapshotStore.open(str(tmp_path), 10)
    assert store.snapshot_ids() == [OffsetAndEpoch(10, 2), OffsetAndEpoch(20, 3)]
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000000.log",
        snapshot_file_name(OffsetAndEpoch(10, 2)),
        snapshot_file_name(OffsetAndEpoch(20, 3)),
    ]


def test_open__file_without_footer_or_torn_never_counts(tmp_path) -> None:
    good, torn = OffsetAndEpoch(10, 2), OffsetAndEpoch(20, 3)
    (tmp_path / snapshot_file_name(good)).write_bytes(_data(good))
    (tmp_path / snapshot_file_name(torn)).write_bytes(_data(torn)[:-5])
    store = FileSnapshotStore.open(str(tmp_path), 0)
    assert store.snapshot_ids() == [good]
    assert (tmp_path / snapshot_file_name(torn)).exists()  # left for the operator, not deleted


def test_open__log_start_without_snapshot_is_a_one_line_error(tmp_path) -> None:
    (tmp_path / snapshot_file_name(OffsetAndEpoch(50, 1))).write_bytes(_data(OffsetAndEpoch(50, 1)))
    with pytest.raises(SnapshotStateError, match=r"log starts at offset 100 but no snapshot"):
        FileSnapshotStore.open(str(tmp_path), 100)
    assert FileSnapshotStore.open(str(tmp_path), 50).snapshot_ids() == [OffsetAndEpoch(50, 1)]


# --- FileRaftLog under snapshots (§8.13) ----------------------------------------------------------


def _raft_log(directory: str, segment_bytes: int = 300) -> FileRaftLog:
    return FileRaftLog(PartitionLog.open(FileSegmentStore(directory), FileRaftLog.config(segment_bytes)))


def _fill(raft_log: FileRaftLog, epochs: list[int], per_epoch: int = 4) -> None:
    for epoch in epochs:
        for i in range(per_epoch):
            raft_log.append_as_leader([b"x" * 40 + bytes([i])], epoch, 0)
    raft_log.flush(raft_log.end_offset)


def test_delete_before__deletes_whole_segments_and_keeps_epochs(tmp_path) -> None:
    raft_log = _raft_log(str(tmp_path))
    _fill(raft_log, [1, 2, 3])  # epoch 1: 0-3, 2: 4-7, 3: 8-11
    segments_before = raft_log.log.segments
    assert len(segments_before) > 2
    raft_log.delete_before(6)
    assert raft_log.start_offset == 6
    assert raft_log.log.segments[0].base_offset <= 6 < raft_log.log.segments[0].next_offset
    assert len(raft_log.log.segments) < len(segments_before)
    assert raft_log.end_offset_for_epoch(2) == OffsetAndEpoch(8, 2)
    assert raft_log.end_offset_for_epoch(3) == OffsetAndEpoch(12, 3)
    raft_log.log.close()
    reopened = _raft_log(str(tmp_path))
    assert (reopened.start_offset, reopened.end_offset, reopened.last_fetched_epoch) == (6, 12, 3)
    assert reopened.end_offset_for_epoch(2) == OffsetAndEpoch(8, 2)
    assert reopened.read(6, 1 << 20)  # reads from the new start


def test_truncate_fully_and_start_at(tmp_path) -> None:
    raft_log = _raft_log(str(tmp_path))
    _fill(raft_log, [1, 2])
    raft_log.truncate_fully_and_start_at(20)
    assert (raft_log.start_offset, raft_log.end_offset, raft_log.size_in_bytes) == (20, 20, 0)
    raft_log.append_as_follower(
        bytes(build_leader_batch([b"y"], base_offset=20, epoch=4, now_ms=0, is_control=False))
    )
    raft_log.log.close()
    reopened = _raft_log(str(tmp_path))
    assert (reopened.start_offset, reopened.end_offset, reopened.last_fetched_epoch) == (20, 21, 4)


def test_raft_node_over_files__snapshot_clean_restart(tmp_path) -> None:
    """A sole voter on FileRaftLog + FileSnapshotStore: snapshot, clean, reopen, load."""
    meta = str(tmp_path)
    raft_log = _raft_log(meta)
    store = FileSnapshotStore.open(meta, 0)
    node = RaftNode(1, frozenset({1}), raft_log, None, random.Random(1), 0, snapshots=store)

    def drain() -> None:
        while node.has_ready():
            ready = node.ready()
            if ready.flush_to_offset is not None:
                raft_log.flush(ready.flush_to_offset)
            node.advance(ready, 0)

    drain()
    for i in range(12):
        node.propose([b"r%02d" % i + b"x" * 40], 0)
        drain()
    for offset in (5, 9, 13):
        sid = OffsetAndEpoch(offset, 1)
        assert node.validate_new_snapshot_id(sid)
        store.write(sid, _data(sid))
    assert node.maybe_clean(0, retention_bytes=0, retention_ms=-1)
    assert store.snapshot_ids() == [OffsetAndEpoch(13, 1)]
    assert raft_log.start_offset == 13
    assert sorted(n for n in os.listdir(meta) if "checkpoint" in n) == [
        snapshot_file_name(OffsetAndEpoch(13, 1))
    ]
    raft_log.log.close()
    reopened = _raft_log(meta)
    store2 = FileSnapshotStore.open(meta, reopened.start_offset)
    node2 = RaftNode(1, frozenset({1}), reopened, node.quorum_state(), random.Random(2), 0, snapshots=store2)
    assert node2.ready().load_snapshot == OffsetAndEpoch(13, 1)
