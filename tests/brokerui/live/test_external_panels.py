"""Metric panels on an external cluster (TIDELOG_CLUSTER=kafka://...): Tidelog's listener runs in
another process, the console creates a panel over one of its topics, the panel's job reads the
cluster through KafkaCluster, and the panel socket sends its snapshot and updates; no local
broker is opened. The broker's own live charts stay unavailable there. On a plaintext listener
and on one requiring SASL/SCRAM over TLS (the panels' own clients take the same settings)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from brokerui.console.live.models import MetricPanel
from streams.cluster import ProduceRequest
from tests.secured_cluster import plain_or_secured

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(scope="module", params=["plaintext", "sasl_ssl"])
def server(request, tmp_path_factory):
    yield from plain_or_secured(request.param, tmp_path_factory)


def produce(cluster, topic: str, *totals: float, partition: int = 0) -> None:
    records = [ProduceRequest(json.dumps({"total": t}).encode(), partition=partition)
               for t in totals]  # fmt: skip
    cluster.produce(topic=topic, records=records)


async def receive(ws, kind: str) -> dict:
    for _ in range(30):
        message = await ws.receive_json_from(timeout=10)
        if message["type"] == kind:
            return message
    raise AssertionError(f"no {kind!r} message")


def total(update: dict) -> float:
    return sum(r["values"]["sum"] for r in update["results"])


def test_a_panel_runs_over_the_external_cluster(external, client, viewer, login, connect):
    topic = f"orders-{time.time_ns() % 10**9}"
    external.create_topic(name=topic, partitions=2)
    produce(external, topic, 3, 4, partition=0)
    produce(external, topic, 5, partition=1)
    headers = login(viewer)  # also logs `client` in

    form = {"name": "Revenue", "topic": topic, "aggregation": "sum", "value_field": "total",
            "group_by": "", "window": "tumbling", "size_s": "86400", "step_s": "", "gap_s": "",
            "time_field": "", "lateness_s": "0", "out_of_orderness_s": "0"}  # fmt: skip
    response = client.post(reverse("console:panels"), form, **HTMX)
    panel = MetricPanel.objects.get(user=viewer)
    assert response["HX-Redirect"] == reverse("console:panel", args=[panel.pk])
    page = client.get(reverse("console:panel", args=[panel.pk])).content.decode()
    assert f'data-live-socket="/ws/panels/{panel.pk}/"' in page
    assert "not available" not in page and "cannot run" not in page

    async def body():
        ws = connect(f"/ws/panels/{panel.pk}/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe"})
        update = (await receive(ws, "snapshot"))["update"]
        assert update["panel_id"] == panel.panel_id and update["error"] is None
        while total(update) < 12:  # the job may not have read every record yet
            update = (await receive(ws, "update"))["update"]
        assert total(update) == 12 and update["records_read"] == 3

        await asyncio.to_thread(produce, external, topic, 10, partition=1)
        update = (await receive(ws, "update"))["update"]
        while update["records_read"] < 4:
            update = (await receive(ws, "update"))["update"]
        assert total(update) == 22 and update["parse_errors"] == 0
        await ws.disconnect()

    async_to_sync(body)()


def test_broker_live_charts_stay_unavailable(external, client, viewer, login, connect):
    headers = login(viewer)

    async def body():
        ws = connect("/ws/metrics/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe", "scope": "overview"})
        assert (await receive(ws, "unavailable"))["message"]
        await ws.disconnect()

    async_to_sync(body)()


def test_a_panel_whose_topic_was_deleted_says_why(external, viewer, login, connect):
    from brokerui.audit.services import process_sink
    from brokerui.console.live import feeds, services
    from streams.processing.panels import PanelSpec

    topic = f"gone-{time.time_ns() % 10**9}"
    external.create_topic(name=topic, partitions=1)
    panel = services.panel_create(
        user=viewer,
        name="Gone",
        spec=PanelSpec(topic=topic, aggregation="count"),
        sink=process_sink(),
    )
    external.delete_topic(name=topic)
    jobs = feeds.panel_jobs()
    for _ in range(100):  # the job notices on its next poll, and stops
        if jobs.snapshot(panel.panel_id).error:
            break
        time.sleep(0.05)
    headers = login(viewer)

    async def body():
        ws = connect(f"/ws/panels/{panel.pk}/", headers)
        assert (await ws.connect())[0]
        await ws.send_json_to({"type": "subscribe"})
        message = await receive(ws, "unavailable")
        assert "cannot run" in message["message"] and topic in message["message"]
        await ws.disconnect()

    async_to_sync(body)()
