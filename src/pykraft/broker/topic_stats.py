"""Kafka's BrokerTopicStats (issue 18): per-topic and all-topics counters of the produce and fetch paths.

Pure: the produce handler adds once per partition of a request and the shell once per partition of the
Fetch response it sends, never per record (the appended batch's offsets give its record count), so the
hot path pays a dict lookup and a few additions. The metrics endpoint (``io/metrics.py``) reads them as
Kafka's ``kafka.server:type=BrokerTopicMetrics`` meters, with a ``topic`` label and without one for all
topics, as the JMX exporter shows Kafka's.
"""

from __future__ import annotations

from collections.abc import Container

from pykraft.core.errors import ErrorCode
from pykraft.protocol.fetch import FetchResponseData


class TopicCounters:
    """One topic's meters (or all topics'), Kafka's names without ``PerSec``."""

    __slots__ = (
        "messages_in",
        "bytes_in",
        "bytes_out",
        "total_produce_requests",
        "failed_produce_requests",
        "total_fetch_requests",
        "failed_fetch_requests",
    )

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        # Per partition of a request, as Kafka's ReplicaManager marks them.
        self.total_produce_requests = 0
        self.failed_produce_requests = 0
        self.total_fetch_requests = 0
        self.failed_fetch_requests = 0


class BrokerTopicStats:
    def __init__(self) -> None:
        self.all_topics = TopicCounters()
        self.topics: dict[str, TopicCounters] = {}
        # Bytes sent to followers (Kafka's ReplicationBytesOutPerSec; all topics only, as in Kafka).
        self.replication_bytes_out = 0

    def _counters(self, topic: str, known: bool) -> tuple[TopicCounters, ...]:
        """The all-topics counters, and the topic's when the topic exists: a name nobody created (a
        typo, a fuzzer) never becomes a series of its own."""
        if not known:
            return (self.all_topics,)
        counters = self.topics.get(topic)
        if counters is None:
            counters = self.topics[topic] = TopicCounters()
        return (self.all_topics, counters)

    def record_produce(
        self, topic: str, known: bool, appended_bytes: int, appended_messages: int, failed: bool
    ) -> None:
        """One partition of a Produce: what was appended (0 and 0 when it was refused)."""
        for counters in self._counters(topic, known):
            counters.total_produce_requests += 1
            if failed:
                counters.failed_produce_requests += 1
            else:
                counters.messages_in += appended_messages
                counters.bytes_in += appended_bytes

    def record_fetch(
        self, response: FetchResponseData, from_follower: bool, known_topics: Container[str]
    ) -> None:
        """The Fetch response being sent: record bytes out per partition (a follower's count as
        replication bytes too, as Kafka counts them)."""
        for topic in response.topics:
            counters = self._counters(topic.topic, topic.topic in known_topics)
            for partition in topic.partitions:
                size = sum(len(chunk) for chunk in partition.records) if partition.records else 0
                failed = partition.error_code != ErrorCode.NONE
                for c in counters:
                    c.total_fetch_requests += 1
                    c.bytes_out += size
                    if failed:
                        c.failed_fetch_requests += 1
                if from_follower:
                    self.replication_bytes_out += size

    def retain_topics(self, existing: Container[str]) -> None:
        """Forget deleted topics' series (Kafka removes a topic's meters when it is deleted); the
        all-topics counters keep what they counted."""
        for name in [name for name in self.topics if name not in existing]:
            del self.topics[name]
