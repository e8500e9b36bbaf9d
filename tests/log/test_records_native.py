"""Tidelog's compiled record decoder (streams/log/_cdecode.pyx, built by `make`) against the
pure-Python decoder, the reference: the same records for any batch, whole or in part, the
pure decoder's answer for any damaged one, records the cycle collector need not walk, and the
pure path again when the module is not built."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import tracemalloc

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from streams.errors import CorruptRecord
from streams.log import compression
from streams.log import records as rb
from streams.log.records import ProducerRecord, Record
from tests.log.test_records_compiled import (
    EXAMPLES,
    REPO,
    SLOW_OK,
    batches,
    body_of,
    byte_budgets,
    outcome,
    pure,
    pure_decode_from,
)


@pytest.fixture(autouse=True, scope="module")
def _native_or_pure_only():
    """aiokafka's reader set aside: every answer below is the native decoder's or, where it
    defers, the pure decoder's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rb, "_compiled_batch", None)
        yield


def native(batch: bytes, start: int = rb._INT64_MIN, limit: int = 1 << 62, max_bytes=-1, ff=True):
    h = rb.parse_header(batch)
    section = body_of(batch, h) or batch[rb.HEADER_SIZE : h.size]
    return rb._decode_native(section, h, start, limit, max_bytes, ff)


def test_the_native_decoder_is_built_and_in_use():
    """`make` builds it (Cython and a C compiler); run `make native` when this fails."""
    assert rb._native_body is not None, "streams/log/_cdecode is not built: run `make native`"
    assert rb.decoder() == "tidelog-c"
    batch = rb.build_batch([ProducerRecord(b"v", b"k", (("h", b"x"),))], now_ms=5)
    got = native(batch)
    # bytes used: the record without its length varint (one byte), as read budgets count
    assert got == (
        [Record(0, 5, b"k", b"v", (("h", b"x"),))],
        len(batch) - rb.HEADER_SIZE - 1,
        True,
    )
    assert type(got[0][0]) is Record
    assert rb._native_count is not None
    assert rb._native_count(batch[rb.HEADER_SIZE :]) == 1


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
@given(batch=batches())
def test_native_and_pure_decode_alike(batch):
    h = rb.validate_batch(batch)
    want = pure(batch)
    got = native(batch)
    assert got is not None, "the native decoder deferred on a valid batch"
    assert got[0] == want and got[2] is True
    for a, b in zip(got[0], want, strict=True):  # the types too: == lets a list pass for a tuple
        assert type(a) is Record and type(a.headers) is tuple
        assert [type(x) for x in a] == [type(x) for x in b]
        assert all(type(pair) is tuple for pair in a.headers)
    assert rb.decode_records(batch, h) == want


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
@given(batch=batches(max_records=30), data=st.data())
def test_partial_reads_decode_alike(batch, data):
    """From inside a batch, with a record limit and a byte budget (and with or without the
    first record forced past it): the records, bytes used and end-of-batch flag of the pure
    decoder's walk."""
    h = rb.parse_header(batch)
    section = body_of(batch, h) or batch[rb.HEADER_SIZE : h.size]
    start = data.draw(st.integers(h.base_offset - 2, h.next_offset + 1))
    limit = data.draw(st.integers(0, h.count + 2))
    max_bytes = byte_budgets(data, section)
    force_first = data.draw(st.booleans())
    want = rb._decode_body(memoryview(section), h, start, limit, max_bytes, force_first)
    assert native(batch, start, limit, max_bytes, force_first) == want
    assert rb.decode_from(batch, h, start, limit, max_bytes, force_first) == pure_decode_from(
        batch, h, start, limit, max_bytes, force_first
    )


@settings(max_examples=EXAMPLES * 2, deadline=None, suppress_health_check=SLOW_OK)
@given(batch=batches(codecs=(compression.NONE,), max_records=8), data=st.data())
def test_damaged_records_get_the_pure_decoders_answer(batch, data):
    """Reads do not check the CRC, so a damaged records section reaches the decoder. The
    native decoder either returns exactly the pure decoder's records or defers (None); it never
    returns records where the pure decoder raises CorruptRecord, and the entry points answer
    as the pure decoder does."""
    h = rb.parse_header(batch)
    assume(h.size > rb.HEADER_SIZE)
    bad = bytearray(batch)
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(rb.HEADER_SIZE, h.size - 1))
        bad[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, 3))
    if cut:
        bad = bad[: h.size - cut] + bytes(cut)
    bad = bytes(bad)
    start = data.draw(st.integers(h.base_offset, h.next_offset))
    limit = data.draw(st.integers(1, h.count + 1))
    max_bytes = data.draw(st.integers(-1, h.size))
    ff = data.draw(st.booleans())
    section = bad[rb.HEADER_SIZE : h.size]
    want = outcome(lambda b: rb._decode_body(section, h, start, limit, max_bytes, ff), bad)
    got = native(bad, start, limit, max_bytes, ff)
    assert got is None or got == want
    assert outcome(lambda b: rb.decode_records(b, h), bad) == outcome(pure, bad)
    args = (start, limit, max_bytes, ff)
    assert outcome(lambda b: rb.decode_from(b, h, *args), bad) == outcome(
        lambda b: pure_decode_from(b, h, *args), bad
    )


def _one_record_batch(offset_delta: int, ts_delta: int, base: int, base_ts: int) -> bytes:
    body = b"".join(
        (
            b"\x00",  # attributes
            rb.varint(ts_delta),
            rb.varint(offset_delta),
            rb.varint(-1),  # no key
            rb.varint(1) + b"v",
            rb.varint(0),
        )
    )
    record = rb.varint(len(body)) + body
    return rb._assemble(base, 0, 0, base_ts, base_ts, -1, -1, -1, 1, record)


@pytest.mark.parametrize(
    "offset_delta, ts_delta, base, base_ts",
    [
        (2**62, 0, 2**62, 0),  # offset past int64
        (0, 2**62, 0, 2**62),  # timestamp past int64
        (-(2**62), 0, -(2**62) - 5, 0),  # below int64
        (5, -7, 2**63 - 6, 3),  # the largest offset there is
    ],
)
def test_values_past_int64_are_the_pure_decoders(offset_delta, ts_delta, base, base_ts):
    """The pure decoder adds Python ints; the native one defers rather than wrap around."""
    batch = _one_record_batch(offset_delta, ts_delta, base, base_ts)
    want = pure(batch)
    assert want[0].offset == base + offset_delta and want[0].timestamp_ms == base_ts + ts_delta
    got = native(batch)
    in_range = -(2**63) <= base + offset_delta < 2**63 and -(2**63) <= base_ts + ts_delta < 2**63
    assert (got is not None) == in_range
    if got is not None:
        assert got[0] == want
    assert rb.decode_records(batch) == want


def test_a_header_key_that_is_not_utf8_decodes_with_replacement():
    batch = rb.build_batch([ProducerRecord(b"v", headers=((b"\xff\xfek", b"1"),))], now_ms=1)
    assert native(batch)[0] == [Record(0, 1, None, b"v", (("\ufffd\ufffdk", b"1"),))]


def test_records_are_left_out_of_the_cycle_collector():
    """A record holds only ints, bytes, None and a tuple of (str, bytes) pairs, which cannot
    form a cycle; untracked as CPython untracks such a plain tuple, a large read does not make
    the collector walk every record it returns."""
    recs = [ProducerRecord(b"v%d" % i, b"k", (("h", b"x"),) if i % 2 else ()) for i in range(50)]
    got = rb.decode_records(rb.build_batch(recs, now_ms=1))
    assert len(got) == 50
    assert not any(gc.is_tracked(r) for r in got)
    assert not any(gc.is_tracked(r.headers) for r in got)
    # and nothing leaks (untracked objects are not in gc.get_objects(), so count otherwise):
    # each record holds a reference to its type, and its fields' memory is traced
    batch = rb.build_batch(
        [ProducerRecord(b"x" * 1000, b"k", (("h", b"y" * 1000),))] * 50, now_ms=1
    )
    del got
    rb.decode_records(batch)
    refs = sys.getrefcount(Record)
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(200):  # 200 x 50 records of 2 KB: 20 MB if they stayed
            rb.decode_records(batch)
        grown = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert sys.getrefcount(Record) == refs
    assert grown < 200_000


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 60, 100, 100, 100, 300, 20_000]), max_size=300),
    cut=st.integers(min_value=-3, max_value=3),
    flip=st.one_of(st.none(), st.tuples(st.integers(min_value=0), st.integers(0, 255))),
)
def test_native_and_pure_count_records_alike(sizes, cut, flip):
    """The produce check's record count (`_cdecode.count_records`): the pure count for any
    body, cut short, padded or with a byte changed; -1 exactly where the pure one raises (the
    caller then asks the pure one for its reason), and `check_record_count` answers alike."""
    batch = rb.build_batch([ProducerRecord(b"x" * n) for n in sizes], now_ms=1) if sizes else b""
    body = bytearray(batch[rb.HEADER_SIZE :])
    body = body[:cut] if cut < 0 else body + bytes(cut)
    if flip is not None and body:
        body[flip[0] % len(body)] = flip[1]
    body = bytes(body)
    try:
        expected = rb.count_records(body)
    except CorruptRecord:
        expected = -1
    assert rb._native_count(body) == expected
    assert rb._native_count(memoryview(b"xx" + body)[2:]) == expected
    if sizes:
        h = rb.parse_header(batch)
        whole = batch[: rb.HEADER_SIZE] + body
        with pytest.MonkeyPatch.context() as mp:
            native_answer = _check_count(whole, h)
            mp.setattr(rb, "_native_count", None)
            assert _check_count(whole, h) == native_answer


def _check_count(batch: bytes, h: rb.BatchHeader) -> str:
    try:
        rb.check_record_count(batch, h._replace(length=len(batch) - rb.LOG_OVERHEAD))
    except CorruptRecord as exc:
        return str(exc)
    return "ok"


def test_without_the_native_module_the_store_reads_with_aiokafka(tmp_path):
    """The module not built (blocked in a fresh interpreter): the log reads through
    aiokafka's reader, and says so."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["streams.log._cdecode"] = None  # import -> ImportError, as when not built
        from streams.log import LogStore, ProducerRecord
        from streams.log import records
        store = LogStore.open({str(tmp_path)!r})
        store.create_topic("t", 1)
        store.append_batch("t", [ProducerRecord(b"v%d" % i) for i in range(3)], partition=0)
        got = [r.value for r in store.read("t", 0, 0)]
        store.close()
        print(records.decoder(), got)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["aiokafka-c", "[b'v0',", "b'v1',", "b'v2']"]


# ------------------------------------------------------------------ encoding

ENC_BYTES = st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=120, max_size=300))
ENC_TS = st.one_of(
    st.none(),
    st.integers(0, rb.MAX_TIMESTAMP),
    st.integers(-(2**64), 2**64),  # past int64: the pure encoder answers
    st.sampled_from([1.5, True]),
)
ENC_RECORDS = st.lists(
    st.tuples(
        ENC_BYTES,
        st.one_of(ENC_BYTES, st.just(bytearray(b"k"))),  # not bytes: the pure encoder answers
        st.one_of(st.just(()), st.just([]), st.just((("h", b"x"),))),
        ENC_TS,
        st.booleans(),
    ).map(lambda t: ProducerRecord(*t[:4]) if t[4] else t[:4]),
    min_size=1,
    max_size=150,  # offset deltas past one varint byte
)


def _pure_encoded(records, base_ts, default_ts):
    try:
        return rb._encode_pure(records, base_ts, default_ts)
    except Exception as exc:  # noqa: BLE001 - compared: the native encoder must defer
        return exc


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=SLOW_OK)
@given(ENC_RECORDS, st.integers(0, rb.MAX_TIMESTAMP), st.integers(0, rb.MAX_TIMESTAMP))
def test_native_and_pure_encode_alike(records, base_ts, default_ts):
    """``encode_body`` writes the pure encoder's bytes, or defers (None) to it."""
    got = rb._native_encode(records, base_ts, default_ts)
    want = _pure_encoded(records, base_ts, default_ts)
    if got is None:
        return
    assert got == want
    # and what the store's encoder uses
    assert rb.encode_records(records, base_ts, default_ts) == want


def test_the_native_encoder_takes_the_stores_own_records():
    recs = [(b"v%d" % i, b"k", (), 1_000 + i) for i in range(200)] + [
        ProducerRecord(None, None),
        ProducerRecord(b"", b"", (), 5),
    ]
    got = rb._native_encode(recs, 1_000, 2_000)
    assert got is not None and got == rb._encode_pure(recs, 1_000, 2_000)
    assert rb._native_encode([(b"v", b"k", (("h", b"x"),), 1)], 1, 1) is None  # headers
    assert rb._native_encode([(b"v", b"k", (), 1.5)], 1, 1) is None
    assert rb._native_encode([[b"v", b"k", (), 1]], 1, 1) is None  # not a tuple
