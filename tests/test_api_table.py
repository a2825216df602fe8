"""docs/apis.md's "What it serves" table is what a node advertises (issue 27; it left README.md in
issue 28): every API in a broker's ApiVersions answer is a row with the same version range, and the
table names nothing else.

The advertised table is read back from the bytes ``messages.api_versions_response`` builds, which is what
the client listener of a broker process and of a combined node sends. A row names one or more APIs
(``CreateTopics / DeleteTopics``) with a note in parentheses and, in the second column, one range per API
(``2–7 / 1–6``; a single version as ``0``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from pykraft.protocol import messages
from pykraft.protocol.messages import ApiKey

API_TABLE = Path(__file__).resolve().parent.parent / "docs" / "apis.md"
SECTION = "## What it serves"
API_VERSIONS_VERSION = 3


def _kafka_name(key: ApiKey) -> str:
    """ApiKey.OFFSET_FOR_LEADER_EPOCH -> OffsetForLeaderEpoch, as Kafka and the table name it."""
    return "".join(word.capitalize() for word in key.name.split("_"))


def _advertised() -> dict[str, tuple[int, int]]:
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    request.API_VERSION = API_VERSIONS_VERSION
    request.with_header(correlation_id=1, client_id="t")
    frame = memoryview(bytes(request.encode(header=True, framed=False)))
    answer = bytes(messages.api_versions_response(messages.parse_request_header(frame)))
    response = ApiVersionsResponse.decode(answer[4:], version=API_VERSIONS_VERSION, header=True)
    assert response.error_code == 0
    return {_kafka_name(ApiKey(a.api_key)): (a.min_version, a.max_version) for a in response.api_keys}


def _without_notes(text: str) -> str:
    while True:
        stripped = re.sub(r"\([^()]*\)", "", text)
        if stripped == text:
            return text
        text = stripped


def _range(text: str, row: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)(?:\s*[–-]\s*(\d+))?", text.strip())
    assert match, f"table row {row!r}: {text.strip()!r} is not a version or a range like 0–4"
    low = int(match.group(1))
    return low, int(match.group(2) or low)


def _readme_table() -> dict[str, tuple[int, int]]:
    lines = API_TABLE.read_text().splitlines()
    start = lines.index(SECTION)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break  # the end of the table
    assert len(rows) > 2, f"no table under {SECTION!r} in docs/apis.md"
    table: dict[str, tuple[int, int]] = {}
    for row in rows[2:]:  # past the header and its |---| line
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        assert len(cells) == 2, f"table row {row!r}: expected two columns (API, versions)"
        names = [name.strip() for name in _without_notes(cells[0]).split("/")]
        ranges = cells[1].split("/")
        assert len(names) == len(ranges), f"table row {row!r}: {len(names)} APIs but {len(ranges)} ranges"
        for name, text in zip(names, ranges, strict=True):
            assert name not in table, f"the table names {name} twice"
            table[name] = _range(text, row)
    return table


def _show(versions: tuple[int, int]) -> str:
    low, high = versions
    return str(low) if low == high else f"{low}–{high}"


def test_readme_table_is_what_a_broker_advertises() -> None:
    advertised = _advertised()
    documented = _readme_table()
    problems = []
    for name in sorted(advertised.keys() | documented.keys()):
        if name not in documented:
            problems.append(f"{name}: advertised {_show(advertised[name])}, missing from the table")
        elif name not in advertised:
            problems.append(
                f"{name}: the table says {_show(documented[name])}, but the node does not advertise it"
            )
        elif documented[name] != advertised[name]:
            problems.append(
                f"{name}: the table says {_show(documented[name])}, the node advertises {_show(advertised[name])}"
            )
    if problems:
        pytest.fail("docs/apis.md's 'What it serves' table differs from ApiVersions:\n" + "\n".join(problems))


def test_the_table_is_read_as_a_reader_reads_it() -> None:
    # The parser itself: notes in parentheses (even with slashes) dropped, one range per API.
    assert (
        _without_notes("AddPartitionsToTxn (v4: batched (KIP-890), a/b) / EndTxn")
        == "AddPartitionsToTxn  / EndTxn"
    )
    assert _range(" 0–4 ", "r") == (0, 4) and _range("1", "r") == (1, 1)
    assert _kafka_name(ApiKey.OFFSET_FOR_LEADER_EPOCH) == "OffsetForLeaderEpoch"
    assert _kafka_name(ApiKey.API_VERSIONS) == "ApiVersions"
