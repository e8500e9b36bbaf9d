"""The panel WebSocket (/ws/panels/<id>/): only the panel's owner may connect; a snapshot on
subscribe, then the job's updates as windows change; pause stops them, resume sends a fresh
snapshot."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from brokerui.audit.services import process_sink
from brokerui.console.live import services
from brokerui.console.live.consumers import REFUSED
from streams.processing.panels import PanelSpec

pytestmark = pytest.mark.django_db


@pytest.fixture
def panel(broker, viewer):
    broker.store.create_topic("orders", 1)
    broker.store.append("orders", b'{"total": 3}')
    spec = PanelSpec(
        topic="orders",
        aggregation="sum",
        value_field="total",
        window="tumbling",
        size_ms=24 * 3600_000,
    )  # one window for the whole test
    return services.panel_create(user=viewer, name="Revenue", spec=spec, sink=process_sink())


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


def test_corrections_and_late_records_reach_the_socket(
    broker, connect, login, viewer, clock, monkeypatch
):
    """Real `PanelJobs` on the hand clock, polled by the test: a record late but within the
    allowed lateness re-emits its window as a correction (revision > 0), one after the window
    closed is counted late, and the socket's updates carry both."""
    from brokerui.console.live import feeds
    from streams.processing.panels import PanelJobs

    jobs = PanelJobs(broker.store, clock=clock)  # not started: the test polls
    monkeypatch.setattr(feeds, "panel_jobs", lambda: jobs)
    t0 = clock.now // 10_000 * 10_000 - 60_000  # windows of 10 s start at t0

    def put(offset_ms: int, total: int) -> None:
        value = b'{"total": %d, "ts": %d}' % (total, t0 + offset_ms)
        broker.store.append("late", value, timestamp_ms=t0 + offset_ms)

    broker.store.create_topic("late", 1)
    put(1000, 1)
    put(12_000, 2)  # the watermark passes t0 + 10 s: [t0, t0 + 10 s) fires
    spec = PanelSpec(
        topic="late",
        aggregation="sum",
        value_field="total",
        window="tumbling",
        size_ms=10_000,
        time_field="ts",
        lateness_ms=5000,
    )
    panel = services.panel_create(user=viewer, name="Late", spec=spec, sink=process_sink())
    headers = login(viewer)

    def first_window(update: dict) -> list[dict]:
        return [r for r in update["results"] if r["start"] == t0]

    async def poll(ws) -> dict:
        await asyncio.to_thread(jobs.poll_once)
        return (await receive(ws, "update"))["update"]

    async def body():
        ws = connect(f"/ws/panels/{panel.pk}/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe"})
        await receive(ws, "snapshot")
        fired = await poll(ws)
        assert [(r["values"]["sum"], r["revision"]) for r in first_window(fired)] == [(1, 0)]
        assert (fired["corrections"], fired["late_count"]) == (0, 0)

        await asyncio.to_thread(put, 2000, 4)  # late, within the 5 s of allowed lateness
        corrected = await poll(ws)
        [r] = first_window(corrected)
        assert (r["values"]["sum"], r["revision"], r["correction"]) == (5, 1, True)
        assert (corrected["corrections"], corrected["late_count"]) == (1, 0)

        await asyncio.to_thread(put, 20_000, 8)  # the watermark passes t0 + 15 s: closed
        await asyncio.to_thread(put, 3000, 16)  # too late: counted, dropped
        late = await poll(ws)
        assert (late["corrections"], late["late_count"]) == (1, 1)
        assert all(r["values"]["sum"] == 5 for r in first_window(late))
        await ws.disconnect()

    async_to_sync(body)()
