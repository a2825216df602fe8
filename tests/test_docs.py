"""The docs stay true to the repository (issue 18): every relative link in README.md and docs/*.md names a
file in the repository (and, for a ``#fragment`` into a Markdown file, one of its headings), and every
config key in docs/operations.md's tables is one pykraft knows, and every key it knows is there.

The tables are told apart by their first header cell: ``server.properties key`` (checked against
``USED_PROPERTIES``, the keys ``load_config`` reads), ``topic config`` (``TOPIC_CONFIGS``), ``dynamic
broker config`` (``DYNAMIC_BROKER_CONFIGS``) and ``group config`` (``GROUP_CONFIGS``). Pure file reading: well under a second.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.core.config import USED_PROPERTIES
from pykraft.core.group_configs import GROUP_CONFIGS
from pykraft.core.topic_configs import DYNAMIC_BROKER_CONFIGS, TOPIC_CONFIGS

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OPERATIONS = ROOT / "docs" / "operations.md"

KNOWN_KEYS: dict[str, frozenset[str]] = {
    "server.properties key": frozenset(USED_PROPERTIES),
    "topic config": frozenset(TOPIC_CONFIGS),
    "dynamic broker config": frozenset(DYNAMIC_BROKER_CONFIGS),
    "group config": frozenset(GROUP_CONFIGS),
}

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)


def _prose(text: str) -> str:
    """Markdown without code blocks and code spans (their brackets are not links)."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def _anchors(path: Path) -> set[str]:
    """The fragment GitHub gives each heading: lower case, punctuation but ``-`` and ``_`` dropped,
    spaces as ``-``, ``-1``, ``-2``... after a repeated one."""
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(path: Path) -> Iterator[str]:
    for target in _LINK.findall(_prose(path.read_text(encoding="utf-8"))):
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not files
            yield target


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_name_files_in_the_repo(doc: Path) -> None:
    problems = []
    for target in _links(doc):
        file_part, _, fragment = target.partition("#")
        linked = (doc.parent / file_part).resolve() if file_part else doc
        if not linked.is_relative_to(ROOT):
            problems.append(f"{target}: outside the repository")
        elif not linked.exists():
            problems.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            problems.append(f"{target}: no heading #{fragment} in {linked.relative_to(ROOT)}")
    assert not problems, f"{doc.relative_to(ROOT)}: " + "; ".join(problems)


def _config_tables() -> dict[str, list[str]]:
    """The keys named in the first column of each kind of config table in docs/operations.md."""
    found: dict[str, list[str]] = {kind: [] for kind in KNOWN_KEYS}
    kind: str | None = None
    for line in OPERATIONS.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            kind = None
            continue
        first_cell = line.strip("|").split("|")[0].strip()
        if kind is None:  # a table's header row
            kind = first_cell if first_cell in KNOWN_KEYS else ""
        elif kind and not set(first_cell) <= set("-: "):
            found[kind].extend(re.findall(r"`([^`]+)`", first_cell))
    return found


def test_config_tables_name_only_keys_pykraft_knows() -> None:
    tables = _config_tables()
    assert all(tables.values()), f"docs/operations.md lacks a kind of config table: {tables}"
    for kind, keys in tables.items():
        unknown = sorted(set(keys) - KNOWN_KEYS[kind])
        assert not unknown, f"docs/operations.md names {kind}s pykraft does not know: {unknown}"
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        assert not repeated, f"docs/operations.md lists these {kind}s twice: {repeated}"


def test_every_key_pykraft_knows_is_in_the_config_tables() -> None:
    tables = _config_tables()
    for kind, known in KNOWN_KEYS.items():
        missing = sorted(known - set(tables[kind]))
        assert not missing, (
            f"pykraft knows these {kind}s but docs/operations.md's '{kind}' tables do not list them "
            f"(add a row with the default and meaning): {missing}"
        )
