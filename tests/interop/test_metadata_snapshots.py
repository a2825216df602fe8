"""KIP-630 on a real node: snapshots while creating 500 topics, restart from the latest one, cleaning."""

from __future__ import annotations

import os
import re
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pykraft.raft.snapshot import read_snapshot
from pykraft.testing import running_node
from tests.interop.test_restart import _init_producer_id

pytestmark = pytest.mark.slow

SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
OVERRIDES = {
    "metadata.log.max.record.bytes.between.snapshots": "3000",
    "metadata.log.segment.bytes": "4096",
    "metadata.max.retention.bytes": "30000",
}
TOPIC_COUNT = 500
TOPICS_PER_REQUEST = 20


def _meta_dir(data_dir: str) -> str:
    return os.path.join(data_dir, "__cluster_metadata-0")


def _snapshots(data_dir: str) -> list[tuple[int, int]]:
    found = []
    for name in os.listdir(_meta_dir(data_dir)):
        match = SNAPSHOT_NAME.match(name)
        if match:
            found.append((int(match.group(1)), int(match.group(2))))
    return sorted(found)


def _segments(data_dir: str) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(_meta_dir(data_dir)) if n.endswith(".log"))


def test_500_topics__snapshots_written_cleaned_and_loaded_on_restart(tmp_path, caplog) -> None:
    caplog.set_level("INFO", logger="pykraft")
    data_dir = str(tmp_path / "data")
    names = [f"t{i:03d}" for i in range(TOPIC_COUNT)]
    with running_node(data_dir, overrides=OVERRIDES) as node:
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        for start in range(0, TOPIC_COUNT, TOPICS_PER_REQUEST):
            chunk = [NewTopic(n, num_partitions=1) for n in names[start : start + TOPICS_PER_REQUEST]]
            for fut in admin.create_topics(chunk).values():
                fut.result(timeout=30)
        pid_before = _init_producer_id(node.bootstrap_servers)
        snapshots = _snapshots(data_dir)
        segments = _segments(data_dir)
        # Several snapshots were written; retention (30000 bytes) removed the older ones and the log
        # segments below the oldest kept snapshot, but at least one snapshot always remains.
        assert snapshots, os.listdir(_meta_dir(data_dir))
        assert segments[0] > 0, segments
        assert segments[0] <= snapshots[0][0]
        assert not [n for n in os.listdir(_meta_dir(data_dir)) if n.endswith((".part", ".deleted"))]
        latest = snapshots[-1]
        latest_name = f"{latest[0]:020d}-{latest[1]:010d}.checkpoint"
        with open(os.path.join(_meta_dir(data_dir), latest_name), "rb") as fh:
            contents = read_snapshot(fh.read())
        assert contents.epoch == latest[1]
        # A TopicRecord and a PartitionRecord per topic created before it (the tail is in the log).
        assert len(contents.values) > TOPIC_COUNT
    written = [r.getMessage() for r in caplog.records if r.getMessage().startswith("wrote metadata snapshot")]
    assert len(written) > 10, written

    caplog.clear()
    started = time.monotonic()
    with running_node(data_dir, overrides=OVERRIDES) as node:
        elapsed = time.monotonic() - started
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        topics = admin.list_topics(timeout=30).topics
        assert set(names) <= set(topics), sorted(set(names) - set(topics))[:5]
        # Producer-ID state came back too: ids keep growing across the restart.
        assert _init_producer_id(node.bootstrap_servers) > pid_before
    loaded = [r.getMessage() for r in caplog.records if "from snapshot" in r.getMessage()]
    assert loaded and latest_name in loaded[0], loaded
    assert elapsed < 60
