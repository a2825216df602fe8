"""Partition replication, pure (broker/replication.py with the ReplicaManager over in-memory logs):
followers copy the leader's batches byte for byte, the high watermark is the ISR's smallest log end,
a deposed leader truncates its unreplicated tail by leader epoch (KIP-101/KIP-279), producer state
follows the replicated batches, and the leader proposes ISR changes (KIP-497)."""

from __future__ import annotations

from pykraft.broker.replica_manager import Partition, ReplicaManager
from pykraft.broker.replication import LeaderEpochCache, Transition, follower_truncation_offset
from pykraft.core.errors import ErrorCode
from tests.unit.test_producer_snapshot import MemoryOpener, batch, replicas

TOPIC = "t"
REPLICAS = (1, 2, 3)
LAG_MS = 10_000


class Broker:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.opener = MemoryOpener()
        self.rm: ReplicaManager = replicas(self.opener)
        self.part: Partition = self.rm.ensure_partition(TOPIC, 0, 0, replicated=True, broker_id=broker_id)

    def apply(
        self, leader: int, epoch: int, isr: tuple[int, ...] = REPLICAS, partition_epoch: int = 0
    ) -> Transition:
        return self.rm.apply_partition(
            self.part,
            leader_id=leader,
            leader_epoch=epoch,
            partition_epoch=partition_epoch,
            replicas=REPLICAS,
            isr=isr,
            now_ms=0,
        )

    def log_bytes(self, end: int) -> bytes:
        return b"".join(
            bytes(c) for c in self.part.log.read(0, 1 << 30, max_offset=end, min_one_batch=True).chunks
        )


def fetch_once(follower: Broker, leader: Broker, now_ms: int = 0) -> ErrorCode:
    """One replica fetch round trip, as the shell does it."""
    part = follower.part
    check = leader.rm.check_replica_fetch(
        leader.part,
        follower.broker_id,
        part.log.log_end_offset,
        part.epochs.latest_epoch,
        part.replication.leader_epoch,
        now_ms,
    )
    if check.error_code != ErrorCode.NONE:
        return check.error_code
    if check.diverging_epoch is not None:
        follower.rm.truncate_for_divergence(part, *check.diverging_epoch, now_ms)
        return ErrorCode.NONE
    read = leader.rm.read_for_replica(leader.part, part.log.log_end_offset, 1 << 20)
    data = b"".join(bytes(c) for c in read.chunks)
    if data:
        assert follower.rm.append_as_follower(part, data, now_ms) == ErrorCode.NONE
    follower.rm.update_follower_high_watermark(part, read.high_watermark)
    follower.rm.follow_leader_log_start(part, read.log_start_offset)
    return ErrorCode.NONE


def three_brokers(leader_id: int = 1, epoch: int = 0) -> dict[int, Broker]:
    brokers = {b: Broker(b) for b in REPLICAS}
    for broker in brokers.values():
        broker.apply(leader_id, epoch)
    return brokers


def test_the_high_watermark_waits_for_every_isr_member_and_followers_copy_the_bytes() -> None:
    brokers = three_brokers()
    leader = brokers[1]
    result = leader.rm.append(leader.part, batch(0), 0)
    assert result.error_code == ErrorCode.NONE and result.last_offset == 2
    assert leader.part.log.high_watermark == 0  # nobody has it yet
    fetch_once(brokers[2], leader)
    fetch_once(brokers[2], leader)  # the second fetch reports the follower's new log end
    assert leader.part.log.high_watermark == 0  # broker 3 is in the ISR and has nothing
    fetch_once(brokers[3], leader)
    fetch_once(brokers[3], leader)
    assert leader.part.log.high_watermark == 3
    fetch_once(brokers[2], leader)
    for follower in (brokers[2], brokers[3]):
        assert follower.log_bytes(3) == leader.log_bytes(3)
        assert follower.part.epochs.entries == [(0, 0)]
    assert brokers[2].part.log.high_watermark == 3


def test_a_deposed_leader_truncates_what_was_never_replicated() -> None:
    brokers = three_brokers()
    old = brokers[1]
    old.rm.append(old.part, batch(0), 0)
    for follower in (brokers[2], brokers[3]):
        fetch_once(follower, old)
        fetch_once(follower, old)
    assert old.part.log.high_watermark == 3
    # Appended on the old leader only, then it dies; broker 2 leads at epoch 1 and takes new writes.
    old.rm.append(old.part, batch(3), 0)
    assert old.part.log.log_end_offset == 6
    for broker in brokers.values():
        broker.apply(2, 1, isr=(2, 3), partition_epoch=1)
    new = brokers[2]
    new.rm.append(new.part, batch(0, pid=77), 0)
    fetch_once(brokers[3], new)
    fetch_once(brokers[3], new)
    # The old leader comes back as a follower: its offsets 3-5 (epoch 0) diverge from the new
    # leader's (epoch 1 from offset 3), so it truncates to 3 and then copies the new leader's batch.
    assert fetch_once(old, new) == ErrorCode.NONE
    assert old.part.log.log_end_offset == 3
    fetch_once(old, new)
    fetch_once(old, new)
    assert old.log_bytes(6) == new.log_bytes(6)
    assert old.part.epochs.entries == [(0, 0), (1, 3)]
    # Its producer state is what the log says: producer 77, not the truncated batch's producer.
    assert 77 in {e.producer_id for e in old.part.producer_state.snapshot_entries()}
    assert old.part.producer_state.map_end_offset == 6


def test_stale_and_future_leader_epochs_are_refused() -> None:
    brokers = three_brokers(epoch=4)
    leader = brokers[1]
    assert (
        leader.rm.check_replica_fetch(leader.part, 2, 0, -1, 3, 0).error_code == ErrorCode.FENCED_LEADER_EPOCH
    )
    assert (
        leader.rm.check_replica_fetch(leader.part, 2, 0, -1, 5, 0).error_code
        == ErrorCode.UNKNOWN_LEADER_EPOCH
    )
    follower = brokers[2]
    assert (
        follower.rm.check_replica_fetch(follower.part, 3, 0, -1, 4, 0).error_code
        == ErrorCode.NOT_LEADER_OR_FOLLOWER
    )


def test_isr_shrinks_after_the_lag_time_and_expands_when_caught_up() -> None:
    brokers = three_brokers()
    leader = brokers[1]
    leader.rm.append(leader.part, batch(0), 0)
    fetch_once(brokers[2], leader, now_ms=1_000)
    fetch_once(brokers[2], leader, now_ms=2_000)
    replication = leader.part.replication
    assert replication.isr_change(5_000, leader.part.log.high_watermark, LAG_MS) is None
    # Broker 3 never fetched: out of the ISR after the lag time.
    proposal = replication.isr_change(LAG_MS + 1, leader.part.log.high_watermark, LAG_MS)
    assert proposal is not None and proposal.new_isr == (1, 2) and proposal.partition_epoch == 0
    assert replication.isr_change(LAG_MS + 2, leader.part.log.high_watermark, LAG_MS) is None  # one at a time
    # While the shrink is in flight the high watermark still waits for broker 3 (maximal ISR).
    assert leader.part.log.high_watermark == 0
    leader.apply(1, 0, isr=(1, 2), partition_epoch=1)
    assert leader.part.log.high_watermark == 3  # ISR {1, 2} has it
    fetch_once(brokers[3], leader, now_ms=LAG_MS + 3)
    fetch_once(brokers[3], leader, now_ms=LAG_MS + 4)
    expand = replication.isr_change(LAG_MS + 5, leader.part.log.high_watermark, LAG_MS)
    assert expand is not None and expand.new_isr == (1, 2, 3) and expand.partition_epoch == 1


def test_leader_epoch_cache_end_offsets() -> None:
    cache = LeaderEpochCache.from_batches([(0, 0), (0, 3), (2, 6), (5, 9), (5, 12)])
    assert cache.entries == [(0, 0), (2, 6), (5, 9)]
    assert cache.end_offset_for(5, 15) == (5, 15)
    assert cache.end_offset_for(2, 15) == (2, 9)
    assert cache.end_offset_for(1, 15) == (0, 6)  # epoch 1 never led: epoch 0 ends where 2 starts
    assert cache.end_offset_for(7, 15) == (-1, -1)
    assert follower_truncation_offset(cache, 15, 2, 7) == 7
    assert follower_truncation_offset(cache, 15, 3, 12) == 9
    cache.truncate_from_end(9)
    assert cache.entries == [(0, 0), (2, 6)]


def test_an_isr_expansion_whose_answer_was_lost_still_holds_the_high_watermark() -> None:
    """The AlterPartition adding broker 3 may have committed even though its answer never came: until an
    image says, broker 3 counts for the high watermark, else the controller could elect a broker 3
    that lacks records below it. A refusal that cannot have committed drops the proposal."""
    brokers = three_brokers()
    leader = brokers[1]
    for broker in brokers.values():
        broker.apply(1, 0, isr=(1, 2))
    fetch_once(brokers[3], leader, now_ms=1)
    replication = leader.part.replication
    proposal = replication.isr_change(2, leader.part.log.high_watermark, LAG_MS)
    assert proposal is not None and proposal.new_isr == (1, 2, 3)
    again = replication.isr_change_answered(ErrorCode.REQUEST_TIMED_OUT, 3)
    assert again == proposal  # sent again, and still pending
    leader.rm.append(leader.part, batch(0), 3)
    fetch_once(brokers[2], leader, now_ms=4)
    fetch_once(brokers[2], leader, now_ms=5)
    assert leader.part.log.high_watermark == 0  # broker 2 has it, broker 3 may be in the ISR and has not
    fetch_once(brokers[3], leader, now_ms=6)
    fetch_once(brokers[3], leader, now_ms=7)
    assert leader.part.log.high_watermark == 3
    assert replication.isr_change_answered(ErrorCode.INELIGIBLE_REPLICA, 8) is None
    assert replication.pending_isr is None


def test_a_follower_the_image_shows_fenced_is_not_proposed_for_the_isr() -> None:
    """Kafka's Partition.isReplicaIsrEligible: a caught-up follower joins only while the leader's image
    shows it registered, unfenced and not shutting down -- a restarted broker fetches while still fenced,
    and proposing it would only be refused (INELIGIBLE_REPLICA, issue 32)."""
    brokers = three_brokers()
    leader = brokers[1]
    for broker in brokers.values():
        broker.apply(1, 0, isr=(1, 2))
    fetch_once(brokers[3], leader, now_ms=1)
    replication = leader.part.replication
    fenced = frozenset({1, 2})
    assert replication.isr_change(2, leader.part.log.high_watermark, LAG_MS, fenced.__contains__) is None
    unfenced = frozenset({1, 2, 3})
    proposal = replication.isr_change(3, leader.part.log.high_watermark, LAG_MS, unfenced.__contains__)
    assert proposal is not None and proposal.new_isr == (1, 2, 3)


def test_a_refused_isr_change_is_proposed_at_most_once_a_second() -> None:
    """The leader's image can lag the controller's: a follower it still sees eligible is refused. Every
    follower fetch (here one each 2 ms for 10 s) asks whether to propose; a refused proposal waits
    ISR_CHANGE_REFUSED_BACKOFF_MS, so the controller sees about ten, not thousands (issue 32)."""
    brokers = three_brokers()
    leader = brokers[1]
    for broker in brokers.values():
        broker.apply(1, 0, isr=(1, 2))
    replication = leader.part.replication
    sent = 0
    for now_ms in range(1, 10_001, 2):
        fetch_once(brokers[2], leader, now_ms=now_ms)
        fetch_once(brokers[3], leader, now_ms=now_ms)
        proposal = replication.isr_change(now_ms, leader.part.log.high_watermark, LAG_MS)
        if proposal is not None:
            sent += 1
            assert replication.isr_change_answered(ErrorCode.INELIGIBLE_REPLICA, now_ms) is None
    assert 9 <= sent <= 11
    # Once the controller takes it, the ISR grows as before.
    proposal = replication.isr_change(11_001, leader.part.log.high_watermark, LAG_MS)
    assert proposal is not None and proposal.new_isr == (1, 2, 3)
    assert replication.isr_change_answered(ErrorCode.NONE, 11_001) is None
    assert replication.pending_isr == (1, 2, 3)


def test_a_reassignment_adds_followers_to_a_partition_of_one_replica() -> None:
    """KIP-455 on the broker: a partition opened with one replica gains two under the same leadership;
    its high watermark starts waiting for the ISR, the new followers copy the log and the leader proposes
    them for the ISR once they caught up."""
    leader = Broker(1)
    leader.part = leader.rm.ensure_partition("solo", 0, 0, replicated=False, broker_id=1)
    leader.rm.apply_partition(
        leader.part, leader_id=1, leader_epoch=0, partition_epoch=0, replicas=(1,), isr=(1,), now_ms=0
    )
    leader.rm.append(leader.part, batch(0), 0)
    assert leader.part.log.high_watermark == 3
    leader.rm.make_replicated(leader.part)
    followers = {b: Broker(b) for b in (2, 3)}
    for broker in (leader, *followers.values()):
        if broker is not leader:
            broker.part = broker.rm.ensure_partition(
                "solo", 0, 0, replicated=True, broker_id=broker.broker_id
            )
        broker.rm.apply_partition(
            broker.part,
            leader_id=1,
            leader_epoch=0,
            partition_epoch=1,
            replicas=(1, 2, 3),
            isr=(1,),
            now_ms=0,
        )
    leader.rm.append(leader.part, batch(3), 0)
    assert leader.part.log.high_watermark == 6  # the ISR is still the leader alone
    for follower in followers.values():
        fetch_once(follower, leader, now_ms=1)
        fetch_once(follower, leader, now_ms=2)
        assert follower.log_bytes(6) == leader.log_bytes(6)
    proposal = leader.part.replication.isr_change(3, leader.part.log.high_watermark, LAG_MS)
    assert proposal is not None and proposal.new_isr == (1, 2, 3)


def test_a_write_the_high_watermark_passed_counts_an_isr_expansion_in_flight() -> None:
    """Kafka's Partition.checkEnoughReplicasReachOffset: with min.insync.replicas=2 and the ISR shrunk to
    the leader alone, an acks=all write appended before the shrink is answered NONE once broker 2, whose
    expansion is in flight, holds it (the maximal ISR), and NOT_ENOUGH_REPLICAS_AFTER_APPEND without it.
    The latter is possibly-persisted to librdkafka, which may then re-send the write under a new producer
    epoch (issue 32), so it must be answered only where Kafka answers it."""
    brokers = three_brokers()
    leader = brokers[1]
    replication = leader.part.replication
    leader.rm.append(leader.part, batch(0), 0)
    leader.apply(1, 0, isr=(1,), partition_epoch=1)
    assert not replication.enough_replicas(2)
    fetch_once(brokers[2], leader, now_ms=1)
    fetch_once(brokers[2], leader, now_ms=2)
    expand = replication.isr_change(3, leader.part.log.high_watermark, LAG_MS)
    assert expand is not None and expand.new_isr == (1, 2)
    assert replication.isr == (1,) and replication.enough_replicas(2)
    assert not replication.enough_replicas(3)


def test_a_follower_starting_at_a_log_start_inside_a_batch_starts_at_that_batch() -> None:
    """DeleteRecords may put the leader's log start inside a batch; a follower that starts over there
    (its fetch was OFFSET_OUT_OF_RANGE) gets that whole batch and starts its log at the batch's base
    offset, as Kafka's Partition.appendRecordsToFollowerOrFutureReplica does, instead of refusing it
    at every fetch."""
    brokers = three_brokers()
    leader, behind = brokers[1], brokers[3]
    leader.apply(1, 0, isr=(1, 2))
    for seq in (0, 3, 6):
        leader.rm.append(leader.part, batch(seq), 0)  # offsets 0-2, 3-5, 6-8
    fetch_once(brokers[2], leader)
    fetch_once(brokers[2], leader)
    assert leader.part.log.high_watermark == 9
    assert leader.rm.delete_records(leader.part, 4) == (ErrorCode.NONE, 4)
    behind.rm.restart_at(behind.part, leader.part.log.log_start_offset, 0)
    read = leader.rm.read_for_replica(leader.part, 4, 1 << 20)
    data = b"".join(bytes(c) for c in read.chunks)
    assert behind.rm.append_as_follower(behind.part, data, 0) == ErrorCode.NONE
    assert (behind.part.log.log_start_offset, behind.part.log.log_end_offset) == (3, 9)
    assert data == b"".join(
        bytes(c) for c in behind.part.log.read(3, 1 << 30, max_offset=9, min_one_batch=True).chunks
    )


def test_a_followers_log_start_follows_the_leaders_and_a_new_leader_keeps_it() -> None:
    """Records deleted on the leader (DeleteRecords) are gone from its followers too, as far as their
    high watermark reaches; once the follower leads, its earliest offset is where the old leader's was."""
    brokers = three_brokers()
    leader, follower = brokers[1], brokers[2]
    for seq in (0, 3, 6):
        leader.rm.append(leader.part, batch(seq), 0)  # offsets 0-2, 3-5, 6-8
    for _ in range(2):
        for b in (brokers[2], brokers[3]):
            fetch_once(b, leader)
    assert leader.part.log.high_watermark == 9
    assert leader.rm.delete_records(leader.part, 7) == (ErrorCode.NONE, 7)
    fetch_once(follower, leader)
    assert follower.part.log.log_start_offset == 7
    follower.apply(2, 1)
    assert follower.part.log.log_start_offset == 7
