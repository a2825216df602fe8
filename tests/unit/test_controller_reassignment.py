"""Partition reassignment on the controller (KIP-455, Kafka ReplicationControlManager /
PartitionChangeBuilder): adding replicas join as followers, the AlterPartition that puts the last one in
the ISR completes the move, a removed leader hands over, cancel restores the original set, the
replication factor goes both ways, and the image a broker builds from the records agrees."""

from __future__ import annotations

import random
import uuid

import pytest

from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replication import CreatableTopic, IsrChangeRequest, ReassignableTopic
from pykraft.core.errors import ErrorCode
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import BrokerEndpoint, MetadataImage, PartitionRegistration
from pykraft.metadata.records import decode_metadata_record, encode_metadata_record


def _cluster(brokers: int = 4) -> tuple[QuorumController, dict[int, int]]:
    controller = QuorumController(rng=random.Random(7))
    controller.activate()
    epochs = {}
    for broker_id in range(1, brokers + 1):
        endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, 0)
        epochs[broker_id] = controller.register_broker(
            broker_id, uuid.uuid4(), [endpoint], None, 0
        ).response.broker_epoch
    return controller, epochs


def _topic(controller: QuorumController, replicas: tuple[int, ...], name: str = "t") -> uuid.UUID:
    created = controller.create_topics([CreatableTopic(name=name, assignments={0: replicas})])
    assert created.response[0].error_code is ErrorCode.NONE
    topic_id = created.response[0].topic_id
    assert topic_id is not None
    return topic_id


def _part(controller: QuorumController, topic_id: uuid.UUID) -> PartitionRegistration:
    info = controller.replication_control.topic(topic_id)
    assert info is not None
    return info.partitions[0]


def _reassign(
    controller: QuorumController, replicas: tuple[int, ...] | None, name: str = "t", allow_rf: bool = True
) -> tuple[ErrorCode, str | None]:
    result = controller.alter_partition_reassignments([ReassignableTopic(name, [(0, replicas)])], allow_rf)
    (topic,) = result.response
    (partition,) = topic.partitions
    return partition.error_code, partition.error_message


def _join_isr(
    controller: QuorumController, epochs: dict[int, int], topic_id: uuid.UUID, *joining: int
) -> ErrorCode:
    part = _part(controller, topic_id)
    new_isr = (*part.isr, *joining)
    change = IsrChangeRequest(topic_id, 0, part.leader_epoch, part.partition_epoch, new_isr)
    error, (answer,) = controller.alter_partition(part.leader, epochs[part.leader], [change]).response
    assert error is ErrorCode.NONE
    return answer.error_code


def test_a_move_adds_followers_then_completes_when_they_are_in_the_isr() -> None:
    controller, epochs = _cluster()
    topic_id = _topic(controller, (1, 2, 3))
    assert _reassign(controller, (2, 3, 4)) == (ErrorCode.NONE, None)
    part = _part(controller, topic_id)
    # Started: target then the removed one, the new replica adding, the ISR unchanged.
    assert part.replicas == (2, 3, 4, 1)
    assert (part.adding_replicas, part.removing_replicas, part.isr) == ((4,), (1,), (1, 2, 3))
    assert part.leader == 1
    listed = controller.list_partition_reassignments(None)
    assert [
        (t.name, [(p.replicas, p.adding_replicas, p.removing_replicas) for p in t.partitions]) for t in listed
    ] == [("t", [((2, 3, 4, 1), (4,), (1,))])]
    # The leader (1, being removed) takes 4 into the ISR: that completes the move and moves leadership
    # to the first target replica in the ISR, which the leader learns as NEW_LEADER_ELECTED.
    assert _join_isr(controller, epochs, topic_id, 4) is ErrorCode.NEW_LEADER_ELECTED
    part = _part(controller, topic_id)
    assert (part.replicas, part.isr, part.adding_replicas, part.removing_replicas) == (
        (2, 3, 4),
        (2, 3, 4),
        (),
        (),
    )
    assert part.leader == 2
    assert controller.list_partition_reassignments(None) == []


def test_replication_factor_one_to_three_and_three_to_two() -> None:
    controller, epochs = _cluster()
    up = _topic(controller, (1,), "up")
    assert _reassign(controller, (1, 2, 3), "up") == (ErrorCode.NONE, None)
    assert _part(controller, up).adding_replicas == (2, 3)
    _join_isr(controller, epochs, up, 2)
    assert _part(controller, up).adding_replicas == (2, 3)  # not complete while 3 is out of the ISR
    assert _join_isr(controller, epochs, up, 3) is ErrorCode.NONE
    part = _part(controller, up)
    assert (part.replicas, part.isr, part.leader, part.adding_replicas) == ((1, 2, 3), (1, 2, 3), 1, ())

    down = _topic(controller, (1, 2, 3), "down")
    before = _part(controller, down)
    # Nothing to add: complete at once, with a leader epoch bump fencing the removed replica.
    assert _reassign(controller, (1, 2), "down") == (ErrorCode.NONE, None)
    part = _part(controller, down)
    assert (part.replicas, part.isr, part.leader, part.removing_replicas) == ((1, 2), (1, 2), 1, ())
    assert part.leader_epoch == before.leader_epoch + 1


def test_cancel_restores_the_original_replicas() -> None:
    controller, _ = _cluster()
    topic_id = _topic(controller, (1, 2, 3))
    assert _reassign(controller, None) == (
        ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        "No partition reassignment is in progress.",
    )
    before = _part(controller, topic_id)
    assert _reassign(controller, (4, 2, 3))[0] is ErrorCode.NONE
    assert _reassign(controller, None) == (ErrorCode.NONE, None)
    part = _part(controller, topic_id)
    # The original set (in the reassignment's order, as Kafka's PartitionReassignmentRevert leaves it).
    assert (part.replicas, part.isr, part.leader) == ((2, 3, 1), before.isr, before.leader)
    assert (part.adding_replicas, part.removing_replicas) == ((), ())


@pytest.mark.parametrize(
    ("name", "replicas", "allow_rf", "error"),
    [
        ("nope", (1, 2), True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", (), True, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("t", (1, 1, 2), True, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("t", (1, 2, 9), True, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("t", (1, 2), False, ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
def test_refusals(name: str, replicas: tuple[int, ...], allow_rf: bool, error: ErrorCode) -> None:
    controller, _ = _cluster()
    topic_id = _topic(controller, (1, 2, 3))
    before = _part(controller, topic_id)
    assert _reassign(controller, replicas, name, allow_rf)[0] is error
    assert _part(controller, topic_id) == before


def test_a_follower_and_the_image_replay_the_same_partitions() -> None:
    """Every record the controller wrote, through the wire codec, gives a follower controller and a
    broker's image the same partition, adding and removing replicas included, mid-move and after."""
    controller = QuorumController(rng=random.Random(7))
    log = list(controller.activate().records)
    epochs = {}
    for broker_id in (1, 2, 3, 4):
        endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, 0)
        registered = controller.register_broker(broker_id, uuid.uuid4(), [endpoint], None, 0)
        epochs[broker_id] = registered.response.broker_epoch
        log += registered.records
    created = controller.create_topics([CreatableTopic(name="t", assignments={0: (1, 2, 3)})])
    log += created.records
    topic_id = created.response[0].topic_id
    assert topic_id is not None
    log += controller.alter_partition_reassignments([ReassignableTopic("t", [(0, (2, 3, 4))])]).records

    def replayed() -> tuple[PartitionRegistration, PartitionRegistration]:
        wire = [decode_metadata_record(encode_metadata_record(r)) for r in log]
        follower = QuorumController(rng=random.Random(1))
        delta = MetadataDelta(MetadataImage.EMPTY)
        for offset, record in enumerate(wire):
            follower.replay(record, offset)
            delta.replay(record, offset=offset, epoch=1)
        image_part = delta.apply().topics.topics_by_id[topic_id].partitions[0]
        return _part(follower, topic_id), image_part

    assert replayed() == (_part(controller, topic_id),) * 2
    assert _part(controller, topic_id).adding_replicas == (4,)
    part = _part(controller, topic_id)
    change = IsrChangeRequest(topic_id, 0, part.leader_epoch, part.partition_epoch, (1, 2, 3, 4))
    log += controller.alter_partition(part.leader, epochs[part.leader], [change]).records
    assert replayed() == (_part(controller, topic_id),) * 2
    assert _part(controller, topic_id).replicas == (2, 3, 4)


def test_leader_balance_moves_leadership_back_to_the_preferred_replica() -> None:
    """auto.leader.rebalance.enable: once broker 1 is back in the ISR, the partitions it is preferred for
    are led by it again; under the per-broker percentage nothing moves."""
    controller, epochs = _cluster(3)
    ids = [_topic(controller, (1, 2, 3), f"t{i}") for i in range(4)]
    controller.fence_brokers([1])
    assert {_part(controller, t).leader for t in ids} == {2}
    assert controller.balance_partition_leaders(10).records == []  # 1 is not active
    controller.broker_heartbeat(1, epochs[1], controller.next_write_offset)
    # Back, but not in the ISR yet: nothing moves.
    assert controller.balance_partition_leaders(10).records == []
    for t in ids:
        _join_isr(controller, epochs, t, 1)
    # All four of broker 1's partitions are led elsewhere: 100 % > 10 %.
    assert len(controller.balance_partition_leaders(100).records) == 0
    assert len(controller.balance_partition_leaders(10).records) == 4
    assert {_part(controller, t).leader for t in ids} == {1}
    assert controller.balance_partition_leaders(10).records == []


def test_a_broker_is_unregistered_only_once_it_holds_no_replica() -> None:
    controller, epochs = _cluster()
    topic_id = _topic(controller, (1, 2, 3))
    assert controller.unregister_broker(9).response[0] is ErrorCode.BROKER_ID_NOT_REGISTERED
    refused = controller.unregister_broker(1)
    assert refused.records == [] and refused.response == (
        ErrorCode.INVALID_REQUEST,
        "Broker 1 is still a replica of t-0: reassign those partitions first",
    )
    assert _reassign(controller, (2, 3, 4))[0] is ErrorCode.NONE
    assert controller.unregister_broker(1).response[0] is ErrorCode.INVALID_REQUEST  # still moving
    _join_isr(controller, epochs, topic_id, 4)
    done = controller.unregister_broker(1)
    assert done.response == (ErrorCode.NONE, None) and len(done.records) == 1
    assert controller.cluster_control.registration(1) is None
