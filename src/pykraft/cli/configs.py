"""``pykraft configs``, shaped like ``kafka-configs``: describe and alter topic configs (issue 17).

    pykraft configs --bootstrap-server H:P --entity-type topics --entity-name T --describe [--all]
    pykraft configs --bootstrap-server H:P --entity-type topics --entity-name T --alter \\
        --add-config retention.ms=3600000,cleanup.policy=[compact,delete] --delete-config segment.bytes

``--alter`` sends IncrementalAlterConfigs (SET for ``--add-config``, DELETE for ``--delete-config``);
``--describe`` lists the topic's own (dynamic) configs, or every config with ``--all``, with its source
and synonyms as kafka-configs prints them. ``--entity-type brokers`` describes a broker's configs and
alters its dynamic ones (``--entity-name ID`` for one broker, ``--entity-default`` for every broker);
``--entity-type groups --entity-name G`` describes and alters group G's group configs (KIP-848:
``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``, ...), whether or not G exists.
``--entity-type users|clients`` describes and alters client quotas (cli/quotas.py).
``--command-config`` takes Kafka's client properties (TLS, SASL). Exit status 1 with one line naming
what failed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafka.protocol.admin import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from pykraft.cli.quotas import QUOTA_ENTITY_TYPES, alter_quotas, describe_quotas, quota_entity_of
from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError, ClientSecurity

DESCRIBE_CONFIGS_VERSION = 4
INCREMENTAL_ALTER_CONFIGS_VERSION = 1
# ConfigResource.Type and the names kafka-configs gives them.
ENTITY_TYPES = {"topics": (2, "topic"), "brokers": (4, "broker"), "groups": (32, "group")}
# DescribeConfigsResponse.ConfigSource, as kafka-configs prints them (the Admin client's names).
SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "DYNAMIC_GROUP_CONFIG",
}


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs' ``--add-config``: ``k1=v1,k2=[a,b]`` (square brackets keep a list's commas)."""
    configs: dict[str, str] = {}
    i = 0
    while i < len(text):
        eq = text.find("=", i)
        if eq < 0:
            raise BrokerConnectionError(f"--add-config: {text[i:]!r} is not KEY=VALUE")
        key = text[i:eq].strip()
        if text.startswith("[", eq + 1):
            close = text.find("]", eq + 2)
            if close < 0:
                raise BrokerConnectionError(f"--add-config: the [ after {key}= is never closed")
            value, i = text[eq + 2 : close], close + 1
            if i < len(text) and text[i] != ",":
                raise BrokerConnectionError(f"--add-config: expected ',' after {key}=[...]")
        else:
            comma = text.find(",", eq + 1)
            end = len(text) if comma < 0 else comma
            value, i = text[eq + 1 : end], end
        if not key:
            raise BrokerConnectionError("--add-config: a config with no name")
        configs[key] = value
        i += 1  # the comma
    return configs


def _error(code: int, message: str | None) -> str:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    return f"{name}: {message}" if message else name


def describe(conn: BrokerConnection, resource_type: int, name: str) -> list[Any]:
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None
            )
        ],
        include_synonyms=True,
        include_documentation=False,
    )
    response = conn.request(request, DescribeConfigsResponse, DESCRIBE_CONFIGS_VERSION)
    result = response.results[0]
    if result.error_code:
        raise BrokerConnectionError(f"describe {name}: {_error(result.error_code, result.error_message)}")
    return list(result.configs)


def describe_lines(entity: str, name: str, configs: list[Any], show_all: bool) -> list[str]:
    """kafka-configs --describe's layout."""
    dynamic = {1, 2, 3, 8}
    shown = [c for c in configs if show_all or c.config_source in dynamic]
    lines = [f"{'All' if show_all else 'Dynamic'} configs for {entity} {name} are:"]
    for c in sorted(shown, key=lambda c: c.name):
        value = "null" if c.value is None else c.value
        synonyms = ", ".join(
            f"{SOURCES.get(s.source, s.source)}:{s.name}={'null' if s.value is None else s.value}"
            for s in c.synonyms
        )
        lines.append(f"  {c.name}={value} sensitive={str(c.is_sensitive).lower()} synonyms={{{synonyms}}}")
    return lines


def alter(
    conn: BrokerConnection, resource_type: int, name: str, add: dict[str, str], delete: list[str]
) -> None:
    config_cls = IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig
    configs = [config_cls(name=k, config_operation=0, value=v) for k, v in add.items()]
    configs += [config_cls(name=k, config_operation=1, value=None) for k in delete]
    request = IncrementalAlterConfigsRequest(
        resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=resource_type, resource_name=name, configs=configs
            )
        ],
        validate_only=False,
    )
    response = conn.request(request, IncrementalAlterConfigsResponse, INCREMENTAL_ALTER_CONFIGS_VERSION)
    result = response.responses[0]
    if result.error_code:
        raise BrokerConnectionError(f"alter {name}: {_error(result.error_code, result.error_message)}")


def _run(args: argparse.Namespace) -> int:
    try:
        if args.alter == args.describe:
            raise BrokerConnectionError("name one of --describe or --alter")
        add = parse_add_config(args.add_config) if args.add_config else {}
        delete = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
        if args.alter and not add and not delete:
            raise BrokerConnectionError("--alter needs --add-config and/or --delete-config")
        security = ClientSecurity.from_file(args.command_config) if args.command_config else None
        if all(t in QUOTA_ENTITY_TYPES for t in args.entity_type):
            entity = quota_entity_of(args.entity_type, args.entity_names)
            with BrokerConnection.to(
                args.bootstrap_server, client_id="pykraft-configs", security=security
            ) as conn:
                lines = (
                    describe_quotas(conn, entity)
                    if args.describe
                    else [alter_quotas(conn, entity, add, delete)]
                )
            for line in lines:
                print(line)
            return 0
        if len(args.entity_type) != 1:
            raise BrokerConnectionError("--entity-type twice only for users and clients (client quotas)")
        resource_type, entity_name = ENTITY_TYPES[args.entity_type[0]]
        names = args.entity_names
        if len(names) > 1:
            raise BrokerConnectionError(f"one --entity-name for {args.entity_type[0]}")
        if names == [None]:
            if args.entity_type[0] != "brokers":
                raise BrokerConnectionError("--entity-default goes with --entity-type brokers, not topics")
            args.entity_name = ""
        elif not names:
            raise BrokerConnectionError(
                "name the entity: --entity-name NAME (or --entity-default for brokers)"
            )
        else:
            args.entity_name = names[0]
        args.entity_default = names == [None]
        with BrokerConnection.to(
            args.bootstrap_server, client_id="pykraft-configs", security=security
        ) as conn:
            if args.describe:
                for line in describe_lines(
                    entity_name, args.entity_name, describe(conn, resource_type, args.entity_name), args.all
                ):
                    print(line)
            else:
                alter(conn, resource_type, args.entity_name, add, delete)
                if args.entity_default:
                    print("Completed updating default config for brokers in the cluster.")
                else:
                    print(f"Completed updating config for {entity_name} {args.entity_name}.")
    except BrokerConnectionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def add_subcommands(subparsers: Any) -> None:
    configs = subparsers.add_parser(
        "configs", help="describe and alter topic, broker and group configs and client quotas (kafka-configs)"
    )
    configs.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]")
    configs.add_argument("--command-config", help="client properties: security.protocol, sasl.*, ssl.*")
    configs.add_argument(
        "--entity-type",
        required=True,
        action="append",
        choices=sorted([*ENTITY_TYPES, *QUOTA_ENTITY_TYPES]),
        help="users and clients may both be given (a user's quota for one client id)",
    )
    configs.add_argument(
        "--entity-name",
        dest="entity_names",
        action="append",
        default=[],
        help="the topic name, the broker id, the group id, the user or the client id",
    )
    configs.add_argument(
        "--entity-default",
        dest="entity_names",
        action="append_const",
        const=None,
        help="every broker's dynamic configs, or the default user / client id quota",
    )
    configs.add_argument("--describe", action="store_true")
    configs.add_argument(
        "--all", action="store_true", help="with --describe: every config, not only dynamic ones"
    )
    configs.add_argument("--alter", action="store_true")
    configs.add_argument("--add-config", help="k1=v1,k2=[a,b]")
    configs.add_argument("--delete-config", help="k1,k2")
    configs.set_defaults(func=_run)
