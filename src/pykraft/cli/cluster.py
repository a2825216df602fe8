"""``pykraft cluster list|unregister``: the registered brokers, and retiring one (issue 30).

    pykraft cluster list --bootstrap-server H:P
    pykraft cluster unregister --bootstrap-server H:P --id 101

``list`` prints each broker DescribeCluster v2 returns with its fenced brokers (KIP-1073): id, address,
rack and whether it is fenced. ``unregister`` sends UnregisterBroker (64) as ``kafka-cluster.sh
unregister`` does; the controller refuses while the broker is still a replica of any partition (move
them first with ``pykraft reassign-partitions``).
"""

from __future__ import annotations

import argparse
from typing import Any

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from pykraft.cli.common import (
    ToolError,
    add_connection_arguments,
    admin_security,
    error_name,
    print_table,
    run_tool,
)
from pykraft.io.kafka_connection import BrokerConnection
from pykraft.protocol.messages import UnregisterBrokerRequest, UnregisterBrokerResponse

DESCRIBE_CLUSTER_VERSION = 2
UNREGISTER_BROKER_VERSION = 0


def _list(args: argparse.Namespace) -> int:
    request = DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=True
    )
    with BrokerConnection.to(
        args.bootstrap_server, client_id="pykraft-cluster", security=admin_security(args)
    ) as conn:
        response = conn.request(request, DescribeClusterResponse, DESCRIBE_CLUSTER_VERSION)
    if response.error_code:
        raise ToolError(f"list: {error_name(response.error_code)}: {response.error_message}")
    print(f"Cluster ID: {response.cluster_id}  Controller: {response.controller_id}")
    rows: list[list[Any]] = [
        [b.broker_id, f"{b.host}:{b.port}", b.rack, "fenced" if b.is_fenced else "unfenced"]
        for b in sorted(response.brokers, key=lambda b: b.broker_id)
    ]
    print_table(["BrokerId", "Endpoint", "Rack", "State"], rows)
    return 0


def _unregister(args: argparse.Namespace) -> int:
    with BrokerConnection.to(
        args.bootstrap_server, client_id="pykraft-cluster", security=admin_security(args)
    ) as conn:
        response = conn.request(
            UnregisterBrokerRequest(broker_id=args.id), UnregisterBrokerResponse, UNREGISTER_BROKER_VERSION
        )
    if response.error_code:
        raise ToolError(f"unregister {args.id}: {error_name(response.error_code)}: {response.error_message}")
    print(f"Broker {args.id} is no longer registered.")
    return 0


def add_subcommands(subparsers: Any) -> None:
    cluster = subparsers.add_parser(
        "cluster", help="list the brokers, unregister a retired one (kafka-cluster)"
    )
    sub = cluster.add_subparsers(dest="cluster_command", required=True)
    listing = sub.add_parser("list", help="the registered brokers: id, endpoint, rack, fenced")
    add_connection_arguments(listing)
    listing.set_defaults(func=run_tool("cluster", _list))
    unregister = sub.add_parser("unregister", help="retire a broker that holds no replica (UnregisterBroker)")
    add_connection_arguments(unregister)
    unregister.add_argument("--id", type=int, required=True, help="the broker id to unregister")
    unregister.set_defaults(func=run_tool("cluster", _unregister))
