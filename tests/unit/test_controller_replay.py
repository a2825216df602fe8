"""QuorumController: bootstrap, activation, and "replay is the only mutation" across controller and image."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.controller.quorum_controller import BOOTSTRAP_TRANSACTION_NAME, QuorumController
from pykraft.controller.replication import CreatableTopic
from pykraft.core.errors import ErrorCode
from pykraft.metadata.delta import MetadataDelta, load_snapshot
from pykraft.metadata.image import BrokerEndpoint, MetadataImage, image_records
from pykraft.metadata.records import (
    AbortTransactionRecord,
    ApiMessageAndVersion,
    BeginTransactionRecord,
    ClusterIdRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    MetadataReplayError,
    MetadataVersion,
    ProducerIdsRecord,
    TopicRecord,
    decode_metadata_record,
    encode_metadata_record,
)

LISTENERS = [BrokerEndpoint("PLAINTEXT", "localhost", 9092, 0)]


class _Log:
    """The metadata log as the shell would keep it: every record the active controller wrote, in order."""

    def __init__(self) -> None:
        self.records: list[ApiMessageAndVersion] = []

    def append(self, records: list[ApiMessageAndVersion]) -> None:
        # Through the wire codec, as records really travel.
        self.records.extend(decode_metadata_record(encode_metadata_record(r)) for r in records)


def _follower(log: _Log) -> QuorumController:
    follower = QuorumController(rng=random.Random(999))
    for offset, record in enumerate(log.records):
        follower.replay(record, offset)
    return follower


def _image(log: _Log) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for offset, record in enumerate(log.records):
        delta.replay(record, offset=offset, epoch=1)
    return delta.apply()


def test_bootstrap_records__metadata_version_in_a_metadata_transaction() -> None:
    controller = QuorumController(rng=random.Random(0))
    assert controller.bootstrap_records() == [
        ApiMessageAndVersion.of(BeginTransactionRecord(name=BOOTSTRAP_TRANSACTION_NAME)),
        ApiMessageAndVersion.of(FeatureLevelRecord(name="metadata.version", feature_level=21)),
        ApiMessageAndVersion.of(EndTransactionRecord()),
    ]
    assert MetadataVersion.LATEST_PRODUCTION == MetadataVersion.IBP_3_9_IV0 == 21


def test_bootstrap_records__kip_1262_cluster_id__after_metadata_version_inside_the_transaction() -> None:
    records = QuorumController(rng=random.Random(0)).bootstrap_records(cluster_id="zd2vLVrZQlCLJj8-k7A10w")
    kinds = [type(r.message) for r in records]
    assert kinds == [BeginTransactionRecord, FeatureLevelRecord, ClusterIdRecord, EndTransactionRecord]


def test_bootstrap_records__old_metadata_version__no_transaction() -> None:
    controller = QuorumController(
        rng=random.Random(0), bootstrap_metadata_version=MetadataVersion.IBP_3_3_IV3
    )
    assert [type(r.message) for r in controller.bootstrap_records()] == [FeatureLevelRecord]


def test_activate__empty_log__writes_bootstrap_then_nothing() -> None:
    controller = QuorumController(rng=random.Random(0))
    first = controller.activate()
    assert len(first.records) == 3
    assert controller.feature_control.metadata_version == 21
    assert controller.next_write_offset == 3
    assert controller.activate().records == []


def test_activate__bootstrap_transaction_cut_short__abort_then_bootstrap_again() -> None:
    controller = QuorumController(rng=random.Random(0))
    begin, feature, _end = controller.bootstrap_records()
    controller.replay(begin, 0)
    controller.replay(feature, 1)
    assert controller.feature_control.metadata_version == 21
    # A new leader finds the open transaction: the abort undoes it, then the bootstrap is written again.
    result = controller.activate()
    assert [type(r.message) for r in result.records] == [
        AbortTransactionRecord,
        BeginTransactionRecord,
        FeatureLevelRecord,
        EndTransactionRecord,
    ]
    assert controller.feature_control.metadata_version == 21
    assert controller.transaction_start_offset == -1
    assert controller.next_write_offset == 6


def test_activate__open_transaction_after_bootstrap__abort_reverts_only_the_transaction() -> None:
    controller = QuorumController(rng=random.Random(0))
    controller.activate()
    controller.replay(BeginTransactionRecord(name="x"), 3)
    controller.replay(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=7000), 4)
    result = controller.activate()
    assert [type(r.message) for r in result.records] == [AbortTransactionRecord]
    assert controller.producer_id_control.next_producer_block.first_producer_id == 0
    assert controller.feature_control.metadata_version == 21


def test_replay__end_without_begin__raises() -> None:
    controller = QuorumController(rng=random.Random(0))
    with pytest.raises(MetadataReplayError):
        controller.replay(ApiMessageAndVersion.of(EndTransactionRecord()), 0)


def test_replay__producer_ids_going_back__raises() -> None:
    controller = QuorumController(rng=random.Random(0))
    controller.replay(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=5000), 0)
    with pytest.raises(MetadataReplayError):
        controller.replay(ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=5000), 1)


def test_note_log_end_offset__control_records__broker_epoch_follows_the_real_offset() -> None:
    controller = QuorumController(rng=random.Random(0))
    controller.activate()
    controller.note_log_end_offset(10)  # e.g. a LeaderChange control record took offsets 3..9
    assert controller.register_broker(1, uuid.UUID(int=1), LISTENERS, None, 0).response.broker_epoch == 10


def _run_workload(controller: QuorumController, log: _Log, ops: list[tuple[Any, ...]]) -> None:
    log.append(controller.activate(cluster_id="cluster-x").records)
    epochs: dict[int, int] = {}
    for op in ops:
        kind = op[0]
        if kind == "register":
            result: Any = controller.register_broker(op[1], uuid.UUID(int=op[2] + 1), LISTENERS, None, 0)
            epochs[op[1]] = result.response.broker_epoch
        elif kind == "create":
            result = controller.create_topics(
                [CreatableTopic(f"t{op[1]}", num_partitions=op[2], replication_factor=op[3])]
            )
        elif kind == "delete":
            result = controller.delete_topics(names=[f"t{op[1]}"])
        elif kind == "pid":
            result = controller.allocate_producer_ids(op[1], epochs.get(op[1], -1))
        else:
            raise AssertionError(kind)
        log.append(result.records)


WORKLOAD = st.lists(
    st.one_of(
        st.tuples(st.just("register"), st.integers(0, 3), st.integers(0, 2)),
        st.tuples(st.just("create"), st.integers(0, 6), st.integers(-1, 3), st.integers(-1, 2)),
        st.tuples(st.just("delete"), st.integers(0, 6)),
        st.tuples(st.just("pid"), st.integers(0, 4)),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(WORKLOAD, st.integers(0, 2**32))
def test_full_replay__rebuilds_equal_controller_state_and_image(
    ops: list[tuple[Any, ...]], seed: int
) -> None:
    active = QuorumController(rng=random.Random(seed))
    log = _Log()
    _run_workload(active, log, ops)
    assert active.next_write_offset == len(log.records)

    # A follower (or a restarted node) replaying the same log has the same state.
    follower = _follower(log)
    assert follower.state() == active.state()

    # The broker's image, built from the same records, agrees with the controller.
    image = _image(log)
    state = active.state()
    assert dict(image.cluster.brokers) == state.brokers
    assert {t: dict(i.partitions) for t, i in image.topics.topics_by_id.items()} == {
        t: i.partitions for t, i in state.topics.items()
    }
    assert {t: i.name for t, i in image.topics.topics_by_id.items()} == {
        t: i.name for t, i in state.topics.items()
    }
    assert dict(image.features.finalized_versions) == state.finalized_versions
    assert image.cluster_id == state.cluster_id == "cluster-x"
    expected_next = (
        -1 if state.next_producer_block.block_size == 0 else state.next_producer_block.first_producer_id
    )
    assert image.producer_ids.next_producer_id == expected_next

    # A snapshot (the image as records) loads into an equal image and into an equivalent controller.
    snapshot = image_records(image)
    assert load_snapshot(snapshot, image.offset, image.epoch) == image
    restored = QuorumController(rng=random.Random(0))
    for offset, record in enumerate(snapshot):
        restored.replay(record, offset)
    restored_state = restored.state()
    assert restored_state.brokers == state.brokers
    assert restored_state.topics == state.topics
    assert restored_state.configs == state.configs
    assert restored_state.next_producer_block.first_producer_id == state.next_producer_block.first_producer_id


@settings(max_examples=100, deadline=None)
@given(WORKLOAD)
def test_generate__never_mutates__only_replay_does(ops: list[tuple[Any, ...]]) -> None:
    controller = QuorumController(rng=random.Random(5))
    _run_workload(controller, _Log(), ops)
    before = controller.state()
    for broker_id in range(4):
        controller.producer_id_control.generate_next_producer_id(broker_id, 0)
        controller.cluster_control.register_broker(
            broker_id, uuid.UUID(int=50), LISTENERS, None, 0, new_broker_epoch=10**6
        )
    controller.replication_control.create_topics([CreatableTopic(f"t{i}") for i in range(8)])
    controller.replication_control.delete_topics(names=[f"t{i}" for i in range(8)])
    controller.bootstrap_records(cluster_id="y")
    assert controller.state() == before


def test_create_then_allocate__full_story_through_the_log() -> None:
    controller = QuorumController(rng=random.Random(1))
    log = _Log()
    log.append(controller.activate().records)
    epoch = controller.register_broker(0, uuid.UUID(int=1), LISTENERS, None, 0)
    log.append(epoch.records)
    created = controller.create_topics([CreatableTopic("orders", num_partitions=2)])
    log.append(created.records)
    first = controller.allocate_producer_ids(0, epoch.response.broker_epoch)
    log.append(first.records)
    second = controller.allocate_producer_ids(0, epoch.response.broker_epoch)
    log.append(second.records)
    assert (first.response.producer_id_start, second.response.producer_id_start) == (0, 1000)
    assert first.response.error_code is second.response.error_code is ErrorCode.NONE
    image = _image(log)
    assert image.producer_ids.next_producer_id == 2000
    assert image.topics.get_topic("orders") is not None
    assert [type(r.message) for r in image_records(image)][:1] == [FeatureLevelRecord]
    assert any(isinstance(r.message, TopicRecord) for r in image_records(image))


def test_quorum_controller__shell_calling_convention() -> None:
    controller = QuorumController(rng=random.Random(2), node_id=3)
    controller.activate()
    offset = controller.next_write_offset
    # Tuple listeners (PLAINTEXT), dict assignments, (name, id) pairs for delete; operations replay at once.
    registered = controller.register_broker(
        broker_id=0,
        incarnation_id=uuid.UUID(int=9),
        listeners=[("PLAINTEXT", "h", 9092)],
        rack=None,
        now_ms=1,
    )
    assert controller.broker_epoch(0) == registered.response.broker_epoch == offset
    assert controller.broker_epoch(1) == -1
    registration = controller.cluster_control.registration(0)
    assert registration is not None
    assert registration.listeners == (BrokerEndpoint("PLAINTEXT", "h", 9092, 0),)
    created = controller.create_topics([CreatableTopic("t", assignments={0: [0], 1: [0]})])
    assert created.response[0].num_partitions == 2
    topic_id = created.response[0].topic_id
    deleted = controller.delete_topics([("t", None), (None, uuid.UUID(int=77))])
    assert [r.error_code for r in deleted.response] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_ID]
    assert deleted.response[0].topic_id == topic_id
    assert controller.replication_control.topics() == {}
    assert controller.next_write_offset == offset + 2 + 3 + 1
