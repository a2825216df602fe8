"""Per-API request counts and time histograms of one listener (issue 18), Kafka's RequestMetrics.

Counted by ``io/server.py`` once per request (never per record): a dict lookup, a list increment and a
bisect into fixed buckets, about a microsecond. The metrics endpoint (``io/metrics.py``) reads them as
``kafka_network_requestmetrics_requests_total{request,version}`` and the ``totaltimems`` and
``requestqueuetimems`` histograms. Api keys and versions come from the request header, which a client
controls: keys Kafka does not define and versions outside 0..63 are counted together, so a fuzzing
client cannot grow the label set.
"""

from __future__ import annotations

from bisect import bisect_left

from pykraft.protocol.messages import ApiKey

# Bucket upper bounds (ms) of the request time histograms: 0.25 ms (a Metadata answered at once) to 30 s
# (a produce waiting for its request timeout).
REQUEST_TIME_BUCKETS_MS: tuple[float, ...] = (
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1000,
    2500,
    5000,
    10000,
    30000,
)
# Versions 0..63 are counted each; anything else in one slot (no Kafka API has 64 versions).
MAX_COUNTED_VERSION = 63
OTHER_VERSION = MAX_COUNTED_VERSION + 1
# Api keys Kafka does not define are counted under this key, named "Unknown".
UNKNOWN_API_KEY = -1

_KNOWN_KEYS = frozenset(int(key) for key in ApiKey)


def request_name(api_key: int) -> str:
    """Kafka's ApiKeys name (``ListOffsets``, ``InitProducerId``), as RequestMetrics labels requests."""
    if api_key not in _KNOWN_KEYS:
        return "Unknown"
    return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))


class Histogram:
    """Counts per bucket (Prometheus ``le`` semantics: a value lands in the first bucket whose bound is
    at least the value) and the sum, in the unit of its bounds."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        # One more slot than bounds: values above the last bound (+Inf).
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        """(le, cumulative count) pairs ending with +Inf, as HistogramMetricFamily takes them."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(running)))
        return out


class ApiRequestStats:
    __slots__ = ("versions", "total_time_ms", "queue_time_ms")

    def __init__(self) -> None:
        self.versions = [0] * (OTHER_VERSION + 1)
        # From the frame read to the response handed to the socket (Kafka's TotalTimeMs).
        self.total_time_ms = Histogram(REQUEST_TIME_BUCKETS_MS)
        # Waiting for a queued.max.requests slot (Kafka's RequestQueueTimeMs: time in the request queue).
        self.queue_time_ms = Histogram(REQUEST_TIME_BUCKETS_MS)


class RequestMetrics:
    def __init__(self) -> None:
        self.by_key: dict[int, ApiRequestStats] = {}

    def record(self, api_key: int, api_version: int, total_ms: float, queue_ms: float) -> None:
        stats = self.by_key.get(api_key)
        if stats is None:
            stats = self._stats_for(api_key)
        stats.versions[api_version if 0 <= api_version <= MAX_COUNTED_VERSION else OTHER_VERSION] += 1
        stats.total_time_ms.observe(total_ms)
        if queue_ms:
            stats.queue_time_ms.observe(queue_ms)
        else:
            stats.queue_time_ms.counts[0] += 1  # the usual case: no wait, first bucket, sum unchanged

    def _stats_for(self, api_key: int) -> ApiRequestStats:
        key = api_key if api_key in _KNOWN_KEYS else UNKNOWN_API_KEY
        stats = self.by_key.get(key)
        if stats is None:
            stats = self.by_key[key] = ApiRequestStats()
        return stats
