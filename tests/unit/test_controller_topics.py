"""ReplicationControlManager through QuorumController: create/delete topics, add partitions (CreatePartitions),
validation and error codes."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replication import (
    MAX_PARTITIONS_PER_BATCH,
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatePartitionsTopic,
    topic_name_error,
)
from pykraft.core.errors import ErrorCode
from pykraft.core.uuid import ZERO_UUID
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import CONFIG_RESOURCE_TYPE_TOPIC, BrokerEndpoint, ConfigResource, MetadataImage
from pykraft.metadata.records import (
    ConfigRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    decode_metadata_record,
    encode_metadata_record,
)


def _controller(
    brokers: int = 1, seed: int = 1, default_num_partitions: int = 1, default_replication_factor: int = 1
) -> QuorumController:
    controller = QuorumController(
        rng=random.Random(seed),
        default_num_partitions=default_num_partitions,
        default_replication_factor=default_replication_factor,
    )
    controller.activate()
    for broker_id in range(brokers):
        reply = (
            controller.register_broker(
                broker_id, uuid.UUID(int=broker_id + 1), [BrokerEndpoint("PLAINTEXT", "h", 9092, 0)], None, 0
            )
        ).response
        assert reply.error_code is ErrorCode.NONE
    return controller


def _create_one(controller: QuorumController, topic: CreatableTopic) -> tuple[ErrorCode, str | None]:
    result = controller.create_topics([topic])
    assert len(result.response) == 1
    return result.response[0].error_code, result.response[0].error_message


def test_create__defaults__one_topic_record_then_partitions_with_the_broker_as_leader() -> None:
    controller = _controller()
    result = controller.create_topics([CreatableTopic("orders", num_partitions=3, replication_factor=1)])
    (response,) = result.response
    assert response.error_code is ErrorCode.NONE
    assert (response.num_partitions, response.replication_factor) == (3, 1)
    kinds = [type(r.message) for r in result.records]
    assert kinds == [TopicRecord, PartitionRecord, PartitionRecord, PartitionRecord]
    assert result.records[0].message.topic_id == response.topic_id
    for partition_id, record in enumerate(result.records[1:]):
        message = record.message
        assert record.version == 1  # metadata.version 3.9-IV0 has directory assignment
        assert (message.partition_id, message.replicas, message.isr, message.leader) == (
            partition_id,
            [0],
            [0],
            0,
        )
        assert (message.leader_epoch, message.partition_epoch) == (0, 0)
    assert controller.replication_control.topic_id("orders") == response.topic_id


def test_create__minus_one__uses_num_partitions_and_default_replication_factor() -> None:
    controller = _controller(brokers=3, default_num_partitions=4, default_replication_factor=2)
    (response,) = controller.create_topics([CreatableTopic("t")]).response
    assert (response.num_partitions, response.replication_factor) == (4, 2)
    topic = controller.replication_control.topic(response.topic_id)
    assert topic is not None
    for partition in topic.partitions.values():
        assert len(set(partition.replicas)) == 2
        assert partition.leader == partition.replicas[0]


def test_create__topic_ids__come_from_the_injected_rng() -> None:
    first = _controller(seed=7).create_topics([CreatableTopic("t")]).response[0].topic_id
    second = _controller(seed=7).create_topics([CreatableTopic("t")]).response[0].topic_id
    other = _controller(seed=8).create_topics([CreatableTopic("t")]).response[0].topic_id
    assert first == second
    assert first != other


def test_create__configs__config_records_between_topic_and_partitions() -> None:
    controller = _controller()
    result = controller.create_topics(
        [CreatableTopic("t", configs={"retention.ms": "10", "cleanup.policy": "compact"})]
    )
    kinds = [type(r.message) for r in result.records]
    assert kinds == [TopicRecord, ConfigRecord, ConfigRecord, PartitionRecord]
    resource = ConfigResource(CONFIG_RESOURCE_TYPE_TOPIC, "t")
    assert controller.configuration_control.configs_for(resource) == {
        "retention.ms": "10",
        "cleanup.policy": "compact",
    }


def test_create__null_config__invalid_config() -> None:
    assert _create_one(_controller(), CreatableTopic("t", configs={"a": None}))[0] is ErrorCode.INVALID_CONFIG


def test_create__existing__topic_already_exists() -> None:
    controller = _controller()
    controller.create_topics([CreatableTopic("t")])
    code, message = _create_one(controller, CreatableTopic("t"))
    assert code is ErrorCode.TOPIC_ALREADY_EXISTS
    assert message == "Topic 't' already exists."


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "tab\t", "é", "a/b", "a:b"])
def test_create__illegal_name__invalid_topic_exception(name: str) -> None:
    assert _create_one(_controller(), CreatableTopic(name))[0] is ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize("name", ["a" * 249, "a.b_c-D9", "...", "-"])
def test_topic_name__legal(name: str) -> None:
    assert topic_name_error(name) is None


def test_create__dot_underscore_collision__invalid_topic_exception() -> None:
    controller = _controller()
    controller.create_topics([CreatableTopic("a.b")])
    code, message = _create_one(controller, CreatableTopic("a_b"))
    assert code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert message == "Topic 'a_b' collides with existing topic: a.b"
    # Two new topics in one request collide with each other too.
    result = (controller.create_topics([CreatableTopic("x.y"), CreatableTopic("x_y")])).response
    assert [r.error_code for r in result] == [ErrorCode.NONE, ErrorCode.INVALID_TOPIC_EXCEPTION]


def test_create__same_name_twice_in_one_request__invalid_request_once() -> None:
    result = _controller().create_topics([CreatableTopic("t"), CreatableTopic("t")])
    assert [r.error_code for r in result.response] == [ErrorCode.INVALID_REQUEST]
    assert result.records == []


@pytest.mark.parametrize("num_partitions", [0, -2, -100])
def test_create__bad_partition_count__invalid_partitions(num_partitions: int) -> None:
    assert (
        _create_one(_controller(), CreatableTopic("t", num_partitions=num_partitions))[0]
        is ErrorCode.INVALID_PARTITIONS
    )


@pytest.mark.parametrize("replication_factor", [0, -2, 2, 3])
def test_create__bad_replication_factor__invalid_replication_factor(replication_factor: int) -> None:
    code, _ = _create_one(_controller(brokers=1), CreatableTopic("t", replication_factor=replication_factor))
    assert code is ErrorCode.INVALID_REPLICATION_FACTOR


def test_create__no_brokers__invalid_replication_factor() -> None:
    assert _create_one(_controller(brokers=0), CreatableTopic("t"))[0] is ErrorCode.INVALID_REPLICATION_FACTOR


def test_create__mixed_request__per_topic_results_in_request_order_and_records_only_for_successes() -> None:
    controller = _controller()
    result = controller.create_topics(
        [
            CreatableTopic("ok1"),
            CreatableTopic("bad name"),
            CreatableTopic("ok2", num_partitions=0),
            CreatableTopic("ok3"),
        ]
    )
    assert [(r.name, r.error_code) for r in result.response] == [
        ("ok1", ErrorCode.NONE),
        ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("ok2", ErrorCode.INVALID_PARTITIONS),
        ("ok3", ErrorCode.NONE),
    ]
    assert [r.message.name for r in result.records if isinstance(r.message, TopicRecord)] == ["ok1", "ok3"]
    assert result.response[1].topic_id == ZERO_UUID


def test_create__validate_only__answers_without_records_or_state_change() -> None:
    controller = _controller()
    before = controller.state()
    result = controller.create_topics([CreatableTopic("t", num_partitions=2)], validate_only=True)
    assert result.response[0].error_code is ErrorCode.NONE
    assert result.response[0].num_partitions == 2
    assert result.records == []
    assert controller.state() == before


def test_create__manual_assignment() -> None:
    controller = _controller(brokers=3)
    assignments = (CreatableReplicaAssignment(0, (2, 1)), CreatableReplicaAssignment(1, (0, 2)))
    (response,) = (controller.create_topics([CreatableTopic("t", assignments=assignments)])).response
    assert response.error_code is ErrorCode.NONE
    topic = controller.replication_control.topic(response.topic_id)
    assert topic is not None
    assert topic.partitions[0].replicas == (2, 1)
    assert topic.partitions[0].leader == 2
    assert topic.partitions[1].replicas == (0, 2)


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        (
            CreatableTopic("t", num_partitions=1, assignments=(CreatableReplicaAssignment(0, (0,)),)),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            CreatableTopic("t", replication_factor=1, assignments=(CreatableReplicaAssignment(0, (0,)),)),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            CreatableTopic("t", assignments=(CreatableReplicaAssignment(1, (0,)),)),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            CreatableTopic("t", assignments=(CreatableReplicaAssignment(0, ()),)),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            CreatableTopic("t", assignments=(CreatableReplicaAssignment(0, (0, 0)),)),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            CreatableTopic("t", assignments=(CreatableReplicaAssignment(0, (9,)),)),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            CreatableTopic(
                "t", assignments=(CreatableReplicaAssignment(0, (0,)), CreatableReplicaAssignment(0, (1,)))
            ),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            CreatableTopic(
                "t", assignments=(CreatableReplicaAssignment(0, (0,)), CreatableReplicaAssignment(1, (0, 1)))
            ),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
    ],
)
def test_create__bad_manual_assignment(topic: CreatableTopic, code: ErrorCode) -> None:
    assert _create_one(_controller(brokers=2), topic)[0] is code


# --- delete ---------------------------------------------------------------------------------------


def test_delete__by_name_and_by_id__one_remove_topic_record_each() -> None:
    controller = _controller()
    created = controller.create_topics([CreatableTopic("a"), CreatableTopic("b")]).response
    result = controller.delete_topics(names=["a"], topic_ids=[created[1].topic_id])
    assert [(r.name, r.error_code) for r in result.response] == [("a", ErrorCode.NONE), ("b", ErrorCode.NONE)]
    assert [r.message for r in result.records] == [
        RemoveTopicRecord(topic_id=created[0].topic_id),
        RemoveTopicRecord(topic_id=created[1].topic_id),
    ]
    assert controller.replication_control.topics() == {}


def test_delete__same_topic_by_name_and_id__removed_once() -> None:
    controller = _controller()
    (created,) = controller.create_topics([CreatableTopic("a")]).response
    result = controller.delete_topics(names=["a"], topic_ids=[created.topic_id])
    assert len(result.records) == 1


def test_delete__unknown__unknown_topic_or_partition_and_unknown_topic_id() -> None:
    controller = _controller()
    result = controller.delete_topics(names=["nope"], topic_ids=[uuid.UUID(int=42)])
    assert [r.error_code for r in result.response] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
    ]
    assert result.records == []


def test_delete__duplicates__invalid_request() -> None:
    controller = _controller()
    controller.create_topics([CreatableTopic("a")])
    result = controller.delete_topics(names=["a", "a"])
    assert [r.error_code for r in result.response] == [ErrorCode.INVALID_REQUEST]
    assert result.records == []


def test_delete__removes_configs_and_frees_the_name() -> None:
    controller = _controller()
    controller.create_topics([CreatableTopic("a.b", configs={"k": "v"})])
    controller.delete_topics(names=["a.b"])
    assert controller.configuration_control.configs() == {}
    assert _create_one(controller, CreatableTopic("a_b"))[0] is ErrorCode.NONE


def test_generate__does_not_mutate_replication_state() -> None:
    controller = _controller(brokers=2)
    controller.create_topics([CreatableTopic("keep")])
    before = controller.state()
    manager = controller.replication_control
    manager.create_topics([CreatableTopic("t", num_partitions=5, replication_factor=2)])
    manager.delete_topics(names=["keep"])
    assert controller.state() == before


# --- create partitions (KIP-195) ------------------------------------------------------------------


def _with_topic(
    brokers: int = 3, partitions: int = 3, replication_factor: int = 2
) -> tuple[QuorumController, uuid.UUID]:
    controller = _controller(brokers=brokers)
    (created,) = controller.create_topics(
        [CreatableTopic("t", num_partitions=partitions, replication_factor=replication_factor)]
    ).response
    assert created.error_code is ErrorCode.NONE
    return controller, created.topic_id


def _grow_one(
    controller: QuorumController, topic: CreatePartitionsTopic, validate_only: bool = False
) -> tuple[ErrorCode, str | None, list[Any]]:
    result = controller.create_partitions([topic], validate_only=validate_only)
    (response,) = result.response
    assert response.name == topic.name
    return response.error_code, response.error_message, result.records


def test_create_partitions__3_to_6__one_partition_record_each_placed_with_partition_0s_factor() -> None:
    controller, topic_id = _with_topic(brokers=3, partitions=3, replication_factor=2)
    code, message, records = _grow_one(controller, CreatePartitionsTopic("t", 6))
    assert (code, message) == (ErrorCode.NONE, None)
    assert [type(r.message) for r in records] == [PartitionRecord] * 3
    assert [r.message.partition_id for r in records] == [3, 4, 5]
    for record in records:
        message = record.message
        assert message.topic_id == topic_id
        assert len(message.replicas) == len(set(message.replicas)) == 2
        assert set(message.replicas) <= {0, 1, 2}
        assert (message.isr, message.leader) == (message.replicas, message.replicas[0])
        assert (message.leader_epoch, message.partition_epoch) == (0, 0)
    topic = controller.replication_control.topic(topic_id)
    assert topic is not None
    assert sorted(topic.partitions) == [0, 1, 2, 3, 4, 5]
    # Round-robin placement continues where partition 2 left off: the leaders cover every broker.
    assert {topic.partitions[p].leader for p in (3, 4, 5)} == {0, 1, 2}


@pytest.mark.parametrize(
    ("count", "message"),
    [
        (2, "The topic t currently has 3 partition(s); 2 would not be an increase."),
        (3, "Topic already has 3 partition(s)."),
        (-1, "The topic t currently has 3 partition(s); -1 would not be an increase."),
    ],
)
def test_create_partitions__not_an_increase__invalid_partitions_and_nothing_written(
    count: int, message: str
) -> None:
    controller, _ = _with_topic()
    before = controller.state()
    assert _grow_one(controller, CreatePartitionsTopic("t", count)) == (
        ErrorCode.INVALID_PARTITIONS,
        message,
        [],
    )
    assert controller.state() == before


def test_create_partitions__unknown_topic__unknown_topic_or_partition() -> None:
    controller, _ = _with_topic()
    assert _grow_one(controller, CreatePartitionsTopic("nope", 4)) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        None,
        [],
    )


def test_create_partitions__validate_only__answers_without_records_or_state_change() -> None:
    controller, _ = _with_topic()
    before = controller.state()
    assert _grow_one(controller, CreatePartitionsTopic("t", 6), validate_only=True) == (
        ErrorCode.NONE,
        None,
        [],
    )
    assert _grow_one(controller, CreatePartitionsTopic("t", 2), validate_only=True)[0] is (
        ErrorCode.INVALID_PARTITIONS
    )
    assert controller.state() == before


def test_create_partitions__manual_assignment__the_given_replicas_first_as_leader() -> None:
    controller, topic_id = _with_topic(partitions=1)
    code, _, records = _grow_one(controller, CreatePartitionsTopic("t", 3, assignments=((2, 1), (0, 2))))
    assert code is ErrorCode.NONE
    assert [(r.message.partition_id, r.message.replicas, r.message.leader) for r in records] == [
        (1, [2, 1], 2),
        (2, [0, 2], 0),
    ]
    topic = controller.replication_control.topic(topic_id)
    assert topic is not None
    assert (topic.partitions[1].replicas, topic.partitions[2].isr) == ((2, 1), (0, 2))


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        (((0, 1),), "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        (
            ((0, 1), (1, 2), (2, 0)),
            "Attempted to add 2 additional partition(s), but only 3 assignment(s) were specified.",
        ),
        (
            ((0, 1), (1,)),
            "The manual partition assignment includes a partition with 1 replica(s), but this is not "
            "consistent with previous partitions, which have 2 replica(s).",
        ),
        (
            ((0, 1), (1, 9)),
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (((0, 1), (1, 1)), "The manual partition assignment includes the broker 1 more than once."),
        (((0, 1), ()), "The manual partition assignment includes an empty replica list."),
    ],
)
def test_create_partitions__bad_manual_assignment__invalid_replica_assignment_and_nothing_written(
    assignments: tuple[tuple[int, ...], ...], message: str
) -> None:
    controller, _ = _with_topic(partitions=1)
    before = controller.state()
    assert _grow_one(controller, CreatePartitionsTopic("t", 3, assignments=assignments)) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        message,
        [],
    )
    assert controller.state() == before


def test_create_partitions__manual_assignment_on_fenced_brokers_only__invalid_replica_assignment() -> None:
    controller, _ = _with_topic(partitions=1)
    controller.fence_brokers([1, 2])
    code, message, _ = _grow_one(controller, CreatePartitionsTopic("t", 2, assignments=((1, 2),)))
    assert code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert message == (
        "All brokers specified in the manual partition assignment for partition 1 are fenced or in "
        "controlled shutdown."
    )


def test_create_partitions__fewer_usable_brokers_than_the_factor__invalid_replication_factor() -> None:
    controller, _ = _with_topic(brokers=3, partitions=1, replication_factor=3)
    controller.fence_brokers([2])
    code, message, records = _grow_one(controller, CreatePartitionsTopic("t", 2))
    assert (code, records) == (ErrorCode.INVALID_REPLICATION_FACTOR, [])
    assert message is not None and message.startswith("Unable to replicate the partition 3 time(s)")


def test_create_partitions__mixed_and_duplicated_names__per_topic_answers_records_only_for_successes() -> (
    None
):
    controller = _controller(brokers=2)
    created = controller.create_topics(
        [CreatableTopic("a", num_partitions=1), CreatableTopic("b", num_partitions=1), CreatableTopic("c")]
    ).response
    result = controller.create_partitions(
        [
            CreatePartitionsTopic("a", 2),
            CreatePartitionsTopic("b", 4),
            CreatePartitionsTopic("dup", 2),
            CreatePartitionsTopic("c", 1),
            CreatePartitionsTopic("dup", 3),
        ]
    )
    assert [(r.name, r.error_code, r.error_message) for r in result.response] == [
        ("a", ErrorCode.NONE, None),
        ("b", ErrorCode.NONE, None),
        ("dup", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        ("c", ErrorCode.INVALID_PARTITIONS, "Topic already has 1 partition(s)."),
    ]
    assert [(r.message.topic_id, r.message.partition_id) for r in result.records] == [
        (created[0].topic_id, 1),
        (created[1].topic_id, 1),
        (created[1].topic_id, 2),
        (created[1].topic_id, 3),
    ]


def test_too_many_partitions_in_one_request__policy_violation_for_create_topics_and_create_partitions() -> (
    None
):
    controller, _ = _with_topic(partitions=1, replication_factor=1)
    before = controller.state()
    grown = controller.create_partitions(
        [CreatePartitionsTopic("t", MAX_PARTITIONS_PER_BATCH + 2), CreatePartitionsTopic("nope", 5)]
    )
    created = controller.create_topics(
        [CreatableTopic("x", num_partitions=MAX_PARTITIONS_PER_BATCH), CreatableTopic("y", num_partitions=1)]
    )
    for result in (grown, created):
        assert {(r.error_code, r.error_message) for r in result.response} == {
            (ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")
        }
        assert result.records == []
    assert controller.state() == before
    # Exactly the limit is fine: the topic's one partition and MAX_PARTITIONS_PER_BATCH new ones.
    code, _, records = _grow_one(controller, CreatePartitionsTopic("t", MAX_PARTITIONS_PER_BATCH + 1))
    assert (code, len(records)) == (ErrorCode.NONE, MAX_PARTITIONS_PER_BATCH)


def test_create_partitions__generate_never_mutates_and_the_records_replay_to_the_same_state_on_a_follower() -> (
    None
):
    leader = QuorumController(rng=random.Random(3))
    log: list[Any] = list(leader.activate().records)
    for broker_id in range(3):
        endpoint = BrokerEndpoint("PLAINTEXT", "h", 9092 + broker_id, 0)
        log += leader.register_broker(broker_id, uuid.UUID(int=broker_id + 1), [endpoint], None, 0).records
    log += leader.create_topics([CreatableTopic("t", num_partitions=3, replication_factor=2)]).records
    before = leader.state()
    leader.replication_control.create_partitions([CreatePartitionsTopic("t", 6)])
    assert leader.state() == before  # generating is not replaying
    grown = leader.create_partitions([CreatePartitionsTopic("t", 6)])
    assert grown.response[0].error_code is ErrorCode.NONE
    log += grown.records
    log += leader.create_partitions([CreatePartitionsTopic("t", 8, assignments=((2, 0), (1, 2)))]).records

    # Through the wire codec, as the records really travel, into a follower and a broker's image.
    wire = [decode_metadata_record(encode_metadata_record(r)) for r in log]
    follower = QuorumController(rng=random.Random(999))
    delta = MetadataDelta(MetadataImage.EMPTY)
    for offset, record in enumerate(wire):
        follower.replay(record, offset)
        delta.replay(record, offset=offset, epoch=1)
    assert follower.state() == leader.state()
    image = delta.apply()
    topic_image = image.topics.get_topic("t")
    assert topic_image is not None
    (leader_topic,) = leader.replication_control.topics().values()
    assert sorted(topic_image.partitions) == list(range(8))
    assert dict(topic_image.partitions) == leader_topic.partitions


def test_an_inactive_controller_applies_nothing_it_generates() -> None:
    # A follower (or a leader still applying its log) asked to create a topic answers NOT_CONTROLLER
    # through the shell; what it generated must not linger in its state, or the topic would "exist"
    # once it becomes active although no record of it was ever written (found by test_quorum).
    controller = _controller()
    controller.active = False
    refused = controller.create_topics([CreatableTopic("ghost", 1, 1)])
    assert refused.records and refused.response[0].error_code == ErrorCode.NONE
    assert controller.replication_control.topic_id("ghost") is None
    controller.active = True
    created = controller.create_topics([CreatableTopic("ghost", 1, 1)])
    assert created.response[0].error_code == ErrorCode.NONE
    assert controller.replication_control.topic_id("ghost") is not None
