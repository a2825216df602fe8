"""The raft RPCs' wire form: the core's messages (``raft.messages``) to and from Kafka's schemas.

Versions (what a Kafka 3.7+/4.x controller of a static quorum accepts, KIP-595/KIP-630):

* Vote v0, BeginQuorumEpoch v0, EndQuorumEpoch v0, FetchSnapshot v0 — the static-voter versions
  (v1 adds KIP-853 directory ids and endpoints, which a static quorum leaves at their defaults);
* Fetch v18: the raft Fetch names the metadata partition by topic id (``METADATA_TOPIC_ID``, Kafka's
  ``Uuid.METADATA_TOPIC_ID``, from v13), carries the replica in ``ReplicaState`` (v15+) and the
  follower's high watermark (KIP-1166, v18), so the leader parks a fetch with no news instead of
  answering it at once; ClusterId is tag 0, DivergingEpoch/CurrentLeader/SnapshotId tags 0/1/2;
* DescribeQuorum v1 (LastFetchTimestamp/LastCaughtUpTimestamp) as this side asks; the server answers
  v1 and v2 (KIP-853's replica directory ids and the voters' listeners, Nodes) at the asker's version.

Requests leave as header + body (no size prefix: the RPC channel frames them); responses to peers
leave framed, as every response of the shell's servers does. Bytes a peer sent that do not parse
raise ``RemoteProtocolError``, and so does a raft RPC for any partition but ``__cluster_metadata-0``
(Kafka answers INVALID_REQUEST; the core's messages have no partition to carry that answer).

The server side: ``decode_raft_request`` (header parsed by ``messages.parse_request_header``) and
``encode_raft_response``; ``decode_describe_quorum_request`` and ``encode_describe_quorum_response``.
The client side: ``encode_raft_request`` and ``decode_raft_response``; ``encode_describe_quorum_request``
and ``decode_describe_quorum_response`` for the quorum tool.
"""

from __future__ import annotations

import uuid
from typing import Any

from pykraft.core.errors import ErrorCode, RemoteProtocolError
from pykraft.protocol import messages
from pykraft.protocol.messages import ApiKey, RequestHeader
from pykraft.raft.messages import (
    METADATA_PARTITION,
    METADATA_TOPIC_NAME,
    UNKNOWN_EPOCH,
    UNKNOWN_ID,
    UNKNOWN_OFFSET,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    OffsetAndEpoch,
    QuorumDescription,
    RaftMessage,
    RaftRequest,
    RaftResponse,
    ReplicaDescription,
    VoteRequest,
    VoteResponse,
)

# Uuid.METADATA_TOPIC_ID: the fixed topic id of __cluster_metadata (0L, 1L).
METADATA_TOPIC_ID = uuid.UUID(int=1)
# Fetch's HighWatermark default (tag 1, v18): "not known" on the wire; the core uses -1.
_WIRE_UNKNOWN_HIGH_WATERMARK = (1 << 63) - 1

VERSIONS: dict[ApiKey, int] = {
    ApiKey.VOTE: 0,
    ApiKey.BEGIN_QUORUM_EPOCH: 0,
    ApiKey.END_QUORUM_EPOCH: 0,
    ApiKey.FETCH: 18,
    ApiKey.FETCH_SNAPSHOT: 0,
    ApiKey.DESCRIBE_QUORUM: 1,
}
RAFT_API_KEYS = frozenset(
    {ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH, ApiKey.FETCH, ApiKey.FETCH_SNAPSHOT}
)
_API_KEY_OF: dict[type, ApiKey] = {
    VoteRequest: ApiKey.VOTE,
    VoteResponse: ApiKey.VOTE,
    BeginQuorumEpochRequest: ApiKey.BEGIN_QUORUM_EPOCH,
    BeginQuorumEpochResponse: ApiKey.BEGIN_QUORUM_EPOCH,
    EndQuorumEpochRequest: ApiKey.END_QUORUM_EPOCH,
    EndQuorumEpochResponse: ApiKey.END_QUORUM_EPOCH,
    FetchRequest: ApiKey.FETCH,
    FetchResponse: ApiKey.FETCH,
    FetchSnapshotRequest: ApiKey.FETCH_SNAPSHOT,
    FetchSnapshotResponse: ApiKey.FETCH_SNAPSHOT,
}


def api_key_of(message: RaftMessage) -> ApiKey:
    return _API_KEY_OF[type(message)]


def _error(code: int) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


# --- requests -------------------------------------------------------------------------------------------


def encode_raft_request(message: RaftRequest, correlation_id: int, client_id: str) -> bytes:
    """Request header + body of ``message`` at ``VERSIONS`` (no size prefix)."""
    key = api_key_of(message)
    version = VERSIONS[key]
    cls: Any = messages.request_class(key)
    request = _request_body(cls, message)
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=False))


def _request_body(cls: Any, message: RaftRequest) -> Any:
    match message:
        case VoteRequest():
            return _quorum_request(
                cls,
                message.cluster_id,
                candidate_epoch=message.candidate_epoch,
                candidate_id=message.candidate_id,
                last_offset_epoch=message.last_offset_epoch,
                last_offset=message.last_offset,
            )
        case BeginQuorumEpochRequest():
            return _quorum_request(
                cls, message.cluster_id, leader_id=message.leader_id, leader_epoch=message.leader_epoch
            )
        case EndQuorumEpochRequest():
            return _quorum_request(
                cls,
                message.cluster_id,
                leader_id=message.leader_id,
                leader_epoch=message.leader_epoch,
                preferred_successors=list(message.preferred_successors),
                preferred_candidates=[],
            )
        case FetchRequest():
            partition = cls.FetchTopic.FetchPartition(
                partition=METADATA_PARTITION,
                current_leader_epoch=message.current_leader_epoch,
                fetch_offset=message.fetch_offset,
                last_fetched_epoch=message.last_fetched_epoch,
                log_start_offset=-1,
                partition_max_bytes=message.max_bytes,
                high_watermark=(
                    _WIRE_UNKNOWN_HIGH_WATERMARK if message.high_watermark < 0 else message.high_watermark
                ),
            )
            return cls(
                cluster_id=message.cluster_id,
                replica_state=cls.ReplicaState(replica_id=message.replica_id, replica_epoch=-1),
                max_wait_ms=message.max_wait_ms,
                min_bytes=0,
                max_bytes=message.max_bytes,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[cls.FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[partition])],
                forgotten_topics_data=[],
                rack_id="",
            )
        case FetchSnapshotRequest():
            partition = cls.TopicSnapshot.PartitionSnapshot(
                partition=message.partition,
                current_leader_epoch=message.current_leader_epoch,
                snapshot_id=cls.TopicSnapshot.PartitionSnapshot.SnapshotId(
                    end_offset=message.snapshot_id.offset, epoch=message.snapshot_id.epoch
                ),
                position=message.position,
            )
            return cls(
                cluster_id=message.cluster_id,
                replica_id=message.replica_id,
                max_bytes=message.max_bytes,
                topics=[cls.TopicSnapshot(name=message.topic_name, partitions=[partition])],
            )
    raise AssertionError(f"not a raft request: {message!r}")


def _quorum_request(cls: Any, cluster_id: str | None, **partition_fields: Any) -> Any:
    """Vote / BeginQuorumEpoch / EndQuorumEpoch: the metadata partition's fields under one topic."""
    partition = cls.TopicData.PartitionData(partition_index=METADATA_PARTITION, **partition_fields)
    topics = [cls.TopicData(topic_name=METADATA_TOPIC_NAME, partitions=[partition])]
    if cls.API_KEY == ApiKey.VOTE:
        return cls(cluster_id=cluster_id, topics=topics)
    return cls(cluster_id=cluster_id, topics=topics, leader_endpoints=[])


def _only_partition(topics: Any, what: str) -> tuple[Any, Any]:
    if not topics or len(topics) != 1:
        raise RemoteProtocolError(f"{what}: expected one topic, got {len(topics or [])}")
    topic = topics[0]
    if not topic.partitions or len(topic.partitions) != 1:
        raise RemoteProtocolError(f"{what}: expected one partition, got {len(topic.partitions or [])}")
    return topic, topic.partitions[0]


def _expect_metadata_partition(what: str, topic: str | uuid.UUID | None, partition_index: int) -> None:
    """KafkaRaftClient answers a raft RPC for any other partition INVALID_REQUEST ("until we support
    multi-raft", RaftUtil.hasValidTopicPartition). The core's messages have no partition to carry that
    into, so such bytes fail here: the connection closes instead of the request being served as if it
    named ``__cluster_metadata-0`` (a consumer Fetch of topic X would get metadata records back).
    ``topic`` is the name, or the id where the schema has one (Fetch v13+, ``Uuid.METADATA_TOPIC_ID``)."""
    if topic not in (METADATA_TOPIC_NAME, METADATA_TOPIC_ID) or partition_index != METADATA_PARTITION:
        raise RemoteProtocolError(f"{what} for {topic}-{partition_index}: only the metadata partition")


def decode_raft_request(header: RequestHeader, frame: memoryview) -> RaftRequest:
    """A raft request that arrived on the controller listener (its header already parsed)."""
    if header.api_key not in RAFT_API_KEYS:
        raise RemoteProtocolError(f"api key {header.api_key} is not a raft RPC")
    request = messages.decode_request(header, frame)
    key = ApiKey(header.api_key)
    if key == ApiKey.VOTE:
        topic, p = _only_partition(request.topics, "Vote")
        _expect_metadata_partition("Vote", topic.topic_name, p.partition_index)
        return VoteRequest(
            request.cluster_id, p.candidate_epoch, p.candidate_id, p.last_offset_epoch, p.last_offset
        )
    if key == ApiKey.BEGIN_QUORUM_EPOCH:
        topic, p = _only_partition(request.topics, "BeginQuorumEpoch")
        _expect_metadata_partition("BeginQuorumEpoch", topic.topic_name, p.partition_index)
        return BeginQuorumEpochRequest(request.cluster_id, p.leader_id, p.leader_epoch)
    if key == ApiKey.END_QUORUM_EPOCH:
        topic, p = _only_partition(request.topics, "EndQuorumEpoch")
        _expect_metadata_partition("EndQuorumEpoch", topic.topic_name, p.partition_index)
        successors = (
            p.preferred_successors
            if header.api_version == 0
            else [c.candidate_id for c in p.preferred_candidates]
        )
        return EndQuorumEpochRequest(request.cluster_id, p.leader_id, p.leader_epoch, tuple(successors or ()))
    if key == ApiKey.FETCH:
        topic, p = _only_partition(request.topics, "Fetch")
        # Fetch names its topic by id from v13 (KIP-516), by name before.
        _expect_metadata_partition(
            "Fetch", topic.topic_id if header.api_version >= 13 else topic.topic, p.partition
        )
        if header.api_version >= 15:  # tagged ReplicaState; absent = a consumer's fetch (-1)
            replica_id = request.replica_state.replica_id if request.replica_state is not None else UNKNOWN_ID
        else:
            replica_id = request.replica_id
        high_watermark = -1
        if header.api_version >= 18 and p.high_watermark not in (None, _WIRE_UNKNOWN_HIGH_WATERMARK):
            high_watermark = p.high_watermark
        return FetchRequest(
            cluster_id=request.cluster_id,
            replica_id=replica_id,
            current_leader_epoch=p.current_leader_epoch,
            fetch_offset=p.fetch_offset,
            last_fetched_epoch=p.last_fetched_epoch,
            max_wait_ms=request.max_wait_ms,
            max_bytes=p.partition_max_bytes,
            high_watermark=high_watermark,
        )
    topic, p = _only_partition(request.topics, "FetchSnapshot")
    return FetchSnapshotRequest(
        cluster_id=request.cluster_id,
        replica_id=request.replica_id,
        current_leader_epoch=p.current_leader_epoch,
        snapshot_id=OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch),
        position=p.position,
        max_bytes=request.max_bytes,
        topic_name=topic.name,
        partition=p.partition,
    )


# --- responses ------------------------------------------------------------------------------------------


def encode_raft_response(header: RequestHeader, message: RaftResponse) -> bytearray:
    """The framed response to a raft request, at the request's version."""
    key = ApiKey(header.api_key)
    cls: Any = messages.response_class(key)
    assert api_key_of(message) == key, (message, key)
    match message:
        case VoteResponse() | BeginQuorumEpochResponse() | EndQuorumEpochResponse():
            fields: dict[str, Any] = (
                {"vote_granted": message.vote_granted} if isinstance(message, VoteResponse) else {}
            )
            partition = cls.TopicData.PartitionData(
                partition_index=METADATA_PARTITION,
                error_code=message.error_code,
                leader_id=message.leader_id,
                leader_epoch=message.leader_epoch,
                **fields,
            )
            body = cls(
                error_code=ErrorCode.NONE,
                topics=[cls.TopicData(topic_name=METADATA_TOPIC_NAME, partitions=[partition])],
            )
        case FetchResponse():
            body = _fetch_response_body(cls, header.api_version, message)
        case FetchSnapshotResponse():
            part_cls = cls.TopicSnapshot.PartitionSnapshot
            partition = part_cls(
                index=METADATA_PARTITION,
                error_code=message.error_code,
                snapshot_id=part_cls.SnapshotId(
                    end_offset=message.snapshot_id.offset, epoch=message.snapshot_id.epoch
                ),
                current_leader=part_cls.LeaderIdAndEpoch(
                    leader_id=message.leader_id, leader_epoch=message.leader_epoch
                ),
                size=message.size,
                position=message.position,
                unaligned_records=message.unaligned_records,
            )
            body = cls(
                throttle_time_ms=0,
                error_code=ErrorCode.NONE,
                topics=[cls.TopicSnapshot(name=METADATA_TOPIC_NAME, partitions=[partition])],
            )
        case _:
            raise AssertionError(f"not a raft response: {message!r}")
    return messages.encode_response(header, body)


def encode_raft_error_response(header: RequestHeader, error: ErrorCode) -> bytearray:
    """A raft request refused as a whole (CLUSTER_AUTHORIZATION_FAILED): the top-level error and no
    partitions, as KafkaRaftClient answers it."""
    key = ApiKey(header.api_key)
    cls: Any = messages.response_class(key)
    fields: dict[str, Any] = {"error_code": error}
    if key in (ApiKey.FETCH, ApiKey.FETCH_SNAPSHOT):
        fields["throttle_time_ms"] = 0
    if key == ApiKey.FETCH:
        fields.update(session_id=0, responses=[])
    else:
        fields["topics"] = []
    return messages.encode_response(header, cls(**fields))


def _fetch_response_body(cls: Any, version: int, message: FetchResponse) -> Any:
    part_cls = cls.FetchableTopicResponse.PartitionData
    diverging = message.diverging_epoch
    snapshot = message.snapshot_id
    partition = part_cls(
        partition_index=METADATA_PARTITION,
        error_code=message.error_code,
        high_watermark=message.high_watermark,
        last_stable_offset=-1,
        log_start_offset=message.log_start_offset,
        diverging_epoch=part_cls.EpochEndOffset(
            epoch=diverging.epoch if diverging else -1, end_offset=diverging.offset if diverging else -1
        ),
        current_leader=part_cls.LeaderIdAndEpoch(
            leader_id=message.leader_id, leader_epoch=message.leader_epoch
        ),
        snapshot_id=part_cls.SnapshotId(
            end_offset=snapshot.offset if snapshot else -1, epoch=snapshot.epoch if snapshot else -1
        ),
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=message.records,
    )
    topic = (
        cls.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[partition])
        if version >= 13
        else cls.FetchableTopicResponse(topic=METADATA_TOPIC_NAME, partitions=[partition])
    )
    # KIP-853 (KafkaRaftClient.buildFetchResponse): the leader's endpoint, for a replica that asked a
    # bootstrap server and must fetch from the leader next.
    endpoint = message.leader_endpoint
    node_endpoints = (
        [cls.NodeEndpoint(node_id=message.leader_id, host=endpoint[0], port=endpoint[1], rack=None)]
        if endpoint is not None and message.leader_id >= 0 and version >= 16
        else []
    )
    return cls(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        session_id=0,
        responses=[topic],
        node_endpoints=node_endpoints,
    )


def decode_raft_response(request_type: type, frame: bytes) -> tuple[int, RaftResponse]:
    """A peer's answer (response header + body, no size prefix) to a request of ``request_type``;
    returns its correlation id and the core's response message."""
    key = _API_KEY_OF[request_type]
    correlation_id, response = _decode_response(key, frame)
    top_error = _error(getattr(response, "error_code", 0) or 0)
    if key == ApiKey.FETCH:
        topics = response.responses
    else:
        topics = response.topics
    if top_error != ErrorCode.NONE and not topics:
        return correlation_id, _error_response(key, top_error)
    topic, p = _only_partition(topics, key.name)
    if key != ApiKey.FETCH_SNAPSHOT:  # FetchSnapshot's partition is the core's to judge (see requests)
        # KafkaRaftClient.handle*Response: an answer for another partition is not handled.
        _expect_metadata_partition(
            key.name, topic.topic_id if key == ApiKey.FETCH else topic.topic_name, p.partition_index
        )
    match key:
        case ApiKey.VOTE:
            return correlation_id, VoteResponse(
                _error(p.error_code), p.leader_id, p.leader_epoch, bool(p.vote_granted)
            )
        case ApiKey.BEGIN_QUORUM_EPOCH:
            return correlation_id, BeginQuorumEpochResponse(_error(p.error_code), p.leader_id, p.leader_epoch)
        case ApiKey.END_QUORUM_EPOCH:
            return correlation_id, EndQuorumEpochResponse(_error(p.error_code), p.leader_id, p.leader_epoch)
        case ApiKey.FETCH:
            # Tagged fields a peer may leave out: CurrentLeader, DivergingEpoch, SnapshotId.
            diverging = p.diverging_epoch
            snapshot = p.snapshot_id
            leader = p.current_leader
            leader_id = leader.leader_id if leader is not None else UNKNOWN_ID
            endpoint = next(
                (
                    (str(e.host), int(e.port))
                    for e in (response.node_endpoints or ())
                    if e.node_id == leader_id and leader_id >= 0
                ),
                None,
            )
            return correlation_id, FetchResponse(
                leader_endpoint=endpoint,
                error_code=_error(p.error_code),
                leader_id=leader_id,
                leader_epoch=leader.leader_epoch if leader is not None else UNKNOWN_EPOCH,
                high_watermark=p.high_watermark,
                log_start_offset=p.log_start_offset,
                records=bytes(p.records or b""),
                diverging_epoch=(
                    OffsetAndEpoch(diverging.end_offset, diverging.epoch)
                    if diverging is not None and diverging.epoch >= 0 and diverging.end_offset >= 0
                    else None
                ),
                snapshot_id=(
                    OffsetAndEpoch(snapshot.end_offset, snapshot.epoch)
                    if snapshot is not None and snapshot.epoch >= 0 and snapshot.end_offset >= 0
                    else None
                ),
            )
        case _:
            leader = p.current_leader
            return correlation_id, FetchSnapshotResponse(
                error_code=_error(p.error_code),
                leader_id=leader.leader_id if leader is not None else UNKNOWN_ID,
                leader_epoch=leader.leader_epoch if leader is not None else UNKNOWN_EPOCH,
                snapshot_id=OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch),
                size=p.size,
                position=p.position,
                unaligned_records=bytes(p.unaligned_records or b""),
            )


def _decode_response(key: ApiKey, frame: bytes | memoryview) -> tuple[int, Any]:
    """Response header (v0, or v1 with tagged fields when flexible) and body at ``VERSIONS[key]``,
    through kafka-python's compiled decoder; a short or malformed frame raises RemoteProtocolError
    (the library's slices do not fail when they run past the end, so the end is checked here)."""
    version = VERSIONS[key]
    cls: Any = messages.response_class(key)
    view = memoryview(frame)
    if len(view) < 4:
        raise RemoteProtocolError(f"{cls.__name__}: a {len(view)}-byte frame has no response header")
    correlation_id = int.from_bytes(view[:4], "big", signed=True)
    flexible = messages.is_flexible(key, version)
    pos = 4
    if flexible:
        pos = messages.skip_tagged_fields(view, pos)
    try:
        decoder = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls)
        response, end = decoder(view, pos)
    except Exception as exc:  # every failure inside the generated decoder means the peer's bytes are bad
        raise RemoteProtocolError(
            f"{cls.__name__} v{version} does not parse: {type(exc).__name__}: {exc}"
        ) from None
    if end > len(view):
        raise RemoteProtocolError(
            f"{cls.__name__} v{version}: body needs {end} bytes, response has {len(view)}"
        )
    return correlation_id, response


def _error_response(key: ApiKey, error: ErrorCode) -> RaftResponse:
    match key:
        case ApiKey.VOTE:
            return VoteResponse(error, UNKNOWN_ID, UNKNOWN_EPOCH, False)
        case ApiKey.BEGIN_QUORUM_EPOCH:
            return BeginQuorumEpochResponse(error, UNKNOWN_ID, UNKNOWN_EPOCH)
        case ApiKey.END_QUORUM_EPOCH:
            return EndQuorumEpochResponse(error, UNKNOWN_ID, UNKNOWN_EPOCH)
        case ApiKey.FETCH:
            return FetchResponse(error, UNKNOWN_ID, UNKNOWN_EPOCH, UNKNOWN_OFFSET)
        case _:
            return FetchSnapshotResponse(error, UNKNOWN_ID, UNKNOWN_EPOCH)


# --- DescribeQuorum ---------------------------------------------------------------------------------------


def decode_describe_quorum_request(header: RequestHeader, frame: memoryview) -> None:
    """Validate a DescribeQuorum request: it must ask for ``__cluster_metadata-0``."""
    if header.api_key != ApiKey.DESCRIBE_QUORUM:
        raise RemoteProtocolError(f"api key {header.api_key} is not DescribeQuorum")
    request = messages.decode_request(header, frame)
    topic, p = _only_partition(request.topics, "DescribeQuorum")
    _expect_metadata_partition("DescribeQuorum", topic.topic_name, p.partition_index)


def describes_the_metadata_partition(request: Any) -> bool:
    """A decoded DescribeQuorum asks for ``__cluster_metadata-0`` alone (RaftUtil.hasValidTopicPartition);
    Kafka answers any other UNKNOWN_TOPIC_OR_PARTITION."""
    topics = request.topics or []
    if len(topics) != 1 or len(topics[0].partitions or []) != 1:
        return False
    return bool(
        topics[0].topic_name == METADATA_TOPIC_NAME
        and topics[0].partitions[0].partition_index == METADATA_PARTITION
    )


def describe_quorum_response(description: QuorumDescription | None, leader_id: int, leader_epoch: int) -> Any:
    """The DescribeQuorum response (its version set when encoded): the leader's description, or
    NOT_LEADER_OR_FOLLOWER with the leader this node knows (``description`` None)."""
    cls: Any = messages.response_class(ApiKey.DESCRIBE_QUORUM)
    part_cls = cls.TopicData.PartitionData
    replica_cls = part_cls.ReplicaState

    def replicas(items: Any) -> list[Any]:
        return [
            replica_cls(
                replica_id=r.replica_id,
                replica_directory_id=uuid.UUID(bytes=r.replica_directory_id),
                log_end_offset=r.log_end_offset,
                last_fetch_timestamp=r.last_fetch_timestamp,
                last_caught_up_timestamp=r.last_caught_up_timestamp,
            )
            for r in items
        ]

    if description is None:
        partition = part_cls(
            partition_index=METADATA_PARTITION,
            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            error_message=None,
            leader_id=leader_id,
            leader_epoch=leader_epoch,
            high_watermark=-1,
            current_voters=[],
            observers=[],
        )
    else:
        partition = part_cls(
            partition_index=METADATA_PARTITION,
            error_code=ErrorCode.NONE,
            error_message=None,
            leader_id=description.leader_id,
            leader_epoch=description.leader_epoch,
            high_watermark=description.high_watermark,
            current_voters=replicas(description.current_voters),
            observers=replicas(description.observers),
        )
    return cls(
        error_code=ErrorCode.NONE,
        error_message=None,
        topics=[cls.TopicData(topic_name=METADATA_TOPIC_NAME, partitions=[partition])],
        nodes=[
            cls.Node(
                node_id=node_id,
                listeners=[
                    cls.Node.Listener(name=name, host=host, port=port) for name, host, port in listeners
                ],
            )
            for node_id, listeners in (description.nodes if description is not None else ())
        ],
    )


def describe_quorum_error_response(error: ErrorCode, message: str | None = None) -> Any:
    """DescribeQuorum refused as a whole (DescribeQuorumRequest.getErrorResponse): the error, no topics."""
    cls: Any = messages.response_class(ApiKey.DESCRIBE_QUORUM)
    return cls(error_code=error, error_message=message, topics=[], nodes=[])


def encode_describe_quorum_response(
    header: RequestHeader, description: QuorumDescription | None, leader_id: int, leader_epoch: int
) -> bytearray:
    """The framed :func:`describe_quorum_response`."""
    return messages.encode_response(header, describe_quorum_response(description, leader_id, leader_epoch))


def encode_describe_quorum_error(header: RequestHeader, error: ErrorCode) -> bytearray:
    """DescribeQuorum refused as a whole (CLUSTER_AUTHORIZATION_FAILED): the error and no topics."""
    return messages.encode_response(header, describe_quorum_error_response(error))


# --- DescribeQuorum, the tool's side (pykraft metadata quorum, like kafka-metadata-quorum) --------------


def encode_describe_quorum_request(correlation_id: int, client_id: str) -> bytes:
    """DescribeQuorum of ``__cluster_metadata-0`` at ``VERSIONS`` (header + body, no size prefix), as
    QuorumCommand sends it through Admin.describeMetadataQuorum."""
    cls: Any = messages.request_class(ApiKey.DESCRIBE_QUORUM)
    request = cls(
        topics=[
            cls.TopicData(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[cls.TopicData.PartitionData(partition_index=METADATA_PARTITION)],
            )
        ]
    )
    request.API_VERSION = VERSIONS[ApiKey.DESCRIBE_QUORUM]
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=False))


def decode_describe_quorum_response(frame: bytes | memoryview) -> tuple[int, ErrorCode, QuorumDescription]:
    """A controller's DescribeQuorum answer (response header + body at ``VERSIONS``, no size prefix):
    its correlation id, its error (the top-level one first, as KafkaAdminClient.describeMetadataQuorum
    reads it, then the partition's), and the partition's content. On an error the description holds
    whatever leader the controller named (NOT_LEADER_OR_FOLLOWER: the one it knows, or -1) and no
    replicas."""
    correlation_id, response = _decode_response(ApiKey.DESCRIBE_QUORUM, frame)
    top_error = _error(response.error_code)
    if top_error != ErrorCode.NONE and not response.topics:
        return correlation_id, top_error, QuorumDescription(UNKNOWN_ID, UNKNOWN_EPOCH, UNKNOWN_OFFSET, (), ())
    topic, p = _only_partition(response.topics, "DescribeQuorum")
    _expect_metadata_partition("DescribeQuorum", topic.topic_name, p.partition_index)

    def replicas(items: Any) -> tuple[ReplicaDescription, ...]:
        return tuple(
            ReplicaDescription(
                r.replica_id,
                r.log_end_offset,
                r.last_fetch_timestamp,
                r.last_caught_up_timestamp,
                r.replica_directory_id.bytes if r.replica_directory_id is not None else bytes(16),
            )
            for r in items or ()
        )

    error = top_error if top_error != ErrorCode.NONE else _error(p.error_code)
    description = QuorumDescription(
        leader_id=p.leader_id,
        leader_epoch=p.leader_epoch,
        high_watermark=p.high_watermark,
        current_voters=replicas(p.current_voters),
        observers=replicas(p.observers),
        nodes=tuple(
            (n.node_id, tuple((str(e.name), str(e.host), int(e.port)) for e in n.listeners or ()))
            for n in response.nodes or ()
        ),
    )
    return correlation_id, error, description
