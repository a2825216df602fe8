"""When the Spark source retries a broker call, and how long it waits: pure (the caller passes
``now_ms`` and sleeps), so the policy is tested without a cluster.

Two layers, as in Spark's Kafka source (issue 28):

* Within one look-up the Kafka client itself retries a retriable error (a leader moved, a broker died,
  a request timed out) after refreshing metadata, with an exponential backoff from ``retry.backoff.ms``
  to ``retry.backoff.max.ms`` (KIP-580), until ``default.api.timeout.ms`` has passed (the admin client
  Spark's KafkaOffsetReaderAdmin uses; on executors the consumer's poll budget,
  ``kafkaConsumer.pollTimeoutMs``, Spark's ``spark.network.timeout`` of 120 s).
* Around that, Spark's ``KafkaOffsetReaderAdmin.withRetries`` tries the whole offset look-up again
  ``fetchOffset.numRetries`` times, ``fetchOffset.retryIntervalMs`` apart.

A non-retriable error (an unknown topic, a refused login, a corrupt batch) fails at once, with the
broker's error name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pykraft.core.errors import ErrorCode

# Kafka's RetriableException subclasses a reader can meet (Errors.java): the answer may differ after a
# metadata refresh or a wait. FENCED/UNKNOWN_LEADER_EPOCH: our metadata is older or newer than the
# broker's; OFFSET_NOT_AVAILABLE: a new leader's high watermark has not caught up yet (KIP-207).
RETRIABLE_ERROR_CODES = frozenset(
    {
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
    }
)

# Defaults of Spark's Kafka source (KafkaSourceProvider / KafkaOffsetReaderAdmin) and of Kafka's clients.
DEFAULT_NUM_RETRIES = 3  # fetchOffset.numRetries
DEFAULT_RETRY_INTERVAL_MS = 1000  # fetchOffset.retryIntervalMs
DEFAULT_BACKOFF_MS = 100  # retry.backoff.ms
DEFAULT_BACKOFF_MAX_MS = 1000  # retry.backoff.max.ms
DEFAULT_REQUEST_TIMEOUT_MS = 30_000  # request.timeout.ms
DEFAULT_API_TIMEOUT_MS = 60_000  # default.api.timeout.ms
DEFAULT_POLL_TIMEOUT_MS = 120_000  # kafkaConsumer.pollTimeoutMs (spark.network.timeout)


class RetryOptionError(ValueError):
    """A retry option is not a number in range; the message names it."""


def _int_option(options: Mapping[str, str], names: tuple[str, ...], default: int, minimum: int) -> int:
    for name in names:
        raw = options.get(name)
        if raw is None:
            continue
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise RetryOptionError(f"option {name}: {raw!r} is not an integer") from None
        if value < minimum:
            raise RetryOptionError(f"option {name}: {value} is below the minimum {minimum}")
        return value
    return default


@dataclass(frozen=True)
class RetryPolicy:
    num_retries: int = DEFAULT_NUM_RETRIES
    retry_interval_ms: int = DEFAULT_RETRY_INTERVAL_MS
    backoff_ms: int = DEFAULT_BACKOFF_MS
    backoff_max_ms: int = DEFAULT_BACKOFF_MAX_MS
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS
    # How long one look-up (driver) or one fetch without progress (executor) keeps retrying.
    attempt_timeout_ms: int = DEFAULT_API_TIMEOUT_MS

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, executor: bool = False) -> RetryPolicy:
        """The policy Spark's option names give; ``executor`` = a task's fetches (no outer retries:
        Spark retries the task itself, ``spark.task.maxFailures``)."""
        backoff = _int_option(options, ("kafka.retry.backoff.ms",), DEFAULT_BACKOFF_MS, 0)
        if executor:
            timeout_names: tuple[str, ...] = ("kafkaConsumer.pollTimeoutMs",)
            timeout_default = DEFAULT_POLL_TIMEOUT_MS
        else:
            timeout_names = ("kafka.default.api.timeout.ms",)
            timeout_default = DEFAULT_API_TIMEOUT_MS
        return cls(
            num_retries=0
            if executor
            else _int_option(options, ("fetchOffset.numRetries",), DEFAULT_NUM_RETRIES, 0),
            retry_interval_ms=_int_option(
                options, ("fetchOffset.retryIntervalMs",), DEFAULT_RETRY_INTERVAL_MS, 0
            ),
            backoff_ms=backoff,
            backoff_max_ms=max(
                backoff, _int_option(options, ("kafka.retry.backoff.max.ms",), DEFAULT_BACKOFF_MAX_MS, 0)
            ),
            # requestTimeoutMs: this source's older name for the same bound.
            request_timeout_ms=_int_option(
                options, ("kafka.request.timeout.ms", "requestTimeoutMs"), DEFAULT_REQUEST_TIMEOUT_MS, 1
            ),
            attempt_timeout_ms=_int_option(options, timeout_names, timeout_default, 0),
        )


class Retrying:
    """One call's retries: ``after_failure`` says how long to wait before the next try, or None to
    give up. Make one per call (a fetch that made progress starts a new one)."""

    def __init__(self, policy: RetryPolicy, now_ms: int) -> None:
        self.policy = policy
        self.round_started_ms = now_ms
        self.failures = 0  # in this round
        self.rounds = 0  # outer retries used (fetchOffset.numRetries)
        self.attempts = 1

    def after_failure(self, now_ms: int, retriable: bool) -> int | None:
        if not retriable:
            return None
        policy = self.policy
        deadline_ms = self.round_started_ms + policy.attempt_timeout_ms
        if now_ms < deadline_ms:
            self.failures += 1
            backoff_ms = min(policy.backoff_ms << min(self.failures - 1, 30), policy.backoff_max_ms)
            self.attempts += 1
            return max(0, min(backoff_ms, deadline_ms - now_ms))
        if self.rounds < policy.num_retries:
            self.rounds += 1
            self.failures = 0
            self.round_started_ms = now_ms + policy.retry_interval_ms
            self.attempts += 1
            return policy.retry_interval_ms
        return None

    def describe(self) -> str:
        return f"gave up after {self.attempts} attempt(s)"
