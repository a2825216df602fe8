"""``pykraft topics``: create, list, describe (leader, leader epoch, replicas, ISR) and delete, in
kafka-topics' layout; bad input is one line and exit status 1."""

from __future__ import annotations

from typing import Any

from pykraft.cli import main
from pykraft.testing import running_node


def test_create_describe_list_delete(capsys: Any) -> None:
    with running_node() as node:
        bootstrap = ["topics", "--bootstrap-server", node.bootstrap_servers]
        assert (
            main(
                [
                    *bootstrap,
                    "create",
                    "--topic",
                    "orders",
                    "--partitions",
                    "2",
                    "--config",
                    "retention.ms=1000",
                ]
            )
            == 0
        )
        assert capsys.readouterr().out == "Created topic orders.\n"
        assert main([*bootstrap, "list"]) == 0
        assert capsys.readouterr().out.split() == ["orders"]
        assert main([*bootstrap, "describe", "--topic", "orders"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].startswith("Topic: orders\tTopicId: ") and lines[0].endswith(
            "PartitionCount: 2\tReplicationFactor: 1"
        )
        assert lines[1:] == [
            f"\tTopic: orders\tPartition: {i}\tLeader: 1\tLeaderEpoch: 0\tReplicas: 1\tIsr: 1"
            for i in range(2)
        ]
        assert main([*bootstrap, "create", "--topic", "orders"]) == 1
        assert (
            capsys.readouterr().err.strip()
            == "pykraft topics: topic orders: TOPIC_ALREADY_EXISTS: Topic 'orders' already exists."
        )
        assert main([*bootstrap, "create", "--topic", "x", "--config", "novalue"]) == 1
        assert capsys.readouterr().err.strip() == "pykraft topics: --config: 'novalue' is not KEY=VALUE"
        assert main([*bootstrap, "delete", "--topic", "orders"]) == 0
        assert capsys.readouterr().out == "Deleted topic orders.\n"
        assert main([*bootstrap, "describe", "--topic", "orders"]) == 1
        assert "UNKNOWN_TOPIC_OR_PARTITION" in capsys.readouterr().err


def test_an_unreachable_broker_is_one_line(capsys: Any) -> None:
    assert main(["topics", "--bootstrap-server", "127.0.0.1:1", "list"]) == 1
    assert capsys.readouterr().err.startswith("pykraft topics: cannot connect to 127.0.0.1:1")
