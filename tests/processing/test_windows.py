"""Hopping, sliding and session windows, idle partitions and clock skew, with the testing kit.

In the timelines, ``|`` marks window boundaries, ``aN`` an event of key a at the column's time.
"""

from __future__ import annotations

import itertools

import pytest

from streams.errors import InvalidConfig
from streams.processing import (
    ClockSkewCorrector,
    Count,
    Hopping,
    Max,
    Mean,
    Min,
    Quantiles,
    Session,
    Sliding,
    Sum,
    Tumbling,
    WindowOperator,
)
from streams.processing.testing import ManualClock, Tick, Wait, run_operator


def counts(sink, name="n"):
    return sorted((r.key, r.start, r.end, r.values[name]) for r in sink.finals())


# ------------------------------------------------------------------ hopping


def test_hopping_event_lands_in_every_covering_window():
    #  0    5    10   15   20
    #  |----[0,10)---|
    #       |----[5,15)---|
    #            |---[10,20)---|
    #         a7     a12
    operator = WindowOperator(Hopping(10, 5), {"n": Count()})
    sink = run_operator(operator, [("a", 1, 7), ("a", 1, 12)], flush=True)
    assert counts(sink) == [("a", 0, 10, 1), ("a", 5, 15, 2), ("a", 10, 20, 1)]


def test_hopping_with_gaps_ignores_events_between_windows():
    operator = WindowOperator(Hopping(5, 10), {"n": Count()})
    sink = run_operator(operator, [("a", 1, 3), ("a", 1, 7)], flush=True)  # 7 is in a gap
    assert counts(sink) == [("a", 0, 5, 1)]
    assert operator.late_count == 0


def test_hopping_starts_are_epoch_aligned():
    assert Hopping(10, 5).starts(12) == (5, 10)
    assert Hopping(10, 3).starts(10) == (3, 6, 9)
    assert Hopping(10, 5).starts(-1) == (-10, -5)


# ------------------------------------------------------------------ sliding


def test_sliding_rule_one_window_per_event_time_holding_the_size_before_it():
    # size 10: an event at t defines [t-9, t+1): the events in (t-10, t]
    #  -4     3  5  6     12  13  14 15
    #  [------------)                       defined by a5:  {5}
    #         [-----------------)           defined by a12: {5, 12}
    #            [--------------------)     defined by a14: {5, 12, 14}
    assert Sliding(10).window_for(5) == (-4, 6)
    expected = [("a", -4, 6, 1), ("a", 3, 13, 2), ("a", 5, 15, 3)]
    for order in itertools.permutations([("a", 1, 5), ("a", 1, 12), ("a", 1, 14)]):
        operator = WindowOperator(Sliding(10), {"n": Count()}, out_of_orderness_ms=20)
        assert counts(run_operator(operator, order, flush=True)) == expected, order


def test_sliding_excludes_events_exactly_size_apart():
    operator = WindowOperator(Sliding(10), {"n": Count(), "s": Sum()})
    sink = run_operator(operator, [("a", 1, 0), ("a", 2, 10), ("a", 4, 10)], flush=True)
    # 0 and 10 are 10 apart: not within 10 of each other; the two events at 10 share a window
    assert counts(sink, "s") == [("a", -9, 1, 1), ("a", 1, 11, 6)]


def test_sliding_late_event_is_dropped_and_state_is_released():
    operator = WindowOperator(Sliding(10), {"n": Count()}, grace_ms=2)
    run_operator(operator, [("a", 1, 5), ("b", 1, 30), ("a", 1, 1)])
    assert operator.late_count == 1  # a1's window [-8, 2) closed at 2 + 2 <= 30
    assert operator.open_windows == 1  # only b's
    run_operator(operator, [("c", 1, 100)])
    assert operator.open_windows == 1 and "a" not in operator._slide_buf


def test_sliding_dormant_keys_release_their_buffers():
    operator = WindowOperator(Sliding(10), {"n": Count()})
    operator.process_many((f"k{i}", 1, i, 0) for i in range(100))  # one event per key
    operator.process("z", 1, 1000)
    assert operator.open_windows == 1
    assert set(operator._slide_buf) == {"z"}


# ------------------------------------------------------------------ sessions


def test_sessions_close_after_gap():
    #  0  2      9   12           30
    #  a  a      .   a            b (moves the watermark)
    #  [0, 7)            [12, 17)       gap 5: 2 -> 9 would need 7 > 9? no: separate
    operator = WindowOperator(Session(5), {"n": Count(), "min": Min(), "max": Max()})
    sink = run_operator(operator, [("a", 1, 0), ("a", 4, 2), ("a", 9, 12), ("b", 0, 30)])
    assert counts(sink) == [("a", 0, 7, 2), ("a", 12, 17, 1)]
    assert {r.start: (r.values["min"], r.values["max"]) for r in sink.finals()} == {
        0: (1, 4),
        12: (9, 9),
    }


def test_late_event_bridging_two_sessions_merges_them():
    # gap 5, grace 30, emit final
    #  0      5  8     13      26
    #  a1 ->[0,5)  a2 ->[8,13)  b (watermark 26: both fire, rev 0)
    #     a3 at 4: [4,9) overlaps both -> one session [0,13), a correction replacing [8,13)
    operator = WindowOperator(Session(5), {"n": Count(), "s": Sum()}, grace_ms=30)
    sink = run_operator(operator, [("a", 1, 0), ("a", 2, 8), ("b", 0, 26), ("a", 3, 4)])
    first = [r for r in sink.results if r.key == "a"]
    assert [(r.start, r.end, r.values["s"], r.revision, r.correction) for r in first] == [
        (0, 5, 1, 0, False),
        (8, 13, 2, 0, False),
        (0, 13, 6, 1, True),
    ]
    assert first[-1].replaces == ((0, 5), (8, 13))
    closing = run_operator(operator, [("b", 0, 100)])
    assert [(r.key, r.start, r.end, r.values["n"]) for r in closing.finals()] == [
        ("a", 0, 13, 3),
        ("b", 26, 31, 1),
    ]
    assert operator.open_windows == 1  # b@100


def test_session_merge_is_order_independent_within_bound():
    events = [("a", v, t) for v, t in enumerate([0, 3, 20, 11, 7, 40, 44, 16])]
    results = set()
    for shift in range(len(events)):
        order = events[shift:] + events[:shift]
        operator = WindowOperator(Session(5), {"n": Count(), "s": Sum()}, out_of_orderness_ms=100)
        results.add(tuple(counts(run_operator(operator, order, flush=True), "s")))
    # 0,3,7,11 chain (each < 5 apart); 16,20 chain (11 -> 16 is 5: [11,16) and [16,21) only
    # touch, half-open); 40,44 chain. Values are the events' indexes.
    assert results == {(("a", 0, 16, 0 + 1 + 4 + 3), ("a", 16, 25, 7 + 2), ("a", 40, 49, 5 + 6))}


def test_session_extension_after_firing_fires_again_as_correction():
    operator = WindowOperator(Session(5), {"n": Count()}, grace_ms=50)
    sink = run_operator(operator, [("a", 1, 0), ("b", 1, 10), ("a", 1, 4), ("b", 1, 100)])
    a = [(r.start, r.end, r.values["n"], r.correction, r.final) for r in sink.by_key("a")]
    # [0,5) fired at 10; a4 extends it to [0,9), already passed: a correction, then closing
    assert a == [(0, 5, 1, False, False), (0, 9, 2, True, False), (0, 9, 2, False, True)]


# ------------------------------------------------------------------ watermarks and idleness


def test_watermark_is_min_over_partitions():
    operator = WindowOperator(Tumbling(10), {"n": Count()})
    #  p0: 1 ...... 25          p1: 2 .. 8 ..... 30
    sink = run_operator(operator, [("a", 1, 1, 0), ("a", 1, 2, 1), ("a", 1, 25, 0), ("a", 1, 8, 1)])
    assert operator.watermark == 8 and sink.results == []  # p1 holds it back
    sink = run_operator(operator, [("a", 1, 30, 1)])
    assert operator.watermark == 25
    assert counts(sink) == [("a", 0, 10, 3)]
    # a partition first heard of after the watermark moved cannot pull it back
    run_operator(operator, [("a", 1, 3, 2)])
    assert operator.watermark == 25 and operator.late_count == 1


def test_idle_partition_stops_holding_the_watermark_back():
    # idle timeout 5 s of the operator's clock
    #  clock 0   : p0 a@1, p1 a@3          watermark 1
    #  clock 4000: p0 a@25                 watermark 3 (p1 holds it back)
    #  clock 6000: (tick)                  p1 quiet for 6 s -> idle -> watermark 25: [0,10) fires
    #  clock 12000: (tick)                 p0 idle too: all idle, watermark stays at 25
    #  clock 12000: p1 a@40                p1 active again: watermark min(25 idle p0.., 40) = 40
    clock = ManualClock(0)
    operator = WindowOperator(Tumbling(10), {"n": Count()}, idle_timeout_ms=5000, clock=clock)
    sink = run_operator(
        operator, [("a", 1, 1, 0), ("a", 1, 3, 1), Wait(4000), ("a", 1, 25, 0)], clock=clock
    )
    assert operator.watermark == 3 and sink.results == []
    sink = run_operator(operator, [Wait(2000)], clock=clock)
    assert operator.idle_partitions == {1} and operator.watermark == 25
    assert counts(sink) == [("a", 0, 10, 2)]
    sink = run_operator(operator, [Wait(6000), Tick()], clock=clock)
    assert operator.idle_partitions == {0, 1} and operator.watermark == 25
    assert sink.results == []
    sink = run_operator(operator, [("a", 1, 40, 1)], clock=clock)
    assert operator.idle_partitions == {0} and operator.watermark == 40
    assert counts(sink) == [("a", 20, 30, 1)]


def test_declared_partition_holds_watermark_until_idle():
    clock = ManualClock(0)
    operator = WindowOperator(Tumbling(10), {"n": Count()}, idle_timeout_ms=100, clock=clock)
    operator.add_partitions([0, 1])
    assert operator.process("a", 1, 50, 0) == [] and operator.watermark is None
    clock.advance(100)
    assert [r.values["n"] for r in operator.advance()] == [] and operator.watermark is None
    # p0 was seen at 0 too: both idle now -> no advance; p0 speaks again -> watermark 60
    assert [r.start for r in operator.process("a", 1, 60, 0)] == [50]


def test_out_of_orderness_and_grace_together():
    # ooo 5, grace 5: watermark = max - 5; [0,10) fires at max 15, closes at max 20
    operator = WindowOperator(Tumbling(10), {"n": Count()}, out_of_orderness_ms=5, grace_ms=5)
    sink = run_operator(
        operator, [("a", 1, 1), ("a", 1, 15), ("a", 1, 2), ("a", 1, 20), ("a", 1, 3)]
    )
    zero = [
        (r.revision, r.values["n"], r.correction, r.final) for r in sink.results if r.start == 0
    ]
    assert zero == [(0, 1, False, False), (1, 2, True, False), (2, 2, False, True)]
    assert operator.late_count == 1


# ------------------------------------------------------------------ aggregates


def test_mean_and_quantiles_merge_across_sessions():
    operator = WindowOperator(
        Session(16), {"mean": Mean(), "q": Quantiles((0.5,))}, out_of_orderness_ms=1000
    )
    events = [("a", float(v), v * 20) for v in range(10)] + [
        ("a", 100.0, 5 + 20 * i) for i in range(9)
    ]
    (result,) = [r for r in run_operator(operator, events, flush=True).finals()]
    assert (result.start, result.end) == (0, 196)  # 0,5,20,25,...,165,180 chain (gap 16)
    assert result.values["mean"] == pytest.approx((45 + 900) / 19)
    assert result.values["q"]["p50"] == pytest.approx(9, rel=0.02)


def test_quantile_names_and_bad_quantiles():
    empty = ["k", 0, 1, 0, True, 0, 0, 0, 0, None]  # an accumulator without events
    assert Quantiles((0.5, 0.999)).value(empty) == {"p50": None, "p99.9": None}
    with pytest.raises(InvalidConfig):
        Quantiles((1.5,))
    with pytest.raises(InvalidConfig):
        WindowOperator(Tumbling(10), {})


# ------------------------------------------------------------------ clock skew


def test_skew_offset_is_windowed_minimum_of_receive_minus_send():
    corrector = ClockSkewCorrector(window=3)
    # device clock 5 s behind the server; network delays 40, 10, 25 ms
    assert corrector.correct("d1", 1000, 1000, 6040) == 1000 + 5040
    assert corrector.correct("d1", 2000, 2000, 7010) == 2000 + 5010
    assert corrector.correct("d1", 3000, 3000, 8025) == 3000 + 5010
    assert corrector.offset("d1") == 5010 and corrector.offset("d2") is None
    # the device's clock is reset to the server's: after `window` samples the old minimum ages out
    for i in range(3):
        corrector.observe("d1", 10_000 + i, 10_030 + i)
    assert corrector.offset("d1") == 30


def test_skew_corrected_times_put_events_in_the_right_windows():
    corrector = ClockSkewCorrector()
    operator = WindowOperator(Tumbling(1000), {"n": Count()}, out_of_orderness_ms=500)
    events = []
    for i in range(10):  # two devices, one 3.5 s behind, one 2 s ahead; true times 100*i
        true = 100 * i
        events.append(("x", 1, corrector.correct("slow", true - 3500, true - 3500, true + 7), 0))
        events.append(("x", 1, corrector.correct("fast", true + 2000, true + 2000, true + 5), 0))
    sink = run_operator(operator, events, flush=True)
    # corrected times are true time + min delay (7 or 5 ms): all within [0, 1000)
    assert counts(sink) == [("x", 0, 1000, 20)]


def test_skew_bounds_devices():
    corrector = ClockSkewCorrector(max_devices=2)
    for d in ("a", "b", "c"):
        corrector.observe(d, 0, 1)
    assert corrector.offset("a") is None and corrector.offset("c") == 1
