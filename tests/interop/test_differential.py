"""Differential tests (issue 33 item 5): every request sequence below goes to Apache Kafka 4.3 (one KRaft
node in combined mode, bench.kafka_peer, started once for the module) and to pykraft (one in-process
node), through the same raw client at explicit API versions both serve. The responses, decoded by
pykraft's codecs and normalised by tests/interop/differential.py's one normaliser, must be equal field
by field, except for the deliberate differences listed in docs/differences.md."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from bench.kafka_peer import running_kafka_cluster

from pykraft.protocol.messages import ApiKey
from pykraft.protocol.records import CRC_OFFSET, MAGIC_OFFSET, Record, build_batch
from pykraft.testing import running_node
from tests.interop.differential import Broker, deliberate_differences, differences, normalise
from tests.raw_client import RawClient

# Record timestamps of the batches: fixed, so that both brokers store the same bytes.
TIMESTAMP_MS = 1_700_000_000_000
# Resource types of DescribeConfigs / AlterConfigs (ConfigResource.Type): TOPIC, BROKER, BROKER_LOGGER.
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8

# The API versions every sequence uses: within both brokers' ranges (checked by
# test_every_version_used_is_served_by_both).
V = {
    ApiKey.PRODUCE: 9,
    ApiKey.FETCH: 12,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.METADATA: 12,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 6,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.ALTER_CONFIGS: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.DESCRIBE_CLUSTER: 1,
    ApiKey.LIST_GROUPS: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.OFFSET_FETCH: 8,
    ApiKey.DELETE_RECORDS: 2,
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.END_TXN: 3,
    ApiKey.JOIN_GROUP: 7,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.HEARTBEAT: 4,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.FIND_COORDINATOR: 4,
    ApiKey.API_VERSIONS: 3,
}

# ApiVersions v3+ names the client (Kafka answers INVALID_REQUEST to an empty name).
CLIENT_SOFTWARE = {"client_software_name": "pykraft-differential", "client_software_version": "1"}

SEQUENCES: dict[str, Callable[[Broker], None]] = {}


def sequence(run: Callable[[Broker], None]) -> Callable[[Broker], None]:
    SEQUENCES[run.__name__] = run
    return run


# --- request helpers ---------------------------------------------------------------------------------


COORDINATOR_LOAD_IN_PROGRESS = 14


def _loading(answer: object) -> bool:
    """Whether any error code in ``answer`` is COORDINATOR_LOAD_IN_PROGRESS."""
    if isinstance(answer, dict):
        return any(
            (key.endswith("error_code") and value == COORDINATOR_LOAD_IN_PROGRESS) or _loading(value)
            for key, value in answer.items()
        )
    return isinstance(answer, list) and any(_loading(item) for item in answer)


def call(b: Broker, label: str, api_key: ApiKey, fields: dict, *, record: bool = True, **kwargs) -> dict:  # type: ignore[no-untyped-def, type-arg]
    """The request at V's version. A fresh Kafka loads each partition of __transaction_state and
    __consumer_offsets on its own after creating them, answering the retriable
    COORDINATOR_LOAD_IN_PROGRESS until then: a start-up state, retried (unrecorded) as clients do."""
    deadline = time.monotonic() + 30
    while _loading(answer := b.call(label, api_key, V[api_key], fields, record=False, **kwargs)):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if record:
        b.note(label, answer)
    return answer


def create_topic(
    b: Broker,
    name: str,
    *,
    partitions: int = 1,
    replication_factor: int = 1,
    configs: dict[str, str] | None = None,
    validate_only: bool = False,
    label: str = "create",
) -> dict:  # type: ignore[type-arg]
    topic = {
        "name": name,
        "num_partitions": partitions,
        "replication_factor": replication_factor,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
    }
    response = call(
        b,
        label,
        ApiKey.CREATE_TOPICS,
        {"topics": [topic], "timeout_ms": 30000, "validate_only": validate_only},
    )
    if not validate_only and response["topics"][0]["error_code"] == 0:
        wait_for_leaders(b, name, partitions)
    return response


def wait_for_leaders(b: Broker, topic: str, partitions: int) -> None:
    """Until the broker's metadata has a leader for every partition of a topic just created (Kafka's
    CreateTopics answers when the controller committed it, before the broker has applied it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        response = metadata(b, [topic], record=False)
        parts = response["topics"][0]["partitions"] if response["topics"] else []
        if len(parts) == partitions and all(p["leader_id"] >= 0 and p["error_code"] == 0 for p in parts):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{b.name}: topic {topic} has no leaders")


def metadata(
    b: Broker,
    topics: list[str] | None,
    *,
    auto_create: bool = False,
    record: bool = True,
    label: str = "metadata",
) -> dict:  # type: ignore[type-arg]
    fields = {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": auto_create,
        "include_topic_authorized_operations": False,
    }
    return call(b, label, ApiKey.METADATA, fields, record=record)


def batch(
    count: int = 1,
    *,
    value_size: int = 8,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    records = [
        Record(key=f"k{i}".encode(), value=bytes([65 + i % 26]) * value_size, timestamp=TIMESTAMP_MS + i)
        for i in range(count)
    ]
    return bytes(
        build_batch(
            records,
            timestamp_ms=TIMESTAMP_MS,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            is_transactional=transactional,
        )
    )


def produce_fields(topic: str, records: bytes, *, acks: int = -1, partition: int = 0) -> dict:  # type: ignore[type-arg]
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def produce(b: Broker, label: str, topic: str, records: bytes, *, acks: int = -1, partition: int = 0) -> dict:  # type: ignore[type-arg]
    return call(b, label, ApiKey.PRODUCE, produce_fields(topic, records, acks=acks, partition=partition))


def fetch(
    b: Broker, label: str, topic: str, offset: int, *, max_bytes: int = 1 << 20, partition: int = 0
) -> dict:  # type: ignore[type-arg]
    fields = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    return call(b, label, ApiKey.FETCH, fields)


def list_offsets(
    b: Broker, label: str, topic: str, timestamp: int, *, partition: int = 0, via: RawClient | None = None
) -> dict:  # type: ignore[type-arg]
    fields = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}
                ],
            }
        ],
    }
    return call(b, label, ApiKey.LIST_OFFSETS, fields, via=via)


def describe_configs(b: Broker, label: str, resource_type: int, name: str, keys: list[str] | None) -> dict:  # type: ignore[type-arg]
    fields = {
        "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    return call(b, label, ApiKey.DESCRIBE_CONFIGS, fields)


def describe_configs_once_applied(
    b: Broker, label: str, topic: str, keys: list[str], expected: dict[str, str]
) -> dict:  # type: ignore[type-arg]
    """DescribeConfigs once the broker shows the ``expected`` values: Kafka's AlterConfigs answers when the
    controller committed the change, and the broker describes from its own metadata image, a moment later."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = describe_configs(b, label, TOPIC, topic, keys)
        shown = {c["name"]: c["value"] for c in answer["results"][0]["configs"]}
        if all(shown.get(k) == v for k, v in expected.items()):
            break
        b.steps.pop()
        time.sleep(0.05)
    return answer


def incremental_alter(b: Broker, label: str, topic: str, configs: list[tuple[str, int, str | None]]) -> dict:  # type: ignore[type-arg]
    fields = {
        "resources": [
            {
                "resource_type": TOPIC,
                "resource_name": topic,
                "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in configs],
            }
        ],
        "validate_only": False,
    }
    return call(b, label, ApiKey.INCREMENTAL_ALTER_CONFIGS, fields)


def alter_configs(b: Broker, label: str, topic: str, configs: dict[str, str]) -> dict:  # type: ignore[type-arg]
    fields = {
        "resources": [
            {
                "resource_type": TOPIC,
                "resource_name": topic,
                "configs": [{"name": n, "value": v} for n, v in configs.items()],
            }
        ],
        "validate_only": False,
    }
    return call(b, label, ApiKey.ALTER_CONFIGS, fields)


def init_producer_id(b: Broker, label: str, transactional_id: str | None = None) -> dict:  # type: ignore[type-arg]
    fields = {
        "transactional_id": transactional_id,
        "transaction_timeout_ms": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    return call(b, label, ApiKey.INIT_PRODUCER_ID, fields)


def join_group(b: Broker, label: str, group: str, member_id: str = "", **kwargs) -> dict:  # type: ignore[no-untyped-def, type-arg]
    fields = {
        "group_id": group,
        "session_timeout_ms": 30000,
        "rebalance_timeout_ms": 30000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x01"}],
    }
    return call(b, label, ApiKey.JOIN_GROUP, fields, **kwargs)


def joined_member(b: Broker, group: str) -> tuple[str, int]:
    """A member that joined (and synced) ``group`` alone: its member id and generation."""
    first = join_group(b, "join (member id required)", group)
    member_id = first["member_id"]
    joined = join_group(b, "join", group, member_id)
    sync = {
        "group_id": group,
        "generation_id": joined["generation_id"],
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": member_id, "assignment": b"\x00\x01"}],
    }
    call(b, "sync", ApiKey.SYNC_GROUP, sync)
    return member_id, joined["generation_id"]


def heartbeat(b: Broker, label: str, group: str, generation: int, member_id: str) -> dict:  # type: ignore[type-arg]
    fields = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
    }
    return call(b, label, ApiKey.HEARTBEAT, fields)


# --- admin sequences ---------------------------------------------------------------------------------


@sequence
def create_topics_ok(b: Broker) -> None:
    create_topic(b, "ct-ok", partitions=3)
    metadata(b, ["ct-ok"])


@sequence
def create_topics_validate_only(b: Broker) -> None:
    create_topic(b, "ct-validate", partitions=2, validate_only=True)
    metadata(b, ["ct-validate"])


@sequence
def create_topics_invalid_config_value(b: Broker) -> None:
    create_topic(b, "ct-bad-value", configs={"cleanup.policy": "sometimes"})


@sequence
def create_topics_unknown_config_key(b: Broker) -> None:
    create_topic(b, "ct-bad-key", configs={"no.such.config": "1"})


@sequence
def create_topics_bad_replication_factor(b: Broker) -> None:
    create_topic(b, "ct-rf3", replication_factor=3)


@sequence
def create_topics_zero_partitions(b: Broker) -> None:
    create_topic(b, "ct-zero", partitions=0)


@sequence
def create_topics_duplicate(b: Broker) -> None:
    create_topic(b, "ct-dup")
    create_topic(b, "ct-dup", label="create again")


@sequence
def create_topics_invalid_name(b: Broker) -> None:
    create_topic(b, "bad/name")


@sequence
def create_topics_name_too_long(b: Broker) -> None:
    create_topic(b, "t" * 250)


@sequence
def create_topics_same_name_twice_in_one_request(b: Broker) -> None:
    topic = {
        "name": "ct-twice",
        "num_partitions": 1,
        "replication_factor": 1,
        "assignments": [],
        "configs": [],
    }
    call(b, "create", ApiKey.CREATE_TOPICS, {"topics": [topic, topic], "timeout_ms": 30000})


@sequence
def delete_topics_unknown_name(b: Broker) -> None:
    call(
        b,
        "delete",
        ApiKey.DELETE_TOPICS,
        {"topics": [{"name": "no-such-topic", "topic_id": None}], "timeout_ms": 30000},
    )


@sequence
def delete_topics_unknown_id(b: Broker) -> None:
    fields = {
        "topics": [{"name": None, "topic_id": "c0ffee00-0000-4000-8000-000000000001"}],
        "timeout_ms": 30000,
    }
    call(b, "delete", ApiKey.DELETE_TOPICS, fields)


@sequence
def create_partitions_decrease(b: Broker) -> None:
    create_topic(b, "cp-down", partitions=3)
    fields = {
        "topics": [{"name": "cp-down", "count": 2, "assignments": None}],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    call(b, "create partitions", ApiKey.CREATE_PARTITIONS, fields)


@sequence
def create_partitions_unknown_topic(b: Broker) -> None:
    fields = {
        "topics": [{"name": "cp-none", "count": 2, "assignments": None}],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    call(b, "create partitions", ApiKey.CREATE_PARTITIONS, fields)


@sequence
def create_partitions_increase(b: Broker) -> None:
    create_topic(b, "cp-up")
    fields = {
        "topics": [{"name": "cp-up", "count": 3, "assignments": None}],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    call(b, "create partitions", ApiKey.CREATE_PARTITIONS, fields)
    wait_for_leaders(b, "cp-up", 3)
    metadata(b, ["cp-up"])


@sequence
def describe_configs_topic_keys(b: Broker) -> None:
    create_topic(b, "dc-topic", configs={"retention.ms": "3600000"})
    describe_configs(
        b, "describe", TOPIC, "dc-topic", ["retention.ms", "cleanup.policy", "max.message.bytes"]
    )


@sequence
def describe_configs_unknown_topic(b: Broker) -> None:
    describe_configs(b, "describe", TOPIC, "dc-none", ["retention.ms"])


@sequence
def describe_configs_unknown_key(b: Broker) -> None:
    create_topic(b, "dc-key")
    describe_configs(b, "describe", TOPIC, "dc-key", ["no.such.config"])


@sequence
def describe_configs_broker_key(b: Broker) -> None:
    describe_configs(
        b, "describe", BROKER, "1", ["num.partitions", "log.retention.hours", "log.retention.ms"]
    )


@sequence
def incremental_alter_configs_valid(b: Broker) -> None:
    create_topic(b, "iac-ok")
    incremental_alter(
        b, "alter", "iac-ok", [("retention.ms", 0, "7200000"), ("cleanup.policy", 0, "compact")]
    )
    keys = ["retention.ms", "cleanup.policy"]
    describe_configs_once_applied(b, "describe", "iac-ok", keys, {"retention.ms": "7200000"})
    incremental_alter(b, "delete", "iac-ok", [("retention.ms", 1, None)])
    describe_configs_once_applied(b, "describe again", "iac-ok", keys, {"retention.ms": "604800000"})


@sequence
def incremental_alter_configs_invalid_value(b: Broker) -> None:
    create_topic(b, "iac-bad")
    incremental_alter(b, "alter", "iac-bad", [("retention.ms", 0, "soon")])


@sequence
def incremental_alter_configs_unknown_key(b: Broker) -> None:
    create_topic(b, "iac-key")
    incremental_alter(b, "alter", "iac-key", [("no.such.config", 0, "1")])


@sequence
def incremental_alter_configs_unknown_topic(b: Broker) -> None:
    incremental_alter(b, "alter", "iac-none", [("retention.ms", 0, "1000")])


@sequence
def alter_configs_valid(b: Broker) -> None:
    create_topic(b, "ac-ok", configs={"retention.ms": "1000"})
    alter_configs(b, "alter", "ac-ok", {"segment.bytes": "1048576"})
    keys = ["segment.bytes", "retention.ms"]
    describe_configs_once_applied(b, "describe", "ac-ok", keys, {"segment.bytes": "1048576"})


@sequence
def alter_configs_invalid_value(b: Broker) -> None:
    create_topic(b, "ac-bad")
    alter_configs(b, "alter", "ac-bad", {"min.insync.replicas": "none"})


@sequence
def alter_configs_unknown_key(b: Broker) -> None:
    create_topic(b, "ac-key")
    alter_configs(b, "alter", "ac-key", {"no.such.config": "1"})


@sequence
def describe_configs_broker_logger(b: Broker) -> None:
    describe_configs(b, "describe", BROKER_LOGGER, "1", ["kafka.server.ReplicaManager"])
    describe_configs(b, "describe unknown broker", BROKER_LOGGER, "7", None)


@sequence
def describe_cluster(b: Broker) -> None:
    call(
        b,
        "describe cluster",
        ApiKey.DESCRIBE_CLUSTER,
        {"include_cluster_authorized_operations": False, "endpoint_type": 1},
    )


@sequence
def list_groups_dead_filter(b: Broker) -> None:
    call(b, "list groups", ApiKey.LIST_GROUPS, {"states_filter": ["Dead"]})


@sequence
def describe_groups_unknown(b: Broker) -> None:
    fields = {"groups": ["dg-none"], "include_authorized_operations": False}
    call(b, "describe", ApiKey.DESCRIBE_GROUPS, fields)
    # v6 (KIP-1043): an unknown group is GROUP_ID_NOT_FOUND with a message, not a Dead group.
    b.call("describe v6", ApiKey.DESCRIBE_GROUPS, 6, fields)


@sequence
def delete_groups_unknown(b: Broker) -> None:
    call(b, "delete", ApiKey.DELETE_GROUPS, {"groups_names": ["del-none"]})


@sequence
def offset_fetch_unknown_group(b: Broker) -> None:
    create_topic(b, "of-topic")
    groups = [{"group_id": "of-none", "topics": [{"name": "of-topic", "partition_indexes": [0]}]}]
    call(b, "offset fetch", ApiKey.OFFSET_FETCH, {"groups": groups, "require_stable": True})
    all_groups = [{"group_id": "of-none", "topics": None}]
    call(b, "offset fetch all", ApiKey.OFFSET_FETCH, {"groups": all_groups, "require_stable": True})


@sequence
def list_offsets_special_timestamps(b: Broker) -> None:
    create_topic(b, "lo-topic")
    produce(b, "produce", "lo-topic", batch(3))
    produce(b, "produce more", "lo-topic", batch(2))
    for timestamp in (-1, -2, -3):
        list_offsets(b, f"list offsets {timestamp}", "lo-topic", timestamp)
    list_offsets(b, "list offsets by time", "lo-topic", TIMESTAMP_MS + 1)
    list_offsets(b, "list offsets after the last", "lo-topic", TIMESTAMP_MS + 100)


@sequence
def list_offsets_v11_local_and_tiered(b: Broker) -> None:
    """v8-v11 (KIP-405, KIP-1005, KIP-1075, KIP-1023): the earliest local offset (-4), the latest
    tiered one (-5) and the earliest pending upload (-6) of a log without tiered storage, beside the
    others, with v10's timeout."""
    create_topic(b, "lo-v10")
    produce(b, "produce", "lo-v10", batch(3))
    for timestamp in (-1, -2, -3, -4, -5, -6):
        fields = {
            "replica_id": -1,
            "isolation_level": 0,
            "timeout_ms": 1000,
            "topics": [
                {
                    "name": "lo-v10",
                    "partitions": [
                        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}
                    ],
                }
            ],
        }
        b.call(f"list offsets v11 {timestamp}", ApiKey.LIST_OFFSETS, 11, fields)


@sequence
def metadata_v13(b: Broker) -> None:
    """v13 adds a top-level error code (KIP-1102)."""
    create_topic(b, "md-v13")
    fields = {
        "topics": [{"name": "md-v13"}, {"name": "md-v13-none"}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    b.call("metadata v13", ApiKey.METADATA, 13, fields)


@sequence
def list_offsets_unknown_partition(b: Broker) -> None:
    create_topic(b, "lo-parts")
    list_offsets(b, "list offsets", "lo-parts", -1, partition=5)
    list_offsets(b, "list offsets unknown topic", "lo-none", -1)


@sequence
def delete_records_beyond_high_watermark(b: Broker) -> None:
    create_topic(b, "dr-topic")
    produce(b, "produce", "dr-topic", batch(3))
    for label, offset in (("beyond", 10), ("to hw", -1), ("below start", 1)):
        fields = {
            "topics": [{"name": "dr-topic", "partitions": [{"partition_index": 0, "offset": offset}]}],
            "timeout_ms": 30000,
        }
        call(b, f"delete records {label}", ApiKey.DELETE_RECORDS, fields)


@sequence
def api_versions_unsupported_version(b: Broker) -> None:
    # a client newer than the broker: Kafka answers v0 with UNSUPPORTED_VERSION and its own range (KIP-511)
    body = b"\x15pykraft-differential\x021\x00"  # compact strings and no tagged fields, as v3+
    b.call_beyond_schema("api versions v127", ApiKey.API_VERSIONS, 127, body, answer_version=0)


@sequence
def metadata_unknown_topic(b: Broker) -> None:
    metadata(b, ["md-none"], label="metadata without auto-create")
    metadata(b, ["md-none"], label="metadata again")


@sequence
def metadata_auto_create(b: Broker) -> None:
    metadata(b, ["md-auto"], auto_create=True, label="metadata with auto-create")
    wait_for_leaders(b, "md-auto", 1)
    metadata(b, ["md-auto"], label="metadata after")


@sequence
def metadata_invalid_topic_name_auto_create(b: Broker) -> None:
    metadata(b, ["bad name!"], auto_create=True)


@sequence
def find_coordinator_group(b: Broker) -> None:
    call(b, "find coordinator", ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": ["fc-group"]})


# --- produce / fetch edge cases ----------------------------------------------------------------------


@sequence
def produce_acks_zero(b: Broker) -> None:
    create_topic(b, "p-acks0")
    client = b.connect()
    b.send_only(ApiKey.PRODUCE, V[ApiKey.PRODUCE], produce_fields("p-acks0", batch(2), acks=0), client)
    # the next response on the same connection is the next request's (acks=0 got none), and a broker
    # handles one connection's requests in order (Kafka mutes a channel while one is in flight)
    list_offsets(b, "list offsets on the same connection", "p-acks0", -1, via=client)


@sequence
def produce_acks_one_and_all(b: Broker) -> None:
    create_topic(b, "p-acks")
    produce(b, "acks=1", "p-acks", batch(2), acks=1)
    produce(b, "acks=-1", "p-acks", batch(3), acks=-1)


@sequence
def produce_invalid_acks(b: Broker) -> None:
    create_topic(b, "p-acks2")
    produce(b, "acks=2", "p-acks2", batch(1), acks=2)


@sequence
def produce_empty_records(b: Broker) -> None:
    create_topic(b, "p-empty")
    produce(b, "produce", "p-empty", b"")


@sequence
def produce_oversized_batch(b: Broker) -> None:
    create_topic(b, "p-big", configs={"max.message.bytes": "1000"})
    produce(b, "produce", "p-big", batch(1, value_size=2000))
    produce(b, "produce fits", "p-big", batch(1, value_size=100))


@sequence
def produce_crc_corrupted(b: Broker) -> None:
    create_topic(b, "p-crc")
    records = bytearray(batch(2))
    records[CRC_OFFSET] ^= 0xFF
    produce(b, "produce", "p-crc", bytes(records))


@sequence
def produce_wrong_magic(b: Broker) -> None:
    create_topic(b, "p-magic")
    records = bytearray(batch(1))
    records[MAGIC_OFFSET] = 1
    produce(b, "produce", "p-magic", bytes(records))


@sequence
def produce_unknown_topic(b: Broker) -> None:
    produce(b, "produce", "p-none", batch(1))
    metadata(b, ["p-none"], label="metadata after")


@sequence
def produce_two_batches_in_one_partition(b: Broker) -> None:
    create_topic(b, "p-two")
    produce(b, "produce", "p-two", batch(1) + batch(2))


@sequence
def produce_unknown_partition(b: Broker) -> None:
    create_topic(b, "p-part")
    produce(b, "produce", "p-part", batch(1), partition=3)


@sequence
def idempotent_out_of_order_sequence(b: Broker) -> None:
    create_topic(b, "i-order")
    pid = init_producer_id(b, "init producer id")["producer_id"]
    produce(b, "seq 0", "i-order", batch(2, producer_id=pid, producer_epoch=0, base_sequence=0))
    produce(b, "seq 5 (gap)", "i-order", batch(1, producer_id=pid, producer_epoch=0, base_sequence=5))
    produce(
        b, "seq 0 again (duplicate)", "i-order", batch(2, producer_id=pid, producer_epoch=0, base_sequence=0)
    )
    produce(b, "seq 2", "i-order", batch(1, producer_id=pid, producer_epoch=0, base_sequence=2))


@sequence
def idempotent_unknown_producer(b: Broker) -> None:
    create_topic(b, "i-unknown")
    produce(
        b, "unknown pid, seq 3", "i-unknown", batch(1, producer_id=987654, producer_epoch=0, base_sequence=3)
    )
    produce(
        b, "unknown pid, seq 0", "i-unknown", batch(1, producer_id=987654, producer_epoch=0, base_sequence=0)
    )


@sequence
def idempotent_fenced_epoch(b: Broker) -> None:
    create_topic(b, "i-epoch")
    pid = init_producer_id(b, "init producer id")["producer_id"]
    produce(b, "epoch 3", "i-epoch", batch(1, producer_id=pid, producer_epoch=3, base_sequence=0))
    produce(b, "epoch 2 (old)", "i-epoch", batch(1, producer_id=pid, producer_epoch=2, base_sequence=1))
    produce(b, "epoch 4, seq 1", "i-epoch", batch(1, producer_id=pid, producer_epoch=4, base_sequence=1))


@sequence
def fetch_records(b: Broker) -> None:
    create_topic(b, "f-topic")
    produce(b, "produce", "f-topic", batch(3))
    produce(b, "produce more", "f-topic", batch(2))
    fetch(b, "fetch from 0", "f-topic", 0)
    fetch(b, "fetch from 3", "f-topic", 3)
    fetch(b, "fetch at the end", "f-topic", 5)


@sequence
def fetch_offset_out_of_range(b: Broker) -> None:
    create_topic(b, "f-range")
    produce(b, "produce", "f-range", batch(2))
    fetch(b, "fetch beyond", "f-range", 50)
    fetch(b, "fetch negative", "f-range", -5)


@sequence
def fetch_max_bytes_smaller_than_batch(b: Broker) -> None:
    create_topic(b, "f-small")
    produce(b, "produce", "f-small", batch(4, value_size=200))
    produce(b, "produce more", "f-small", batch(4, value_size=200))
    fetch(b, "fetch 10 bytes", "f-small", 0, max_bytes=10)


@sequence
def fetch_unknown_topic(b: Broker) -> None:
    fetch(b, "fetch", "f-none", 0)


def fetch_by_id_fields(topic_ids: list[str], offset: int = 0) -> dict:  # type: ignore[type-arg]
    """A consumer's Fetch naming its topics by id (v13+, KIP-516), partition 0 of each."""
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
            for topic_id in topic_ids
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


@sequence
def fetch_by_topic_id(b: Broker) -> None:
    """Fetch v13-v17 by topic id: the records, the id echoed; with an unknown id beside a known one,
    that one answered UNKNOWN_TOPIC_ID and the other read as usual."""
    created = create_topic(b, "f-by-id")
    topic_id = created["topics"][0]["topic_id"]
    produce(b, "produce", "f-by-id", batch(3))
    for version in (13, 15, 16, 17, 18):
        b.call(f"fetch v{version}", ApiKey.FETCH, version, fetch_by_id_fields([topic_id]))
    unknown = "c0ffee00-0000-4000-8000-000000000003"
    b.call("fetch v17, known and unknown", ApiKey.FETCH, 17, fetch_by_id_fields([unknown, topic_id], 1))
    # A topic deleted and created again under its name has a new id: the old id is unknown.
    deleted = {"topics": [{"name": "f-by-id", "topic_id": None}], "timeout_ms": 30000}
    call(b, "delete", ApiKey.DELETE_TOPICS, deleted)
    create_topic(b, "f-by-id", label="create again")
    b.call("fetch v17, the old id", ApiKey.FETCH, 17, fetch_by_id_fields([topic_id]))


@sequence
def fetch_unknown_topic_id(b: Broker) -> None:
    fields = fetch_by_id_fields(["c0ffee00-0000-4000-8000-000000000002"])
    b.call("fetch v13", ApiKey.FETCH, 13, fields)


@sequence
def fetch_unknown_partition(b: Broker) -> None:
    create_topic(b, "f-part")
    fetch(b, "fetch", "f-part", 0, partition=4)


# --- group and transaction error paths ---------------------------------------------------------------


@sequence
def join_group_unknown_member(b: Broker) -> None:
    join_group(b, "join as an unknown member", "jg-unknown", "raw-test-not-a-member")


@sequence
def join_group_member_id_required(b: Broker) -> None:
    member_id, _ = joined_member(b, "jg-required")
    call(
        b,
        "describe",
        ApiKey.DESCRIBE_GROUPS,
        {"groups": ["jg-required"], "include_authorized_operations": False},
    )
    call(b, "list groups", ApiKey.LIST_GROUPS, {"states_filter": ["Stable"]})


@sequence
def sync_group_wrong_generation(b: Broker) -> None:
    member_id, generation = joined_member(b, "sg-gen")
    fields = {
        "group_id": "sg-gen",
        "generation_id": generation + 1,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [],
    }
    call(b, "sync with a later generation", ApiKey.SYNC_GROUP, fields)
    fields["protocol_name"] = "roundrobin"
    fields["generation_id"] = generation
    call(b, "sync with another protocol", ApiKey.SYNC_GROUP, fields)


@sequence
def heartbeat_rebalance_in_progress(b: Broker) -> None:
    member_id, generation = joined_member(b, "hb-rebalance")
    heartbeat(b, "heartbeat stable", "hb-rebalance", generation, member_id)
    second = b.connect()
    fields = {
        "group_id": "hb-rebalance",
        "session_timeout_ms": 30000,
        "rebalance_timeout_ms": 30000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x01"}],
    }
    required = join_group(b, "second member: id required", "hb-rebalance", via=second)
    fields["member_id"] = required["member_id"]
    b.send_only(ApiKey.JOIN_GROUP, V[ApiKey.JOIN_GROUP], fields, second)  # parked until the first rejoins
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the join reaches the coordinator after the send returns
        answer = heartbeat(b, "heartbeat", "hb-rebalance", generation, member_id)
        if answer["error_code"]:
            break
        b.steps.pop()
        time.sleep(0.05)
    heartbeat(b, "heartbeat old generation", "hb-rebalance", generation - 1, member_id)
    heartbeat(b, "heartbeat unknown member", "hb-rebalance", generation, "raw-test-nobody")


@sequence
def delete_groups_non_empty(b: Broker) -> None:
    joined_member(b, "dg-busy")
    call(b, "delete", ApiKey.DELETE_GROUPS, {"groups_names": ["dg-busy"]})


@sequence
def heartbeat_unknown_group(b: Broker) -> None:
    heartbeat(b, "heartbeat", "hb-none", 1, "raw-test-nobody")


def offset_commit(b: Broker, label: str, group: str, topic: str, generation: int, member_id: str) -> dict:  # type: ignore[type-arg]
    fields = {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 2,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "m",
                    },
                    {
                        "partition_index": 7,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    },
                ],
            }
        ],
    }
    return call(b, label, ApiKey.OFFSET_COMMIT, fields)


@sequence
def offset_commit_then_fetch(b: Broker) -> None:
    create_topic(b, "oc-topic")
    offset_commit(b, "commit as a simple consumer", "oc-simple", "oc-topic", -1, "")
    groups = [{"group_id": "oc-simple", "topics": [{"name": "oc-topic", "partition_indexes": [0, 1, 7]}]}]
    call(b, "offset fetch", ApiKey.OFFSET_FETCH, {"groups": groups, "require_stable": False})
    offset_commit(b, "commit unknown topic", "oc-simple", "oc-none", -1, "")


@sequence
def offset_commit_unknown_member(b: Broker) -> None:
    create_topic(b, "oc-member")
    offset_commit(b, "commit to a new group as a member", "oc-new", "oc-member", 3, "raw-test-nobody")
    member_id, generation = joined_member(b, "oc-joined")
    offset_commit(b, "commit with an old generation", "oc-joined", "oc-member", generation - 1, member_id)
    offset_commit(b, "commit as an unknown member", "oc-joined", "oc-member", generation, "raw-test-nobody")


@sequence
def leave_group_unknown_member(b: Broker) -> None:
    joined_member(b, "lg-group")
    members = [{"member_id": "raw-test-nobody", "group_instance_id": None}]
    call(b, "leave unknown member", ApiKey.LEAVE_GROUP, {"group_id": "lg-group", "members": members})
    call(b, "leave unknown group", ApiKey.LEAVE_GROUP, {"group_id": "lg-none", "members": members})


@sequence
def init_producer_id_bad_timeout(b: Broker) -> None:
    fields = {
        "transactional_id": "txn-timeout",
        "transaction_timeout_ms": 3_600_000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    call(b, "init with an hour's timeout", ApiKey.INIT_PRODUCER_ID, fields)


@sequence
def create_topics_bad_assignment(b: Broker) -> None:
    topic = {
        "name": "ct-assign",
        "num_partitions": -1,
        "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": [1, 42]}],
        "configs": [],
    }
    call(b, "create", ApiKey.CREATE_TOPICS, {"topics": [topic], "timeout_ms": 30000})


@sequence
def init_producer_id_transactional(b: Broker) -> None:
    init_producer_id(b, "init", "txn-init")
    init_producer_id(b, "init again (epoch bump)", "txn-init")


@sequence
def add_partitions_to_txn_without_init(b: Broker) -> None:
    create_topic(b, "txn-topic")
    fields = {
        "v3_and_below_transactional_id": "txn-never-init",
        "v3_and_below_producer_id": 4242,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [{"name": "txn-topic", "partitions": [0]}],
    }
    call(b, "add partitions", ApiKey.ADD_PARTITIONS_TO_TXN, fields)


@sequence
def add_partitions_to_txn_wrong_epoch(b: Broker) -> None:
    create_topic(b, "txn-epoch")
    pid = init_producer_id(b, "init", "txn-epoch")["producer_id"]
    fields = {
        "v3_and_below_transactional_id": "txn-epoch",
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": 7,
        "v3_and_below_topics": [{"name": "txn-epoch", "partitions": [0]}],
    }
    call(b, "add partitions with a later epoch", ApiKey.ADD_PARTITIONS_TO_TXN, fields)


@sequence
def end_txn_wrong_state(b: Broker) -> None:
    pid = init_producer_id(b, "init", "txn-end")["producer_id"]
    fields = {"transactional_id": "txn-end", "producer_id": pid, "producer_epoch": 0, "committed": True}
    call(b, "commit with no transaction", ApiKey.END_TXN, fields)
    fields["committed"] = False
    call(b, "abort with no transaction", ApiKey.END_TXN, fields)
    fields["transactional_id"] = "txn-end-unknown"
    call(b, "commit unknown transactional id", ApiKey.END_TXN, fields)


# --- unsupported versions ----------------------------------------------------------------------------


@sequence
def produce_below_minimum_version(b: Broker) -> None:
    b.call("produce v2", ApiKey.PRODUCE, 2, produce_fields("p-none", batch(1)))


@sequence
def fetch_below_minimum_version(b: Broker) -> None:
    fields = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "topics": []}
    b.call("fetch v3", ApiKey.FETCH, 3, fields)


@sequence
def metadata_unknown_version(b: Broker) -> None:
    b.call_beyond_schema("metadata v99", ApiKey.METADATA, 99, b"\x01\x00\x00\x00", answer_version=12)


# --- the suite ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def brokers() -> Iterator[tuple[str, str]]:
    """Apache Kafka (one combined KRaft node) and pykraft (one node), each started once."""
    # the reference's one change to a group's timing (bench.kafka_peer), made on both
    same_settings = {"group.initial.rebalance.delay.ms": "0"}
    with running_kafka_cluster(nodes=1) as kafka, running_node(overrides=same_settings) as node:
        for bootstrap in (kafka.bootstrap_servers, node.bootstrap_servers):
            wait_for_coordinators(Broker("either", bootstrap))
        yield kafka.bootstrap_servers, node.bootstrap_servers


def wait_for_coordinators(b: Broker) -> None:
    """Until the group and transaction coordinators answer: a fresh Kafka creates __consumer_offsets and
    __transaction_state on the first FindCoordinator and answers COORDINATOR_NOT_AVAILABLE until then, a
    start-up state the sequences do not compare."""
    deadline = time.monotonic() + 60
    try:
        for key_type, key in ((0, "any-group"), (1, "any-transactional-id")):
            while True:
                fields = {"key_type": key_type, "coordinator_keys": [key]}
                answer = call(b, "find coordinator", ApiKey.FIND_COORDINATOR, fields, record=False)
                if answer["coordinators"][0]["error_code"] == 0:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{b.bootstrap}: no coordinator for {key}: {answer}")
                time.sleep(0.1)
    finally:
        b.close()


DELIBERATE = deliberate_differences()


@pytest.mark.parametrize("name", sorted(SEQUENCES))
def test_same_answers_as_kafka(brokers: tuple[str, str], name: str) -> None:
    answers = {}
    for broker_name, bootstrap in zip(("kafka", "pykraft"), brokers, strict=True):
        broker = Broker(broker_name, bootstrap)
        try:
            SEQUENCES[name](broker)
        finally:
            broker.close()
        answers[broker_name] = normalise(broker)
    found = differences(answers["kafka"], answers["pykraft"])
    unexpected = [d for d in found if not any(deliberate.covers(name, d) for deliberate in DELIBERATE)]
    steps = {d.path.split("/")[0].split("[")[0] for d in unexpected}
    answers_shown = [
        f"  {label}:\n    kafka   {kafka_answer}\n    pykraft {pykraft_answer}"
        for (label, kafka_answer), (_, pykraft_answer) in zip(
            answers["kafka"], answers["pykraft"], strict=False
        )
        if label in steps
    ]
    assert not unexpected, (
        f"pykraft differs from Kafka in {name}:\n"
        + "\n".join(f"  {d}" for d in unexpected)
        + "\nthe normalised answers of those steps:\n"
        + "\n".join(answers_shown)
    )


def test_every_deliberate_difference_names_a_sequence() -> None:
    assert DELIBERATE, "docs/differences.md lists no deliberate difference"
    unknown = sorted(
        {d.sequence for d in DELIBERATE if "*" not in d.sequence and d.sequence not in SEQUENCES}
    )
    assert not unknown, f"docs/differences.md names sequences that do not exist: {unknown}"


def test_at_least_forty_sequences() -> None:
    assert len(SEQUENCES) >= 40


def test_every_version_used_is_served_by_both(brokers: tuple[str, str]) -> None:
    for bootstrap in brokers:
        broker = Broker("either", bootstrap)
        try:
            served = call(broker, "api versions", ApiKey.API_VERSIONS, CLIENT_SOFTWARE)
        finally:
            broker.close()
        ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in served["api_keys"]}
        outside = {
            key.name: version for key, version in V.items() if not ranges[key][0] <= version <= ranges[key][1]
        }
        assert not outside, f"{bootstrap} does not serve {outside}"
