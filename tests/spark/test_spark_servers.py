"""The pykraft source and sinks and ``pykraft pipeline eos-verify`` on real Spark servers (issue 28
item 3), each started as processes on 127.0.0.1 from the installed PySpark:

* a standalone cluster: a master and two workers (``spark-class`` Master/Worker), the driver in a
  subprocess (one SparkContext per process: the shared local session lives in this one). Executors are
  separate JVMs with their own Python workers, so everything a task needs travels pickled;
* a Spark Connect server (``spark-submit --class ...SparkConnectServer``, the jar PySpark ships), the
  client in a subprocess with ``SparkSession.builder.remote("sc://...")``: the data source is
  registered, planned and run server-side from the client's pickled classes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.testing import RunningNode, free_port, running_node
from tests.interop.maven_build import SHORT_LIVED_JVM_OPTIONS
from tests.spark.helpers import create_topic, produce

pyspark = pytest.importorskip("pyspark")
pytestmark = pytest.mark.slow

SPARK_HOME = os.path.dirname(pyspark.__file__)
SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))
ROWS = 1000
JVM_OPTIONS = " ".join(SHORT_LIVED_JVM_OPTIONS)

_DRIVER = """
import sys
from pykraft.cli import main
import pykraft.spark
from pyspark.sql import SparkSession

flag, url, bootstrap, checkpoint, expected, t = sys.argv[1:7]
if flag == "--master":
    spark = (SparkSession.builder.master(url).appName("pykraft-standalone")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.executorEnv.PYTHONPATH", {src!r})
             .config("spark.executor.memory", "512m").config("spark.executor.cores", "1")
             .config("spark.cores.max", "2").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.extraJavaOptions", {jvm!r}).config("spark.executor.extraJavaOptions", {jvm!r})
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
else:
    spark = SparkSession.builder.remote(url).getOrCreate()
    print("CONNECT", type(spark).__module__)
pykraft.spark.register(spark)
kafka = {{"kafka.bootstrap.servers": bootstrap}}
batch = spark.read.format("pykraft").options(**kafka).option("subscribe", t + "-src").load()
print("BATCH", batch.count())
batch.select("value").write.format("pykraft").options(**kafka).option("topic", t + "-alo").mode("append").save()
print("ALO", spark.read.format("pykraft").options(**kafka).option("subscribe", t + "-alo").load().count())
query = (spark.readStream.format("pykraft").options(**kafka).option("subscribe", t + "-src")
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "400").load()
         .selectExpr("concat(cast('out-' as binary), value) as value")
         .writeStream.format("pykraft").options(**kafka).option("topic", t + "-eos")
         .option("exactlyOnce", "true").option("queryName", "standalone")
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
query.awaitTermination()
print("STREAM", query.exception())
code = main(["pipeline", "eos-verify", flag, url, "--bootstrap-server", bootstrap, "--topic", t + "-eos",
             "--isolation-level", "read_committed", "--expected", expected, "--out", checkpoint + "-verify"])
print("VERIFY", code)
if flag == "--master":  # executors that ran tasks (the driver's own entry left out)
    print("EXECUTORS", spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1)
spark.stop()
"""


def _spark_class(*args: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SPARK_HOME": SPARK_HOME,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_DAEMON_JAVA_OPTS": JVM_OPTIONS,
    }
    with open(log, "ab") as fh:
        return subprocess.Popen(
            [os.path.join(SPARK_HOME, "bin", "spark-class"), *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )


def _wait_for(log: Path, text: str, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count(text) >= count:
            return
        time.sleep(0.2)
    raise AssertionError(
        f"{log.name}: no {count} x {text!r} after {timeout_s} s:\n{log.read_text(errors='replace')}"
    )


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark standalone master and two one-core workers; yields the master URL."""
    directory = tmp_path_factory.mktemp("spark-standalone")
    port = free_port()
    master_log = directory / "master.log"
    processes = [
        _spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(free_port()), log=master_log)
    ]  # fmt: skip
    try:
        _wait_for(master_log, "I have been elected leader", 1, 120)
        for n in range(2):
            work = directory / f"worker-{n}"
            work.mkdir()
            processes.append(
                _spark_class("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                             "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(work),
                             f"spark://127.0.0.1:{port}", log=directory / f"worker-{n}.log")
            )  # fmt: skip
        _wait_for(master_log, "Registering worker", 2, 120)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc in processes:
            proc.terminate()
        for proc in processes:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)


@pytest.fixture(scope="module")
def node() -> Iterator[RunningNode]:
    with running_node() as n:
        yield n


def _run_driver(flag: str, url: str, node: RunningNode, tmp_path: Path, prefix: str) -> str:
    for topic in ("src", "alo", "eos"):
        create_topic(node.bootstrap_servers, f"{prefix}-{topic}", 2)
    produce(node.bootstrap_servers, f"{prefix}-src", [(None, b"r-%d" % i, i % 2, None) for i in range(ROWS)])
    expected = tmp_path / "expected.txt"
    expected.write_text("".join(f"out-r-{i}\n" for i in range(ROWS)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER.format(src=SRC, jvm=JVM_OPTIONS), flag, url, node.bootstrap_servers,
         str(tmp_path / "ckpt"), str(expected), prefix],
        env=env, capture_output=True, text=True, timeout=540,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    out = done.stdout
    assert f"BATCH {ROWS}" in out and f"ALO {ROWS}" in out, out
    assert "STREAM None" in out and "OK: no violations" in out and "VERIFY 0" in out, out
    return out


@pytest.mark.timeout(600)
def test_source_sinks_and_eos_verify_on_a_standalone_cluster_of_two_workers(
    standalone: str, node: RunningNode, tmp_path: Path
) -> None:
    out = _run_driver("--master", standalone, node, tmp_path, "sa")
    assert "EXECUTORS 2" in out  # both workers run an executor


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server (local[2,2]: two threads, tasks retried once); yields its sc:// URL."""
    pytest.importorskip("grpc")  # the Connect client (pyspark's connect extra)
    directory = tmp_path_factory.mktemp("spark-connect")
    port = free_port()
    log = directory / "server.log"
    env = {
        **os.environ,
        "SPARK_HOME": SPARK_HOME,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")])),
    }
    with open(log, "ab") as fh:
        server = subprocess.Popen(
            [os.path.join(SPARK_HOME, "bin", "spark-submit"), "--class",
             "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2,2]",
             "--conf", f"spark.connect.grpc.binding.port={port}",
             "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
             "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
             "--driver-java-options", JVM_OPTIONS],
            stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while True:  # the gRPC port accepts once the server is up
            assert server.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)


@pytest.mark.timeout(600)
def test_source_sinks_and_eos_verify_through_spark_connect(
    connect_server: str, node: RunningNode, tmp_path: Path
) -> None:
    out = _run_driver("--remote", connect_server, node, tmp_path, "sc")
    assert "CONNECT pyspark.sql.connect.session" in out
