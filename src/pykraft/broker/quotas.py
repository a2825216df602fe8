"""Client quota accounting (KIP-13, KIP-55, KIP-124, KIP-219, KIP-599): pure, every call takes ``now_ms``.

One :class:`ClientQuotaManager` per quota type, as Kafka has (QuotaType Produce, Fetch, Request,
ControllerMutation), each reading one key of the client quotas in the metadata image:

* a client (its principal's user name and its client id) maps to metric tags (user, client-id) by
  Kafka's DefaultQuotaCallback.quotaMetricTags: when only one kind of entity has the key, the tags are
  that kind's (client-id quotas: ("", client), user quotas: (user, ""), user+client quotas: both); with
  several kinds, the first entity found in the precedence order below decides;
* the tags' limit is the first quota set in Kafka's order: /users/U/clients/C, /users/U/clients/<default>,
  /users/U, /users/<default>/clients/C, /users/<default>/clients/<default>, /users/<default>,
  /clients/C, /clients/<default> (ClientQuotaManager.findQuota), restricted to the tags' kind;
* clients with the same tags share one rate sensor: Kafka's Rate over ``quota.window.num`` samples of
  ``quota.window.size.seconds`` (SampledStat: a sample is replaced once it is a whole window old, and
  samples older than all windows together are reset; the rate divides their sum by the elapsed time
  since the oldest sample began, but never less than ``samples - 1`` whole windows);
* recording a value that takes the rate over the limit returns the throttle time Kafka's
  QuotaUtils.throttleTime gives, (rate - limit) / limit * window size, capped at the whole window
  (``samples * window``; Kafka's request quota caps at one window, ClientRequestQuotaManager).

What a throttle time does (the response's throttle_time_ms, the channel muted that long) is the shell's
(io/server.py, io/node.py). Request time for ``request_percentage`` is recorded as Kafka's
nanosToPercentage does: 1 ms of handling is 0.1 (percent of one second).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from pykraft.core.quota_configs import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
)

# Kafka ClientQuotaManager: sensors idle this long are dropped.
INACTIVE_SENSOR_EXPIRATION_MS: Final = 3_600_000
# ClientRequestQuotaManager.nanosToPercentage: a millisecond of handling is 0.1 % of one second.
MILLIS_TO_PERCENTAGE: Final = 0.1


class QuotaType(Enum):
    """Kafka's QuotaType: the metric group name and the quota key it enforces."""

    PRODUCE = ("Produce", PRODUCER_BYTE_RATE)
    FETCH = ("Fetch", CONSUMER_BYTE_RATE)
    REQUEST = ("Request", REQUEST_PERCENTAGE)
    CONTROLLER_MUTATION = ("ControllerMutation", CONTROLLER_MUTATION_RATE)

    def __init__(self, group: str, key: str) -> None:
        self.group = group
        self.key = key


class SampledStat:
    """Kafka's SampledStat with a windowed sum per sample (Rate's WindowedSum, Avg's sum and count)."""

    __slots__ = ("samples", "window_ms", "_starts", "_values", "_counts", "_current")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._starts: list[int] = []
        self._values: list[float] = []
        self._counts: list[int] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._starts:
            self._new_sample(now_ms)
        elif now_ms - self._starts[self._current] >= self.window_ms:
            # SampledStat.advance: the next slot, a new one while there are fewer than ``samples``.
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._starts):
                self._new_sample(now_ms)
            else:
                self._reset(self._current, now_ms)
        self._values[self._current] += value
        self._counts[self._current] += 1

    def _new_sample(self, now_ms: int) -> None:
        self._starts.append(now_ms)
        self._values.append(0.0)
        self._counts.append(0)
        self._current = len(self._starts) - 1

    def _reset(self, index: int, now_ms: int) -> None:
        self._starts[index] = now_ms
        self._values[index] = 0.0
        self._counts[index] = 0

    def purge_obsolete(self, now_ms: int) -> None:
        expire_age_ms = self.samples * self.window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire_age_ms:
                self._reset(i, now_ms)

    def total(self, now_ms: int) -> float:
        self.purge_obsolete(now_ms)
        return sum(self._values)

    def average(self, now_ms: int) -> float:
        self.purge_obsolete(now_ms)
        count = sum(self._counts)
        return sum(self._values) / count if count else 0.0

    def window_size_ms(self, now_ms: int) -> int:
        """Rate.windowSize: elapsed since the oldest sample began, at least ``samples - 1`` windows."""
        self.purge_obsolete(now_ms)
        oldest = min(self._starts) if self._starts else now_ms
        elapsed_ms = now_ms - oldest
        full_windows = elapsed_ms // self.window_ms
        if full_windows < self.samples - 1:
            elapsed_ms += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed_ms, 1)

    def rate_per_s(self, now_ms: int) -> float:
        return self.total(now_ms) / (self.window_size_ms(now_ms) / 1000)

    def simple_rate_per_s(self, now_ms: int) -> float:
        """Kafka's SimpleRate (the replication quotas' measure): the sum over the time elapsed since
        the oldest sample began, at least one window (no padding to ``samples - 1`` windows)."""
        self.purge_obsolete(now_ms)
        oldest = min(self._starts) if self._starts else now_ms
        return self.total(now_ms) / (max(now_ms - oldest, self.window_ms) / 1000)


@dataclass(slots=True)
class QuotaSensor:
    """The sensors of one (user, client-id) tag pair: the quota's rate and the throttle time average."""

    rate: SampledStat
    throttle_time_ms: SampledStat
    last_record_ms: int = 0


@dataclass(slots=True)
class ClientQuotaManager:
    quota_type: QuotaType
    samples: int = 11
    window_ms: int = 1000
    # Entities that set this manager's key, and their value.
    _overridden: dict[QuotaEntity, float] = field(default_factory=dict)
    # Which kinds of entity set it: (user and client-id, user alone, client-id alone).
    _kinds: frozenset[tuple[bool, bool]] = frozenset()
    _sensors: dict[tuple[str, str], QuotaSensor] = field(default_factory=dict)
    _last_expiry_ms: int = 0

    @property
    def max_throttle_time_ms(self) -> int:
        if self.quota_type is QuotaType.REQUEST:
            return self.window_ms
        return self.samples * self.window_ms

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """The client quotas of a new metadata image."""
        key = self.quota_type.key
        self._overridden = {entity: values[key] for entity, values in quotas.items() if key in values}
        self._kinds = frozenset(
            (any(kind == USER for kind, _ in entity), any(kind == CLIENT_ID for kind, _ in entity))
            for entity in self._overridden
        )

    @property
    def enabled(self) -> bool:
        return bool(self._overridden)

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """DefaultQuotaCallback.quotaMetricTags: the (user, client-id) tags the client's sensor has."""
        kinds = self._kinds
        if not kinds or kinds == {(False, True)}:
            return "", client_id
        if kinds == {(True, False)}:
            return user, ""
        if kinds == {(True, True)}:
            return user, client_id
        has = self._overridden.__contains__
        if has(((CLIENT_ID, client_id), (USER, user))) or has(((CLIENT_ID, None), (USER, user))):
            return user, client_id
        if has(((USER, user),)):
            return user, ""
        if has(((CLIENT_ID, client_id), (USER, None))) or has(((CLIENT_ID, None), (USER, None))):
            return user, client_id
        if has(((USER, None),)):
            return user, ""
        return "", client_id

    def quota_limit(self, tags: tuple[str, str]) -> float | None:
        """ClientQuotaManager.findQuota for the tags' kind: the first quota set, None when unlimited."""
        user, client_id = tags
        get = self._overridden.get
        if user and client_id:
            order: tuple[QuotaEntity, ...] = (
                ((CLIENT_ID, client_id), (USER, user)),
                ((CLIENT_ID, None), (USER, user)),
                ((CLIENT_ID, client_id), (USER, None)),
                ((CLIENT_ID, None), (USER, None)),
            )
        elif user:
            order = (((USER, user),), ((USER, None),))
        elif client_id:
            order = (((CLIENT_ID, client_id),), ((CLIENT_ID, None),))
        else:
            return None
        for entity in order:
            limit = get(entity)
            if limit is not None:
                return limit
        return None

    def _sensor(self, tags: tuple[str, str], now_ms: int) -> QuotaSensor:
        sensor = self._sensors.get(tags)
        if sensor is None:
            if now_ms - self._last_expiry_ms >= self.window_ms:
                self._expire(now_ms)
            sensor = QuotaSensor(
                SampledStat(self.samples, self.window_ms), SampledStat(self.samples, self.window_ms)
            )
            self._sensors[tags] = sensor
        sensor.last_record_ms = now_ms
        return sensor

    def _expire(self, now_ms: int) -> None:
        self._last_expiry_ms = now_ms
        for tags, sensor in list(self._sensors.items()):
            if now_ms - sensor.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS:
                del self._sensors[tags]

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Kafka's maybeRecordAndGetThrottleTimeMs: record ``value`` for the client; the time it must
        wait for its rate to come back to its quota (0: within it, or no quota of this type set)."""
        if not self._overridden:
            return 0
        tags = self.metric_tags(user, client_id)
        sensor = self._sensor(tags, now_ms)
        sensor.rate.record(value, now_ms)
        limit = self.quota_limit(tags)
        if limit is None:
            return 0
        return self._throttle_time_ms(sensor.rate, limit, now_ms)

    def _throttle_time_ms(self, rate: SampledStat, limit: float, now_ms: int) -> int:
        observed = rate.rate_per_s(now_ms)
        if observed <= limit:
            return 0
        if limit <= 0:
            return self.max_throttle_time_ms
        throttle_ms = (observed - limit) / limit * rate.window_size_ms(now_ms)
        return min(int(throttle_ms), self.max_throttle_time_ms)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float | None:
        """ClientQuotaManager.maxValueInQuotaWindow: the most that can be recorded at once without a
        certain throttle, limit * (samples - 1) windows (a consumer's fetch size is capped to it);
        None without a quota."""
        if not self._overridden:
            return None
        limit = self.quota_limit(self.metric_tags(user, client_id))
        return None if limit is None else limit * (self.samples - 1) * self.window_ms / 1000

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """ClientQuotaManager.unrecordQuotaSensor: take back what a throttled fetch did not send."""
        if self._overridden:
            self._sensor(self.metric_tags(user, client_id), now_ms).rate.record(-value, now_ms)

    def exceeded(self, user: str, client_id: str, now_ms: int) -> bool:
        """ControllerMutationQuotaManager's strict check: the rate is already above the quota, so a
        new mutation is refused (THROTTLING_QUOTA_EXCEEDED) before anything is recorded."""
        if not self._overridden:
            return False
        tags = self.metric_tags(user, client_id)
        limit = self.quota_limit(tags)
        sensor = self._sensors.get(tags)
        return limit is not None and sensor is not None and sensor.rate.rate_per_s(now_ms) > limit

    def throttle_time(self, user: str, client_id: str, now_ms: int) -> int:
        """The throttle time the client's rate is at now, without recording anything."""
        if not self._overridden:
            return 0
        tags = self.metric_tags(user, client_id)
        limit = self.quota_limit(tags)
        sensor = self._sensors.get(tags)
        if limit is None or sensor is None:
            return 0
        return self._throttle_time_ms(sensor.rate, limit, now_ms)

    def record_throttle(self, user: str, client_id: str, throttle_time_ms: int, now_ms: int) -> None:
        """ClientQuotaManager.throttle: the throttle-time sensor of the client's tags."""
        if throttle_time_ms > 0 and self._overridden:
            sensor = self._sensor(self.metric_tags(user, client_id), now_ms)
            sensor.throttle_time_ms.record(throttle_time_ms, now_ms)

    def sensors(self, now_ms: int) -> Iterator[tuple[tuple[str, str], float, float]]:
        """(tags, rate per second, average throttle time in ms) per sensor, as Kafka's byte-rate
        (request-time, mutation-rate) and throttle-time metrics."""
        for tags, sensor in list(self._sensors.items()):
            yield tags, sensor.rate.rate_per_s(now_ms), sensor.throttle_time_ms.average(now_ms)


@dataclass(slots=True)
class ClientQuotas:
    """The four managers of a broker."""

    samples: int = 11
    window_ms: int = 1000
    produce: ClientQuotaManager = field(init=False)
    fetch: ClientQuotaManager = field(init=False)
    request: ClientQuotaManager = field(init=False)
    controller_mutation: ClientQuotaManager = field(init=False)

    def __post_init__(self) -> None:
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, self.samples, self.window_ms)
        self.fetch = ClientQuotaManager(QuotaType.FETCH, self.samples, self.window_ms)
        self.request = ClientQuotaManager(QuotaType.REQUEST, self.samples, self.window_ms)
        self.controller_mutation = ClientQuotaManager(
            QuotaType.CONTROLLER_MUTATION, self.samples, self.window_ms
        )

    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller_mutation)

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        for manager in self.managers():
            manager.update(quotas)


def quota_user(principal: str) -> str:
    """The user a quota names: the principal's name (``User:alice`` -> ``alice``)."""
    return principal.split(":", 1)[1] if ":" in principal else principal
