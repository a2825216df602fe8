"""ClientQuotaControlManager (KIP-546): client quotas as ClientQuotaRecords in the metadata log.

AlterClientQuotas (49), as Kafka's ClientQuotaControlManager answers it, per entity:

* a key named twice: INVALID_REQUEST "Duplicate quota key K not updating quota for this entity E";
* an entity named twice in one request: INVALID_REQUEST "Ignoring duplicate entity E" for the later one;
* an empty entity, a type named twice, an unknown type, an empty name: INVALID_REQUEST
  (core/quota_configs.check_entity);
* an unknown key, or a byte rate that is not a whole number: INVALID_REQUEST;
* otherwise one ClientQuotaRecord per key whose value changes (a removal of a key that is not set writes
  nothing). Kafka writes the records of the entities that passed even when another one failed
  (ControllerResult.atomicOf covers the request, not its validation), and so does this.

``validate_only`` checks and generates nothing. Replay is the only mutation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pykraft.core.errors import ErrorCode
from pykraft.core.quota_configs import QuotaEntity, check_entity, check_quota, describe_entity, quota_entity
from pykraft.metadata.image import client_quota_record, entity_of_record
from pykraft.metadata.records import ApiMessageAndVersion


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    """One entry of AlterClientQuotas: the entity as the request names it, and (key, value) per op
    (value None removes the key)."""

    entity: tuple[tuple[str, str | None], ...]
    ops: Sequence[tuple[str, float | None]]


@dataclass(frozen=True, slots=True)
class ClientQuotaAlterationResult:
    error_code: ErrorCode
    error_message: str | None = None


class ClientQuotaControlManager:
    def __init__(self) -> None:
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}

    def quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        return {entity: dict(values) for entity, values in self._quotas.items()}

    def restore(self, quotas: dict[QuotaEntity, dict[str, float]]) -> None:
        self._quotas = {entity: dict(values) for entity, values in quotas.items()}

    def replay(self, record: Any) -> None:
        entity = entity_of_record(record)
        values = self._quotas.setdefault(entity, {})
        if record.remove:
            values.pop(record.key, None)
        else:
            values[record.key] = record.value
        if not values:
            del self._quotas[entity]

    def alter(
        self, alterations: Sequence[ClientQuotaAlteration], validate_only: bool
    ) -> tuple[list[ApiMessageAndVersion], list[ClientQuotaAlterationResult]]:
        records: list[ApiMessageAndVersion] = []
        results: list[ClientQuotaAlterationResult] = []
        seen: set[QuotaEntity] = set()
        for alteration in alterations:
            given = quota_entity(alteration.entity)
            if given in seen:
                duplicate = f"Ignoring duplicate entity {describe_entity(given)}"
                results.append(ClientQuotaAlterationResult(ErrorCode.INVALID_REQUEST, duplicate))
                continue
            seen.add(given)
            error, message, generated = self._alter_one(alteration)
            results.append(ClientQuotaAlterationResult(error, message))
            if error == ErrorCode.NONE and not validate_only:
                records.extend(generated)
        return records, results

    def _alter_one(
        self, alteration: ClientQuotaAlteration
    ) -> tuple[ErrorCode, str | None, list[ApiMessageAndVersion]]:
        error, message = check_entity(alteration.entity)
        if error != ErrorCode.NONE:
            return error, message, []
        entity = quota_entity(alteration.entity)
        wanted: dict[str, float | None] = {}
        for key, value in alteration.ops:
            if key in wanted:
                message = (
                    f"Duplicate quota key {key} not updating quota for this entity {describe_entity(entity)}"
                )
                return ErrorCode.INVALID_REQUEST, message, []
            wanted[key] = value
        current = self._quotas.get(entity, {})
        records = []
        for key, value in wanted.items():
            if value is None:
                if key in current:
                    records.append(client_quota_record(entity, key, None))
                continue
            error, message = check_quota(key, value)
            if error != ErrorCode.NONE:
                return error, message, []
            if current.get(key) != value:
                records.append(client_quota_record(entity, key, value))
        return ErrorCode.NONE, None, records
