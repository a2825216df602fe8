"""KIP-848 consumer groups with a real client (issue 19): confluent-kafka consumers with
``group.protocol=consumer`` (ConsumerGroupHeartbeat, server-side assignment) share a topic 2/2/2,
commit, hand a leaver's partitions over at its commits, let a fourth member in incrementally (nobody
loses a partition it keeps), and resume at the commits after a broker restart. A fleet of classic
consumers upgrades to the consumer protocol one member at a time and back (issue 27: online migration)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from pykraft.cli import main
from pykraft.testing import running_node

pytestmark = pytest.mark.slow

OVERRIDES = {
    "offsets.topic.num.partitions": "5",
    # Members learn of rebalances at their next heartbeat: a short interval keeps the test short.
    "group.consumer.heartbeat.interval.ms": "300",
}
TOPIC, GROUP = "kip848", "kip848-group"
PER_PARTITION = 50
COMMITTED = 30


class Member:
    """A consumer and the partitions its on_assign/on_revoke callbacks say it owns."""

    def __init__(
        self,
        bootstrap: str,
        group: str = GROUP,
        topics: tuple[str, ...] = (TOPIC,),
        instance_id: str | None = None,
        protocol: str = "consumer",
    ) -> None:
        self.owned: set[int] = set()
        self.revoked: list[set[int]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": protocol,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **({"group.instance.id": instance_id} if instance_id else {}),
                # A classic member learns of a rebalance at its next heartbeat (default 3 s).
                **({"heartbeat.interval.ms": 500} if protocol == "classic" else {}),
            }
        )
        self.consumer.subscribe(list(topics), on_assign=self._assigned, on_revoke=self._revoked)

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned |= {tp.partition for tp in partitions}

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {tp.partition for tp in partitions}
        self.revoked.append(gone)
        self.owned -= gone


def _poll_until(
    members: list[Member], done: Callable[[], bool], on_message: Callable[..., None], limit_s: float
) -> None:
    deadline = time.monotonic() + limit_s
    while not done():
        assert time.monotonic() < deadline, [m.owned for m in members]
        for m in members:
            msg = m.consumer.poll(0.02)
            if msg is not None and not msg.error():
                on_message(m, msg)


def test_consumer_protocol_shares_hands_over_adds_incrementally_and_resumes(tmp_path, capsys) -> None:
    data_dir = str(tmp_path / "data")
    with running_node(data_dir, overrides=OVERRIDES) as node:
        bootstrap = node.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for fut in admin.create_topics([NewTopic(TOPIC, num_partitions=6)]).values():
            fut.result(timeout=30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for p in range(6):
            for i in range(PER_PARTITION):
                producer.produce(TOPIC, value=b"%d-%d" % (p, i), partition=p)
        assert producer.flush(30) == 0

        members = [Member(bootstrap) for _ in range(3)]
        seen: dict[int, list[int]] = {p: [] for p in range(6)}

        def consume(m: Member, msg) -> None:  # type: ignore[no-untyped-def]
            seen[msg.partition()].append(msg.offset())
            if msg.offset() < COMMITTED:
                m.consumer.commit(message=msg, asynchronous=False)

        _poll_until(
            members,
            lambda: (
                sum(len(set(v)) for v in seen.values()) == 6 * PER_PARTITION
                and sorted(len(m.owned) for m in members) == [2, 2, 2]
            ),
            consume,
            20,
        )
        assert set().union(*(m.owned for m in members)) == set(range(6))
        for offsets in seen.values():
            assert sorted(set(offsets)) == list(range(PER_PARTITION))
            # A partition moves only once its committed records are past: none is delivered twice.
            assert all(o >= COMMITTED for o in set(offsets) if offsets.count(o) > 1)

        # A member leaves (ConsumerGroupHeartbeat with epoch -1): the others take over at its commits.
        leaving = members.pop()
        handed_over = set(leaving.owned)
        leaving.consumer.close()
        first: dict[int, int] = {}

        def after_leave(m: Member, msg) -> None:  # type: ignore[no-untyped-def]
            if msg.partition() in handed_over:
                first.setdefault(msg.partition(), msg.offset())

        _poll_until(members, lambda: len(first) == len(handed_over), after_leave, 15)
        assert first == dict.fromkeys(handed_over, COMMITTED)
        assert sorted(len(m.owned) for m in members) == [3, 3]

        # A fourth consumer joins the two: partitions move without anyone losing one it keeps.
        before = [set(m.owned) for m in members]
        for m in members:
            m.revoked.clear()
        members.append(Member(bootstrap))
        _poll_until(
            members, lambda: sorted(len(m.owned) for m in members) == [2, 2, 2], lambda m, msg: None, 15
        )
        for m, had in zip(members[:2], before, strict=True):
            kept = had & m.owned
            assert len(kept) == 2
            assert not any(kept & gone for gone in m.revoked), "a kept partition was revoked and given back"
        assert set().union(*(m.owned for m in members)) == set(range(6))

        # The tools show the epochs and target assignments (ConsumerGroupDescribe).
        deadline = time.monotonic() + 10
        while True:  # the group is Stable once every member's heartbeat confirmed the last epoch
            for m in members:
                m.consumer.poll(0.02)
            assert main(["groups", "--bootstrap-server", bootstrap, "describe", GROUP]) == 0
            out = capsys.readouterr().out
            if "STATE Stable" in out or time.monotonic() > deadline:
                break
        epochs = re.search(r"TYPE consumer  GROUP-EPOCH (\d+)  ASSIGNMENT-EPOCH (\d+)", out)
        assert "STATE Stable" in out and epochs is not None and epochs[1] == epochs[2], out
        # Three joins, one leave, one join: at least five epochs; every member is at the last one.
        assert int(epochs[1]) >= 5
        assert out.count(f"\t{epochs[1]}\t{TOPIC}-") == 3, out
        args = ["consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", GROUP]
        assert main([*args, "--members", "--verbose"]) == 0
        assert "TARGET-ASSIGNMENT" in capsys.readouterr().out
        listed = admin.list_consumer_groups().result(timeout=10)
        kinds = {g.group_id: g.type.name for g in listed.valid}
        assert kinds[GROUP] == "CONSUMER"
        committed = members[0].consumer.committed([TopicPartition(TOPIC, p) for p in range(6)], timeout=10)
        assert [tp.offset for tp in committed] == [COMMITTED] * 6
        for m in members:
            m.consumer.close()

    # The group's records and its offsets survive a restart: a new member resumes at the commits.
    with running_node(data_dir, overrides=OVERRIDES) as node:
        member = Member(node.bootstrap_servers)
        resumed: dict[int, list[int]] = {p: [] for p in range(6)}
        _poll_until(
            [member],
            lambda: sum(len(v) for v in resumed.values()) == 6 * (PER_PARTITION - COMMITTED),
            lambda m, msg: resumed[msg.partition()].append(msg.offset()),
            20,
        )
        member.consumer.close()
        assert resumed == {p: list(range(COMMITTED, PER_PARTITION)) for p in range(6)}


def test_regex_subscription_and_new_partitions_rebalance_on_the_server() -> None:
    # KIP-848 resolves regexes on the coordinator (librdkafka sends SubscribedTopicRegex) and rebalances
    # when a matching topic appears or a subscribed topic grows.
    with running_node(overrides=OVERRIDES) as node:
        bootstrap = node.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})

        def create(name: str, partitions: int) -> None:
            for fut in admin.create_topics([NewTopic(name, num_partitions=partitions)]).values():
                fut.result(timeout=30)

        create("orders-1", 2)
        create("other", 2)
        member = Member(bootstrap, group="regex-group", topics=("^orders-.*",))

        def owns(expected: set[tuple[str, int]]) -> Callable[[], bool]:
            return lambda: {(tp.topic, tp.partition) for tp in member.consumer.assignment()} == expected

        _poll_until([member], owns({("orders-1", 0), ("orders-1", 1)}), lambda m, msg: None, 10)
        create("orders-2", 1)
        _poll_until(
            [member], owns({("orders-1", 0), ("orders-1", 1), ("orders-2", 0)}), lambda m, msg: None, 10
        )
        for fut in admin.create_partitions([NewPartitions("orders-1", 3)]).values():
            fut.result(timeout=30)
        grown = {("orders-1", 0), ("orders-1", 1), ("orders-1", 2), ("orders-2", 0)}
        _poll_until([member], owns(grown), lambda m, msg: None, 10)
        member.consumer.close()


def _first_error(joining: Consumer, member: Consumer) -> KafkaError:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        msg = joining.poll(0.05)
        member.poll(0)
        if msg is not None and msg.error():
            return msg.error()
    raise AssertionError("the joining consumer saw no error")


def test_with_the_migration_disabled_a_consumer_member_may_not_join_a_classic_group() -> None:
    # group.consumer.migration.policy=disabled: the classic group keeps its id (GROUP_ID_NOT_FOUND, which
    # librdkafka treats as fatal) and its members keep their partitions.
    overrides = {
        **OVERRIDES,
        "group.initial.rebalance.delay.ms": "0",
        "group.consumer.migration.policy": "disabled",
    }
    with running_node(overrides=overrides) as node:
        bootstrap = node.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for fut in admin.create_topics([NewTopic("mixed", num_partitions=2)]).values():
            fut.result(timeout=30)
        member = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "old-group", "group.protocol": "classic"}
        )
        member.subscribe(["mixed"])
        deadline = time.monotonic() + 10
        while len(member.assignment()) < 2:
            assert time.monotonic() < deadline
            member.poll(0.05)
        joining = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "old-group", "group.protocol": "consumer"}
        )
        joining.subscribe(["mixed"])
        error = _first_error(joining, member)
        assert "group id does not exist" in error.str(), error  # GROUP_ID_NOT_FOUND, fatal
        assert len(member.assignment()) == 2
        for c in (member, joining):
            c.close()


def test_a_rolling_upgrade_to_the_consumer_protocol_and_back_loses_no_record() -> None:
    # KIP-848 online migration (group.consumer.migration.policy=bidirectional, Kafka 4's default): three
    # classic consumers are replaced one at a time by consumer-protocol ones, then back. The first new
    # member converts the classic group to a consumer group whose classic members keep speaking
    # JoinGroup/SyncGroup/Heartbeat; the last one leaving converts it back. Records keep flowing: each is
    # delivered, and none is delivered again once its offset was committed.
    with running_node(overrides={**OVERRIDES, "group.initial.rebalance.delay.ms": "0"}) as node:
        bootstrap = node.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic, group = "rolling", "rolling-group"
        for fut in admin.create_topics([NewTopic(topic, num_partitions=6)]).values():
            fut.result(timeout=30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        produced: set[tuple[int, int]] = set()
        delivered: set[tuple[int, int]] = set()
        committed: dict[int, int] = {}  # partition -> the offset its last successful commit stored

        def produce(per_partition: int) -> None:
            def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
                assert err is None, err
                produced.add((msg.partition(), msg.offset()))

            for p in range(6):
                for i in range(per_partition):
                    producer.produce(topic, value=b"%d" % i, partition=p, on_delivery=on_delivery)
            assert producer.flush(30) == 0

        def consume(m: Member, msg) -> None:  # type: ignore[no-untyped-def]
            p, offset = msg.partition(), msg.offset()
            assert offset >= committed.get(p, 0), f"{topic}-{p} offset {offset} read again past its commit"
            delivered.add((p, offset))
            try:
                (result,) = m.consumer.commit(message=msg, asynchronous=False)
            except KafkaException:
                return  # refused (a rebalance moved on): the record may be read again, its commit is not made
            if result.error is None:
                committed[p] = max(committed.get(p, 0), offset + 1)

        def group_type() -> str:
            listed = admin.list_consumer_groups().result(timeout=10)
            return next(g.type.name for g in listed.valid if g.group_id == group)

        members = [Member(bootstrap, group, (topic,), protocol="classic") for _ in range(3)]
        produce(20)
        _poll_until(members, lambda: delivered >= produced, consume, 30)
        assert group_type() == "CLASSIC"
        types = []
        for protocol in ("consumer", "consumer", "consumer", "classic", "classic", "classic"):
            members.pop(0).consumer.close()
            members.append(Member(bootstrap, group, (topic,), protocol=protocol))
            produce(20)
            # Every member (whatever its protocol) gets its share: nobody was refused or fenced.
            _poll_until(
                members,
                lambda: delivered >= produced and sorted(len(m.owned) for m in members) == [2, 2, 2],
                consume,
                30,
            )
            assert set().union(*(m.owned for m in members)) == set(range(6))
            types.append(group_type())
        # The first consumer-protocol member converted the group; the last one's leave converted it back.
        assert types == ["CONSUMER"] * 5 + ["CLASSIC"]
        assert delivered == produced and len(produced) == 6 * 20 * 7
        for m in members:
            m.consumer.close()


def test_a_static_member_comes_back_to_its_partitions_without_a_rebalance() -> None:
    # KIP-848 static membership: closing sends the -2 epoch (a temporary leave), so the partitions wait
    # for the same group.instance.id instead of moving to the others.
    with running_node(overrides=OVERRIDES) as node:
        bootstrap = node.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for fut in admin.create_topics([NewTopic("static", num_partitions=4)]).values():
            fut.result(timeout=30)
        first = Member(bootstrap, group="static-group", topics=("static",), instance_id="instance-a")
        other = Member(bootstrap, group="static-group", topics=("static",), instance_id="instance-b")
        _poll_until(
            [first, other], lambda: [len(first.owned), len(other.owned)] == [2, 2], lambda m, msg: None, 10
        )
        theirs, kept = set(first.owned), set(other.owned)
        other.revoked.clear()
        first.consumer.close()
        again = Member(bootstrap, group="static-group", topics=("static",), instance_id="instance-a")
        _poll_until([again, other], lambda: again.owned == theirs, lambda m, msg: None, 10)
        assert other.owned == kept and not other.revoked
        for m in (again, other):
            m.consumer.close()
