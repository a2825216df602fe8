"""The Spark Kafka source's row schema, as DDL. Its own module, without numba or numpy: Spark plans a
Python data source in a fresh Python worker that must connect back to the JVM within Spark's fixed 10 s
(PythonWorkerFactory), so planning imports only what it needs; the decoder (pykraft.spark.decode, whose
numba import alone takes ~0.5 s on a quiet machine and several seconds on a loaded one) is imported by
the read tasks."""

from __future__ import annotations

BASE_COLUMNS = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
HEADERS_COLUMN = "headers array<struct<key:string,value:binary>>"
PRODUCER_COLUMNS = "producerId long, producerEpoch int, sequence int"


def schema_ddl(include_headers: bool, include_producer: bool) -> str:
    parts = [BASE_COLUMNS]
    if include_headers:
        parts.append(HEADERS_COLUMN)
    if include_producer:
        parts.append(PRODUCER_COLUMNS)
    return ", ".join(parts)
