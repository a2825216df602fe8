"""Stopping a node at random moments while clients keep it busy (issue: clean shutdown hung when a
topic auto-creation was in flight).

Each round restarts one node over the same data, starts clients that auto-create topics, produce with
acks=all, park long-poll fetches, join a group (parked by the initial rebalance delay) and ask for
producer ids (which makes the broker ask the controller for blocks), and stops the node at a moment the
seed picks. Every stop must finish without spending the shutdown budget, and the next start must serve
every record that was acknowledged before.

``SHUTDOWN_STOPS`` sets the number of rounds (CI: 200); ``SEED`` replays one seed's schedule of stop
moments (the clients' thread interleavings are the OS's).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable

import pytest
from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
from kafka.protocol.consumer import FetchResponse, JoinGroupRequest, JoinGroupResponse
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceResponse,
)

from pykraft.io.kafka_connection import BrokerConnectionError
from pykraft.io.node import SHUTDOWN_BUDGET_S
from pykraft.io.waiting import wait_event
from pykraft.protocol.records import Record, build_batch, decode_records
from pykraft.testing import running_node
from tests.raw_client import RawClient, fetch_request, produce_request

ACKED_TOPIC = "acked"
# Offsets topic partitions kept small so creating it is quick; a long initial rebalance delay parks
# every JoinGroup for the whole round.
OVERRIDES = {"offsets.topic.num.partitions": "2", "group.initial.rebalance.delay.ms": "60000"}
STOP_DELAYS_S = (0.0, 0.001, 0.005, 0.02, 0.06)
# Rounds over one data dir before the next starts afresh: every auto-created partition costs each
# later stop a producer-state snapshot, so one dir for all rounds would make the last stops slow.
ROUNDS_PER_DATA_DIR = 20
AUTO_CREATED_TOPICS_PER_ROUND = 3


def _batch(value: bytes) -> bytes:
    return bytes(build_batch([Record(None, value)], timestamp_ms=1000))


def _stops() -> int:
    return int(os.environ.get("SHUTDOWN_STOPS", "200"))


class Load:
    """Client threads against one node until it closes their connections."""

    def __init__(self, bootstrap: str, round_no: int) -> None:
        self.bootstrap = bootstrap
        self.round_no = round_no
        self.acked: dict[int, bytes] = {}
        self.lock = threading.Lock()
        self.auto_created = 0
        self.threads = [
            threading.Thread(target=self._run, args=(fn,), daemon=True)
            for fn in (
                self._auto_create,
                self._acked_producer,
                self._long_poll,
                self._join,
                self._producer_ids,
            )
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=30)
            assert not thread.is_alive(), "a client thread did not see its connection close"

    def _run(self, fn: Callable[[RawClient], None]) -> None:
        try:
            with RawClient(self.bootstrap, timeout_s=20) as client:
                while True:
                    fn(client)
        except (BrokerConnectionError, OSError, EOFError):
            return  # the node stopped

    def _auto_create(self, client: RawClient) -> None:
        self.auto_created += 1
        name = f"auto-{self.round_no}-{self.auto_created % AUTO_CREATED_TOPICS_PER_ROUND}"
        client.request(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=True
            ),
            MetadataResponse,
            9,
        )
        client.request(produce_request(name, _batch(b"x")), ProduceResponse, 9)

    def _acked_producer(self, client: RawClient) -> None:
        value = f"{self.round_no}-{random.getrandbits(48)}".encode()
        resp = client.request(produce_request(ACKED_TOPIC, _batch(value)), ProduceResponse, 9)
        partition = resp.responses[0].partition_responses[0]
        if partition.error_code == 0:
            with self.lock:
                self.acked[partition.base_offset] = value

    def _long_poll(self, client: RawClient) -> None:
        client.request(
            fetch_request(ACKED_TOPIC, 1 << 40, max_wait_ms=5000, min_bytes=1 << 20, max_bytes=1 << 24),
            FetchResponse,
            11,
        )

    def _join(self, client: RawClient) -> None:
        group = f"g-{self.round_no}"
        client.request(
            FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), FindCoordinatorResponse, 4
        )
        client.request(
            JoinGroupRequest(
                group_id=group,
                session_timeout_ms=10000,
                rebalance_timeout_ms=10000,
                member_id="",
                group_instance_id=None,
                protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"sub")],
            ),
            JoinGroupResponse,
            3,  # v3: no MEMBER_ID_REQUIRED round trip, so the join parks at once
        )

    def _producer_ids(self, client: RawClient) -> None:
        client.request(
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
            InitProducerIdResponse,
            4,
        )


def _read_all(bootstrap: str) -> dict[int, bytes]:
    with RawClient(bootstrap) as client:
        out: dict[int, bytes] = {}
        offset = 0
        while True:
            resp = client.request(
                fetch_request(ACKED_TOPIC, offset, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24),
                FetchResponse,
                11,
            )
            partition = resp.responses[0].partitions[0]
            assert partition.error_code == 0, partition
            if not partition.records:
                return out
            records = decode_records(partition.records)
            for record in records:
                out[record.offset] = record.value
            offset = records[-1].offset + 1


def _create_acked_topic(data_dir: str) -> None:
    with running_node(data_dir, overrides=OVERRIDES) as node, RawClient(node.bootstrap_servers) as client:
        topic = CreateTopicsRequest.CreatableTopic(
            name=ACKED_TOPIC, num_partitions=1, replication_factor=1, assignments=[], configs=[]
        )
        resp = client.request(
            CreateTopicsRequest(topics=[topic], timeout_ms=10000, validate_only=False),
            CreateTopicsResponse,
            5,
        )
        assert resp.topics[0].error_code == 0


def test_stop_at_random_moments_finishes_in_budget_and_keeps_acknowledged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seed = int(os.environ.get("SEED", "20"))
    rng = random.Random(seed)
    caplog.set_level(logging.WARNING, logger="pykraft.node")
    acked_total = 0
    rounds = _stops()
    for first_round in range(0, rounds, ROUNDS_PER_DATA_DIR):
        acked: dict[int, bytes] = {}
        with tempfile.TemporaryDirectory(prefix="pykraft-stops-") as data_dir:
            _create_acked_topic(data_dir)
            for round_no in range(first_round, min(rounds, first_round + ROUNDS_PER_DATA_DIR)):
                delay_s = rng.choice(STOP_DELAYS_S)
                context = f"SEED={seed} round {round_no} (stop {delay_s * 1000:.0f} ms into the load)"
                with running_node(data_dir, overrides=OVERRIDES) as node:
                    stored = _read_all(node.bootstrap_servers)
                    missing = {o: v for o, v in acked.items() if stored.get(o) != v}
                    assert not missing, f"{context}: acknowledged records lost: {sorted(missing)[:10]}"
                    load = Load(node.bootstrap_servers, round_no)
                    load.start()
                    time.sleep(delay_s)
                    started = time.monotonic()
                    node.stop()
                    elapsed_s = time.monotonic() - started
                load.join()
                acked.update(load.acked)
                assert elapsed_s < SHUTDOWN_BUDGET_S, f"{context}: stop took {elapsed_s:.1f} s"
                spent = [r.getMessage() for r in caplog.records if "shutdown budget" in r.getMessage()]
                assert not spent, f"{context}: {spent}"
            with running_node(data_dir, overrides=OVERRIDES) as node:
                stored = _read_all(node.bootstrap_servers)
            missing = {o: v for o, v in acked.items() if stored.get(o) != v}
            assert not missing, f"SEED={seed}: acknowledged records lost: {sorted(missing)[:10]}"
            acked_total += len(acked)
    assert acked_total, "no produce was acknowledged in any round: the load never ran"


def test_wait_event_keeps_a_cancellation_that_races_the_event() -> None:
    """The root cause: on Python 3.11 ``asyncio.wait_for`` returned normally when the event fired in the
    same loop iteration as ``cancel()``, so the raft driver's ``while True`` never stopped."""

    async def main() -> str:
        event = asyncio.Event()

        async def loop_forever() -> None:
            while True:
                await wait_event(event, 0.05)
                event.clear()

        task = asyncio.create_task(loop_forever())
        await asyncio.sleep(0.01)
        event.set()
        await asyncio.sleep(0)  # the event's waiter completes; the loop has not resumed yet
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=2)
        return "cancelled" if done and task.cancelled() else "still running"

    assert asyncio.run(main()) == "cancelled"
