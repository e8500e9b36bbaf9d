"""Record batch v2: our bytes against a real Kafka client's (kafka-python), both directions."""

from __future__ import annotations

import struct

import crc32c
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from streams.errors import CorruptRecord
from streams.log import compression
from streams.log import records as rb
from streams.log.records import ProducerRecord

KP_CODECS = {
    "none": DefaultRecordBatch.CODEC_NONE,
    "gzip": DefaultRecordBatch.CODEC_GZIP,
    "snappy": DefaultRecordBatch.CODEC_SNAPPY,  # kafka-python writes xerial framing
    "lz4": DefaultRecordBatch.CODEC_LZ4,
    "zstd": DefaultRecordBatch.CODEC_ZSTD,
}

SAMPLE = [
    (1_700_000_000_000, b"k1", b"hello", [("trace", b"abc"), ("empty", None)]),
    (1_700_000_000_005, None, b"x" * 300, []),
    (1_700_000_000_001, b"k2", None, [("h", b"")]),  # tombstone, earlier timestamp
    (1_700_000_100_000, b"", b"\x00\xff" * 5000, []),  # multi-byte varints
]


def kafka_python_batch(codec: int, producer_id: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=0 if producer_id >= 0 else -1,
        batch_size=1 << 20,
    )
    for i, (ts, key, value, headers) in enumerate(SAMPLE):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", sorted(KP_CODECS))
def test_decodes_batches_built_by_kafka_python(codec):
    batch = kafka_python_batch(KP_CODECS[codec], producer_id=7)
    h = rb.validate_batch(batch, 0, len(batch))
    assert h.codec == KP_CODECS[codec] and h.count == len(SAMPLE) and h.producer_id == 7
    got = rb.decode_records(batch, h)
    assert [(r.offset, r.timestamp_ms, r.key, r.value, list(r.headers)) for r in got] == [
        (i, ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(SAMPLE)
    ]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_reads_our_batches(codec):
    recs = [ProducerRecord(v, k, tuple(h), ts) for ts, k, v, h in SAMPLE]
    ours = rb.build_batch(recs, base_offset=42, now_ms=0, codec=compression.BY_NAME[codec])
    theirs = DefaultRecordBatch(ours)
    assert theirs.validate_crc()
    assert theirs.base_offset == 42 and theirs.compression_type == compression.BY_NAME[codec]
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
    assert got == [(42 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(SAMPLE)]


def test_uncompressed_bytes_identical_to_kafka_python():
    """Same records, same layout: the two encoders agree byte for byte."""
    recs = [ProducerRecord(v, k, tuple(h), ts) for ts, k, v, h in SAMPLE]
    ours = rb.build_batch(recs, now_ms=0)
    theirs = kafka_python_batch(DefaultRecordBatch.CODEC_NONE)
    # kafka-python leaves partitionLeaderEpoch 0 where we write -1 (no leader epoch), as Java does
    assert ours[:12] == theirs[:12] and ours[16:] == theirs[16:]


def test_raw_snappy_as_librdkafka_writes_it():
    body = rb.encode_records([ProducerRecord(b"v%d" % i) for i in range(50)], 1000, 1000)
    batch = rb._assemble(
        0,
        compression.SNAPPY,
        49,
        1000,
        1000,
        -1,
        -1,
        -1,
        50,
        compression.compress(compression.SNAPPY, body),
    )
    assert not batch[rb.HEADER_SIZE :].startswith(b"\x82SNAPPY")
    assert [r.value for r in rb.decode_records(batch)] == [b"v%d" % i for i in range(50)]


def test_zstd_frame_without_content_size():
    body = rb.encode_records([ProducerRecord(b"z" * i) for i in range(100)], 5, 5)
    cobj = zstandard.ZstdCompressor().compressobj()  # streaming: the frame has no content size
    blob = cobj.compress(body) + cobj.flush()
    assert zstandard.get_frame_parameters(blob).content_size in (
        0,
        -1,
        zstandard.CONTENTSIZE_UNKNOWN,
    )
    batch = rb._assemble(0, compression.ZSTD, 99, 5, 5, -1, -1, -1, 100, blob)
    assert [r.value for r in rb.decode_records(batch)] == [b"z" * i for i in range(100)]


def test_crc_covers_attributes_to_end_and_not_base_offset():
    batch = rb.build_batch([ProducerRecord(b"a")], now_ms=1)
    h = rb.parse_header(batch)
    assert h.crc == crc32c.crc32c(batch[21:])
    moved = struct.pack(">q", 123456) + batch[8:]
    assert rb.validate_batch(moved).base_offset == 123456
    for pos in (21, 30, 61, len(batch) - 1):
        bad = bytearray(batch)
        bad[pos] ^= 0x01
        with pytest.raises(CorruptRecord, match="CRC"):
            rb.validate_batch(bytes(bad))


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda b: b[:40], "truncated"),
        (lambda b: b[:16] + b"\x01" + b[17:], "magic"),
        (lambda b: b[:8] + struct.pack(">i", 10) + b[12:], "smaller than the header"),
        (lambda b: b[:8] + struct.pack(">i", 10_000) + b[12:], "truncated"),
    ],
)
def test_validate_rejects_malformed_batches(mutate, message):
    batch = rb.build_batch([ProducerRecord(b"a"), ProducerRecord(b"b")], now_ms=1)
    with pytest.raises(CorruptRecord, match=message):
        rb.validate_batch(mutate(batch))


@pytest.mark.parametrize(
    "n", [0, 1, -1, 63, -64, 64, 8191, 8192, -8193, 2**31 - 1, -(2**31), 2**62]
)
def test_varint_round_trip(n):
    enc = rb.varint(n)
    assert rb.read_varint(enc + b"\xff", 0) == (n, len(enc))


def test_varint_matches_protobuf_zigzag_vectors():
    assert rb.varint(0) == b"\x00" and rb.varint(-1) == b"\x01" and rb.varint(1) == b"\x02"
    assert rb.varint(-64) == b"\x7f" and rb.varint(64) == b"\x80\x01"
    assert rb.varint(150) == b"\xac\x02"


def test_log_append_time_stamps_every_record_with_the_batch_time():
    recs = [ProducerRecord(b"a", timestamp_ms=5), ProducerRecord(b"b", timestamp_ms=9)]
    batch = rb.build_batch(recs, now_ms=777, log_append_time=True)
    h = rb.parse_header(batch)
    assert h.attributes & rb.ATTR_LOG_APPEND_TIME and h.max_timestamp == 777
    assert [r.timestamp_ms for r in rb.decode_records(batch)] == [777, 777]
    assert DefaultRecordBatch(batch).timestamp_type == 1


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 60, 100, 100, 100, 300, 20_000]), max_size=300),
    cut=st.integers(min_value=-3, max_value=3),
)
def test_counting_records_agrees_with_a_plain_walk(sizes, cut):
    """`count_records` skips runs of same-size records with strided slices; whatever the sizes
    and however the body is cut short or padded, it agrees with the one-by-one walk."""
    batch = rb.build_batch([ProducerRecord(b"x" * n) for n in sizes], now_ms=1) if sizes else b""
    body = batch[rb.HEADER_SIZE :]
    body = body[:cut] if cut < 0 else body + bytes(cut)

    def walk(data: bytes):
        pos = count = 0
        while pos < len(data):
            length, pos = rb.read_varint(data, pos)
            if length <= 0:
                return "corrupt"
            pos, count = pos + length, count + 1
        return count if pos == len(data) else "corrupt"

    try:
        counted = rb.count_records(body)
    except CorruptRecord:
        counted = "corrupt"
    assert counted == walk(body)
