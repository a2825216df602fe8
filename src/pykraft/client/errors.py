"""The client's errors: one hierarchy, each carrying Kafka's error name."""

from __future__ import annotations

from pykraft.core.errors import ErrorCode


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_{code}"


class KafkaClientError(Exception):
    """A request failed; ``code`` is Kafka's error code (-1 when the failure was local)."""

    def __init__(self, code: int, message: str = "") -> None:
        self.code = code
        super().__init__(f"{error_name(code)}: {message}" if message else error_name(code))


class ConnectionLost(KafkaClientError):
    """The connection closed, could not be opened, or a request timed out: retriable."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class ProducerFencedError(KafkaClientError):
    """A newer producer owns the transactional id (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH from the
    coordinator): fatal, close the producer."""


class TransactionAbortableError(KafkaClientError):
    """The current transaction cannot commit; abort it and go on (KIP-360: the abort bumps the epoch)."""


class DeliveryError(KafkaClientError):
    """A record's batch failed (and with it every later batch of that partition, KIP-360)."""


RETRIABLE_COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
RETRIABLE_PRODUCE_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.CORRUPT_MESSAGE,
    }
)
