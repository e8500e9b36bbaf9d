"""Users' metric panels over HTTP: create with per-field errors (htmx), per-user visibility,
edit, delete, audit, jobs re-ensured; and the live chart sections of the overview, topic and
group pages (with and without a metrics hub)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from brokerui.audit.models import AuditEntry
from brokerui.console.live import feeds, services
from brokerui.console.live.models import MetricPanel

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
FORM = {
    "name": "Order totals",
    "topic": "orders",
    "aggregation": "p95",
    "value_field": "total",
    "group_by": "",
    "window": "tumbling",
    "size_s": "10",
    "step_s": "",
    "gap_s": "",
    "time_field": "at",
    "lateness_s": "5",
    "out_of_orderness_s": "2",
}


@pytest.fixture
def orders(broker):
    broker.store.create_topic("orders", 2)
    broker.store.append("orders", b'{"total": 12.5, "at": 1}', partition=0)
    return broker


def create(client, **changes):
    return client.post(reverse("console:panels"), {**FORM, **changes}, **HTMX)


def test_a_viewer_creates_a_panel_which_starts_its_job_and_is_audited(
    orders, viewer_client, viewer
):
    response = create(viewer_client)
    panel = MetricPanel.objects.get(user=viewer)
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("console:panel", args=[panel.pk])
    assert panel.spec["size_ms"] == 10_000 and panel.spec["lateness_ms"] == 5_000
    assert panel.spec["out_of_orderness_ms"] == 2_000 and panel.spec["time_field"] == "at"
    assert panel.panel_id in orders.panels.panel_ids()
    entry = AuditEntry.objects.get(action="panel.create")
    assert entry.username == viewer.username and entry.after["value_field"] == "total"


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"value_field": ""}, "value_field", "needs a field"),
        ({"window": "hopping", "step_s": ""}, "step_s", "needs a step"),
        ({"window": "session"}, "gap_s", "needs a gap"),
        ({"size_s": "0.01"}, "size_s", "between"),
        ({"value_field": "a..b"}, "value_field", "dotted JSON path"),
        ({"topic": "nope"}, "topic", "Select a valid choice"),
    ],
)
def test_invalid_panels_come_back_with_the_error_next_to_the_field(
    orders, viewer_client, changes, field, words
):
    response = create(viewer_client, **changes)
    assert response.status_code == 200  # htmx swaps only successful responses
    html = response.content.decode()
    assert 'id="panel-form"' in html and "<html" not in html  # only the form, for htmx
    message = html.split(f'id="{field}-msg"', 1)[1].split("</small>", 1)[0]
    assert "field-error" in html and words in message
    assert not MetricPanel.objects.exists()


def test_a_plain_post_with_errors_gets_the_whole_page_with_422(orders, viewer_client):
    response = viewer_client.post(reverse("console:panels"), {**FORM, "value_field": ""})
    assert response.status_code == 422
    assert "<html" in response.content.decode() and "needs a field" in response.content.decode()


def test_users_see_and_change_only_their_own_panels(orders, client, viewer, operator):
    client.force_login(viewer)
    create(client)
    panel = MetricPanel.objects.get()
    client.force_login(operator)
    listing = client.get(reverse("console:panels")).content.decode()
    assert f'data-panel="{panel.pk}"' not in listing and "No panels yet" in listing
    for name in ("console:panel", "console:panel_edit"):
        assert client.get(reverse(name, args=[panel.pk])).status_code == 404
    assert client.post(reverse("console:panel_delete", args=[panel.pk])).status_code == 404
    assert MetricPanel.objects.filter(pk=panel.pk).exists()


def test_edit_restarts_the_job_and_delete_removes_it(orders, viewer_client):
    create(viewer_client)
    panel = MetricPanel.objects.get()
    edit = reverse("console:panel_edit", args=[panel.pk])
    assert 'value="Order totals"' in viewer_client.get(edit).content.decode()
    viewer_client.post(edit, {**FORM, "aggregation": "count", "value_field": ""}, **HTMX)
    panel.refresh_from_db()
    assert panel.spec["aggregation"] == "count"
    assert AuditEntry.objects.filter(action="panel.update").exists()

    response = viewer_client.post(reverse("console:panel_delete", args=[panel.pk]), **HTMX)
    assert response["HX-Redirect"] == reverse("console:panels")
    assert not MetricPanel.objects.exists()
    assert panel.panel_id not in orders.panels.panel_ids()
    assert AuditEntry.objects.get(action="panel.delete").before["aggregation"] == "count"


def test_panel_jobs_are_re_ensured_on_the_page_and_at_start_up(orders, viewer_client):
    create(viewer_client)
    panel = MetricPanel.objects.get()
    orders.panels.remove(panel.panel_id)  # as after a restart: jobs live in memory
    page = viewer_client.get(reverse("console:panel", args=[panel.pk]))
    assert (
        page.status_code == 200
        and f'data-live-socket="/ws/panels/{panel.pk}/"' in page.content.decode()
    )
    assert panel.panel_id in orders.panels.panel_ids()

    orders.panels.remove(panel.panel_id)
    assert services.ensure_saved_panels() == 1
    assert panel.panel_id in orders.panels.panel_ids()


@pytest.mark.parametrize("url", ["/", "/topics/orders/", "/groups/billing/"])
def test_pages_embed_live_charts_and_say_when_there_is_no_data(orders, viewer_client, url):
    orders.coordinator.commit_offsets("billing", {("orders", 0): 1})
    html = viewer_client.get(url).content.decode()
    assert 'data-live-socket="/ws/metrics/"' in html
    assert "data-live-empty" in html and "No metrics yet" in html
    assert "vendor/plotly-basic-4.1.1.min.js" in html


def test_pages_render_without_a_metrics_hub(orders, viewer_client, monkeypatch):
    monkeypatch.setattr(feeds, "metrics_hub", lambda: None)
    response = viewer_client.get("/topics/orders/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Live metrics are not available" in html and "plotly" not in html


def field_message(html: str, field: str) -> str:
    return html.split(f'id="{field}-msg"', 1)[1].split("</small>", 1)[0]


def test_field_paths_are_checked_against_a_sample_of_the_topic_and_the_form_keeps_its_values(
    orders, viewer_client
):
    for i in range(19):  # with the fixture's record: 20, of which 7 lack amount
        doc = {"total": i, "amount": i, "status": "paid", "at": i} if i >= 7 else {"total": i}
        orders.store.append("orders", json.dumps(doc).encode(), partition=1)
    response = create(viewer_client, value_field="amount", group_by="status", time_field="at")
    html = response.content.decode()
    assert "field-error" in html and not MetricPanel.objects.exists()
    assert "field &#x27;amount&#x27; missing in 8 of 20 sampled records" in field_message(
        html, "value_field"
    )
    assert "missing in 8 of 20" in field_message(html, "group_by")
    assert "missing in 7 of 20" in field_message(html, "time_field")  # the fixture's has "at"
    # nothing typed is lost
    for name, value in [("name", "Order totals"), ("value_field", "amount"), ("size_s", "10")]:
        assert f'name="{name}" value="{value}"' in html.replace(' maxlength="200"', "")
    assert 'name="accept_partial"' in html  # every field fits some records: may save anyway
    assert not AuditEntry.objects.filter(action="panel.create").exists()

    create(viewer_client, value_field="amount", group_by="status", time_field="at",
           accept_partial="on")  # fmt: skip
    assert MetricPanel.objects.get().spec["value_field"] == "amount"


def test_a_field_no_sampled_record_has_cannot_be_saved_even_anyway(orders, viewer_client):
    orders.store.append("orders", b'{"total": "n/a", "at": 2}', partition=1)
    response = create(viewer_client, value_field="totl", accept_partial="on")
    html = response.content.decode()
    assert "field &#x27;totl&#x27; missing in 2 of 2 sampled records" in html
    assert "fields there: at, total" in field_message(html, "value_field")
    assert 'name="accept_partial"' not in html
    response = create(viewer_client)  # total: a number in one record of two, no override
    assert "&#x27;total&#x27; is not a number in 1 of 2 sampled records (e.g. &quot;n/a&quot;)" in (
        field_message(response.content.decode(), "value_field")
    )
    assert not MetricPanel.objects.exists()


def test_a_panel_over_an_empty_topic_is_saved_unchecked(orders, viewer_client):
    orders.store.create_topic("empty", 1)
    response = create(viewer_client, topic="empty", value_field="anything")
    assert response["HX-Redirect"] == reverse("console:panel", args=[MetricPanel.objects.get().pk])


def test_editing_checks_the_fields_too(orders, viewer_client):
    create(viewer_client)
    panel = MetricPanel.objects.get()
    edit = reverse("console:panel_edit", args=[panel.pk])
    response = viewer_client.post(edit, {**FORM, "value_field": "nope"}, **HTMX)
    assert "missing in 1 of 1 sampled records" in field_message(
        response.content.decode(), "value_field"
    )
    panel.refresh_from_db()
    assert panel.spec["value_field"] == "total"
