"""ACLs and the authorizer (issue 16), pure: Kafka's StandardAuthorizer semantics over the metadata image.

An ACL is Kafka's AccessControlEntryRecord: a resource pattern (type, name, LITERAL or PREFIXED), a
principal (``User:alice`` or ``User:*``), a host (an address or ``*``), an operation and ALLOW or DENY.
``authorize`` decides one (principal, host, operation, resource) the way Kafka's ``StandardAuthorizerData``
does:

1. a super user (``super.users``) is allowed everything;
2. the ACLs that apply are those whose pattern matches the resource (a LITERAL name equal to it, the
   LITERAL wildcard ``*``, or a PREFIXED name it starts with), whose principal is the caller's or
   ``User:*`` and whose host is the caller's or ``*``;
3. any applying DENY for the operation (or ALL) denies; then any applying ALLOW for the operation, for
   ALL, or for an operation that implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS
   implies DESCRIBE_CONFIGS) allows;
4. when no ACL at all matches the resource, ``allow.everyone.if.no.acl.found`` decides; otherwise denied.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from pykraft.core.errors import ErrorCode

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_RESOURCE_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Kafka AclEntry / StandardAuthorizerData: an ALLOW of any of these also allows the key.
IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class StandardAcl:
    """One ACL, as AccessControlEntryRecord holds it (its Id is the key it is stored under)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def matches_resource(self, resource_type: int, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD_RESOURCE)
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls / DeleteAcls filter (Kafka AclBindingFilter); None and ANY match anything."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def validate(self) -> str | None:
        """INVALID_REQUEST's message for a filter Kafka refuses, else None."""
        if (
            self.resource_type == ResourceType.UNKNOWN
            or self.resource_type not in ResourceType._value2member_map_
        ):
            return "Invalid resource type"
        if (
            self.pattern_type == PatternType.UNKNOWN
            or self.pattern_type not in PatternType._value2member_map_
        ):
            return "Invalid pattern type"
        if self.operation == AclOperation.UNKNOWN or self.operation not in AclOperation._value2member_map_:
            return "Invalid operation"
        if (
            self.permission_type == AclPermissionType.UNKNOWN
            or self.permission_type not in AclPermissionType._value2member_map_
        ):
            return "Invalid permission type"
        return None

    def matches(self, acl: StandardAcl) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            # Every ACL that would apply to the named resource: literal, wildcard or prefixed.
            if self.resource_name is not None and not (
                (
                    acl.pattern_type == PatternType.LITERAL
                    and acl.resource_name in (self.resource_name, WILDCARD_RESOURCE)
                )
                or (
                    acl.pattern_type == PatternType.PREFIXED
                    and self.resource_name.startswith(acl.resource_name)
                )
            ):
                return False
        else:
            if self.pattern_type != PatternType.ANY and acl.pattern_type != self.pattern_type:
                return False
            if self.resource_name is not None and acl.resource_name != self.resource_name:
                return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation != AclOperation.ANY and acl.operation != self.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or acl.permission_type == self.permission_type


def parse_principal(text: str) -> tuple[str, str] | None:
    """(type, name) of ``Type:name``, or None (Kafka SecurityUtils.parseKafkaPrincipal)."""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name:
        return None
    return kind, name


def validate_new_acl(acl: StandardAcl) -> tuple[ErrorCode, str] | None:
    """Kafka AclControlManager.validateNewAcl: (INVALID_REQUEST, why) for an ACL that cannot be stored."""
    if (
        acl.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN)
        or acl.resource_type not in ResourceType._value2member_map_
    ):
        return ErrorCode.INVALID_REQUEST, "Invalid resourceType " + str(acl.resource_type)
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return ErrorCode.INVALID_REQUEST, "Invalid patternType " + str(acl.pattern_type)
    if (
        acl.operation in (AclOperation.ANY, AclOperation.UNKNOWN)
        or acl.operation not in AclOperation._value2member_map_
    ):
        return ErrorCode.INVALID_REQUEST, "Invalid operation " + str(acl.operation)
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return ErrorCode.INVALID_REQUEST, "Invalid permissionType " + str(acl.permission_type)
    if not acl.resource_name:
        return ErrorCode.INVALID_REQUEST, "Resource name should not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_RESOURCE_NAME:
        return (
            ErrorCode.INVALID_REQUEST,
            f"The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}",
        )
    if parse_principal(acl.principal) is None:
        return ErrorCode.INVALID_REQUEST, f"Could not parse principal from `{acl.principal}`"
    if not acl.host:
        return ErrorCode.INVALID_REQUEST, "Invalid host"
    return None


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    """``super.users`` (``User:a;User:b``) and ``allow.everyone.if.no.acl.found``."""

    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def authorize(
    acls: Iterable[StandardAcl],
    config: AuthorizerConfig,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    resource_name: str,
) -> bool:
    """Whether ``principal`` connecting from ``host`` may do ``operation`` on the resource (rules 1-4)."""
    if principal in config.super_users:
        return True
    implied = IMPLIED_BY.get(operation, frozenset())
    any_for_resource = False
    allowed = False
    for acl in acls:
        if not acl.matches_resource(resource_type, resource_name):
            continue
        any_for_resource = True
        if acl.principal not in (principal, WILDCARD_PRINCIPAL) or acl.host not in (host, WILDCARD_HOST):
            continue
        if acl.permission_type == AclPermissionType.DENY:
            if acl.operation in (operation, AclOperation.ALL):
                return False
        elif acl.operation in (operation, AclOperation.ALL) or acl.operation in implied:
            allowed = True
    if allowed:
        return True
    return not any_for_resource and config.allow_everyone_if_no_acl_found


def acl_from_record(record: Any) -> tuple[uuid.UUID, StandardAcl]:
    """(Id, ACL) of an AccessControlEntryRecord."""
    acl = StandardAcl(
        resource_type=int(record.resource_type),
        resource_name=str(record.resource_name),
        pattern_type=int(record.pattern_type),
        principal=str(record.principal),
        host=str(record.host),
        operation=int(record.operation),
        permission_type=int(record.permission_type),
    )
    return (record.id if record.id is not None else uuid.UUID(int=0)), acl


# --- the request being served -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestAuthorization:
    """Who sends the request being served, and the ACLs to judge it by (Kafka's RequestContext plus the
    authorizer). The shell sets it per request with ``authorize_request``; the handlers ask ``allowed``
    at the points where Kafka's KafkaApis calls its authorizer."""

    principal: str
    host: str
    acls: Collection[StandardAcl]
    config: AuthorizerConfig

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return authorize(self.acls, self.config, self.principal, self.host, operation, resource_type, name)

    def allows_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: some resource of the type is allowed, judged on the names
        the ACLs themselves carry (an ALLOW for the principal that no DENY overrides)."""
        if self.principal in self.config.super_users:
            return True
        of_type = [a for a in self.acls if a.resource_type == resource_type]
        if not of_type:
            return self.config.allow_everyone_if_no_acl_found
        return any(
            acl.permission_type == AclPermissionType.ALLOW
            and self.allows(operation, resource_type, acl.resource_name)
            for acl in of_type
        )


# None while no authorizer is configured: everything is allowed, as in Kafka without authorizer.class.name.
_CURRENT: ContextVar[RequestAuthorization | None] = ContextVar("pykraft_request_authorization", default=None)


def authorize_request(authorization: RequestAuthorization | None) -> None:
    """The request now served in this (asyncio) context is judged by ``authorization``."""
    _CURRENT.set(authorization)


def allowed(operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    authorization = _CURRENT.get()
    return authorization is None or authorization.allows(operation, resource_type, name)


def allowed_on_any(operation: AclOperation, resource_type: ResourceType) -> bool:
    authorization = _CURRENT.get()
    return authorization is None or authorization.allows_any(operation, resource_type)


def allowed_on_cluster(operation: AclOperation) -> bool:
    return allowed(operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)


# Kafka's AclEntry.supportedOperations: what KIP-430's authorized-operations bit fields report, per
# resource type (groups gained the config operations with KIP-848's group configs).
SUPPORTED_OPERATIONS: Mapping[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def authorized_operations(resource_type: ResourceType, name: str) -> frozenset[AclOperation]:
    """The operations on the resource the request's principal is allowed (Kafka's
    AuthHelper.authorizedOperations: each supported operation judged on the LITERAL resource; every
    supported one without an authorizer)."""
    return frozenset(op for op in SUPPORTED_OPERATIONS[resource_type] if allowed(op, resource_type, name))


def to_32_bit_field(operations: Iterable[int]) -> int:
    """Kafka's Utils.to32BitField: bit ``code`` set for each operation, as a signed int32."""
    value = 0
    for code in operations:
        value |= 1 << code
    return value - (1 << 32) if value >= 1 << 31 else value


def principal_of_request() -> str | None:
    authorization = _CURRENT.get()
    return None if authorization is None else authorization.principal
