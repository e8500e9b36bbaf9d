"""The compiled reading of a job's input records (streams/jobs/_crecords.pyx, built by `make
native`) against deserialising them one by one, the reference: for any batch of ``Record``s or
``LogRecord``s with text or bytes keys and JSON values, ``decode_records`` gives the same
``(key, value, ts, offset)`` tuples, or None (the runner then decodes record by record) where
a record fails; and the runner decodes record by record when the module is not built."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.jobs import serde
from streams.jobs.logs import LogRecord
from streams.jobs.serde import BYTES, JSON, TEXT, SerdeError, decode_records, field
from streams.log.records import Record

REPO = Path(__file__).resolve().parents[2]


def test_the_compiled_reader_is_built():
    assert serde._crecords is not None, "streams/jobs/_crecords.so is not built: make native"


KEYS = st.one_of(st.none(), st.binary(max_size=6), st.text(max_size=4).map(str.encode))
VALUES = st.one_of(
    st.none(),
    st.sampled_from(
        [
            b'{"v":1,"ts":5}',
            b'{"ts":12345678901234567890}',  # 20 digits: json decides (an exact int)
            b"[1.5, NaN]",  # orjson rejects NaN: json decides
            b'{"ts":"x"}',
            b"not json",
            b"\xff",
            b'"\\ud800"',  # a lone surrogate: json accepts, orjson not
            b"1e400",
            b'{"v":2}',
        ]
    ),
    st.integers(-(10**20), 10**20).map(lambda i: str(i).encode()),
)


def reference(recs, key, extract):
    out = []
    for r in recs:
        k = key.deserialize(r.key)
        v = JSON.deserialize(r.value)
        ts = r.timestamp_ms if extract is None or v is None else extract(v)
        out.append((k, v, ts, r.offset))
    return out


def same(a, b) -> bool:
    """Equal, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(KEYS, VALUES, st.integers(0, 10**13)), max_size=12),
    st.sampled_from([Record, LogRecord]),
    st.sampled_from([TEXT, BYTES]),
    st.sampled_from([None, "ts"]),
)
def test_decode_records_equals_deserialising_each_record(items, rtype, key, ts_field):
    recs = [
        Record(i, ts, k, v) if rtype is Record else LogRecord(i, k, v, ts)
        for i, (k, v, ts) in enumerate(items)
    ]
    extract = None if ts_field is None else field(ts_field)
    try:
        want = reference(recs, key, extract)
    except (SerdeError, UnicodeDecodeError):
        assert decode_records(recs, key, JSON, extract) is None
        return
    got = decode_records(recs, key, JSON, extract)
    if not recs:
        assert got is None
        return
    assert got is not None and same(got, want)


def test_other_serialisers_and_shapes_are_left_to_the_pure_loop():
    recs = [Record(0, 1, b"k", b'{"a":1}')]
    assert decode_records(recs, JSON, JSON, None) is None  # JSON keys (lists -> tuples)
    assert decode_records(recs, TEXT, TEXT, None) is None
    assert decode_records([(0, 1, b"k", b"{}")], TEXT, JSON, None) is None  # not a NamedTuple
    mixed = [Record(0, 1, b"k", b"{}"), LogRecord(1, b"k", b"{}", 2)]
    assert decode_records(mixed, TEXT, JSON, None) is None


def test_the_runner_decodes_record_by_record_when_the_module_is_not_built():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["streams.jobs._crecords"] = None  # as if it were not built
        from streams.jobs import serde
        from streams.jobs.serde import JSON, TEXT, decode_records
        from streams.log.records import Record
        assert serde._crecords is None
        from streams.jobs import logs
        assert logs._native_runs is None  # a checkpoint's runs: cut by the pure loop
        assert decode_records([Record(0, 1, b"k", b"{}")], TEXT, JSON, None) is None
        assert serde.merge is serde.merge_two and serde.tag is serde.tag_rest
        from streams.jobs import JSON, Count, Job, Sum, Tumbling
        from streams.jobs.runner import Runner
        from streams.log import LogStore
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            store = LogStore.open(d)
            store.create_topic("in", 1)
            store.append_batch("in", [(b'{"v":%d}' % i, b"k", (), i * 400) for i in range(6)])
            job = Job("nb")
            job.stream("in", value=JSON).window(Tumbling(1000)).aggregate(
                n=Count(), s=Sum("v")).to("out")
            runner = Runner(job, store)
            runner.run_until_idle()
            runner.close()
            recs = store.read("out", 0, 0, max_records=10)
            print([r.value for r in recs])
            store.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert '"s":3,"n":3' in done.stdout and '"s":7,"n":2' in done.stdout


# ------------------------------------------------------------------ writing outputs

JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),  # past 64 bits: orjson refuses, json writes
    st.floats(allow_nan=True, allow_infinity=True),  # json's own float text
    st.text(max_size=5),  # non-ASCII, DEL, lone surrogates (json escapes them)
    st.sampled_from(["null", "1e5", "1.5", "x.e", "\x7f", "é", "\ud800", "n", "nul"]),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.dictionaries(st.integers(0, 3), inner, max_size=2),  # non-string keys: json decides
    ),
    max_leaves=6,
)
OUT_KEYS = st.one_of(
    st.none(),
    st.text(max_size=4),
    st.sampled_from(["\ud800", "é"]),  # a lone surrogate: TEXT raises
    st.binary(max_size=4),
    st.integers(0, 3),  # neither text nor bytes
)


class _Unwritable:
    pass


def pure_outputs(recs, key, start=0):
    """The runner's pure loop (``Runner._emitter``'s ``emit_many``): what it writes until the
    first record that raises, and that error."""
    out = []
    for r in recs[start:]:
        try:
            out.append((JSON.serialize(r[1]), key.serialize(r[0]), (), r[2]))
        except Exception as exc:  # noqa: BLE001 - the error is compared
            return out, exc
    return out, None


def compiled_outputs(recs, key):
    """``records_encoder`` as the runner calls it: the compiled loop, the pure way for each
    record it stops at (the first that raises ends the batch)."""
    encode = serde.records_encoder(key, JSON)
    out, i = [], 0
    while True:
        i = encode(recs, i, out)
        if i >= len(recs):
            return out, None
        r = recs[i]
        try:
            out.append((JSON.serialize(r[1]), key.serialize(r[0]), (), r[2]))
        except Exception as exc:  # noqa: BLE001 - the error is compared
            return out, exc
        i += 1


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(
            OUT_KEYS,
            st.one_of(JSON_VALUES, st.just(_Unwritable())),
            st.integers(0, 10**13),
            st.none(),
        ),
        max_size=10,
    ),
    st.sampled_from([TEXT, BYTES]),
)
def test_records_encoder_writes_what_serialising_each_record_writes(items, key):
    want, want_exc = pure_outputs(items, key)
    got, got_exc = compiled_outputs(items, key)
    assert got == want
    for g, w in zip(got, want, strict=True):
        assert type(g[0]) is type(w[0]) and type(g[1]) is type(w[1])
    assert type(got_exc) is type(want_exc) and str(got_exc) == str(want_exc)


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
def test_records_encoder_stops_at_what_it_does_not_take():
    encode = serde.records_encoder(TEXT, JSON)
    out: list = []
    recs = [("a", {"v": 1}, 5), ["b", 2, 6], ("c", 1.5, 7), (b"d", 1, 8), ("e", "\ud800", 9)]
    assert encode(recs, 0, out) == 1  # a list, not a tuple
    assert out == [(b'{"v":1}', b"a", (), 5)]
    assert encode(recs, 2, out) == 3  # a float goes to json; bytes are no text key
    assert out[-1] == (b"1.5", b"c", (), 7)
    assert encode(recs, 4, out) == 5 and out[-1] == (b'"\\ud800"', b"e", (), 9)
    assert encode([(1, 1, 1)], 0, out) == 0
    assert encode([(None, None, 3)], 0, out) == 1 and out[-1] == (None, None, (), 3)


def test_other_serialisers_are_left_to_the_pure_loop():
    assert serde.records_encoder(JSON, JSON) is None  # JSON keys
    assert serde.records_encoder(TEXT, TEXT) is None
    assert serde.records_encoder(serde.KEY, JSON) is None


# ------------------------------------------------------------------ the two-way merge

TIMES = st.lists(st.integers(0, 6), max_size=12).map(sorted)


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
@settings(max_examples=300, deadline=None)
@given(TIMES, TIMES, st.sampled_from([(0, 1), (1, 0), (2, 5)]), st.integers(0, 13))
def test_the_compiled_merge_is_the_pure_merge(ta, tb, sides, start):
    """``_crecords.merge2``/``tag`` against ``serde.merge_two``/``tag_rest``: the same
    ``(index, record)`` items (the same record objects, in the same order) and counts."""
    a = [("a", None, t, n) for n, t in enumerate(ta)]
    b = [("b", {"x": n}, t, n) for n, t in enumerate(tb)]
    ia, ib = sides
    want: list = []
    got: list = [("before",)]
    assert serde._crecords.merge2(a, b, ia, ib, got) == serde.merge_two(a, b, ia, ib, want)
    assert got[1:] == want and all(g[1] is w[1] for g, w in zip(got[1:], want, strict=True))
    serde.tag_rest(b, start, ib, want)
    serde._crecords.tag(b, start, ib, got)
    assert got[1:] == want and all(g[1] is w[1] for g, w in zip(got[1:], want, strict=True))


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
def test_the_compiled_merge_raises_what_the_pure_merge_raises():
    a, b = [("a", None, 1, 0)], [("b", None, "x", 0)]
    for merge in (serde.merge_two, serde._crecords.merge2):
        with pytest.raises(TypeError):
            merge(a, b, 0, 1, [])


# ------------------------------------------------------------------ straight from log batches

CHUNK = st.tuples(
    st.lists(
        st.tuples(
            KEYS,
            VALUES,
            st.lists(
                st.tuples(st.text(max_size=3), st.one_of(st.none(), st.binary(max_size=3))),
                max_size=2,
            ),
            st.integers(0, 10**6),
        ),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([0, 1]),  # codec: none, gzip
    st.booleans(),  # LogAppendTime
    st.sampled_from([None, True, False]),  # not transactional, committed, aborted
)


def _store_of(tmp, chunks):
    from streams.log import LogStore
    from streams.log import records as rb
    from streams.log.records import ProducerRecord

    store = LogStore.open(str(tmp))
    store.create_topic("t", 1)
    seq = 0
    for recs, codec, log_append, txn in chunks:
        end = store.offsets("t", 0)[1]
        prs = [ProducerRecord(v, k, tuple(h), ts) for k, v, h, ts in recs]
        if txn is None:
            batch = rb.build_batch(
                prs, base_offset=end, now_ms=7, codec=codec, log_append_time=log_append
            )
            store.append_raw("t", 0, batch)
        else:
            batch = rb.build_batch(
                prs,
                base_offset=0,
                now_ms=7,
                codec=codec,
                producer_id=7,
                producer_epoch=0,
                base_sequence=seq,
                attributes_extra=rb.ATTR_TRANSACTIONAL,
            )
            seq += len(prs)
            store.sync_to("t", 0, store.produce("t", 0, batch).sync_to)
            store.write_marker("t", 0, 7, 0, txn)
    return store


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
@settings(max_examples=60, deadline=None)
@given(
    st.lists(CHUNK, min_size=1, max_size=5),
    st.sampled_from([TEXT, BYTES]),
    st.sampled_from([None, field("ts")]),
    st.integers(0, 40),
    st.integers(1, 12),
)
def test_read_tuples_equals_reading_records_then_decoding_them(
    tmp_path_factory, chunks, key, extract, start, n
):
    """``EmbeddedLog.read_tuples`` with ``serde.batch_decoder`` (``_crecords.decode_body``)
    against ``LogStore.read`` and deserialising each record: the same tuples (a prefix of
    whole batches, at least `n` when there are), markers skipped, compressed, LogAppendTime
    and transactional batches alike; None only where a record of its batches fails."""
    from streams.jobs.logs import EmbeddedLog

    store = _store_of(tmp_path_factory.mktemp("s"), chunks)
    try:
        log = EmbeddedLog(store)
        decode = serde.batch_decoder(key, JSON, extract)
        end = store.offsets("t", 0)[1]
        got = log.read_tuples("t", 0, start, n, decode)
        recs = log.read("t", 0, start, 10**6)
        want, failed = [], None
        for r in recs:
            try:
                want += reference([r], key, extract)
            except Exception:  # noqa: BLE001 - the pure loop's error
                failed = r.offset
                break
        if got is None:
            assert failed is not None
            return
        assert same(got, want[: len(got)])
        assert failed is None or len(got) <= len(want)
        assert len(got) >= min(n, len(want)) or failed is not None or start >= end
    finally:
        store.close()


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
def test_a_runner_reads_its_inputs_straight_from_the_log_batches(tmp_path):
    """Over the embedded store with text/bytes keys and JSON values the runner reads through
    ``read_tuples``; any other serialiser, the usual way."""
    from streams.jobs import Job
    from streams.jobs.runner import Runner
    from streams.log import LogStore

    store = LogStore.open(str(tmp_path))
    try:
        store.create_topic("in", 1)
        store.create_topic("raw", 1)
        store.append_batch("in", [(b'{"v":%d}' % i, b"k", (), i) for i in range(10)])
        store.append_batch("raw", [(b"x", b"k", (), i) for i in range(10)])
        job = Job("tuples")
        job.stream("in", value=JSON).to("out")
        job.stream("raw", value=BYTES).to("out2", value=BYTES)
        runner = Runner(job, store)
        assert runner.run_until_idle() == 20
        runner.close()
        assert runner._decoders[("in", False)] is not None
        assert runner._decoders[("raw", False)] is None
        assert [r.value for r in store.read("out", 0, 0, 100)] == [
            b'{"v":%d}' % i for i in range(10)
        ]
    finally:
        store.close()


# ------------------------------------------------------------------ a checkpoint's runs

RUN_FIELDS = st.one_of(st.none(), st.binary(max_size=40))


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(RUN_FIELDS, RUN_FIELDS, st.just(()), st.one_of(st.none(), st.integers(0, 9))),
        max_size=40,
    ),
    st.integers(0, 200),
    st.booleans(),
)
def test_runs_cuts_what_the_pure_loop_cuts(recs, limit, producer_records):
    from streams.jobs.logs import _runs, _runs_pure
    from streams.log.records import ProducerRecord

    if producer_records:
        recs = [ProducerRecord(*r) for r in recs]
    want = _runs_pure(recs, limit)
    got = serde._crecords.runs(recs, limit)
    assert got == want and _runs(recs, limit) == want
    if len(want) == 1:
        assert got[0] is recs  # a list that fits is not copied


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
def test_runs_leaves_other_shapes_to_the_pure_loop():
    from streams.jobs.logs import _runs, _runs_pure

    with pytest.raises(ValueError):  # three fields: the pure loop's own error
        _runs([(b"v", b"k", ())], 10)
    for recs in (
        [[b"v", b"k", (), 1]],  # a list
        [(bytearray(b"v"), b"k", (), 1)],
        [(b"v", memoryview(b"k"), (), 1)],
    ):
        assert serde._crecords.runs(recs, 10) is None
        assert _runs(recs, 10) == _runs_pure(recs, 10)


FLAT = st.dictionaries(
    st.text(max_size=4),
    st.one_of(
        st.integers(-(10**19), 10**19),
        st.text(max_size=5),
        st.booleans(),
        st.none(),
        st.floats(allow_nan=False),
        st.lists(st.integers(), max_size=2),
    ),
    max_size=4,
)


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
@settings(max_examples=500, deadline=None)
@given(
    FLAT,
    st.sampled_from([(",", ":"), (", ", ": "), (",", ": ")]),
    st.booleans(),
    st.lists(st.tuples(st.integers(0, 60), st.binary(min_size=1, max_size=2)), max_size=2),
)
def test_small_json_objects_read_as_json_reads_them(obj, separators, ascii_only, edits):
    """``_crecords.small_json`` (``decode_body``'s reading of flat, compact JSON objects)
    gives what ``json.loads`` gives, of the same types, or None (orjson and json then read
    it, as before): objects as ``json.dumps`` writes them, and bytes edited at random."""
    import json

    data = json.dumps(obj, separators=separators, ensure_ascii=ascii_only).encode()
    for at, chunk in edits:
        data = data[:at] + chunk + data[at + len(chunk) :]
    got = serde._crecords.small_json(data)
    if not edits and separators == (",", ":"):
        simple = all(
            isinstance(v, str | bool | type(None)) or (type(v) is int and abs(v) < 10**18)
            for v in obj.values()
        )
        printable = all(
            all(0x20 <= ord(c) <= 0x7E and c not in '"\\' for c in s)
            for s in [*obj, *(v for v in obj.values() if isinstance(v, str))]
        )
        assert got is not None or not (simple and printable), "a plain object is deferred"
    if got is None:
        return
    want = json.loads(data)
    assert got == want and type(got) is dict
    assert list(got) == list(want)
    assert [type(v) for v in got.values()] == [type(v) for v in want.values()]


# ------------------------------------------------------------------ record keys, decoded once


@pytest.mark.skipif(serde._crecords is None, reason="_crecords is not built")
@settings(max_examples=500, deadline=None)
@given(st.lists(st.binary(max_size=70) | st.sampled_from([b"k1", b"k2", b"\xc3\xa9"]), max_size=30))
def test_a_record_key_is_its_text_and_the_same_str_when_it_comes_again(keys):
    """``_crecords.record_key`` (the keys ``decode``/``decode_body`` give a text-keyed input)
    is ``bytes.decode()`` (the same error for bytes that are not UTF-8), and a short ASCII key
    that came before is the same str object, unless another key took its slot since."""
    for data in keys:
        try:
            want = data.decode()
        except UnicodeDecodeError:
            with pytest.raises(UnicodeDecodeError):
                serde._crecords.record_key(data)
            continue
        got = serde._crecords.record_key(data)
        assert got == want and type(got) is str
        if data.isascii() and len(data) <= 64:
            assert serde._crecords.record_key(data) is got
