"""AlterPartition on the controller (KIP-497): only the partition's leader, at its leader and partition
epochs, with an ISR of active replicas that includes itself, changes the ISR; the answer is the
partition after the change, and a fenced broker's partitions elect a new leader from the ISR."""

from __future__ import annotations

import random
import uuid

import pytest

from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replication import CreatableTopic, IsrChangeRequest
from pykraft.core.errors import ErrorCode
from pykraft.metadata.image import BrokerEndpoint, PartitionRegistration


def _cluster() -> tuple[QuorumController, dict[int, int], uuid.UUID]:
    controller = QuorumController(rng=random.Random(5))
    controller.activate()
    epochs = {}
    for broker_id in (1, 2, 3):
        endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, 0)
        epochs[broker_id] = controller.register_broker(
            broker_id, uuid.uuid4(), [endpoint], None, 0
        ).response.broker_epoch
    created = controller.create_topics([CreatableTopic(name="t", num_partitions=1, replication_factor=3)])
    topic_id = created.response[0].topic_id
    assert topic_id is not None
    return controller, epochs, topic_id


def _partition(controller: QuorumController, topic_id: uuid.UUID) -> PartitionRegistration:
    info = controller.replication_control.topic(topic_id)
    assert info is not None
    return info.partitions[0]


def test_the_leader_shrinks_and_expands_the_isr() -> None:
    controller, epochs, topic_id = _cluster()
    part = _partition(controller, topic_id)
    leader = part.leader
    others = [r for r in part.replicas if r != leader]
    shrink = IsrChangeRequest(topic_id, 0, part.leader_epoch, part.partition_epoch, (leader, others[0]))
    result = controller.alter_partition(leader, epochs[leader], [shrink])
    error, (answer,) = result.response
    assert error is ErrorCode.NONE and answer.error_code is ErrorCode.NONE
    assert len(result.records) == 1
    after = _partition(controller, topic_id)
    assert set(after.isr) == {leader, others[0]} and after.partition_epoch == 1 and after.leader_epoch == 0
    assert (answer.isr, answer.partition_epoch, answer.leader_id) == (after.isr, 1, leader)
    expand = IsrChangeRequest(topic_id, 0, 0, 1, (leader, *others))
    assert (
        controller.alter_partition(leader, epochs[leader], [expand]).response[1][0].error_code
        is ErrorCode.NONE
    )
    assert set(_partition(controller, topic_id).isr) == {1, 2, 3}


@pytest.mark.parametrize(
    ("who", "leader_epoch", "partition_epoch", "isr", "error"),
    [
        ("follower", 0, 0, None, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ("leader", -1, 0, None, ErrorCode.FENCED_LEADER_EPOCH),
        ("leader", 1, 0, None, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ("leader", 0, 5, None, ErrorCode.INVALID_UPDATE_VERSION),
        ("leader", 0, 0, "without the leader", ErrorCode.INVALID_REQUEST),
        ("leader", 0, 0, "with a stranger", ErrorCode.INVALID_REQUEST),
    ],
)
def test_refusals(
    who: str, leader_epoch: int, partition_epoch: int, isr: str | None, error: ErrorCode
) -> None:
    controller, epochs, topic_id = _cluster()
    part = _partition(controller, topic_id)
    leader = part.leader
    follower = next(r for r in part.replicas if r != leader)
    sender = leader if who == "leader" else follower
    new_isr = {None: (leader, follower), "without the leader": (follower,), "with a stranger": (leader, 9)}[
        isr
    ]
    request = IsrChangeRequest(topic_id, 0, leader_epoch, partition_epoch, new_isr)
    result = controller.alter_partition(sender, epochs[sender], [request])
    assert result.records == [] and result.response[1][0].error_code is error


def test_stale_broker_epoch_unknown_topic_and_ineligible_replica() -> None:
    controller, epochs, topic_id = _cluster()
    part = _partition(controller, topic_id)
    leader = part.leader
    follower = next(r for r in part.replicas if r != leader)
    shrink = IsrChangeRequest(topic_id, 0, 0, 0, (leader,))
    assert controller.alter_partition(leader, epochs[leader] - 1, [shrink]).response == (
        ErrorCode.STALE_BROKER_EPOCH,
        [],
    )
    unknown = IsrChangeRequest(uuid.uuid4(), 0, 0, 0, (leader,))
    assert controller.alter_partition(leader, epochs[leader], [unknown]).response[1][0].error_code is (
        ErrorCode.UNKNOWN_TOPIC_ID
    )
    assert (
        controller.alter_partition(leader, epochs[leader], [shrink]).response[1][0].error_code
        is ErrorCode.NONE
    )
    # The follower is fenced: it may not rejoin the ISR.
    controller.fence_brokers([follower])
    current = _partition(controller, topic_id)
    rejoin = IsrChangeRequest(topic_id, 0, current.leader_epoch, current.partition_epoch, (leader, follower))
    assert controller.alter_partition(leader, epochs[leader], [rejoin]).response[1][0].error_code is (
        ErrorCode.INELIGIBLE_REPLICA
    )


def test_a_fenced_leader_is_replaced_from_the_isr() -> None:
    controller, _, topic_id = _cluster()
    leader = _partition(controller, topic_id).leader
    controller.fence_brokers([leader])
    after = _partition(controller, topic_id)
    assert after.leader != leader and after.leader in after.isr and leader not in after.isr
    assert after.leader_epoch == 1


def test_preferred_election_moves_leadership_back_to_the_first_replica() -> None:
    controller, _, topic_id = _cluster()
    part = _partition(controller, topic_id)
    preferred = part.replicas[0]
    assert controller.elect_leaders(0, [("t", 0)]).response[0].error_code is ErrorCode.ELECTION_NOT_NEEDED
    # Asked for every partition, Kafka answers only those it acted on: none here.
    assert controller.elect_leaders(0, None).response == []
    controller.fence_brokers([preferred])  # leadership moves off it
    assert _partition(controller, topic_id).leader != preferred
    refused = controller.elect_leaders(0, [("t", 0)])
    assert (
        refused.records == [] and refused.response[0].error_code is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    )
    # Back, unfenced and in the ISR again: the election moves leadership to it.
    epoch = controller.broker_epoch(preferred)
    controller.broker_heartbeat(preferred, epoch, current_metadata_offset=1 << 40)
    now = _partition(controller, topic_id)
    leader = now.leader
    grow = IsrChangeRequest(
        topic_id, 0, now.leader_epoch, now.partition_epoch, tuple(sorted({*now.isr, preferred}))
    )
    assert controller.alter_partition(leader, controller.broker_epoch(leader), [grow]).response[1][
        0
    ].error_code is (ErrorCode.NONE)
    elected = controller.elect_leaders(0, None)
    assert [r.error_code for r in elected.response] == [ErrorCode.NONE]
    assert _partition(controller, topic_id).leader == preferred
    assert (
        controller.elect_leaders(0, [("nope", 0)]).response[0].error_code
        is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


@pytest.mark.parametrize("unclean", [False, True])
def test_unclean_election_only_when_enabled(unclean: bool) -> None:
    controller = QuorumController(rng=random.Random(5), unclean_leader_election_enable=unclean)
    controller.activate()
    for broker_id in (1, 2):
        endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, 0)
        controller.register_broker(broker_id, uuid.uuid4(), [endpoint], None, 0)
    created = controller.create_topics([CreatableTopic(name="t", num_partitions=1, replication_factor=2)])
    topic_id = created.response[0].topic_id
    assert topic_id is not None
    part = _partition(controller, topic_id)
    leader, other = part.leader, next(r for r in part.replicas if r != part.leader)
    # The other replica drops out of the ISR, then the leader dies: only an unclean election leads.
    shrink = IsrChangeRequest(topic_id, 0, part.leader_epoch, part.partition_epoch, (leader,))
    controller.alter_partition(leader, controller.broker_epoch(leader), [shrink])
    controller.fence_brokers([leader])
    after = _partition(controller, topic_id)
    if unclean:
        assert (after.leader, after.isr) == (other, (other,))
    else:
        assert after.leader == -1 and after.isr == (leader,)
        # An explicit unclean ElectLeaders (type 1) still elects the live replica.
        assert controller.elect_leaders(1, [("t", 0)]).response[0].error_code is ErrorCode.NONE
        assert _partition(controller, topic_id).leader == other
