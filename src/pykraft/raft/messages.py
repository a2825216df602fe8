"""Raft RPCs as the core sees them: frozen dataclasses named after Kafka's RPCs, Kafka's field names.

The network layer translates these to and from the wire schemas (Vote 52, BeginQuorumEpoch 53,
EndQuorumEpoch 54, Fetch 1 and FetchSnapshot 59 on ``__cluster_metadata-0``); the core never sees bytes of a request header.

Rules:

* Every message travels in an envelope naming the peer: ``Outbound(destination_id, ...)`` leaves the
  core in ``Ready.messages``; ``Inbound(source_id, ...)`` enters through ``RaftNode.step``.
* ``correlation_id`` ties a response to its request, as Kafka's request header does. The core picks
  it for requests and copies it into the matching response; the shell (or the simulated network)
  hands it back unchanged. The core drops a response that answers no request it is waiting for, so a
  duplicated or late response can never make a follower append or truncate twice.
* ``-1`` means "unknown" for ids and epochs, exactly as on the wire.
* ``cluster_id`` is ``None`` when the sender did not set it (null on the wire); kafka-facts §5.6.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from pykraft.core.errors import ErrorCode

UNKNOWN_ID = -1
UNKNOWN_EPOCH = -1
UNKNOWN_OFFSET = -1

# KafkaRaftClient.MAX_FETCH_WAIT_MS and MAX_FETCH_SIZE_BYTES (kafka-facts §7.3).
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
# The raft partition (kafka-facts §7.3).
METADATA_TOPIC_NAME = "__cluster_metadata"
METADATA_PARTITION = 0


class OffsetAndEpoch(NamedTuple):
    """Kafka's OffsetAndEpoch: an end offset (exclusive) and the epoch of the entry before it."""

    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str | None
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    # Most caught-up voters first: the first one campaigns at once (KafkaRaftClient.endEpochElectionBackoff).
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = FETCH_MAX_WAIT_MS
    max_bytes: int = FETCH_MAX_BYTES
    # KIP-1166 (Fetch v18 HighWatermark): the follower's high watermark, so the leader does not park a
    # fetch whose only news is a newer high watermark. -1: unknown, the leader answers only on news.
    high_watermark: int = UNKNOWN_OFFSET


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    high_watermark: int = UNKNOWN_OFFSET
    log_start_offset: int = 0
    records: bytes = b""
    # Set when the follower's log diverges from the leader's: truncate to it and fetch again.
    diverging_epoch: OffsetAndEpoch | None = None
    # KIP-630 (Fetch v12+ tag 2 SnapshotId): the log the follower needs is gone (or it is empty);
    # fetch this snapshot with FetchSnapshot, install it, then Fetch from its end offset.
    snapshot_id: OffsetAndEpoch | None = None
    # KIP-853 (Fetch v16+ NodeEndpoints): where the leader it names listens (host, port), so a replica
    # that found it through a bootstrap server can fetch from it. The shell fills and reads it.
    leader_endpoint: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """FetchSnapshot (api key 59), one partition, as kafka-facts §4.3."""

    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int = FETCH_MAX_BYTES
    topic_name: str = METADATA_TOPIC_NAME
    partition: int = METADATA_PARTITION


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """The partition's answer; ``unaligned_records`` is the slice ``[position, position + len)`` of a
    snapshot of ``size`` bytes (not aligned to batch boundaries)."""

    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    snapshot_id: OffsetAndEpoch = OffsetAndEpoch(UNKNOWN_OFFSET, UNKNOWN_EPOCH)
    size: int = -1
    position: int = -1
    unaligned_records: bytes = b""


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """DescribeQuorum's ReplicaState: -1 for what the leader does not know yet."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    # v2 (KIP-853): the replica's directory id, 16 bytes; zeros when unknown (static voters, observers).
    replica_directory_id: bytes = bytes(16)


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """The leader's answer to DescribeQuorum (api key 55) for the metadata partition."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]
    # v2 Nodes (KIP-853): each voter's listeners as ``(node id, ((name, host, port), ...))``.
    nodes: tuple[tuple[int, tuple[tuple[str, str, int], ...]], ...] = ()


RaftRequest = (
    VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
)
RaftResponse = (
    VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse | FetchSnapshotResponse
)
RaftMessage = RaftRequest | RaftResponse


@dataclass(frozen=True, slots=True)
class Outbound:
    """A message the shell must send to ``destination_id`` (after persisting and flushing)."""

    destination_id: int
    message: RaftMessage
    correlation_id: int


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message that arrived from ``source_id``; responses carry their request's ``correlation_id``."""

    source_id: int
    message: RaftMessage
    correlation_id: int


def is_request(message: RaftMessage) -> bool:
    return isinstance(
        message,
        VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest,
    )
