"""Bounded file handles (issue 29): many partitions share one LRU cache of open segment files, and
running out of descriptors is a retriable error, never a log-dir failure."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.broker.replica_manager import ReplicaManager
from pykraft.core.errors import ErrorCode
from pykraft.io.descriptor_cache import DescriptorCache
from pykraft.io.log_dirs import FileLogOpener
from pykraft.log.partition_log import LogConfig
from pykraft.log.store import BytesLike, DescriptorShortageError, MemorySegmentStore
from pykraft.protocol.records import Record, build_batch
from tests.unit.test_producer_snapshot import MemoryOpener


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _batch(value: bytes) -> bytes:
    return build_batch([Record(None, value)], timestamp_ms=1)


def test_many_partitions_stay_within_the_cache_and_reopen_transparently(tmp_path: Path) -> None:
    descriptors = DescriptorCache(16)
    opener = FileLogOpener([str(tmp_path)], descriptors)
    before = _open_fds()
    logs = [opener.open_log(str(tmp_path), "t", p, LogConfig()) for p in range(60)]
    for round_ in range(3):
        for p, log in enumerate(logs):
            log.append_bytes(_batch(b"%d-%d" % (p, round_)))
    assert len(descriptors) <= 16 and _open_fds() - before <= 16
    assert descriptors.evicted > 0
    for p, log in enumerate(logs):
        data = b"".join(log.read(0, 1 << 20).chunks)
        assert all(b"%d-%d" % (p, r) in data for r in range(3)), p
        log.close()
    assert len(descriptors) == 0 and _open_fds() == before


@pytest.fixture
def low_open_files_limit() -> Iterator[int]:
    """This process's soft RLIMIT_NOFILE lowered to 24 descriptors above what is open now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = max(fd for fd in map(int, os.listdir("/proc/self/fd"))) + 24
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield limit
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_emfile_closes_idle_segments_instead_of_failing(tmp_path: Path, low_open_files_limit: int) -> None:
    """A cache configured past the process limit meets EMFILE: it sheds idle descriptors, lowers its
    capacity and goes on; every partition keeps taking appends."""
    descriptors = DescriptorCache(10_000)
    opener = FileLogOpener([str(tmp_path)], descriptors)
    partitions = low_open_files_limit - _open_fds() + 20  # more than the descriptors left
    logs = [opener.open_log(str(tmp_path), "t", p, LogConfig()) for p in range(partitions)]
    for p, log in enumerate(logs):
        log.append_bytes(_batch(b"v%d" % p))
    assert descriptors.sheds > 0 and descriptors.capacity < partitions
    assert [log.log_end_offset for log in logs] == [1] * partitions
    for log in logs:
        log.close()


def test_shortage_with_nothing_to_close_is_retriable(tmp_path: Path, low_open_files_limit: int) -> None:
    descriptors = DescriptorCache(4)
    hogs: list[int] = []
    try:
        while True:
            hogs.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    try:
        with pytest.raises(DescriptorShortageError):
            descriptors.open_transient(str(tmp_path), os.O_RDONLY)
    finally:
        for fd in hogs:
            os.close(fd)
    assert descriptors.shortages == 1


class ShortStore(MemorySegmentStore):
    """A store whose next appends find no descriptor."""

    short = False

    def append(self, base_offset: int, data: BytesLike) -> None:
        if ShortStore.short:
            raise DescriptorShortageError(24, "Too many open files (no idle segment file left to close)")
        super().append(base_offset, data)


class ShortOpener(MemoryOpener):
    def new_store(self, log_dir: str) -> MemorySegmentStore:
        return ShortStore()


def test_a_descriptor_shortage_never_takes_the_log_dir_offline() -> None:
    opener = ShortOpener()
    replicas = ReplicaManager(opener, LogConfig(), producer_id_expiration_ms=60_000)
    told: list[tuple[str, str]] = []
    replicas.on_storage_failure = lambda log_dir, reason: told.append((log_dir, reason))
    part = replicas.ensure_partition("a", 0, 0)
    ShortStore.short = True
    try:
        result = replicas.append(part, memoryview(bytearray(_batch(b"x"))), 1)
    finally:
        ShortStore.short = False
    assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR and "retriable" in (result.error_message or "")
    assert told == [] and replicas.offline_log_dirs == {}
    result = replicas.append(part, memoryview(bytearray(_batch(b"y"))), 2)
    assert result.error_code == ErrorCode.NONE and result.base_offset == 0
