"""Where a new partition's replicas go (KIP-36 rack awareness), the controller's ReplicaPlacer.

Rules:

1. No usable broker has a rack: partition ``p``'s replicas are the usable brokers (sorted by id) from
   index ``start + p`` on, round robin; ``start`` is the controller's random offset, so leaders spread.
2. Some brokers have a ``broker.rack`` (a broker without one counts as one more rack, as Kafka's
   StripedReplicaPlacer keeps brokers without a rack together): the brokers are ordered rack by rack
   alternately (each rack's lowest id first, racks by name; Kafka AdminUtils.getRackAlternatedBrokerList),
   the first replica is that list's entry ``start + p``, and each further replica is the next broker of
   the list whose rack holds no replica of the partition yet, until every rack holds one; after that
   the next brokers in order (Kafka AdminUtils.assignReplicasToBrokersRackAware). So a partition's
   replicas span min(replication factor, racks) racks and leaders rotate over the racks. Kafka 4's
   StripedReplicaPlacer gives the same two guarantees with a random rack order; this order is the
   deterministic one, so a cluster whose brokers each have their own rack named in id order places
   exactly as rule 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def rack_alternated(broker_ids: Sequence[int], racks: Mapping[int, str | None]) -> list[int]:
    """The brokers taken one per rack in turn: racks ordered by name (no rack first), brokers by id."""
    by_rack: dict[str | None, list[int]] = {}
    for broker_id in sorted(broker_ids):
        by_rack.setdefault(racks.get(broker_id), []).append(broker_id)
    columns = [by_rack[rack] for rack in sorted(by_rack, key=lambda r: (r is not None, r or ""))]
    deepest = max((len(c) for c in columns), default=0)
    return [column[row] for row in range(deepest) for column in columns if row < len(column)]


def place_replicas(
    broker_ids: Sequence[int],
    racks: Mapping[int, str | None],
    start: int,
    partition_ids: Sequence[int],
    replication_factor: int,
) -> dict[int, tuple[int, ...]]:
    """Each partition's replicas, leader first. ``replication_factor`` is at most ``len(broker_ids)``."""
    assert 0 < replication_factor <= len(broker_ids)
    usable = sorted(broker_ids)
    count = len(usable)
    if all(racks.get(b) is None for b in usable):
        return {
            p: tuple(usable[(start + p + i) % count] for i in range(replication_factor))
            for p in partition_ids
        }
    ordered = rack_alternated(usable, racks)
    rack_count = len({racks.get(b) for b in usable})
    placed: dict[int, tuple[int, ...]] = {}
    for p in partition_ids:
        index = (start + p) % count
        replicas = [ordered[index]]
        racks_used = {racks.get(ordered[index])}
        while len(replicas) < replication_factor:
            index = (index + 1) % count
            candidate = ordered[index]
            rack = racks.get(candidate)
            if candidate in replicas or (rack in racks_used and len(racks_used) < rack_count):
                continue
            replicas.append(candidate)
            racks_used.add(rack)
        placed[p] = tuple(replicas)
    return placed
