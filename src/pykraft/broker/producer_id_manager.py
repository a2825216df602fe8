"""The broker's producer-ID manager: blocks of ids from the controller (KIP-730).

Kafka's RPCProducerIdManager (kafka-facts.md §1.6), pure: instead of sending, it leaves at most one
``AllocateProducerIds`` request in :attr:`pending_request` for the shell to deliver to the active
controller (an in-process channel on one node, the network later) and takes the answer through
:meth:`on_response`. A request handler never blocks on it: while no block is available,
``generate_producer_id`` answers COORDINATOR_LOAD_IN_PROGRESS (14), which clients retry (REQUEST_TIMED_OUT
would be fatal to old clients).
"""

from __future__ import annotations

from dataclasses import dataclass

from pykraft.core.errors import ErrorCode

# Request the next block once 90% of the current one is handed out (PID_PREFETCH_THRESHOLD).
PID_PREFETCH_THRESHOLD = 0.90
# Block swaps tried in one generate call (ITERATION_LIMIT).
ITERATION_LIMIT = 3
# Backoff after a failed allocation before asking again (RETRY_BACKOFF_MS).
RETRY_BACKOFF_MS = 50
NO_RETRY = -1
INT64_MAX = 2**63 - 1


@dataclass(slots=True)
class ProducerIdsBlock:
    """A block of ids [first_producer_id, first_producer_id + block_size) (ProducerIdsBlock.java)."""

    assigned_broker_id: int
    first_producer_id: int
    block_size: int
    next_id: int = -1

    def __post_init__(self) -> None:
        if self.next_id < 0:
            self.next_id = self.first_producer_id

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.block_size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.block_size

    def claim_next_id(self) -> int | None:
        if self.next_id > self.last_producer_id:
            return None
        claimed = self.next_id
        self.next_id += 1
        return claimed


def empty_block() -> ProducerIdsBlock:
    return ProducerIdsBlock(assigned_broker_id=-1, first_producer_id=0, block_size=0)


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsRequestData:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsResponseData:
    error_code: int
    producer_id_start: int
    producer_id_len: int
    throttle_time_ms: int = 0


class ProducerIdManager:
    def __init__(self, broker_id: int, broker_epoch: int = -1) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.current_block = empty_block()
        self.next_block: ProducerIdsBlock | None = None
        self.request_in_flight = False
        self.backoff_deadline_ms = NO_RETRY
        # The one request the shell should deliver to the controller, if any.
        self.pending_request: AllocateProducerIdsRequestData | None = None

    def generate_producer_id(self, now_ms: int) -> tuple[ErrorCode, int]:
        """``(NONE, id)`` or ``(COORDINATOR_LOAD_IN_PROGRESS, -1)`` while no block is available."""
        for _ in range(ITERATION_LIMIT):
            claimed = self.current_block.claim_next_id()
            if claimed is not None:
                prefetch_at = self.current_block.first_producer_id + int(
                    self.current_block.block_size * PID_PREFETCH_THRESHOLD
                )
                if claimed == prefetch_at:
                    self.maybe_request_next_block(now_ms)
                return ErrorCode.NONE, claimed
            block, self.next_block = self.next_block, None
            if block is None:
                self.maybe_request_next_block(now_ms)
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1
            self.current_block = block
            self.request_in_flight = False
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1

    def maybe_request_next_block(self, now_ms: int) -> None:
        # Order from KAFKA-20114: a present next block wins, then at most one request in flight,
        # then no resend before the backoff deadline.
        if self.next_block is not None or self.request_in_flight:
            return
        if self.backoff_deadline_ms != NO_RETRY and now_ms < self.backoff_deadline_ms:
            return
        self.request_in_flight = True
        self.pending_request = AllocateProducerIdsRequestData(self.broker_id, self.broker_epoch)

    def take_request(self) -> AllocateProducerIdsRequestData | None:
        request, self.pending_request = self.pending_request, None
        return request

    def on_response(self, response: AllocateProducerIdsResponseData, now_ms: int) -> bool:
        """Install a prefetched block; ``False`` for an error or a bad block, with a 50 ms backoff, or the
        controller's throttle time when it is longer (KIP-730's rate limit)."""
        start, length = response.producer_id_start, response.producer_id_len
        ok = (
            response.error_code == ErrorCode.NONE
            and start > self.current_block.last_producer_id
            and start >= 0
            and length >= 0
            and start <= INT64_MAX - length
        )
        if ok:
            self.next_block = ProducerIdsBlock(self.broker_id, start, length)
            self.backoff_deadline_ms = NO_RETRY
            # request_in_flight stays set until the prefetched block is swapped in (as Kafka).
            return True
        self.backoff_deadline_ms = now_ms + max(RETRY_BACKOFF_MS, response.throttle_time_ms)
        self.request_in_flight = False
        return False

    def on_timeout(self) -> None:
        self.backoff_deadline_ms = NO_RETRY
        self.request_in_flight = False
