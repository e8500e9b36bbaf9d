"""Item 7: watermarks, idle inputs and late events in jobs behave as in ``streams.processing``;
late events are counted per step and, with ``Stream.late()``, routed to a side output instead
of being dropped."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.errors import InvalidConfig
from streams.jobs import JSON, Count, Job, Sum, Tumbling, field
from streams.jobs.testing import TestDriver
from streams.processing.operator import MIN_TIME


def windowed_job(size: int, grace: int) -> Job:
    job = Job("late-demo")
    orders = job.stream("orders", value=JSON, timestamp=field("ts"))
    totals = (
        orders.key_by("country")
        .window(Tumbling(size), grace_ms=grace)
        .aggregate(name="totals", revenue=Sum("amount"), n=Count())
    )
    totals.to("totals")
    totals.late().to("late-orders")
    return job


def late_oracle(orders, size, grace):
    """The orders whose (only) tumbling window had closed when they arrived: window end +
    grace <= the largest earlier event time (the watermark, no out-of-orderness)."""
    wm, late = MIN_TIME, []
    for o in orders:
        t = o["ts"]
        if t - t % size + size + grace <= wm:
            late.append(o)
        wm = max(wm, t)
    return late


orders_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "country": st.sampled_from(["fr", "de"]),
            "amount": st.integers(1, 9),
            "ts": st.integers(0, 400),
        }
    ),
    max_size=50,
)


@settings(max_examples=150, deadline=None)
@given(orders_strategy, st.sampled_from([10, 50]), st.integers(0, 60))
def test_late_side_output_holds_exactly_the_late_events(orders, size, grace):
    driver = TestDriver(windowed_job(size, grace))
    for i, o in enumerate(orders):
        driver.pipe("orders", f"o{i}", o)
    expected = late_oracle(orders, size, grace)
    got = driver.output("late-orders")
    assert [v for _, v, _ in got] == expected
    assert [t for _, _, t in got] == [o["ts"] for o in expected]
    assert [k for k, _, _ in got] == [o["country"] for o in expected]  # the step's key
    assert driver.task.late_counts()["totals"] == (len(expected), True)
    # a late event counts nowhere: the finals hold only the others
    driver.flush()
    counted = sum(v["n"] for _, v, _ in driver.output("totals") if v["final"])
    assert counted == len(orders) - len(expected)


def test_without_a_side_output_late_events_are_counted_as_dropped():
    job = Job("drops")
    (
        job.stream("orders", value=JSON, timestamp=field("ts"))
        .window(Tumbling(10), grace_ms=0)
        .aggregate(name="w", n=Count())
        .to("out")
    )
    driver = TestDriver(job)
    for i, ts in enumerate([100, 5, 7, 120]):
        driver.pipe("orders", f"k{i % 2}", {"ts": ts})
    assert driver.task.late_counts() == {"w": (2, False)}
    assert driver.task.watermarks() == {"w": 120}


def test_interval_join_late_events_go_to_its_side_output():
    job = Job("join-late")
    left = job.stream("searches", value=JSON, timestamp=field("ts"))
    right = job.stream("clicks", value=JSON, timestamp=field("ts"))
    joined = left.join(right, within=10, name="j")
    joined.to("pairs")
    joined.late().to("late")
    driver = TestDriver(job)
    driver.pipe("searches", "s", {"ts": 100})
    driver.pipe("clicks", "s", {"ts": 105})  # watermark: min(100, 105) = 100
    driver.pipe("clicks", "s", {"ts": 90})  # older than the watermark: late
    driver.pipe("searches", "s", {"ts": 104})  # matches the 105 click
    assert [v for _, v, _ in driver.output("late")] == [{"ts": 90}]
    assert len(driver.output("pairs")) == 2
    assert driver.task.late_counts()["j"] == (1, True)


def test_late_is_only_offered_by_steps_with_a_watermark():
    job = Job("x")
    s = job.stream("orders", value=JSON)
    with pytest.raises(InvalidConfig, match="late"):
        s.map(lambda v: v).late()


def test_an_idle_input_does_not_hold_back_a_joins_watermark():
    """As a partition first heard of through its events in ``streams.processing``: a join
    input that has sent nothing does not hold the watermark back, so a left join emits its
    unmatched left events once the other input's time passes them; once it has sent events,
    it holds the watermark as the slower side."""
    job = Job("idle")
    left = job.stream("searches", value=JSON, timestamp=field("ts"))
    right = job.stream("clicks", value=JSON, timestamp=field("ts"))
    left.join(right, within=10, how="left", name="j").to("out")
    driver = TestDriver(job)
    driver.pipe("searches", "a", {"ts": 0})
    driver.pipe("searches", "b", {"ts": 50})  # clicks idle: the watermark is 50
    assert driver.task.watermarks() == {"j": 50}
    assert [k for k, _, _ in driver.output("out")] == ["a"]  # a left state unmatched
    driver.pipe("clicks", "c", {"ts": 55})
    driver.pipe("searches", "d", {"ts": 200})  # now clicks (at 55) hold the watermark
    assert driver.task.watermarks() == {"j": 55}


def test_a_window_closes_only_when_the_watermark_passes_it():
    """With every input idle the watermark stays where it is (as in streams.processing):
    the open window waits for newer events (or the end of a bounded input)."""
    job = Job("wait")
    (
        job.stream("orders", value=JSON, timestamp=field("ts"))
        .window(Tumbling(10), grace_ms=5)
        .aggregate(name="w", n=Count())
        .to("out")
    )
    driver = TestDriver(job)
    driver.pipe("orders", "k", {"ts": 3})
    driver.pipe("orders", "k", {"ts": 14})  # watermark 14 < 10 + 5: not closed
    assert driver.output("out") == []  # fired, still in grace: emit="final" waits
    assert driver.task.watermarks() == {"w": 14}
    driver.pipe("orders", "k", {"ts": 15})  # 15 >= end + grace: closes
    assert [(v["n"], v["final"]) for _, v, _ in driver.output("out")] == [(1, True)]
