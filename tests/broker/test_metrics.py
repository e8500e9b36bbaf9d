"""The broker's metrics hub: sampled counters become 1-second and 1-minute windows, kept in
``__metrics`` across restarts, and an event-time consume rate that a stopped-then-restarted
group does not spike (DDIA ch. 11, "event time versus processing time").

Time is driven by hand: the hub's clock is a `ManualClock` and each test calls `tick()` once per
simulated second, as the hub's thread does just after each second boundary."""

from __future__ import annotations

import json

import pytest

from streams.broker.metrics import METRICS_TOPIC, MetricsHub, parse_series, series
from streams.groups import GroupCoordinator
from streams.log import LogStore
from streams.processing.testing import ManualClock

T0 = 1_800_000_000_000  # a whole minute: 2027-01-15T08:00:00Z


@pytest.fixture
def clock():
    return ManualClock(T0 + 5)  # ticks land 5 ms after the boundary, as in production


@pytest.fixture
def engine(tmp_path, clock):
    store = LogStore.open(tmp_path / "data", clock=clock, background=False)
    store.create_topic("orders", 2, {})
    coordinator = GroupCoordinator(store, clock=clock)
    coordinator.load()  # no tick thread: nothing here expires
    yield store, coordinator
    store.close()


def _by_series(points, w=1000):
    out: dict[str, dict[int, float]] = {}
    for p in points:
        if p.w == w:
            out.setdefault(p.series, {})[p.t] = p.v
    return out


def _second(clock, hub):
    clock.advance(1000)
    return hub.tick()


def test_series_names_round_trip_any_topic_or_group():
    name = series("group_lag", "team/a b", "orders", 3)
    assert parse_series(name) == ("group_lag", ("team/a b", "orders", "3"))
    with pytest.raises(ValueError):
        series("no_such_kind")


def test_appends_become_one_second_windows_per_partition_topic_and_total(engine, clock):
    store, coordinator = engine
    hub = MetricsHub(store, coordinator, clock=clock)
    assert hub.tick() == []  # the first sample is the baseline
    for _ in range(5):
        store.append("orders", b"x" * 100, partition=0)
    for _ in range(3):
        store.append("orders", b"y" * 100, partition=1)
    got = _by_series(_second(clock, hub))
    window = T0  # the second [T0, T0 + 1 s) just closed
    assert got[series("records_in", "orders", 0)] == {window: 5}
    assert got[series("records_in", "orders", 1)] == {window: 3}
    assert got[series("records_in", "orders")] == {window: 8}
    assert got[series("records_in")] == {window: 8}
    assert got[series("bytes_in", "orders", 0)][window] > 5 * 100
    assert got[series("end_offset", "orders", 0)] == {window: 5}
    # a quiet second is a zero, not a hole in the chart
    got = _by_series(_second(clock, hub))
    assert got[series("records_in", "orders")] == {T0 + 1000: 0}
    assert METRICS_TOPIC not in {parse_series(s)[1][:1] for s in got}  # own traffic not counted


def test_one_minute_rollup_sums_rates_and_keeps_peak_gauges(engine, clock):
    store, coordinator = engine
    hub = MetricsHub(store, coordinator, clock=clock)
    hub.tick()
    minute_points = []
    for second in range(60):
        for _ in range(second % 3):  # 0, 1, 2, 0, 1, 2 ... -> 60 records in the minute
            store.append("orders", b"v", partition=0)
        minute_points += [p for p in _second(clock, hub) if p.w == 60_000]
    got = _by_series(minute_points, w=60_000)
    assert got[series("records_in", "orders")] == {T0: 60}
    assert got[series("end_offset", "orders", 0)] == {T0: 60}


def test_a_minute_measured_in_part_rolls_up_to_its_average_rate(engine, clock):
    """A broker started half-way through a minute: 2 records a second for its 30 seconds is
    2/s — the rollup says 120 a minute, not the 60 counted (which would draw 1/s)."""
    store, coordinator = engine
    clock.advance(30_000)
    hub = MetricsHub(store, coordinator, clock=clock)
    hub.tick()
    minute_points = []
    for _ in range(30):
        store.append("orders", b"v", partition=0)
        store.append("orders", b"v", partition=1)
        minute_points += [p for p in _second(clock, hub) if p.w == 60_000]
    got = _by_series(minute_points, w=60_000)
    assert got[series("records_in", "orders")] == {T0: 120}
    assert got[series("records_in", "orders", 0)] == {T0: 60}
    assert got[series("end_offset", "orders", 0)] == {T0: 30}  # a gauge: its peak


def test_history_survives_a_restart(tmp_path, clock):
    store = LogStore.open(tmp_path / "data", clock=clock, background=False)
    store.create_topic("orders", 1, {})
    hub = MetricsHub(store, GroupCoordinator(store, clock=clock), clock=clock)
    hub.tick()
    for n in (4, 0, 7):
        for _ in range(n):
            store.append("orders", b"v")
        _second(clock, hub)
    want = hub.history(T0, match=lambda s: s == series("records_in", "orders"))
    assert [(p.t, p.v) for p in want] == [(T0, 4), (T0 + 1000, 0), (T0 + 2000, 7)]
    store.close()

    store = LogStore.open(tmp_path / "data", clock=clock, background=False)
    hub = MetricsHub(store, GroupCoordinator(store, clock=clock), clock=clock)
    got = hub.history(T0, match=lambda s: s == series("records_in", "orders"))
    assert got == want
    store.close()


def test_rollups_are_kept_in_a_partition_of_their_own_and_read_from_it(tmp_path, clock):
    """The 6-hour and 24-hour charts read a day of 1-minute rollups: partition 1 of
    ``__metrics`` holds only those (one small record a minute), partition 0 the 1-second
    windows; a restart two hours later still finds the rollup (past the in-memory hour)."""
    store = LogStore.open(tmp_path / "data", clock=clock, background=False)
    store.create_topic("orders", 1, {})
    hub = MetricsHub(store, GroupCoordinator(store, clock=clock), clock=clock)
    hub.tick()
    for _ in range(61):
        store.append("orders", b"v")
        _second(clock, hub)
    assert store.partition_count(METRICS_TOPIC) == 2
    rollups = store.read(METRICS_TOPIC, 1, 0, 100, 1 << 20)
    assert len(rollups) == 1
    seconds = store.read(METRICS_TOPIC, 0, 0, 100, 1 << 20)
    assert len(seconds) == 61
    assert {p[2] for r in seconds for p in json.loads(r.value)["p"]} == {1000}
    assert {p[2] for p in json.loads(rollups[0].value)["p"]} == {60_000}
    store.close()

    clock.advance(2 * 3600_000)
    store = LogStore.open(tmp_path / "data", clock=clock, background=False)
    hub = MetricsHub(store, GroupCoordinator(store, clock=clock), clock=clock)
    name = series("records_in", "orders")
    got = hub.history(T0, resolution_ms=60_000, match=lambda s: s == name)
    assert [(p.t, p.w, p.v) for p in got] == [(T0, 60_000, 60)]
    store.close()


def test_a_metrics_topic_of_one_partition_gets_its_rollup_partition_and_history(tmp_path, clock):
    """An earlier version kept everything in one partition: the hub adds the rollup partition
    and copies the rollups kept so far into it, so the 24-hour chart still has them."""
    store = LogStore.open(tmp_path / "data", clock=clock, background=False)
    store.create_topic(METRICS_TOPIC, 1, {})  # as an earlier version made it
    name = series("records_in", "orders")
    old = [[name, T0 + 59_000, 1000, 2, 0], [name, T0, 60_000, 90, 0]]
    store.append(METRICS_TOPIC, json.dumps({"p": old}).encode(), timestamp_ms=T0 + 60_005)
    store.append(METRICS_TOPIC, json.dumps({"p": old[:1]}).encode(), timestamp_ms=T0 + 60_006)
    clock.advance(3 * 3600_000)  # hours later: past the in-memory hour
    hub = MetricsHub(store, GroupCoordinator(store, clock=clock), clock=clock)
    assert store.partition_count(METRICS_TOPIC) == 2
    assert hub.copy_old_rollups() == 1
    assert hub.copy_old_rollups() == 0  # once
    got = hub.history(T0, resolution_ms=60_000, match=lambda s: s == name)
    assert [(p.t, p.w, p.v) for p in got] == [(T0, 60_000, 90)]
    store.close()


def test_subscribers_get_each_batch_until_they_unsubscribe(engine, clock):
    store, coordinator = engine
    hub = MetricsHub(store, coordinator, clock=clock, persist=False)
    received = []
    unsubscribe = hub.subscribe(received.append)
    hub.tick()
    _second(clock, hub)
    assert len(received) == 1 and received[0]
    unsubscribe()
    _second(clock, hub)
    assert len(received) == 1


def test_lag_and_consume_rate_follow_commits(engine, clock):
    store, coordinator = engine
    hub = MetricsHub(store, coordinator, clock=clock, persist=False)
    for _ in range(10):
        store.append("orders", b"v", partition=0)
    coordinator.commit_offsets("billing", {("orders", 0): 2})
    hub.tick()
    coordinator.commit_offsets("billing", {("orders", 0): 6})
    got = _by_series(_second(clock, hub))
    assert got[series("group_records", "billing")] == {T0: 4}
    assert got[series("records_out", "orders", 0)] == {T0: 4}
    assert got[series("group_lag", "billing", "orders", 0)] == {T0: 4}
    assert got[series("group_lag", "billing")] == {T0: 4}
    assert got[series("group_bytes", "billing")][T0] > 0


def test_stopped_group_catching_up_spikes_in_processing_time_but_not_in_event_time(engine, clock):
    """The book's example: 10 records/s keep arriving; the group stops for a minute, then
    catches up in one go — while two other groups read the same topic: one always keeps up,
    one is slow (half the rate). Each group's event time is its own.

        second     0 ........ 30 ............ 90 ........ 120
        appends    10/s ------------------------------------->
        dashboards consumes   | stopped (60 s)  | catches up, then consumes
        processing-time rate  10 10 10 .. 0 0 0 .. 610 10 10
        event-time rate       10 10 10 ..  10 10 10 ..  10 10     (flat)
        audit      keeps up: every event-time window 10, emitted within seconds
        archive    5/s: event-time windows still 10 each, just later
    """
    store, coordinator = engine
    hub = MetricsHub(store, coordinator, clock=clock, persist=False)
    hub.tick()
    points, emitted_at = [], {}
    for second in range(120):
        base = T0 + second * 1000
        for i in range(10):
            store.append("orders", b"v", partition=i % 2, timestamp_ms=base + i * 100)
        ends = {("orders", p): store.offsets("orders", p)[1] for p in (0, 1)}
        if not 30 <= second < 90:
            coordinator.commit_offsets("dashboards", ends)
        coordinator.commit_offsets("audit", ends)
        coordinator.commit_offsets("archive", {tp: (second + 1) * 5 // 2 for tp in ends})
        got = _second(clock, hub)
        points += got
        for p in got:
            if p.series == series("group_records_et", "audit"):
                emitted_at[p.t] = T0 + (second + 1) * 1000
    rates = _by_series(points)
    processing = rates[series("group_records", "dashboards")]
    event_time = rates[series("group_records_et", "dashboards")]

    steady = [processing[T0 + s * 1000] for s in range(1, 29)]
    assert set(steady) == {10}
    assert processing[T0 + 90_000] == 610  # 60 s of backlog + this second's 10: the spike
    assert max(processing.values()) > 10 * max(steady)

    closed = [t for t in event_time if t <= T0 + 110_000]
    assert len(closed) >= 110  # every second, including the stopped minute, got its window
    assert {event_time[t] for t in closed} == {10}  # flat: no spike, no hole
    assert [p for p in points if p.rev > 0] == []  # and nothing was late or corrected

    audit = rates[series("group_records_et", "audit")]
    assert len(audit) >= 110 and set(audit.values()) == {10}
    assert max(emitted_at[t] - t for t in audit) <= 4000  # not held back by the others
    archive = rates[series("group_records_et", "archive")]
    later = [v for t, v in archive.items() if t > T0]  # its first commit is the baseline
    assert len(later) >= 50 and set(later) == {10}


def test_event_times_come_from_batch_headers_split_by_window(tmp_path):
    """A 30-record batch with timestamps every 100 ms spans three 1-second windows; the
    sampler counts it per window from the header alone, and only the offsets asked for."""
    from streams.broker.metrics.sampler import batch_event_times
    from streams.log import ProducerRecord

    store = LogStore.open(tmp_path / "data", background=False)
    store.create_topic("t", 1, {})
    store.append_batch("t", [ProducerRecord(b"v", timestamp_ms=T0 + 100 * i) for i in range(30)])
    store.append("t", b"w", timestamp_ms=T0 + 5000)
    raw = store.read_batches("t", 0, 0, 1 << 20)

    def per_window(counts):
        out: dict[int, int] = {}
        for ts, n in counts:
            out[ts - ts % 1000] = out.get(ts - ts % 1000, 0) + n
        return out

    counts, reached = batch_event_times(raw, 0, 31)
    assert reached == 31
    assert per_window(counts) == {T0: 10, T0 + 1000: 10, T0 + 2000: 10, T0 + 5000: 1}
    counts, reached = batch_event_times(raw, 5, 25)  # a group committed past part of it
    assert reached == 25
    assert per_window(counts) == {T0: 5, T0 + 1000: 10, T0 + 2000: 5}
    store.close()


def test_damaged_history_is_skipped_and_the_hub_still_starts(tmp_path, clock):
    """A damaged batch of ``__metrics`` (a CRC that fails, or offsets missing below the
    recovery point) made the hub's history load raise LogDamaged, and with it the broker's
    start: lost metrics history costs only the damaged seconds."""
    store = LogStore.open(tmp_path / "data", clock=clock, background=False)
    store.create_topic("orders", 1, {})
    hub = MetricsHub(store, GroupCoordinator(store, clock=clock), clock=clock)
    hub.tick()
    for n in (4, 5, 7):
        for _ in range(n):
            store.append("orders", b"v")
        _second(clock, hub)
    want = hub.history(T0, match=lambda s: s == series("records_in", "orders"))
    assert [(p.t, p.v) for p in want] == [(T0, 4), (T0 + 1000, 5), (T0 + 2000, 7)]
    store.close()
    log_file = tmp_path / "data" / f"{METRICS_TOPIC}-0" / "00000000000000000000.log"
    data = bytearray(log_file.read_bytes())
    first = 12 + int.from_bytes(data[8:12], "big")  # the second batch starts here
    second_end = first + 12 + int.from_bytes(data[first + 8 : first + 12], "big")
    data[second_end - 1] ^= 0xFF  # its last byte: its CRC-32C no longer matches
    log_file.write_bytes(bytes(data))

    store = LogStore.open(tmp_path / "data", clock=clock, background=False)
    assert store.partition_log(METRICS_TOPIC, 0).damaged
    hub = MetricsHub(store, GroupCoordinator(store, clock=clock), clock=clock)
    got = hub.history(T0, match=lambda s: s == series("records_in", "orders"))
    assert [(p.t, p.v) for p in got] == [(T0, 4), (T0 + 2000, 7)]
    store.close()


def _partials(points, w=1000):
    assert all(p.partial for p in points)
    return {p.series: (p.t, p.v) for p in points if p.w == w}


def test_the_open_second_is_pushed_as_it_fills_and_only_what_moved(engine, clock):
    store, coordinator = engine
    hub = MetricsHub(store, coordinator, clock=clock, persist=False)
    received = []
    hub.subscribe(received.append)
    hub.tick()  # the baseline, at T0 + 5
    _second(clock, hub)  # [T0, T0 + 1 s) closed; [T0 + 1 s, …) is open
    open_second = T0 + 1000
    assert hub.partial() == []  # nothing moved: nothing to say
    clock.advance(200)
    for _ in range(4):
        store.append("orders", b"x" * 10, partition=0)
    got = _partials(hub.partial())
    # 4 records in the 200 ms since the tick: the rate so far, as a total over the second
    assert got[series("records_in", "orders", 0)] == (open_second, 20)
    assert got[series("records_in", "orders")] == (open_second, 20)
    assert got[series("records_in")] == (open_second, 20)
    assert got[series("end_offset", "orders", 0)] == (open_second, 4)
    assert series("records_in", "orders", 1) not in got  # partition 1 did not move
    assert received[-1] == [p for p in received[-1] if p.partial]  # subscribers got them
    clock.advance(200)
    # no appends since: nothing moved, nothing is said (the closed window settles the rate)
    assert hub.partial() == []
    store.append("orders", b"x" * 10, partition=1)
    clock.advance(200)
    got = _partials(hub.partial())
    assert got[series("records_in", "orders", 1)] == (open_second, 1000 / 600)
    assert got[series("records_in", "orders")] == (open_second, 5 * 1000 / 600)
    assert series("end_offset", "orders", 0) not in got
    # the closed window counts the whole second, and the partials changed nothing of it
    clock.advance(400)
    closed = _by_series(hub.tick())
    assert closed[series("records_in", "orders")] == {open_second: 5}
    assert not any(p.partial for p in received[-1])


def test_the_open_minute_so_far_is_the_mean_rate_of_its_seconds_and_the_open_one(engine, clock):
    store, coordinator = engine
    hub = MetricsHub(store, coordinator, clock=clock, persist=False)
    hub.tick()
    for _ in range(10):
        store.append("orders", b"x", partition=0)
    _second(clock, hub)  # second 1 of the minute: 10 records
    clock.advance(500)
    for _ in range(10):
        store.append("orders", b"x", partition=0)
    minute = _partials(hub.partial(), w=60_000)
    # (10 + 10) records over 1.5 s measured: 13.3 records/s, as a total over the minute
    assert minute[series("records_in", "orders", 0)][0] == T0
    assert minute[series("records_in", "orders", 0)][1] == pytest.approx(20 / 1.5 * 60)
    assert minute[series("end_offset", "orders", 0)] == (T0, 20)  # a gauge: its peak so far


def test_a_group_s_lag_is_pushed_as_it_moves(engine, clock):
    store, coordinator = engine
    hub = MetricsHub(store, coordinator, clock=clock, persist=False)
    for _ in range(10):
        store.append("orders", b"v", partition=0)
    coordinator.commit_offsets("billing", {("orders", 0): 2})
    hub.tick()
    _second(clock, hub)
    clock.advance(300)
    coordinator.commit_offsets("billing", {("orders", 0): 7})
    got = _partials(hub.partial())
    assert got[series("group_lag", "billing", "orders", 0)][1] == 3
    assert got[series("group_lag", "billing")][1] == 3
    assert got[series("records_out", "orders", 0)][1] == pytest.approx(5 * 1000 / 300)
    clock.advance(300)
    assert series("group_lag", "billing") not in _partials(hub.partial())  # unchanged


def test_a_new_subscriber_reads_the_open_windows_with_the_history_until_they_close(engine, clock):
    store, coordinator = engine
    hub = MetricsHub(store, coordinator, clock=clock, persist=False)
    hub.tick()
    _second(clock, hub)
    clock.advance(400)
    store.append("orders", b"x", partition=0)
    hub.partial()
    name = series("end_offset", "orders", 0)
    got = [p for p in hub.history(T0 + 1000, open_windows=True) if p.series == name]
    assert [(p.t, p.v, p.partial) for p in got] == [(T0 + 1000, 1, True)]
    assert all(not p.partial for p in hub.history(T0 + 1000))  # only when asked
    clock.advance(600)
    hub.tick()
    got = [p for p in hub.history(T0 + 1000, open_windows=True) if p.series == name]
    assert [(p.t, p.v, p.partial) for p in got] == [(T0 + 1000, 1, False)]
