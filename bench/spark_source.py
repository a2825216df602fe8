"""Spark source read throughput vs a single-process confluent-kafka consumer loop, one run, one table
per setup and value size.

    python -m bench.spark_source [--setups node,cluster] [--value-bytes 100,1024] [--records N]
                                 [--runs 3] [--master local[2]]

Two setups, each started here as processes on 127.0.0.1 and stopped before the next:

- ``node``: one pykraft node (``pykraft server start``, as ``make run``), a 2-partition topic;
- ``cluster``: 3 controllers + 3 brokers (pykraft.testing.running_cluster), a 3-partition topic at
  replication factor 3 whose partitions are led by all three brokers, so a read fetches from every
  broker (one Spark task per partition, each from its partition's leader).

Each topic is filled by an idempotent confluent-kafka producer (acks=all): by default 1,000,000 records
of 100 B values and 300,000 of 1 KiB (``--records`` sets both). Then, over the same data, best of
``--runs``:

- ``confluent loop``: one Python process, ``Consumer.assign`` every partition from 0 and
  ``consume(10000)`` until every record was seen, touching each value (the baseline);
- ``spark pykraft (fetch)``: ``spark.read.format("pykraft")`` (own Fetch client -> Arrow),
  materialised with ``write.format("noop")``;
- ``spark kafka connector``: Spark's own ``format("kafka")`` (spark-sql-kafka-0-10, Kafka's Java
  consumer), its jars from tests/spark/connector/pom.xml added to the same session with ``ADD JAR``
  (Maven Central has no connector for PySpark 4.3.0; 4.2.0 runs on it) -- pykraft's real peer;
- ``spark pykraft (segment files)``, node only: the same source with ``path`` = the broker's data dir;
- ``spark confluent per range``, node only: a bench-only variant whose ``read()`` uses a
  confluent-kafka consumer per offset range (assign + consume) and builds Arrow from the message
  lists: the transport the source did not choose;
- ``spark floor``: a bench-only variant that does no I/O and no decoding (it yields one pre-built
  Arrow batch of the same width again and again): Spark's own cost of ingesting these rows from a
  Python data source, the ceiling for any transport on this machine.

Ratios are against the confluent loop measured in the same setup and run. The tables are printed and
written to bench/results/spark_source_latest.md. Every process started here is stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
KEY_BYTES = 12  # b"key-%08d"
DEFAULT_RECORDS = {100: 1_000_000, 1024: 300_000}  # ~110 MB and ~310 MB of keys and values


@dataclass
class Setup:
    """Where the topic lives: its bootstrap servers, its partition count and replication factor, the
    server processes (pid -> the label of its CPU column) and, for one node, its data dir."""

    name: str
    bootstrap: str
    partitions: int
    replication_factor: int
    servers: dict[int, str]
    data_dir: str | None = None


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


@contextlib.contextmanager
def running_setup(name: str, directory: str) -> Iterator[Setup]:
    if name == "node":
        proc, bootstrap = _start_broker(directory)
        try:
            yield Setup(name, bootstrap, 2, 1, {proc.pid: "broker"}, os.path.join(directory, "logs"))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    elif name == "cluster":
        from pykraft.testing import running_cluster

        with running_cluster(
            controllers=3, brokers=3, directory=os.path.join(directory, "cluster")
        ) as cluster:
            servers = {}
            for node_id, node in cluster.nodes.items():
                assert node.process is not None
                servers[node.process.pid] = f"broker {node_id}" if node.role == "broker" else "controllers"
            yield Setup(name, cluster.bootstrap_servers, 3, 3, servers)
    else:
        raise SystemExit(f"--setups: unknown setup {name!r} (node, cluster)")


def _fill(setup: Setup, topic: str, records: int, value_bytes: int) -> int:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(
        {"bootstrap.servers": setup.bootstrap}
    )  # keep a reference: the future needs the handle
    admin.create_topics([NewTopic(topic, setup.partitions, setup.replication_factor)])[topic].result(30)
    deadline = time.monotonic() + 30
    while True:  # every partition led and fully in sync, so the fill is not paced by followers catching up
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(partitions) == setup.partitions and all(
            p.leader >= 0 and len(p.isrs) == setup.replication_factor for p in partitions.values()
        ):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: partitions not led and in sync after 30 s")
        time.sleep(0.1)
    leaders = {p.id: p.leader for p in partitions.values()}
    print(f"{setup.name}: {topic} partition -> leader {leaders}", flush=True)
    producer = Producer(
        {
            "bootstrap.servers": setup.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1_000_000,
        }
    )
    pad = b"v" * max(0, value_bytes - 12)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, b"%012d" % i + pad, b"key-%08d" % i, partition=i % setup.partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0
    return records * (len(pad) + 12 + KEY_BYTES)


def confluent_loop(setup: Setup, topic: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    # fetch.queue.backoff.ms: librdkafka otherwise pauses fetching for 1 s whenever its local queue is full,
    # a client-side stall that would make the baseline look slower than it is (see bench/__main__.py).
    consumer = Consumer(
        {
            "bootstrap.servers": setup.bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    t0 = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(setup.partitions)])
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
    before: dict[int, tuple[int, float]], after: dict[int, tuple[int, float]], servers: dict[int, str]
) -> dict[str, float]:
    """CPU seconds spent between two snapshots by the servers (by label), this process (the loop's
    consumer and the Spark driver), Spark's JVM and the JVM's children (Python workers)."""
    me = os.getpid()
    jvms = {pid for pid, (parent, _) in after.items() if parent == me and pid not in servers}
    split = dict.fromkeys(servers.values(), 0.0) | {"driver": 0.0, "spark jvm": 0.0, "spark python": 0.0}
    for pid, (parent, cpu) in after.items():
        spent = cpu - before.get(pid, (parent, 0.0))[1]
        if pid in servers:
            split[servers[pid]] += spent
        elif pid == me:
            split["driver"] += spent
        elif pid in jvms:
            split["spark jvm"] += spent
        elif parent in jvms or after.get(parent, (0, 0.0))[0] in jvms:  # workers, and their daemon's forks
            split["spark python"] += spent
    return split


def measure(
    spark: Any, setup: Setup, value_bytes: int, records: int, runs: int, master: str
) -> tuple[list[str], int]:
    """The markdown table of one setup and value size, and the load average when it was done."""
    topic = f"bench-spark-{value_bytes}"
    print(f"{setup.name}: filling {topic}: {records} records, {value_bytes} B values", flush=True)
    total_bytes = _fill(setup, topic, records, value_bytes)
    common = {"kafka.bootstrap.servers": setup.bootstrap, "subscribe": topic}
    cases: list[tuple[str, Callable[[], float]]] = [
        ("confluent loop (1 process)", lambda: confluent_loop(setup, topic, records)),
        ("spark pykraft fetch", lambda: spark_read(spark, "pykraft", common, records)),
        ("spark kafka connector", lambda: spark_read(spark, "kafka", common, records)),
    ]
    if setup.data_dir is not None:
        segments = {"path": setup.data_dir, "subscribe": topic}
        cases.append(("spark pykraft segment files", lambda: spark_read(spark, "pykraft", segments, records)))
        cases.append(
            ("spark confluent per range", lambda: spark_read(spark, "pykraft_confluent", common, records))
        )
    floor = {**common, "valueBytes": str(value_bytes)}
    cases.append(
        ("spark floor: prebuilt Arrow", lambda: spark_read(spark, "pykraft_prebuilt", floor, records))
    )
    # Warm-up: the first Spark job pays the Python worker start (pyspark-facts.md §5).
    spark_read(spark, "pykraft", common, records)
    spark_read(spark, "kafka", common, records)  # and the connector's class loading
    best: dict[str, float] = {}
    cpu: dict[str, dict[str, float]] = {}
    for _run in range(runs):
        for name, fn in cases:  # interleaved, so drift hits every case alike
            before = _process_cpu_seconds()
            elapsed = fn()
            if elapsed < best.get(name, float("inf")):
                best[name] = elapsed
                cpu[name] = cpu_split(before, _process_cpu_seconds(), setup.servers)
    load = os.getloadavg()[0]
    base = best[cases[0][0]]
    kinds = list(next(iter(cpu.values())))
    lines = [
        f"### {setup.name}: {records:,} records x {value_bytes} B values, {setup.partitions} partitions "
        f"(RF {setup.replication_factor}), {master}, best of {runs}; load average {load:.2f}",
        "",
        "| reader | seconds | rows/s | MB/s | vs loop | CPU s: " + " / ".join(kinds) + " |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, _fn in cases:
        sec = best[name]
        lines.append(
            f"| {name} | {sec:.2f} | {records / sec:,.0f} | {total_bytes / sec / 1e6:.1f} | {base / sec:.2f}x | "
            + " / ".join(f"{cpu[name][k]:.2f}" for k in kinds)
            + " |"
        )
    print("\n" + "\n".join(lines) + "\n", flush=True)
    return lines, load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--setups", default="node,cluster", help="node, cluster or both (comma-separated)")
    parser.add_argument("--value-bytes", default="100,1024", help="value sizes, comma-separated")
    parser.add_argument("--records", type=int, help="records per topic (default: 1M at 100 B, 300k at 1 KiB)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="a Spark setting, e.g. spark.buffer.size=1048576 (repeatable)",
    )
    args = parser.parse_args()
    sizes = [int(v) for v in args.value_bytes.split(",")]
    loads = [os.getloadavg()[0]]
    out = [
        f"# Spark source read throughput — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"`python -m bench.spark_source --setups {args.setups} --value-bytes {args.value_bytes}"
        + (f" --records {args.records}" if args.records else "")
        + f" --runs {args.runs}`: {platform.machine()}, {os.cpu_count()} cores, Spark settings: "
        + ", ".join(args.conf or ["defaults"])
        + ". CPU s are those of the best run.",
        "",
    ]
    spark = _spark(args.master, args.conf)
    try:
        for name in args.setups.split(","):
            with (
                tempfile.TemporaryDirectory(prefix=f"bench-spark-{name}-") as tmp,
                running_setup(name, tmp) as setup,
            ):
                for value_bytes in sizes:
                    records = args.records or DEFAULT_RECORDS.get(value_bytes, 300_000)
                    lines, load = measure(spark, setup, value_bytes, records, args.runs, args.master)
                    out += [*lines, ""]
                    loads.append(load)
    finally:
        spark.stop()
    out.insert(3, f"Load average {loads[0]:.2f} at the start, {max(loads):.2f} at most (2 cores shared).\n")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "spark_source_latest.md").write_text("\n".join(out))
    print(f"wrote {RESULTS / 'spark_source_latest.md'}")


if __name__ == "__main__":
    main()
