"""bench.results_file: a bench's latest run replaces only its own block of the results file."""

from __future__ import annotations

from pathlib import Path

from bench.results_file import BEGIN, END, merge_results, write_results


def test_a_new_file_is_the_run_between_the_markers() -> None:
    assert merge_results(None, "| a |\n") == f"{BEGIN}\n| a |\n{END}\n"


def test_a_file_without_markers_keeps_everything_below_the_run() -> None:
    merged = merge_results("# old table\n\nwhat it shows\n", "| new |")
    assert merged == f"{BEGIN}\n| new |\n{END}\n\n# old table\n\nwhat it shows\n"


def test_the_next_run_replaces_only_the_block(tmp_path: Path) -> None:
    path = tmp_path / "results" / "x.md"
    write_results(path, "| first |")
    path.write_text("# notes above\n" + path.read_text() + "\nnotes below\n")
    write_results(path, "| second |")
    write_results(path, "| third |")
    assert path.read_text() == f"# notes above\n{BEGIN}\n| third |\n{END}\n\nnotes below\n"
