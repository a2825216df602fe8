"""CreatePartitions (37, KIP-195) requests and answers, pure.

The partitions are the active controller's to add (``ReplicationControlManager.create_partitions``); this
module turns a request into its input and its results into the answer, for the controller that serves it
and for a broker process that forwards it (and must answer NOT_CONTROLLER when no controller does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.admin import CreatePartitionsResponse

from pykraft.controller.replication import CreatePartitionsTopic, CreatePartitionsTopicResult
from pykraft.core.errors import ErrorCode
from pykraft.metadata.image import MetadataImage

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def topics_to_grow(request: Any) -> list[CreatePartitionsTopic]:
    """The request's topics; a null assignment list lets the controller place the new partitions."""
    return [
        CreatePartitionsTopic(
            name=t.name,
            count=t.count,
            assignments=None
            if t.assignments is None
            else tuple(tuple(a.broker_ids or ()) for a in t.assignments),
        )
        for t in request.topics or []
    ]


def create_partitions_response(version: int, results: Iterable[CreatePartitionsTopicResult]) -> Any:
    return CreatePartitionsResponse(
        version=version,
        throttle_time_ms=0,
        results=[
            Result(name=r.name, error_code=r.error_code, error_message=r.error_message) for r in results
        ],
    )


def create_partitions_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    """``error`` for every topic of ``request`` (NOT_CONTROLLER when no controller answered in time)."""
    return create_partitions_response(
        version, [CreatePartitionsTopicResult(t.name, error, message) for t in request.topics or []]
    )


def result_errors(response: Any) -> list[int]:
    return [r.error_code for r in response.results]


def grown_counts(request: Any, response: Any) -> Mapping[str, int]:
    """The partition count each topic the answer grew now has (nothing for a validate-only request)."""
    if request.validate_only:
        return {}
    counts = {t.name: t.count for t in request.topics or []}
    return {
        r.name: counts[r.name]
        for r in response.results
        if r.error_code == ErrorCode.NONE and r.name in counts
    }


def has_partitions(image: MetadataImage, counts: Mapping[str, int]) -> bool:
    """Whether ``image`` shows each topic with at least its count of partitions."""
    for name, count in counts.items():
        topic = image.topics.get_topic(name)
        if topic is None or len(topic.partitions) < count:
            return False
    return True


__all__ = [
    "create_partitions_error",
    "create_partitions_response",
    "grown_counts",
    "has_partitions",
    "result_errors",
    "topics_to_grow",
]
