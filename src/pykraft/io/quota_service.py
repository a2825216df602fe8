"""Client quotas in the broker's request path (KIP-13, KIP-124, KIP-219, KIP-599): the shell around
broker/quotas.py.

As Kafka's KafkaApis does: a Produce's request bytes are recorded against ``producer_byte_rate``, a
consumer Fetch's response bytes against ``consumer_byte_rate`` (a throttled fetch is answered empty and
its bytes taken back, FetchContext.getThrottledResponse), every request's handling time against
``request_percentage`` (time until the request first parks: a long poll's wait is not handling), and the
partitions a CreateTopics / CreatePartitions / DeleteTopics creates or deletes against
``controller_mutation_rate`` (a request over the quota is refused with THROTTLING_QUOTA_EXCEEDED from
CreateTopics v6, CreatePartitions v3, DeleteTopics v5; older versions are served and throttled). The
response carries the larger throttle time, the sensor that caused it records it, and the connection is
muted for that long (io/server.py). Replica fetches and the quota-exempt APIs (ApiVersions, SASL) are
not counted, as in Kafka.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pykraft.broker.quotas import MILLIS_TO_PERCENTAGE, ClientQuotaManager, ClientQuotas, quota_user
from pykraft.core.config import NodeConfig
from pykraft.core.quota_configs import QuotaEntity
from pykraft.io.server import ConnectionInfo


def now_ms() -> int:
    return int(time.time() * 1000)


class QuotaService:
    def __init__(self, config: NodeConfig) -> None:
        self.quotas = ClientQuotas(config.quota_window_num, config.quota_window_size_seconds * 1000)
        self._entities: Mapping[QuotaEntity, Mapping[str, float]] | None = None

    def on_image(self, entities: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """The client quotas of a new image (images share unchanged parts: compared by identity)."""
        if entities is not self._entities:
            self._entities = entities
            self.quotas.update(entities)

    @property
    def enabled(self) -> bool:
        return any(manager.enabled for manager in self.quotas.managers())

    def record(
        self, manager: ClientQuotaManager, conn: ConnectionInfo, client_id: str | None, value: float
    ) -> int:
        """Record ``value`` against one quota; the throttle time it gives (0 when within it)."""
        return manager.record(quota_user(conn.principal), client_id or "", value, now_ms())

    def exceeded(self, manager: ClientQuotaManager, conn: ConnectionInfo, client_id: str | None) -> int:
        """ControllerMutationQuotaManager's strict check: the throttle time when already over the quota."""
        user = quota_user(conn.principal)
        now = now_ms()
        if not manager.exceeded(user, client_id or "", now):
            return 0
        return max(1, manager.throttle_time(user, client_id or "", now))

    def cap_fetch(self, request: Any, conn: ConnectionInfo, client_id: str | None) -> None:
        """KafkaApis.handleFetchRequest: a consumer's max_bytes (and min_bytes) at most what its
        consumer_byte_rate allows in one quota window, so a fetch is not certain to be throttled."""
        cap = self.quotas.fetch.max_value_in_quota_window(quota_user(conn.principal), client_id or "")
        if cap is not None:
            request.max_bytes = max(1, min(request.max_bytes, int(cap)))
            request.min_bytes = min(request.min_bytes, request.max_bytes)

    def unrecord(
        self, manager: ClientQuotaManager, conn: ConnectionInfo, client_id: str | None, value: float
    ) -> None:
        manager.unrecord(quota_user(conn.principal), client_id or "", value, now_ms())

    def finish(
        self,
        conn: ConnectionInfo,
        client_id: str | None,
        started: float,
        throttle_ms: int = 0,
        manager: ClientQuotaManager | None = None,
    ) -> int:
        """Kafka's sendResponseMaybeThrottle: record the request's handling time, take the larger of its
        throttle time and ``throttle_ms`` (from ``manager``), record it on the sensor that caused it and
        mute the connection for it. Returns the response's throttle_time_ms."""
        quotas = self.quotas
        if not quotas.request.enabled and throttle_ms <= 0:
            return 0
        user, client, now = quota_user(conn.principal), client_id or "", now_ms()
        end = conn.parked_at if conn.parked_at is not None else time.perf_counter()
        request_ms = quotas.request.record(user, client, (end - started) * 1000 * MILLIS_TO_PERCENTAGE, now)
        if request_ms > throttle_ms or manager is None:
            throttle_ms, manager = max(request_ms, throttle_ms), quotas.request
        manager.record_throttle(user, client, throttle_ms, now)
        conn.throttle_time_ms = max(conn.throttle_time_ms, throttle_ms)
        return throttle_ms
