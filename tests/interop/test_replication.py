"""Partition replication on a cluster of processes (issue 14): three controllers, three brokers, a
topic with replication factor 3 and min.insync.replicas=2. (Acknowledged records surviving leader
kills exactly once and in order, with byte-identical replicas, is the fault campaign's smoke run to
check: tests/faults/test_smoke.py, issue 32.) A leader that appended records nobody replicated truncates
them when it returns, and no consumer sees them.
Group commits and transactions survive the kill -9 of their coordinator. A follower that was down
catches up from a compacted leader, storing its cleaned batches with their offset gaps.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.coordinator.offsets_records import OFFSETS_TOPIC, partition_for
from pykraft.coordinator.txn_records import TRANSACTION_STATE_TOPIC
from pykraft.core.errors import ErrorCode
from pykraft.protocol.records import decode_records, scan_batches
from pykraft.testing import ProcessCluster, free_port
from tests.interop.cluster_support import three_by_three, wait_until
from tests.interop.test_metrics import _scrape, _value
from tests.raw_client import RawClient, fetch_request

OVERRIDES = {
    "broker.session.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "300",
    "replica.lag.time.max.ms": "3000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "log.cleaner.backoff.ms": "100",
}
BROKERS = (101, 102, 103)
METRICS_PORTS = {broker: free_port() for broker in BROKERS}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    per_broker = {broker: {"metrics.port": str(port)} for broker, port in METRICS_PORTS.items()}
    with three_by_three(
        tmp_path_factory, "replication", OVERRIDES, per_broker_overrides=per_broker
    ) as running:
        yield running


@pytest.fixture(autouse=True)
def _whole_cluster(cluster: ProcessCluster) -> None:
    """Each test starts on a whole cluster: every broker unfenced and every partition's ISR full, as
    every broker sees it. Tests here pause and kill brokers; a paused broker resumes with a metadata image
    from before its fencing, so only the agreement of all brokers shows the cluster healed."""
    cluster.wait_for_brokers(60, expected=set(BROKERS))

    def every_isr_full() -> bool:
        for node in cluster.brokers.values():
            with RawClient(node.address, timeout_s=5) as client:
                metadata = client.request(MetadataRequest(topics=None), MetadataResponse, 9)
            for topic in metadata.topics:
                for p in topic.partitions:
                    if p.leader_id < 0 or sorted(p.isr_nodes) != sorted(p.replica_nodes):
                        return False
        return True

    wait_until(every_isr_full, 60, "every partition's ISR full on every broker")


def _partition(cluster: ProcessCluster, topic: str, among: tuple[int, ...] = BROKERS) -> MetadataResponse:
    for broker_id in among:
        node = cluster.nodes[broker_id]
        if not node.alive:
            continue
        try:
            with RawClient(node.address, timeout_s=5) as client:
                response = client.request(
                    MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]),
                    MetadataResponse,
                    9,
                )
        except Exception:
            continue
        return response.topics[0].partitions[0]
    raise AssertionError("no broker answered Metadata")


def _coordinator_partition(cluster: ProcessCluster, internal_topic: str, key: str) -> Any:
    """The partition of ``internal_topic`` (__consumer_offsets, __transaction_state) that ``key``
    maps to, as Metadata describes it: its leader is the key's coordinator."""
    count_key = (
        "offsets.topic.num.partitions"
        if internal_topic == OFFSETS_TOPIC
        else "transaction.state.log.num.partitions"
    )
    index = partition_for(key, int(OVERRIDES[count_key]))
    with RawClient(cluster.bootstrap_servers.split(",")[0], timeout_s=5) as client:
        metadata = client.request(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=internal_topic)]),
            MetadataResponse,
            9,
        )
    return next(p for p in metadata.topics[0].partitions if p.partition_index == index)


def _create(cluster: ProcessCluster, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    wait_until(lambda: len(_partition(cluster, topic).isr_nodes) == 3, 30, f"{topic}'s ISR")


def _consume_all(cluster: ProcessCluster, topic: str, expected_count: int) -> list[bytes]:
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"check-{topic}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    idle_until = None
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error() is not None:
                if len(values) >= expected_count:
                    idle_until = idle_until or time.monotonic() + 1.0
                    if time.monotonic() > idle_until:
                        break
                continue
            values.append(message.value())
    finally:
        consumer.close()
    return values


def _log_bytes(cluster: ProcessCluster, broker_id: int, topic: str) -> bytes:
    directory = os.path.join(cluster.nodes[broker_id].data_dir, f"{topic}-0")
    data = b""
    for name in sorted(f for f in os.listdir(directory) if f.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as fh:
            data += fh.read()
    return data


def test_a_deposed_leader_truncates_what_it_never_replicated(cluster: ProcessCluster) -> None:
    import confluent_kafka

    topic = "diverging"
    _create(cluster, topic)
    first = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    first.produce(topic, b"replicated")
    assert first.flush(30) == 0
    partition = _partition(cluster, topic)
    old_leader = partition.leader_id
    followers = [b for b in BROKERS if b != old_leader]
    for follower in followers:
        os.kill(cluster.nodes[follower].process.pid, signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        # Let the followers' parked fetches come back empty, so nothing of what follows reaches them.
        time.sleep(0.8)
        lonely = confluent_kafka.Producer(
            {"bootstrap.servers": cluster.nodes[old_leader].address, "acks": 1, "enable.idempotence": False}
        )
        delivered: list[object] = []
        for i in range(5):
            lonely.produce(
                topic, f"never-replicated-{i}".encode(), on_delivery=lambda e, m: delivered.append(e)
            )
        assert lonely.flush(10) == 0 and delivered == [None] * 5  # acks=1: the leader alone has them
        cluster.kill(old_leader)
    finally:
        for follower in followers:
            os.kill(cluster.nodes[follower].process.pid, signal.SIGCONT)  # type: ignore[union-attr]
    wait_until(lambda: _partition(cluster, topic).leader_id in followers, 30, "a follower to lead")
    after = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    after.produce(topic, b"after")
    assert after.flush(30) == 0
    cluster.start(old_leader)
    wait_until(lambda: len(_partition(cluster, topic).isr_nodes) == 3, 60, "the old leader back in the ISR")
    with open(cluster.nodes[old_leader].log_path, encoding="utf-8") as fh:
        assert f"{topic}-0: log diverged" in fh.read()
    values = _consume_all(cluster, topic, 2)
    assert values == [b"replicated", b"after"]
    wait_until(
        lambda: len({_log_bytes(cluster, b, topic) for b in BROKERS}) == 1,
        30,
        "the replicas to hold the same bytes",
    )
    assert b"never-replicated" not in _log_bytes(cluster, old_leader, topic)


def test_a_follower_catches_up_from_a_compacted_leader_keeping_its_offset_gaps(
    cluster: ProcessCluster,
) -> None:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "compacted"
    # 4 KiB segments: the active one, which is never cleaned, holds at most ~250 of these records.
    configs = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3, config=configs)])[topic].result(30)
    wait_until(lambda: len(_partition(cluster, topic).isr_nodes) == 3, 30, f"{topic}'s ISR")
    latest: dict[bytes, bytes] = {}
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "batch.num.messages": 100}
    )

    def update(start: int, count: int) -> None:
        for i in range(start, start + count):
            key, value = b"k%d" % (i % 30), b"v%d" % i
            producer.produce(topic, value, key=key)
            latest[key] = value
        assert producer.flush(30) == 0

    def records_of(broker_id: int) -> list[tuple[int, bytes | None, bytes | None]]:
        """The replica's records, read from its segment files."""
        data = _log_bytes(cluster, broker_id, topic)
        return [
            (record.offset, record.key, record.value)
            for position, header in scan_batches(data)
            for record in decode_records(data[position : position + header.size_in_bytes])
        ]

    update(0, 300)
    leader = _partition(cluster, topic).leader_id
    follower = next(b for b in BROKERS if b != leader)
    cluster.kill(follower)
    wait_until(lambda: follower not in _partition(cluster, topic).isr_nodes, 30, "the ISR without it")
    update(300, 3000)  # while it is down, the leader compacts past where the follower stopped
    wait_until(lambda: len(records_of(leader)) < 1000, 30, "the leader's cleaner")
    cluster.start(follower)
    wait_until(lambda: len(_partition(cluster, topic).isr_nodes) == 3, 60, "the follower back in the ISR")
    records = records_of(follower)
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)) and len(offsets) < 3300, "increasing, with the leader's gaps"
    assert offsets[-1] == 3299
    assert {key: value for _, key, value in records} == latest


def test_preferred_leader_election_through_a_broker_and_topics_describe(
    cluster: ProcessCluster, capsys: Any
) -> None:
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    from pykraft.cli import main

    topic = "preferred"
    _create(cluster, topic)
    partition = _partition(cluster, topic)
    preferred = partition.replica_nodes[0]
    assert partition.leader_id == preferred
    cluster.stop(preferred)  # controlled shutdown: leadership moves to another ISR member
    wait_until(lambda: _partition(cluster, topic).leader_id not in (preferred, -1), 30, "another leader")
    cluster.start(preferred)
    wait_until(
        lambda: len(_partition(cluster, topic).isr_nodes) == 3, 60, "the preferred replica back in the ISR"
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    assert all(error is None for error in results.values()), results
    wait_until(lambda: _partition(cluster, topic).leader_id == preferred, 30, "the preferred replica to lead")
    # Once it leads, another election is not needed.
    again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    assert [e.code() for e in again.values() if e is not None] == [ErrorCode.ELECTION_NOT_NEEDED]

    capsys.readouterr()
    live = next(b for b in BROKERS if cluster.nodes[b].alive)
    assert (
        main(["topics", "--bootstrap-server", cluster.nodes[live].address, "describe", "--topic", topic]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert "ReplicationFactor: 3" in lines[0]
    described = _partition(cluster, topic)
    assert lines[1] == (
        f"\tTopic: {topic}\tPartition: 0\tLeader: {preferred}\tLeaderEpoch: {described.leader_epoch}\t"
        f"Replicas: {','.join(map(str, described.replica_nodes))}\tIsr: {','.join(map(str, described.isr_nodes))}"
    )


def test_group_commits_survive_the_loss_of_their_coordinator(cluster: ProcessCluster) -> None:
    import confluent_kafka
    from confluent_kafka import TopicPartition

    topic, group = "committed", "survivor"
    _create(cluster, topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        producer.produce(topic, str(i).encode())
    assert producer.flush(30) == 0
    settings = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    consumer = confluent_kafka.Consumer(settings)
    consumer.assign([TopicPartition(topic, 0)])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 7 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)  # answered once the ISR has it
    consumer.close()
    # Kill -9 the group's coordinator: the leader of its __consumer_offsets partition (replicated 3 ways).
    partition = _coordinator_partition(cluster, OFFSETS_TOPIC, group)
    coordinator = partition.leader_id
    assert len(partition.isr_nodes) == 3
    cluster.kill(coordinator)
    try:
        resumed = confluent_kafka.Consumer(settings)
        committed = resumed.committed([TopicPartition(topic, 0)], timeout=30)
        resumed.close()
        assert committed[0].offset == 7
    finally:
        cluster.start(coordinator)
        wait_until(lambda: len(_partition(cluster, topic).isr_nodes) == 3, 60, "the ISR back to three")


def _commit_offset(address: str, group: str, topic: str, offset: int) -> int:
    """A member-less OffsetCommit v8 of ``offset`` for partition 0 of ``topic``; its error code."""
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[
            topic_cls(
                name=topic,
                partitions=[
                    topic_cls.OffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )
    with RawClient(address, timeout_s=30) as client:
        response = client.request(request, OffsetCommitResponse, 8)
    return response.topics[0].partitions[0].error_code


def _fetch_offset(address: str, group: str, topic: str, require_stable: bool) -> tuple[int, int]:
    """OffsetFetch v8 of partition 0 of ``topic``: (committed offset, partition error code)."""
    from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

    group_cls = OffsetFetchRequest.OffsetFetchRequestGroup
    request = OffsetFetchRequest(
        groups=[
            group_cls(
                group_id=group,
                topics=[group_cls.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])],
            )
        ],
        require_stable=require_stable,
    )
    with RawClient(address, timeout_s=5) as client:
        response = client.request(request, OffsetFetchResponse, 8)
    answer = response.groups[0]
    assert answer.error_code == ErrorCode.NONE, answer
    partition = answer.topics[0].partitions[0]
    return partition.committed_offset, partition.error_code


def _wait_for_coordinator(cluster: ProcessCluster, group: str) -> None:
    """Until FindCoordinator finds the group's coordinator (the first one creates __consumer_offsets)."""
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

    def coordinator_found() -> bool:
        with RawClient(cluster.bootstrap_servers.split(",")[0], timeout_s=5) as client:
            found = client.request(
                FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), FindCoordinatorResponse, 4
            )
        return found.coordinators[0].error_code == ErrorCode.NONE

    wait_until(coordinator_found, 30, "the group's coordinator")


def test_an_offset_commit_is_not_served_before_the_isr_has_it(cluster: ProcessCluster) -> None:
    """Issue 32: a commit appended by the coordinator but not yet replicated is not visible to
    OffsetFetch (require_stable: UNSTABLE_OFFSET_COMMIT), and one that fails is never served. The two
    followers of the group's __consumer_offsets partition are paused, so the commit can only wait; an
    OffsetFetch watcher on the coordinator must never see its offset before it is acknowledged."""
    topic, group = "pending-commits", "pending-group"
    _create(cluster, topic)
    _wait_for_coordinator(cluster, group)
    partition = _coordinator_partition(cluster, OFFSETS_TOPIC, group)
    coordinator = cluster.nodes[partition.leader_id].address
    assert _commit_offset(coordinator, group, topic, 5) == ErrorCode.NONE
    wait_until(
        lambda: len(_coordinator_partition(cluster, OFFSETS_TOPIC, group).isr_nodes) == 3, 30, "a full ISR"
    )
    followers = [b for b in partition.replica_nodes if b != partition.leader_id]
    outcome: list[int] = []
    seen: list[tuple[float, tuple[int, int], tuple[int, int]]] = []
    for follower in followers:
        os.kill(cluster.nodes[follower].process.pid, signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        time.sleep(0.8)  # the followers' parked fetches come back empty: nothing new reaches them
        committer = threading.Thread(
            target=lambda: outcome.append(_commit_offset(coordinator, group, topic, 9))
        )
        committer.start()
        while committer.is_alive():
            plain = _fetch_offset(coordinator, group, topic, require_stable=False)
            stable = _fetch_offset(coordinator, group, topic, require_stable=True)
            seen.append((time.monotonic(), plain, stable))
            time.sleep(0.05)
        committer.join()
    finally:
        for follower in followers:
            os.kill(cluster.nodes[follower].process.pid, signal.SIGCONT)  # type: ignore[union-attr]
    before_answer = seen[:-1]  # the last look may race the answer
    assert before_answer, "the commit was answered before the followers were paused"
    assert all(plain == (5, ErrorCode.NONE) for _, plain, _ in before_answer), before_answer
    assert all(stable[1] == ErrorCode.UNSTABLE_OFFSET_COMMIT for _, _, stable in before_answer), before_answer
    if outcome[0] != ErrorCode.NONE:
        # Never acknowledged: the coordinator goes on serving the previous commit.
        assert _fetch_offset(coordinator, group, topic, require_stable=True) == (5, ErrorCode.NONE)
    else:
        # The ISR shrank to the leader and took it: served from now on.
        assert _fetch_offset(coordinator, group, topic, require_stable=True) == (9, ErrorCode.NONE)


def _offsets_partition_seen_by(address: str, group: str) -> Any:
    """The group's __consumer_offsets partition as the broker at ``address`` describes it."""
    index = partition_for(group, int(OVERRIDES["offsets.topic.num.partitions"]))
    with RawClient(address, timeout_s=5) as client:
        metadata = client.request(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=OFFSETS_TOPIC)]),
            MetadataResponse,
            9,
        )
    return next(p for p in metadata.topics[0].partitions if p.partition_index == index)


def test_a_paused_coordinator_answers_no_stale_offset_when_it_resumes(cluster: ProcessCluster) -> None:
    """Issue 32, the paused-coordinator scenario: the group's coordinator is paused (SIGSTOP) past
    broker.session.timeout.ms, the controller fences it and its group moves; a commit goes through the
    new coordinator. An OffsetFetch sent to the old one while it is paused waits in its socket and is
    answered the moment it resumes, before it has read the metadata that moved the group: it must answer
    NOT_COORDINATOR (its coordinator lease lapsed), never the offset it had before."""
    from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

    topic, group = "paused-coordinator", "paused-coordinator-group"
    _create(cluster, topic)
    _wait_for_coordinator(cluster, group)
    partition = _coordinator_partition(cluster, OFFSETS_TOPIC, group)
    old = partition.leader_id
    # A broker an earlier test paused answers NOT_COORDINATOR until its lease is renewed (retriable).
    wait_until(lambda: _commit_offset(cluster.nodes[old].address, group, topic, 5) == ErrorCode.NONE, 30,
               "the first commit")  # fmt: skip
    wait_until(
        lambda: len(_coordinator_partition(cluster, OFFSETS_TOPIC, group).isr_nodes) == 3, 30, "full ISR"
    )
    other = cluster.nodes[next(b for b in BROKERS if b != old)].address
    group_cls = OffsetFetchRequest.OffsetFetchRequestGroup
    fetch = OffsetFetchRequest(
        groups=[group_cls(group_id=group, topics=[group_cls.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])],
        require_stable=False,
    )  # fmt: skip
    answers: list[Any] = []
    process = cluster.nodes[old].process
    assert process is not None
    os.kill(process.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: _offsets_partition_seen_by(other, group).leader_id not in (old, -1), 30,
                   "the group's partition led by another broker")  # fmt: skip
        new = _offsets_partition_seen_by(other, group).leader_id
        wait_until(lambda: _commit_offset(cluster.nodes[new].address, group, topic, 9) == ErrorCode.NONE, 30,
                   "the commit through the new coordinator")  # fmt: skip
        with RawClient(cluster.nodes[old].address, timeout_s=30) as queued:  # the kernel accepts it
            asking = threading.Thread(
                target=lambda: answers.append(queued.request(fetch, OffsetFetchResponse, 8))
            )
            asking.start()
            time.sleep(0.3)  # the request is in the paused broker's socket
            os.kill(process.pid, signal.SIGCONT)
            asking.join(30)
    finally:
        os.kill(process.pid, signal.SIGCONT)
    assert answers, "no answer from the resumed coordinator"
    answer = answers[0].groups[0]
    served = [p.committed_offset for t in answer.topics for p in t.partitions if p.error_code == 0]
    assert answer.error_code == ErrorCode.NOT_COORDINATOR or served == [9], (answer.error_code, served)


def test_a_kip848_member_keeps_its_partition_when_its_coordinator_is_killed(cluster: ProcessCluster) -> None:
    """Issue 19 on a cluster: the consumer group's records are replicated with __consumer_offsets, so the
    new coordinator knows the member and its epoch; it keeps heartbeating and committing without
    giving its partition up."""
    import confluent_kafka
    from confluent_kafka import TopicPartition

    topic, group = "committed-848", "survivor-848"
    _create(cluster, topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        producer.produce(topic, str(i).encode())
    assert producer.flush(30) == 0
    revoked: list[object] = []
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic], on_revoke=lambda c, parts: revoked.append(parts))

    def consume_to(offset: int) -> None:
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, f"not consumed to {offset}"
            message = consumer.poll(0.1)
            if message is not None and message.error() is None and message.offset() == offset - 1:
                consumer.commit(message=message, asynchronous=False)  # answered once the ISR has it
                return

    try:
        consume_to(7)
        coordinator = _coordinator_partition(cluster, OFFSETS_TOPIC, group).leader_id
        cluster.kill(coordinator)
        try:
            consume_to(10)  # the new coordinator accepts the member's epoch and its commit
            assert not revoked and [tp.partition for tp in consumer.assignment()] == [0]
            assert consumer.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 10
        finally:
            cluster.start(coordinator)
            wait_until(lambda: len(_partition(cluster, topic).isr_nodes) == 3, 60, "the ISR back to three")
    finally:
        consumer.close()


def test_a_transaction_commits_after_its_coordinator_is_killed(cluster: ProcessCluster) -> None:
    """Issue 15 on a cluster: the transaction's state is in __transaction_state, replicated 3 ways; the
    coordinator's broker dies with the transaction open, the new leader of that partition loads it, the
    commit completes there, and read_committed readers see exactly the committed records."""
    import confluent_kafka
    from confluent_kafka import TopicPartition

    topic, transactional_id = "txn-failover", "failover-1"
    _create(cluster, topic)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, b"a%d" % i, partition=0)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, b"b%d" % i, partition=0)
    assert producer.flush(30) == 0
    coordinator = _coordinator_partition(cluster, TRANSACTION_STATE_TOPIC, transactional_id).leader_id
    cluster.kill(coordinator)
    try:
        producer.commit_transaction(60)  # rediscovers the coordinator: the new leader loaded the state
        producer.begin_transaction()
        producer.produce(topic, b"never", partition=0)
        assert producer.flush(30) == 0
        producer.abort_transaction(60)
        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "txn-failover-check",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == -191 and len(values) >= 20:  # _PARTITION_EOF
                    break
                continue
            values.append(message.value())
        consumer.close()
        assert values == [b"a%d" % i for i in range(10)] + [b"b%d" % i for i in range(10)]
    finally:
        cluster.start(coordinator)
        wait_until(lambda: len(_partition(cluster, topic).isr_nodes) == 3, 60, "the ISR back to three")


def _first_answers(address: str, topic: str) -> tuple[int, int]:
    """Partition 0's ListOffsets latest and a Fetch's high watermark, the first time ``address`` answers
    both without error (a restarting broker answers NOT_LEADER_OR_FOLLOWER until it leads)."""
    from kafka.protocol.consumer import FetchResponse, ListOffsetsRequest, ListOffsetsResponse

    topic_cls = ListOffsetsRequest.ListOffsetsTopic
    latest = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            topic_cls(
                name=topic, partitions=[topic_cls.ListOffsetsPartition(partition_index=0, timestamp=-1)]
            )
        ],
    )
    answers: list[tuple[int, int]] = []

    def answered() -> bool:
        try:
            with RawClient(address, timeout_s=5) as client:
                listed = client.request(latest, ListOffsetsResponse, 4).topics[0].partitions[0]
                if listed.error_code != ErrorCode.NONE:
                    return False
                fetched = (
                    client.request(fetch_request(topic, 0, max_wait_ms=0, min_bytes=0), FetchResponse, 11)
                    .responses[0]
                    .partitions[0]
                )
        except OSError:
            return False  # not listening yet
        assert fetched.error_code == ErrorCode.NONE, fetched
        answers.append((listed.offset, fetched.high_watermark))
        return True

    wait_until(answered, 60, f"{address} to lead {topic}-0")
    return answers[0]


def test_a_restarted_leader_answers_at_its_old_high_watermark_at_once(cluster: ProcessCluster) -> None:
    """Issue 29: a leader stopped cleanly (SIGTERM) while its followers are paused comes back leading and
    its very first ListOffsets and Fetch answers give the high watermark it had, with no follower
    fetching from it. The controller (Kafka's, without ELR) fences the paused followers out of the ISR and
    keeps the leader as its last member, so the restarted broker leads an ISR of itself: its high
    watermark is its log end at once, as the replication-offset-checkpoint also says. That the checkpoint
    alone gives a leader with followers in its ISR its old high watermark is
    tests/unit/test_checkpoint_files.py's (the controller never lets such a broker lead after a restart)."""
    import confluent_kafka

    topic = "restarted-leader"
    _create(cluster, topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(20):
        producer.produce(topic, b"%d" % i)
    assert producer.flush(30) == 0
    leader = _partition(cluster, topic).leader_id
    address = cluster.nodes[leader].address
    assert _first_answers(address, topic) == (20, 20)
    followers = [b for b in BROKERS if b != leader]
    for follower in followers:
        os.kill(cluster.nodes[follower].process.pid, signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        # The controller fences the paused followers; the ISR keeps the leader, its last member.
        wait_until(
            lambda: _partition(cluster, topic, (leader,)).isr_nodes == [leader],
            30,
            "an ISR of the leader alone",
        )
        cluster.stop(leader)
        cluster.start(leader)
        assert _first_answers(address, topic) == (20, 20)
    finally:
        for follower in followers:
            os.kill(cluster.nodes[follower].process.pid, signal.SIGCONT)  # type: ignore[union-attr]


def test_a_long_poll_is_answered_when_an_acks_1_record_is_replicated(cluster: ProcessCluster) -> None:
    """A consumer's Fetch parked on the leader is answered once the followers' fetches move the high
    watermark past an acks=1 record, not at its max wait: no acks=all produce waits there to wake it,
    yet Kafka completes delayed fetches on every high watermark increment (issue 29)."""
    from kafka.protocol.consumer import FetchResponse
    from kafka.protocol.producer import ProduceResponse

    from pykraft.protocol.records import Record, build_batch
    from tests.raw_client import fetch_request, produce_request

    topic = "acks-one-long-poll"
    _create(cluster, topic)
    address = cluster.nodes[_partition(cluster, topic).leader_id].address
    # The socket gives up long before the Fetch's max wait: only a woken long poll answers in time.
    with RawClient(address, timeout_s=30) as consumer, RawClient(address) as producer:
        consumer.request(fetch_request(topic, 0, max_wait_ms=10, min_bytes=1), FetchResponse, 11)
        consumer.send(fetch_request(topic, 0, max_wait_ms=600_000, min_bytes=1), 11)
        time.sleep(0.5)  # the Fetch parks on the leader before the record arrives
        batch = bytes(build_batch([Record(None, b"one")], timestamp_ms=int(time.time() * 1000)))
        produced = producer.request(produce_request(topic, batch, acks=1), ProduceResponse, 7)
        assert produced.responses[0].partition_responses[0].error_code == 0
        response = FetchResponse.decode(consumer.receive_frame(), version=11, header=True)
    records = response.responses[0].partitions[0].records
    assert [r.value for r in decode_records(records)] == [b"one"]


def test_an_idle_follower_fetch_names_no_partition(cluster: ProcessCluster) -> None:
    """KIP-227 between brokers (issue 29 item 4): a caught-up follower's fetches go through its session
    with the leader, so they name no partition and the leader answers none of an idle topic's. The
    leaders' count of fetched partitions of the topic (BrokerTopicMetrics TotalFetchRequests) stops
    growing; sessionless, every follower fetch answered all of its partitions, twice a second. Each
    broker keeps a session for each of the other two."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, partitions = "idle-sessions", 30
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for partition in range(partitions):
        producer.produce(topic, b"v%d" % partition, partition=partition)
    assert producer.flush(30) == 0

    def answered() -> float:
        return sum(
            _value(
                _scrape(f"http://127.0.0.1:{port}/metrics"),
                "kafka_server_brokertopicmetrics_totalfetchrequests_total",
                topic=topic,
            )
            for port in METRICS_PORTS.values()
        )

    def idle_for_a_second() -> bool:
        before = answered()
        time.sleep(1.0)  # two of each follower's long polls (replica.fetch.wait.max.ms = 500)
        return answered() == before

    wait_until(idle_for_a_second, 30, f"no partition of {topic} answered to a follower for a second")
    cached = 0.0
    for port in METRICS_PORTS.values():
        samples = _scrape(f"http://127.0.0.1:{port}/metrics")
        assert _value(samples, "kafka_server_fetchsessioncache_numincrementalfetchsessions") >= 2
        cached += _value(samples, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
    assert cached >= 2 * partitions  # each partition is in the sessions of its two followers


def test_a_broker_that_does_not_lead_names_the_leader_kip_951(cluster: ProcessCluster) -> None:
    """KIP-951 on real brokers: a Produce v10 and a Fetch v16 (by topic id, KIP-516) sent to a broker
    that holds no replica of the partition answer NOT_LEADER_OR_FOLLOWER with the current leader and its
    epoch, and the leader's endpoint, so a client moves there without asking for Metadata first."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.protocol.consumer import FetchResponse
    from kafka.protocol.producer import ProduceRequest, ProduceResponse

    from pykraft.protocol.records import Record, build_batch

    topic = "kip951"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    wait_until(lambda: _partition(cluster, topic).leader_id in BROKERS, 30, f"{topic}'s leader")
    with RawClient(cluster.nodes[BROKERS[0]].address, timeout_s=5) as client:
        metadata = client.request(
            MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), MetadataResponse, 12
        )
    topic_id = metadata.topics[0].topic_id
    state = metadata.topics[0].partitions[0]
    leader, epoch = state.leader_id, state.leader_epoch
    other = next(broker for broker in BROKERS if broker != leader)
    leader_host, leader_port = cluster.nodes[leader].address.rsplit(":", 1)

    produce = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=0, records=bytes(build_batch([Record(None, b"x")], timestamp_ms=1))
                    )
                ],
            )
        ],
    )
    fetch = fetch_request(topic_id, 0, max_wait_ms=0, min_bytes=0)
    with RawClient(cluster.nodes[other].address, timeout_s=5) as client:
        produced = client.request(produce, ProduceResponse, 10)
        fetched = client.request(fetch, FetchResponse, 16)
    refused = produced.responses[0].partition_responses[0]
    assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (leader, epoch)
    assert [(e.node_id, e.host, e.port) for e in produced.node_endpoints] == [
        (leader, leader_host, int(leader_port))
    ]
    assert fetched.responses[0].topic_id == topic_id
    refused_fetch = fetched.responses[0].partitions[0]
    assert refused_fetch.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (refused_fetch.current_leader.leader_id, refused_fetch.current_leader.leader_epoch) == (
        leader,
        epoch,
    )
    assert [(e.node_id, e.host, e.port) for e in fetched.node_endpoints] == [
        (leader, leader_host, int(leader_port))
    ]
