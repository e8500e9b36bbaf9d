"""A task fed a batch at a time (``Task.feed_many`` / ``feed_merged``, what the runner does)
against the same task fed one record at a time (``Task.feed``), with hypothesis: for every
graph shape — chains, fan-outs into one sink, windows of each kind with and without a late
side output, running aggregates, ``process`` state, joins — the same records are emitted in
the same order, the same events are late, and the same changelog records are written."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.jobs import Count, Hopping, Job, Session, Sum, Tumbling
from streams.jobs.state import Store
from streams.jobs.task import Task


def chains() -> Job:
    j = Job("chains")
    s = j.stream("in")
    s.filter(lambda v: v["v"] % 3 != 0).map(lambda v: {"v": v["v"] * 2}).to("a")
    s.map(lambda v: {"w": v["v"]}).to("a")  # a fan-out into the same sink: interleaved
    s.key_by(lambda v: v["v"] % 2).to("b")
    return j


def windowed(window, late: bool) -> Callable[[], Job]:
    def build() -> Job:
        j = Job("win")
        w = j.stream("in").window(window, grace_ms=3).aggregate(n=Count(), total=Sum("v"))
        w.to("w")
        if late:
            w.late().to("late")
        return j

    return build


def running() -> Job:
    j = Job("agg")
    s = j.stream("in")
    s.aggregate(n=Count(), total=Sum("v")).to("totals")

    def counter(value, state):
        state.set("seen", state.get("seen", 0) + 1)
        return {"v": value["v"], "seen": state.get("seen")}

    s.process(counter, store="seen").to("seen")
    return j


def joined(how: str, late: bool) -> Callable[[], Job]:
    def build() -> Job:
        j = Job("join")
        joined = j.stream("in").join(j.stream("in2"), within=5, how=how, grace_ms=2)
        joined.to("pairs")
        if late:
            joined.late().to("late")
        return j

    return build


SHAPES = {
    "chains": chains,
    "tumbling": windowed(Tumbling(10), False),
    "tumbling+late": windowed(Tumbling(10), True),
    "hopping": windowed(Hopping(10, 5), False),
    "session": windowed(Session(4), False),
    "running": running,
    "inner join": joined("inner", False),
    "left join": joined("left", False),
    "join+late": joined("left", True),
}


def make_task(build) -> tuple[Task, list]:
    emitted: list = []

    def emit(kind, topic, key, value, ts):
        emitted.append((kind, topic, key, value, ts))

    return Task(build(), 0, emit, lambda name: Store(name)), emitted


def changelog(task: Task) -> dict[str, list]:
    task.before_commit()
    return {name: sorted(store.take_changes(), key=repr) for name, store in task.stores.items()}


def events():
    """(input, key, v, ts): mostly in time order, some late."""
    return st.lists(
        st.tuples(
            st.sampled_from(["in", "in2"]),
            st.sampled_from(["a", "b", "c"]),
            st.integers(0, 9),
            st.integers(0, 60),
        ),
        max_size=40,
    )


@pytest.mark.parametrize("shape", sorted(SHAPES))
@settings(max_examples=150, deadline=None)
@given(evs=events(), cuts=st.lists(st.integers(1, 9), min_size=1, max_size=8))
def test_a_task_fed_in_batches_does_what_it_does_record_by_record(shape, evs, cuts):
    build = SHAPES[shape]
    one, one_out = make_task(build)
    many, many_out = make_task(build)
    inputs = set(one._sources)
    evs = [e if e[0] in inputs else ("in", *e[1:]) for e in evs]
    recs = [(topic, (key, {"v": v}, ts, i)) for i, (topic, key, v, ts) in enumerate(evs)]
    i = c = 0
    while i < len(recs):
        batch = recs[i : i + cuts[c % len(cuts)]]
        for topic, (key, value, ts, _) in batch:
            one.feed(topic, key, value, ts)
        if len(inputs) > 1:
            topics = ["in", "in2"]
            many.feed_merged(topics, [(topics.index(t), r) for t, r in batch])
        else:
            many.feed_many("in", [r for _, r in batch])
        if c % 3 == 2:  # a checkpoint now and then, between batches
            one.before_commit()
            many.before_commit()
        i, c = i + len(batch), c + 1
    assert many_out == one_out
    assert many.late_count() == one.late_count()
    assert many.metrics == one.metrics
    assert changelog(many) == changelog(one)
    many.flush()
    one.flush()
    assert many_out == one_out


def test_a_failing_step_names_its_record():
    j = Job("div")
    j.stream("in").map(lambda v: 1 / v["x"]).to("out")
    task, _ = make_task(lambda: j)
    with pytest.raises(ZeroDivisionError):
        task.feed_many("in", [("a", {"x": 1}, 1, 10), ("b", {"x": 0}, 2, 11), ("c", {}, 3, 12)])
    assert task.failed == ("in", 11)


def reference_merge(batches, ends):
    """The runner's merge as it was, record by record through a heap of heads."""
    import heapq

    heads = [(recs[0][2], i, 0) for i, recs in enumerate(batches) if recs]
    heapq.heapify(heads)
    out = []
    while heads:
        _, i, n = heapq.heappop(heads)
        out.append((i, batches[i][n]))
        if n + 1 < len(batches[i]):
            heapq.heappush(heads, (batches[i][n + 1][2], i, n + 1))
        elif batches[i][n][3] + 1 < ends[i]:
            break
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 20), max_size=8), min_size=2, max_size=3),
    st.lists(st.booleans(), min_size=3, max_size=3),
)
def test_the_runners_merge_feeds_the_smallest_head_first_and_stops_at_a_gap(times, more):
    """``Runner._merge`` (a two-way merge for two inputs): the order of the heap of heads,
    and it stops where an input whose batch ran out has more to read."""
    from streams.jobs.runner import Runner

    batches = [[("k", None, t, n) for n, t in enumerate(ts)] for ts in times]
    ends = [len(b) + int(m) for b, m in zip(batches, more, strict=False)]
    inputs = [f"t{i}" for i in range(len(batches))]

    class Ends:
        def end_offset(self, topic, p):
            return ends[inputs.index(topic)]

    runner = Runner.__new__(Runner)
    runner.joblog = Ends()
    assert runner._merge(0, inputs, batches) == reference_merge(batches, ends)
