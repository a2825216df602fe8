"""The partition logs across every dir of ``log.dirs`` (Kafka's LogManager with JBOD): the shell side of
``pykraft.broker.replica_manager.LogOpener``.

A partition's log is ``<log dir>/<topic>-<partition>/`` with Kafka's file names. One found on disk in
a dir stays there; a new one goes to the online dir holding the fewest partitions, ties broken by the
order of ``log.dirs`` (LogManager.nextLogDirs, Kafka's default placement). The counts start from what
is on disk, as Kafka's come from the logs it loads at startup, so a partition created before the
image's other partitions are opened is placed as it would be after. Each dir is named by its absolute
path, as Kafka's LogManager and DescribeLogDirs name it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from pykraft.broker.replica_manager import CleanShutdown, ReplicaManager, run_in_order
from pykraft.io.descriptor_cache import DescriptorCache
from pykraft.io.file_store import OPEN_SEGMENTS_MAX, DeferredDirSyncs, FileSegmentStore
from pykraft.io.heap import collection_paused
from pykraft.log.checkpoint_files import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    decode_offset_checkpoint,
    encode_clean_shutdown,
    encode_offset_checkpoint,
)
from pykraft.log.partition_log import LogConfig, PartitionLog

log = logging.getLogger(__name__)


def next_log_dir(
    log_dirs: Sequence[str], partitions_per_dir: Mapping[str, int], offline_log_dirs: Collection[str]
) -> str | None:
    """Where a new partition goes: the online dir with the fewest partitions, the first in
    ``log_dirs`` order among equals (LogManager.nextLogDirs); None when every dir is offline."""
    online = [d for d in log_dirs if d not in offline_log_dirs]
    if not online:
        return None
    return min(online, key=lambda d: (partitions_per_dir.get(d, 0), online.index(d)))


# The metadata log's partition dir (metadata.log.dir may be one of log.dirs): not a data partition.
METADATA_PARTITION_PREFIX = "__cluster_metadata-"


def _partition_of(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>`` as a data partition's dir is named, else None."""
    topic, dash, index = name.rpartition("-")
    if not dash or not topic or not index.isdigit() or name.startswith(METADATA_PARTITION_PREFIX):
        return None
    return topic, int(index)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Jobs handed to a pool thread at once, per thread: a clean stop of 100k untouched partitions is 100k
# cheap jobs, and one future per job would cost more than the jobs.
JOB_CHUNKS_PER_THREAD = 8


def _run_on(
    pool: ThreadPoolExecutor,
    threads: int,
    jobs: list[Callable[[], None]],
    in_line: list[Callable[[], None]] | None = None,
) -> list[OSError | None]:
    """``ReplicaManager.close_all``'s ``JobRunner`` on ``pool`` of ``threads``: the jobs in chunks,
    each chunk in order on one thread, the chunks at once; ``in_line`` on this thread meanwhile."""
    size = max(1, -(-len(jobs) // (threads * JOB_CHUNKS_PER_THREAD)))
    futures = [pool.submit(run_in_order, jobs[i : i + size]) for i in range(0, len(jobs), size)]
    in_line_errors = run_in_order(in_line or [])
    errors: list[OSError | None] = []
    for future in futures:
        errors.extend(future.result())
    return errors + in_line_errors


def _write_file(log_dir: str, name: str, data: bytes) -> None:
    """Atomically and durably: temp file, fsync, rename, fsync the dir (Kafka's CheckpointFile)."""
    path = os.path.join(log_dir, name)
    temp_path = path + ".tmp"
    with open(temp_path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(temp_path, path)
    _fsync_dir(log_dir)


def _read_offset_checkpoint_file(log_dir: str, name: str) -> dict[tuple[str, int], int]:
    """A missing file is empty; one that does not parse is ignored with a warning (the logs recover
    as after a crash), as nothing in it is needed for correctness."""
    try:
        with open(os.path.join(log_dir, name), "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return {}
    try:
        return decode_offset_checkpoint(data, os.path.join(log_dir, name))
    except ValueError as exc:
        log.warning("%s; ignoring it", exc)
        return {}


class FileLogOpener:
    """Opens data partitions in the dirs of log.dirs, each where it is found or placed."""

    def __init__(self, log_dirs: Sequence[str], descriptors: DescriptorCache | None = None) -> None:
        # One bounded cache of open segment files for every partition (log.open.files.max, issue 29).
        self.descriptors = descriptors if descriptors is not None else DescriptorCache(OPEN_SEGMENTS_MAX)
        # Absolute and without repeats, in the configured order (ties go to the first).
        self.log_dirs = tuple(dict.fromkeys(os.path.abspath(d) for d in log_dirs))
        # The dir of each partition log on disk or opened, and not deleted: what "fewest partitions"
        # counts. Read from the dirs at the first placement (they may not exist before the node starts).
        self._placed: dict[tuple[str, int], str] | None = None
        self._partitions_per_dir: dict[str, int] = {}
        # From the checkpoint files at the first open (issue 29): the log end of each partition closed
        # cleanly (its dir had .kafka_cleanshutdown), and each partition's last checkpointed high watermark.
        self._clean_log_ends: dict[tuple[str, int], int] = {}
        # And the log start of each of those (log-start-offset-checkpoint), for logs opened when first
        # used (the replica manager's DeferredLog).
        self._clean_log_starts: dict[tuple[str, int], int] = {}
        self._high_watermarks: dict[tuple[str, int], int] = {}
        # Shared by every partition's store: a clean shutdown syncs each partition dir once.
        self._dir_syncs = DeferredDirSyncs()

    @staticmethod
    def _name(topic: str, partition: int) -> str:
        return f"{topic}-{partition}"

    def _scan(self) -> dict[tuple[str, int], str]:
        if self._placed is None:
            placed: dict[tuple[str, int], str] = {}
            for log_dir in self.log_dirs:
                try:
                    # scandir's entries know whether they are dirs without a stat each (issue 29).
                    with os.scandir(log_dir) as found:
                        dirs = sorted(entry.name for entry in found if entry.is_dir())
                except FileNotFoundError:
                    continue
                for name in dirs:
                    key = _partition_of(name)
                    if key is None:
                        continue
                    if key in placed:
                        # Kafka refuses to start on a partition in two dirs; here the first in
                        # log.dirs order is used and the other left alone for an operator to remove.
                        log.warning(
                            "%s is in log dirs %s and %s; using %s", name, placed[key], log_dir, placed[key]
                        )
                        continue
                    placed[key] = log_dir
            self._placed = placed
            for log_dir in placed.values():
                self._partitions_per_dir[log_dir] = self._partitions_per_dir.get(log_dir, 0) + 1
            self._read_checkpoints()
        return self._placed

    def _place(self, key: tuple[str, int], log_dir: str) -> None:
        placed = self._scan()
        previous = placed.get(key)
        if previous == log_dir:
            return
        if previous is not None:
            self._partitions_per_dir[previous] -= 1
        placed[key] = log_dir
        self._partitions_per_dir[log_dir] = self._partitions_per_dir.get(log_dir, 0) + 1

    def _unplace(self, key: tuple[str, int]) -> None:
        previous = self._scan().pop(key, None)
        if previous is not None:
            self._partitions_per_dir[previous] -= 1

    def _read_checkpoints(self) -> None:
        """Kafka's LogManager.loadLogs: the high watermarks always (a restarted leader serves its
        committed offset at once), the recovery points only after a clean shutdown, whose marker is
        then deleted so a crash from here on recovers as usual."""
        for log_dir in self.log_dirs:
            hws = _read_offset_checkpoint_file(log_dir, REPLICATION_OFFSET_CHECKPOINT)
            self._high_watermarks.update(hws)
            marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
            if not os.path.exists(marker):
                continue
            self._clean_log_ends.update(
                _read_offset_checkpoint_file(log_dir, RECOVERY_POINT_OFFSET_CHECKPOINT)
            )
            self._clean_log_starts.update(
                _read_offset_checkpoint_file(log_dir, LOG_START_OFFSET_CHECKPOINT_FILE)
            )
            os.unlink(marker)
            _fsync_dir(log_dir)

    def close_cleanly(self, replicas: ReplicaManager, threads_per_dir: int, broker_epoch: int = -1) -> None:
        """Kafka's LogManager.shutdown: every log flushed and closed on a pool of ``threads_per_dir``
        threads per log dir (num.recovery.threads.per.data.dir), each partition dir synced once after its
        files (not after each file), then each dir whose partitions all closed and synced gets its
        checkpoint files and ``.kafka_cleanshutdown``, last (issue 29: a stop costs the fsyncs of the
        partitions written since the start, and those overlap)."""
        self._dir_syncs.defer()
        threads = threads_per_dir * len(self.log_dirs)
        with ThreadPoolExecutor(threads, thread_name_prefix="log-close") as pool:
            try:
                closed = replicas.close_all(functools.partial(_run_on, pool, threads))
            finally:
                partition_dirs = sorted(self._dir_syncs.take())
            errors = _run_on(pool, threads, [functools.partial(_fsync_dir, path) for path in partition_dirs])
        for path, error in zip(partition_dirs, errors, strict=True):
            if error is not None:
                log.warning("shutdown: cannot sync %s: %s; its log dir will recover at start", path, error)
                closed.pop(os.path.dirname(path), None)
        self.write_clean_shutdown(closed, broker_epoch)

    def write_clean_shutdown(self, closed: Mapping[str, CleanShutdown], broker_epoch: int = -1) -> None:
        """After every log of a dir was flushed and closed: its three offset checkpoint files, then
        ``.kafka_cleanshutdown`` last (LogManager.shutdown), each written atomically and durably."""
        for log_dir, state in closed.items():
            for name, offsets in (
                (RECOVERY_POINT_OFFSET_CHECKPOINT, state.recovery_points),
                (REPLICATION_OFFSET_CHECKPOINT, state.high_watermarks),
                (LOG_START_OFFSET_CHECKPOINT_FILE, state.log_start_offsets),
            ):
                _write_file(log_dir, name, encode_offset_checkpoint(offsets))
            _write_file(log_dir, CLEAN_SHUTDOWN_FILE, encode_clean_shutdown(broker_epoch))

    def log_dir_for(self, topic: str, partition: int, offline_log_dirs: Collection[str]) -> str | None:
        found = self._scan().get((topic, partition))
        if found is not None:
            return found
        return next_log_dir(self.log_dirs, self._partitions_per_dir, offline_log_dirs)

    def open_log(
        self,
        log_dir: str,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        high_watermark_tracks_log_end: bool = True,
    ) -> PartitionLog:
        # Counted before the files exist: a log that fails to open half-made is still in this dir.
        key = (topic, partition)
        self._place(key, log_dir)
        self._clean_log_starts.pop(key, None)
        store = FileSegmentStore(
            os.path.join(log_dir, self._name(topic, partition)), self.descriptors, self._dir_syncs
        )
        try:
            return PartitionLog.open(
                store,
                config,
                high_watermark_tracks_log_end=high_watermark_tracks_log_end,
                clean_log_end_offset=self._clean_log_ends.pop(key, None),
                high_watermark=self._high_watermarks.pop(key, None),
            )
        except BaseException:
            store.close()
            raise

    def clean_log_bounds(self, topic: str, partition: int) -> tuple[int, int] | None:
        self._scan()
        key = (topic, partition)
        log_end_offset = self._clean_log_ends.get(key)
        log_start_offset = self._clean_log_starts.get(key)
        if log_end_offset is None or log_start_offset is None:
            return None
        return log_end_offset, log_start_offset

    def delete_log(self, topic: str, partition: int) -> None:
        self._unplace((topic, partition))
        self._clean_log_ends.pop((topic, partition), None)
        self._clean_log_starts.pop((topic, partition), None)
        self._high_watermarks.pop((topic, partition), None)
        name = self._name(topic, partition)
        for log_dir in self.log_dirs:
            shutil.rmtree(os.path.join(log_dir, name), ignore_errors=True)


# Opening the logs a clean restart deferred: slices of this long on the event loop, each a few logs at a
# time, the loop handed back between slices (a request waits at most about one slice for them). When
# descriptors run short the next try waits DEFERRED_OPEN_RETRY_S.
DEFERRED_OPEN_SLICE_S = 0.01
DEFERRED_OPEN_BATCH = 16
DEFERRED_OPEN_RETRY_S = 1.0


async def open_deferred_logs(replicas: ReplicaManager) -> None:
    """Open every log a clean restart left deferred (the replica manager's DeferredLog) while the node
    serves, so retention, producer expiration and the cleaner see them soon after a start; a request
    for one opens it at once meanwhile (issue 29: 100,000 partitions serve in seconds, not after all
    of them are opened as Kafka's LogManager.loadLogs does before its broker starts)."""
    remaining = replicas.open_deferred(0)
    started = time.monotonic()
    opened = 0
    while remaining:
        before = remaining
        deadline = time.monotonic() + DEFERRED_OPEN_SLICE_S
        with collection_paused():  # as the first image's opens: what they build lives as long as the node
            while remaining and time.monotonic() < deadline:
                remaining = replicas.open_deferred(DEFERRED_OPEN_BATCH)
        opened += before - remaining
        if remaining and remaining == before:
            log.warning("opening deferred logs: descriptors ran short; %d left, trying again", remaining)
            await asyncio.sleep(DEFERRED_OPEN_RETRY_S)
        else:
            await asyncio.sleep(0)
    if opened:
        log.info("opened %d logs deferred at start in %.1f s", opened, time.monotonic() - started)
