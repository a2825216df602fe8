"""What the fault campaign records: every operation a client attempted and how it ended, what the
nemesis did and when, and what the cluster holds afterwards. Plain data (JSON-able), so a failed run's
history can be written out and the checker run on it again."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Send:
    """One record an idempotent (or transactional) producer sent. ``acked``: the delivery report said
    written, at ``partition``/``offset`` (offset -1: written, offset unknown, as Kafka answers a retried
    batch it already has, KIP-758's DUPLICATE_SEQUENCE_NUMBER); otherwise the outcome is unknown (it may or may not be there).
    ``seq`` orders one producer's sends; ``txn`` names the transaction that carried it, if any;
    ``source``, for a transform's output, the input value it was made from."""

    producer: str
    topic: str
    value: str
    seq: int
    acked: bool
    partition: int = -1
    offset: int = -1
    key: str | None = None
    t_ack_s: float = 0.0
    txn: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class Txn:
    """A transaction and how the client says it ended: "commit", "abort" (either one returned), or
    "unknown" (an error; it must still be all or nothing). ``error`` is the client's error, if any."""

    name: str
    producer: str
    outcome: str
    t_end_s: float
    error: str = ""
    fatal: bool = False


@dataclass(frozen=True)
class OffsetCommit:
    group: str
    topic: str
    partition: int
    offset: int
    acked: bool
    t_sent_s: float
    t_done_s: float


@dataclass(frozen=True)
class OffsetObservation:
    """An OffsetFetch answered by ``broker`` (any broker a client can reach, coordinator or not)."""

    broker: int
    group: str
    topic: str
    partition: int
    offset: int
    t_sent_s: float
    t_done_s: float


@dataclass(frozen=True)
class Consumed:
    group: str
    topic: str
    partition: int
    offset: int
    value: str


@dataclass(frozen=True)
class Fault:
    kind: str
    nodes: tuple[int, ...]
    t_start_s: float
    t_end_s: float


@dataclass(frozen=True)
class EpochBump:
    """An idempotent producer's librdkafka began draining to bump its producer epoch (its client log's
    DRAIN line, debug "eos"): ``reason`` is librdkafka's, e.g. "skipped sequence numbers"."""

    producer: str
    producer_id: int
    producer_epoch: int
    reason: str
    t_s: float


@dataclass(frozen=True)
class FinalRecord:
    offset: int
    key: str | None
    value: str


@dataclass
class History:
    sends: list[Send] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)
    commits: list[OffsetCommit] = field(default_factory=list)
    observations: list[OffsetObservation] = field(default_factory=list)
    consumed: list[Consumed] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    bumps: list[EpochBump] = field(default_factory=list)
    # After the faults healed: each partition read with read_committed from offset 0 to its end.
    final: dict[TopicPartition, list[FinalRecord]] = field(default_factory=dict)
    # Each partition's log bytes (a digest) per broker holding a replica, compared for identity.
    replicas: dict[TopicPartition, dict[int, str]] = field(default_factory=dict)
    # Topics whose latest value per key is what counts (cleaned logs), not every value.
    compacted_topics: set[str] = field(default_factory=set)
    # Topics written with acks=1: Kafka may lose (or, without idempotence, repeat) those on a leader
    # change, so only their replicas' agreement is judged.
    lossy_topics: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __getstate__(self) -> dict[str, object]:  # pickled for a re-check: the lock stays behind
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.setdefault("bumps", [])  # histories pickled before bumps were recorded
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def add(
        self, event: Send | Txn | OffsetCommit | OffsetObservation | Consumed | Fault | EpochBump
    ) -> None:
        with self._lock:
            if isinstance(event, Send):
                self.sends.append(event)
            elif isinstance(event, Txn):
                self.txns.append(event)
            elif isinstance(event, OffsetCommit):
                self.commits.append(event)
            elif isinstance(event, OffsetObservation):
                self.observations.append(event)
            elif isinstance(event, Consumed):
                self.consumed.append(event)
            elif isinstance(event, EpochBump):
                self.bumps.append(event)
            else:
                self.faults.append(event)
