"""Control records of the metadata log (kafka-facts §4.2, §7.1), encoded by hand.

A control record's key is ``version:int16 (0), type:int16``; its value is the message at version 0
with no version prefix, in the flexible encoding (compact arrays, a trailing tagged-field count).
Types (ControlRecordType.java): 0 ABORT, 1 COMMIT, 2 LEADER_CHANGE, 3 SNAPSHOT_HEADER,
4 SNAPSHOT_FOOTER, 5 KRAFT_VERSION, 6 KRAFT_VOTERS.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pykraft.protocol.records import Record, control_key
from pykraft.protocol.wire import put_uvarint, read_uvarint, skip_tagged_fields

CONTROL_TYPE_LEADER_CHANGE = 2
LEADER_CHANGE_VERSION = 0

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class LeaderChangeMessage:
    """LeaderChangeMessage.json v0: the first record a new leader appends in its epoch."""

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]
    version: int = LEADER_CHANGE_VERSION


def _write_voters(out: bytearray, voter_ids: tuple[int, ...]) -> None:
    put_uvarint(out, len(voter_ids) + 1)  # compact array: length + 1
    for voter_id in voter_ids:
        out += _INT32.pack(voter_id)
        put_uvarint(out, 0)  # Voter's tagged fields


def _read_voters(buf: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    count_plus_one, pos = read_uvarint(buf, pos)
    if count_plus_one == 0:
        raise ValueError("LeaderChangeMessage voters array is null")
    voters: list[int] = []
    for _ in range(count_plus_one - 1):
        if pos + 4 > len(buf):
            raise ValueError("LeaderChangeMessage voter runs past the end")
        (voter_id,) = _INT32.unpack_from(buf, pos)
        pos = skip_tagged_fields(buf, pos + 4)
        voters.append(voter_id)
    return tuple(voters), pos


def encode_leader_change(message: LeaderChangeMessage) -> bytes:
    out = bytearray(_INT16.pack(message.version))
    out += _INT32.pack(message.leader_id)
    _write_voters(out, message.voters)
    _write_voters(out, message.granting_voters)
    put_uvarint(out, 0)  # top-level tagged fields
    return bytes(out)


def decode_leader_change(value: bytes) -> LeaderChangeMessage:
    if len(value) < 6:
        raise ValueError(f"LeaderChangeMessage needs at least 6 bytes, got {len(value)}")
    (version,) = _INT16.unpack_from(value, 0)
    (leader_id,) = _INT32.unpack_from(value, 2)
    voters, pos = _read_voters(value, 6)
    granting, pos = _read_voters(value, pos)
    pos = skip_tagged_fields(value, pos)
    if pos != len(value):
        raise ValueError(f"found {len(value) - pos} byte(s) of garbage after LeaderChangeMessage")
    return LeaderChangeMessage(leader_id, voters, granting, version)


def leader_change_record(message: LeaderChangeMessage) -> Record:
    return Record(control_key(CONTROL_TYPE_LEADER_CHANGE), encode_leader_change(message))
