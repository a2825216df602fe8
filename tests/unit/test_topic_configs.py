"""Topic configs (issue 17): the controller's IncrementalAlterConfigs/AlterConfigs records, Kafka's
checks, the LogConfig a broker derives, LogAppendTime stamping and the KIP-937 timestamp bounds."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.broker.replica_manager import topic_log_config
from pykraft.controller.configs import AlterConfigOp, ConfigAlteration
from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replication import CreatableTopic
from pykraft.core.config import DEFAULT_PROPERTIES, load_config
from pykraft.core.errors import ErrorCode
from pykraft.core.topic_configs import (
    SOURCE_DEFAULT_CONFIG,
    SOURCE_DYNAMIC_TOPIC_CONFIG,
    SOURCE_STATIC_BROKER_CONFIG,
    TOPIC_CONFIGS,
    check_topic_config,
    effective_topic_configs,
)
from pykraft.log.partition_log import LogConfig
from pykraft.metadata.image import CONFIG_RESOURCE_TYPE_TOPIC, ConfigResource
from pykraft.protocol.records import (
    TIMESTAMP_TYPE_LOG_APPEND_TIME,
    Record,
    build_batch,
    stamp_log_append_time,
    validate_batches,
)
from tests.unit.test_controller_topics import _controller

T = ConfigResource(CONFIG_RESOURCE_TYPE_TOPIC, "t")


def _with_topic() -> QuorumController:
    controller = _controller()
    created = controller.create_topics([CreatableTopic("t", 1, 1, configs={"retention.ms": "1000"})])
    assert created.response[0].error_code == ErrorCode.NONE
    return controller


def _alter(controller: QuorumController, *changes: tuple[str, int, str | None], validate_only: bool = False):
    result = controller.alter_configs([ConfigAlteration(T, list(changes))], validate_only)
    return result.response[0], result.records


def test_incremental_operations_set_delete_append_subtract() -> None:
    controller = _with_topic()
    reply, records = _alter(
        controller,
        ("segment.bytes", AlterConfigOp.SET, "100000"),
        ("retention.ms", AlterConfigOp.DELETE, None),
        ("cleanup.policy", AlterConfigOp.APPEND, "compact"),
    )
    assert reply.error_code == ErrorCode.NONE
    assert [(r.message.name, r.message.value) for r in records] == [
        ("cleanup.policy", "delete,compact"),
        ("retention.ms", None),
        ("segment.bytes", "100000"),
    ]
    assert controller.configuration_control.configs_for(T) == {
        "cleanup.policy": "delete,compact",
        "segment.bytes": "100000",
    }
    reply, _ = _alter(controller, ("cleanup.policy", AlterConfigOp.SUBTRACT, "delete"))
    assert controller.configuration_control.configs_for(T)["cleanup.policy"] == "compact"
    # Nothing to change: no record.
    reply, records = _alter(controller, ("segment.bytes", AlterConfigOp.SET, "100000"))
    assert reply.error_code == ErrorCode.NONE and records == []


@pytest.mark.parametrize(
    ("change", "error", "text"),
    [
        (("no.such", AlterConfigOp.SET, "1"), ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such"),
        (
            ("retention.ms", AlterConfigOp.SET, "soon"),
            ErrorCode.INVALID_CONFIG,
            "Invalid value soon for configuration retention.ms",
        ),
        (("segment.index.bytes", AlterConfigOp.SET, "3"), ErrorCode.INVALID_CONFIG, "at least 4"),
        (("retention.ms", AlterConfigOp.APPEND, "5"), ErrorCode.INVALID_CONFIG, "not a list"),
        (
            ("message.timestamp.type", AlterConfigOp.SET, "Now"),
            ErrorCode.INVALID_CONFIG,
            "CreateTime, LogAppendTime",
        ),
        (("compression.zstd.level", AlterConfigOp.SET, "23"), ErrorCode.INVALID_CONFIG, "no more than 22"),
        (("remote.storage.enable", AlterConfigOp.SET, "true"), ErrorCode.INVALID_CONFIG, "tiered storage"),
        (("retention.ms", 9, "5"), ErrorCode.INVALID_REQUEST, "Unknown config operation 9"),
    ],
)
def test_a_bad_change_refuses_the_whole_resource(
    change: tuple[str, int, str], error: ErrorCode, text: str
) -> None:
    controller = _with_topic()
    reply, records = _alter(controller, ("segment.bytes", AlterConfigOp.SET, "100000"), change)
    assert reply.error_code == error and text in (reply.error_message or "")
    assert records == [] and controller.configuration_control.configs_for(T) == {"retention.ms": "1000"}


def test_validate_only_unknown_topics_duplicates_and_broker_resources() -> None:
    controller = _with_topic()
    reply, records = _alter(controller, ("segment.bytes", AlterConfigOp.SET, "100000"), validate_only=True)
    assert reply.error_code == ErrorCode.NONE and records == []
    missing = controller.alter_configs(
        [ConfigAlteration(ConfigResource(CONFIG_RESOURCE_TYPE_TOPIC, "nope"), [("retention.ms", 0, "1")])]
    )
    assert missing.response[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    reply, _ = _alter(controller, ("retention.ms", 0, "1"), ("retention.ms", 0, "2"))
    assert reply.error_code == ErrorCode.INVALID_REQUEST


def test_dynamic_broker_configs_for_one_broker_or_all_of_them() -> None:
    controller = _with_topic()

    def alter(name: str, *changes: tuple[str, int, str | None], validate_only: bool = False):
        result = controller.alter_configs(
            [ConfigAlteration(ConfigResource(4, name), list(changes))], validate_only
        )
        return result.response[0], result.records  # the controller replays what it generates

    reply, records = alter("1", ("log.retention.ms", AlterConfigOp.SET, "1000"))
    assert reply.error_code == ErrorCode.NONE and len(records) == 1
    reply, _ = alter("", ("log.cleanup.policy", AlterConfigOp.APPEND, "compact"))
    assert reply.error_code == ErrorCode.NONE
    configs = controller.configuration_control
    assert configs.configs_for(ConfigResource(4, "1")) == {"log.retention.ms": "1000"}
    assert configs.configs_for(ConfigResource(4, "")) == {"log.cleanup.policy": "delete,compact"}
    # Not dynamic (Kafka: INVALID_REQUEST), a bad value (INVALID_CONFIG), a name that is no broker id.
    reply, _ = alter("1", ("num.partitions", AlterConfigOp.SET, "3"))
    assert reply.error_code == ErrorCode.INVALID_REQUEST
    assert reply.error_message == "Cannot update these configs dynamically: num.partitions"
    reply, _ = alter("1", ("message.max.bytes", AlterConfigOp.SET, "lots"))
    assert reply.error_code == ErrorCode.INVALID_CONFIG and "message.max.bytes" in (reply.error_message or "")
    reply, _ = alter("broker-one", ("log.retention.ms", AlterConfigOp.SET, "1"))
    assert reply.error_code == ErrorCode.INVALID_REQUEST
    reply, records = alter("1", ("log.retention.ms", AlterConfigOp.DELETE, None), validate_only=True)
    assert reply.error_code == ErrorCode.NONE and records == []
    # Clearing a config that is not set is fine even where pykraft would refuse setting it, as in Kafka
    # (kafka-reassign-partitions --verify clears the throttle rates on every broker).
    reply, records = alter(
        "1",
        ("leader.replication.throttled.rate", AlterConfigOp.DELETE, None),
        ("follower.replication.throttled.rate", AlterConfigOp.DELETE, None),
    )
    assert reply.error_code == ErrorCode.NONE and records == []
    # The broker's view: per broker over the cluster default over server.properties.
    config = load_config(DEFAULT_PROPERTIES)
    effective = effective_topic_configs(
        {}, config, configs.configs_for(ConfigResource(4, "")), configs.configs_for(ConfigResource(4, "1"))
    )
    assert (effective["retention.ms"].value, effective["retention.ms"].source) == ("1000", 2)
    assert (effective["cleanup.policy"].value, effective["cleanup.policy"].source) == ("delete,compact", 3)
    log_config = topic_log_config(LogConfig(), {"retention.ms": "1000", "cleanup.policy": "delete,compact"})
    assert log_config.retention_ms == 1000 and log_config.cleanup_policy_compact


def test_alter_configs_replaces_the_set_and_replays_the_same_on_a_follower() -> None:
    controller = _controller()
    created = controller.create_topics([CreatableTopic("t", 1, 1, configs={"retention.ms": "1000"})])
    result = controller.alter_configs(
        [ConfigAlteration(T, [("segment.bytes", AlterConfigOp.SET, "50000")], replace_all=True)]
    )
    assert result.response[0].error_code == ErrorCode.NONE
    assert controller.configuration_control.configs_for(T) == {"segment.bytes": "50000"}
    # Replaying the records is the only mutation: a follower that replays them has the same configs.
    follower = QuorumController(rng=random.Random(9))
    for offset, record in enumerate([*created.records, *result.records]):
        follower.replay(record.message, offset)
    assert follower.configuration_control.configs() == controller.configuration_control.configs()


def test_create_topics_checks_configs_as_kafka_does() -> None:
    controller = _controller()
    result = controller.create_topics([CreatableTopic("bad", 1, 1, configs={"max.message.bytes": "-5"})])
    reply = result.response[0]
    assert reply.error_code == ErrorCode.INVALID_CONFIG and "max.message.bytes" in (reply.error_message or "")
    assert result.records == []


def test_effective_values_come_from_the_topic_the_broker_or_the_default() -> None:
    config = load_config(DEFAULT_PROPERTIES, {"log.retention.ms": "5000"})
    effective = effective_topic_configs({"segment.bytes": "100000"}, config)
    assert (effective["segment.bytes"].value, effective["segment.bytes"].source) == (
        "100000",
        SOURCE_DYNAMIC_TOPIC_CONFIG,
    )
    assert (effective["retention.ms"].value, effective["retention.ms"].source) == (
        "5000",
        SOURCE_STATIC_BROKER_CONFIG,
    )
    assert (effective["cleanup.policy"].value, effective["cleanup.policy"].source) == (
        "delete",
        SOURCE_DEFAULT_CONFIG,
    )
    assert set(effective) == set(TOPIC_CONFIGS)
    for definition in TOPIC_CONFIGS.values():  # every default passes its own check
        assert check_topic_config(definition.name, definition.default) is None, definition.name


def test_the_log_config_of_a_topic() -> None:
    base = LogConfig(segment_bytes=1 << 30, max_message_bytes=1048588)
    derived = topic_log_config(
        base,
        {
            "segment.bytes": "100000",
            "max.message.bytes": "2000",
            "message.timestamp.type": "LogAppendTime",
            "cleanup.policy": "delete",
        },
    )
    assert (derived.segment_bytes, derived.max_message_bytes, derived.message_timestamp_log_append_time) == (
        100000,
        2000,
        True,
    )
    assert topic_log_config(base, {}) is base
    assert topic_log_config(base, {"segment.bytes": "x"}) == base  # never a crash on a bad stored value


@given(st.lists(st.binary(max_size=40), min_size=1, max_size=5), st.integers(0, 2**40))
def test_log_append_time_stamps_max_timestamp_and_keeps_the_crc_valid(
    values: list[bytes], now_ms: int
) -> None:
    batch = build_batch([Record(None, v) for v in values], timestamp_ms=1000)
    records = bytes(batch) * 2
    headers = validate_batches(memoryview(records))
    stamped, new_headers = stamp_log_append_time(records, headers, now_ms)
    again = validate_batches(memoryview(stamped))  # CRCs check
    assert again == new_headers
    assert all(
        h.timestamp_type == TIMESTAMP_TYPE_LOG_APPEND_TIME and h.max_timestamp == now_ms for h in again
    )
    assert [h.base_timestamp for h in again] == [h.base_timestamp for h in headers]


def test_kip_937_timestamps_outside_the_topics_bounds_are_refused() -> None:
    from tests.unit.test_log_transactions import manager
    from tests.unit.test_producer_snapshot import MemoryOpener

    replicas = manager(MemoryOpener())
    replicas.topic_log_config = lambda _topic: LogConfig(
        message_timestamp_before_max_ms=60_000, message_timestamp_after_max_ms=1_000
    )
    part = replicas.ensure_partition("t", 0, 0)
    now = 10_000_000

    def append(timestamp_ms: int) -> ErrorCode:
        batch = build_batch([Record(None, b"v")], timestamp_ms=timestamp_ms)
        return replicas.append(part, memoryview(batch), now).error_code

    assert append(now - 60_000) == ErrorCode.NONE
    assert append(now + 1_000) == ErrorCode.NONE
    assert append(now - 60_001) == ErrorCode.INVALID_TIMESTAMP
    assert append(now + 1_001) == ErrorCode.INVALID_TIMESTAMP
    assert part.log.log_end_offset == 2  # the refused batches left nothing


def test_add_config_takes_kafka_configs_syntax() -> None:
    from pykraft.cli.configs import parse_add_config
    from pykraft.io.kafka_connection import BrokerConnectionError

    assert parse_add_config("a=1,b=[x,y],c=") == {"a": "1", "b": "x,y", "c": ""}
    for bad in ("novalue", "a=[x,y", "a=[x]y"):
        with pytest.raises(BrokerConnectionError):
            parse_add_config(bad)


def test_segment_ms_rolls_when_a_segment_spans_that_much_time_even_after_reopening() -> None:
    from pykraft.log.partition_log import PartitionLog
    from pykraft.log.store import MemorySegmentStore

    store = MemorySegmentStore()
    config = LogConfig(segment_ms=1000)
    log = PartitionLog.open(store, config)

    def append(timestamp_ms: int) -> None:
        batch = build_batch([Record(None, b"v")], timestamp_ms=timestamp_ms)
        log.append(batch, validate_batches(memoryview(batch)))

    for timestamp in (10_000, 10_500, 11_000):  # 1000 ms after the first batch: not yet more
        append(timestamp)
    assert len(log.segments) == 1
    append(11_001)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.close()
    log = PartitionLog.open(store, config)  # the first batch's timestamp comes back from the headers
    append(12_001)
    assert [s.base_offset for s in log.segments] == [0, 3]
    append(12_002)
    assert [s.base_offset for s in log.segments] == [0, 3, 5]
