"""Mutated requests of every advertised API and version through a real node (issue 18): the node must
answer or close the connection, and never meet a request with a handler exception (each one would be a
traceback in the log per request). Seeded; bounded by a count and a time budget.

    make fuzz REQUESTS=1000000 SECONDS=900 SEED=7
"""

from __future__ import annotations

import os
import random
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pykraft.protocol import messages
from pykraft.testing import free_port, node_properties
from tests.interop.test_restart import _start_server, _stop_server

pytestmark = pytest.mark.slow

REQUESTS = int(os.environ.get("FUZZ_REQUESTS", "100000"))
SECONDS = float(os.environ.get("FUZZ_SECONDS", "150"))
SEED = int(os.environ.get("FUZZ_SEED", "20261125"))
# How long to wait for an answer before moving on (a mutated Fetch may long-poll for its max_wait_ms).
ANSWER_TIMEOUT_S = 0.05
# Clients sending at once (the node is its own process; these share this one).
CLIENTS = 12


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    """``size`` bytes, or None when the node closed the connection."""
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def _filled(cls: Any, depth: int = 0) -> Any:
    """A request (or nested struct) with every array of structs holding one default element, so that
    mutations reach the nested fields too."""
    obj = cls()
    if depth > 3:
        return obj
    for field in cls.fields.values():
        if field.is_struct_array() and field.has_data_class():
            setattr(obj, field.name, [_filled(field.data_class, depth + 1)])
    return obj


def _seeds() -> list[tuple[Any, int]]:
    """(request class, version) of every advertised API and version."""
    return [
        (messages.request_class(key), version)
        for key, (low, high) in sorted(messages.SUPPORTED_VERSIONS.items())
        for version in range(low, high + 1)
    ]


_INT_EDGES = {
    "int8": (-(2**7), -1, 0, 1, 2**7 - 1),
    "int16": (-(2**15), -1, 0, 1, 2**15 - 1),
    "uint16": (0, 1, 2**16 - 1),
    "int32": (-(2**31), -2, -1, 0, 1, 3, 1000, 2**31 - 1),
    "int64": (-(2**63), -2, -1, 0, 1, 2**40, 2**63 - 1),
}


def _odd_value(rng: random.Random, kind: str) -> Any:
    if kind in _INT_EDGES:
        return rng.choice(_INT_EDGES[kind])
    if kind == "string":
        return rng.choice(["", "t", "__consumer_offsets", "x" * 300, "..", "g\u00e9", "t" * 250])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.choice([0.0, -1.0, 1e308, float("nan")])
    if kind == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kind in ("bytes", "records"):
        return bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 8, 61, 100))))
    return None


def _odd_values(rng: random.Random, obj: Any, version: int, depth: int = 0) -> None:
    """Well-formed but odd: edge values in random fields, arrays emptied or repeated."""
    for field in type(obj).fields.values():
        if not field.for_version_q(version) or rng.random() > 0.3:
            continue
        value = getattr(obj, field.name, None)
        if field.is_struct_array():
            items = list(value or [])
            if items and rng.random() < 0.5 and depth < 4:
                for item in items:
                    _odd_values(rng, item, version, depth + 1)
            elif rng.random() < 0.5:
                setattr(obj, field.name, items * rng.choice((0, 2, 3)))
            continue
        if field.is_array():
            inner = field._type_str[2:]
            setattr(obj, field.name, [_odd_value(rng, inner) for _ in range(rng.choice((0, 1, 3)))])
            continue
        odd = _odd_value(rng, field._type_str)
        if odd is not None or field.nullable_for_version_q(version):
            setattr(obj, field.name, odd)


def _request(rng: random.Random, cls: Any, version: int) -> bytes:
    """A mutated request: odd values in a well-formed request (what reaches handlers), and sometimes
    bytes flipped, cut or inserted on top (what the decoders must refuse)."""
    request = _filled(cls)
    _odd_values(rng, request, version)
    request.API_VERSION = version
    request.with_header(correlation_id=rng.randrange(2**31), client_id="fuzz")
    try:
        frame = bytes(request.encode(version=version, header=True, framed=False))
    except Exception:  # an odd value the client codec cannot write: start from the plain request
        plain = _filled(cls)
        plain.API_VERSION = version
        plain.with_header(correlation_id=1, client_id="fuzz")
        frame = bytes(plain.encode(version=version, header=True, framed=False))
    return _mutate(rng, frame) if rng.random() < 0.3 else frame


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        # Keep the api key and version (the first 4 bytes) most of the time: mutate the rest.
        low = 4 if rng.random() < 0.9 and len(data) > 4 else 0
        if not data or len(data) <= low:
            data += bytes([rng.randrange(256)])
        elif choice < 0.45:
            data[rng.randrange(low, len(data))] = rng.randrange(256)
        elif choice < 0.6:
            i = rng.randrange(low, len(data))
            data[i : i + 4] = rng.choice(
                [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00", b"\xff\xff"]
            )
        elif choice < 0.75:
            del data[rng.randrange(low, len(data)) :]
        elif choice < 0.9:
            i = rng.randrange(low, len(data) + 1)
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            i = rng.randrange(low, len(data))
            del data[i : i + rng.randint(1, 8)]
    return bytes(data)


def _fuzz(host: str, port: int, seed: int, count: int, deadline: float) -> tuple[int, int, int, int]:
    """One client's share: (sent, answered, closed, parked)."""
    rng = random.Random(seed)
    seeds = _seeds()
    sent = answered = closed = parked = 0
    sock: socket.socket | None = None
    while sent < count and time.monotonic() < deadline:
        if sock is None:
            sock = socket.create_connection((host, port), timeout=10)
            sock.settimeout(ANSWER_TIMEOUT_S)
        cls, version = rng.choice(seeds)
        mutated = _request(rng, cls, version)
        sent += 1
        try:
            sock.sendall(len(mutated).to_bytes(4, "big") + mutated)
            size = _recv_exactly(sock, 4)
            if size is not None:
                _recv_exactly(sock, int.from_bytes(size, "big", signed=True))
                answered += 1
                continue
            closed += 1  # the node refused it and closed the connection, as Kafka does
        except TimeoutError:
            parked += 1  # a long poll (Fetch max_wait_ms, JoinGroup) or acks=0: next connection
        except OSError:
            closed += 1
        sock.close()
        sock = None
    if sock is not None:
        sock.close()
    return sent, answered, closed, parked


def test_mutated_requests_of_every_api_never_raise_in_a_handler(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "server.properties"
    config.write_text(
        node_properties(str(tmp_path / "data"), port, free_port()) + "auto.create.topics.enable=false\n"
    )
    proc = _start_server(str(config), port)
    deadline = time.monotonic() + SECONDS
    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            shares = list(
                pool.map(
                    lambda i: _fuzz("127.0.0.1", port, SEED + i, REQUESTS // CLIENTS, deadline),
                    range(CLIENTS),
                )
            )
        # The node still serves a well-formed client after all of it.
        from confluent_kafka.admin import AdminClient

        assert AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=30).brokers
    finally:
        _stop_server(proc)
    sent, answered, closed, parked = (sum(share[i] for share in shares) for i in range(4))
    print(
        f"SEED={SEED}: {sent} requests, {answered} answered, {closed} closed the connection, {parked} parked"
    )
    log = (tmp_path / "server.properties.log").read_text(errors="replace")
    problems = [line for line in log.splitlines() if " ERROR " in line or line.startswith("Traceback")]
    assert not problems, f"SEED={SEED}: {len(problems)} error lines, first:\n" + "\n".join(problems[:5])
    assert sent >= min(REQUESTS, 1000) and answered > sent // 10, (sent, answered, closed, parked)
