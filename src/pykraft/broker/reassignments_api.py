"""AlterPartitionReassignments (45) and ListPartitionReassignments (46) requests and answers, pure (KIP-455).

The active controller decides (``ReplicationControlManager.alter_partition_reassignments`` /
``list_partition_reassignments``); this module turns a request into their input and their results into
the answer, for the controller that serves it and for a broker process that forwards it (which answers
NOT_CONTROLLER when no controller does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.protocol.admin import (
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
)

from pykraft.controller.replication import (
    OngoingTopicReassignment,
    ReassignableTopic,
    ReassignmentPartitionResult,
    ReassignmentTopicResult,
)
from pykraft.core.errors import ErrorCode

_TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_Ongoing = ListPartitionReassignmentsResponse.OngoingTopicReassignment


def reassignable_topics(request: Any) -> list[ReassignableTopic]:
    return [
        ReassignableTopic(
            t.name,
            [(p.partition_index, None if p.replicas is None else tuple(p.replicas)) for p in t.partitions],
        )
        for t in request.topics or []
    ]


def allow_replication_factor_change(request: Any, version: int) -> bool:
    """KIP-860 (v1): false refuses a target list of another size; v0 always allows it."""
    return True if version < 1 else bool(request.allow_replication_factor_change)


def alter_response(
    version: int,
    results: Iterable[ReassignmentTopicResult],
    *,
    allow_rf_change: bool = True,
    error: ErrorCode = ErrorCode.NONE,
    message: str | None = None,
) -> Any:
    return AlterPartitionReassignmentsResponse(
        version=version,
        throttle_time_ms=0,
        allow_replication_factor_change=allow_rf_change,
        error_code=error,
        error_message=message,
        responses=[
            _TopicResponse(
                name=t.name,
                partitions=[
                    _TopicResponse.ReassignablePartitionResponse(
                        partition_index=p.partition_index,
                        error_code=p.error_code,
                        error_message=p.error_message,
                    )
                    for p in t.partitions
                ],
            )
            for t in results
        ],
    )


def alter_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    """``error`` for every partition (NOT_CONTROLLER when no controller answered, an authorization
    refusal), and at the top level as Kafka's ControllerApis puts it."""
    return alter_response(
        version,
        [
            ReassignmentTopicResult(
                t.name, [ReassignmentPartitionResult(p.partition_index, error, message) for p in t.partitions]
            )
            for t in request.topics or []
        ],
        allow_rf_change=allow_replication_factor_change(request, version),
        error=error,
        message=message,
    )


def alter_errors(response: Any) -> list[int]:
    if response.error_code:
        return [response.error_code]
    return [p.error_code for t in response.responses for p in t.partitions]


def listed_topics(request: Any) -> dict[str, list[int]] | None:
    if request.topics is None:
        return None
    return {t.name: list(t.partition_indexes) for t in request.topics}


def list_response(
    version: int,
    topics: Iterable[OngoingTopicReassignment],
    error: ErrorCode = ErrorCode.NONE,
    message: str | None = None,
) -> Any:
    return ListPartitionReassignmentsResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        topics=[
            _Ongoing(
                name=t.name,
                partitions=[
                    _Ongoing.OngoingPartitionReassignment(
                        partition_index=p.partition_index,
                        replicas=list(p.replicas),
                        adding_replicas=list(p.adding_replicas),
                        removing_replicas=list(p.removing_replicas),
                    )
                    for p in t.partitions
                ],
            )
            for t in topics
        ],
    )


def list_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    return list_response(version, [], error, message)


def list_errors(response: Any) -> list[int]:
    return [response.error_code]


__all__ = [
    "allow_replication_factor_change",
    "alter_error",
    "alter_errors",
    "alter_response",
    "list_error",
    "list_errors",
    "list_response",
    "listed_topics",
    "reassignable_topics",
]
