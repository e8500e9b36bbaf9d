"""Tumbling windows in event time, driven by the testing kit.

Timelines: one column per millisecond-ish tick, ``|`` marks window boundaries, ``a3`` an event of
key a with value 3, ``W`` where the watermark is when something fires.
"""

from __future__ import annotations

import pytest

from streams.errors import InvalidConfig
from streams.processing import (
    Count,
    Max,
    Mean,
    Min,
    Quantiles,
    Sum,
    Tumbling,
    WindowOperator,
    WindowResult,
)
from streams.processing.testing import ManualClock, TestingSink, TestingSource, run_operator

AGGS = {"n": Count(), "sum": Sum(), "min": Min(), "max": Max(), "mean": Mean()}


def op(**kw) -> WindowOperator:
    return WindowOperator(Tumbling(10), AGGS, **kw)


def test_in_order_fires_when_watermark_passes_end():
    #  0         10        20
    #  |a1  a3   |a5       |a7
    #            ^ a5 at 10 moves the watermark to 10 = end of [0,10): it fires, final (no grace)
    sink = run_operator(op(), [("a", 1, 0), ("a", 3, 5), ("a", 5, 10), ("a", 7, 20)])
    assert sink.results == [
        WindowResult(
            "a", 0, 10, {"n": 2, "sum": 4, "min": 1, "max": 3, "mean": 2.0}, 0, False, True
        ),
        WindowResult(
            "a", 10, 20, {"n": 1, "sum": 5, "min": 5, "max": 5, "mean": 5.0}, 0, False, True
        ),
    ]


def test_windows_are_half_open_and_epoch_aligned():
    # 9 is in [0,10); 10 starts [10,20); negative times align too: -1 is in [-10, 0)
    sink = run_operator(
        op(out_of_orderness_ms=20), [("a", 1, 9), ("a", 1, 10), ("a", 1, -1)], flush=True
    )
    assert sorted((r.start, r.end, r.values["n"]) for r in sink.finals()) == [
        (-10, 0, 1),
        (0, 10, 1),
        (10, 20, 1),
    ]


def test_out_of_order_within_bound_is_not_late():
    # ooo = 5: watermark = max - 5
    #  0         10        20
    #  |   a1    | a2 a3   |
    #      4       12 ^3   (3 arrives after 12: watermark 7 < 10, [0,10) still open)
    #                     a 16 -> watermark 11 >= 10: [0,10) fires with both early events
    sink = run_operator(
        op(out_of_orderness_ms=5), [("a", 1, 4), ("a", 2, 12), ("a", 3, 3), ("a", 4, 16)]
    )
    assert [(r.start, r.values["n"], r.values["sum"]) for r in sink.results] == [(0, 2, 4)]
    assert sink.results[0].final


def test_late_within_grace_emits_correction_then_final():
    # grace = 10, ooo = 0
    #  0         10        20        30
    #  |a1       |a1  ^a5  |     a1  |
    #              12  5          27: watermark 27 >= 10+10 -> [0,10) closes (final)
    #  at 12: [0,10) fires (rev 0, n=1); 5 arrives: correction (rev 1, n=2)
    operator = op(grace_ms=10)
    sink = run_operator(operator, [("a", 1, 1), ("a", 1, 12), ("a", 5, 5), ("a", 1, 27)])
    first = [r for r in sink.results if r.start == 0]
    assert [(r.revision, r.correction, r.final, r.values["sum"]) for r in first] == [
        (0, False, False, 1),
        (1, True, False, 6),
        (2, False, True, 6),
    ]
    assert operator.corrections == 1 and operator.late_count == 0


def test_too_late_is_dropped_and_counted():
    #  0         10        20
    #  |a1       |       a1|     ^a9 at 3: [0,10) closed at watermark 19 >= 10+5
    operator = op(grace_ms=5)
    sink = run_operator(operator, [("a", 1, 1), ("a", 1, 19), ("a", 9, 3)], flush=True)
    assert operator.late_count == 1
    assert sink.final_values("sum") == {("a", 0, 10): 1, ("a", 10, 20): 1}
    assert sink.late == []  # dropped, not side output


def test_too_late_to_side_output():
    operator = op(late="side")
    sink = run_operator(operator, [("a", 1, 1, 0), ("a", 1, 15, 0), ("a", 9, 3, 2)])
    assert operator.late_count == 1
    assert [(e.key, e.value, e.event_time, e.partition) for e in sink.late] == [("a", 9, 3, 2)]


def test_emit_current_emits_every_update():
    #  0         10
    #  |a1 a2 a3 |a4  -> three updates of [0,10) (rev 0..2), then its closing emission
    sink = run_operator(op(emit="current"), [("a", 1, 1), ("a", 2, 2), ("a", 3, 3), ("a", 4, 10)])
    zero = [r for r in sink.results if r.start == 0]
    assert [(r.revision, r.values["n"], r.final) for r in zero] == [
        (0, 1, False),
        (1, 2, False),
        (2, 3, False),
        (3, 3, True),
    ]
    assert not any(r.correction for r in zero)


def test_keys_are_independent_and_fire_together():
    sink = run_operator(op(), [("a", 1, 1), ("b", 2, 2), ("a", 3, 3), ("c", 1, 11)])
    assert {r.key: r.values["sum"] for r in sink.results} == {"a": 4, "b": 2}


def test_flush_fires_open_windows_once():
    operator = op(grace_ms=100)
    sink = run_operator(operator, [("a", 1, 1), ("a", 1, 15)], flush=True)
    # [0,10) fired at watermark 15 (not final: grace), flush closes both; one final each
    assert [(r.start, r.final) for r in sink.results] == [(0, False), (0, True), (10, True)]
    assert operator.open_windows == 0


def test_watermark_and_open_windows_properties():
    operator = op(out_of_orderness_ms=3)
    assert operator.watermark is None
    operator.process("a", 1, 5)
    operator.process("b", 1, 14)
    assert operator.watermark == 11 and operator.open_windows == 1  # [0,10) for a fired


def test_process_many_equals_process_one_by_one():
    events = [(f"k{i % 7}", i, (i * 37) % 100, 0) for i in range(300)]
    a, b = op(grace_ms=20, out_of_orderness_ms=5), op(grace_ms=20, out_of_orderness_ms=5)
    many = a.process_many(events) + a.flush()
    single = [r for e in events for r in b.process(*e)] + b.flush()
    assert many == single
    assert a.late_count == b.late_count


def test_processing_time_uses_the_clock():
    clock = ManualClock(1000)
    operator = WindowOperator(Tumbling(100), {"n": Count()}, time="processing", clock=clock)
    sink = TestingSink()
    sink(operator.process("a", None))  # at 1000 -> [1000,1100)
    sink(operator.process("a", None, event_time=5))  # event time ignored
    clock.advance(99)
    sink(operator.advance())
    assert sink.results == []
    clock.advance(1)
    sink(operator.advance())
    assert [(r.start, r.end, r.values["n"]) for r in sink.results] == [(1000, 1100, 2)]
    assert operator.watermark == 1100


def test_quantiles_are_mergeable_and_close():
    operator = WindowOperator(Tumbling(1000), {"q": Quantiles()})
    operator.process_many(("a", v, v - 1, 0) for v in range(1, 1001))
    (result,) = operator.flush()
    q = result.values["q"]
    assert q["p50"] == pytest.approx(500, rel=0.02)
    assert q["p95"] == pytest.approx(950, rel=0.02)
    assert q["p99"] == pytest.approx(990, rel=0.02)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"time": "wall"},
        {"emit": "always"},
        {"late": "keep"},
        {"grace_ms": -1},
        {"out_of_orderness_ms": 1.5},
        {"idle_timeout_ms": 0},
    ],
)
def test_bad_config_raises_invalid_config(kwargs):
    with pytest.raises(InvalidConfig):
        op(**kwargs)


def test_bad_window_size():
    with pytest.raises(InvalidConfig):
        Tumbling(0)


def test_source_rejects_malformed_items():
    with pytest.raises(ValueError):
        list(TestingSource([("a", 1)]))


def test_first_event_of_a_window_within_grace_emits_revision_zero():
    #  0         10        20
    #  |    a1 ^ |   b1    |        b1 at 15 -> watermark 15: [0,10) for b never existed;
    #  a1 at 5 after that: opens a's [0,10) within grace (closes at 10+10): emitted at once
    operator = op(grace_ms=10)
    sink = run_operator(operator, [("b", 1, 15), ("a", 1, 5), ("b", 1, 21)])
    a = [(r.revision, r.correction, r.final) for r in sink.by_key("a")]
    assert a == [(0, False, False), (1, False, True)]
    assert operator.corrections == 0


def test_emit_current_marks_updates_after_firing_as_corrections():
    operator = op(grace_ms=10, emit="current")
    sink = run_operator(operator, [("a", 1, 1), ("a", 1, 12), ("a", 1, 2)])
    zero = [(r.revision, r.values["n"], r.correction) for r in sink.results if r.start == 0]
    assert zero == [(0, 1, False), (1, 2, True)]
    assert operator.corrections == 1


def test_sketch_quantiles_are_within_one_percent_of_the_ranked_value():
    import math
    import random

    from streams.processing.sketch import QuantileSketch

    rng = random.Random(7)
    qs = (0.0, 0.01, 0.5, 0.95, 0.99, 1.0)
    for data in (
        [rng.expovariate(0.01) for _ in range(2000)],
        [0, 0, 0, 5.5, 7],
        [rng.uniform(-10, 10) for _ in range(501)],
        [3.25],
        [-2.0, -1.0],
    ):
        sketch = QuantileSketch(0.01)
        for v in data:
            sketch.add(v)
        exact = sorted(data)
        for q, got in zip(qs, sketch.quantiles(qs), strict=True):
            want = exact[math.floor(q * (len(data) - 1))]
            assert abs(got - want) <= 0.01 * abs(want) + 1e-12, (q, got, want)


def test_sketch_merge_equals_sketch_of_union():
    from streams.processing.sketch import QuantileSketch

    a, b, union = QuantileSketch(), QuantileSketch(), QuantileSketch()
    for i in range(-50, 300):
        (a if i % 3 else b).add(i * 1.5)
        union.add(i * 1.5)
    a.merge(b)
    qs = (0.1, 0.5, 0.9, 0.99)
    assert a.quantiles(qs) == union.quantiles(qs) and a.count == union.count
    assert QuantileSketch().quantiles((0.5,)) == [None]
    with pytest.raises(ValueError):
        a.merge(QuantileSketch(0.05))
