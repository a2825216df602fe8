"""Writing a bench's table into its ``bench/results/*.md`` without losing what people wrote there.

The results files carry more than the latest table: readings of it, earlier runs, what changed and why.
A bench used to write its file whole, so ``make bench`` erased all of that. Now the latest run goes
between two marker lines and the rest of the file stays as it is. A file without the markers gets the
run on top, and everything it had before is kept below it.
"""

from __future__ import annotations

from pathlib import Path

BEGIN = "<!-- the latest run, written by its bench: text outside these two lines is kept -->"
END = "<!-- end of the latest run -->"


def merge_results(previous: str | None, run: str) -> str:
    """The file's new text: ``run`` between the markers, replacing what they held, the rest kept."""
    block = f"{BEGIN}\n{run.rstrip()}\n{END}\n"
    if not previous:
        return block
    start = previous.find(BEGIN)
    end = previous.find(END, start + len(BEGIN)) if start >= 0 else -1
    if start < 0 or end < 0:
        return f"{block}\n{previous}"
    after = previous[end + len(END) :].removeprefix("\n")
    return previous[:start] + block + after


def write_results(path: Path | str, run: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = path.read_text(encoding="utf-8") if path.exists() else None
    path.write_text(merge_results(previous, run), encoding="utf-8")
