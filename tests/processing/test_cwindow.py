"""The compiled batch loop of tumbling windows (streams/processing/_cwindow.pyx, built by
`make native`) against the pure loop, the reference: ``WindowOperator.process_records`` gives
the same emissions, late events, watermark, open windows and touched windows either way, for
any batches of records (out of order, late, with grace, emitting finals or updates, restored
progress, timestamps that are not ints), and ``extract_values`` the same values and the same
failing record, and ``emit_fixed`` (a window step's rows, ``streams.jobs.task``) the same rows
as ``_Window._emit_fixed_pure``; the pure path runs again when the module is not built."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.errors import InvalidConfig
from streams.jobs import task as task_module
from streams.jobs.state import Store
from streams.processing import (
    Count,
    Hopping,
    Max,
    Mean,
    Min,
    Quantile,
    Sum,
    Tumbling,
    WindowOperator,
)
from streams.processing import operator as operator_module
from streams.processing.operator import MIN_TIME, WindowResult, extract_values_pure

REPO = Path(__file__).resolve().parents[2]
KEYS = ("a", "b", ("c", 1), 7, 7.0, True, 1, b"a")  # equal keys of other types
compiled = operator_module._cwindow


def test_the_compiled_loop_is_built():
    """`make native` builds it (CI runs `make test`); without it windows run the pure loop."""
    assert compiled is not None, "streams/processing/_cwindow.so is not built: run make native"


needs_compiled = pytest.mark.skipif(compiled is None, reason="_cwindow is not built")

TIMES = st.one_of(
    st.integers(-3000, 6000),
    st.integers(-3000, 6000).map(float),  # a float time goes the pure way, record by record
    st.sampled_from([(1 << 62) + 5, -(1 << 62) - 5, 1 << 70]),  # beyond the C arithmetic
)


@st.composite
def scripts(draw):
    """Batches of records ``(key, value dict, ts, offset)``, and the operator's settings."""
    n = draw(st.integers(1, 80))
    recs = []
    for i in range(n):
        t = draw(TIMES) if draw(st.integers(0, 9)) == 0 else draw(st.integers(0, 4000))
        recs.append((draw(st.sampled_from(KEYS)), {"v": draw(st.integers(-50, 100))}, t, i))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=6)))
    batches = [recs[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
    settings_ = {
        "size": draw(st.integers(1, 700)),
        "grace": draw(st.integers(0, 500)),
        "ooo": draw(st.integers(0, 300)),
        "emit": draw(st.sampled_from(["final", "current"])),
        "specs": draw(st.sampled_from(["count", "count+sum", "minmax", "mean+quantile"])),
        "progress": draw(st.sampled_from([None, (500, {0: 700}), (MIN_TIME, {})])),
    }
    return batches, settings_


SPECS = {
    "count": {"n": Count()},
    "count+sum": {"n": Count(), "s": Sum()},
    "minmax": {"lo": Min(), "hi": Max()},
    "mean+quantile": {"m": Mean(), "q": Quantile(0.5)},
}


def run(batches, s, use_compiled):
    op = WindowOperator(
        Tumbling(s["size"]),
        SPECS[s["specs"]],
        grace_ms=s["grace"],
        out_of_orderness_ms=s["ooo"],
        emit=s["emit"],
        late="side",
    )
    op.compiled = use_compiled
    if s["progress"] is not None:
        op.restore_progress(*s["progress"])
    out, touched = [], set()
    for batch in batches:
        values = [r[1]["v"] for r in batch] if op.needs_values else None
        out.append(op.process_records(batch, values, touched))
        out.append(("watermark", op.watermark, op.late_count, op.open_windows))
        out.append(sorted(touched, key=repr))  # each batch's (a task clears it at commits)
        touched.clear()
    states = {k: op.fixed_window_state(*k) for k in sorted(op._fixed, key=repr)}
    out.append(op.flush())
    return out, sorted(touched, key=repr), op.side_output, states, op.progress()


def run_reference(batches, s):
    """The same through ``process_many`` of ``(key, value, ts, 0)`` events (no touched set)."""
    op = WindowOperator(
        Tumbling(s["size"]),
        SPECS[s["specs"]],
        grace_ms=s["grace"],
        out_of_orderness_ms=s["ooo"],
        emit=s["emit"],
        late="side",
    )
    if s["progress"] is not None:
        op.restore_progress(*s["progress"])
    out, touched = [], set()
    for batch in batches:
        touched.update((r[0], r[2] - r[2] % s["size"]) for r in batch)
        value = (lambda r: r[1]["v"]) if op.needs_values else (lambda r: 0)
        out.append(op.process_many([(r[0], value(r), r[2], 0) for r in batch]))
        out.append(("watermark", op.watermark, op.late_count, op.open_windows))
        out.append(sorted(touched, key=repr))
        touched.clear()
    states = {k: op.fixed_window_state(*k) for k in sorted(op._fixed, key=repr)}
    out.append(op.flush())
    return out, sorted(touched, key=repr), op.side_output, states, op.progress()


@settings(max_examples=150, deadline=None)
@given(scripts())
def test_process_records_equals_process_many(script):
    batches, s = script
    want = run_reference(batches, s)
    assert run(batches, s, use_compiled=False) == want
    if compiled is not None:
        assert run(batches, s, use_compiled=True) == want


@needs_compiled
def test_a_watermark_beyond_the_c_arithmetic_goes_the_pure_way():
    """A watermark moved far ahead from outside: the compiled loop leaves the batch to the pure
    loop, which finds the records late."""
    ops = []
    for use_compiled in (True, False):
        op = WindowOperator(Tumbling(10), {"n": Count()})
        op.compiled = use_compiled
        op.advance_watermark(1 << 63)
        op.process_records([("a", None, 5, 0), ("b", None, 1 << 64, 1)], None)
        ops.append((op.late_count, op.watermark, op.open_windows))
    assert ops[0] == ops[1] == (1, 1 << 64, 1)


def test_values_are_required_when_the_aggregates_read_them():
    op = WindowOperator(Tumbling(10), {"s": Sum()})
    with pytest.raises(ValueError, match="give one per record"):
        op.process_records([("a", None, 5, 0)], None)
    hopping = WindowOperator(Hopping(20, 10), {"n": Count()})
    with pytest.raises(InvalidConfig):
        hopping.process_records([("a", None, 5, 0)], None, set())


VALUES = st.one_of(
    st.fixed_dictionaries({"v": st.integers()}),
    st.fixed_dictionaries({"w": st.integers()}),  # no field: ext raises
    st.integers(),  # not a dict: ext decides
    st.lists(st.integers(), max_size=2),
)


@needs_compiled
@settings(max_examples=200, deadline=None)
@given(st.lists(VALUES, max_size=30))
def test_extract_values_equals_the_pure_loop(values):
    recs = [("k", v, 0, i) for i, v in enumerate(values)]

    def ext(value):
        if isinstance(value, list):
            return len(value)
        return value["v"]  # KeyError without the field, TypeError for an int

    got, want = [], []
    errors = []
    for fn, into in ((compiled.extract_values, got), (None, want)):
        try:
            if fn is None:
                extract_values_pure(recs, ext, into)
            else:
                fn(recs, "v", ext, into)
            errors.append(None)
        except (KeyError, TypeError) as exc:
            errors.append(type(exc))
    assert got == want
    assert errors[0] == errors[1]


def test_the_pure_loop_runs_when_the_module_is_not_built():
    """With the extension missing (a machine without a C compiler), windows still work."""
    code = textwrap.dedent(
        """
        import sys
        sys.modules["streams.processing._cwindow"] = None  # as if it were not built
        from streams.processing import operator, Count, Sum, Tumbling, WindowOperator
        assert operator._cwindow is None
        op = WindowOperator(Tumbling(10), {"n": Count(), "s": Sum()})
        vals = []
        recs = [("a", {"v": 2}, 1, 0), ("a", {"v": 3}, 12, 1)]
        operator.extract_values(recs, "v", lambda v: v["v"], vals)
        out = op.process_records(recs, vals, set())
        print([(r.key, r.start, r.values) for r in out])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.strip() == "[('a', 0, {'n': 1, 's': 2})]"


@st.composite
def window_results(draw):
    """A window step's results (some final, some stored), its dirty and stored sets."""
    out = []
    for _ in range(draw(st.integers(0, 12))):
        key, start = draw(st.sampled_from(KEYS[:-1])), draw(st.integers(0, 3)) * 10  # JSON
        values = draw(
            st.dictionaries(st.sampled_from(["n", "s", "start", "revision"]), st.integers())
        )
        if draw(st.integers(0, 9)) == 0:
            values = OrderedDict(values)  # not a dict exactly: the pure way
        replaces = draw(st.sampled_from([(), (), ((0, 10),)]))  # sessions': the pure way
        final, rev = draw(st.booleans()), draw(st.integers(0, 3))
        out.append(WindowResult(key, start, start + 10, values, rev, False, final, replaces))
    wks = [(r.key, r.start) for r in out]
    stored = {wk for wk in wks if draw(st.booleans())}
    dirty = {wk for wk in wks if draw(st.booleans())} | {("other", 0)}
    return out, dirty, stored, draw(st.booleans())


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(window_results())
def test_emit_fixed_equals_the_pure_loop(script):
    """``_cwindow.emit_fixed`` (through ``_Window._emit_fixed``) against ``_emit_fixed_pure``:
    the same rows, dirty and stored sets and store."""
    results, dirty, stored, only_final = script

    def run(method):
        store = Store("w")
        for wk in stored:
            store[wk] = [[0, 1, 1, None, None]]
        store.take_changes()
        step = SimpleNamespace(
            _dirty=set(dirty), _stored=set(stored), store=store, only_final=only_final
        )
        step._emit_fixed_pure = lambda *a: task_module._Window._emit_fixed_pure(step, *a)
        batch: list = []
        method(step, list(results), 7, batch)
        return repr((batch, sorted(step._dirty, key=repr), sorted(step._stored, key=repr))), {
            k: store.get(k) for k in stored
        }

    assert run(task_module._Window._emit_fixed) == run(task_module._Window._emit_fixed_pure)


@st.composite
def view_batches(draw):
    """A windowed view tap's rows (some replacing others, some without an end, some times
    floats) and the rows its store holds already."""
    recs = []
    for i in range(draw(st.integers(0, 12))):
        key, start = draw(st.sampled_from(KEYS[:-1])), draw(st.integers(0, 3)) * 10
        row = {"start": start, "end": start + draw(st.sampled_from([10, 20])), "n": i}
        kind = draw(st.integers(0, 9))
        if kind == 0:
            row["replaces"] = [[draw(st.integers(0, 3)) * 10, 99]]
        elif kind == 1:
            del row["end"]  # KeyError, blamed on the record
        ts = row.get("end", 5) - 1
        recs.append((key, row, float(ts) if kind == 2 else ts, i))
    before = [(k, s) for k in KEYS[:2] for s in (0, 10) if draw(st.booleans())]
    return recs, before, draw(st.sampled_from([None, 3, 100]))


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(view_batches())
def test_view_rows_equals_the_pure_loop(script):
    """``_cwindow.view_rows`` (through ``_ViewTap.push_many``) against ``_push_rows``: the
    same store, keys, ends, largest time and error."""
    recs, before, max_ts = script

    def run(method):
        store = Store("v")
        blamed = []
        tap = SimpleNamespace(
            windowed=True,
            max_ts=max_ts,
            _keys=set(),
            at_end={},
            ends=[],
            store=store,
            task=SimpleNamespace(blame=blamed.append),
        )
        tap._push_rows = lambda rs: task_module._ViewTap._push_rows(tap, rs)
        for k, s in before:
            task_module._ViewTap._push_rows(tap, [(k, {"start": s, "end": s + 10}, s + 9, 0)])
        error = None
        try:
            method(tap, 0, list(recs))
        except KeyError as exc:
            error = repr(exc)
        state = sorted(((repr(k), repr(store.get(k))) for k in tap._keys), key=repr)
        return repr((state, tap.at_end, sorted(tap.ends), tap.max_ts, error, blamed))

    push_many, pure = task_module._ViewTap.push_many, task_module._ViewTap._push_rows
    assert run(push_many) == run(lambda tap, side, rs: pure(tap, rs))
