"""A stopping broker applies no metadata image once its listeners are closed (Kafka's
BrokerServer.shutdown closes the metadata publishers before the replica manager and the logs).

Seed 51 of the fault campaign (bench/results/faults.md) lost 7,276 acknowledged records. An image that
arrived while a stopping broker awaited its last steps restarted the replica fetchers. They appended past
the log end that close_cleanly had just checkpointed. The next clean start trusted that log end and
appended the same offsets again after those bytes, so a later crash recovery cut the log there. The
recovered broker was then elected leader, and its followers truncated to it."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from pykraft.core.config import load_config
from pykraft.io.node import Node
from pykraft.io.replica_fetcher import ReplicaFetchers
from pykraft.testing import free_port, node_properties


def test_an_image_applied_after_the_logs_closed_reopens_nothing(tmp_path: Path) -> None:
    port = free_port()
    node = Node(load_config(node_properties(str(tmp_path / "d"), port, free_port()), {}))

    def create_topic() -> None:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.create_topics([NewTopic("t", 2, 1)])["t"].result(30)

    async def main() -> None:
        await node.start()
        try:
            await asyncio.to_thread(create_topic)
            deadline = time.monotonic() + 30
            while not (node.replicas.hosts("t", 0) and node.replicas.hosts("t", 1)):
                assert time.monotonic() < deadline, "the topic's partitions never opened"
                await asyncio.sleep(0.05)
        finally:
            await node.stop()
        assert not node.replicas.partitions, "close_cleanly closed every log"
        # What the metadata plane may still publish while stop() awaits its last steps: an image in
        # which these topics changed (leaders move during a controlled shutdown).
        node._applied_topics.clear()
        node._on_image()
        assert not node.replicas.partitions, "an image after the logs closed must not reopen them"

    asyncio.run(main())


def test_replica_fetchers_closed_start_no_fetch_again(tmp_path: Path) -> None:
    config = load_config(node_properties(str(tmp_path / "d"), free_port(), free_port()), {})

    async def main() -> None:
        fetchers = ReplicaFetchers(config, None, random.Random(1), on_high_watermark=lambda _part: None)  # type: ignore[arg-type]
        await fetchers.close()
        fetchers.update({2: {("t", 0)}}, {2: ("127.0.0.1", free_port())})
        assert not fetchers._tasks, "a closed fetcher set started a fetch task"

    asyncio.run(main())
