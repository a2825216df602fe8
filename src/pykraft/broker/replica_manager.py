"""The partitions this broker hosts: a log and an idempotent-producer state per partition.

Pure: logs are opened through an injected :class:`LogOpener` (the shell gives it file-backed stores).
The produce path touches batch headers only (docs/architecture.md, "The hot path"): validate (magic, length,
CRC-32C, counts) -> producer-state check -> append with offsets rewritten in place.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pykraft.broker.replication import (
    LeaderEpochCache,
    PartitionReplication,
    Transition,
    follower_truncation_offset,
)
from pykraft.core.errors import ErrorCode, KafkaError
from pykraft.log.checkpoint_files import (
    LEADER_EPOCH_CHECKPOINT,
    decode_leader_epoch_checkpoint,
    encode_leader_epoch_checkpoint,
)
from pykraft.log.cleaner import CleanerConfig, CleanerStats, clean, cleanable
from pykraft.log.partition_log import AppendInfo, LogConfig, PartitionLog
from pykraft.log.producer_snapshot import delete_snapshots_below, list_snapshot_offsets, write_snapshot
from pykraft.log.producer_state import (
    DUPLICATE_WINDOW_DEFAULT,
    RETAINED_BATCHES_DEFAULT,
    ProducerStateManager,
)
from pykraft.log.store import DescriptorShortageError
from pykraft.log.txn_index import TransactionIndex, recover, write_index
from pykraft.protocol import compression
from pykraft.protocol.records import (
    CONTROL_TYPE_ABORT,
    NO_SEQUENCE,
    BatchHeader,
    InvalidBatchError,
    build_batch,
    control_type_of,
    decode_records,
    end_txn_marker,
    in_codec,
    recompress_batches,
    stamp_log_append_time,
    validate_batches,
)

TopicPartition = tuple[str, int]


def _all_keyed(records: memoryview, headers: list[BatchHeader]) -> bool:
    position = 0
    for header in headers:
        end = position + header.size_in_bytes
        try:
            if any(record.key is None for record in decode_records(records[position:end])):
                return False
        except ValueError:
            return False
        position = end
    return True


class LogOpener(Protocol):
    """The shell's side of the log dirs (Kafka's LogManager over log.dirs, JBOD): which dir holds a
    partition, and its log opened there. The replica manager never touches files itself."""

    def log_dir_for(self, topic: str, partition: int, offline_log_dirs: Collection[str]) -> str | None:
        """The dir of a partition: the one its log is found in, else where a new log goes (Kafka's
        LogManager.nextLogDirs: the online dir with the fewest partitions, ties by log.dirs order);
        None when every dir is offline."""
        ...

    def open_log(
        self,
        log_dir: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        high_watermark_tracks_log_end: bool = True,
    ) -> PartitionLog: ...

    def delete_log(self, topic: str, partition: int) -> None:
        """Delete the partition's log, in whichever dir it is."""
        ...

    def clean_log_bounds(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(log end offset, log start offset) of a log the last stop closed cleanly, from its dir's
        checkpoint files, without opening it (DeferredLog); None when it was not, or is not known."""
        ...


@dataclass(slots=True)
class DeferredLog:
    """A partition's log as a clean stop left it, not opened yet (issue 29): after a clean stop a
    restarted node hosts every partition at once but opens a log's files only when it is first used,
    or in the background once the node serves (``ReplicaManager.open_deferred``), so the first answer
    does not wait for 100,000 partition dirs to be listed. Until then the dir's checkpoint files say
    all the image needs: where the log ends (recovery-point-offset-checkpoint, which after a clean stop
    is the log end) and starts (log-start-offset-checkpoint). Only a single-replica log is deferred:
    its high watermark is its log end, and its leader epochs start empty."""

    log_end_offset: int
    log_start_offset: int
    # The topic's configs as the images since gave them (the log takes them when opened).
    config: LogConfig
    # Opens it (``ReplicaManager._open_deferred``); raises KafkaError as ``ensure_partition`` does.
    open: Callable[[], None]
    # When the image hosted it: its producer state is recovered as of then, as an open then would.
    now_ms: int


@dataclass(slots=True)
class Partition:
    topic: str
    partition_index: int
    # The log, its producer state and transaction index: None while ``deferred``; reading ``log``,
    # ``producer_state`` or ``transactions`` opens a deferred log first (any use is safe, and code
    # that must not open one, such as the timers that walk every partition, checks ``deferred``).
    opened_log: PartitionLog | None
    opened_producer_state: ProducerStateManager | None
    # More than one replica: the high watermark waits for the ISR (issue 14); one replica: it is the
    # log end, as on a single node.
    replicated: bool = False
    replication: PartitionReplication = field(default_factory=lambda: PartitionReplication(-1))
    epochs: LeaderEpochCache = field(default_factory=LeaderEpochCache)
    # Aborted transactions and decided-but-unreplicated ones (the last stable offset), KIP-98.
    opened_transactions: TransactionIndex | None = field(default_factory=TransactionIndex)
    # KIP-890 part 1: producer id -> the guard its coordinator verification was started with. A
    # producer's first transactional batch here is appended only with the guard still in place; a
    # marker (the transaction ended meanwhile) or that first append removes it.
    verification_guards: dict[int, object] = field(default_factory=dict)
    # A follower: the leader's high watermark as its last fetch answered it (-1 before one), which
    # DescribeLogDirs reports the follower's lag against.
    leader_high_watermark: int = -1
    # The log dir (one of log.dirs, as the opener names it) this partition's log is in: a failed
    # write takes that dir offline, and with it every partition in it (Kafka's UnifiedLog.parentDir).
    log_dir: str = ""
    # Set while the log is not opened yet (see DeferredLog).
    deferred: DeferredLog | None = None

    @property
    def log(self) -> PartitionLog:
        if self.opened_log is None:
            self._open()
        assert self.opened_log is not None
        return self.opened_log

    @property
    def producer_state(self) -> ProducerStateManager:
        if self.opened_producer_state is None:
            self._open()
        assert self.opened_producer_state is not None
        return self.opened_producer_state

    @producer_state.setter
    def producer_state(self, state: ProducerStateManager) -> None:
        self.opened_producer_state = state

    @property
    def transactions(self) -> TransactionIndex:
        if self.opened_transactions is None:
            self._open()
        assert self.opened_transactions is not None
        return self.opened_transactions

    @transactions.setter
    def transactions(self, transactions: TransactionIndex) -> None:
        self.opened_transactions = transactions

    def _open(self) -> None:
        assert self.deferred is not None, f"{self.topic}-{self.partition_index} has no log"
        self.deferred.open()

    @property
    def log_end_offset(self) -> int:
        """The log end, without opening a deferred log."""
        return self.deferred.log_end_offset if self.deferred is not None else self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        """The log start, without opening a deferred log."""
        return self.deferred.log_start_offset if self.deferred is not None else self.log.log_start_offset


@dataclass(frozen=True, slots=True)
class ReplicaFetchCheck:
    """The leader's answer to one partition of a replica Fetch, before any records are read."""

    error_code: ErrorCode
    # (epoch, end offset) when the follower's last fetched epoch does not end where it thinks.
    diverging_epoch: tuple[int, int] | None = None
    # The high watermark moved up (acks=all produces and consumers may be waiting on it).
    high_watermark_advanced: bool = False


@dataclass(frozen=True, slots=True)
class AppendResult:
    error_code: ErrorCode
    base_offset: int = -1
    # The last offset appended (acks=all waits for the high watermark to pass it); -1 when nothing was.
    last_offset: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    # ProduceResponse's LogAppendTimeMs (Kafka's LogAppendInfo.logAppendTime): the time stamped on a
    # LogAppendTime topic, a retried batch's max timestamp (UnifiedLog.append), else -1.
    log_append_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class ReadResult:
    error_code: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    chunks: list[bytes | memoryview] = field(default_factory=list)
    last_stable_offset: int = -1
    # read_committed: (producer id, first offset) of the aborted transactions the read overlaps.
    aborted_transactions: list[tuple[int, int]] | None = None

    @property
    def size_in_bytes(self) -> int:
        return sum(len(c) for c in self.chunks)


def topic_log_config(base: LogConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The LogConfig of a topic with its own configs (ConfigRecords, checked by the controller) over
    the broker's ``base``; a value that does not parse keeps the base's (never a crash on replay)."""
    if not overrides:
        return base
    fields: dict[str, int | bool | float | None] = {}
    for name, field_name in _LOG_CONFIG_FIELDS.items():
        raw = overrides.get(name)
        if raw is not None:
            try:
                fields[field_name] = int(raw)
            except ValueError:
                continue
    codec = overrides.get("compression.type")
    if codec is not None:
        fields["compression_type"] = compression.TOPIC_CODECS.get(codec.strip())  # producer: None
    timestamp_type = overrides.get("message.timestamp.type")
    if timestamp_type is not None:
        fields["message_timestamp_log_append_time"] = timestamp_type == "LogAppendTime"
    policy = overrides.get("cleanup.policy")
    if policy is not None:
        policies = {word.strip() for word in policy.split(",")}
        fields["cleanup_policy_delete"] = "delete" in policies
        fields["cleanup_policy_compact"] = "compact" in policies
    ratio = overrides.get("min.cleanable.dirty.ratio")
    if ratio is not None:
        try:
            fields["min_cleanable_dirty_ratio"] = float(ratio)
        except ValueError:
            pass
    try:
        return dataclasses.replace(base, **fields)  # type: ignore[arg-type]
    except AssertionError:
        return base


# Topic config name -> LogConfig field (the integer ones).
_LOG_CONFIG_FIELDS = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "index.interval.bytes": "index_interval_bytes",
    "segment.index.bytes": "segment_index_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
}


# Runs independent jobs, each to its end, and returns per job the OSError it raised or None, in order:
# the first list's (the shell's pool may run them at once), then the second's, run in line by the caller
# meanwhile (cheap jobs, for which another thread costs more than the job).
JobRunner = Callable[[list[Callable[[], None]], list[Callable[[], None]]], list[OSError | None]]


def run_in_order(
    jobs: list[Callable[[], None]], in_line: list[Callable[[], None]] | None = None
) -> list[OSError | None]:
    """The ``JobRunner`` of one thread: each job after the other."""
    errors: list[OSError | None] = []
    for job in jobs + (in_line or []):
        try:
            job()
        except OSError as exc:
            errors.append(exc)
        else:
            errors.append(None)
    return errors


@dataclass
class CleanShutdown:
    """One log dir's partitions as a clean shutdown left them (Kafka's three offset checkpoint files)."""

    recovery_points: dict[TopicPartition, int] = field(default_factory=dict)
    high_watermarks: dict[TopicPartition, int] = field(default_factory=dict)
    log_start_offsets: dict[TopicPartition, int] = field(default_factory=dict)


class ReplicaManager:
    def __init__(
        self,
        opener: LogOpener,
        log_config: LogConfig,
        *,
        producer_id_expiration_ms: int,
        retained_batches: int = RETAINED_BATCHES_DEFAULT,
        duplicate_window: int = DUPLICATE_WINDOW_DEFAULT,
        producer_id_expiration_check_interval_ms: int = 600_000,
    ) -> None:
        self.opener = opener
        # The broker's defaults; a topic with its own configs gets its own (``topic_log_config``).
        self.log_config = log_config
        self.topic_log_config: Callable[[str], LogConfig] = lambda _topic: self.log_config
        self.producer_id_expiration_ms = producer_id_expiration_ms
        # KIP-758 (issue 5): producer.state.retained.batches, max.in.flight.sequence.number.per.connection.
        self.retained_batches = retained_batches
        self.duplicate_window = duplicate_window
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        self._next_expiration_check_ms: int | None = None
        # One line per producer-state snapshot given up on load; the shell logs and clears them.
        self.warnings: list[str] = []
        # Log dir -> why it went offline: a write to it failed (ENOSPC, EIO), so it stays offline
        # until a restart and every partition in it answers KAFKA_STORAGE_ERROR, while the other dirs
        # keep serving (Kafka's LogDirFailureChannel and ReplicaManager.handleLogDirFailure). Nothing
        # more is written to it after the failed write, which may have left a torn tail that recovery
        # cuts at the next start. The shell is told once per dir: (log dir, reason).
        self.offline_log_dirs: dict[str, str] = {}
        self.on_storage_failure: Callable[[str, str], None] = lambda _log_dir, _reason: None
        self.partitions: dict[TopicPartition, Partition] = {}
        # Partitions that could not be opened (their dir is offline, or opening failed): partition ->
        # its log dir ("" when no dir was online). Kafka's HostedPartition.Offline.
        self._unopened: dict[TopicPartition, str] = {}
        # Partitions whose log a clean restart has not opened yet (DeferredLog), in image order.
        self._deferred: dict[TopicPartition, Partition] = {}
        # Log compaction: the cleaner's settings, what it has done, and per partition the delete
        # horizon its kept tombstones wait for (a pass is due then even with nothing dirty).
        self.cleaner_config = CleanerConfig()
        self.cleaner_stats = CleanerStats()
        self._cleaner_horizons: dict[TopicPartition, int] = {}

    # --- lifecycle, driven by the metadata image -------------------------------------------------

    def ensure_partition(
        self, topic: str, partition_index: int, now_ms: int, *, replicated: bool = False, broker_id: int = -1
    ) -> Partition:
        """The partition, its log opened (and recovered) in its log dir the first time. Raises
        KafkaError(KAFKA_STORAGE_ERROR) when that dir is offline or the log cannot be opened: the
        partition is then offline until a restart (Kafka's ReplicaManager.markPartitionOffline)."""
        key = (topic, partition_index)
        existing = self.partitions.get(key)
        if existing is not None:
            return existing
        log_dir = self._unopened.get(key)
        if log_dir is None:
            log_dir = self.opener.log_dir_for(topic, partition_index, self.offline_log_dirs)
            if log_dir is None or log_dir in self.offline_log_dirs:
                # No online dir, or its log is in an offline one: a new empty log elsewhere would hide
                # the records acknowledged there, so it stays offline (Kafka, KIP-858).
                self._unopened[key] = log_dir or ""
        if key in self._unopened:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"{topic}-{partition_index}: log dir {self._unopened[key] or '(none online)'} is offline",
            )
        assert log_dir is not None
        if not replicated:
            clean = self.opener.clean_log_bounds(topic, partition_index)
            if clean is not None:
                part = Partition(
                    topic,
                    partition_index,
                    None,
                    None,
                    replication=PartitionReplication(broker_id),
                    opened_transactions=None,
                    log_dir=log_dir,
                )
                part.deferred = DeferredLog(
                    *clean, self.topic_log_config(topic), functools.partial(self._open_deferred, part), now_ms
                )
                self.partitions[key] = self._deferred[key] = part
                return part
        log, state, transactions = self._open_log(
            key, log_dir, self.topic_log_config(topic), replicated, now_ms
        )
        epochs = LeaderEpochCache()
        if replicated:
            epochs = self._load_epochs(log)
        part = Partition(
            topic,
            partition_index,
            log,
            state,
            replicated,
            PartitionReplication(broker_id),
            epochs,
            transactions,
            log_dir=log_dir,
        )
        self.partitions[key] = part
        return part

    def _open_log(
        self, key: TopicPartition, log_dir: str, config: LogConfig, replicated: bool, now_ms: int
    ) -> tuple[PartitionLog, ProducerStateManager, TransactionIndex]:
        """A partition's log opened (and recovered) in ``log_dir``, its producer state and transaction
        index recovered with it; KafkaError(KAFKA_STORAGE_ERROR) when it cannot be."""
        topic, partition_index = key
        try:
            log = self.opener.open_log(
                log_dir, topic, partition_index, config, high_watermark_tracks_log_end=not replicated
            )
        except DescriptorShortageError as exc:
            # Out of file descriptors: not a dir failure; the next image opens it again (issue 29).
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{partition_index}: {exc.strerror} (retriable)"
            ) from None
        except OSError as exc:
            self._unopened[key] = log_dir
            self._dir_failed(log_dir, f"{topic}-{partition_index}", exc)
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{partition_index}: {exc.strerror or exc}"
            ) from None
        state = self._new_producer_state()
        # The newest producer-state snapshot and transaction index, then the log after them (§2.6).
        transactions, problems = recover(log, state, now_ms)
        self.warnings.extend(f"{topic}-{partition_index}/{line}" for line in problems)
        return log, state, transactions

    def _open_deferred(self, part: Partition) -> None:
        """Open a log ``ensure_partition`` deferred. When it cannot be opened the partition is hosted
        unopened (KAFKA_STORAGE_ERROR) as if the image had failed to open it, and KafkaError is raised;
        a descriptor shortage leaves it deferred, to be opened again on its next use."""
        deferred = part.deferred
        assert deferred is not None
        key = (part.topic, part.partition_index)
        if self._is_offline(part):  # nothing is opened in an offline dir (it answers KAFKA_STORAGE_ERROR)
            self._deferred.pop(key, None)
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"{part.topic}-{part.partition_index}: log dir offline"
            )
        try:
            log, state, transactions = self._open_log(
                key, part.log_dir, deferred.config, False, deferred.now_ms
            )
        except KafkaError:
            if key in self._unopened:
                self.partitions.pop(key, None)
                self._deferred.pop(key, None)
            raise
        part.opened_log, part.opened_producer_state, part.opened_transactions = log, state, transactions
        part.deferred = None
        self._deferred.pop(key, None)

    def open_deferred(self, count: int) -> int:
        """Open up to ``count`` of the logs a clean restart deferred (the shell calls this in slices
        while the node serves, so every log is open soon after a start and retention, expiration and
        the cleaner see it); returns how many are still deferred."""
        for part in list(itertools.islice(self._deferred.values(), count)):
            try:
                self._open_deferred(part)
            except KafkaError:
                if part.deferred is not None:  # descriptors ran short: try it again at the next slice
                    break
        return len(self._deferred)

    def make_replicated(self, part: Partition) -> None:
        """A partition opened with one replica gains more (a reassignment raising its replication factor,
        KIP-455): its high watermark now waits for the ISR and its batches' leader epochs are tracked for
        the followers' truncation, as if it had been opened replicated. Going back to one replica keeps
        this (an ISR of the leader alone moves the high watermark with every append)."""
        if part.replicated:
            return
        log = part.log  # a deferred log is opened first (KafkaError when it cannot be: unchanged then)
        part.replicated = True
        log.stop_tracking_log_end()
        part.epochs = self._load_epochs(log)

    @staticmethod
    def _load_epochs(log: PartitionLog) -> LeaderEpochCache:
        """leader-epoch-checkpoint after a clean shutdown (issue 29: no segment is read); otherwise the
        leader epoch of every batch, since a crash may have cut the log below what the file says."""
        if log.opened_clean:
            data = log.store.read_checkpoint(LEADER_EPOCH_CHECKPOINT)
            if data is not None:
                return LeaderEpochCache(decode_leader_epoch_checkpoint(data))
        return LeaderEpochCache.from_batches(
            [(h.partition_leader_epoch, h.base_offset) for h in log.batch_headers()]
        )

    def _new_producer_state(self) -> ProducerStateManager:
        return ProducerStateManager(
            retained_batches=self.retained_batches,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            duplicate_window=self.duplicate_window,
        )

    def apply_partition(
        self,
        part: Partition,
        *,
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        now_ms: int,
    ) -> Transition:
        """A partition's leadership and ISR from a new metadata image."""
        transition = part.replication.apply_partition(
            leader_id=leader_id,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            replicas=replicas,
            isr=isr,
            log_end_offset=part.log_end_offset,
            now_ms=now_ms,
        )
        if transition is Transition.BECAME_LEADER:
            # The new epoch starts at the log end (Kafka assigns it in the epoch cache at election).
            part.epochs.assign(leader_epoch, part.log_end_offset)
        if part.replicated and part.replication.is_leader:
            self._advance_high_watermark(part)
        return transition

    def _advance_high_watermark(self, part: Partition) -> bool:
        """Move the leader's high watermark up to what the maximal ISR has (never down)."""
        candidate = part.replication.high_watermark(part.log.log_end_offset)
        if candidate > part.log.high_watermark:
            part.log.set_high_watermark(candidate)
            return True
        return False

    def apply_log_config(self, part: Partition, config: LogConfig) -> None:
        """A topic's configs changed (a ConfigRecord): the next append, roll and retention run use them."""
        if part.deferred is not None:
            part.deferred.config = config
        elif part.log.config != config:
            part.log.set_config(config)

    def remove_partition(self, topic: str, partition_index: int) -> None:
        self._cleaner_horizons.pop((topic, partition_index), None)
        self._unopened.pop((topic, partition_index), None)
        part = self.partitions.pop((topic, partition_index), None)
        self._deferred.pop((topic, partition_index), None)
        if part is not None and part.deferred is None:  # a deferred log was never opened: nothing to close
            if self._is_offline(part):
                part.log.store.close()  # no flush or snapshot into an offline dir
            else:
                try:
                    part.log.close()
                except OSError as exc:
                    self._storage_failed(part, exc)
                    part.log.store.close()
        # Best effort even in an offline dir: a deleted topic's files must not come back with a
        # topic of the same name (the shell ignores what it cannot remove).
        self.opener.delete_log(topic, partition_index)

    def hosts(self, topic: str, partition_index: int) -> bool:
        """The partition is hosted here, opened or not (its dir offline)."""
        key = (topic, partition_index)
        return key in self.partitions or key in self._unopened

    def get(self, topic: str, partition_index: int) -> Partition | None:
        """The partition, its log opened (a deferred one now); None when not hosted or when its log
        cannot be opened (``is_offline`` tells which)."""
        part = self.partitions.get((topic, partition_index))
        if part is not None and part.deferred is not None:
            try:
                part.deferred.open()
            except KafkaError:
                return None
        return part

    # --- log dirs going offline -------------------------------------------------------------------

    @property
    def unopened_partitions(self) -> list[TopicPartition]:
        """Partitions hosted here whose log could not be opened (ensure_partition raised)."""
        return list(self._unopened)

    def is_offline(self, topic: str, partition_index: int) -> bool:
        """The partition is hosted here but its log dir is offline (or its log could not be opened):
        requests for it answer KAFKA_STORAGE_ERROR (Kafka's HostedPartition.Offline)."""
        key = (topic, partition_index)
        part = self.partitions.get(key)
        return key in self._unopened if part is None else self._is_offline(part)

    def _is_offline(self, part: Partition) -> bool:
        return part.log_dir in self.offline_log_dirs

    def _dir_failed(self, log_dir: str, what: str, exc: OSError) -> None:
        """A write to ``log_dir`` failed: the whole dir goes offline, told to the shell once (Kafka's
        LogDirFailureChannel.maybeAddOfflineLogDir: one dir failing leaves the others serving). Running
        out of file descriptors is no dir failure (issue 29): the dir stays online."""
        if log_dir not in self.offline_log_dirs and not isinstance(exc, DescriptorShortageError):
            reason = f"{what}: {exc.strerror or exc}"
            self.offline_log_dirs[log_dir] = reason
            self.on_storage_failure(log_dir, reason)

    def _storage_failed(self, part: Partition, exc: OSError) -> AppendResult:
        if isinstance(exc, DescriptorShortageError):
            # KAFKA_STORAGE_ERROR is retriable for every Kafka client; the dir stays online.
            return AppendResult(
                ErrorCode.KAFKA_STORAGE_ERROR,
                error_message=f"{part.topic}-{part.partition_index}: {exc.strerror} (retriable)",
            )
        self._dir_failed(part.log_dir, f"{part.topic}-{part.partition_index}", exc)
        return self._offline(part)

    def _offline(self, part: Partition) -> AppendResult:
        return AppendResult(
            ErrorCode.KAFKA_STORAGE_ERROR,
            error_message=f"log dir {part.log_dir} is offline ({self.offline_log_dirs[part.log_dir]})",
        )

    # --- produce ----------------------------------------------------------------------------------

    def append(
        self, part: Partition, records: memoryview, now_ms: int, *, verification_guard: object | None = None
    ) -> AppendResult:
        if self._is_offline(part):
            return self._offline(part)
        try:
            headers = validate_batches(records)
        except InvalidBatchError as exc:
            return AppendResult(exc.error_code, error_message=str(exc))
        config = part.log.config
        for header in headers:
            if header.size_in_bytes > config.max_message_bytes:
                return AppendResult(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    error_message=f"batch of {header.size_in_bytes} bytes exceeds max.message.bytes="
                    f"{config.max_message_bytes} of {part.topic}",
                )
            if not config.message_timestamp_log_append_time and (
                header.base_timestamp < now_ms - config.message_timestamp_before_max_ms
                or header.max_timestamp > now_ms + config.message_timestamp_after_max_ms
            ):
                # KIP-937 (LogValidator.validateTimestamp): CreateTime timestamps within the bounds.
                return AppendResult(
                    ErrorCode.INVALID_TIMESTAMP,
                    error_message=f"timestamps {header.base_timestamp}..{header.max_timestamp} of {part.topic} "
                    f"are outside [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]",
                )
            if header.is_control:
                # Control batches (transaction markers) come from transaction coordinators only.
                return AppendResult(
                    ErrorCode.INVALID_RECORD, error_message="a client may not write control batches"
                )
        if config.cleanup_policy_compact and not _all_keyed(records, headers):
            # LogValidator: the cleaner could never keep such a record, so it is refused up front.
            return AppendResult(
                ErrorCode.INVALID_RECORD,
                error_message=f"Compacted topic cannot accept message without key in topic partition "
                f"{part.topic}-{part.partition_index}.",
            )
        if len(records) > config.segment_bytes:
            # UnifiedLog.append: the records of one append go into one segment, so more than segment.bytes
            # of them is refused (RecordBatchTooLargeException) rather than stored in an oversized segment.
            return AppendResult(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                error_message=f"Message batch size is {len(records)} bytes in append to partition "
                f"{part.topic}-{part.partition_index}, which exceeds the maximum configured segment size "
                f"of {config.segment_bytes}.",
            )
        state = part.producer_state
        for header in headers:
            if (
                header.is_transactional
                and state.open_transaction_first_offset(header.producer_id) is None
                and (
                    verification_guard is None
                    or part.verification_guards.get(header.producer_id) is not verification_guard
                )
            ):
                # KIP-890 part 1: a transaction opens here only once its coordinator said the partition
                # is in it, and no marker landed since it said so.
                return AppendResult(
                    ErrorCode.INVALID_TXN_STATE,
                    log_start_offset=part.log.log_start_offset,
                    error_message=f"producer {header.producer_id} has no verified transaction on "
                    f"{part.topic}-{part.partition_index}: add the partition to the transaction first",
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
                # acks=all answers the retry only once the original is replicated too.
                last_offset=check.duplicate.last_offset,
                log_append_time_ms=check.duplicate.timestamp_ms,
            )
        appended: bytearray | memoryview = records
        if config.compression_type is not None and not in_codec(headers, config.compression_type):
            # compression.type other than producer (LogValidator): batches in another codec are
            # rebuilt in the topic's; when every batch is in it already the bytes go on as they came.
            try:
                appended, headers = recompress_batches(
                    records, headers, config.compression_type, config.compression_level
                )
            except ValueError as exc:
                return AppendResult(ErrorCode.CORRUPT_MESSAGE, error_message=str(exc))
            too_large = next((h for h in headers if h.size_in_bytes > config.max_message_bytes), None)
            if too_large is not None:
                # UnifiedLog.append checks the sizes again after a recompression.
                return AppendResult(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    error_message=f"batch of {too_large.size_in_bytes} bytes recompressed to "
                    f"{part.topic}'s compression.type exceeds max.message.bytes={config.max_message_bytes}",
                )
        if config.message_timestamp_log_append_time:
            appended, headers = stamp_log_append_time(appended, headers, now_ms)
        try:
            info = self._leader_append(part, appended, headers)
        except OSError as exc:
            return self._storage_failed(part, exc)
        assigned: list[BatchHeader] = []
        next_offset = info.first_offset
        for header in headers:
            assigned.append(header._replace(base_offset=next_offset))
            next_offset += header.last_offset_delta + 1
        part.producer_state.on_append(assigned, now_ms)
        for header in assigned:
            if header.is_transactional:
                part.verification_guards.pop(header.producer_id, None)
        if part.replicated:
            self._advance_high_watermark(part)  # an ISR of the leader alone moves it at once
        else:
            # One replica: every appended batch is replicated to the whole ISR at once.
            part.log.set_high_watermark(part.log.log_end_offset)
        return AppendResult(
            ErrorCode.NONE,
            base_offset=info.first_offset,
            log_start_offset=part.log.log_start_offset,
            last_offset=info.last_offset,
            log_append_time_ms=now_ms if config.message_timestamp_log_append_time else -1,
        )

    # --- replication: the leader's side -------------------------------------------------------------

    def check_replica_fetch(
        self,
        part: Partition,
        replica_id: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        current_leader_epoch: int,
        now_ms: int,
    ) -> ReplicaFetchCheck:
        """A follower's fetch of one partition on its leader: epochs checked (FENCED_LEADER_EPOCH for
        an older one, UNKNOWN_LEADER_EPOCH for a newer one), divergence found (KIP-320), its log end
        recorded and the high watermark moved."""
        replication = part.replication
        if self._is_offline(part):
            return ReplicaFetchCheck(ErrorCode.KAFKA_STORAGE_ERROR)
        if not replication.is_leader:
            return ReplicaFetchCheck(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if 0 <= current_leader_epoch < replication.leader_epoch:
            return ReplicaFetchCheck(ErrorCode.FENCED_LEADER_EPOCH)
        if current_leader_epoch > replication.leader_epoch:
            return ReplicaFetchCheck(ErrorCode.UNKNOWN_LEADER_EPOCH)
        if replica_id not in replication.replicas:
            return ReplicaFetchCheck(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        log_end = part.log.log_end_offset
        if last_fetched_epoch >= 0:
            epoch, end_offset = part.epochs.end_offset_for(last_fetched_epoch, log_end)
            if epoch != last_fetched_epoch or end_offset < fetch_offset:
                return ReplicaFetchCheck(ErrorCode.NONE, diverging_epoch=(epoch, end_offset))
        if fetch_offset > log_end:
            return ReplicaFetchCheck(ErrorCode.OFFSET_OUT_OF_RANGE)
        replication.record_follower_fetch(replica_id, fetch_offset, log_end, now_ms)
        return ReplicaFetchCheck(ErrorCode.NONE, high_watermark_advanced=self._advance_high_watermark(part))

    def read_for_replica(self, part: Partition, fetch_offset: int, max_bytes: int) -> ReadResult:
        """Batches for a follower: up to the log end, not the high watermark."""
        log = part.log
        try:
            result = log.read(fetch_offset, max_bytes, max_offset=log.log_end_offset, min_one_batch=True)
        except KafkaError as exc:
            return ReadResult(exc.error_code, log.high_watermark, log.log_start_offset)
        except OSError as exc:
            return ReadResult(self._storage_failed(part, exc).error_code)
        return ReadResult(ErrorCode.NONE, log.high_watermark, log.log_start_offset, list(result.chunks))

    # --- replication: the follower's side -----------------------------------------------------------

    def append_as_follower(
        self, part: Partition, records: bytes | bytearray | memoryview, now_ms: int
    ) -> ErrorCode:
        """Batches from the leader, stored exactly as the leader stored them (offsets, epochs, producer
        ids, sequences, timestamps); the producer state follows them (Kafka's REPLICATION origin: no
        sequence checks, the leader made them). Only batch headers are read, and each batch's CRC
        checked (Kafka's analyzeAndValidateRecords for a follower append); the bytes are written as
        they came, without a copy (issue 29)."""
        buf = memoryview(records)
        try:
            headers = validate_batches(buf, from_leader=True)
        except InvalidBatchError as exc:
            return exc.error_code
        first_batch = headers[0]
        if (
            part.log.log_end_offset == part.log.log_start_offset
            and first_batch.base_offset < part.log.log_end_offset <= first_batch.last_offset
        ):
            # Our empty log starts where the leader's does, inside this batch (DeleteRecords need not
            # cut at a batch): start it at the batch instead (Kafka's
            # Partition.appendRecordsToFollowerOrFutureReplica on UnexpectedAppendOffsetException).
            self.restart_at(part, first_batch.base_offset, now_ms)
        expected = part.log.log_end_offset
        for header in headers:
            # At or past our log end (a compacted leader's offsets have gaps), and increasing; anything
            # else is not where our log ends: the next fetch (from our log end) sorts it out.
            if header.base_offset < expected:
                return ErrorCode.OFFSET_OUT_OF_RANGE
            expected = header.next_offset
        if self._is_offline(part):
            return ErrorCode.KAFKA_STORAGE_ERROR
        rolled_from = part.log.active_segment_base_offset
        try:
            part.log.append(buf, headers, assign_offsets=False)
            if part.log.active_segment_base_offset != rolled_from:
                self._checkpoint(part)
        except OSError as exc:
            return self._storage_failed(part, exc).error_code
        position = 0
        for header in headers:
            part.epochs.assign(header.partition_leader_epoch, header.base_offset)
            if header.is_control and header.has_producer_id and header.record_count > 0:
                marker = decode_records(memoryview(buf)[position : position + header.size_in_bytes])[0]
                first = part.producer_state.open_transaction_first_offset(header.producer_id)
                part.producer_state.replay(header, now_ms)
                part.transactions.on_marker(
                    header.producer_id,
                    first,
                    header.base_offset,
                    control_type_of(marker.key) != CONTROL_TYPE_ABORT,
                    self._lso_after(part, header.base_offset),
                )
            else:
                part.producer_state.replay(header, now_ms)
            position += header.size_in_bytes
        if part.producer_state.map_end_offset < part.log.log_end_offset:
            part.producer_state.map_end_offset = part.log.log_end_offset
        return ErrorCode.NONE

    def truncate_for_divergence(self, part: Partition, epoch: int, end_offset: int, now_ms: int) -> int:
        """The leader answered DivergingEpoch(epoch, end_offset): drop our divergent tail; returns the
        new log end."""
        offset = follower_truncation_offset(part.epochs, part.log.log_end_offset, epoch, end_offset)
        self.truncate(part, offset, now_ms)
        return part.log.log_end_offset

    def truncate(self, part: Partition, offset: int, now_ms: int) -> None:
        """Truncate to ``offset`` (or start over at it, when it is below the log start) and rebuild the
        producer state from what is left (snapshots past the new end are dropped on the way)."""
        if self._is_offline(part):
            return
        try:
            if offset < part.log.log_start_offset:
                part.log.truncate_fully_and_start_at(offset)
            else:
                part.log.truncate_to(offset)
        except OSError as exc:
            self._storage_failed(part, exc)
            return
        part.epochs.truncate_from_end(part.log.log_end_offset)
        part.producer_state = self._new_producer_state()
        part.transactions, problems = recover(part.log, part.producer_state, now_ms)
        self.warnings.extend(f"{part.topic}-{part.partition_index}/{line}" for line in problems)

    def restart_at(self, part: Partition, offset: int, now_ms: int) -> None:
        """The leader's log starts past our end (OFFSET_OUT_OF_RANGE): start over at its log start."""
        if self._is_offline(part):
            return
        try:
            part.log.truncate_fully_and_start_at(offset)
        except OSError as exc:
            self._storage_failed(part, exc)
            return
        part.epochs.clear_and_start_at()
        part.producer_state = self._new_producer_state()
        part.transactions, _ = recover(part.log, part.producer_state, now_ms)

    def follow_leader_log_start(self, part: Partition, leader_log_start_offset: int) -> None:
        """A follower's log start follows the leader's (DeleteRecords, retention), as far as its high
        watermark reaches: Kafka's ReplicaFetcherThread calls maybeIncrementLogStartOffset with the
        fetch response's log_start_offset, so a new leader does not serve records deleted on the old."""
        if part.log.log_start_offset < leader_log_start_offset <= part.log.high_watermark:
            self.delete_records(part, leader_log_start_offset)
            part.transactions.drop_below(part.log.log_start_offset)

    def update_follower_high_watermark(self, part: Partition, leader_high_watermark: int) -> bool:
        """A follower's high watermark: the leader's, as far as our log reaches."""
        part.leader_high_watermark = leader_high_watermark
        new = min(leader_high_watermark, part.log.log_end_offset)
        if new > part.log.high_watermark:
            part.log.set_high_watermark(new)
            return True
        return False

    # --- fetch ------------------------------------------------------------------------------------

    def read(
        self,
        part: Partition,
        fetch_offset: int,
        max_bytes: int,
        *,
        min_one_batch: bool,
        isolation_level: int = 0,
    ) -> ReadResult:
        """A consumer's read: up to the high watermark (read_uncommitted) or the last stable offset
        (read_committed, with the aborted transactions the read overlaps)."""
        log = part.log
        lso = self.last_stable_offset(part)
        read_committed = isolation_level == 1
        try:
            result = log.read(
                fetch_offset,
                max_bytes,
                max_offset=lso if read_committed else log.high_watermark,
                min_one_batch=min_one_batch,
            )
        except KafkaError as exc:
            return ReadResult(
                exc.error_code, log.high_watermark, log.log_start_offset, last_stable_offset=lso
            )
        except OSError as exc:  # EIO reading: the dir goes offline as for a write (Kafka's LocalLog)
            return ReadResult(self._storage_failed(part, exc).error_code)
        aborted = None
        if read_committed:
            upper = result.next_offset if result.chunks else lso
            aborted = part.transactions.collect_aborted(fetch_offset, upper)
        return ReadResult(
            ErrorCode.NONE, log.high_watermark, log.log_start_offset, list(result.chunks), lso, aborted
        )

    # --- transactions (KIP-98, KIP-890) ---------------------------------------------------------------

    def last_stable_offset(self, part: Partition) -> int:
        return part.transactions.last_stable_offset(
            part.producer_state.first_unstable_offset(), part.log.high_watermark
        )

    @staticmethod
    def _lso_after(part: Partition, marker_offset: int) -> int:
        """The last stable offset an aborted transaction records: the first offset still undecided
        once its marker is applied, else the offset after the marker (Kafka's
        lastStableOffset(completedTxn))."""
        first = part.producer_state.first_unstable_offset()
        return marker_offset + 1 if first is None else min(first, marker_offset + 1)

    def needs_verification(self, part: Partition, producer_id: int) -> bool:
        """A transactional batch of this producer would open a transaction here (KIP-890)."""
        return part.producer_state.open_transaction_first_offset(producer_id) is None

    def begin_verification(self, part: Partition, producer_id: int) -> object:
        guard = object()
        part.verification_guards[producer_id] = guard
        return guard

    def append_txn_marker(
        self,
        part: Partition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        now_ms: int,
    ) -> AppendResult:
        """A transaction coordinator's COMMIT/ABORT marker (WriteTxnMarkers): one control batch that
        ends the producer's transaction here (ProducerAppendInfo.appendEndTxnMarker's checks)."""
        state = part.producer_state
        entry = state.entry(producer_id)
        if entry is not None and producer_epoch < entry.producer_epoch:
            return AppendResult(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                error_message=f"marker epoch {producer_epoch} is below producer {producer_id}'s "
                f"epoch {entry.producer_epoch}",
            )
        if coordinator_epoch < state.coordinator_epoch(producer_id):
            return AppendResult(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                error_message=f"coordinator epoch {coordinator_epoch} is below "
                f"{state.coordinator_epoch(producer_id)}",
            )
        batch = build_batch(
            [end_txn_marker(commit, coordinator_epoch)],
            timestamp_ms=now_ms,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=NO_SEQUENCE,
            is_transactional=True,
            is_control=True,
        )
        headers = validate_batches(batch)
        first = state.open_transaction_first_offset(producer_id)
        if self._is_offline(part):
            return self._offline(part)
        try:
            info = self._leader_append(part, batch, headers)
        except OSError as exc:
            return self._storage_failed(part, exc)
        state.on_append([headers[0]._replace(base_offset=info.first_offset)], now_ms)
        state.set_coordinator_epoch(producer_id, coordinator_epoch)
        part.verification_guards.pop(producer_id, None)
        part.transactions.on_marker(
            producer_id,
            first,
            info.first_offset,
            commit,
            self._lso_after(part, info.first_offset),
        )
        if part.replicated:
            self._advance_high_watermark(part)
        else:
            part.log.set_high_watermark(part.log.log_end_offset)
        return AppendResult(
            ErrorCode.NONE,
            base_offset=info.first_offset,
            log_start_offset=part.log.log_start_offset,
            last_offset=info.last_offset,
        )

    def _leader_append(
        self, part: Partition, records: bytearray | memoryview, headers: list[BatchHeader]
    ) -> AppendInfo:
        """Append as the leader: its epoch stamped on every batch (followers truncate by it, KIP-101)
        and recorded; producer state and the transaction index checkpointed at a roll."""
        rolled_from = part.log.active_segment_base_offset
        leader_epoch = part.replication.leader_epoch
        info = part.log.append(records, headers, leader_epoch=max(leader_epoch, 0))
        if part.replicated:
            part.epochs.assign(leader_epoch, info.first_offset)
        if part.log.active_segment_base_offset != rolled_from:
            # Kafka snapshots producer state at every roll, as of the new segment's base offset, which
            # is where the state stands before this append's batches (UnifiedLog.roll).
            self._checkpoint(part)
        return info

    def _checkpoint(self, part: Partition) -> None:
        """Producer state and the aborted-transaction index, as of the log end (segment roll, close)."""
        offset = write_snapshot(part.log.store, part.producer_state)
        write_index(part.log.store, part.transactions, offset)

    # --- housekeeping -----------------------------------------------------------------------------

    def delete_records(self, part: Partition, offset: int) -> tuple[ErrorCode, int]:
        """DeleteRecords: the log start moved up to ``offset``; (error, new low watermark)."""
        if self._is_offline(part):
            return ErrorCode.KAFKA_STORAGE_ERROR, -1
        try:
            return ErrorCode.NONE, part.log.delete_records_before(offset)
        except OSError as exc:
            return self._storage_failed(part, exc).error_code, -1

    def apply_retention(self, now_ms: int) -> int:
        deleted = 0
        for part in self.partitions.values():
            if self._is_offline(part) or part.deferred is not None:
                # Nothing is deleted from an offline dir either (Kafka skips its logs); a deferred log
                # is opened in the background soon after a start, and the next run sees it.
                continue
            try:
                removed = part.log.apply_retention(now_ms)
                if removed:
                    delete_snapshots_below(part.log.store, part.log.log_start_offset)
            except OSError as exc:
                self._storage_failed(part, exc)
                continue
            if removed:
                deleted += len(removed)
                part.transactions.drop_below(part.log.log_start_offset)
        self.expire_producers(now_ms)
        return deleted

    def expire_producers(self, now_ms: int) -> int:
        """The producer.id.expiration.check.interval.ms timer (KIP-360: expiration is the only way
        producer state goes; retention and DeleteRecords leave it). Returns producers removed."""
        if self._next_expiration_check_ms is not None and now_ms < self._next_expiration_check_ms:
            return 0
        self._next_expiration_check_ms = now_ms + self.producer_id_expiration_check_interval_ms
        return sum(
            len(part.producer_state.remove_expired(now_ms))
            for part in self.partitions.values()
            if part.deferred is None  # its producer state is not loaded yet
        )

    # --- log compaction ---------------------------------------------------------------------------------

    def next_cleaning(self, now_ms: int) -> tuple[Partition, Iterator[None]] | None:
        """A cleaning pass of the compacted partition that needs one most (the dirtiest above its
        min.cleanable.dirty.ratio, or one whose tombstones' delete horizon has passed), for the shell to
        step; None when none does. Rolled segments are flushed first: only flushed ones are cleaned.
        Partitions in an offline dir are not cleaned (Kafka's cleaner skips offline dirs)."""
        best: tuple[float, Partition, bool] | None = None
        for key, part in self.partitions.items():
            if part.deferred is not None or self._is_offline(part):
                continue
            log = part.log
            if not log.config.cleanup_policy_compact:
                continue
            if log.recovery_point < log.active_segment_base_offset:
                try:
                    log.flush()
                except OSError as exc:
                    self._storage_failed(part, exc)
                    continue
            span = cleanable(log, now_ms, part.producer_state.first_unstable_offset())
            horizon_ms = self._cleaner_horizons.get(key)
            expire = horizon_ms is not None and now_ms >= horizon_ms
            ratio = span.dirty_ratio
            if (span.dirty_bytes and ratio >= log.config.min_cleanable_dirty_ratio) or expire:
                if best is None or ratio > best[0]:
                    best = (ratio, part, expire)
        if best is None:
            return None
        return best[1], self._clean(best[1], now_ms, best[2])

    def _clean(self, part: Partition, now_ms: int, expire_deletes: bool) -> Iterator[None]:
        key = (part.topic, part.partition_index)
        stats = CleanerStats()
        self._cleaner_horizons.pop(key, None)
        try:
            steps = clean(
                part.log,
                now_ms,
                config=self.cleaner_config,
                first_unstable_offset=part.producer_state.first_unstable_offset(),
                aborted=part.transactions.aborted,
                producer_last_offsets={
                    entry.producer_id: entry.last_data_offset
                    for entry in part.producer_state.active_producers()
                },
                stats=stats,
                expire_deletes=expire_deletes,
            )
            for step in steps:
                yield step
                if self._is_offline(part):
                    # A write took the dir offline while the pass waited for its turn: the pass is not
                    # resumed, so nothing more is written there; the next start's recovery discards
                    # the half-made .cleaned files.
                    return
        except OSError as exc:
            self._storage_failed(part, exc)
            return
        finally:
            self.cleaner_stats.add(stats)
        if stats.next_delete_horizon_ms is not None:
            self._cleaner_horizons[key] = stats.next_delete_horizon_ms

    def flush_all(self) -> None:
        for part in self.partitions.values():
            if self._is_offline(part) or part.deferred is not None:
                continue
            try:
                part.log.flush()
            except OSError as exc:
                self._storage_failed(part, exc)

    def close_all(self, run: JobRunner = run_in_order) -> dict[str, CleanShutdown]:
        """Flush and close every log. Returns, per online log dir whose every partition closed
        cleanly, what Kafka's LogManager.shutdown checkpoints there: each partition's log end (the
        recovery point after the last flush), high watermark and log start offset; the shell writes
        them with ``.kafka_cleanshutdown`` so the next start recovers nothing.

        Each partition's close touches only its own log and files, so ``run`` may run them at once (the
        shell runs them on a bounded thread pool, as LogManager.shutdown closes logs on
        num.recovery.threads.per.data.dir threads per dir); what they leave is gathered here after."""
        closed: dict[str, CleanShutdown] = {}
        failed_dirs = set(self.offline_log_dirs)
        # The pool gets the logs with something to write and sync; the others close in line meanwhile
        # (a job handed to another thread costs more than closing a log left as a clean start opened
        # it; at 100k partitions those are seconds that overlap the written logs' syncs).
        written: list[Partition] = []
        untouched: list[Partition] = []
        deferred: list[Partition] = []
        for part in self.partitions.values():
            if part.deferred is not None:
                if not self._is_offline(part):
                    deferred.append(part)  # never opened: its files are as the last clean stop left them
            elif self._is_offline(part):
                part.log.store.close()  # an offline dir: no flush, no snapshot; recovery runs at start
            elif part.log.untouched_since_clean_open and not part.epochs.dirty:
                untouched.append(part)
            else:
                written.append(part)
        errors = run(
            [functools.partial(self._close_partition, part) for part in written],
            [functools.partial(self._close_partition, part) for part in untouched],
        )
        for part, error in zip(written + untouched, errors, strict=True):
            if error is not None:
                failed_dirs.add(part.log_dir)
                self._storage_failed(part, error)
                part.log.store.close()
                continue
            state = closed.setdefault(part.log_dir, CleanShutdown())
            key = (part.topic, part.partition_index)
            state.recovery_points[key] = part.log.log_end_offset
            state.high_watermarks[key] = part.log.high_watermark
            state.log_start_offsets[key] = part.log.log_start_offset
        for part in deferred:
            assert part.deferred is not None
            state = closed.setdefault(part.log_dir, CleanShutdown())
            key = (part.topic, part.partition_index)
            state.recovery_points[key] = state.high_watermarks[key] = part.deferred.log_end_offset
            state.log_start_offsets[key] = part.deferred.log_start_offset
        self.partitions.clear()
        self._deferred.clear()
        for log_dir in self._unopened.values():
            failed_dirs.add(log_dir)
        return {log_dir: state for log_dir, state in closed.items() if log_dir not in failed_dirs}

    def _close_partition(self, part: Partition) -> None:
        """One log's clean close: its producer snapshot and leader epochs where they changed, then the
        log flushed and closed. Touches nothing shared with another partition (``close_all``)."""
        # A snapshot at the log end, so the next start reads no log at all -- unless there is one there
        # already or nothing to snapshot (Kafka's takeSnapshot skips an offset it has: issue 29, a stop
        # costs what the changed partitions cost).
        offset = part.producer_state.map_end_offset
        if offset > 0 and offset not in list_snapshot_offsets(part.log.store):
            self._checkpoint(part)
        if part.replicated and part.epochs.dirty:
            part.log.store.write_checkpoint(
                LEADER_EPOCH_CHECKPOINT, encode_leader_epoch_checkpoint(part.epochs.entries)
            )
            part.epochs.dirty = False
        part.log.close()
