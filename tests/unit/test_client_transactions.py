"""pykraft.client's transactional bookkeeping against a scripted coordinator (kafka-facts.md §8.9, the
client side of KIP-360): 47/90 from the coordinator is fatal, 47 on produce is abortable, an abortable
error makes abort_transaction bump the epoch with InitProducerId(producer id, epoch) and reset
sequences."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from pykraft.client import DeliveryError, Producer, ProducerFencedError, TransactionAbortableError
from pykraft.client.producer import _Batch, _PartitionState
from pykraft.core.errors import ErrorCode
from pykraft.protocol.records import Record


class ScriptedCoordinator:
    """Answers the producer's coordinator requests from a script: request class name -> error code;
    InitProducerId answers (producer id, epoch + 1) of what it was asked with."""

    def __init__(self, producer: Producer, errors: dict[str, int] | None = None) -> None:
        self.errors = errors or {}
        self.calls: list[tuple[str, Any]] = []
        producer._coordinator_call = self.call  # type: ignore[method-assign]

    async def call(self, request: Any, response_class: Any, version: int, error_of: Any) -> tuple[Any, int]:
        name = type(request).__name__
        self.calls.append((name, request))
        code = self.errors.get(name, ErrorCode.NONE)
        if name == "InitProducerIdRequest":
            pid = 4000 if request.producer_id < 0 else request.producer_id
            return SimpleNamespace(
                producer_id=pid, producer_epoch=request.producer_epoch + 1, error_code=code
            ), code
        return None, code

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def transactional() -> Producer:
    producer = Producer("127.0.0.1:1", transactional_id="t")
    producer._brokers = {1: ("127.0.0.1", 1)}
    return producer


@pytest.mark.parametrize(
    "failing",
    ["InitProducerIdRequest", "AddPartitionsToTxnRequest", "AddOffsetsToTxnRequest", "EndTxnRequest"],
)
@pytest.mark.parametrize("code", [ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED])
def test_a_stale_epoch_from_the_coordinator_is_fatal(failing: str, code: ErrorCode) -> None:
    """testInvalidProducerEpochConvertToProducerFencedIn*: 47 (and 90) from the coordinator."""

    async def run() -> None:
        producer = transactional()
        coordinator = ScriptedCoordinator(producer)
        await producer.init_transactions()
        coordinator.errors[failing] = code
        with pytest.raises(ProducerFencedError):
            if failing == "InitProducerIdRequest":
                await producer.init_transactions()
            producer.begin_transaction()
            if failing == "AddPartitionsToTxnRequest":
                await producer._add_partition(("t", 0))
            if failing == "AddOffsetsToTxnRequest":
                await producer.send_offsets_to_transaction({("in", 0): 1}, "g")
            producer._txn_partitions.add(("t", 0))
            await producer.commit_transaction()
        # Fatal: nothing works any more.
        with pytest.raises(ProducerFencedError):
            producer.begin_transaction()

    asyncio.run(run())


def test_an_abortable_error_makes_abort_bump_the_epoch_and_reset_sequences() -> None:
    """testBumpTransactionalEpochOn{AbortableError,RecoverableAddPartitionRequestError}: abort, then
    InitProducerId(producer id, epoch), then epoch + 1 with sequences reset."""

    async def run() -> None:
        producer = transactional()
        coordinator = ScriptedCoordinator(producer)
        await producer.init_transactions()
        assert (producer.producer_id, producer.producer_epoch) == (4000, 0)
        producer.begin_transaction()
        producer._txn_partitions.add(("t", 0))
        producer._partitions[("t", 1)] = _PartitionState(next_sequence=17)
        coordinator.errors["AddPartitionsToTxnRequest"] = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        with pytest.raises(TransactionAbortableError):
            await producer._add_partition(("t", 1))
        with pytest.raises(TransactionAbortableError):
            await producer.commit_transaction()  # an abortable transaction cannot commit
        del coordinator.errors["AddPartitionsToTxnRequest"]
        coordinator.calls.clear()
        await producer.abort_transaction()
        assert coordinator.names() == ["EndTxnRequest", "InitProducerIdRequest"]
        end, bump = coordinator.calls[0][1], coordinator.calls[1][1]
        assert end.committed is False
        assert (bump.producer_id, bump.producer_epoch) == (4000, 0)
        assert (producer.producer_id, producer.producer_epoch) == (4000, 1)
        assert producer._partitions[("t", 1)].next_sequence == 0
        producer.begin_transaction()  # usable again

    asyncio.run(run())


def test_invalid_producer_epoch_on_produce_is_abortable_not_fatal() -> None:
    """testInvalidProducerEpochFromProduce: the batch (and later sequenced ones) fail; the transaction
    must be aborted; the producer lives on."""

    async def run() -> None:
        producer = transactional()
        ScriptedCoordinator(producer)
        await producer.init_transactions()
        producer.begin_transaction()
        loop = asyncio.get_running_loop()
        state = _PartitionState()
        batch = _Batch(("t", 0), [Record(None, b"x")], [loop.create_future()], deadline=0.0)
        state.queue.append(batch)
        producer._assign_sequence(state, batch)
        producer._fail_from(("t", 0), state, batch, ErrorCode.INVALID_PRODUCER_EPOCH)
        with pytest.raises(DeliveryError):
            batch.futures[0].result()
        with pytest.raises(TransactionAbortableError):
            await producer.send("t", b"y", partition=0)
        assert producer._fatal is None
        await producer.abort_transaction()
        assert producer.producer_epoch == 1

    asyncio.run(run())


def test_an_init_retried_after_a_lost_answer_repeats_the_same_pair() -> None:
    """KIP-360: the retry carries the same (producer id, epoch), which the coordinator answers the same."""

    async def run() -> None:
        producer = transactional()
        coordinator = ScriptedCoordinator(producer)
        await producer.init_transactions()
        producer.producer_id, producer.producer_epoch = 4000, 7
        coordinator.calls.clear()
        await producer.init_transactions()
        (request,) = [r for name, r in coordinator.calls if name == "InitProducerIdRequest"]
        assert (request.producer_id, request.producer_epoch) == (4000, 7)

    asyncio.run(run())
