"""Deterministic simulation of broker processes and the active controller (issue 13): the real pure
cores — BrokerLifecycle (registration, heartbeats, controlled shutdown), ProducerIdManager (KIP-730
blocks, prefetch, backoff) and QuorumController (registration, heartbeats, fencing, AllocateProducerIds)
— driven from one seed through message delay and loss, controller failover and broker crashes.

The metadata log is modelled at the level that matters here: the active controller appends records
(replayed at once, as Kafka's does) and they commit after a delay; a failover drops the uncommitted
tail, and the next active controller rebuilds itself from the committed records alone, with every
broker's session renewed. A request is answered only once its records are committed (as
``io/metadata_plane.py`` does); a failover before that fails it with NOT_CONTROLLER. Brokers see the
committed log late. The raft side of failover (elections, truncation) is tests/sim/harness.py's job.

Invariants, after every event:
  1. no producer id is ever handed to two producers (across brokers, restarts and failovers);
  2. the committed ProducerIdsRecords are increasing, non-overlapping blocks, each naming a broker and
     the epoch it was registered with at that point of the log;
  3. after healing, every broker is registered and unfenced, and every producer gets an id.
Every failure names ``SEED=n``; ``SEED=n pytest tests/sim/test_sim_brokers.py`` replays it.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState, RegisterBroker, SendHeartbeat
from pykraft.broker.producer_id_manager import AllocateProducerIdsResponseData, ProducerIdManager
from pykraft.controller.cluster import BrokerHeartbeatTracker
from pykraft.controller.quorum_controller import QuorumController
from pykraft.controller.result import ControllerResult
from pykraft.core.errors import ErrorCode
from pykraft.metadata.image import BrokerEndpoint
from pykraft.metadata.records import ProducerIdsRecord, RegisterBrokerRecord

from .events import EventQueue

BROKERS = (101, 102, 103)
CLUSTER_ID = "simulated-cluster-id00"
STEP_MS = 10
HEARTBEAT_INTERVAL_MS = 200
SESSION_TIMEOUT_MS = 900


@dataclass
class Broker:
    broker_id: int
    lifecycle: BrokerLifecycle
    producer_ids: ProducerIdManager
    alive: bool = True
    # The committed log as this broker has seen it (it lags).
    seen_offset: int = -1
    incarnation: int = 0


class BrokerWorld:
    def __init__(self, seed: int, *, steps: int = 700) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.steps = steps
        self.now_ms = 0
        self.events = EventQueue()
        self.loss = self.rng.choice((0.0, 0.05, 0.2))
        self.max_delay_ms = self.rng.choice((2, 20, 80))
        self.commit_delay_ms = self.rng.choice((5, 30, 120))
        self.failover_rate = self.rng.choice((0.0, 0.005, 0.02))
        self.crash_rate = self.rng.choice((0.0, 0.003, 0.01))
        self.committed: list[Any] = []  # the committed metadata records, in log order
        self.controller_epoch = 0
        self._new_controller()
        self.brokers = {b: self._new_broker(b, 0) for b in BROKERS}
        self.handed_out: dict[int, tuple[int, int]] = {}  # producer id -> (broker, incarnation)
        self.healing = False  # the last third: no crashes, no failovers, no message loss

    # --- the controller ---------------------------------------------------------------------------------

    def _new_controller(self) -> None:
        """A new active controller: the committed records replayed; every broker gets a fresh session."""
        self.controller_epoch += 1
        controller = QuorumController(rng=random.Random(self.seed * 1000 + self.controller_epoch))
        for offset, record in enumerate(self.committed):
            controller.replay(record, offset)
        controller.note_log_end_offset(len(self.committed))
        activation = controller.activate(cluster_id=CLUSTER_ID)
        self.controller = controller
        self.uncommitted: list[Any] = []
        self.waiting: list[tuple[int, Callable[[bool], None]]] = []  # (last offset, answer)
        self._append(activation, lambda ok: None)
        self.heartbeats = BrokerHeartbeatTracker()
        for broker_id in controller.cluster_control.registrations():
            self.heartbeats.touch(broker_id, self.now_ms)

    def _append(self, result: ControllerResult[Any], answer: Callable[[bool], None]) -> None:
        """The records are in the controller (replayed) and in its log; ``answer`` runs when they commit
        (True) or when a failover loses them (False)."""
        if not result.records:
            answer(True)
            return
        self.uncommitted.extend(result.records)
        last_offset = len(self.committed) + len(self.uncommitted) - 1
        self.waiting.append((last_offset, answer))
        epoch = self.controller_epoch

        def commit() -> None:
            if self.controller_epoch != epoch:
                return
            end = last_offset + 1 - len(self.committed)
            if end > 0:
                self.committed.extend(self.uncommitted[:end])
                del self.uncommitted[:end]
                self._check_log()
            done = [w for w in self.waiting if w[0] < len(self.committed)]
            self.waiting = [w for w in self.waiting if w[0] >= len(self.committed)]
            for _, callback in done:
                callback(True)

        self._at(self.rng.randint(1, self.commit_delay_ms), commit)

    def _failover(self) -> None:
        lost = self.waiting
        self._new_controller_after(lost)

    def _new_controller_after(self, lost: list[tuple[int, Callable[[bool], None]]]) -> None:
        for _, callback in lost:
            callback(False)
        self._new_controller()

    def _handle(self, request: Any, reply: Callable[[Any], None]) -> None:
        """A broker's request on the active controller (handle_broker_registration & co.)."""
        controller = self.controller
        now = self.now_ms
        if isinstance(request, RegisterBroker):
            endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", request.broker_id, 0)
            result = controller.register_broker(
                request.broker_id, request.incarnation_id, [endpoint], None, now, unfence=False
            )
            self.heartbeats.touch(request.broker_id, now)
            response = result.response
            self._append(result, lambda ok: reply(response if ok else ErrorCode.NOT_CONTROLLER))
        elif isinstance(request, SendHeartbeat):
            result = controller.broker_heartbeat(
                request.broker_id,
                request.broker_epoch,
                request.current_metadata_offset,
                want_fence=request.want_fence,
                want_shut_down=request.want_shut_down,
            )
            if result.response.error_code == ErrorCode.NONE:
                self.heartbeats.touch(request.broker_id, now)
            response = result.response
            self._append(result, lambda ok: reply(response if ok else ErrorCode.NOT_CONTROLLER))
        else:
            broker_id, broker_epoch = request
            result = controller.allocate_producer_ids(broker_id, broker_epoch)
            response = result.response
            self._append(result, lambda ok: reply(response if ok else ErrorCode.NOT_CONTROLLER))

    def _fence_expired(self) -> None:
        expired = self.heartbeats.expired(self.now_ms, SESSION_TIMEOUT_MS)
        for broker_id in expired:
            self.heartbeats.forget(broker_id)
        if expired:
            self._append(self.controller.fence_brokers(expired), lambda ok: None)

    # --- brokers ----------------------------------------------------------------------------------------

    def _new_broker(self, broker_id: int, incarnation: int) -> Broker:
        lifecycle = BrokerLifecycle(
            broker_id,
            uuid.UUID(int=self.rng.getrandbits(128)),
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            now_ms=self.now_ms,
        )
        return Broker(broker_id, lifecycle, ProducerIdManager(broker_id), incarnation=incarnation)

    def _at(self, delay_ms: int, action: Callable[[], None]) -> None:
        self.events.at(self.now_ms + delay_ms, action)

    def _send(self, broker: Broker, request: Any, on_answer: Callable[[Any], None]) -> None:
        """Request and answer over the network: delayed, maybe lost (then the broker's request times out)."""
        incarnation = broker.incarnation
        answered = [False]

        def deliver(answer: Any) -> None:
            if answered[0] or not broker.alive or broker.incarnation != incarnation:
                return
            answered[0] = True
            on_answer(answer)

        def at_controller() -> None:
            def reply(answer: Any) -> None:
                if self.healing or self.rng.random() >= self.loss:
                    self._at(self.rng.randint(1, self.max_delay_ms), lambda: deliver(answer))

            self._handle(request, reply)

        if self.healing or self.rng.random() >= self.loss:
            self._at(self.rng.randint(1, self.max_delay_ms), at_controller)
        self._at(6 * self.max_delay_ms + 3 * self.commit_delay_ms + 50, lambda: deliver(None))  # timeout

    def _poll_broker(self, broker: Broker) -> None:
        lifecycle = broker.lifecycle
        if broker.seen_offset < len(self.committed) - 1 and self.rng.random() < 0.5:
            broker.seen_offset = len(self.committed) - 1  # the observer caught up
        cluster_id = CLUSTER_ID if broker.seen_offset >= 0 else None
        request = lifecycle.poll(self.now_ms, 1, cluster_id, broker.seen_offset)
        if isinstance(request, RegisterBroker):
            self._send(broker, request, lambda answer: self._registered(broker, answer))
        elif isinstance(request, SendHeartbeat):
            self._send(broker, request, lambda answer: self._heartbeat_answered(broker, answer))
        allocation = broker.producer_ids.take_request()
        if allocation is not None:
            self._send(
                broker,
                (allocation.broker_id, allocation.broker_epoch),
                lambda answer: self._allocated(broker, answer),
            )

    def _registered(self, broker: Broker, answer: Any) -> None:
        if answer is None or isinstance(answer, ErrorCode):
            broker.lifecycle.on_failure(self.now_ms)
            return
        broker.lifecycle.on_registration_response(answer.error_code, answer.broker_epoch, self.now_ms)
        self._session_changed(broker)

    def _heartbeat_answered(self, broker: Broker, answer: Any) -> None:
        if answer is None or isinstance(answer, ErrorCode):
            broker.lifecycle.on_failure(self.now_ms)
            return
        broker.lifecycle.on_heartbeat_response(
            answer.error_code,
            is_caught_up=answer.is_caught_up,
            is_fenced=answer.is_fenced,
            should_shut_down=answer.should_shut_down,
            now_ms=self.now_ms,
        )
        self._session_changed(broker)

    def _session_changed(self, broker: Broker) -> None:
        """As Node._on_session_change: a new broker epoch goes into the producer-id requests."""
        epoch = broker.lifecycle.broker_epoch
        if epoch != broker.producer_ids.broker_epoch:
            broker.producer_ids.broker_epoch = epoch
            if epoch >= 0:
                broker.producer_ids.maybe_request_next_block(self.now_ms)

    def _allocated(self, broker: Broker, answer: Any) -> None:
        if answer is None:
            broker.producer_ids.on_timeout()
            return
        if isinstance(answer, ErrorCode):
            data = AllocateProducerIdsResponseData(answer, -1, 0)
        else:
            data = AllocateProducerIdsResponseData(
                answer.error_code, answer.producer_id_start, answer.producer_id_len
            )
        broker.producer_ids.on_response(data, self.now_ms)

    def _produce(self) -> None:
        """A producer's InitProducerId on a random live broker (as handle_init_producer_id)."""
        broker = self.brokers[self.rng.choice(BROKERS)]
        if not broker.alive or broker.lifecycle.is_fenced:
            return
        error, producer_id = broker.producer_ids.generate_producer_id(self.now_ms)
        if error != ErrorCode.NONE:
            return
        previous = self.handed_out.get(producer_id)
        if previous is not None:
            self.fail(
                f"producer id {producer_id} handed out twice: by broker {previous[0]} "
                f"(incarnation {previous[1]}) and by broker {broker.broker_id} (incarnation {broker.incarnation})"
            )
        self.handed_out[producer_id] = (broker.broker_id, broker.incarnation)

    # --- run -----------------------------------------------------------------------------------------------

    def fail(self, message: str) -> None:
        raise AssertionError(
            f"SEED={self.seed} t={self.now_ms}ms loss={self.loss} delay<={self.max_delay_ms} "
            f"commit<={self.commit_delay_ms}: {message}"
        )

    def run(self) -> None:
        healing_from = self.steps * 2 // 3
        for step in range(self.steps):
            self.now_ms += STEP_MS
            self.events.run_due(self.now_ms)
            healing = self.healing = step >= healing_from
            if not healing and self.rng.random() < self.failover_rate:
                self._failover()
            for broker in self.brokers.values():
                if not broker.alive:
                    if healing or self.rng.random() < 0.05:
                        self.brokers[broker.broker_id] = self._new_broker(
                            broker.broker_id, broker.incarnation + 1
                        )
                    continue
                if not healing and self.rng.random() < self.crash_rate:
                    broker.alive = False
                    continue
                self._poll_broker(broker)
            self._fence_expired()
            for _ in range(self.rng.randint(0, 3)):
                self._produce()
        self.check_healed()

    def _check_log(self) -> None:
        """Invariant 2 over the committed log."""
        registered: dict[int, int] = {}
        next_id = 0
        for offset, record in enumerate(self.committed):
            message = record.message
            if isinstance(message, RegisterBrokerRecord):
                # A new incarnation's epoch is its record's offset; a retried registration of the same
                # incarnation keeps the epoch it had.
                registered[message.broker_id] = message.broker_epoch
            elif isinstance(message, ProducerIdsRecord):
                if registered.get(message.broker_id) != message.broker_epoch:
                    self.fail(
                        f"ProducerIdsRecord at {offset} names broker {message.broker_id} epoch {message.broker_epoch}, registered {registered.get(message.broker_id)}"
                    )
                if message.next_producer_id <= next_id:
                    self.fail(
                        f"ProducerIdsRecord at {offset}: next id {message.next_producer_id} after {next_id}"
                    )
                next_id = message.next_producer_id

    def check_healed(self) -> None:
        registrations = self.controller.cluster_control.registrations()
        for broker in self.brokers.values():
            lifecycle = broker.lifecycle
            if lifecycle.state is not BrokerState.RUNNING or lifecycle.is_fenced:
                self.fail(
                    f"after healing broker {broker.broker_id} is {lifecycle.state.name}, fenced={lifecycle.is_fenced}"
                )
            registration = registrations.get(broker.broker_id)
            if (
                registration is None
                or registration.fenced
                or registration.broker_epoch != lifecycle.broker_epoch
            ):
                self.fail(f"after healing the controller has broker {broker.broker_id} as {registration}")
        before = len(self.handed_out)
        for _ in range(20):
            self._produce()
        if len(self.handed_out) == before:
            self.fail("after healing no producer got an id")


def run_broker_seed(seed: int, **options: Any) -> BrokerWorld:
    world = BrokerWorld(seed, **options)
    world.run()
    return world
