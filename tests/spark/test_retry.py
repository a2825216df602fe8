"""The Spark source's retry policy (issue 28): which errors are retried, how long it waits, and when it
gives up, with Spark's Kafka option names and defaults (pure), and a planning run that gives up as the
options say."""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.core.errors import ErrorCode
from pykraft.spark.client import KafkaClientError
from pykraft.spark.retry import Retrying, RetryOptionError, RetryPolicy


def test_defaults_are_sparks_and_kafkas() -> None:
    driver = RetryPolicy.from_options({})
    assert (driver.num_retries, driver.retry_interval_ms) == (3, 1000)  # fetchOffset.*
    assert (driver.backoff_ms, driver.backoff_max_ms) == (100, 1000)  # retry.backoff(.max).ms
    assert (driver.request_timeout_ms, driver.attempt_timeout_ms) == (30_000, 60_000)
    executor = RetryPolicy.from_options({}, executor=True)
    assert (executor.num_retries, executor.attempt_timeout_ms) == (0, 120_000)  # kafkaConsumer.pollTimeoutMs


def test_options_use_sparks_names() -> None:
    policy = RetryPolicy.from_options(
        {
            "fetchOffset.numRetries": "5",
            "fetchOffset.retryIntervalMs": "20",
            "kafka.retry.backoff.ms": "7",
            "kafka.request.timeout.ms": "900",
            "kafka.default.api.timeout.ms": "300",
        }
    )
    assert policy == RetryPolicy(5, 20, 7, 1000, 900, 300)
    assert RetryPolicy.from_options({"requestTimeoutMs": "1234"}).request_timeout_ms == 1234
    with pytest.raises(RetryOptionError, match="fetchOffset.numRetries"):
        RetryPolicy.from_options({"fetchOffset.numRetries": "many"})
    with pytest.raises(RetryOptionError, match="kafka.request.timeout.ms: 0 is below"):
        RetryPolicy.from_options({"kafka.request.timeout.ms": "0"})


def test_backoff_doubles_to_its_cap_until_the_attempt_timeout_then_spark_retries_the_look_up() -> None:
    policy = RetryPolicy(
        num_retries=2, retry_interval_ms=1000, backoff_ms=100, backoff_max_ms=1000, attempt_timeout_ms=2000
    )
    r = Retrying(policy, now_ms=0)
    assert [r.after_failure(0, True) for _ in range(6)] == [100, 200, 400, 800, 1000, 1000]
    assert r.after_failure(1900, True) == 100  # never sleeps past the attempt's deadline
    assert r.after_failure(2000, True) == 1000  # deadline: fetchOffset.retryIntervalMs, a fresh round
    assert r.after_failure(3000, True) == 100  # the new round's backoff starts over
    assert r.after_failure(5000, True) == 1000  # second outer retry
    assert r.after_failure(8000, True) is None  # fetchOffset.numRetries spent
    assert "gave up after 11 attempt(s)" == r.describe()


def test_a_non_retriable_error_fails_at_once() -> None:
    r = Retrying(RetryPolicy(), now_ms=0)
    assert r.after_failure(0, False) is None


@pytest.mark.parametrize(
    ("error", "retriable"),
    [
        (KafkaClientError("cannot reach broker 127.0.0.1:1: Connection refused", transport=True), True),
        (KafkaClientError("x", ErrorCode.NOT_LEADER_OR_FOLLOWER), True),
        (KafkaClientError("x", ErrorCode.LEADER_NOT_AVAILABLE), True),
        (KafkaClientError("x", ErrorCode.FENCED_LEADER_EPOCH), True),
        (KafkaClientError("x", ErrorCode.UNKNOWN_LEADER_EPOCH), True),
        (KafkaClientError("x", ErrorCode.REQUEST_TIMED_OUT), True),
        (KafkaClientError("x", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), False),
        (KafkaClientError("x", ErrorCode.TOPIC_AUTHORIZATION_FAILED), False),
        (KafkaClientError("x", ErrorCode.CORRUPT_MESSAGE), False),
    ],
)
def test_which_errors_are_retriable(error: KafkaClientError, retriable: bool) -> None:
    assert error.retriable is retriable


def test_planning_against_no_broker_retries_as_the_options_say_then_names_the_cause(spark: Any) -> None:
    from pykraft.testing import free_port

    reader = (
        spark.read.format("pykraft")
        .option("kafka.bootstrap.servers", f"127.0.0.1:{free_port()}")
        .option("subscribe", "nowhere")
        .option("fetchOffset.numRetries", "2")
        .option("fetchOffset.retryIntervalMs", "10")
        .option("kafka.default.api.timeout.ms", "300")
    )
    with pytest.raises(
        Exception, match=r"offset look-up: cannot reach broker .*Connection refused.*gave up after"
    ):
        reader.load().count()
    with pytest.raises(Exception, match="option fetchOffset.numRetries: 'x' is not an integer"):
        reader.option("fetchOffset.numRetries", "x").load().count()
