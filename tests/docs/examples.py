"""The code blocks of README.md and docs/*.md, told apart by what running them means (issue 28).

A block is a fenced code block. Its info string says what it is, and an HTML comment on the line right
above it may say more (``<!-- example: ... -->``):

- ``python``: run, in order, in one namespace per file; one that uses a Spark session (the name
  ``spark``) is a Spark block;
- ``sh``: bash, every command ``pykraft ...``; a block of ``pykraft pipeline`` commands is a Spark
  block;
- ``properties``: a server.properties, loaded by pykraft's config loader;
- ``json``: parses as JSON;
- ``text``: not code (a diagram, output, a file layout): nothing to run.

Marks: ``not run — REASON`` (a block CI cannot run; the reason is required), ``file NAME`` (write the
block to NAME in the working directory before the file's later blocks run; it is checked as its
language says too), ``meta.properties`` and ``quorum-state`` (parsed with pykraft's reader of that file
instead). This module only reads; tests/docs/test_examples.py and tests/spark/test_docs_examples.py run.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# The addresses and paths the examples name, and what a test puts in their place.
CLIENT_ADDRESSES = ("127.0.0.1:9092", "H:P")
CONTROLLER_ADDRESS = "127.0.0.1:9093"

LANGUAGES = frozenset({"python", "sh", "properties", "json", "text"})
FORMAT_MARKS = frozenset({"meta.properties", "quorum-state"})

_FENCE_OPEN = re.compile(r"^(```+|~~~+)[ \t]*([^\s`]*)[^`]*$")
_MARK = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->$")
_NOT_RUN = re.compile(r"^not run\s*[—:-]+\s*(\S.*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    mark: str  # the text after "example:" in the comment above, or ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def not_run_reason(self) -> str | None:
        match = _NOT_RUN.match(self.mark)
        return match.group(1) if match else None

    @property
    def file_name(self) -> str | None:
        return self.mark.split(None, 1)[1] if self.mark.startswith("file ") else None

    @property
    def needs_spark(self) -> bool:
        if self.language == "python":
            return "spark" in compile(self.code, self.where, "exec").co_names
        if self.language == "sh":
            words = commands(self)
            return bool(words) and all(command[:2] == ["pykraft", "pipeline"] for command in words)
        return False


def blocks(path: Path) -> list[Block]:
    found = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE_OPEN.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, language = opening.groups()
        end = index + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        assert end < len(lines), f"{path.relative_to(ROOT)}:{index + 1}: a code block that never closes"
        mark = _MARK.match(lines[index - 1].strip()) if index else None
        code = "\n".join(lines[index + 1 : end]) + "\n"
        found.append(Block(path, index + 1, language, code, mark.group(1) if mark else ""))
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in DOCS for block in blocks(path)]


def problems(block: Block) -> list[str]:
    """What makes a block neither runnable nor explicitly marked."""
    found = []
    if block.language not in LANGUAGES:
        found.append(f"info string {block.language!r} is not one of {sorted(LANGUAGES)}")
    known_mark = (
        not block.mark
        or block.not_run_reason is not None
        or block.file_name is not None
        or block.mark in FORMAT_MARKS
    )
    if not known_mark:
        found.append(
            f"mark {block.mark!r} is not 'not run — reason', 'file NAME' or one of {sorted(FORMAT_MARKS)}"
        )
    if block.language == "text" and block.mark:
        found.append("a text block is not code: it needs no mark")
    if block.language == "sh" and block.not_run_reason is None:
        bad = [" ".join(c) for c in commands(block) if c[0] not in ("pykraft", "printf")]
        if bad:
            found.append(f"sh examples are pykraft commands, not {bad}")
        if block.needs_spark is False and any(c[:2] == ["pykraft", "pipeline"] for c in commands(block)):
            found.append("a block mixes pykraft pipeline (Spark) and other commands")
    return found


def commands(block: Block) -> list[list[str]]:
    """The words of each command of an sh block: a pipe starts a command, a trailing backslash
    continues one, # starts a comment."""
    text = block.code.replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|;&")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for word in lexer:
            if set(word) <= set("|;&"):
                if words:
                    found.append(words)
                words = []
            else:
                words.append(word)
        if words:
            found.append(words)
    return found


def with_addresses(code: str, bootstrap_servers: str, controller_address: str) -> str:
    for address in CLIENT_ADDRESSES:
        code = code.replace(address, bootstrap_servers)
    return code.replace(CONTROLLER_ADDRESS, controller_address)


def with_data_dir(code: str, data_dir: str) -> str:
    """``data/...`` and ``./data`` in a command are the running node's data dir."""
    return re.sub(r"(?<![\w./-])(?:\./)?data(?=/|\s|$)", data_dir, code, flags=re.MULTILINE)
