from __future__ import annotations

import pytest

from pykraft.protocol.records import control_type_of
from pykraft.raft.control import (
    CONTROL_TYPE_LEADER_CHANGE,
    LeaderChangeMessage,
    decode_leader_change,
    encode_leader_change,
    leader_change_record,
)


def test_leader_change__kafka_bytes() -> None:
    message = LeaderChangeMessage(leader_id=1, voters=(1, 2), granting_voters=(1,))
    # version 0, leader 1, compact array of 2 voters (len+1 = 3) each with empty tags, granting 1, tags.
    assert encode_leader_change(message) == bytes.fromhex(
        "0000 00000001 03 00000001 00 00000002 00 02 00000001 00 00"
    )
    assert decode_leader_change(encode_leader_change(message)) == message


def test_leader_change_record__key_is_version_and_type() -> None:
    record = leader_change_record(LeaderChangeMessage(3, (3,), (3,)))
    assert record.key == b"\x00\x00\x00\x02"
    assert control_type_of(record.key) == CONTROL_TYPE_LEADER_CHANGE


def test_decode__trailing_bytes__rejected() -> None:
    raw = encode_leader_change(LeaderChangeMessage(1, (1,), (1,))) + b"\x00"
    with pytest.raises(ValueError):
        decode_leader_change(raw)
