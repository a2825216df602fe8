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

from pykraft.broker import partitions_api, quotas_api
from pykraft.broker.handlers import TopicView
from pykraft.broker.quotas import MILLIS_TO_PERCENTAGE, ClientQuotaManager, ClientQuotas, quota_user
from pykraft.core.config import NodeConfig
from pykraft.core.errors import ErrorCode
from pykraft.core.quota_configs import QuotaEntity
from pykraft.io.controller_link import create_topics_error, delete_topics_error
from pykraft.io.server import ConnectionInfo
from pykraft.protocol.fetch import FetchResponseData, encode_fetch_response
from pykraft.protocol.messages import ApiKey, RequestHeader

# KIP-599: the APIs whose partitions count against controller_mutation_rate, and the first version that
# is refused with THROTTLING_QUOTA_EXCEEDED when over it (older ones are served and throttled).
MUTATION_APIS: dict[int, int] = {
    ApiKey.CREATE_TOPICS: 6,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.DELETE_TOPICS: 5,
}


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

    def record(
        self, manager: ClientQuotaManager, conn: ConnectionInfo, client_id: str | None, value: float
    ) -> int:
        """Record ``value`` against one quota; the throttle time it gives (0 when within it)."""
        if not manager.enabled:
            return 0
        return manager.record(quota_user(conn.principal), client_id or "", value, now_ms())

    # --- CreateTopics, CreatePartitions, DeleteTopics (KIP-599) -----------------------------------------

    def refuse_mutation(
        self,
        key: int,
        request: Any,
        version: int,
        conn: ConnectionInfo,
        client_id: str | None,
        started: float,
    ) -> Any | None:
        """ControllerMutationQuotaManager's strict check, before the request is served: while the client
        is over controller_mutation_rate, a version that knows THROTTLING_QUOTA_EXCEEDED gets it for
        every topic (and the throttle time); None: serve it."""
        manager = self.quotas.controller_mutation
        if key not in MUTATION_APIS or version < MUTATION_APIS[key] or not manager.enabled:
            return None
        user, client, now = quota_user(conn.principal), client_id or "", now_ms()
        if not manager.exceeded(user, client, now):
            return None
        throttle_ms = max(1, manager.throttle_time(user, client, now))
        error, message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded."
        if key == ApiKey.CREATE_TOPICS:
            response = create_topics_error(request, version, error, message)
        elif key == ApiKey.CREATE_PARTITIONS:
            response = partitions_api.create_partitions_error(request, version, error, message)
        else:
            response = delete_topics_error(request, version, error, message)
        response.throttle_time_ms = self.finish(conn, client_id, started, throttle_ms, manager)
        return response

    def answer(
        self,
        key: int,
        request: Any,
        response: Any,
        conn: ConnectionInfo,
        client_id: str | None,
        started: float,
        topics_before: Mapping[str, TopicView],
        default_partitions: int,
    ) -> None:
        """A served request's throttle time, set on its response: the partitions it created or deleted
        against controller_mutation_rate (the APIs of KIP-599), its handling time against
        request_percentage."""
        manager = None
        throttle_ms = 0
        if key in MUTATION_APIS:
            manager = self.quotas.controller_mutation
            mutations = quotas_api.partition_mutations(
                key, request, response, topics_before, default_partitions
            )
            throttle_ms = self.record(manager, conn, client_id, mutations)
        throttle_ms = self.finish(conn, client_id, started, throttle_ms, manager)
        if throttle_ms and hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = throttle_ms

    # --- Fetch --------------------------------------------------------------------------------------------

    def cap_fetch(self, request: Any, conn: ConnectionInfo, client_id: str | None) -> None:
        """KafkaApis.handleFetchRequest: a consumer's max_bytes (and min_bytes) at most what its
        consumer_byte_rate allows in one quota window, so a fetch is not certain to be throttled."""
        cap = self.quotas.fetch.max_value_in_quota_window(quota_user(conn.principal), client_id or "")
        if cap is not None:
            request.max_bytes = max(1, min(request.max_bytes, int(cap)))
            request.min_bytes = min(request.min_bytes, request.max_bytes)

    def fetch_response(
        self,
        header: RequestHeader,
        conn: ConnectionInfo,
        started: float,
        response: FetchResponseData,
        parts: list[bytes | bytearray | memoryview],
    ) -> list[bytes | bytearray | memoryview] | None:
        """KafkaApis.handleFetchRequest for a consumer: its response bytes against consumer_byte_rate;
        a throttle (this one or request_percentage's) takes them back and answers with no partitions
        (FetchContext.getThrottledResponse). None: send ``parts`` as they are."""
        manager, client_id = self.quotas.fetch, header.client_id
        throttle_ms = response_bytes = 0
        if manager.enabled:
            response_bytes = sum(len(part) for part in parts)
            throttle_ms = self.record(manager, conn, client_id, response_bytes)
        throttle_ms = self.finish(conn, client_id, started, throttle_ms, manager)
        if not throttle_ms:
            return None
        if response_bytes:
            manager.unrecord(quota_user(conn.principal), client_id or "", response_bytes, now_ms())
        throttled = FetchResponseData(throttle_ms, ErrorCode.NONE, response.session_id)
        return encode_fetch_response(header.correlation_id, header.api_version, throttled)

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
