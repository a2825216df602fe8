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


class ClusterIdRecord(ApiData, load_json=_SCHEMAS):  # type: ignore[call-arg]
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
    12: FeatureLevelRecord,
    15: ProducerIdsRecord,
    17: BrokerRegistrationChangeRecord,
    20: NoOpRecord,
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
    header = _uvarint(METADATA_FRAME_VERSION) + _uvarint(record.api_key) + _uvarint(record.version)
    return header + _encode_body(record.message, record.version)


def decode_metadata_record(value: bytes | bytearray | memoryview) -> ApiMessageAndVersion:
    """Parse one metadata record value; any malformation raises ``MetadataRecordError`` (§7.1)."""
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
