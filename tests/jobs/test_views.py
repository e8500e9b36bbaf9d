"""Interactive queries of the tables a running job maintains (``streams.jobs.views``): by key,
by key range across partitions, windowed by key and time; the consistency token; waiting for
offsets (read-your-writes after a produce); restore; and the change stream (snapshot, then
+/- changes and progress) reconstructing exactly the view, as a hypothesis property."""

from __future__ import annotations

import json
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.errors import InvalidConfig
from streams.jobs import JSON, Count, Job, Max, Session, Sum, Tumbling, field
from streams.jobs.runner import Runner
from streams.jobs.views import (
    ENDED,
    LocalViews,
    UnknownView,
    ViewRegistry,
    ViewTimeout,
    ViewUnavailable,
    order,
)
from streams.log import LogStore
from streams.log import records as rb

COUNTRIES = ["at", "be", "ch", "de", "es", "fi", "fr", "gr", "ie", "it", "nl", "pt", "se"]


def produce(store: LogStore, topic: str, key: str, value) -> tuple[int, int]:
    """One record (keyed: murmur2 partitioner); returns (partition, offset)."""
    data = None if value is None else json.dumps(value).encode()
    res = store.append_batch(topic, [(data, key.encode(), (), value and value.get("ts"))])[0]
    return res.partition, res.offset


def revenue_job(name: str = "shop") -> Job:
    """Orders keyed by order id, re-keyed by country: a running aggregate per country, and
    a windowed one (1 s tumbling windows, each window's updates)."""
    job = Job(name)
    by_country = job.stream("orders", value=JSON, timestamp=field("ts")).key_by("country")
    by_country.aggregate(name="revenue", total=Sum("amount"), n=Count())
    by_country.window(Tumbling(1_000), grace_ms=1_000_000).aggregate(
        name="per-second", emit="updates", total=Sum("amount")
    )
    return job


def orders(n: int, seed: int = 0):
    out = []
    for i in range(n):
        c = COUNTRIES[(i * 7 + seed) % len(COUNTRIES)]
        out.append((f"o{i}", {"country": c, "amount": 1 + (i * 5 + seed) % 9, "ts": i * 137}))
    return out


def totals(orders_):
    out: dict[str, dict] = {}
    for _, o in orders_:
        row = out.setdefault(o["country"], {"total": 0, "n": 0})
        row["total"] += o["amount"]
        row["n"] += 1
    return out


def test_get_by_key_routes_to_the_owning_partition_and_carries_a_token(store, coordinator):
    store.create_topic("orders", 4)
    data = orders(200)
    for k, v in data:
        produce(store, "orders", k, v)
    runner = Runner(revenue_job(), store, coordinator=coordinator, max_records=30)
    runner.run_until_idle()
    views = LocalViews(store)
    want = totals(data)
    view = views.view("shop", "revenue")
    for country, row in want.items():
        ans = views.get("shop", "revenue", country)
        assert ans.rows == [(country, row)]
        p = view.partition_of(country)
        # the token: the offsets of exactly the owning task's inputs, all read
        assert set(ans.token.offsets["orders"]) == {p}
        assert ans.token.offsets["orders"][p] == store.offsets("orders", p)[1]
        [rekeyed] = view.repartition_topics  # the token names only the view's inputs
        assert set(ans.token.offsets) == {"orders", rekeyed}
        assert ans.token.offsets[rekeyed][p] == store.offsets(rekeyed, p)[1]
        assert ans.token.watermark_ms is not None and ans.token.as_of_ms is not None
    assert views.get("shop", "revenue", "xx").rows == []
    with pytest.raises(UnknownView, match="its views: per-second, revenue"):
        views.get("shop", "nope", "fr")
    with pytest.raises(UnknownView, match="no job 'other'"):
        views.get("other", "revenue", "fr")
    with pytest.raises(InvalidConfig, match="per-second is windowed"):
        views.get("shop", "per-second", "fr")
    runner.close()
    # a stopped job serves nothing any more
    with pytest.raises(UnknownView):
        views.get("shop", "revenue", "fr")


def test_key_range_spans_partitions_in_key_order(store, coordinator):
    store.create_topic("orders", 4)
    data = orders(300, seed=3)
    for k, v in data:
        produce(store, "orders", k, v)
    runner = Runner(revenue_job(), store, coordinator=coordinator)
    runner.run_until_idle()
    views = LocalViews(store)
    view = views.view("shop", "revenue")
    want = totals(data)
    ans = views.range("shop", "revenue", lo="ch", hi="it")
    expected = sorted((k, v) for k, v in want.items() if "ch" <= k <= "it")
    assert ans.rows == expected
    # the answer gathered rows from several partitions, and its token covers all of them
    assert len({view.partition_of(k) for k, _ in ans.rows}) > 1
    assert set(ans.token.offsets["orders"]) == {0, 1, 2, 3}
    # open bounds, and a limit that cuts (said so)
    assert views.range("shop", "revenue").rows == sorted(want.items())
    assert views.range("shop", "revenue", hi="be").rows == sorted(
        (k, v) for k, v in want.items() if k <= "be"
    )
    cut = views.range("shop", "revenue", limit=3)
    assert cut.rows == sorted(want.items())[:3] and cut.truncated
    with pytest.raises(InvalidConfig, match="limit"):
        views.range("shop", "revenue", limit=0)
    runner.close()


def test_windowed_view_by_key_and_time_range(store, coordinator):
    store.create_topic("orders", 3)
    data = orders(120, seed=1)
    for k, v in data:
        produce(store, "orders", k, v)
    runner = Runner(revenue_job(), store, coordinator=coordinator)
    runner.run_until_idle()
    views = LocalViews(store)
    per_window: dict[tuple[str, int], int] = {}
    for _, o in data:
        start = o["ts"] - o["ts"] % 1_000
        per_window[(o["country"], start)] = per_window.get((o["country"], start), 0) + o["amount"]
    for country in ("fr", "de"):
        ans = views.windows("shop", "per-second", country, time_from=2_000, time_to=9_000)
        want = sorted(
            (s, t) for (c, s), t in per_window.items() if c == country and 2_000 <= s <= 9_000
        )
        assert [(k[0], k[1], r["total"]) for k, r in ans.rows] == [(country, s, t) for s, t in want]
        assert all(r["end"] == k[1] + 1_000 for k, r in ans.rows)
        everything = views.windows("shop", "per-second", country)
        assert len(everything.rows) == len([1 for c, _ in per_window if c == country])
        # the watermark of the key's task: the largest event time its partition has seen
        p = views.view("shop", "per-second").partition_of(country)
        seen = [
            o["ts"]
            for _, o in data
            if views.view("shop", "revenue").partition_of(o["country"]) == p
        ]
        assert ans.token.watermark_ms == max(seen)
    with pytest.raises(InvalidConfig, match="not windowed"):
        views.windows("shop", "revenue", "fr", time_from=0)
    runner.close()


def test_table_join_view_follows_retractions(store, coordinator):
    store.create_topic("customers", 2, {"cleanup.policy": "compact"})
    store.create_topic("accounts", 2, {"cleanup.policy": "compact"})
    job = Job("crm")
    customers = job.table("customers", value=JSON)
    accounts = job.table("accounts", value=JSON)
    customers.join(accounts, name="joined", joiner=lambda c, a: {**c, **a})
    produce(store, "customers", "c1", {"name": "Ada", "ts": 1})
    produce(store, "customers", "c2", {"name": "Bob", "ts": 2})
    produce(store, "accounts", "c1", {"plan": "pro", "ts": 3})
    runner = Runner(job, store, coordinator=coordinator)
    runner.run_until_idle()
    views = LocalViews(store)
    assert views.range("crm", "joined").rows == [("c1", {"name": "Ada", "plan": "pro", "ts": 3})]
    p, off = produce(store, "accounts", "c1", None)  # a tombstone: the joined row goes
    produce(store, "accounts", "c2", {"plan": "free", "ts": 5})
    runner.run_until_idle()
    ans = views.range("crm", "joined")
    assert ans.rows == [("c2", {"name": "Bob", "plan": "free", "ts": 5})]
    assert ans.token.offsets["accounts"][p] == store.offsets("accounts", p)[1] > off
    runner.close()


def test_wait_for_offsets_gives_read_your_writes_after_a_produce(store, coordinator):
    """A query issued right after a produce, asking to wait for that record's offset, sees
    its effect — through the job's repartition topic — while the job runs in its thread."""
    store.create_topic("orders", 3)
    runner = Runner(revenue_job(), store, coordinator=coordinator)
    runner.start()
    stop = threading.Event()
    worker = threading.Thread(target=runner.run, args=(stop.is_set, 0.01), daemon=True)
    worker.start()
    try:
        views = LocalViews(store)
        total = 0
        for i in range(20):
            total += i + 1
            p, off = produce(store, "orders", f"o{i}", {"country": "fr", "amount": i + 1, "ts": i})
            ans = views.get(
                "shop", "revenue", "fr", wait_for={"orders": {p: off + 1}}, timeout_s=30
            )
            # the record went to orders-p (keyed by order id); "fr"'s row lives in the task
            # of its own partition, reached through the repartition topic
            assert ans.rows == [("fr", {"total": total, "n": i + 1})]
    finally:
        stop.set()
        worker.join(10)
    runner.close()


def test_wait_blocks_until_the_job_processes(store, coordinator):
    """Deterministic: the query waits in a thread before the runner has processed anything;
    it returns the new row once the runner has run, not before."""
    store.create_topic("orders", 2)
    runner = Runner(revenue_job(), store, coordinator=coordinator)
    runner.start()
    p, off = produce(store, "orders", "o1", {"country": "de", "amount": 7, "ts": 5})
    got: list = []
    waiter = threading.Thread(
        target=lambda: got.append(
            LocalViews(store).get(
                "shop", "revenue", "de", wait_for={"orders": {p: off + 1}}, timeout_s=30
            )
        )
    )
    waiter.start()
    assert LocalViews(store).get("shop", "revenue", "de").rows == []  # not processed yet
    runner.run_until_idle()
    waiter.join(30)
    assert got and got[0].rows == [("de", {"total": 7, "n": 1})]
    runner.close()


def test_wait_timeout_is_a_clear_error(store, coordinator):
    store.create_topic("orders", 2)
    runner = Runner(revenue_job(), store, coordinator=coordinator)
    runner.run_until_idle()
    views = LocalViews(store)
    with pytest.raises(
        ViewTimeout, match=r"did not reach orders-1:5 within 0.1 s: orders-1 is at 0, waiting for 5"
    ):
        views.get("shop", "revenue", "fr", wait_for={"orders": {1: 5}}, timeout_s=0.1)
    with pytest.raises(InvalidConfig, match="orders has no partition 7"):
        views.get("shop", "revenue", "fr", wait_for={"orders": {7: 1}}, timeout_s=1)
    with pytest.raises(InvalidConfig, match="is not an input of view shop/revenue"):
        views.get("shop", "revenue", "fr", wait_for={"payments": {0: 1}}, timeout_s=1)
    with pytest.raises(InvalidConfig, match="timeout_s"):
        views.get("shop", "revenue", "fr", wait_for={"orders": {0: 1}}, timeout_s=3600)
    runner.close()


def _txn_append(store: LogStore, topic: str, values: list[bytes], pid: int) -> int:
    """A transactional producer's records in `topic`-0, no marker yet; the first offset."""
    data = rb.build_batch(
        [rb.ProducerRecord(v) for v in values],
        now_ms=1_700_000_000_000,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        attributes_extra=rb.ATTR_TRANSACTIONAL,
    )
    done = store.produce(topic, 0, data)
    store.sync_to(topic, 0, done.sync_to)
    return done.base_offset


@pytest.mark.parametrize("commit", [True, False])
def test_a_wait_stage_end_includes_a_transaction_whose_markers_are_still_due(store, commit):
    """The end of a repartition topic a ``wait_for`` stage waits for is read right after the
    upstream task's checkpoint was committed — but EndTxn is answered before its markers are
    written (as Kafka's), so the records that checkpoint appended may still be above the last
    stable offset. The end is read once the markers are there: a committed record is in it,
    an aborted one is not. Deterministic: the marker is written only after the reader has
    had its chance to look (a reader that did not wait returns the old end)."""
    store.create_topic("rp", 1)
    before = store.append_batch("rp", [(b"kept", None)], partition=0)[0].offset
    pid = store.allocate_producer_id()
    first = _txn_append(store, "rp", [b"a", b"b"], pid)
    assert store.offsets("rp", 0, committed=True)[1] == first  # the markers are due
    registry = ViewRegistry(store)
    got: list = []
    reader = threading.Thread(
        target=lambda: got.append(registry.end_offset("rp", 0, time.monotonic() + 60))
    )
    reader.start()
    reader.join(0.5)  # the reader looks while the markers are due
    store.write_markers([("rp", 0)], pid, 0, commit)
    reader.join(60)
    assert got == [first + 2 if commit else before + 1]


def test_a_wait_stage_times_out_on_a_transaction_left_open(store):
    store.create_topic("rp", 1)
    _txn_append(store, "rp", [b"a"], store.allocate_producer_id())
    with pytest.raises(ViewTimeout, match=r"rp-0: a transaction below offset 1 is still open"):
        ViewRegistry(store).end_offset("rp", 0, time.monotonic() + 0.1)


def test_restarted_job_serves_the_same_rows_from_the_view_changelog(store, coordinator):
    store.create_topic("orders", 3)
    data = orders(150, seed=2)
    for k, v in data[:100]:
        produce(store, "orders", k, v)
    first = Runner(revenue_job(), store, coordinator=coordinator)
    first.run_until_idle()
    first.close()
    second = Runner(revenue_job(), store, coordinator=coordinator)
    second.start()
    views = LocalViews(store)
    assert dict(views.range("shop", "revenue").rows) == totals(data[:100])
    for k, v in data[100:]:
        produce(store, "orders", k, v)
    second.run_until_idle()
    assert dict(views.range("shop", "revenue").rows) == totals(data)
    second.close()


def test_partitions_of_a_group_member_in_another_process_are_unavailable(store, coordinator):
    """Two workers in a group: each serves its partitions; when one leaves, the partitions it
    served are unavailable until the other has taken them over (then all are served)."""
    store.create_topic("orders", 2)
    for k, v in orders(40):
        produce(store, "orders", k, v)
    opts = {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 50}
    a = Runner(revenue_job(), store, coordinator=coordinator, group=True, consumer_options=opts)
    a.run_until_idle()
    views = LocalViews(store)
    assert dict(views.range("shop", "revenue").rows) == totals(orders(40))
    view = views.view("shop", "revenue")
    a._close_tasks()  # as on a revoke: its partitions are stale, not served
    with pytest.raises(ViewUnavailable, match="partitions 0, 1 of view shop/revenue"):
        views.range("shop", "revenue")
    with pytest.raises(ViewUnavailable):
        views.get("shop", "revenue", "fr")
    assert view.info().served == []
    a.close()


def test_key_order_is_total_over_json_keys():
    keys = ["b", 2, None, ["a", 1], "a", 1.5, ["a", 0], True]
    assert sorted(keys, key=order) == [None, True, 1.5, 2, "a", "b", ["a", 0], ["a", 1]]
    with pytest.raises(InvalidConfig):
        order({"a": 1})


# ------------------------------------------------------------------------ change streams


def _apply(state: dict, changes) -> None:
    """Apply (diff, key, row) updates as Materialize's SUBSCRIBE defines them."""
    for diff, key, row in changes:
        if diff == -1:
            assert state.get(key) == row, (key, row, state.get(key))
            del state[key]
        else:
            assert diff == 1 and key not in state, (key, row)
            state[key] = row


ops = st.lists(
    st.tuples(
        st.sampled_from(["customers", "accounts"]),
        st.sampled_from(["c1", "c2", "c3", "c4", "c5"]),
        st.one_of(st.none(), st.integers(0, 3)),
    ),
    min_size=1,
    max_size=30,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=ops, cut=st.integers(0, 30), polls=st.lists(st.integers(1, 5), min_size=1))
def test_snapshot_then_changes_reconstruct_the_view(tmp_path_factory, ops, cut, polls):
    """Whatever point a subscriber joins at, its snapshot plus the changes it then receives
    equal the view's rows at every later progress mark; times increase, each change comes
    before the progress mark that covers it."""
    store = LogStore.open(tmp_path_factory.mktemp("sub") / "data", background=False)
    try:
        store.create_topic("customers", 3, {"cleanup.policy": "compact"})
        store.create_topic("accounts", 3, {"cleanup.policy": "compact"})
        job = Job("crm")
        customers = job.table("customers", value=JSON)
        accounts = job.table("accounts", value=JSON)
        customers.join(accounts, how="left", name="joined")
        accounts.join(customers, how="inner", name="pairs")
        runner = Runner(job, store, max_records=2)
        runner.start()
        view = LocalViews(store).view("crm", "joined")
        cut = min(cut, len(ops))
        for i, (topic, key, v) in enumerate(ops[:cut]):
            produce(store, topic, key, None if v is None else {"v": v, "ts": i})
        for n in polls:
            for _ in range(n):
                runner.poll_once()
        seen: list = []
        snap, unsubscribe = view.subscribe(seen.append)
        state = dict(snap.rows)
        for i, (topic, key, v) in enumerate(ops[cut:], start=cut):
            produce(store, topic, key, None if v is None else {"v": v, "ts": i})
            runner.poll_once()
        runner.run_until_idle()
        last = snap.time
        for batch in seen:
            assert batch.time > last and batch.progress == batch.time + 1
            last = batch.time
            _apply(state, batch.changes)
            # at each mark, the reconstruction is the view as of that mark's offsets
        assert state == dict(view.range().rows)
        unsubscribe()
        runner.close()
    finally:
        store.close()


def test_change_stream_shows_an_update_as_retraction_then_insertion(store, coordinator):
    store.create_topic("orders", 1)
    job = Job("shop")
    job.stream("orders", value=JSON, timestamp=field("ts")).key_by("country").aggregate(
        name="top", best=Max("amount")
    )
    runner = Runner(job, store, coordinator=coordinator)
    produce(store, "orders", "o1", {"country": "fr", "amount": 3, "ts": 1})
    runner.run_until_idle()
    view = LocalViews(store).view("shop", "top")
    seen: list = []
    snap, unsubscribe = view.subscribe(seen.append)
    assert snap.rows == [("fr", {"best": 3})]
    p, off = produce(store, "orders", "o2", {"country": "fr", "amount": 9, "ts": 2})
    runner.run_until_idle()
    changes = [c for b in seen for c in b.changes]
    assert changes == [(-1, "fr", {"best": 3}), (1, "fr", {"best": 9})]
    assert seen[-1].token.offsets["orders"][p] == off + 1
    unsubscribe()
    produce(store, "orders", "o3", {"country": "fr", "amount": 12, "ts": 3})
    runner.run_until_idle()
    assert [c for b in seen for c in b.changes] == changes  # nothing after unsubscribing
    again: list = []
    view.subscribe(again.append)
    runner.close()  # the job stops: its stream ends
    assert again == [ENDED]


def test_windowed_view_drops_windows_past_its_retention(store, coordinator):
    """A windowed view keeps a window until the watermark is `view_retention_ms` past its end;
    a restarted task (its expiry index rebuilt from the view store) goes on dropping them."""
    store.create_topic("orders", 1)
    job = lambda: _retained_job()  # noqa: E731
    runner = Runner(job(), store, coordinator=coordinator)
    for i in range(5):  # windows [0, 1000) ... [4000, 5000)
        produce(store, "orders", f"o{i}", {"country": "fr", "amount": 1, "ts": i * 1_000})
    runner.run_until_idle()
    views = LocalViews(store)
    # watermark 4000: windows ending before 4000 - 2000 are gone: [0, 1000) ends at 1000
    starts = [k[1] for k, _ in views.windows("shop", "w", "fr").rows]
    assert starts == [1_000, 2_000, 3_000, 4_000]
    runner.close()
    again = Runner(job(), store, coordinator=coordinator)
    again.start()
    assert [k[1] for k, _ in views.windows("shop", "w", "fr").rows] == starts
    produce(store, "orders", "o9", {"country": "fr", "amount": 1, "ts": 6_500})
    again.run_until_idle()
    assert [k[1] for k, _ in views.windows("shop", "w", "fr").rows] == [4_000, 6_000]
    again.close()


def _retained_job() -> Job:
    job = Job("shop")
    job.stream("orders", value=JSON, timestamp=field("ts")).key_by("country").window(
        Tumbling(1_000), grace_ms=10_000
    ).aggregate(name="w", emit="updates", view_retention_ms=2_000, n=Count())
    return job


def test_session_view_replaces_merged_sessions(store, coordinator):
    """Session windows (gap 100 ms, each update emitted): an event that bridges two sessions
    merges them; the view keeps only the merged session's row, keyed by its start."""
    store.create_topic("orders", 1)
    job = Job("shop")
    job.stream("orders", value=JSON, timestamp=field("ts")).key_by("country").window(
        Session(100), grace_ms=10_000
    ).aggregate(name="visits", emit="updates", n=Count())
    runner = Runner(job, store, coordinator=coordinator)
    views = LocalViews(store)
    for i, ts in enumerate([0, 50, 200, 250]):  # two sessions: [0, 150) and [200, 350)
        produce(store, "orders", f"o{i}", {"country": "fr", "amount": 1, "ts": ts})
    runner.run_until_idle()
    rows = views.windows("shop", "visits", "fr").rows
    assert [(k[1], r["end"], r["n"]) for k, r in rows] == [(0, 150, 2), (200, 350, 2)]
    produce(store, "orders", "o9", {"country": "fr", "amount": 1, "ts": 120})  # bridges both
    runner.run_until_idle()
    rows = views.windows("shop", "visits", "fr").rows
    assert [(k[1], r["end"], r["n"]) for k, r in rows] == [(0, 350, 5)]
    runner.close()
