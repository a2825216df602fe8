"""Smoke test of examples/penguins_stream.py on a slice of the dataset."""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.testing import running_node

pytest.importorskip("palmerpenguins")


def test_penguins_example_aggregates_into_the_stats_topic(spark: Any, tmp_path: Any) -> None:
    from examples.penguins_stream import aggregate_stream, latest_stats, penguin_rows, produce_penguins

    rows = penguin_rows(60)  # the CSV starts with Adelie penguins of Torgersen, then Biscoe
    assert len(penguin_rows()) == 344
    with running_node() as node:
        produce_penguins(node.bootstrap_servers, rows)
        query = aggregate_stream(spark, node.bootstrap_servers, str(tmp_path / "ckpt"))
        assert sum(p["numInputRows"] for p in query.recentProgress) == 60
        stats = latest_stats(spark, node.bootstrap_servers)
    want: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        want.setdefault((r["species"], r["island"]), []).append(
            float(r["body_mass_g"]) if r["body_mass_g"] else -1
        )
    assert {(s["species"], s["island"]): s["birds"] for s in stats} == {k: len(v) for k, v in want.items()}
    for s in stats:
        masses = [m for m in want[(s["species"], s["island"])] if m >= 0]
        # Spark rounds half up, Python half to even: compare within the rounding step.
        assert abs(s["mean_body_mass_g"] - sum(masses) / len(masses)) <= 0.05 + 1e-9
