"""Bench-only variants of the pykraft source for bench/spark_source.py. Planning is the product's;
only ``read()`` differs.

- ``pykraft_confluent``: executors read with confluent-kafka's C consumer (assign + consume per offset
  range), the transport the source did not choose. Base columns only (librdkafka does not expose
  batch headers, so no producer-info columns).
- ``pykraft_prebuilt``: no I/O and no decoding; each task yields one pre-built Arrow batch of the same
  row width over and over until it has as many rows as its offset range. It measures Spark's own
  cost of taking those rows from a Python data source: the ceiling for any transport.
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


class PrebuiltReader(PykraftBatchReader):
    def read(self, partition: Any) -> Any:
        import numpy as np
        import pyarrow as pa

        from bench.spark_source import KEY_BYTES

        assert isinstance(partition, OffsetRangePartition)
        schema = _arrow_schema(self.schema)
        value_bytes = int(self.options.get("valueBytes", "1024"))
        rows = 8192

        def binary(width: int) -> Any:
            offsets = pa.py_buffer(np.arange(0, width * (rows + 1), width, dtype=np.int32))
            return pa.Array.from_buffers(
                pa.binary(), rows, [None, offsets, pa.py_buffer(b"v" * width * rows)]
            )

        topic = partition.topic.encode()
        batch = pa.RecordBatch.from_arrays(
            [
                binary(KEY_BYTES),
                binary(value_bytes),
                pa.Array.from_buffers(
                    pa.string(),
                    rows,
                    [
                        None,
                        pa.py_buffer(np.arange(0, len(topic) * (rows + 1), len(topic), dtype=np.int32)),
                        pa.py_buffer(topic * rows),
                    ],
                ),
                pa.array(np.full(rows, partition.partition, np.int32)),
                pa.array(np.arange(rows, dtype=np.int64)),
                pa.array(np.zeros(rows, np.int64)).view(schema.field("timestamp").type),
                pa.array(np.zeros(rows, np.int32)),
            ],
            schema=schema,
        )
        left = partition.end - partition.start
        while left > 0:
            yield batch if left >= rows else batch.slice(0, left)
            left -= rows


class PrebuiltSource(PykraftDataSource):
    @classmethod
    def name(cls) -> str:
        return "pykraft_prebuilt"

    def reader(self, schema: Any) -> Any:
        return PrebuiltReader(self.options, schema)
