"""A full disk on a real node (issue 18): the write that hits ENOSPC takes the log dir offline; every
produce to a partition in it then answers KAFKA_STORAGE_ERROR, the node logs one line (not a traceback
per request), keeps serving metadata and the partitions in its other log dirs (JBOD), and after a
restart with space every acknowledged record is there."""

from __future__ import annotations

import errno
import logging
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafka.protocol.producer import ProduceResponse
from prometheus_client.parser import text_string_to_metric_families

from pykraft.core.errors import ErrorCode
from pykraft.io import file_store
from pykraft.protocol.records import Record, build_batch
from pykraft.testing import free_port, running_node
from tests.interop.test_confluent import consume_all
from tests.raw_client import RawClient, produce_request

pytestmark = pytest.mark.slow


@pytest.fixture
def disk_full(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """While ``full[0]``, an append to a topic partition's segment writes half its bytes and fails with
    ENOSPC, as a filling filesystem does (the metadata log is left alone: its failure is another story)."""
    full = [False]
    real = file_store.FileSegmentStore.append

    def append(self: file_store.FileSegmentStore, base_offset: int, data: file_store.BytesLike) -> None:
        if full[0] and "__cluster_metadata" not in self.partition_dir:
            view = memoryview(data).cast("B")
            real(self, base_offset, view[: len(view) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, base_offset, data)

    monkeypatch.setattr(file_store.FileSegmentStore, "append", append)
    yield full


@pytest.fixture
def full_dirs(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """An append to a segment of a partition in one of these log dirs writes half its bytes and fails
    with ENOSPC, as that dir's filling filesystem would; the other dirs have space."""
    full: set[str] = set()
    real = file_store.FileSegmentStore.append

    def append(self: file_store.FileSegmentStore, base_offset: int, data: file_store.BytesLike) -> None:
        if os.path.dirname(self.partition_dir) in full:
            view = memoryview(data).cast("B")
            real(self, base_offset, view[: len(view) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, base_offset, data)

    monkeypatch.setattr(file_store.FileSegmentStore, "append", append)
    yield full


def _produce(address: str, value: bytes, topic: str = "full") -> int:
    with RawClient(address) as client:
        batch = bytes(build_batch([Record(None, value)], timestamp_ms=1))
        response = client.request(produce_request(topic, batch), ProduceResponse, 9)
    return int(response.responses[0].partition_responses[0].error_code)


def test_disk_full_answers_kafka_storage_error_logs_once_and_loses_nothing(
    disk_full: list[bool], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = str(tmp_path / "data")
    with running_node(data) as node:
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        admin.create_topics([NewTopic("full", 1, 1)])["full"].result(30)
        assert [_produce(node.bootstrap_servers, b"v%d" % i) for i in range(20)] == [0] * 20
        caplog.clear()
        disk_full[0] = True
        with caplog.at_level(logging.INFO, logger="pykraft"):
            answers = [_produce(node.bootstrap_servers, b"never") for _ in range(50)]
        assert answers == [ErrorCode.KAFKA_STORAGE_ERROR] * 50
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and "offline" in errors[0].getMessage() and errors[0].exc_info is None
        assert admin.list_topics(timeout=10).topics["full"].partitions  # metadata still served
        disk_full[0] = False
    with running_node(data) as node:
        assert [m.value() for m in consume_all(node.bootstrap_servers, "full", 0, 20)] == [
            b"v%d" % i for i in range(20)
        ]
        assert _produce(node.bootstrap_servers, b"v20") == 0


def _offline_gauges(metrics_url: str) -> dict[str, float]:
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    return {
        sample.labels.get("logDirectory", "count"): sample.value
        for family in text_string_to_metric_families(text)
        if family.name
        in ("kafka_log_logmanager_offlinelogdirectorycount", "kafka_log_logmanager_logdirectoryoffline")
        for sample in family.samples
    }


def test_one_full_log_dir_goes_offline_alone_and_the_other_keeps_serving(
    full_dirs: set[str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    metrics_port = free_port()
    overrides = {"log.dirs": f"{a},{b}", "metrics.port": str(metrics_port)}
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    with running_node(a, overrides=overrides) as node:
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        # One at a time: the first goes to a (ties by log.dirs order), the second to b (fewest).
        admin.create_topics([NewTopic("in-a", 1, 1)])["in-a"].result(30)
        admin.create_topics([NewTopic("in-b", 1, 1)])["in-b"].result(30)
        acknowledged = {"in-a": 0, "in-b": 0}
        for i in range(10):
            for topic in acknowledged:
                assert _produce(node.bootstrap_servers, b"%s-%d" % (topic.encode(), i), topic) == 0
                acknowledged[topic] += 1
        assert os.path.isdir(os.path.join(a, "in-a-0")) and os.path.isdir(os.path.join(b, "in-b-0"))
        assert all(os.path.isfile(os.path.join(d, "meta.properties")) for d in (a, b))  # one per log dir
        caplog.clear()
        full_dirs.add(a)
        with caplog.at_level(logging.INFO, logger="pykraft"):
            for i in range(10, 30):
                assert _produce(node.bootstrap_servers, b"never", "in-a") == ErrorCode.KAFKA_STORAGE_ERROR
                assert _produce(node.bootstrap_servers, b"in-b-%d" % i, "in-b") == 0
                acknowledged["in-b"] += 1
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and a in errors[0].getMessage() and errors[0].exc_info is None
        # DescribeLogDirs: the full dir alone answers KAFKA_STORAGE_ERROR; the other lists its partition.
        with RawClient(node.bootstrap_servers) as client:
            described = client.request(DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, 4)
        results = {r.log_dir: r for r in described.results}
        assert (results[a].error_code, results[a].topics) == (ErrorCode.KAFKA_STORAGE_ERROR, [])
        assert results[b].error_code == 0 and [t.name for t in results[b].topics] == ["in-b"]
        assert _offline_gauges(metrics_url) == {"count": 1.0, a: 1.0, b: 0.0}
        full_dirs.clear()  # space again: the dir stays offline until a restart
        assert _produce(node.bootstrap_servers, b"never", "in-a") == ErrorCode.KAFKA_STORAGE_ERROR
    with running_node(a, overrides=overrides) as node:
        for topic, count in acknowledged.items():
            values = [m.value() for m in consume_all(node.bootstrap_servers, topic, 0, count)]
            assert values == [b"%s-%d" % (topic.encode(), i) for i in range(count)]
        assert _produce(node.bootstrap_servers, b"in-a-10", "in-a") == 0
        assert _offline_gauges(metrics_url) == {"count": 0.0, a: 0.0, b: 0.0}
