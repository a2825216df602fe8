"""Issue 5's "Done when", as raw requests against a real node: batches with explicit producer id,
epoch and base sequence; KIP-758's window (46) by default, Kafka's classic answers with
producer.state.retained.batches=5; KIP-360 state that outlives DeleteRecords and expires on its
timer; DescribeProducers and DescribeConfigs."""

from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
)

from pykraft.protocol.records import INT32_MAX
from pykraft.testing import running_node
from tests.protocol.test_raw_requests import _batch, _pid, _produce
from tests.raw_client import RawClient, create_topic

NONE, OUT_OF_ORDER, DUPLICATE, INVALID_EPOCH = 0, 45, 46, 47


@pytest.fixture
def client(pykraft_node):
    with RawClient(pykraft_node.bootstrap_servers) as c:
        yield c


def produce(client: RawClient, topic: str, pid: int, epoch: int, seq: int, n: int = 1) -> tuple[int, int]:
    response = _produce(client, topic, _batch(pid, epoch, seq, n=n))
    return response.error_code, response.base_offset


def describe_producers(client: RawClient, topic: str) -> list:
    request = DescribeProducersRequest(
        topics=[DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])]
    )
    response = client.request(request, DescribeProducersResponse, 0)
    (partition,) = response.topics[0].partitions
    assert partition.error_code == 0
    return list(partition.active_producers)


def delete_records_to_high_watermark(client: RawClient, topic: str) -> int:
    Topic = DeleteRecordsRequest.DeleteRecordsTopic
    request = DeleteRecordsRequest(
        topics=[Topic(name=topic, partitions=[Topic.DeleteRecordsPartition(partition_index=0, offset=-1)])],
        timeout_ms=10_000,
    )
    response = client.request(request, DeleteRecordsResponse, 2)
    result = response.topics[0].partitions[0]
    assert result.error_code == 0
    return result.low_watermark


def test_kip758_rules_by_default(client) -> None:
    create_topic(client, "w")
    pid = _pid(client)
    assert produce(client, "w", pid, 0, 0, n=3) == (NONE, 0)  # in order
    assert produce(client, "w", pid, 0, 3, n=3) == (NONE, 3)
    assert produce(client, "w", pid, 0, 6, n=3) == (NONE, 6)
    assert produce(client, "w", pid, 0, 6, n=3) == (NONE, 6)  # exact retry of latest: original offset
    assert produce(client, "w", pid, 0, 3, n=3) == (DUPLICATE, -1)  # older, within the window
    assert produce(client, "w", pid, 0, 0, n=3) == (DUPLICATE, -1)
    assert produce(client, "w", pid, 0, 10)[0] == OUT_OF_ORDER  # gap
    assert produce(client, "w", pid, 1, 5)[0] == OUT_OF_ORDER  # new epoch must start at 0
    assert produce(client, "w", pid, 1, 0) == (NONE, 9)
    assert produce(client, "w", pid, 0, 9)[0] == INVALID_EPOCH  # stale epoch
    # Int.MAX -> 0 wraparound, with another producer.
    other = _pid(client)
    assert produce(client, "w", other, 0, INT32_MAX - 1, n=2) == (NONE, 10)
    assert produce(client, "w", other, 0, 0, n=2) == (NONE, 12)
    assert produce(client, "w", other, 0, INT32_MAX - 1, n=2) == (DUPLICATE, -1)  # behind, across the wrap
    assert produce(client, "w", other, 0, 2) == (NONE, 14)
    (mine, theirs) = sorted(describe_producers(client, "w"), key=lambda p: p.producer_id)
    assert (mine.producer_id, mine.producer_epoch, mine.last_sequence) == (pid, 1, 0)
    assert (theirs.producer_id, theirs.last_sequence, theirs.last_timestamp) == (other, 2, 1000)
    assert (theirs.coordinator_epoch, theirs.current_txn_start_offset) == (-1, -1)


def test_classic_mode_with_five_retained_batches() -> None:
    with (
        running_node(overrides={"producer.state.retained.batches": "5"}) as node,
        RawClient(node.bootstrap_servers) as client,
    ):
        create_topic(client, "c")
        pid = _pid(client)
        for i in range(7):
            assert produce(client, "c", pid, 0, 2 * i, n=2) == (NONE, 2 * i)
        assert produce(client, "c", pid, 0, 12, n=2) == (NONE, 12)
        assert produce(client, "c", pid, 0, 4, n=2) == (NONE, 4)  # older, retained: original offset
        assert produce(client, "c", pid, 0, 2, n=2)[0] == OUT_OF_ORDER  # older than 5 batches
        assert produce(client, "c", pid, 0, 15)[0] == OUT_OF_ORDER
        assert produce(client, "c", pid, 1, 3)[0] == OUT_OF_ORDER
        assert produce(client, "c", pid, 1, 0) == (NONE, 14)
        assert produce(client, "c", pid, 0, 14)[0] == INVALID_EPOCH


def test_delete_records_to_high_watermark_keeps_producer_state(client) -> None:
    create_topic(client, "d")
    pid = _pid(client)
    assert produce(client, "d", pid, 0, 0, n=4) == (NONE, 0)
    assert delete_records_to_high_watermark(client, "d") == 4
    # KIP-360: the producer is still known although the log holds none of its batches.
    assert [p.producer_id for p in describe_producers(client, "d")] == [pid]
    assert produce(client, "d", pid, 0, 6)[0] == OUT_OF_ORDER  # a gap is still rejected
    assert produce(client, "d", pid, 0, 4) == (NONE, 4)  # the next in order is accepted
    assert produce(client, "d", pid, 0, 0, n=4) == (DUPLICATE, -1)


def test_after_expiration_any_sequence_is_accepted() -> None:
    overrides = {
        "producer.id.expiration.ms": "300",
        "producer.id.expiration.check.interval.ms": "50",
        "log.retention.check.interval.ms": "50",
    }
    with running_node(overrides=overrides) as node, RawClient(node.bootstrap_servers) as client:
        create_topic(client, "e")
        pid = _pid(client)
        assert produce(client, "e", pid, 0, 0, n=2) == (NONE, 0)
        deadline = time.monotonic() + 10
        while describe_producers(client, "e") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert describe_producers(client, "e") == []
        assert produce(client, "e", pid, 0, 1234) == (NONE, 2)


def test_describe_producers_unknown_partition(client) -> None:
    request = DescribeProducersRequest(
        topics=[DescribeProducersRequest.TopicRequest(name="nope", partition_indexes=[0, 3])]
    )
    response = client.request(request, DescribeProducersResponse, 0)
    assert [p.error_code for p in response.topics[0].partitions] == [3, 3]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_configs_advertises_the_duplicate_window(client, pykraft_node, version: int) -> None:
    create_topic(client, f"cfg{version}")
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[
            Resource(
                resource_type=4, resource_name=str(pykraft_node.config.node_id), configuration_keys=None
            ),
            Resource(
                resource_type=4,
                resource_name=str(pykraft_node.config.node_id),
                configuration_keys=["max.in.flight.sequence.number.per.connection"],
            ),
            Resource(resource_type=2, resource_name=f"cfg{version}", configuration_keys=None),
            Resource(resource_type=4, resource_name="99", configuration_keys=None),
            Resource(resource_type=2, resource_name="missing", configuration_keys=None),
            Resource(resource_type=3, resource_name="x", configuration_keys=None),
            # The cluster default (kafka-configs --entity-default): only dynamic defaults, none set here.
            Resource(resource_type=4, resource_name="", configuration_keys=None),
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    response = client.request(request, DescribeConfigsResponse, version)
    broker, only_window, topic, other_broker, missing, bad_type, cluster_default = response.results
    assert (cluster_default.error_code, cluster_default.configs) == (0, [])
    configs = {c.name: c for c in broker.configs}
    window = configs["max.in.flight.sequence.number.per.connection"]
    assert (window.value, window.read_only, window.is_sensitive) == ("10000000", True, False)
    assert configs["producer.state.retained.batches"].value == "1"
    assert [c.name for c in only_window.configs] == ["max.in.flight.sequence.number.per.connection"]
    assert {c.name for c in topic.configs} >= {"retention.ms", "segment.bytes", "max.message.bytes"}
    assert (topic.error_code, other_broker.error_code, missing.error_code, bad_type.error_code) == (
        0,
        42,
        3,
        42,
    )
    assert "99" in other_broker.error_message


def test_cli_producers_prints_active_producers(client, pykraft_node, capsys) -> None:
    from pykraft.cli import main

    create_topic(client, "cli")
    pid = _pid(client)
    assert produce(client, "cli", pid, 0, 0, n=3) == (NONE, 0)
    assert main(["producers", "--bootstrap-server", pykraft_node.bootstrap_servers, "--topic", "cli"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "Topic", "Partition", "ProducerId", "Epoch", "LastSequence", "LastTimestamp", "CoordinatorEpoch",
        "TxnStartOffset",
    ]  # fmt: skip
    assert lines[1].split() == ["cli", "0", str(pid), "0", "2", "1000", "-1", "-1"]
    assert main(["producers", "--bootstrap-server", "127.0.0.1:1"]) == 1
    assert "cannot connect" in capsys.readouterr().err
