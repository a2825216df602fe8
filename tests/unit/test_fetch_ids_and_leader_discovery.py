"""Fetch by topic id (v13+, KIP-516) and leader discovery in Fetch (v16+) and Produce (v10+) answers
(KIP-951): the pure steps around the handlers, on requests decoded by kafka-python and answers
encoded by ours."""

from __future__ import annotations

import uuid

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceResponse

from pykraft.broker.fetch_topic_ids import UnknownTopic, finish_answer, name_topics
from pykraft.broker.handlers import BrokerView, ClusterView, PartitionView, TopicView
from pykraft.broker.leader_discovery import produce_answer
from pykraft.core.errors import ErrorCode
from pykraft.protocol.fetch import (
    FetchPartitionResponse,
    FetchResponseData,
    FetchTopicResponse,
    encode_fetch_response,
)
from pykraft.protocol.produce import ProducePartitionResult, ProduceTopicResult, encode_produce_response
from pykraft.protocol.wire import NodeEndpoint

ORDERS = uuid.UUID(int=0xA1)
GONE = uuid.UUID(int=0xB2)
_T = FetchRequest.FetchTopic
_P = FetchRequest.FetchTopic.FetchPartition
_F = FetchRequest.ForgottenTopic


def cluster() -> ClusterView:
    partitions = (PartitionView(0, 1, 5, (1, 2), (1, 2)), PartitionView(1, 2, 7, (2, 1), (2, 1)))
    return ClusterView(
        cluster_id="c",
        controller_id=1,
        brokers=(BrokerView(1, "10.0.0.1", 9092), BrokerView(2, "10.0.0.2", 9092, "r2")),
        topics={"orders": TopicView("orders", ORDERS, partitions)},
        topic_names_by_id={ORDERS: "orders"},
    )


def decoded(version: int, topic_ids: list[uuid.UUID], forgotten: list[uuid.UUID]) -> object:
    request = FetchRequest(
        version=version,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            _T(
                version=version,
                topic_id=topic_id,
                partitions=[
                    _P(
                        version=version,
                        partition=index,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for index in (0, 1)
                ],
            )
            for topic_id in topic_ids
        ],
        forgotten_topics_data=[_F(version=version, topic_id=t, partitions=[0]) for t in forgotten],
        rack_id="",
    )
    return FetchRequest.decode(request.encode(version=version), version=version)


def test_v13_topics_get_their_names_and_unknown_ids_are_taken_out() -> None:
    request = decoded(13, [GONE, ORDERS], [ORDERS, GONE])
    unknown = name_topics(request, 13, cluster().topic_names_by_id)
    assert unknown == [UnknownTopic(GONE, [0, 1])]
    assert [t.topic for t in request.topics] == ["orders"]  # type: ignore[attr-defined]
    assert [t.topic for t in request.forgotten_topics_data] == ["orders"]  # type: ignore[attr-defined]


def test_below_v13_nothing_changes() -> None:
    request = FetchRequest(version=12, topics=[], forgotten_topics_data=[])
    assert name_topics(request, 12, {}) == []
    response = FetchResponseData(0, 0, 0, [FetchTopicResponse("orders", [])])
    assert finish_answer(response, 12, cluster(), [], ()).topics[0].topic_id is None


def answer(version: int) -> FetchResponseData:
    view = cluster()
    response = FetchResponseData(
        0,
        0,
        0,
        [
            FetchTopicResponse(
                "orders",
                [
                    FetchPartitionResponse(0, ErrorCode.NONE, 3, 3, 0, [b""]),
                    FetchPartitionResponse(1, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1, []),
                ],
            )
        ],
    )
    return finish_answer(response, version, view, [UnknownTopic(GONE, [4])], view.brokers)


def test_v16_names_the_moved_leader_and_its_endpoint_and_answers_unknown_ids_first() -> None:
    response = answer(16)
    wire = b"".join(bytes(p) for p in encode_fetch_response(9, 16, response))
    theirs = FetchResponse.decode(wire[4:], version=16, header=True)
    assert [t.topic_id for t in theirs.responses] == [GONE, ORDERS]
    gone, orders = theirs.responses
    assert [(p.partition_index, p.error_code, p.high_watermark) for p in gone.partitions] == [
        (4, ErrorCode.UNKNOWN_TOPIC_ID, -1)
    ]
    read, moved = orders.partitions
    assert read.error_code == ErrorCode.NONE and read.current_leader is None  # not written
    assert (moved.current_leader.leader_id, moved.current_leader.leader_epoch) == (2, 7)
    assert [(e.node_id, e.host, e.port, e.rack) for e in theirs.node_endpoints] == [
        (2, "10.0.0.2", 9092, "r2")
    ]


def test_v13_to_v15_carry_ids_but_no_leader_discovery() -> None:
    for version in (13, 15):
        response = answer(version)
        assert [t.topic_id for t in response.topics] == [GONE, ORDERS]
        assert all(p.current_leader is None for t in response.topics for p in t.partitions)
        assert response.node_endpoints == []


def test_produce_v10_names_the_leader_of_a_partition_answered_not_leader() -> None:
    view = cluster()
    results = [
        ProduceTopicResult(
            "orders",
            [
                ProducePartitionResult(0, ErrorCode.NONE, 5),
                ProducePartitionResult(1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
            ],
        ),
        ProduceTopicResult("unknown", [ProducePartitionResult(0, ErrorCode.NOT_LEADER_OR_FOLLOWER)]),
    ]
    answered, endpoints = produce_answer(results, 10, view, view.brokers)
    assert [p.current_leader for t in answered for p in t.partitions] == [None, (2, 7), (-1, -1)]
    assert endpoints == [NodeEndpoint(2, "10.0.0.2", 9092, "r2")]
    wire = bytes(encode_produce_response(3, 10, answered, 0, endpoints))
    theirs = ProduceResponse.decode(wire[4:], version=10, header=True)
    moved = theirs.responses[0].partition_responses[1].current_leader
    assert (moved.leader_id, moved.leader_epoch) == (2, 7)
    assert [e.node_id for e in theirs.node_endpoints] == [2]
    # Before v10, and with nothing answered NOT_LEADER_OR_FOLLOWER, the results are left as they are.
    assert produce_answer(results, 9, view, view.brokers) == (results, [])
    assert produce_answer(results[:1][:0], 10, view, view.brokers) == ([], [])
