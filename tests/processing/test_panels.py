"""Panel aggregation jobs against a real LogStore in a temporary directory."""

from __future__ import annotations

import calendar
import json
import threading
from pathlib import Path

import pytest

from streams.errors import InvalidConfig, UnknownPanel, UnknownTopic
from streams.log import LogStore
from streams.processing.panels import PanelJobs, PanelSpec, PanelUpdate, extract, parse_time
from streams.processing.testing import ManualClock

T0 = 1_800_000_000_000  # a whole multiple of 10 s, so 10-second windows start at T0


def iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


@pytest.fixture
def clock():
    return ManualClock(T0)


@pytest.fixture
def store(tmp_path, clock):
    s = LogStore.open(str(tmp_path / "data"), clock=clock, background=False)
    s.create_topic("orders", partitions=3)
    yield s
    s.close()


def put(store, partition, doc, ts, raw=None):
    value = raw if raw is not None else json.dumps(doc).encode()
    store.append("orders", value, partition=partition, timestamp_ms=ts)


def order(ts, total, country="DE"):
    return {"total": total, "ts": iso(ts), "country": country, "items": [{"qty": 2}]}


def finals(update: PanelUpdate):
    return {(r.key, r.start - T0): r.values for r in update.results if r.final}


def test_event_time_sum_by_country_across_partitions(store, clock):
    #  partitions 0,1,2; windows of 10 s from T0; ts field is ISO-8601
    #  T0        +10s       +20s
    #  |DE 10 p0 |DE 5  p1  |FR 1 p0 (moves p0's time)
    #  |FR 2  p1 |          |DE 1 p1, DE 1 p2  -> watermark = min(p0,p1,p2) = +20s: [T0,+10s) fires
    #  |DE 3  p2 |
    clock.advance(30_000)
    put(store, 0, order(T0 + 1000, 10), T0 + 1000)
    put(store, 1, order(T0 + 2000, 2, "FR"), T0 + 2000)
    put(store, 2, order(T0 + 3000, 3), T0 + 3000)
    put(store, 1, order(T0 + 12_000, 5), T0 + 12_000)
    put(store, 0, order(T0 + 21_000, 1, "FR"), T0 + 21_000)
    put(store, 1, order(T0 + 20_000, 1), T0 + 20_000)
    put(store, 2, order(T0 + 20_500, 1), T0 + 20_500)
    spec = PanelSpec("orders", "sum", value_field="total", group_by="country", time_field="ts")
    jobs = PanelJobs(store, clock=clock)
    jobs.ensure("p1", spec)
    jobs.poll_once()
    snap = jobs.snapshot("p1")
    assert snap.records_read == 7 and snap.parse_errors == 0
    assert snap.watermark == T0 + 20_000
    assert finals(snap) == {
        ("DE", 0): {"sum": 13},
        ("FR", 0): {"sum": 2},
        ("DE", 10_000): {"sum": 5},
    }
    # the open window [+20s, +30s) is shown too, not final yet
    current = {(r.key, r.start - T0): r.values["sum"] for r in snap.results if not r.final}
    assert current == {("DE", 20_000): 2, ("FR", 20_000): 1}


def test_bad_records_count_as_parse_errors(store, clock):
    put(store, 0, None, T0, raw=b"not json")
    put(store, 0, {"ts": iso(T0)}, T0)  # no total
    put(store, 0, {"total": "abc", "ts": iso(T0)}, T0)  # not a number
    put(store, 0, {"total": 1, "ts": "yesterday"}, T0)  # bad time
    put(store, 0, None, T0, raw=b'{"total": 4, "ts": %d}' % (T0 + 5))  # epoch ms works
    put(store, 0, None, T0, raw=b'{"total": "2.5", "ts": %d}' % (T0 + 6))  # numeric text
    jobs = PanelJobs(store, clock=clock)
    jobs.ensure("p", PanelSpec("orders", "max", value_field="total", time_field="ts"))
    jobs.poll_once()
    snap = jobs.snapshot("p")
    assert (snap.records_read, snap.parse_errors) == (6, 4)
    assert [r.values["max"] for r in snap.results] == [4]


def test_backfill_starts_at_now_minus_backfill(store, clock):
    clock.set(T0 + 3600_000)
    put(store, 0, order(T0, 100), T0)  # an hour old: outside the 15-minute backfill
    put(store, 0, order(T0 + 3590_000, 7), T0 + 3590_000)
    jobs = PanelJobs(store, clock=clock)
    jobs.ensure("p", PanelSpec("orders", "count", time_field="ts"))
    jobs.poll_once()
    snap = jobs.snapshot("p")
    assert snap.records_read == 1
    assert [(r.start - T0, r.values["count"]) for r in snap.results] == [(3590_000, 1)]


def test_without_time_field_windows_follow_log_time_and_the_clock(store, clock):
    # records at their log timestamps; once caught up the watermark follows the clock
    put(store, 0, {"total": 1}, T0 + 1000)
    put(store, 1, {"total": 2}, T0 + 2000)
    clock.set(T0 + 9_000)
    jobs = PanelJobs(store, clock=clock)
    spec = PanelSpec("orders", "mean", value_field="total", size_ms=10_000)
    jobs.ensure("p", spec)
    jobs.poll_once()
    assert not any(r.final for r in jobs.snapshot("p").results)
    clock.set(T0 + 10_000)
    seen: list[PanelUpdate] = []
    jobs.subscribe(seen.append)
    jobs.poll_once()
    assert [(r.values["mean"], r.final) for r in seen[-1].results] == [(1.5, True)]
    assert jobs.snapshot("p").watermark == T0 + 10_000


def test_ensure_restarts_only_on_change_and_remove(store, clock):
    put(store, 0, order(T0 + 1, 1), T0 + 1)
    jobs = PanelJobs(store, clock=clock)
    spec = PanelSpec("orders", "count", time_field="ts")
    jobs.ensure("p", spec)
    jobs.poll_once()
    jobs.ensure("p", PanelSpec("orders", "count", time_field="ts"))  # equal: keeps going
    assert jobs.snapshot("p").records_read == 1
    jobs.ensure("p", PanelSpec("orders", "count", time_field="ts", size_ms=5000))
    assert jobs.snapshot("p").records_read == 0  # restarted
    jobs.remove("p")
    with pytest.raises(UnknownPanel):
        jobs.snapshot("p")
    with pytest.raises(UnknownTopic):
        jobs.ensure("q", PanelSpec("nope", "count"))


def test_deleted_topic_stops_the_job_with_an_error(store, clock):
    jobs = PanelJobs(store, clock=clock)
    jobs.ensure("p", PanelSpec("orders", "count"))
    store.delete_topic("orders")
    seen: list[PanelUpdate] = []
    jobs.subscribe(seen.append)
    jobs.poll_once()
    assert seen and "orders" in seen[-1].error


def test_session_panel_merges_and_snapshot_drops_replaced(store, clock):
    #  gap 1 s (current emissions, so each session below is emitted before it merges):
    #  0    900  1800 2500
    #  a          .    a     p0: sessions [0,1000) and [2500,3500)
    #       a                p1: extends the first to [0,1900)
    #            a           p2: [1800,2800) bridges both: one session [0,3500) of 4 events
    for ts, p in ((0, 0), (2500, 0), (900, 1), (1800, 2)):
        put(store, p, {"ts": T0 + ts, "country": "DE"}, T0 + ts)
    jobs = PanelJobs(store, clock=clock)
    jobs.ensure(
        "p",
        PanelSpec(
            "orders",
            "count",
            window="session",
            gap_ms=1000,
            time_field="ts",
            group_by="country",
            out_of_orderness_ms=5000,
        ),
    )
    jobs.poll_once()
    snap = jobs.snapshot("p")
    assert [(r.key, r.start - T0, r.end - T0, r.values["count"]) for r in snap.results] == [
        ("DE", 0, 3500, 4)
    ]


def test_thread_delivers_updates(store):
    jobs = PanelJobs(store, poll_interval_ms=20).start()
    try:
        got = threading.Event()
        updates: list[PanelUpdate] = []

        def on_update(update: PanelUpdate) -> None:
            updates.append(update)
            if update.records_read:
                got.set()

        unsubscribe = jobs.subscribe(on_update)
        jobs.ensure("live", PanelSpec("orders", "count"))
        store.append("orders", b'{"total": 1}', partition=0)
        assert got.wait(10), "no update from the jobs thread"
        assert updates[-1].panel_id == "live"
        unsubscribe()
    finally:
        jobs.close()


def test_spec_from_dict_coerces_and_validates():
    spec = PanelSpec.from_dict(
        {
            "topic": "orders",
            "aggregation": "p95",
            "value_field": "items.0.qty",
            "window": "hopping",
            "size_ms": "60000",
            "step_ms": "10000",
            "gap_ms": "",
            "lateness_ms": "0",
            "title": "ignored",
        }
    )
    assert spec.size_ms == 60_000 and spec.step_ms == 10_000 and spec.gap_ms is None
    assert PanelSpec.from_dict(spec.to_dict()) == spec
    defaults = PanelSpec.from_dict(
        {
            "topic": "t",
            "aggregation": "count",
            "size_ms": None,
            "lateness_ms": None,
            "group_by": None,
        }
    )
    assert (defaults.size_ms, defaults.lateness_ms, defaults.group_by) == (10_000, 0, None)


@pytest.mark.parametrize(
    "data, field",
    [
        ({"aggregation": "count"}, "topic"),
        ({"topic": "t", "aggregation": "median"}, "aggregation"),
        ({"topic": "t", "aggregation": "sum"}, "value_field"),
        ({"topic": "t", "aggregation": "count", "group_by": "a..b"}, "group_by"),
        ({"topic": "t", "aggregation": "count", "window": "rolling"}, "window"),
        ({"topic": "t", "aggregation": "count", "size_ms": "ten"}, "size_ms"),
        ({"topic": "t", "aggregation": "count", "size_ms": 5}, "size_ms"),
        ({"topic": "t", "aggregation": "count", "window": "hopping"}, "step_ms"),
        ({"topic": "t", "aggregation": "count", "window": "hopping", "step_ms": 10}, "step_ms"),
        ({"topic": "t", "aggregation": "count", "window": "session"}, "gap_ms"),
        ({"topic": "t", "aggregation": "count", "lateness_ms": -1}, "lateness_ms"),
    ],
)
def test_spec_errors_name_the_field(data, field):
    with pytest.raises(InvalidConfig) as info:
        PanelSpec.from_dict(data)
    assert info.value.key == field
    assert field in str(info.value)


def test_paths_and_times():
    doc = {"items": [{"qty": 3}], "a": {"b": None}}
    assert extract(doc, "items.0.qty") == 3
    assert extract(doc, "a.b") is None
    assert extract(doc, "items.5.qty") is not None and extract(doc, "x") is extract(doc, "y")
    expected = calendar.timegm((2026, 11, 29, 15, 0, 1)) * 1000 + 123
    assert parse_time("2026-11-29T15:00:01.123Z") == expected
    assert parse_time("2026-11-29T16:00:01.123+01:00") == expected
    assert parse_time("2026-11-29T15:00:01.123") == expected  # naive: UTC
    assert parse_time(1234) == 1234 and parse_time(True) is None


def test_backlog_is_read_over_several_polls(store, clock, monkeypatch):
    import streams.processing.panels.jobs as panels

    monkeypatch.setattr(panels, "READ_BUDGET", 50)
    monkeypatch.setattr(panels, "READ_BATCH", 20)
    for p in range(3):
        store.append_batch(
            "orders",
            [(json.dumps({"total": i}).encode(), None, (), T0 + i * 10) for i in range(120)],
            partition=p,
        )
    clock.set(T0 + 60_000)
    jobs = PanelJobs(store, clock=clock)
    jobs.ensure("p", PanelSpec("orders", "sum", value_field="total", size_ms=1000))
    polls = 1
    while jobs.poll_once():
        polls += 1
    snap = jobs.snapshot("p")
    assert polls == 3 and snap.records_read == 360 and snap.late_count == 0
    # 120 records per partition, 10 ms apart: windows of 100 records, then 20
    sums = {r.start - T0: r.values["sum"] for r in snap.results if r.final}
    assert sums == {0: 3 * sum(range(100)), 1000: 3 * sum(range(100, 120))}


def test_processing_imports_without_django():
    import subprocess
    import sys

    code = (
        "import sys, importlib.abc\n"
        "class Refuse(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'django': raise ImportError(name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "import streams.processing, streams.processing.panels, streams.processing.testing\n"
        "print('ok')\n"
    )
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=repo
    )
    assert done.stdout.strip() == "ok", done.stderr


def late_orders_panel(store, clock):
    """Sum of total in 10 s windows with 5 s of allowed lateness, event time from ts."""
    clock.set(T0 + 60_000)
    jobs = PanelJobs(store, clock=clock)
    spec = PanelSpec("orders", "sum", value_field="total", time_field="ts", lateness_ms=5000)
    put(store, 0, order(T0 + 1000, 1), T0 + 1000)
    put(store, 0, order(T0 + 12_000, 2), T0 + 12_000)  # [T0, +10 s) fired, within grace
    jobs.ensure("p", spec)
    jobs.poll_once()
    return jobs


def test_corrections_are_logged_with_old_and_new_values(store, clock):
    jobs = late_orders_panel(store, clock)
    seen: list[PanelUpdate] = []
    jobs.subscribe(seen.append)
    put(store, 0, order(T0 + 2000, 4), T0 + 2000)  # corrects [T0, +10 s): 1 -> 5
    put(store, 0, order(T0 + 3000, 10), T0 + 3000)  # and again in the same poll: 5 -> 15
    jobs.poll_once()
    log = [(c.start - T0, c.old, c.new, c.revision) for c in seen[-1].correction_log]
    assert log == [(0, {"sum": 1}, {"sum": 5}, 1), (0, {"sum": 5}, {"sum": 15}, 2)]
    put(store, 0, order(T0 + 4000, 1), T0 + 4000)  # a later poll: the old value is still known
    jobs.poll_once()
    assert [(c.old, c.new) for c in seen[-1].correction_log] == [({"sum": 15}, {"sum": 16})]

    # a page opened now (or reloaded) gets every correction its counter counts
    snap = jobs.snapshot("p")
    assert snap.corrections == 3 == len(snap.correction_log)
    assert [c.seq for c in snap.correction_log] == [1, 2, 3]
    assert [c.new["sum"] for c in snap.correction_log] == [5, 15, 16]

    # after a restart (jobs live in memory) the backfill recomputes both alike
    again = PanelJobs(store, clock=clock)
    again.ensure("p", jobs._jobs["p"].spec)
    again.poll_once()
    replay = again.snapshot("p")
    assert replay.corrections == 3 and replay.correction_log == snap.correction_log


def test_late_events_are_kept_with_the_watermark_that_made_them_late(store, clock):
    jobs = late_orders_panel(store, clock)
    put(store, 0, order(T0 + 20_000, 8), T0 + 20_000)  # watermark +20 s: [T0, +10 s) closes
    put(store, 0, order(T0 + 3000, 16), T0 + 3000)  # too late: dropped, counted, kept
    jobs.poll_once()
    snap = jobs.snapshot("p")
    assert snap.late_count == 1 and snap.corrections == 0
    (late,) = snap.late_log
    assert (late.event_time, late.value, late.watermark) == (T0 + 3000, 16, T0 + 20_000)
    assert [r.final for r in snap.results if r.start == T0] == [True]
    assert jobs._jobs["p"].operator.side_output == []  # drained, not growing


def test_the_correction_log_is_bounded_and_the_counter_says_how_many_there_were(
    store, clock, monkeypatch
):
    from streams.processing.panels import jobs as jobs_module

    monkeypatch.setattr(jobs_module, "CORRECTIONS_KEPT", 2)
    jobs = late_orders_panel(store, clock)
    for i in range(3):
        put(store, 0, order(T0 + 2000 + i, 1), T0 + 2000 + i)
    jobs.poll_once()
    snap = jobs.snapshot("p")
    assert snap.corrections == 3
    assert [c.new["sum"] for c in snap.correction_log] == [3, 4]  # the latest two


def test_field_paths_are_checked_against_a_sample_of_the_topic(store, clock):
    from streams.processing.panels.sample import check_sample, sample_values

    for i in range(30):  # 20 sampled of 30: the newest, over all partitions
        doc = {"amount": "n/a" if i % 10 == 0 else i, "country": "DE", "at": T0 + i}
        if i % 4 == 0:
            del doc["amount"]
        put(store, i % 3, doc, T0 + i)
    values = sample_values(store, "orders")
    assert [json.loads(v)["at"] - T0 for v in values] == list(range(10, 30))

    spec = PanelSpec("orders", "sum", value_field="amount", group_by="region", time_field="at")
    problems = {p.field: p for p in check_sample(spec, values)}
    assert set(problems) == {"value_field", "group_by"}
    # 10..29: amount missing in 12, 16, 20, 24, 28; "n/a" in 10 (20 has no amount at all)
    assert problems["value_field"].reason == (
        "field 'amount' missing in 5 of 20 sampled records; 'amount' is not a number in 1 of "
        '20 sampled records (e.g. "n/a"); fields there: at, country'
    )
    assert not problems["value_field"].fatal
    assert problems["group_by"].reason.startswith("field 'region' missing in 20 of 20 sampled")
    assert problems["group_by"].fatal

    assert check_sample(PanelSpec("orders", "count", time_field="at"), values) == []
    text = check_sample(PanelSpec("orders", "count", time_field="country"), values)
    assert text[0].reason.startswith("'country' is not a time (epoch ms or ISO 8601) in 20 of 20")
    nested = check_sample(PanelSpec("orders", "max", value_field="items.0.qty"), [b'{"items": []}'])
    assert nested[0].reason == "field 'items.0.qty' missing in 1 of 1 sampled records"
    deep = check_sample(PanelSpec("orders", "max", value_field="o.total"), [b'{"o": {"sum": 1}}'])
    assert deep[0].reason.endswith("fields there: sum")


def test_records_that_are_not_json_are_reported_and_an_empty_topic_has_nothing_to_check(store):
    from streams.processing.panels.sample import check_sample, sample_values

    assert sample_values(store, "orders") == []
    assert check_sample(PanelSpec("orders", "count"), []) == []
    (problem,) = check_sample(PanelSpec("orders", "count"), [b"hello", b"{}", None])
    assert (problem.field, problem.bad, problem.sampled, problem.fatal) == ("topic", 2, 3, False)
    assert problem.reason.startswith("2 of 3 sampled records are not JSON documents")
    (problem,) = check_sample(PanelSpec("orders", "count"), [b"hello"])
    assert problem.fatal
