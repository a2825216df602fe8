"""Topic-partition helpers shared by the layers above."""

from __future__ import annotations

from collections.abc import Iterable


def by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """{topic: [partition, ...]} in the order given: the shape of most Kafka requests' topic arrays."""
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return out
