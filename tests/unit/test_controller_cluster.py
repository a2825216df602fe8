"""ClusterControlManager through QuorumController: registration, broker epochs, fencing."""

from __future__ import annotations

import random
import uuid

from pykraft.controller.quorum_controller import QuorumController
from pykraft.core.errors import ErrorCode
from pykraft.metadata.image import BrokerEndpoint, BrokerFeature
from pykraft.metadata.records import RegisterBrokerRecord, UnfenceBrokerRecord

LISTENERS = [BrokerEndpoint("PLAINTEXT", "localhost", 9092, 0)]
INCARNATION = uuid.UUID(int=0x1234)


def _controller(**kwargs: bool) -> QuorumController:
    controller = QuorumController(rng=random.Random(3), **kwargs)
    controller.activate()
    return controller


def test_register__broker_epoch_is_the_offset_of_the_register_record() -> None:
    controller = _controller()
    offset = controller.next_write_offset
    result = controller.register_broker(1, INCARNATION, LISTENERS, "rack-a", now_ms=5)
    assert result.response.error_code is ErrorCode.NONE
    assert result.response.broker_epoch == offset
    register, unfence = (r.message for r in result.records)
    assert isinstance(register, RegisterBrokerRecord)
    assert register.broker_epoch == offset
    assert register.fenced  # registered fenced, as Kafka does ...
    assert unfence == UnfenceBrokerRecord(id=1, epoch=offset)  # ... and unfenced right away (single node)
    registration = controller.cluster_control.registration(1)
    assert registration is not None
    assert not registration.fenced
    assert registration.rack == "rack-a"
    assert registration.listeners == tuple(LISTENERS)


def test_register__without_unfence_on_register__stays_fenced() -> None:
    controller = _controller(unfence_on_register=False)
    result = controller.register_broker(1, INCARNATION, LISTENERS, None, now_ms=0)
    assert len(result.records) == 1
    registration = controller.cluster_control.registration(1)
    assert registration is not None
    assert registration.fenced


def test_register__same_incarnation_again__keeps_epoch() -> None:
    controller = _controller()
    first = (controller.register_broker(1, INCARNATION, LISTENERS, None, now_ms=0)).response.broker_epoch
    again = controller.register_broker(1, INCARNATION, LISTENERS, "r", now_ms=1)
    assert again.response.broker_epoch == first
    # Already unfenced: only the amended RegisterBrokerRecord.
    assert len(again.records) == 1
    assert controller.cluster_control.check_broker_epoch(1, first) is ErrorCode.NONE


def test_register__new_incarnation__new_epoch_and_old_epoch_is_stale() -> None:
    controller = _controller()
    first = (controller.register_broker(1, INCARNATION, LISTENERS, None, now_ms=0)).response.broker_epoch
    second = (
        controller.register_broker(1, uuid.UUID(int=99), LISTENERS, None, now_ms=1)
    ).response.broker_epoch
    assert second > first
    assert controller.cluster_control.check_broker_epoch(1, first) is ErrorCode.STALE_BROKER_EPOCH
    assert controller.cluster_control.check_broker_epoch(1, second) is ErrorCode.NONE
    # KIP-730: the producer-id allocation checks exactly this.
    assert controller.allocate_producer_ids(1, first).response.error_code is ErrorCode.STALE_BROKER_EPOCH
    assert controller.allocate_producer_ids(1, second).response.error_code is ErrorCode.NONE


def test_register__epochs_of_two_brokers_differ() -> None:
    controller = _controller()
    one = (controller.register_broker(1, INCARNATION, LISTENERS, None, now_ms=0)).response.broker_epoch
    two = (controller.register_broker(2, uuid.UUID(int=2), LISTENERS, None, now_ms=0)).response.broker_epoch
    assert one != two
    assert controller.cluster_control.check_broker_epoch(2, one) is ErrorCode.STALE_BROKER_EPOCH


def test_check_broker_epoch__unknown_broker__stale() -> None:
    assert _controller().cluster_control.check_broker_epoch(7, 0) is ErrorCode.STALE_BROKER_EPOCH


def test_register__broker_not_supporting_metadata_version__unsupported_version_and_no_records() -> None:
    controller = _controller()
    features = [BrokerFeature("metadata.version", 1, 7)]
    result = controller.register_broker(
        1, INCARNATION, LISTENERS, None, now_ms=0, supported_features=features
    )
    assert result.response.error_code is ErrorCode.UNSUPPORTED_VERSION
    assert result.records == []
    assert controller.cluster_control.registration(1) is None


def test_register__log_dirs__partitions_placed_on_the_only_dir() -> None:
    from pykraft.controller.replication import CreatableTopic

    controller = _controller()
    directory = uuid.UUID(int=0x77)
    controller.register_broker(1, INCARNATION, LISTENERS, None, now_ms=0, log_dirs=[directory])
    (response,) = controller.create_topics([CreatableTopic("t")]).response
    topic = controller.replication_control.topic(response.topic_id)
    assert topic is not None
    assert topic.partitions[0].directories == (directory,)


def test_generate_register__does_not_mutate() -> None:
    controller = _controller()
    before = controller.state()
    controller.cluster_control.register_broker(1, INCARNATION, LISTENERS, None, 0, new_broker_epoch=5)
    assert controller.state() == before
