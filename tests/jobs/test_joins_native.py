"""The inner interval join's compiled loop (streams/jobs/_cjoin.pyx, built by `make`) against
the pure-Python loop of ``IntervalJoin.process_many``, the reference: for any input cut into
any batches, the same emissions in the same order, the same state, watermark, late count and
expiry heap, and, when the joiner raises, the same failing item and the same state up to it."""

from __future__ import annotations

from collections.abc import MutableMapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.jobs import joins
from streams.jobs.joins import IntervalJoin, pair
from streams.jobs.state import Store
from tests.jobs.test_joins import stream_events


def test_the_compiled_loop_is_built_and_used():
    """`make` (make native) builds it; a join whose module did not build runs slower, so a
    missing compiler must show up as a failure here rather than as a slow benchmark."""
    assert joins._native_inner_batch is not None, "run `make native` (needs cc + Python.h)"
    assert IntervalJoin(5).native is joins._native_inner_batch


class Boom(Exception):
    pass


def joiner_failing_at(n: int | None):
    """A joiner that raises on its `n`-th call (never if None)."""
    calls = [0]

    def join(a, b):
        calls[0] += 1
        if calls[0] == n:
            raise Boom(calls[0])
        return (a, b)

    return join


def run(events, within, grace, scan_max, cuts, fail_at, native, stores=None, commit_every=0):
    """`stores`: make each side's store (``None``: plain dicts); `commit_every`: every so many
    batches, the stores' changes taken as a commit takes them."""
    kinds = {} if stores is None else {"left": stores(), "right": stores(), "meta": stores()}
    joiner = pair if fail_at is None and stores is not None else joiner_failing_at(fail_at)
    op = IntervalJoin(within, grace_ms=grace, joiner=joiner, **kinds)
    op.SCAN_MAX = scan_max
    if not native:
        op.native = None
    got, i, c, failed = [], 0, 0, None
    while i < len(events):
        n = cuts[c % len(cuts)]
        items = [(s, (k, j, t, j)) for j, (s, k, t) in enumerate(events[i : i + n], start=i)]
        try:
            got += op.process_many(items)
        except Boom:
            failed = op.failed_item
            break
        i, c = i + n, c + 1
        if commit_every and c % commit_every == 0:
            op.sync()  # as a task does before a checkpoint
            for store in kinds.values():
                if isinstance(store, Store):
                    store.take_changes()
    op.sync()  # the compiled loop's state into the stores
    return got, failed, op


# times moved: by 0 and -2**61 the compiled loop runs on C integers; past 2**62 (from the start,
# or from one event on: a batch of C integers, then of objects over the same state) on objects
SHIFTS = ["none", "negative", "huge", "huge from the middle"]


def shifted(events, how):
    if how == "none":
        return events
    if how == "negative":
        return [(s, k, t - (1 << 61)) for s, k, t in events]
    if how == "huge":
        return [(s, k, t + (1 << 63)) for s, k, t in events]
    half = len(events) // 2
    return events[:half] + [(s, k, t + (1 << 63)) for s, k, t in events[half:]]


@settings(max_examples=400, deadline=None)
@given(
    stream_events(),
    st.integers(0, 50),
    st.integers(0, 200),
    st.sampled_from([0, 2, IntervalJoin.SCAN_MAX]),
    st.lists(st.integers(1, 15), min_size=1, max_size=6),
    st.none() | st.integers(1, 30),
    st.sampled_from(SHIFTS),
)
def test_the_compiled_loop_equals_the_python_loop(
    events, within, grace, scan_max, cuts, fail_at, shift
):
    if joins._native_inner_batch is None:
        pytest.skip("the compiled loop is not built (test_the_compiled_loop_is_built fails)")
    events = shifted(events, shift)
    want, want_failed, py = run(events, within, grace, scan_max, cuts, fail_at, native=False)
    got, got_failed, nat = run(events, within, grace, scan_max, cuts, fail_at, native=True)
    assert got == want
    assert got_failed == want_failed
    assert nat.late_count == py.late_count
    assert nat.watermark == py.watermark
    assert [dict(s) for s in nat.sides] == [dict(s) for s in py.sides]
    assert dict(nat.meta) == dict(py.meta) or want_failed is not None  # meta: after a batch
    assert sorted(nat._heap, key=repr) == sorted(py._heap, key=repr)
    assert list(nat._queue) == list(py._queue)
    assert nat._unordered == py._unordered
    assert nat._max == py._max


class Mapping(MutableMapping):
    """A store that is neither a dict nor a Store: the loops' generic path."""

    def __init__(self):
        self.d = {}

    def __getitem__(self, key):
        return self.d[key]

    def __setitem__(self, key, value):
        self.d[key] = value

    def __delitem__(self, key):
        del self.d[key]

    def __iter__(self):
        return iter(self.d)

    def __len__(self):
        return len(self.d)


def store_contents(op) -> list[dict]:
    return [{k: v for k, v in s.items()} for s in op.sides]


@settings(max_examples=200, deadline=None)
@given(
    stream_events(),
    st.integers(0, 50),
    st.integers(0, 200),
    st.sampled_from([0, IntervalJoin.SCAN_MAX]),
    st.lists(st.integers(1, 15), min_size=1, max_size=6),
    st.sampled_from(["store", "mapping"]),
    st.integers(0, 3),
    st.booleans(),
)
def test_the_compiled_loop_over_stores_equals_the_python_loop(
    events, within, grace, scan_max, cuts, kind, commit_every, fails
):
    """Over changelogged Stores (reached through ``direct()``, commits in between) and over a
    mapping of another kind, with the default joiner (built in place by the compiled loop):
    the same emissions, state and changelog records as the Python loop."""
    if joins._native_inner_batch is None:
        pytest.skip("the compiled loop is not built (test_the_compiled_loop_is_built fails)")
    stores = (lambda: Store("s")) if kind == "store" else Mapping
    fail_at = 5 if fails and kind == "mapping" else None
    args = (events, within, grace, scan_max, cuts, fail_at)
    want, want_failed, py = run(*args, native=False, stores=stores, commit_every=commit_every)
    got, got_failed, nat = run(*args, native=True, stores=stores, commit_every=commit_every)
    assert got == want
    assert got_failed == want_failed
    assert nat.watermark == py.watermark and nat.late_count == py.late_count
    assert store_contents(nat) == store_contents(py)
    assert list(nat._queue) == list(py._queue)
    assert sorted(nat._heap, key=repr) == sorted(py._heap, key=repr)
    assert nat._unordered == py._unordered
    if kind == "store":
        # the same changelog records, but for tombstones of keys that came and went between
        # two checkpoints (never in the changelog): the Python loop's Store writes them, the
        # compiled state (which writes the stores at a checkpoint) has nothing to delete
        for n_side, p_side in zip(nat.sides, py.sides, strict=True):
            n_changes, p_changes = n_side.take_changes(), p_side.take_changes()
            assert {k: v for k, v in n_changes if v is not None} == {
                k: v for k, v in p_changes if v is not None
            }
            assert {k for k, v in n_changes if v is None} <= {k for k, v in p_changes if v is None}
            assert dict(n_side.backend.items()) == dict(p_side.backend.items())


QUEUE_TIMES = st.integers(-(1 << 62), 1 << 62) | st.integers(-(1 << 70), 1 << 70)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["append", "popleft", "clear"]), QUEUE_TIMES, st.integers(0, 1))
    )
)
def test_the_compiled_expiry_queue_acts_as_a_deque(ops):
    """``_cjoin.ExpiryQueue`` (the join's queue when built) against a deque, the reference: the
    same entries through appends (times small or not), poplefts past its ring's growth, clears."""
    if joins._native_inner_batch is None:
        pytest.skip("the compiled loop is not built (test_the_compiled_loop_is_built fails)")
    from collections import deque

    got, want = joins._ExpiryQueue(), deque()
    for i, (op, t, side) in enumerate(ops * 20):
        if op == "append" or not want:
            got.append((t, side, f"k{i}"))
            want.append((t, side, f"k{i}"))
        elif op == "popleft":
            assert got.popleft() == want.popleft()
        elif i % 7 == 0:
            got.clear()
            want.clear()
        assert len(got) == len(want)
        if want:
            assert got[0] == want[0] and got[-1] == want[-1]
    assert list(got) == list(want)
    with pytest.raises(IndexError):
        got[len(want)]


# ------------------------------------------------------------------ values as JSON text

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(1 << 70), 1 << 70)
    | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


def run_values(events, values, as_text, within, grace, cuts, text, commit_every):
    """The join of `events` carrying `values` over Stores, with its values as JSON text
    (``use_json_text``; a value given as text where `as_text` says so, as the runner hands
    over canonical input bytes) or as values; emissions with each value as JSON bytes."""
    from streams.jobs.serde import JSON, json_text

    stores = {"left": Store("l"), "right": Store("r"), "meta": Store("m")}
    op = IntervalJoin(within, grace_ms=grace, **stores)
    if text:
        assert op.use_json_text(json_text, JSON.deserialize) == (op._cached is not None)
    got, i, c = [], 0, 0
    while i < len(events):
        n = cuts[c % len(cuts)]
        items = []
        for j in range(i, min(i + n, len(events))):
            s, k, t = events[j]
            v = values[j % len(values)]
            items.append((s, (k, json_text(v) if text and as_text[j % len(as_text)] else v, t, j)))
        for k, v, t, o in op.process_many(items):
            got.append((k, v if type(v) is bytes else JSON.serialize(v), t, o))
        i, c = i + n, c + 1
        if commit_every and c % commit_every == 0:
            op.sync()
            for store in stores.values():
                store.take_changes()
    op.sync()
    return got, op, stores


@settings(max_examples=200, deadline=None)
@given(
    stream_events(),
    st.lists(JSON_VALUES, min_size=1, max_size=8),
    st.lists(st.booleans(), min_size=1, max_size=5),
    st.integers(0, 50),
    st.integers(0, 200),
    st.lists(st.integers(1, 15), min_size=1, max_size=6),
    st.integers(0, 3),
    st.sampled_from(SHIFTS),
)
def test_a_join_of_json_text_writes_what_the_join_of_values_writes(
    events, values, as_text, within, grace, cuts, commit_every, shift
):
    """``IntervalJoin.use_json_text`` (a direct join to a JSON sink): each pair comes as the
    bytes that writing ``[left, right]`` as JSON gives, whether a value came as its text or
    as a value; the stores (the changelog) hold the same values; and a time too large for
    the compiled state (``shift``) turns the text off mid-stream without changing a byte."""
    if joins._JoinSide is None:
        pytest.skip("the compiled loop is not built (test_the_compiled_loop_is_built fails)")
    events = shifted(events, shift)
    args = (events, values, as_text, within, grace, cuts)
    want, py, py_stores = run_values(*args, text=False, commit_every=commit_every)
    got, nat, nat_stores = run_values(*args, text=True, commit_every=commit_every)
    assert got == want
    assert nat.late_count == py.late_count and nat.watermark == py.watermark
    for name in ("left", "right", "meta"):
        assert dict(nat_stores[name].items()) == dict(py_stores[name].items())
