"""The message browser's live tail: its rows endpoint (console:messages_tail: what follows a
position, filtered, masked and shown as the page's rows; a tail far behind moved to the newest)
and its socket (/ws/tail/: one "ready" notice per question, nothing more for a page that stops
asking however much is written — the server keeps nothing for it)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from brokerui.access.masking import MASKED
from brokerui.access.models import MaskRule
from streams.cluster import tail as tails

pytestmark = pytest.mark.django_db
CARD = "4111111111111111"


@pytest.fixture
def cards(broker):
    broker.store.create_topic("cards", 2)
    for i in range(3):
        broker.store.append("cards", json.dumps({"n": i, "kind": "old"}).encode(), partition=i % 2)
    return broker


def write(broker, values):
    for i, v in enumerate(values):
        broker.store.append("cards", json.dumps(v).encode(), partition=i % 2)


def tail(client, after=None, **query):
    url = reverse("console:messages_tail", args=["cards"])
    params = {**query, **({"after": after} if after else {})}
    return client.get(url, params)


def test_the_rows_that_follow_a_position_filtered_masked_newest_first(cards, client, viewer):
    client.force_login(viewer)
    start = tail(client)
    assert start.status_code == 200 and start["X-Tail-Count"] == "0"
    assert tails.positions_of(start["X-Tail-Cursor"]) == {0: 2, 1: 1}  # from now
    write(cards, [{"n": 10, "kind": "keep", "card": CARD}, {"n": 11, "kind": "drop"},
                  {"n": 12, "kind": "keep", "card": CARD}])  # fmt: skip
    MaskRule.objects.create(topic="cards", path="value.card", action="mask")
    got = tail(client, start["X-Tail-Cursor"], seek="newest", q='value.kind == "keep"')
    html = got.content.decode()
    assert got.status_code == 200, html[:300]
    assert got["X-Tail-Count"] == "2" and got["X-Tail-Skipped"] == "0"
    offsets = re.findall(r'<tr data-partition="(\d)" data-offset="(\d+)"', html)
    assert offsets == [("0", "3"), ("0", "2")]  # n=12 then n=10: newest first
    assert CARD not in html and MASKED in html and '"drop"' not in html
    assert tails.positions_of(got["X-Tail-Cursor"]) == {0: 4, 1: 2}  # past the dropped one
    again = tail(client, got["X-Tail-Cursor"], seek="newest")
    assert again["X-Tail-Count"] == "0" and again["X-Tail-Cursor"] == got["X-Tail-Cursor"]
    bad = tail(client, "b:0=1")
    assert bad.status_code == 400 and "forward cursor" in bad.content.decode()
    leak = tail(client, got["X-Tail-Cursor"], field="value", op="contains", text="4111")
    assert leak.status_code == 400  # a filter on a masked part, refused as on the page
    assert "masked" in leak.content.decode()


def test_a_tail_far_behind_is_moved_to_the_newest(cards, client, viewer, monkeypatch):
    monkeypatch.setattr(tails, "MAX_BEHIND", 50)
    client.force_login(viewer)
    start = tail(client)["X-Tail-Cursor"]
    write(cards, [{"n": i} for i in range(1000)])
    got = tail(client, start)
    # 500 records behind in each partition: the newest page (100), 50 of each, is kept
    assert got["X-Tail-Skipped"] == "900" and got["X-Tail-Count"] == "100"
    assert "999" in got.content.decode()  # the newest, n=999, in it
    assert tail(client, got["X-Tail-Cursor"])["X-Tail-Count"] == "0"


def test_the_socket_says_ready_once_per_question_and_nothing_to_a_page_that_stopped(
    cards, connect, login, viewer
):
    headers = login(viewer)

    async def body():
        ws = connect("/ws/tail/", headers)
        assert (await ws.connect())[0]
        cursor = await asyncio.to_thread(tails.start_cursor, _cluster(), "cards")
        await ws.send_json_to({"type": "subscribe", "topic": "cards", "after": cursor})
        assert await ws.receive_nothing(0.3)  # nothing written yet
        await asyncio.to_thread(write, cards, [{"n": 1}])
        ready = await ws.receive_json_from(timeout=5)
        assert ready == {"type": "ready", "after": cursor}
        # the page stops asking: a thousand records later it has been sent nothing more
        await asyncio.to_thread(write, cards, [{"n": i} for i in range(1000)])
        assert await ws.receive_nothing(0.5)
        await ws.send_json_to({"type": "subscribe", "topic": "cards", "after": cursor})
        assert (await ws.receive_json_from(timeout=5))["type"] == "ready"  # asked: told
        await ws.send_json_to({"type": "subscribe", "topic": "nope", "after": cursor})
        assert (await ws.receive_json_from(timeout=5))["type"] == "unavailable"
        await ws.send_json_to({"type": "pause"})
        assert (await ws.receive_json_from(timeout=5))["type"] == "paused"
        await ws.disconnect()

    async_to_sync(body)()


def _cluster():
    from brokerui.cluster import get_cluster

    return get_cluster()
