"""A full disk on a real node (issue 18): the write that hits ENOSPC takes the log dir offline; every
produce then answers KAFKA_STORAGE_ERROR, the node logs one line (not a traceback per request), keeps
serving metadata, and after a restart with space every acknowledged record is there."""

from __future__ import annotations

import errno
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.producer import ProduceResponse

from pykraft.core.errors import ErrorCode
from pykraft.io import file_store
from pykraft.protocol.records import Record, build_batch
from pykraft.testing import running_node
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


def _produce(address: str, value: bytes) -> int:
    with RawClient(address) as client:
        batch = bytes(build_batch([Record(None, value)], timestamp_ms=1))
        response = client.request(produce_request("full", batch), ProduceResponse, 9)
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
