"""What goes inside a metadata snapshot, and when to take one (KIP-630 as Kafka shipped it).

* Content: the image written as records (``image_records``), each framed exactly as in the log
  (kafka-facts §7.1); the container (header/footer control batches) is raft/snapshot.py's.
* When (Kafka ``SnapshotGenerator``): once ``metadata.log.max.record.bytes.between.snapshots`` bytes of
  records were replayed since the last snapshot, or ``metadata.log.max.snapshot.interval.ms`` passed
  (0 disables time-based snapshots, KIP-876) and something was replayed; only at a batch boundary and
  outside a metadata transaction (a snapshot must never hold half of one).
* Loading: ``load_snapshot_records`` decodes every value; a record that does not parse is an error
  naming its index (a snapshot is never half-loaded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage, PartitionRegistration, image_records
from pykraft.metadata.records import (
    AbortTransactionRecord,
    ApiMessageAndVersion,
    BeginTransactionRecord,
    EndTransactionRecord,
    MetadataRecordError,
    decode_metadata_record,
    decode_partition_record_fields,
    encode_metadata_record,
)

# Kafka KRaftConfigs defaults.
MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS_DEFAULT = 20971520
MAX_SNAPSHOT_INTERVAL_MS_DEFAULT = 3600000
# Progress lines while loading: one every this many records.
LOAD_PROGRESS_EVERY_RECORDS = 200_000


def image_snapshot_values(image: MetadataImage) -> list[bytes]:
    """The record values of a snapshot of ``image``, in snapshot order."""
    return [encode_metadata_record(record) for record in image_records(image)]


def load_snapshot_records(
    values: Sequence[bytes], progress: Callable[[int, int], None] | None = None
) -> list[ApiMessageAndVersion]:
    """Decode a snapshot's record values; ``progress(done, total)`` every LOAD_PROGRESS_EVERY_RECORDS."""
    records: list[ApiMessageAndVersion] = []
    total = len(values)
    for index, value in enumerate(values):
        try:
            records.append(decode_metadata_record(value))
        except MetadataRecordError as error:
            raise MetadataRecordError(f"snapshot record {index}: {error}") from None
        if progress is not None and (index + 1) % LOAD_PROGRESS_EVERY_RECORDS == 0:
            progress(index + 1, total)
    return records


def load_snapshot_image(
    values: Sequence[bytes],
    offset: int,
    epoch: int,
    progress: Callable[[int, int], None] | None = None,
) -> MetadataImage:
    """The image a snapshot's record values hold, covering the log up to ``offset``: equal to
    ``load_snapshot(load_snapshot_records(values), offset, epoch)`` (tested as a property), without
    building a message per PartitionRecord (the bulk of a snapshot) or keeping the decoded records."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    total = len(values)
    for index, value in enumerate(values):
        try:
            fields = decode_partition_record_fields(value)
            if fields is None:
                delta.replay(decode_metadata_record(value))
            else:
                delta.replay_partition_registration(
                    fields[0], fields[1], PartitionRegistration.of_untagged(fields)
                )
        except MetadataRecordError as error:
            raise MetadataRecordError(f"snapshot record {index}: {error}") from None
        if progress is not None and (index + 1) % LOAD_PROGRESS_EVERY_RECORDS == 0:
            progress(index + 1, total)
    delta.set_provenance(offset, epoch)
    return delta.apply()


@dataclass
class SnapshotTrigger:
    """SnapshotGenerator's decision, fed by the shell as it applies committed batches."""

    max_bytes_between_snapshots: int = MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS_DEFAULT
    max_interval_ms: int = MAX_SNAPSHOT_INTERVAL_MS_DEFAULT
    bytes_since_snapshot: int = 0
    last_snapshot_ms: int = 0
    in_transaction: bool = False

    def __post_init__(self) -> None:
        assert self.max_bytes_between_snapshots >= 1
        assert self.max_interval_ms >= 0

    def note_records(self, records: Iterable[ApiMessageAndVersion], value_bytes: int) -> None:
        """Records of one committed batch were replayed; ``value_bytes`` is their encoded size."""
        self.bytes_since_snapshot += value_bytes
        for record in records:
            if isinstance(record.message, BeginTransactionRecord):
                self.in_transaction = True
            elif isinstance(record.message, EndTransactionRecord | AbortTransactionRecord):
                self.in_transaction = False

    def due(self, now_ms: int) -> str | None:
        """Why a snapshot is due now, or None."""
        if self.in_transaction or self.bytes_since_snapshot == 0:
            return None
        if self.bytes_since_snapshot >= self.max_bytes_between_snapshots:
            return f"{self.bytes_since_snapshot} bytes replayed since the last snapshot"
        if self.max_interval_ms > 0 and now_ms - self.last_snapshot_ms >= self.max_interval_ms:
            return f"{now_ms - self.last_snapshot_ms} ms since the last snapshot"
        return None

    def reset(self, now_ms: int) -> None:
        self.bytes_since_snapshot = 0
        self.last_snapshot_ms = now_ms
