"""The demo's stream jobs (streams/broker/demo_jobs.py) over the demo's own events, checked
against brute-force oracles: orders enriched with the customers table as of each order's time,
click-through rate per query from clicks joined to their search within 10 minutes, and
revenue per country per minute (late orders in the side output)."""

from __future__ import annotations

import json
import random

import pytest

from streams.broker import demo_jobs
from streams.broker.demo import CLICKS, CUSTOMERS, ORDERS, PAGE_VIEWS, SEARCHES, DemoEvents
from streams.groups import GroupCoordinator
from streams.jobs.runner import Runner
from streams.log import LogStore

T0 = 1_800_000_000_000
STEP_MS = 7_000  # clicks come up to ~30 searches after theirs: some beyond 10 minutes


@pytest.fixture
def shop(tmp_path):
    """A store holding the demo's events; one partition per topic, so every job is one task
    reading its input in time order (the oracles below assume nothing is late)."""
    store = LogStore.open(tmp_path / "data", background=False)
    coordinator = GroupCoordinator(store)
    coordinator.load()
    for t in (ORDERS, CUSTOMERS, SEARCHES, CLICKS, PAGE_VIEWS):
        store.create_topic(t.name, 1)
    for topic in demo_jobs.OUTPUT_TOPICS:
        store.create_topic(topic, 1, demo_jobs.OUTPUT_TOPICS[topic])
    events = DemoEvents(random.Random(11))
    written = [(topic, k, v, T0) for topic, k, v in events.customers(T0)]
    written += [(*events.next(T0 + i * STEP_MS), T0 + i * STEP_MS) for i in range(1, 1500)]
    for topic, k, v, ts in written:
        store.append(topic, v, key=k, timestamp_ms=ts)
    yield store, coordinator, [(t, k.decode(), json.loads(v), ts) for t, k, v, ts in written]
    coordinator.close()
    store.close()


def run(store, coordinator, build) -> None:
    Runner(build(), store, coordinator=coordinator).run_until_idle()


def records(store, topic):
    pos, end = store.offsets(topic, 0)
    out = []
    while pos < end:
        recs = store.read(topic, 0, pos)
        out += [(r.key.decode(), json.loads(r.value), r.timestamp_ms) for r in recs]
        pos = recs[-1].offset + 1
    return out


def test_orders_are_enriched_with_the_customer_as_of_the_order(shop):
    store, coordinator, written = shop
    run(store, coordinator, demo_jobs.enrich_orders)
    expected = []
    for topic, key, value, ts in written:
        if topic == ORDERS.name:
            rows = [v for t, k, v, t2 in written if t == CUSTOMERS.name and k == key and t2 <= ts]
            expected.append((value["order_id"], rows[-1]["country"] if rows else "unknown"))
    got = [(v["order_id"], v["country"]) for _, v, _ in records(store, demo_jobs.ENRICHED)]
    assert got == expected
    assert len({c for _, c in got}) > 3
    # a customer who moved: their earlier orders keep the country they had then
    by_customer: dict = {}
    for _, v, _ in records(store, demo_jobs.ENRICHED):
        by_customer.setdefault(v["customer_id"], set()).add(v["country"])
    assert any(len(countries) > 1 for countries in by_customer.values())


def test_click_through_rate_per_query(shop):
    store, coordinator, written = shop
    run(store, coordinator, demo_jobs.search_ctr)
    searches = [(v, ts) for t, _, v, ts in written if t == SEARCHES.name]
    clicks = [(v, ts) for t, _, v, ts in written if t == CLICKS.name]
    oracle = {}
    for s, ts in searches:
        n, k = oracle.get(s["query"], (0, 0))
        within = sum(
            1
            for c, tc in clicks
            if c["search_id"] == s["search_id"] and abs(tc - ts) <= demo_jobs.CLICK_WINDOW_MS
        )
        oracle[s["query"]] = (n + 1, k + within)
    latest = {k: v for k, v, _ in records(store, demo_jobs.CTR)}
    assert {q: (v["searches"], v["clicks"]) for q, v in latest.items()} == oracle
    assert all(v["ctr"] == round(v["clicks"] / v["searches"], 4) for v in latest.values())
    # the 10-minute bound mattered: some clicks came later than that after their search
    assert sum(k for _, k in oracle.values()) < len(clicks)


def test_revenue_per_country_per_minute(shop):
    store, coordinator, written = shop
    run(store, coordinator, demo_jobs.enrich_orders)
    run(store, coordinator, demo_jobs.revenue_by_country)
    oracle: dict = {}
    for _, v, ts in records(store, demo_jobs.ENRICHED):
        if v["event"] == "order_placed":
            acc = oracle.setdefault((v["country"], ts - ts % 60_000), [0.0, 0])
            acc[0] += v["total"]
            acc[1] += 1
    latest = {(k, v["start"]): v for k, v, _ in records(store, demo_jobs.REVENUE)}
    assert set(latest) == set(oracle)
    for key, (revenue, n) in oracle.items():
        assert latest[key]["orders"] == n
        assert latest[key]["revenue_eur"] == round(revenue, 2)
    assert records(store, demo_jobs.REVENUE_LATE) == []  # in time order: nothing late


def test_abandoned_searches_match_the_brute_force_patterns(shop):
    """Searched, clicked one of its results, no order within 10 minutes of the search: the
    job's matches equal the brute-force matcher's (tests/jobs/test_cep.py) per session, over
    the searches whose 10 minutes the watermark has passed (with a minute to spare)."""
    from tests.jobs.test_cep import oracle

    store, coordinator, written = shop
    run(store, coordinator, demo_jobs.session_activity)
    run(store, coordinator, demo_jobs.abandoned_searches)
    kinds = {SEARCHES.name: "search", CLICKS.name: "click", ORDERS.name: "order"}
    sessions: dict[str, list[dict]] = {}
    for topic, _, v, ts in written:
        if topic not in kinds or (topic == ORDERS.name and v.get("event") != "order_placed"):
            continue
        e = {**demo_jobs._session_event(kinds[topic], v), "ts": ts}
        sessions.setdefault(v["session_id"], []).append(e)
    watermark = max(ts for *_, ts in written) - demo_jobs.GRACE_MS
    settled = watermark - demo_jobs.CLICK_WINDOW_MS - 60_000
    expected = set()
    for session, events in sessions.items():
        for m in oracle(demo_jobs.ABANDONED_PATTERN, events):
            if m["search"][0]["ts"] <= settled:
                expected.add((session, m["search"][0]["search_id"], m["click"][0]["sku"]))
    got = set()
    searched_at = {v["search_id"]: ts for t, _, v, ts in written if t == SEARCHES.name}
    for key, v, _ in records(store, demo_jobs.ABANDONED):
        assert key == v["session_id"]
        if searched_at[v["search_id"]] <= settled:
            got.add((v["session_id"], v["search_id"], v["clicked_sku"]))
    assert got == expected
    # the pattern's negation mattered: some clicked searches were followed by an order
    clicked = {
        (s, e["search_id"]) for s, es in sessions.items() for e in es if e["kind"] == "click"
    }
    assert len(expected) < len(clicked) and expected


def test_the_demo_saves_a_search_over_page_views_once(shop):
    from streams.jobs.saved import SavedSearches

    store, _, _ = shop
    demo_jobs.ensure_demo_saved_search(store)
    demo_jobs.ensure_demo_saved_search(store)
    (saved,) = SavedSearches(store).list()
    assert saved.topic == "page-views" and saved.name == demo_jobs.DEMO_SAVED_SEARCH["name"]
