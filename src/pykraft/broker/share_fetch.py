"""ShareFetch (78) and ShareAcknowledge (79) on a partition leader (KIP-932), pure: Kafka's
SharePartitionManager and ShareSessionCache around the share partitions
(coordinator/share_partition.py). The shell (io/share_service.py) long-polls.

**Share sessions** are keyed by (group id, member id), as ShareSessionCache's ShareSessionKey. A
ShareFetch with ShareSessionEpoch 0 opens one (carrying no acknowledgements: INVALID_REQUEST), -1
closes it (its acknowledgements applied, the member's records in its partitions released); any other
epoch must be the session's next (INVALID_SHARE_SESSION_EPOCH; SHARE_SESSION_NOT_FOUND without a
session) and moves it on by one. A session remembers its partitions: a request names only the ones it
adds (Topics) and removes (ForgottenTopicsData), and each fetch reads every partition of the session.
ShareAcknowledge follows the same epochs but cannot open a session.

**Share partitions** are made on the first fetch of a (group, topic partition) on its leader. Their
start offset comes from the group's ``share.auto.offset.reset`` (Kafka's default ``latest``: the
high watermark; ``earliest``: the log start; ``by_duration:<ISO-8601>``: the first record at or after
now minus that). ``share.isolation.level`` read_committed reads to the last stable offset and never
acquires an aborted transaction's records; control records are never acquired. The lock duration is
the group's ``share.record.lock.duration.ms`` or ``group.share.record.lock.duration.ms``.

**Durable state** goes through the share coordinator (Kafka's persister; the shell calls it): a share
partition new to this leader is loaded from its state first (:meth:`ShareManager.missing`,
:meth:`ShareManager.load`; a state never written starts at ``share.auto.offset.reset`` and is written
before any record is acquired), and each change to what is durable (acknowledgements, lock expiries,
releases) counts as a new version of it; an acknowledgement is answered once a write holding its version
succeeded (:meth:`ShareManager.is_durable`). Acquisitions are not durable: a new leader hands out again
what its predecessor had handed out and nobody acknowledged.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pykraft.broker.handlers import BrokerContext, led_partition
from pykraft.coordinator.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)
from pykraft.core.errors import ErrorCode
from pykraft.core.group_configs import duration_ns, group_config_int
from pykraft.protocol.messages import ShareAcknowledgeResponse, ShareFetchResponse
from pykraft.protocol.records import committed_batches, scan_batches
from pykraft.security.acls import AclOperation, ResourceType, allowed

INITIAL_SESSION_EPOCH = 0
FINAL_SESSION_EPOCH = -1
# A share partition read takes at most this much of the log per fetch (Kafka's fetch.max.bytes
# default caps a ShareFetch the same way).
PARTITION_READ_BYTES = 1048576
# Share sessions one broker keeps at most (Kafka's group.share.max.share.sessions default): another is
# refused SHARE_SESSION_LIMIT_REACHED.
MAX_SHARE_SESSIONS = 2000

TopicPartition = tuple[uuid.UUID, int]
ShareKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    next_epoch: int
    partitions: set[TopicPartition] = field(default_factory=set)
    # The client connection whose ShareFetch opened it (Kafka's ShareSession.clientConnectionId).
    connection_id: str = ""


@dataclass(frozen=True, slots=True)
class ShareManagerConfig:
    record_lock_duration_ms: int = 30000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    partition_max_record_locks: int = 2000  # group.share.partition.max.record.locks


@dataclass(slots=True)
class PartitionOutcome:
    error_code: ErrorCode = ErrorCode.NONE
    acknowledge_error_code: ErrorCode = ErrorCode.NONE
    leader_id: int = -1
    leader_epoch: int = -1
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    acknowledged: bool = False  # the request acknowledged records of this partition
    # The share partition's change count once this request's acknowledgements were applied: they are
    # answered once a state write at least this recent succeeded.
    acknowledged_version: int = 0


@dataclass(slots=True)
class FetchContext:
    """One ShareFetch between its session check (done once) and its reads (repeated while it waits)."""

    error_code: ErrorCode
    error_message: str | None = None
    session: ShareSession | None = None
    outcomes: dict[TopicPartition, PartitionOutcome] = field(default_factory=dict)
    max_records: int = 0
    group_id: str = ""

    @property
    def acquired_any(self) -> bool:
        return any(o.acquired for o in self.outcomes.values())


def _acknowledgements(partition: Any) -> list[AcknowledgementBatch]:
    return [
        AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
        for b in partition.acknowledgement_batches
    ]


class ShareManager:
    def __init__(self, ctx: BrokerContext, config: ShareManagerConfig) -> None:
        self.ctx = ctx
        self.config = config
        self.partitions: dict[ShareKey, SharePartition] = {}
        # The leader epoch each share partition was loaded at; a change means another leader may have
        # written its state since, so it is loaded again.
        self.leader_epochs: dict[ShareKey, int] = {}
        # The state epoch each was loaded at (the group coordinator bumps it to start the state over).
        self.state_epochs: dict[ShareKey, int] = {}
        # Changes made to each share partition's durable state, and how many of them a write holds.
        self.versions: dict[ShareKey, int] = {}
        self.durable_versions: dict[ShareKey, int] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        # Records acknowledged, by type (Kafka's ShareGroupMetrics RecordAcknowledgementsPerSec).
        self.acknowledged_records: Counter[AcknowledgeType] = Counter()
        self._group_configs: Mapping[str, Mapping[str, str]] = {}

    def set_group_configs(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        self._group_configs = configs

    def _group_config(self, group_id: str) -> Mapping[str, str]:
        return self._group_configs.get(group_id, {})

    def record_lock_duration_ms(self, group_id: str) -> int:
        return group_config_int(
            self._group_config(group_id), "share.record.lock.duration.ms", self.config.record_lock_duration_ms
        )

    # --- sessions ------------------------------------------------------------------------------------

    def _session(
        self, group_id: str, member_id: str, epoch: int, *, may_open: bool, connection_id: str = ""
    ) -> tuple[ShareSession | None, ErrorCode]:
        key = (group_id, member_id)
        if epoch == INITIAL_SESSION_EPOCH:
            if not may_open:
                return None, ErrorCode.INVALID_SHARE_SESSION_EPOCH
            if key not in self.sessions and len(self.sessions) >= MAX_SHARE_SESSIONS:
                return None, ErrorCode.SHARE_SESSION_LIMIT_REACHED
            opened = self.sessions[key] = ShareSession(group_id, member_id, 1, connection_id=connection_id)
            return opened, ErrorCode.NONE
        session = self.sessions.get(key)
        if session is None:
            return None, ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch == FINAL_SESSION_EPOCH:
            return session, ErrorCode.NONE
        if epoch != session.next_epoch:
            return None, ErrorCode.INVALID_SHARE_SESSION_EPOCH
        session.next_epoch = 1 if epoch == 2**31 - 1 else epoch + 1
        return session, ErrorCode.NONE

    def _close(self, session: ShareSession) -> None:
        """End a share session, releasing what its member holds."""
        self.sessions.pop((session.group_id, session.member_id), None)
        for topic_id, index in session.partitions:
            key = (session.group_id, topic_id, index)
            sp = self.partitions.get(key)
            if sp is not None and sp.release_member(session.member_id):
                self._changed(key)

    def unload_idle_groups(self) -> None:
        """Take out of memory the share partitions of groups without a share session here (Kafka's
        ShareGroupListener.onGroupEmpty), once what is durable of them is written (the shell calls
        this after its writes): nothing is held, and the next fetch loads their state afresh (it may
        have been started over meanwhile: AlterShareGroupOffsets needs an empty group)."""
        active = {group_id for group_id, _ in self.sessions}
        for key in [k for k in self.partitions if k[0] not in active]:
            if self.is_durable(key, self.versions.get(key, 0)):
                self.unload(key)

    def connection_closed(self, connection_id: str) -> bool:
        """A client connection closed: the share sessions it opened end and their members' records are
        released at once, not when their locks expire (Kafka 4.1+'s ShareSessionCache
        ClientConnectionDisconnectListener calling ShareGroupListener.onMemberLeave, so a consumer killed
        -9 holds nothing for the lock duration). A session its member opened again on another
        connection since is not this connection's (Kafka marks the old mapping stale). Whether any
        session ended."""
        closed = [s for s in self.sessions.values() if connection_id and s.connection_id == connection_id]
        for session in closed:
            self.member_departed(session.group_id, session.member_id)
        return bool(closed)

    def member_departed(self, group_id: str, member_id: str) -> None:
        """The member left its group or its session there expired: its share session here ends and its
        records are released (Kafka's ShareGroupListener.onMemberLeave)."""
        session = self.sessions.get((group_id, member_id))
        if session is not None:
            self._close(session)
        for key, sp in self.partitions.items():
            if key[0] == group_id and sp.release_member(member_id):
                self._changed(key)

    # --- durable state (the shell reads and writes it through the share coordinator) ------------------

    def _changed(self, key: ShareKey) -> None:
        self.versions[key] = self.versions.get(key, 0) + 1

    def missing(self, fetch: FetchContext) -> list[tuple[ShareKey, int]]:
        """(share partition, leader epoch) of the fetch's partitions led here and not loaded yet."""
        session = fetch.session
        if session is None or fetch.max_records <= 0:
            return []
        names = {view.topic_id: name for name, view in self.ctx.cluster.topics.items()}
        out = []
        for topic_id, index in sorted(session.partitions, key=lambda k: (str(k[0]), k[1])):
            key = (session.group_id, topic_id, index)
            name = names.get(topic_id)
            if (
                key in self.partitions
                or name is None
                or led_partition(self.ctx, name, index)[1] != ErrorCode.NONE
            ):
                continue
            out.append((key, self.ctx.cluster.topics[name].partitions[index].leader_epoch))
        return out

    def load(
        self, key: ShareKey, leader_epoch: int, state: tuple[int, int, list[StateBatch]] | None, now_ms: int
    ) -> None:
        """A share partition from its durable state (state epoch, start offset, state batches), or new:
        its start offset from share.auto.offset.reset, to be written before anything is acquired."""
        group_id, topic_id, index = key
        names = {view.topic_id: name for name, view in self.ctx.cluster.topics.items()}
        name = names.get(topic_id)
        part = led_partition(self.ctx, name, index)[0] if name is not None else None
        if part is None or key in self.partitions:
            return
        config = SharePartitionConfig(
            record_lock_duration_ms=self.record_lock_duration_ms(group_id),
            delivery_count_limit=self.config.delivery_count_limit,
            max_in_flight_records=self.config.partition_max_record_locks,
        )
        if state is None:
            self.partitions[key] = SharePartition(self._initial_offset(group_id, part, now_ms), config)
            self.state_epochs[key] = 0
            self._changed(key)
        else:
            self.state_epochs[key] = state[0]
            self.partitions[key] = SharePartition.from_state(state[1], state[2], config)
            self.durable_versions[key] = self.versions.get(key, 0)
        self.leader_epochs[key] = leader_epoch

    def unload(self, key: ShareKey) -> None:
        """Forget a share partition (its state was started over elsewhere): the next fetch loads it."""
        self.partitions.pop(key, None)
        self.leader_epochs.pop(key, None)

    def unwritten(self) -> list[ShareKey]:
        """Share partitions with changes no write holds yet."""
        return [
            k
            for k, v in self.versions.items()
            if v > self.durable_versions.get(k, 0) and k in self.partitions
        ]

    def durable_state(self, key: ShareKey) -> tuple[int, int, int, int, list[StateBatch]] | None:
        """(change count, state epoch, leader epoch, start offset, state batches) to write, or None if
        not loaded."""
        sp = self.partitions.get(key)
        if sp is None:
            return None
        return (
            self.versions.get(key, 0),
            self.state_epochs[key],
            self.leader_epochs[key],
            sp.start_offset,
            sp.state_batches(),
        )

    def written(self, key: ShareKey, version: int) -> None:
        self.durable_versions[key] = max(self.durable_versions.get(key, 0), version)

    def is_durable(self, key: ShareKey, version: int) -> bool:
        return self.durable_versions.get(key, 0) >= version

    # --- locks ---------------------------------------------------------------------------------------

    def expire_locks(self, now_ms: int) -> int:
        expired = 0
        for key, sp in self.partitions.items():
            count = sp.expire_locks(now_ms)
            if count:
                self._changed(key)
                expired += count
        return expired

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for sp in self.partitions.values() if (d := sp.next_deadline_ms()) is not None]
        return min(deadlines) if deadlines else None

    def drop_unled(self) -> None:
        """Forget the share partitions of topic partitions this node no longer leads, or leads at a new
        leader epoch (another leader may have written their state since): a new image."""
        names = {view.topic_id: name for name, view in self.ctx.cluster.topics.items()}
        for key in list(self.partitions):
            _, topic_id, index = key
            name = names.get(topic_id)
            if (
                name is None
                or led_partition(self.ctx, name, index)[1] != ErrorCode.NONE
                or self.ctx.cluster.topics[name].partitions[index].leader_epoch != self.leader_epochs.get(key)
            ):
                del self.partitions[key]
                self.leader_epochs.pop(key, None)

    # --- ShareFetch ----------------------------------------------------------------------------------

    def begin_fetch(self, request: Any, now_ms: int, connection_id: str = "") -> FetchContext:
        """The session step and the acknowledgements of a ShareFetch (once per request), which came on
        the client connection ``connection_id``."""
        group_id, member_id = request.group_id or "", request.member_id or ""
        epoch = request.share_session_epoch
        if not group_id:
            return FetchContext(ErrorCode.INVALID_GROUP_ID, "Group id must be set.")
        if not member_id:
            return FetchContext(ErrorCode.INVALID_REQUEST, "Member id must be set.")
        has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
        if epoch == INITIAL_SESSION_EPOCH and has_acks:
            return FetchContext(ErrorCode.INVALID_REQUEST, "Acknowledge data present on initial fetch.")
        session, error = self._session(group_id, member_id, epoch, may_open=True, connection_id=connection_id)
        if session is None:
            return FetchContext(error)
        fetch = FetchContext(
            ErrorCode.NONE, session=session, max_records=max(request.max_records, 0), group_id=group_id
        )
        for topic in request.topics:
            for p in topic.partitions:
                tp = (topic.topic_id, p.partition_index)
                if epoch != FINAL_SESSION_EPOCH:
                    session.partitions.add(tp)
                if p.acknowledgement_batches:
                    self._acknowledge_into(fetch, session, tp, _acknowledgements(p), now_ms)
        for forgotten in request.forgotten_topics_data:
            for index in forgotten.partitions:
                session.partitions.discard((forgotten.topic_id, index))
        if epoch == FINAL_SESSION_EPOCH:
            self._close(session)
            fetch.max_records = 0
        return fetch

    def acquire(self, fetch: FetchContext, now_ms: int) -> None:
        """Read and acquire records of every partition of the fetch's session (repeated while the
        request long-polls, until something is acquired)."""
        session = fetch.session
        if session is None or fetch.max_records <= 0:
            return
        self.expire_locks(now_ms)
        names = {view.topic_id: name for name, view in self.ctx.cluster.topics.items()}
        for tp in sorted(session.partitions, key=lambda k: (str(k[0]), k[1])):
            if fetch.max_records <= 0:
                break
            outcome = fetch.outcomes.setdefault(tp, PartitionOutcome())
            if outcome.acquired:
                continue
            self._read_partition(session, tp, names.get(tp[0]), outcome, fetch, now_ms)

    def _read_partition(
        self,
        session: ShareSession,
        tp: TopicPartition,
        name: str | None,
        outcome: PartitionOutcome,
        fetch: FetchContext,
        now_ms: int,
    ) -> None:
        if name is None:
            outcome.error_code = ErrorCode.UNKNOWN_TOPIC_ID
            return
        if not allowed(AclOperation.READ, ResourceType.TOPIC, name):
            outcome.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            return
        part, error = led_partition(self.ctx, name, tp[1])
        view = (
            self.ctx.cluster.topics[name].partitions[tp[1]]
            if error != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else None
        )
        if view is not None:
            outcome.leader_id, outcome.leader_epoch = view.leader_id, view.leader_epoch
        if part is None:
            outcome.error_code = error
            return
        sp = self.partitions.get((session.group_id, tp[0], tp[1]))
        if sp is None or not sp.can_acquire():
            return
        read_committed = self._group_config(session.group_id).get("share.isolation.level") == "read_committed"
        offset = max(sp.next_fetch_offset(), part.log.log_start_offset)
        read = self.ctx.replicas.read(
            part, offset, PARTITION_READ_BYTES, min_one_batch=True, isolation_level=1 if read_committed else 0
        )
        if read.error_code != ErrorCode.NONE:
            outcome.error_code = read.error_code
            return
        chunk = b"".join(bytes(c) for c in read.chunks)
        if not chunk:
            return
        batches = list(scan_batches(chunk, check_crc=False))
        if not batches:
            return
        deliverable = committed_batches(chunk, batches, read.aborted_transactions if read_committed else None)
        runs = [(h.base_offset, h.last_offset) for _, h in deliverable]
        acquired = sp.acquire(session.member_id, runs, batches[-1][1].next_offset, fetch.max_records, now_ms)
        if not acquired:
            return
        fetch.max_records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
        outcome.acquired = acquired
        # The whole batches holding acquired records: the client delivers only the acquired offsets.
        outcome.records = b"".join(
            chunk[pos : pos + h.size_in_bytes]
            for pos, h in deliverable
            if any(a.first_offset <= h.last_offset and a.last_offset >= h.base_offset for a in acquired)
        )

    def _initial_offset(self, group_id: str, part: Any, now_ms: int) -> int:
        """The SPSO of a share partition new to its group: share.auto.offset.reset (Kafka's
        ShareGroupAutoOffsetResetStrategy; ``latest`` unless the group says otherwise)."""
        log = part.log
        reset = self._group_config(group_id).get("share.auto.offset.reset", "latest").strip().lower()
        if reset == "earliest":
            return int(log.log_start_offset)
        if reset.startswith("by_duration:"):
            back_ns = duration_ns(reset[len("by_duration:") :]) or 0
            found = log.offset_for_timestamp(now_ms - back_ns // 1_000_000)
            return int(found[0]) if found is not None else int(log.high_watermark)
        return int(log.high_watermark)

    def _acknowledge(
        self, session: ShareSession, tp: TopicPartition, batches: list[AcknowledgementBatch], now_ms: int
    ) -> ErrorCode:
        names = {view.topic_id: name for name, view in self.ctx.cluster.topics.items()}
        name = names.get(tp[0])
        if name is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        if not allowed(AclOperation.READ, ResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        _, error = led_partition(self.ctx, name, tp[1])
        if error != ErrorCode.NONE:
            return error
        key = (session.group_id, tp[0], tp[1])
        sp = self.partitions.get(key)
        if sp is None:
            return ErrorCode.INVALID_RECORD_STATE
        if sp.expire_locks(now_ms):
            self._changed(key)
        error = sp.acknowledge(session.member_id, batches, now_ms)
        if error == ErrorCode.NONE:
            self._changed(key)
            for batch in batches:
                types = batch.acknowledge_types
                if len(types) == 1:
                    types = types * (batch.last_offset - batch.first_offset + 1)
                self.acknowledged_records.update(
                    AcknowledgeType(t) for t in types if t != AcknowledgeType.GAP
                )
        return error

    def _acknowledge_into(
        self,
        context: FetchContext,
        session: ShareSession,
        tp: TopicPartition,
        batches: list[AcknowledgementBatch],
        now_ms: int,
    ) -> None:
        outcome = context.outcomes.setdefault(tp, PartitionOutcome())
        outcome.acknowledged = True
        outcome.acknowledge_error_code = self._acknowledge(session, tp, batches, now_ms)
        outcome.acknowledged_version = self.versions.get((session.group_id, tp[0], tp[1]), 0)
        names = {view.topic_id: name for name, view in self.ctx.cluster.topics.items()}
        name = names.get(tp[0])
        if name is not None and 0 <= tp[1] < len(self.ctx.cluster.topics[name].partitions):
            view = self.ctx.cluster.topics[name].partitions[tp[1]]
            outcome.leader_id, outcome.leader_epoch = view.leader_id, view.leader_epoch

    def fetch_response(self, fetch: FetchContext, version: int, group_id: str) -> Any:
        topic_cls: Any = ShareFetchResponse.ShareFetchableTopicResponse
        partition_cls: Any = topic_cls.PartitionData
        by_topic: dict[uuid.UUID, list[Any]] = {}
        for (topic_id, index), o in sorted(fetch.outcomes.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            if not (o.acquired or o.error_code or o.acknowledged):
                continue
            by_topic.setdefault(topic_id, []).append(
                partition_cls(
                    partition_index=index,
                    error_code=o.error_code,
                    error_message=None,
                    acknowledge_error_code=o.acknowledge_error_code,
                    acknowledge_error_message=None,
                    current_leader=partition_cls.LeaderIdAndEpoch(
                        leader_id=o.leader_id, leader_epoch=o.leader_epoch
                    ),
                    records=o.records,
                    acquired_records=[
                        partition_cls.AcquiredRecords(
                            first_offset=a.first_offset,
                            last_offset=a.last_offset,
                            delivery_count=a.delivery_count,
                        )
                        for a in o.acquired
                    ],
                )
            )
        return ShareFetchResponse(
            version=version,
            throttle_time_ms=0,
            error_code=fetch.error_code,
            error_message=fetch.error_message,
            acquisition_lock_timeout_ms=self.record_lock_duration_ms(group_id),
            responses=[topic_cls(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
            node_endpoints=[],
        )

    # --- ShareAcknowledge ----------------------------------------------------------------------------

    def begin_acknowledge(self, request: Any, now_ms: int) -> FetchContext:
        """The session step and the acknowledgements of a ShareAcknowledge."""
        group_id, member_id = request.group_id or "", request.member_id or ""
        epoch = request.share_session_epoch
        if not group_id:
            return FetchContext(ErrorCode.INVALID_GROUP_ID, "Group id must be set.")
        if not member_id:
            return FetchContext(ErrorCode.INVALID_REQUEST, "Member id must be set.")
        session, error = self._session(group_id, member_id, epoch, may_open=False)
        if session is None:
            return FetchContext(error, group_id=group_id)
        context = FetchContext(ErrorCode.NONE, session=session, group_id=group_id)
        for topic in request.topics:
            for p in topic.partitions:
                self._acknowledge_into(
                    context, session, (topic.topic_id, p.partition_index), _acknowledgements(p), now_ms
                )
        if epoch == FINAL_SESSION_EPOCH:
            self._close(session)
        return context

    def acknowledge_response(self, context: FetchContext, version: int) -> Any:
        topic_cls: Any = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
        partition_cls: Any = topic_cls.PartitionData
        by_topic: dict[uuid.UUID, list[Any]] = {}
        for (topic_id, index), o in context.outcomes.items():
            by_topic.setdefault(topic_id, []).append(
                partition_cls(
                    partition_index=index,
                    error_code=o.acknowledge_error_code,
                    error_message=None,
                    current_leader=partition_cls.LeaderIdAndEpoch(
                        leader_id=o.leader_id, leader_epoch=o.leader_epoch
                    ),
                )
            )
        return ShareAcknowledgeResponse(
            version=version,
            throttle_time_ms=0,
            error_code=context.error_code,
            error_message=context.error_message,
            acquisition_lock_timeout_ms=self.record_lock_duration_ms(context.group_id),
            responses=[topic_cls(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
            node_endpoints=[],
        )
