"""The compiled changelog loop of a memory-backed store (streams/jobs/_cstate.pyx, built by
`make native`) against ``state._take_memory``, the reference: for any changed keys and values
(deleted ones, values unchanged since the backend's, keys and values that orjson writes
otherwise than json or refuses) both give the same changelog records, objects, backend and
errors; and ``take_changes`` runs the reference when the module is not built."""

from __future__ import annotations

import math

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.jobs import state
from streams.jobs.serde import _ORJSON_STRICT, _not_json
from streams.jobs.state import _MISSING, MemoryBackend, Store, encode, encode_value


def test_the_compiled_changelog_loop_is_built():
    assert state._cstate is not None, "streams/jobs/_cstate.so is not built: make native"


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),  # past 64 bits: orjson refuses, json writes
    st.floats(allow_nan=True, allow_infinity=True),  # NaN, inf: json's
    st.sampled_from([1e16, 1e-7, 0.1, 2.5, -0.0]),  # floats json and orjson write otherwise
    st.text(max_size=5),  # non-ASCII, DEL, lone surrogates
    st.sampled_from(["null", "nulls", "e1", "a.b", "1e5", "\x7f"]),
)
KEYS = st.one_of(
    SCALARS, st.tuples(SCALARS, SCALARS), st.tuples(st.text(max_size=3), st.integers())
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.dictionaries(st.integers(0, 3), inner, min_size=1, max_size=2),  # json's keys
    ),
    max_leaves=6,
)


def run(take, dirty, backend, objects):
    d, objs, out, taken = dict(backend), dict(objects), [], []
    try:
        take(dict(dirty), d, objs, out, taken)
    except Exception as exc:  # noqa: BLE001 - the same error either way
        return ("error", type(exc), str(exc), out, taken)
    return out, taken, d, objs


def compiled(dirty, d, objects, out, taken):
    state._cstate.take_memory(
        dirty, d, objects, _MISSING, out, taken,
        encode, encode_value, orjson.dumps, _not_json, _ORJSON_STRICT,
    )  # fmt: skip


@pytest.mark.skipif(state._cstate is None, reason="_cstate is not built")
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(KEYS, st.one_of(st.just(_MISSING), VALUES)), max_size=8),
    st.data(),
)
def test_take_memory_equals_the_reference(changes, data):
    dirty = {}
    for k, v in changes:
        try:
            dirty[k] = v
        except TypeError:
            pass  # an unhashable key (a NaN is hashable)
    backend, objects = {}, {}
    for k, v in dirty.items():  # some keys already in the backend: the same value or another
        choice = data.draw(st.sampled_from(["none", "same", "other"]))
        try:
            kb = encode(k)
        except (TypeError, ValueError):
            continue
        if choice == "same" and v is not _MISSING:
            try:
                backend[kb] = encode_value(v)
            except (TypeError, ValueError):
                pass
        elif choice == "other":
            backend[kb] = b"[0]"
            objects[k] = [0]
    want = run(state._take_memory, dirty, backend, objects)
    got = run(compiled, dirty, backend, objects)
    assert repr(got) == repr(want)  # repr: NaN != NaN


def test_take_changes_is_the_same_without_the_compiled_loop(monkeypatch):
    def changes():
        s = Store("s")
        s[("k", 1)] = {"n": 1, "x": math.nan}
        s["gone"] = 1
        s.take_changes()
        del s["gone"]
        s[("k", 1)] = {"n": 1, "x": math.nan}  # unchanged: no record
        s[("k", 2)] = [1.5, "é", None]
        s[2**70] = "big"
        out = s.take_changes()
        return repr((out, s.taken, sorted(s.backend._d.items())))

    assert isinstance(Store("s").backend, MemoryBackend)
    want = changes()
    monkeypatch.setattr(state, "_cstate", None)
    assert changes() == want
