"""The Capture pages: an operator starts a source (refusals shown, nothing started), watches its
progress, queues a snapshot and stops it behind a confirmation; every action audited; viewers
only look. Real PostgreSQL, the console broker's own Kafka listener."""

from __future__ import annotations

import pytest
from django.urls import reverse

from brokerui.audit.models import AuditEntry
from tests.capture.helpers import execute, wait_for

# The broker's Kafka listener audits the captures' CreateTopics from its own thread and database
# connection, outside a test transaction: transactional tests, whose tables are emptied after
# each, so no audit row leaks into later tests.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shop_db(pg_dsn):
    execute(
        pg_dsn,
        "CREATE TABLE items (id int PRIMARY KEY, name text)",
        "INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 30) g",
        "CREATE TABLE log_lines (at timestamptz, line text)",
    )
    return pg_dsn


def _page(client) -> str:
    return client.get(reverse("console:capture")).content.decode()


def test_an_operator_captures_snapshots_and_stops_a_database(
    operator_client, listening_broker, shop_db
):
    assert "No capture sources yet" in _page(operator_client)
    r = operator_client.post(
        reverse("console:capture_start"),
        {"name": "shop", "dsn": shop_db, "tables": "items", "snapshot": ""},
    )
    assert r.status_code == 302, r.content.decode()[:2000]
    page = _page(operator_client)
    assert 'data-source="shop"' in page and "shop.public.items" in page
    assert "tidelog_shop" in page
    start = AuditEntry.objects.get(action="capture.start")
    assert start.target == "capture shop" and start.after["tables"] == ["items"]

    r = operator_client.post(
        reverse("console:capture_snapshot", args=["shop"]), {"table": "items", "keys": ""}
    )
    assert r.status_code == 302
    wait_for(lambda: 'data-done="1"' in _page(operator_client), "the snapshot to finish")
    wait_for(lambda: "data-as-of-offset" in _page(operator_client), "its log offset")
    assert AuditEntry.objects.get(action="capture.snapshot").after == {
        "table": "public.items",
        "keys": None,
    }

    bad = operator_client.post(
        reverse("console:capture_snapshot", args=["shop"]), {"table": "items", "keys": "id=7"}
    )
    assert bad.status_code == 200 and "line 1: not JSON" in bad.content.decode()

    unconfirmed = operator_client.post(reverse("console:capture_stop", args=["shop"]), {})
    assert unconfirmed.status_code == 200 and "tick to confirm" in unconfirmed.content.decode()
    assert listening_broker.capture.status("shop").state == "running"
    r = operator_client.post(reverse("console:capture_stop", args=["shop"]), {"confirm": "1"})
    assert r.status_code == 302
    assert listening_broker.capture.status("shop").state == "stopped"
    stop = AuditEntry.objects.get(action="capture.stop")
    assert stop.before["state"] == "running" and stop.after["state"] == "stopped"


def test_a_refused_start_says_why_keeps_the_form_and_is_audited(
    operator_client, listening_broker, shop_db
):
    r = operator_client.post(
        reverse("console:capture_start"),
        {"name": "lines", "dsn": shop_db, "tables": "log_lines"},
    )
    body = r.content.decode()
    assert r.status_code == 200 and "primary key" in body
    assert 'value="log_lines"' in body  # what was typed is kept
    assert AuditEntry.objects.get(action="capture.start.failed").after["reason"]
    assert 'data-state="failed"' in _page(operator_client)

    r = operator_client.post(
        reverse("console:capture_start"), {"name": "Bad Name", "dsn": shop_db, "tables": "items"}
    )
    assert r.status_code == 200 and "lower-case" in r.content.decode()


def test_viewers_see_sources_but_cannot_act(viewer_client, listening_broker):
    assert viewer_client.get(reverse("console:capture")).status_code == 200
    assert "Capture a database" not in _page(viewer_client)
    assert viewer_client.post(reverse("console:capture_start"), {}).status_code == 403
    r = viewer_client.post(reverse("console:capture_stop", args=["x"]), {"confirm": "1"})
    assert r.status_code == 403


def test_the_api_lists_sources_with_their_progress(operator_client, listening_broker, shop_db):
    assert operator_client.get("/api/v1/capture").json()["count"] == 0
    listening_broker.capture.start("api_src", dsn=shop_db + " password=hunter2", tables=["items"])
    body = operator_client.get("/api/v1/capture").json()
    (src,) = body["sources"]
    assert src["name"] == "api_src" and src["state"] == "running"
    assert src["topics"] == ["api_src.public.items"] and src["slot"] == "tidelog_api_src"
    assert "hunter2" not in src["dsn"] and "password=***" in src["dsn"]
    assert isinstance(src["lag_bytes"], int) and src["lag_seconds"] >= 0
