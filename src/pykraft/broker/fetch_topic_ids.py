"""Fetch by topic id (v13+, KIP-516) and leader discovery in Fetch answers (v16+, KIP-951).

From v13 a Fetch names each topic by its id, not its name, so a consumer of a topic that was deleted
and created again under the same name is told (UNKNOWN_TOPIC_ID) instead of reading the new topic's
offsets as the old one's. The handlers work on names, as Kafka's ReplicaManager works on
TopicIdPartitions that carry both: ``name_topics`` gives each requested topic its name before they
run (Kafka's FetchRequest.fetchData with the metadata cache's topic names) and takes out the topics
this broker does not know; ``finish_answer`` puts the ids back on the answer and answers those
topics UNKNOWN_TOPIC_ID, first, as Kafka's KafkaApis.handleFetchRequest lists its erroneous
partitions before the ones it read.

From v16 a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its current
leader and epoch (CurrentLeader), and the answer carries that leader's endpoint on the client's
listener (NodeEndpoints), so the client moves to the new leader without a Metadata round trip
(KafkaApis: getCurrentLeader with the request's listener).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pykraft.broker.handlers import BrokerView, ClusterView
from pykraft.broker.leader_discovery import current_leader, node_endpoints
from pykraft.core.errors import ErrorCode
from pykraft.core.uuid import ZERO_UUID
from pykraft.protocol.fetch import (
    FETCH_FIRST_LEADER_DISCOVERY_VERSION,
    FETCH_FIRST_TOPIC_ID_VERSION,
    FetchPartitionResponse,
    FetchResponseData,
    FetchTopicResponse,
)

# The errors after which a v16+ answer names the partition's current leader (KIP-951).
_LEADER_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


@dataclass(frozen=True, slots=True)
class UnknownTopic:
    """A requested topic id this broker's metadata does not have, with the partitions asked of it."""

    topic_id: uuid.UUID
    partitions: list[int]


def name_topics(request: Any, version: int, names_by_id: Mapping[uuid.UUID, str]) -> list[UnknownTopic]:
    """Give every topic of a v13+ Fetch (as decoded: ``topics`` and ``forgotten_topics_data``, each
    with ``topic_id``) its name, in place; the topics whose id is not known are taken out of
    ``request.topics`` and returned (a forgotten one is only dropped: there is nothing to forget).
    Below v13 the request already names its topics and nothing changes."""
    if version < FETCH_FIRST_TOPIC_ID_VERSION:
        return []
    unknown: list[UnknownTopic] = []
    known = []
    for topic in request.topics:
        name = names_by_id.get(topic.topic_id) if topic.topic_id is not None else None
        if name is None:
            unknown.append(
                UnknownTopic(topic.topic_id or ZERO_UUID, [fp.partition for fp in topic.partitions])
            )
        else:
            topic.topic = name
            known.append(topic)
    request.topics = known
    if request.forgotten_topics_data:
        forgotten = []
        for topic in request.forgotten_topics_data:
            name = names_by_id.get(topic.topic_id) if topic.topic_id is not None else None
            if name is not None:
                topic.topic = name
                forgotten.append(topic)
        request.forgotten_topics_data = forgotten
    return unknown


def finish_answer(
    response: FetchResponseData,
    version: int,
    cluster: ClusterView,
    unknown: Sequence[UnknownTopic],
    listener_brokers: Sequence[BrokerView],
) -> FetchResponseData:
    """The answer as ``version`` carries it: from v13 every topic with its id and the unknown ids
    answered UNKNOWN_TOPIC_ID (first); from v16 the current leader of every partition answered
    NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, and the endpoints of those leaders on the
    client's listener (``listener_brokers``: the live brokers as that listener reaches them)."""
    if version < FETCH_FIRST_TOPIC_ID_VERSION:
        return response
    topics = [
        FetchTopicResponse(
            "",
            [
                # Kafka's FetchResponse.partitionResponse(partition, UNKNOWN_TOPIC_ID)
                FetchPartitionResponse(index, ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, -1, [], [])
                for index in entry.partitions
            ],
            entry.topic_id,
        )
        for entry in unknown
    ]
    leaders: list[int] = []
    for topic in response.topics:
        view = cluster.topics.get(topic.topic)
        if topic.topic_id is None:
            topic.topic_id = view.topic_id if view is not None else ZERO_UUID
        topics.append(topic)
        if version < FETCH_FIRST_LEADER_DISCOVERY_VERSION:
            continue
        for partition in topic.partitions:
            if partition.error_code in _LEADER_MOVED:
                partition.current_leader = current_leader(cluster, topic.topic, partition.partition_index)
                if partition.current_leader[0] >= 0:
                    leaders.append(partition.current_leader[0])
    response.topics = topics
    if leaders:
        response.node_endpoints = node_endpoints(leaders, listener_brokers)
    return response


__all__ = ["UnknownTopic", "finish_answer", "name_topics"]
