"""PySpark integration: the ``pykraft`` data source (batch + streaming, read + write) and pipelines.

``register(spark)`` makes ``spark.read.format("pykraft")`` and friends available; see
``pykraft.spark.source`` for the options. Importing this package does not import pyspark, so the
CLI and the pure decoders stay usable without a JVM.
"""

from __future__ import annotations

import sys
from typing import Any


class PythonWorkersError(RuntimeError):
    """Spark's Python workers run an interpreter that cannot import pykraft."""


def register(spark: Any) -> None:
    """Register the ``pykraft`` source/sink with ``spark`` (a SparkSession, classic or Spark Connect),
    after checking once per session that its Python workers can import pykraft."""
    from pykraft.spark.source import PykraftDataSource

    check_python_workers(spark)
    spark.dataSource.register(PykraftDataSource)


def check_python_workers(spark: Any) -> None:
    """Run one tiny task that imports pykraft where Spark runs Python (issue 28): without it, the first
    read fails deep in a worker traceback with ``No module named 'pykraft'``; here the error names the
    worker's interpreter and the settings that choose it."""
    if getattr(spark, "_pykraft_workers_checked", False):
        return
    import pyarrow as pa

    # Nested, so cloudpickle ships it by value: unpickling it needs no pykraft on the worker.
    def probe(batches: Any) -> Any:
        import sys as worker_sys

        try:
            import pykraft  # noqa: F401

            problem = ""
        except ImportError as exc:
            problem = str(exc)
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"problem": [problem], "python": [worker_sys.executable]})

    row = spark.range(0, 1, 1, 1).mapInArrow(probe, "problem string, python string").first()
    if row["problem"]:
        raise PythonWorkersError(
            f"Spark's Python workers cannot import pykraft ({row['problem']}; worker interpreter "
            f"{row['python']}). Start the session with PYSPARK_PYTHON (or the spark.pyspark.python "
            f"config) naming an interpreter that has pykraft installed, e.g. {sys.executable}; on a "
            "cluster, install pykraft where every worker runs."
        )
    try:
        spark._pykraft_workers_checked = True
    except AttributeError:  # a session class with __slots__: check again next time
        pass
