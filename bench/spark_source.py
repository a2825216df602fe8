"""Spark source read throughput vs a single-process confluent-kafka consumer loop, one run, one table.

    python -m bench.spark_source [--records 300000] [--value-bytes 1024] [--runs 3] [--master local[2]]

pykraft runs as a separate process (``pykraft server start``, as ``make run``), with a 2-partition
topic filled by an idempotent confluent-kafka producer. Then, over the same data, best of ``--runs``:

- ``confluent loop``: one Python process, ``Consumer.assign`` both partitions from 0 and
  ``consume(10000)`` until every record was seen, touching each value (the baseline);
- ``spark pykraft (fetch)``: ``spark.read.format("pykraft")`` (own Fetch client -> Arrow),
  materialised with ``write.format("noop")``;
- ``spark kafka connector``: Spark's own ``format("kafka")`` (spark-sql-kafka-0-10, Kafka's Java
  consumer), its jars from tests/spark/connector/pom.xml added to the same session with ``ADD JAR``
  (Maven Central has no connector for PySpark 4.3.0; 4.2.0 runs on it) -- pykraft's real peer;
- ``spark pykraft (segment files)``: the same source with ``path`` = the broker's data dir;
- ``spark confluent per range``: a bench-only variant whose ``read()`` uses a confluent-kafka
  consumer per offset range (assign + consume) and builds Arrow from the message lists: the
  transport the source did not choose;
- ``spark floor``: a bench-only variant that does no I/O and no decoding (it yields one pre-built
  Arrow batch of the same width again and again): Spark's own cost of ingesting these rows from a
  Python data source, the ceiling for any transport on this machine.

Ratios are against the confluent loop measured in the same run. Every process started here is stopped.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "bench-spark"
PARTITIONS = 2
KEY_BYTES = 12  # b"key-%08d"


def _start_broker(data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    from pykraft.testing import free_port, node_properties

    port = free_port()
    props = os.path.join(data_dir, "server.properties")
    with open(props, "w") as fh:
        fh.write(node_properties(os.path.join(data_dir, "logs"), port, free_port()))
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "268435456"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pykraft.cli", "--log-level", "WARNING", "server", "start", "--config", props],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    bootstrap = f"127.0.0.1:{port}"
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + 60
    while True:
        try:
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=2)
            return proc, bootstrap
        except Exception:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("the broker did not start") from None
            time.sleep(0.2)


def _fill(bootstrap: str, records: int, value_bytes: int) -> int:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep a reference: the future needs the handle
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20, "batch.size": 1_000_000}
    )
    pad = b"v" * max(0, value_bytes - 12)
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, b"%012d" % i + pad, b"key-%08d" % i, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    return records * (len(pad) + 12 + KEY_BYTES)


def confluent_loop(bootstrap: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    # fetch.queue.backoff.ms: librdkafka otherwise pauses fetching for 1 s whenever its local queue is full,
    # a client-side stall that would make the baseline look slower than it is (see bench/__main__.py).
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    t0 = time.perf_counter()
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen = 0
    nbytes = 0
    while seen < records:
        for msg in consumer.consume(10000, timeout=1.0):
            if msg.error():
                raise RuntimeError(msg.error())
            nbytes += len(msg.value())
            seen += 1
    elapsed = time.perf_counter() - t0
    consumer.close()
    return elapsed


def _spark(master: str, conf: list[str] | None = None) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH")])
    )
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("bench-spark-source")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
    )
    for item in conf or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--conf {item!r}: expected KEY=VALUE")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    import pykraft.spark

    pykraft.spark.register(spark)
    from bench.spark_bench_sources import ConfluentRangeSource, PrebuiltSource

    spark.dataSource.register(ConfluentRangeSource)
    spark.dataSource.register(PrebuiltSource)
    from tests.interop.maven_build import maven_classpath

    lib = maven_classpath(ROOT / "tests" / "spark" / "connector").rsplit(":", 1)[1].removesuffix("/*")
    for jar in sorted(Path(lib).glob("*.jar")):  # format("kafka") in this same session
        spark.sql(f"ADD JAR '{jar}'")
    return spark


def spark_read(spark: Any, fmt: str, options: dict[str, str], records: int) -> float:
    reader = spark.read.format(fmt)
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load()
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - t0
    return elapsed


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _process_cpu_seconds() -> dict[int, tuple[int, float]]:
    """{pid: (parent pid, user+system CPU seconds)} for every process (Linux /proc)."""
    out: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS)
    return out


def cpu_split(
    before: dict[int, tuple[int, float]], after: dict[int, tuple[int, float]], broker: int
) -> dict[str, float]:
    """CPU seconds spent between two snapshots by the broker, this process (the loop's consumer and
    the Spark driver), Spark's JVM and the JVM's children (Python workers)."""
    me = os.getpid()
    jvms = {pid for pid, (parent, _) in after.items() if parent == me and pid != broker}
    split = {"broker": 0.0, "driver": 0.0, "spark jvm": 0.0, "spark python": 0.0}
    for pid, (parent, cpu) in after.items():
        spent = cpu - before.get(pid, (parent, 0.0))[1]
        if pid == broker:
            split["broker"] += spent
        elif pid == me:
            split["driver"] += spent
        elif pid in jvms:
            split["spark jvm"] += spent
        elif parent in jvms or after.get(parent, (0, 0.0))[0] in jvms:  # workers, and their daemon's forks
            split["spark python"] += spent
    return split


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. spark.buffer.size=1048576 (repeatable)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        proc, bootstrap = _start_broker(tmp)
        spark = None
        try:
            print(
                f"filling {TOPIC}: {args.records} records, {args.value_bytes} B values, {PARTITIONS} partitions",
                flush=True,
            )
            total_bytes = _fill(bootstrap, args.records, args.value_bytes)
            spark = _spark(args.master, args.conf)
            common = {"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC}
            cases: list[tuple[str, Any]] = [
                ("confluent loop (1 process)", lambda: confluent_loop(bootstrap, args.records)),
                (
                    f"spark pykraft fetch ({args.master})",
                    lambda: spark_read(spark, "pykraft", common, args.records),
                ),
                (
                    f"spark kafka connector ({args.master})",
                    lambda: spark_read(spark, "kafka", common, args.records),
                ),
                (
                    f"spark pykraft segment files ({args.master})",
                    lambda: spark_read(
                        spark,
                        "pykraft",
                        {"path": os.path.join(tmp, "logs"), "subscribe": TOPIC},
                        args.records,
                    ),
                ),
                (
                    f"spark confluent per range ({args.master})",
                    lambda: spark_read(spark, "pykraft_confluent", common, args.records),
                ),
                (
                    f"spark floor: prebuilt Arrow ({args.master})",
                    lambda: spark_read(
                        spark,
                        "pykraft_prebuilt",
                        {**common, "valueBytes": str(args.value_bytes)},
                        args.records,
                    ),
                ),
            ]
            # Warm-up: the first Spark job pays the Python worker start (pyspark-facts.md §5).
            spark_read(spark, "pykraft", common, args.records)
            spark_read(spark, "kafka", common, args.records)  # and the connector's class loading
            best: dict[str, float] = {}
            cpu: dict[str, dict[str, float]] = {}
            for _run in range(args.runs):
                for name, fn in cases:  # interleaved, so drift hits every case alike
                    before = _process_cpu_seconds()
                    elapsed = fn()
                    if elapsed < best.get(name, float("inf")):
                        best[name] = elapsed
                        cpu[name] = cpu_split(before, _process_cpu_seconds(), proc.pid)
            base = best[cases[0][0]]
            print(
                f"\n{args.records} records x {args.value_bytes} B values; best of {args.runs} runs; "
                f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}; "
                f"Spark settings: {', '.join(args.conf or ['defaults'])}"
            )
            kinds = list(next(iter(cpu.values())))
            print(
                f"{'reader':45s} {'seconds':>8s} {'rows/s':>10s} {'MB/s':>8s} {'vs loop':>8s}  CPU s: "
                + " / ".join(kinds)
            )
            for name, _fn in cases:
                s = best[name]
                print(
                    f"{name:45s} {s:8.2f} {args.records / s:10,.0f} {total_bytes / s / 1e6:8.1f} {base / s:7.2f}x  "
                    + " / ".join(f"{cpu[name][k]:.2f}" for k in kinds)
                )
        finally:
            if spark is not None:
                spark.stop()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
