"""KRaft metadata records: the schemas, the frame around each record, and the metadata versions.

Rules (kafka-facts.md §7.1, Kafka ``AbstractApiMessageSerde``):

1. A metadata record is one Kafka record (null key) whose value is ``frameVersion:uvarint`` (= 1),
   ``apiKey:uvarint``, ``version:uvarint`` and then the message body in the flexible ("compact")
   encoding, which ends with a tagged-field section.
2. The reader rejects, with ``MetadataRecordError``: frame version 0 (the 2.8 preview) or any value
   other than 1; an api key or version above 32767; an unknown api key; a version the record type does
   not define; a body that does not parse or is cut short; and any bytes after the body
   ("Found N byte(s) of garbage after <apiKey>").
3. The schemas live in ``metadata/schemas/*.json`` (Kafka's field names, types, versions and tags) and
   are loaded by kafka-python's ``ApiData`` loader, so field attributes are Kafka's names in snake_case
   (``NextProducerId`` -> ``next_producer_id``). Two things the loader cannot do are done here by hand:
   records with no fields at all (NoOpRecord, EndTransactionRecord), and strict reads (a short read
   anywhere, including inside an unknown tagged field, is an error rather than a silent truncation).
4. kafka-python reads the all-zero uuid as ``None`` (and writes ``None`` as zeros); readers of decoded
   messages map ``None`` back to ``ZERO_UUID`` (see ``uuid_or_zero``).

Messages are kafka-python data containers and are mutable; nothing here or in the image mutates a
message after building it. Images keep their own frozen copies.
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kafka.protocol.api_data import ApiData as _KafkaApiData

from pykraft.core.uuid import ZERO_UUID

_SCHEMAS: Final = "pykraft.metadata.schemas"
# kafka-python is untyped; its class keyword ``load_json=`` reads metadata/schemas/<ClassName>.json.
ApiData: Any = _KafkaApiData

# Kafka's AbstractApiMessageSerde.DEFAULT_FRAME_VERSION; 0 was the KRaft preview in 2.8.
METADATA_FRAME_VERSION: Final = 1
# Frame header values are read as unsigned varints and must fit a Java short.
FRAME_VALUE_MAX: Final = 32767
# Kafka's ByteUtils.readUnsignedVarint reads at most 5 bytes (32 bits).
_UVARINT32_BYTES_MAX: Final = 5


class MetadataRecordError(ValueError):
    """A metadata record's bytes do not parse (Kafka's MetadataParseException)."""


class MetadataReplayError(RuntimeError):
    """A well-formed record cannot be applied to the current state: the log is inconsistent.

    Kafka throws a RuntimeException in the same places (e.g. a PartitionRecord for an unknown topic,
    a ProducerIdsRecord that moves backwards); the metadata loader treats it as fatal.
    """


# --- metadata.version ---------------------------------------------------------------------------


class MetadataVersion:
    """Feature levels of ``metadata.version`` that pykraft knows (Kafka ``MetadataVersion.java``).

    pykraft writes 3.9-IV0 (feature level 21; Kafka's LATEST_PRODUCTION at the M baseline is 4.0-IV0, 22):
    metadata transactions (>= 3.6-IV1), directory assignment (>= 3.7-IV2, so RegisterBrokerRecord v3 and
    PartitionRecord v1), no ELR (4.0-IV1). ``LATEST_PRODUCTION`` here means the level pykraft bootstraps.
    """

    FEATURE_NAME: Final = "metadata.version"
    IBP_3_3_IV3: Final = 7
    IBP_3_4_IV0: Final = 8
    IBP_3_6_IV1: Final = 13
    IBP_3_7_IV2: Final = 17
    IBP_3_9_IV0: Final = 21
    IBP_4_0_IV1: Final = 23
    LATEST_PRODUCTION: Final = IBP_3_9_IV0

    @staticmethod
    def is_metadata_transaction_supported(level: int) -> bool:
        return level >= MetadataVersion.IBP_3_6_IV1

    @staticmethod
    def register_broker_record_version(level: int) -> int:
        # Kafka: 3 with directory assignment (LogDirs), 2 with ZK migration, 1 with controlled shutdown.
        if level >= MetadataVersion.IBP_3_7_IV2:
            return 3
        if level >= MetadataVersion.IBP_3_4_IV0:
            return 2
        if level >= MetadataVersion.IBP_3_3_IV3:
            return 1
        return 0

    @staticmethod
    def partition_record_version(level: int) -> int:
        # Kafka: 2 with ELR (KIP-966), 1 with directory assignment (KIP-858). Same for PartitionChange.
        if level >= MetadataVersion.IBP_4_0_IV1:
            return 2
        if level >= MetadataVersion.IBP_3_7_IV2:
            return 1
        return 0


# --- record types -------------------------------------------------------------------------------
# Each class name equals its schema file name; the loader reads metadata/schemas/<name>.json.


class RegisterBrokerRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class UnregisterBrokerRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class TopicRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class PartitionRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ConfigRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class PartitionChangeRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class FenceBrokerRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class UnfenceBrokerRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class RemoveTopicRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class FeatureLevelRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ProducerIdsRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class BrokerRegistrationChangeRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class BeginTransactionRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class AbortTransactionRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class UserScramCredentialRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class RemoveUserScramCredentialRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class AccessControlEntryRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class RemoveAccessControlEntryRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ClusterIdRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class ClientQuotaRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class _EmptyRecord:
    """A record type with no fields: only a tagged-field section on the wire.

    kafka-python's loader cannot build a struct with zero fields, so these two are written by hand.
    Unknown tagged fields are skipped on read, as Kafka's generated code does.
    """

    api_key: int = -1
    valid_versions: tuple[int, int] = (0, 0)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NoOpRecord(_EmptyRecord):
    api_key = 20


class EndTransactionRecord(_EmptyRecord):
    api_key = 24


# KIP-1262 (proposal; Kafka N commit 16b5f8ca): ClusterIdRecord is key 29. Later Kafka trunk reuses 29 for
# UnregisterControllerRecord (KIP-1312), so the key is one named constant that can move.
CLUSTER_ID_RECORD_API_KEY: Final = 29

RECORD_TYPES_BY_API_KEY: Final[dict[int, type[Any]]] = {
    0: RegisterBrokerRecord,
    1: UnregisterBrokerRecord,
    2: TopicRecord,
    3: PartitionRecord,
    4: ConfigRecord,
    5: PartitionChangeRecord,
    7: FenceBrokerRecord,
    8: UnfenceBrokerRecord,
    9: RemoveTopicRecord,
    11: UserScramCredentialRecord,
    12: FeatureLevelRecord,
    14: ClientQuotaRecord,
    15: ProducerIdsRecord,
    17: BrokerRegistrationChangeRecord,
    18: AccessControlEntryRecord,
    19: RemoveAccessControlEntryRecord,
    20: NoOpRecord,
    22: RemoveUserScramCredentialRecord,
    23: BeginTransactionRecord,
    24: EndTransactionRecord,
    25: AbortTransactionRecord,
    CLUSTER_ID_RECORD_API_KEY: ClusterIdRecord,
}
API_KEYS_BY_RECORD_TYPE: Final[dict[type[Any], int]] = {t: k for k, t in RECORD_TYPES_BY_API_KEY.items()}


def valid_versions(record_type: type[Any]) -> tuple[int, int]:
    """The inclusive (lowest, highest) version the schema of ``record_type`` defines."""
    if issubclass(record_type, _EmptyRecord):
        return record_type.valid_versions
    low, high = record_type.valid_versions
    return int(low), int(high)


def uuid_or_zero(value: uuid.UUID | None) -> uuid.UUID:
    """kafka-python reads the all-zero uuid as None; the image and controller always hold a UUID."""
    return ZERO_UUID if value is None else value


@dataclass(frozen=True, slots=True, eq=True)
class ApiMessageAndVersion:
    """One metadata record: its type key, schema version and message (Kafka ``ApiMessageAndVersion``)."""

    api_key: int
    version: int
    message: Any

    @classmethod
    def of(cls, message: Any, version: int = 0) -> ApiMessageAndVersion:
        api_key = API_KEYS_BY_RECORD_TYPE[type(message)]
        low, high = valid_versions(type(message))
        assert low <= version <= high, f"{type(message).__name__} has no version {version}"
        return cls(api_key=api_key, version=version, message=message)


# --- framing ------------------------------------------------------------------------------------


def _uvarint(value: int) -> bytes:
    assert value >= 0
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _StrictReader(io.BytesIO):
    """A BytesIO whose sized reads never come up short: a short read means the record was cut off."""

    def read(self, size: int | None = -1, /) -> bytes:
        data = super().read(size)
        if size is not None and size >= 0 and len(data) != size:
            raise MetadataRecordError(f"record truncated: wanted {size} byte(s), {len(data)} left")
        return data

    def remaining(self) -> int:
        return len(self.getbuffer()) - self.tell()


def _read_frame_value(reader: _StrictReader, entity: str) -> int:
    """An unsigned varint that must fit a Java short (AbstractApiMessageSerde.unsignedIntToShort)."""
    try:
        value = _read_uvarint32(reader)
    except MetadataRecordError as error:
        raise MetadataRecordError(f"Error while reading {entity}: {error}") from error
    if value > FRAME_VALUE_MAX:
        raise MetadataRecordError(f"Value for {entity} was too large.")
    return value


def _encode_body(message: Any, version: int) -> bytes:
    if isinstance(message, _EmptyRecord):
        return b"\x00"  # an empty tagged-field section
    encoded: bytes = type(message)._struct.encode(message, version=version, compact=True, tagged=True)
    return encoded


def _skip_tagged_fields(reader: _StrictReader) -> None:
    count = _read_uvarint32(reader)
    for _ in range(count):
        _read_uvarint32(reader)  # tag
        reader.read(_read_uvarint32(reader))


def _read_uvarint32(reader: _StrictReader) -> int:
    value = 0
    for index in range(_UVARINT32_BYTES_MAX):
        byte = reader.read(1)[0]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value
    raise MetadataRecordError("unsigned varint longer than 5 bytes")


def _decode_body(record_type: type[Any], reader: _StrictReader, version: int) -> Any:
    if issubclass(record_type, _EmptyRecord):
        _skip_tagged_fields(reader)
        return record_type()
    return record_type._struct.decode(reader, version=version, compact=True, tagged=True)


def encode_metadata_record(record: ApiMessageAndVersion) -> bytes:
    """The value bytes of one metadata record: frame version, api key, version, flexible body."""
    record_type = RECORD_TYPES_BY_API_KEY.get(record.api_key)
    assert record_type is not None, f"unknown metadata record api key {record.api_key}"
    assert type(record.message) is record_type, f"{type(record.message).__name__} is not key {record.api_key}"
    low, high = valid_versions(record_type)
    assert low <= record.version <= high, f"{record_type.__name__} has no version {record.version}"
    encoder = _ENCODERS.get(record.api_key)
    if encoder is not None:
        # Every api key and version pykraft knows fits one uvarint byte.
        return bytes((METADATA_FRAME_VERSION, record.api_key, record.version)) + encoder(
            record.message, record.version
        )
    return encode_metadata_record_generic(record)


def encode_metadata_record_generic(record: ApiMessageAndVersion) -> bytes:
    """``encode_metadata_record`` through kafka-python's schema-driven encoder: the reference the
    hand-written encoders are tested against, and the path of the record types without one."""
    header = _uvarint(METADATA_FRAME_VERSION) + _uvarint(record.api_key) + _uvarint(record.version)
    return header + _encode_body(record.message, record.version)


def decode_metadata_record(value: bytes | bytearray | memoryview) -> ApiMessageAndVersion:
    """Parse one metadata record value; any malformation raises ``MetadataRecordError`` (§7.1).

    The record types a large metadata log is made of (partitions, partition changes, topics, features,
    producer-id blocks, the empty markers) have hand-written decoders that build the same message objects
    as kafka-python's generic decoder (tests/unit/test_metadata_record_codecs.py holds them equal); every
    other type, and any frame header that is not three one-byte varints, takes the generic path.
    """
    buf = value if type(value) is bytes else bytes(value)
    if len(buf) >= 3 and buf[0] == METADATA_FRAME_VERSION and buf[1] < 0x80 and buf[2] < 0x80:
        api_key = buf[1]
        version = buf[2]
        entry = _DECODERS.get(api_key)
        if entry is not None and entry[1] <= version <= entry[2]:
            try:
                message, pos = entry[0](buf, 3, version)
            except MetadataRecordError:
                raise
            except (IndexError, struct.error) as error:
                raise MetadataRecordError(f"record truncated: {error}") from error
            except ValueError as error:  # bad UTF-8
                raise MetadataRecordError(
                    f"Failed to deserialize record with type {api_key}: {error}"
                ) from error
            if pos != len(buf):
                raise MetadataRecordError(f"Found {len(buf) - pos} byte(s) of garbage after {api_key}")
            return ApiMessageAndVersion(api_key, version, message)
    return decode_metadata_record_generic(buf)


def decode_metadata_record_generic(value: bytes | bytearray | memoryview) -> ApiMessageAndVersion:
    """``decode_metadata_record`` through kafka-python's schema-driven decoder (with strict reads): the
    reference the hand-written decoders are tested against, and the path of every other record type."""
    reader = _StrictReader(bytes(value))
    frame_version = _read_frame_value(reader, "frame version")
    if frame_version == 0:
        raise MetadataRecordError(
            "Could not deserialize metadata record with frame version 0. Note that upgrades from the "
            "preview release of KRaft in 2.8 to newer versions are not supported."
        )
    if frame_version != METADATA_FRAME_VERSION:
        raise MetadataRecordError(
            f"Could not deserialize metadata record due to unknown frame version {frame_version}"
            f"(only frame version {METADATA_FRAME_VERSION} is supported)"
        )
    api_key = _read_frame_value(reader, "type")
    version = _read_frame_value(reader, "version")
    record_type = RECORD_TYPES_BY_API_KEY.get(api_key)
    if record_type is None:
        raise MetadataRecordError(f"Unknown metadata id {api_key}")
    low, high = valid_versions(record_type)
    if not low <= version <= high:
        raise MetadataRecordError(
            f"Failed to deserialize record with type {api_key}: version {version} is not in {low}-{high}"
        )
    try:
        message = _decode_body(record_type, reader, version)
    except MetadataRecordError:
        raise
    except (ValueError, struct.error, IndexError, TypeError, OverflowError) as error:
        # kafka-python raises these on malformed bodies (bad uuid length, bad utf-8, short struct).
        raise MetadataRecordError(f"Failed to deserialize record with type {api_key}: {error}") from error
    garbage_bytes = reader.remaining()
    if garbage_bytes > 0:
        raise MetadataRecordError(f"Found {garbage_bytes} byte(s) of garbage after {api_key}")
    return ApiMessageAndVersion(api_key=api_key, version=version, message=message)


# --- hand-written codecs for the records a big metadata log is made of ---------------------------
#
# Measured (bench/metadata_restart.py): kafka-python's generic decoder costs ~45 us per record, most of a
# restart. These codecs read and write the same bytes with struct and build the kafka-python message
# objects directly (every slot set, as the generic decoder leaves them, so ``==``, ``repr`` and
# re-encoding behave the same). Reads are strict like the generic path, and stricter where Kafka is:
# a null in a non-nullable field, or a known tagged field whose declared size is not what it holds, is
# a MetadataRecordError. Unknown tagged fields are kept in ``unknown_tags`` as kafka-python keeps them.

_Decoder = Callable[[bytes, int, int], tuple[Any, int]]
_Encoder = Callable[[Any, int], bytes]
_TagReader = Callable[[bytes, int, str], tuple[Any, int]]

_INT8: Final = struct.Struct(">b")
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_ID_AND_UUID: Final = struct.Struct(">i16s")
_THREE_INT32: Final = struct.Struct(">iii")
_PRODUCER_IDS_BODY: Final = struct.Struct(">iqq")
_INT32_ARRAYS: Final = tuple(struct.Struct(f">{n}i") for n in range(64))
_ZERO_UUID_BYTES: Final = bytes(16)
# Topic ids repeat in every partition record: decoding 16 bytes into a uuid.UUID costs more than the rest
# of a PartitionChangeRecord, so decoded ids are memoized (immutable values; bounded, cleared when full).
_UUID_CACHE_MAX: Final = 1 << 16
_uuid_cache: dict[bytes, uuid.UUID | None] = {_ZERO_UUID_BYTES: None}
_new_message: Final = object.__new__


def _truncated(what: str) -> MetadataRecordError:
    return MetadataRecordError(f"record truncated: {what} runs past the end of the record")


def _read_uvarint_at(buf: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for index in range(_UVARINT32_BYTES_MAX):
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value, pos
    raise MetadataRecordError("unsigned varint longer than 5 bytes")


def _uuid_of(raw: bytes) -> uuid.UUID | None:
    """kafka-python's reading of 16 uuid bytes: the all-zero uuid is None."""
    found = _uuid_cache.get(raw, _uuid_cache)
    if found is not _uuid_cache:
        return found  # type: ignore[return-value]
    if len(raw) != 16:
        raise _truncated("a uuid")
    value = uuid.UUID(bytes=raw)
    if len(_uuid_cache) >= _UUID_CACHE_MAX:
        _uuid_cache.clear()
        _uuid_cache[_ZERO_UUID_BYTES] = None
    _uuid_cache[raw] = value
    return value


def _read_uuid(buf: bytes, pos: int, name: str) -> tuple[uuid.UUID | None, int]:
    return _uuid_of(buf[pos : pos + 16]), pos + 16


def _read_length(buf: bytes, pos: int, name: str, nullable: bool) -> tuple[int, int]:
    """A compact length: uvarint N + 1, 0 meaning null (-1 here)."""
    length = buf[pos]
    if length < 0x80:
        pos += 1
    else:
        length, pos = _read_uvarint_at(buf, pos)
    length -= 1
    if length < 0 and not nullable:
        raise MetadataRecordError(f"non-nullable field {name} was serialized as null")
    return length, pos


def _read_int32_array(
    buf: bytes, pos: int, name: str, nullable: bool = False
) -> tuple[list[int] | None, int]:
    count, pos = _read_length(buf, pos, name, nullable)
    if count <= 0:
        return (None if count < 0 else []), pos
    end = pos + 4 * count
    if end > len(buf):
        raise _truncated(name)
    if count < len(_INT32_ARRAYS):
        return list(_INT32_ARRAYS[count].unpack_from(buf, pos)), end
    return list(struct.unpack_from(f">{count}i", buf, pos)), end


def _read_nullable_int32_array(buf: bytes, pos: int, name: str) -> tuple[list[int] | None, int]:
    return _read_int32_array(buf, pos, name, True)


def _read_uuid_array(
    buf: bytes, pos: int, name: str, nullable: bool = False
) -> tuple[list[uuid.UUID | None] | None, int]:
    count, pos = _read_length(buf, pos, name, nullable)
    if count < 0:
        return None, pos
    end = pos + 16 * count
    if end > len(buf):
        raise _truncated(name)
    return [_uuid_of(buf[p : p + 16]) for p in range(pos, end, 16)], end


def _read_nullable_uuid_array(buf: bytes, pos: int, name: str) -> tuple[list[uuid.UUID | None] | None, int]:
    return _read_uuid_array(buf, pos, name, True)


def _read_string(buf: bytes, pos: int, name: str) -> tuple[str, int]:
    size, pos = _read_length(buf, pos, name, False)
    end = pos + size
    if end > len(buf):
        raise _truncated(name)
    return buf[pos:end].decode("utf-8"), end


def _read_int8(buf: bytes, pos: int, name: str) -> tuple[int, int]:
    return int(_INT8.unpack_from(buf, pos)[0]), pos + 1


def _read_int32(buf: bytes, pos: int, name: str) -> tuple[int, int]:
    return int(_INT32.unpack_from(buf, pos)[0]), pos + 4


def _read_tagged_fields(buf: bytes, pos: int, message: Any, known: dict[int, tuple[str, _TagReader]]) -> int:
    """The tagged-field section: known tags set their field (and join ``message.tags``), unknown ones are
    kept raw in ``message.unknown_tags`` (kafka-python's names: ``_<tag>``)."""
    # One-byte varints inline (every count, tag and size pykraft and Kafka write in these records).
    count = buf[pos]
    if count < 0x80:
        pos += 1
    else:
        count, pos = _read_uvarint_at(buf, pos)
    for _ in range(count):
        tag = buf[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _read_uvarint_at(buf, pos)
        size = buf[pos]
        if size < 0x80:
            pos += 1
        else:
            size, pos = _read_uvarint_at(buf, pos)
        end = pos + size
        if end > len(buf):
            raise _truncated(f"tagged field {tag}")
        field = known.get(tag)
        if field is None:
            if message.unknown_tags is None:
                message.unknown_tags = {}
            message.unknown_tags[f"_{tag}"] = buf[pos:end]
        else:
            name, reader = field
            value, field_end = reader(buf, pos, name)
            if field_end != end:
                raise MetadataRecordError(
                    f"tagged field {name} declares {size} byte(s) but holds {field_end - pos}"
                )
            setattr(message, name, value)
            if message.tags is None:
                message.tags = set()
            message.tags.add(name)
        pos = end
    return pos


def _tags_by_version(
    fields: dict[int, tuple[str, _TagReader, int]], high: int
) -> tuple[dict[int, tuple[str, _TagReader]], ...]:
    """Per version: the tags it defines (a tag from a later version is an unknown tag, as in Kafka)."""
    return tuple(
        {tag: (name, reader) for tag, (name, reader, since) in fields.items() if version >= since}
        for version in range(high + 1)
    )


def _default(record_type: Any, name: str) -> Any:
    return record_type._struct.fields[name].default


_NO_TAGS: Final[dict[int, tuple[str, _TagReader]]] = {}
_PARTITION_RECORD_TAGS: Final = _tags_by_version(
    {
        0: ("leader_recovery_state", _read_int8, 0),
        1: ("eligible_leader_replicas", _read_nullable_int32_array, 2),
        2: ("last_known_elr", _read_nullable_int32_array, 2),
    },
    2,
)
_PARTITION_CHANGE_RECORD_TAGS: Final = _tags_by_version(
    {
        0: ("isr", _read_nullable_int32_array, 0),
        1: ("leader", _read_int32, 0),
        2: ("replicas", _read_nullable_int32_array, 0),
        3: ("removing_replicas", _read_nullable_int32_array, 0),
        4: ("adding_replicas", _read_nullable_int32_array, 0),
        5: ("leader_recovery_state", _read_int8, 0),
        8: ("directories", _read_nullable_uuid_array, 1),
        6: ("eligible_leader_replicas", _read_nullable_int32_array, 2),
        7: ("last_known_elr", _read_nullable_int32_array, 2),
    },
    2,
)
_DIRECTORIES_DEFAULT: Final = _default(PartitionRecord, "directories")


def _decode_partition_record(buf: bytes, pos: int, version: int) -> tuple[Any, int]:
    message = _new_message(PartitionRecord)
    partition_id, raw_topic_id = _ID_AND_UUID.unpack_from(buf, pos)
    message.partition_id = partition_id
    message.topic_id = _uuid_of(raw_topic_id)
    message.replicas, pos = _read_int32_array(buf, pos + 20, "replicas")
    message.isr, pos = _read_int32_array(buf, pos, "isr")
    message.removing_replicas, pos = _read_int32_array(buf, pos, "removingReplicas")
    message.adding_replicas, pos = _read_int32_array(buf, pos, "addingReplicas")
    message.leader, message.leader_epoch, message.partition_epoch = _THREE_INT32.unpack_from(buf, pos)
    pos += 12
    if version >= 1:
        message.directories, pos = _read_uuid_array(buf, pos, "directories")
    else:
        message.directories = _DIRECTORIES_DEFAULT
    message.leader_recovery_state = 0
    message.eligible_leader_replicas = None
    message.last_known_elr = None
    message._version = version
    message.tags = None
    message.unknown_tags = None
    if buf[pos] == 0:
        return message, pos + 1
    return message, _read_tagged_fields(buf, pos, message, _PARTITION_RECORD_TAGS[version])


def _read_int32_tuple(buf: bytes, pos: int, name: str) -> tuple[tuple[int, ...], int]:
    count, pos = _read_length(buf, pos, name, False)
    end = pos + 4 * count
    if end > len(buf):
        raise _truncated(name)
    if count < len(_INT32_ARRAYS):
        return _INT32_ARRAYS[count].unpack_from(buf, pos), end
    return struct.unpack_from(f">{count}i", buf, pos), end


PartitionRecordFields = tuple[
    uuid.UUID | None,  # topic id
    int,  # partition id
    tuple[int, ...],  # replicas
    tuple[int, ...],  # isr
    tuple[int, ...],  # removing replicas
    tuple[int, ...],  # adding replicas
    int,  # leader
    int,  # leader epoch
    int,  # partition epoch
    tuple[uuid.UUID | None, ...],  # directories (empty before v1)
]


def decode_partition_record_fields(value: bytes) -> PartitionRecordFields | None:
    """A snapshot loader's shortcut: a PartitionRecord value without tagged fields, as plain tuples
    (no message object); as strict as ``decode_metadata_record``. None for any other value, including a
    PartitionRecord carrying tagged fields: decode those with ``decode_metadata_record``."""
    if len(value) < 4 or value[0] != METADATA_FRAME_VERSION or value[1] != 3 or value[2] > 2:
        return None
    version = value[2]
    try:
        partition_id, raw_topic_id = _ID_AND_UUID.unpack_from(value, 3)
        topic_id = _uuid_of(raw_topic_id)
        replicas, pos = _read_int32_tuple(value, 23, "replicas")
        isr, pos = _read_int32_tuple(value, pos, "isr")
        removing, pos = _read_int32_tuple(value, pos, "removingReplicas")
        adding, pos = _read_int32_tuple(value, pos, "addingReplicas")
        leader, leader_epoch, partition_epoch = _THREE_INT32.unpack_from(value, pos)
        pos += 12
        directories: tuple[uuid.UUID | None, ...] = ()
        if version >= 1:
            dirs, pos = _read_uuid_array(value, pos, "directories")
            assert dirs is not None
            directories = tuple(dirs)
        if value[pos] != 0:
            return None
    except (IndexError, struct.error) as error:
        raise MetadataRecordError(f"record truncated: {error}") from error
    if pos + 1 != len(value):
        raise MetadataRecordError(f"Found {len(value) - pos - 1} byte(s) of garbage after 3")
    return (
        topic_id,
        partition_id,
        replicas,
        isr,
        removing,
        adding,
        leader,
        leader_epoch,
        partition_epoch,
        directories,
    )


def _decode_partition_change_record(buf: bytes, pos: int, version: int) -> tuple[Any, int]:
    message = _new_message(PartitionChangeRecord)
    partition_id, raw_topic_id = _ID_AND_UUID.unpack_from(buf, pos)
    message.partition_id = partition_id
    message.topic_id = _uuid_of(raw_topic_id)
    message.isr = None
    message.leader = -2
    message.replicas = None
    message.removing_replicas = None
    message.adding_replicas = None
    message.leader_recovery_state = -1
    message.directories = None
    message.eligible_leader_replicas = None
    message.last_known_elr = None
    message._version = version
    message.tags = None
    message.unknown_tags = None
    pos += 20
    if buf[pos] == 0:
        return message, pos + 1
    return message, _read_tagged_fields(buf, pos, message, _PARTITION_CHANGE_RECORD_TAGS[version])


def _decode_topic_record(buf: bytes, pos: int, version: int) -> tuple[Any, int]:
    message = _new_message(TopicRecord)
    message.name, pos = _read_string(buf, pos, "name")
    message.topic_id, pos = _read_uuid(buf, pos, "topicId")
    message._version = version
    message.tags = None
    message.unknown_tags = None
    return message, _read_tagged_fields(buf, pos, message, _NO_TAGS)


def _decode_feature_level_record(buf: bytes, pos: int, version: int) -> tuple[Any, int]:
    message = _new_message(FeatureLevelRecord)
    message.name, pos = _read_string(buf, pos, "name")
    message.feature_level = _INT16.unpack_from(buf, pos)[0]
    message._version = version
    message.tags = None
    message.unknown_tags = None
    return message, _read_tagged_fields(buf, pos + 2, message, _NO_TAGS)


def _decode_producer_ids_record(buf: bytes, pos: int, version: int) -> tuple[Any, int]:
    message = _new_message(ProducerIdsRecord)
    message.broker_id, message.broker_epoch, message.next_producer_id = _PRODUCER_IDS_BODY.unpack_from(
        buf, pos
    )
    message._version = version
    message.tags = None
    message.unknown_tags = None
    return message, _read_tagged_fields(buf, pos + _PRODUCER_IDS_BODY.size, message, _NO_TAGS)


def _empty_decoder(record_type: type[_EmptyRecord]) -> _Decoder:
    def decode(buf: bytes, pos: int, version: int) -> tuple[Any, int]:
        message = record_type()
        return message, _read_tagged_fields(buf, pos, _Unknown(), _NO_TAGS)

    return decode


class _Unknown:
    """Where the empty records' unknown tagged fields go (they are skipped, as Kafka's generated code does)."""

    unknown_tags: dict[str, bytes] | None = None


# --- writing ----------------------------------------------------------------------------------------


def _uuid_bytes(value: uuid.UUID | None) -> bytes:
    return _ZERO_UUID_BYTES if value is None else value.bytes


def _length_bytes(length: int) -> bytes:
    return bytes((length,)) if length < 0x80 else _uvarint(length)


def _int32_array_bytes(values: Any) -> bytes:
    if values is None:
        return b"\x00"
    count = len(values)
    packer = _INT32_ARRAYS[count] if count < len(_INT32_ARRAYS) else struct.Struct(f">{count}i")
    return _length_bytes(count + 1) + packer.pack(*values)


def _uuid_array_bytes(values: Any) -> bytes:
    if values is None:
        return b"\x00"
    return _length_bytes(len(values) + 1) + b"".join(_uuid_bytes(v) for v in values)


def _string_bytes(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    data = str(value).encode("utf-8")
    return _length_bytes(len(data) + 1) + data


def _tagged_bytes(tags: list[tuple[int, bytes]]) -> bytes:
    """kafka-python writes the tagged fields whose value differs from the default, in schema order."""
    if not tags:
        return b"\x00"
    out = [_length_bytes(len(tags))]
    for tag, data in tags:
        out.append(_length_bytes(tag))
        out.append(_length_bytes(len(data)))
        out.append(data)
    return b"".join(out)


def _encode_partition_record(message: Any, version: int) -> bytes:
    out = [
        _ID_AND_UUID.pack(message.partition_id, _uuid_bytes(message.topic_id)),
        _int32_array_bytes(message.replicas),
        _int32_array_bytes(message.isr),
        _int32_array_bytes(message.removing_replicas),
        _int32_array_bytes(message.adding_replicas),
        _THREE_INT32.pack(message.leader, message.leader_epoch, message.partition_epoch),
    ]
    if version >= 1:
        out.append(_uuid_array_bytes(message.directories))
    tags: list[tuple[int, bytes]] = []
    if message.leader_recovery_state != 0:
        tags.append((0, _INT8.pack(message.leader_recovery_state)))
    if version >= 2:
        if message.eligible_leader_replicas is not None:
            tags.append((1, _int32_array_bytes(message.eligible_leader_replicas)))
        if message.last_known_elr is not None:
            tags.append((2, _int32_array_bytes(message.last_known_elr)))
    out.append(_tagged_bytes(tags))
    return b"".join(out)


def _encode_partition_change_record(message: Any, version: int) -> bytes:
    head = _ID_AND_UUID.pack(message.partition_id, _uuid_bytes(message.topic_id))
    tags: list[tuple[int, bytes]] = []
    if message.isr is not None:
        tags.append((0, _int32_array_bytes(message.isr)))
    if message.leader != -2:
        tags.append((1, _INT32.pack(message.leader)))
    if message.replicas is not None:
        tags.append((2, _int32_array_bytes(message.replicas)))
    if message.removing_replicas is not None:
        tags.append((3, _int32_array_bytes(message.removing_replicas)))
    if message.adding_replicas is not None:
        tags.append((4, _int32_array_bytes(message.adding_replicas)))
    if message.leader_recovery_state != -1:
        tags.append((5, _INT8.pack(message.leader_recovery_state)))
    # Schema order (kafka-python's): Directories (tag 8) is declared before the ELR fields (tags 6, 7).
    if version >= 1 and message.directories is not None:
        tags.append((8, _uuid_array_bytes(message.directories)))
    if version >= 2:
        if message.eligible_leader_replicas is not None:
            tags.append((6, _int32_array_bytes(message.eligible_leader_replicas)))
        if message.last_known_elr is not None:
            tags.append((7, _int32_array_bytes(message.last_known_elr)))
    return head + _tagged_bytes(tags)


def _encode_topic_record(message: Any, version: int) -> bytes:
    return _string_bytes(message.name) + _uuid_bytes(message.topic_id) + b"\x00"


_DECODERS: Final[dict[int, tuple[_Decoder, int, int]]] = {
    2: (_decode_topic_record, 0, 0),
    3: (_decode_partition_record, 0, 2),
    5: (_decode_partition_change_record, 0, 2),
    12: (_decode_feature_level_record, 0, 0),
    15: (_decode_producer_ids_record, 0, 0),
    20: (_empty_decoder(NoOpRecord), 0, 0),
    24: (_empty_decoder(EndTransactionRecord), 0, 0),
}
_ENCODERS: Final[dict[int, _Encoder]] = {
    2: _encode_topic_record,
    3: _encode_partition_record,
    5: _encode_partition_change_record,
}
