"""KIP-227 incremental fetch sessions between brokers (issue 29 item 4): a follower that follows
thousands of partitions on one leader sends each of them once, then only those whose fetch position
changed, and the leader answers only those with something new (records, an error, a moved high
watermark or log start). An idle follower's fetch is then a few bytes, not a list of every partition.

Both halves are here, pure: ``FetchSessionCache`` is the leader's (Kafka's FetchManager and
FetchSessionCache), ``FollowerFetchSession`` the follower's (Kafka's FetchSessionHandler). The leader
creates sessions for followers only (replica_id >= 0); a consumer's Fetch is answered sessionless
(session id 0), which KIP-227 allows any server to do, so clients keep their full fetches.

Request metadata, as in Kafka's FetchMetadata: (session id, epoch) = (0, 0) asks for a new session;
(id, 0) closes ``id`` and asks for a new one; (any, -1) is a full fetch without a session (closing
``id``); (id, n > 0) is the n-th incremental fetch of ``id``. A session the leader no longer has answers
FETCH_SESSION_ID_NOT_FOUND, an epoch out of turn INVALID_FETCH_SESSION_EPOCH; the follower then starts
over with a full fetch.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pykraft.core.errors import ErrorCode
from pykraft.protocol.fetch import FetchPartitionResponse, FetchResponseData, FetchTopicResponse

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
# max.incremental.fetch.session.cache.slots (Kafka's default): sessions a leader keeps at once; the
# least recently used one goes when a new one needs room (its follower starts over with a full fetch).
FETCH_SESSION_CACHE_SLOTS = 1000

TopicPartition = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch: 1 after the initial epoch, wrapping from int32's max back to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition of a replica Fetch, as the follower asks for it (FetchRequest's FetchPartition)."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchTopic:
    topic: str
    partitions: list[PartitionFetch]


@dataclass(frozen=True, slots=True)
class SessionFetchRequest:
    """A replica Fetch with its session's partitions filled in: what ``handle_replica_fetch`` reads."""

    replica_id: int
    max_bytes: int
    topics: list[FetchTopic]


@dataclass(slots=True)
class _CachedPartition:
    """Kafka's CachedPartition: what the follower last asked, and what it was last told."""

    fetch: PartitionFetch
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchSession:
    session_id: int
    replica_id: int
    # The epoch the next incremental fetch must carry.
    epoch: int
    # In the order the follower first asked for them (a partition updated keeps its place).
    partitions: dict[TopicPartition, _CachedPartition] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SessionContext:
    """How one replica Fetch is served: the partitions to read (``request``, None when the session
    metadata was refused with ``error_code``), and the session its answer goes through."""

    request: SessionFetchRequest | None
    session: FetchSession | None = None
    incremental: bool = False
    error_code: ErrorCode = ErrorCode.NONE


def _fetches(topics: Iterable[Any]) -> Iterable[tuple[str, PartitionFetch]]:
    for topic in topics:
        for fp in topic.partitions:
            yield (
                topic.topic,
                PartitionFetch(
                    fp.partition,
                    fp.current_leader_epoch,
                    fp.fetch_offset,
                    fp.last_fetched_epoch,
                    fp.log_start_offset,
                    fp.partition_max_bytes,
                ),
            )


def _grouped(pairs: Iterable[tuple[str, PartitionFetch]]) -> list[FetchTopic]:
    by_topic: dict[str, list[PartitionFetch]] = {}
    for topic, fetch in pairs:
        by_topic.setdefault(topic, []).append(fetch)
    return [FetchTopic(topic, fetches) for topic, fetches in by_topic.items()]


class FetchSessionCache:
    """The leader's fetch sessions (Kafka's FetchManager.newContext and FetchSessionCache)."""

    def __init__(self, slots: int = FETCH_SESSION_CACHE_SLOTS) -> None:
        assert slots > 0
        self.slots = slots
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self._last_session_id = INVALID_SESSION_ID

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def partitions_cached(self) -> int:
        return sum(len(session.partitions) for session in self._sessions.values())

    def context(self, request: Any) -> SessionContext:
        """The session context of a replica Fetch (``request`` as decoded: session_id, session_epoch,
        topics, forgotten_topics_data, replica_id, max_bytes)."""
        session_id, epoch = request.session_id, request.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)  # closed by its follower
            pairs = list(_fetches(request.topics))
            full = SessionFetchRequest(request.replica_id, request.max_bytes, _grouped(pairs))
            if epoch == FINAL_EPOCH:
                return SessionContext(full)
            session = self._create(request.replica_id)
            session.partitions = {(topic, f.partition): _CachedPartition(f) for topic, f in pairs}
            return SessionContext(full, session)
        found = self._sessions.get(session_id)
        if found is None or found.replica_id != request.replica_id:
            return SessionContext(None, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if found.epoch != epoch:
            return SessionContext(None, error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        found.epoch = next_epoch(epoch)
        self._sessions.move_to_end(session_id)
        for forgotten in request.forgotten_topics_data or ():
            for index in forgotten.partitions:
                found.partitions.pop((forgotten.topic, index), None)
        for topic, fetch in _fetches(request.topics):
            cached = found.partitions.get((topic, fetch.partition))
            if cached is None:
                found.partitions[(topic, fetch.partition)] = _CachedPartition(fetch)
            else:
                cached.fetch = fetch
        every = SessionFetchRequest(
            request.replica_id,
            request.max_bytes,
            _grouped((topic, cached.fetch) for (topic, _), cached in found.partitions.items()),
        )
        return SessionContext(every, found, incremental=True)

    def _create(self, replica_id: int) -> FetchSession:
        # A broker fetches from this one with a single fetcher (one session), so its new session
        # replaces any older one: a follower that restarted leaves no stale session behind, each
        # holding every partition it followed, until 1,000 more were made.
        for stale in [sid for sid, session in self._sessions.items() if session.replica_id == replica_id]:
            del self._sessions[stale]
        while len(self._sessions) >= self.slots:
            self._sessions.popitem(last=False)
        # Never the id just closed: a late fetch of the old session must not match the new one.
        session_id = self._last_session_id % 0x7FFFFFFF + 1
        while session_id in self._sessions:
            session_id = session_id % 0x7FFFFFFF + 1
        self._last_session_id = session_id
        session = FetchSession(session_id, replica_id, next_epoch(INITIAL_EPOCH))
        self._sessions[session_id] = session
        return session

    @staticmethod
    def answer(context: SessionContext, response: FetchResponseData) -> FetchResponseData:
        """The answer through the session: its id, and for an incremental fetch only the partitions with
        something new (CachedPartition.maybeUpdateResponseData); the session remembers what it told."""
        session = context.session
        if session is None:
            return response
        topics: list[FetchTopicResponse] = []
        for topic in response.topics:
            kept: list[FetchPartitionResponse] = []
            for data in topic.partitions:
                cached = session.partitions.get((topic.topic, data.partition_index))
                changed = (
                    cached is None
                    or data.error_code != ErrorCode.NONE
                    or data.diverging_epoch is not None
                    or any(len(chunk) for chunk in data.records)
                    or data.high_watermark != cached.high_watermark
                    or data.log_start_offset != cached.log_start_offset
                )
                if cached is not None:
                    cached.high_watermark = data.high_watermark
                    cached.log_start_offset = data.log_start_offset
                if changed or not context.incremental:
                    kept.append(data)
            if kept:
                topics.append(FetchTopicResponse(topic.topic, kept))
        return FetchResponseData(response.throttle_time_ms, response.error_code, session.session_id, topics)


@dataclass(frozen=True, slots=True)
class FollowerFetch:
    """What one replica Fetch sends: its session metadata, the partitions to name, those to forget."""

    session_id: int
    session_epoch: int
    partitions: list[tuple[str, PartitionFetch]]
    forgotten: list[TopicPartition]


class FollowerFetchSession:
    """The follower's side of one leader's session (Kafka's FetchSessionHandler)."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # What the leader's session holds for each partition (as last sent and answered).
        self._sent: dict[TopicPartition, PartitionFetch] = {}
        self._pending: dict[TopicPartition, PartitionFetch] = {}

    def build(self, wanted: dict[TopicPartition, PartitionFetch]) -> FollowerFetch:
        """The next fetch for ``wanted`` (every partition this follower fetches from the leader now)."""
        self._pending = dict(wanted)
        if self.epoch == INITIAL_EPOCH:
            return FollowerFetch(
                self.session_id, INITIAL_EPOCH, [(topic, f) for (topic, _), f in wanted.items()], []
            )
        changed = [(topic, f) for (topic, index), f in wanted.items() if self._sent.get((topic, index)) != f]
        forgotten = [key for key in self._sent if key not in wanted]
        return FollowerFetch(self.session_id, self.epoch, changed, forgotten)

    def answered(self, error_code: int, session_id: int) -> None:
        """The leader answered the last ``build``: move to the session's next epoch, or start over."""
        if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self.session_id, self.epoch, self._sent = INVALID_SESSION_ID, INITIAL_EPOCH, {}
        elif error_code != ErrorCode.NONE:
            self.failed()
        elif self.epoch == INITIAL_EPOCH:
            # A full fetch: the leader's new session (or none: the next fetch asks again).
            self.session_id = session_id
            if session_id != INVALID_SESSION_ID:
                self.epoch, self._sent = next_epoch(INITIAL_EPOCH), self._pending
        else:
            self.epoch, self._sent = next_epoch(self.epoch), self._pending

    def failed(self) -> None:
        """No usable answer (the connection failed, the answer was cut): the next fetch is full, and
        closes the leader's session if it has one (FetchSessionHandler.handleError)."""
        self.epoch, self._sent = INITIAL_EPOCH, {}


__all__ = [
    "FETCH_SESSION_CACHE_SLOTS",
    "FetchSessionCache",
    "FollowerFetch",
    "FollowerFetchSession",
    "PartitionFetch",
    "SessionContext",
    "SessionFetchRequest",
    "next_epoch",
]
