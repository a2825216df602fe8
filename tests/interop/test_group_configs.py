"""Group configs (issue 27 item 6, KIP-848's ConfigResource GROUP): set and read back with
confluent-kafka's AdminClient on a group that does not exist yet, bad values refused with
INVALID_CONFIG, kept across a restart; a group's consumer.heartbeat.interval.ms is what its
ConsumerGroupHeartbeat answers say; ``pykraft configs --entity-type groups`` alters and describes them
as kafka-configs does. One node, restarted once."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from pykraft.core.errors import ErrorCode
from pykraft.io.kafka_connection import BrokerConnection
from pykraft.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from pykraft.testing import RunningNode, running_node
from tests.interop.cluster_support import wait_until

pytestmark = pytest.mark.slow

OVERRIDES = {"offsets.topic.num.partitions": "1"}


@pytest.fixture(scope="module")
def node_dir() -> Iterator[str]:
    yield tempfile.mkdtemp(prefix="pykraft-group-configs-")


def _alter(admin: AdminClient, group: str, *changes: tuple[str, str | None]) -> None:
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                name,
                value,
                incremental_operation=AlterConfigOpType.SET
                if value is not None
                else AlterConfigOpType.DELETE,
            )
            for name, value in changes
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def _describe(admin: AdminClient, group: str) -> dict[str, tuple[str, int]]:
    resource = ConfigResource(ResourceType.GROUP, group)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: (entry.value, entry.source) for name, entry in entries.items()}


GROUP_CONFIG = ConfigSource.GROUP_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value


def test_admin_client_sets_describes_refuses_and_a_restart_keeps_group_configs(node_dir: str) -> None:
    with running_node(node_dir, overrides=OVERRIDES) as node:
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        # No such group yet: Kafka takes group configs for any group name.
        _alter(
            admin,
            "no-such-group",
            ("consumer.session.timeout.ms", "50000"),
            ("consumer.heartbeat.interval.ms", "6000"),
            ("share.auto.offset.reset", "earliest"),
        )
        wait_until(
            lambda: (
                _describe(admin, "no-such-group")["consumer.session.timeout.ms"] == ("50000", GROUP_CONFIG)
            ),
            10,
            "the group config in the image",
        )
        described = _describe(admin, "no-such-group")
        assert described["consumer.heartbeat.interval.ms"] == ("6000", GROUP_CONFIG)
        assert described["share.auto.offset.reset"] == ("earliest", GROUP_CONFIG)
        # Every group config is listed; the unset ones with the broker's value.
        assert described["share.session.timeout.ms"] == ("45000", DEFAULT)
        assert described["share.isolation.level"] == ("read_uncommitted", DEFAULT)
        assert len(described) == 11
        # Bad values: INVALID_CONFIG with Kafka's messages, and nothing changes.
        for change, why in (
            (("consumer.session.timeout.ms", "1000"), "group.consumer.min.session.timeout.ms"),
            (("consumer.heartbeat.interval.ms", "60000"), "group.consumer.max.heartbeat.interval.ms"),
            (("session.timeout.ms", "50000"), "Unknown group config name: session.timeout.ms"),
            (("share.isolation.level", "dirty"), "String must be one of: read_committed, read_uncommitted"),
        ):
            with pytest.raises(KafkaException) as refused:
                _alter(admin, "no-such-group", change)
            error = refused.value.args[0]
            assert error.code() == KafkaError.INVALID_CONFIG and why in error.str(), error.str()
        assert _describe(admin, "no-such-group") == described
        _alter(admin, "no-such-group", ("share.auto.offset.reset", None))
        wait_until(
            lambda: _describe(admin, "no-such-group")["share.auto.offset.reset"] == ("latest", DEFAULT),
            10,
            "the deleted group config back to its default",
        )
    with running_node(node_dir, overrides=OVERRIDES) as node:
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        described = _describe(admin, "no-such-group")
        assert described["consumer.session.timeout.ms"] == ("50000", GROUP_CONFIG)
        assert described["consumer.heartbeat.interval.ms"] == ("6000", GROUP_CONFIG)
        assert described["share.auto.offset.reset"] == ("latest", DEFAULT)


def _heartbeat(conn: BrokerConnection, group: str, member_id: str, epoch: int) -> object:
    request = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=30000 if epoch == 0 else -1,
        subscribed_topic_names=["hb"] if epoch == 0 else None,
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=[] if epoch == 0 else None,
    )
    return conn.request(request, ConsumerGroupHeartbeatResponse, 1)


def test_a_groups_heartbeat_interval_is_in_its_consumer_group_heartbeat_answers(node_dir: str) -> None:
    with running_node(node_dir, overrides=OVERRIDES) as node:
        admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
        admin.create_topics([NewTopic("hb", 1, 1)])["hb"].result(30)
        _alter(admin, "tuned", ("consumer.heartbeat.interval.ms", "7000"))
        with BrokerConnection.to(node.bootstrap_servers) as conn:
            joined: list[object] = []

            def join() -> bool:
                response = _heartbeat(conn, "tuned", "", 0)
                joined.append(response)
                return response.error_code == ErrorCode.NONE  # type: ignore[attr-defined]

            # As a consumer does: FindCoordinator first (it creates __consumer_offsets), then heartbeats
            # until the partition is loaded.
            found = conn.request(
                FindCoordinatorRequest(key_type=0, coordinator_keys=["tuned", "untuned"]),
                FindCoordinatorResponse,
                4,
            )
            assert found.coordinators
            wait_until(join, 30, "a first ConsumerGroupHeartbeat accepted")
            first = joined[-1]
            assert first.heartbeat_interval_ms == 7000  # type: ignore[attr-defined]
            member_id, epoch = first.member_id, first.member_epoch  # type: ignore[attr-defined]
            # A group without its own value gets the broker's group.consumer.heartbeat.interval.ms.
            other = _heartbeat(conn, "untuned", "", 0)
            assert (other.error_code, other.heartbeat_interval_ms) == (0, 5000)  # type: ignore[attr-defined]
            # Changed at runtime: the member's next heartbeat carries the new interval.
            _alter(admin, "tuned", ("consumer.heartbeat.interval.ms", "9000"))
            wait_until(
                lambda: _heartbeat(conn, "tuned", member_id, epoch).heartbeat_interval_ms == 9000,  # type: ignore[attr-defined]
                10,
                "the new interval in a heartbeat answer",
            )


def _configs_cli(node: RunningNode, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pykraft.cli", "configs", "--bootstrap-server", node.bootstrap_servers, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_pykraft_configs_alters_and_describes_group_configs(node_dir: str) -> None:
    with running_node(node_dir, overrides=OVERRIDES) as node:
        group = ["--entity-type", "groups", "--entity-name", "cli-group"]
        altered = _configs_cli(
            node, *group, "--alter", "--add-config", "consumer.session.timeout.ms=55000,share.isolation.level=read_committed"
        )  # fmt: skip
        assert altered.returncode == 0, altered.stderr
        assert altered.stdout == "Completed updating config for group cli-group.\n"
        described = _configs_cli(node, *group, "--describe")
        assert described.returncode == 0, described.stderr
        assert described.stdout.splitlines() == [
            "Dynamic configs for group cli-group are:",
            "  consumer.session.timeout.ms=55000 sensitive=false "
            "synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=55000}",
            "  share.isolation.level=read_committed sensitive=false "
            "synonyms={DYNAMIC_GROUP_CONFIG:share.isolation.level=read_committed}",
        ]
        everything = _configs_cli(node, *group, "--describe", "--all").stdout
        assert "  consumer.heartbeat.interval.ms=5000 sensitive=false synonyms={DEFAULT_CONFIG:" in everything
        bad = _configs_cli(node, *group, "--alter", "--add-config", "consumer.session.timeout.ms=soon")
        assert bad.returncode == 1
        assert bad.stderr.startswith("error: alter cli-group: INVALID_CONFIG: Invalid value soon"), bad.stderr
        deleted = _configs_cli(node, *group, "--alter", "--delete-config", "share.isolation.level")
        assert deleted.returncode == 0, deleted.stderr
        assert "share.isolation.level" not in _configs_cli(node, *group, "--describe").stdout
