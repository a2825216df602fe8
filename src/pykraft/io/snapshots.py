"""Metadata snapshots on disk (KIP-630, kafka-facts §4): the files, and the node's snapshot cycle.

``FileSnapshotStore`` is the raft core's ``SnapshotStore`` over ``__cluster_metadata-0/``:

* a new snapshot is written to ``<offset>-<epoch>.checkpoint.part``, fsynced, made read-only, renamed
  to ``.checkpoint`` and the directory fsynced (FileRawSnapshotWriter.freeze);
* deleting renames to ``.checkpoint.deleted`` (durably) and then removes the file, so a crash in
  between leaves a name the next open cleans up;
* opening removes ``.part`` and ``.deleted`` files and snapshots that end before the log start
  (KafkaMetadataLog.recoverSnapshots), and ignores, with a warning, a ``.checkpoint`` that is not a
  whole snapshot (torn, corrupt, or without its footer: it never counts).

``MetadataSnapshots`` is what the metadata plane calls: load a snapshot into an image and controller
records, count replayed bytes, write a snapshot when due, and clean the log per retention.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pykraft.core.config import NodeConfig
from pykraft.metadata.image import MetadataImage, scram_record
from pykraft.metadata.records import (
    ApiMessageAndVersion,
    FeatureLevelRecord,
    MetadataRecordError,
    MetadataVersion,
    decode_metadata_record,
    encode_metadata_record,
)
from pykraft.metadata.snapshots import SnapshotTrigger, image_snapshot_values, load_snapshot_image
from pykraft.protocol.records import control_type_of, scan_batches
from pykraft.raft.messages import OffsetAndEpoch
from pykraft.raft.node import RaftNode
from pykraft.raft.ready import CommittedBatch
from pykraft.raft.snapshot import (
    CONTROL_TYPE_SNAPSHOT_FOOTER,
    DELETED_SUFFIX,
    PARTIAL_SUFFIX,
    SnapshotError,
    inconsistent_snapshot_state,
    parse_snapshot_file_name,
    read_snapshot,
    read_snapshot_header,
    snapshot_file_name,
    write_snapshot,
)
from pykraft.security.scram import ScramCredential, ScramMechanism

log = logging.getLogger("pykraft.metadata.snapshots")

# RaftMetadataLogCleanerManager runs maybeClean from the raft poll loop this often.
CLEAN_INTERVAL_MS = 60_000
# Metadata record api keys of BeginTransactionRecord / EndTransactionRecord / AbortTransactionRecord.
_BEGIN_TRANSACTION, _END_TRANSACTION, _ABORT_TRANSACTION = 23, 24, 25


class SnapshotStateError(Exception):
    """The metadata directory's snapshots cannot back its log (one line naming the directory)."""


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def last_batch_is_footer(data: bytes | memoryview) -> bool:
    """Cheap completeness check: every batch whole and CRC-valid, the last one holding the footer."""
    last_pos, end, last_header = -1, 0, None
    for pos, header in scan_batches(data):
        last_pos, end, last_header = pos, pos + header.size_in_bytes, header
    if last_header is None or end != len(data) or not last_header.is_control:
        return False
    from pykraft.protocol.records import decode_records

    try:
        records = decode_records(memoryview(data)[last_pos:end])
    except ValueError:
        return False
    return bool(records) and control_type_of(records[-1].key) == CONTROL_TYPE_SNAPSHOT_FOOTER


@dataclass
class _Entry:
    size: int
    timestamp_ms: int


class FileSnapshotStore:
    def __init__(self, partition_dir: str) -> None:
        self.partition_dir = partition_dir
        self._entries: dict[OffsetAndEpoch, _Entry] = {}

    @classmethod
    def open(cls, partition_dir: str, log_start_offset: int) -> FileSnapshotStore:
        store = cls(partition_dir)
        store._recover(log_start_offset)
        return store

    def path(self, snapshot_id: OffsetAndEpoch) -> str:
        return os.path.join(self.partition_dir, snapshot_file_name(snapshot_id))

    def _recover(self, log_start_offset: int) -> None:
        doomed: list[str] = []
        for name in sorted(os.listdir(self.partition_dir)):
            parsed = parse_snapshot_file_name(name)
            if parsed is None:
                continue
            path = os.path.join(self.partition_dir, name)
            if parsed.partial or parsed.deleted or parsed.snapshot_id.offset < log_start_offset:
                doomed.append(path)
                continue
            with open(path, "rb") as fh:
                data = fh.read()
            if not last_batch_is_footer(data):
                log.warning("ignoring %s: not a complete snapshot (torn, corrupt or no footer)", path)
                continue
            try:
                header = read_snapshot_header(data)
            except SnapshotError as error:
                log.warning("ignoring %s: %s", path, error)
                continue
            self._entries[parsed.snapshot_id] = _Entry(len(data), header.last_contained_log_timestamp)
        # Refuse before changing anything on disk.
        problem = inconsistent_snapshot_state(log_start_offset, self.snapshot_ids())
        if problem is not None:
            raise SnapshotStateError(f"{self.partition_dir}: {problem}")
        for path in doomed:
            if path.endswith(".checkpoint"):
                self._remove(path)
            else:
                os.remove(path)

    # --- SnapshotStore ------------------------------------------------------------------------------

    def snapshot_ids(self) -> list[OffsetAndEpoch]:
        return sorted(self._entries)

    def size(self, snapshot_id: OffsetAndEpoch) -> int:
        return self._entries[snapshot_id].size

    def last_contained_log_timestamp(self, snapshot_id: OffsetAndEpoch) -> int:
        return self._entries[snapshot_id].timestamp_ms

    def read(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        fd = os.open(self.path(snapshot_id), os.O_RDONLY)
        try:
            return os.pread(fd, max_bytes, position)
        finally:
            os.close(fd)

    def write(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Freeze: .part, fsync, read-only, rename, directory fsync."""
        header = read_snapshot_header(data)
        final_path = self.path(snapshot_id)
        part_path = os.path.join(self.partition_dir, snapshot_file_name(snapshot_id, PARTIAL_SUFFIX))
        fd = os.open(part_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(part_path, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        os.replace(part_path, final_path)
        _fsync_dir(self.partition_dir)
        self._entries[snapshot_id] = _Entry(len(data), header.last_contained_log_timestamp)

    def delete(self, snapshot_id: OffsetAndEpoch) -> None:
        self._entries.pop(snapshot_id, None)
        path = self.path(snapshot_id)
        if os.path.exists(path):
            self._remove(path)

    def _remove(self, path: str) -> None:
        # Snapshots.deleteIfExists: rename to .deleted first, so a crash never leaves a half-removed
        # snapshot that still looks valid (Kafka removes .deleted after file.delete.delay.ms; here at once).
        base = path[: -len(".checkpoint")] if path.endswith(".checkpoint") else path
        deleted_path = base + DELETED_SUFFIX
        os.replace(path, deleted_path)
        _fsync_dir(self.partition_dir)
        os.remove(deleted_path)

    def read_all(self, snapshot_id: OffsetAndEpoch) -> bytes:
        with open(self.path(snapshot_id), "rb") as fh:
            return fh.read()


class MetadataSnapshots:
    """The metadata plane's snapshot cycle: load, count, write when due, clean."""

    def __init__(self, config: NodeConfig, store: FileSnapshotStore, now_ms: int) -> None:
        self.config = config
        self.store = store
        self.trigger = SnapshotTrigger(
            max_bytes_between_snapshots=config.metadata_log_max_record_bytes_between_snapshots,
            max_interval_ms=config.metadata_log_max_snapshot_interval_ms,
            last_snapshot_ms=now_ms,
        )
        # The last committed batch applied: (last offset + 1, its epoch) is the next snapshot's id.
        self.applied: OffsetAndEpoch | None = None
        self.last_applied_timestamp_ms = -1
        # The latest snapshot this process wrote, for the metrics (Kafka's SnapshotEmitter: its age
        # counts from the start until the first one).
        self.generated_ms = now_ms
        self.generated_bytes = 0
        self._next_clean_ms = now_ms + self.clean_interval_ms

    def load(self, snapshot_id: OffsetAndEpoch) -> tuple[MetadataImage, int]:
        """Read, validate and decode a snapshot into an image covering the log below its end offset;
        returns the image and how many records the snapshot held."""
        started = time.monotonic()
        path = self.store.path(snapshot_id)
        contents = read_snapshot(self.store.read_all(snapshot_id), path)
        total = len(contents.values)
        log.info("loading metadata snapshot %s (%d records)", os.path.basename(path), total)

        def progress(done: int, total: int) -> None:
            log.info("loaded %d of %d records from %s", done, total, os.path.basename(path))

        image = load_snapshot_image(contents.values, snapshot_id.offset - 1, snapshot_id.epoch, progress)
        log.info(
            "loaded %d of %d records from snapshot %s in %.0f ms",
            total,
            total,
            os.path.basename(path),
            (time.monotonic() - started) * 1000,
        )
        self.applied = snapshot_id
        return image, total

    def note_committed(self, batches: Sequence[CommittedBatch]) -> None:
        """Count what was replayed; watch metadata transactions by the frame's api key (no decode)."""
        trigger = self.trigger
        for batch in batches:
            if not batch.is_control:
                for value in batch.records:
                    trigger.bytes_since_snapshot += len(value)
                    if len(value) > 1 and value[0] == 1:
                        if value[1] == _BEGIN_TRANSACTION:
                            trigger.in_transaction = True
                        elif value[1] in (_END_TRANSACTION, _ABORT_TRANSACTION):
                            trigger.in_transaction = False
            self.applied = OffsetAndEpoch(batch.last_offset + 1, batch.epoch)
            self.last_applied_timestamp_ms = batch.append_timestamp_ms

    def maybe_snapshot(self, image: MetadataImage, raft: RaftNode, now_ms: int) -> OffsetAndEpoch | None:
        """Write a snapshot of ``image`` (which covers everything applied) when one is due."""
        reason = self.trigger.due(now_ms)
        if reason is None or self.applied is None:
            return None
        snapshot_id = self.applied
        try:
            if not raft.validate_new_snapshot_id(snapshot_id):
                self.trigger.reset(now_ms)
                return None
        except ValueError as error:
            log.error("not snapshotting: %s", error)
            self.trigger.reset(now_ms)
            return None
        started = time.monotonic()
        values = image_snapshot_values(image)
        data = write_snapshot(
            snapshot_id,
            values,
            last_contained_log_timestamp=self.last_applied_timestamp_ms,
            now_ms=now_ms,
        )
        self.store.write(snapshot_id, data)
        self.trigger.reset(now_ms)
        self.generated_ms, self.generated_bytes = now_ms, len(data)
        log.info(
            "wrote metadata snapshot %s (%d records, %d bytes) in %.0f ms: %s",
            snapshot_file_name(snapshot_id),
            len(values),
            len(data),
            (time.monotonic() - started) * 1000,
            reason,
        )
        self.clean(raft, now_ms)
        return snapshot_id

    @property
    def clean_interval_ms(self) -> int:
        """How often the log start may advance: every minute, or more often when
        log.retention.check.interval.ms asks for it."""
        return min(CLEAN_INTERVAL_MS, self.config.log_retention_check_interval_ms)

    def maybe_clean(self, raft: RaftNode, now_ms: int) -> None:
        if now_ms >= self._next_clean_ms:
            self.clean(raft, now_ms)

    def clean(self, raft: RaftNode, now_ms: int) -> None:
        self._next_clean_ms = now_ms + self.clean_interval_ms
        moved = raft.maybe_clean(
            now_ms,
            retention_bytes=self.config.metadata_max_retention_bytes,
            retention_ms=self.config.metadata_max_retention_ms,
        )
        if moved:
            log.info(
                "metadata log start advanced to offset %d (snapshots kept: %s)",
                raft.log.start_offset,
                ", ".join(snapshot_file_name(i) for i in self.store.snapshot_ids()),
            )


# --- bootstrap.checkpoint (``storage format --add-scram``) -------------------------------------------------

# Kafka's BootstrapDirectory file name: a snapshot-format file of the records the first controller writes.
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"


def write_bootstrap_checkpoint(
    metadata_log_dir: str, scram_credentials: Sequence[tuple[str, ScramMechanism, ScramCredential]]
) -> None:
    """metadata.version and the SCRAM credentials, in snapshot format, written whole (tmp, fsync, rename)."""
    records = [
        ApiMessageAndVersion.of(
            FeatureLevelRecord(
                name=MetadataVersion.FEATURE_NAME, feature_level=MetadataVersion.LATEST_PRODUCTION
            )
        ),
        *(scram_record(user, mechanism, credential) for user, mechanism, credential in scram_credentials),
    ]
    now = int(time.time() * 1000)
    data = write_snapshot(
        OffsetAndEpoch(0, 0),
        [encode_metadata_record(r) for r in records],
        last_contained_log_timestamp=now,
        now_ms=now,
    )
    os.makedirs(metadata_log_dir, exist_ok=True)
    path = os.path.join(metadata_log_dir, BOOTSTRAP_CHECKPOINT)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    _fsync_dir(metadata_log_dir)


def read_bootstrap_records(metadata_log_dir: str) -> list[ApiMessageAndVersion]:
    """The records of ``bootstrap.checkpoint`` beyond metadata.version (which the controller writes
    itself), or none when there is no such file; a damaged file is a SnapshotError naming it."""
    path = os.path.join(metadata_log_dir, BOOTSTRAP_CHECKPOINT)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    contents = read_snapshot(data, path)
    try:
        records = [decode_metadata_record(v) for v in contents.values]
    except MetadataRecordError as exc:
        raise SnapshotError(f"{path}: {exc}") from None
    return [r for r in records if not isinstance(r.message, FeatureLevelRecord)]
