"""Topic compression.type (issue 27 item 4): the codecs against the clients' own, the recompression of a
batch in another codec (header fields, CRC, transactional bit kept; control batches untouched), the
KIP-390 levels, the leader's append (stored codec, idempotent dedup, LogAppendTime, max.message.bytes)
and the configs' checks. Pure, over in-memory stores."""

from __future__ import annotations

import dataclasses

import pytest
from aiokafka import codec as aiokafka_codec
from kafka import codec as kafka_codec

from pykraft.broker.replica_manager import ReplicaManager, topic_log_config
from pykraft.core.config import ConfigError, load_config
from pykraft.core.errors import ErrorCode
from pykraft.core.topic_configs import check_broker_config, check_topic_config, topic_names_of_broker_configs
from pykraft.log.partition_log import LogConfig
from pykraft.protocol import compression
from pykraft.protocol.records import (
    BATCH_HEADER_SIZE,
    Record,
    build_batch,
    decode_records,
    in_codec,
    read_batch_header,
    recompress_batches,
    rewrite_batch,
    scan_batches,
    validate_batches,
)
from tests.unit.test_producer_snapshot import MemoryOpener

NOW = 1_700_000_000_000
CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
PAYLOAD = b"".join(b"record %d of a batch, somewhat repetitive; " % i for i in range(5000))  # > 32 KiB


def batch(
    codec: int,
    n: int = 5,
    *,
    producer_id: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    leader_epoch: int = -1,
) -> bytearray:
    """A batch with distinct keys, values, headers and timestamps, in ``codec``."""
    records = [
        Record(b"k%d" % i, b"value-%d-" % i * 20, (("h", b"%d" % i),), offset=i, timestamp=NOW + 7 * i)
        for i in range(n)
    ]
    plain = build_batch(
        records,
        timestamp_ms=NOW,
        producer_id=producer_id,
        producer_epoch=3 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
        is_transactional=transactional,
        partition_leader_epoch=leader_epoch,
    )
    header = read_batch_header(plain)
    if codec == compression.NONE:
        return plain
    return rewrite_batch(header._replace(attributes=header.attributes | codec), records)


# --- the codecs --------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS[1:])
def test_codec_round_trip_and_the_clients_read_what_the_broker_writes(codec: int) -> None:
    name = compression.CODEC_NAMES[codec]
    packed = compression.compress(codec, PAYLOAD)
    assert len(packed) < len(PAYLOAD) // 3
    assert compression.decompress(codec, packed) == PAYLOAD
    assert compression.decompress(codec, memoryview(packed)) == PAYLOAD
    # kafka-python and aiokafka decode it with their own codecs.
    assert kafka_codec.__dict__[f"{name}_decode"](packed) == PAYLOAD
    assert aiokafka_codec.__dict__[f"{name}_decode"](packed) == PAYLOAD


@pytest.mark.parametrize("codec", CODECS[1:])
def test_the_broker_reads_what_the_clients_write(codec: int) -> None:
    name = compression.CODEC_NAMES[codec]
    for encode in (kafka_codec.__dict__[f"{name}_encode"], aiokafka_codec.__dict__[f"{name}_encode"]):
        assert compression.decompress(codec, encode(PAYLOAD)) == PAYLOAD


def test_snappy_is_xerial_framed_in_32k_blocks_and_raw_snappy_is_read_too() -> None:
    packed = compression.compress(compression.SNAPPY, PAYLOAD)
    assert packed[:16] == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    # librdkafka writes one raw snappy block.
    raw = kafka_codec.snappy_encode(PAYLOAD, xerial_compatible=False)
    assert compression.decompress(compression.SNAPPY, raw) == PAYLOAD


def test_lz4_frames_have_independent_blocks_as_kafka_reads_them() -> None:
    import lz4.frame

    info = lz4.frame.get_frame_info(compression.compress(compression.LZ4, PAYLOAD))
    assert info["block_linked"] is False and info["content_checksum"] is False


@pytest.mark.parametrize("codec", CODECS[1:])
def test_a_corrupt_body_is_a_codec_error_naming_the_codec(codec: int) -> None:
    packed = bytearray(compression.compress(codec, PAYLOAD))
    packed[len(packed) // 2 :] = b"\xff" * (len(packed) - len(packed) // 2)
    with pytest.raises(compression.CodecError, match=compression.CODEC_NAMES[codec]):
        compression.decompress(codec, bytes(packed[: len(packed) - 3]))
    with pytest.raises(compression.CodecError, match="unknown compression type 6"):
        compression.decompress(6, b"x")


def test_levels_change_what_is_written() -> None:
    for codec, low, high in ((compression.GZIP, 1, 9), (compression.LZ4, 1, 17), (compression.ZSTD, -5, 19)):
        fast, small = compression.compress(codec, PAYLOAD, low), compression.compress(codec, PAYLOAD, high)
        assert len(small) < len(fast), compression.CODEC_NAMES[codec]
        assert compression.decompress(codec, fast) == compression.decompress(codec, small) == PAYLOAD


# --- recompression of batches ----------------------------------------------------------------------------


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_recompression_keeps_every_header_field_and_the_records(source: int, target: int) -> None:
    original = batch(source, producer_id=42, base_sequence=17, transactional=True, leader_epoch=5)
    header = read_batch_header(original)
    assert in_codec([header], target) == (source == target)  # in it: the hot path, bytes as they came
    out, (rebuilt,) = recompress_batches(original, [header], target, None)
    if source == target:
        assert out == original
        return
    assert validate_batches(out) == [rebuilt]  # CRC and length right
    assert rebuilt.compression_type == target
    keep = ("base_offset", "partition_leader_epoch", "magic", "last_offset_delta", "base_timestamp")
    keep += ("max_timestamp", "producer_id", "producer_epoch", "base_sequence", "record_count")
    assert all(getattr(rebuilt, f) == getattr(header, f) for f in keep)
    assert rebuilt.is_transactional and not rebuilt.is_control
    assert rebuilt.attributes & ~0x07 == header.attributes & ~0x07
    assert decode_records(out) == decode_records(original)


def test_several_batches_only_those_in_another_codec_are_rebuilt_and_control_batches_never() -> None:
    marker = build_batch(
        [Record(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
        timestamp_ms=NOW,
        producer_id=42,
        producer_epoch=3,
        is_transactional=True,
        is_control=True,
    )
    parts = [batch(compression.ZSTD), batch(compression.GZIP, 3), marker, batch(compression.NONE, 2)]
    records = b"".join(parts)
    headers = validate_batches(records)
    assert not in_codec(headers, compression.ZSTD) and in_codec(headers[:1] + headers[2:3], compression.ZSTD)
    out, rebuilt = recompress_batches(records, headers, compression.ZSTD, 7)
    assert [h.compression_type for h in rebuilt] == [compression.ZSTD, compression.ZSTD, 0, compression.ZSTD]
    assert validate_batches(out) == rebuilt
    spans = [(pos, h.size_in_bytes) for pos, h in scan_batches(out)]
    assert out[spans[0][0] : sum(spans[0])] == parts[0] and out[spans[2][0] : sum(spans[2])] == marker
    for (pos, size), part in zip(spans, parts, strict=True):
        assert decode_records(out[pos : pos + size]) == decode_records(part)
    # The level asked for is the one used.
    gz = read_batch_header(parts[1])
    body = bytes(out[spans[1][0] + BATCH_HEADER_SIZE : sum(spans[1])])
    inflated = compression.decompress(compression.GZIP, bytes(parts[1][BATCH_HEADER_SIZE : gz.size_in_bytes]))
    assert body == compression.compress(compression.ZSTD, inflated, 7)


# --- the leader's append ---------------------------------------------------------------------------------


def stored(replicas: ReplicaManager, topic: str) -> list[tuple[int, bytes]]:
    """(codec, batch) of every batch in the log, as a fetch returns them."""
    part = replicas.partitions[(topic, 0)]
    data = b"".join(bytes(c) for c in part.log.read(0, 1 << 30).chunks)
    return [(h.compression_type, data[p : p + h.size_in_bytes]) for p, h in scan_batches(data)]


def replicas_for(**topics: dict[str, str]) -> ReplicaManager:
    base = LogConfig(segment_bytes=1 << 20, retention_ms=-1, retention_bytes=-1)
    replicas = ReplicaManager(MemoryOpener(), base, producer_id_expiration_ms=1 << 40)
    replicas.topic_log_config = lambda topic: topic_log_config(base, topics.get(topic, {}))
    for topic in topics:
        replicas.ensure_partition(topic, 0, NOW)
    return replicas


def test_append_stores_the_topics_codec_and_producer_keeps_each_batchs_own() -> None:
    topics = {name: {"compression.type": name} for name in compression.TOPIC_CODECS}
    replicas = replicas_for(producer={}, **topics)
    for topic in [*topics, "producer"]:
        part = replicas.partitions[(topic, 0)]
        for offset, codec in enumerate(CODECS):
            result = replicas.append(part, memoryview(batch(codec)), NOW)
            assert result.error_code == ErrorCode.NONE and result.base_offset == offset * 5, result
        batches = stored(replicas, topic)
        want = CODECS if topic == "producer" else [compression.TOPIC_CODECS[topic]] * len(CODECS)
        assert [codec for codec, _ in batches] == want
        for offset, (_codec, data) in enumerate(batches):
            records = decode_records(data)
            assert [r.offset for r in records] == list(range(offset * 5, offset * 5 + 5))
            assert records == [r._replace(offset=r.offset + offset * 5) for r in decode_records(batch(0))]


def test_idempotent_retry_of_a_recompressed_batch_is_a_duplicate_and_sequences_go_on() -> None:
    replicas = replicas_for(t={"compression.type": "zstd", "compression.zstd.level": "9"})
    part = replicas.partitions[("t", 0)]
    first = batch(compression.GZIP, producer_id=7, base_sequence=0)
    assert replicas.append(part, memoryview(first), NOW).base_offset == 0
    retry = replicas.append(part, memoryview(first), NOW)
    assert retry.error_code == ErrorCode.NONE and retry.base_offset == 0
    assert (
        replicas.append(
            part, memoryview(batch(compression.LZ4, producer_id=7, base_sequence=5)), NOW
        ).base_offset
        == 5
    )
    gap = replicas.append(part, memoryview(batch(compression.LZ4, producer_id=7, base_sequence=50)), NOW)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    ((codec, data), (_, second)) = stored(replicas, "t")
    header = read_batch_header(data)
    assert codec == compression.ZSTD and (
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
    ) == (7, 3, 0)
    assert bytes(data[BATCH_HEADER_SIZE:]) == compression.compress(
        compression.ZSTD, compression.decompress(compression.GZIP, bytes(first[BATCH_HEADER_SIZE:])), 9
    )
    assert read_batch_header(second).base_sequence == 5


def test_log_append_time_applies_to_the_recompressed_batch() -> None:
    replicas = replicas_for(t={"compression.type": "lz4", "message.timestamp.type": "LogAppendTime"})
    part = replicas.partitions[("t", 0)]
    assert (
        replicas.append(part, memoryview(batch(compression.SNAPPY)), NOW + 999).error_code == ErrorCode.NONE
    )
    ((codec, data),) = stored(replicas, "t")
    header = validate_batches(data)[0]
    assert codec == compression.LZ4 and header.timestamp_type == 1 and header.max_timestamp == NOW + 999
    assert [r.timestamp for r in decode_records(data)] == [NOW + 999] * 5


def test_a_batch_grown_past_max_message_bytes_by_decompression_is_refused() -> None:
    big = batch(compression.ZSTD, 200)
    size = read_batch_header(big).size_in_bytes
    replicas = replicas_for(t={"compression.type": "uncompressed", "max.message.bytes": str(size + 10)})
    result = replicas.append(replicas.partitions[("t", 0)], memoryview(big), NOW)
    assert result.error_code == ErrorCode.MESSAGE_TOO_LARGE and "max.message.bytes" in str(
        result.error_message
    )
    assert stored(replicas, "t") == []


def test_a_body_that_does_not_inflate_is_corrupt_message() -> None:
    bad = bytearray(batch(compression.NONE))
    header = read_batch_header(bad)
    # Claim gzip for an uncompressed body, with a CRC that matches.
    corrupt = rewrite_batch(header._replace(attributes=compression.NONE), decode_records(bad))
    corrupt[22] |= compression.GZIP
    from crc32c import crc32c

    corrupt[17:21] = crc32c(bytes(corrupt[21:])).to_bytes(4, "big")
    replicas = replicas_for(t={"compression.type": "zstd"})
    result = replicas.append(replicas.partitions[("t", 0)], memoryview(corrupt), NOW)
    assert result.error_code == ErrorCode.CORRUPT_MESSAGE and "gzip" in str(result.error_message)


def test_log_config_follows_the_topic_configs() -> None:
    base = LogConfig()
    assert base.compression_type is None and base.compression_level is None
    config = topic_log_config(base, {"compression.type": "gzip", "compression.gzip.level": "4"})
    assert (config.compression_type, config.compression_level) == (compression.GZIP, 4)
    assert topic_log_config(config, {"compression.type": "producer"}).compression_type is None
    assert topic_log_config(base, {"compression.type": "zstd"}).compression_level == 3
    assert dataclasses.replace(base, compression_type=compression.LZ4).compression_level == 9


# --- the configs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("compression.type", "zstd", None),
        ("compression.type", "uncompressed", None),
        ("compression.type", "brotli", "String must be one of"),
        ("compression.gzip.level", "-1", None),
        ("compression.gzip.level", "9", None),
        ("compression.gzip.level", "0", "between 1 and 9 or equal to -1"),
        ("compression.gzip.level", "10", "between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "17", None),
        ("compression.lz4.level", "18", "no more than 17"),
        ("compression.zstd.level", "-131072", None),
        ("compression.zstd.level", "23", "no more than 22"),
        ("compression.zstd.level", "fast", "Not a number"),
    ],
)
def test_topic_config_checks(name: str, value: str, problem: str | None) -> None:
    found = check_topic_config(name, value)
    assert (found is None) if problem is None else (problem in str(found) and name in str(found))


def test_server_properties_set_the_broker_defaults() -> None:
    base = (
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
        "controller.listener.names=CONTROLLER\nlog.dirs=/nowhere\n"
    )
    config = load_config(base + "compression.type=zstd\ncompression.zstd.level=12\n")
    assert (config.compression_type, config.compression_zstd_level, config.compression_gzip_level) == (
        "zstd",
        12,
        -1,
    )
    assert "compression.type" not in config.ignored
    with pytest.raises(ConfigError, match="compression.lz4.level"):
        load_config(base + "compression.lz4.level=40\n")


def test_the_broker_level_configs_can_be_set_dynamically() -> None:
    # Kafka's DynamicLogConfig: compression.type and the KIP-390 levels are reconfigurable per broker
    # and cluster-wide, and are the defaults of the topic configs of the same names.
    assert check_broker_config("compression.type", "lz4") == (True, None)
    dynamic, problem = check_broker_config("compression.zstd.level", "99")
    assert dynamic and "no more than 22" in str(problem)
    topic_names = topic_names_of_broker_configs({"compression.type": "gzip", "compression.gzip.level": "2"})
    config = topic_log_config(LogConfig(), topic_names)
    assert (config.compression_type, config.compression_level) == (compression.GZIP, 2)
