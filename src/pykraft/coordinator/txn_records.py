"""Records of the ``__transaction_state`` topic, in Kafka's format plus KIP-360's persisted last epoch.

Key (TransactionLogKey v0, not flexible): ``version`` int16 = 0, ``TransactionalId`` string.

Value (TransactionLogValue v1, flexible; a null value is the tombstone of an expired transactional id):
``version`` int16 = 1, ``ProducerId`` int64, ``ProducerEpoch`` int16, ``TransactionTimeoutMs`` int32,
``TransactionStatus`` int8, ``TransactionPartitions`` compact nullable [``Topic`` compact string,
``PartitionIds`` compact [int32], tags], ``TransactionLastUpdateTimestampMs`` int64,
``TransactionStartTimestampMs`` int64, then tagged fields:

- tag 0 ``PreviousProducerId`` int64 (Kafka's own field; KIP-360's "LastProducerId"),
- tag 1 ``NextProducerId`` int64, tag 2 ``ClientTransactionVersion`` int16 (Kafka's; read and kept at their
  defaults here),
- tag 100 ``LastProducerEpoch`` int16 — pykraft's own. KIP-360 (the seed) persists the last epoch so a
  retried epoch bump that spans a coordinator failover gets the same answer; Kafka kept it in memory only
  (kafka-facts.md §3.4, §9) and fences such a retry. Kafka's readers skip unknown tags, so its tools still
  read these records. Default values are not written, as Kafka's serializer does.

Version 0 values (no tagged fields, not flexible) are decoded too, since Kafka writes them for
``transaction.version`` 0.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pykraft.protocol.wire import WireFormatError, put_uvarint, read_uvarint

TRANSACTION_STATE_TOPIC = "__transaction_state"
TXN_KEY_VERSION = 0
TXN_VALUE_VERSION = 1

TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2
TAG_LAST_PRODUCER_EPOCH = 100

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I8 = struct.Struct(">b")
_VALUE_FIXED = struct.Struct(">qhib")  # producer id, epoch, timeout, status
_TIMESTAMPS = struct.Struct(">qq")


class TxnRecordError(ValueError):
    """A ``__transaction_state`` record that does not decode."""


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: int
    # (topic, partitions) sorted; empty when the transaction holds none.
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    txn_last_update_timestamp_ms: int
    txn_start_timestamp_ms: int
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_txn_key(transactional_id: str) -> bytes:
    data = transactional_id.encode("utf-8")
    return _I16.pack(TXN_KEY_VERSION) + _I16.pack(len(data)) + data


def decode_txn_key(data: bytes) -> str:
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version != TXN_KEY_VERSION:
            raise TxnRecordError(f"TransactionLogKey version {version} (only 0 exists)")
        (length,) = _I16.unpack_from(data, 2)
    except struct.error as exc:
        raise TxnRecordError(f"TransactionLogKey is truncated: {exc}") from None
    if length < 0 or 4 + length != len(data):
        raise TxnRecordError(f"TransactionLogKey of {len(data)} bytes has a string of length {length}")
    try:
        return data[4:].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TxnRecordError(f"TransactionLogKey is not UTF-8: {exc}") from None


def _compact_string(out: bytearray, text: str) -> None:
    data = text.encode("utf-8")
    put_uvarint(out, len(data) + 1)
    out += data


def _tag(out: bytearray, tag: int, payload: bytes) -> None:
    put_uvarint(out, tag)
    put_uvarint(out, len(payload))
    out += payload


def encode_txn_value(value: TxnLogValue) -> bytes:
    out = bytearray(_I16.pack(TXN_VALUE_VERSION))
    out += _VALUE_FIXED.pack(value.producer_id, value.producer_epoch, value.txn_timeout_ms, value.state)
    if not value.partitions:
        put_uvarint(out, 0)  # null, as Kafka writes for Empty
    else:
        put_uvarint(out, len(value.partitions) + 1)
        for topic, partition_ids in value.partitions:
            _compact_string(out, topic)
            put_uvarint(out, len(partition_ids) + 1)
            for p in partition_ids:
                out += _I32.pack(p)
            put_uvarint(out, 0)
    out += _TIMESTAMPS.pack(value.txn_last_update_timestamp_ms, value.txn_start_timestamp_ms)
    tags: list[tuple[int, bytes]] = []
    if value.last_producer_id != -1:
        tags.append((TAG_PREVIOUS_PRODUCER_ID, _I64.pack(value.last_producer_id)))
    if value.next_producer_id != -1:
        tags.append((TAG_NEXT_PRODUCER_ID, _I64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        tags.append((TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(value.client_transaction_version)))
    if value.last_producer_epoch != -1:
        tags.append((TAG_LAST_PRODUCER_EPOCH, _I16.pack(value.last_producer_epoch)))
    put_uvarint(out, len(tags))
    for tag, payload in tags:
        _tag(out, tag, payload)
    return bytes(out)


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise TxnRecordError(f"TransactionLogValue is truncated at byte {self.pos}")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        return fmt.unpack(self.take(fmt.size))

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos)
        except WireFormatError as exc:
            raise TxnRecordError(f"TransactionLogValue: {exc}") from None
        return value

    def compact_length(self) -> int:
        """A compact array or string length: n+1, 0 meaning null (-1)."""
        return self.uvarint() - 1

    def string(self, flexible: bool) -> str:
        n = self.compact_length() if flexible else self.unpack(_I16)[0]
        if n < 0:
            raise TxnRecordError("TransactionLogValue: a null topic name")
        try:
            return self.take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TxnRecordError(f"TransactionLogValue: a topic name is not UTF-8: {exc}") from None


def decode_txn_value(data: bytes) -> TxnLogValue:
    reader = _Reader(data, 0)
    (version,) = reader.unpack(_I16)
    if version not in (0, 1):
        raise TxnRecordError(f"TransactionLogValue version {version} (0 and 1 exist)")
    flexible = version >= 1
    producer_id, producer_epoch, timeout_ms, state = reader.unpack(_VALUE_FIXED)
    count = reader.compact_length() if flexible else reader.unpack(_I32)[0]
    partitions: list[tuple[str, tuple[int, ...]]] = []
    for _ in range(max(count, 0)):
        topic = reader.string(flexible)
        n = reader.compact_length() if flexible else reader.unpack(_I32)[0]
        if n < 0:
            raise TxnRecordError("TransactionLogValue: a null partition list")
        ids = tuple(_I32.unpack(reader.take(4))[0] for _ in range(n))
        if flexible:
            _skip_tags(reader)
        partitions.append((topic, ids))
    last_update_ms, start_ms = reader.unpack(_TIMESTAMPS)
    extra = {"last_producer_id": -1, "next_producer_id": -1, "client_transaction_version": 0}
    last_producer_epoch = -1
    if flexible:
        for _ in range(reader.uvarint()):
            tag = reader.uvarint()
            payload = reader.take(reader.uvarint())
            try:
                if tag == TAG_PREVIOUS_PRODUCER_ID:
                    extra["last_producer_id"] = _I64.unpack(payload)[0]
                elif tag == TAG_NEXT_PRODUCER_ID:
                    extra["next_producer_id"] = _I64.unpack(payload)[0]
                elif tag == TAG_CLIENT_TRANSACTION_VERSION:
                    extra["client_transaction_version"] = _I16.unpack(payload)[0]
                elif tag == TAG_LAST_PRODUCER_EPOCH:
                    last_producer_epoch = _I16.unpack(payload)[0]
            except struct.error:
                raise TxnRecordError(f"TransactionLogValue: tag {tag} has {len(payload)} bytes") from None
    if reader.pos != len(data):
        raise TxnRecordError(f"TransactionLogValue has {len(data) - reader.pos} trailing byte(s)")
    return TxnLogValue(
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        tuple(partitions),
        last_update_ms,
        start_ms,
        last_producer_epoch=last_producer_epoch,
        **extra,
    )


def _skip_tags(reader: _Reader) -> None:
    for _ in range(reader.uvarint()):
        reader.uvarint()
        reader.take(reader.uvarint())


__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TxnLogValue",
    "TxnRecordError",
    "decode_txn_key",
    "decode_txn_value",
    "encode_txn_key",
    "encode_txn_value",
]
