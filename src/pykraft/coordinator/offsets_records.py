"""Records of the ``__consumer_offsets`` topic, in Kafka's format, so Kafka's tools can read them.

Every record's key and value start with an int16 schema version (Kafka's coordinator record framing):

- OffsetCommitKey v1: ``group`` string, ``topic`` string, ``partition`` int32; value OffsetCommitValue
  v3: ``offset`` int64, ``leaderEpoch`` int32, ``metadata`` string, ``commitTimestamp`` int64.
- GroupMetadataKey v2: ``group`` string; value GroupMetadataValue v3: ``protocolType`` string,
  ``generation`` int32, ``protocol`` nullable string, ``leader`` nullable string,
  ``currentStateTimestamp`` int64, ``members`` [MemberMetadata v3].

A null value is a tombstone: it deletes the key. Older value versions (OffsetCommitValue v0-v1,
GroupMetadataValue v0-v2) are decoded too, since Kafka wrote them.

Which partition holds a group: ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`` with
Java's ``String.hashCode``, so a group lands where Kafka would put it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A ``__consumer_offsets`` record that does not decode (a corrupt or foreign record)."""


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, 32-bit signed overflow."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % n``; ``Utils.abs(Integer.MIN_VALUE)`` is 0."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


# --- a tiny reader/writer for the classic (non-flexible) encodings -------------------------------------


class _Writer:
    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def i16(self, v: int) -> _Writer:
        self.out += _I16.pack(v)
        return self

    def i32(self, v: int) -> _Writer:
        self.out += _I32.pack(v)
        return self

    def i64(self, v: int) -> _Writer:
        self.out += _I64.pack(v)
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode("utf-8")
        self.i16(len(data))
        self.out += data
        return self

    def bytes_(self, v: bytes) -> _Writer:
        self.i32(len(v))
        self.out += v
        return self


class RecordReader:
    """Reads a ``__consumer_offsets`` key or value; any shortfall is a RecordFormatError. The KIP-848
    records (consumer_group_records) extend it with their flexible-version fields."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise RecordFormatError(f"record runs past its end ({end} > {len(self.buf)} bytes)")
        data = self.buf[self.pos : end]
        self.pos = end
        return data

    def i8(self) -> int:
        value: int = _I8.unpack(self._take(1))[0]
        return value

    def i16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def i64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def _text(self, n: int) -> str:
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"string is not UTF-8: {exc}") from None

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n == -1 else self._text(n)

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise RecordFormatError("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n == -1 else self._take(n)


# --- keys --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


RecordKey = OffsetKey | GroupKey


def encode_key(key: RecordKey) -> bytes:
    if isinstance(key, OffsetKey):
        w = _Writer().i16(OFFSET_COMMIT_KEY_VERSION).string(key.group_id).string(key.topic)
        return bytes(w.i32(key.partition).out)
    return bytes(_Writer().i16(GROUP_METADATA_KEY_VERSION).string(key.group_id).out)


def decode_key(data: bytes) -> RecordKey:
    r = RecordReader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    raise RecordFormatError(f"unknown __consumer_offsets key version {version}")


# --- values ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberValue, ...]


def encode_offset_value(value: OffsetValue) -> bytes:
    w = _Writer().i16(OFFSET_COMMIT_VALUE_VERSION).i64(value.offset).i32(value.leader_epoch)
    return bytes(w.string(value.metadata).i64(value.commit_timestamp_ms).out)


def decode_offset_value(data: bytes) -> OffsetValue:
    r = RecordReader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp_ms = r.i64()
    if version == 1:
        r.i64()  # expireTimestamp: retention is the broker's business now (KIP-211)
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp_ms)


def encode_group_value(value: GroupValue) -> bytes:
    w = _Writer().i16(GROUP_METADATA_VALUE_VERSION).string(value.protocol_type).i32(value.generation)
    w.string(value.protocol).string(value.leader).i64(value.current_state_timestamp_ms)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout_ms).i32(m.session_timeout_ms).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.out)


def decode_group_value(data: bytes) -> GroupValue:
    r = RecordReader(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    timestamp_ms = r.i64() if version >= 2 else -1
    count = r.i32()
    if count < 0 or count > len(data):
        raise RecordFormatError(f"member count {count} in a {len(data)}-byte record")
    members = []
    for _ in range(count):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout_ms = r.i32() if version >= 1 else -1
        session_timeout_ms = r.i32()
        if version == 0:
            rebalance_timeout_ms = session_timeout_ms
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                r.bytes_(),
                r.bytes_(),
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, timestamp_ms, tuple(members))


# --- consumer protocol (for OffsetDelete and the CLI) ---------------------------------------------------


def subscribed_topics(subscription: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (any version: the topics come first)."""
    r = RecordReader(subscription)
    r.i16()
    count = r.i32()
    if count < 0 or count > len(subscription):
        raise RecordFormatError(f"topic count {count} in a {len(subscription)}-byte subscription")
    return {r.string() for _ in range(count)}


def assigned_partitions(assignment: bytes) -> list[tuple[str, list[int]]]:
    """Partitions of a ConsumerProtocolAssignment (any version: the partitions come first)."""
    if not assignment:
        return []
    r = RecordReader(assignment)
    r.i16()
    out: list[tuple[str, list[int]]] = []
    count = r.i32()
    if count < 0 or count > len(assignment):
        raise RecordFormatError(f"topic count {count} in a {len(assignment)}-byte assignment")
    for _ in range(count):
        topic = r.string()
        n = r.i32()
        if n < 0 or n > len(assignment):
            raise RecordFormatError(f"partition count {n} in a {len(assignment)}-byte assignment")
        out.append((topic, [r.i32() for _ in range(n)]))
    return out


__all__ = [
    "OFFSETS_TOPIC",
    "GroupKey",
    "GroupValue",
    "MemberValue",
    "OffsetKey",
    "OffsetValue",
    "RecordFormatError",
    "RecordKey",
    "assigned_partitions",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_value",
    "encode_key",
    "encode_offset_value",
    "java_string_hash",
    "partition_for",
    "subscribed_topics",
]
