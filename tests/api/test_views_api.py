"""The JSON API's view queries (/api/v1/views): a job running in the server process over its
broker's store; by key, by key range across partitions, windowed by key and time; the
consistency token; read-your-writes after a produce through the API (``wait_for``); errors."""

from __future__ import annotations

import json
import threading

import pytest

from streams.jobs import JSON, Count, Job, Sum, Tumbling, field
from streams.jobs.runner import Runner
from tests.api.conftest import API

pytestmark = pytest.mark.django_db

COUNTRIES = ["de", "es", "fr", "it", "nl", "se"]


def shop() -> Job:
    job = Job("shop")
    by_country = job.stream("orders", value=JSON, timestamp=field("ts")).key_by("country")
    by_country.aggregate(name="revenue", total=Sum("amount"), n=Count())
    by_country.window(Tumbling(1_000), grace_ms=10_000_000).aggregate(
        name="per-second", emit="updates", total=Sum("amount")
    )
    return job


@pytest.fixture
def running(broker):
    """The shop job running in a thread of this (the server's) process."""
    broker.store.create_topic("orders", 3)
    runner = Runner(shop(), broker.store, coordinator=broker.coordinator)
    runner.start()
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop.is_set, 0.01), daemon=True)
    thread.start()
    yield runner
    stop.set()
    thread.join(10)
    runner.close()


def produce(client, records) -> list[dict]:
    body = [{"key": k, "value": json.dumps(v), "timestamp_ms": v["ts"]} for k, v in records]
    response = client.post(f"{API}/topics/orders/records", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["records"]


def wait_for(produced: list[dict]) -> str:
    last: dict[int, int] = {}
    for r in produced:
        last[r["partition"]] = max(last.get(r["partition"], 0), r["offset"] + 1)
    return ",".join(f"orders:{p}:{o}" for p, o in sorted(last.items()))


def test_read_your_writes_by_key_after_a_produce(running, op, view):
    """Each produce through the API is followed by a read that waits for its offsets: the
    answer includes the record, and its token says so."""
    expected = 0
    for i in range(8):
        expected += i + 1
        done = produce(op, [(f"o{i}", {"country": "fr", "amount": i + 1, "ts": 1_000 * i})])
        response = view.get(
            f"{API}/views/shop/revenue",
            {"key": "fr", "wait_for": wait_for(done), "timeout_ms": 30_000},
        )
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["query"] == "key" and not body["windowed"]
        assert body["rows"] == [{"key": "fr", "row": {"total": expected, "n": i + 1}}]
        token = body["consistency"]
        assert set(token["offsets"]) == {"orders", "shop-repartition-2"}
        assert token["watermark_ms"] == 1_000 * i and token["as_of_ms"] > 0


def test_key_range_spans_partitions_and_windows_by_time(running, op, view):
    records = [
        (f"o{i}", {"country": COUNTRIES[i % 6], "amount": i, "ts": 500 * i}) for i in range(60)
    ]
    done = produce(op, records)
    response = view.get(
        f"{API}/views/shop/revenue",
        {"from": "es", "to": "it", "wait_for": wait_for(done), "timeout_ms": 30_000},
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert [r["key"] for r in body["rows"]] == ["es", "fr", "it"]
    want = {c: sum(v["amount"] for _, v in records if v["country"] == c) for c in COUNTRIES}
    assert [r["row"]["total"] for r in body["rows"]] == [want["es"], want["fr"], want["it"]]
    # the rows came from more than one partition: the token holds all three
    assert set(body["consistency"]["offsets"]["orders"]) == {"0", "1", "2"}

    response = view.get(
        f"{API}/views/shop/per-second",
        {"key": "de", "time_from": 3_000, "time_to": 9_000, "wait_for": wait_for(done)},
    )
    body = response.json()
    assert body["windowed"]
    starts = [r["key"][1] for r in body["rows"]]
    assert starts == sorted(
        {(500 * i) // 1000 * 1000 for i in range(0, 60, 6)} & set(range(3_000, 9_001, 1_000))
    )
    assert all(r["key"][0] == "de" for r in body["rows"])

    listed = view.get(f"{API}/views").json()
    names = {(v["job"], v["view"]): v for v in listed["views"]}
    assert set(names) == {("shop", "revenue"), ("shop", "per-second")}
    assert names[("shop", "revenue")]["served_partitions"] == [0, 1, 2]
    assert names[("shop", "per-second")]["windowed"] and listed["count"] == 2


def test_errors_are_clear(running, view):
    assert view.get(f"{API}/views/shop/nope").json()["error"]["code"] == "unknown_view"
    assert view.get(f"{API}/views/nojob/revenue").status_code == 404
    bad = view.get(f"{API}/views/shop/revenue", {"key": "fr", "wait_for": "orders:x"})
    assert bad.status_code == 400 and "topic:partition:offset" in bad.json()["error"]["message"]
    bad = view.get(f"{API}/views/shop/revenue", {"limit": 0})
    assert bad.status_code == 400 and "limit" in bad.json()["error"]["message"]
    late = view.get(
        f"{API}/views/shop/revenue", {"key": "fr", "wait_for": "orders:0:99", "timeout_ms": 50}
    )
    assert late.status_code == 504 and late.json()["error"]["code"] == "view_timeout"
    assert "waiting for 99" in late.json()["error"]["message"]


def test_views_need_a_user(running, anon):
    assert anon.get(f"{API}/views").status_code == 401
    assert anon.get(f"{API}/views/shop/revenue").status_code == 401
