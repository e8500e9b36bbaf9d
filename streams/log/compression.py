"""Record-batch compression codecs, as Kafka numbers them in the batch attributes (bits 0-2).

Decoding accepts what every Kafka client writes: gzip, snappy in both framings (raw blocks, as
librdkafka writes, and xerial framing, as the Java client and kafka-python write), the LZ4 frame
format and zstd (frames with or without a content size). Encoding writes gzip, raw snappy, LZ4
frames and zstd. The codecs themselves come from `cramjam` (Rust, one wheel for all four) and zlib.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

from streams.errors import CorruptRecord

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {
    "uncompressed": NONE,
    "none": NONE,
    "gzip": GZIP,
    "snappy": SNAPPY,
    "lz4": LZ4,
    "zstd": ZSTD,
}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic (8) + version (4) + compatible version (4)


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise CorruptRecord(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return zlib.decompress(data, 16 + zlib.MAX_WBITS)
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (zlib.error, cramjam.DecompressionError, ValueError, struct.error) as exc:
        raise CorruptRecord(f"cannot decompress {NAMES.get(codec, codec)} batch: {exc}") from exc
    raise CorruptRecord(f"unknown compression codec {codec} in batch attributes")


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = []
    pos = _XERIAL_HEADER
    while pos < len(data):
        (block_len,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if block_len < 0 or pos + block_len > len(data):
            raise ValueError("truncated xerial snappy block")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + block_len])))
        pos += block_len
    return b"".join(out)
