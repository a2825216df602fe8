"""The KRaft metadata log on disk: ``__cluster_metadata-0`` in Kafka's segment format.

Implements the raft core's ``RaftLog`` contract over the same ``PartitionLog`` the data partitions use,
plus the leader-epoch cache (Kafka keeps it in ``leader-epoch-checkpoint``; here it is rebuilt from the
batch headers on open, which carry ``partitionLeaderEpoch``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from pykraft.log.partition_log import LogConfig, PartitionLog
from pykraft.protocol.records import Record, read_batch_header, scan_batches
from pykraft.raft.log import build_leader_batch
from pykraft.raft.messages import OffsetAndEpoch

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION_DIR = "__cluster_metadata-0"


class FileRaftLog:
    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        # (epoch, start_offset) for each epoch change along the log.
        self._epochs: list[tuple[int, int]] = []
        for header in log.batch_headers():
            self._note_epoch(header.partition_leader_epoch, max(header.base_offset, log.log_start_offset))
        self._flushed_offset = log.log_end_offset

    @classmethod
    def config(cls, segment_bytes: int = 1073741824) -> LogConfig:
        # Never time/size retention (Kafka creates it with retention -1): only snapshots (KIP-630)
        # move its start. ``segment_bytes`` is metadata.log.segment.bytes.
        return LogConfig(segment_bytes=segment_bytes, retention_ms=-1, retention_bytes=-1)

    def _note_epoch(self, epoch: int, start_offset: int) -> None:
        if not self._epochs or self._epochs[-1][0] != epoch:
            assert not self._epochs or epoch > self._epochs[-1][0], "epochs never decrease along the log"
            self._epochs.append((epoch, start_offset))

    @property
    def start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_fetched_epoch(self) -> int:
        return self._epochs[-1][0] if self._epochs else 0

    @property
    def flushed_offset(self) -> int:
        return self._flushed_offset

    def append_as_leader(
        self, records: Sequence[bytes | Record], epoch: int, now_ms: int, *, is_control: bool = False
    ) -> tuple[int, int]:
        base = self.end_offset
        batch = build_leader_batch(
            records, base_offset=base, epoch=epoch, now_ms=now_ms, is_control=is_control
        )
        header = read_batch_header(batch)
        self.log.append(batch, [header])
        self.log.set_high_watermark(self.log.log_end_offset)
        self._note_epoch(epoch, base)
        return base, header.last_offset

    def append_as_follower(self, batches: bytes) -> None:
        buf = bytearray(batches)
        headers = [h for _, h in scan_batches(buf)]
        assert headers and headers[0].base_offset == self.end_offset
        # Followers keep the leader's offsets: the partition log assigns consecutive offsets from its
        # end, which equal the leader's when the first batch starts at our end offset.
        self.log.append(buf, headers)
        self.log.set_high_watermark(self.log.log_end_offset)
        for h in headers:
            self._note_epoch(h.partition_leader_epoch, h.base_offset)

    def read(self, fetch_offset: int, max_bytes: int) -> bytes:
        if fetch_offset >= self.end_offset:
            return b""
        result = self.log.read(fetch_offset, max_bytes, min_one_batch=True)
        return b"".join(result.chunks)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        end = self.log.log_end_offset
        while self._epochs and self._epochs[-1][1] >= end:
            self._epochs.pop()
        self._flushed_offset = min(self._flushed_offset, end)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        if not self._epochs:
            return OffsetAndEpoch(self.end_offset, self.last_fetched_epoch)
        epochs = [e for e, _ in self._epochs]
        if epoch == epochs[-1] or epoch > epochs[-1]:
            return OffsetAndEpoch(self.end_offset, epochs[-1])
        if epoch < epochs[0]:
            return OffsetAndEpoch(self._epochs[0][1], epoch)
        index = bisect.bisect_right(epochs, epoch)
        # The largest known epoch <= epoch ends where the next higher one starts.
        return OffsetAndEpoch(self._epochs[index][1], epochs[index - 1])

    # --- KIP-630 -------------------------------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        return self.log.size_in_bytes

    def delete_before(self, offset: int) -> None:
        """Log start advancement: the start checkpoint first, then whole segments below it; the epoch
        cache drops epochs that end at or before the new start (LeaderEpochFileCache.truncateFromStart)."""
        assert self.start_offset <= offset <= self.end_offset, (self.start_offset, offset, self.end_offset)
        self.log.delete_records_before(offset)
        while len(self._epochs) > 1 and self._epochs[1][1] <= offset:
            self._epochs.pop(0)
        if self._epochs and self._epochs[0][1] < offset:
            self._epochs[0] = (self._epochs[0][0], offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self._epochs.clear()
        self._flushed_offset = offset

    def flush(self, offset: int) -> None:
        if offset > self._flushed_offset:
            self.log.flush()
            self._flushed_offset = self.end_offset
