"""ReplicationControlManager through QuorumController: create/delete topics, validation and error codes."""

from __future__ import annotations

import random
import uuid

import pytest

from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replication import CreatableReplicaAssignment, CreatableTopic, topic_name_error
from pykraft.core.errors import ErrorCode
from pykraft.core.uuid import ZERO_UUID
from pykraft.metadata.image import CONFIG_RESOURCE_TYPE_TOPIC, BrokerEndpoint, ConfigResource
from pykraft.metadata.records import ConfigRecord, PartitionRecord, RemoveTopicRecord, TopicRecord


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
