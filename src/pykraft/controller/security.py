"""SCRAM credentials and ACLs in the metadata log (issue 16): Kafka's ScramControlManager and
AclControlManager. Both generate records without changing anything; ``replay`` is the only mutation.

AlterUserScramCredentials (51, KIP-554), per user, as Kafka answers it:

* an empty name: UNACCEPTABLE_CREDENTIAL "Username must not be empty";
* a user named twice in the request (deletions and upsertions together): DUPLICATE_RESOURCE for that
  user, and nothing of it is written;
* an unknown mechanism: UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism";
* iterations outside [4096, 16384] (KIP-554): UNACCEPTABLE_CREDENTIAL;
* deleting a credential that does not exist: RESOURCE_NOT_FOUND;
* otherwise one UserScramCredentialRecord (keys derived from the salted password) or
  RemoveUserScramCredentialRecord per alteration.

CreateAcls (30) writes one AccessControlEntryRecord per new ACL (an identical ACL already stored is a
success that writes nothing); DeleteAcls (31) writes one RemoveAccessControlEntryRecord per ACL a filter
matches.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pykraft.core.errors import ErrorCode
from pykraft.metadata.image import acl_record, scram_record
from pykraft.metadata.records import (
    ApiMessageAndVersion,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
)
from pykraft.security.acls import AclFilter, StandardAcl, acl_from_record, validate_new_acl
from pykraft.security.scram import (
    ScramCredential,
    ScramMechanism,
    check_iterations,
    credential_from_salted_password,
)


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class ScramAlterationResult:
    user: str
    error_code: ErrorCode
    error_message: str | None = None


class ScramControlManager:
    def __init__(self) -> None:
        self._credentials: dict[tuple[str, int], ScramCredential] = {}

    def credentials(self) -> dict[tuple[str, int], ScramCredential]:
        return dict(self._credentials)

    def restore(self, credentials: dict[tuple[str, int], ScramCredential]) -> None:
        self._credentials = dict(credentials)

    def replay(self, message: Any) -> None:
        if isinstance(message, RemoveUserScramCredentialRecord):
            self._credentials.pop((message.name, message.mechanism), None)
            return
        self._credentials[(message.name, message.mechanism)] = ScramCredential(
            bytes(message.salt), bytes(message.stored_key), bytes(message.server_key), message.iterations
        )

    def alter(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> tuple[list[ApiMessageAndVersion], list[ScramAlterationResult]]:
        alterations: list[ScramDeletion | ScramUpsertion] = [*deletions, *upsertions]
        counts: dict[str, int] = {}
        for alteration in alterations:
            counts[alteration.name] = counts.get(alteration.name, 0) + 1
        errors: dict[str, tuple[ErrorCode, str]] = {}
        records: dict[str, list[ApiMessageAndVersion]] = {}
        order: list[str] = []
        for alteration in alterations:
            name = alteration.name
            if name not in order:
                order.append(name)
            if name in errors:
                continue
            error = self._check(alteration, counts[name])
            if error is not None:
                errors[name] = error
                continue
            if isinstance(alteration, ScramDeletion):
                record = ApiMessageAndVersion.of(
                    RemoveUserScramCredentialRecord(name=name, mechanism=alteration.mechanism)
                )
            else:
                credential = credential_from_salted_password(
                    ScramMechanism(alteration.mechanism),
                    alteration.salt,
                    alteration.salted_password,
                    alteration.iterations,
                )
                record = scram_record(name, alteration.mechanism, credential)
            records.setdefault(name, []).append(record)
        written = [r for name in order if name not in errors for r in records.get(name, [])]
        results = [
            ScramAlterationResult(name, *errors[name])
            if name in errors
            else ScramAlterationResult(name, ErrorCode.NONE)
            for name in order
        ]
        return written, results

    def _check(self, alteration: ScramDeletion | ScramUpsertion, count: int) -> tuple[ErrorCode, str] | None:
        if not alteration.name:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        if count > 1:
            return (
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
        if alteration.mechanism not in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        if isinstance(alteration, ScramDeletion):
            if (alteration.name, alteration.mechanism) not in self._credentials:
                return (
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
            return None
        too = check_iterations(alteration.iterations)
        if too is not None:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, too
        if not alteration.salt or not alteration.salted_password:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
        return None


@dataclass(frozen=True, slots=True)
class AclCreationResult:
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class AclDeletionResult:
    """One filter's outcome: its error, or the ACLs it removed."""

    error_code: ErrorCode
    error_message: str | None
    matching: tuple[StandardAcl, ...] = ()


class AclControlManager:
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._acls: dict[uuid.UUID, StandardAcl] = {}

    def acls(self) -> dict[uuid.UUID, StandardAcl]:
        return dict(self._acls)

    def restore(self, acls: dict[uuid.UUID, StandardAcl]) -> None:
        self._acls = dict(acls)

    def replay(self, message: Any) -> None:
        if isinstance(message, RemoveAccessControlEntryRecord):
            self._acls.pop(message.id, None)
            return
        acl_id, acl = acl_from_record(message)
        self._acls[acl_id] = acl

    def create(
        self, acls: Sequence[StandardAcl]
    ) -> tuple[list[ApiMessageAndVersion], list[AclCreationResult]]:
        existing = set(self._acls.values())
        records: list[ApiMessageAndVersion] = []
        results: list[AclCreationResult] = []
        for acl in acls:
            invalid = validate_new_acl(acl)
            if invalid is not None:
                results.append(AclCreationResult(*invalid))
                continue
            if acl not in existing:
                existing.add(acl)
                acl_id = uuid.UUID(int=self._rng.getrandbits(128), version=4)
                records.append(acl_record(acl_id, acl))
            results.append(AclCreationResult(ErrorCode.NONE))
        return records, results

    def delete(
        self, filters: Sequence[AclFilter]
    ) -> tuple[list[ApiMessageAndVersion], list[AclDeletionResult]]:
        removed: set[uuid.UUID] = set()
        records: list[ApiMessageAndVersion] = []
        results: list[AclDeletionResult] = []
        for acl_filter in filters:
            invalid = acl_filter.validate()
            if invalid is not None:
                results.append(AclDeletionResult(ErrorCode.INVALID_REQUEST, invalid))
                continue
            matching = []
            for acl_id, acl in sorted(self._acls.items()):
                if acl_filter.matches(acl):
                    matching.append(acl)
                    if acl_id not in removed:
                        removed.add(acl_id)
                        records.append(ApiMessageAndVersion.of(RemoveAccessControlEntryRecord(id=acl_id)))
            results.append(AclDeletionResult(ErrorCode.NONE, None, tuple(matching)))
        return records, results
