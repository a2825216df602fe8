"""``pykraft scram`` and ``pykraft acls``: SCRAM credentials and ACLs of a running cluster.

- ``scram add --user U --mechanism SCRAM-SHA-512 --password P [--iterations N]``,
  ``scram delete --user U --mechanism M``, ``scram describe [--user U ...]``: AlterUserScramCredentials
  (51) and DescribeUserScramCredentials (50), KIP-554 (Kafka's ``kafka-configs --entity-type users``).
  The password is salted here (PBKDF2, a random salt); only the salted password crosses the network.
- ``acls add|remove|list``, shaped like ``kafka-acls``: ``--allow-principal`` / ``--deny-principal``,
  ``--operation``, ``--topic`` / ``--group`` / ``--transactional-id`` / ``--cluster``,
  ``--resource-pattern-type literal|prefixed``, ``--allow-host`` / ``--deny-host``.

``--command-config FILE`` holds the client properties to connect with (``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.truststore.location``), as Kafka's tools take them.
Exit status 1 with one line on failure.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from typing import Any

from kafka.protocol.admin.acl import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError, ClientSecurity
from pykraft.security.acls import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.security.scram import SCRAM_MIN_ITERATIONS, ScramMechanism, salted_password

SALT_BYTES = 32


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _connect(args: argparse.Namespace) -> BrokerConnection:
    security = ClientSecurity.from_file(args.command_config) if args.command_config else None
    return BrokerConnection.to(args.bootstrap_server, client_id="pykraft-security", security=security)


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.from_mechanism_name(name)
    if mechanism is ScramMechanism.UNKNOWN:
        raise BrokerConnectionError(f"--mechanism: {name!r} is not SCRAM-SHA-256 or SCRAM-SHA-512")
    return mechanism


# --- scram ------------------------------------------------------------------------------------------------


def _scram(args: argparse.Namespace) -> int:
    with _connect(args) as conn:
        if args.scram_command == "describe":
            request = DescribeUserScramCredentialsRequest(
                users=[DescribeUserScramCredentialsRequest.UserName(name=u) for u in args.user or []] or None
            )
            response = conn.request(request, DescribeUserScramCredentialsResponse, 0)
            if response.error_code:
                raise BrokerConnectionError(
                    f"describe failed: {response.error_message or _error_name(response.error_code)}"
                )
            failed = False
            for result in response.results:
                if result.error_code:
                    failed = True
                    print(
                        f"{result.user}: {result.error_message or _error_name(result.error_code)}",
                        file=sys.stderr,
                    )
                    continue
                infos = ", ".join(
                    f"{ScramMechanism(i.mechanism).mechanism_name}-iterations={i.iterations}"
                    for i in result.credential_infos
                )
                print(f"SCRAM credential configs for user-principal '{result.user}' are {infos}")
            return 1 if failed else 0
        mechanism = _mechanism(args.mechanism)
        deletions: list[Any] = []
        upsertions: list[Any] = []
        if args.scram_command == "add":
            salt = secrets.token_bytes(SALT_BYTES)
            upsertions.append(
                AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
                    name=args.user,
                    mechanism=mechanism,
                    iterations=args.iterations,
                    salt=salt,
                    salted_password=salted_password(mechanism, args.password, salt, args.iterations),
                )
            )
        else:
            deletions.append(
                AlterUserScramCredentialsRequest.ScramCredentialDeletion(name=args.user, mechanism=mechanism)
            )
        response = conn.request(
            AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions),
            AlterUserScramCredentialsResponse,
            0,
        )
    for result in response.results:
        if result.error_code:
            raise BrokerConnectionError(
                f"{args.scram_command} {result.user}: {_error_name(result.error_code)}: {result.error_message}"
            )
    verb = "Added" if args.scram_command == "add" else "Deleted"
    print(f"{verb} {mechanism.mechanism_name} credential of user '{args.user}'.")
    return 0


# --- acls -------------------------------------------------------------------------------------------------

_OPERATIONS = {op.name.lower().replace("_", ""): op for op in AclOperation if op > AclOperation.ANY}


def _operation(text: str) -> AclOperation:
    op = _OPERATIONS.get(text.strip().lower().replace("_", "").replace("-", ""))
    if op is None:
        raise BrokerConnectionError(
            f"--operation: {text!r} is not one of {', '.join(sorted(o.name.title().replace('_', '') for o in _OPERATIONS.values()))}"
        )
    return op


def _resources(args: argparse.Namespace, *, for_filter: bool) -> list[tuple[ResourceType, str | None]]:
    resources: list[tuple[ResourceType, str | None]] = [(ResourceType.TOPIC, t) for t in args.topic or []]
    resources += [(ResourceType.GROUP, g) for g in args.group or []]
    resources += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id or []]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME))
    if not resources:
        if for_filter:
            return [(ResourceType.ANY, None)]
        raise BrokerConnectionError("name a resource: --topic, --group, --transactional-id or --cluster")
    return resources


def _pattern(args: argparse.Namespace, *, for_filter: bool) -> PatternType:
    text = (args.resource_pattern_type or ("any" if for_filter else "literal")).strip().upper()
    try:
        pattern = PatternType[text]
    except KeyError:
        raise BrokerConnectionError(
            f"--resource-pattern-type: {text.lower()!r} is not literal, prefixed, any or match"
        ) from None
    if not for_filter and pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise BrokerConnectionError("--resource-pattern-type: an ACL is literal or prefixed")
    return pattern


def _bindings(args: argparse.Namespace) -> list[tuple[str, str, AclPermissionType]]:
    """(principal, host, permission) for every --allow-principal and --deny-principal."""
    bindings = [
        (p, h, AclPermissionType.ALLOW) for p in args.allow_principal or [] for h in args.allow_host or ["*"]
    ]
    bindings += [
        (p, h, AclPermissionType.DENY) for p in args.deny_principal or [] for h in args.deny_host or ["*"]
    ]
    return bindings


def _acls(args: argparse.Namespace) -> int:
    command = args.acls_command
    with _connect(args) as conn:
        if command == "add":
            operations = [_operation(o) for o in args.operation or []]
            if not operations:
                raise BrokerConnectionError("--operation: name at least one operation")
            bindings = _bindings(args)
            if not bindings:
                raise BrokerConnectionError(
                    "--allow-principal or --deny-principal: name at least one principal"
                )
            pattern = _pattern(args, for_filter=False)
            creations = [
                CreateAclsRequest.AclCreation(
                    resource_type=rtype,
                    resource_name=name,
                    resource_pattern_type=pattern,
                    principal=principal,
                    host=host,
                    operation=op,
                    permission_type=permission,
                )
                for rtype, name in _resources(args, for_filter=False)
                for principal, host, permission in bindings
                for op in operations
            ]
            response = conn.request(CreateAclsRequest(creations=creations), CreateAclsResponse, 3)
            for creation, result in zip(creations, response.results, strict=True):
                if result.error_code:
                    raise BrokerConnectionError(
                        f"add failed for {creation.principal} {AclOperation(creation.operation).name} on "
                        f"{creation.resource_name}: {_error_name(result.error_code)}: {result.error_message}"
                    )
            print(f"Added {len(creations)} ACL(s).")
            return 0
        operations = [_operation(o) for o in args.operation or []] or [AclOperation.ANY]
        pattern = _pattern(args, for_filter=True)
        principals: list[str | None] = [*(args.allow_principal or []), *(args.deny_principal or [])] or [None]
        if command == "remove":
            filters = [
                DeleteAclsRequest.DeleteAclsFilter(
                    resource_type_filter=rtype,
                    resource_name_filter=name,
                    pattern_type_filter=pattern,
                    principal_filter=principal,
                    host_filter=None,
                    operation=op,
                    permission_type=AclPermissionType.ANY,
                )
                for rtype, name in _resources(args, for_filter=True)
                for principal in principals
                for op in operations
            ]
            response = conn.request(DeleteAclsRequest(filters=filters), DeleteAclsResponse, 3)
            removed = 0
            for result in response.filter_results:
                if result.error_code:
                    raise BrokerConnectionError(
                        f"remove failed: {_error_name(result.error_code)}: {result.error_message}"
                    )
                removed += len(result.matching_acls)
            print(f"Removed {removed} ACL(s).")
            return 0
        rows = []
        for rtype, name in _resources(args, for_filter=True):
            for principal in principals:
                response = conn.request(
                    DescribeAclsRequest(
                        resource_type_filter=rtype,
                        resource_name_filter=name,
                        pattern_type_filter=pattern,
                        principal_filter=principal,
                        host_filter=None,
                        operation=AclOperation.ANY,
                        permission_type=AclPermissionType.ANY,
                    ),
                    DescribeAclsResponse,
                    3,
                )
                if response.error_code:
                    raise BrokerConnectionError(
                        f"list failed: {_error_name(response.error_code)}: {response.error_message}"
                    )
                rows.extend(response.resources)
    for resource in rows:
        print(
            f"Current ACLs for resource `ResourcePattern(resourceType={ResourceType(resource.resource_type).name}, "
            f"name={resource.resource_name}, patternType={PatternType(resource.pattern_type).name})`:"
        )
        for acl in resource.acls:
            print(
                f" \t(principal={acl.principal}, host={acl.host}, operation={AclOperation(acl.operation).name}, "
                f"permissionType={AclPermissionType(acl.permission_type).name})"
            )
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.handler(args))
    except BrokerConnectionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument(
        "--command-config", metavar="FILE", help="client properties (security.protocol, sasl.*, ssl.*)"
    )


def add_subcommands(subparsers: Any) -> None:
    scram = subparsers.add_parser("scram", help="add, delete and describe SCRAM credentials (KIP-554)")
    _common(scram)
    sub = scram.add_subparsers(dest="scram_command", required=True)
    add = sub.add_parser("add", help="add or replace a user's credential for one mechanism")
    add.add_argument("--user", required=True)
    add.add_argument("--mechanism", default="SCRAM-SHA-512", help="SCRAM-SHA-256 or SCRAM-SHA-512 (default)")
    add.add_argument("--password", required=True)
    add.add_argument("--iterations", type=int, default=SCRAM_MIN_ITERATIONS, help="4096 (default) to 16384")
    delete = sub.add_parser("delete", help="delete a user's credential for one mechanism")
    delete.add_argument("--user", required=True)
    delete.add_argument("--mechanism", default="SCRAM-SHA-512")
    describe = sub.add_parser("describe", help="the mechanisms and iterations of users' credentials")
    describe.add_argument("--user", action="append", help="this user (repeatable; default all)")
    scram.set_defaults(func=_run, handler=_scram)

    acls = subparsers.add_parser("acls", help="add, remove and list ACLs (kafka-acls)")
    _common(acls)
    sub = acls.add_subparsers(dest="acls_command", required=True)
    for name, text in (("add", "add ACLs"), ("remove", "remove the ACLs that match"), ("list", "list ACLs")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--allow-principal", action="append", metavar="User:NAME")
        cmd.add_argument("--deny-principal", action="append", metavar="User:NAME")
        cmd.add_argument("--allow-host", action="append")
        cmd.add_argument("--deny-host", action="append")
        cmd.add_argument(
            "--operation", action="append", help="Read, Write, Create, Delete, Alter, Describe, All, ..."
        )
        cmd.add_argument("--topic", action="append")
        cmd.add_argument("--group", action="append")
        cmd.add_argument("--transactional-id", action="append")
        cmd.add_argument("--cluster", action="store_true")
        cmd.add_argument("--resource-pattern-type", help="literal (default for add), prefixed, any, match")
    acls.set_defaults(func=_run, handler=_acls)
