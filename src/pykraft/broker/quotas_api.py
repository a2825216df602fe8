"""DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546.

DescribeClientQuotas is answered from the metadata image as Kafka's ClientQuotasImage.describe does:
filter components each name an entity type and match it exactly (a name), as the default (null) or as
any name (``MATCH_TYPE_SPECIFIED``, defaults included); ``strict`` also requires the entity to have no
other type. A bad filter is one top-level error with Kafka's message and no entries.

AlterClientQuotas goes to the active controller (controller/quotas.py), which answers per entry.
``partition_mutations`` counts what CreateTopics / CreatePartitions / DeleteTopics did for the
``controller_mutation_rate`` quota.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.admin.client_quotas import AlterClientQuotasResponse, DescribeClientQuotasResponse

from pykraft.broker.handlers import TopicView
from pykraft.controller.quotas import ClientQuotaAlteration, ClientQuotaAlterationResult
from pykraft.core.errors import ErrorCode
from pykraft.core.quota_configs import CLIENT_ID, IP, USER, QuotaEntity, entity_pair_order
from pykraft.protocol.messages import ApiKey

MATCH_TYPE_EXACT = 0
MATCH_TYPE_DEFAULT = 1
MATCH_TYPE_SPECIFIED = 2


def _filter(request: Any) -> tuple[dict[str, str | None], set[str]] | str:
    """(exact matches by type, types matching any name), or the error message."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for component in request.components or []:
        kind, match = component.entity_type, component.match
        if not kind:
            return "Invalid empty entity type."
        if kind in exact or kind in specified:
            return f"Entity type {kind} cannot appear more than once in the filter."
        if kind not in (USER, CLIENT_ID, IP):
            return f"Unsupported entity type {kind}"
        if component.match_type == MATCH_TYPE_EXACT:
            if match is None:
                return "Request specified MATCH_TYPE_EXACT, but set match string to null."
            exact[kind] = match
        elif component.match_type == MATCH_TYPE_DEFAULT:
            if match is not None:
                return "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
            exact[kind] = None
        elif component.match_type == MATCH_TYPE_SPECIFIED:
            if match is not None:
                return "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
            specified.add(kind)
        else:
            return f"Unknown match type {component.match_type}"
    if (IP in exact or IP in specified) and ({USER, CLIENT_ID} & (set(exact) | specified)):
        return (
            "Invalid entity filter component combination, IP filter component should not be used with "
            "user or clientId filter component."
        )
    return exact, specified


def _matches(entity: QuotaEntity, exact: dict[str, str | None], specified: set[str], strict: bool) -> bool:
    names = dict(entity)
    if strict and len(names) != len(exact) + len(specified):
        return False
    for kind, name in exact.items():
        if kind not in names or names[kind] != name:
            return False
    return all(kind in names for kind in specified)


def describe_client_quotas(
    request: Any, version: int, quotas: Mapping[QuotaEntity, Mapping[str, float]]
) -> Any:
    found = _filter(request)
    if isinstance(found, str):
        # Kafka answers a bad filter with INVALID_REQUEST (an unknown type: UNSUPPORTED_VERSION).
        error = (
            ErrorCode.UNSUPPORTED_VERSION if found.startswith("Unsupported") else ErrorCode.INVALID_REQUEST
        )
        return describe_client_quotas_error(request, version, error, found)
    exact, specified = found
    entry_cls = DescribeClientQuotasResponse.EntryData
    entries = [
        entry_cls(
            entity=[entry_cls.EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
            values=[entry_cls.ValueData(key=key, value=value) for key, value in sorted(values.items())],
        )
        for entity, values in sorted(quotas.items(), key=lambda item: [entity_pair_order(p) for p in item[0]])
        if _matches(entity, exact, specified, bool(request.strict))
    ]
    return DescribeClientQuotasResponse(
        version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries
    )


def describe_client_quotas_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    return DescribeClientQuotasResponse(
        version=version, throttle_time_ms=0, error_code=error, error_message=message, entries=None
    )


def client_quota_alterations(request: Any) -> list[ClientQuotaAlteration]:
    return [
        ClientQuotaAlteration(
            tuple((e.entity_type, e.entity_name) for e in entry.entity),
            [(op.key, None if op.remove else float(op.value)) for op in entry.ops],
        )
        for entry in request.entries
    ]


def alter_client_quotas_response(
    request: Any, version: int, results: Iterable[ClientQuotaAlterationResult]
) -> Any:
    entry_cls = AlterClientQuotasResponse.EntryData
    return AlterClientQuotasResponse(
        version=version,
        throttle_time_ms=0,
        entries=[
            entry_cls(
                error_code=result.error_code,
                error_message=result.error_message,
                entity=[
                    entry_cls.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                    for e in entry.entity
                ],
            )
            for entry, result in zip(request.entries, results, strict=True)
        ],
    )


def alter_client_quotas_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    """The same error for every entry (NOT_CONTROLLER, CLUSTER_AUTHORIZATION_FAILED)."""
    results = [ClientQuotaAlterationResult(error, message) for _ in request.entries]
    return alter_client_quotas_response(request, version, results)


def partition_mutations(
    api_key: int, request: Any, response: Any, topics_before: Mapping[str, TopicView], default_partitions: int
) -> int:
    """Partitions a CreateTopics, CreatePartitions or DeleteTopics created or deleted (KIP-599, Kafka's
    ControllerMutationQuota.record): a new topic's partitions (``num.partitions`` for -1), the partitions
    CreatePartitions adds, a deleted topic's partitions, each only for a topic that succeeded."""
    if getattr(request, "validate_only", False):
        return 0
    if api_key == ApiKey.CREATE_TOPICS:
        wanted = {
            t.name: t.num_partitions if t.num_partitions > 0 else len(t.assignments) or default_partitions
            for t in request.topics
        }
        results = [(t.name, t.error_code) for t in response.topics]
    elif api_key == ApiKey.CREATE_PARTITIONS:
        wanted = {
            t.name: max(0, t.count - len(topics_before[t.name].partitions))
            for t in request.topics
            if t.name in topics_before
        }
        results = [(r.name, r.error_code) for r in response.results]
    else:
        wanted = {name: len(topic.partitions) for name, topic in topics_before.items()}
        results = [(r.name, r.error_code) for r in response.responses]
    return sum(wanted.get(name, 0) for name, error in results if error == ErrorCode.NONE and name)
