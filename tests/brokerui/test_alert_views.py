"""Alert rules through the console: create, edit and delete (after a confirmation page) for
operators, each audited with the webhook's secret path left out; clear errors; viewers read
only; and a rule evaluated by the running broker's own background task, delivered to a real
HTTP receiver (failing once first), shown firing on the overview."""

from __future__ import annotations

import re
import time

import pytest
from django.urls import reverse

from brokerui.audit.models import AuditEntry
from tests.alerts.receiver import receiver

SLACK = "https://hooks.slack.example/services/T000/B000/secret-token"


def _form(**kw) -> dict:
    data = {
        "name": "billing stuck",
        "scope": "group",
        "target": "billing",
        "condition": "status",
        "threshold": "stall",
        "for_min": "5",
        "webhook_url": SLACK,
        "webhook_format": "slack",
        "enabled": "on",
    }
    data.update(kw)
    return data


def test_an_operator_creates_a_rule_and_it_is_audited(operator_client, broker):
    quiet = operator_client.get(reverse("console:home")).content.decode()
    assert "No alert rules yet" in quiet  # not a bare "alerts" link
    response = operator_client.post(reverse("console:alert_create"), _form())
    assert response.status_code == 302 and response.url == reverse("console:alerts")
    [rule] = broker.alerts.rules.list()
    assert (rule.threshold, rule.for_s, rule.webhook_format) == ("STALL", 300, "slack")
    entry = AuditEntry.objects.get(action="alert_rule.create")
    assert entry.target == f"alert rule billing stuck ({rule.id})"
    assert entry.after["webhook_url"] == "https://hooks.slack.example/…"
    assert "secret-token" not in str(entry.after)
    page = operator_client.get(reverse("console:alerts")).content.decode()
    assert "group billing: status STALL or worse for 5 min" in page
    assert "secret-token" not in page
    assert (
        "No alert firing (1 rule)" in operator_client.get(reverse("console:home")).content.decode()
    )


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"threshold": "fine"}, "threshold", "the status must be one of WARN"),
        ({"condition": "lag", "threshold": "lots"}, "threshold", "whole number of records"),
        ({"condition": "no_input"}, "condition", "choose the topic scope"),
        ({"webhook_url": "ftp://x/y"}, "webhook_url", "http:// or https://"),
        ({"for_min": "-1"}, "for_min", "greater than or equal to 0"),
    ],
)
def test_bad_input_is_refused_next_to_its_field(operator_client, broker, change, field, says):
    response = operator_client.post(reverse("console:alert_create"), _form(**change))
    assert response.status_code == 200
    msg = re.search(rf'id="{field}-msg"[^>]*>(.*?)</small>', response.content.decode(), re.S)
    assert says in msg.group(1)
    assert broker.alerts.rules.list() == []  # nothing kept
    assert 'value="billing stuck"' in response.content.decode()  # nothing typed is lost


def test_edit_is_audited_with_before_and_after(operator_client, broker):
    operator_client.post(reverse("console:alert_create"), _form())
    [rule] = broker.alerts.rules.list()
    page = operator_client.get(reverse("console:alert_edit", args=[rule.id]))
    assert 'value="billing stuck"' in page.content.decode()
    response = operator_client.post(
        reverse("console:alert_edit", args=[rule.id]),
        _form(condition="lag", threshold="1000", for_min="0.5"),
    )
    assert response.status_code == 302
    [rule] = broker.alerts.rules.list()
    assert (rule.condition, rule.threshold, rule.for_s) == ("lag", "1000", 30)
    entry = AuditEntry.objects.get(action="alert_rule.update")
    assert entry.before["condition"] == "status" and entry.after["condition"] == "lag"


def test_delete_asks_first_then_deletes_and_audits(operator_client, broker):
    operator_client.post(reverse("console:alert_create"), _form())
    [rule] = broker.alerts.rules.list()
    url = reverse("console:alert_delete", args=[rule.id])
    confirm = operator_client.get(url)
    assert confirm.status_code == 200 and "Delete alert rule “billing stuck”" in confirm.text
    assert broker.alerts.rules.list() == [rule]  # asking deletes nothing
    operator_client.post(url, {})  # without the confirmation: still nothing
    assert broker.alerts.rules.list() == [rule]
    response = operator_client.post(url, {"confirm": "yes"})
    assert response.status_code == 302 and broker.alerts.rules.list() == []
    entry = AuditEntry.objects.get(action="alert_rule.delete")
    assert entry.before["name"] == "billing stuck" and entry.after is None
    assert operator_client.get(url).status_code == 404


def test_a_viewer_reads_but_cannot_change_rules(viewer_client, broker):
    assert viewer_client.get(reverse("console:alerts")).status_code == 200
    assert viewer_client.get(reverse("console:alert_create")).status_code == 403
    assert viewer_client.post(reverse("console:alert_create"), _form()).status_code == 403
    assert broker.alerts.rules.list() == []


def _wait(predicate, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_the_running_broker_fires_a_rule_to_a_webhook_failing_once(operator_client, broker):
    broker.store.create_topic("orders", 1)
    broker.store.append_batch("orders", [(b"v",)] * 50, partition=0)
    broker.coordinator.commit_offsets("billing", {("orders", 0): 10})
    with receiver(fail_first=1) as hook:
        operator_client.post(
            reverse("console:alert_create"),
            _form(
                name="billing behind",
                condition="lag",
                threshold="20",
                for_min="0",
                webhook_url=hook.url,
                webhook_format="json",
            ),
        )
        body = hook.next(timeout=60)  # sent by the broker's own health thread, retried once
        assert body["state"] == "firing" and body["value"] == "lag of billing: 40 records"
        assert hook.requests == 2
        page = _wait(
            lambda: (
                (t := operator_client.get(reverse("console:alerts")).text)
                and "delivered after 2 attempts" in t
                and t
            )
        )
        assert "FIRING" in page
        overview = operator_client.get(reverse("console:home")).content.decode()
        assert 'id="alerts-firing"' in overview and "billing behind" in overview
