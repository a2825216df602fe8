"""bench.replication's arithmetic and table: each round's RF=3 row is paired with its own RF=1 row, the
table gives medians, and the peer's rows are there or say why not."""

from __future__ import annotations

import pytest
from bench.replication import KAFKA, Rows, _median_row, _paired_ratios, _rounds, render

CASE = (1024, 1, True)


def _rows(rf1_mb_s: list[float], rf3_mb_s: list[float]) -> Rows:
    return {
        CASE: {
            1: [(mb * 1000, mb, 0.002, 0.006) for mb in rf1_mb_s],
            3: [(mb * 1000, mb, 0.008, 0.012) for mb in rf3_mb_s],
        }
    }


def test_ratios_pair_each_round_and_the_table_gives_medians() -> None:
    # Round 2 ran while the machine was busy: both its rows are slow, its ratio is like the others.
    rows = _rows([200.0, 100.0, 180.0], [100.0, 52.0, 81.0])
    assert [round(r[1], 2) for r in _paired_ratios(rows[CASE])] == [0.5, 0.52, 0.45]
    assert _median_row(rows[CASE][1])[1] == 180.0
    table = render({"pykraft": rows, KAFKA: _rows([100.0], [40.0])}, [], 100, [1.0, 2.0], "", 3)
    assert "| pykraft | 1024 B | 1 | idempotent | **ratio RF3 / RF1** | 0.50 | 0.50 | 4.00 | 2.00 |" in table
    assert "| 1024 B | 1 | idempotent | **0.50** (0.50, 0.52, 0.45) | **0.40** (0.40) |" in table


def test_a_peer_not_measured_says_why_and_leaves_pykraft_rows() -> None:
    table = render({"pykraft": _rows([200.0], [100.0])}, [], 100, [1.0, 1.0], "Not measured: --no-kafka.", 1)
    assert "Not measured: --no-kafka." in table
    assert "| 1024 B | 1 | idempotent | **0.50** (0.50) |" in table


@pytest.mark.parametrize("text", ["0", "-2", "three"])
def test_rounds_below_one_are_refused_with_one_line(text: str) -> None:
    with pytest.raises(SystemExit, match=f"--rounds '{text}': expected a whole number of at least 1"):
        _rounds(text)
    assert _rounds("2") == 2
