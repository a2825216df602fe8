"""MetadataPlane.start() over a metadata log on disk: no wall-clock cap on loading (it fails only when
nothing is loaded for ``activation_stall_timeout_s``), progress lines while loading, and failures that
surface at once with what went wrong (a driver error) or what it waited for (a raft core that never
becomes leader)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

import pykraft.io.metadata_plane as plane_module
from pykraft.core.config import load_config
from pykraft.io.file_store import FileSegmentStore
from pykraft.io.metadata_plane import MetadataPlane, MetadataStartError
from pykraft.io.raft_log import METADATA_PARTITION_DIR, FileRaftLog
from pykraft.log.partition_log import PartitionLog
from pykraft.metadata.records import (
    ApiMessageAndVersion,
    FeatureLevelRecord,
    MetadataVersion,
    PartitionRecord,
    TopicRecord,
    encode_metadata_record,
)
from pykraft.raft.control import LeaderChangeMessage, leader_change_record
from pykraft.raft.node import RaftNode
from pykraft.testing import free_port, node_properties

TOPICS = 12
PARTITIONS = 20


def _write_log(data_dir: Path, records: list[ApiMessageAndVersion], batch: int = 10) -> None:
    """The log a sole voter at epoch 1 writes: a LeaderChange, then data batches."""
    meta_dir = data_dir / METADATA_PARTITION_DIR
    os.makedirs(meta_dir, exist_ok=True)
    raft_log = FileRaftLog(PartitionLog.open(FileSegmentStore(str(meta_dir)), FileRaftLog.config()))
    now_ms = int(time.time() * 1000)
    change = LeaderChangeMessage(leader_id=1, voters=(1,), granting_voters=(1,))
    raft_log.append_as_leader([leader_change_record(change)], 1, now_ms, is_control=True)
    for start in range(0, len(records), batch):
        raft_log.append_as_leader(
            [encode_metadata_record(r) for r in records[start : start + batch]], 1, now_ms
        )
    raft_log.flush(raft_log.end_offset)
    raft_log.log.close()


def _topics(count: int, partitions: int) -> list[ApiMessageAndVersion]:
    level = MetadataVersion.LATEST_PRODUCTION
    out = [
        ApiMessageAndVersion.of(FeatureLevelRecord(name=MetadataVersion.FEATURE_NAME, feature_level=level))
    ]
    for t in range(count):
        topic_id = uuid.UUID(int=t + 1)
        out.append(ApiMessageAndVersion.of(TopicRecord(name=f"t{t}", topic_id=topic_id)))
        for p in range(partitions):
            partition = PartitionRecord(partition_id=p, topic_id=topic_id, replicas=[1], isr=[1], leader=1)
            out.append(ApiMessageAndVersion.of(partition, MetadataVersion.partition_record_version(level)))
    return out


def _plane(data_dir: Path, voters: str | None = None) -> MetadataPlane:
    overrides = {"controller.quorum.voters": voters} if voters else None
    config = load_config(node_properties(str(data_dir), free_port(), free_port()), overrides)
    return MetadataPlane(config, random.Random(1), on_image=lambda: None)


def test_start__loading_longer_than_the_stall_timeout__starts_and_logs_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    records = _topics(TOPICS, PARTITIONS)
    _write_log(tmp_path, records)
    # Small reads, so the log arrives as many committed chunks; each chunk is slow to apply. The whole
    # load takes several stall timeouts, but every check sees progress.
    monkeypatch.setattr(plane_module, "RaftNode", functools.partial(RaftNode, fetch_max_bytes=1024))
    monkeypatch.setattr(plane_module, "LOAD_PROGRESS_EVERY_RECORDS", 50)
    monkeypatch.setattr(plane_module, "ACTIVATION_CHECK_S", 0.05)
    original = MetadataPlane._apply_committed
    chunks: list[int] = []

    def slow_apply(self: MetadataPlane, committed: Any) -> None:
        chunks.append(len(committed))
        time.sleep(0.05)
        original(self, committed)

    monkeypatch.setattr(MetadataPlane, "_apply_committed", slow_apply)
    plane = _plane(tmp_path)
    plane.activation_stall_timeout_s = 0.2

    async def run() -> float:
        started = time.monotonic()
        await plane.start()
        elapsed = time.monotonic() - started
        await plane.stop()
        return elapsed

    with caplog.at_level(logging.INFO, logger="pykraft.metadata"):
        elapsed = asyncio.run(run())
    assert len(chunks) >= 8
    assert elapsed > 2 * plane.activation_stall_timeout_s  # the old fixed cap would have failed here
    assert len(plane.image.topics.topics_by_name) == TOPICS
    assert all(len(t.partitions) == PARTITIONS for t in plane.image.topics.topics_by_name.values())
    assert len(plane.controller.replication_control.topics()) == TOPICS
    progress = [r.getMessage() for r in caplog.records if "records from the metadata log" in r.getMessage()]
    assert len(progress) >= 4
    # Every record written, the LeaderChange controls (ours and the new leader's) included.
    total = len(records) + 2
    assert progress[0].startswith("loaded 5") and f" of {total} records" in progress[0]
    assert progress[-1].startswith(f"loaded {total} of {total} records")


def test_start__raft_never_leader__fails_naming_what_it_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second voter that does not exist: this node can never win an election. A plane that waits for
    # activation (the embedded single-voter node) must say what it waited for instead of hanging.
    monkeypatch.setattr(MetadataPlane, "waits_for_activation", property(lambda self: True))
    plane = _plane(tmp_path, voters=f"1@127.0.0.1:{free_port()},2@127.0.0.1:{free_port()}")
    plane.activation_stall_timeout_s = 0.3

    async def run() -> None:
        try:
            await plane.start()
        finally:
            await plane.stop()

    with pytest.raises(MetadataStartError, match=r"did not become active: nothing loaded for .*raft role"):
        asyncio.run(run())


def test_start__voter_of_a_larger_quorum__serves_without_waiting_to_lead(tmp_path: Path) -> None:
    # A controller of a multi-voter quorum starts serving raft requests at once; it becomes the active
    # controller only if it is elected (here it cannot be: its peer does not exist).
    plane = _plane(tmp_path, voters=f"1@127.0.0.1:{free_port()},2@127.0.0.1:{free_port()}")

    async def run() -> tuple[bool, bool]:
        try:
            await plane.start()
            await asyncio.sleep(0.1)
            return plane.is_active, plane.raft is not None and plane.raft.role.name != "LEADER"
        finally:
            await plane.stop()

    assert asyncio.run(run()) == (False, True)


def test_start__inconsistent_log__surfaces_the_replay_error(tmp_path: Path) -> None:
    # A PartitionRecord for a topic that was never created: replay fails, start says why at once.
    orphan = PartitionRecord(partition_id=0, topic_id=uuid.UUID(int=99), replicas=[1], isr=[1], leader=1)
    _write_log(tmp_path, [*_topics(1, 1), ApiMessageAndVersion.of(orphan, 1)])
    plane = _plane(tmp_path)
    plane.activation_stall_timeout_s = 600.0

    async def run() -> None:
        try:
            await plane.start()
        finally:
            await plane.stop()

    with pytest.raises(
        MetadataStartError, match="driver stopped before this controller became active"
    ) as info:
        asyncio.run(run())
    assert "MetadataReplayError" in str(info.value)
