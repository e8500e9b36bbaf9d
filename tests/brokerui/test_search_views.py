"""Saved searches through the console: the query checked as it is typed (htmx partial: how it
is read, or the error with its position), saved by an operator (a record in saved-searches,
audited), its matches on its page, deleted after a confirmation page (a tombstone, audited);
viewers read only."""

from __future__ import annotations

import json
import time

import pytest
from django.urls import reverse

from brokerui.audit.models import AuditEntry
from brokerui.console.search.services import close_saved_searches

QUERY = 'status:error AND service:"checkout api" AND latency_ms:[500 TO *] NOT env:dev'


@pytest.fixture
def searches_broker(broker):
    broker.store.create_topic("logs", 2)
    yield broker
    close_saved_searches()


def test_the_check_says_how_a_query_is_read_or_where_it_is_wrong(operator_client, searches_broker):
    url = reverse("console:search_validate")
    ok = operator_client.post(url, {"query": QUERY}).content.decode()
    assert 'data-check="ok"' in ok
    assert "(status:error AND service:&quot;checkout api&quot; AND latency_ms:[500 TO *])" in ok
    assert "Indexed on" in ok and "status:error" in ok
    everything = operator_client.post(url, {"query": "NOT env:dev"}).content.decode()
    assert "checked against every event" in everything
    bad = operator_client.post(url, {"query": "status:error AND (env:dev"}).content.decode()
    assert 'data-check="error"' in bad and "ends too early" in bad and "at the end" in bad
    bad = operator_client.post(url, {"query": "status:err* OR x"}).content.decode()
    assert 'data-position="7"' in bad and "wildcards are not supported" in bad


def test_an_operator_saves_a_search_and_sees_its_matches(operator_client, searches_broker):
    form = {"name": "Checkout errors", "topic": "logs", "query": QUERY}
    response = operator_client.post(reverse("console:searches"), form)
    assert response.status_code == 302
    qid = response.url.rstrip("/").rsplit("/", 1)[-1]
    assert qid.startswith("checkout-errors-")
    entry = AuditEntry.objects.get(action="saved_search.create")
    assert entry.target == f"saved search Checkout errors ({qid})"
    assert entry.after["query"] == QUERY and entry.after["topic"] == "logs"
    store = searches_broker.store
    [record] = store.read("saved-searches", 0, 0)
    assert record.key == qid.encode() and json.loads(record.value)["query"] == QUERY

    hit = {"status": "error", "service": "Checkout API", "latency_ms": 900, "env": "prod"}
    miss = {**hit, "env": "dev"}
    for i, e in enumerate([hit, miss, hit]):
        store.append("logs", json.dumps(e).encode(), f"k{i}".encode())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        page = operator_client.get(reverse("console:search", args=[qid])).content.decode()
        if page.count('data-offset="') == 2:
            break
        time.sleep(0.2)
    assert page.count('data-offset="') == 2, page
    assert "k0" in page and "k2" in page and "k1" not in page
    listing = operator_client.get(reverse("console:searches")).content.decode()
    assert f'data-search="{qid}"' in listing


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"query": "status:(error"}, "ends too early"),
        ({"query": "a~2"}, "fuzzy terms"),
        ({"topic": "nope"}, "topic &#x27;nope&#x27; does not exist"),
        ({"name": " "}, "This field is required"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_saved(operator_client, searches_broker, change, says):
    form = {"name": "x", "topic": "logs", "query": "status:error", **change}
    response = operator_client.post(reverse("console:searches"), form)
    assert response.status_code == 200
    assert says in response.content.decode()
    assert "saved-searches" not in searches_broker.store.list_topics() or not (
        searches_broker.store.read("saved-searches", 0, 0)
    )
    assert not AuditEntry.objects.filter(action="saved_search.create").exists()


def test_delete_asks_first_then_writes_a_tombstone_and_is_audited(operator_client, searches_broker):
    form = {"name": "Slow", "topic": "logs", "query": "latency_ms:>=500"}
    qid = operator_client.post(reverse("console:searches"), form).url.rstrip("/").rsplit("/")[-1]
    confirm = operator_client.get(reverse("console:search_delete", args=[qid])).content.decode()
    assert "Delete saved search" in confirm and "latency_ms:&gt;=500" in confirm
    assert searches_broker.store.read("saved-searches", 0, 0)[-1].value is not None  # not yet
    response = operator_client.post(
        reverse("console:search_delete", args=[qid]), {"confirm": "yes"}
    )
    assert response.status_code == 302
    assert searches_broker.store.read("saved-searches", 0, 0)[-1].value is None
    entry = AuditEntry.objects.get(action="saved_search.delete")
    assert entry.before["query"] == "latency_ms:>=500" and entry.after is None
    assert operator_client.get(reverse("console:search", args=[qid])).status_code == 404


def test_viewers_read_but_do_not_save(viewer_client, searches_broker):
    page = viewer_client.get(reverse("console:searches"))
    assert page.status_code == 200 and 'id="search-form"' not in page.content.decode()
    form = {"name": "x", "topic": "logs", "query": "status:error"}
    response = viewer_client.post(reverse("console:searches"), form)
    assert response.status_code in (302, 403)
    assert searches_broker.store.offsets("saved-searches", 0) == (0, 0)  # nothing written
