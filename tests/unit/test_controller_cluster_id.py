"""KIP-1262 in the controller (kafka-facts.md §8.17 ActivationRecordsGeneratorTest and item 161): the first
active controller writes the cluster id with the bootstrap records, atomically; a log bootstrapped without
one gets exactly one at the next activation; at most one unique cluster id ever."""

from __future__ import annotations

import random
import uuid

import pytest

from pykraft.controller.quorum_controller import QuorumController
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import BrokerEndpoint, MetadataImage
from pykraft.metadata.records import (
    AbortTransactionRecord,
    ApiMessageAndVersion,
    BeginTransactionRecord,
    ClusterIdRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    MetadataReplayError,
)

CLUSTER = "zd2vLVrZQlCLJj8-k7A10w"
LISTENERS = [BrokerEndpoint("PLAINTEXT", "localhost", 9092, 0)]


def _kinds(records: list[ApiMessageAndVersion]) -> list[type]:
    return [type(r.message) for r in records]


def _replayed(records: list[ApiMessageAndVersion]) -> QuorumController:
    controller = QuorumController(rng=random.Random(9))
    for offset, record in enumerate(records):
        controller.replay(record, offset)
    return controller


def test_activation_on_an_empty_log__begin_feature_level_cluster_id_end() -> None:
    controller = QuorumController(rng=random.Random(0))
    records = list(controller.activate(cluster_id=CLUSTER).records)
    assert _kinds(records) == [
        BeginTransactionRecord,
        FeatureLevelRecord,
        ClusterIdRecord,
        EndTransactionRecord,
    ]
    assert records[2].message.cluster_id == CLUSTER
    assert controller.state().cluster_id == CLUSTER


def test_activation_again__writes_no_second_cluster_id() -> None:
    first = QuorumController(rng=random.Random(0))
    log = list(first.activate(cluster_id=CLUSTER).records)
    restarted = _replayed(log)
    assert list(restarted.activate(cluster_id="another-fresh-id").records) == []
    assert restarted.state().cluster_id == CLUSTER


def test_activation_on_a_log_without_cluster_id__appends_exactly_one() -> None:
    legacy = QuorumController(rng=random.Random(0))
    log = list(legacy.activate().records)  # bootstrapped before KIP-1262
    log += legacy.register_broker(1, uuid.UUID(int=5), LISTENERS, None, 0).records
    restarted = _replayed(log)
    added = list(restarted.activate(cluster_id=CLUSTER).records)
    assert _kinds(added) == [ClusterIdRecord]
    assert restarted.state().cluster_id == CLUSTER
    assert list(_replayed(log + added).activate(cluster_id="x").records) == []


def test_activation_after_a_bootstrap_cut_short__aborts_then_bootstraps_with_the_cluster_id() -> None:
    cut = list(QuorumController(rng=random.Random(0)).activate(cluster_id="first-try").records)[:3]
    assert _kinds(cut) == [BeginTransactionRecord, FeatureLevelRecord, ClusterIdRecord]
    controller = _replayed(cut)
    records = list(controller.activate(cluster_id=CLUSTER).records)
    assert _kinds(records) == [
        AbortTransactionRecord,
        BeginTransactionRecord,
        FeatureLevelRecord,
        ClusterIdRecord,
        EndTransactionRecord,
    ]
    assert controller.state().cluster_id == CLUSTER  # the aborted id never counts


def test_at_most_one_unique_cluster_id__controller_and_image_reject_a_second() -> None:
    controller = _replayed([ApiMessageAndVersion.of(ClusterIdRecord(cluster_id="a"))])
    controller.replay(ApiMessageAndVersion.of(ClusterIdRecord(cluster_id="a")), 1)  # repeating is fine
    with pytest.raises(MetadataReplayError, match="conflicts with cluster id 'a'"):
        controller.replay(ApiMessageAndVersion.of(ClusterIdRecord(cluster_id="b")), 2)
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(ApiMessageAndVersion.of(ClusterIdRecord(cluster_id="a")), 0, 1)
    with pytest.raises(MetadataReplayError):
        delta.replay(ApiMessageAndVersion.of(ClusterIdRecord(cluster_id="b")), 1, 1)
