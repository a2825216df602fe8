"""Log compaction through a real node (issue 17): cleanup.policy, min.cleanable.dirty.ratio,
min.compaction.lag.ms and delete.retention.ms change what the cleaner does when set at creation, when
altered at runtime and after a restart; keyless records are refused on compacted topics; a kill -9
while the cleaner rewrites segments loses nothing and leaves no stray files; __consumer_offsets is
compacted and stays bounded under a group that commits all the time."""

from __future__ import annotations

import os
import random
import signal
import tempfile
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from pykraft.testing import free_port, node_properties, running_node
from tests.interop.cluster_support import wait_until
from tests.interop.test_restart import _start_server, _stop_server

pytestmark = pytest.mark.slow

FAST_CLEANER = {"log.cleaner.backoff.ms": "100"}
SMALL_SEGMENTS = {"segment.bytes": "16384"}


@pytest.fixture(scope="module")
def node_dir() -> Iterator[str]:
    yield tempfile.mkdtemp(prefix="pykraft-compaction-")


def _create(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={**SMALL_SEGMENTS, **configs})])[topic].result(30)


def _alter(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)


def _update(
    bootstrap: str, topic: str, count: int, keys: int, latest: dict[bytes, bytes | None], seed: int = 0
) -> None:
    """``count`` writes over ``keys`` keys (every 11th a tombstone), acknowledged; ``latest`` follows."""
    rng = random.Random(seed)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "batch.num.messages": 100,
        }
    )
    errors: list[KafkaError] = []
    for i in range(count):
        key = b"key-%d" % rng.randrange(keys)
        value = None if i % 11 == 10 else b"v%d-%d" % (seed, i) + os.urandom(rng.randrange(30))
        producer.produce(topic, value, key=key, on_delivery=lambda err, _m: err and errors.append(err))
        latest[key] = value
    assert producer.flush(30) == 0 and not errors


def _read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                out.append((message.offset(), message.key(), message.value()))
        return out
    finally:
        consumer.close()


def _latest(records: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes | None, bytes | None]:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets keep increasing"
    return {key: value for _, key, value in records}


def _compacted_to(bootstrap: str, topic: str, at_most: int) -> bool:
    """At most ``at_most`` records left. What stays is each key's latest plus the active segment, which
    the cleaner never touches (up to ~450 small records in 16 KiB): thresholds leave room for it."""
    return len(_read_all(bootstrap, topic)) <= at_most


def test_cleanup_policy_compacts_set_at_creation_at_runtime_and_after_a_restart(node_dir: str) -> None:
    created: dict[bytes, bytes | None] = {}
    altered: dict[bytes, bytes | None] = {}
    with running_node(node_dir, overrides=FAST_CLEANER) as node:
        bootstrap = node.bootstrap_servers
        _create(bootstrap, "compacted", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        _update(bootstrap, "compacted", 3000, 30, created)
        wait_until(lambda: _compacted_to(bootstrap, "compacted", 1000), 30, "the cleaner on a compact topic")
        assert _latest(_read_all(bootstrap, "compacted")) == created
        # A keyless record cannot be compacted: refused (INVALID_RECORD), as Kafka's LogValidator does.
        outcome: list[KafkaError | None] = []
        producer = Producer({"bootstrap.servers": bootstrap, "retries": 0})
        producer.produce("compacted", b"no key", on_delivery=lambda err, _m: outcome.append(err))
        producer.flush(30)
        assert outcome[0] is not None and outcome[0].code() == KafkaError.INVALID_RECORD

        # cleanup.policy=delete: nothing is compacted until the policy is altered at runtime.
        _create(bootstrap, "altered", {"min.cleanable.dirty.ratio": "0.01"})
        _update(bootstrap, "altered", 3000, 30, altered)
        time.sleep(0.5)  # five cleaner rounds that must leave a delete topic alone
        assert len(_read_all(bootstrap, "altered")) == 3000
        _alter(bootstrap, "altered", {"cleanup.policy": "compact"})
        wait_until(lambda: _compacted_to(bootstrap, "altered", 1000), 30, "the cleaner after the alter")
        assert _latest(_read_all(bootstrap, "altered")) == altered
    with running_node(node_dir, overrides=FAST_CLEANER) as node:
        bootstrap = node.bootstrap_servers
        # After a restart both topics are still compacted: new updates are cleaned too.
        for topic, latest in (("compacted", created), ("altered", altered)):
            assert _latest(_read_all(bootstrap, topic)) == latest
            _update(bootstrap, topic, 3000, 30, latest, seed=1)
            wait_until(
                lambda topic=topic: _compacted_to(bootstrap, topic, 1000), 30, f"{topic} after restart"
            )
            assert _latest(_read_all(bootstrap, topic)) == latest


def test_dirty_ratio_lag_and_delete_retention_steer_the_cleaner(node_dir: str) -> None:
    with running_node(node_dir, overrides=FAST_CLEANER) as node:
        bootstrap = node.bootstrap_servers
        # min.compaction.lag.ms: an hour keeps every record; altered to 0 the cleaner runs.
        lagged: dict[bytes, bytes | None] = {}
        _create(
            bootstrap,
            "lagged",
            {
                "cleanup.policy": "compact",
                "min.cleanable.dirty.ratio": "0.01",
                "min.compaction.lag.ms": "3600000",
            },
        )
        _update(bootstrap, "lagged", 2000, 20, lagged)
        time.sleep(0.5)
        assert len(_read_all(bootstrap, "lagged")) == 2000
        _alter(bootstrap, "lagged", {"min.compaction.lag.ms": "0"})
        wait_until(lambda: _compacted_to(bootstrap, "lagged", 1000), 30, "the cleaner once the lag is 0")

        # min.cleanable.dirty.ratio: once cleaned, a little new data is not worth a pass at 0.99; at
        # 0.01 it is.
        # (Compacted only once all 2,000 are written: a pass while they arrive would leave a clean
        # section that the rest, at 0.99, might never outweigh.)
        ratio: dict[bytes, bytes | None] = {}
        _create(bootstrap, "ratio", {"min.cleanable.dirty.ratio": "0.99"})
        _update(bootstrap, "ratio", 2000, 20, ratio)
        _alter(bootstrap, "ratio", {"cleanup.policy": "compact"})
        wait_until(lambda: _compacted_to(bootstrap, "ratio", 1000), 30, "the first pass (all dirty)")
        _update(bootstrap, "ratio", 1500, 20, ratio, seed=2)
        time.sleep(0.5)
        before = len(_read_all(bootstrap, "ratio"))
        assert before > 1400, "dirty ratio below 0.99: no pass"
        _alter(bootstrap, "ratio", {"min.cleanable.dirty.ratio": "0.01"})
        wait_until(lambda: _compacted_to(bootstrap, "ratio", before - 1000), 30, "a pass at ratio 0.01")
        assert _latest(_read_all(bootstrap, "ratio")) == ratio

        # delete.retention.ms: 0 lets tombstones go at the next pass; a day keeps them.
        deleted = [b"key-%d" % k for k in range(5)]
        for topic, retention_ms in (("tombstones-go", "0"), ("tombstones-stay", "86400000")):
            _create(
                bootstrap,
                topic,
                {
                    "cleanup.policy": "compact",
                    "min.cleanable.dirty.ratio": "0.01",
                    "delete.retention.ms": retention_ms,
                },
            )
            _delete_and_push(bootstrap, topic, deleted, "before")
        wait_until(lambda: not set(deleted) & set(_keys(bootstrap, "tombstones-go")), 30, "tombstones gone")
        wait_until(lambda: len(_read_all(bootstrap, "tombstones-stay")) == 1005, 30, "a pass over the other")
        assert {key: _keys(bootstrap, "tombstones-stay")[key] for key in deleted} == dict.fromkeys(deleted)
        # A lag of an hour set now must still hold after the restart.
        _create(
            bootstrap,
            "lag-restart",
            {
                "cleanup.policy": "compact",
                "min.cleanable.dirty.ratio": "0.01",
                "min.compaction.lag.ms": "3600000",
            },
        )
        _update(bootstrap, "lag-restart", 2000, 20, {})
    with running_node(node_dir, overrides=FAST_CLEANER) as node:
        bootstrap = node.bootstrap_servers
        # After a restart each config still steers the cleaner: ratio 0.01 cleans a little new data...
        _update(bootstrap, "ratio", 1500, 20, ratio, seed=3)
        wait_until(lambda: _compacted_to(bootstrap, "ratio", 1000), 30, "ratio 0.01 after the restart")
        assert _latest(_read_all(bootstrap, "ratio")) == ratio
        # ... the hour of lag keeps every record ...
        time.sleep(0.5)
        assert len(_read_all(bootstrap, "lag-restart")) == 2000
        # ... and delete.retention.ms=0 lets new tombstones go, while a day keeps them.
        more = [b"key-%d" % k for k in range(5, 10)]
        _delete_and_push(bootstrap, "tombstones-go", more, "after")
        wait_until(lambda: not set(more) & set(_keys(bootstrap, "tombstones-go")), 30, "new tombstones gone")
        # Altered at runtime to 0: tombstones cleaned from now on go; the old ones keep the delete horizon
        # their batch was stamped with when first cleaned (KIP-534), a day from then.
        _alter(bootstrap, "tombstones-stay", {"delete.retention.ms": "0"})
        _delete_and_push(bootstrap, "tombstones-stay", more, "after")
        wait_until(
            lambda: not set(more) & set(_keys(bootstrap, "tombstones-stay")), 30, "tombstones after the alter"
        )
        assert {key: _keys(bootstrap, "tombstones-stay")[key] for key in deleted} == dict.fromkeys(deleted)


def _keys(bootstrap: str, topic: str) -> dict[bytes | None, bytes | None]:
    return _latest(_read_all(bootstrap, topic))


def _delete_and_push(bootstrap: str, topic: str, deleted: list[bytes], tag: str) -> None:
    """Write then delete each key, then 1,000 writes of other keys push those tombstones out of the
    active segment (the cleaner never touches it)."""
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 100})
    for key in deleted:
        producer.produce(topic, b"alive", key=key)
        producer.produce(topic, None, key=key)
    for i in range(1000):
        producer.produce(topic, b"filler" * 5, key=b"filler-%s-%d" % (tag.encode(), i))
    assert producer.flush(30) == 0


def test_kill_9_while_the_cleaner_rewrites_loses_nothing_and_leaves_no_stray_files(tmp_path) -> None:
    port = free_port()
    data_dir = tmp_path / "data"
    base = node_properties(str(data_dir), port, free_port())
    cleaning = tmp_path / "cleaning.properties"
    cleaning.write_text(base + "log.cleaner.backoff.ms=20\n")
    # Restarted with the cleaner off, what recovery left is all there is to see.
    idle = tmp_path / "idle.properties"
    idle.write_text(base + "log.cleaner.enable=false\n")
    bootstrap = f"127.0.0.1:{port}"
    latest: dict[bytes, bytes | None] = {}
    proc = _start_server(str(cleaning), port)
    try:
        _create(bootstrap, "big", {"segment.bytes": "262144", "cleanup.policy": "delete"})
        _update(bootstrap, "big", 60000, 2000, latest)
        partition_dir = data_dir / "big-0"
        rng = random.Random(7)
        for round_ in range(3):
            # Turn the cleaner on and kill the node while it rewrites the 60k records.
            if round_ == 0:
                _alter(bootstrap, "big", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
            time.sleep(rng.uniform(0.05, 0.4))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            proc = _start_server(str(idle), port)
            wait_until(lambda: _read_all(bootstrap, "big") != [], 30, "the topic back")
            names = os.listdir(partition_dir)
            assert not [n for n in names if n.endswith((".cleaned", ".swap")) or n == "cleaner-swap"], names
            assert _latest(_read_all(bootstrap, "big")) == latest, f"round {round_}"
            _stop_server(proc)
            proc = _start_server(str(cleaning), port)
            _update(bootstrap, "big", 5000, 2000, latest, seed=round_ + 1)
        wait_until(lambda: _compacted_to(bootstrap, "big", 10000), 60, "the cleaner done")
        assert _latest(_read_all(bootstrap, "big")) == latest
    finally:
        _stop_server(proc)


def test_consumer_offsets_is_compacted_and_stays_bounded_under_constant_commits() -> None:
    overrides = {**FAST_CLEANER, "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "20000"}
    with running_node(overrides=overrides) as node:
        bootstrap = node.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("work", 3, 1)])["work"].result(30)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "busy", "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("work", p, 0) for p in range(3)])
            consumer.commit(offsets=[TopicPartition("work", p, 0) for p in range(3)], asynchronous=False)
            # Created on first use, compacted, as Kafka creates it.
            resource = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets")
            configs = admin.describe_configs([resource])[resource].result(30)
            assert configs["cleanup.policy"].value == "compact"
            assert configs["segment.bytes"].value == "20000"
            partition_dir = os.path.join(node.data_dir, "__consumer_offsets-0")

            def size() -> int:
                return sum(
                    os.path.getsize(os.path.join(partition_dir, n))
                    for n in os.listdir(partition_dir)
                    if n.endswith(".log")
                )

            sizes = []
            # A group committing 3 partitions every 10 ms for a minute (6,000 commits, paced by the
            # clock: a commit that took longer is not made up for by a burst).
            started = time.monotonic()
            for i in range(6000):
                consumer.commit(
                    offsets=[TopicPartition("work", p, i + 1) for p in range(3)], asynchronous=False
                )
                if i % 500 == 499:
                    sizes.append(size())
                time.sleep(max(0.0, started + (i + 1) * 0.010 - time.monotonic()))
            committed = consumer.committed([TopicPartition("work", p) for p in range(3)], timeout=10)
            assert [tp.offset for tp in committed] == [6000] * 3
        finally:
            consumer.close()
        # Uncompacted, 6,000 commits are ~1.3 MB; compacted the partition stays within a few segments
        # (measured: at most 21 kB).
        assert max(sizes) < 200_000, sizes
        assert sizes[-1] < 200_000
