"""The panel WebSocket (/ws/panels/<id>/): only the panel's owner may connect; a snapshot on
subscribe, then the job's updates as windows change; pause stops them, resume sends a fresh
snapshot."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from brokerui.console.live import services
from brokerui.console.live.consumers import REFUSED
from streams.processing.panels import PanelSpec

pytestmark = pytest.mark.django_db


@pytest.fixture
def panel(broker, viewer):
    broker.store.create_topic("orders", 1)
    broker.store.append("orders", b'{"total": 3}')
    spec = PanelSpec(topic="orders", aggregation="sum", value_field="total", window="tumbling",
                     size_ms=24 * 3600_000)  # one window for the whole test
    return services.panel_create(user=viewer, name="Revenue", spec=spec)


async def receive(ws, kind: str) -> dict:
    for _ in range(20):
        message = await ws.receive_json_from(timeout=10)
        if message["type"] == kind:
            return message
    raise AssertionError(f"no {kind!r} message")


def total(update: dict) -> float:
    return sum(r["values"]["sum"] for r in update["results"])


def test_only_the_owner_may_open_a_panel_socket(panel, connect, login, operator):
    strangers = [login(), login(operator)]

    async def body():
        for headers in strangers:
            ws = connect(f"/ws/panels/{panel.pk}/", headers)
            connected, code = await ws.connect()
            assert not connected and code == REFUSED
            await ws.disconnect()

    async_to_sync(body)()


def test_snapshot_then_updates_then_pause_and_resume(broker, panel, connect, login, viewer):
    headers = login(viewer)

    async def body():
        ws = connect(f"/ws/panels/{panel.pk}/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe"})
        snapshot = (await receive(ws, "snapshot"))["update"]
        assert snapshot["panel_id"] == panel.panel_id
        while total(snapshot) < 3:  # the job may not have read the first record yet
            snapshot = (await receive(ws, "update"))["update"]

        await asyncio.to_thread(broker.store.append, "orders", b'{"total": 4}')
        update = (await receive(ws, "update"))["update"]
        assert total(update) == 7 and update["records_read"] == 2

        await ws.send_json_to({"type": "pause"})
        await receive(ws, "paused")
        await asyncio.to_thread(broker.store.append, "orders", b'{"total": 10}')
        await asyncio.sleep(0.6)  # three polls of the job
        assert await ws.receive_nothing(timeout=0.2)
        await ws.send_json_to({"type": "resume"})
        await receive(ws, "resumed")
        fresh = (await receive(ws, "snapshot"))["update"]
        while total(fresh) < 17:  # the snapshot came before the job's next poll
            fresh = (await receive(ws, "update"))["update"]
        assert total(fresh) == 17
        await ws.disconnect()

    async_to_sync(body)()
