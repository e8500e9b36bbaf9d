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
        assert decode_records([Record(0, 1, b"k", b"{}")], TEXT, JSON, None) is None
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
