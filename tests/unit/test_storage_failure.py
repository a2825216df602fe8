"""A write that fails with ENOSPC or EIO takes the log dir offline (issue 18, Kafka's log dir failure):
that produce and every later request answer KAFKA_STORAGE_ERROR, the shell is told once, nothing more
is written after the torn write, and a restart with space recovers every acknowledged record."""

from __future__ import annotations

import errno

import pytest

from pykraft.broker.replica_manager import ReplicaManager
from pykraft.core.errors import ErrorCode
from pykraft.log.partition_log import LogConfig, PartitionLog
from pykraft.log.store import BytesLike, MemorySegmentStore
from pykraft.protocol.records import Record, build_batch


class Disk:
    full_errno: int | None = None


class FillingStore(MemorySegmentStore):
    """A memory store on a disk that can fill up: an append then writes half its bytes and fails."""

    def __init__(self, disk: Disk) -> None:
        super().__init__()
        self.disk = disk

    def append(self, base_offset: int, data: BytesLike) -> None:
        if self.disk.full_errno is not None:
            view = memoryview(data)
            super().append(base_offset, view[: len(view) // 2])
            raise OSError(
                self.disk.full_errno,
                "No space left on device" if self.disk.full_errno == errno.ENOSPC else "I/O error",
            )
        super().append(base_offset, data)


class Opener:
    def __init__(self, disk: Disk) -> None:
        self.disk = disk
        self.stores: dict[tuple[str, int], FillingStore] = {}

    def open_log(
        self, topic: str, partition: int, config: LogConfig, *, high_watermark_tracks_log_end: bool = True
    ) -> PartitionLog:
        store = self.stores.setdefault((topic, partition), FillingStore(self.disk))
        return PartitionLog.open(store, config, high_watermark_tracks_log_end=high_watermark_tracks_log_end)

    def delete_log(self, topic: str, partition: int) -> None:
        self.stores.pop((topic, partition), None)


def _produce(replicas: ReplicaManager, topic: str, value: bytes) -> tuple[ErrorCode, int]:
    part = replicas.ensure_partition(topic, 0, 0)
    result = replicas.append(part, memoryview(build_batch([Record(None, value)], timestamp_ms=1)), 1)
    return result.error_code, result.base_offset


@pytest.mark.parametrize("failure", [errno.ENOSPC, errno.EIO])
def test_a_failed_write_takes_the_dir_offline_and_a_restart_recovers(failure: int) -> None:
    disk = Disk()
    opener = Opener(disk)
    replicas = ReplicaManager(opener, LogConfig(), producer_id_expiration_ms=60_000)
    told: list[str] = []
    replicas.on_storage_failure = told.append
    acknowledged = [_produce(replicas, "a", b"a%d" % i) for i in range(3)] + [_produce(replicas, "b", b"b0")]
    assert [error for error, _ in acknowledged] == [ErrorCode.NONE] * 4
    disk.full_errno = failure
    assert _produce(replicas, "a", b"lost")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    disk.full_errno = None  # space again, but the dir stays offline until a restart
    assert _produce(replicas, "a", b"after")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert _produce(replicas, "b", b"other")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert len(told) == 1 and "a-0" in told[0]
    a_store = opener.stores[("a", 0)]
    torn = a_store.segment_size(0)
    replicas.flush_all()
    replicas.close_all()
    assert a_store.segment_size(0) == torn  # nothing written after the failed write, not even a snapshot
    # Restart with space: the torn half batch is cut, every acknowledged record is there, appends go on.
    restarted = ReplicaManager(opener, LogConfig(), producer_id_expiration_ms=60_000)
    part = restarted.ensure_partition("a", 0, 0)
    assert part.log.log_end_offset == 3
    values = [r.value for c in part.log.read(0, 1 << 20).chunks for r in _records(c)]
    assert values == [b"a0", b"a1", b"a2"]
    assert _produce(restarted, "a", b"a3") == (ErrorCode.NONE, 3)
    assert _produce(restarted, "b", b"b1") == (ErrorCode.NONE, 1)


def _records(chunk: memoryview) -> list[Record]:
    from pykraft.protocol.records import decode_records, scan_batches

    return [
        r
        for position, header in scan_batches(bytes(chunk))
        for r in decode_records(memoryview(bytes(chunk))[position : position + header.size_in_bytes])
    ]
