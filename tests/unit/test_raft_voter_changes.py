"""KIP-853 in the raft core: VotersRecord / KRaftVersionRecord, the voter set the log gives, and
AddRaftVoter / RemoveRaftVoter in the leader (one change at a time), driven through a tiny in-memory
network that delivers every message at once."""

from __future__ import annotations

import random
import struct
import uuid

from pykraft.core.errors import ErrorCode
from pykraft.raft.control import (
    Endpoint,
    Voter,
    decode_kraft_version_record,
    decode_voters_record,
    encode_kraft_version_record,
    encode_voters_record,
)
from pykraft.raft.log import MemoryRaftLog
from pykraft.raft.messages import Inbound, OffsetAndEpoch
from pykraft.raft.node import RaftNode
from pykraft.raft.snapshot import MemorySnapshotStore, read_snapshot, write_snapshot
from pykraft.raft.state import Role
from pykraft.raft.voter_set import VoterSet, scan_kraft_control_records


def _voter(voter_id: int) -> Voter:
    directory_id = uuid.UUID(int=voter_id * 7919).bytes
    return Voter(voter_id, directory_id, (Endpoint("CONTROLLER", "127.0.0.1", 9000 + voter_id),))


def test_voters_record__bytes_follow_the_schema_and_round_trip() -> None:
    voter = _voter(3)
    raw = encode_voters_record((voter,))
    expected = (
        struct.pack(">h", 0)  # Version
        + bytes([2])  # one voter (compact array: n + 1)
        + struct.pack(">i", 3)
        + voter.directory_id
        + bytes([2])  # one endpoint
        + bytes([11])
        + b"CONTROLLER"
        + bytes([10])
        + b"127.0.0.1"
        + struct.pack(">H", 9003)
        + bytes([0])  # Endpoint tagged fields
        + struct.pack(">hh", 0, 1)  # KRaftVersionFeature
        + bytes([0, 0, 0])  # KRaftVersionFeature, Voter, top-level tagged fields
    )
    assert raw == expected
    assert decode_voters_record(raw) == (voter,)
    assert decode_kraft_version_record(encode_kraft_version_record(1)) == 1
    assert encode_kraft_version_record(1) == b"\x00\x00\x00\x01\x00"


class Net:
    """Nodes that deliver each other's messages at once; time moves in 10 ms ticks."""

    def __init__(self) -> None:
        self.nodes: dict[int, RaftNode] = {}
        self.logs: dict[int, MemoryRaftLog] = {}
        self.down: set[int] = set()
        self.now_ms = 0

    def start(
        self, node_id: int, bootstrap_ids: frozenset[int], bootstrap: VoterSet | None = None
    ) -> RaftNode:
        log = self.logs.setdefault(node_id, MemoryRaftLog())
        node = RaftNode(
            node_id,
            bootstrap_ids,
            log,
            None,
            random.Random(node_id),
            self.now_ms,
            election_timeout_ms=200,
            fetch_timeout_ms=400,
            request_timeout_ms=300,
            fetch_max_wait_ms=50,
            kraft_version=1,
            bootstrap_voters=bootstrap,
        )
        self.nodes[node_id] = node
        return node

    def run(self, duration_ms: int) -> None:
        end_ms = self.now_ms + duration_ms
        while self.now_ms < end_ms:
            self.now_ms += 10
            for node_id, node in sorted(self.nodes.items()):
                if node_id not in self.down and node.next_deadline_ms() <= self.now_ms:
                    node.tick(self.now_ms)
            self._deliver()

    def _deliver(self) -> None:
        busy = True
        while busy:
            busy = False
            for node_id, node in sorted(self.nodes.items()):
                if node_id in self.down:
                    continue
                while node.has_ready():
                    busy = True
                    ready = node.ready()
                    if ready.flush_to_offset is not None:
                        node.log.flush(ready.flush_to_offset)
                    node.advance(ready, self.now_ms)
                    for out in ready.messages:
                        peer = self.nodes.get(out.destination_id)
                        if peer is not None and out.destination_id not in self.down:
                            peer.step(Inbound(node_id, out.message, out.correlation_id), self.now_ms)

    def leader(self) -> RaftNode:
        (leader,) = [n for i, n in self.nodes.items() if i not in self.down and n.role == Role.LEADER]
        return leader


def _three_voters() -> tuple[Net, VoterSet]:
    """Voter 1 starts alone from its bootstrap set (the first voter), then 2 and 3 join and are added."""
    net = Net()
    net.start(1, frozenset({1}), VoterSet.of([_voter(1)]))
    for joiner in (2, 3):
        net.start(joiner, frozenset({1}))
        net.run(600)
        change = net.leader().add_voter(_voter(joiner), net.now_ms)
        assert change.error == ErrorCode.NONE, change
        net.run(300)
    return net, VoterSet.of([_voter(1), _voter(2), _voter(3)])


def test_first_voter__writes_kraft_version_and_its_voter_set_in_its_first_batch() -> None:
    net = Net()
    node = net.start(1, frozenset({1}), VoterSet.of([_voter(1)]))
    assert node.role == Role.LEADER and node.kraft_version == 1
    entries = list(scan_kraft_control_records(node.log.read(0, 1 << 20)))
    assert [(e.offset, e.kraft_version, e.voters) for e in entries] == [
        (1, 1, None),
        (2, None, VoterSet.of([_voter(1)])),
    ]


def test_add_voters__joiners_follow_as_observers_then_become_voters_everywhere() -> None:
    net, voters = _three_voters()
    for node in net.nodes.values():
        assert node.voter_set == voters
    leader = net.leader()
    description = leader.describe_quorum(net.now_ms)
    assert description is not None
    assert [v.replica_id for v in description.current_voters] == [1, 2, 3]
    # The new voters count: with 2 and 3 down nothing commits.
    net.down |= {2, 3}
    hw = leader.high_watermark
    leader.propose([b"x"], net.now_ms)
    net.run(100)
    assert leader.high_watermark == hw


def test_add_voter__not_caught_up_observer_or_unknown_replica__request_timed_out() -> None:
    net = Net()
    net.start(1, frozenset({1}), VoterSet.of([_voter(1)]))
    net.run(100)
    change = net.leader().add_voter(_voter(5), net.now_ms)
    assert change.error == ErrorCode.REQUEST_TIMED_OUT


def test_one_change_at_a_time__second_change_waits_for_the_first_to_commit() -> None:
    net, _voters = _three_voters()
    net.start(4, frozenset({1}))
    net.run(600)
    leader = net.leader()
    net.down |= {2, 3} - {leader.node_id}
    first = leader.add_voter(_voter(4), net.now_ms)
    assert first.error == ErrorCode.NONE
    second = leader.remove_voter(3, _voter(3).directory_id, net.now_ms)
    assert second.error == ErrorCode.REQUEST_TIMED_OUT


def test_errors__duplicate__unknown_or_wrong_directory__not_leader__static_quorum() -> None:
    net, _voters = _three_voters()
    leader = net.leader()
    follower = next(n for n in net.nodes.values() if n is not leader)
    assert leader.add_voter(_voter(2), net.now_ms).error == ErrorCode.DUPLICATE_VOTER
    assert leader.remove_voter(9, _voter(9).directory_id, net.now_ms).error == ErrorCode.VOTER_NOT_FOUND
    assert leader.remove_voter(2, _voter(3).directory_id, net.now_ms).error == ErrorCode.VOTER_NOT_FOUND
    assert (
        follower.remove_voter(2, _voter(2).directory_id, net.now_ms).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    static = RaftNode(1, frozenset({1}), MemoryRaftLog(), None, random.Random(1), 0)
    assert static.role == Role.LEADER and static.kraft_version == 0
    assert static.add_voter(_voter(2), 0).error == ErrorCode.UNSUPPORTED_VERSION


def test_remove_the_leader__it_resigns_after_the_removal_commits_and_another_voter_leads() -> None:
    net, _voters = _three_voters()
    old = net.leader()
    change = old.remove_voter(old.node_id, _voter(old.node_id).directory_id, net.now_ms)
    assert change.error == ErrorCode.NONE
    net.run(1500)
    new = net.leader()
    assert new is not old and not old.is_voter
    assert new.voter_ids == {1, 2, 3} - {old.node_id}
    assert old.high_watermark > change.voters_offset
    description = new.describe_quorum(net.now_ms)
    assert description is not None
    assert old.node_id not in [v.replica_id for v in description.current_voters]


def test_replace_voter_3_by_4__the_done_when_sequence_in_the_core() -> None:
    net, _voters = _three_voters()
    net.down.add(3)  # stopped for good; its disk is gone
    net.start(4, frozenset({1, 2}))
    net.run(800)
    leader = net.leader()
    assert leader.add_voter(_voter(4), net.now_ms).error == ErrorCode.NONE
    net.run(300)
    leader = net.leader()
    assert leader.remove_voter(3, _voter(3).directory_id, net.now_ms).error == ErrorCode.NONE
    net.run(300)
    for node_id in (1, 2, 4):
        assert net.nodes[node_id].voter_ids == {1, 2, 4}
    description = net.leader().describe_quorum(net.now_ms)
    assert description is not None
    assert [v.replica_id for v in description.current_voters] == [1, 2, 4]


def test_truncation__an_uncommitted_voter_change_is_undone_with_the_log() -> None:
    net, voters = _three_voters()
    old = net.leader()
    others = sorted(set(net.nodes) - {old.node_id})
    net.start(4, frozenset(others))
    net.run(600)
    # The leader appends the change, then is cut off before anyone fetches it.
    change = old.add_voter(_voter(4), net.now_ms)
    assert change.error == ErrorCode.NONE and old.voter_ids == {1, 2, 3, 4}
    net.down.add(old.node_id)
    net.run(1500)
    new = net.leader()
    assert new.voter_set == voters
    new.propose([b"after"], net.now_ms)
    net.run(100)
    # Back, the old leader learns the new epoch, truncates its uncommitted change and follows.
    net.down.discard(old.node_id)
    net.run(2000)
    assert old.role == Role.FOLLOWER and old.leader_id == new.node_id
    assert old.voter_set == voters
    assert new.add_voter(_voter(4), net.now_ms).error == ErrorCode.NONE


def test_restart_and_snapshot__voter_set_recovered_from_log_and_from_snapshot_header() -> None:
    net, voters = _three_voters()
    leader = net.leader()
    log = net.logs[leader.node_id]
    restarted = RaftNode(
        leader.node_id, frozenset({1}), log, None, random.Random(3), net.now_ms, kraft_version=1
    )
    assert restarted.voter_set == voters
    snapshot_id = OffsetAndEpoch(leader.high_watermark, leader.epoch)
    data = write_snapshot(
        snapshot_id,
        [b"state"],
        last_contained_log_timestamp=0,
        now_ms=0,
        kraft_records=leader.kraft_control_records(snapshot_id.offset),
    )
    assert read_snapshot(data).values == [b"state"]
    store = MemorySnapshotStore()
    store.write(snapshot_id, data)
    empty_log = MemoryRaftLog()
    empty_log.truncate_fully_and_start_at(snapshot_id.offset)
    from_snapshot = RaftNode(
        7, frozenset({1}), empty_log, None, random.Random(3), net.now_ms, kraft_version=1, snapshots=store
    )
    assert from_snapshot.voter_set == voters and from_snapshot.kraft_version == 1


def test_update_voter__new_endpoints_replace_the_old_ones_everywhere__checks_as_kafka() -> None:
    """UpdateRaftVoter (UpdateVoterHandler): a voter that moved tells the leader; the new VotersRecord
    reaches every replica. Refused: unknown voter or directory id, no endpoint on the voters' listener,
    a kraft.version range without the finalized one, a non-leader."""
    net, voters = _three_voters()
    leader = net.leader()
    moved_id = next(i for i in (2, 3) if i != leader.node_id)
    moved = Voter(moved_id, _voter(moved_id).directory_id, (Endpoint("CONTROLLER", "10.0.0.9", 9999),))
    follower = net.nodes[moved_id]
    assert follower.update_voter(moved, "CONTROLLER", net.now_ms).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    other_dir = Voter(moved_id, uuid.UUID(int=1).bytes, moved.endpoints)
    assert leader.update_voter(other_dir, "CONTROLLER", net.now_ms).error == ErrorCode.VOTER_NOT_FOUND
    assert leader.update_voter(moved, "OTHER", net.now_ms).error == ErrorCode.INVALID_REQUEST
    too_new = Voter(moved_id, moved.directory_id, moved.endpoints, 2, 2)
    assert leader.update_voter(too_new, "CONTROLLER", net.now_ms).error == ErrorCode.INVALID_REQUEST
    assert leader.update_voter(moved, "CONTROLLER", net.now_ms).error == ErrorCode.NONE
    net.run(300)
    updated = VoterSet.of([*(v for v in voters.voters if v.voter_id != moved_id), moved])
    for node in net.nodes.values():
        assert node.voter_set == updated


def test_describe_quorum__voters_directory_ids_and_endpoints_for_v2() -> None:
    """DescribeQuorum v2 (KIP-853): each voter's directory id and the voters' listeners (Nodes), from
    the VotersRecord; an observer's directory id is not known (zeros)."""
    net, voters = _three_voters()
    net.start(4, frozenset({1}))
    net.run(600)
    description = net.leader().describe_quorum(net.now_ms)
    assert description is not None
    assert [(r.replica_id, r.replica_directory_id) for r in description.current_voters] == [
        (v.voter_id, v.directory_id) for v in voters.voters
    ]
    assert [(r.replica_id, r.replica_directory_id) for r in description.observers] == [(4, bytes(16))]
    assert description.nodes == tuple(
        (v.voter_id, tuple((e.name, e.host, e.port) for e in v.endpoints)) for v in voters.voters
    )
