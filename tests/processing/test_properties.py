"""Property tests (hypothesis) of the window operator.

1. Disorder within the bound changes nothing: when every event arrives at most ``D`` ms after
   a later-stamped one and ``out_of_orderness_ms = D``, any such arrival order gives the final
   results of a batch oracle, nothing is late and nothing is corrected.
2. Conservation: in any arrival order, for tumbling and session windows, the counts of the
   final results plus the late events equal the input.
3. For tumbling windows in any order, the final results are the oracle's over the events that
   were not late (taken from the side output), and with ``grace >= D`` corrections bring
   ``out_of_orderness_ms = 0`` results to the oracle too.
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.processing import Count, Hopping, Session, Sliding, Sum, Tumbling, WindowOperator
from streams.processing.testing import ManualClock, Wait, run_operator

KEYS = ("a", "b", "c")


@st.composite
def streams_with_disorder(draw):
    """(events in arrival order, D): event i is stamped t_i and arrives at t_i + delay_i."""
    bound = draw(st.integers(0, 60))
    n = draw(st.integers(1, 60))
    times = draw(st.lists(st.integers(-200, 600), min_size=n, max_size=n))
    delays = draw(st.lists(st.integers(0, bound), min_size=n, max_size=n))
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=n, max_size=n))
    values = draw(st.lists(st.integers(-50, 100), min_size=n, max_size=n))
    partitions = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    arrival = sorted(range(n), key=lambda i: (times[i] + delays[i], i))
    return [(keys[i], values[i], times[i], partitions[i]) for i in arrival], bound


WINDOWS = st.one_of(
    st.builds(Tumbling, st.integers(1, 100)),
    st.integers(1, 60).flatmap(
        lambda step: st.builds(Hopping, st.integers(step, 4 * step), st.just(step))
    ),
    st.builds(Sliding, st.integers(1, 80)),
    st.builds(Session, st.integers(1, 40)),
)


def oracle(window, events) -> dict:
    """(key, start, end) -> (count, sum), computed from scratch in time order."""
    out: dict = defaultdict(lambda: [0, 0])
    if isinstance(window, Session):
        by_key = defaultdict(list)
        for key, value, t, _ in events:
            by_key[key].append((t, value))
        for key, items in by_key.items():
            items.sort(key=lambda x: x[0])
            start = end = None
            acc = [0, 0]
            for t, value in items:
                if end is not None and t >= end:
                    out[(key, start, end)] = acc
                    start, acc = None, [0, 0]
                start = t if start is None else start
                end = t + window.gap_ms
                acc = [acc[0] + 1, acc[1] + value]
            out[(key, start, end)] = acc
    elif isinstance(window, Sliding):
        for key, _, t, _ in events:
            s, e = window.window_for(t)
            out[(key, s, e)] = [0, 0]
        for (key, s, e), acc in out.items():
            for k, value, t, _ in events:
                if k == key and s <= t < e:
                    acc[0] += 1
                    acc[1] += value
    else:
        for key, value, t, _ in events:
            for start in window.starts(t):
                acc = out[(key, start, start + window.size_ms)]
                acc[0] += 1
                acc[1] += value
    return {k: tuple(v) for k, v in out.items()}


def finals(sink) -> dict:
    return {(r.key, r.start, r.end): (r.values["n"], r.values["s"]) for r in sink.finals()}


def run(window, events, **kw):
    operator = WindowOperator(window, {"n": Count(), "s": Sum()}, late="side", **kw)
    sink = run_operator(operator, events, flush=True)
    return operator, sink


@settings(max_examples=150, deadline=None)
@given(streams_with_disorder(), WINDOWS, st.sampled_from(["final", "current"]))
def test_disorder_within_bound_leaves_final_results_unchanged(stream, window, emit):
    events, bound = stream
    operator, sink = run(window, events, out_of_orderness_ms=bound, emit=emit)
    assert operator.late_count == 0 and operator.corrections == 0
    assert finals(sink) == oracle(window, events)
    # exactly one final emission per window
    assert len(sink.finals()) == len(finals(sink))


@settings(max_examples=150, deadline=None)
@given(
    streams_with_disorder(),
    st.sampled_from([Tumbling(25), Session(15)]),
    st.integers(0, 30),
    st.integers(0, 30),
)
def test_counted_plus_dropped_equals_input(stream, window, ooo, grace):
    events, _ = stream
    operator, sink = run(window, events, out_of_orderness_ms=ooo, grace_ms=grace)
    counted = sum(n for n, _ in finals(sink).values())
    assert counted + operator.late_count == len(events)
    assert len(sink.late) == operator.late_count


@settings(max_examples=150, deadline=None)
@given(streams_with_disorder(), st.integers(1, 50), st.integers(0, 30), st.integers(0, 30))
def test_tumbling_finals_are_the_oracle_of_accepted_events(stream, size, ooo, grace):
    events, bound = stream
    operator, sink = run(Tumbling(size), events, out_of_orderness_ms=ooo, grace_ms=grace)
    late = [(e.key, e.value, e.event_time, e.partition) for e in sink.late]
    accepted = list(events)
    for e in late:
        accepted.remove(e)
    assert finals(sink) == oracle(Tumbling(size), accepted)
    if grace >= bound:  # corrections within grace reach the whole answer
        assert operator.late_count == 0
        assert finals(sink) == oracle(Tumbling(size), events)


@st.composite
def scripts(draw):
    """Events (any order, any partition) mixed with clock steps."""
    items = []
    for _ in range(draw(st.integers(1, 60))):
        if draw(st.integers(0, 9)) == 0:
            items.append(Wait(draw(st.integers(0, 300))))
        else:
            items.append(
                (
                    draw(st.sampled_from(KEYS)),
                    draw(st.integers(-5, 20)),
                    draw(st.integers(0, 400)),
                    draw(st.integers(0, 2)),
                )
            )
    return items


@settings(max_examples=150, deadline=None)
@given(
    scripts(),
    st.integers(1, 60),
    st.integers(0, 30),
    st.integers(0, 30),
    st.sampled_from(["final", "current"]),
    st.sampled_from([None, 100]),
)
def test_tumbling_fast_path_equals_generic_path(script, size, ooo, grace, emit, idle):
    """The dedicated tumbling loop and the generic one (a hopping window whose step is its
    size) must emit exactly the same results, in the same order."""
    outputs = []
    for window in (Tumbling(size), Hopping(size, size)):
        clock = ManualClock(0)
        operator = WindowOperator(
            window,
            {"n": Count(), "s": Sum()},
            out_of_orderness_ms=ooo,
            grace_ms=grace,
            emit=emit,
            idle_timeout_ms=idle,
            clock=clock,
        )
        sink = run_operator(operator, script, clock=clock, flush=True)
        outputs.append((sink.results, operator.late_count, operator.corrections))
    assert outputs[0] == outputs[1]


@settings(max_examples=150, deadline=None)
@given(
    scripts(),
    st.integers(1, 40),
    st.integers(1, 40),
    st.integers(0, 30),
    st.integers(0, 30),
    st.sampled_from(["final", "current"]),
    st.sampled_from([None, 100]),
)
def test_hopping_fast_path_equals_generic_path(script, size, step, ooo, grace, emit, idle):
    outputs = []
    for fast in (True, False):
        clock = ManualClock(0)
        operator = WindowOperator(
            Hopping(size, step),
            {"n": Count(), "s": Sum()},
            out_of_orderness_ms=ooo,
            grace_ms=grace,
            emit=emit,
            idle_timeout_ms=idle,
            clock=clock,
        )
        operator._fast_hopping = fast
        sink = run_operator(operator, script, clock=clock, flush=True)
        outputs.append((sink.results, operator.late_count, operator.corrections))
    assert outputs[0] == outputs[1]
