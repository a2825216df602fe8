"""``pykraft metadata-quorum add-controller | remove-controller``: KIP-853 voter changes, shaped like
Kafka's kafka-metadata-quorum.sh (MetadataQuorumCommand.handleAddController / handleRemoveController).

``add-controller`` reads the new controller's own properties (``--command-config``): its ``node.id``, the
directory id in its metadata log dir's meta.properties (the controller must have started once, as an
observer, to have one) and its controller listener's endpoint; ``remove-controller`` takes
``--controller-id`` and ``--controller-directory-id``. Both go to the raft leader: the tool asks the
``--bootstrap-controller`` who leads (DescribeQuorum) and where it listens (DescribeCluster, controller
endpoints), and asks again on a retriable answer until Kafka's admin default.api.timeout.ms passes.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from pykraft.cli.common import ToolError, UsageError, admin_security, bootstrap_of, error_name
from pykraft.cli.metadata import QuorumToolError
from pykraft.core.config import ConfigError, NodeConfig, load_config
from pykraft.core.errors import ErrorCode
from pykraft.core.uuid import uuid_from_str, uuid_to_str
from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError, ClientSecurity
from pykraft.io.quorum_peers import controller_endpoint, metadata_directory_id
from pykraft.protocol.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
)

# Kafka's admin client default.api.timeout.ms: how long the tool keeps asking.
DEFAULT_API_TIMEOUT_MS = 60_000
# AddRaftVoterRequest.TimeoutMs as Kafka's admin fills it (its request timeout).
ADD_VOTER_TIMEOUT_MS = 30_000
RETRY_BACKOFF_S = 0.5
ADD_RAFT_VOTER_VERSION = 0
REMOVE_RAFT_VOTER_VERSION = 0
DESCRIBE_CLUSTER_VERSION = 1  # EndpointType (KIP-919): 2 lists the controllers
ENDPOINT_TYPE_CONTROLLER = 2
# What the admin client retries (retriable errors: the leader moved, or it is not ready yet).
_RETRIABLE = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT}
)


def _controller_config(path: str | None) -> NodeConfig:
    """MetadataQuorumCommand.getControllerId & co.: the file must be a controller's properties."""
    if path is None:
        raise UsageError(
            "You must supply the configuration file of the controller you are adding when using add-controller."
        )
    try:
        with open(path, encoding="utf-8") as fh:
            config = load_config(fh.read())
    except OSError as exc:
        raise UsageError(f"--command-config: Properties file {path} cannot be read: {exc.strerror}") from None
    except ConfigError as exc:
        raise UsageError(f"--command-config {path}: {exc}") from None
    if not config.is_controller:
        raise UsageError(
            f"--command-config {path}: process.roles did not contain 'controller'. Is this a valid "
            "controller configuration file?"
        )
    return config


def _leader_address(bootstrap: str, security: ClientSecurity | None) -> str:
    """The raft leader's controller listener, as the ``--bootstrap-controller`` knows it (DescribeCluster
    of the controllers: the active controller's id and the voters' endpoints)."""
    request = DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2)
    with BrokerConnection.to(
        bootstrap, client_id="pykraft-metadata-quorum", timeout_s=5.0, security=security
    ) as conn:
        response = conn.request(request, DescribeClusterResponse, DESCRIBE_CLUSTER_VERSION)
    if response.error_code != ErrorCode.NONE:
        raise ToolError(f"DescribeCluster: {error_name(response.error_code)}")
    for controller in response.brokers:
        if controller.broker_id == response.controller_id:
            return f"{controller.host}:{controller.port}"
    raise QuorumToolError(f"no active controller known (controller id {response.controller_id})")


def _ask_leader(
    bootstrap: str, security: ClientSecurity | None, request: Any, response_class: Any, version: int
) -> None:
    """Send ``request`` to the leader; again on a retriable answer until the timeout; ToolError on a
    refusal, with Kafka's error name and the leader's message."""
    deadline = time.monotonic() + DEFAULT_API_TIMEOUT_MS / 1000
    last = "no answer"
    while True:
        try:
            leader = _leader_address(bootstrap, security)
            with BrokerConnection.to(
                leader,
                client_id="pykraft-metadata-quorum",
                timeout_s=ADD_VOTER_TIMEOUT_MS / 1000 + 5,
                security=security,
            ) as conn:
                response = conn.request(request, response_class, version)
        except (BrokerConnectionError, QuorumToolError, ToolError, ConnectionError) as exc:
            last = str(exc)  # no leader yet, or it moved
        else:
            if response.error_code == ErrorCode.NONE:
                return
            last = error_name(response.error_code) + (
                f": {response.error_message}" if response.error_message else ""
            )
            if response.error_code not in _RETRIABLE:
                raise ToolError(last)
        if time.monotonic() >= deadline:
            raise ToolError(f"timed out after {DEFAULT_API_TIMEOUT_MS} ms; last answer: {last}")
        time.sleep(RETRY_BACKOFF_S)


def add_controller(args: argparse.Namespace) -> int:
    """MetadataQuorumCommand.handleAddController."""
    if args.bootstrap_controller is None:
        raise UsageError(
            "add-controller: give --bootstrap-controller (pykraft sends voter changes to a controller)"
        )
    bootstrap = bootstrap_of(args.bootstrap_controller, "--bootstrap-controller")
    config = _controller_config(args.command_config)
    directory_id = metadata_directory_id(config)
    if directory_id is None:
        raise ToolError(
            f"Unable to read meta.properties from {config.metadata_log_dir}: start the controller once (it "
            "joins as an observer) so it has a directory id"
        )
    endpoint = controller_endpoint(config)
    endpoints = f"{endpoint.name}://{endpoint.host}:{endpoint.port}"
    if not args.dry_run:
        request = AddRaftVoterRequest(
            cluster_id=None,
            timeout_ms=ADD_VOTER_TIMEOUT_MS,
            voter_id=config.node_id,
            voter_directory_id=directory_id,
            listeners=[
                AddRaftVoterRequest.Listener(name=endpoint.name, host=endpoint.host, port=endpoint.port)
            ],
        )
        _ask_leader(bootstrap, admin_security(args), request, AddRaftVoterResponse, ADD_RAFT_VOTER_VERSION)
    verb = "DRY RUN of adding" if args.dry_run else "Added"
    print(
        f"{verb} controller {config.node_id} with directory id {uuid_to_str(directory_id)} and endpoints: "
        f"{endpoints}"
    )
    return 0


def remove_controller(args: argparse.Namespace) -> int:
    """MetadataQuorumCommand.handleRemoveController."""
    if args.bootstrap_controller is None:
        raise UsageError(
            "remove-controller: give --bootstrap-controller (pykraft sends voter changes to a controller)"
        )
    bootstrap = bootstrap_of(args.bootstrap_controller, "--bootstrap-controller")
    if args.controller_id < 0:
        raise UsageError(f"Invalid negative --controller-id: {args.controller_id}")
    try:
        directory_id = uuid_from_str(args.controller_directory_id)
    except ValueError as exc:
        raise UsageError(f"Failed to parse --controller-directory-id: {exc}") from None
    if not args.dry_run:
        request = RemoveRaftVoterRequest(
            cluster_id=None, voter_id=args.controller_id, voter_directory_id=directory_id
        )
        _ask_leader(
            bootstrap, admin_security(args), request, RemoveRaftVoterResponse, REMOVE_RAFT_VOTER_VERSION
        )
    verb = "DRY RUN of removing " if args.dry_run else "Removed "
    print(f"{verb} KRaft controller {args.controller_id} with directory id {uuid_to_str(directory_id)}")
    return 0


def add_subparsers(tool_sub: argparse._SubParsersAction[argparse.ArgumentParser], wrap: Any) -> None:
    """The add-controller / remove-controller subcommands of ``pykraft metadata-quorum``."""
    add = tool_sub.add_parser("add-controller", help="Add a controller to the KRaft controller cluster")
    add.add_argument(
        "--dry-run", action="store_true", help="True if we should print what would be done, but not do it."
    )
    add.set_defaults(func=wrap(add_controller))
    remove = tool_sub.add_parser(
        "remove-controller", help="Remove a controller from the KRaft controller cluster"
    )
    remove.add_argument(
        "--controller-id", "-i", type=int, required=True, help="The id of the controller to remove."
    )
    remove.add_argument(
        "--controller-directory-id", "-d", required=True, help="The directory ID of the controller to remove."
    )
    remove.add_argument(
        "--dry-run", action="store_true", help="True if we should print what would be done, but not do it."
    )
    remove.set_defaults(func=wrap(remove_controller))


__all__ = ["add_controller", "add_subparsers", "remove_controller"]
