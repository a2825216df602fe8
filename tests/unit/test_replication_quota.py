"""The replication throttles (KIP-73), pure: Kafka's ReplicationQuotaManager rate (SimpleRate over 11
one-second windows), which partitions a ``*.replication.throttled.replicas`` list throttles on a broker,
the ISR exemption, and the broker/topic configs that carry them."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from pykraft.broker.handlers import (
    BrokerContext,
    ClusterView,
    PartitionView,
    TopicView,
    handle_replica_fetch,
)
from pykraft.broker.producer_id_manager import ProducerIdManager
from pykraft.broker.replication_quota import follower_quota, leader_quota, throttled_partitions
from pykraft.core.topic_configs import (
    DYNAMIC_BROKER_CONFIGS,
    check_broker_config,
    check_topic_config,
    topic_names_of_broker_configs,
)
from tests.unit.test_producer_snapshot import batch
from tests.unit.test_replication import REPLICAS, TOPIC, Broker

MB = 1 << 20


def test_throttled_partitions_are_the_pairs_naming_this_broker_or_all() -> None:
    assert throttled_partitions("0:101,1:102,2:101", 101) == frozenset({0, 2})
    assert throttled_partitions("0:101,1:102", 103) == frozenset()
    assert throttled_partitions(" * ", 103) is None  # every partition of the topic


def test_quota_reads_its_rate_and_its_topics_lists() -> None:
    leader, follower = leader_quota(), follower_quota()
    broker = {"leader.replication.throttled.rate": "1000", "follower.replication.throttled.rate": "2000"}
    topics = {
        "moved": {
            "leader.replication.throttled.replicas": "0:1,0:2",
            "follower.replication.throttled.replicas": "0:3",
        },
        "all": {"leader.replication.throttled.replicas": "*"},
        "other": {"retention.ms": "1"},
    }
    leader.update(broker, topics, 1)
    follower.update(broker, topics, 1)
    assert leader.limit_bytes_per_s == 1000 and follower.limit_bytes_per_s == 2000
    assert leader.is_throttled("moved", 0) and not leader.is_throttled("moved", 1)
    assert leader.is_throttled("all", 7) and not leader.is_throttled("other", 0)
    assert not follower.is_throttled("moved", 0)  # 0:3 names broker 3, not this one
    follower.update(broker, topics, 3)
    assert follower.is_throttled("moved", 0)
    # Configs removed (--verify): nothing throttled, the rate back to unlimited.
    leader.update({}, {}, 1)
    assert not leader.is_throttled("moved", 0) and leader.limit_bytes_per_s == 2**63 - 1


def test_rate_is_bytes_over_elapsed_time_at_least_one_window() -> None:
    quota = leader_quota()
    quota.update({"leader.replication.throttled.rate": str(10 * MB)}, {"t": {quota.replicas_config: "*"}}, 1)
    quota.record(5 * MB, 0)
    # SimpleRate: within the first window the divisor is the whole window (1 s), so 5 MB/s.
    assert quota.rate_bytes_per_s(500) == pytest.approx(5 * MB)
    assert not quota.is_quota_exceeded(500)
    quota.record(6 * MB, 900)
    assert quota.is_quota_exceeded(900)  # 11 MB in the first second
    # Over time the same bytes spread over the elapsed time: 11 MB over 2 s is under 10 MB/s.
    assert quota.rate_bytes_per_s(2000) == pytest.approx(5.5 * MB)
    assert not quota.is_quota_exceeded(2000)
    # Samples older than all 11 windows together are dropped.
    assert quota.rate_bytes_per_s(12_000) == 0


def test_only_throttled_out_of_sync_replicas_wait_while_the_quota_is_exceeded() -> None:
    quota = follower_quota()
    quota.update({"follower.replication.throttled.rate": "100"}, {"t": {quota.replicas_config: "0:1"}}, 1)
    assert not quota.should_throttle("t", 0, in_sync=False, now_ms=0)  # nothing recorded yet
    quota.record(1000, 0)
    assert quota.should_throttle("t", 0, in_sync=False, now_ms=10)
    assert not quota.should_throttle("t", 0, in_sync=True, now_ms=10)  # in the ISR: never throttled
    assert not quota.should_throttle("t", 1, in_sync=False, now_ms=10)  # not listed
    assert not quota.should_throttle("u", 0, in_sync=False, now_ms=10)


def test_default_rate_never_throttles() -> None:
    quota = leader_quota()
    quota.update({}, {"t": {quota.replicas_config: "*"}}, 1)
    quota.record(10**15, 0)
    assert not quota.should_throttle("t", 0, in_sync=False, now_ms=1)


def test_the_configs_are_checked_as_kafka_does() -> None:
    assert "leader.replication.throttled.rate" in DYNAMIC_BROKER_CONFIGS
    assert check_broker_config("follower.replication.throttled.rate", "10485760") == (True, None)
    assert check_broker_config("leader.replication.throttled.rate", "-1")[1] == (
        "Invalid value -1 for configuration leader.replication.throttled.rate: Value must be at least 0"
    )
    # The rates are broker configs only, no topic's default.
    assert topic_names_of_broker_configs({"leader.replication.throttled.rate": "1"}) == {}
    assert check_topic_config("leader.replication.throttled.replicas", "0:1,1:2") is None
    assert check_topic_config("follower.replication.throttled.replicas", "*") is None
    assert check_topic_config("follower.replication.throttled.replicas", "0:1, 1:2,") is None
    problem = check_topic_config("leader.replication.throttled.replicas", "0-1")
    assert problem is not None and "[partitionId]:[brokerId]" in problem


def _replica_fetch(ctx: BrokerContext, replica_id: int, now_ms: int) -> int:
    """The bytes the leader answers a follower's Fetch of t-0 from offset 0 with."""
    partition = SimpleNamespace(
        partition=0,
        fetch_offset=0,
        last_fetched_epoch=-1,
        current_leader_epoch=0,
        partition_max_bytes=1 << 20,
    )
    request = SimpleNamespace(
        replica_id=replica_id,
        max_bytes=1 << 20,
        topics=[SimpleNamespace(topic=TOPIC, partitions=[partition])],
    )
    outcome, _ = handle_replica_fetch(request, ctx, now_ms)
    return outcome.bytes_read


def test_the_leader_sends_a_throttled_follower_out_of_the_isr_nothing_once_over_the_rate() -> None:
    leader = Broker(1)
    leader.apply(1, 0, isr=(1, 2))  # broker 3 is out of the ISR (a reassignment's new replica)
    leader.rm.append(leader.part, batch(0), 0)
    view = PartitionView(0, 1, 0, REPLICAS, (1, 2))
    ctx = BrokerContext(
        node_id=1,
        cluster=ClusterView("c", 1, topics={TOPIC: TopicView(TOPIC, uuid.uuid4(), (view,))}),
        replicas=leader.rm,
        producer_ids=ProducerIdManager(1),
        auto_create_topics_enable=False,
    )
    ctx.leader_quota.update(
        {"leader.replication.throttled.rate": "50"},
        {TOPIC: {"leader.replication.throttled.replicas": "0:1"}},
        1,
    )
    first = _replica_fetch(ctx, 3, 0)
    assert first > 50  # under the rate when asked: the batch goes, and is recorded
    assert _replica_fetch(ctx, 3, 10) == 0  # now over 50 B/s: nothing for the out-of-sync follower
    assert _replica_fetch(ctx, 2, 10) == first  # a follower in the ISR is never held back
    # The rate falls as time passes (SimpleRate over the elapsed time): the follower gets data again.
    assert _replica_fetch(ctx, 3, 60_000) == first
