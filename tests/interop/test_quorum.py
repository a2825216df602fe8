"""KRaft over the network: three controller processes on 127.0.0.1, real kill -9.

One scenario per test, each a few seconds: the quorum forms with no format step (KIP-1262: the first
leader writes the ClusterIdRecord and every node persists it), DescribeQuorum reports one leader and
caught-up voters, only the active controller creates topics (NOT_CONTROLLER elsewhere), a killed
leader is replaced without losing a committed record, and a voter whose log ends below the new
leader's log start catches up through FetchSnapshot (KIP-630).
"""

from __future__ import annotations

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.cli.metadata import (
    build_image,
    describe_quorum,
    describe_quorum_response,
    quorum_replication_lines,
    quorum_status_lines,
)
from pykraft.core.errors import ErrorCode
from pykraft.io.raft_log import METADATA_PARTITION_DIR
from pykraft.storage.meta_properties import parse_meta_properties
from pykraft.testing import ProcessCluster, process_cluster
from tests.raw_client import RawClient, broker_heartbeat, register_broker

# Snapshots and log cleaning every few hundred ms, so a voter that is down for a second falls below
# the leader's log start (KIP-630 catch-up by snapshot); a NoOpRecord every 50 ms keeps the log moving.
FAST_METADATA = {
    "metadata.max.idle.interval.ms": "50",
    "metadata.log.max.snapshot.interval.ms": "200",
    "metadata.log.max.record.bytes.between.snapshots": "1",
    "metadata.log.segment.bytes": "2000",
    "metadata.max.retention.bytes": "1",
    "metadata.max.retention.ms": "1",
    "log.retention.check.interval.ms": "100",
}


@pytest.fixture
def cluster(tmp_path) -> Iterator[ProcessCluster]:  # type: ignore[no-untyped-def]
    with process_cluster(3, directory=str(tmp_path / "cluster"), overrides=FAST_METADATA) as running:
        try:
            yield running
        except BaseException:
            print(running.logs())
            raise


def _register_broker(address: str, cluster_id: str, broker_id: int = 100) -> tuple[int, int]:
    """Register a broker the way a broker process does, and heartbeat it unfenced: (error, epoch)."""
    response = register_broker(address, broker_id, cluster_id)
    if response.error_code == ErrorCode.NONE:
        beat = broker_heartbeat(address, broker_id, response.broker_epoch, response.broker_epoch)
        assert (beat.error_code, beat.is_fenced) == (ErrorCode.NONE, False), beat
    return int(response.error_code), int(response.broker_epoch)


def _create_topic(address: str, name: str, *, activating: bool = False) -> int:
    """CreateTopics on a controller listener. ``activating``: the node was just elected, and a raft
    leader answers NOT_CONTROLLER until it has applied its whole log and its controller is active;
    ask again as a client would (at most 10 s)."""
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[]
    )
    deadline = time.monotonic() + 10
    while True:
        with RawClient(address) as client:
            response = client.request(
                CreateTopicsRequest(topics=[topic], timeout_ms=10000, validate_only=False),
                CreateTopicsResponse,
                5,
            )
        error = int(response.topics[0].error_code)
        if not activating or error != ErrorCode.NOT_CONTROLLER or time.monotonic() > deadline:
            return error
        time.sleep(0.05)


def _meta_dir(cluster: ProcessCluster, node_id: int) -> str:
    return os.path.join(cluster.nodes[node_id].data_dir, METADATA_PARTITION_DIR)


def _cluster_id(cluster: ProcessCluster, node_id: int) -> str | None:
    with open(os.path.join(cluster.nodes[node_id].data_dir, "meta.properties"), encoding="utf-8") as fh:
        return parse_meta_properties(fh.read()).cluster_id


def _wait(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def test_three_controllers_elect_one_leader_mint_one_cluster_id_and_serve_describe_quorum(
    cluster: ProcessCluster,
) -> None:
    partition = cluster.wait_for_leader()
    leader = partition.leader_id
    assert leader in cluster.nodes
    assert sorted(v.replica_id for v in partition.current_voters) == [1, 2, 3]
    assert all(v.log_end_offset >= partition.high_watermark for v in partition.current_voters)
    # Every voter answers DescribeQuorum the way Kafka's do: the leader describes, a follower
    # answers NOT_LEADER_OR_FOLLOWER naming the leader (the tool then asks the leader).
    for node_id in cluster.nodes:
        if node_id != leader:
            with pytest.raises(Exception, match="NOT_LEADER_OR_FOLLOWER"):
                cluster.describe_quorum(node_id)
    # KIP-1262: one cluster id, minted by the first leader, persisted by every node.
    _wait(lambda: all(_cluster_id(cluster, n) for n in cluster.nodes), 10, "meta.properties cluster ids")
    ids = {_cluster_id(cluster, n) for n in cluster.nodes}
    assert len(ids) == 1, ids
    # kafka-metadata-quorum describe --status as Kafka 4.3 prints it: the cluster id first, the voters
    # with their directory ids (none under a static quorum) and controller endpoints.
    (cluster_id,) = ids
    status = dict(
        line.split(":", 1)
        for line in quorum_status_lines(describe_quorum_response(cluster.nodes[leader].address), cluster_id)
    )
    assert list(status)[:2] == ["ClusterId", "LeaderId"] and status["LeaderId"].strip() == str(leader)
    assert status["ClusterId"].strip() == cluster_id
    voters = json.loads(status["CurrentVoters"])
    assert [v["id"] for v in voters] == [1, 2, 3]
    assert all(v["endpoints"] == [f"CONTROLLER://{cluster.nodes[v['id']].address}"] for v in voters), voters
    replication = quorum_replication_lines(cluster.describe_quorum(leader))
    assert replication[0].split()[0] == "NodeId" and replication[1].split()[0] == str(leader)
    assert sorted(line.split()[-1] for line in replication[1:]) == ["Follower", "Follower", "Leader"]
    # Only the active controller writes: a follower answers NOT_CONTROLLER. With no broker registered
    # the leader cannot place a replica (Kafka's answer too); once one registers, the topic is created.
    cluster_id = ids.pop()
    assert cluster_id is not None
    follower = next(n for n in cluster.nodes if n != leader)
    leader_address = cluster.nodes[leader].address
    assert _create_topic(cluster.nodes[follower].address, "on-a-follower") == ErrorCode.NOT_CONTROLLER
    assert _create_topic(leader_address, "no-broker-yet") == ErrorCode.INVALID_REPLICATION_FACTOR
    assert _register_broker(cluster.nodes[follower].address, cluster_id)[0] == ErrorCode.NOT_CONTROLLER
    assert _register_broker(leader_address, "another-cluster")[0] == ErrorCode.INCONSISTENT_CLUSTER_ID
    error, broker_epoch = _register_broker(leader_address, cluster_id)
    assert error == ErrorCode.NONE and broker_epoch > 0
    assert _create_topic(leader_address, "on-the-leader") == ErrorCode.NONE


def test_kill_the_leader_elects_another_loses_nothing_and_the_old_leader_catches_up_by_snapshot(
    cluster: ProcessCluster,
) -> None:
    first = cluster.wait_for_leader()
    leader = first.leader_id
    _wait(lambda: _cluster_id(cluster, leader) is not None, 10, "the cluster id")
    cluster_id = _cluster_id(cluster, leader)
    assert cluster_id is not None
    assert _register_broker(cluster.nodes[leader].address, cluster_id)[0] == ErrorCode.NONE
    assert _create_topic(cluster.nodes[leader].address, "before-the-kill") == ErrorCode.NONE
    committed_before = cluster.describe_quorum(leader).high_watermark
    killed_log_end = committed_before
    cluster.kill(leader)

    second = cluster.wait_for_leader(exclude=frozenset({leader}))
    new_leader = second.leader_id
    assert new_leader != leader and second.leader_epoch > first.leader_epoch
    assert second.high_watermark >= committed_before
    assert (
        _create_topic(cluster.nodes[new_leader].address, "after-the-kill", activating=True) == ErrorCode.NONE
    )
    assert (
        _create_topic(cluster.nodes[new_leader].address, "before-the-kill") == ErrorCode.TOPIC_ALREADY_EXISTS
    )

    # While the old leader is down the new one snapshots and cleans its log past the old leader's end.
    def log_start_passed_the_killed_end() -> bool:
        checkpoints = glob.glob(os.path.join(_meta_dir(cluster, new_leader), "*.checkpoint"))
        return (
            any(int(os.path.basename(c).split("-")[0]) > killed_log_end for c in checkpoints)
            and min(
                int(os.path.basename(f).split(".")[0])
                for f in glob.glob(os.path.join(_meta_dir(cluster, new_leader), "*.log"))
            )
            > killed_log_end
        )

    _wait(
        log_start_passed_the_killed_end, 20, "the new leader's log start to pass the killed leader's log end"
    )

    cluster.start(leader)
    rejoined = cluster.wait_for_leader(timeout_s=30)
    assert {v.replica_id for v in rejoined.current_voters} == {1, 2, 3}

    def caught_up() -> bool:
        partition = cluster.describe_quorum()
        state = next(v for v in partition.current_voters if v.replica_id == leader)
        return state.log_end_offset >= partition.high_watermark > committed_before

    _wait(caught_up, 30, f"node {leader} to catch up")
    # It caught up through FetchSnapshot: it now holds a snapshot past the end of its old log.
    checkpoints = glob.glob(os.path.join(_meta_dir(cluster, leader), "*.checkpoint"))
    assert any(int(os.path.basename(c).split("-")[0]) > killed_log_end for c in checkpoints), checkpoints

    # Stop everyone; every node's files build the same image, holding both topics.
    cluster.stop()
    images = {n: build_image(_meta_dir(cluster, n)).image for n in cluster.nodes}
    topics = {n: sorted(image.topics.topics_by_name) for n, image in images.items()}
    assert all(t == topics[leader] for t in topics.values()), topics
    assert {"after-the-kill", "before-the-kill"} <= set(topics[leader])


def test_sigterm_of_the_leader_resigns_and_another_leads(cluster: ProcessCluster) -> None:
    # A clean stop sends EndQuorumEpoch (KafkaRaftClient.shutdown): the others elect at once.
    first = cluster.wait_for_leader()
    cluster.stop(first.leader_id, timeout_s=15)
    assert cluster.nodes[first.leader_id].process is not None
    assert cluster.nodes[first.leader_id].process.returncode == 0
    second = cluster.wait_for_leader(exclude=frozenset({first.leader_id}), timeout_s=15)
    assert second.leader_epoch > first.leader_epoch and second.high_watermark >= first.high_watermark


def test_dev_cluster_starts_controllers_and_a_broker_and_stops_them_on_ctrl_c(tmp_path) -> None:  # type: ignore[no-untyped-def]
    directory = tmp_path / "dev"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pykraft.cli",
            "dev",
            "cluster",
            "--controllers",
            "3",
            "--brokers",
            "1",
            "--dir",
            str(directory),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(7)]
        addresses = [line.split()[2] for line in lines if line.startswith("controller ")]
        assert len(addresses) == 3, lines
        assert sorted(p.name for p in directory.glob("*.properties")) == [
            "broker-101.properties",
            "controller-1.properties",
            "controller-2.properties",
            "controller-3.properties",
        ]
        bootstrap = next(line.split("=", 1)[1].strip() for line in lines if line.startswith("clients:"))

        def has_leader() -> bool:
            for address in addresses:
                try:
                    return describe_quorum(address, timeout_s=2).leader_id in (1, 2, 3)
                except Exception:  # a follower, or not up yet
                    continue
            return False

        _wait(has_leader, 30, "the dev cluster to elect a leader")

        def broker_serves() -> bool:
            try:
                with RawClient(bootstrap) as client:
                    brokers = client.request(MetadataRequest(topics=[]), MetadataResponse, 9).brokers
            except Exception:  # not up or not unfenced yet
                return False
            return [b.node_id for b in brokers] == [101]

        _wait(broker_serves, 30, "the dev cluster's broker to be unfenced")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        assert "stopping the cluster" in out
        for address in [*addresses, bootstrap]:
            host, port = address.rsplit(":", 1)
            with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=1):
                pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_metadata_quorum_cli_prints_status_and_replication(cluster: ProcessCluster) -> None:
    leader = cluster.wait_for_leader().leader_id
    follower = next(n for n in cluster.nodes if n != leader)
    for flag, first_word in (("--status", "ClusterId:"), ("--replication", "NodeId")):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pykraft.cli",
                "metadata",
                "quorum",
                "--bootstrap-controller",
                cluster.nodes[leader].address,
                "describe",
                flag,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        assert out.split()[0] == first_word, out
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "pykraft.cli",
            "metadata",
            "quorum",
            "--bootstrap-controller",
            cluster.nodes[follower].address,
            "describe",
            "--status",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert refused.returncode == 1
    assert "NOT_LEADER_OR_FOLLOWER" in refused.stderr and f"leader id {leader}" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1  # one line, no traceback
