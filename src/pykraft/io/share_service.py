"""The shell around share fetching (KIP-932): ShareFetch long-polls here, as Kafka's DelayedShareFetch
in the share-fetch purgatory, around the pure :class:`ShareManager` (broker/share_fetch.py), and share
partitions' state goes to and comes from their share coordinator (io/share_state_service.py).

A ShareFetch that acquires nothing waits, up to its MaxWaitMs, for new data in any partition (the
node's produce notification), for records another member released, or for the next acquisition lock
to expire, then tries again. Acknowledgements are answered once their share partition's state holding
them is written (one write at a time per share partition, each carrying everything changed before it,
so a later write never loses an earlier one). A member the group coordinator here removed (session
expired), or whose connection that opened its share session closed, has its share session closed and its
records released.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pykraft.broker.handlers import BrokerContext
from pykraft.broker.share_fetch import FetchContext, ShareKey, ShareManager, ShareManagerConfig
from pykraft.coordinator.share_state import ShareStateKey
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode
from pykraft.io.server import ConnectionInfo
from pykraft.io.share_state_service import ShareStateService
from pykraft.metadata.image import CONFIG_RESOURCE_TYPE_GROUP, ConfigurationsImage
from pykraft.protocol.messages import ApiKey

RequestHandler = Callable[[Any, int], Awaitable[Any]]
# The client connection a ShareFetch came on (set by the node for that request's task).
CURRENT_CONNECTION: contextvars.ContextVar[ConnectionInfo] = contextvars.ContextVar(
    "pykraft_share_connection"
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _state_key(key: ShareKey) -> ShareStateKey:
    return ShareStateKey(*key)


class ShareService:
    def __init__(
        self,
        config: NodeConfig,
        ctx: BrokerContext,
        persister: ShareStateService,
        wait_for_data: Callable[[float], Awaitable[None]],
        notify_data: Callable[[], None],
    ) -> None:
        self.manager = ShareManager(
            ctx,
            ShareManagerConfig(
                record_lock_duration_ms=config.group_share_record_lock_duration_ms,
                delivery_count_limit=config.group_share_delivery_count_limit,
                partition_max_record_locks=config.group_share_partition_max_record_locks,
            ),
        )
        self.persister = persister
        self._wait_for_data = wait_for_data
        self._notify_data = notify_data
        self._configs: ConfigurationsImage | None = None
        self._write_locks: dict[ShareKey, asyncio.Lock] = {}

    def request_handlers(self) -> dict[int, RequestHandler]:
        return {ApiKey.SHARE_FETCH: self.share_fetch, ApiKey.SHARE_ACKNOWLEDGE: self.share_acknowledge}

    def on_image(self, configs: ConfigurationsImage) -> None:
        """The group configs (share.auto.offset.reset, share.isolation.level, lock duration) and which
        partitions this node still leads."""
        if configs is not self._configs:
            self._configs = configs
            self.manager.set_group_configs(
                {
                    resource.resource_name: values
                    for resource, values in configs.resources.items()
                    if resource.resource_type == CONFIG_RESOURCE_TYPE_GROUP
                }
            )
        self.manager.drop_unled()

    def member_departed(self, group_id: str, member_id: str) -> None:
        self.manager.member_departed(group_id, member_id)
        self._released()

    def connection_closed(self, connection_id: str) -> None:
        if self.manager.connection_closed(connection_id):
            self._released()

    def _released(self) -> None:
        self._notify_data()  # released records: long-polling fetches of the others may take them
        self.manager.unload_idle_groups()

    # --- durable state ---------------------------------------------------------------------------------

    async def _write(self, key: ShareKey, version: int) -> ErrorCode:
        """Make the share partition's state durable up to ``version`` (one write at a time per share
        partition; the write carries its state as it is when the write starts)."""
        lock = self._write_locks.setdefault(key, asyncio.Lock())
        async with lock:
            if self.manager.is_durable(key, version):
                return ErrorCode.NONE
            state = self.manager.durable_state(key)
            if state is None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            current, state_epoch, leader_epoch, start_offset, batches = state
            error = await self.persister.write(
                _state_key(key), state_epoch, leader_epoch, start_offset, batches
            )
            if error == ErrorCode.NONE:
                self.manager.written(key, current)
            else:
                # What this node holds is not what is durable: a write refused or unanswered (its
                # acknowledgements answered with the error must not stand, as Kafka's SharePartition
                # rolls them back), or the state was started over (AlterShareGroupOffsets) or written by
                # another leader since (fenced). The next fetch loads the durable state again.
                self.manager.unload(key)
            return error

    async def _persist_acknowledgements(self, context: FetchContext) -> None:
        """Answer each partition's acknowledgements with the error of the write holding them."""
        outcomes = [
            ((context.group_id, topic_id, index), outcome)
            for (topic_id, index), outcome in context.outcomes.items()
            if outcome.acknowledged and outcome.acknowledge_error_code == ErrorCode.NONE
        ]
        # The share partitions' writes go to their coordinators at once, not one after another.
        errors = await asyncio.gather(*(self._write(key, o.acknowledged_version) for key, o in outcomes))
        for (_, outcome), error in zip(outcomes, errors, strict=True):
            outcome.acknowledge_error_code = error
        # Lock expiries and releases are written too (best effort: a later write carries them anyway).
        for key in self.manager.unwritten():
            await self._write(key, self.manager.versions.get(key, 0))
        self.manager.unload_idle_groups()

    async def _load(self, context: FetchContext) -> None:
        """Read the state of the fetch's share partitions new to this leader; one never written starts
        per share.auto.offset.reset and is written before any record of it is acquired."""
        for key, leader_epoch in self.manager.missing(context):
            error, snapshot = await self.persister.read(_state_key(key), leader_epoch)
            if error != ErrorCode.NONE:
                continue  # the coordinator is moving or loading: a later fetch tries again
            state = (
                None
                if snapshot is None
                else (snapshot.state_epoch, snapshot.start_offset, list(snapshot.state_batches))
            )
            self.manager.load(key, leader_epoch, state, now_ms())
            if (
                snapshot is None
                and await self._write(key, self.manager.versions.get(key, 0)) != ErrorCode.NONE
            ):
                self.manager.partitions.pop(key, None)

    # --- handlers -------------------------------------------------------------------------------------

    async def share_fetch(self, request: Any, version: int) -> Any:
        conn = CURRENT_CONNECTION.get(None)
        fetch = self.manager.begin_fetch(request, now_ms(), conn.connection_id if conn is not None else "")
        if conn is not None and fetch.session is not None:
            conn.on_close.setdefault(
                "share sessions", functools.partial(self.connection_closed, conn.connection_id)
            )
        await self._persist_acknowledgements(fetch)
        if any(o.acknowledged for o in fetch.outcomes.values()) or request.share_session_epoch == -1:
            self._notify_data()  # released records: long-polling fetches of the others may take them
        deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
        while fetch.error_code == ErrorCode.NONE:
            await self._load(fetch)
            self.manager.acquire(fetch, now_ms())
            remaining_s = deadline - time.monotonic()
            if fetch.acquired_any or fetch.max_records <= 0 or remaining_s <= 0:
                break
            if any(o.error_code != ErrorCode.NONE for o in fetch.outcomes.values()):
                break
            wait_s = remaining_s
            lock_deadline_ms = self.manager.next_deadline_ms()
            if lock_deadline_ms is not None:
                wait_s = min(wait_s, max((lock_deadline_ms - now_ms()) / 1000, 0.001))
            await self._wait_for_data(wait_s)
        return self.manager.fetch_response(fetch, version, request.group_id or "")

    async def share_acknowledge(self, request: Any, version: int) -> Any:
        context = self.manager.begin_acknowledge(request, now_ms())
        await self._persist_acknowledgements(context)
        self._notify_data()
        return self.manager.acknowledge_response(context, version)
