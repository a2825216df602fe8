"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), raw, against a real node: the
requests are kafka-python's classes generated from Kafka's own JSON schemas. One broker can only
reassign onto itself, so this pins the codecs, the versions and Kafka's refusals; the moves themselves
run in tests/interop/test_reassignment_cluster.py."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from pykraft.core.errors import ErrorCode
from pykraft.protocol.messages import UnregisterBrokerRequest, UnregisterBrokerResponse
from tests.raw_client import RawClient

Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
Partition = Topic.ReassignablePartition


@pytest.fixture
def client(pykraft_node):
    with RawClient(pykraft_node.bootstrap_servers) as c:
        topic = CreateTopicsRequest.CreatableTopic(
            name="moves", num_partitions=1, replication_factor=1, assignments=[], configs=[]
        )
        c.request(
            CreateTopicsRequest(topics=[topic], timeout_ms=10000, validate_only=False),
            CreateTopicsResponse,
            5,
        )
        yield c


def _alter(
    client: RawClient, version: int, *partitions: tuple[str, int, list[int] | None], allow_rf: bool = True
):
    request = AlterPartitionReassignmentsRequest(
        timeout_ms=10000,
        allow_replication_factor_change=allow_rf,
        topics=[
            Topic(name=name, partitions=[Partition(partition_index=p, replicas=r)])
            for name, p, r in partitions
        ],
    )
    response = client.request(request, AlterPartitionReassignmentsResponse, version)
    assert response.error_code == 0, response
    return [
        (t.name, p.partition_index, ErrorCode(p.error_code)) for t in response.responses for p in t.partitions
    ]


def test_both_apis_are_advertised(client) -> None:
    response = client.request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), ApiVersionsResponse, 3
    )
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert keys[45] == (0, 1) and keys[46] == (0, 0)


@pytest.mark.parametrize("version", [0, 1])
def test_alter_answers_each_partition(client, version: int) -> None:
    assert _alter(
        client,
        version,
        ("moves", 0, [1]),  # already there: nothing to do
        ("moves", 0, [1, 2]),  # broker 2 is not registered
        ("moves", 0, None),  # cancel, with nothing in progress
        ("moves", 7, [1]),
        ("nope", 0, [1]),
    ) == [
        ("moves", 0, ErrorCode.NONE),
        ("moves", 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("moves", 0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
        ("moves", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]


def test_v1_refuses_a_replication_factor_change_when_told_to(client) -> None:
    # KIP-860: the size check comes after the broker check, so an empty list is the only other size here.
    assert _alter(client, 1, ("moves", 0, []), allow_rf=False) == [
        ("moves", 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    ]
    assert _alter(client, 1, ("moves", 0, [1]), allow_rf=False) == [("moves", 0, ErrorCode.NONE)]


def test_list_shows_no_reassignment(client) -> None:
    for topics in (
        None,
        [
            ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(
                name="moves", partition_indexes=[0]
            )
        ],
    ):
        response = client.request(
            ListPartitionReassignmentsRequest(timeout_ms=10000, topics=topics),
            ListPartitionReassignmentsResponse,
            0,
        )
        assert (response.error_code, response.topics) == (0, [])


def test_unregister_broker_refuses_a_broker_that_holds_replicas(client) -> None:
    # Kafka's UnregisterBroker schema (our JSON copy of it): the only broker still leads "moves".
    held = client.request(UnregisterBrokerRequest(broker_id=1), UnregisterBrokerResponse, 0)
    assert ErrorCode(held.error_code) is ErrorCode.INVALID_REQUEST
    assert "still a replica of" in held.error_message
    unknown = client.request(UnregisterBrokerRequest(broker_id=9), UnregisterBrokerResponse, 0)
    assert (ErrorCode(unknown.error_code), unknown.error_message) == (
        ErrorCode.BROKER_ID_NOT_REGISTERED,
        "Broker ID 9 is not currently registered",
    )
