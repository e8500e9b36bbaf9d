"""The overview at `/` (totals, busiest topics, groups by lag) and the partition tables, with
their end offsets, that moved from it to the topic pages."""

from __future__ import annotations

import asyncio
import re

from asgiref.sync import async_to_sync
from django.urls import reverse

from brokerui.routing import build_application


def _rows(html: str) -> dict[int, int]:
    """{partition: end offset} from a topic page's partition table."""
    rows = re.findall(r'data-partition="(\d+)" data-end-offset="(\d+)"', html)
    return {int(p): int(end) for p, end in rows}


def _total(html: str, name: str) -> str:
    return re.search(rf'data-total="{name}"[^>]*>([^<]+)<', html).group(1)


def test_topic_pages_show_partitions_with_end_offsets(viewer_client, broker):
    client = viewer_client
    store = broker.store
    store.create_topic("payments", partitions=3)
    store.create_topic("audit", partitions=1)
    for i in range(5):
        store.append("payments", f"p0-{i}".encode(), partition=0)
    for i in range(2):
        store.append("payments", f"p2-{i}".encode(), partition=2)

    payments = client.get(reverse("console:topic", args=["payments"]))
    audit = client.get(reverse("console:topic", args=["audit"]))

    assert payments.status_code == audit.status_code == 200
    assert _rows(payments.content.decode()) == {0: 5, 1: 0, 2: 2}
    assert _rows(audit.content.decode()) == {0: 0}


def test_home_is_an_overview(viewer_client, broker):
    store = broker.store
    store.create_topic("payments", partitions=3)
    store.create_topic("audit", partitions=1)
    for i in range(1500):
        store.append("payments", f"p-{i}".encode(), partition=i % 3)
    store.append("audit", b"a")
    broker.coordinator.commit_offsets("ledger", {("payments", 0): 100})
    broker.coordinator.commit_offsets("archiver", {("audit", 0): 1})

    response = viewer_client.get("/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Overview</h1>" in html and "As of" in html
    assert _total(html, "topics") == "2"
    assert _total(html, "partitions") == "4"
    assert _total(html, "records") == "1,501"
    assert _total(html, "size").endswith("KB")
    assert _total(html, "groups") == "2"
    busiest = re.findall(r'<tr data-topic="([^"]+)"', html)
    assert busiest == ["payments", "audit"]  # both written this minute: the busier first
    groups = re.findall(r'<tr data-group="([^"]+)" data-lag="(\d+)"', html)
    assert groups == [("ledger", "400"), ("archiver", "0")]  # most lag first


def test_home_refreshes_itself_as_a_fragment(viewer_client, broker):
    broker.store.create_topic("payments", partitions=1)
    page = viewer_client.get("/").content.decode()
    assert 'hx-trigger="every 10s' in page

    fragment = viewer_client.get("/", HTTP_HX_REQUEST="true").content.decode()

    assert "<html" not in fragment and 'data-topic="payments"' in fragment


def test_home_without_topics_says_so(viewer_client, broker):
    client = viewer_client
    response = client.get("/")

    assert response.status_code == 200
    assert "No topics yet" in response.content.decode()


def test_stylesheet_is_served_by_the_asgi_app_with_debug_off(client, db, broker, settings):
    assert settings.DEBUG is False
    page = client.get(reverse("login")).content.decode()  # public: no login needed
    href = re.search(r'rel="stylesheet" href="([^"]+tidelog[^"]*\.css)"', page)[1]

    status, body = async_to_sync(_asgi_get)(build_application(), href)

    assert status == 200
    assert b".topbar" in body


async def _asgi_get(app, path: str) -> tuple[int, bytes]:
    """One GET through the ASGI app, as Daphne would send it (no test-client shortcuts)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    messages = []
    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive():
        if requests:
            return requests.pop()
        await asyncio.Event().wait()  # the client never disconnects; the app cancels this

    async def send(message):
        messages.append(message)

    await app(scope, receive, send)
    status = next(m["status"] for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return status, body


def test_expired_session_on_an_htmx_request_redirects_the_whole_page(client, broker):
    response = client.get(
        reverse("console:topics"), HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="/topics/"
    )
    assert response.status_code == 204
    assert response["HX-Redirect"].startswith(reverse("login"))
    plain = client.get(reverse("console:topics"))
    assert plain.status_code == 302 and plain["Location"].startswith(reverse("login"))
