"""One shared, tuned local SparkSession for every test that runs Spark (pyspark-facts.md §5): a plugin of
the whole suite (tests/conftest.py), so that a Spark test placed beside a module-scoped cluster fixture
elsewhere (tests/interop/test_secure_cluster.py) uses this same session rather than a second JVM.

``local[2,2]``: two threads, as in CI, and two attempts per task (plain ``local[2]`` never retries),
so the sink's retried-task behaviour can be tested without a cluster.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.interop.maven_build import SHORT_LIVED_JVM_OPTIONS

_SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


def worker_environment() -> None:
    """Before the JVM starts: Spark's Python workers (and the data-source planner) must run this venv's
    interpreter, bind to loopback, and import pykraft (installed editable; PYTHONPATH for a plain checkout)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    src = os.path.abspath(_SRC)
    if src not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one local[2,2] SparkSession of the run, pykraft's data sources registered."""
    pytest.importorskip("pyspark")
    worker_environment()
    from pyspark.sql import SparkSession

    import pykraft.spark

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("pykraft-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.driver.extraJavaOptions", " ".join(SHORT_LIVED_JVM_OPTIONS))
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    pykraft.spark.register(session)
    yield session
    session.stop()
