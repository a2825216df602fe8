"""The Spark tests: their shared session is the ``spark`` fixture of tests/spark/session.py (a plugin of
the whole suite); this directory is skipped when PySpark is not installed."""

from __future__ import annotations

import pytest

from tests.spark.session import worker_environment

worker_environment()  # at import, as before: some tests here start Spark processes of their own

pyspark = pytest.importorskip("pyspark")
