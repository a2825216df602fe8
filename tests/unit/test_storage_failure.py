"""A write that fails with ENOSPC or EIO takes its log dir offline (issue 18, Kafka's log dir failure):
that produce and every later request to a partition in the dir answer KAFKA_STORAGE_ERROR, the shell is
told once per dir, nothing more is written there after the torn write, the partitions in other dirs
keep serving (JBOD), and a restart with space recovers every acknowledged record."""

from __future__ import annotations

import errno

import pytest

from pykraft.broker.replica_manager import ReplicaManager
from pykraft.core.errors import ErrorCode, KafkaError
from pykraft.log.partition_log import LogConfig
from pykraft.log.store import BytesLike, MemorySegmentStore
from pykraft.protocol.records import Record, build_batch
from tests.unit.test_producer_snapshot import MemoryOpener


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

    def append_cleaned(self, base_offset: int, data: BytesLike) -> None:
        self.cleaned_writes += 1
        super().append_cleaned(base_offset, data)

    cleaned_writes = 0


class Opener(MemoryOpener):
    """Log dirs by name, each its own Disk (placed as MemoryOpener places them)."""

    def __init__(self, *disks: Disk) -> None:
        self.disks = {f"/data/{i}": disk for i, disk in enumerate(disks)}
        super().__init__(tuple(self.disks))

    def new_store(self, log_dir: str) -> MemorySegmentStore:
        return FillingStore(self.disks[log_dir])


def _produce(replicas: ReplicaManager, topic: str, value: bytes) -> tuple[ErrorCode, int]:
    part = replicas.ensure_partition(topic, 0, 0)
    result = replicas.append(part, memoryview(build_batch([Record(None, value)], timestamp_ms=1)), 1)
    return result.error_code, result.base_offset


@pytest.mark.parametrize("failure", [errno.ENOSPC, errno.EIO])
def test_a_failed_write_takes_the_dir_offline_and_a_restart_recovers(failure: int) -> None:
    disk = Disk()
    opener = Opener(disk)
    replicas = ReplicaManager(opener, LogConfig(), producer_id_expiration_ms=60_000)
    told: list[tuple[str, str]] = []
    replicas.on_storage_failure = lambda log_dir, reason: told.append((log_dir, reason))
    acknowledged = [_produce(replicas, "a", b"a%d" % i) for i in range(3)] + [_produce(replicas, "b", b"b0")]
    assert [error for error, _ in acknowledged] == [ErrorCode.NONE] * 4
    disk.full_errno = failure
    assert _produce(replicas, "a", b"lost")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    disk.full_errno = None  # space again, but the dir stays offline until a restart
    assert _produce(replicas, "a", b"after")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert _produce(replicas, "b", b"other")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert len(told) == 1 and told[0][0] == "/data/0" and "a-0" in told[0][1]
    assert replicas.offline_log_dirs.keys() == {"/data/0"}
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


def test_a_failed_dir_goes_offline_alone_and_the_other_dirs_partitions_keep_appending() -> None:
    full, healthy = Disk(), Disk()
    opener = Opener(full, healthy)
    replicas = ReplicaManager(opener, LogConfig(), producer_id_expiration_ms=60_000)
    told: list[tuple[str, str]] = []
    replicas.on_storage_failure = lambda log_dir, reason: told.append((log_dir, reason))
    # Placement: the fewest partitions first, ties by order, so a, b, c, d alternate between the dirs.
    for topic in "abcd":
        assert _produce(replicas, topic, topic.encode() + b"0") == (ErrorCode.NONE, 0)
    assert {t: replicas.partitions[(t, 0)].log_dir for t in "abcd"} == {
        "a": "/data/0",
        "b": "/data/1",
        "c": "/data/0",
        "d": "/data/1",
    }
    full.full_errno = errno.ENOSPC
    assert _produce(replicas, "a", b"lost")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    for i in range(1, 4):  # the other dir's partitions keep accepting appends
        assert _produce(replicas, "b", b"b%d" % i) == (ErrorCode.NONE, i)
        assert _produce(replicas, "d", b"d%d" % i) == (ErrorCode.NONE, i)
    # Every partition in the failed dir answers KAFKA_STORAGE_ERROR, even one whose own writes never failed.
    assert _produce(replicas, "c", b"c1")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    assert [replicas.is_offline(t, 0) for t in "abcd"] == [True, False, True, False]
    assert told == [("/data/0", "a-0: No space left on device")]  # once, for the one dir
    # A new partition goes to the dir still online, whatever the counts.
    assert _produce(replicas, "e", b"e0") == (ErrorCode.NONE, 0)
    assert replicas.partitions[("e", 0)].log_dir == "/data/1"
    # The healthy dir's partitions are flushed and snapshotted at close; the full one's are not.
    torn = opener.stores[("a", 0)].segment_size(0)
    replicas.flush_all()
    replicas.close_all()
    assert opener.stores[("a", 0)].segment_size(0) == torn
    assert opener.stores[("b", 0)].list_checkpoints(".snapshot")
    assert not opener.stores[("c", 0)].list_checkpoints(".snapshot")
    # A restart with space: each partition is found in its dir, every acknowledged record is there.
    full.full_errno = None
    restarted = ReplicaManager(opener, LogConfig(), producer_id_expiration_ms=60_000)
    ends = {t: restarted.ensure_partition(t, 0, 0).log.log_end_offset for t in "abcde"}
    assert ends == {"a": 1, "b": 4, "c": 1, "d": 4, "e": 1}
    assert restarted.partitions[("a", 0)].log_dir == "/data/0"
    assert _produce(restarted, "a", b"a1") == (ErrorCode.NONE, 1)


def test_a_partition_whose_dir_is_offline_is_not_opened_anew_elsewhere() -> None:
    full, healthy = Disk(), Disk()
    opener = Opener(full, healthy)
    replicas = ReplicaManager(opener, LogConfig(), producer_id_expiration_ms=60_000)
    assert _produce(replicas, "a", b"a0") == (ErrorCode.NONE, 0)
    assert _produce(replicas, "b", b"b0") == (ErrorCode.NONE, 0)
    full.full_errno = errno.EIO
    assert _produce(replicas, "a", b"lost")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    # The topic's partition is dropped and comes back (say, a reassignment back here): its records are
    # in the offline dir, so it stays offline rather than starting empty in the other one.
    replicas.partitions.pop(("a", 0)).log.store.close()
    with pytest.raises(KafkaError) as raised:
        replicas.ensure_partition("a", 0, 0)
    assert raised.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert replicas.is_offline("a", 0) and replicas.unopened_partitions == [("a", 0)]
    # With every dir offline, nothing new can be placed.
    healthy.full_errno = errno.ENOSPC
    assert _produce(replicas, "b", b"lost")[0] == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaError):
        replicas.ensure_partition("new", 0, 0)
    assert replicas.is_offline("new", 0)
    replicas.remove_partition("new", 0)
    assert not replicas.is_offline("new", 0)


def test_a_cleaning_pass_stops_writing_once_its_dir_goes_offline() -> None:
    disk = Disk()
    opener = Opener(disk)
    compact = LogConfig(segment_bytes=400, cleanup_policy_compact=True, cleanup_policy_delete=False)
    replicas = ReplicaManager(opener, compact, producer_id_expiration_ms=60_000)
    for topic in ("compacted", "other"):
        part = replicas.ensure_partition(topic, 0, 0)
        for i in range(40):  # every key written ten times, over several segments
            batch = build_batch([Record(b"k%d" % (i % 4), b"v%d" % i)], timestamp_ms=1)
            assert replicas.append(part, memoryview(batch), 1).error_code == ErrorCode.NONE
    job = replicas.next_cleaning(1_000)
    assert job is not None
    cleaning, steps = job
    store = opener.stores[(cleaning.topic, 0)]
    for _ in range(3):
        next(steps)
    # A write of the dir's other partition fails while the pass waits for its turn.
    disk.full_errno = errno.ENOSPC
    other = "other" if cleaning.topic == "compacted" else "compacted"
    assert (
        replicas.append(
            replicas.partitions[(other, 0)], memoryview(build_batch([Record(b"k", b"x")], timestamp_ms=1)), 1
        ).error_code
        == ErrorCode.KAFKA_STORAGE_ERROR
    )
    disk.full_errno = None
    written = store.cleaned_writes
    assert list(steps) == []  # the pass ends at once...
    assert store.cleaned_writes == written  # ...without another write to the offline dir
    assert replicas.next_cleaning(2_000) is None


def _records(chunk: memoryview) -> list[Record]:
    from pykraft.protocol.records import decode_records, scan_batches

    return [
        r
        for position, header in scan_batches(bytes(chunk))
        for r in decode_records(memoryview(bytes(chunk))[position : position + header.size_in_bytes])
    ]
