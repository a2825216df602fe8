"""KIP-630 for the metadata state machine: snapshot + tail == full replay (image and controller), the
snapshot trigger, and the metadata records inside the container."""

from __future__ import annotations

import random
import uuid
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replication import CreatableTopic
from pykraft.controller.result import ControllerResult
from pykraft.metadata.delta import MetadataDelta, load_snapshot
from pykraft.metadata.image import BrokerEndpoint, MetadataImage
from pykraft.metadata.records import (
    ApiMessageAndVersion,
    BeginTransactionRecord,
    EndTransactionRecord,
    MetadataRecordError,
    NoOpRecord,
    PartitionRecord,
    TopicRecord,
    decode_metadata_record,
    encode_metadata_record,
)
from pykraft.metadata.snapshots import (
    SnapshotTrigger,
    image_snapshot_values,
    load_snapshot_image,
    load_snapshot_records,
)
from pykraft.raft.messages import OffsetAndEpoch
from pykraft.raft.snapshot import read_snapshot, write_snapshot
from tests.unit.test_metadata_records import _record

LISTENERS = [BrokerEndpoint("PLAINTEXT", "localhost", 9092, 0)]
OPS = st.lists(
    st.tuples(st.sampled_from(["register", "create", "delete", "pids", "noop"]), st.integers(0, 7)),
    min_size=1,
    max_size=25,
)


def _batches(ops: list[tuple[str, int]], seed: int) -> list[list[ApiMessageAndVersion]]:
    """Drive a controller through random operations; each result is one batch of the log."""
    controller = QuorumController(rng=random.Random(seed), default_num_partitions=2)
    batches = [list(controller.activate(cluster_id="c" * 22).records)]
    epochs: dict[int, int] = {}
    for op, arg in ops:
        if op == "register":
            result = controller.register_broker(arg % 3, uuid.UUID(int=arg + 1), LISTENERS, None, 0)
            if result.records:
                epochs[arg % 3] = result.response.broker_epoch
        elif op == "create":
            result = controller.create_topics([CreatableTopic(f"t{arg}", num_partitions=1 + arg % 3)])
        elif op == "delete":
            result = controller.delete_topics(names=[f"t{arg}"])
        elif op == "pids" and epochs:
            broker_id = sorted(epochs)[arg % len(epochs)]
            result = controller.allocate_producer_ids(broker_id, epochs[broker_id])
        else:
            result = controller._write(ControllerResult([ApiMessageAndVersion.of(NoOpRecord())], None))
        if result.records:
            batches.append(list(result.records))
    return batches


def _replay(image: MetadataImage, records: list[ApiMessageAndVersion], first_offset: int) -> MetadataImage:
    delta = MetadataDelta(image)
    for index, record in enumerate(records):
        delta.replay(decode_metadata_record(encode_metadata_record(record)), first_offset + index, 1)
    return delta.apply()


@settings(max_examples=60, deadline=None)
@given(OPS, st.integers(0, 1000), st.data())
def test_snapshot_plus_tail_equals_full_replay(
    ops: list[tuple[str, int]], seed: int, data: st.DataObject
) -> None:
    batches = _batches(ops, seed)
    flat = [r for batch in batches for r in batch]
    full_image = _replay(MetadataImage.EMPTY, flat, 0)
    full_controller = QuorumController(rng=random.Random(0))
    for offset, record in enumerate(flat):
        full_controller.replay(record, offset)

    # Cut at a batch boundary outside the bootstrap transaction (batch 0 is the whole transaction).
    cut_batch = data.draw(st.integers(1, len(batches)))
    cut = sum(len(b) for b in batches[:cut_batch])
    head_image = _replay(MetadataImage.EMPTY, flat[:cut], 0)
    snapshot_id = OffsetAndEpoch(cut, 1)
    snapshot = write_snapshot(
        snapshot_id, image_snapshot_values(head_image), last_contained_log_timestamp=0, now_ms=0
    )
    values = read_snapshot(snapshot).values
    records = load_snapshot_records(values)

    image = load_snapshot(records, cut - 1, 1)
    # The node's loader (no message per PartitionRecord) builds the same image.
    assert load_snapshot_image(values, cut - 1, 1) == image
    assert _replay(image, flat[cut:], cut) == full_image

    controller = QuorumController(rng=random.Random(0))
    controller.replay_snapshot(records, cut)
    # The node's controller load: from the image, not a second replay; the same state.
    from_image = QuorumController(rng=random.Random(0))
    from_image.load_image(image, cut)
    assert from_image.state() == controller.state()
    for loaded_controller in (controller, from_image):
        for offset, record in enumerate(flat[cut:], start=cut):
            loaded_controller.replay(record, offset)
        loaded, full = loaded_controller.state(), full_controller.state()
        assert loaded.next_producer_block.first_producer_id == full.next_producer_block.first_producer_id
        assert replace(
            loaded, next_producer_block=full.next_producer_block, producer_ids_broker_epoch=0
        ) == replace(full, producer_ids_broker_epoch=0)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.data()), min_size=1, max_size=12))
def test_load_snapshot_image__partition_records_of_every_version__equal_to_replaying_them(
    picks: list[tuple[int, st.DataObject]],
) -> None:
    topic_id = uuid.UUID(int=42)
    values = [encode_metadata_record(ApiMessageAndVersion.of(TopicRecord(name="t", topic_id=topic_id)))]
    for version, data in picks:
        record = data.draw(_record(PartitionRecord, version)).message
        record.topic_id = topic_id  # built here, never shared
        values.append(encode_metadata_record(ApiMessageAndVersion.of(record, version)))
    expected = load_snapshot(load_snapshot_records(values), 10, 1)
    assert load_snapshot_image(values, 10, 1) == expected
    for cut in (len(values[-1]) - 1, 24):
        with pytest.raises(MetadataRecordError, match=f"snapshot record {len(values) - 1}"):
            load_snapshot_image([*values[:-1], values[-1][:cut]], 10, 1)


def test_controller_and_image__share_partition_registrations_after_replaying_the_same_records() -> None:
    controller = QuorumController(rng=random.Random(3))
    records = list(controller.activate().records)
    records += controller.register_broker(1, uuid.UUID(int=1), LISTENERS, None, 0).records
    records += controller.create_topics([CreatableTopic("t", num_partitions=2)]).records
    follower = QuorumController(rng=random.Random(3))
    delta = MetadataDelta(MetadataImage.EMPTY)
    for offset, record in enumerate(records):
        decoded = decode_metadata_record(encode_metadata_record(record))
        follower.replay(decoded, offset)
        delta.replay(decoded, offset, 1)
    image = delta.apply()
    topic = image.topics.topics_by_name["t"]
    info = follower.replication_control.topic(topic.topic_id)
    assert info is not None
    assert all(info.partitions[p] is topic.partitions[p] for p in (0, 1))


def test_snapshot_holds_cluster_id_features_brokers_topics_and_producer_ids() -> None:
    batches = _batches([("register", 1), ("create", 2), ("pids", 0), ("pids", 0)], 5)
    image = _replay(MetadataImage.EMPTY, [r for b in batches for r in b], 0)
    names = [type(r.message).__name__ for r in load_snapshot_records(image_snapshot_values(image))]
    assert names[:2] == ["FeatureLevelRecord", "ClusterIdRecord"]
    assert {"RegisterBrokerRecord", "TopicRecord", "PartitionRecord", "ProducerIdsRecord"} <= set(names)
    assert image.producer_ids.next_producer_id == 2000


def test_load_snapshot_records__progress_and_bad_record_named() -> None:
    values = [encode_metadata_record(ApiMessageAndVersion.of(NoOpRecord()))] * 5
    seen: list[tuple[int, int]] = []
    import pykraft.metadata.snapshots as module

    old = module.LOAD_PROGRESS_EVERY_RECORDS
    module.LOAD_PROGRESS_EVERY_RECORDS = 2
    try:
        load_snapshot_records(values, lambda done, total: seen.append((done, total)))
    finally:
        module.LOAD_PROGRESS_EVERY_RECORDS = old
    assert seen == [(2, 5), (4, 5)]
    try:
        load_snapshot_records([*values, b"\x01\xff\x7f\x00"])
    except ValueError as error:
        assert "snapshot record 5" in str(error)
    else:
        raise AssertionError("a bad record loaded")


def test_trigger__bytes_time_transaction_and_disabled_interval() -> None:
    trigger = SnapshotTrigger(max_bytes_between_snapshots=100, max_interval_ms=1000)
    assert trigger.due(5000) is None  # nothing replayed yet
    trigger.note_records([], 99)
    assert trigger.due(500) is None
    trigger.note_records([ApiMessageAndVersion.of(BeginTransactionRecord(name="x"))], 1)
    assert trigger.due(500) is None  # never inside a metadata transaction
    trigger.note_records([ApiMessageAndVersion.of(EndTransactionRecord())], 1)
    assert "bytes" in (trigger.due(500) or "")
    trigger.reset(500)
    trigger.note_records([], 1)
    assert trigger.due(1499) is None
    assert "ms" in (trigger.due(1500) or "")
    never = SnapshotTrigger(max_bytes_between_snapshots=100, max_interval_ms=0)
    never.note_records([], 1)
    assert never.due(10**12) is None  # 0 disables time-based snapshots (KIP-876)
