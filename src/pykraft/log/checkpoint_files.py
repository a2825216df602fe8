"""Kafka's checkpoint files, byte for byte (issue 29; docs/formats.md).

Kafka's CheckpointFile writes a version line, a count line, then one line per entry, each line ended by
``\\n``; ASCII decimal numbers, fields separated by one space:

- OffsetCheckpointFile (version 0), one per log dir: ``replication-offset-checkpoint`` (high watermarks),
  ``recovery-point-offset-checkpoint`` (the offset below which a partition's log was flushed) and
  ``log-start-offset-checkpoint``; an entry is ``<topic> <partition> <offset>``.
- LeaderEpochCheckpointFile (version 0), ``leader-epoch-checkpoint`` in each partition's dir; an entry is
  ``<leader epoch> <start offset>``, in ascending order.

A file that does not parse raises ``ValueError`` naming it (Kafka's CheckpointReadBuffer throws
"Malformed line in checkpoint file" the same way).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# LogManager's marker of a clean shutdown in each log dir (CleanShutdownFileHandler).
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CHECKPOINT_VERSION = 0


def _encode(lines: list[str]) -> bytes:
    return "".join(f"{line}\n" for line in [str(CHECKPOINT_VERSION), str(len(lines)), *lines]).encode("ascii")


def _entry_lines(data: bytes, name: str, fields: int) -> list[list[str]]:
    def malformed(why: str) -> ValueError:
        return ValueError(
            f"{name}: {why} (Kafka's checkpoint layout: version, count, entries): {data[:80]!r}"
        )

    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise malformed("not ASCII") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0] != str(CHECKPOINT_VERSION):
        raise malformed(f"version is not {CHECKPOINT_VERSION}")
    if not lines[1].isdigit() or int(lines[1]) != len(lines) - 2:
        raise malformed(f"count {lines[1]!r} does not match {len(lines) - 2} entries")
    entries = [line.split(" ") for line in lines[2:]]
    for entry in entries:
        if len(entry) != fields or not all(word.lstrip("-").isdigit() for word in entry[fields - 2 :]):
            raise malformed(f"malformed line {' '.join(entry)!r}")
    return entries


def encode_offset_checkpoint(offsets: Mapping[tuple[str, int], int]) -> bytes:
    """OffsetCheckpointFile: ``topic partition offset`` per partition."""
    return _encode([f"{topic} {partition} {offset}" for (topic, partition), offset in offsets.items()])


def decode_offset_checkpoint(data: bytes, name: str) -> dict[tuple[str, int], int]:
    return {(topic, int(partition)): int(offset) for topic, partition, offset in _entry_lines(data, name, 3)}


def encode_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> bytes:
    """LeaderEpochCheckpointFile: ``epoch start_offset`` per epoch, ascending."""
    return _encode([f"{epoch} {start_offset}" for epoch, start_offset in entries])


def decode_leader_epoch_checkpoint(data: bytes, name: str = LEADER_EPOCH_CHECKPOINT) -> list[tuple[int, int]]:
    return [(int(epoch), int(offset)) for epoch, offset in _entry_lines(data, name, 2)]


def encode_clean_shutdown(broker_epoch: int) -> bytes:
    """``.kafka_cleanshutdown`` as Kafka 4's CleanShutdownFileHandler writes it (JSON; KIP-966 broker epoch,
    -1 when unknown). Only its presence matters to a restart."""
    return f'{{"version":0,"brokerEpoch":{broker_epoch}}}'.encode("ascii")
