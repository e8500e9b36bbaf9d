"""The compiled batch reader (aiokafka's, behind `streams.log.records`) against the pure-Python
decoder: same records for any batch, the same answer for corrupt ones, and a clean fallback
when aiokafka cannot be imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import crc32c
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from streams.errors import CorruptRecord
from streams.log import compression
from streams.log import records as rb
from streams.log.records import ProducerRecord, Record

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# examples per property (here and in test_records_native.py): 100 keeps `make test` short (these
# were the slowest tests of tests/log at 200); `make soak` runs 5000
EXAMPLES = int(os.environ.get("TIDELOG_RECORDS_EXAMPLES", "100"))
CODECS = tuple(sorted(compression.NAMES))
SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large]

header_keys = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
optional_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(header_keys, optional_bytes), max_size=4).map(tuple)
timestamps = st.none() | st.integers(min_value=0, max_value=rb.MAX_TIMESTAMP)
producer_records = st.builds(
    ProducerRecord,
    value=optional_bytes | st.binary(min_size=8192, max_size=8300),  # 3-byte varints too
    key=optional_bytes,
    headers=headers,
    timestamp_ms=timestamps,
)


@st.composite
def batches(draw, codecs=CODECS, max_records=40) -> bytes:
    """A batch as the store keeps it: any records, any codec, create or log-append time,
    client batches with producer state, control batches, gaps in the offsets (compaction)."""
    recs = draw(st.lists(producer_records, min_size=1, max_size=max_records))
    offset_deltas = None
    if draw(st.booleans()):
        gaps = draw(st.lists(st.integers(0, 70), min_size=len(recs), max_size=len(recs)))
        offset_deltas, at = [], -1
        for gap in gaps:
            at += 1 + gap
            offset_deltas.append(at)
    pid = draw(st.sampled_from([rb.NO_PRODUCER_ID, 0, 7, 2**40]))
    log_append = draw(st.sampled_from(["create", "log-append", "log-append, records keep theirs"]))
    batch = rb.build_batch(
        recs,
        base_offset=draw(st.integers(0, 2**50)),
        now_ms=draw(st.integers(0, rb.MAX_TIMESTAMP)),
        codec=draw(st.sampled_from(codecs)),
        log_append_time=log_append == "log-append",
        producer_id=pid,
        producer_epoch=-1 if pid < 0 else 3,
        base_sequence=rb.NO_SEQUENCE if pid < 0 else 11,
        attributes_extra=draw(st.sampled_from([0, rb.ATTR_TRANSACTIONAL, rb.ATTR_CONTROL])),
        offset_deltas=offset_deltas,
    )
    if log_append == "log-append, records keep theirs":
        batch = as_log_append_time(batch, draw(st.integers(0, rb.MAX_TIMESTAMP)))
    return batch


def as_log_append_time(batch: bytes, max_ts: int) -> bytes:
    """`batch` as a Kafka broker with message.timestamp.type=LogAppendTime stores a client's
    batch: the LogAppendTime flag and the broker's time in the header (CRC recomputed), the
    records' own timestamp deltas left as the client wrote them. Every record then reads as
    `max_ts`, whatever its delta says (Tidelog re-encodes instead, so its own batches never
    show the difference)."""
    out = bytearray(batch)
    attributes = int.from_bytes(out[21:23], "big") | rb.ATTR_LOG_APPEND_TIME
    out[21:23] = attributes.to_bytes(2, "big")
    out[35:43] = max_ts.to_bytes(8, "big")
    out[17:21] = crc32c.crc32c(bytes(out[rb.CRC_START :])).to_bytes(4, "big")
    rb.validate_batch(bytes(out))
    return bytes(out)


def record_ends(section: bytes) -> list[int]:
    """The byte budgets at which a read of the uncompressed records section `section` stops
    exactly at a record's end: the running sums of the records' lengths (their length varints
    not counted, as read budgets count)."""
    ends, pos, used = [], 0, 0
    while pos < len(section):
        length, pos = rb.read_varint(section, pos)
        if length < 0:
            break
        pos += length
        used += length
        ends.append(used)
    return ends


def byte_budgets(data, section: bytes):
    """A read's byte budget: anything from none (-1) to past the end, or a record boundary
    and its neighbours, where an off-by-one in the budget check shows."""
    edges = [e + d for e in record_ends(section) for d in (-1, 0, 1)] or [0]
    return data.draw(st.integers(-1, len(section) + 10) | st.sampled_from(edges))


@pytest.fixture(autouse=True, scope="module")
def _aiokafka_behind_the_entry_points():
    """These tests hold aiokafka's reader to the pure decoder through the public entry points
    too, so Tidelog's own compiled decoder (ahead of aiokafka's when built; tested in
    test_records_native.py) is set aside here."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rb, "_native_body", None)
        yield


def body_of(batch: bytes, h: rb.BatchHeader) -> bytes | None:
    if not h.codec:
        return None
    return compression.decompress(h.codec, memoryview(batch)[rb.HEADER_SIZE : h.size])


def pure(batch: bytes) -> list[Record]:
    h = rb.parse_header(batch)
    return rb._decode_pure(batch, h, body_of(batch, h))


def compiled(batch: bytes) -> list[Record] | None:
    h = rb.parse_header(batch)
    return rb._decode_compiled(batch, h, body_of(batch, h))


def pure_decode_from(batch, h, start, limit, max_bytes=-1, force_first=True):
    """`decode_from` as it was before the compiled reader (the pure decoder only)."""
    section = body_of(batch, h) or batch[rb.HEADER_SIZE : h.size]
    if start <= h.base_offset and limit >= h.count and not 0 <= max_bytes < len(section):
        return pure(batch), len(section), True
    return rb._decode_body(memoryview(section), h, start, limit, max_bytes, force_first)


def outcome(decode, batch: bytes):
    try:
        return decode(batch)
    except CorruptRecord:
        return "corrupt"


def test_the_compiled_reader_is_in_use():
    assert rb.decoder() == "aiokafka-c"
    batch = rb.build_batch([ProducerRecord(b"v", b"k", (("h", b"x"),))], now_ms=5)
    assert compiled(batch) == [Record(0, 5, b"k", b"v", (("h", b"x"),))]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
@given(batch=batches())
def test_compiled_and_pure_decode_alike(batch):
    h = rb.validate_batch(batch)
    want = pure(batch)
    got = compiled(batch)
    assert got is not None, "the compiled reader fell back on a valid batch"
    assert got == want
    # field types too (== on tuples would let a list of headers pass for a tuple, etc.)
    for a, b in zip(got, want, strict=True):
        assert type(a) is Record and type(a.headers) is tuple
        assert [type(x) for x in a] == [type(x) for x in b]
    # the public entry points (whole-batch reads go through the compiled reader)
    assert rb.decode_records(batch, h) == want
    assert rb.decode_from(batch, h, h.base_offset, h.count) == (
        want,
        len(body_of(batch, h) or batch[rb.HEADER_SIZE :]),
        True,
    )


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
@given(
    batch=batches(codecs=(compression.NONE,), max_records=8),
    data=st.data(),
)
def test_corrupt_records_get_the_pure_decoders_answer(batch, data):
    """Reads do not check the CRC (the log was validated when written), so a damaged record
    section reaches the decoder: whatever the damage, the answer (records or CorruptRecord) is
    the pure decoder's."""
    h = rb.parse_header(batch)
    assume(h.size > rb.HEADER_SIZE)
    bad = bytearray(batch)
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(rb.HEADER_SIZE, h.size - 1))
        bad[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, 3))
    if cut:  # a body cut short, the header still saying the old size
        bad = bad[: h.size - cut] + bytes(cut)
    bad = bytes(bad)
    assert outcome(lambda b: rb.decode_records(b, h), bad) == outcome(pure, bad)
    start = data.draw(st.integers(h.base_offset, h.next_offset))
    limit = data.draw(st.integers(1, h.count + 1))
    max_bytes = data.draw(st.integers(-1, h.size))
    args = (start, limit, max_bytes, data.draw(st.booleans()))
    assert outcome(lambda b: rb.decode_from(b, h, *args), bad) == outcome(
        lambda b: pure_decode_from(b, h, *args), bad
    )


def test_a_header_key_that_is_not_utf8_decodes_as_before():
    """aiokafka decodes header keys strictly; the pure decoder replaces bad bytes. Such a batch
    goes through the pure decoder."""
    batch = rb.build_batch([ProducerRecord(b"v", headers=((b"\xff\xfek", b"1"),))], now_ms=1)
    assert compiled(batch) is None
    assert rb.decode_records(batch) == [Record(0, 1, None, b"v", (("\ufffd\ufffdk", b"1"),))]


@pytest.mark.parametrize("attributes", [0x01, 0x7F, 0x80, 0x81, 0xFF])
@pytest.mark.parametrize("key", [None, b"k", b""])
def test_record_attributes_are_one_byte(attributes, key):
    """Kafka's record attributes are an int8 (unused in v2); aiokafka's reader takes them for
    a varint, which with the high bit set shifts the rest of the record (a key of b"k" read
    as offset delta 1 and no key). Such batches, legal if odd, go through the pure decoder."""
    recs = [ProducerRecord(b"v%d" % i, key, timestamp_ms=1000 + i) for i in range(20)]
    batch = bytearray(rb.build_batch(recs, now_ms=1000))
    pos, n = rb.HEADER_SIZE, 0
    while pos < len(batch):
        length, pos = rb.read_varint(batch, pos)
        if n == 13:
            batch[pos] = attributes
        pos, n = pos + length, n + 1
    batch = bytes(batch)
    want = [Record(i, 1000 + i, key, b"v%d" % i, ()) for i in range(20)]
    assert rb.decode_records(batch) == pure(batch) == want
    assert (compiled(batch) is None) == (attributes >= 0x80)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 60, 100, 100, 100, 300, 9000]), min_size=1, max_size=300),
    flagged=st.sets(st.integers(0, 299), max_size=3),
    attribute=st.integers(0, 255),
    upto=st.integers(0, 310),
)
def test_record_walk_agrees_with_a_plain_walk(sizes, flagged, attribute, upto):
    """`_walk_records_checked` steps over runs of same-size records with strided slices; it
    finds the same positions, record lengths and attributes bytes as a record-by-record walk."""
    batch = bytearray(rb.build_batch([ProducerRecord(b"x" * n) for n in sizes], now_ms=1))
    pos, n, attrs, ends, lengths = rb.HEADER_SIZE, 0, [], [], []
    while pos < len(batch):
        length, pos = rb.read_varint(batch, pos)
        if n in flagged:
            batch[pos] = attribute
        attrs.append(batch[pos])
        pos, n = pos + length, n + 1
        ends.append(pos)
        lengths.append(length)
    upto = min(upto, len(sizes))
    batch = bytes(batch)
    at = ends[upto - 1] if upto else rb.HEADER_SIZE
    assert rb._walk_records_checked(batch, rb.HEADER_SIZE, len(batch), upto, None) == (at, upto)
    found: list[int] = []
    walk = rb._walk_records_checked(batch, rb.HEADER_SIZE, len(batch), upto, found)
    if any(a >= 0x80 for a in attrs[:upto]):
        assert walk is None
    else:
        assert walk == (at, upto) and found == lengths[:upto]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
@given(
    batch=batches(max_records=30),
    data=st.data(),
)
def test_partial_reads_decode_alike(batch, data):
    """Reads from inside a batch, with a record limit and a byte budget: the compiled path
    returns what the pure decoder's walk returns (records, bytes used, end of batch)."""
    h = rb.parse_header(batch)
    body = body_of(batch, h)
    section = body if body is not None else batch[rb.HEADER_SIZE : h.size]
    start = data.draw(st.integers(h.base_offset - 2, h.next_offset + 1))
    limit = data.draw(st.integers(0, h.count + 2))
    max_bytes = byte_budgets(data, section)
    force_first = data.draw(st.booleans())
    want = rb._decode_body(memoryview(section), h, start, limit, max_bytes, force_first)
    got = rb._decode_range_compiled(batch, h, body, start, limit, max_bytes, force_first)
    assert got is not None
    assert got == want
    if start <= h.base_offset and limit >= h.count and not 0 <= max_bytes < len(section):
        # a whole batch (read by _decode_whole) counts its whole records section as used
        want = (want[0], len(section), True)
    assert rb.decode_from(batch, h, start, limit, max_bytes, force_first) == want


def test_timestamp_minus_one_stays_minus_one():
    """aiokafka reports a record timestamp of -1 (Kafka's NO_TIMESTAMP) as None."""
    body = rb.encode_records([ProducerRecord(b"a", timestamp_ms=-1)], -1, -1)
    batch = rb._assemble(0, 0, 0, -1, -1, -1, -1, -1, 1, body)
    assert compiled(batch) == pure(batch) == [Record(0, -1, None, b"a", ())]


def test_forced_fallback_decodes_with_the_pure_decoder(monkeypatch):
    monkeypatch.setattr(rb, "_compiled_batch", None)
    assert rb.decoder() == "python"
    recs = [ProducerRecord(b"v%d" % i, b"k", (("h", None),), 10 + i) for i in range(5)]
    for codec in sorted(compression.NAMES):
        batch = rb.build_batch(recs, base_offset=100, now_ms=1, codec=codec)
        assert compiled(batch) is None
        assert rb.decode_records(batch) == [
            Record(100 + i, 10 + i, b"k", b"v%d" % i, (("h", None),)) for i in range(5)
        ]


def test_without_aiokafka_the_store_reads_with_the_pure_decoder(tmp_path):
    """aiokafka not importable at all (blocked in a fresh interpreter): the log still opens,
    appends and reads, through the pure decoder."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["aiokafka"] = None  # import aiokafka -> ImportError
        sys.modules["streams.log._cdecode"] = None  # and Tidelog's own decoder not built
        from streams.log import LogStore, ProducerRecord
        from streams.log import records
        store = LogStore.open({str(tmp_path)!r})
        store.create_topic("t", 1)
        store.append_batch("t", [ProducerRecord(b"v%d" % i) for i in range(3)], partition=0)
        got = [r.value for r in store.read("t", 0, 0)]
        store.close()
        print(records.decoder(), records.encoder(), got, sys.modules["aiokafka"])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["python", "python", "[b'v0',", "b'v1',", "b'v2']", "None"]


@pytest.mark.parametrize("codec", sorted(compression.NAMES))
def test_partial_reads_still_use_offsets_limits_and_budgets(codec):
    """Reads that start inside a batch, stop at a record limit or at the byte budget keep the
    pure decoder's walk; whole-batch reads go through the compiled one. Both agree."""
    batch = rb.build_batch(
        [ProducerRecord(b"x" * 50) for _ in range(20)], base_offset=10, now_ms=1, codec=codec
    )
    h = rb.parse_header(batch)
    whole, used, done = rb.decode_from(batch, h, 10, 100)
    assert [r.offset for r in whole] == list(range(10, 30)) and done
    assert rb.decode_from(batch, h, 15, 3)[0] == whole[5:8]
    part, used_part, done = rb.decode_from(batch, h, 10, 100, max_bytes=200)
    assert part == whole[: len(part)] and 0 < len(part) < 20 and not done and used_part <= 200


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
@given(
    recs=st.lists(
        st.builds(
            ProducerRecord,
            value=optional_bytes,
            key=optional_bytes,
            headers=headers,
            timestamp_ms=timestamps | st.integers(-3, 3),  # -1: Kafka's "no timestamp"
        ),
        min_size=1,
        max_size=40,
    ),
    default_ts=st.integers(-2, rb.MAX_TIMESTAMP),
    gaps=st.none() | st.lists(st.integers(0, 70), min_size=40, max_size=40),
)
def test_compiled_and_pure_encode_the_same_bytes(recs, default_ts, gaps):
    """New batches' records are written by aiokafka's compiled builder: byte for byte what the
    pure encoder writes (offset gaps as the cleaner writes them included)."""
    deltas = None
    if gaps is not None:
        deltas = [i + sum(gaps[: i + 1]) for i in range(len(recs))]
    first = recs[0].timestamp_ms
    base_ts = default_ts if first is None else first
    got = rb._encode_compiled(recs, base_ts, default_ts, deltas)
    assert (got is None) == (base_ts < 0)
    got = rb.encode_records(recs, base_ts, default_ts, deltas)
    assert got == rb._encode_pure(recs, base_ts, default_ts, deltas)


def test_the_pure_encoder_writes_what_the_builder_cannot():
    """A base timestamp other than the first record's (the cleaner's delete horizon) and
    header keys given as bytes are written by the pure encoder."""
    recs = [ProducerRecord(b"v", timestamp_ms=50), ProducerRecord(b"w", timestamp_ms=70)]
    assert rb._encode_compiled(recs, 10, 10, None) is None
    assert rb.encode_records(recs, 10, 10) == rb._encode_pure(recs, 10, 10)
    assert rb.decode_records(rb.build_batch(recs, now_ms=1, base_ts=10))[1].timestamp_ms == 70
    keyed = [ProducerRecord(b"v", headers=((b"k", b"1"),), timestamp_ms=5)]
    assert rb._encode_compiled(keyed, 5, 5, None) is None
    assert rb.encode_records(keyed, 5, 5) == rb._encode_pure(keyed, 5, 5)


def test_forced_fallback_encodes_with_the_pure_encoder(monkeypatch):
    recs = [ProducerRecord(b"v%d" % i, b"k", (("h", None),), 10 + i) for i in range(5)]
    compiled_bytes = rb.build_batch(recs, now_ms=1)
    monkeypatch.setattr(rb, "_compiled_builder", None)
    assert rb.encoder() == "python"
    assert rb._encode_compiled(recs, 10, 1, None) is None
    assert rb.build_batch(recs, now_ms=1) == compiled_bytes
