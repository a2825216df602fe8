"""KIP-392 fetch from follower: which replica a consumer should read a partition from.

Kafka's ReplicaManager.findPreferredReadReplica with its RackAwareReplicaSelector, on the leader:

1. Only a consumer's Fetch (replica id < 0) of version 11+ (it carries ``rack_id``), and only when
   ``replica.selector.class`` is set; otherwise no preferred replica (-1).
2. The candidates are the leader and each follower in the ISR whose log end offset is at least the fetch
   offset (it holds what the consumer asks for) and that has an endpoint (is a live broker).
3. RackAwareReplicaSelector: a client without a rack, or whose rack holds no candidate, or whose rack
   holds the leader, reads from the leader; otherwise from the most caught-up candidate of its rack
   (highest log end offset, then the most recently caught up; then the lowest id, to be deterministic).
4. The leader is never named as preferred: -1 means "keep fetching here".
"""

from __future__ import annotations

from collections.abc import Mapping

from pykraft.broker.replication import PartitionReplication

NO_PREFERRED_READ_REPLICA = -1


def preferred_read_replica(
    replication: PartitionReplication,
    fetch_offset: int,
    client_rack: str | None,
    racks: Mapping[int, str | None],
    now_ms: int,
) -> int:
    """The follower the consumer should fetch from (rules 2-4), or -1. ``racks`` holds the live brokers
    (those with an endpoint) and their ``broker.rack``."""
    if not client_rack or not replication.is_leader:
        return NO_PREFERRED_READ_REPLICA
    if racks.get(replication.broker_id) == client_rack:
        return NO_PREFERRED_READ_REPLICA
    # (log end offset, -time since last caught up, -id) of each same-rack candidate: max() is the best.
    candidates: list[tuple[int, int, int]] = []
    for broker_id, state in replication.followers.items():
        if (
            broker_id in replication.isr
            and broker_id in racks
            and racks[broker_id] == client_rack
            and state.log_end_offset >= fetch_offset
        ):
            candidates.append((state.log_end_offset, -(now_ms - state.last_caught_up_ms), -broker_id))
    if not candidates:
        return NO_PREFERRED_READ_REPLICA
    return -max(candidates)[2]
