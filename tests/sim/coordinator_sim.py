"""Deterministic simulation of the group coordinator under paused brokers (issue 32): the real pure
cores — ``GroupCoordinator`` (offset commits, OffsetFetch, loading ``__consumer_offsets``) and each
broker's ``CoordinatorLease`` — driven from one seed through message delays and SIGSTOP-like pauses.

The model: three brokers replicate the group's ``__consumer_offsets`` partition; the controller takes
heartbeats, fences a broker that sent none for ``broker.session.timeout.ms`` (its leadership moves to the
live broker with the longest log: the ISR's choice) and unfences it on its next heartbeat; brokers read
the metadata log through Fetches answered after a delay and apply it a little later. A leader appends a
commit, its followers copy the leader's log (truncating what it never had), and the commit is applied
and acknowledged once a follower has it (min.insync.replicas=2) — as io/group_service.py does, unless
``apply_on_append`` models the old behaviour (applied when appended, kept if the append never
replicates). A paused broker handles nothing: requests and answers wait in its socket and are handled
the moment it resumes, with the time of then. One client commits increasing offsets through whichever
broker it finds as coordinator; an observer sends OffsetFetch to every broker every 200 ms.

Invariants, on every OffsetFetch answer:
  1. the offset was acknowledged (a commit visible before it is committed is a violation);
  2. it is not below an offset acknowledged before the fetch was sent (no stale coordinator answers).
Every failure names ``SEED=n``; ``SEED=n pytest tests/sim/test_sim_coordinator.py`` replays it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from pykraft.broker.coordinator_lease import CoordinatorLease
from pykraft.coordinator.group_coordinator import (
    CommitOffset,
    CommitRequest,
    GroupConfig,
    GroupCoordinator,
    WritePlan,
)
from pykraft.core.errors import ErrorCode

from .events import EventQueue

BROKERS = (1, 2, 3)
GROUP, TOPIC, PARTITION = "g", "t", 0
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 500
RUN_MS = 40_000
CONFIG = GroupConfig(offsets_topic_num_partitions=1)
OFFSETS_PARTITION = 0


@dataclass
class Broker:
    broker_id: int
    coordinator: GroupCoordinator
    lease: CoordinatorLease | None
    paused_until_ms: int = 0
    # (key, value) records of the offsets partition, as this replica has them.
    log: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    # The leader of the offsets partition in this broker's image, and how far its image has applied.
    image_leader: int = -1
    applied_end_offset: int = 0
    loads: int = 0
    # Commits appended here and waiting for a follower: (log length needed, plan, loads at append, answer).
    waiting: list[tuple[int, WritePlan, int, Callable[[ErrorCode], None]]] = field(default_factory=list)


class World:
    def __init__(self, seed: int, *, lease: bool = True, apply_on_append: bool = False) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.apply_on_append = apply_on_append
        self.events = EventQueue()
        self.now_ms = 0
        self.brokers = {
            b: Broker(
                b,
                GroupCoordinator(CONFIG, random.Random(seed * 10 + b)),
                CoordinatorLease(SESSION_TIMEOUT_MS) if lease else None,
            )
            for b in BROKERS
        }
        # The controller: the metadata log (the offsets partition's leader per record), heartbeats, fencing.
        self.metadata: list[int] = [1]
        self.last_heartbeat_ms = {b: 0 for b in BROKERS}
        self.fenced: set[int] = set()
        # The client's view and the history the invariants judge.
        self.acked: list[tuple[int, int]] = []  # (time acknowledged, offset)
        self.next_offset = 1
        self.client_coordinator = -1
        self.violations: list[str] = []
        self.fetches_answered = 0

    # --- the clock and the network ------------------------------------------------------------------

    def delay(self) -> int:
        return self.rng.randint(1, 30)

    def deliver(self, broker_id: int, at_ms: int, action: Callable[[], None]) -> None:
        """``action`` runs on ``broker_id`` at ``at_ms``, or when it resumes if it is paused then."""

        def arrive() -> None:
            paused_until = self.brokers[broker_id].paused_until_ms
            if self.now_ms < paused_until:
                self.events.at(paused_until, action)  # queued in its socket, in arrival order
            else:
                action()

        self.events.at(at_ms, arrive)

    def run(self) -> World:
        for b in BROKERS:
            self.events.at(self.rng.randint(0, HEARTBEAT_INTERVAL_MS), lambda b=b: self.heartbeat(b))
            self.events.at(self.rng.randint(0, 100), lambda b=b: self.fetch_metadata(b))
            self.events.at(self.rng.randint(0, 100), lambda b=b: self.replicate(b))
            self.events.at(200, lambda b=b: self.observe(b))
        self.events.at(1500, self.commit)
        self.events.at(100, self.controller_tick)
        at = 2000
        while at < RUN_MS - 10_000:  # the pauses: mostly the coordinator, some past the session timeout
            pause_ms = self.rng.randint(500, 9000)
            self.events.at(at, lambda pause_ms=pause_ms: self.pause(pause_ms))
            at += pause_ms + self.rng.randint(1000, 5000)
        for self.now_ms in range(RUN_MS):
            self.events.run_due(self.now_ms)
        return self

    def pause(self, pause_ms: int) -> None:
        leaders = [b for b in BROKERS if self.brokers[b].image_leader == b]
        target = self.rng.choice(leaders) if leaders and self.rng.random() < 0.8 else self.rng.choice(BROKERS)
        self.brokers[target].paused_until_ms = self.now_ms + pause_ms

    # --- the controller -------------------------------------------------------------------------------

    def controller_tick(self) -> None:
        for b in BROKERS:
            if b not in self.fenced and self.now_ms - self.last_heartbeat_ms[b] > SESSION_TIMEOUT_MS:
                self.fenced.add(b)
                if self.metadata[-1] == b:
                    live = [o for o in BROKERS if o not in self.fenced]
                    if live:  # the ISR's choice: the replica with the whole log
                        self.metadata.append(max(live, key=lambda o: (len(self.brokers[o].log), -o)))
        self.events.at(self.now_ms + 100, self.controller_tick)

    def heartbeat(self, b: int) -> None:
        sent = self.now_ms

        def at_controller() -> None:
            self.last_heartbeat_ms[b] = max(self.last_heartbeat_ms[b], sent)
            self.fenced.discard(b)  # caught up enough for the model: unfenced at once
            fenced = False
            self.deliver(b, self.now_ms + self.delay(), lambda: answered(fenced))

        def answered(fenced: bool) -> None:
            lease = self.brokers[b].lease
            if lease is not None:
                lease.on_heartbeat_answered(sent, self.now_ms, is_fenced=fenced)
            self.events.at(self.now_ms + HEARTBEAT_INTERVAL_MS, lambda: self.heartbeat(b))

        self.events.at(sent + self.delay(), at_controller)

    def fetch_metadata(self, b: int) -> None:
        sent = self.now_ms

        def at_controller() -> None:
            high_watermark = len(self.metadata)
            leader = self.metadata[-1]
            self.deliver(b, self.now_ms + self.delay(), lambda: answered(high_watermark, leader))

        def answered(high_watermark: int, leader: int) -> None:
            broker = self.brokers[b]
            if broker.lease is not None:
                broker.lease.on_metadata_fetch_answered(sent, high_watermark)
            self.deliver(
                b, self.now_ms + self.rng.randint(0, 20), lambda: self.apply_image(b, high_watermark, leader)
            )
            self.events.at(self.now_ms + self.rng.randint(0, 100), lambda: self.fetch_metadata(b))

        self.events.at(sent + self.delay(), at_controller)

    def apply_image(self, b: int, high_watermark: int, leader: int) -> None:
        broker = self.brokers[b]
        if high_watermark <= broker.applied_end_offset:
            return
        broker.applied_end_offset = high_watermark
        if leader == broker.image_leader:
            return
        broker.image_leader = leader
        broker.loads += 1
        coordinator = broker.coordinator
        if OFFSETS_PARTITION in coordinator.owned_partitions:
            coordinator.unload(OFFSETS_PARTITION)
        for _, plan, _, answer in broker.waiting:
            coordinator.end_pending_commit(GROUP, list(plan.partition_errors))
            answer(ErrorCode.NOT_COORDINATOR)
        broker.waiting = []
        if leader == b:
            coordinator.begin_load(OFFSETS_PARTITION)
            for key, value in broker.log:
                coordinator.replay(OFFSETS_PARTITION, key, value, self.now_ms)
            coordinator.finish_load(OFFSETS_PARTITION, self.now_ms)

    # --- replication of the offsets partition ------------------------------------------------------

    def replicate(self, b: int) -> None:
        """A follower copies the log of the leader its image names (truncating what that leader does not
        have); a leader with a follower holding a waiting commit applies and acknowledges it."""
        broker = self.brokers[b]
        leader = broker.image_leader
        if self.now_ms >= broker.paused_until_ms and leader not in (-1, b):
            source = self.brokers[leader]
            if self.now_ms >= source.paused_until_ms and source.image_leader == leader:
                broker.log = list(source.log)
                for o in BROKERS:
                    self.acknowledge(o)
        self.events.at(self.now_ms + self.rng.randint(20, 100), lambda: self.replicate(b))

    def acknowledge(self, b: int) -> None:
        broker = self.brokers[b]
        if self.now_ms < broker.paused_until_ms:
            return
        followers = [o for o in BROKERS if o != b]
        still = []
        for needed, plan, loads, answer in broker.waiting:
            if any(len(self.brokers[o].log) >= needed and self.brokers[o].log[:needed] == broker.log[:needed]
                   for o in followers):  # fmt: skip
                if broker.loads == loads and not self.apply_on_append:
                    broker.coordinator.apply(plan, self.now_ms)
                broker.coordinator.end_pending_commit(GROUP, list(plan.partition_errors))
                answer(ErrorCode.NONE)
            else:
                still.append((needed, plan, loads, answer))
        broker.waiting = still

    # --- the clients ------------------------------------------------------------------------------------

    def commit(self) -> None:
        """Commit the next offset through the coordinator this client knows; a new one is found from any
        broker's image (FindCoordinator) when it has none or was told NOT_COORDINATOR."""
        if self.client_coordinator < 0:
            answering = [b for b in BROKERS if self.now_ms >= self.brokers[b].paused_until_ms]
            if answering:
                self.client_coordinator = self.brokers[self.rng.choice(answering)].image_leader
        target = self.client_coordinator
        if target < 0:
            self.events.at(self.now_ms + 100, self.commit)
            return
        offset = self.next_offset
        self.next_offset += 1
        done = [False]

        def answer(error: ErrorCode) -> None:
            if error == ErrorCode.NONE:  # acknowledged when the coordinator answers
                self.acked.append((self.now_ms, offset))

            def at_client() -> None:
                if error == ErrorCode.NOT_COORDINATOR:
                    self.client_coordinator = -1
                if not done[0]:
                    done[0] = True
                    self.events.at(self.now_ms + 50, self.commit)

            self.events.at(self.now_ms + self.delay(), at_client)

        def give_up() -> None:  # no answer in time: the outcome is unknown, look again
            if not done[0]:
                done[0] = True
                self.client_coordinator = -1
                self.commit()

        self.deliver(target, self.now_ms + self.delay(), lambda: self.handle_commit(target, offset, answer))
        self.events.at(self.now_ms + 2000, give_up)

    def handle_commit(self, b: int, offset: int, answer: Callable[[ErrorCode], None]) -> None:
        broker = self.brokers[b]
        self.serve(broker)
        request = CommitRequest(GROUP, -1, "", None, (CommitOffset(TOPIC, PARTITION, offset, -1, ""),))
        plan = broker.coordinator.commit_offsets(request, self.now_ms)
        if plan.error_code != ErrorCode.NONE:
            answer(plan.error_code)
            return
        broker.coordinator.begin_pending_commit(GROUP, list(plan.partition_errors))
        broker.log.extend(plan.records)
        if self.apply_on_append:
            broker.coordinator.apply(plan, self.now_ms)
        broker.waiting.append((len(broker.log), plan, broker.loads, answer))

    def observe(self, b: int) -> None:
        sent = self.now_ms
        self.deliver(b, sent + self.delay(), lambda: self.handle_fetch(b, sent))
        self.events.at(sent + 200, lambda: self.observe(b))

    def handle_fetch(self, b: int, sent_ms: int) -> None:
        broker = self.brokers[b]
        self.serve(broker)
        error, offsets = broker.coordinator.fetch_offsets(GROUP, [(TOPIC, [PARTITION])])
        if error != ErrorCode.NONE or offsets[0][2] is None:
            return
        self.fetches_answered += 1
        offset = offsets[0][2].offset
        floor = max((o for t, o in self.acked if t < sent_ms), default=0)
        if offset not in {o for _, o in self.acked}:
            self.violations.append(
                f"SEED={self.seed}: broker {b} answered offset {offset} at {self.now_ms} ms, never acknowledged"
            )
        elif offset < floor:
            self.violations.append(
                f"SEED={self.seed}: broker {b} answered offset {offset} at {self.now_ms} ms for a fetch sent "
                f"at {sent_ms} ms, after offset {floor} was acknowledged"
            )

    def serve(self, broker: Broker) -> None:
        """The shell's lease check before each request (io/group_service.py)."""
        if broker.lease is not None:
            broker.coordinator.serving = broker.lease.holds(self.now_ms, broker.applied_end_offset)
