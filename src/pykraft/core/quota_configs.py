"""Client quota entities and keys (KIP-546; Kafka's ClientQuotaEntity and QuotaConfigs).

A quota entity is a user, a client id, or a user and a client id, each named or the default (a name of
None, Kafka's ``<default>``). It is kept as a tuple of (entity type, name) pairs sorted by type, which is
what ClientQuotaRecord.Entity and the AlterClientQuotas/DescribeClientQuotas entities carry.

The keys and their types are Kafka's QuotaConfigs for users and client ids: two byte rates (LONG), the
request time percentage and the controller mutation rate (DOUBLE). Kafka's ``ip`` entities
(``connection_creation_rate``) are not served: pykraft does not rate-limit accepted connections, so an
alteration naming ``ip`` is refused rather than stored and ignored.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

from pykraft.core.errors import ErrorCode

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"

# Key -> True when Kafka's ConfigDef types it LONG (its value must be a whole number), False for DOUBLE.
QUOTA_KEYS: Final[dict[str, bool]] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}

# ((entity type, name or None for the default), ...), sorted by entity type.
QuotaEntity = tuple[tuple[str, str | None], ...]


def quota_entity(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    return tuple(sorted(pairs, key=entity_pair_order))


def entity_pair_order(pair: tuple[str, str | None]) -> tuple[str, bool, str]:
    """Orders (type, name) pairs by type, the default (None) before every name."""
    return pair[0], pair[1] is not None, pair[1] or ""


def describe_entity(entity: QuotaEntity) -> str:
    """Kafka's ClientQuotaEntity text for messages: ``user alice client-id <default>``."""
    return " ".join(f"{kind} {'<default>' if name is None else name}" for kind, name in entity)


def check_entity(pairs: Iterable[tuple[str, str | None]]) -> tuple[ErrorCode, str | None]:
    """Kafka's ClientQuotaControlManager.validateEntity and configKeysForEntityType, in its words."""
    seen: set[str] = set()
    for kind, name in pairs:
        if kind in seen:
            return (
                ErrorCode.INVALID_REQUEST,
                f"Invalid empty client quota entity, duplicate entity entry {kind}",
            )
        seen.add(kind)
        if kind == IP:
            return (
                ErrorCode.INVALID_REQUEST,
                "ip quotas (connection_creation_rate) are not supported by pykraft",
            )
        if kind not in (USER, CLIENT_ID):
            return ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {kind}"
        if name == "":
            return ErrorCode.INVALID_REQUEST, f"Empty {kind} not supported"
    if not seen:
        return ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"
    return ErrorCode.NONE, None


def check_quota(key: str, value: float) -> tuple[ErrorCode, str | None]:
    """Kafka's ClientQuotaControlManager.validateQuotaKeyValue: a known key, a whole number for LONGs."""
    is_long = QUOTA_KEYS.get(key)
    if is_long is None:
        return ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}"
    if math.isnan(value):
        # Not in Kafka's checks; a NaN quota would make every rate comparison false.
        return ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a number, not NaN"
    if is_long:
        epsilon = 1e-6
        if not math.isfinite(value) or abs(float(int(value + epsilon)) - value) > epsilon:
            return ErrorCode.INVALID_REQUEST, f"Configuration {key} must be a Long value"
    return ErrorCode.NONE, None
