"""The broker's producer-ID manager (KIP-730), Kafka's ProducerIdManagerTest scenarios (kafka-facts §8.4)."""

from __future__ import annotations

import pytest

from pykraft.broker.producer_id_manager import (
    RETRY_BACKOFF_MS,
    AllocateProducerIdsResponseData,
    ProducerIdManager,
    ProducerIdsBlock,
    empty_block,
)
from pykraft.core.errors import ErrorCode

LOAD = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class FakeController:
    """Hands out consecutive blocks of ``block_len`` ids, or the scripted errors first."""

    def __init__(self, block_len: int, errors: list[ErrorCode] | None = None) -> None:
        self.block_len = block_len
        self.next_start = 0
        self.errors = list(errors or [])
        self.requests = 0

    def answer(self) -> AllocateProducerIdsResponseData:
        self.requests += 1
        if self.errors:
            return AllocateProducerIdsResponseData(self.errors.pop(0), -1, -1)
        start = self.next_start
        self.next_start += self.block_len
        return AllocateProducerIdsResponseData(ErrorCode.NONE, start, self.block_len)


def pump(manager: ProducerIdManager, controller: FakeController, now_ms: int) -> bool:
    """Deliver the manager's pending request, as the shell does; True if one was sent."""
    request = manager.take_request()
    if request is None:
        return False
    manager.on_response(controller.answer(), now_ms)
    return True


def test_block_arithmetic() -> None:
    assert (empty_block().last_producer_id, empty_block().next_block_first_id, empty_block().block_size) == (
        -1,
        0,
        0,
    )
    block = ProducerIdsBlock(5, 1309418324, 5391)
    assert block.last_producer_id == 1309418324 + 5391 - 1
    assert block.next_block_first_id == 1309418324 + 5391
    one = ProducerIdsBlock(1, 7, 1)
    assert one.claim_next_id() == 7 and one.claim_next_id() is None


def test_no_block_answers_load_in_progress_and_asks_once() -> None:
    manager = ProducerIdManager(broker_id=1, broker_epoch=3)
    assert manager.generate_producer_id(0) == (LOAD, -1)
    request = manager.take_request()
    assert request is not None and (request.broker_id, request.broker_epoch) == (1, 3)
    # At most one request in flight.
    assert manager.generate_producer_id(0) == (LOAD, -1)
    assert manager.take_request() is None


@pytest.mark.parametrize("block_len", [1, 2, 10, 100])
def test_ids_are_unique_and_bounded_across_blocks(block_len: int) -> None:
    # §8.4 item 15, sequentially: every id unique, failures are only load-in-progress.
    manager = ProducerIdManager(broker_id=0)
    controller = FakeController(block_len)
    ids: list[int] = []
    now = 0
    while len(ids) < 3 * block_len:
        error, pid = manager.generate_producer_id(now)
        if error == ErrorCode.NONE:
            ids.append(pid)
        else:
            assert error == LOAD
        pump(manager, controller, now)
        now += 1
    assert len(set(ids)) == len(ids)
    assert max(ids) < 3 * block_len + 5
    assert ids == sorted(ids)


def test_prefetch_at_90_percent_so_the_next_block_is_ready() -> None:
    manager = ProducerIdManager(broker_id=0)
    controller = FakeController(1000)
    manager.generate_producer_id(0)
    pump(manager, controller, 0)
    ids = []
    for _ in range(1000):
        error, pid = manager.generate_producer_id(0)
        assert error == ErrorCode.NONE
        ids.append(pid)
        pump(manager, controller, 0)
    assert controller.requests == 2  # the first block, then one prefetch at id 900
    assert manager.generate_producer_id(0) == (ErrorCode.NONE, 1000)  # no load-in-progress at the edge


@pytest.mark.parametrize("error", [ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_REQUEST])
def test_controller_errors_back_off_then_recover(error: ErrorCode) -> None:
    # §8.4 item 16.
    manager = ProducerIdManager(broker_id=0)
    controller = FakeController(1)
    assert manager.generate_producer_id(0)[0] == LOAD
    assert pump(manager, controller, 0)
    assert manager.generate_producer_id(0) == (ErrorCode.NONE, 0)
    controller.errors = [error]
    assert manager.generate_producer_id(1)[0] == LOAD
    assert pump(manager, controller, 1)  # answered with the error: back off
    assert manager.generate_producer_id(2)[0] == LOAD
    assert manager.take_request() is None
    assert manager.generate_producer_id(1 + RETRY_BACKOFF_MS)[0] == LOAD
    assert pump(manager, controller, 1 + RETRY_BACKOFF_MS)  # block (1, 1)
    assert manager.generate_producer_id(2 + RETRY_BACKOFF_MS) == (ErrorCode.NONE, 1)


@pytest.mark.parametrize(("start", "length"), [(-1, 10), (0, -1), (2**63 - 2, 10)])
def test_invalid_ranges_are_rejected(start: int, length: int) -> None:
    # §8.4 item 17.
    manager = ProducerIdManager(broker_id=0)
    manager.generate_producer_id(0)
    assert manager.take_request() is not None
    assert not manager.on_response(AllocateProducerIdsResponseData(ErrorCode.NONE, start, length), 0)
    assert manager.generate_producer_id(1)[0] == LOAD


def test_non_monotonic_block_is_rejected() -> None:
    manager = ProducerIdManager(broker_id=0)
    manager.generate_producer_id(0)
    manager.take_request()
    assert manager.on_response(AllocateProducerIdsResponseData(ErrorCode.NONE, 100, 10), 0)
    assert manager.generate_producer_id(0) == (ErrorCode.NONE, 100)
    for _ in range(9):
        manager.generate_producer_id(0)
    manager.take_request()
    # A block at or below the current one is a stale answer.
    assert not manager.on_response(AllocateProducerIdsResponseData(ErrorCode.NONE, 105, 10), 0)


def test_retry_backoff_holds_requests_until_it_passes() -> None:
    # §8.4 item 18.
    manager = ProducerIdManager(broker_id=0)
    controller = FakeController(1, errors=[ErrorCode.UNKNOWN_SERVER_ERROR])
    assert manager.generate_producer_id(0)[0] == LOAD
    assert pump(manager, controller, 0)
    for now in range(0, RETRY_BACKOFF_MS, 10):
        assert manager.generate_producer_id(now)[0] == LOAD
        assert manager.take_request() is None
    assert manager.generate_producer_id(RETRY_BACKOFF_MS)[0] == LOAD
    assert pump(manager, controller, RETRY_BACKOFF_MS)
    assert manager.generate_producer_id(RETRY_BACKOFF_MS) == (ErrorCode.NONE, 0)


def test_timeout_allows_an_immediate_retry() -> None:
    manager = ProducerIdManager(broker_id=0)
    manager.generate_producer_id(0)
    assert manager.take_request() is not None
    manager.on_timeout()
    manager.generate_producer_id(1)
    assert manager.take_request() is not None


def test_a_throttled_answer_backs_off_for_the_throttle_time() -> None:
    # KIP-730's per-broker rate limit: THROTTLING_QUOTA_EXCEEDED with throttle_time_ms > 50 ms.
    manager = ProducerIdManager(broker_id=0)
    manager.generate_producer_id(0)
    assert manager.take_request() is not None
    manager.on_response(AllocateProducerIdsResponseData(ErrorCode.THROTTLING_QUOTA_EXCEEDED, -1, 0, 300), 0)
    manager.generate_producer_id(299)
    assert manager.take_request() is None
    manager.generate_producer_id(300)
    assert manager.take_request() is not None
