"""A blocking raw Kafka client for tests: pykraft's BrokerConnection plus raw-frame helpers."""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest

from pykraft.io.kafka_connection import BrokerConnection, ClientSecurity, parse_host_port


def produce_request(
    topic: str, records: bytes, acks: int = -1, transactional_id: str | None = None
) -> ProduceRequest:
    """A Produce of ``records`` (a RecordBatch) to partition 0 of ``topic``."""
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=10000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)
                ],
            )
        ],
    )


def fetch_request(
    topic: str | uuid.UUID,
    offset: int = 0,
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int = 1 << 20,
) -> FetchRequest:
    """A Fetch of partition 0 of ``topic`` from ``offset``, up to ``max_bytes``: by name (the v4-12
    layout) or by topic id (v13+)."""
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                **({"topic_id": topic} if isinstance(topic, uuid.UUID) else {"topic": topic}),
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=max_bytes,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


class RawClient(BrokerConnection):
    def __init__(
        self, bootstrap: str, timeout_s: float = 10.0, security: ClientSecurity | None = None
    ) -> None:
        super().__init__(
            *parse_host_port(bootstrap), client_id="raw-test", timeout_s=timeout_s, security=security
        )

    def __enter__(self) -> RawClient:
        return self

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes:
        return self.receive_frame()

    def is_closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True


def register_broker(
    address: str,
    broker_id: int,
    cluster_id: str | None,
    features: list[tuple[str, int, int]] | None = None,
    security: ClientSecurity | None = None,
) -> Any:
    """BrokerRegistration (62) as a broker process sends it, to a controller listener; ``features`` are
    (name, min, max) supported ranges."""
    from pykraft.protocol.messages import BrokerRegistrationRequest, BrokerRegistrationResponse

    listener = BrokerRegistrationRequest.Listener(
        name="PLAINTEXT", host="127.0.0.1", port=1, security_protocol=0
    )
    request = BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id=cluster_id,
        incarnation_id=uuid.uuid4(),
        listeners=[listener],
        features=[
            BrokerRegistrationRequest.Feature(name=n, min_supported_version=lo, max_supported_version=hi)
            for n, lo, hi in features or []
        ],
        rack=None,
    )
    with RawClient(address, security=security) as client:
        return client.request(request, BrokerRegistrationResponse, 0)


def broker_heartbeat(
    address: str,
    broker_id: int,
    broker_epoch: int,
    current_metadata_offset: int,
    security: ClientSecurity | None = None,
) -> Any:
    """BrokerHeartbeat (63) to a controller listener."""
    from pykraft.protocol.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse

    request = BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=broker_epoch,
        current_metadata_offset=current_metadata_offset,
        want_fence=False,
        want_shut_down=False,
    )
    with RawClient(address, security=security) as client:
        return client.request(request, BrokerHeartbeatResponse, 0)


def create_topic(client: RawClient, name: str, partitions: int = 1) -> None:
    """CreateTopics v5 of ``name`` (replication factor 1), asserting it was created."""
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
    )
    resp = client.request(
        CreateTopicsRequest(topics=[topic], timeout_ms=10000, validate_only=False), CreateTopicsResponse, 5
    )
    assert resp.topics[0].error_code == 0, resp
