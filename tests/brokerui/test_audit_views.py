"""The audit log page: newest first, filtered by action prefix and user, paged, JSON compact and
escaped."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from brokerui.audit.models import AuditEntry
from brokerui.audit.services import AuditLog

HX = {"HTTP_HX_REQUEST": "true"}
record = AuditLog(None).record  # the database, which the page reads


@pytest.fixture
def entries(broker, operator, viewer):
    record(operator, "topic.create", "topic orders", after={"partitions": 3})
    record(
        operator,
        "group.reset",
        "group billing",
        before={"offsets": {"orders": {"0": 5}}},
        after={"strategy": "to earliest", "offsets": {"orders": {"0": 0}}},
    )
    record(
        viewer,
        "group.reset.refused",
        "group live",
        after={"reason": "consumer group 'live' is Stable, not Empty"},
    )
    record(operator, "group.delete", "group old", before={"offsets": {}})


def actions(html: str) -> list[str]:
    return re.findall(r'<tr data-action="([^"]+)"', html)


def test_newest_first_with_who_what_target_before_and_after(viewer_client, entries):
    response = viewer_client.get(reverse("console:audit"))
    assert response.status_code == 200
    html = response.content.decode()
    assert actions(html) == ["group.delete", "group.reset.refused", "group.reset", "topic.create"]
    row = re.search(r'<tr data-action="group.reset" .*?</tr>', html, re.S).group(0)
    assert "olivia" in row and "ago</time>" in row
    assert f'href="{reverse("console:group", args=["billing"])}"' in row  # the target links
    # compact, one-line JSON (escaped quotes)
    assert "{&quot;offsets&quot;: {&quot;orders&quot;: {&quot;0&quot;: 5}}}" in row
    refused = re.search(r'<tr data-action="group.reset.refused"[^>]*>', html).group(0)
    assert "audit-refused" in refused


def test_filter_by_action_prefix_and_user(viewer_client, entries):
    url = reverse("console:audit")
    assert actions(viewer_client.get(url, {"action": "group.reset"}).content.decode()) == [
        "group.reset.refused",
        "group.reset",
    ]
    assert actions(viewer_client.get(url, {"action": "topic."}).content.decode()) == [
        "topic.create"
    ]
    assert actions(viewer_client.get(url, {"user": "victor"}).content.decode()) == [
        "group.reset.refused"
    ]
    html = viewer_client.get(url, {"action": "group.", "user": "olivia"}).content.decode()
    assert actions(html) == ["group.delete", "group.reset"]
    assert '<option value="group."></option>' in html  # prefixes offered
    assert '<option value="victor" >victor</option>' in html or 'value="victor"' in html
    html = viewer_client.get(url, {"action": "nothing"}).content.decode()
    assert "No entries match" in html


def test_filter_by_htmx_returns_the_table_only(viewer_client, entries):
    html = viewer_client.get(reverse("console:audit"), {"action": "topic"}, **HX).content.decode()
    assert html.lstrip().startswith('<div id="audit-table">') and "<html" not in html
    assert actions(html) == ["topic.create"]


def test_paging_keeps_the_filters(viewer_client, broker, operator):
    for i in range(60):
        record(operator, "topic.create", f"topic t{i}")
    record(operator, "group.delete", "group g")
    url = reverse("console:audit")
    html = viewer_client.get(url, {"action": "topic."}).content.decode()
    assert len(actions(html)) == 50 and "Page 1 of 2" in html
    assert "?action=topic.&amp;page=2" in html
    html = viewer_client.get(url, {"action": "topic.", "page": "2"}).content.decode()
    assert len(actions(html)) == 10 and "t0" in html
    assert viewer_client.get(url, {"page": "junk"}).status_code == 200


def test_untrusted_values_are_escaped_and_long_json_folds(viewer_client, broker, operator):
    record(
        operator,
        "topic.create",
        "topic <script>alert(1)</script>",
        before={"<img src=x onerror=alert(1)>": "</td><script>x</script>"},
        after={"configs": {f"key.{i}": "v" * 20 for i in range(20)}},
    )
    html = viewer_client.get(reverse("console:audit")).content.decode()
    assert "<script>alert(1)</script>" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    row = re.search(r'<tr data-action="topic.create".*?</tr>', html, re.S).group(0)
    assert "<details>" in row and "…</code></summary>" in row


def test_anonymous_is_sent_to_log_in(client, db):
    response = client.get(reverse("console:audit"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_empty_log_says_so(viewer_client, db):
    assert (
        "Nothing has been changed yet"
        in viewer_client.get(reverse("console:audit")).content.decode()
    )
    assert not AuditEntry.objects.exists()
