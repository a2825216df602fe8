"""A voter whose endpoints changed tells the leader (KIP-853 UpdateRaftVoter, api key 82).

A controller of a dynamic quorum that finds itself in the voter set under other endpoints (or another
supported kraft.version range) than it now has — it restarted on a new host or port — sends
UpdateRaftVoter to the leader while it follows, as KafkaRaftClient.pollFollowerAsVoter does once the
finalized kraft.version is 1 or more. The leader appends the updated VotersRecord; every replica then
reaches this voter at its new address. Checked every ``period_ms``; asked again until the voter set
shows it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable

from pykraft.core.errors import ErrorCode
from pykraft.io.quorum_peers import ControllerAddresses
from pykraft.io.rpc_channel import ChannelSecurity, PeerUnavailable, RpcClient
from pykraft.protocol.messages import UpdateRaftVoterRequest, UpdateRaftVoterResponse
from pykraft.raft.control import KRAFT_VERSION_DYNAMIC, Voter
from pykraft.raft.node import RaftNode
from pykraft.raft.state import Role

log = logging.getLogger("pykraft.metadata")

UPDATE_RAFT_VOTER_VERSION = 0


def needs_update(raft: RaftNode, local: Voter) -> bool:
    """This voter is in the voter set, as this replica, under other endpoints or kraft.version range."""
    if raft.kraft_version < KRAFT_VERSION_DYNAMIC or raft.role != Role.FOLLOWER:
        return False
    listed = raft.voter_set.get(local.voter_id)
    return listed is not None and listed.directory_id == local.directory_id and listed != local


class VoterUpdater:
    def __init__(
        self,
        raft: Callable[[], RaftNode | None],
        local: Voter,
        cluster_id: Callable[[], str | None],
        addresses: ControllerAddresses,
        *,
        period_ms: int,
        request_timeout_ms: int,
        rng: random.Random,
        security: ChannelSecurity | None,
    ) -> None:
        self._raft = raft
        self._local = local
        self._cluster_id = cluster_id
        self._addresses = addresses
        self._period_s = period_ms / 1000
        self.client = RpcClient(
            addresses.addresses(),
            client_id=f"raft-update-voter-{local.voter_id}",
            request_timeout_ms=request_timeout_ms,
            rng=rng,
            security=security,
        )
        addresses.subscribe(self.client.channels.set_address)

    async def run(self) -> None:
        while True:
            raft = self._raft()
            if raft is not None and needs_update(raft, self._local):
                await self._send(raft)
            await asyncio.sleep(self._period_s)

    async def _send(self, raft: RaftNode) -> None:
        local = self._local
        request = UpdateRaftVoterRequest(
            cluster_id=self._cluster_id(),
            current_leader_epoch=raft.epoch,
            voter_id=local.voter_id,
            voter_directory_id=uuid.UUID(bytes=local.directory_id),
            listeners=[
                UpdateRaftVoterRequest.Listener(name=e.name, host=e.host, port=e.port)
                for e in local.endpoints
            ],
            k_raft_version_feature=UpdateRaftVoterRequest.KRaftVersionFeature(
                min_supported_version=local.min_supported_kraft_version,
                max_supported_version=local.max_supported_kraft_version,
            ),
        )
        try:
            response = await self.client.call(raft.leader_id, request, UPDATE_RAFT_VOTER_VERSION)
        except PeerUnavailable as exc:
            log.debug("UpdateRaftVoter to node %d: %s", raft.leader_id, exc)
            return
        assert isinstance(response, UpdateRaftVoterResponse)
        endpoints = ",".join(f"{e.name}://{e.host}:{e.port}" for e in local.endpoints)
        if response.error_code == ErrorCode.NONE:
            log.info("node %d told leader %d its endpoints: %s", local.voter_id, raft.leader_id, endpoints)
        else:
            log.info(
                "node %d: UpdateRaftVoter (%s) to leader %d: error %d",
                local.voter_id,
                endpoints,
                raft.leader_id,
                response.error_code,
            )

    async def close(self) -> None:
        await self.client.close()
