"""A broker process's link to the active controller (KIP-631, KIP-730): the shell around
``broker.lifecycle`` and the requests a broker forwards.

One ``RpcChannels`` to the controllers' listeners (the addresses in ``controller.quorum.voters``) carries
every broker-to-controller request: BrokerRegistration and BrokerHeartbeat (the session), AllocateProducerIds
(KIP-730: blocks of producer ids), and CreateTopics/DeleteTopics (clients' and auto-creation's, which a
broker forwards). The active controller is whoever the metadata log's raft leader is, as this broker's
observer sees it; a request that finds no controller, or gets NOT_CONTROLLER, is asked again of the
current leader until its deadline.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    ElectLeadersResponse,
)

from pykraft.broker.coordinator_lease import CoordinatorLease
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState, RegisterBroker, SendHeartbeat
from pykraft.broker.producer_id_manager import AllocateProducerIdsResponseData
from pykraft.broker.replication import IsrProposal
from pykraft.controller.cluster import supported_broker_features
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode
from pykraft.io.quorum_peers import ControllerAddresses
from pykraft.io.rpc_channel import ChannelSecurity, PeerUnavailable, RpcClient
from pykraft.io.waiting import wait_event
from pykraft.protocol import messages
from pykraft.protocol.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    ApiKey,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from pykraft.raft import wire

log = logging.getLogger("pykraft.broker")

# The versions a broker sends (the controller listener serves them; see node.CONTROLLER_API_VERSIONS).
BROKER_REGISTRATION_VERSION = 0
BROKER_HEARTBEAT_VERSION = 0
ALLOCATE_PRODUCER_IDS_VERSION = 0
ALTER_PARTITION_VERSION = 2  # topic ids, a plain ISR list
# How long a forwarded CreateTopics/DeleteTopics keeps looking for the active controller.
FORWARD_TIMEOUT_MS = 10_000
# After a forwarded CreateTopics succeeds, how long the answer waits for this broker's own image to show
# the topics (so the client's next Metadata through this broker finds them, as on a single node).
IMAGE_CATCH_UP_WAIT_S = 5.0
RETRY_SLEEP_S = 0.05


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ControllerLink:
    """The broker side of the session and the forwarded requests. ``leader_id`` reads the raft leader
    the node's observer knows; ``metadata_offset`` the last offset in its image."""

    def __init__(
        self,
        config: NodeConfig,
        rng: random.Random,
        *,
        leader_id: Callable[[], int],
        cluster_id: Callable[[], str | None],
        metadata_offset: Callable[[], int],
        listeners: Callable[[], list[Any]],
        on_change: Callable[[], None],
        addresses: ControllerAddresses,
        controller_security: ChannelSecurity | None = None,
    ) -> None:
        self.config = config
        # The controllers' addresses as the metadata plane learns them (static voters, or KIP-853's
        # bootstrap servers and the leader's endpoint).
        self.addresses = addresses
        self.channel = RpcClient(
            addresses.addresses(),
            client_id=f"broker-{config.node_id}",
            request_timeout_ms=config.controller_quorum_request_timeout_ms,
            rng=rng,
            security=controller_security,
        )
        self.lifecycle = BrokerLifecycle(
            config.node_id,
            uuid.UUID(int=rng.getrandbits(128)),
            heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
            now_ms=now_ms(),
        )
        # Whether this broker's group coordinator may answer (issue 32): renewed by each unfenced
        # heartbeat answer, caught up through the metadata Fetches (the node reports those).
        self.lease = CoordinatorLease(config.broker_session_timeout_ms)
        self._leader_id = leader_id
        self._cluster_id = cluster_id
        self._metadata_offset = metadata_offset
        self._listeners = listeners
        # Called when the session changes (registered, unfenced, fenced, shut down, refused).
        self._on_change = on_change
        self._rng = rng
        addresses.subscribe(self.channel.channels.set_address)
        self._wakeup = asyncio.Event()
        self._changed = asyncio.Event()

    def wake(self) -> None:
        self._wakeup.set()

    # --- the session (KIP-631) -----------------------------------------------------------------------

    async def run_session(self) -> None:
        """Register, then heartbeat, until controlled shutdown completes or the controller refuses us."""
        lifecycle = self.lifecycle
        while lifecycle.state is not BrokerState.SHUT_DOWN and lifecycle.fatal_error is None:
            request = lifecycle.poll(
                now_ms(), self._controller_to_ask(), self._cluster_id(), self._metadata_offset()
            )
            if request is None:
                wait_s = max(0.0, (lifecycle.next_deadline_ms() - now_ms()) / 1000)
                if wait_s > 0:
                    await wait_event(self._wakeup, min(wait_s, 0.5))
                self._wakeup.clear()
                continue
            before = (lifecycle.state, lifecycle.is_fenced, lifecycle.broker_epoch, lifecycle.is_caught_up)
            try:
                if isinstance(request, RegisterBroker):
                    await self._register(request)
                else:
                    await self._heartbeat(request)
            except PeerUnavailable as exc:
                log.debug("broker %d: %s", self.config.node_id, exc)
                lifecycle.on_failure(now_ms())
            after = (lifecycle.state, lifecycle.is_fenced, lifecycle.broker_epoch, lifecycle.is_caught_up)
            if after != before or lifecycle.fatal_error is not None:
                self._log_change(before, after)
                self._changed.set()
                self._on_change()
        self._changed.set()

    def _controller_to_ask(self) -> int:
        """The raft leader; while none is known, any voter: a controller that is not active answers
        NOT_CONTROLLER (we ask again), and one of another cluster INCONSISTENT_CLUSTER_ID (KIP-1262:
        a broker whose log is not followable still learns it is in the wrong cluster)."""
        leader = self._leader_id()
        if leader >= 0 and self.addresses.get(leader) is not None:
            return leader
        return self._rng.choice(sorted(self.addresses.bootstrap_ids or self.config.controller_quorum_voters))

    async def quorum_cluster_id(self) -> str | None:
        """The controllers' cluster id (DescribeCluster to a voter, KIP-919), for the refusal's message."""
        request = DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2)
        try:
            response = await self.channel.call(self._controller_to_ask(), request, 1)
        except PeerUnavailable:
            return None
        return str(response.cluster_id) if response.error_code == ErrorCode.NONE else None

    def _log_change(self, before: tuple[Any, ...], after: tuple[Any, ...]) -> None:
        lifecycle = self.lifecycle
        if lifecycle.fatal_error is not None:
            log.error("%s", lifecycle.fatal_error)
        elif before[2] != after[2] and after[2] >= 0:
            log.info("broker %d registered with broker epoch %d", self.config.node_id, after[2])
        if before[1] != after[1]:
            log.info(
                "broker %d is %s (broker epoch %d)",
                self.config.node_id,
                "fenced" if after[1] else "unfenced",
                lifecycle.broker_epoch,
            )

    async def _register(self, request: RegisterBroker) -> None:
        body = BrokerRegistrationRequest(
            broker_id=request.broker_id,
            cluster_id=request.cluster_id,
            incarnation_id=request.incarnation_id,
            listeners=self._listeners(),
            # The feature levels this broker can run (Kafka's BrokerFeatures); the controller refuses the
            # registration when a finalized level is outside them (UNSUPPORTED_VERSION).
            features=[
                BrokerRegistrationRequest.Feature(
                    name=f.name,
                    min_supported_version=f.min_supported_version,
                    max_supported_version=f.max_supported_version,
                )
                for f in supported_broker_features()
            ],
            rack=self.config.broker_rack,
        )
        response = await self.channel.call(request.controller_id, body, BROKER_REGISTRATION_VERSION)
        assert isinstance(response, BrokerRegistrationResponse)
        self.lifecycle.on_registration_response(response.error_code, response.broker_epoch, now_ms())

    async def _heartbeat(self, request: SendHeartbeat) -> None:
        body = BrokerHeartbeatRequest(
            broker_id=request.broker_id,
            broker_epoch=request.broker_epoch,
            current_metadata_offset=request.current_metadata_offset,
            want_fence=request.want_fence,
            want_shut_down=request.want_shut_down,
        )
        sent_ms = now_ms()
        response = await self.channel.call(request.controller_id, body, BROKER_HEARTBEAT_VERSION)
        assert isinstance(response, BrokerHeartbeatResponse)
        answered_ms = now_ms()
        self.lifecycle.on_heartbeat_response(
            response.error_code,
            is_caught_up=bool(response.is_caught_up),
            is_fenced=bool(response.is_fenced),
            should_shut_down=bool(response.should_shut_down),
            now_ms=answered_ms,
        )
        if response.error_code == ErrorCode.NONE:
            self.lease.on_heartbeat_answered(sent_ms, answered_ms, is_fenced=bool(response.is_fenced))

    async def controlled_shutdown(self, budget_s: float) -> bool:
        """want_shut_down heartbeats until the controller says we may stop (it has moved leadership
        away), at most ``budget_s``; True if it did."""
        self.lifecycle.begin_controlled_shutdown(now_ms())
        self.wake()
        deadline = time.monotonic() + budget_s
        while self.lifecycle.state is not BrokerState.SHUT_DOWN and self.lifecycle.fatal_error is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.clear()
            await wait_event(self._changed, remaining)
        done = self.lifecycle.state is BrokerState.SHUT_DOWN
        if done:
            log.info("controlled shutdown of broker %d done: no partition is led here", self.config.node_id)
        return done

    # --- AllocateProducerIds (KIP-730) ----------------------------------------------------------------

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> AllocateProducerIdsResponseData:
        """The active controller's answer; errors (none known, no answer, throttled, stale epoch) go back
        to the ProducerIdManager, which backs off (50 ms, or the throttle time) and asks again."""
        controller_id = self._leader_id()
        if controller_id < 0 or broker_epoch < 0:
            return AllocateProducerIdsResponseData(ErrorCode.NOT_CONTROLLER, -1, 0)
        body = AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch)
        try:
            response = await self.channel.call(controller_id, body, ALLOCATE_PRODUCER_IDS_VERSION)
        except PeerUnavailable:
            return AllocateProducerIdsResponseData(ErrorCode.NOT_CONTROLLER, -1, 0)
        assert isinstance(response, AllocateProducerIdsResponse)
        return AllocateProducerIdsResponseData(
            response.error_code,
            response.producer_id_start,
            response.producer_id_len,
            response.throttle_time_ms,
        )

    # --- AlterPartition (KIP-497) --------------------------------------------------------------------

    async def alter_partition(
        self, topic_id: uuid.UUID, partition_index: int, proposal: IsrProposal
    ) -> ErrorCode:
        """Propose a partition's new ISR to the active controller; its error (or NONE once the
        PartitionChangeRecord is committed). No answer is REQUEST_TIMED_OUT: the leader proposes again."""
        request_class = messages.request_class(ApiKey.ALTER_PARTITION)
        assert request_class is not None, "AlterPartition has no schema class"
        controller_id = self._leader_id()
        epoch = self.lifecycle.broker_epoch
        if controller_id < 0 or epoch < 0:
            return ErrorCode.NOT_CONTROLLER
        request = request_class(
            broker_id=self.config.node_id,
            broker_epoch=epoch,
            topics=[
                request_class.TopicData(
                    topic_id=topic_id,
                    partitions=[
                        request_class.TopicData.PartitionData(
                            partition_index=partition_index,
                            leader_epoch=proposal.leader_epoch,
                            new_isr=list(proposal.new_isr),
                            leader_recovery_state=0,
                            partition_epoch=proposal.partition_epoch,
                        )
                    ],
                )
            ],
        )
        try:
            response = await self.channel.call(controller_id, request, ALTER_PARTITION_VERSION)
        except PeerUnavailable:
            return ErrorCode.REQUEST_TIMED_OUT
        if response.error_code != ErrorCode.NONE:
            return ErrorCode(response.error_code)
        errors = [p.error_code for t in response.topics for p in t.partitions]
        return ErrorCode(errors[0]) if errors else ErrorCode.UNKNOWN_SERVER_ERROR

    # --- forwarded admin requests ------------------------------------------------------------------------

    async def forward(self, request: Any, version: int, *, topic_errors: Callable[[Any], list[int]]) -> Any:
        """Send a CreateTopics/DeleteTopics to the active controller and return its answer; asked again of
        the current leader while no controller answers or every topic says NOT_CONTROLLER."""
        deadline = time.monotonic() + FORWARD_TIMEOUT_MS / 1000
        last_error = "no active controller known"
        while True:
            controller_id = self._leader_id()
            if controller_id >= 0:
                try:
                    response = await self.channel.call(controller_id, request, version)
                except PeerUnavailable as exc:
                    last_error = str(exc)
                else:
                    errors = topic_errors(response)
                    if not errors or any(e != ErrorCode.NOT_CONTROLLER for e in errors):
                        return response
                    last_error = f"controller {controller_id} is not the active controller"
            if time.monotonic() >= deadline:
                raise PeerUnavailable(last_error)
            await asyncio.sleep(RETRY_SLEEP_S)

    async def forward_create_topics(self, request: Any, version: int) -> Any:
        """A client's CreateTopics, answered by the active controller (NOT_CONTROLLER per topic when none
        answers in time: the client retries)."""
        try:
            return await self.forward(request, version, topic_errors=_create_topics_errors)
        except PeerUnavailable as exc:
            return create_topics_error(request, version, ErrorCode.NOT_CONTROLLER, str(exc))

    async def forward_elect_leaders(self, request: Any, version: int) -> Any:
        """ElectLeaders, answered by the active controller (NOT_CONTROLLER when none answers in time)."""
        try:
            return await self.forward(request, version, topic_errors=_elect_leaders_errors)
        except PeerUnavailable as exc:
            return ElectLeadersResponse(
                version=version,
                throttle_time_ms=0,
                error_code=ErrorCode.NOT_CONTROLLER,
                replica_election_results=[
                    ElectLeadersResponse.ReplicaElectionResult(
                        topic=t.topic,
                        partition_result=[
                            ElectLeadersResponse.ReplicaElectionResult.PartitionResult(
                                partition_id=p, error_code=ErrorCode.NOT_CONTROLLER, error_message=str(exc)
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in request.topic_partitions or []
                ],
            )

    async def forward_or_refuse(
        self,
        request: Any,
        version: int,
        errors: Callable[[Any], list[int]],
        refusal: Callable[[Any, int, ErrorCode, str], Any],
    ) -> Any:
        """Any other admin request for the active controller (CreatePartitions, SCRAM credentials, ACLs):
        its answer, or ``refusal`` with NOT_CONTROLLER when none answers in time."""
        try:
            return await self.forward(request, version, topic_errors=errors)
        except PeerUnavailable as exc:
            return refusal(request, version, ErrorCode.NOT_CONTROLLER, str(exc))

    async def forward_describe_quorum(self, request: Any, version: int) -> Any:
        """DescribeQuorum, answered by the raft leader (Kafka's KafkaApis forwards it to the active
        controller); NOT_CONTROLLER as a whole when none answers in time."""
        return await self.forward_or_refuse(
            request,
            version,
            _describe_quorum_errors,
            lambda _request, _version, error, message: wire.describe_quorum_error_response(error, message),
        )

    async def forward_delete_topics(self, request: Any, version: int) -> Any:
        try:
            return await self.forward(request, version, topic_errors=_delete_topics_errors)
        except PeerUnavailable as exc:
            return delete_topics_error(request, version, ErrorCode.NOT_CONTROLLER, str(exc))

    async def create_topics_by_name(
        self,
        names: list[str],
        num_partitions: int,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
    ) -> None:
        """Auto-creation (Metadata/Produce/FindCoordinator): a CreateTopics to the active controller,
        with the topics' own ``configs`` (the internal topics are compacted)."""
        request = CreateTopicsRequest(  # v4: the first with replication_factor -1 (the default)
            topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=name,
                    num_partitions=num_partitions,
                    replication_factor=-1,
                    assignments=[],
                    configs=[
                        CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name=key, value=value)
                        for key, value in (configs or {}).items()
                    ],
                )
                for name in names
            ],
            timeout_ms=FORWARD_TIMEOUT_MS,
            validate_only=False,
        )
        response = await self.forward(request, 4, topic_errors=_create_topics_errors)
        refused = [f"{t.name}: {ErrorCode(t.error_code).name}" for t in response.topics if t.error_code]
        if refused:
            log.info("auto-creation refused by the controller: %s", "; ".join(refused))

    async def close(self) -> None:
        await self.channel.close()


def _create_topics_errors(response: Any) -> list[int]:
    return [t.error_code for t in response.topics]


def _elect_leaders_errors(response: Any) -> list[int]:
    if response.error_code:  # v1+: a top-level error (NOT_CONTROLLER) covers the whole request
        return [response.error_code]
    return [p.error_code for t in response.replica_election_results for p in t.partition_result]


def _describe_quorum_errors(response: Any) -> list[int]:
    """A voter that does not lead (the leader moved since this broker last heard) answers
    NOT_LEADER_OR_FOLLOWER: asked again, as NOT_CONTROLLER is, of the leader this broker knows now."""
    if response.error_code or not response.topics:
        return [response.error_code]
    return [
        ErrorCode.NOT_CONTROLLER if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER else p.error_code
        for t in response.topics
        for p in t.partitions
    ]


def _delete_topics_errors(response: Any) -> list[int]:
    return [t.error_code for t in response.responses]


def create_topics_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    """The same error for every topic: NOT_CONTROLLER (retriable) when no controller could be reached,
    THROTTLING_QUOTA_EXCEEDED over controller_mutation_rate."""
    return CreateTopicsResponse(
        version=version,
        throttle_time_ms=0,
        topics=[
            CreateTopicsResponse.CreatableTopicResult(
                name=t.name,
                topic_id=uuid.UUID(int=0),
                error_code=error,
                error_message=message,
                num_partitions=-1,
                replication_factor=-1,
                configs=[],
            )
            for t in request.topics
        ],
    )


def delete_topics_error(request: Any, version: int, error: ErrorCode, message: str) -> Any:
    names = [t.name for t in request.topics] if version >= 6 else list(request.topic_names)
    ids = [t.topic_id for t in request.topics] if version >= 6 else [uuid.UUID(int=0)] * len(names)
    return DeleteTopicsResponse(
        version=version,
        throttle_time_ms=0,
        responses=[
            DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id, error_code=error, error_message=message
            )
            for name, topic_id in zip(names, ids, strict=True)
        ],
    )


__all__ = ["ControllerLink"]
