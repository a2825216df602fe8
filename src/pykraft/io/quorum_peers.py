"""Where the controllers are, static or dynamic (KIP-853), for the raft peers and a broker's link.

With ``controller.quorum.voters`` every voter's id and address is in the config, as before. With only
``controller.quorum.bootstrap.servers`` (a dynamic quorum, Kafka's QuorumConfig) the addresses come
from three places, as KafkaRaftClient learns them:

* the bootstrap servers themselves, under the ids -2, -3, ... (the ids Kafka's clients give their
  bootstrap nodes): whom to ask who leads while no leader is known;
* the voters' endpoints in the latest VotersRecord (``sync_voters``);
* the leader's endpoint a Fetch response names (Fetch v16+ NodeEndpoints, ``learn``).

Also here: this controller as a voter (its id, the directory id of its metadata log dir, its
controller endpoint) and pykraft's rule for the first voter of a brand-new dynamic quorum (README,
"A dynamic controller quorum").
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable

from pykraft.core.config import NodeConfig
from pykraft.core.errors import RemoteProtocolError
from pykraft.io.meta_properties_files import load_ensemble
from pykraft.io.rpc_channel import Answered, ChannelEvent, ChannelSecurity, RpcChannels
from pykraft.raft import wire
from pykraft.raft.control import Endpoint, Voter
from pykraft.raft.voter_set import NO_DIRECTORY_ID, VoterSet

# The id of the first bootstrap server; the next is one lower (Kafka's bootstrap nodes: -2, -3, ...).
FIRST_BOOTSTRAP_ID = -2

Address = tuple[str, int]


def metadata_directory_id(config: NodeConfig) -> uuid.UUID | None:
    """``directory.id`` of the metadata log dir's meta.properties (what a voter is known by besides its
    id, KIP-853's ReplicaKey); None before the node ever started there."""
    ensemble = load_ensemble(config.log_dirs, config.metadata_log_dir)
    meta = ensemble.log_dir_props.get(config.metadata_log_dir)
    return meta.directory_id if meta is not None else None


def controller_endpoint(config: NodeConfig) -> Endpoint:
    """The endpoint other controllers reach this one at: the advertised controller listener (or the
    listener itself), as Kafka's controller registers its ``controller.listener.names`` endpoints."""
    listener = config.controller_listener
    assert listener is not None, "a controller has a controller listener (checked at start)"
    advertised = config.advertised_for(listener.listener_name)
    return Endpoint(listener.listener_name, advertised.host, advertised.port)


def local_voter(config: NodeConfig, directory_id: uuid.UUID) -> Voter:
    """This controller as a VotersRecord names it."""
    return Voter(config.node_id, directory_id.bytes, (controller_endpoint(config),))


def static_voters(config: NodeConfig) -> VoterSet:
    """``controller.quorum.voters`` as Kafka's VoterSet.fromInetSocketAddresses makes it (kraft.version
    0): each voter's id and its endpoint on the first ``controller.listener.names`` entry, no directory
    id. DescribeQuorum v2 lists these endpoints in its nodes, as Kafka's leader does."""
    name = config.controller_listener_names[0]
    return VoterSet.of(
        [
            Voter(voter_id, NO_DIRECTORY_ID, (Endpoint(name, host, port),))
            for voter_id, (host, port) in config.controller_quorum_voters.items()
        ]
    )


def is_first_bootstrap_server(config: NodeConfig) -> bool:
    """pykraft's rule for the first voter without ``kafka-storage format --standalone`` (README): the
    controller whose own controller endpoint is the first entry of ``controller.quorum.bootstrap.servers``."""
    if not config.is_controller or not config.controller_quorum_bootstrap_servers:
        return False
    first = config.controller_quorum_bootstrap_servers[0]
    endpoint = controller_endpoint(config)
    listener = config.controller_listener
    assert listener is not None
    return first in ((endpoint.host, endpoint.port), (listener.host, listener.port))


def first_voters(config: NodeConfig, directory_id: uuid.UUID, *, log_is_empty: bool) -> VoterSet | None:
    """The voter set this controller starts a brand-new dynamic quorum with: itself alone (what Kafka's
    ``format --standalone`` writes into the bootstrap checkpoint), when it is the first bootstrap server
    and its metadata log holds nothing yet; None otherwise (it joins as an observer, or its log has
    the voter set)."""
    if not config.dynamic_quorum or not log_is_empty or not is_first_bootstrap_server(config):
        return None
    return VoterSet.of([local_voter(config, directory_id)])


async def highest_leader_epoch(
    servers: dict[int, Address],
    *,
    request_timeout_ms: int,
    rng: random.Random,
    security: ChannelSecurity | None,
) -> int:
    """The highest leader epoch any of ``servers`` names in a DescribeQuorum answer (0 when none
    answers or none knows one). A would-be first voter asks before it starts a new quorum: a positive
    epoch means a quorum already runs there (its metadata log was lost or replaced), and it joins it as
    an observer instead of starting a second one."""
    loop = asyncio.get_running_loop()
    waiting: dict[int, asyncio.Future[ChannelEvent]] = {}

    def on_event(event: ChannelEvent) -> None:
        fut = waiting.get(event.correlation_id)
        if fut is not None and not fut.done():
            fut.set_result(event)

    channels = RpcChannels(
        servers, on_event, request_timeout_ms=request_timeout_ms, rng=rng, security=security
    )
    try:
        for correlation_id, server_id in enumerate(sorted(servers), start=1):
            waiting[correlation_id] = loop.create_future()
            frame = wire.encode_describe_quorum_request(correlation_id, "pykraft-first-voter-check")
            channels.send(server_id, correlation_id, frame)
        events = await asyncio.gather(*waiting.values())
    finally:
        await channels.close()
    epoch = 0
    for event in events:
        if isinstance(event, Answered):
            try:
                _correlation_id, _error, description = wire.decode_describe_quorum_response(
                    bytes(event.frame)
                )
            except RemoteProtocolError:
                continue
            epoch = max(epoch, description.leader_epoch)
    return epoch


class ControllerAddresses:
    """The controllers' addresses by id; whoever connects to them subscribes to changes."""

    def __init__(self, config: NodeConfig) -> None:
        self._listener_name = config.controller_listener_names[0] if config.controller_listener_names else ""
        self._addresses: dict[int, Address] = dict(config.controller_quorum_voters)
        self.bootstrap_ids: frozenset[int] = frozenset()
        if config.dynamic_quorum:
            own = controller_endpoint(config) if config.is_controller else None
            servers = list(config.controller_quorum_bootstrap_servers)
            # A controller does not ask itself who leads (unless it is the only server listed).
            others = [s for s in servers if own is None or s != (own.host, own.port)] or servers
            bootstrap = {FIRST_BOOTSTRAP_ID - servers.index(s): s for s in others}
            self._addresses.update(bootstrap)
            self.bootstrap_ids = frozenset(bootstrap)
        self._subscribers: list[Callable[[int, Address], None]] = []

    def addresses(self) -> dict[int, Address]:
        return dict(self._addresses)

    def get(self, node_id: int) -> Address | None:
        return self._addresses.get(node_id)

    def known_ids(self) -> list[int]:
        """Every controller id with an address (bootstrap servers included), sorted."""
        return sorted(self._addresses)

    def subscribe(self, on_address: Callable[[int, Address], None]) -> None:
        self._subscribers.append(on_address)

    def learn(self, node_id: int, address: Address) -> None:
        if node_id < 0 or self._addresses.get(node_id) == address:
            return
        self._addresses[node_id] = address
        for on_address in self._subscribers:
            on_address(node_id, address)

    def sync_voters(self, voters: VoterSet) -> None:
        """The voters' controller endpoints (the listener named first in ``controller.listener.names``,
        else the voter's first endpoint), as the latest VotersRecord lists them."""
        for voter in voters.voters:
            endpoint = next(
                (e for e in voter.endpoints if e.name == self._listener_name),
                voter.endpoints[0] if voter.endpoints else None,
            )
            if endpoint is not None:
                self.learn(voter.voter_id, (endpoint.host, endpoint.port))
