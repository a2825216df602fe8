"""A broker that answers Produce and Fetch correctly from memory, with no checks and no disk.

It is the ceiling the client sets on this machine: whatever pykraft loses against it is broker cost. A
Fetch with nothing new waits, as a broker's does, until a Produce brings min_bytes or max_wait_ms passes,
so it is also the floor for end-to-end latency (bench.latency); it counts Fetches and Produces and writes
the counts on exit (--stats).
It uses pykraft's own codecs (hand-parsed header, zero-copy Produce decode, spliced Fetch encode) so the
comparison isolates validation, producer state, the log and durability — not the codec.

    python -m bench.null_broker --port 19092
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import signal
import struct
import uuid
from typing import Any

from kafka.protocol.admin import CreateTopicsResponse
from kafka.protocol.consumer import ListOffsetsResponse
from kafka.protocol.metadata import FindCoordinatorResponse, MetadataResponse
from kafka.protocol.producer import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    ProduceResponse,
)

from pykraft.protocol import messages
from pykraft.protocol.fetch import (
    FetchPartitionResponse,
    FetchResponseData,
    FetchTopicResponse,
    encode_fetch_response,
)
from pykraft.protocol.messages import ApiKey
from pykraft.protocol.produce import decode_produce_request
from pykraft.protocol.records import read_batch_header, set_base_offset

NODE_ID = 1


class Partition:
    __slots__ = ("batches", "offsets", "end_offset")

    def __init__(self) -> None:
        self.batches: list[bytes | bytearray | memoryview] = []
        self.offsets: list[int] = []  # base offset of each stored batch
        self.end_offset = 0


class NullBroker:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.topics: dict[str, list[Partition]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.next_pid = 0
        self.data_event = asyncio.Event()
        # Requests answered, for the benchmarks to print (bench.latency): a Fetch that waited for data
        # counts once, however long it waited.
        self.fetches = 0
        self.produces = 0

    def topic(self, name: str, partitions: int = 1) -> list[Partition]:
        if name not in self.topics:
            self.topics[name] = [Partition() for _ in range(partitions)]
            self.topic_ids[name] = uuid.uuid4()
        return self.topics[name]

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = bytearray(await reader.readexactly(size))
                chunks = await self.handle(frame)
                if chunks:
                    writer.writelines(chunks)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass  # stopping with a Fetch parked: the connection just closes (3.11 logs a cancelled handler)
        finally:
            writer.close()

    async def handle(self, frame: bytearray) -> list[Any] | None:
        view = memoryview(frame)
        header = messages.parse_request_header(view)
        key, version = header.api_key, header.api_version
        if key == ApiKey.API_VERSIONS:
            return [messages.api_versions_response(header)]
        if key == ApiKey.PRODUCE:
            self.produces += 1
            request = decode_produce_request(view[header.body_offset :], version)
            responses = []
            for t in request.topics:
                parts = self.topic(t.name)
                out = []
                for p in t.partitions:
                    part = parts[p.index]
                    base = part.end_offset
                    records = p.records
                    assert records is not None
                    pos = 0
                    while pos < len(records):
                        h = read_batch_header(records, pos)
                        set_base_offset(records, pos, part.end_offset)
                        part.offsets.append(part.end_offset)
                        part.batches.append(records[pos : pos + h.size_in_bytes])
                        part.end_offset += h.last_offset_delta + 1
                        pos += h.size_in_bytes
                    out.append(
                        ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
                            index=p.index,
                            error_code=0,
                            base_offset=base,
                            log_append_time_ms=-1,
                            log_start_offset=0,
                            record_errors=[],
                            error_message=None,
                        )
                    )
                responses.append(ProduceResponse.TopicProduceResponse(name=t.name, partition_responses=out))
            self.data_event.set()
            self.data_event = asyncio.Event()
            if request.acks == 0:
                return None
            return [
                messages.encode_response(
                    header, ProduceResponse(version=version, responses=responses, throttle_time_ms=0)
                )
            ]
        request = messages.decode_request(header, view)
        if key == ApiKey.FETCH:
            self.fetches += 1
            return await self.fetch(header, request)
        return [messages.encode_response(header, self.simple(key, version, request))]

    async def fetch(self, header: Any, request: Any) -> list[Any]:
        deadline = asyncio.get_running_loop().time() + request.max_wait_ms / 1000
        while True:
            total = 0
            topics = []
            for t in request.topics:
                parts = self.topic(t.topic)
                out = []
                for fp in t.partitions:
                    part = parts[fp.partition]
                    chunks: list[Any] = []
                    size = 0
                    # From the batch holding fetch_offset. A caught-up partition (fetch_offset at its
                    # end) has nothing to send, so the Fetch waits below for a Produce or max_wait_ms,
                    # as Kafka's DelayedFetch does in the fetch purgatory.
                    if fp.fetch_offset >= part.end_offset:
                        i = len(part.batches)
                    else:
                        i = max(bisect.bisect_right(part.offsets, fp.fetch_offset) - 1, 0)
                    while i < len(part.batches) and size < fp.partition_max_bytes:
                        chunks.append(part.batches[i])
                        size += len(part.batches[i])
                        i += 1
                    total += size
                    out.append(
                        FetchPartitionResponse(
                            partition_index=fp.partition,
                            error_code=0,
                            high_watermark=part.end_offset,
                            last_stable_offset=part.end_offset,
                            log_start_offset=0,
                            records=chunks,
                        )
                    )
                topics.append(FetchTopicResponse(topic=t.topic, partitions=out))
            remaining = deadline - asyncio.get_running_loop().time()
            if total >= request.min_bytes or remaining <= 0:
                break
            try:
                await asyncio.wait_for(self.data_event.wait(), remaining)
            except TimeoutError:
                pass
        data = FetchResponseData(throttle_time_ms=0, error_code=0, session_id=0, topics=topics)
        return encode_fetch_response(header.correlation_id, header.api_version, data)

    def simple(self, key: int, version: int, request: Any) -> Any:
        if key == ApiKey.METADATA:
            names = list(self.topics) if request.topics is None else [t.name for t in request.topics]
            topics = []
            for name in names:
                parts = self.topic(name)
                topics.append(
                    MetadataResponse.MetadataResponseTopic(
                        error_code=0,
                        name=name,
                        topic_id=self.topic_ids[name],
                        is_internal=False,
                        authorized_operations=None,
                        partitions=[
                            MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                                error_code=0,
                                partition_index=i,
                                leader_id=NODE_ID,
                                leader_epoch=0,
                                replica_nodes=[NODE_ID],
                                isr_nodes=[NODE_ID],
                                offline_replicas=[],
                            )
                            for i in range(len(parts))
                        ],
                    )
                )
            broker = MetadataResponse.MetadataResponseBroker(
                node_id=NODE_ID, host=self.host, port=self.port, rack=None
            )
            return MetadataResponse(
                version=version,
                throttle_time_ms=0,
                brokers=[broker],
                cluster_id="null",
                controller_id=NODE_ID,
                topics=topics,
            )
        if key == ApiKey.CREATE_TOPICS:
            results = []
            for t in request.topics:
                self.topic(t.name, max(t.num_partitions, 1))
                results.append(
                    CreateTopicsResponse.CreatableTopicResult(
                        name=t.name,
                        topic_id=self.topic_ids[t.name],
                        error_code=0,
                        error_message=None,
                        num_partitions=len(self.topics[t.name]),
                        replication_factor=1,
                        configs=[],
                    )
                )
            return CreateTopicsResponse(version=version, throttle_time_ms=0, topics=results)
        if key == ApiKey.INIT_PRODUCER_ID:
            self.next_pid += 1
            return InitProducerIdResponse(
                version=version, throttle_time_ms=0, error_code=0, producer_id=self.next_pid, producer_epoch=0
            )
        if key == ApiKey.LIST_OFFSETS:
            topics = []
            for t in request.topics:
                parts = self.topic(t.name)
                topics.append(
                    ListOffsetsResponse.ListOffsetsTopicResponse(
                        name=t.name,
                        partitions=[
                            ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                                partition_index=p.partition_index,
                                error_code=0,
                                timestamp=-1,
                                leader_epoch=0,
                                offset=0 if p.timestamp == -2 else parts[p.partition_index].end_offset,
                            )
                            for p in t.partitions
                        ],
                    )
                )
            return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)
        if key in (ApiKey.END_TXN, ApiKey.ADD_OFFSETS_TO_TXN):
            # Transactions: success without a coordinator, a log or markers (the ceiling for T1).
            cls = EndTxnResponse if key == ApiKey.END_TXN else AddOffsetsToTxnResponse
            return cls(version=version, throttle_time_ms=0, error_code=0)
        if key == ApiKey.ADD_PARTITIONS_TO_TXN:
            topic_result: Any = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
            return AddPartitionsToTxnResponse(
                version=version,
                throttle_time_ms=0,
                results_by_topic_v3_and_below=[
                    topic_result(
                        name=t.name,
                        results_by_partition=[
                            topic_result.AddPartitionsToTxnPartitionResult(
                                partition_index=p, partition_error_code=0
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in request.v3_and_below_topics
                ],
            )
        if key == ApiKey.FIND_COORDINATOR:
            if version >= 4:
                return FindCoordinatorResponse(
                    version=version,
                    throttle_time_ms=0,
                    coordinators=[
                        FindCoordinatorResponse.Coordinator(
                            key=k,
                            node_id=NODE_ID,
                            host=self.host,
                            port=self.port,
                            error_code=0,
                            error_message=None,
                        )
                        for k in request.coordinator_keys
                    ],
                )
            return FindCoordinatorResponse(
                version=version,
                throttle_time_ms=0,
                error_code=0,
                error_message=None,
                node_id=NODE_ID,
                host=self.host,
                port=self.port,
            )
        raise ConnectionError(f"null broker does not answer api key {key}")


async def main_async(host: str, port: int, stats_path: str | None) -> None:
    broker = NullBroker(host, port)
    server = await asyncio.start_server(broker.serve, host, port, limit=1 << 20)
    print(f"null broker on {host}:{server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with server:
        await stop.wait()
    if stats_path:
        with open(stats_path, "w") as fh:
            json.dump({"fetches": broker.fetches, "produces": broker.produces}, fh)


def main() -> None:
    parser = argparse.ArgumentParser(description="in-memory, no-checks Kafka broker (benchmark ceiling)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--stats", metavar="PATH", help="on exit, write the Fetch and Produce counts here (JSON)"
    )
    args = parser.parse_args()
    asyncio.run(main_async(args.host, args.port, args.stats))


if __name__ == "__main__":
    main()
