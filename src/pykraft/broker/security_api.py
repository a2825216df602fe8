"""The security admin APIs' requests and answers (issue 16), pure: DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51) of KIP-554, DescribeAcls (29), CreateAcls (30) and DeleteAcls (31).

Describe requests are answered by any broker from its metadata image; the alterations are the active
controller's (``controller.security``), so this module only turns requests into its inputs and its
results into answers. Without an authorizer the ACL APIs answer SECURITY_DISABLED, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.admin.acl import (
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeAclsResponse,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponse,
)

from pykraft.controller.security import (
    AclCreationResult,
    AclDeletionResult,
    ScramAlterationResult,
    ScramDeletion,
    ScramUpsertion,
)
from pykraft.core.errors import ErrorCode
from pykraft.security.acls import AclFilter, PatternType, StandardAcl
from pykraft.security.scram import ScramCredential

NO_AUTHORIZER_MESSAGE = "No Authorizer is configured."

# --- SCRAM ------------------------------------------------------------------------------------------------


def describe_user_scram_credentials(
    request: Any, version: int, credentials: Mapping[tuple[str, int], ScramCredential]
) -> Any:
    """DescribeUserScramCredentials: every user with a credential when none is named; a user named twice
    is DUPLICATE_RESOURCE and one without credentials RESOURCE_NOT_FOUND (Kafka's messages)."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (user, mechanism), credential in sorted(credentials.items()):
        by_user.setdefault(user, []).append((mechanism, credential.iterations))
    names = [u.name for u in (request.users or [])]
    results: list[Any] = []
    Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
    Info = Result.CredentialInfo
    for name in names if names else sorted(by_user):
        if names.count(name) > 1:
            error, message = (
                ErrorCode.DUPLICATE_RESOURCE,
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}",
            )
        elif name not in by_user:
            error, message = (
                ErrorCode.RESOURCE_NOT_FOUND,
                f"Attempt to describe a user credential that does not exist: {name}",
            )
        else:
            error, message = ErrorCode.NONE, None
        if any(r.user == name for r in results):
            continue
        infos = [Info(mechanism=m, iterations=i) for m, i in by_user.get(name, [])] if error == 0 else []
        results.append(Result(user=name, error_code=error, error_message=message, credential_infos=infos))
    return DescribeUserScramCredentialsResponse(
        version=version, throttle_time_ms=0, error_code=0, error_message=None, results=results
    )


def scram_alterations(request: Any) -> tuple[list[ScramDeletion], list[ScramUpsertion]]:
    deletions = [ScramDeletion(d.name, d.mechanism) for d in request.deletions or []]
    upsertions = [
        ScramUpsertion(
            u.name, u.mechanism, u.iterations, bytes(u.salt or b""), bytes(u.salted_password or b"")
        )
        for u in request.upsertions or []
    ]
    return deletions, upsertions


def alter_user_scram_credentials_response(version: int, results: Iterable[ScramAlterationResult]) -> Any:
    Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    return AlterUserScramCredentialsResponse(
        version=version,
        throttle_time_ms=0,
        results=[
            Result(user=r.user, error_code=r.error_code, error_message=r.error_message) for r in results
        ],
    )


def alter_user_scram_credentials_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    """The same error for every user named in the request (e.g. NOT_CONTROLLER)."""
    users: list[str] = []
    for alteration in [*(request.deletions or []), *(request.upsertions or [])]:
        if alteration.name not in users:
            users.append(alteration.name)
    return alter_user_scram_credentials_response(
        version, [ScramAlterationResult(u, error, message) for u in users]
    )


# --- ACLs -------------------------------------------------------------------------------------------------


def _pattern_type(request_or_item: Any, version: int) -> int:
    # v0 has no pattern type: a v0 ACL is LITERAL and a v0 filter matches LITERAL only.
    return int(request_or_item.pattern_type_filter) if version >= 1 else int(PatternType.LITERAL)


def acls_to_create(request: Any) -> list[StandardAcl]:
    return [
        StandardAcl(
            resource_type=c.resource_type,
            resource_name=c.resource_name,
            pattern_type=c.resource_pattern_type,
            principal=c.principal,
            host=c.host,
            operation=c.operation,
            permission_type=c.permission_type,
        )
        for c in request.creations or []
    ]


def create_acls_response(version: int, results: Iterable[AclCreationResult]) -> Any:
    Result = CreateAclsResponse.AclCreationResult
    return CreateAclsResponse(
        version=version,
        throttle_time_ms=0,
        results=[Result(error_code=r.error_code, error_message=r.error_message) for r in results],
    )


def create_acls_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    return create_acls_response(version, [AclCreationResult(error, message) for _ in request.creations or []])


def _filter(item: Any, version: int) -> AclFilter:
    return AclFilter(
        resource_type=item.resource_type_filter,
        resource_name=item.resource_name_filter,
        pattern_type=_pattern_type(item, version),
        principal=item.principal_filter,
        host=item.host_filter,
        operation=item.operation,
        permission_type=item.permission_type,
    )


def delete_acls_filters(request: Any, version: int) -> list[AclFilter]:
    return [_filter(f, version) for f in request.filters or []]


def delete_acls_response(version: int, results: Iterable[AclDeletionResult]) -> Any:
    Result = DeleteAclsResponse.DeleteAclsFilterResult
    Matching = Result.DeleteAclsMatchingAcl
    return DeleteAclsResponse(
        version=version,
        throttle_time_ms=0,
        filter_results=[
            Result(
                error_code=r.error_code,
                error_message=r.error_message,
                matching_acls=[
                    Matching(
                        error_code=0,
                        error_message=None,
                        resource_type=a.resource_type,
                        resource_name=a.resource_name,
                        pattern_type=a.pattern_type,
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission_type,
                    )
                    for a in r.matching
                ],
            )
            for r in results
        ],
    )


def delete_acls_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    return delete_acls_response(version, [AclDeletionResult(error, message) for _ in request.filters or []])


def describe_acls(request: Any, version: int, acls: Iterable[StandardAcl] | None) -> Any:
    """DescribeAcls: the ACLs the filter matches, grouped by resource pattern; SECURITY_DISABLED without
    an authorizer (``acls`` None)."""
    if acls is None:
        return _describe_acls_answer(version, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_MESSAGE, {})
    acl_filter = AclFilter(
        resource_type=request.resource_type_filter,
        resource_name=request.resource_name_filter,
        pattern_type=_pattern_type(request, version),
        principal=request.principal_filter,
        host=request.host_filter,
        operation=request.operation,
        permission_type=request.permission_type,
    )
    invalid = acl_filter.validate()
    if invalid is not None:
        return _describe_acls_answer(version, ErrorCode.INVALID_REQUEST, invalid, {})
    grouped: dict[tuple[int, str, int], list[StandardAcl]] = {}
    for acl in acls:
        if acl_filter.matches(acl):
            grouped.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(acl)
    return _describe_acls_answer(version, ErrorCode.NONE, None, grouped)


def _describe_acls_answer(
    version: int,
    error: ErrorCode,
    message: str | None,
    grouped: Mapping[tuple[int, str, int], list[StandardAcl]],
) -> Any:
    Resource = DescribeAclsResponse.DescribeAclsResource
    Description = Resource.AclDescription
    return DescribeAclsResponse(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        resources=[
            Resource(
                resource_type=resource_type,
                resource_name=name,
                pattern_type=pattern_type,
                acls=[
                    Description(
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission_type,
                    )
                    for a in sorted(acls, key=lambda a: (a.principal, a.host, a.operation, a.permission_type))
                ],
            )
            for (resource_type, name, pattern_type), acls in sorted(grouped.items())
        ],
    )
