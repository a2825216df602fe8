"""Group configs (ConfigResource type GROUP, issue 27 item 6): Kafka 4.2's GroupConfig names and checks
against the broker's group.consumer.* bounds, the controller's ConfigRecords for any group name,
DescribeConfigs' values and sources, and the KIP-848 coordinator applying a group's own
consumer.heartbeat.interval.ms and consumer.session.timeout.ms."""

from __future__ import annotations

import random

import pytest

from pykraft.controller.configs import AlterConfigOp, ConfigAlteration
from pykraft.controller.quorum_controller import QuorumController
from pykraft.coordinator.consumer_group import HeartbeatRequest
from pykraft.core.config import DEFAULT_PROPERTIES, load_config
from pykraft.core.errors import ErrorCode
from pykraft.core.group_configs import (
    GROUP_CONFIGS,
    KAFKA_GROUP_COORDINATOR_SETTINGS,
    SOURCE_GROUP_CONFIG,
    check_group_configs,
    effective_group_configs,
    group_coordinator_settings,
)
from pykraft.core.topic_configs import SOURCE_DEFAULT_CONFIG
from pykraft.metadata.image import CONFIG_RESOURCE_TYPE_GROUP, ConfigResource
from tests.unit.test_consumer_group import Client, _coordinator, _topics

G = ConfigResource(CONFIG_RESOURCE_TYPE_GROUP, "g")
SETTINGS = KAFKA_GROUP_COORDINATOR_SETTINGS


def test_the_names_are_kafka_4_2s_group_configs() -> None:
    assert list(GROUP_CONFIGS) == [
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.auto.offset.reset",
        "share.isolation.level",
        "streams.session.timeout.ms",
        "streams.heartbeat.interval.ms",
        "streams.num.standby.replicas",
        "streams.initial.rebalance.delay.ms",
    ]


@pytest.mark.parametrize(
    ("configs", "problem"),
    [
        ({"consumer.session.timeout.ms": "50000"}, None),
        ({"consumer.heartbeat.interval.ms": "6000", "share.auto.offset.reset": "by_duration:PT1H"}, None),
        ({"share.isolation.level": "read_committed", "streams.num.standby.replicas": "2"}, None),
        ({"session.timeout.ms": "50000"}, "Unknown group config name: session.timeout.ms"),
        (
            {"consumer.session.timeout.ms": "soon"},
            "Invalid value soon for configuration consumer.session.timeout.ms: Not a number of type INT/LONG",
        ),
        (
            {"consumer.heartbeat.interval.ms": "0"},
            "Invalid value 0 for configuration consumer.heartbeat.interval.ms: Value must be at least 1",
        ),
        (
            {"consumer.heartbeat.interval.ms": "4999"},
            "consumer.heartbeat.interval.ms must be greater than or equal to "
            "group.consumer.min.heartbeat.interval.ms",
        ),
        (
            {"consumer.heartbeat.interval.ms": "15001"},
            "consumer.heartbeat.interval.ms must be less than or equal to "
            "group.consumer.max.heartbeat.interval.ms",
        ),
        (
            {"consumer.session.timeout.ms": "44999"},
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
        ),
        (
            {"consumer.session.timeout.ms": "60001"},
            "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
        ),
        (
            {"share.record.lock.duration.ms": "10000"},
            "share.record.lock.duration.ms must be greater than or equal to "
            "group.share.min.record.lock.duration.ms",
        ),
        (
            {"streams.num.standby.replicas": "3"},
            "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas",
        ),
        (
            {"share.isolation.level": "serializable"},
            "Invalid value serializable for configuration share.isolation.level: String must be one of: "
            "read_committed, read_uncommitted",
        ),
        (
            {"share.auto.offset.reset": "by_duration:-PT1H"},
            "Invalid value by_duration:-PT1H for configuration share.auto.offset.reset: Invalid value "
            "`by_duration:-PT1H` for configuration share.auto.offset.reset. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
        ),
    ],
)
def test_checks_and_kafkas_messages(configs: dict[str, str], problem: str | None) -> None:
    assert check_group_configs(configs, SETTINGS) == problem


def test_the_whole_set_is_checked_over_the_brokers_values() -> None:
    # A broker whose bounds let a heartbeat interval reach the session timeout: the pair is refused.
    settings = {**SETTINGS, "group.consumer.max.heartbeat.interval.ms": 60000}
    assert check_group_configs({"consumer.heartbeat.interval.ms": "45000"}, settings) == (
        "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
    )
    assert (
        check_group_configs(
            {"consumer.heartbeat.interval.ms": "45000", "consumer.session.timeout.ms": "50000"}, settings
        )
        is None
    )
    # The broker's own values are the defaults the set is checked with.
    config = load_config(
        DEFAULT_PROPERTIES
        + "group.consumer.session.timeout.ms=30000\ngroup.consumer.min.session.timeout.ms=6000\n"
    )
    assert group_coordinator_settings(config)["group.consumer.min.session.timeout.ms"] == 6000
    assert (
        check_group_configs({"consumer.session.timeout.ms": "6000"}, group_coordinator_settings(config))
        is None
    )
    assert check_group_configs({"consumer.session.timeout.ms": "6000"}, SETTINGS) == (
        "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"
    )


def test_describe_values_and_sources() -> None:
    described = {
        v.name: v for v in effective_group_configs({"consumer.session.timeout.ms": "50000"}, SETTINGS)
    }
    assert set(described) == set(GROUP_CONFIGS)
    own = described["consumer.session.timeout.ms"]
    assert (own.value, own.source) == ("50000", SOURCE_GROUP_CONFIG)
    default = described["consumer.heartbeat.interval.ms"]
    assert (default.value, default.source) == ("5000", SOURCE_DEFAULT_CONFIG)
    assert described["share.auto.offset.reset"].value == "latest"
    assert described["share.isolation.level"].value == "read_uncommitted"
    assert described["streams.initial.rebalance.delay.ms"].value == "3000"


def _controller() -> QuorumController:
    controller = QuorumController(rng=random.Random(1))
    controller.activate()
    return controller


def _alter(controller: QuorumController, resource: ConfigResource, *changes: tuple[str, int, str | None]):
    result = controller.alter_configs([ConfigAlteration(resource, list(changes))])
    return result.response[0], result.records


def test_controller_sets_a_groups_configs_whether_or_not_it_exists_and_deletes_them() -> None:
    controller = _controller()
    reply, records = _alter(
        controller,
        G,
        ("consumer.session.timeout.ms", AlterConfigOp.SET, "50000"),
        ("consumer.heartbeat.interval.ms", AlterConfigOp.SET, "6000"),
    )
    assert reply.error_code == ErrorCode.NONE, reply.error_message
    assert [(r.message.resource_type, r.message.name, r.message.value) for r in records] == [
        (32, "consumer.heartbeat.interval.ms", "6000"),
        (32, "consumer.session.timeout.ms", "50000"),
    ]
    assert controller.configuration_control.configs_for(G) == {
        "consumer.heartbeat.interval.ms": "6000",
        "consumer.session.timeout.ms": "50000",
    }
    # The stored heartbeat interval is part of the set the next change is checked with.
    reply, records = _alter(controller, G, ("consumer.session.timeout.ms", AlterConfigOp.SET, "6000"))
    assert (reply.error_code, reply.error_message) == (
        ErrorCode.INVALID_CONFIG,
        "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
    )
    assert records == []
    reply, records = _alter(controller, G, ("consumer.heartbeat.interval.ms", AlterConfigOp.DELETE, None))
    assert reply.error_code == ErrorCode.NONE
    assert [(r.message.name, r.message.value) for r in records] == [("consumer.heartbeat.interval.ms", None)]
    assert controller.configuration_control.configs_for(G) == {"consumer.session.timeout.ms": "50000"}


@pytest.mark.parametrize(
    ("resource", "change", "error", "message"),
    [
        (
            G,
            ("group.id", AlterConfigOp.SET, "x"),
            ErrorCode.INVALID_CONFIG,
            "Unknown group config name: group.id",
        ),
        (
            G,
            ("consumer.session.timeout.ms", AlterConfigOp.APPEND, "1"),
            ErrorCode.INVALID_CONFIG,
            "Config value append/subtract is not allowed for config key consumer.session.timeout.ms (not a list)",
        ),
        (
            ConfigResource(CONFIG_RESOURCE_TYPE_GROUP, ""),
            ("consumer.session.timeout.ms", AlterConfigOp.SET, "50000"),
            ErrorCode.INVALID_REQUEST,
            "Default group resources are not allowed.",
        ),
    ],
)
def test_controller_refusals(
    resource: ConfigResource, change: tuple[str, int, str | None], error: ErrorCode, message: str
) -> None:
    reply, records = _alter(_controller(), resource, change)
    assert (reply.error_code, reply.error_message, records) == (error, message, [])


def test_coordinator_answers_the_groups_heartbeat_interval_and_expires_on_its_session_timeout() -> None:
    c = _coordinator(heartbeat_interval_ms=5000, session_timeout_ms=45000)
    topics = _topics()
    a, b = Client(c, "a"), Client(c, "b")
    assert a.heartbeat(0, topics).heartbeat_interval_ms == 5000
    c.set_group_configs(
        {"g": {"consumer.heartbeat.interval.ms": "7000", "consumer.session.timeout.ms": "50000"}}
    )
    assert a.heartbeat(0, topics).heartbeat_interval_ms == 7000
    assert b.heartbeat(0, topics).heartbeat_interval_ms == 7000
    # Another group keeps the broker's values.
    other = c.heartbeat(
        HeartbeatRequest(
            "other", "o", 0, rebalance_timeout_ms=30000, subscribed_topic_names=("t",), topic_partitions=()
        ),
        topics,
        0,
    )
    assert (other.error_code, other.heartbeat_interval_ms) == (ErrorCode.NONE, 5000)
    # b is silent: its session is the group's 50000 ms, not the broker's 45000.
    a.heartbeat(45000, topics)
    c.tick(45000)
    assert "b" in c.groups["g"].members
    c.tick(50000)
    assert "b" not in c.groups["g"].members
