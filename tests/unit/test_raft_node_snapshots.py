"""KIP-630 in the pure raft core: kafka-facts §8.10 (KafkaRaftClientSnapshotTest) and the validation
parts of §8.13 (KafkaMetadataLogTest), with MemoryRaftLog + MemorySnapshotStore."""

from __future__ import annotations

import random

import pytest

from pykraft.core.errors import ErrorCode
from pykraft.raft.log import MemoryRaftLog
from pykraft.raft.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Inbound,
    OffsetAndEpoch,
    Outbound,
)
from pykraft.raft.node import RaftNode
from pykraft.raft.ready import CommittedBatch, Ready
from pykraft.raft.snapshot import MemorySnapshotStore, read_snapshot, write_snapshot
from pykraft.raft.state import QuorumState, Role

OBSERVER = 9


def _snapshot_bytes(snapshot_id: OffsetAndEpoch, values: list[bytes] | None = None, ts: int = 0) -> bytes:
    values = values if values is not None else [b"state-%d" % snapshot_id.offset]
    return write_snapshot(snapshot_id, values, last_contained_log_timestamp=ts, now_ms=0)


def _drain(node: RaftNode, now_ms: int = 0) -> tuple[list[Ready], list[Outbound], list[CommittedBatch]]:
    readies, messages, committed = [], [], []
    while node.has_ready():
        ready = node.ready()
        if ready.flush_to_offset is not None:
            node.log.flush(ready.flush_to_offset)
        readies.append(ready)
        messages += ready.messages
        committed += ready.committed
        node.advance(ready, now_ms)
    return readies, messages, committed


def _single_leader(
    epochs: int = 1, proposals: int = 3, store: MemorySnapshotStore | None = None
) -> tuple[RaftNode, MemoryRaftLog, MemorySnapshotStore]:
    """A sole voter that led ``epochs`` epochs; each epoch adds a LeaderChange and ``proposals``
    one-record batches (so epoch e spans a known range)."""
    log, store = MemoryRaftLog(), store or MemorySnapshotStore()
    state = None
    node: RaftNode | None = None
    for _ in range(epochs):
        node = RaftNode(1, frozenset({1}), log, state, random.Random(1), 0, snapshots=store)
        _drain(node)
        for i in range(proposals):
            node.propose([b"r%d" % i], 0)
            _drain(node)
        state = node.quorum_state()
    assert node is not None and node.role == Role.LEADER
    return node, log, store


def _fetch(node: RaftNode, offset: int, epoch: int, replica_id: int = OBSERVER) -> FetchResponse:
    request = FetchRequest(None, replica_id, node.epoch, offset, epoch, max_wait_ms=0)
    node.step(Inbound(replica_id, request, 77), 0)
    _readies, messages, _ = _drain(node)
    (response,) = [m.message for m in messages if m.correlation_id == 77]
    assert isinstance(response, FetchResponse)
    return response


def _fetch_snapshot(
    node: RaftNode, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int = 1 << 20, **kw: object
) -> FetchSnapshotResponse:
    request = FetchSnapshotRequest(
        kw.pop("cluster_id", None),  # type: ignore[arg-type]
        int(kw.pop("replica_id", OBSERVER)),  # type: ignore[call-overload]
        int(kw.pop("epoch", node.epoch)),  # type: ignore[call-overload]
        snapshot_id,
        position,
        max_bytes,
        **kw,  # type: ignore[arg-type]
    )
    node.step(Inbound(OBSERVER, request, 88), 0)
    _readies, messages, _ = _drain(node)
    (response,) = [m.message for m in messages if m.correlation_id == 88]
    assert isinstance(response, FetchSnapshotResponse)
    return response


def _snapshot_and_clean(node: RaftNode, store: MemorySnapshotStore, snapshot_id: OffsetAndEpoch) -> None:
    assert node.validate_new_snapshot_id(snapshot_id)
    store.write(snapshot_id, _snapshot_bytes(snapshot_id))
    assert node.delete_before_snapshot(snapshot_id)


# --- leader: Fetch redirect (§8.10 106-114) ------------------------------------------------------


def test_latest_snapshot_id__missing_then_present() -> None:
    node, _log, store = _single_leader()
    assert node.latest_snapshot_id() is None
    store.write(OffsetAndEpoch(3, 1), _snapshot_bytes(OffsetAndEpoch(3, 1)))
    store.write(OffsetAndEpoch(0, 0), _snapshot_bytes(OffsetAndEpoch(0, 0)))  # bootstrap: never counts
    assert node.latest_snapshot_id() == OffsetAndEpoch(3, 1)


def test_fetch_below_log_start__answers_latest_snapshot_id() -> None:
    node, log, store = _single_leader(epochs=2)  # epoch 1: offsets 0-3, epoch 2: 4-7
    _snapshot_and_clean(node, store, OffsetAndEpoch(3, 1))
    store.write(OffsetAndEpoch(6, 2), _snapshot_bytes(OffsetAndEpoch(6, 2)))
    assert log.start_offset == 3
    response = _fetch(node, 2, 1)
    assert response.snapshot_id == OffsetAndEpoch(6, 2)  # the latest, not the earliest
    assert response.records == b""


def test_leader_immediately_sends_snapshot_id__fetch_at_offset_zero() -> None:
    node, _log, store = _single_leader(epochs=2)
    store.write(OffsetAndEpoch(6, 2), _snapshot_bytes(OffsetAndEpoch(6, 2)))
    assert _fetch(node, 0, 0).snapshot_id == OffsetAndEpoch(6, 2)


def test_fetch_offset_zero_without_snapshot__records() -> None:
    node, _log, _store = _single_leader()
    response = _fetch(node, 0, 0)
    assert response.snapshot_id is None and response.records


def test_fetch_at_log_start__valid_epoch_reads__other_epoch_gets_snapshot() -> None:
    node, _log, store = _single_leader(epochs=2)
    _snapshot_and_clean(node, store, OffsetAndEpoch(3, 1))
    valid = _fetch(node, 3, 1)
    assert valid.snapshot_id is None and valid.diverging_epoch is None and valid.records
    assert _fetch(node, 3, 2).snapshot_id == OffsetAndEpoch(3, 1)


def test_fetch_with_last_fetched_epoch_older_than_oldest_snapshot__snapshot_id() -> None:
    node, _log, store = _single_leader(epochs=3)  # epoch 3 starts at 8
    _snapshot_and_clean(node, store, OffsetAndEpoch(9, 3))
    assert _fetch(node, 10, 2).snapshot_id == OffsetAndEpoch(9, 3)


def test_fetch_past_log_start_in_unknown_epoch__diverging() -> None:
    node, _log, store = _single_leader(epochs=3)
    _snapshot_and_clean(node, store, OffsetAndEpoch(3, 1))
    response = _fetch(node, 11, 2)  # epoch 2 ends at 8 on the leader
    assert response.snapshot_id is None
    assert response.diverging_epoch == OffsetAndEpoch(8, 2)


def test_fetch_with_larger_last_fetched_epoch__invalid_request() -> None:
    node, _log, _store = _single_leader()
    request = FetchRequest(None, OBSERVER, node.epoch, 1, node.epoch + 1, max_wait_ms=0)
    node.step(Inbound(OBSERVER, request, 5), 0)
    _r, messages, _c = _drain(node)
    assert messages[0].message.error_code == ErrorCode.INVALID_REQUEST


# --- leader: FetchSnapshot (§8.10 115-122) -------------------------------------------------------


def test_fetch_snapshot__missing_and_bootstrap__snapshot_not_found() -> None:
    node, _log, store = _single_leader()
    assert _fetch_snapshot(node, OffsetAndEpoch(3, 1), 0).error_code == ErrorCode.SNAPSHOT_NOT_FOUND
    store.write(OffsetAndEpoch(0, 0), _snapshot_bytes(OffsetAndEpoch(0, 0)))
    assert _fetch_snapshot(node, OffsetAndEpoch(0, 0), 0).error_code == ErrorCode.SNAPSHOT_NOT_FOUND


def test_fetch_snapshot__unknown_partition() -> None:
    node, _log, store = _single_leader()
    store.write(OffsetAndEpoch(3, 1), _snapshot_bytes(OffsetAndEpoch(3, 1)))
    response = _fetch_snapshot(node, OffsetAndEpoch(3, 1), 0, topic_name="other")
    assert response.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    response = _fetch_snapshot(node, OffsetAndEpoch(3, 1), 0, partition=1)
    assert response.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_snapshot__whole_in_one_response() -> None:
    node, _log, store = _single_leader()
    data = _snapshot_bytes(OffsetAndEpoch(3, 1))
    store.write(OffsetAndEpoch(3, 1), data)
    response = _fetch_snapshot(node, OffsetAndEpoch(3, 1), 0)
    assert response.error_code == ErrorCode.NONE
    assert (response.size, response.position, response.unaligned_records) == (len(data), 0, data)
    assert response.snapshot_id == OffsetAndEpoch(3, 1)


def test_fetch_snapshot__partial__two_responses_cover_the_file() -> None:
    node, _log, store = _single_leader()
    data = _snapshot_bytes(OffsetAndEpoch(3, 1), [b"x" * 100, b"y" * 100])
    store.write(OffsetAndEpoch(3, 1), data)
    half = len(data) // 2
    first = _fetch_snapshot(node, OffsetAndEpoch(3, 1), 0, half)
    second = _fetch_snapshot(
        node, OffsetAndEpoch(3, 1), first.position + len(first.unaligned_records), half + 1
    )
    assert first.unaligned_records + second.unaligned_records == data
    assert second.position == half and first.size == second.size == len(data)


@pytest.mark.parametrize("position", [-1, "size", "size+1"])
def test_fetch_snapshot__invalid_position__position_out_of_range(position: object) -> None:
    node, _log, store = _single_leader()
    data = _snapshot_bytes(OffsetAndEpoch(3, 1))
    store.write(OffsetAndEpoch(3, 1), data)
    pos = {"size": len(data), "size+1": len(data) + 1}.get(str(position), position)
    response = _fetch_snapshot(node, OffsetAndEpoch(3, 1), int(pos))  # type: ignore[call-overload]
    assert response.error_code == ErrorCode.POSITION_OUT_OF_RANGE


def test_fetch_snapshot__older_and_newer_epoch__fenced_and_unknown() -> None:
    node, _log, store = _single_leader(epochs=2)
    store.write(OffsetAndEpoch(3, 1), _snapshot_bytes(OffsetAndEpoch(3, 1)))
    assert _fetch_snapshot(node, OffsetAndEpoch(3, 1), 0, epoch=1).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (
        _fetch_snapshot(node, OffsetAndEpoch(3, 1), 0, epoch=3).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    )


def test_fetch_snapshot__cluster_id_validation() -> None:
    log, store = MemoryRaftLog(), MemorySnapshotStore()
    node = RaftNode(1, frozenset({1}), log, None, random.Random(1), 0, snapshots=store, cluster_id="abc")
    _drain(node)
    store.write(OffsetAndEpoch(1, 1), _snapshot_bytes(OffsetAndEpoch(1, 1)))
    assert _fetch_snapshot(node, OffsetAndEpoch(1, 1), 0, cluster_id="abc").error_code == ErrorCode.NONE
    assert _fetch_snapshot(node, OffsetAndEpoch(1, 1), 0).error_code == ErrorCode.NONE  # null accepted
    for bad in ("", "invalid-uuid"):
        response = _fetch_snapshot(node, OffsetAndEpoch(1, 1), 0, cluster_id=bad)
        assert response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID


def _follower(store: MemorySnapshotStore | None = None, log: MemoryRaftLog | None = None) -> RaftNode:
    node = RaftNode(
        2,
        frozenset({1, 2, 3}),
        log or MemoryRaftLog(),
        QuorumState(5, leader_id=1, voters=frozenset({1, 2, 3})),
        random.Random(2),
        0,
        snapshots=store or MemorySnapshotStore(),
    )
    assert node.role == Role.FOLLOWER
    return node


def test_fetch_snapshot_request_as_follower__not_leader() -> None:
    store = MemorySnapshotStore()
    store.write(OffsetAndEpoch(3, 1), _snapshot_bytes(OffsetAndEpoch(3, 1)))
    node = _follower(store)
    _drain(node)
    response = _fetch_snapshot(node, OffsetAndEpoch(3, 1), 0)
    assert response.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (response.leader_id, response.leader_epoch) == (1, 5)


def test_fetch_snapshot_from_voters_resets_check_quorum_but_not_from_observers() -> None:
    log, store = MemoryRaftLog(), MemorySnapshotStore()
    node = RaftNode(
        1,
        frozenset({1, 2, 3}),
        log,
        QuorumState(4, voted_id=1, voters=frozenset({1, 2, 3})),
        random.Random(3),
        0,
        snapshots=store,
        fetch_timeout_ms=1000,
    )
    from pykraft.raft.messages import VoteResponse

    node.step(Inbound(2, VoteResponse(ErrorCode.NONE, -1, 4, True), 0), 0)
    _drain(node)
    assert node.role == Role.LEADER
    store.write(OffsetAndEpoch(1, 4), _snapshot_bytes(OffsetAndEpoch(1, 4)))
    check_quorum_ms = int(1000 * 1.5)
    request = FetchSnapshotRequest(None, 2, node.epoch, OffsetAndEpoch(1, 4), 0)
    node.step(Inbound(2, request, 1), check_quorum_ms - 10)  # a voter: majority (with the leader)
    node.tick(check_quorum_ms + 100)
    assert node.role == Role.LEADER
    observer = FetchSnapshotRequest(None, OBSERVER, node.epoch, OffsetAndEpoch(1, 4), 0)
    node.step(Inbound(OBSERVER, observer, 2), 2 * check_quorum_ms - 20)
    node.tick(2 * check_quorum_ms)
    assert node.role == Role.RESIGNED


# --- follower: download and install (§8.10 123-127, §4.6) ---------------------------------------


def _last_request(node: RaftNode, now_ms: int = 0) -> Outbound:
    _readies, messages, _ = _drain(node, now_ms)
    assert messages, "no request sent"
    return messages[-1]


def test_fetch_response_with_invalid_snapshot_id__ignored() -> None:
    node = _follower()
    fetch = _last_request(node)
    for now_ms, bad in ((100, OffsetAndEpoch(-1, 1)), (200, OffsetAndEpoch(3, -1))):
        response = FetchResponse(ErrorCode.NONE, 1, 5, snapshot_id=bad)
        node.step(Inbound(1, response, fetch.correlation_id), now_ms - 50)
        node.tick(now_ms)
        fetch = _last_request(node, now_ms)
        assert isinstance(fetch.message, FetchRequest) and fetch.message.fetch_offset == 0


def test_fetch_response_with_snapshot_id__downloads_in_chunks_installs_and_resumes_fetch() -> None:
    log = MemoryRaftLog()
    store = MemorySnapshotStore()
    node = _follower(store, log)
    snapshot_id = OffsetAndEpoch(10, 3)
    data = _snapshot_bytes(snapshot_id, [b"a" * 300, b"b" * 300])
    fetch = _last_request(node)
    node.step(
        Inbound(1, FetchResponse(ErrorCode.NONE, 1, 5, 12, snapshot_id=snapshot_id), fetch.correlation_id), 0
    )
    request = _last_request(node)
    assert isinstance(request.message, FetchSnapshotRequest)
    assert (request.message.snapshot_id, request.message.position) == (snapshot_id, 0)
    half = len(data) // 2
    response = FetchSnapshotResponse(ErrorCode.NONE, 1, 5, snapshot_id, len(data), 0, data[:half])
    node.step(Inbound(1, response, request.correlation_id), 1)
    request = _last_request(node, 1)
    assert isinstance(request.message, FetchSnapshotRequest) and request.message.position == half
    assert store.snapshot_ids() == []  # invisible until complete
    response = FetchSnapshotResponse(ErrorCode.NONE, 1, 5, snapshot_id, len(data), half, data[half:])
    node.step(Inbound(1, response, request.correlation_id), 2)
    readies, messages, committed = _drain(node, 2)
    assert [r.load_snapshot for r in readies if r.load_snapshot] == [snapshot_id]
    assert committed == []
    assert store.get(snapshot_id) == data
    assert (log.start_offset, log.end_offset, node.high_watermark) == (10, 10, 10)
    (fetch_again,) = [m.message for m in messages]
    assert isinstance(fetch_again, FetchRequest)
    assert (fetch_again.fetch_offset, fetch_again.last_fetched_epoch) == (10, 3)
    assert read_snapshot(store.get(snapshot_id)).values == [b"a" * 300, b"b" * 300]


def test_fetch_snapshot_response_missing_snapshot__abandons_and_fetches() -> None:
    store = MemorySnapshotStore()
    node = _follower(store)
    fetch = _last_request(node)
    node.step(
        Inbound(
            1, FetchResponse(ErrorCode.NONE, 1, 5, snapshot_id=OffsetAndEpoch(10, 3)), fetch.correlation_id
        ),
        0,
    )
    request = _last_request(node)
    response = FetchSnapshotResponse(ErrorCode.SNAPSHOT_NOT_FOUND, 1, 5, OffsetAndEpoch(10, 3))
    node.step(Inbound(1, response, request.correlation_id), 1)
    again = _last_request(node, 1)
    assert isinstance(again.message, FetchRequest) and store.snapshot_ids() == []


def test_fetch_snapshot_response_wrong_id_or_position__abandons() -> None:
    node = _follower()
    fetch = _last_request(node)
    node.step(
        Inbound(
            1, FetchResponse(ErrorCode.NONE, 1, 5, snapshot_id=OffsetAndEpoch(10, 3)), fetch.correlation_id
        ),
        0,
    )
    request = _last_request(node)
    response = FetchSnapshotResponse(ErrorCode.NONE, 1, 5, OffsetAndEpoch(11, 3), 100, 0, b"x")
    node.step(Inbound(1, response, request.correlation_id), 1)
    assert isinstance(_last_request(node, 1).message, FetchRequest)


def test_fetch_snapshot_response_from_newer_epoch__follows_new_leader_and_drops_download() -> None:
    node = _follower()
    fetch = _last_request(node)
    node.step(
        Inbound(
            1, FetchResponse(ErrorCode.NONE, 1, 5, snapshot_id=OffsetAndEpoch(10, 3)), fetch.correlation_id
        ),
        0,
    )
    request = _last_request(node)
    response = FetchSnapshotResponse(ErrorCode.FENCED_LEADER_EPOCH, 3, 6)
    node.step(Inbound(1, response, request.correlation_id), 1)
    assert (node.role, node.leader_id, node.epoch) == (Role.FOLLOWER, 3, 6)
    nxt = _last_request(node, 1)
    assert isinstance(nxt.message, FetchRequest) and nxt.destination_id == 3


def test_fetch_snapshot_response_from_older_epoch__ignored() -> None:
    node = _follower()
    fetch = _last_request(node)
    node.step(
        Inbound(
            1, FetchResponse(ErrorCode.NONE, 1, 5, snapshot_id=OffsetAndEpoch(10, 3)), fetch.correlation_id
        ),
        0,
    )
    request = _last_request(node)
    stale = FetchSnapshotResponse(ErrorCode.NONE, 1, 4, OffsetAndEpoch(10, 3), 5, 0, b"xxxxx")
    node.step(Inbound(1, stale, request.correlation_id), 1)
    assert node.snapshots.snapshot_ids() == []


def test_follower_restart_with_installed_snapshot__loads_it_and_fetches_from_its_end() -> None:
    store = MemorySnapshotStore()
    store.write(OffsetAndEpoch(10, 3), _snapshot_bytes(OffsetAndEpoch(10, 3)))
    log = MemoryRaftLog()  # a crash after storing the snapshot, before truncating the log
    node = _follower(store, log)
    readies, messages, _ = _drain(node)
    assert readies[0].load_snapshot == OffsetAndEpoch(10, 3)
    assert (log.start_offset, log.end_offset) == (10, 10)
    fetch = [m.message for m in messages if isinstance(m.message, FetchRequest)][-1]
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (10, 3)


# --- snapshot creation and log start (§8.13 134-141, core part) ----------------------------------


def test_validate_new_snapshot_id__rules() -> None:
    node, log, store = _single_leader(epochs=2)  # epoch 1: 0-3, epoch 2: 4-7, hw 8
    assert node.high_watermark == 8
    assert node.validate_new_snapshot_id(OffsetAndEpoch(4, 1))  # at an epoch boundary
    assert node.validate_new_snapshot_id(OffsetAndEpoch(8, 2))  # from the end offset
    with pytest.raises(ValueError, match="high watermark"):
        node.validate_new_snapshot_id(OffsetAndEpoch(9, 2))
    with pytest.raises(ValueError):
        node.validate_new_snapshot_id(OffsetAndEpoch(6, 1))  # epoch 1 ended at 4: diverging
    with pytest.raises(ValueError):
        node.validate_new_snapshot_id(OffsetAndEpoch(6, 3))  # a much later epoch
    store.write(OffsetAndEpoch(4, 1), _snapshot_bytes(OffsetAndEpoch(4, 1)))
    assert not node.validate_new_snapshot_id(OffsetAndEpoch(4, 1))  # exists
    assert node.delete_before_snapshot(OffsetAndEpoch(4, 1))
    assert not node.validate_new_snapshot_id(OffsetAndEpoch(3, 1))  # before the log start
    assert log.start_offset == 4


def test_delete_before_snapshot__rules_and_forgets_older() -> None:
    node, log, store = _single_leader(epochs=2)
    assert not node.delete_before_snapshot(OffsetAndEpoch(4, 1))  # unknown
    for sid in (OffsetAndEpoch(2, 1), OffsetAndEpoch(4, 1), OffsetAndEpoch(6, 2)):
        store.write(sid, _snapshot_bytes(sid))
    assert node.delete_before_snapshot(OffsetAndEpoch(4, 1))
    assert store.snapshot_ids() == [OffsetAndEpoch(4, 1), OffsetAndEpoch(6, 2)]
    assert not node.delete_before_snapshot(OffsetAndEpoch(4, 1))  # not above the log start
    assert log.start_offset == 4 and log.end_offset == 8


def test_maybe_clean__size_retention_keeps_at_least_one_snapshot() -> None:
    node, log, store = _single_leader(epochs=2)
    for sid in (OffsetAndEpoch(2, 1), OffsetAndEpoch(4, 1), OffsetAndEpoch(6, 2)):
        store.write(sid, _snapshot_bytes(sid))
    moved = node.maybe_clean(0, retention_bytes=0, retention_ms=-1)
    assert moved == [OffsetAndEpoch(4, 1), OffsetAndEpoch(6, 2)]
    assert store.snapshot_ids() == [OffsetAndEpoch(6, 2)]
    assert log.start_offset == 6
    assert node.maybe_clean(0, retention_bytes=0, retention_ms=0) == []  # one left: kept


def test_maybe_clean__time_retention_uses_last_contained_timestamp() -> None:
    node, log, store = _single_leader(epochs=2)
    store.write(OffsetAndEpoch(2, 1), _snapshot_bytes(OffsetAndEpoch(2, 1), ts=1000))
    store.write(OffsetAndEpoch(6, 2), _snapshot_bytes(OffsetAndEpoch(6, 2), ts=5000))
    assert node.maybe_clean(1500, retention_bytes=-1, retention_ms=1000) == []
    assert node.maybe_clean(2001, retention_bytes=-1, retention_ms=1000) == [OffsetAndEpoch(6, 2)]
    assert log.start_offset == 6
