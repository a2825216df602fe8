"""Controller RPCs on a real node's controller listener: AllocateProducerIds (67) over the network
(KIP-730) — only to registered brokers with their current epoch, rate-limited per broker — and
refused on the client listener."""

from __future__ import annotations

import os
import struct
import time
import uuid

import pytest
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from pykraft.controller.producer_ids import PRODUCER_ID_BLOCK_BURST, ProducerIdAllocationLimiter
from pykraft.core.errors import ErrorCode
from pykraft.protocol.messages import (
    AddRaftVoterResponse,
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    RemoveRaftVoterResponse,
    UpdateRaftVoterResponse,
)
from pykraft.storage.meta_properties import parse_meta_properties
from pykraft.testing import running_node
from tests.raw_client import RawClient, broker_heartbeat, register_broker


@pytest.fixture(scope="module")
def node():  # type: ignore[no-untyped-def]
    with running_node() as running:
        yield running


def _allocate(address: str, broker_id: int, broker_epoch: int) -> AllocateProducerIdsResponse:
    with RawClient(address) as client:
        return client.request(
            AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=broker_epoch),
            AllocateProducerIdsResponse,
            0,
        )


def test_allocate_producer_ids__registered_broker_gets_increasing_blocks(node) -> None:  # type: ignore[no-untyped-def]
    with open(os.path.join(node.data_dir, "meta.properties"), encoding="utf-8") as fh:
        cluster_id = parse_meta_properties(fh.read()).cluster_id
    address = node.controller_address
    registered = register_broker(address, 100, cluster_id)
    assert registered.error_code == ErrorCode.NONE
    epoch = registered.broker_epoch
    first = _allocate(address, 100, epoch)
    second = _allocate(address, 100, epoch)
    assert (first.error_code, second.error_code) == (ErrorCode.NONE, ErrorCode.NONE)
    assert first.producer_id_len == second.producer_id_len == 1000
    assert second.producer_id_start >= first.producer_id_start + first.producer_id_len  # never overlap
    # A stale epoch: STALE_BROKER_EPOCH (77); an unregistered id: CLUSTER_AUTHORIZATION_FAILED (31).
    assert _allocate(address, 100, epoch - 1).error_code == ErrorCode.STALE_BROKER_EPOCH
    assert _allocate(address, 4242, 0).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # Over the per-broker rate: refused with a throttle time, no block handed out.
    answers = [_allocate(address, 100, epoch) for _ in range(PRODUCER_ID_BLOCK_BURST + 2)]
    throttled = [a for a in answers if a.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED]
    assert throttled and all(a.throttle_time_ms > 0 and a.producer_id_len == 0 for a in throttled)


def test_broker_registration__a_broker_that_cannot_run_the_metadata_version_is_refused(node) -> None:  # type: ignore[no-untyped-def]
    with open(os.path.join(node.data_dir, "meta.properties"), encoding="utf-8") as fh:
        cluster_id = parse_meta_properties(fh.read()).cluster_id
    too_old = register_broker(node.controller_address, 120, cluster_id, [("metadata.version", 1, 3)])
    assert too_old.error_code == ErrorCode.UNSUPPORTED_VERSION
    able = register_broker(node.controller_address, 121, cluster_id, [("metadata.version", 1, 21)])
    assert able.error_code == ErrorCode.NONE


def test_allocate_producer_ids__on_the_client_listener_is_refused(node) -> None:  # type: ignore[no-untyped-def]
    response = _allocate(node.bootstrap_servers, 1, 0)
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_limiter__burst_then_refill_at_the_rate() -> None:
    limiter = ProducerIdAllocationLimiter(blocks_per_second=10, burst=3)
    assert [limiter.throttle_time_ms(1, 0) for _ in range(3)] == [0, 0, 0]
    assert limiter.throttle_time_ms(1, 0) == 100  # one token takes 100 ms to come back
    assert limiter.throttle_time_ms(2, 0) == 0  # per broker
    assert limiter.throttle_time_ms(1, 50) == 50
    assert limiter.throttle_time_ms(1, 100) == 0
    assert limiter.throttle_time_ms(1, 10_000) == 0  # refilled, capped at the burst
    assert [limiter.throttle_time_ms(1, 10_000) for _ in range(2)] == [0, 0]
    assert limiter.throttle_time_ms(1, 10_000) > 0


def _cluster_id(node) -> str:  # type: ignore[no-untyped-def]
    with open(os.path.join(node.data_dir, "meta.properties"), encoding="utf-8") as fh:
        cluster_id = parse_meta_properties(fh.read()).cluster_id
    assert cluster_id is not None
    return cluster_id


def _create_on(address: str, name: str, broker_id: int) -> int:
    topic = CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=-1,
        replication_factor=-1,
        assignments=[
            CreateTopicsRequest.CreatableTopic.CreatableReplicaAssignment(
                partition_index=0, broker_ids=[broker_id]
            )
        ],
        configs=[],
    )
    with RawClient(address) as client:
        response = client.request(
            CreateTopicsRequest(topics=[topic], timeout_ms=10000, validate_only=False),
            CreateTopicsResponse,
            5,
        )
    return int(response.topics[0].error_code)


def test_broker_heartbeats__unfence_when_caught_up__fence_when_the_session_expires() -> None:
    with running_node(overrides={"broker.session.timeout.ms": "1000"}) as node:
        address = node.controller_address
        registered = register_broker(address, 200, _cluster_id(node))
        epoch = registered.broker_epoch
        # A broker process registers fenced: nothing is placed on it yet.
        behind = broker_heartbeat(address, 200, epoch, epoch - 1)
        assert (behind.error_code, behind.is_caught_up, behind.is_fenced) == (ErrorCode.NONE, False, True)
        assert _create_on(address, "too-early", 200) != ErrorCode.NONE
        # Caught up with its own registration: unfenced.
        caught_up = broker_heartbeat(address, 200, epoch, epoch)
        assert (caught_up.is_caught_up, caught_up.is_fenced) == (True, False)
        assert _create_on(address, "on-200", 200) == ErrorCode.NONE
        assert broker_heartbeat(address, 200, epoch - 1, epoch).error_code == ErrorCode.STALE_BROKER_EPOCH
        # No heartbeat for broker.session.timeout.ms: fenced, and its partition has no leader.
        deadline = time.monotonic() + 10
        while _create_on(address, f"probe-{time.monotonic_ns()}", 200) == ErrorCode.NONE:
            assert time.monotonic() < deadline, "broker 200 was never fenced"
            time.sleep(0.2)
        with RawClient(node.bootstrap_servers) as client:
            metadata = client.request(
                MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="on-200")]),
                MetadataResponse,
                9,
            )
        assert metadata.topics[0].partitions[0].leader_id == -1
        # Back (caught up): unfenced, and it leads its partition again.
        assert broker_heartbeat(address, 200, epoch, epoch).is_fenced is False
        with RawClient(node.bootstrap_servers) as client:
            metadata = client.request(
                MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="on-200")]),
                MetadataResponse,
                9,
            )
        assert metadata.topics[0].partitions[0].leader_id == 200


def test_every_advertised_client_api_has_a_handler(node) -> None:  # type: ignore[no-untyped-def]
    from pykraft.protocol.messages import SUPPORTED_VERSIONS, ApiKey

    # Answered before the dispatch table: ApiVersions, the hot paths, and SASL (node._sasl).
    hot_paths = {
        ApiKey.API_VERSIONS,
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
    }
    assert set(SUPPORTED_VERSIONS) - hot_paths <= set(node._node._request_handlers)


def _raw_voter_request(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """A request header v2 (flexible: client id, then an empty tagged-field section) and ``body``."""
    client_id = b"raw-kip853"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id + b"\x00"
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def _add_raft_voter_body(version: int, voter_id: int, directory_id: uuid.UUID) -> bytes:
    """AddRaftVoterRequest.json by hand: ClusterId (compact nullable string, null), TimeoutMs, VoterId,
    VoterDirectoryId, Listeners (compact array of Name/Host/Port+tags), AckWhenCommitted (v1+), tags."""
    name, host = b"CONTROLLER", b"127.0.0.1"
    listener = (
        bytes([len(name) + 1]) + name + bytes([len(host) + 1]) + host + struct.pack(">H", 9094) + b"\x00"
    )
    body = b"\x00" + struct.pack(">ii", 5000, voter_id) + directory_id.bytes + b"\x02" + listener
    if version >= 1:
        body += b"\x01"
    return body + b"\x00"


def test_add_and_remove_raft_voter__raw_requests__static_quorum_answers_unsupported_version(node) -> None:  # type: ignore[no-untyped-def]
    """KIP-853 RPCs 80/81 built byte by byte from Kafka's schemas: a quorum of static voters
    (controller.quorum.voters, kraft.version 0) cannot change its voters, and Kafka's raft leader
    answers UNSUPPORTED_VERSION with a message (KafkaRaftClient.handleAddVoterRequest)."""
    directory_id = uuid.UUID(int=42)
    with RawClient(node.controller_address) as client:
        for correlation_id, version in ((11, 0), (12, 1)):
            client.sock.sendall(
                _raw_voter_request(
                    80, version, correlation_id, _add_raft_voter_body(version, 9, directory_id)
                )
            )
            added = AddRaftVoterResponse.decode(client.receive_frame(), version=version, header=True)
            assert added.header.correlation_id == correlation_id
            assert added.error_code == ErrorCode.UNSUPPORTED_VERSION
            assert "kraft.version" in added.error_message
        remove_body = b"\x00" + struct.pack(">i", 1) + directory_id.bytes + b"\x00"
        client.sock.sendall(_raw_voter_request(81, 0, 13, remove_body))
        removed = RemoveRaftVoterResponse.decode(client.receive_frame(), version=0, header=True)
        assert removed.header.correlation_id == 13
        assert removed.error_code == ErrorCode.UNSUPPORTED_VERSION
        versions = client.request(ApiVersionsRequest(), ApiVersionsResponse, 3)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert advertised[80] == (0, 1) and advertised[81] == (0, 0)


def test_update_raft_voter__raw_request__static_quorum_answers_unsupported_version_naming_the_leader(
    node,
) -> None:  # type: ignore[no-untyped-def]
    """UpdateRaftVoter (82) built from Kafka's schema: ClusterId (null), CurrentLeaderEpoch, VoterId,
    VoterDirectoryId, Listeners, KRaftVersionFeature. A static quorum answers UNSUPPORTED_VERSION
    (UpdateVoterHandler, kraft.version 0) and names its leader and endpoint (CurrentLeader, tag 0); a
    stale epoch is FENCED_LEADER_EPOCH."""
    from pykraft.cli.metadata import describe_quorum

    epoch = describe_quorum(node.controller_address).leader_epoch
    name, host = b"CONTROLLER", b"127.0.0.1"
    listener = bytes([len(name) + 1]) + name + bytes([len(host) + 1]) + host + struct.pack(">H", 9) + b"\x00"

    def body(leader_epoch: int) -> bytes:
        voter = struct.pack(">ii", leader_epoch, 1) + uuid.UUID(int=42).bytes + b"\x02" + listener
        return b"\x00" + voter + struct.pack(">hh", 0, 1) + b"\x00" + b"\x00"

    with RawClient(node.controller_address) as client:
        answers = []
        for correlation_id, leader_epoch in ((21, epoch), (22, epoch - 1)):
            client.sock.sendall(_raw_voter_request(82, 0, correlation_id, body(leader_epoch)))
            answers.append(UpdateRaftVoterResponse.decode(client.receive_frame(), version=0, header=True))
        versions = client.request(ApiVersionsRequest(), ApiVersionsResponse, 3)
    assert [a.error_code for a in answers] == [ErrorCode.UNSUPPORTED_VERSION, ErrorCode.FENCED_LEADER_EPOCH]
    leader = answers[0].current_leader
    assert (leader.leader_id, leader.leader_epoch) == (1, epoch)
    assert f"{leader.host}:{leader.port}" == node.controller_address
    assert {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}[82] == (0, 0)
