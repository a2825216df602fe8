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


# --- KIP-853: KRaftVersionRecord (type 5) and VotersRecord (type 6) -------------------------------

CONTROL_TYPE_KRAFT_VERSION = 5
CONTROL_TYPE_KRAFT_VOTERS = 6
KRAFT_VERSION_RECORD_VERSION = 0
VOTERS_RECORD_VERSION = 0
# kraft.version 1 is the first with a dynamic quorum (KRaftVersion.java: KRAFT_VERSION_1).
KRAFT_VERSION_DYNAMIC = 1

_UINT16 = struct.Struct(">H")
_UUID_BYTES = 16


@dataclass(frozen=True, slots=True)
class Endpoint:
    """VotersRecord.Voters.Endpoints: a listener the voter serves on (the controller listener)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Voter:
    """One voter (VoterSet.VoterNode): its id, its directory id (the replica directory id in
    meta.properties, 16 bytes; all zero for a kraft.version 0 voter that has none), its endpoints and
    the kraft.version range it supports."""

    voter_id: int
    directory_id: bytes
    endpoints: tuple[Endpoint, ...] = ()
    min_supported_kraft_version: int = 0
    max_supported_kraft_version: int = KRAFT_VERSION_DYNAMIC

    def __post_init__(self) -> None:
        assert len(self.directory_id) == _UUID_BYTES, self.directory_id


def _put_compact_string(out: bytearray, value: str) -> None:
    raw = value.encode("utf-8")
    put_uvarint(out, len(raw) + 1)
    out += raw


def _read_compact_string(buf: bytes, pos: int, what: str) -> tuple[str, int]:
    length_plus_one, pos = read_uvarint(buf, pos)
    if length_plus_one == 0 or pos + length_plus_one - 1 > len(buf):
        raise ValueError(f"VotersRecord {what} is null or runs past the end")
    end = pos + length_plus_one - 1
    return buf[pos:end].decode("utf-8"), end


def _need(buf: bytes, pos: int, size: int, what: str) -> None:
    if pos + size > len(buf):
        raise ValueError(f"VotersRecord {what} runs past the end")


def encode_voters_record(voters: tuple[Voter, ...]) -> bytes:
    out = bytearray(_INT16.pack(VOTERS_RECORD_VERSION))
    put_uvarint(out, len(voters) + 1)
    for voter in voters:
        out += _INT32.pack(voter.voter_id)
        out += voter.directory_id
        put_uvarint(out, len(voter.endpoints) + 1)
        for endpoint in voter.endpoints:
            _put_compact_string(out, endpoint.name)
            _put_compact_string(out, endpoint.host)
            out += _UINT16.pack(endpoint.port)
            put_uvarint(out, 0)  # Endpoint's tagged fields
        out += _INT16.pack(voter.min_supported_kraft_version)
        out += _INT16.pack(voter.max_supported_kraft_version)
        put_uvarint(out, 0)  # KRaftVersionFeature's tagged fields
        put_uvarint(out, 0)  # Voter's tagged fields
    put_uvarint(out, 0)  # top-level tagged fields
    return bytes(out)


def decode_voters_record(value: bytes) -> tuple[Voter, ...]:
    _need(value, 0, 2, "version")
    count_plus_one, pos = read_uvarint(value, 2)
    if count_plus_one == 0:
        raise ValueError("VotersRecord voters array is null")
    voters: list[Voter] = []
    for _ in range(count_plus_one - 1):
        _need(value, pos, 4 + _UUID_BYTES, "voter")
        (voter_id,) = _INT32.unpack_from(value, pos)
        directory_id = bytes(value[pos + 4 : pos + 4 + _UUID_BYTES])
        endpoint_count_plus_one, pos = read_uvarint(value, pos + 4 + _UUID_BYTES)
        endpoints: list[Endpoint] = []
        for _ in range(max(0, endpoint_count_plus_one - 1)):
            name, pos = _read_compact_string(value, pos, "endpoint name")
            host, pos = _read_compact_string(value, pos, "endpoint host")
            _need(value, pos, 2, "endpoint port")
            (port,) = _UINT16.unpack_from(value, pos)
            pos = skip_tagged_fields(value, pos + 2)
            endpoints.append(Endpoint(name, host, port))
        _need(value, pos, 4, "KRaftVersionFeature")
        (min_version,) = _INT16.unpack_from(value, pos)
        (max_version,) = _INT16.unpack_from(value, pos + 2)
        pos = skip_tagged_fields(value, pos + 4)
        pos = skip_tagged_fields(value, pos)
        voters.append(Voter(voter_id, directory_id, tuple(endpoints), min_version, max_version))
    pos = skip_tagged_fields(value, pos)
    if pos != len(value):
        raise ValueError(f"found {len(value) - pos} byte(s) of garbage after VotersRecord")
    return tuple(voters)


def encode_kraft_version_record(kraft_version: int) -> bytes:
    out = bytearray(_INT16.pack(KRAFT_VERSION_RECORD_VERSION))
    out += _INT16.pack(kraft_version)
    put_uvarint(out, 0)
    return bytes(out)


def decode_kraft_version_record(value: bytes) -> int:
    if len(value) < 4:
        raise ValueError(f"KRaftVersionRecord needs at least 4 bytes, got {len(value)}")
    (kraft_version,) = _INT16.unpack_from(value, 2)
    if skip_tagged_fields(value, 4) != len(value):
        raise ValueError("found garbage after KRaftVersionRecord")
    return int(kraft_version)


def voters_record(voters: tuple[Voter, ...]) -> Record:
    return Record(control_key(CONTROL_TYPE_KRAFT_VOTERS), encode_voters_record(voters))


def kraft_version_record(kraft_version: int) -> Record:
    return Record(control_key(CONTROL_TYPE_KRAFT_VERSION), encode_kraft_version_record(kraft_version))
