"""``Ready``: what the shell must do next for one ``RaftNode``, in this order (etcd's Ready contract).

1. ``quorum_state`` (if not None): write the quorum-state file durably. Votes and epochs are persisted
   before any message that depends on them leaves.
2. ``flush_to_offset`` (if not None): fsync the log up to this offset. A follower's next Fetch tells
   the leader that everything below its fetch offset is durable; the leader counts its own log toward
   the high watermark only once it is flushed.
3. ``messages``: send them (best effort; the core retries what matters on its own timers).
4. ``load_snapshot`` (if not None): replace the state machine with this snapshot (KIP-630
   ``handleLoadSnapshot``: at start when a snapshot exists, or after a follower installed one); then
   ``committed``: apply these batches, in order. They are below the high watermark, so they never
   change, and the first starts at the snapshot's end offset when a snapshot was loaded.
5. ``RaftNode.advance(ready, now_ms)``: tells the core all of the above happened.

``role``, ``leader_id``, ``leader_epoch`` and ``high_watermark`` are the node's state after the changes
(always filled in; compare with the last Ready to see a change).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pykraft.raft.messages import OffsetAndEpoch, Outbound
from pykraft.raft.state import QuorumState, Role


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """One committed batch: offsets ``[base_offset, last_offset]``, the epoch that wrote it, and each
    record's value (``b""`` for a null value). Control batches (LeaderChange) are delivered too, with
    ``is_control`` set, so offsets stay contiguous for the state machine."""

    base_offset: int
    last_offset: int
    epoch: int
    records: tuple[bytes, ...]
    is_control: bool
    append_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class Ready:
    role: Role
    leader_id: int
    leader_epoch: int
    high_watermark: int
    quorum_state: QuorumState | None = None
    flush_to_offset: int | None = None
    messages: tuple[Outbound, ...] = ()
    load_snapshot: OffsetAndEpoch | None = None
    committed: tuple[CommittedBatch, ...] = field(default=())
