"""A dynamic controller quorum (KIP-853) of real processes: no ``controller.quorum.voters`` anywhere,
only ``controller.quorum.bootstrap.servers``. Controller 1 (the first bootstrap server) starts the quorum
alone; controllers 2 and 3 start as observers and are added with ``pykraft metadata-quorum
add-controller``; then a new controller 4 joins as an observer and is added, controller 1 is removed with
``remove-controller`` and stopped, and the active controller is killed: the new voter set elects. Three
brokers find the leader through the bootstrap servers and serve an acks=all idempotent producer the whole
time; every acknowledged record is read back. Controller 1 then comes back with an empty disk and joins
as an observer instead of starting a second quorum.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import threading
import time
from collections.abc import Iterator

import pytest

from pykraft.cli import main
from pykraft.cli.metadata import QuorumToolError, describe_quorum
from pykraft.core.config import load_config
from pykraft.core.uuid import uuid_to_str
from pykraft.io.quorum_peers import metadata_directory_id
from pykraft.testing import ProcessCluster
from tests.interop.cluster_support import three_by_three, wait_until

OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
}
TOPIC = "through-voter-changes"
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with three_by_three(tmp_path_factory, "dynamic-quorum", OVERRIDES, dynamic=True) as running:
        yield running


def _quorum_tool(cluster: ProcessCluster, *args: str) -> str:
    """``pykraft metadata-quorum --bootstrap-controller <the live controllers> ARGS`` (the tool's own
    entry point, in this process: a Python start per call is seconds on a loaded machine); its stdout."""
    bootstrap = ",".join(n.address for n in cluster.controllers.values() if n.alive)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["metadata-quorum", "--bootstrap-controller", bootstrap, *args])
    assert code == 0, err.getvalue()
    return out.getvalue()


def _directory_id(cluster: ProcessCluster, node_id: int) -> str:
    with open(cluster.nodes[node_id].config_path, encoding="utf-8") as fh:
        directory_id = metadata_directory_id(load_config(fh.read()))
    assert directory_id is not None
    return uuid_to_str(directory_id)


def _voters(partition: object) -> list[int]:
    return sorted(v.replica_id for v in partition.current_voters)  # type: ignore[attr-defined]


class Load:
    """An acks=all idempotent producer writing until stopped; what was acknowledged, by value."""

    def __init__(self, bootstrap: str) -> None:
        import confluent_kafka

        self.producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
        )
        self.acked: set[bytes] = set()
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)
        self._thread.start()

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is None:
            self.acked.add(msg.value())  # type: ignore[attr-defined]
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(
                TOPIC, f"v{i}".encode(), partition=i % PARTITIONS, on_delivery=self._on_delivery
            )
            i += 1
            self.producer.poll(0.02)

    def acked_after(self, count: int, timeout_s: float, what: str) -> None:
        """Wait until ``count`` more records than now are acknowledged: the brokers keep serving."""
        target = len(self.acked) + count
        wait_until(lambda: len(self.acked) >= target, timeout_s, what)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        assert self.producer.flush(60) == 0


def _read_back(bootstrap: str, expected: set[bytes]) -> set[bytes]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "read-back", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([TOPIC])
    seen: set[bytes] = set()
    deadline = time.monotonic() + 60
    try:
        while not expected <= seen and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                seen.add(message.value())
    finally:
        consumer.close()
    return seen


def test_controllers_added_and_removed_with_the_cli_under_load__the_new_set_elects(
    cluster: ProcessCluster,
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    # Controller 1 started the quorum alone; 2 and 3 fetch as observers until added.
    partition = cluster.wait_for_leader()
    assert (partition.leader_id, _voters(partition)) == (1, [1])
    observers = {o.replica_id for o in partition.observers}
    wait_until(
        lambda: {2, 3} <= {o.replica_id for o in cluster.describe_quorum().observers},
        30,
        f"controllers 2 and 3 fetching as observers (saw {observers})",
    )
    for node_id in (2, 3):
        out = _quorum_tool(cluster, "--command-config", cluster.nodes[node_id].config_path, "add-controller")
        assert out.startswith(
            f"Added controller {node_id} with directory id {_directory_id(cluster, node_id)}"
        )
    assert _voters(cluster.describe_quorum()) == [1, 2, 3]

    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures die with it
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    load = Load(bootstrap)
    try:
        load.acked_after(20, 30, "the first acknowledged records")

        # A new controller joins as an observer (it is no voter: it never campaigns), then is added.
        new_id = cluster.add_controller()
        cluster.start(new_id)
        wait_until(
            lambda: new_id in {o.replica_id for o in cluster.describe_quorum().observers},
            30,
            f"controller {new_id} fetching as an observer",
        )
        assert _voters(cluster.describe_quorum()) == [1, 2, 3]
        out = _quorum_tool(cluster, "--command-config", cluster.nodes[new_id].config_path, "add-controller")
        assert out.startswith(f"Added controller {new_id} with directory id {_directory_id(cluster, new_id)}")
        assert _voters(cluster.describe_quorum()) == [1, 2, 3, new_id]
        load.acked_after(20, 30, "records acknowledged after controller 4 was added")

        # The old controller 1 (the leader so far) is removed, then stopped for good. Its directory id
        # comes from DescribeQuorum v2 (a dead controller's disk cannot be read).
        voter_1 = next(v for v in cluster.describe_quorum().current_voters if v.replica_id == 1)
        removed_dir = uuid_to_str(voter_1.replica_directory_id)
        assert removed_dir == _directory_id(cluster, 1)
        out = _quorum_tool(
            cluster, "remove-controller", "--controller-id", "1", "--controller-directory-id", removed_dir
        )
        assert out.strip() == f"Removed  KRaft controller 1 with directory id {removed_dir}"  # Kafka's text
        cluster.stop(1)
        partition = cluster.wait_for_leader(exclude=frozenset({1}))
        assert _voters(partition) == [2, 3, new_id] and partition.leader_id in (2, 3, new_id)
        load.acked_after(20, 30, "records acknowledged after controller 1 was removed")

        # The active controller dies: the new set (two of its three voters left) elects among itself.
        killed = partition.leader_id
        cluster.kill(killed)
        partition = cluster.wait_for_leader(exclude=frozenset({1, killed}))
        assert _voters(partition) == [2, 3, new_id] and partition.leader_id in {2, 3, new_id} - {killed}
        load.acked_after(20, 30, "records acknowledged after the active controller was killed")
    finally:
        load.stop()
    assert not load.failed
    assert _read_back(bootstrap, load.acked) >= load.acked

    # Controller 1's disk is replaced: as the first bootstrap server with an empty log it would start a
    # new quorum, but the others name a leader epoch, so it joins the running one as an observer.
    shutil.rmtree(cluster.nodes[1].data_dir)
    cluster.start(1)
    leader = partition.leader_id
    wait_until(
        lambda: 1 in {o.replica_id for o in describe_quorum(cluster.nodes[leader].address).observers},
        30,
        "controller 1 fetching from the running quorum as an observer",
    )
    assert describe_quorum(cluster.nodes[leader].address).leader_epoch == partition.leader_epoch
    with pytest.raises(QuorumToolError, match=f"leader id {leader}"):
        describe_quorum(cluster.nodes[1].address)  # it leads nothing: it names the running leader
