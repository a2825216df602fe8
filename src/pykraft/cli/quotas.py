"""Client quotas for ``pykraft configs`` (KIP-546), as kafka-configs takes and prints them:

    pykraft configs --bootstrap-server H:P --entity-type users --entity-name alice \\
        --entity-type clients --entity-name app --alter --add-config producer_byte_rate=1048576
    pykraft configs --bootstrap-server H:P --entity-type clients --entity-default --describe

Each ``--entity-type users|clients`` pairs with the next ``--entity-name NAME`` or ``--entity-default``;
a type with neither describes every entity of that type. ``--alter`` sends AlterClientQuotas (set for
``--add-config``, remove for ``--delete-config``), ``--describe`` DescribeClientQuotas (strict: only
entities of exactly the types named).
"""

from __future__ import annotations

from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

from pykraft.core.errors import ErrorCode
from pykraft.core.quota_configs import CLIENT_ID, USER
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError

DESCRIBE_CLIENT_QUOTAS_VERSION = 1
ALTER_CLIENT_QUOTAS_VERSION = 1
# kafka-configs' entity types and the quota entity types they name.
QUOTA_ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}
_NAMES = {USER: "user-principal", CLIENT_ID: "client-id"}
_ANY = object()  # a type named without --entity-name or --entity-default: every entity of it


def _error(code: int, message: str | None) -> str:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{name}: {message}" if message else name


def quota_entity_of(types: list[str], names: list[str | None]) -> list[tuple[str, object]]:
    """Pairs each --entity-type with the --entity-name / --entity-default given in the same order."""
    if len(set(types)) != len(types):
        raise BrokerConnectionError("--entity-type: each of users and clients at most once")
    if len(names) > len(types):
        raise BrokerConnectionError("more --entity-name/--entity-default than --entity-type")
    return [(QUOTA_ENTITY_TYPES[t], names[i] if i < len(names) else _ANY) for i, t in enumerate(types)]


def describe_entity(entity: list[tuple[str, str | None]]) -> str:
    """kafka-configs' words: ``user-principal 'alice', client-id 'app'``, ``the default client-id``."""
    return ", ".join(
        f"the default {_NAMES.get(kind, kind)}" if name is None else f"{_NAMES.get(kind, kind)} '{name}'"
        for kind, name in sorted(entity, key=lambda pair: pair[0] != USER)
    )


def describe_quotas(conn: BrokerConnection, entity: list[tuple[str, object]]) -> list[str]:
    component = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest(
        components=[
            component(entity_type=kind, match_type=2, match=None)
            if name is _ANY
            else component(entity_type=kind, match_type=1 if name is None else 0, match=name)
            for kind, name in entity
        ],
        strict=True,
    )
    response = conn.request(request, DescribeClientQuotasResponse, DESCRIBE_CLIENT_QUOTAS_VERSION)
    if response.error_code:
        raise BrokerConnectionError(f"describe: {_error(response.error_code, response.error_message)}")
    lines = []
    for entry in response.entries or []:
        values = ",".join(f"{v.key}={v.value}" for v in entry.values)
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity]
        lines.append(f"Quota configs for {describe_entity(pairs)} are {values}")
    return lines


def alter_quotas(
    conn: BrokerConnection, entity: list[tuple[str, object]], add: dict[str, str], delete: list[str]
) -> str:
    if any(name is _ANY for _kind, name in entity):
        raise BrokerConnectionError("--alter names each entity: --entity-name NAME or --entity-default")
    named = [(kind, name if isinstance(name, str) else None) for kind, name in entity]
    op = AlterClientQuotasRequest.EntryData.OpData
    ops = []
    for key, text in add.items():
        try:
            value = float(text)
        except ValueError:
            raise BrokerConnectionError(f"--add-config: {key}={text!r} is not a number") from None
        ops.append(op(key=key, value=value, remove=False))
    ops += [op(key=key, value=0.0, remove=True) for key in delete]
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            entry(
                entity=[entry.EntityData(entity_type=kind, entity_name=name) for kind, name in named],
                ops=ops,
            )
        ],
        validate_only=False,
    )
    response = conn.request(request, AlterClientQuotasResponse, ALTER_CLIENT_QUOTAS_VERSION)
    result = response.entries[0]
    if result.error_code:
        raise BrokerConnectionError(f"alter: {_error(result.error_code, result.error_message)}")
    return f"Completed updating config for {describe_entity(named)}."
