"""KIP-951 leader discovery: an answer that tells a client "not the leader" also tells it who is.

Produce v10+ (a partition answered NOT_LEADER_OR_FOLLOWER) and Fetch v16+ (NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH) name the partition's current leader and leader epoch (CurrentLeader), and the
answer lists how to reach those leaders on the listener the request came in on (NodeEndpoints), so a
client moves to the new leader without a Metadata round trip first (Kafka's
KafkaApis.getCurrentLeader; librdkafka and the Java client use it after a leader change).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from pykraft.broker.handlers import BrokerView, ClusterView
from pykraft.core.errors import ErrorCode
from pykraft.protocol.produce import PRODUCE_FIRST_LEADER_DISCOVERY_VERSION, ProduceTopicResult
from pykraft.protocol.wire import NodeEndpoint

UNKNOWN_LEADER = (-1, -1)


def current_leader(cluster: ClusterView, topic: str, partition_index: int) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition as this broker's metadata has it, (-1, -1) unknown."""
    view = cluster.topics.get(topic)
    if view is None or not 0 <= partition_index < len(view.partitions):
        return UNKNOWN_LEADER
    state = view.partitions[partition_index]
    return state.leader_id, state.leader_epoch


def node_endpoints(leader_ids: Iterable[int], listener_brokers: Sequence[BrokerView]) -> list[NodeEndpoint]:
    """The endpoints of the live ones of ``leader_ids`` (in that order, once each) among
    ``listener_brokers`` (the live brokers as the client's listener reaches them)."""
    by_id = {broker.node_id: broker for broker in listener_brokers}
    found = (by_id.get(node_id) for node_id in dict.fromkeys(leader_ids))
    return [broker for broker in found if broker is not None]


def produce_answer(
    results: list[ProduceTopicResult],
    version: int,
    cluster: ClusterView,
    listener_brokers: Sequence[BrokerView],
) -> tuple[list[ProduceTopicResult], list[NodeEndpoint]]:
    """The Produce results with the current leader of every partition answered NOT_LEADER_OR_FOLLOWER
    (v10+), and the endpoints of those leaders."""
    if version < PRODUCE_FIRST_LEADER_DISCOVERY_VERSION or not any(
        p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER for topic in results for p in topic.partitions
    ):
        return results, []
    leaders: list[int] = []
    answered = []
    for topic in results:
        partitions = []
        for p in topic.partitions:
            if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                leader = current_leader(cluster, topic.name, p.index)
                p = dataclasses.replace(p, current_leader=leader)
                if leader[0] >= 0:
                    leaders.append(leader[0])
            partitions.append(p)
        answered.append(ProduceTopicResult(topic.name, partitions))
    return answered, node_endpoints(leaders, listener_brokers)


__all__ = ["current_leader", "node_endpoints", "produce_answer"]
