"""The differential tests' machinery (issue 33 item 5): a request sequence runs against Apache Kafka and
against pykraft through the same raw client; each response is decoded by pykraft's own codecs, brought
to a comparable form by ONE normaliser (`normalise`), and compared field by field (`differences`).
The deliberate differences are docs/differences.md's table, read by `deliberate_differences`."""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pykraft.io.kafka_connection import BrokerConnectionError
from pykraft.protocol.messages import request_class, response_class
from tests.raw_client import RawClient

DIFFERENCES_DOC = Path(__file__).resolve().parents[2] / "docs" / "differences.md"
# What a sequence records when the broker closes the connection instead of answering (Kafka's
# SocketServer does so for a request it cannot parse, e.g. an api version below the minimum).
CLOSED = {"outcome": "connection closed"}


def build(cls: Any, fields: dict[str, Any]) -> Any:
    """A request of kafka-python class ``cls`` from plain dicts and lists (nested structs included);
    fields left out take the schema's defaults."""
    values = {}
    for name, value in fields.items():
        spec = cls.fields[name]
        if spec.is_struct_array() and value is not None:
            values[name] = [build(spec.data_class, item) for item in value]
        elif spec.is_struct() and isinstance(value, dict):
            values[name] = build(spec.data_class, value)
        else:
            values[name] = value
    return cls(**values)


class Broker:
    """One broker under test: the raw client's connections to it, and the responses of a sequence."""

    def __init__(self, name: str, bootstrap: str) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.port = int(bootstrap.rsplit(":", 1)[1])
        self.steps: list[tuple[str, Any]] = []
        self._connections: list[RawClient] = []

    def connect(self) -> RawClient:
        client = RawClient(self.bootstrap)
        self._connections.append(client)
        return client

    def call(
        self,
        label: str,
        api_key: int,
        version: int,
        fields: dict[str, Any],
        *,
        via: RawClient | None = None,
        record: bool = True,
    ) -> dict[str, Any]:
        """Send one request at ``version`` (on a fresh connection unless ``via``), record the decoded
        response (or CLOSED) under ``label``, return it as a dict."""
        client = via or self.connect()
        request = build(request_class(api_key), fields)
        try:
            response = client.request(request, response_class(api_key), version).to_dict()
        except BrokerConnectionError:
            response = dict(CLOSED)
        if record:
            self.steps.append((label, response))
        return response

    def call_beyond_schema(
        self, label: str, api_key: int, version: int, body: bytes, *, answer_version: int
    ) -> dict[str, Any]:
        """A request at a ``version`` newer than any schema (the codecs refuse to encode it): a v2 header
        over ``body``; the answer, if any, is decoded at ``answer_version``."""
        client = self.connect()
        client.correlation_id += 1
        client_id = client.client_id.encode()
        header = (
            struct.pack(">hhih", api_key, version, client.correlation_id, len(client_id)) + client_id + b"\0"
        )
        try:
            client.send_frame(header + body)
            frame = client.recv_frame()
            response = response_class(api_key).decode(frame, version=answer_version, header=True).to_dict()
        except BrokerConnectionError:
            response = dict(CLOSED)
        self.steps.append((label, response))
        return response

    def send_only(self, api_key: int, version: int, fields: dict[str, Any], via: RawClient) -> None:
        """A request whose response is never read (acks=0, or one the coordinator parks)."""
        via.send(build(request_class(api_key), fields), version)

    def note(self, label: str, value: Any) -> None:
        """Record an outcome that is not a response (e.g. what a later read observed)."""
        self.steps.append((label, value))

    def close(self) -> None:
        for client in self._connections:
            client.close()
        self._connections.clear()


# --- the one normaliser ----------------------------------------------------------------------------------

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# Member ids are client.id + "-" + a random UUID (ClassicGroup's generateMemberId).
_MEMBER_ID = re.compile(r"^(.*)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_NULL_UUID = "00000000-0000-0000-0000-000000000000"
# Fields not compared: the broker's quota state, and free text (Kafka's wording is not part of the
# protocol, and pykraft's messages name the offending value; the error code is the contract).
_DROPPED = {"throttle_time_ms", "error_message"}
# Fields whose non-empty values are generated per cluster: replaced by a placeholder, so that only
# "set or not" is compared.
_PLACEHOLDERS = {"cluster_id": "<cluster id>", "producer_id": "<producer id>"}


class _Normaliser:
    """Normalises every response of one sequence on one broker. What legitimately differs between two
    brokers answering the same requests:

    - ``throttle_time_ms``: dropped (quota state of the broker, not of the request);
    - the broker's own port (both brokers are node 1 on 127.0.0.1): ``<port>``;
    - ``cluster_id`` and non-negative ``producer_id``: placeholders (random per cluster);
    - topic ids and other UUIDs: ``<uuid #n>`` in order of first appearance in the sequence (the null
      UUID stays), so "the same id as before" is still compared; member ids: ``<client id>-<member #n>``;
    - ``error_message``: dropped (free text: Kafka's wording is not part of the protocol, Kafka leaves
      it null for most errors and pykraft names the offending value; the error code is the contract);
    - lists of structs: sorted by their normalised form (the order of keyed collections is not defined
      by the protocol; Kafka builds most from hash maps).
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.uuids: dict[str, str] = {}
        self.members: dict[str, str] = {}

    def value(self, name: str, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self.value(k, v) for k, v in value.items() if k not in _DROPPED}
        if isinstance(value, list):
            items = [self.value(name, item) for item in value]
            if items and all(isinstance(item, dict) for item in items):
                items.sort(key=repr)
            return items
        if name in _PLACEHOLDERS and value not in (None, "", -1):
            return _PLACEHOLDERS[name]
        if name == "port" and value == self.port:
            return "<port>"
        if isinstance(value, uuid.UUID):
            value = str(value)
        if isinstance(value, str) and _UUID.match(value) and value != _NULL_UUID:
            return self.uuids.setdefault(value, f"<uuid #{len(self.uuids) + 1}>")
        if isinstance(value, str) and (member := _MEMBER_ID.match(value)):
            return f"{member.group(1)}-" + self.members.setdefault(
                value, f"<member #{len(self.members) + 1}>"
            )
        return value


def normalise(broker: Broker) -> list[tuple[str, Any]]:
    """The sequence's recorded responses on ``broker``, normalised (see _Normaliser)."""
    normaliser = _Normaliser(broker.port)
    return [(label, normaliser.value("", response)) for label, response in broker.steps]


# --- comparison ------------------------------------------------------------------------------------------


@dataclass
class Difference:
    path: str  # "step label/field/sub field" (list items as [i])
    kafka: Any
    pykraft: Any

    def __str__(self) -> str:
        return f"{self.path}: kafka={self.kafka!r} pykraft={self.pykraft!r}"


_MISSING = "<absent>"


def _walk(path: str, kafka: Any, pykraft: Any) -> Iterator[Difference]:
    if isinstance(kafka, dict) and isinstance(pykraft, dict):
        for key in [*kafka, *(k for k in pykraft if k not in kafka)]:
            yield from _walk(f"{path}/{key}", kafka.get(key, _MISSING), pykraft.get(key, _MISSING))
    elif isinstance(kafka, list) and isinstance(pykraft, list) and (keyed := _by_key(kafka, pykraft)):
        (key, kafka_items), pykraft_items = keyed
        for value in [*kafka_items, *(v for v in pykraft_items if v not in kafka_items)]:
            item_path = f"{path}[{key}={value}]"
            yield from _walk(item_path, kafka_items.get(value, _MISSING), pykraft_items.get(value, _MISSING))
    elif isinstance(kafka, list) and isinstance(pykraft, list) and len(kafka) == len(pykraft):
        for index, (k, p) in enumerate(zip(kafka, pykraft, strict=True)):
            yield from _walk(f"{path}[{index}]", k, p)
    elif kafka != pykraft:
        yield Difference(path, kafka, pykraft)


def _by_key(kafka: list[Any], pykraft: list[Any]) -> tuple[tuple[str, dict[Any, Any]], dict[Any, Any]] | None:
    """Lists of structs whose first field (a name, a partition index) is unique on both sides are
    compared item by item by that field (``configs[name=retention.ms]``), so that one missing entry
    shows as one difference."""
    items = [*kafka, *pykraft]
    if not items or not all(isinstance(item, dict) and item for item in items):
        return None
    key = next(iter(items[0]))
    if any(next(iter(item)) != key for item in items):
        return None
    kafka_items = {str(item[key]): item for item in kafka}
    pykraft_items = {str(item[key]): item for item in pykraft}
    if len(kafka_items) != len(kafka) or len(pykraft_items) != len(pykraft):
        return None
    return (key, kafka_items), pykraft_items


def differences(kafka: list[tuple[str, Any]], pykraft: list[tuple[str, Any]]) -> list[Difference]:
    """Every field where the two brokers' normalised answers differ, step by step."""
    found = []
    kafka_labels = [label for label, _ in kafka]
    pykraft_labels = [label for label, _ in pykraft]
    if kafka_labels != pykraft_labels:
        return [Difference("<steps>", kafka_labels, pykraft_labels)]
    for (label, k), (_, p) in zip(kafka, pykraft, strict=True):
        found.extend(_walk(label, k, p))
    return found


def _glob(pattern: str) -> re.Pattern[str]:
    """``*`` matches any text; everything else (brackets included) is literal."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + r"\Z")


@dataclass
class Deliberate:
    sequence: str  # a sequence name, or a pattern with *
    path: str  # a field path as Difference prints it, or a pattern with *
    why: str

    def covers(self, sequence: str, difference: Difference) -> bool:
        return bool(_glob(self.sequence).match(sequence) and _glob(self.path).match(difference.path))


def deliberate_differences(doc: Path = DIFFERENCES_DOC) -> list[Deliberate]:
    """docs/differences.md's table rows ``| `sequence` | `field path` | why |``."""
    found = []
    for line in doc.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0].startswith("`"):
            found.append(Deliberate(cells[0].strip("`"), cells[1].strip("`"), cells[2]))
    return found
