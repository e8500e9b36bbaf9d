"""Down-sampling metric windows for charts (streams.broker.metrics.downsample): the resolution
each range is drawn at, rates averaged over the fine windows present, gauges at their peak,
corrections replacing (never adding), and the same answer fed at once or a window at a time."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.broker.metrics import MINUTE_MS, SECOND_MS, Point, series
from streams.broker.metrics.downsample import (
    PLANS,
    Downsampler,
    aggregate,
    downsample,
    plan_for,
)

T0 = 1_800_000_000_000  # a whole minute (and a whole 15 minutes) of UTC
RATE = series("records_in", "orders")
GAUGE = series("group_lag", "billing")

values = st.integers(min_value=0, max_value=10**9).map(float)


def test_each_range_has_its_resolution_and_a_few_hundred_points_at_most():
    got = {p.range_ms: (p.step_ms, p.source_ms) for p in PLANS}
    assert got == {
        5 * MINUTE_MS: (SECOND_MS, SECOND_MS),
        15 * MINUTE_MS: (10 * SECOND_MS, SECOND_MS),
        60 * MINUTE_MS: (MINUTE_MS, MINUTE_MS),
        6 * 60 * MINUTE_MS: (5 * MINUTE_MS, MINUTE_MS),
        24 * 60 * MINUTE_MS: (15 * MINUTE_MS, MINUTE_MS),
    }
    assert all(p.range_ms // p.step_ms <= 300 for p in PLANS)
    assert plan_for(60_000).step_ms == SECOND_MS  # a short range: the 5-minute plan
    assert plan_for(None).range_ms == 15 * MINUTE_MS
    assert plan_for(7 * 24 * 3600_000).range_ms == 24 * 60 * MINUTE_MS
    with pytest.raises(ValueError, match="whole multiple"):
        Downsampler(15_000, 10_000)


@settings(deadline=None)  # a shared, busy machine: no per-example time limit
@given(st.lists(values, min_size=1, max_size=10), st.data())
def test_a_rate_is_the_average_of_the_per_second_rates_present(totals, data):
    """10-second windows from 1-second ones: whichever seconds are present (a gap, a server
    started mid-window, the window still open), the chart's per-second value is their mean —
    not their sum over the whole 10 s (drawn too low) nor their peak."""
    seconds = sorted(data.draw(st.sets(st.integers(0, 9), min_size=len(totals))))[: len(totals)]
    fine = [Point(RATE, T0 + s * 1000, SECOND_MS, v) for s, v in zip(seconds, totals, strict=True)]
    (got,) = downsample(fine, 10 * SECOND_MS, SECOND_MS)
    assert (got.t, got.w) == (T0, 10_000)
    per_second = got.v / (got.w / 1000)
    assert per_second == pytest.approx(sum(totals) / len(totals))


@settings(deadline=None)  # a shared, busy machine: no per-example time limit
@given(st.lists(values, min_size=1, max_size=10), st.data())
def test_an_event_time_rate_counts_its_missing_windows_as_zeros(totals, data):
    """Event-time windows exist only where records are: 10 records in 1 second of 10 is
    1/s over the window, not 10/s."""
    name = series("group_records_et", "billing")
    seconds = sorted(data.draw(st.sets(st.integers(0, 9), min_size=len(totals))))[: len(totals)]
    fine = [Point(name, T0 + s * 1000, SECOND_MS, v) for s, v in zip(seconds, totals, strict=True)]
    (got,) = downsample(fine, 10 * SECOND_MS, SECOND_MS)
    assert got.v / (got.w / 1000) == pytest.approx(sum(totals) / 10)


@settings(deadline=None)  # a shared, busy machine: no per-example time limit
@given(st.lists(values, min_size=1, max_size=15))
def test_a_gauge_keeps_its_peak(lags):
    """15-minute windows from 1-minute rollups: the lag drawn is the highest of the 15."""
    fine = [Point(GAUGE, T0 + i * MINUTE_MS, MINUTE_MS, v) for i, v in enumerate(lags)]
    (got,) = downsample(fine, 15 * MINUTE_MS, MINUTE_MS)
    assert got.v == max(lags)


def test_worked_example_of_both_kinds():
    fine = [
        Point(RATE, T0, SECOND_MS, 10),
        Point(RATE, T0 + 1000, SECOND_MS, 30),  # 20 records/s on average over 2 s present
        Point(GAUGE, T0, SECOND_MS, 7),
        Point(GAUGE, T0 + 1000, SECOND_MS, 2),
        Point(RATE, T0 + 10_000, SECOND_MS, 5),  # the next window
    ]
    got = {(p.series, p.t): p.v for p in downsample(fine, 10_000, SECOND_MS)}
    assert got == {(RATE, T0): 200, (GAUGE, T0): 7, (RATE, T0 + 10_000): 50}
    assert aggregate(RATE, [60], source_ms=MINUTE_MS, step_ms=5 * MINUTE_MS) == 300


@settings(deadline=None)  # a shared, busy machine: no per-example time limit
@given(
    st.lists(st.tuples(st.integers(0, 59), values), min_size=1, max_size=40),
    st.integers(1, 10),
)
def test_a_correction_replaces_its_window_and_chunks_do_not_matter(windows, chunk):
    """The same fine window twice (a correction) counts once, with its last value; and a live
    feed a few windows at a time ends where a history read does."""
    fine = [Point(RATE, T0 + s * 1000, SECOND_MS, v, rev) for rev, (s, v) in enumerate(windows)]
    last = {}
    for p in fine:
        last[p.t] = p.v
    want = {}
    for t, v in last.items():
        want.setdefault(t - t % 10_000, []).append(v)

    at_once = {p.t: p.v for p in downsample(fine, 10_000, SECOND_MS)}
    assert at_once == pytest.approx({t: sum(v) / len(v) * 10 for t, v in want.items()})

    live = Downsampler(10_000, SECOND_MS, keep_ms=1 << 40)
    fed: dict[int, float] = {}
    for i in range(0, len(fine), chunk):
        fed.update({p.t: p.v for p in live.feed(fine[i : i + chunk])})
    assert fed == pytest.approx(at_once)


@settings(max_examples=50, deadline=None)
@given(st.lists(values, min_size=1, max_size=60))
def test_native_resolution_is_unchanged(totals):
    fine = [Point(RATE, T0 + i * 1000, SECOND_MS, v) for i, v in enumerate(totals)]
    assert [(p.t, p.w, p.v) for p in downsample(fine, SECOND_MS, SECOND_MS)] == [
        (p.t, p.w, p.v) for p in fine
    ]


def test_live_feed_updates_the_open_window_and_forgets_old_ones():
    live = Downsampler(10_000, SECOND_MS)  # keeps a minute
    (first,) = live.feed([Point(RATE, T0, SECOND_MS, 4)])
    (second,) = live.feed([Point(RATE, T0 + 1000, SECOND_MS, 8)])
    assert (first.v, first.rev) == (40, 0)
    assert (second.t, second.v, second.rev) == (T0, 60, 1)  # the open window, grown
    assert live.feed([Point(RATE, T0 + 5000, MINUTE_MS, 1)]) == []  # not its source width
    live.feed([Point(RATE, T0 + 120_000, SECOND_MS, 1)])
    assert live.feed([Point(RATE, T0 + 2000, SECOND_MS, 99)]) == []  # long complete: dropped


def test_a_chart_reads_at_most_its_range_back_from_the_start_of_a_window():
    from streams.broker.metrics.downsample import ChartFeed

    chart = ChartFeed(15 * MINUTE_MS)
    now = T0 + 3_600_000 + 4_321
    assert chart.resolution_ms == 10_000
    assert chart.since(now_ms=now) == now - 15 * MINUTE_MS - 4_321  # whole range, whole window
    assert chart.since(now_ms=now, since_ms=now - 12_000) == now - 4_321 - 10_000  # reopened
    assert chart.since(now_ms=now, since_ms=0) == chart.since(now_ms=now)  # never more
    history = [Point(RATE, T0 + 1000 * i, SECOND_MS, 2) for i in range(3)]
    assert [(p.t, p.v) for p in chart.backfill(history)] == [(T0, 20)]
    assert [(p.t, p.v) for p in chart.live([Point(RATE, T0 + 3000, SECOND_MS, 6)])] == [(T0, 30)]


def test_an_open_window_is_partial_until_its_last_second_closes_and_says_only_changes():
    live = Downsampler(10_000, SECOND_MS)
    (p,) = live.feed([Point(RATE, T0, SECOND_MS, 4, 0, True)])  # the hub's partial second
    assert (p.t, p.v, p.partial) == (T0, 40, True)
    assert live.feed([Point(RATE, T0, SECOND_MS, 4, 0, True)]) == []  # nothing new: nothing
    (p,) = live.feed([Point(RATE, T0, SECOND_MS, 5)])  # the closed second replaces it
    assert (p.v, p.partial) == (50, True)  # 1 s of 10 closed: the 10-s window is still open
    assert live.feed([Point(RATE, T0, SECOND_MS, 3, 0, True)]) == []  # a partial come late
    for s in range(1, 9):
        live.feed([Point(RATE, T0 + s * 1000, SECOND_MS, 5)])
    (p,) = live.feed([Point(RATE, T0 + 9000, SECOND_MS, 5)])
    assert (p.v, p.partial) == (50, False)  # its last second closed: final


def test_a_gauge_s_open_second_is_drawn_and_then_settled_at_native_resolution():
    live = Downsampler(SECOND_MS, SECOND_MS)
    (p,) = live.feed([Point(GAUGE, T0, SECOND_MS, 7, 0, True)])
    assert (p.v, p.partial) == (7, True)
    (p,) = live.feed([Point(GAUGE, T0, SECOND_MS, 7)])
    assert (p.v, p.partial) == (7, False)  # the same value, now final: said again
    history = downsample([Point(GAUGE, T0, SECOND_MS, 7), Point(GAUGE, T0 + 1000, SECOND_MS, 9)],
                         10_000, SECOND_MS)  # fmt: skip
    assert [(p.v, p.partial) for p in history] == [(9, True)]  # 2 s of 10 closed
