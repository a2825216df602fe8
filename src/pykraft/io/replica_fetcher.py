"""Followers fetch from leaders (issue 14; Kafka's ReplicaFetcherThread, one per leader broker).

For every leader this broker follows some partition of, one task sends Fetch (replica_id = this broker,
``replica.fetch.wait.max.ms``, ``replica.fetch.max.bytes``, each partition's last fetched epoch and the
leader epoch it knows) over the shared ``RpcClient``, and hands each partition's answer to the pure
ReplicaManager: append the batches exactly as the leader stored them, truncate a divergent tail
(DivergingEpoch, KIP-320), start over past the leader's log start (OFFSET_OUT_OF_RANGE), take the
leader's high watermark. The follower replication throttle (KIP-73, broker/replication_quota.py)
leaves throttled partitions not in the ISR out of a Fetch while its rate is over the limit. Which partitions follow which leader comes from the metadata image
(``update``); an error that means "your view is stale" (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN leader
epoch) just waits for the next image. Each leader's fetches go through a KIP-227 session
(broker/fetch_sessions.py): after the first, a fetch names only the partitions whose position moved.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from kafka.protocol.consumer import FetchRequest

from pykraft.broker.fetch_sessions import FollowerFetch, FollowerFetchSession, PartitionFetch
from pykraft.broker.replica_manager import Partition, ReplicaManager
from pykraft.broker.replication_quota import follower_quota
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode
from pykraft.io.rpc_channel import ChannelSecurity, PeerUnavailable, RpcClient
from pykraft.io.waiting import wait_event
from pykraft.protocol.fetch import FetchResponseData, decode_fetch_response
from pykraft.protocol.wire import WireFormatError

log = logging.getLogger("pykraft.replication")

REPLICA_FETCH_VERSION = 12  # the first with DivergingEpoch (KIP-320) and LastFetchedEpoch
# Consumers' fetch answers hold at most this many bytes in all (Kafka replica.fetch.response.max.bytes).
REPLICA_FETCH_RESPONSE_MAX_BYTES = 10 << 20


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ReplicaFetchers:
    def __init__(
        self,
        config: NodeConfig,
        replicas: ReplicaManager,
        rng: random.Random,
        *,
        on_high_watermark: Callable[[Partition], None],
        broker_security: ChannelSecurity | None = None,
    ) -> None:
        self.config = config
        self.replicas = replicas
        self.on_high_watermark = on_high_watermark
        self.client = RpcClient(
            {},
            client_id=f"replica-fetcher-{config.node_id}",
            request_timeout_ms=max(30_000, config.replica_fetch_wait_max_ms + 5_000),
            rng=rng,
            security=broker_security,
        )
        # leader id -> (topic, partition) this broker follows on it
        self._assigned: dict[int, set[tuple[str, int]]] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._changed: dict[int, asyncio.Event] = {}
        # The follower replication throttle; the node updates it from each image.
        self.quota = follower_quota()
        # After close() nothing fetches again: an update then would append to logs being closed.
        self._closed = False

    def update(
        self, followed: dict[int, set[tuple[str, int]]], addresses: dict[int, tuple[str, int]]
    ) -> None:
        """The partitions to follow, by leader, and the leaders' addresses, from a new image."""
        if self._closed:
            return
        for leader_id, address in addresses.items():
            self.client.channels.set_address(leader_id, address)
        for leader_id in list(self._tasks):
            if leader_id not in followed:
                self._tasks.pop(leader_id).cancel()
                self._assigned.pop(leader_id, None)
                self._changed.pop(leader_id, None)
        for leader_id, partitions in followed.items():
            if self._assigned.get(leader_id) != partitions:
                self._assigned[leader_id] = set(partitions)
                self._changed.setdefault(leader_id, asyncio.Event()).set()
            if leader_id not in self._tasks:
                self._tasks[leader_id] = asyncio.get_running_loop().create_task(
                    self._run(leader_id), name=f"replica-fetcher-{leader_id}"
                )

    async def close(self) -> None:
        self._closed = True
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.client.close()

    # --- one leader ---------------------------------------------------------------------------------

    async def _run(self, leader_id: int) -> None:
        backoff_s = self.config.replica_fetch_backoff_ms / 1000
        changed = self._changed.setdefault(leader_id, asyncio.Event())
        node_id = self.config.node_id
        session = FollowerFetchSession()
        while True:
            changed.clear()
            now = now_ms()
            parts = [
                p
                for key in sorted(self._assigned.get(leader_id, ()))
                if (p := self.replicas.get(*key)) is not None
                and p.replication.leader_id == leader_id
                # A partition whose log dir is offline is not fetched (Kafka's handleLogDirFailure
                # removes it from the fetchers): each answer could only fail to be written.
                and not self.replicas.is_offline(*key)
            ]
            if not parts:
                await changed.wait()
                continue
            # AbstractFetcherThread.buildFetch: a throttled partition out of the ISR waits while the
            # follower quota is exceeded (shouldFollowerThrottle); with none left, back off as Kafka's
            # fetcher does with nothing to fetch.
            parts = [
                p
                for p in parts
                if not self.quota.should_throttle(
                    p.topic, p.partition_index, node_id in p.replication.isr, now
                )
            ]
            if not parts:
                await wait_event(changed, backoff_s)
                continue
            # The leadership each partition is fetched under: an answer is used only if it still holds.
            sent = {(p.topic, p.partition_index): (p, p.replication.leader_epoch) for p in parts}
            fetch = session.build(
                {
                    (p.topic, p.partition_index): PartitionFetch(
                        p.partition_index,
                        p.replication.leader_epoch,
                        p.log.log_end_offset,
                        p.epochs.latest_epoch,
                        p.log.log_start_offset,
                        self.config.replica_fetch_max_bytes,
                    )
                    for p in parts
                }
            )
            try:
                frame = await self.client.call_for_frame(
                    leader_id,
                    replica_fetch_request(fetch, node_id, self.config.replica_fetch_wait_max_ms),
                    REPLICA_FETCH_VERSION,
                )
                response = decode_fetch_response(frame, REPLICA_FETCH_VERSION)
            except (PeerUnavailable, WireFormatError) as exc:
                session.failed()
                log.debug("fetching from broker %d: %s", leader_id, exc)
                await wait_event(changed, backoff_s)
                continue
            session.answered(response.error_code, response.session_id)
            if response.error_code != ErrorCode.NONE:
                # The leader lost the session or saw an epoch out of turn: a full fetch at once.
                log.debug("fetch session with broker %d: %s", leader_id, ErrorCode(response.error_code).name)
                continue
            if not self._apply(leader_id, sent, response):
                # Every partition answered with an error: wait for the next image (or the backoff).
                await wait_event(changed, backoff_s)

    def _apply(
        self,
        leader_id: int,
        sent: dict[tuple[str, int], tuple[Partition, int]],
        response: FetchResponseData,
    ) -> bool:
        """Each partition's answer into the ReplicaManager; True if any made progress or is fine (one an
        incremental answer leaves out: nothing changed for it on the leader)."""
        progressed = sum(len(topic.partitions) for topic in response.topics) < len(sent)
        now = now_ms()
        for topic in response.topics:
            for data in topic.partitions:
                key = (topic.topic, data.partition_index)
                part, leader_epoch = sent.get(key, (None, -1))
                if (
                    part is None
                    or self.replicas.get(*key) is not part
                    or part.replication.leader_id != leader_id
                    or part.replication.leader_epoch != leader_epoch
                ):
                    continue  # the leadership changed while the fetch was out: the answer is stale
                error = ErrorCode(data.error_code)
                diverging = data.diverging_epoch
                if error is ErrorCode.NONE and diverging is not None and diverging[0] >= 0:
                    before = part.log.log_end_offset
                    end = self.replicas.truncate_for_divergence(part, *diverging, now)
                    log.info(
                        "%s-%d: log diverged from leader %d at epoch %d; truncated from %d to %d",
                        part.topic,
                        part.partition_index,
                        leader_id,
                        diverging[0],
                        before,
                        end,
                    )
                    progressed = True
                    continue
                if error is ErrorCode.OFFSET_OUT_OF_RANGE and data.log_start_offset > part.log.log_end_offset:
                    log.info(
                        "%s-%d: the leader's log starts at %d, past our end %d; starting over there",
                        part.topic,
                        part.partition_index,
                        data.log_start_offset,
                        part.log.log_end_offset,
                    )
                    self.replicas.restart_at(part, data.log_start_offset, now)
                    progressed = True
                    continue
                if error is not ErrorCode.NONE:
                    log.debug(
                        "%s-%d from leader %d: %s", part.topic, part.partition_index, leader_id, error.name
                    )
                    continue
                # One chunk at most: the records of the answer, a view of the received frame.
                records = data.records[0] if data.records else None
                if self.quota.is_throttled(*key):
                    # ReplicaFetcherThread.processPartitionData records every throttled byte fetched.
                    self.quota.record(len(records) if records else 0, now)
                if records:
                    appended = self.replicas.append_as_follower(part, records, now)
                    if appended is not ErrorCode.NONE:
                        log.warning(
                            "%s-%d: batches from leader %d not appended: %s",
                            part.topic,
                            part.partition_index,
                            leader_id,
                            appended.name,
                        )
                        continue
                if self.replicas.update_follower_high_watermark(part, data.high_watermark):
                    self.on_high_watermark(part)
                self.replicas.follow_leader_log_start(part, data.log_start_offset)
                progressed = True
        return progressed


def replica_fetch_request(fetch: FollowerFetch, replica_id: int, max_wait_ms: int) -> Any:
    """The FetchRequest (v12) of one follower fetch through its session (broker/fetch_sessions.py)."""
    by_topic: dict[str, list[Any]] = {}
    for topic, p in fetch.partitions:
        by_topic.setdefault(topic, []).append(
            FetchRequest.FetchTopic.FetchPartition(
                partition=p.partition,
                current_leader_epoch=p.current_leader_epoch,
                fetch_offset=p.fetch_offset,
                last_fetched_epoch=p.last_fetched_epoch,
                log_start_offset=p.log_start_offset,
                partition_max_bytes=p.partition_max_bytes,
            )
        )
    forgotten: dict[str, list[int]] = {}
    for topic, index in fetch.forgotten:
        forgotten.setdefault(topic, []).append(index)
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=REPLICA_FETCH_RESPONSE_MAX_BYTES,
        isolation_level=0,
        session_id=fetch.session_id,
        session_epoch=fetch.session_epoch,
        topics=[FetchRequest.FetchTopic(topic=t, partitions=ps) for t, ps in sorted(by_topic.items())],
        forgotten_topics_data=[
            FetchRequest.ForgottenTopic(topic=t, partitions=ps) for t, ps in sorted(forgotten.items())
        ],
        rack_id="",
    )


__all__ = ["ReplicaFetchers", "replica_fetch_request"]
