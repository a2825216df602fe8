"""Transactions end to end with real clients (issue 15): confluent-kafka, kafka-python and aiokafka
transactional producers commit and abort, read_committed consumers of each see exactly the committed
records in order, consume-transform-produce moves a group's offsets atomically, a zombie is fenced,
a hung transaction times out, KIP-890 refuses a write to a partition never added, and a KIP-360 epoch
bump retried across a kill -9 of the coordinator's node gets the same answer."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from pykraft.core.errors import ErrorCode
from pykraft.testing import free_port, node_properties, running_node
from tests.interop.test_restart import _start_server, _stop_server
from tests.raw_client import RawClient

pytestmark = pytest.mark.slow


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, num_partitions=partitions)]).values():
        fut.result(timeout=30)


def confluent_read(bootstrap: str, topic: str, partitions: int, isolation: str, expected: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and not (len(eof) == partitions and len(out) >= expected):
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error():
                    if msg.error().code() == -191:  # _PARTITION_EOF
                        eof.add(msg.partition())
                        continue
                    raise AssertionError(f"consumer error: {msg.error()}")
                out.append(msg.value())
    finally:
        consumer.close()
    return out


def confluent_txn_producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **extra}
    )
    producer.init_transactions(30)
    return producer


def test_confluent_commit_and_abort_with_read_committed_and_uncommitted(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "ck-txn", 2)
    producer = confluent_txn_producer(bootstrap, "ck-1")
    committed: list[bytes] = []
    everything: list[bytes] = []
    for round_ in range(6):
        producer.begin_transaction()
        values = [b"r%d-%03d" % (round_, i) for i in range(50)]
        for i, value in enumerate(values):
            producer.produce("ck-txn", value=value, partition=i % 2)
        everything += values
        if round_ % 3 == 2:
            # Flushed first, so the aborted records are in the log (abort purges what is unsent).
            assert producer.flush(30) == 0
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += values
    got = confluent_read(bootstrap, "ck-txn", 2, "read_committed", len(committed))
    assert sorted(got) == sorted(committed)
    # In order per partition.
    for p in range(2):
        mine = [v for v in got if int(v.split(b"-")[1]) % 2 == p]
        assert mine == [v for v in committed if int(v.split(b"-")[1]) % 2 == p]
    assert sorted(confluent_read(bootstrap, "ck-txn", 2, "read_uncommitted", len(everything))) == sorted(
        everything
    )


def test_confluent_consume_transform_produce_moves_offsets_atomically(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "ctp-in")
    create_topic(bootstrap, "ctp-out")
    seed = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        seed.produce("ctp-in", value=b"in-%02d" % i)
    assert seed.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ctp-group",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["ctp-in"])
    producer = confluent_txn_producer(bootstrap, "ctp-1")
    batches = 0
    seen = 0
    deadline = time.monotonic() + 60
    try:
        while seen < 30 and time.monotonic() < deadline:
            msgs = [m for m in consumer.consume(num_messages=10, timeout=1.0) if not m.error()]
            if not msgs:
                continue
            producer.begin_transaction()
            for m in msgs:
                producer.produce("ctp-out", value=m.value().replace(b"in", b"out"))
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            if batches == 1:
                # An aborted batch: its output is invisible and its offsets are not committed; the
                # consumer rewinds to the committed offsets and processes the messages again.
                producer.abort_transaction(30)
                committed = consumer.committed([TopicPartition("ctp-in", 0)], timeout=10)
                consumer.seek(TopicPartition("ctp-in", 0, committed[0].offset))
            else:
                producer.commit_transaction(30)
                seen += len(msgs)
            batches += 1
        committed = consumer.committed([TopicPartition("ctp-in", 0)], timeout=10)
    finally:
        consumer.close()
    assert seen == 30 and committed[0].offset == 30
    out = confluent_read(bootstrap, "ctp-out", 1, "read_committed", 30)
    assert out == [b"out-%02d" % i for i in range(30)]


def test_confluent_zombie_is_fenced(pykraft_node) -> None:
    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "zombie")
    old = confluent_txn_producer(bootstrap, "zombie-1")
    old.begin_transaction()
    old.produce("zombie", value=b"from-the-zombie")
    old.flush(10)
    new = confluent_txn_producer(bootstrap, "zombie-1")  # fences the old one and aborts its transaction
    new.begin_transaction()
    new.produce("zombie", value=b"from-the-new-one")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as excinfo:
        old.commit_transaction(10)
    assert excinfo.value.args[0].fatal() or "fenced" in str(excinfo.value).lower()
    assert confluent_read(bootstrap, "zombie", 1, "read_committed", 1) == [b"from-the-new-one"]


def test_kafka_python_transactions(pykraft_node) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import TopicPartition as KpTopicPartition

    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "kp-txn")
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-1")
    producer.init_transactions()
    committed: list[bytes] = []
    for round_ in range(4):
        producer.begin_transaction()
        values = [b"kp%d-%02d" % (round_, i) for i in range(20)]
        for value in values:
            producer.send("kp-txn", value=value, partition=0)
        if round_ == 1:
            producer.abort_transaction()
        else:
            producer.commit_transaction()
            committed += values
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    tp = KpTopicPartition("kp-txn", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(committed) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    consumer.close()
    assert got == committed
    # Our own read_committed reader agrees.
    assert confluent_read(bootstrap, "kp-txn", 1, "read_committed", len(committed)) == committed


def test_aiokafka_transactions(pykraft_node) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "aio-txn")

    async def run() -> tuple[list[bytes], list[bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-1")
        await producer.start()
        committed: list[bytes] = []
        try:
            for round_ in range(4):
                values = [b"aio%d-%02d" % (round_, i) for i in range(20)]
                if round_ == 2:
                    await producer.begin_transaction()
                    for value in values:
                        await producer.send("aio-txn", value=value, partition=0)
                    await producer.abort_transaction()
                    continue
                async with producer.transaction():
                    for value in values:
                        await producer.send("aio-txn", value=value, partition=0)
                committed += values
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            tp = AioTopicPartition("aio-txn", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            deadline = time.monotonic() + 30
            while len(got) < len(committed) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [r.value for r in records]
        finally:
            await consumer.stop()
        return committed, got

    committed, got = asyncio.run(run())
    assert got == committed


def test_hung_transaction_times_out_and_is_aborted(tmp_path) -> None:
    overrides = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"}
    with running_node(overrides=overrides) as node:
        bootstrap = node.bootstrap_servers
        create_topic(bootstrap, "hung")
        hung = confluent_txn_producer(bootstrap, "hung-1", **{"transaction.timeout.ms": 1000})
        hung.begin_transaction()
        hung.produce("hung", value=b"never-committed")
        hung.flush(10)
        # A second producer's committed record sits behind the hung transaction until it is aborted.
        other = confluent_txn_producer(bootstrap, "other-1")
        other.begin_transaction()
        other.produce("hung", value=b"committed")
        other.commit_transaction(30)
        assert confluent_read(bootstrap, "hung", 1, "read_committed", 1) == [b"committed"]
        with pytest.raises(KafkaException):
            hung.commit_transaction(10)


def test_transactional_write_to_a_partition_never_added_is_refused(pykraft_node) -> None:
    """KIP-890 part 1: without AddPartitionsToTxn the broker refuses the write."""
    from kafka.protocol.producer import ProduceResponse

    from pykraft.protocol.records import Record, build_batch
    from tests.raw_client import produce_request

    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "unverified")
    with RawClient(bootstrap) as client:
        found = _find_txn_coordinator(client, "raw-1")
        assert found == ErrorCode.NONE
        init = _init(client, "raw-1", -1, -1)
        assert init.error_code == ErrorCode.NONE
        batch = build_batch(
            [Record(None, b"x")],
            timestamp_ms=1000,
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            base_sequence=0,
            is_transactional=True,
        )
        response = client.request(
            produce_request("unverified", bytes(batch), transactional_id="raw-1"), ProduceResponse, 9
        )
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TXN_STATE


def test_transactions_cli_lists_and_describes(pykraft_node, capsys) -> None:
    from pykraft.cli import main

    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "cli-txn")
    producer = confluent_txn_producer(bootstrap, "cli-1")
    producer.begin_transaction()
    producer.produce("cli-txn", value=b"open")
    producer.flush(10)
    assert main(["transactions", "--bootstrap-server", bootstrap, "list"]) == 0
    listing = capsys.readouterr().out
    assert "cli-1" in listing and "Ongoing" in listing
    assert (
        main(["transactions", "--bootstrap-server", bootstrap, "describe", "--transactional-id", "cli-1"])
        == 0
    )
    described = capsys.readouterr().out
    assert "Ongoing" in described and "cli-txn-0" in described
    producer.commit_transaction(30)
    assert main(["transactions", "--bootstrap-server", bootstrap, "list", "--state", "CompleteCommit"]) == 0
    assert "cli-1" in capsys.readouterr().out
    assert (
        main(["transactions", "--bootstrap-server", bootstrap, "describe", "--transactional-id", "nope"]) == 1
    )
    assert "TRANSACTIONAL_ID_NOT_FOUND" in capsys.readouterr().err


# --- KIP-360: a retried bump across a kill -9 ------------------------------------------------------------


def _find_txn_coordinator(client: RawClient, transactional_id: str) -> ErrorCode:
    for _ in range(200):
        found = client.request(
            FindCoordinatorRequest(key_type=1, coordinator_keys=[transactional_id]),
            FindCoordinatorResponse,
            4,
        )
        error = ErrorCode(found.coordinators[0].error_code)
        if error == ErrorCode.NONE:
            return error
        time.sleep(0.05)
    return error


def _init(
    client: RawClient, transactional_id: str, producer_id: int, producer_epoch: int
) -> InitProducerIdResponse:
    """InitProducerId v4, asked again while the coordinator loads or a block arrives (retriable)."""
    for _ in range(200):
        response = client.request(
            InitProducerIdRequest(
                transactional_id=transactional_id,
                transaction_timeout_ms=60000,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
            ),
            InitProducerIdResponse,
            version=4,
        )
        if response.error_code not in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.CONCURRENT_TRANSACTIONS,
        ):
            return response
        time.sleep(0.05)
    return response


def test_a_bump_retried_after_kill_9_gets_the_same_producer_id_and_epoch(tmp_path) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(node_properties(str(tmp_path / "data"), port, free_port()))
    bootstrap = f"127.0.0.1:{port}"
    proc = _start_server(str(config), port)
    try:
        with RawClient(bootstrap) as client:
            assert _find_txn_coordinator(client, "bump-1") == ErrorCode.NONE
            first = _init(client, "bump-1", -1, -1)
            assert first.error_code == ErrorCode.NONE
            bumped = _init(client, "bump-1", first.producer_id, first.producer_epoch)
            assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (
                ErrorCode.NONE,
                first.producer_id,
                first.producer_epoch + 1,
            )
        # The client never saw that answer (say); the coordinator's node dies before it retries.
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc = _start_server(str(config), port)
        with RawClient(bootstrap) as client:
            assert _find_txn_coordinator(client, "bump-1") == ErrorCode.NONE
            retried = _init(client, "bump-1", first.producer_id, first.producer_epoch)
            assert (retried.error_code, retried.producer_id, retried.producer_epoch) == (
                ErrorCode.NONE,
                bumped.producer_id,
                bumped.producer_epoch,
            )
            # A new producer instance bumps again; the old one's retry is fenced now.
            fresh = _init(client, "bump-1", -1, -1)
            assert (fresh.error_code, fresh.producer_epoch) == (ErrorCode.NONE, bumped.producer_epoch + 1)
            assert _init(client, "bump-1", first.producer_id, first.producer_epoch).error_code == (
                ErrorCode.PRODUCER_FENCED
            )
    finally:
        _stop_server(proc)


def test_unknown_partitions_are_not_added_to_a_transaction(pykraft_node) -> None:
    from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

    bootstrap = pykraft_node.bootstrap_servers
    create_topic(bootstrap, "known")
    with RawClient(bootstrap) as client:
        assert _find_txn_coordinator(client, "adder-1") == ErrorCode.NONE
        init = _init(client, "adder-1", -1, -1)
        topic_cls = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        response = client.request(
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id="adder-1",
                v3_and_below_producer_id=init.producer_id,
                v3_and_below_producer_epoch=init.producer_epoch,
                v3_and_below_topics=[
                    topic_cls(name="known", partitions=[0]),
                    topic_cls(name="unknown", partitions=[0]),
                ],
            ),
            AddPartitionsToTxnResponse,
            3,
        )
    errors = {
        (t.name, p.partition_index): p.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert errors == {
        ("known", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        ("unknown", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_an_open_transaction_survives_kill_9_and_the_next_instance_aborts_it(tmp_path) -> None:
    """The coordinator's node dies with a transaction open; after the restart a new producer instance
    fences it, the coordinator aborts it (markers), and read_committed readers see only what the new
    instance commits; the partition's last stable offset reaches its end again."""
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(node_properties(str(tmp_path / "data"), port, free_port()))
    bootstrap = f"127.0.0.1:{port}"
    proc = _start_server(str(config), port)
    try:
        create_topic(bootstrap, "survivor")
        old = confluent_txn_producer(bootstrap, "survivor-1")
        old.begin_transaction()
        for i in range(20):
            old.produce("survivor", value=b"lost-%d" % i, partition=0)
        assert old.flush(30) == 0
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc = _start_server(str(config), port)
        new = confluent_txn_producer(bootstrap, "survivor-1")
        new.begin_transaction()
        new.produce("survivor", value=b"kept", partition=0)
        new.commit_transaction(30)
        assert confluent_read(bootstrap, "survivor", 1, "read_committed", 1) == [b"kept"]
        topic_cls = ListOffsetsRequest.ListOffsetsTopic
        offsets = {}
        with RawClient(bootstrap) as client:
            for isolation in (0, 1):
                response = client.request(
                    ListOffsetsRequest(
                        replica_id=-1,
                        isolation_level=isolation,
                        topics=[
                            topic_cls(
                                name="survivor",
                                partitions=[topic_cls.ListOffsetsPartition(partition_index=0, timestamp=-1)],
                            )
                        ],
                    ),
                    ListOffsetsResponse,
                    4,
                )
                offsets[isolation] = response.topics[0].partitions[0].offset
        # 20 aborted records (0-19), their ABORT marker (20), "kept" (21) and its COMMIT marker (22).
        assert offsets[0] == offsets[1] == 23
    finally:
        _stop_server(proc)
