"""What the two coordinators' shells share: their internal topic, created on first use, and the walk over
one of its partitions when this node becomes its leader.

``__consumer_offsets`` (groups) and ``__transaction_state`` (transactions) are created through the
controller like any topic, lazily, by the first FindCoordinator that needs them, with their
``*.num.partitions`` and ``*.replication.factor`` — clamped to the live brokers, so a cluster smaller than
the default 3 still gets one — and compacted, as Kafka creates them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from pykraft.broker.handlers import BrokerContext
from pykraft.io.waiting import wait_shielded
from pykraft.log.partition_log import PartitionLog
from pykraft.protocol.records import BatchHeader, Record, decode_records, scan_batches

log = logging.getLogger("pykraft.internal_topics")

# How long FindCoordinator waits for the controller to create the topic before answering
# COORDINATOR_NOT_AVAILABLE (the client then retries).
CREATE_TIMEOUT_S = 10.0
LOAD_READ_BYTES = 1 << 20

CreateTopics = Callable[[list[str], int, int, dict[str, str]], Coroutine[Any, Any, None]]


class InternalTopic:
    def __init__(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        ctx: BrokerContext,
        create: CreateTopics,
        segment_bytes: int,
    ) -> None:
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        # Kafka creates both internal topics compacted: only each key's latest record matters, so they
        # stay as small as their live keys (offsets.topic.segment.bytes, transaction.state.log.segment.bytes).
        self.configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
        self.ctx = ctx
        self._create = create
        self._creating: asyncio.Task[None] | None = None

    async def ensure(self) -> None:
        """Create the topic unless the image has it; wait (bounded) until the controller answered."""
        if self.name in self.ctx.cluster.topics:
            return
        if self._creating is None or self._creating.done():
            self._creating = asyncio.get_running_loop().create_task(
                self._create(
                    [self.name], self.num_partitions, self._effective_replication_factor(), self.configs
                )
            )
        creating = self._creating
        if not await wait_shielded(creating, CREATE_TIMEOUT_S):
            log.warning("creating %s took over %.0f s", self.name, CREATE_TIMEOUT_S)
        elif not creating.cancelled() and creating.exception() is not None:
            log.warning("creating %s failed: %s", self.name, creating.exception())

    def _effective_replication_factor(self) -> int:
        live = max(1, len(self.ctx.cluster.brokers))
        if self.replication_factor > live:
            log.info(
                "creating %s with replication factor %d: the configured %d is more than the %d live broker(s)",
                self.name,
                live,
                self.replication_factor,
                live,
            )
            return live
        return self.replication_factor

    async def stop(self) -> None:
        creating, self._creating = self._creating, None
        if creating is not None and not creating.done():
            creating.cancel()
            await asyncio.gather(creating, return_exceptions=True)


def iter_batches(plog: PartitionLog) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Every batch of ``plog`` from its log start to its log end, with its records (a control batch has
    one: its marker).

    To the log end, not the high watermark, as Kafka's coordinators load: a new leader's high watermark
    can lag what the ISR acknowledged (it moves once followers report), and its log is the truth now."""
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        result = plog.read(offset, LOAD_READ_BYTES, max_offset=plog.log_end_offset)
        if not result.chunks:
            return
        for chunk in result.chunks:
            for position, header in scan_batches(chunk, check_crc=False):
                yield header, decode_records(chunk[position : position + header.size_in_bytes])
        offset = result.next_offset
