"""Share groups (KIP-932, issue 31) through confluent-kafka's ShareConsumer on one node: five share
consumers on a one-partition topic together receive every record once; explicit acknowledgements
RELEASE (redelivered to another member with delivery count 2), REJECT (never again) and the delivery
count limit (archived); records held by a consumer killed -9 are released when its connection closes,
not only once their locks expire; share.auto.offset.reset decides where a new group starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from pykraft.cli import main
from pykraft.core.errors import ErrorCode
from pykraft.protocol.messages import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
from pykraft.testing import RunningNode, running_node
from tests.raw_client import RawClient

pytestmark = pytest.mark.slow

LOCK_MS = 2000
DELIVERY_COUNT_LIMIT = 3
OVERRIDES = {
    "offsets.topic.num.partitions": "3",
    "share.coordinator.state.topic.num.partitions": "3",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": str(DELIVERY_COUNT_LIMIT),
}
LIMIT_S = 30.0  # a bound on each wait, never a timing assertion


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node(overrides=OVERRIDES) as running:
        yield running


def _setup(
    node: RunningNode,
    topic: str,
    group: str,
    records: int,
    reset: str | None = "earliest",
    record_lock_duration_ms: int | None = None,
) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    configs = {"share.auto.offset.reset": reset, "share.record.lock.duration.ms": record_lock_duration_ms}
    entries = [
        ConfigEntry(name, str(value), incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
        if value is not None
    ]
    if entries:
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
        for future in admin.incremental_alter_configs([resource]).values():
            future.result()
    _produce(node, topic, [f"r{i}" for i in range(records)])


def _produce(node: RunningNode, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": node.bootstrap_servers})
    for value in values:
        producer.produce(topic, value=value.encode())
    producer.flush(10)


def _consumer(node: RunningNode, group: str, topic: str, **extra: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": node.bootstrap_servers, "group.id": group, **extra})
    consumer.subscribe([topic])
    return consumer


def _poll_until(
    consumers: list[ShareConsumer], on_message: Callable[[int, object], None], done: Callable[[], bool]
) -> None:
    deadline = time.monotonic() + LIMIT_S
    while not done():
        assert time.monotonic() < deadline, "gave up waiting"
        for index, consumer in enumerate(consumers):
            for message in consumer.poll(0.2):
                assert message.error() is None, message.error()
                on_message(index, message)


def test_five_share_consumers_receive_every_record_once(node: RunningNode) -> None:
    topic, group, total = "share-five", "sg-five", 300
    _setup(node, topic, group, total)
    consumers = [_consumer(node, group, topic, **{"max.poll.records": "10"}) for _ in range(5)]
    received: Counter[int] = Counter()
    per_consumer: Counter[int] = Counter()
    started = time.monotonic()
    deliveries: list[tuple[float, int, int, int]] = []  # (s since start, consumer, offset, delivery count)

    def on_message(index: int, message: object) -> None:
        received[message.offset()] += 1  # type: ignore[attr-defined]
        per_consumer[index] += 1
        deliveries.append(
            (time.monotonic() - started, index, message.offset(), message.delivery_count())  # type: ignore[attr-defined]
        )

    try:
        _poll_until(consumers, on_message, lambda: len(received) == total)
        # Implicit acknowledgement: each poll accepted the previous one's records; the last ones are
        # accepted by close.
    finally:
        for consumer in consumers:
            consumer.close()
    assert sorted(received) == list(range(total))
    twice = {offset for offset, count in received.items() if count > 1}
    # On failure, when and to whom each such record came, with its delivery count (2 after a lock expiry).
    assert not twice, f"delivered twice: {[d for d in deliveries if d[2] in twice][:20]}"
    assert sorted(per_consumer) == [0, 1, 2, 3, 4], f"every consumer receives records: {per_consumer}"


def test_release_redelivers_reject_never_and_the_delivery_count_limit_archives(node: RunningNode) -> None:
    topic, group = "share-acks", "sg-acks"
    _setup(node, topic, group, 3)  # r0 released, r1 rejected, r2 released until archived
    explicit = {"share.acknowledgement.mode": "explicit", "max.poll.records": "10"}
    a, b = _consumer(node, group, topic, **explicit), _consumer(node, group, topic, **explicit)
    deliveries: list[tuple[str, int, str]] = []  # (consumer, delivery count, value)

    def acknowledging(names: str, consumers: tuple[ShareConsumer, ...]) -> Callable[[int, object], None]:
        def on_message(index: int, message: object) -> None:
            value = message.value().decode()  # type: ignore[attr-defined]
            count = message.delivery_count()  # type: ignore[attr-defined]
            deliveries.append((names[index], count, value))
            if value == "end":
                kind = AcknowledgeType.ACCEPT
            elif count == 1:
                kind = AcknowledgeType.RELEASE
            else:
                kind = {"r0": AcknowledgeType.ACCEPT, "r1": AcknowledgeType.REJECT}.get(
                    value, AcknowledgeType.RELEASE
                )
            consumers[index].acknowledge(message, kind)
            consumers[index].commit_sync()

        return on_message

    try:
        # a takes everything first and releases it all.
        _poll_until([a], acknowledging("a", (a,)), lambda: len(deliveries) == 3)
        assert sorted(d[2] for d in deliveries) == ["r0", "r1", "r2"] and {d[1] for d in deliveries} == {1}
        # b gets them again with delivery count 2: accepts r0, rejects r1, releases r2.
        _poll_until([b], acknowledging("b", (b,)), lambda: len(deliveries) == 6)
        assert sorted(deliveries[3:]) == [("b", 2, "r0"), ("b", 2, "r1"), ("b", 2, "r2")]
        # r2 comes back once more (delivery 3 = the limit); released again it is archived. A record
        # produced after it shows the end: r0 (accepted), r1 (rejected) and r2 never come back.
        _poll_until([a, b], acknowledging("ab", (a, b)), lambda: any(d[1] == 3 for d in deliveries))
        _produce(node, topic, ["end"])
        _poll_until([a, b], acknowledging("ab", (a, b)), lambda: deliveries[-1][2] == "end")
    finally:
        a.close()
        b.close()
    by_value = Counter(d[2] for d in deliveries)
    assert by_value == {"r0": 2, "r1": 2, "r2": DELIVERY_COUNT_LIMIT, "end": 1}, deliveries
    assert [d[1] for d in deliveries if d[2] == "r2"] == [1, 2, 3]


CONSUMER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    got = 0
    while got == 0:
        got = len(c.poll(0.5))
    print(got, flush=True)
    time.sleep(600)
    """
)


def test_records_of_a_consumer_killed_are_released_when_its_connection_closes(node: RunningNode) -> None:
    """As Kafka 4.1+ (ShareSessionCache's ClientConnectionDisconnectListener): the killed consumer's share
    session ends with its connection and its records go to another member at once, not after their
    locks (60 s for this group, longer than LIMIT_S) expire."""
    topic, group, total = "share-kill", "sg-kill", 20
    _setup(node, topic, group, total, record_lock_duration_ms=60_000)
    holder = subprocess.Popen(
        [sys.executable, "-c", CONSUMER_SCRIPT, node.bootstrap_servers, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline())
        assert held == total  # it acquired everything and acknowledges nothing
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    other = _consumer(node, group, topic)
    counts: dict[int, int] = {}
    try:
        _poll_until(
            [other],
            lambda _, m: counts.__setitem__(m.offset(), m.delivery_count()),  # type: ignore[attr-defined]
            lambda: len(counts) == total,
        )
    finally:
        other.close()
    assert set(counts.values()) == {2}, "redelivered once the killed consumer's connection closed"


def test_share_auto_offset_reset_latest_skips_what_came_before(node: RunningNode) -> None:
    topic, group = "share-latest", "sg-latest"
    _setup(node, topic, group, 5, reset=None)  # Kafka's default: latest
    consumer = _consumer(node, group, topic)
    seen: list[str] = []
    try:
        # The share partition starts at the high watermark on the first fetch; records produced after it
        # are delivered. Produce until the consumer sees one (its first fetch may come after a few).
        deadline = time.monotonic() + LIMIT_S
        n = 0
        while not seen:
            assert time.monotonic() < deadline
            _produce(node, topic, [f"late{n}"])
            n += 1
            seen += [m.value().decode() for m in consumer.poll(0.5)]
    finally:
        consumer.close()
    assert all(v.startswith("late") for v in seen), seen


def test_share_groups_tool_lists_describes_and_deletes(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group = "share-tool", "sg-tool"
    _setup(node, topic, group, 4)
    consumers = [_consumer(node, group, topic) for _ in range(2)]
    got: list[int] = []
    tool = ["share-groups", "--bootstrap-server", node.bootstrap_servers]
    try:
        _poll_until(consumers, lambda _, m: got.append(m.offset()), lambda: len(got) == 4)  # type: ignore[attr-defined]
        capsys.readouterr()
        assert main([*tool, "--list"]) == 0
        assert group in capsys.readouterr().out.split()
        assert main([*tool, "--describe", "--group", group, "--members"]) == 0
        lines = capsys.readouterr().out.strip().splitlines()
        assert lines[0].split()[:4] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        assert len(lines) == 3 and all(f"{topic}:0" in line for line in lines[1:])  # both get partition 0
        assert main([*tool, "--describe", "--group", group, "--state"]) == 0
        (row,) = capsys.readouterr().out.strip().splitlines()[1:]
        assert row.split()[0] == group and row.split()[-2:] == ["Stable", "2"]
        assert main([*tool, "--delete", "--group", group]) == 1
        assert "NON_EMPTY_GROUP" in capsys.readouterr().err
        for consumer in consumers:
            consumer.commit_sync()  # every record accepted: the share-partition start offset is 4
    finally:
        for consumer in consumers:
            consumer.close()
    # Both left: the group is empty and may go.
    assert main([*tool, "--list", "--state"]) == 0
    assert [group, "Empty"] in [line.split() for line in capsys.readouterr().out.splitlines()]
    assert main([*tool, "--delete", "--group", group]) == 0
    assert main([*tool, "--describe", "--group", group]) == 1
    assert "does not exist" in capsys.readouterr().err
    # Its share state went with it: a new group of that id starts over (share.auto.offset.reset earliest).
    again = _consumer(node, group, topic)
    redelivered: list[int] = []
    try:
        _poll_until([again], lambda _, m: redelivered.append(m.offset()), lambda: len(set(redelivered)) == 4)  # type: ignore[attr-defined]
    finally:
        again.close()
    # consumer-groups does not list share groups.
    assert main(["consumer-groups", "--bootstrap-server", node.bootstrap_servers, "--list"]) == 0
    assert "sg-five" not in capsys.readouterr().out


def test_share_groups_tool_describes_offsets_and_resets_them(
    node: RunningNode, capsys: pytest.CaptureFixture[str]
) -> None:
    topic, group, total = "share-reset", "sg-reset", 10
    _setup(node, topic, group, total)
    tool = ["share-groups", "--bootstrap-server", node.bootstrap_servers]

    def receive_all() -> list[int]:
        consumer = _consumer(node, group, topic)
        got: list[int] = []
        try:
            _poll_until([consumer], lambda _, m: got.append(m.offset()), lambda: len(set(got)) == total)  # type: ignore[attr-defined]
            consumer.commit_sync()  # implicit mode: accepts the last poll's records (close releases them)
        finally:
            consumer.close()
        return got

    assert sorted(set(receive_all())) == list(range(total))
    capsys.readouterr()

    def offsets_row() -> list[str]:
        assert main([*tool, "--describe", "--group", group]) == 0
        lines = capsys.readouterr().out.strip().splitlines()
        assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]
        (row,) = lines[1:]
        return row.split()

    # Everything accepted: the share-partition start offset is at the log end, no lag.
    assert offsets_row()[4:] == [str(total), "0"]
    # A dry run plans without setting anything.
    assert main([*tool, "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "4"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[1].split() == [group, topic, "0", "4"]
    assert offsets_row()[4:] == [str(total), "0"]
    assert (
        main([*tool, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"])
        == 0
    )
    capsys.readouterr()
    assert offsets_row()[4:] == ["0", str(total)]
    # A new member of the group gets every record again, from the start.
    assert sorted(set(receive_all())) == list(range(total))
    # Deleting the group's offsets in the topic: nothing described, and it starts over from
    # share.auto.offset.reset (earliest) when fetched again.
    assert main([*tool, "--delete-offsets", "--group", group, "--topic", topic]) == 0
    assert capsys.readouterr().out.strip().splitlines()[1].split() == [topic, "Successful"]
    assert main([*tool, "--describe", "--group", group]) == 0
    assert capsys.readouterr().out.strip().splitlines()[1:] == []
    assert sorted(set(receive_all())) == list(range(total))
    # A group with members is not reset.
    member = _consumer(node, group, topic)
    try:
        _produce(node, topic, ["more"])
        _poll_until(
            [member],
            lambda _, m: None,
            lambda: bool(main([*tool, "--list", "--state"]) == 0 and "Stable" in capsys.readouterr().out),
        )
        assert (
            main([*tool, "--reset-offsets", "--group", group, "--all-topics", "--to-latest", "--execute"])
            == 1
        )
        assert "is not empty" in capsys.readouterr().err
    finally:
        member.close()


def test_share_coordinator_initializes_and_summarizes_share_partition_state(node: RunningNode) -> None:
    """InitializeShareGroupState (83) and ReadShareGroupStateSummary (87), raw, at the node's share
    coordinator (as the group coordinator calls them): a share partition never written is summarized with
    start offset -1, initializing starts it at a state epoch and offset, an older state epoch is fenced,
    and the group's consumer then starts where it was initialized."""
    topic, group, total = "share-init", "sg-init", 10
    _setup(node, topic, group, total)
    admin = AdminClient({"bootstrap.servers": node.bootstrap_servers})
    kafka_id = admin.describe_topics(TopicCollection([topic]))[topic].result().topic_id
    # confluent-kafka's Uuid gives Java's signed halves.
    msb, lsb = kafka_id.get_most_significant_bits() % 2**64, kafka_id.get_least_significant_bits() % 2**64
    topic_id = uuid.UUID(int=msb << 64 | lsb)

    def summary(client: RawClient) -> tuple[int, int, int]:
        data = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
        request = ReadShareGroupStateSummaryRequest(
            group_id=group,
            topics=[data(topic_id=topic_id, partitions=[data.PartitionData(partition=0, leader_epoch=-1)])],
        )
        (result,) = client.request(request, ReadShareGroupStateSummaryResponse, 0).results
        assert result.topic_id == topic_id
        (p,) = result.partitions
        return p.error_code, p.state_epoch, p.start_offset

    def initialize(client: RawClient, state_epoch: int, start_offset: int) -> int:
        data = InitializeShareGroupStateRequest.InitializeStateData
        partition = data.PartitionData(partition=0, state_epoch=state_epoch, start_offset=start_offset)
        request = InitializeShareGroupStateRequest(
            group_id=group, topics=[data(topic_id=topic_id, partitions=[partition])]
        )
        (result,) = client.request(request, InitializeShareGroupStateResponse, 0).results
        (p,) = result.partitions
        return p.error_code

    with RawClient(node.bootstrap_servers) as client:
        assert summary(client) == (ErrorCode.NONE, 0, -1)
        assert initialize(client, 1, 4) == ErrorCode.NONE
        assert summary(client) == (ErrorCode.NONE, 1, 4)
        assert initialize(client, 0, 0) == ErrorCode.FENCED_STATE_EPOCH
    consumer = _consumer(node, group, topic)
    got: list[int] = []
    try:
        _poll_until([consumer], lambda _, m: got.append(m.offset()), lambda: len(got) >= total - 4)  # type: ignore[attr-defined]
    finally:
        consumer.close()
    assert sorted(got) == list(range(4, total))
