"""Metadata served from per-topic encodings kept until the topic changes (issue 29 item 3): the answer
is byte for byte what kafka-python encodes for the whole response at every version, a repeated request
encodes no topic again, a changed topic is encoded again alone, and a change of the live brokers
(which decides each partition's leader and error) encodes again what it affects."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.broker.handlers import (
    BrokerContext,
    BrokerView,
    ClusterView,
    PartitionView,
    TopicView,
    handle_metadata,
)
from pykraft.broker.producer_id_manager import ProducerIdManager
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.core.errors import ErrorCode
from pykraft.log.partition_log import LogConfig
from pykraft.protocol import messages
from tests.unit.test_producer_snapshot import MemoryOpener


def _topic(name: str, partitions: int, leader: int = 1) -> TopicView:
    return TopicView(
        name,
        uuid.uuid5(uuid.NAMESPACE_DNS, name),
        tuple(PartitionView(p, leader, 3, (1, 2), (1, 2)) for p in range(partitions)),
    )


def _ctx(*topics: TopicView, brokers: tuple[int, ...] = (1, 2)) -> BrokerContext:
    views = tuple(BrokerView(b, f"host-{b}", 9000 + b) for b in brokers)
    cluster = ClusterView(
        "cluster-xyz", 1, views, {t.name: t for t in topics}, listeners={"PLAINTEXT": (views, ())}
    )
    return BrokerContext(
        node_id=1,
        cluster=cluster,
        replicas=ReplicaManager(MemoryOpener(), LogConfig(), producer_id_expiration_ms=60_000),
        producer_ids=ProducerIdManager(1),
        auto_create_topics_enable=False,
    )


def _frame(ctx: BrokerContext, version: int, names: list[str] | None = None) -> bytes:
    request: Any = MetadataRequest(
        topics=None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    header = messages.RequestHeader(3, version, 7, "c", body_offset=0, flexible=version >= 9)
    return bytes(messages.encode_response(header, handle_metadata(request, version, ctx)))


@pytest.mark.parametrize("version", range(13))
def test_the_spliced_answer_is_what_kafka_python_encodes_whole(version: int) -> None:
    ctx = _ctx(_topic("a", 3), _topic("b", 1, leader=7))
    framed = _frame(ctx, version, ["a", "b", "missing"])
    decoded = MetadataResponse.decode(framed[4:], version=version, header=True)
    assert [(t.name, t.error_code, len(t.partitions)) for t in decoded.topics] == [
        ("a", ErrorCode.NONE, 3),
        ("b", ErrorCode.NONE, 1),
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0),
    ]
    assert [p.leader_id for p in decoded.topics[1].partitions] == [-1]  # broker 7 is not live
    # Encoded whole by kafka-python, the same response is the same bytes.
    decoded._header = None
    decoded.API_VERSION = version
    decoded.with_header(correlation_id=7)
    assert bytes(decoded.encode(header=True, framed=True)) == framed


def test_each_topic_is_encoded_again_only_when_it_or_the_live_brokers_change() -> None:
    topics = [_topic(f"t{i}", 10) for i in range(50)]
    ctx = _ctx(*topics)
    cache = ctx.metadata_topics
    first = _frame(ctx, 12)
    assert cache.encoded == 50
    assert _frame(ctx, 12) == first and cache.encoded == 50  # nothing encoded again
    _frame(ctx, 9)
    assert cache.encoded == 100  # another version: its own encodings

    # One topic changed in the image: a new view for it alone.
    changed = dataclasses.replace(topics[7], partitions=(PartitionView(0, 2, 4, (1, 2), (2,)),))
    ctx.cluster.topics = {**ctx.cluster.topics, "t7": changed}
    after = MetadataResponse.decode(_frame(ctx, 12)[4:], version=12, header=True)
    assert cache.encoded == 101
    t7 = next(t for t in after.topics if t.name == "t7")
    assert [(p.leader_id, p.leader_epoch, p.isr_nodes) for p in t7.partitions] == [(2, 4, [2])]

    # Broker 1, every other topic's leader, is fenced: those answers change, so they are encoded again.
    live, fenced_broker = (BrokerView(2, "host-2", 9002),), (BrokerView(1, "host-1", 9001),)
    ctx.cluster = dataclasses.replace(
        ctx.cluster, brokers=live, listeners={"PLAINTEXT": (live, fenced_broker)}
    )
    fenced = MetadataResponse.decode(_frame(ctx, 12)[4:], version=12, header=True)
    assert cache.encoded == 151
    assert {p.error_code for t in fenced.topics if t.name != "t7" for p in t.partitions} == {
        ErrorCode.LEADER_NOT_AVAILABLE
    }

    # A deleted topic's encodings are dropped once the cache holds far more than the image's topics.
    ctx.cluster.topics = {"t0": ctx.cluster.topics["t0"]}
    for version in range(4, 13):
        _frame(ctx, version)
    assert all(name == "t0" for by_key in cache._by_live.values() for name, _ in by_key)


def test_describe_topic_partitions_reuses_whole_topics_and_encodes_a_page_cut_afresh() -> None:
    from tests.unit.test_cluster_admin import _dtp

    ctx = _ctx(*[_topic(f"t{i}", 4) for i in range(10)])
    cache = ctx.described_topics
    whole = _dtp(ctx, [])
    assert [len(t.partitions) for t in whole.topics] == [4] * 10 and whole.next_cursor is None
    assert cache.encoded == 10
    assert _dtp(ctx, []) == whole and cache.encoded == 10  # nothing encoded again
    # A page that cuts t2 short: t0 and t1 from the cache, t2's first two partitions encoded afresh.
    page = _dtp(ctx, [], limit=10)
    assert [(t.name, len(t.partitions)) for t in page.topics] == [("t0", 4), ("t1", 4), ("t2", 2)]
    assert (page.next_cursor.topic_name, page.next_cursor.partition_index) == ("t2", 2)
    assert cache.encoded == 10
    ctx.cluster.topics = {**ctx.cluster.topics, "t3": _topic("t3", 1, leader=2)}
    assert [len(t.partitions) for t in _dtp(ctx, []).topics][3] == 1
    assert cache.encoded == 11
