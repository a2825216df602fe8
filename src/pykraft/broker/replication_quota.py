"""Replication throttles (KIP-73): Kafka's ReplicationQuotaManager, pure, every call takes ``now_ms``.

A broker has two: the leader quota bounds the bytes it sends followers in Fetch answers, the follower
quota the bytes its replica fetchers take. Each has

* a rate in bytes/s, the dynamic broker config ``leader.replication.throttled.rate`` /
  ``follower.replication.throttled.rate`` (Long.MAX_VALUE, unthrottled, by default);
* the partitions it throttles, from each topic's ``leader.replication.throttled.replicas`` /
  ``follower.replication.throttled.replicas``: ``*`` (all of the topic's) or ``partition:broker`` pairs,
  of which the ones naming this broker count (Kafka's TopicConfigHandler.parseThrottledPartitions);
* one rate sensor over ``replication.quota.window.num`` (11) windows of
  ``replication.quota.window.size.seconds`` (1 s), measured as Kafka's SimpleRate, which every byte of a
  throttled partition is recorded in, whether or not it was throttled.

A throttled partition is left out while the quota is exceeded (rate > limit, Sensor.checkQuotas) and
the replica is out of sync (ReplicaManager.shouldLeaderThrottle on the leader: the follower is not in
the ISR; AbstractFetcherThread.shouldFollowerThrottle on the follower: it is not in sync, which Kafka reads
from its lag behind the leader's high watermark and pykraft from the ISR in its image): a replica in
the ISR always replicates, so a throttle never holds back acks=all produces. The leader answers an
excluded partition with no records; the follower leaves it out of its Fetch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from pykraft.broker.quotas import SampledStat
from pykraft.core.topic_configs import (
    FOLLOWER_REPLICATION_THROTTLED_RATE,
    INT64_MAX,
    LEADER_REPLICATION_THROTTLED_RATE,
)

FOLLOWER_REPLICATION_THROTTLED_REPLICAS: Final = "follower.replication.throttled.replicas"
LEADER_REPLICATION_THROTTLED_REPLICAS: Final = "leader.replication.throttled.replicas"
# Kafka's ReplicationQuotaManagerConfig defaults (replication.quota.window.num / .size.seconds).
REPLICATION_QUOTA_WINDOW_NUM: Final = 11
REPLICATION_QUOTA_WINDOW_SIZE_MS: Final = 1000

ALL_PARTITIONS: Final = None  # Kafka's AllReplicas ("*")
Throttled = frozenset[int] | None


def throttled_partitions(value: str, broker_id: int) -> Throttled:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on ``broker_id``
    (None: all of them). A value the controller let through always parses (topic_configs checks it)."""
    value = value.strip()
    if value == "*":
        return ALL_PARTITIONS
    partitions = set()
    for item in value.split(","):
        if ":" in item:
            partition, broker = item.split(":")
            if int(broker) == broker_id:
                partitions.add(int(partition))
    return frozenset(partitions)


@dataclass(slots=True)
class ReplicationQuotaManager:
    """One replication quota (QuotaType LeaderReplication or FollowerReplication)."""

    rate_config: str  # the dynamic broker config holding its rate
    replicas_config: str  # the topic config naming its throttled replicas
    samples: int = REPLICATION_QUOTA_WINDOW_NUM
    window_ms: int = REPLICATION_QUOTA_WINDOW_SIZE_MS
    limit_bytes_per_s: int = INT64_MAX
    # topic -> the partitions throttled on this broker (None: all)
    _throttled: dict[str, Throttled] = field(default_factory=dict)
    _rate: SampledStat | None = None

    def __post_init__(self) -> None:
        self._rate = SampledStat(self.samples, self.window_ms)

    def update(
        self,
        broker_configs: Mapping[str, str],
        topic_configs: Mapping[str, Mapping[str, str]],
        broker_id: int,
    ) -> None:
        """The rate from the broker's dynamic configs, the throttled partitions from each topic's."""
        raw = broker_configs.get(self.rate_config)
        self.limit_bytes_per_s = int(raw) if raw is not None and raw.strip().isdigit() else INT64_MAX
        throttled: dict[str, Throttled] = {}
        for topic, configs in topic_configs.items():
            value = configs.get(self.replicas_config, "")
            if value.strip():
                partitions = throttled_partitions(value, broker_id)
                if partitions is ALL_PARTITIONS or partitions:
                    throttled[topic] = partitions
        self._throttled = throttled

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._throttled:
            return False
        partitions = self._throttled[topic]
        return partitions is ALL_PARTITIONS or partition in partitions

    def rate_bytes_per_s(self, now_ms: int) -> float:
        assert self._rate is not None
        return self._rate.simple_rate_per_s(now_ms)

    def is_quota_exceeded(self, now_ms: int) -> bool:
        """Sensor.checkQuotas: the measured rate is over the limit (never with the default limit)."""
        return self.limit_bytes_per_s < INT64_MAX and self.rate_bytes_per_s(now_ms) > self.limit_bytes_per_s

    def record(self, size_bytes: int, now_ms: int) -> None:
        """Bytes of throttled partitions sent (leader) or fetched (follower)."""
        assert self._rate is not None
        self._rate.record(size_bytes, now_ms)

    def should_throttle(self, topic: str, partition: int, in_sync: bool, now_ms: int) -> bool:
        """shouldLeaderThrottle / shouldFollowerThrottle: leave this partition's data out now."""
        return not in_sync and self.is_throttled(topic, partition) and self.is_quota_exceeded(now_ms)


def leader_quota() -> ReplicationQuotaManager:
    return ReplicationQuotaManager(LEADER_REPLICATION_THROTTLED_RATE, LEADER_REPLICATION_THROTTLED_REPLICAS)


def follower_quota() -> ReplicationQuotaManager:
    return ReplicationQuotaManager(
        FOLLOWER_REPLICATION_THROTTLED_RATE, FOLLOWER_REPLICATION_THROTTLED_REPLICAS
    )


__all__ = [
    "ReplicationQuotaManager",
    "follower_quota",
    "leader_quota",
    "throttled_partitions",
]
