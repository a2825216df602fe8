"""PySpark integration: the ``pykraft`` data source (batch + streaming, read + write) and pipelines.

``register(spark)`` makes ``spark.read.format("pykraft")`` and friends available; see
``pykraft.spark.source`` for the options. Importing this package does not import pyspark, so the
CLI and the pure decoders stay usable without a JVM.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the ``pykraft`` source/sink with ``spark`` (a SparkSession)."""
    from pykraft.spark.source import PykraftDataSource

    spark.dataSource.register(PykraftDataSource)
