"""Many partitions on one node (issue 29): more partitions than the process has file descriptors."""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pykraft.io.node import Node
from pykraft.testing import free_port, node_properties, running_node
from tests.interop.test_confluent import consume_all
from tests.interop.test_restart import _wait_port

pytestmark = pytest.mark.slow

# RLIMIT_NOFILE of the node process, far below the partition count.
OPEN_FILES_LIMIT = 256
PARTITIONS = 2000


def _limit_open_files(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


class LimitedNode:
    def __init__(self, tmp_path: Path, open_files_limit: int) -> None:
        self.port = free_port()
        self.config_path = tmp_path / "server.properties"
        self.config_path.write_text(node_properties(str(tmp_path / "data"), self.port, free_port()))
        self.log_path = tmp_path / "server.log"
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.open_files_limit = open_files_limit
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log_path, "ab") as log_file:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pykraft.cli", "server", "start", "--config", str(self.config_path)],
                stdout=subprocess.DEVNULL,
                stderr=log_file,
                preexec_fn=_limit_open_files(self.open_files_limit),
            )
        try:
            _wait_port(self.port)
        except AssertionError:
            self.stop()
            raise AssertionError(self.log()) from None

    def stop(self) -> None:
        """kill -9: what is tested is serving under the limit, and a clean stop of 2,000 freshly
        written partitions is thousands of fsyncs."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def limited_node(tmp_path: Path) -> Iterator[LimitedNode]:
    node = LimitedNode(tmp_path, OPEN_FILES_LIMIT)
    node.start()
    try:
        yield node
    finally:
        node.stop()


def test_2000_partitions_within_256_descriptors_produce_and_consume_all(limited_node: LimitedNode) -> None:
    """Each partition's segment is opened on demand through the bounded descriptor cache: with one
    descriptor kept per partition the node runs out at ~250 partitions and takes its log dir offline."""
    bootstrap = limited_node.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic("wide", num_partitions=PARTITIONS)]).values():
        fut.result(timeout=60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 60000})
    failures: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    for partition in range(PARTITIONS):
        producer.produce("wide", value=b"v%d" % partition, partition=partition, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    assert failures == []

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "wide-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("wide", p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    try:
        while len(got) < PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10000, timeout=1.0):
                assert msg.error() is None, msg.error()
                got[msg.partition()] = msg.value()
    finally:
        consumer.close()
    assert got == {p: b"v%d" % p for p in range(PARTITIONS)}
    log_text = limited_node.log()
    assert "offline" not in log_text, log_text[-3000:]


def test_a_clean_restart_of_many_partitions_reads_no_segment_data(tmp_path: Path) -> None:
    """After a clean stop, every partition opens from Kafka's checkpoint files: the restarted node has
    read no byte of any segment by the time it serves, and then serves every record. 10,000 partitions
    (issue 29's figure); records go to every 100th only: a clean stop costs an fsync or so per written
    file, and that is not what is measured here."""
    data_dir = str(tmp_path / "data")
    partitions = 10_000
    written = range(0, partitions, 100)
    with running_node(data_dir) as node:
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        for fut in admin.create_topics([NewTopic("kept", num_partitions=partitions)]).values():
            fut.result(timeout=60)
        producer = Producer({"bootstrap.servers": node.bootstrap_servers, "linger.ms": 5})
        for partition in written:
            producer.produce("kept", value=b"v%d" % partition, partition=partition)
        assert producer.flush(60) == 0
    with running_node(data_dir) as node:
        server = node._node
        assert isinstance(server, Node)

        async def opened() -> tuple[list[bool], int]:
            # On the node's loop: its background pass opens the logs there too (issue 29, deferred logs).
            parts = [server.replicas.get("kept", p) for p in range(partitions)]
            return [
                p is not None and p.log.opened_clean for p in parts
            ], server.descriptors.segment_bytes_read

        clean, segment_bytes_read = asyncio.run_coroutine_threadsafe(opened(), node._loop).result(60)
        assert all(clean) and segment_bytes_read == 0
        for partition in (written[0], written[len(written) // 2], written[-1]):
            assert [m.value() for m in consume_all(node.bootstrap_servers, "kept", partition, 1)] == [
                b"v%d" % partition
            ]
