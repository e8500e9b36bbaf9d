"""The message browser's expression filter (CEL): matches, the error caret, honest progress."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

from brokerui.console.messages import views

T0 = 1_767_225_600_000  # 2026-01-01 00:00:00 UTC


@pytest.fixture
def orders(broker):
    """`orders`: 2 partitions, 60 records; value {"amount": i, "name": ...}."""
    broker.store.create_topic("orders", partitions=2)
    for i in range(60):
        name = "Zoë Ann" if i % 7 == 0 else "bob"
        broker.store.append(
            "orders",
            json.dumps({"amount": i, "name": name}).encode(),
            key=f"o{i}".encode(),
            headers=[("region", b"EU" if i % 2 else b"US")],
            partition=i % 2,
            timestamp_ms=T0 + i * 1000,
        )
    return "orders"


def _get(client, **params):
    return client.get(reverse("console:messages", args=["orders"]), params)


def _keys(response) -> list[str]:
    text = response.content.decode()
    return [html.unescape(k) for k in re.findall(r'<td class="key"><code>([^<]*)</code>', text)]


def test_an_expression_selects_records_by_json_field_header_and_case(viewer_client, orders):
    response = _get(viewer_client, seek="oldest", q='value.amount > 50 && headers.region == "EU"')
    assert response.status_code == 200
    assert _keys(response) == ["o51", "o53", "o55", "o57", "o59"]

    response = _get(viewer_client, seek="oldest", q='value.name.lowerAscii().contains("ann")')
    assert _keys(response) == [f"o{i}" for i in range(0, 60, 7)]
    body = response.content.decode()
    assert "Scanned <strong>60</strong> of 60 records in range" in body
    assert "complete: it reached the newest record" in body


def test_a_syntax_error_is_shown_under_the_character_it_concerns(viewer_client, orders):
    response = _get(viewer_client, seek="oldest", q="value.amount >> 3")
    assert response.status_code == 400
    body = response.content.decode()
    err = re.search(
        r'data-expression-error data-column="(\d+)"><pre class="mono"><code>(.*)\n'
        r'<span class="caret" aria-hidden="true">( *)\^</span>',
        body,
    )
    assert err, body
    assert err[1] == "15" and html.unescape(err[2]) == "value.amount >> 3"
    assert len(err[3]) == 14  # the caret sits under the second ">"
    assert "line 1, column 15" in body
    assert _keys(response) == []
    assert "Scanned" not in body  # nothing pretends a scan happened


def test_an_unknown_variable_and_an_unknown_function_are_pointed_at(viewer_client, orders):
    body = _get(viewer_client, q="amount > 3").content.decode()
    assert "Unknown variable “amount”" in body and 'data-column="1"' in body
    response = _get(viewer_client, seek="oldest", q='key.startsWith("o") && lower(key)')
    assert response.status_code == 400
    assert 'data-column="24"' in response.content.decode()


def test_records_without_the_field_are_counted_not_hidden(viewer_client, broker, orders):
    broker.store.append("orders", b"not json", key=b"plain", partition=0, timestamp_ms=T0 + 99)
    body = _get(viewer_client, seek="oldest", q="value.amount == 1").content.decode()
    assert 'data-eval-errors="1"' in body
    assert "could not be evaluated on 1 record" in body


def test_a_stopped_scan_with_no_match_says_so_rather_than_no_matches(
    viewer_client, orders, monkeypatch
):
    monkeypatch.setattr(views, "SCAN_RECORDS", 1)
    monkeypatch.setattr(views, "MIN_SCAN_PER_PARTITION", 1)
    response = _get(viewer_client, seek="oldest", q='key == "o59"')
    body = response.content.decode()
    assert _keys(response) == []
    assert re.search(r"Scanned <strong>\d+</strong> of 60 records in range", body)
    assert "stopped because it hit the scan limit of 2 records" in body  # 1 per partition
    assert "the scan stopped before the end; continue scanning to look further" in body
    assert 'data-scan-state="stopped"' in body and "Continue scanning" in body
