"""``pykraft producers --bootstrap-server HOST:PORT [--topic T]``: each partition's active producers.

A small blocking client over kafka-python's codec, like ``kafka-transactions describe-producers``:
Metadata for the partitions and their leaders, then DescribeProducers (api 61, KIP-664) on each
leader. Prints one line per (partition, producer): id, epoch, last sequence, last timestamp,
coordinator epoch and current transaction start offset. Exit status 1 with one line on failure.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.io.kafka_connection import BrokerConnection, BrokerConnectionError

TIMEOUT_S = 10.0
METADATA_VERSION = 9


class ProducersError(BrokerConnectionError):
    """One line for the user: what failed and where."""


def describe_producers(bootstrap: str, topic: str | None) -> list[tuple[str, int, Any]]:
    """(topic, partition, producer state or an error string) rows, sorted by topic and partition."""
    conn = BrokerConnection.to(bootstrap, client_id="pykraft-producers")
    try:
        topics = None if topic is None else [MetadataRequest.MetadataRequestTopic(name=topic)]
        metadata = conn.request(
            MetadataRequest(topics=topics, allow_auto_topic_creation=False),
            MetadataResponse,
            METADATA_VERSION,
        )
    finally:
        conn.close()
    brokers = {b.node_id: (b.host, b.port) for b in metadata.brokers}
    by_leader: dict[int, dict[str, list[int]]] = {}
    for t in metadata.topics:
        if t.error_code:
            raise ProducersError(f"topic {t.name}: error code {t.error_code}")
        for p in t.partitions:
            by_leader.setdefault(p.leader_id, {}).setdefault(t.name, []).append(p.partition_index)
    rows: list[tuple[str, int, Any]] = []
    for leader, partitions in by_leader.items():
        if leader not in brokers:
            raise ProducersError(f"no address for leader {leader}")
        conn = BrokerConnection(*brokers[leader], client_id="pykraft-producers")
        try:
            request = DescribeProducersRequest(
                topics=[
                    DescribeProducersRequest.TopicRequest(name=name, partition_indexes=indexes)
                    for name, indexes in partitions.items()
                ]
            )
            response = conn.request(request, DescribeProducersResponse, 0)
        finally:
            conn.close()
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    rows.append((t.name, p.partition_index, f"error {p.error_code}: {p.error_message}"))
                for producer in p.active_producers:
                    rows.append((t.name, p.partition_index, producer))
    rows.sort(key=lambda row: (row[0], row[1], getattr(row[2], "producer_id", -1)))
    return rows


def _run(args: argparse.Namespace) -> int:
    try:
        rows = describe_producers(args.bootstrap_server, args.topic)
    except BrokerConnectionError as exc:
        print(f"pykraft producers: {exc}", file=sys.stderr)
        return 1
    header = ("Topic", "Partition", "ProducerId", "Epoch", "LastSequence", "LastTimestamp",
              "CoordinatorEpoch", "TxnStartOffset")  # fmt: skip
    lines = [header]
    for topic, partition, producer in rows:
        if isinstance(producer, str):
            lines.append((topic, str(partition), producer, "", "", "", "", ""))
            continue
        lines.append(
            (
                topic,
                str(partition),
                str(producer.producer_id),
                str(producer.producer_epoch),
                str(producer.last_sequence),
                str(producer.last_timestamp),
                str(producer.coordinator_epoch),
                str(producer.current_txn_start_offset),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    return 0


def add_subcommands(subparsers: Any) -> None:
    parser = subparsers.add_parser("producers", help="list each partition's active idempotent producers")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--topic", help="only this topic (default: all)")
    parser.set_defaults(func=_run)
