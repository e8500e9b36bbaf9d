"""Reading: by offset through the sparse index, by timestamp, bounds, limits and errors."""

from __future__ import annotations

import random

import pytest

from streams.errors import OffsetOutOfRange, RecordTooLarge, UnknownPartition, UnknownTopic
from streams.log import LogStore, ProducerRecord
from streams.log.segment import LogSegment


@pytest.fixture
def store(tmp_path):
    s = LogStore.open(tmp_path, background=False)
    yield s
    s.close()


def fill(store, n, batch=7, topic="t", ts0=1_000_000):
    """n records in batches of `batch`, value = offset as text, timestamp = ts0 + offset."""
    for start in range(0, n, batch):
        recs = [
            ProducerRecord(b"value-%d" % i, b"k%d" % (i % 13), (("i", b"%d" % i),), ts0 + i)
            for i in range(start, min(n, start + batch))
        ]
        store.append_batch(topic, recs, partition=0)


def test_every_offset_reads_back_exactly(store):
    store.create_topic("t", 1, {"segment.bytes": "8192", "flush.messages": "100000"})
    fill(store, 3000)
    plog = store.partition_log("t", 0)
    assert len(plog.segments) > 5
    for off in range(0, 3000, 37):
        got = store.read("t", 0, off, max_records=5)
        assert [r.offset for r in got] == list(range(off, min(off + 5, 3000)))
        assert got[0].value == b"value-%d" % off and got[0].headers == (("i", b"%d" % off),)
        assert got[0].timestamp_ms == 1_000_000 + off


def test_reads_scan_at_most_one_index_interval(store, monkeypatch):
    interval = 1024
    store.create_topic("t", 1, {"index.interval.bytes": str(interval), "flush.messages": "100000"})
    fill(store, 5000, batch=3)
    largest_batch = 3 * 60 + 61
    scanned = []
    original = LogSegment.iter_batches

    def counting(self, position, end, strict=False):
        start = position
        for pos, batch in original(self, position, end, strict):
            scanned.append(pos - start)  # bytes skipped before this batch
            yield pos, batch

    monkeypatch.setattr(LogSegment, "iter_batches", counting)
    for off in random.Random(1).sample(range(5000), 300):
        scanned.clear()
        store.partition_log("t", 0).segments[-1].position_of(off)
        assert max(scanned) <= interval + largest_batch


def test_out_of_range_carries_both_bounds(store):
    store.create_topic("t", 1)
    fill(store, 100)
    assert store.read("t", 0, 100) == []  # at the end: nothing yet, not an error
    with pytest.raises(OffsetOutOfRange) as info:
        store.read("t", 0, 101)
    assert (info.value.log_start_offset, info.value.end_offset) == (0, 100)
    assert "0..100" in str(info.value)
    store.delete_records("t", {0: 40})
    with pytest.raises(OffsetOutOfRange) as info:
        store.read("t", 0, 39)
    assert (info.value.log_start_offset, info.value.end_offset) == (40, 100)
    assert store.read("t", 0, 40, 1)[0].offset == 40
    assert store.offsets("t", 0) == (40, 100)
    with pytest.raises(UnknownTopic):
        store.read("nope", 0, 0)
    with pytest.raises(UnknownPartition, match="has no partition 3"):
        store.read("t", 3, 0)


def test_max_records_and_max_bytes(store):
    store.create_topic("t", 1)
    store.append_batch("t", [ProducerRecord(b"x" * 1000) for _ in range(50)], partition=0)
    assert len(store.read("t", 0, 0, max_records=7)) == 7
    assert len(store.read("t", 0, 0, max_bytes=4500)) == 4
    assert len(store.read("t", 0, 0, max_bytes=10)) == 1  # always at least one record


def test_by_timestamp_first_offset_at_or_after(store):
    store.create_topic("t", 1, {"segment.bytes": "4096", "index.interval.bytes": "512"})
    rng = random.Random(7)
    stamps = []
    for i in range(600):  # mostly increasing with disorder, like real producers
        ts = 10_000 + i * 10 + rng.randint(-40, 40)
        stamps.append(ts)
        store.append("t", b"v", partition=0, timestamp_ms=ts)
    for target in [0, 9_000, 10_000, 10_005, 11_111, 14_000, 15_990, 16_039, 16_040, 99_999]:
        expected = next((i for i, ts in enumerate(stamps) if ts >= target), None)
        assert store.offset_for_timestamp("t", 0, target) == expected, target


def test_timestamps_default_to_append_time_or_log_append_time(store):
    store.create_topic("c", 1)
    store.create_topic("l", 1, {"message.timestamp.type": "LogAppendTime"})
    a = store.append("c", b"v", timestamp_ms=5)
    b = store.append("c", b"v")
    c = store.append("l", b"v", timestamp_ms=5)
    assert a.timestamp_ms == 5 and b.timestamp_ms > 1_600_000_000_000
    assert c.timestamp_ms > 1_600_000_000_000
    assert store.read("l", 0, 0)[0].timestamp_ms == c.timestamp_ms


def test_oversized_batch_refused_and_batches_split(store):
    store.create_topic("t", 1, {"max.message.bytes": "2000"})
    with pytest.raises(RecordTooLarge, match="max.message.bytes=2000"):
        store.append("t", b"x" * 3000)
    res = store.append_batch("t", [ProducerRecord(b"y" * 500) for _ in range(10)], partition=0)
    assert [r.offset for r in res] == list(range(10))
    assert len(store.partition_log("t", 0).read_batches(0, 1 << 20)) > 3 * 500


def test_compressed_topic_round_trip(store):
    for codec in ["gzip", "snappy", "lz4", "zstd"]:
        store.create_topic(codec, 1, {"compression.type": codec})
        store.append_batch(codec, [ProducerRecord(b"abc" * i, b"k") for i in range(100)])
        assert [r.value for r in store.read(codec, 0, 0, 1000)] == [b"abc" * i for i in range(100)]
        assert store.describe_topic(codec).size_bytes < 100 * 150 * 3 // 4


def test_raw_client_batch_stored_byte_for_byte(store):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    store.create_topic("t", 1)
    store.append("t", b"first")
    b = DefaultRecordBatchBuilder(2, 4, False, 9, 0, 0, 1 << 20)  # zstd, idempotent producer
    for i in range(10):
        b.append(i, timestamp=1_000 + i, key=None, value=b"r%d" % i, headers=[])
    raw = bytes(b.build())
    base, last, _ = store.append_raw("t", 0, raw)
    assert (base, last) == (1, 10)
    stored = store.read_batches("t", 0, 1, 1 << 20)
    assert stored[8:] == raw[8:] and int.from_bytes(stored[:8], "big") == 1
    assert [r.value for r in store.read("t", 0, 1, 100)] == [b"r%d" % i for i in range(10)]


@pytest.mark.parametrize("ts", [-5, 2**63, 10**17])
def test_timestamps_outside_the_calendar_are_refused(store, ts):
    from streams.errors import InvalidRecord

    store.create_topic("t", 1)
    with pytest.raises(InvalidRecord, match="timestamps must be between"):
        store.append("t", b"v", timestamp_ms=ts)
    assert store.offsets("t", 0) == (0, 0)


def _recount(batch: bytes, count: int) -> bytes:
    """`batch` with its record count (and last offset delta) set to `count`, CRC redone: a
    producer that miscounted, which the CRC alone cannot catch."""
    import struct

    import crc32c

    from streams.log import records as rb

    out = bytearray(batch)
    struct.pack_into(">i", out, 23, count - 1)  # lastOffsetDelta
    struct.pack_into(">i", out, rb.HEADER_SIZE - 4, count)  # records count
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[rb.CRC_START :])))
    return bytes(out)


@pytest.mark.parametrize("codec", [0, 3])  # none, lz4
@pytest.mark.parametrize("declared", [1, 2, 4])
def test_a_batch_whose_body_holds_another_record_count_is_refused(store, codec, declared):
    from streams.errors import CorruptRecord
    from streams.log import records as rb

    store.create_topic("t", 1)
    batch = rb.build_batch(
        [ProducerRecord(b"r%d" % i) for i in range(3)], now_ms=1_000, codec=codec
    )
    with pytest.raises(CorruptRecord, match=f"declares {declared} records but its body holds 3"):
        store.append_raw("t", 0, _recount(batch, declared))
    assert store.offsets("t", 0) == (0, 0)  # nothing stored
    store.append_raw("t", 0, _recount(batch, 3))  # the honest count is accepted
    assert [r.value for r in store.read("t", 0, 0, 10)] == [b"r0", b"r1", b"r2"]


def test_batch_headers_are_those_of_the_batches_read(store):
    """``batch_headers`` (the metrics' event times: headers read alone, bodies skipped) gives
    the headers of exactly the batches ``read_batches`` returns for [offset, until): small
    batches read a chunk at a time, batches larger than a chunk header by header, across
    segments, from inside a batch, bounded by `until`, the high watermark and `max_batches`."""
    from streams.log import records as rb

    store.create_topic("t", 1, {"segment.bytes": str(200_000), "flush.messages": "100000"})
    rng = random.Random(7)
    for _ in range(120):
        size = rng.choice((1, 3, 40, 400))  # 400 records of 60 bytes: past the header chunk
        store.append_batch("t", [ProducerRecord(b"v" * 60) for _ in range(size)], partition=0)
    plog = store.partition_log("t", 0)
    assert len(plog.segments) > 3
    end = plog.high_watermark

    def read_headers(offset: int, until: int) -> list:
        raw = store.read_batches("t", 0, offset, 1 << 30)
        out, pos = [], 0
        while pos < len(raw):
            h = rb.parse_header(raw, pos)
            pos += h.size
            if h.base_offset < until:
                out.append(h)
        return out

    for offset in [0, 1, *rng.sample(range(end), 25), end]:
        until = rng.randrange(offset, end + 2)
        want = read_headers(offset, until)
        assert store.batch_headers("t", 0, offset, until, 1_000_000) == want
        assert store.batch_headers("t", 0, offset, until, 3) == want[:3]
    with pytest.raises(OffsetOutOfRange):
        store.batch_headers("t", 0, end + 1, end + 5, 10)
