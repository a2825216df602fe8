"""KIP-730 controller side: kafka-facts.md §8.2 (ProducerIdControlManagerTest) and §1.4."""

from __future__ import annotations

import uuid

import pytest

from pykraft.controller.cluster import ClusterControlManager
from pykraft.controller.features import FeatureControlManager
from pykraft.controller.producer_ids import (
    INT64_MAX,
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdControlManager,
    ProducerIdsBlock,
)
from pykraft.core.errors import ErrorCode
from pykraft.metadata.image import BrokerEndpoint
from pykraft.metadata.records import ApiMessageAndVersion, MetadataReplayError, ProducerIdsRecord

BROKER_EPOCH = 100


def _managers(broker_ids: tuple[int, ...] = (1,)) -> tuple[ClusterControlManager, ProducerIdControlManager]:
    features = FeatureControlManager()
    for record in features.generate_bootstrap_records(21):
        features.replay(record.message)
    cluster = ClusterControlManager(features)
    for broker_id in broker_ids:
        result = cluster.register_broker(
            broker_id,
            uuid.UUID(int=broker_id + 1),
            [BrokerEndpoint("PLAINTEXT", "localhost", 9092, 0)],
            None,
            0,
            new_broker_epoch=BROKER_EPOCH + broker_id - 1,
        )
        # Replay only the RegisterBrokerRecord: the broker stays fenced, which KIP-730 does not check.
        cluster.replay_register_broker(result.records[0].message)
    return cluster, ProducerIdControlManager(cluster)


def _replay(manager: ProducerIdControlManager, next_producer_id: int, broker_id: int = 1) -> None:
    manager.replay(
        ProducerIdsRecord(broker_id=broker_id, broker_epoch=BROKER_EPOCH, next_producer_id=next_producer_id)
    )


def _allocate_and_replay(manager: ProducerIdControlManager, broker_id: int, broker_epoch: int) -> int:
    result = manager.generate_next_producer_id(broker_id, broker_epoch)
    assert result.response.error_code is ErrorCode.NONE
    for record in result.records:
        manager.replay(record.message)
    return result.response.producer_id_start


def test_block__empty_and_arithmetic() -> None:
    # kafka-facts §8.1: EMPTY has last -1, next 0, size 0; a block reports first/last/next/size/broker.
    assert ProducerIdsBlock.EMPTY.last_producer_id == -1
    assert ProducerIdsBlock.EMPTY.next_block_first_id == 0
    block = ProducerIdsBlock(5, 1309418324, 5391)
    assert block.last_producer_id == 1309418324 + 5391 - 1
    assert block.next_block_first_id == 1309418324 + 5391
    assert block.assigned_broker_id == 5


def test_generate__first_allocation__block_0_len_1000_record_next_1000() -> None:
    _, manager = _managers()
    result = manager.generate_next_producer_id(1, BROKER_EPOCH)
    assert result.response.error_code is ErrorCode.NONE
    assert (result.response.producer_id_start, result.response.producer_id_len) == (0, 1000)
    assert result.records == [
        ApiMessageAndVersion.of(
            ProducerIdsRecord(broker_id=1, broker_epoch=BROKER_EPOCH, next_producer_id=1000)
        )
    ]


def test_generate__does_not_mutate__block_advances_only_on_replay() -> None:
    _, manager = _managers()
    before = (manager.next_producer_block, manager.broker_epoch)
    first = manager.generate_next_producer_id(1, BROKER_EPOCH)
    again = manager.generate_next_producer_id(1, BROKER_EPOCH)
    assert (manager.next_producer_block, manager.broker_epoch) == before
    # KIP-730: no idempotence state; a retry before replay gets the same start, after replay a new block.
    assert again.response == first.response
    manager.replay(first.records[0].message)
    assert manager.next_producer_block == ProducerIdsBlock(1, 1000, PRODUCER_ID_BLOCK_SIZE)
    assert manager.generate_next_producer_id(1, BROKER_EPOCH).response.producer_id_start == 1000


def test_replay_42__next_allocation_starts_at_42() -> None:
    _, manager = _managers()
    _replay(manager, 42)
    assert _allocate_and_replay(manager, 1, BROKER_EPOCH) == 42


@pytest.mark.parametrize("next_producer_id", [40, 42])
def test_replay__not_greater_than_current_block_start__raises(next_producer_id: int) -> None:
    _, manager = _managers()
    _replay(manager, 42)
    with pytest.raises(MetadataReplayError):
        _replay(manager, next_producer_id)
    assert manager.next_producer_block.first_producer_id == 42


def test_replay__gap__is_fine() -> None:
    _, manager = _managers()
    _replay(manager, 42)
    _replay(manager, 50)
    assert _allocate_and_replay(manager, 1, BROKER_EPOCH) == 50


@pytest.mark.parametrize(("broker_id", "broker_epoch"), [(99, BROKER_EPOCH), (1, 99)])
def test_generate__unknown_broker_or_wrong_epoch__stale_broker_epoch(
    broker_id: int, broker_epoch: int
) -> None:
    _, manager = _managers()
    result = manager.generate_next_producer_id(broker_id, broker_epoch)
    assert result.response.error_code is ErrorCode.STALE_BROKER_EPOCH
    assert result.records == []


def test_generate__fenced_broker__still_allocates() -> None:
    cluster, manager = _managers()
    registration = cluster.registration(1)
    assert registration is not None
    assert registration.fenced  # the manager-level test never replays the unfence record
    assert manager.generate_next_producer_id(1, BROKER_EPOCH).response.error_code is ErrorCode.NONE


def test_generate__id_space_exhausted__unknown_server_error_and_no_record() -> None:
    _, manager = _managers()
    _replay(manager, INT64_MAX - 1)
    result = manager.generate_next_producer_id(1, BROKER_EPOCH)
    assert result.response.error_code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert result.records == []


def test_generate__last_full_block__still_allocated() -> None:
    _, manager = _managers()
    _replay(manager, INT64_MAX - PRODUCER_ID_BLOCK_SIZE)
    result = manager.generate_next_producer_id(1, BROKER_EPOCH)
    assert result.response.error_code is ErrorCode.NONE
    assert result.records[0].message.next_producer_id == INT64_MAX


def test_hundred_rounds_across_four_brokers__next_block_is_broker_3_at_100000() -> None:
    _, manager = _managers((0, 1, 2, 3))
    starts = [_allocate_and_replay(manager, i % 4, BROKER_EPOCH + (i % 4) - 1) for i in range(100)]
    assert starts == [i * 1000 for i in range(100)]
    assert manager.next_producer_block == ProducerIdsBlock(3, 100_000, 1000)
