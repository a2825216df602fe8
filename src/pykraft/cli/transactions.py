"""``pykraft transactions --bootstrap-server HOST:PORT list|describe``, shaped like kafka-transactions.sh.

- ``list [--state S ...] [--producer-id P ...] [--duration-filter MS]``: ListTransactions (66) on every
  broker (each coordinator knows only its own ids); one line per transactional id.
- ``describe --transactional-id ID``: FindCoordinator (key type 1), then DescribeTransactions (65) on the
  coordinator; the id's producer id and epoch, state, timeout, start time, and partitions.

A small blocking client over kafka-python's codec. Exit status 1 with one line on failure.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kafka.protocol.admin import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)

from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError

CLIENT_ID = "pykraft-transactions"
COORDINATOR_KEY_TYPE_TRANSACTION = 1


class TransactionsError(BrokerConnectionError):
    """One line for the user: what failed and where."""


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _brokers(bootstrap: str) -> dict[int, tuple[str, int]]:
    with BrokerConnection.to(bootstrap, client_id=CLIENT_ID) as conn:
        metadata = conn.request(
            MetadataRequest(topics=[], allow_auto_topic_creation=False), MetadataResponse, 9
        )
    return {b.node_id: (b.host, b.port) for b in metadata.brokers}


def list_transactions(
    bootstrap: str, states: list[str], producer_ids: list[int], duration_ms: int
) -> list[tuple[str, int, int, str]]:
    """(transactional id, coordinator, producer id, state) rows, sorted by id."""
    rows: list[tuple[str, int, int, str]] = []
    for node_id, (host, port) in sorted(_brokers(bootstrap).items()):
        with BrokerConnection(host, port, client_id=CLIENT_ID) as conn:
            response = conn.request(
                ListTransactionsRequest(
                    state_filters=states, producer_id_filters=producer_ids, duration_filter=duration_ms
                ),
                ListTransactionsResponse,
                1,
            )
        if response.error_code:
            raise TransactionsError(f"ListTransactions on node {node_id}: {_error_name(response.error_code)}")
        if response.unknown_state_filters:
            raise TransactionsError("unknown state(s): " + ", ".join(response.unknown_state_filters))
        for t in response.transaction_states:
            rows.append((t.transactional_id, node_id, t.producer_id, t.transaction_state))
    return sorted(rows)


def describe_transaction(bootstrap: str, transactional_id: str) -> tuple[int, Any]:
    """(coordinator id, DescribeTransactions state) of one transactional id."""
    with BrokerConnection.to(bootstrap, client_id=CLIENT_ID) as conn:
        found = conn.request(
            FindCoordinatorRequest(
                key_type=COORDINATOR_KEY_TYPE_TRANSACTION, coordinator_keys=[transactional_id]
            ),
            FindCoordinatorResponse,
            4,
        )
    (coordinator,) = found.coordinators
    if coordinator.error_code:
        raise TransactionsError(
            f"FindCoordinator for {transactional_id!r}: {_error_name(coordinator.error_code)}"
        )
    with BrokerConnection(coordinator.host, coordinator.port, client_id=CLIENT_ID) as conn:
        response = conn.request(
            DescribeTransactionsRequest(transactional_ids=[transactional_id]), DescribeTransactionsResponse, 0
        )
    (state,) = response.transaction_states
    if state.error_code:
        raise TransactionsError(f"transactional id {transactional_id!r}: {_error_name(state.error_code)}")
    return coordinator.node_id, state


def _print_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    lines = [header, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())


def _run(args: argparse.Namespace) -> int:
    try:
        if args.transactions_command == "list":
            rows = list_transactions(
                args.bootstrap_server, args.state or [], args.producer_id or [], args.duration_filter
            )
            _print_table(
                ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
                [(t, str(c), str(p), s) for t, c, p, s in rows],
            )
            return 0
        coordinator, state = describe_transaction(args.bootstrap_server, args.transactional_id)
        start_ms = state.transaction_start_time_ms
        duration = str(int(time.time() * 1000) - start_ms) if start_ms >= 0 else "None"
        partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
        _print_table(
            (
                "CoordinatorId",
                "TransactionalId",
                "ProducerId",
                "ProducerEpoch",
                "TransactionState",
                "TransactionTimeoutMs",
                "CurrentTransactionStartTimeMs",
                "TransactionDurationMs",
                "TopicPartitions",
            ),
            [
                (
                    str(coordinator),
                    state.transactional_id,
                    str(state.producer_id),
                    str(state.producer_epoch),
                    state.transaction_state,
                    str(state.transaction_timeout_ms),
                    str(start_ms) if start_ms >= 0 else "None",
                    duration,
                    partitions,
                )
            ],
        )
        return 0
    except BrokerConnectionError as exc:
        print(f"pykraft transactions: {exc}", file=sys.stderr)
        return 1


def add_subcommands(subparsers: Any) -> None:
    parser = subparsers.add_parser("transactions", help="list and describe transactions (kafka-transactions)")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    sub = parser.add_subparsers(dest="transactions_command", required=True)
    listing = sub.add_parser("list", help="list the transactional ids every coordinator knows")
    listing.add_argument("--state", action="append", help="only ids in this state (repeatable), e.g. Ongoing")
    listing.add_argument(
        "--producer-id", action="append", type=int, help="only this producer id (repeatable)"
    )
    listing.add_argument(
        "--duration-filter",
        type=int,
        default=-1,
        metavar="MS",
        help="only transactions open at least this long",
    )
    describe = sub.add_parser("describe", help="describe one transactional id")
    describe.add_argument("--transactional-id", required=True)
    parser.set_defaults(func=_run)
