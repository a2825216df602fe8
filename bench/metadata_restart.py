"""KIP-630 restart cost: full metadata-log replay vs latest snapshot + tail (prints a table).

Builds ``__cluster_metadata-0`` with >= 1M records (topics with many partitions) written as framed
batches through FileRaftLog (the same bytes the controller path writes), then times a real node start
(the node's MetadataPlane: raft, image, controller, activation) twice over copies of it:

* full replay: no snapshot, snapshots disabled for the run (so the run only replays);
* snapshot + tail: a snapshot of the image at ``--tail`` records before the end, then the tail.

    python -m bench.metadata_restart [--topics 1000] [--partitions 1000] [--tail 10000]
    python -m bench.metadata_restart --topics 100 --partitions 1000 --changes 900000   # churn

Two shapes: a log that is all creations (the snapshot holds as many records as the log) and a log
with churn (leader/ISR changes over a smaller image), which is what snapshots are for.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import random
import shutil
import tempfile
import time
import uuid

from pykraft.core.config import load_config
from pykraft.io.file_store import FileSegmentStore
from pykraft.io.metadata_plane import MetadataPlane
from pykraft.io.raft_log import METADATA_PARTITION_DIR, FileRaftLog
from pykraft.log.partition_log import PartitionLog
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    ApiMessageAndVersion,
    FeatureLevelRecord,
    MetadataVersion,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
    encode_metadata_record,
)
from pykraft.metadata.snapshots import image_snapshot_values
from pykraft.raft.control import LeaderChangeMessage, leader_change_record
from pykraft.raft.messages import OffsetAndEpoch
from pykraft.raft.snapshot import snapshot_file_name, write_snapshot
from pykraft.testing import free_port, node_properties

BATCH_RECORDS = 2000
NO_SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": str(2**62)}


def _records(topics: int, partitions: int, rng: random.Random) -> list[ApiMessageAndVersion]:
    level = MetadataVersion.LATEST_PRODUCTION
    out = [
        ApiMessageAndVersion.of(FeatureLevelRecord(name=MetadataVersion.FEATURE_NAME, feature_level=level))
    ]
    version = MetadataVersion.partition_record_version(level)
    for t in range(topics):
        topic_id = uuid.UUID(int=rng.getrandbits(128))
        out.append(ApiMessageAndVersion.of(TopicRecord(name=f"topic-{t:05d}", topic_id=topic_id)))
        for p in range(partitions):
            record = PartitionRecord(
                partition_id=p,
                topic_id=topic_id,
                replicas=[1],
                isr=[1],
                removing_replicas=[],
                adding_replicas=[],
                leader=1,
                leader_recovery_state=0,
                leader_epoch=0,
                partition_epoch=0,
                directories=[uuid.UUID(int=0)],
                eligible_leader_replicas=None,
                last_known_elr=None,
            )
            out.append(ApiMessageAndVersion.of(record, version))
    return out


def _changes(
    records: list[ApiMessageAndVersion], count: int, rng: random.Random
) -> list[ApiMessageAndVersion]:
    """Churn, as a live cluster's log accumulates it: leader/ISR changes (PartitionChangeRecord)."""
    partitions = [(r.message.topic_id, r.message.partition_id) for r in records if r.api_key == 3]
    out = []
    for _ in range(count):
        topic_id, partition_id = rng.choice(partitions)
        change = PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id, leader=1, isr=[1])
        out.append(ApiMessageAndVersion.of(change))
    return out


def build_log(meta_dir: str, records: list[ApiMessageAndVersion]) -> tuple[int, int]:
    """The log as a sole voter at epoch 1 writes it: LeaderChange, then data batches."""
    os.makedirs(meta_dir, exist_ok=True)
    raft_log = FileRaftLog(PartitionLog.open(FileSegmentStore(meta_dir), FileRaftLog.config()))
    now_ms = int(time.time() * 1000)
    change = LeaderChangeMessage(leader_id=1, voters=(1,), granting_voters=(1,))
    raft_log.append_as_leader([leader_change_record(change)], 1, now_ms, is_control=True)
    for start in range(0, len(records), BATCH_RECORDS):
        values = [encode_metadata_record(r) for r in records[start : start + BATCH_RECORDS]]
        raft_log.append_as_leader(values, 1, now_ms)
    raft_log.flush(raft_log.end_offset)
    size = raft_log.size_in_bytes
    end = raft_log.end_offset
    raft_log.log.close()
    return end, size


def write_image_snapshot(
    meta_dir: str, records: list[ApiMessageAndVersion], snapshot_id: OffsetAndEpoch
) -> int:
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay_all(records)
    image = delta.apply()
    data = write_snapshot(
        snapshot_id,
        image_snapshot_values(image),
        last_contained_log_timestamp=int(time.time() * 1000),
        now_ms=int(time.time() * 1000),
    )
    with open(os.path.join(meta_dir, snapshot_file_name(snapshot_id)), "wb") as fh:
        fh.write(data)
    return len(data)


def time_start(data_dir: str, profile: bool) -> float:
    """Start and stop the node's metadata plane over ``data_dir`` (raft log + snapshot load, image,
    controller, activation write): the metadata part of a restart. The broker's partition logs are
    left out: opening 1M partition directories is a different cost (and needs 2 fds per partition)."""
    config = load_config(node_properties(data_dir, free_port(), free_port()), NO_SNAPSHOTS)

    async def run() -> float:
        plane = MetadataPlane(config, random.Random(1), on_image=lambda: None)
        started = time.perf_counter()
        await plane.start()
        elapsed = time.perf_counter() - started
        assert len(plane.image.topics.topics_by_name) > 0
        await plane.stop()
        return elapsed

    profiler = cProfile.Profile() if profile else None
    if profiler:
        profiler.enable()
    elapsed = asyncio.run(run())
    if profiler:
        profiler.disable()
        print("\nprofile of the full-replay start (top 12 by own time):")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument(
        "--changes", type=int, default=0, help="PartitionChangeRecords after the topics (log churn)"
    )
    parser.add_argument("--tail", type=int, default=10000, help="records after the snapshot")
    parser.add_argument("--profile", action="store_true", help="profile the full-replay start")
    args = parser.parse_args()

    rng = random.Random(630)
    records = _records(args.topics, args.partitions, rng)
    records += _changes(records, args.changes, rng)
    root = tempfile.mkdtemp(prefix="pykraft-bench-630-")
    try:
        full_dir = os.path.join(root, "full")
        t0 = time.perf_counter()
        end, log_bytes = build_log(os.path.join(full_dir, METADATA_PARTITION_DIR), records)
        build_s = time.perf_counter() - t0
        snap_dir = os.path.join(root, "snap")
        shutil.copytree(full_dir, snap_dir)
        # Snapshot id: everything but the last ``tail`` records (the LeaderChange is offset 0).
        # Snapshots end at batch boundaries (the state machine snapshots what it applied).
        covered = (len(records) - args.tail) // BATCH_RECORDS * BATCH_RECORDS
        tail = len(records) - covered
        snapshot_id = OffsetAndEpoch(covered + 1, 1)
        snapshot_bytes = write_image_snapshot(
            os.path.join(snap_dir, METADATA_PARTITION_DIR), records[:covered], snapshot_id
        )

        full_s = time_start(full_dir, args.profile)
        snap_s = time_start(snap_dir, False)
        rows = [
            ("metadata records in the log", f"{len(records):,}"),
            ("log end offset", f"{end:,}"),
            ("log size (bytes)", f"{log_bytes:,}"),
            ("snapshot size (bytes)", f"{snapshot_bytes:,}"),
            ("snapshot / log size", f"{snapshot_bytes / log_bytes:.2f}"),
            ("tail records replayed after the snapshot", f"{tail:,}"),
            ("build log (s)", f"{build_s:.1f}"),
            ("restart, full replay (s)", f"{full_s:.2f}"),
            ("restart, snapshot + tail (s)", f"{snap_s:.2f}"),
            ("speed-up (full / snapshot)", f"{full_s / snap_s:.1f}x"),
        ]
        width = max(len(k) for k, _ in rows)
        print(f"\n{'measure':<{width}}  value")
        print(f"{'-' * width}  {'-' * 14}")
        for key, value in rows:
            print(f"{key:<{width}}  {value}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
