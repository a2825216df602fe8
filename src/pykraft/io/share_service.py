"""The shell around share fetching (KIP-932): ShareFetch long-polls here, as Kafka's DelayedShareFetch
in the share-fetch purgatory, around the pure :class:`ShareManager` (broker/share_fetch.py).

A ShareFetch that acquires nothing waits, up to its MaxWaitMs, for new data in any partition (the
node's produce notification), for records another member released, or for the next acquisition lock
to expire, then tries again. A member the group coordinator here removed (left, session expired) has
its share session closed and its records released.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from pykraft.broker.handlers import BrokerContext
from pykraft.broker.share_fetch import ShareManager, ShareManagerConfig
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode
from pykraft.metadata.image import CONFIG_RESOURCE_TYPE_GROUP, ConfigurationsImage
from pykraft.protocol.messages import ApiKey

RequestHandler = Callable[[Any, int], Awaitable[Any]]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ShareService:
    def __init__(
        self,
        config: NodeConfig,
        ctx: BrokerContext,
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
        self._wait_for_data = wait_for_data
        self._notify_data = notify_data
        self._configs: ConfigurationsImage | None = None

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
        self._notify_data()  # released records: long-polling fetches of the others may take them

    async def share_fetch(self, request: Any, version: int) -> Any:
        fetch = self.manager.begin_fetch(request, now_ms())
        if any(o.acknowledged for o in fetch.outcomes.values()) or request.share_session_epoch == -1:
            self._notify_data()  # released records: long-polling fetches of the others may take them
        deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
        while fetch.error_code == ErrorCode.NONE:
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
        response = self.manager.share_acknowledge(request, version, now_ms())
        self._notify_data()
        return response
