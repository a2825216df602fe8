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

import logging
import os
import shutil
from collections.abc import Collection, Mapping, Sequence

from pykraft.io.descriptor_cache import DescriptorCache
from pykraft.io.file_store import OPEN_SEGMENTS_MAX, FileSegmentStore
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

    @staticmethod
    def _name(topic: str, partition: int) -> str:
        return f"{topic}-{partition}"

    def _scan(self) -> dict[tuple[str, int], str]:
        if self._placed is None:
            placed: dict[tuple[str, int], str] = {}
            for log_dir in self.log_dirs:
                try:
                    names = sorted(os.listdir(log_dir))
                except FileNotFoundError:
                    continue
                for name in names:
                    key = _partition_of(name)
                    if key is None or not os.path.isdir(os.path.join(log_dir, name)):
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
        return self._placed

    def log_dir_for(self, topic: str, partition: int, offline_log_dirs: Collection[str]) -> str | None:
        placed = self._scan()
        found = placed.get((topic, partition))
        if found is not None:
            return found
        counts: dict[str, int] = {}
        for log_dir in placed.values():
            counts[log_dir] = counts.get(log_dir, 0) + 1
        return next_log_dir(self.log_dirs, counts, offline_log_dirs)

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
        self._scan()[(topic, partition)] = log_dir
        store = FileSegmentStore(os.path.join(log_dir, self._name(topic, partition)), self.descriptors)
        try:
            return PartitionLog.open(
                store, config, high_watermark_tracks_log_end=high_watermark_tracks_log_end
            )
        except BaseException:
            store.close()
            raise

    def delete_log(self, topic: str, partition: int) -> None:
        self._scan().pop((topic, partition), None)
        name = self._name(topic, partition)
        for log_dir in self.log_dirs:
            shutil.rmtree(os.path.join(log_dir, name), ignore_errors=True)
