"""The console's view pages (/views/): the tables of the jobs running in the server, one
table queried by key, range or window time (with the offsets and watermark the answer
reflects), read-your-writes by waiting for offsets, and clear errors."""

from __future__ import annotations

import json

import pytest

from streams.jobs import JSON, Count, Job, Sum, Tumbling, field
from streams.jobs.runner import Runner

pytestmark = pytest.mark.django_db


def shop() -> Job:
    job = Job("shop")
    by_country = job.stream("orders", value=JSON, timestamp=field("ts")).key_by("country")
    by_country.aggregate(name="revenue", total=Sum("amount"), n=Count())
    by_country.window(Tumbling(60_000), grace_ms=10_000_000).aggregate(
        name="per-minute", emit="updates", total=Sum("amount")
    )
    return job


@pytest.fixture
def runner(broker):
    broker.store.create_topic("orders", 3)
    r = Runner(shop(), broker.store, coordinator=broker.coordinator)
    r.start()
    yield r
    r.close()


def produce(store, i: int, country: str, amount: int, ts: int) -> tuple[int, int]:
    value = json.dumps({"country": country, "amount": amount, "ts": ts}).encode()
    r = store.append_batch("orders", [(value, f"o{i}".encode(), (), ts)])[0]
    return r.partition, r.offset


def test_list_shows_each_view_with_partitions_rows_and_freshness(broker, runner, viewer_client):
    produce(broker.store, 0, "fr", 5, 1_000)
    runner.run_until_idle()
    page = viewer_client.get("/views/").content.decode()
    assert 'data-view="shop/revenue"' in page and 'data-view="shop/per-minute"' in page
    assert "running aggregate" in page and "windowed aggregate" in page
    assert "3 / 3" in page and ">1 row<" in page and " ago</time>" in page


def test_empty_list_says_no_job_runs(broker, viewer_client):
    page = viewer_client.get("/views/").content.decode()
    assert 'id="views-empty"' in page


def test_query_by_key_and_range_show_rows_and_what_they_reflect(broker, runner, viewer_client):
    for i, (c, a) in enumerate([("de", 2), ("fr", 5), ("fr", 7), ("it", 1), ("nl", 4)]):
        produce(broker.store, i, c, a, 1_000 * i)
    runner.run_until_idle()
    page = viewer_client.get("/views/shop/revenue/", {"key": "fr"}).content.decode()
    assert '<td class="mono">&quot;fr&quot;</td>' in page
    assert '<th scope="col" class="mono">total</th>' in page and ">12</td>" in page
    assert "reflects input offsets" in page and "watermark" in page
    # a range across partitions, as an htmx partial
    part = viewer_client.get(
        "/views/shop/revenue/", {"from": "e", "to": "j"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert part.startswith('\n<div id="view-result"') or 'id="view-result"' in part[:80]
    assert "&quot;fr&quot;" in part and "&quot;it&quot;" in part and "&quot;de&quot;" not in part
    assert "<html" not in part


def test_windowed_query_and_read_your_writes(broker, runner, viewer_client):
    p, off = produce(broker.store, 0, "fr", 5, 120_500)
    # not processed yet: a wait with a short timeout says so, clearly
    page = viewer_client.get(
        "/views/shop/per-minute/",
        {"key": "fr", "wait_for": f"orders:{p}:{off + 1}", "timeout_ms": "50"},
    ).content.decode()
    assert 'id="view-error"' in page and f"waiting for {off + 1}" in page
    runner.run_until_idle()
    page = viewer_client.get(
        "/views/shop/per-minute/",
        {
            "key": "fr",
            "time_from": "60000",
            "time_to": "180000",
            "wait_for": f"orders:{p}:{off + 1}",
        },
    ).content.decode()
    assert "[&quot;fr&quot;, 120000]" in page
    # a window's bounds are ms since the epoch, shown as UTC times
    assert ">end (UTC)</th>" in page and ">1970-01-01 00:03:00.000</td>" in page


def test_bad_input_and_unknown_views_are_clear(broker, runner, viewer_client):
    page = viewer_client.get("/views/shop/revenue/", {"limit": "x", "key": "fr"})
    assert page.status_code == 200 and "limit" in page.content.decode()
    missing = viewer_client.get("/views/shop/nope/")
    assert missing.status_code == 404
    assert "its views: per-minute, revenue" in missing.content.decode()


def test_pages_need_a_login(broker, runner, client):
    assert client.get("/views/").status_code == 302
