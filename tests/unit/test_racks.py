"""Racks, pure (issue 30 item 6): rack-aware replica placement (KIP-36, controller/replica_placer.py and
through the controller's CreateTopics / CreatePartitions), the RackAwareReplicaSelector's choice
(KIP-392, broker/replica_selector.py) and the Fetch handler answering with a preferred read replica on
the leader and serving a consumer on a follower up to its high watermark."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest

from pykraft.broker.handlers import (
    BrokerContext,
    BrokerView,
    ClusterView,
    PartitionView,
    TopicView,
    handle_fetch,
)
from pykraft.broker.producer_id_manager import ProducerIdManager
from pykraft.broker.replica_selector import NO_PREFERRED_READ_REPLICA, preferred_read_replica
from pykraft.controller.cluster import BrokerEndpoint
from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replica_placer import place_replicas, rack_alternated
from pykraft.controller.replication import CreatableTopic, CreatePartitionsTopic
from pykraft.core.config import ConfigError, load_config
from pykraft.core.errors import ErrorCode
from pykraft.metadata.records import PartitionRecord
from tests.unit.test_producer_snapshot import batch
from tests.unit.test_replication import REPLICAS, TOPIC, Broker, fetch_once

# --- placement ------------------------------------------------------------------------------------


def _round_robin(brokers: list[int], start: int, partitions: range, rf: int) -> dict[int, tuple[int, ...]]:
    return {p: tuple(brokers[(start + p + i) % len(brokers)] for i in range(rf)) for p in partitions}


@pytest.mark.parametrize("start", [0, 1, 2, 5])
def test_without_racks_or_with_one_rack_per_broker_in_id_order_placement_is_the_round_robin(
    start: int,
) -> None:
    brokers = [101, 102, 103, 104]
    expected = _round_robin(brokers, start, range(8), 3)
    assert place_replicas(brokers, {}, start, range(8), 3) == expected
    assert place_replicas(brokers, {b: None for b in brokers}, start, range(8), 3) == expected
    assert place_replicas(brokers, {b: f"rack-{b}" for b in brokers}, start, range(8), 3) == expected


def test_rack_alternated_order_takes_one_broker_per_rack_in_turn() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: None}
    assert rack_alternated([6, 5, 4, 3, 2, 1], racks) == [6, 1, 3, 5, 2, 4]


@pytest.mark.parametrize("start", range(6))
def test_replicas_of_each_partition_span_every_rack_and_leaders_spread_over_racks(start: int) -> None:
    # Broker ids interleaved with racks so that id order alone would put two replicas in one rack.
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    placed = place_replicas(list(racks), racks, start, range(12), 3)
    for replicas in placed.values():
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b", "c"}
    assert Counter(replicas[0] for replicas in placed.values()) == {b: 2 for b in racks}
    # Two racks of unequal size, RF 2: both racks in every partition.
    racks2 = {1: "a", 2: "a", 3: "a", 4: "b"}
    for replicas in place_replicas(list(racks2), racks2, start, range(8), 2).values():
        assert {racks2[b] for b in replicas} == {"a", "b"}
    # More replicas than racks: every rack once, then the rest, never a broker twice.
    racks3 = {1: "a", 2: "a", 3: "b", 4: "b"}
    for replicas in place_replicas(list(racks3), racks3, start, range(8), 3).values():
        assert len(set(replicas)) == 3 and {racks3[b] for b in replicas} == {"a", "b"}


def _controller_with(racks: dict[int, str | None]) -> QuorumController:
    controller = QuorumController(rng=random.Random(7))
    controller.activate()
    for broker_id, rack in racks.items():
        endpoint = BrokerEndpoint("PLAINTEXT", "h", 9000 + broker_id, 0)
        reply = controller.register_broker(broker_id, uuid.UUID(int=broker_id), [endpoint], rack, 0)
        assert reply.response.error_code is ErrorCode.NONE
    return controller


def test_the_controller_places_created_and_added_partitions_over_the_registered_racks() -> None:
    racks: dict[int, str | None] = {1: "a", 2: "a", 3: "b", 4: "b"}
    controller = _controller_with(racks)
    created = controller.create_topics([CreatableTopic("t", num_partitions=6, replication_factor=2)])
    added = controller.create_partitions([CreatePartitionsTopic("t", count=10)])
    placed = [
        r.message.replicas
        for r in [*created.records, *added.records]
        if isinstance(r.message, PartitionRecord)
    ]
    assert len(placed) == 10
    for replicas in placed:
        assert {racks[b] for b in replicas} == {"a", "b"}


# --- config ---------------------------------------------------------------------------------------


def test_broker_rack_and_replica_selector_class_are_read_and_an_unknown_selector_is_named() -> None:
    base = "node.id=1\nprocess.roles=broker,controller\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
    base += "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\ncontroller.listener.names=CONTROLLER\n"
    base += "log.dirs=/tmp/x\n"
    config = load_config(base)
    assert (config.broker_rack, config.replica_selector_class) == (None, None)
    selector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    config = load_config(base + f"broker.rack=eu-1a\nreplica.selector.class={selector}\n")
    assert (config.broker_rack, config.replica_selector_class) == ("eu-1a", selector)
    with pytest.raises(ConfigError, match="replica.selector.class: 'com.example.Mine'"):
        load_config(base + "replica.selector.class=com.example.Mine\n")


# --- the selector and the Fetch handler -----------------------------------------------------------

RACKS: dict[int, str | None] = {1: "rack-1", 2: "rack-2", 3: "rack-3"}


def _replicated() -> dict[int, Broker]:
    """Leader 1, followers 2 and 3, three batches (9 records) written and the high watermark at 9."""
    brokers = {b: Broker(b) for b in REPLICAS}
    for broker in brokers.values():
        broker.apply(1, 0)
    leader = brokers[1]
    for base in (0, 3, 6):
        assert leader.rm.append(leader.part, batch(base), 0).error_code == ErrorCode.NONE
    for _ in range(3):  # copy, report the log end (the high watermark moves), learn the high watermark
        for follower in (brokers[2], brokers[3]):
            fetch_once(follower, leader, now_ms=1000)
    assert [b.part.log.high_watermark for b in brokers.values()] == [9, 9, 9]
    return brokers


def test_the_rack_aware_selector_names_a_caught_up_in_sync_follower_of_the_clients_rack() -> None:
    replication = _replicated()[1].part.replication
    assert preferred_read_replica(replication, 0, "rack-2", RACKS, 2000) == 2
    assert preferred_read_replica(replication, 9, "rack-3", RACKS, 2000) == 3
    # The leader's own rack, an unknown rack, no rack: the leader (-1).
    for rack in ("rack-1", "rack-9", None, ""):
        assert preferred_read_replica(replication, 0, rack, RACKS, 2000) == NO_PREFERRED_READ_REPLICA
    # A follower that does not hold the fetch offset yet, or is out of the ISR, or not live: not chosen.
    assert preferred_read_replica(replication, 10, "rack-2", RACKS, 2000) == NO_PREFERRED_READ_REPLICA
    replication.isr = (1, 3)
    assert preferred_read_replica(replication, 0, "rack-2", RACKS, 2000) == NO_PREFERRED_READ_REPLICA
    assert preferred_read_replica(replication, 0, "rack-3", {1: "rack-1"}, 2000) == NO_PREFERRED_READ_REPLICA
    # Two followers in the client's rack: the most caught-up one.
    replication.isr = (1, 2, 3)
    replication.followers[2].log_end_offset = 6
    assert preferred_read_replica(replication, 0, "r", {1: "x", 2: "r", 3: "r"}, 2000) == 3


def _ctx(broker: Broker, selector: bool) -> BrokerContext:
    view = TopicView(TOPIC, uuid.UUID(int=9), (PartitionView(0, 1, 0, REPLICAS, REPLICAS),))
    brokers = tuple(BrokerView(b, "127.0.0.1", 9000 + b, RACKS[b]) for b in REPLICAS)
    cluster = ClusterView("c", 1, brokers, {TOPIC: view})
    return BrokerContext(
        node_id=broker.broker_id,
        cluster=cluster,
        replicas=broker.rm,
        producer_ids=ProducerIdManager(broker.broker_id),
        auto_create_topics_enable=False,
        replica_selector_enabled=selector,
    )


def _fetch(rack: str, fetch_offset: int = 0, leader_epoch: int = -1) -> Any:
    partition = SimpleNamespace(
        partition=0, fetch_offset=fetch_offset, partition_max_bytes=1 << 20, current_leader_epoch=leader_epoch
    )
    return SimpleNamespace(
        max_bytes=1 << 20,
        isolation_level=0,
        rack_id=rack,
        topics=[SimpleNamespace(topic=TOPIC, partitions=[partition])],
    )


def _answer(ctx: BrokerContext, request: Any, version: int = 12) -> Any:
    outcome = handle_fetch(request, version, ctx, 2000)
    return outcome, outcome.response.topics[0].partitions[0]


def test_the_leader_redirects_a_consumer_of_another_rack_and_the_follower_serves_it() -> None:
    brokers = _replicated()
    outcome, answer = _answer(_ctx(brokers[1], selector=True), _fetch("rack-2"))
    assert (answer.error_code, answer.preferred_read_replica, answer.records, answer.high_watermark) == (
        ErrorCode.NONE,
        2,
        [],
        9,
    )
    assert outcome.redirects
    # Without replica.selector.class, or before Fetch v11, or in the leader's rack: read at the leader.
    for ctx, version, rack in (
        (_ctx(brokers[1], selector=False), 12, "rack-2"),
        (_ctx(brokers[1], selector=True), 10, "rack-2"),
        (_ctx(brokers[1], selector=True), 12, "rack-1"),
    ):
        outcome, answer = _answer(ctx, _fetch(rack), version)
        assert answer.preferred_read_replica == -1 and outcome.bytes_read > 0 and not outcome.redirects
    # The follower serves the consumer (v11+) every record up to its high watermark.
    outcome, answer = _answer(_ctx(brokers[2], selector=True), _fetch("rack-2"))
    assert (answer.error_code, answer.high_watermark) == (ErrorCode.NONE, 9)
    assert b"".join(bytes(c) for c in answer.records) == brokers[1].log_bytes(9)
    # ... but only from v11: an older consumer is sent to the leader.
    _, answer = _answer(_ctx(brokers[2], selector=True), _fetch("rack-2"), 10)
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_follower_serves_no_further_than_its_high_watermark_and_fences_stale_epochs() -> None:
    brokers = _replicated()
    leader, follower = brokers[1], brokers[2]
    assert leader.rm.append(leader.part, batch(9), 0).error_code == ErrorCode.NONE
    fetch_once(follower, leader, now_ms=1000)  # the follower has offsets 9..11, its high watermark is 9
    assert (follower.part.log.log_end_offset, follower.part.log.high_watermark) == (12, 9)
    ctx = _ctx(follower, selector=True)
    _, answer = _answer(ctx, _fetch("rack-2", fetch_offset=9))
    assert (answer.error_code, answer.records, answer.high_watermark) == (ErrorCode.NONE, [], 9)
    _, answer = _answer(ctx, _fetch("rack-2", fetch_offset=13))
    assert answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    # Kafka's ReplicaManager.readFromLog: a failed read answers no offsets
    assert (answer.high_watermark, answer.last_stable_offset, answer.log_start_offset) == (-1, -1, -1)
    follower.apply(1, 2)
    _, answer = _answer(ctx, _fetch("rack-2", leader_epoch=1))
    assert answer.error_code == ErrorCode.FENCED_LEADER_EPOCH
    _, answer = _answer(ctx, _fetch("rack-2", leader_epoch=3))
    assert answer.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    _, answer = _answer(ctx, _fetch("rack-2", leader_epoch=2))
    assert answer.error_code == ErrorCode.NONE
