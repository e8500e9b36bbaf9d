"""The page at `/`: topics with their partitions and end offsets."""

from __future__ import annotations

import asyncio
import re

from asgiref.sync import async_to_sync
from django.urls import reverse

from brokerui.routing import build_application


def _rows(html: str, topic: str) -> dict[int, int]:
    """{partition: end offset} from the topic's table."""
    section = re.search(rf'data-topic="{re.escape(topic)}".*?</section>', html, re.S)
    assert section, f"no section for topic {topic!r}"
    rows = re.findall(r'data-partition="(\d+)" data-end-offset="(\d+)"', section.group(0))
    return {int(p): int(end) for p, end in rows}


def test_home_lists_topics_with_partitions_and_end_offsets(client, broker):
    store = broker.store
    store.create_topic("payments", partitions=3)
    store.create_topic("audit", partitions=1)
    for i in range(5):
        store.append("payments", f"p0-{i}".encode(), partition=0)
    for i in range(2):
        store.append("payments", f"p2-{i}".encode(), partition=2)

    response = client.get(reverse("console:home"))

    assert response.status_code == 200
    html = response.content.decode()
    assert _rows(html, "payments") == {0: 5, 1: 0, 2: 2}
    assert _rows(html, "audit") == {0: 0}
    assert html.index('data-topic="audit"') < html.index('data-topic="payments"')


def test_home_without_topics_says_so(client, broker):
    response = client.get("/")

    assert response.status_code == 200
    assert "No topics yet" in response.content.decode()


def test_stylesheet_is_served_by_the_asgi_app_with_debug_off(client, broker, settings):
    assert settings.DEBUG is False
    href = re.search(r'rel="stylesheet" href="([^"]+)"', client.get("/").content.decode())[1]

    status, body = async_to_sync(_asgi_get)(build_application(), href)

    assert status == 200
    assert b".topbar" in body


async def _asgi_get(app, path: str) -> tuple[int, bytes]:
    """One GET through the ASGI app, as Daphne would send it (no test-client shortcuts)."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
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
