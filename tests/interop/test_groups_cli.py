"""`pykraft groups list|describe`: members, decoded assignments, committed offsets and lag."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from pykraft.cli import main
from pykraft.testing import running_node
from tests.interop.test_groups import GROUP_OVERRIDES, PER_PARTITION, _create_and_fill

pytestmark = pytest.mark.slow


def test_groups_list_and_describe_show_members_assignments_offsets_and_lag(capsys) -> None:
    with running_node(overrides=GROUP_OVERRIDES) as node:
        bootstrap = node.bootstrap_servers
        _create_and_fill(bootstrap, "lagged", 2)
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "cli-group",
                "client.id": "cli-consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe(["lagged"])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.1)
        consumer.commit(
            offsets=[TopicPartition("lagged", 0, 30), TopicPartition("lagged", 1, 100)], asynchronous=False
        )
        try:
            assert main(["groups", "--bootstrap-server", bootstrap, "list"]) == 0
            assert "cli-group\tconsumer\tStable" in capsys.readouterr().out
            assert main(["groups", "--bootstrap-server", bootstrap, "describe", "cli-group"]) == 0
            out = capsys.readouterr().out
        finally:
            consumer.close()
        assert "STATE Stable" in out
        member_line = next(line for line in out.splitlines() if line.startswith("cli-consumer-"))
        assert member_line.endswith("lagged-0,lagged-1") and "\tcli-consumer\t/127.0.0.1\t" in member_line
        rows = [line.split("\t") for line in out.splitlines() if line.startswith("lagged\t")]
        assert [r[:5] for r in rows] == [
            ["lagged", "0", "30", str(PER_PARTITION), str(PER_PARTITION - 30)],
            ["lagged", "1", "100", str(PER_PARTITION), "0"],
        ]
        assert all(r[7] == "cli-consumer" for r in rows)
        assert main(["groups", "--bootstrap-server", bootstrap, "describe", "no-such-group"]) == 1
