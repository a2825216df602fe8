"""MetadataImage / MetadataDelta / image_records (kafka-facts.md §1.5, §8.3; anchors.md §3.7)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata.delta import MetadataDelta, load_snapshot
from pykraft.metadata.image import (
    CONFIG_RESOURCE_TYPE_TOPIC,
    DIRECTORY_ID_MIGRATING,
    ConfigResource,
    MetadataImage,
    ProducerIdsImage,
    image_records,
)
from pykraft.metadata.records import (
    ApiMessageAndVersion,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClusterIdRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataReplayError,
    MetadataVersion,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    decode_metadata_record,
    encode_metadata_record,
)


def _apply(image: MetadataImage, records: list[Any]) -> MetadataImage:
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta.apply()


def _producer_ids_image(next_producer_id: int) -> MetadataImage:
    return _apply(
        MetadataImage.EMPTY,
        [ProducerIdsRecord(broker_id=1, broker_epoch=2, next_producer_id=next_producer_id)],
    )


def _round_trip(image: MetadataImage) -> MetadataImage:
    """Write the image as records, through the wire codec, and load them into an empty delta."""
    records = [decode_metadata_record(encode_metadata_record(r)) for r in image_records(image)]
    return load_snapshot(records, image.offset, image.epoch)


# --- kafka-facts §8.3 ProducerIdsImageTest ----------------------------------------------------------


def test_producer_ids_image__empty__writes_no_records_and_reads_back_empty() -> None:
    assert MetadataImage.EMPTY.producer_ids.next_producer_id == -1
    assert image_records(MetadataImage.EMPTY) == []
    assert _round_trip(MetadataImage.EMPTY) == MetadataImage.EMPTY


def test_producer_ids_image__123__round_trips_through_one_record_with_broker_minus_one() -> None:
    image = _producer_ids_image(123)
    records = image_records(image)
    assert records == [
        ApiMessageAndVersion.of(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=123))
    ]
    assert _round_trip(image) == image


def test_producer_ids_image__replaying_several_records__last_one_wins() -> None:
    image = _producer_ids_image(123)
    intermediate = []
    for next_producer_id in (456, 780, 785, 800):
        image = _apply(
            image, [ProducerIdsRecord(broker_id=2, broker_epoch=3, next_producer_id=next_producer_id)]
        )
        intermediate.append(image)
    assert image.producer_ids == ProducerIdsImage(800)
    assert _round_trip(image) == image
    # Writing and reading each intermediate image, then going on, reaches the same final image.
    for earlier in intermediate:
        assert _apply(_round_trip(earlier), [ProducerIdsRecord(broker_id=-1, next_producer_id=800)]) == image


def test_producer_ids_delta__does_not_enforce_monotonicity() -> None:
    # §1.5: the delta copies NextProducerId; only the controller manager checks it moves forward.
    image = _apply(_producer_ids_image(800), [ProducerIdsRecord(broker_id=1, next_producer_id=10)])
    assert image.producer_ids.next_producer_id == 10


# --- deltas ---------------------------------------------------------------------------------------

TOPIC_ID = uuid.UUID(int=0xABCDEF)


def _register(broker_id: int, epoch: int, fenced: bool = True) -> Any:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=uuid.UUID(int=broker_id + 1000),
        broker_epoch=epoch,
        end_points=[
            RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)
        ],
        features=[],
        rack=None,
        fenced=fenced,
    )


def _topic_with_partition(name: str = "foo", topic_id: uuid.UUID = TOPIC_ID) -> list[Any]:
    return [
        TopicRecord(name=name, topic_id=topic_id),
        PartitionRecord(
            partition_id=0,
            topic_id=topic_id,
            replicas=[1, 2],
            isr=[1, 2],
            leader=1,
            leader_epoch=0,
            partition_epoch=0,
        ),
    ]


def test_delta__apply__shares_untouched_sub_images() -> None:
    base = _apply(MetadataImage.EMPTY, [_register(1, 10), *_topic_with_partition()])
    after = _apply(base, [ProducerIdsRecord(broker_id=1, next_producer_id=1000)])
    assert after.cluster is base.cluster
    assert after.topics is base.topics
    assert after.features is base.features
    assert after.producer_ids.next_producer_id == 1000
    # The base image is unchanged by a delta built on it.
    assert base.producer_ids.next_producer_id == -1


def test_delta__topic_change__shares_other_topics() -> None:
    other_id = uuid.UUID(int=99)
    base = _apply(MetadataImage.EMPTY, [*_topic_with_partition(), *_topic_with_partition("bar", other_id)])
    after = _apply(base, [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[1])])
    assert after.topics.topics_by_id[other_id] is base.topics.topics_by_id[other_id]
    assert after.topics.topics_by_name["foo"] is after.topics.topics_by_id[TOPIC_ID]


def test_delta__replay_offset_and_epoch__recorded_in_image() -> None:
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(ApiMessageAndVersion.of(NoOpRecord()), offset=7, epoch=2)
    image = delta.apply()
    assert (image.offset, image.epoch) == (7, 2)


def test_partition_change__leader_change__bumps_leader_and_partition_epoch() -> None:
    base = _apply(MetadataImage.EMPTY, _topic_with_partition())
    image = _apply(base, [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2)])
    partition = image.topics.topics_by_name["foo"].partitions[0]
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (2, 1, 1)
    image = _apply(image, [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[2])])
    partition = image.topics.topics_by_name["foo"].partitions[0]
    assert (partition.isr, partition.leader_epoch, partition.partition_epoch) == ((2,), 1, 2)
    assert partition.directories == (DIRECTORY_ID_MIGRATING, DIRECTORY_ID_MIGRATING)


def test_remove_topic__also_removes_its_configs() -> None:
    config = ConfigRecord(resource_type=CONFIG_RESOURCE_TYPE_TOPIC, resource_name="foo", name="k", value="v")
    image = _apply(MetadataImage.EMPTY, [*_topic_with_partition(), config])
    assert image.configs.configs_for(ConfigResource(CONFIG_RESOURCE_TYPE_TOPIC, "foo")) == {"k": "v"}
    image = _apply(image, [RemoveTopicRecord(topic_id=TOPIC_ID)])
    assert image.topics.topics_by_name == {}
    assert image.configs.resources == {}


def test_config_record__null_value__deletes_key() -> None:
    resource = ConfigResource(CONFIG_RESOURCE_TYPE_TOPIC, "foo")
    set_ = ConfigRecord(resource_type=2, resource_name="foo", name="k", value="v")
    delete = ConfigRecord(resource_type=2, resource_name="foo", name="k", value=None)
    image = _apply(MetadataImage.EMPTY, [set_, delete])
    assert image.configs.configs_for(resource) == {}


def test_broker_changes__fence_unfence_unregister() -> None:
    image = _apply(MetadataImage.EMPTY, [_register(1, 10)])
    assert image.cluster.brokers[1].fenced
    image = _apply(image, [UnfenceBrokerRecord(id=1, epoch=10)])
    assert not image.cluster.brokers[1].fenced
    image = _apply(
        image,
        [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=1, in_controlled_shutdown=1)],
    )
    assert image.cluster.brokers[1].fenced
    assert image.cluster.brokers[1].in_controlled_shutdown
    image = _apply(image, [UnregisterBrokerRecord(broker_id=1, broker_epoch=10)])
    assert image.cluster.brokers == {}


@pytest.mark.parametrize(
    "records",
    [
        [PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1], isr=[1], leader=1)],
        [PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1)],
        [RemoveTopicRecord(topic_id=TOPIC_ID)],
        [TopicRecord(name="foo", topic_id=TOPIC_ID), TopicRecord(name="foo", topic_id=uuid.UUID(int=5))],
        [_register(1, 10), FenceBrokerRecord(id=1, epoch=11)],
        [UnfenceBrokerRecord(id=1, epoch=10)],
        [_register(1, 10), UnregisterBrokerRecord(broker_id=1, broker_epoch=9)],
        [_register(1, 10), BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=5)],
        [ClusterIdRecord(cluster_id="a"), ClusterIdRecord(cluster_id="b")],
    ],
)
def test_delta__inconsistent_record__raises_metadata_replay_error(records: list[Any]) -> None:
    delta = MetadataDelta(MetadataImage.EMPTY)
    with pytest.raises(MetadataReplayError):
        for record in records:
            delta.replay(record)


def test_cluster_id__same_value_repeated__is_fine_and_written_after_features() -> None:
    image = _apply(
        MetadataImage.EMPTY,
        [
            FeatureLevelRecord(name=MetadataVersion.FEATURE_NAME, feature_level=21),
            ClusterIdRecord(cluster_id="zd2vLVrZQlCLJj8-k7A10w"),
            ClusterIdRecord(cluster_id="zd2vLVrZQlCLJj8-k7A10w"),
        ],
    )
    assert image.cluster_id == "zd2vLVrZQlCLJj8-k7A10w"
    records = image_records(image)
    assert [type(r.message) for r in records] == [FeatureLevelRecord, ClusterIdRecord]


def test_image_records__metadata_version_first_and_record_versions_follow_it() -> None:
    image = _apply(
        MetadataImage.EMPTY,
        [
            FeatureLevelRecord(name="kraft.version", feature_level=1),
            FeatureLevelRecord(name=MetadataVersion.FEATURE_NAME, feature_level=MetadataVersion.IBP_3_9_IV0),
            _register(1, 10),
            *_topic_with_partition(),
        ],
    )
    records = image_records(image)
    assert records[0].message.name == MetadataVersion.FEATURE_NAME
    versions = {type(r.message).__name__: r.version for r in records}
    assert versions["RegisterBrokerRecord"] == 3
    assert versions["PartitionRecord"] == 1


def test_transaction_markers_and_noop__change_nothing() -> None:
    image = _apply(
        MetadataImage.EMPTY, [BeginTransactionRecord(name="x"), NoOpRecord(), EndTransactionRecord()]
    )
    assert image == MetadataImage.EMPTY


# --- property: snapshot = image written as records -----------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("register"), st.integers(0, 3)),
        st.tuples(st.just("fence"), st.integers(0, 3)),
        st.tuples(st.just("unfence"), st.integers(0, 3)),
        st.tuples(st.just("unregister"), st.integers(0, 3)),
        st.tuples(st.just("topic"), st.integers(0, 5), st.integers(1, 3)),
        st.tuples(st.just("change"), st.integers(0, 5), st.integers(0, 2), st.integers(-2, 3)),
        st.tuples(st.just("remove"), st.integers(0, 5)),
        st.tuples(
            st.just("config"), st.integers(0, 5), st.sampled_from(["a", "b"]), st.sampled_from(["x", None])
        ),
        st.tuples(st.just("pid"), st.integers(0, 10**6)),
        # Image writing at an older metadata.version loses fields (Kafka's lossHandler); stay >= 3.7-IV2.
        st.tuples(st.just("feature"), st.just(MetadataVersion.FEATURE_NAME), st.integers(17, 21)),
        st.tuples(st.just("feature"), st.just("kraft.version"), st.integers(0, 1)),
        st.tuples(st.just("cluster_id")),
        st.tuples(st.just("noop")),
    ),
    max_size=40,
)


def _records_for(ops: list[tuple[Any, ...]]) -> list[Any]:
    """Turn random ops into a valid record sequence, tracking just enough state to stay consistent."""
    records: list[Any] = [FeatureLevelRecord(name=MetadataVersion.FEATURE_NAME, feature_level=21)]
    brokers: dict[int, int] = {}
    topics: dict[int, tuple[uuid.UUID, int]] = {}
    next_topic_id = 1
    for offset, op in enumerate(ops, start=1):
        kind = op[0]
        if kind == "register":
            brokers[op[1]] = offset
            records.append(_register(op[1], offset))
        elif kind in ("fence", "unfence", "unregister") and op[1] in brokers:
            epoch = brokers[op[1]]
            if kind == "fence":
                records.append(FenceBrokerRecord(id=op[1], epoch=epoch))
            elif kind == "unfence":
                records.append(UnfenceBrokerRecord(id=op[1], epoch=epoch))
            else:
                records.append(UnregisterBrokerRecord(broker_id=op[1], broker_epoch=brokers.pop(op[1])))
        elif kind == "topic" and op[1] not in topics:
            topic_id = uuid.UUID(int=next_topic_id)
            next_topic_id += 1
            topics[op[1]] = (topic_id, op[2])
            records.append(TopicRecord(name=f"t{op[1]}", topic_id=topic_id))
            for p in range(op[2]):
                records.append(
                    PartitionRecord(
                        partition_id=p,
                        topic_id=topic_id,
                        replicas=[0, 1],
                        isr=[0],
                        leader=0,
                        leader_epoch=0,
                        partition_epoch=0,
                        directories=[uuid.UUID(int=5), uuid.UUID(int=6)],
                    )
                )
        elif kind == "change" and op[1] in topics and op[2] < topics[op[1]][1]:
            isr = None if op[3] == -2 else [max(op[3], 0)]
            records.append(
                PartitionChangeRecord(partition_id=op[2], topic_id=topics[op[1]][0], leader=op[3], isr=isr)
            )
        elif kind == "remove" and op[1] in topics:
            records.append(RemoveTopicRecord(topic_id=topics.pop(op[1])[0]))
        elif kind == "config":
            records.append(ConfigRecord(resource_type=2, resource_name=f"t{op[1]}", name=op[2], value=op[3]))
        elif kind == "pid":
            records.append(ProducerIdsRecord(broker_id=0, broker_epoch=0, next_producer_id=op[1]))
        elif kind == "feature":
            records.append(FeatureLevelRecord(name=op[1], feature_level=op[2]))
        elif kind == "cluster_id":
            records.append(ClusterIdRecord(cluster_id="cluster-one"))
        elif kind == "noop":
            records.append(NoOpRecord())
    return records


@settings(max_examples=200, deadline=None)
@given(OPS, st.integers(0, 40))
def test_image_records__replayed_into_empty_delta__gives_equal_image(
    ops: list[tuple[Any, ...]], cut: int
) -> None:
    records = _records_for(ops)
    delta = MetadataDelta(MetadataImage.EMPTY)
    for offset, record in enumerate(records):
        delta.replay(record, offset=offset, epoch=1)
    image = delta.apply()
    assert _round_trip(image) == image
    # A snapshot at any cut plus the tail of the log equals replaying the whole log.
    cut = min(cut, len(records))
    head = _apply(MetadataImage.EMPTY, records[:cut])
    tail_delta = MetadataDelta(_round_trip(head))
    for offset, record in enumerate(records[cut:], start=cut):
        tail_delta.replay(record, offset=offset, epoch=1)
    resumed = tail_delta.apply()
    if records[cut:]:
        assert resumed == image
    else:
        assert resumed.topics == image.topics
