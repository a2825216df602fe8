"""Bench-only variant of the pykraft source whose executors read with confluent-kafka's C consumer
(assign + consume per offset range), to compare transports in bench/spark_source.py.

Planning is the product's; only ``read()`` differs. It cannot give producer-info columns (librdkafka
does not expose batch headers), so it supports the base columns only.
"""

from __future__ import annotations

from typing import Any

from pykraft.spark.source import OffsetRangePartition, PykraftBatchReader, PykraftDataSource, _arrow_schema


class ConfluentRangeReader(PykraftBatchReader):
    def read(self, partition: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc
        from confluent_kafka import Consumer, TopicPartition

        assert isinstance(partition, OffsetRangePartition) and partition.leader is not None
        schema = _arrow_schema(self.schema)
        host, port = partition.leader
        consumer = Consumer(
            {"bootstrap.servers": f"{host}:{port}", "group.id": "bench-range", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(partition.topic, partition.partition, partition.start)])
        offset = partition.start
        try:
            while offset < partition.end:
                msgs = [
                    m
                    for m in consumer.consume(8192, timeout=1.0)
                    if not m.error() and m.offset() < partition.end
                ]
                if not msgs:
                    continue
                offset = msgs[-1].offset() + 1
                n = len(msgs)
                stamps = pc.multiply(pa.array([m.timestamp()[1] for m in msgs], pa.int64()), 1000)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([m.key() for m in msgs], pa.binary()),
                        pa.array([m.value() for m in msgs], pa.binary()),
                        pa.array([partition.topic] * n, pa.string()),
                        pa.array([partition.partition] * n, pa.int32()),
                        pa.array([m.offset() for m in msgs], pa.int64()),
                        stamps.view(schema.field("timestamp").type),
                        pa.array([m.timestamp()[0] - 1 for m in msgs], pa.int32()),
                    ],
                    schema=schema,
                )
        finally:
            consumer.close()


class ConfluentRangeSource(PykraftDataSource):
    @classmethod
    def name(cls) -> str:
        return "pykraft_confluent"

    def reader(self, schema: Any) -> Any:
        return ConfluentRangeReader(self.options, schema)
