"""The record-batch codecs, as pure byte transforms: every batch pykraft compresses or inflates goes here.

Kafka's codecs (clients/.../compression/*Compression.java, the batch attributes' low three bits):

- 1 gzip: a standard gzip stream (GZIPOutputStream); levels 1..9 or -1, zlib's default (6) (KIP-390).
- 2 snappy: what the Java client writes, xerial snappy-java's stream format (a 16-byte header, then
  ``int32 length + raw snappy block`` per 32 KiB of input); read back is either that or one raw snappy
  block, as librdkafka writes (SnappyInputStream takes both).
- 3 lz4: the LZ4 frame format with independent blocks (KIP-57, KafkaLZ4BlockOutputStream); levels
  1..17, default 9.
- 4 zstd: standard zstd frames; levels -131072..22, default 3.

gzip is the standard library's zlib (faster here than cramjam's at the same level: 38 against 66 ms/MiB
at level 6); snappy, lz4 and zstd are cramjam's (the library aiokafka uses too).
"""

from __future__ import annotations

import gzip
import struct
from typing import Final

import cramjam

NONE: Final = 0
GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4

# compression.type's names (BrokerCompressionType); "producer" keeps each batch's own codec.
CODEC_NAMES: Final[dict[int, str]] = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
TOPIC_CODECS: Final[dict[str, int]] = {
    "uncompressed": NONE,
    "gzip": GZIP,
    "snappy": SNAPPY,
    "lz4": LZ4,
    "zstd": ZSTD,
}
PRODUCER: Final = "producer"

# KIP-390 compression.<codec>.level defaults (GzipCompression: Deflater.DEFAULT_COMPRESSION, zlib's 6;
# Lz4Compression; ZstdCompression); core.topic_configs checks the ranges.
GZIP_DEFAULT_LEVEL: Final = -1
LZ4_DEFAULT_LEVEL: Final = 9
ZSTD_DEFAULT_LEVEL: Final = 3

_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # magic, version 1, compatible 1
_XERIAL_BLOCK_BYTES: Final = 32 * 1024  # snappy-java's default block size, which Kafka keeps
_INT32: Final = struct.Struct(">i")


class CodecError(ValueError):
    """A body that does not inflate with its codec, or a codec id Kafka does not have."""


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec`` (never NONE) at ``level`` (None: Kafka's default)."""
    if codec == GZIP:
        return gzip.compress(data, GZIP_DEFAULT_LEVEL if level is None else level, mtime=0)
    if codec == SNAPPY:
        view = memoryview(data)
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(view), _XERIAL_BLOCK_BYTES):
            block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES])
            out += _INT32.pack(len(block))
            out += block
        return bytes(out)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(
            level=LZ4_DEFAULT_LEVEL if level is None else level, content_checksum=False, block_linked=False
        )
        compressor.compress(data if isinstance(data, bytes) else bytes(data))  # it takes bytes only
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_DEFAULT_LEVEL if level is None else level))
    raise CodecError(f"unknown compression type {codec}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """``data`` inflated with ``codec``; :class:`CodecError` naming the codec when it does not."""
    name = CODEC_NAMES.get(codec) if codec != NONE else None
    if name is None:
        raise CodecError(f"unknown compression type {codec}")
    try:
        if codec == GZIP:
            return gzip.decompress(data)
        if codec == SNAPPY:
            return _snappy_decompress(memoryview(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except CodecError:
        raise
    except Exception as exc:  # zlib.error, EOFError, cramjam's DecompressionError: all a corrupt body
        raise CodecError(f"{name} body does not inflate: {exc}") from None


def _snappy_decompress(view: memoryview) -> bytes:
    if len(view) <= len(_XERIAL_HEADER) or view[: len(_XERIAL_MAGIC)].tobytes() != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    # xerial's version and compatible-version fields are not checked (some writers get them wrong).
    out = bytearray()
    pos, total = len(_XERIAL_HEADER), len(view)
    while pos < total:
        if total - pos < _INT32.size:
            raise CodecError("snappy body does not inflate: truncated xerial block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += _INT32.size
        if length < 0 or pos + length > total:
            raise CodecError(
                f"snappy body does not inflate: xerial block of {length} bytes runs past the end"
            )
        out += cramjam.snappy.decompress_raw(view[pos : pos + length])
        pos += length
    return bytes(out)
