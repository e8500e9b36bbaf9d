"""The broker's commit windows, sampled from a real store and coordinator, judged by Burrow's
rules, with lag in time, time to catch up and lag as a share of retention."""

from __future__ import annotations

from streams.groups.evaluator import Status
from streams.groups.health import GroupHealthMonitor

SECOND = 1000


def _monitor(store, coordinator, clock, **kw):
    kw.setdefault("min_span_ms", 0)
    return GroupHealthMonitor(store, coordinator, clock=clock, **kw)


def _produce(store, clock, topic, n, partition=0):
    store.append_batch(topic, [(b"v", None, (), clock.now)] * n, partition=partition)


def test_a_consumer_keeping_up_with_a_small_lag_is_ok(store, coordinator, clock):
    store.create_topic("t", 1)
    monitor = _monitor(store, coordinator, clock)
    offset = 0
    for _ in range(6):
        _produce(store, clock, "t", 10)
        offset += 9 if offset == 0 else 10  # always one or two behind, never caught up
        coordinator.commit_offsets("g", {("t", 0): offset})
        monitor.sample()
        clock.advance(5 * SECOND)
    health = monitor.group_health("g")
    assert health.status is Status.OK, health.reason
    row = health.partitions[0]
    assert row.lag == 1 and row.commits == 6
    assert row.consume_rate and row.produce_rate
    assert row.catch_up_s is None and "not gaining" in row.catch_up_note


def test_a_stalled_consumer_and_its_lag_in_time(store, coordinator, clock):
    store.create_topic("t", 1)
    monitor = _monitor(store, coordinator, clock)
    _produce(store, clock, "t", 5)
    coordinator.commit_offsets("g", {("t", 0): 2})
    first_unread_at = clock.now  # offsets 2.. were written now
    for _ in range(4):
        clock.advance(5 * SECOND)
        _produce(store, clock, "t", 3)
        coordinator.commit_offsets("g", {("t", 0): 2})  # commits, but no progress
        monitor.sample()
    health = monitor.group_health("g")
    assert health.status is Status.STALL, health.reason
    assert "offset 2" in health.reason
    assert health.lag_age_ms == clock.now - first_unread_at == 20 * SECOND
    assert health.catch_up_s is None


def test_a_consumer_that_stops_committing_with_lag_is_stopped(store, coordinator, clock):
    store.create_topic("t", 1)
    monitor = _monitor(store, coordinator, clock)
    for i in range(3):
        _produce(store, clock, "t", 10)
        coordinator.commit_offsets("g", {("t", 0): 10 * i + 5})
        monitor.sample()
        clock.advance(5 * SECOND)
    assert monitor.group_health("g").status is not Status.STOP
    clock.advance(30 * SECOND)
    _produce(store, clock, "t", 10)
    monitor.sample()
    assert monitor.group_health("g").status is Status.STOP


def test_catching_up_gives_a_time_to_catch_up(store, coordinator, clock):
    store.create_topic("t", 1)
    _produce(store, clock, "t", 1000)
    monitor = _monitor(store, coordinator, clock)
    for i in range(4):
        coordinator.commit_offsets("g", {("t", 0): 100 * (i + 1)})  # 100 records per 5 s
        monitor.sample()
        clock.advance(5 * SECOND)
    row = monitor.group_health("g").partitions[0]
    assert row.status is Status.OK  # the lag shrinks
    assert row.consume_rate == 20.0 and row.produce_rate == 0.0
    assert row.lag == 600 and row.catch_up_s == 30.0


def test_lag_as_a_share_of_retention(store, coordinator, clock):
    store.create_topic("t", 1, {"retention.ms": str(100 * SECOND)})
    store.create_topic("forever", 1, {"retention.ms": "-1"})
    _produce(store, clock, "t", 4)
    _produce(store, clock, "forever", 4)
    coordinator.commit_offsets("g", {("t", 0): 1, ("forever", 0): 1})
    monitor = _monitor(store, coordinator, clock)
    monitor.sample()
    clock.advance(25 * SECOND)
    rows = {r.topic: r for r in monitor.group_health("g").partitions}
    assert rows["t"].lag_age_ms == 25 * SECOND
    assert rows["t"].retention_share == 0.25
    assert rows["forever"].retention_share is None
    assert "no retention limit" in rows["forever"].retention_note


def test_an_empty_group_that_read_everything_is_ok(store, coordinator, clock):
    store.create_topic("t", 2)
    _produce(store, clock, "t", 3, partition=0)
    coordinator.commit_offsets("g", {("t", 0): 3, ("t", 1): 0})
    monitor = _monitor(store, coordinator, clock)
    monitor.sample()
    clock.advance(3600 * SECOND)
    monitor.sample()
    health = monitor.group_health("g")
    assert health.status is Status.OK and health.lag == 0 and health.catch_up_s == 0.0
    assert health.lag_age_ms == 0


def test_a_reset_backwards_is_a_rewind_and_retention_loss_an_error(store, coordinator, clock):
    store.create_topic("t", 1)
    _produce(store, clock, "t", 100)
    monitor = _monitor(store, coordinator, clock)
    for offset in (60, 80, 20):
        coordinator.commit_offsets("g", {("t", 0): offset})
        monitor.sample()
        clock.advance(5 * SECOND)
    assert monitor.group_health("g").status is Status.REWIND
    store.delete_records("t", {0: 50})
    assert monitor.group_health("g").status is Status.ERR


def test_windows_forget_deleted_groups_and_keep_the_last_commits(store, coordinator, clock):
    store.create_topic("t", 1)
    _produce(store, clock, "t", 100)
    monitor = _monitor(store, coordinator, clock, window=4)
    for offset in range(10):
        coordinator.commit_offsets("g", {("t", 0): offset})
        monitor.sample()
        monitor.sample()  # the same commit twice is kept once
        clock.advance(SECOND)
    assert monitor.group_health("g").partitions[0].commits == 4
    coordinator.delete_group("g")
    monitor.sample()
    assert "g" not in monitor.all_groups()
