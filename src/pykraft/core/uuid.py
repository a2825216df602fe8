"""Kafka's Uuid: 16 bytes on the wire, 22 base64url characters (no padding) as text.

Reserved ids: ZERO_UUID (0, 0) and METADATA_TOPIC_ID (0, 1); a random id never starts with '-'
(kafka-facts.md §5.2), so it can be passed on a command line.
"""

from __future__ import annotations

import base64
import random
import uuid as _uuid

ZERO_UUID = _uuid.UUID(int=0)
METADATA_TOPIC_ID = _uuid.UUID(int=1)
RESERVED_UUIDS = frozenset({ZERO_UUID, METADATA_TOPIC_ID})


def uuid_to_str(value: _uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_str(text: str) -> _uuid.UUID:
    if len(text) != 22:
        raise ValueError(f"a Kafka uuid has 22 base64url characters, got {len(text)}: {text!r}")
    raw = base64.urlsafe_b64decode(text + "==")
    return _uuid.UUID(bytes=raw)


def random_uuid(rng: random.Random) -> _uuid.UUID:
    """A fresh id from the injected generator; never reserved, text form never starts with '-'."""
    while True:
        value = _uuid.UUID(int=rng.getrandbits(128))
        if value not in RESERVED_UUIDS and not uuid_to_str(value).startswith("-"):
            return value
