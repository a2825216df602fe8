"""A session whose Python workers cannot import pykraft gets one clear message naming PYSPARK_PYTHON
and spark.pyspark.python (issue 28), not a worker traceback at the first read. Its own Spark (a
subprocess): the shared session's workers do import pykraft."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

_SCRIPT = """
import pykraft.spark
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1").getOrCreate())
try:
    pykraft.spark.register(spark)
except pykraft.spark.PythonWorkersError as exc:
    print("REFUSED:", exc)
else:
    print("REGISTERED")
spark.stop()
"""


def test_workers_without_pykraft_get_a_message_naming_pyspark_python(tmp_path: Path) -> None:
    # The workers' interpreter: this venv's, but where ``import pykraft`` fails as it would on an
    # interpreter without pykraft installed.
    stub = tmp_path / "stub" / "pykraft"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pykraft'\", name='pykraft')\n"
    )
    worker_python = tmp_path / "python-without-pykraft"
    worker_python.write_text(f'#!/bin/sh\nPYTHONPATH={stub.parent}:$PYTHONPATH exec {sys.executable} "$@"\n')
    worker_python.chmod(0o755)
    env = {**os.environ, "PYSPARK_PYTHON": str(worker_python), "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    assert "REFUSED: Spark's Python workers cannot import pykraft (No module named 'pykraft'" in done.stdout
    assert "PYSPARK_PYTHON" in done.stdout and "spark.pyspark.python" in done.stdout
