"""The campaign's clients, each a thread with its own confluent-kafka client, recording every
operation into the shared :class:`History`:

- ``IdempotentProducer``: acks=all, idempotent, unique values (optionally keyed, for the compacted topic);
- ``Acks1Producer``: acks=1 on its own topic (Kafka may lose those under leader failover, so the
  checker judges nothing on that topic but the replicas agreeing);
- ``TransactionalProducer``: transactions over several partitions, some committed, some aborted on purpose;
- ``TransformLoop``: read_committed consume -> transform -> produce in a transaction with
  ``send_offsets_to_transaction`` (exactly once: a transformed value twice is a DUPLICATE);
- ``GroupConsumer``: a read_committed member of a classic or KIP-848 group committing synchronously;
- ``OffsetObserver``: OffsetFetch on every broker, for the groups' committed offsets.
"""

from __future__ import annotations

import logging
import os
import random
import re
import threading
import time
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from tests.faults.history import Consumed, EpochBump, History, OffsetCommit, OffsetObservation, Send, Txn


class Workload(threading.Thread):
    def __init__(
        self,
        name: str,
        history: History,
        bootstrap: str,
        started_at: float,
        stop: threading.Event,
        log_dir: str,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.log_dir = log_dir
        self.history = history
        self.bootstrap = bootstrap
        self.started_at = started_at
        self.stop_event = stop
        self.failure: BaseException | None = None

    def config(self, debug: str = "") -> dict[str, Any]:
        """The client's connection, and its log into ``<log_dir>/<name>.client.log``."""
        path = os.path.join(self.log_dir, f"{self.name}.client.log")
        return {"bootstrap.servers": self.bootstrap, **client_logger(self.name, path, debug)}

    def now(self) -> float:
        return time.monotonic() - self.started_at

    def run(self) -> None:
        try:
            self.body()
        except BaseException as exc:  # a harness bug: reported, never hidden
            self.failure = exc

    def body(self) -> None:
        raise NotImplementedError


def client_logger(name: str, path: str, debug: str = "") -> dict[str, Any]:
    """librdkafka's log (with ``debug`` contexts, e.g. "eos": the transaction state machine) into
    ``path`` instead of stderr."""
    logger = logging.getLogger(f"faults.{name}")
    logger.propagate = False
    if not logger.handlers:
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    return {"logger": logger, **({"debug": debug} if debug else {})}


# rd_kafka_idemp_drain_epoch_bump0's debug line (rdkafka_idempotence.c), with its reason.
_EPOCH_BUMP = re.compile(
    r"Beginning partition drain in state \S+ for PID\{Id:(\d+),Epoch:(\d+)\} epoch bump "
    r"for \d+ partition\(s\) with in-flight requests: (.*)$"
)


class _EpochBumps(logging.Handler):
    """Records each epoch bump librdkafka begins into the history (the checker judges duplicates
    across a bump by its reason)."""

    def __init__(self, workload: Workload) -> None:
        super().__init__(logging.DEBUG)
        self.workload = workload

    def emit(self, record: logging.LogRecord) -> None:
        found = _EPOCH_BUMP.search(record.getMessage())
        if found is not None:
            producer_id, producer_epoch, reason = found.groups()
            self.workload.history.add(
                EpochBump(
                    self.workload.name, int(producer_id), int(producer_epoch), reason, self.workload.now()
                )
            )


class IdempotentProducer(Workload):
    def __init__(
        self, *args: Any, topic: str, keys: int = 0, rate_per_s: float = 40.0, acks: str = "all"
    ) -> None:
        super().__init__(*args)
        self.topic = topic
        self.keys = keys
        self.interval_s = 1.0 / rate_per_s
        self.acks = acks
        self._last_offset: dict[int, int] = {}
        self._in_unknown_batch: dict[int, bool] = {}

    def body(self) -> None:
        idempotent = self.acks == "all"
        config = self.config("eos,msg" if idempotent else "")  # epoch bumps, drains, produce errors
        if idempotent:
            config["logger"].addHandler(_EpochBumps(self))
        producer = confluent_kafka.Producer(
            {
                **config,
                "enable.idempotence": idempotent,
                "acks": self.acks,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "error_cb": self._error,
            }
        )
        pending: dict[int, tuple[str, str | None]] = {}
        seq = 0
        while not self.stop_event.is_set():
            value = f"{self.name}-{seq}"
            key = f"k{seq % self.keys}" if self.keys else None
            pending[seq] = (value, key)
            producer.produce(self.topic, value.encode(), key=key.encode() if key else None,
                             on_delivery=self._delivered(seq, value, key, pending))  # fmt: skip
            seq += 1
            producer.poll(self.interval_s)
        producer.flush(30)
        for left, (value, key) in sorted(pending.items()):  # never reported: unknown outcome
            self.history.add(Send(self.name, self.topic, value, left, False, key=key))

    def _delivered(self, seq: int, value: str, key: str | None, pending: dict[int, Any]) -> Any:
        def on_delivery(err: KafkaError | None, message: Any) -> None:
            pending.pop(seq, None)
            if err is None:
                offset = self._offset(message.partition(), message.offset())
                self.history.add(Send(self.name, self.topic, value, seq, True, message.partition(), offset,
                                      key=key, t_ack_s=self.now()))  # fmt: skip
            else:
                self.history.add(Send(self.name, self.topic, value, seq, False, key=key))

        return on_delivery

    def _offset(self, partition: int, offset: int | None) -> int:
        """The acknowledged offset, -1 when unknown. A batch the broker already had, answered (KIP-758)
        with DUPLICATE_SEQUENCE_NUMBER and no offset, is reported by librdkafka at offsets -1, 0, 1, ...
        (-1 plus each record's index): below this producer's last known offset in the partition."""
        last = self._last_offset.get(partition, -1)
        if offset is None or offset < 0 or (offset <= last and self._in_unknown_batch.get(partition, False)):
            self._in_unknown_batch[partition] = True
            return -1
        self._in_unknown_batch[partition] = False
        self._last_offset[partition] = offset
        return offset

    def _error(self, err: KafkaError) -> None:
        if err.fatal():
            self.history.add(
                Txn(f"{self.name}-fatal", self.name, "unknown", self.now(), str(err), fatal=True)
            )


class TransactionalProducer(Workload):
    """Transactions of 2-5 values over the topic's partitions; ``abort_ratio`` of them aborted on purpose."""

    producer_overrides: dict[str, Any] = {}

    def __init__(self, *args: Any, topic: str, partitions: int, seed: int, abort_ratio: float = 0.3) -> None:
        super().__init__(*args)
        self.topic = topic
        self.partitions = partitions
        self.rng = random.Random(seed)
        self.abort_ratio = abort_ratio
        self.seq = 0

    def make_producer(self) -> confluent_kafka.Producer:
        producer = confluent_kafka.Producer(
            {
                **self.config("eos"),
                "transactional.id": self.name,
                "linger.ms": 5,
                "transaction.timeout.ms": 60000,
                **self.producer_overrides,
            }
        )
        self._retry(lambda: producer.init_transactions(30))
        return producer

    def _retry(self, call: Any) -> None:
        while True:
            try:
                call()
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or self.stop_event.is_set():
                    raise
                time.sleep(0.2)

    def body(self) -> None:
        producer = self.make_producer()
        number = 0
        while not self.stop_event.is_set():
            name = f"{self.name}-T{number}"
            number += 1
            outcome, error, fatal = self.one(producer, name)
            self.history.add(Txn(name, self.name, outcome, self.now(), error, fatal))
            if fatal:
                producer = self.make_producer()
            time.sleep(self.rng.uniform(0.0, 0.1))

    def one(self, producer: confluent_kafka.Producer, name: str) -> tuple[str, str, bool]:
        commit = self.rng.random() >= self.abort_ratio
        try:
            producer.begin_transaction()
            for i in range(self.rng.randint(2, 5)):
                value = f"{name}-{i}"
                partition = self.rng.randrange(self.partitions)
                self.history.add(Send(self.name, self.topic, value, self.seq, False, partition, txn=name))
                self.seq += 1
                producer.produce(self.topic, value.encode(), partition=partition)
            return self.finish(producer, commit)
        except KafkaException as exc:
            return self.after_error(producer, exc.args[0])

    def finish(self, producer: confluent_kafka.Producer, commit: bool) -> tuple[str, str, bool]:
        if commit:
            self._retry(lambda: producer.commit_transaction(30))
            return "commit", "", False
        try:
            self._retry(lambda: producer.abort_transaction(30))
        except KafkaException as exc:
            error = exc.args[0]
            return "unknown", f"abort: {error.name()}: {error.str()}", error.fatal()
        return "abort", "", False

    def after_error(self, producer: confluent_kafka.Producer, error: KafkaError) -> tuple[str, str, bool]:
        if error.fatal():
            return "unknown", f"{error.name()}: {error.str()}", True
        if error.txn_requires_abort():
            try:
                self._retry(lambda: producer.abort_transaction(30))
                return "abort", error.name(), False
            except KafkaException as exc:
                inner = exc.args[0]
                return "unknown", f"{error.name()}, then abort: {inner.name()}: {inner.str()}", inner.fatal()
        return "unknown", f"{error.name()}: {error.str()}", False


class TransformLoop(TransactionalProducer):
    """Reads ``source`` in group ``group`` (read_committed), writes ``ctp:<value>`` to ``topic`` in the
    same transaction as the consumed offsets."""

    # send_offsets_to_transaction sends TxnOffsetCommit through librdkafka's coordinator-request state
    # machine, which never checks its own timeout (creq_ts_timeout is unused: librdkafka issues #5456,
    # #5511, open for 2.16): when the cached group coordinator is not up, or was dropped from Metadata
    # while fenced, the call waits (RD_POLL_INFINITE) for some broker connection of this producer to
    # go up or down, and in a healed, quiet cluster none does, so the client never stopped (issue 32).
    # Closing idle connections gives the state machine those transitions: it looks the coordinator up
    # again within seconds. Kafka's Java producer bounds the same call by max.block.ms (KAFKA-10309).
    producer_overrides: dict[str, Any] = {"connections.max.idle.ms": 5000}

    def __init__(self, *args: Any, source: str, group: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.source = source
        self.group = group

    def body(self) -> None:
        consumer = confluent_kafka.Consumer(
            {
                **self.config(),
                "group.id": self.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([self.source])
        producer = self.make_producer()
        number = 0
        try:
            while not self.stop_event.is_set():
                messages = [m for m in consumer.consume(20, 0.5) if m.error() is None]
                if not messages:
                    continue
                name = f"{self.name}-T{number}"
                number += 1
                outcome, error, fatal = self.transform(producer, consumer, name, messages)
                self.history.add(Txn(name, self.name, outcome, self.now(), error, fatal))
                if outcome != "commit":
                    self.rewind(consumer)
                if fatal:
                    producer = self.make_producer()
        finally:
            consumer.close()

    def transform(self, producer: confluent_kafka.Producer, consumer: confluent_kafka.Consumer, name: str,
                  messages: list[Any]) -> tuple[str, str, bool]:  # fmt: skip
        try:
            producer.begin_transaction()
            for message in messages:
                source = message.value().decode()
                value = f"ctp:{source}"
                self.history.add(
                    Send(self.name, self.topic, value, self.seq, False, message.partition(), txn=name,
                         source=source)
                )  # fmt: skip
                self.seq += 1
                producer.produce(self.topic, value.encode(), partition=message.partition())
            positions = consumer.position(consumer.assignment())
            self._retry(
                lambda: producer.send_offsets_to_transaction(
                    positions, consumer.consumer_group_metadata(), 30
                )
            )
            return self.finish(producer, True)
        except KafkaException as exc:
            return self.after_error(producer, exc.args[0])

    def rewind(self, consumer: confluent_kafka.Consumer) -> None:
        """Back to the committed offsets: the aborted transaction's input is read again."""
        try:
            for tp in consumer.committed(consumer.assignment(), 30):
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else -2))
        except KafkaException:
            pass  # a rebalance meanwhile: the new assignment starts from the committed offsets anyway


class GroupConsumer(Workload):
    def __init__(self, *args: Any, topic: str, group: str, protocol: str) -> None:
        super().__init__(*args)
        self.topic = topic
        self.group = group
        self.protocol = protocol

    def body(self) -> None:
        config: dict[str, Any] = {
            **self.config(),
            "group.id": self.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        if self.protocol == "consumer":
            config["group.protocol"] = "consumer"
        consumer = confluent_kafka.Consumer(config)
        consumer.subscribe([self.topic])
        try:
            while not self.stop_event.is_set():
                messages = [m for m in consumer.consume(50, 0.5) if m.error() is None]
                for m in messages:
                    self.history.add(
                        Consumed(self.group, m.topic(), m.partition(), m.offset(), m.value().decode())
                    )
                if messages:
                    self.commit(consumer)
        finally:
            consumer.close()

    def commit(self, consumer: confluent_kafka.Consumer) -> None:
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        sent = self.now()
        try:
            committed = consumer.commit(offsets=positions, asynchronous=False) or []
        except KafkaException:
            for tp in positions:
                self.history.add(
                    OffsetCommit(self.group, tp.topic, tp.partition, tp.offset, False, sent, self.now())
                )
            return
        for tp in committed:
            acked = tp.error is None
            self.history.add(
                OffsetCommit(self.group, tp.topic, tp.partition, tp.offset, acked, sent, self.now())
            )


class OffsetObserver(Workload):
    """Every broker, every half second: OffsetFetch (not require_stable) for each group's partitions.
    A broker that is not the group's coordinator says so and is skipped."""

    def __init__(
        self, *args: Any, brokers: dict[int, str], groups: list[str], topic: str, partitions: int
    ) -> None:
        super().__init__(*args)
        self.brokers = brokers
        self.groups = groups
        self.topic = topic
        self.partitions = partitions

    def body(self) -> None:
        while not self.stop_event.wait(0.5):
            for broker, address in self.brokers.items():
                for group in self.groups:
                    sent = self.now()
                    try:
                        offsets = offset_fetch(address, group, self.topic, self.partitions)
                    except Exception:
                        continue  # down, paused or cut off: nothing observed
                    for partition, offset in offsets.items():
                        self.history.add(
                            OffsetObservation(broker, group, self.topic, partition, offset, sent, self.now())
                        )


def offset_fetch(address: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """OffsetFetch v8 from one broker: partition -> committed offset (-1: none); empty when that broker
    is not the coordinator (or a partition's commit is pending)."""
    from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

    from tests.raw_client import RawClient

    group_cls = OffsetFetchRequest.OffsetFetchRequestGroup
    request = OffsetFetchRequest(
        groups=[
            group_cls(
                group_id=group,
                topics=[
                    group_cls.OffsetFetchRequestTopics(name=topic, partition_indexes=list(range(partitions)))
                ],
            )
        ],
        require_stable=False,
    )
    with RawClient(address, timeout_s=3) as client:
        response = client.request(request, OffsetFetchResponse, 8)
    answer = response.groups[0]
    if answer.error_code != 0:
        return {}
    return {
        p.partition_index: p.committed_offset
        for t in answer.topics
        for p in t.partitions
        if p.error_code == 0
    }
