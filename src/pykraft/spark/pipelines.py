"""The two Spark pipelines: producer-ID block audit (KIP-730) and exactly-once verifier.

Both take a SparkSession, so they run the same under ``pykraft pipeline ...`` (local[*] by default),
``spark-submit`` on a cluster, Spark Connect, or the test suite's shared session; both return a
result whose ``violations`` list is empty on clean data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from pykraft.spark.audit import (
    ALLOCATION_COLUMNS,
    Allocation,
    check_allocations,
    decode_allocations,
    metadata_files,
)


@dataclass
class PipelineResult:
    summary: list[dict[str, Any]]
    violations: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


def format_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.rjust(widths[c]) for c in cols)]
    lines += ["  ".join(str(r[c]).rjust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)


# --- pid-audit ----------------------------------------------------------------------------------------


def _decode_file(path: str) -> list[tuple[Any, ...]]:
    return [tuple(a.__dict__.values()) for a in decode_allocations(path)]


def run_pid_audit(spark: Any, metadata_dir: str, out_dir: str) -> PipelineResult:
    files = metadata_files(metadata_dir)
    # One task per segment or snapshot file; decoding uses pykraft's pure decoders on the executors.
    rdd = spark.sparkContext.parallelize(files, len(files)).flatMap(_decode_file)
    df = spark.createDataFrame(rdd, ALLOCATION_COLUMNS).orderBy("offset", "kind", "file")
    os.makedirs(out_dir, exist_ok=True)
    parquet = os.path.join(out_dir, "producer_id_blocks.parquet")
    df.write.mode("overwrite").parquet(parquet)
    rows = [
        Allocation(**r.asDict())
        for r in spark.read.parquet(parquet).orderBy("offset", "kind", "file").collect()
    ]
    violations = check_allocations(rows)
    summary = _pid_summary(rows)
    chart = os.path.join(out_dir, "producer_id_blocks.png")
    _pid_chart(rows, chart)
    return PipelineResult(summary, violations, [parquet, chart])


def _pid_summary(rows: list[Allocation]) -> list[dict[str, Any]]:
    by_broker: dict[tuple[str, int], list[Allocation]] = {}
    for r in rows:
        by_broker.setdefault((r.kind, r.broker_id), []).append(r)
    out = []
    for (kind, broker), items in sorted(by_broker.items()):
        out.append(
            {
                "kind": kind,
                "broker_id": broker,
                "blocks": len(items),
                "first_id": min(r.first_id for r in items),
                "last_id": max(r.last_id for r in items),
                "first_offset": min(r.offset for r in items),
                "last_offset": max(r.offset for r in items),
                "max_leader_epoch": max(r.leader_epoch for r in items),
            }
        )
    return out


def _pid_chart(rows: list[Allocation], path: str) -> None:
    """Allocations over time per broker: x = append time, y = the block's first id."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import datetime

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    brokers = sorted({r.broker_id for r in rows if r.kind == "log"})
    for broker in brokers:
        items = [r for r in rows if r.kind == "log" and r.broker_id == broker]
        xs: Any = [datetime.datetime.fromtimestamp(r.append_time_ms / 1000, datetime.UTC) for r in items]
        ax.step(xs, [r.first_id for r in items], where="post", marker="o", label=f"broker {broker}")
    snaps = [r for r in rows if r.kind == "snapshot"]
    if snaps:
        xs = [datetime.datetime.fromtimestamp(r.append_time_ms / 1000, datetime.UTC) for r in snaps]
        ax.scatter(xs, [r.first_id for r in snaps], marker="x", color="black", label="snapshot state")
    ax.set_xlabel("append time (UTC)")
    ax.set_ylabel("first producer id of block")
    ax.set_title(f"Producer-ID block allocations ({sum(r.kind == 'log' for r in rows)} blocks)")
    if brokers or snaps:
        ax.legend()
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --- eos-verify ---------------------------------------------------------------------------------------


def load_topic(
    spark: Any,
    topic: str,
    *,
    bootstrap: str | None = None,
    data_dir: str | None = None,
    isolation_level: str = "read_uncommitted",
    client_options: dict[str, str] | None = None,
) -> Any:
    """``client_options``: ``kafka.*`` options, e.g. security (``client_options_of`` a --command-config)."""
    import pykraft.spark

    pykraft.spark.register(spark)
    reader = spark.read.format("pykraft").option("subscribe", topic).option("includeProducerInfo", "true")
    reader = reader.options(**(client_options or {}))
    if data_dir is not None:
        return reader.option("path", data_dir).load()
    assert bootstrap is not None
    return (
        reader.option("kafka.bootstrap.servers", bootstrap)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", isolation_level)
        .load()
    )


def run_eos_verify(
    spark: Any,
    df: Any,
    expected_file: str | None = None,
    out_dir: str | None = None,
    *,
    read_committed: bool = False,
) -> PipelineResult:
    """Per partition and producer (id, epoch): duplicated, missing (gaps) and reordered sequences;
    with ``expected_file`` (one expected record value per line, UTF-8), records that never arrived and
    expected values that arrived more than once (a retried writer is a new producer, so its copies
    carry other sequence numbers: only their values give them away). With ``read_committed`` (``df``
    read so) a sequence gap is no violation: an aborted transaction's batches are skipped, and the
    producer's next transaction goes on from their sequence numbers (the gaps stay in the summary)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keyed = df.where(F.col("producerId") >= 0).where(F.col("sequence") >= 0)
    group = ["partition", "producerId", "producerEpoch"]
    per_seq = keyed.groupBy(*group, "sequence").agg(
        F.count("*").alias("copies"), F.min("offset").alias("first_offset")
    )
    by_offset = Window.partitionBy(*group).orderBy("first_offset").rowsBetween(Window.unboundedPreceding, -1)
    by_seq = Window.partitionBy(*group).orderBy("sequence")
    judged = (
        per_seq.withColumn("max_before", F.max("sequence").over(by_offset))
        .withColumn("next_seq", F.lead("sequence").over(by_seq))
        .select(
            *group,
            "sequence",
            (F.col("copies") - 1).alias("dups"),
            F.when(F.col("next_seq") - F.col("sequence") > 1, F.col("next_seq") - F.col("sequence") - 1)
            .otherwise(0)
            .alias("missing"),
            F.when(F.col("sequence") < F.col("max_before"), 1).otherwise(0).alias("reordered"),
            "copies",
        )
    )
    summary_df = (
        judged.groupBy(*group)
        .agg(
            F.sum("copies").alias("records"),
            F.min("sequence").alias("first_seq"),
            F.max("sequence").alias("last_seq"),
            F.sum("dups").alias("duplicates"),
            F.sum("missing").alias("gaps"),
            F.sum("reordered").alias("reorders"),
        )
        .orderBy(*group)
    )
    summary = [r.asDict() for r in summary_df.collect()]
    violations: list[str] = []
    for r in summary:
        where = f"partition {r['partition']} producer {r['producerId']} epoch {r['producerEpoch']}"
        if r["duplicates"]:
            violations.append(f"{where}: {r['duplicates']} duplicated record(s)")
        if r["gaps"] and not read_committed:
            violations.append(f"{where}: {r['gaps']} sequence number(s) missing")
        if r["reorders"]:
            violations.append(f"{where}: {r['reorders']} record(s) out of sequence order")
    if violations:
        examples = (
            judged.where(
                (F.col("dups") > 0)
                | ((F.col("missing") > 0) & F.lit(not read_committed))
                | (F.col("reordered") > 0)
            )
            .orderBy(*group, "sequence")
            .limit(5)
            .collect()
        )
        for e in examples:
            violations.append(
                f"  e.g. partition {e['partition']} producer {e['producerId']} sequence {e['sequence']}: "
                f"copies={e['copies']} missing_after={e['missing']} reordered={bool(e['reordered'])}"
            )
    outputs: list[str] = []
    if expected_file is not None:
        with open(expected_file, encoding="utf-8") as fh:
            expected = [line.rstrip("\n") for line in fh if line.rstrip("\n")]
        exp_df = spark.createDataFrame([(v,) for v in expected], "value string")
        got = df.select(F.col("value").cast("string").alias("value")).distinct()
        lost_df = exp_df.join(got, "value", "left_anti")
        lost = lost_df.count()
        if lost:
            sample = [r["value"] for r in lost_df.limit(5).collect()]
            violations.append(f"{lost} expected record(s) never arrived, e.g. {sample}")
        copies_df = (
            df.select(F.col("value").cast("string").alias("value"))
            .join(exp_df, "value", "left_semi")
            .groupBy("value")
            .count()
            .where(F.col("count") > 1)
        )
        repeated = copies_df.count()
        if repeated:
            sample = [r["value"] for r in copies_df.orderBy("value").limit(5).collect()]
            violations.append(f"{repeated} expected record(s) arrived more than once, e.g. {sample}")
        summary.append(
            {
                "partition": "all",
                "producerId": "-",
                "producerEpoch": "-",
                "records": len(expected),
                "first_seq": "-",
                "last_seq": "-",
                "duplicates": "-",
                "gaps": "-",
                "reorders": f"lost={lost} repeated={repeated}",
            }
        )
    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, "eos_summary.parquet")
        summary_df.write.mode("overwrite").parquet(path)
        outputs.append(path)
    return PipelineResult(summary, violations, outputs)


def client_options_of(properties: dict[str, str]) -> dict[str, str]:
    """Kafka client properties (a ``--command-config`` file) as the source's and sink's ``kafka.*``
    options, as Spark's Kafka source names them."""
    return {f"kafka.{key}": value for key, value in properties.items()}


def run_eos_demo(
    spark: Any, bootstrap: str, rows: int, out_dir: str, client_options: dict[str, str] | None = None
) -> tuple[list[dict[str, Any]], bool]:
    """Write ``rows`` rows twice, at-least-once and exactly-once, with the first attempt of every task
    failing after its records are committed (Spark retries it), then verify each topic read_committed
    against the rows. Returns the table and whether the outcome is the expected one (exactly-once
    clean, at-least-once showing the retried tasks' duplicates)."""
    import time

    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    stamp = time.strftime("%Y%m%d%H%M%S")
    os.makedirs(out_dir, exist_ok=True)
    expected = os.path.join(out_dir, "expected.txt")
    with open(expected, "w", encoding="utf-8") as fh:
        fh.writelines(f"row-{i}\n" for i in range(rows))
    from pykraft.spark.source import admin_config

    admin = AdminClient(admin_config({**(client_options or {}), "kafka.bootstrap.servers": bootstrap}))
    table: list[dict[str, Any]] = []
    ok = True
    for mode, exactly_once in (("at-least-once", False), ("exactly-once", True)):
        topic = f"eos-demo-{'once' if exactly_once else 'alo'}-{stamp}"
        for fut in admin.create_topics([NewTopic(topic, num_partitions=2)]).values():
            fut.result(timeout=30)
        df = spark.range(0, rows, 1, 4).selectExpr("cast(concat('row-', id) as binary) as value")
        writer = (
            df.write.format("pykraft")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("simulateFailureAfterCommit", os.path.join(out_dir, f"failed-{topic}"))
            .option("exactlyOnce", str(exactly_once).lower())
            .option("queryName", topic)
            .options(**(client_options or {}))
            .mode("append")
        )
        writer.save()
        loaded = load_topic(
            spark, topic, bootstrap=bootstrap, isolation_level="read_committed", client_options=client_options
        )
        result = run_eos_verify(spark, loaded, expected)
        failed_tasks = len(os.listdir(os.path.join(out_dir, f"failed-{topic}")))
        records = loaded.count()
        table.append(
            {
                "mode": mode,
                "topic": topic,
                "rows": rows,
                "tasks failed after commit": failed_tasks,
                "records (read_committed)": records,
                "verdict": "clean" if not result.violations else f"{len(result.violations)} violation(s)",
            }
        )
        ok &= (not result.violations) if exactly_once else (records > rows and failed_tasks > 0)
    return table, ok
