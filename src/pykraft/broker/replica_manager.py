"""The partitions this broker hosts: a log and an idempotent-producer state per partition.

Pure: logs are opened through an injected :class:`LogOpener` (the shell gives it file-backed stores).
The produce path touches batch headers only (DESIGN.md hot path rules): validate (magic, length,
CRC-32C, counts) -> producer-state check -> append with offsets rewritten in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pykraft.core.errors import ErrorCode, KafkaError
from pykraft.log.partition_log import LogConfig, PartitionLog
from pykraft.log.producer_snapshot import delete_snapshots_below, recover_producer_state, write_snapshot
from pykraft.log.producer_state import (
    DUPLICATE_WINDOW_DEFAULT,
    RETAINED_BATCHES_DEFAULT,
    ProducerStateManager,
)
from pykraft.protocol.records import BatchHeader, InvalidBatchError, validate_batches

TopicPartition = tuple[str, int]


class LogOpener(Protocol):
    def open_log(self, topic: str, partition: int, config: LogConfig) -> PartitionLog: ...

    def delete_log(self, topic: str, partition: int) -> None: ...


@dataclass(slots=True)
class Partition:
    topic: str
    partition_index: int
    log: PartitionLog
    producer_state: ProducerStateManager


@dataclass(frozen=True, slots=True)
class AppendResult:
    error_code: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ReadResult:
    error_code: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    chunks: list[bytes | memoryview] = field(default_factory=list)

    @property
    def size_in_bytes(self) -> int:
        return sum(len(c) for c in self.chunks)


class ReplicaManager:
    def __init__(
        self,
        opener: LogOpener,
        log_config: LogConfig,
        *,
        message_max_bytes: int,
        producer_id_expiration_ms: int,
        retained_batches: int = RETAINED_BATCHES_DEFAULT,
        duplicate_window: int = DUPLICATE_WINDOW_DEFAULT,
        producer_id_expiration_check_interval_ms: int = 600_000,
    ) -> None:
        self.opener = opener
        self.log_config = log_config
        self.message_max_bytes = message_max_bytes
        self.producer_id_expiration_ms = producer_id_expiration_ms
        # KIP-758 (issue 5): producer.state.retained.batches, max.in.flight.sequence.number.per.connection.
        self.retained_batches = retained_batches
        self.duplicate_window = duplicate_window
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        self._next_expiration_check_ms: int | None = None
        # One line per producer-state snapshot given up on load; the shell logs and clears them.
        self.warnings: list[str] = []
        self.partitions: dict[TopicPartition, Partition] = {}

    # --- lifecycle, driven by the metadata image -------------------------------------------------

    def ensure_partition(self, topic: str, partition_index: int, now_ms: int) -> Partition:
        key = (topic, partition_index)
        existing = self.partitions.get(key)
        if existing is not None:
            return existing
        log = self.opener.open_log(topic, partition_index, self.log_config)
        state = ProducerStateManager(
            retained_batches=self.retained_batches,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            duplicate_window=self.duplicate_window,
        )
        # The newest producer-state snapshot, then batch headers after it (kafka-facts.md §2.6).
        self.warnings.extend(
            f"{topic}-{partition_index}/{line}" for line in recover_producer_state(log, state, now_ms)
        )
        part = Partition(topic, partition_index, log, state)
        self.partitions[key] = part
        return part

    def remove_partition(self, topic: str, partition_index: int) -> None:
        part = self.partitions.pop((topic, partition_index), None)
        if part is not None:
            part.log.close()
        self.opener.delete_log(topic, partition_index)

    def get(self, topic: str, partition_index: int) -> Partition | None:
        return self.partitions.get((topic, partition_index))

    # --- produce ----------------------------------------------------------------------------------

    def append(self, part: Partition, records: memoryview, now_ms: int) -> AppendResult:
        try:
            headers = validate_batches(records)
        except InvalidBatchError as exc:
            return AppendResult(exc.error_code, error_message=str(exc))
        for header in headers:
            if header.size_in_bytes > self.message_max_bytes:
                return AppendResult(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    error_message=f"batch of {header.size_in_bytes} bytes exceeds message.max.bytes="
                    f"{self.message_max_bytes}",
                )
            if header.is_transactional or header.is_control:
                # Transactions come with their own issue; refuse rather than store half of them.
                return AppendResult(
                    ErrorCode.INVALID_TXN_STATE, error_message="transactional produce is not supported yet"
                )
        check = part.producer_state.check_append(headers)
        if check.error_code != ErrorCode.NONE:
            return AppendResult(
                check.error_code,
                log_start_offset=part.log.log_start_offset,
                error_message=check.error_message or None,
            )
        if check.duplicate is not None:
            # An exact retry of a batch already in the log: answer with its original offset.
            return AppendResult(
                ErrorCode.NONE,
                base_offset=check.duplicate.first_offset,
                log_start_offset=part.log.log_start_offset,
            )
        rolled_from = part.log.active_segment_base_offset
        info = part.log.append(records, headers)
        if part.log.active_segment_base_offset != rolled_from:
            # Kafka snapshots producer state at every roll, as of the new segment's base offset, which
            # is where the state stands before this append's batches (UnifiedLog.roll).
            write_snapshot(part.log.store, part.producer_state)
        assigned: list[BatchHeader] = []
        next_offset = info.first_offset
        for header in headers:
            assigned.append(header._replace(base_offset=next_offset))
            next_offset += header.last_offset_delta + 1
        part.producer_state.on_append(assigned, now_ms)
        # One node: every appended batch is replicated to the whole ISR at once.
        part.log.set_high_watermark(part.log.log_end_offset)
        return AppendResult(
            ErrorCode.NONE, base_offset=info.first_offset, log_start_offset=part.log.log_start_offset
        )

    # --- fetch ------------------------------------------------------------------------------------

    def read(self, part: Partition, fetch_offset: int, max_bytes: int, *, min_one_batch: bool) -> ReadResult:
        log = part.log
        try:
            result = log.read(
                fetch_offset, max_bytes, max_offset=log.high_watermark, min_one_batch=min_one_batch
            )
        except KafkaError as exc:
            return ReadResult(exc.error_code, log.high_watermark, log.log_start_offset)
        return ReadResult(ErrorCode.NONE, log.high_watermark, log.log_start_offset, list(result.chunks))

    # --- housekeeping -----------------------------------------------------------------------------

    def apply_retention(self, now_ms: int) -> int:
        deleted = 0
        for part in self.partitions.values():
            removed = part.log.apply_retention(now_ms)
            if removed:
                deleted += len(removed)
                delete_snapshots_below(part.log.store, part.log.log_start_offset)
        self.expire_producers(now_ms)
        return deleted

    def expire_producers(self, now_ms: int) -> int:
        """The producer.id.expiration.check.interval.ms timer (KIP-360: expiration is the only way
        producer state goes; retention and DeleteRecords leave it). Returns producers removed."""
        if self._next_expiration_check_ms is not None and now_ms < self._next_expiration_check_ms:
            return 0
        self._next_expiration_check_ms = now_ms + self.producer_id_expiration_check_interval_ms
        return sum(len(part.producer_state.remove_expired(now_ms)) for part in self.partitions.values())

    def flush_all(self) -> None:
        for part in self.partitions.values():
            part.log.flush()

    def close_all(self) -> None:
        for part in self.partitions.values():
            # Clean shutdown: a snapshot at the log end, so the next start reads no log at all.
            write_snapshot(part.log.store, part.producer_state)
            part.log.close()
        self.partitions.clear()
