"""Streaming example: Palmer penguins -> pykraft topic -> Spark Structured Streaming -> pykraft topic.

    make run                                     # terminal 1: a broker on 127.0.0.1:9092
    .venv/bin/python -m examples.penguins_stream # terminal 2

The data is the real Palmer Archipelago penguins dataset (344 birds, Gorman et al. 2014, CC0) as the
``palmerpenguins`` PyPI package ships it (no download at run time). The script

1. produces every row as a JSON record into topic ``penguins`` (key = species);
2. runs a Structured Streaming query over ``spark.readStream.format("pykraft")``: per species and
   island, the number of birds and their mean body mass and flipper length; in ``update`` mode each
   micro-batch's changed aggregates go as JSON records to topic ``penguin-stats`` through the pykraft
   sink, via ``foreachBatch`` (``trigger(availableNow=True)``, so it stops when it has caught up; run it again and the
   checkpoint makes it read only new rows);
3. reads ``penguin-stats`` back with a batch read and prints the latest value per key.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
from typing import Any

SOURCE_TOPIC = "penguins"
STATS_TOPIC = "penguin-stats"


def penguin_rows(limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of the dataset's CSV, found through the package metadata (importing palmerpenguins
    itself would import pandas, which this example does not need)."""
    import importlib.metadata

    path = importlib.metadata.distribution("palmerpenguins").locate_file("palmerpenguins/data/penguins.csv")
    rows = []
    with open(str(path), newline="") as fh:
        for rec in csv.DictReader(fh):
            row: dict[str, Any] = {k: (None if v == "NA" else v) for k, v in rec.items()}
            for name in ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"):
                row[name] = None if row[name] is None else float(row[name])
            row["year"] = int(row["year"])
            rows.append(row)
    return rows[:limit] if limit else rows


def produce_penguins(bootstrap: str, rows: list[dict[str, Any]]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=10).topics
    new = [
        NewTopic(t, num_partitions=2, replication_factor=1)
        for t in (SOURCE_TOPIC, STATS_TOPIC)
        if t not in existing
    ]
    for fut in admin.create_topics(new).values() if new else []:
        fut.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for row in rows:
        producer.produce(SOURCE_TOPIC, json.dumps(row).encode(), (row["species"] or "").encode())
    assert producer.flush(60) == 0, "not every penguin was acknowledged"


def aggregate_stream(spark: Any, bootstrap: str, checkpoint: str) -> Any:
    from pyspark.sql import functions as F

    schema = (
        "species string, island string, bill_length_mm double, bill_depth_mm double, "
        "flipper_length_mm double, body_mass_g double, sex string, year int"
    )
    penguins = (
        spark.readStream.format("pykraft")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", SOURCE_TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
        .select(F.from_json(F.col("value").cast("string"), schema).alias("p"))
        .select("p.*")
    )
    stats = penguins.groupBy("species", "island").agg(
        F.count("*").alias("birds"),
        F.round(F.avg("body_mass_g"), 1).alias("mean_body_mass_g"),
        F.round(F.avg("flipper_length_mm"), 1).alias("mean_flipper_length_mm"),
    )
    as_records = stats.select(
        F.concat_ws("/", "species", "island").cast("binary").alias("key"),
        F.to_json(F.struct("species", "island", "birds", "mean_body_mass_g", "mean_flipper_length_mm"))
        .cast("binary")
        .alias("value"),
    )

    def write_changes(batch: Any, batch_id: int) -> None:
        # Python streaming sinks take append mode only; an aggregate's changed rows (update mode)
        # go through foreachBatch and the batch sink.
        batch.write.format("pykraft").option("kafka.bootstrap.servers", bootstrap).option(
            "topic", STATS_TOPIC
        ).mode("append").save()

    query = (
        as_records.writeStream.outputMode("update")
        .foreachBatch(write_changes)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return query


def latest_stats(spark: Any, bootstrap: str) -> list[dict[str, Any]]:
    """The newest aggregate per key in ``penguin-stats`` (update mode writes every change)."""
    rows = (
        spark.read.format("pykraft")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", STATS_TOPIC)
        .load()
        .select("key", "value", "timestamp", "partition", "offset")
        .collect()
    )
    latest: dict[bytes, Any] = {}
    for r in sorted(rows, key=lambda r: (r.timestamp, r.partition, r.offset)):
        latest[r.key] = json.loads(r.value)
    return sorted(latest.values(), key=lambda s: (s["species"], s["island"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Palmer penguins through pykraft and Spark Structured Streaming"
    )
    parser.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--checkpoint", default=os.path.join(tempfile.gettempdir(), "pykraft-penguins-ckpt"))
    parser.add_argument("--limit", type=int, default=None, help="produce only the first N rows")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import pykraft.spark

    rows = penguin_rows(args.limit)
    produce_penguins(args.bootstrap_server, rows)
    print(f"produced {len(rows)} penguins to {SOURCE_TOPIC}")
    spark = (
        SparkSession.builder.master(args.master)
        .appName("penguins")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        pykraft.spark.register(spark)
        query = aggregate_stream(spark, args.bootstrap_server, args.checkpoint)
        read = sum(p["numInputRows"] for p in query.recentProgress)
        print(f"streamed {read} new records in {len(query.recentProgress)} micro-batches -> {STATS_TOPIC}")
        print(f"{'species':10s} {'island':10s} {'birds':>5s} {'mass g':>8s} {'flipper mm':>10s}")
        for s in latest_stats(spark, args.bootstrap_server):
            print(
                f"{s['species']:10s} {s['island']:10s} {s['birds']:5d} "
                f"{s.get('mean_body_mass_g', float('nan')):8.1f} {s.get('mean_flipper_length_mm', float('nan')):10.1f}"
            )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
