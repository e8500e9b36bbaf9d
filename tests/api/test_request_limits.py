"""Request bodies over Django's DATA_UPLOAD_MAX_MEMORY_SIZE: 413 with the limit, as the API's
JSON error or the console's page, whether the body declares its length or not; nothing is
written."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.core.asgi import get_asgi_application
from django.urls import reverse
from rest_framework.authtoken.models import Token

from brokerui.audit.models import AuditEntry
from tests.api.conftest import API
from tests.api.test_topics import error

RECORDS = f"{API}/topics/orders/records"
MB = 1 << 20


def test_the_limit_is_explicit_in_settings():
    from django.conf import settings

    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 16 * MB


def test_a_20_mb_body_is_413_with_the_limit(op, orders, broker):
    """The report: a 20 MB body was a 500 (RequestDataTooBig)."""
    body = json.dumps({"value": "x" * (20 * MB), "partition": 0})
    err = error(op.post(RECORDS, body, content_type="application/json"), 413)
    assert err["code"] == "request_too_large"
    assert err["limit_bytes"] == 16 * MB
    assert "16,777,216 bytes (16 MiB)" in err["message"]
    assert broker.store.offsets("orders", 0) == (0, 10)
    assert not AuditEntry.objects.exists()


def test_a_body_between_djangos_default_and_the_limit_is_accepted(op, orders, broker):
    """Over Django's default of 2.5 MB (which made a 500 too), under the explicit limit."""
    broker.store.create_topic("big", config={"max.message.bytes": str(4 * MB)})
    body = json.dumps({"value": "x" * (3 * MB)})
    response = op.post(f"{API}/topics/big/records", body, content_type="application/json")
    assert response.status_code == 201, response.content[:300]


def _asgi_post(path: str, body: bytes, headers: list[tuple[bytes, bytes]]):
    """POST through Django's ASGI handler (as Daphne calls it) in chunks, without a
    Content-Length: the body's size is only known once it is read."""
    chunks = [body[i : i + MB] for i in range(0, len(body), MB)] or [b""]
    events = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks)
    ]
    sent: list[dict] = []

    async def receive():
        if events:
            return events.pop(0)
        await asyncio.Event().wait()  # the client stays connected until the response

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    asyncio.run(get_asgi_application()(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], content


@pytest.mark.django_db(transaction=True)
def test_a_body_without_content_length_is_413_too(operator, orders, broker, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * MB
    token = Token.objects.create(user=operator).key
    status, content = _asgi_post(
        RECORDS,
        json.dumps({"value": "x" * (3 * MB), "partition": 0}).encode(),
        [(b"content-type", b"application/json"), (b"authorization", f"Token {token}".encode())],
    )
    assert status == 413, content[:300]
    err = json.loads(content)["error"]
    assert err["code"] == "request_too_large" and err["limit_bytes"] == 2 * MB
    assert broker.store.offsets("orders", 0) == (0, 10)


def test_a_console_form_over_the_limit_is_a_413_page(client, operator, orders, settings, broker):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client.force_login(operator)
    url = reverse("console:produce", args=["orders"])
    response = client.post(url, {"topic": "orders", "value": "x" * 5000, "encoding": "text"})
    assert response.status_code == 413
    page = response.content.decode()
    assert "Request too large" in page and "1,000 bytes" in page
    assert "Nothing was changed." in page and f'href="{url}"' in page
    assert 'class="topbar' in page  # the console's layout, not a bare error
    assert broker.store.offsets("orders", 0) == (0, 10)
    assert not AuditEntry.objects.exists()


def test_an_upload_is_not_counted_against_the_limit(client, operator, broker, settings):
    """Multipart file parts do not count towards DATA_UPLOAD_MAX_MEMORY_SIZE (Django's meaning
    of the setting); the reset form's own file limit applies."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    broker.store.create_topic("orders")
    broker.coordinator.commit_offsets("g", {("orders", 0): 0})
    client.force_login(operator)
    csv = b"orders,0,0\n" + b"# padding\n" * 300  # 3 KB
    response = client.post(
        reverse("console:group_reset", args=["g"]),
        {
            "action": "preview",
            "strategy": "from-file",
            "scope": "all",
            "file": SimpleUploadedFile("o.csv", csv, "text/csv"),
        },
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    assert 'class="grp-preview"' in response.content.decode()
