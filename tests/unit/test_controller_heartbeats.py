"""Broker heartbeats and fencing on the controller (KIP-631): unfence when caught up, fence on
request or when the session expires, and move partition leadership off a fenced broker."""

from __future__ import annotations

import random
import uuid

from pykraft.controller.cluster import BrokerHeartbeatTracker
from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replication import CreatableTopic
from pykraft.core.errors import ErrorCode
from pykraft.metadata.image import BrokerEndpoint
from pykraft.metadata.records import FenceBrokerRecord, PartitionChangeRecord, UnfenceBrokerRecord


def _controller() -> QuorumController:
    controller = QuorumController(rng=random.Random(3))
    controller.activate()
    return controller


def _register(controller: QuorumController, broker_id: int, *, unfence: bool) -> int:
    endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, 0)
    result = controller.register_broker(broker_id, uuid.uuid4(), [endpoint], None, 0, unfence=unfence)
    return result.response.broker_epoch


def test_a_broker_process_registers_fenced_and_is_unfenced_once_caught_up() -> None:
    controller = _controller()
    epoch = _register(controller, 1, unfence=False)
    registration = controller.cluster_control.registration(1)
    assert registration is not None and registration.fenced
    behind = controller.broker_heartbeat(1, epoch, current_metadata_offset=epoch - 1)
    assert behind.records == [] and (behind.response.is_caught_up, behind.response.is_fenced) == (False, True)
    caught_up = controller.broker_heartbeat(1, epoch, current_metadata_offset=epoch)
    assert [r.message for r in caught_up.records] == [UnfenceBrokerRecord(id=1, epoch=epoch)]
    assert caught_up.response == caught_up.response.__class__(ErrorCode.NONE, True, False, False)
    assert controller.cluster_control.usable_broker_ids() == [1]
    again = controller.broker_heartbeat(1, epoch, current_metadata_offset=epoch + 5)
    assert again.records == [] and not again.response.is_fenced


def test_a_stale_epoch_heartbeat_is_refused() -> None:
    controller = _controller()
    epoch = _register(controller, 1, unfence=True)
    assert (
        controller.broker_heartbeat(1, epoch - 1, epoch).response.error_code == ErrorCode.STALE_BROKER_EPOCH
    )
    assert controller.broker_heartbeat(9, 0, 0).response.error_code == ErrorCode.STALE_BROKER_EPOCH


def _partitions(controller: QuorumController) -> dict[tuple[str, int], tuple[int, tuple[int, ...]]]:
    return {
        (info.name, p): (part.leader, part.isr)
        for info in controller.replication_control.topics().values()
        for p, part in info.partitions.items()
    }


def test_fencing_moves_leadership_to_another_isr_member_or_none() -> None:
    controller = _controller()
    epochs = {b: _register(controller, b, unfence=True) for b in (1, 2)}
    controller.create_topics([CreatableTopic("single", 4, 1), CreatableTopic("pair", 2, 2)])
    before = _partitions(controller)
    assert any(leader == 1 for leader, _ in before.values())
    result = controller.fence_brokers([1])
    assert result.response == [1]
    messages = [r.message for r in result.records]
    assert messages[0] == FenceBrokerRecord(id=1, epoch=epochs[1])
    assert all(isinstance(m, PartitionChangeRecord) for m in messages[1:]) and len(messages) > 1
    after = _partitions(controller)
    for key, (leader, isr) in before.items():
        new_leader, new_isr = after[key]
        if isr == (1,):  # replication factor 1 on the fenced broker: offline, ISR keeps its last member
            assert (new_leader, new_isr) == (-1, (1,))
        elif 1 in isr:  # the other replica leads, and 1 left the ISR
            assert new_leader == 2 and new_isr == (2,)
        else:
            assert (new_leader, new_isr) == (leader, isr)
    # Re-fencing a fenced broker writes nothing.
    assert controller.fence_brokers([1]).records == []
    # A heartbeat that wants to shut down fences and is told it may.
    shut = controller.broker_heartbeat(2, epochs[2], epochs[2], want_shut_down=True)
    assert shut.response.should_shut_down and shut.response.is_fenced
    assert any(isinstance(r.message, FenceBrokerRecord) for r in shut.records)
    assert all(leader == -1 for leader, _ in _partitions(controller).values())


def test_tracker_expires_brokers_past_the_session_timeout() -> None:
    tracker = BrokerHeartbeatTracker()
    tracker.touch(1, 0)
    tracker.touch(2, 5_000)
    assert tracker.expired(9_000, 9_000) == []
    assert tracker.expired(9_001, 9_000) == [1]
    tracker.forget(1)
    assert tracker.expired(20_000, 9_000) == [2]


def test_an_unfenced_broker_leads_again_the_partitions_left_without_a_leader() -> None:
    controller = _controller()
    epoch = _register(controller, 1, unfence=True)
    controller.create_topics([CreatableTopic("t", 2, 1)])
    controller.fence_brokers([1])
    assert {leader for leader, _ in _partitions(controller).values()} == {-1}
    back = controller.broker_heartbeat(1, epoch, current_metadata_offset=controller.next_write_offset)
    assert not back.response.is_fenced
    assert [type(r.message) for r in back.records] == [
        UnfenceBrokerRecord,
        PartitionChangeRecord,
        PartitionChangeRecord,
    ]
    assert {leader for leader, _ in _partitions(controller).values()} == {1}
