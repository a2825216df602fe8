"""The controller and the MetadataImage on top of a simulated raft node, as ``io/metadata_plane.py``
runs them on a real one (without asyncio): the leader's QuorumController generates records and
replays them at append time; committed batches replay into every node's image (and into the
controller for records it did not generate); a snapshot carries the image's records; losing the
leadership reverts the controller to the committed image.

The world checks, after every apply (kafka-facts §1, KIP-730, KIP-1262, KIP-630):
* producer-ID blocks only move forward in the committed log, so no two blocks ever overlap, across
  any number of leader changes;
* the cluster id, once committed, never changes, and no node's image ever holds another one;
* the image any node builds at offset N (by applying the log or by loading a snapshot) is the same;
* KIP-631: every partition is led by a registered, unfenced broker of its ISR, or by nobody, through
  registrations (in-process and broker processes), heartbeats that unfence or fence, expired sessions
  and controlled shutdowns.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.replication import CreatableTopic
from pykraft.controller.result import ControllerResult
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import BrokerEndpoint, MetadataImage
from pykraft.metadata.records import ProducerIdsRecord, decode_metadata_record, encode_metadata_record
from pykraft.metadata.snapshots import image_snapshot_values, load_snapshot_image
from pykraft.raft.node import RaftNode
from pykraft.raft.ready import CommittedBatch
from pykraft.raft.state import Role

BROKER_IDS = (101, 102, 103)


class MetadataViolation(AssertionError):
    pass


def image_digest(image: MetadataImage) -> bytes:
    return hashlib.blake2b(b"".join(image_snapshot_values(image)), digest_size=16).digest()


@dataclass
class NodeMetadata:
    """One node's controller and image (rebuilt from scratch at every start, as after a crash)."""

    rng: random.Random
    image: MetadataImage = MetadataImage.EMPTY
    controller: QuorumController = field(init=False)
    applied_end_offset: int = 0
    active: bool = False

    def __post_init__(self) -> None:
        self.controller = QuorumController(rng=self.rng)

    # --- the shell's rules ------------------------------------------------------------------------

    def load_snapshot(self, values: list[bytes], end_offset: int, epoch: int) -> None:
        self.image = load_snapshot_image(values, end_offset - 1, epoch)
        self.controller = QuorumController(rng=self.rng)
        self.controller.load_image(self.image, end_offset)
        self.applied_end_offset = end_offset

    def apply(self, batch: CommittedBatch) -> list[tuple[int, object]]:
        """Replay one committed batch; returns the (offset, record) pairs it held."""
        applied: list[tuple[int, object]] = []
        if batch.is_control:
            if batch.last_offset >= self.controller.next_write_offset:
                self.controller.note_log_end_offset(batch.last_offset + 1)
        else:
            delta = MetadataDelta(self.image)
            for index, value in enumerate(batch.records):
                offset = batch.base_offset + index
                record = decode_metadata_record(value)
                if offset >= self.controller.next_write_offset:
                    self.controller.replay(record, offset)
                delta.replay(record, offset, batch.epoch)
                applied.append((offset, record.message))
            self.image = delta.apply()
        self.applied_end_offset = batch.last_offset + 1
        return applied

    def after_ready(self, node: RaftNode) -> None:
        """Activation and resignation, as MetadataPlane._drain_ready decides them."""
        if self.active and node.role != Role.LEADER:
            self.active = False
            self.controller = QuorumController(rng=self.rng)
            self.controller.load_image(self.image, self.applied_end_offset)

    def can_activate(self, node: RaftNode) -> bool:
        end = node.log.end_offset
        return (
            not self.active
            and node.role == Role.LEADER
            and node.high_watermark >= end
            and self.applied_end_offset >= end
            and self.controller.next_write_offset >= end
        )

    def generate(self, node: RaftNode, choice: random.Random, cluster_id: str) -> list[bytes]:
        """The records the active controller writes next (activation first), already replayed."""
        result: ControllerResult[Any]
        if not self.active:
            self.active = True
            self.controller.note_log_end_offset(node.log.end_offset)
            result = self.controller.activate(cluster_id=cluster_id)
        else:
            assert self.controller.next_write_offset == node.log.end_offset, (
                self.controller.next_write_offset,
                node.log.end_offset,
            )
            registered = [b for b in BROKER_IDS if self.controller.broker_epoch(b) >= 0]
            action = choice.random()
            if not registered or action < 0.15:
                # In-process brokers are unfenced at once; broker processes wait for a heartbeat.
                broker_id = choice.choice(BROKER_IDS)
                endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, 0)
                result = self.controller.register_broker(
                    broker_id,
                    uuid.UUID(int=choice.getrandbits(128)),
                    [endpoint],
                    None,
                    0,
                    unfence=choice.random() < 0.5,
                )
            elif action < 0.45:
                broker_id = choice.choice(registered)
                result = self.controller.allocate_producer_ids(
                    broker_id, self.controller.broker_epoch(broker_id)
                )
            elif action < 0.6:
                # KIP-631 heartbeats from a broker that is behind, just caught up, or ahead.
                broker_id = choice.choice(registered)
                epoch = self.controller.broker_epoch(broker_id)
                result = self.controller.broker_heartbeat(
                    broker_id,
                    epoch,
                    choice.choice([epoch - 1, epoch, self.applied_end_offset]),
                    want_fence=choice.random() < 0.05,
                    want_shut_down=choice.random() < 0.05,
                )
            elif action < 0.67:
                result = self.controller.fence_brokers([choice.choice(registered)])  # a session expired
            else:
                name = f"t{choice.randrange(40)}"
                topic = CreatableTopic(name, choice.randint(1, 3), choice.choice([1, 1, 2]))
                result = self.controller.create_topics([topic])
        return [encode_metadata_record(record) for record in result.records]


@dataclass
class MetadataInvariants:
    """What every node's metadata must agree on (world-wide registries)."""

    # The first image seen at each applied offset (frozen, shares structure with its neighbours).
    image_at: dict[int, MetadataImage] = field(default_factory=dict)
    producer_ids_at: dict[int, int] = field(default_factory=dict)
    cluster_id: str | None = None
    cluster_id_offset: int = -1

    def check_applied(self, node_id: int, meta: NodeMetadata, records: list[tuple[int, object]]) -> None:
        for offset, message in records:
            if isinstance(message, ProducerIdsRecord):
                known = self.producer_ids_at.setdefault(offset, message.next_producer_id)
                if known != message.next_producer_id:
                    raise MetadataViolation(f"node {node_id}: ProducerIdsRecord at {offset} differs")
                # Nodes apply in log order, so the record just before this one is already known.
                before = max((o for o in self.producer_ids_at if o < offset), default=None)
                if before is not None and self.producer_ids_at[before] >= message.next_producer_id:
                    raise MetadataViolation(
                        f"KIP-730: node {node_id} committed next_producer_id {message.next_producer_id} at "
                        f"{offset}, not above {self.producer_ids_at[before]} at {before}: blocks overlap"
                    )
        self.check_image(node_id, meta)

    @staticmethod
    def check_leaders(node_id: int, image: MetadataImage) -> None:
        """KIP-631: a partition is led by an unfenced, registered broker of its ISR, or by nobody."""
        brokers = image.cluster.brokers
        for name, topic in image.topics.topics_by_name.items():
            for partition_id, part in topic.partitions.items():
                if part.leader == -1:
                    continue
                registration = brokers.get(part.leader)
                if registration is None or registration.fenced or part.leader not in part.isr:
                    raise MetadataViolation(
                        f"node {node_id}: {name}-{partition_id} is led by {part.leader} "
                        f"(registered={registration is not None}, fenced={registration.fenced if registration else None}, "
                        f"isr={part.isr})"
                    )

    def check_image(self, node_id: int, meta: NodeMetadata) -> None:
        cluster_id = meta.image.cluster_id
        if cluster_id is not None:
            if self.cluster_id is None:
                self.cluster_id, self.cluster_id_offset = cluster_id, meta.applied_end_offset
            elif cluster_id != self.cluster_id:
                raise MetadataViolation(
                    f"KIP-1262: node {node_id} holds cluster id {cluster_id}, committed was {self.cluster_id}"
                )
        elif self.cluster_id is not None and meta.applied_end_offset >= self.cluster_id_offset:
            raise MetadataViolation(
                f"KIP-1262: node {node_id} lost the cluster id at {meta.applied_end_offset}"
            )
        self.check_leaders(node_id, meta.image)
        first = self.image_at.setdefault(meta.applied_end_offset, meta.image)
        # Structural equality first (cheap); the record digest decides, so provenance alone never differs.
        if (
            first is not meta.image
            and first != meta.image
            and image_digest(first) != image_digest(meta.image)
        ):
            raise MetadataViolation(f"node {node_id}: the image at offset {meta.applied_end_offset} differs")
