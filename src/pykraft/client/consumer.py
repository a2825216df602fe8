"""A small assign()-style asyncio consumer: positions you set, Fetch v11 with an isolation level.

``read_committed`` reads up to the last stable offset and drops the records of aborted transactions with
the Java client's algorithm (``protocol.records.committed_batches``). Control batches are never
returned.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)

from pykraft.client.connection import Connection, ConnectionSecurity
from pykraft.client.errors import ConnectionLost, KafkaClientError
from pykraft.client.producer import parse_bootstrap
from pykraft.core.errors import ErrorCode
from pykraft.core.partitions import by_topic as group_by_topic
from pykraft.protocol.records import committed_batches, decode_records, scan_batches

TopicPartition = tuple[str, int]
FETCH_VERSION = 11
READ_UNCOMMITTED = 0
READ_COMMITTED = 1
_ISOLATION = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    # The batch's timestamp type: 0 CreateTime, 1 LogAppendTime (what the console consumer prints).
    timestamp_type: int = 0


def committed_records(
    topic: str, partition: int, records: bytes, aborted: list[tuple[int, int]] | None, fetch_offset: int
) -> list[ConsumerRecord]:
    """The records of a Fetch answer a consumer may see (:func:`committed_batches`), at or past
    ``fetch_offset``."""
    out: list[ConsumerRecord] = []
    for position, header in committed_batches(records, list(scan_batches(records, check_crc=True)), aborted):
        for record in decode_records(records[position : position + header.size_in_bytes]):
            if record.offset >= fetch_offset:
                out.append(
                    ConsumerRecord(
                        topic,
                        partition,
                        record.offset,
                        record.key,
                        record.value,
                        record.headers,
                        record.timestamp,
                        header.timestamp_type,
                    )
                )
    return out


class Consumer:
    def __init__(
        self,
        bootstrap_servers: str,
        *,
        isolation_level: str = "read_uncommitted",
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        request_timeout_ms: int = 30000,
        client_id: str = "pykraft-client",
        security: ConnectionSecurity | None = None,
    ) -> None:
        # TLS and SASL for every connection (the tools' --command-config); None: PLAINTEXT.
        self.security = security
        if isolation_level not in _ISOLATION:
            raise ValueError(
                f"isolation_level: {isolation_level!r} is not read_uncommitted or read_committed"
            )
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.isolation_level = _ISOLATION[isolation_level]
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.request_timeout_s = request_timeout_ms / 1000
        self.client_id = client_id
        self._positions: dict[TopicPartition, int] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._connections: dict[int, Connection] = {}

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._positions = {tp: self._positions.get(tp, -1) for tp in partitions}

    def assignment(self) -> list[TopicPartition]:
        return list(self._positions)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp not in self._positions:
            raise KafkaClientError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} is not assigned")
        self._positions[tp] = offset

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps or tuple(self._positions):
            self._positions[tp] = await self._list_offset(tp, -2)

    async def seek_to_end(self, *tps: TopicPartition) -> None:
        for tp in tps or tuple(self._positions):
            self._positions[tp] = await self._list_offset(tp, -1)

    async def position(self, tp: TopicPartition) -> int:
        if self._positions.get(tp, -1) < 0:
            await self.seek_to_beginning(tp)
        return self._positions[tp]

    async def _connection(self, node_id: int) -> Connection:
        conn = self._connections.get(node_id)
        if conn is None or conn.closed:
            host, port = self._brokers[node_id]
            conn = Connection(host, port, client_id=self.client_id, node_id=node_id, security=self.security)
            await conn.connect(self.request_timeout_s)
            self._connections[node_id] = conn
        return conn

    async def _any_connection(self) -> Connection:
        for node_id in list(self._brokers):
            try:
                return await self._connection(node_id)
            except ConnectionLost:
                continue
        host, port = self.bootstrap[0]
        conn = Connection(host, port, client_id=self.client_id, security=self.security)
        await conn.connect(self.request_timeout_s)
        self._connections[-1] = conn
        return conn

    async def _refresh_metadata(self, extra_topics: tuple[str, ...] = ()) -> Any:
        topics = sorted({t for t, _ in self._positions} | set(extra_topics))
        conn = await self._any_connection()
        response = await conn.call(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                allow_auto_topic_creation=False,
            ),
            MetadataResponse,
            9,
            self.request_timeout_s,
        )
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for t in response.topics:
            for p in t.partitions:
                self._leaders[(t.name, p.partition_index)] = p.leader_id
        return response

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids, in order; an unknown topic raises UNKNOWN_TOPIC_OR_PARTITION."""
        response = await self._refresh_metadata((topic,))
        for t in response.topics:
            if t.name == topic:
                if t.error_code:
                    raise KafkaClientError(t.error_code, f"topic {topic!r}")
                return sorted(p.partition_index for p in t.partitions)
        raise KafkaClientError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r}")

    async def _leader(self, tp: TopicPartition) -> Connection:
        if self._leaders.get(tp, -1) < 0:
            await self._refresh_metadata()
        leader = self._leaders.get(tp, -1)
        if leader < 0:
            raise KafkaClientError(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp[0]}-{tp[1]}")
        return await self._connection(leader)

    async def _list_offset(self, tp: TopicPartition, timestamp: int) -> int:
        conn = await self._leader(tp)
        topic_cls: Any = ListOffsetsRequest.ListOffsetsTopic
        response = await conn.call(
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=self.isolation_level,
                topics=[
                    topic_cls(
                        name=tp[0],
                        partitions=[
                            topic_cls.ListOffsetsPartition(
                                partition_index=tp[1], current_leader_epoch=-1, timestamp=timestamp
                            )
                        ],
                    )
                ],
            ),
            ListOffsetsResponse,
            4,
            self.request_timeout_s,
        )
        answer = response.topics[0].partitions[0]
        if answer.error_code:
            self._leaders.pop(tp, None)
            raise KafkaClientError(answer.error_code, f"ListOffsets {tp[0]}-{tp[1]}")
        offset: int = answer.offset
        return offset

    async def getmany(self, timeout_ms: int = 500) -> list[ConsumerRecord]:
        """One Fetch per leader, long-polling up to ``timeout_ms``; positions move past what is returned."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in self._positions:
            await self.position(tp)
            if self._leaders.get(tp, -1) < 0:
                await self._refresh_metadata()
            by_leader.setdefault(self._leaders.get(tp, -1), []).append(tp)
        out: list[ConsumerRecord] = []
        results = await asyncio.gather(
            *(self._fetch(leader, tps, timeout_ms) for leader, tps in by_leader.items() if leader >= 0),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                if isinstance(result, ConnectionLost | KafkaClientError):
                    self._leaders.clear()
                    continue
                raise result
            out += result
        return out

    async def _fetch(self, leader: int, tps: list[TopicPartition], timeout_ms: int) -> list[ConsumerRecord]:
        conn = await self._connection(leader)
        by_topic = group_by_topic(tps)
        topic_cls: Any = FetchRequest.FetchTopic
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=timeout_ms,
            min_bytes=1,
            max_bytes=self.fetch_max_bytes,
            isolation_level=self.isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=[
                topic_cls(
                    topic=topic,
                    partitions=[
                        topic_cls.FetchPartition(
                            partition=p,
                            current_leader_epoch=-1,
                            fetch_offset=self._positions[(topic, p)],
                            log_start_offset=-1,
                            partition_max_bytes=self.max_partition_fetch_bytes,
                        )
                        for p in parts
                    ],
                )
                for topic, parts in by_topic.items()
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        started = time.monotonic()
        response = await conn.call(
            request, FetchResponse, FETCH_VERSION, self.request_timeout_s + timeout_ms / 1000
        )
        out: list[ConsumerRecord] = []
        for topic in response.responses:
            for p in topic.partitions:
                tp = (topic.topic, p.partition_index)
                if p.error_code:
                    self._leaders.pop(tp, None)
                    if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        raise KafkaClientError(p.error_code, f"{tp[0]}-{tp[1]} at {self._positions[tp]}")
                    continue
                aborted = (
                    [(a.producer_id, a.first_offset) for a in p.aborted_transactions or []]
                    if self.isolation_level == READ_COMMITTED
                    else None
                )
                records = bytes(p.records or b"")
                got = committed_records(tp[0], tp[1], records, aborted, self._positions[tp])
                out += got
                # Past everything the answer held, control batches and aborted records included.
                end = self._positions[tp]
                for _, header in scan_batches(records, check_crc=False):
                    end = max(end, header.next_offset)
                self._positions[tp] = end
        del started
        return out

    async def committed(self, group_id: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The group's committed offsets (-1 where none), asked with require_stable (KIP-447)."""
        group_conn = await self._group_coordinator(group_id)
        try:
            by_topic = group_by_topic(tps)
            deadline = time.monotonic() + self.request_timeout_s
            while True:
                response = await group_conn.call(
                    OffsetFetchRequest(
                        group_id=group_id,
                        topics=[
                            OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                            for t, ps in by_topic.items()
                        ],
                        require_stable=True,
                    ),
                    OffsetFetchResponse,
                    7,
                    self.request_timeout_s,
                )
                unstable = any(
                    p.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT
                    for t in response.topics
                    for p in t.partitions
                )
                if not unstable or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            return {
                (t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions
            }
        finally:
            group_conn.close()

    async def _group_coordinator(self, group_id: str) -> Connection:
        """A new connection to ``group_id``'s coordinator (the caller closes it)."""
        conn = await self._any_connection()
        found = await conn.call(
            FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id]),
            FindCoordinatorResponse,
            4,
            self.request_timeout_s,
        )
        coordinator = found.coordinators[0]
        if coordinator.error_code:
            raise KafkaClientError(coordinator.error_code, f"FindCoordinator {group_id}")
        group_conn = Connection(
            coordinator.host, coordinator.port, client_id=self.client_id, security=self.security
        )
        await group_conn.connect(self.request_timeout_s)
        return group_conn

    async def commit(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        """Commit ``offsets`` for ``group_id`` as a consumer without group membership does (generation
        -1, no member id): the coordinator takes it while the group has no members, as Kafka's does for
        assign()-style consumers and the console consumer's ``--group``."""
        if not offsets:
            return
        group_conn = await self._group_coordinator(group_id)
        try:
            response = await group_conn.call(
                memberless_offset_commit(group_id, offsets),
                OffsetCommitResponse,
                8,
                self.request_timeout_s,
            )
        finally:
            group_conn.close()
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    raise KafkaClientError(
                        p.error_code, f"OffsetCommit {group_id} {t.name}-{p.partition_index}"
                    )


def memberless_offset_commit(group_id: str, offsets: dict[TopicPartition, int]) -> Any:
    """OffsetCommit without a generation or member id (-1, ""): what Kafka's admin client and
    assign()-style consumers send; the coordinator takes it while the group has no members."""
    topic_cls: Any = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            topic_cls(
                name=topic,
                partitions=[
                    topic_cls.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=offsets[(topic, p)],
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                    for p in parts
                ],
            )
            for topic, parts in group_by_topic(sorted(offsets)).items()
        ],
    )
