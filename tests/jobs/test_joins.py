"""The join operators against brute-force oracles (hypothesis): every join kind."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.jobs.joins import AsOfJoin, IntervalJoin, TableJoin
from streams.processing.operator import MIN_TIME

KEYS = st.sampled_from(["a", "b", "c"])
SETTINGS = settings(max_examples=300, deadline=None)


def stream_events(max_ts: int = 200):
    """(side, key, ts) in arrival order; values are the arrival index (unique)."""
    return st.lists(
        st.tuples(st.integers(0, 1), KEYS, st.integers(0, max_ts)), min_size=0, max_size=40
    )


def interval_oracle(events, within, grace, how):
    """Which events are late (the watermark rule, replayed), then every matching pair."""
    mx: dict[int, int] = {}
    wm = MIN_TIME
    ok = []
    for i, (side, key, ts) in enumerate(events):
        if ts >= wm:
            ok.append((i, side, key, ts))
        if ts > mx.get(side, MIN_TIME):
            mx[side] = ts
            wm = max(wm, min(mx.values()) - grace)
    lefts = [e for e in ok if e[1] == 0]
    rights = [e for e in ok if e[1] == 1]
    out = Counter()
    for li, _, lk, lt in lefts:
        matched = False
        for ri, _, rk, rt in rights:
            if lk == rk and abs(lt - rt) <= within:
                out[(lk, (li, ri), max(lt, rt))] += 1
                matched = True
        if how == "left" and not matched:
            out[(lk, (li, None), lt)] += 1
    return out


def run_interval(events, within, grace, how, scan_max=IntervalJoin.SCAN_MAX, restart_at=None):
    """The join's output over `events` (then flushed); `scan_max` 0 bisects every partner list
    in time order; `restart_at` reopens the join over its stores before that event."""

    def open_join(op=None):
        stores = {} if op is None else {"left": op.sides[0], "right": op.sides[1], "meta": op.meta}
        new = IntervalJoin(within, how=how, grace_ms=grace, joiner=lambda a, b: (a, b), **stores)
        new.SCAN_MAX = scan_max
        return new

    op = open_join()
    got = Counter()
    for i, (side, key, ts) in enumerate(events):
        if i == restart_at:
            op = open_join(op)
        for k, v, t in op.process(side, key, i, ts):
            got[(k, v, t)] += 1
    for k, v, t in op.flush():
        got[(k, v, t)] += 1
    return got, op


@SETTINGS
@given(stream_events(), st.integers(0, 50), st.integers(0, 60), st.sampled_from(["inner", "left"]))
def test_interval_join_equals_brute_force(events, within, grace, how):
    got, _ = run_interval(events, within, grace, how)
    assert got == interval_oracle(events, within, grace, how)


@SETTINGS
@given(
    stream_events(),
    st.integers(0, 50),
    st.integers(0, 200),
    st.sampled_from(["inner", "left"]),
    st.integers(0, 40),
)
def test_interval_join_bisecting_partner_lists_equals_brute_force(
    events, within, grace, how, restart_at
):
    """Every partner list bisected (``SCAN_MAX`` 0) unless out of time order, with a reopen
    over the same stores mid-stream (which must find the out-of-order lists again): the
    brute-force output all the same."""
    got, _ = run_interval(events, within, grace, how, scan_max=0, restart_at=restart_at)
    assert got == interval_oracle(events, within, grace, how)


def test_a_reopened_join_finds_an_out_of_order_partner_list():
    """Left events at 10, 100, 5 of one key (5 arrives out of order), then a reopen over the
    stores: a right event at 6 matches the one at 5, which bisecting that list would miss."""
    events = [(0, "a", 10), (0, "a", 100), (0, "a", 5), (1, "a", 6)]
    for restart_at in (None, 3):
        got, _ = run_interval(events, 2, 200, "inner", scan_max=0, restart_at=restart_at)
        assert got == Counter({("a", (2, 3), 6): 1})


@SETTINGS
@given(stream_events(max_ts=2_000), st.integers(0, 20))
def test_interval_join_state_is_bounded_by_the_watermark(events, within):
    """After each event no buffered event is older than watermark - within (ordered input)."""
    op = IntervalJoin(within, grace_ms=0)
    for i, (side, key, ts) in enumerate(sorted(events, key=lambda e: e[2])):
        op.process(side, key, i, ts)
        wm = op.watermark
        if wm is not None:
            for store in op.sides:
                for entries in store.values():
                    assert all(e[0] + within >= wm for e in entries)


def test_left_join_emits_unmatched_only_when_state_drops_it():
    op = IntervalJoin(10, how="left", joiner=lambda a, b: (a, b))
    assert op.process(0, "k", "search", 100) == []
    assert op.process(1, "x", "other", 105) == []  # watermark 100: "search" still waits
    assert op.process(1, "x", "other", 200) == []  # right at 200 but left still at 100
    assert op.process(0, "z", "s2", 200) == [("k", ("search", None), 100)]  # wm 200 > 110


def asof_events():
    """("T", key, value|None, ts) table updates and ("S", key, ts) stream events."""
    table = st.tuples(
        st.just("T"), KEYS, st.one_of(st.none(), st.integers(0, 9)), st.integers(0, 100)
    )
    stream = st.tuples(st.just("S"), KEYS, st.integers(0, 100))
    return st.lists(st.one_of(table, stream), max_size=40)


def asof_oracle(events, how, tolerance, grace):
    wm = MIN_TIME
    versions = []  # (arrival, key, value, ts)
    out = []
    for i, e in enumerate(events):
        if e[0] == "T":
            versions.append((i, e[1], e[2], e[3]))
            continue
        _, key, ts = e
        if ts < wm:
            continue
        wm = max(wm, ts - grace)
        cands = [v for v in versions if v[1] == key and v[3] <= ts]
        found = None
        if cands:
            best = max(cands, key=lambda v: (v[3], v[0]))
            if best[2] is not None and (tolerance is None or ts - best[3] <= tolerance):
                found = best[2]
        if found is not None:
            out.append((key, (i, found), ts))
        elif how == "left":
            out.append((key, (i, None), ts))
    return out


@SETTINGS
@given(
    asof_events(),
    st.sampled_from(["inner", "left"]),
    st.one_of(st.none(), st.integers(0, 30)),
    st.integers(0, 30),
)
def test_asof_and_stream_table_join_equal_brute_force(events, how, tolerance, grace):
    """The version in force at each stream event's time, among the updates received before
    it; a later (late) table update never changes an emitted result."""
    op = AsOfJoin(how=how, tolerance_ms=tolerance, grace_ms=grace, joiner=lambda a, b: (a, b))
    got = []
    for i, e in enumerate(events):
        if e[0] == "T":
            op.update(e[1], e[2], e[3])
        else:
            got.extend(op.process(e[1], i, e[2]))
    assert got == asof_oracle(events, how, tolerance, grace)


def test_a_late_table_update_does_not_rewrite_an_emitted_result():
    op = AsOfJoin(joiner=lambda a, b: (a, b))
    op.update("c1", "FR", 0)
    assert op.process("c1", "order1", 50) == [("c1", ("order1", "FR"), 50)]
    op.update("c1", "DE", 40)  # arrives late: in force from 40, but order1 was emitted
    assert op.process("c1", "order2", 60) == [("c1", ("order2", "DE"), 60)]


table_updates = st.lists(
    st.tuples(st.integers(0, 1), KEYS, st.one_of(st.none(), st.integers(0, 3))), max_size=40
)


@SETTINGS
@given(table_updates, st.sampled_from(["inner", "left", "outer"]))
def test_table_join_changes_rebuild_the_view_at_every_step(updates, how):
    op = TableJoin(how=how, joiner=lambda a, b: (a, b))
    tables: tuple[dict, dict] = ({}, {})
    view: dict = {}
    for i, (side, key, value) in enumerate(updates):
        before = oracle_row(tables, key, how)
        if value is None:
            tables[side].pop(key, None)
        else:
            tables[side][key] = value
        after = oracle_row(tables, key, how)
        emitted = op.update(side, key, value, i)
        assert len(emitted) == (0 if before == after else 1)
        for k, row, ts in emitted:
            assert ts == i
            if row is None:
                del view[k]  # a retraction of a row that was in the view
            else:
                view[k] = row
        expected = {k: oracle_row(tables, k, how) for k in "abc"}
        assert view == {k: v for k, v in expected.items() if v is not None}
        assert op.view() == view


def oracle_row(tables, key, how):
    lv, rv = tables[0].get(key), tables[1].get(key)
    present = {
        "inner": lv is not None and rv is not None,
        "left": lv is not None,
        "outer": lv is not None or rv is not None,
    }[how]
    return (lv, rv) if present else None


@SETTINGS
@given(
    stream_events(),
    st.integers(0, 50),
    st.integers(0, 60),
    st.sampled_from(["inner", "left"]),
    st.lists(st.integers(1, 12), min_size=1, max_size=10),
)
def test_interval_join_in_batches_equals_one_record_at_a_time(events, within, grace, how, cuts):
    """``process_many`` over any cut of the input into batches: the same emissions in the same
    order (each tagged with its causing record), the same late count and, after the batch,
    the same state and progress as ``process`` record by record."""
    one = IntervalJoin(within, how=how, grace_ms=grace, joiner=lambda a, b: (a, b))
    want = [
        (k, v, t, i)
        for i, (side, key, ts) in enumerate(events)
        for k, v, t in one.process(side, key, i, ts)
    ]
    many = IntervalJoin(within, how=how, grace_ms=grace, joiner=lambda a, b: (a, b))
    got, i, c = [], 0, 0
    while i < len(events):
        n = cuts[c % len(cuts)]
        items = [(s, (k, j, t, j)) for j, (s, k, t) in enumerate(events[i : i + n], start=i)]
        got += many.process_many(items)
        i, c = i + n, c + 1
    assert got == want
    assert many.late_count == one.late_count
    assert [dict(s) for s in many.sides] == [dict(s) for s in one.sides]
    assert dict(many.meta) == dict(one.meta)
    assert many.flush() == one.flush()
