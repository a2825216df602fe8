"""The checks behind the two pipelines, without Spark: decode one metadata file into producer-ID block
allocations, and judge a sequence of allocations. ``pipelines.py`` runs the decoding as one Spark task
per file and these checks on the driver.

A ``ProducerIdsRecord`` (KIP-730 as shipped, kafka-facts.md §1.2) carries ``NextProducerId``: the
exclusive end of the block just handed out; blocks are ``PRODUCER_ID_BLOCK_SIZE`` (1000) ids, so the
block is ``[next - 1000, next - 1]``. A snapshot holds one such record with broker id -1: the state at
the snapshot's end offset, not an allocation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pykraft.metadata.records import MetadataRecordError, ProducerIdsRecord, decode_metadata_record
from pykraft.protocol.records import decode_records, scan_batches

PRODUCER_ID_BLOCK_SIZE = 1000
METADATA_PARTITION_DIR = "__cluster_metadata-0"

# Column order of the allocation table (and of the Parquet output).
ALLOCATION_COLUMNS = (
    "file string, kind string, offset long, leader_epoch int, append_time_ms long, "
    "broker_id int, broker_epoch long, first_id long, last_id long, next_id long"
)


@dataclass(frozen=True)
class Allocation:
    file: str
    kind: str  # "log" (an allocation) or "snapshot" (the state at a snapshot's end offset)
    offset: int
    leader_epoch: int
    append_time_ms: int
    broker_id: int
    broker_epoch: int
    first_id: int
    last_id: int
    next_id: int


def metadata_files(metadata_dir: str) -> list[str]:
    """The ``.log`` segments and ``.checkpoint`` snapshots under ``metadata_dir`` (the
    ``metadata.log.dir``, or its ``__cluster_metadata-0`` directory itself)."""
    directory = metadata_dir
    nested = os.path.join(metadata_dir, METADATA_PARTITION_DIR)
    if os.path.isdir(nested):
        directory = nested
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"--metadata-dir: {metadata_dir} is not a directory")
    names = sorted(n for n in os.listdir(directory) if n.endswith((".log", ".checkpoint")))
    if not names:
        raise FileNotFoundError(f"--metadata-dir: {directory} holds no .log or .checkpoint file")
    return [os.path.join(directory, n) for n in names]


def _snapshot_id(path: str) -> tuple[int, int]:
    stem = os.path.basename(path)[: -len(".checkpoint")]
    end_offset, _, epoch = stem.partition("-")
    return int(end_offset), int(epoch or 0)


def decode_allocations(path: str) -> list[Allocation]:
    """Every ``ProducerIdsRecord`` in one metadata segment or snapshot file (control batches skipped).
    Raises ``MetadataRecordError`` naming the file and offset if a record does not parse."""
    with open(path, "rb") as fh:
        data = fh.read()
    snapshot = path.endswith(".checkpoint")
    snap_end, snap_epoch = _snapshot_id(path) if snapshot else (0, 0)
    name = os.path.basename(path)
    out: list[Allocation] = []
    for pos, header in scan_batches(data):
        if header.is_control:
            continue
        for rec in decode_records(memoryview(data)[pos : pos + header.size_in_bytes]):
            if rec.value is None:
                continue
            try:
                decoded = decode_metadata_record(rec.value)
            except MetadataRecordError as exc:
                raise MetadataRecordError(f"{path}: record at offset {rec.offset}: {exc}") from None
            msg = decoded.message
            if not isinstance(msg, ProducerIdsRecord):
                continue
            next_id = int(msg.next_producer_id)
            out.append(
                Allocation(
                    file=name,
                    kind="snapshot" if snapshot else "log",
                    # A snapshot's records describe the state just before its end offset.
                    offset=snap_end - 1 if snapshot else rec.offset,
                    leader_epoch=snap_epoch if snapshot else header.partition_leader_epoch,
                    append_time_ms=rec.timestamp,
                    broker_id=int(msg.broker_id),
                    broker_epoch=int(msg.broker_epoch),
                    first_id=next_id - PRODUCER_ID_BLOCK_SIZE,
                    last_id=next_id - 1,
                    next_id=next_id,
                )
            )
    return out


def check_allocations(rows: list[Allocation]) -> list[str]:
    """Violations, in log order: a block must start at or after the end of every earlier block
    (no overlap) and ``NextProducerId`` must strictly increase; a snapshot must not be behind the log."""
    violations: list[str] = []
    high: int | None = None  # the highest NextProducerId seen so far
    high_at = ""
    # Snapshot state sorts after log records at the same offset; duplicates of one offset (a segment
    # copied twice) are reported as non-increasing.
    for row in sorted(rows, key=lambda r: (r.offset, r.kind == "snapshot", r.file)):
        where = f"{row.file} offset {row.offset}"
        if row.kind == "snapshot":
            if high is not None and row.next_id < high:
                violations.append(
                    f"{where}: snapshot says next producer id {row.next_id}, "
                    f"but {high_at} already allocated up to {high - 1}"
                )
        elif high is not None:
            if row.next_id <= high:
                kind = (
                    "overlaps"
                    if row.next_id > high - PRODUCER_ID_BLOCK_SIZE or row.first_id < high
                    else "repeats"
                )
                violations.append(
                    f"{where}: block [{row.first_id}, {row.last_id}] for broker {row.broker_id} {kind} "
                    f"ids already allocated up to {high - 1} ({high_at}); next id {row.next_id} does not increase"
                )
            elif row.first_id < high:
                violations.append(
                    f"{where}: block [{row.first_id}, {row.last_id}] for broker {row.broker_id} overlaps "
                    f"ids already allocated up to {high - 1} ({high_at})"
                )
        if high is None or row.next_id > high:
            high = row.next_id
            high_at = where
    return violations
