"""ProducerIdControlManager: KIP-730 producer-id blocks handed out by the controller.

Rules (kafka-facts.md §1.3-§1.4, Kafka ``ProducerIdControlManager.java``):

1. ``generate_next_producer_id(broker_id, broker_epoch)``: the broker must be registered with exactly
   that epoch (else STALE_BROKER_EPOCH, 77; a fenced broker is fine). The block starts at the current
   ``next_producer_block.first_producer_id``; if that is above Long.MAX - 1000 the id space is exhausted
   (UNKNOWN_SERVER_ERROR, -1, and no record). Otherwise one ProducerIdsRecord v0
   ``{BrokerId, BrokerEpoch, NextProducerId = first + 1000}`` and the response (first, 1000).
2. Generating changes nothing: the block advances only when the record is replayed. A retried
   AllocateProducerIds simply gets a new block (KIP-730 rejected alternatives).
3. ``replay``: unless the current block is EMPTY, NextProducerId must be strictly greater than the
   current block's first id (gaps are fine); a record that goes back raises ``MetadataReplayError``.

Invariant: after any replay, ``next_producer_block.first_producer_id`` never decreased.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

from pykraft.controller.cluster import ClusterControlManager
from pykraft.controller.result import ControllerResult
from pykraft.core.errors import ErrorCode
from pykraft.metadata.records import ApiMessageAndVersion, MetadataReplayError, ProducerIdsRecord

# Kafka ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
PRODUCER_ID_BLOCK_SIZE: Final = 1000
INT64_MAX: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    """``block_size`` ids from ``first_producer_id`` assigned to ``assigned_broker_id`` (§1.3)."""

    EMPTY: ClassVar[ProducerIdsBlock]

    assigned_broker_id: int
    first_producer_id: int
    block_size: int

    @property
    def last_producer_id(self) -> int:
        """Inclusive; -1 for EMPTY."""
        return self.first_producer_id + self.block_size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.block_size


ProducerIdsBlock.EMPTY = ProducerIdsBlock(assigned_broker_id=-1, first_producer_id=0, block_size=0)


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsResult:
    """The AllocateProducerIds (api key 67) response body: ProducerIdStart and ProducerIdLen."""

    error_code: ErrorCode
    producer_id_start: int = 0
    producer_id_len: int = 0
    error_message: str | None = None


class ProducerIdControlManager:
    def __init__(self, cluster_control: ClusterControlManager) -> None:
        self._cluster_control = cluster_control
        self._next_producer_block = ProducerIdsBlock.EMPTY
        self._broker_epoch = -1

    @property
    def next_producer_block(self) -> ProducerIdsBlock:
        return self._next_producer_block

    @property
    def broker_epoch(self) -> int:
        return self._broker_epoch

    def generate_next_producer_id(
        self, broker_id: int, broker_epoch: int
    ) -> ControllerResult[AllocateProducerIdsResult]:
        error = self._cluster_control.check_broker_epoch(broker_id, broker_epoch)
        if error is not ErrorCode.NONE:
            registration = self._cluster_control.registration(broker_id)
            message = (
                f"No broker registration found for broker id {broker_id}"
                if registration is None
                else f"Expected broker epoch {registration.broker_epoch}, but got broker epoch {broker_epoch}"
            )
            return ControllerResult([], AllocateProducerIdsResult(error, error_message=message))
        first_producer_id = self._next_producer_block.first_producer_id
        if first_producer_id > INT64_MAX - PRODUCER_ID_BLOCK_SIZE:
            message = "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit"
            return ControllerResult(
                [], AllocateProducerIdsResult(ErrorCode.UNKNOWN_SERVER_ERROR, error_message=message)
            )
        block = ProducerIdsBlock(broker_id, first_producer_id, PRODUCER_ID_BLOCK_SIZE)
        record = ProducerIdsRecord(
            broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=block.next_block_first_id
        )
        response = AllocateProducerIdsResult(ErrorCode.NONE, block.first_producer_id, block.block_size)
        return ControllerResult([ApiMessageAndVersion.of(record)], response)

    def restore(self, next_producer_block: ProducerIdsBlock, broker_epoch: int) -> None:
        """Set the saved state (AbortTransactionRecord, and QuorumController.load_image)."""
        self._next_producer_block = next_producer_block
        self._broker_epoch = broker_epoch

    def replay(self, record: Any) -> None:
        current = self._next_producer_block
        next_producer_id: int = record.next_producer_id
        if current != ProducerIdsBlock.EMPTY and next_producer_id <= current.first_producer_id:
            raise MetadataReplayError(
                f"Next Producer ID from replayed record ({next_producer_id}) is not greater than current "
                f"next Producer ID in block ({current})"
            )
        self._next_producer_block = ProducerIdsBlock(
            record.broker_id, next_producer_id, PRODUCER_ID_BLOCK_SIZE
        )
        self._broker_epoch = record.broker_epoch
        assert self._next_producer_block.first_producer_id >= current.first_producer_id


# KIP-730: "the controller can throttle brokers that request too many blocks (ThrottleTimeMs)". A block
# is 1000 ids, so 10 blocks a second with a burst of 10 is 10,000 new producers a second per broker.
PRODUCER_ID_BLOCKS_PER_SECOND = 10
PRODUCER_ID_BLOCK_BURST = 10


class ProducerIdAllocationLimiter:
    """Per-broker token bucket for AllocateProducerIds on the active controller (in memory, as
    Kafka's quotas are: a new active controller starts every broker with a full bucket)."""

    def __init__(
        self, blocks_per_second: int = PRODUCER_ID_BLOCKS_PER_SECOND, burst: int = PRODUCER_ID_BLOCK_BURST
    ) -> None:
        assert blocks_per_second > 0 and burst > 0
        self.blocks_per_second = blocks_per_second
        self.burst = burst
        self._tokens: dict[int, tuple[float, int]] = {}  # broker id -> (tokens, as of now_ms)

    def throttle_time_ms(self, broker_id: int, now_ms: int) -> int:
        """0 and one token taken when ``broker_id`` may have a block now; else how long to wait."""
        tokens, as_of_ms = self._tokens.get(broker_id, (float(self.burst), now_ms))
        tokens = min(float(self.burst), tokens + (now_ms - as_of_ms) * self.blocks_per_second / 1000)
        if tokens >= 1.0:
            self._tokens[broker_id] = (tokens - 1.0, now_ms)
            return 0
        self._tokens[broker_id] = (tokens, now_ms)
        return max(1, int((1.0 - tokens) * 1000 / self.blocks_per_second + 0.999))
