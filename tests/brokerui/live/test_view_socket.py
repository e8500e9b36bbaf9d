"""The view WebSocket (/ws/views/): a job's table as Materialize's SUBSCRIBE gives it — a
snapshot, then (time, +/-1, key, row) changes and progress marks — with a real job running
in a thread over the test broker. Snapshot plus changes rebuild exactly the view's rows as
of each progress mark; pause stops the stream, resume sends a fresh snapshot."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from asgiref.sync import async_to_sync

from brokerui.console.live.consumers import REFUSED
from streams.jobs import JSON, Count, Job, Sum, field
from streams.jobs.runner import Runner
from streams.jobs.views import LocalViews

pytestmark = pytest.mark.django_db


def shop() -> Job:
    job = Job("shop")
    orders = job.stream("orders", value=JSON, timestamp=field("ts"))
    orders.key_by("country").aggregate(name="revenue", total=Sum("amount"), n=Count())
    return job


@pytest.fixture
def running(broker):
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


def produce(store, i: int, country: str) -> tuple[int, int]:
    value = {"country": country, "amount": i % 7 + 1, "ts": i}
    r = store.append_batch("orders", [(json.dumps(value).encode(), f"o{i}".encode(), (), i)])[0]
    return r.partition, r.offset


def apply(state: dict, changes: list) -> None:
    for _t, diff, key, row in changes:
        if diff == -1:
            assert state.pop(key) == row
        else:
            assert diff == 1 and key not in state
            state[key] = row


async def next_message(ws) -> dict:
    """The next message, acknowledged as views.js's socket does (every `ack_every`-th: a
    page that does not acknowledge is sent nothing more after MAX_IN_FLIGHT)."""
    message = await ws.receive_json_from(timeout=10)
    if message.get("seq") and message["seq"] % message["ack_every"] == 0:
        await ws.send_json_to({"type": "ack", "seq": message["seq"]})
    return message


async def until(ws, kind: str) -> dict:
    for _ in range(50):
        message = await next_message(ws)
        if message["type"] == kind:
            return message
    raise AssertionError(f"no {kind!r} message")


def test_anonymous_sockets_are_refused(running, connect, login):
    async def body():
        ws = connect("/ws/views/", login())
        connected, code = await ws.connect()
        assert not connected and code == REFUSED

    async_to_sync(body)()


def test_snapshot_changes_and_progress_rebuild_the_view(broker, running, connect, login, viewer):
    headers = login(viewer)
    countries = ["de", "fr", "it", "nl"]
    for i in range(20):
        produce(broker.store, i, countries[i % 4])

    async def body():
        ws = connect("/ws/views/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "name": "shop/revenue"})
        snap = await until(ws, "snapshot")
        state = {k: r for k, r in snap["rows"]}
        last_time = snap["time"]
        ends = {}
        for i in range(20, 60):
            p, off = await asyncio.to_thread(produce, broker.store, i, countries[i % 3])
            ends[p] = off + 1
        # read until a progress mark covers everything produced
        while True:
            message = await next_message(ws)
            if message["type"] == "changes":
                assert message["time"] > last_time
                assert all(c[0] == message["time"] for c in message["changes"])
                apply(state, message["changes"])
            elif message["type"] == "progress":
                assert message["progress"] > last_time
                last_time = message["progress"] - 1
                offsets = message["consistency"]["offsets"]["orders"]
                if all(offsets.get(str(p), 0) >= o for p, o in ends.items()):
                    # (the repartitioned copies too: ask the view, waiting for them)
                    break
        view = LocalViews(broker.store).view("shop", "revenue")
        wait = {"orders": ends}
        want = await asyncio.to_thread(view.range, wait_for=wait, timeout_s=30)
        # the stream may be a publish behind the repartitioned rows: read on to that point
        while state != dict(want.rows):
            message = await next_message(ws)
            if message["type"] == "changes":
                apply(state, message["changes"])
        assert state == dict(want.rows)
        assert sum(r["n"] for r in state.values()) == 60
        await ws.disconnect()

    async_to_sync(body)()


def test_pause_stops_the_stream_and_resume_sends_a_fresh_snapshot(
    broker, running, connect, login, viewer
):
    headers = login(viewer)
    produce(broker.store, 0, "fr")

    async def body():
        ws = connect("/ws/views/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "name": "shop/revenue"})
        await until(ws, "snapshot")
        await ws.send_json_to({"type": "pause"})
        await until(ws, "paused")
        p, off = await asyncio.to_thread(produce, broker.store, 1, "fr")
        view = LocalViews(broker.store).view("shop", "revenue")
        await asyncio.to_thread(
            view.range, wait_for={"orders": {p: off + 1}}, timeout_s=30
        )  # processed and published while paused
        assert await ws.receive_nothing(timeout=0.3)
        await ws.send_json_to({"type": "resume"})
        await until(ws, "resumed")
        snap = await until(ws, "snapshot")
        assert snap["rows"] == [["fr", {"total": 3, "n": 2}]]
        await asyncio.to_thread(running.close)  # the job stops: the stream says so
        ended = await until(ws, "unavailable")
        assert "job stopped" in ended["message"]
        await ws.disconnect()

    async_to_sync(body)()


def test_unknown_views_and_bad_names_say_so(running, connect, login, viewer):
    headers = login(viewer)

    async def body():
        ws = connect("/ws/views/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "name": "shop/nope"})
        message = await until(ws, "unavailable")
        assert "its views: revenue" in message["message"]
        await ws.send_json_to({"type": "subscribe", "name": "no-slash"})
        assert (await until(ws, "error"))["message"] == "name must be <job>/<view>"
        await ws.disconnect()

    async_to_sync(body)()


def test_a_views_rows_are_masked_as_its_input_topics_records_are(
    broker, running, connect, login, viewer, operator, client
):
    """A masking rule on the view's input topic (orders: value.total) hides that field of the
    view's rows from a user without the unmask permission — on the view page, in the JSON
    API and on the socket — while one with it (an operator given the permission) sees it."""
    from django.contrib.auth.models import Permission
    from django.urls import reverse
    from rest_framework.test import APIClient

    from brokerui.access.masking import MASKED
    from brokerui.access.models import MaskRule

    MaskRule.objects.create(topic="orders", path="value.total", action="mask")
    operator.user_permissions.add(Permission.objects.get(codename="unmask"))
    for i in range(12):
        produce(broker.store, i, ["de", "fr"][i % 2])
    view = LocalViews(broker.store).view("shop", "revenue")
    view.range(wait_for={"orders": {p: broker.store.offsets("orders", p)[1] for p in range(3)}},
               timeout_s=30)  # fmt: skip
    url = reverse("console:view", args=["shop", "revenue"])
    client.force_login(viewer)
    page = client.get(url, {"key": "de"}).content.decode()
    assert MASKED in page and "de" in page
    api = APIClient()
    api.force_authenticate(viewer)
    rows = api.get("/api/v1/views/shop/revenue", {"key": "de"}).json()["rows"]
    assert rows and rows[0]["row"]["total"] == MASKED and rows[0]["row"]["n"] == 6
    api.force_authenticate(operator)
    clear = api.get("/api/v1/views/shop/revenue", {"key": "de"}).json()["rows"]
    assert clear[0]["row"]["total"] == sum(i % 7 + 1 for i in range(0, 12, 2))
    headers = login(viewer)

    async def body():
        ws = connect("/ws/views/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "name": "shop/revenue"})
        snap = await until(ws, "snapshot")
        assert {r["total"] for _k, r in snap["rows"]} == {MASKED}
        await asyncio.to_thread(produce, broker.store, 99, "it")
        changes = await until(ws, "changes")
        assert changes["changes"] and all(r["total"] == MASKED for *_x, r in changes["changes"])
        await ws.disconnect()

    async_to_sync(body)()
