"""Re-send in Debian's Chromium against a real server: a record with a binary header value
(bytes 00 ff fe), a header name holding a colon and a multi-line JSON value is copied byte for
byte by clicking Re-send and Produce, as a person would (the browser sends the form's line
breaks as CRLF). Screenshot: tests/browser/screenshots/resend-form.png."""

from __future__ import annotations

import base64
import json

import pytest

from tests.browser.conftest import SCREENSHOTS

pytestmark = pytest.mark.browser


def _api(page, base: str, method: str, path: str, body=None):
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.fetch(
        base + "/api/v1" + path,
        method=method,
        data=None if body is None else json.dumps(body),
        headers={"Content-Type": "application/json", "X-CSRFToken": csrf, "Referer": base + "/"},
    )
    assert response.ok, response.text()
    return response.json()


def test_resend_copies_binary_headers_exactly(operator_login, browser):
    base, user, password = operator_login
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(base + "/")

    _api(page, base, "POST", "/topics", {"name": "resend", "partitions": 1})
    value = b'{\n  "order": "o-1",\n  "note": "tab\there"\n}'
    headers = [
        {"key": "bin", "value": {"base64": base64.b64encode(b"\x00\xff\xfe").decode()}},
        {"key": "a:b", "value": " padded "},
        {"key": "trace-id", "value": "4bf92f35"},
    ]
    _api(
        page,
        base,
        "POST",
        "/topics/resend/records",
        {"key": "k-1", "value": {"base64": base64.b64encode(value).decode()}, "headers": headers},
    )

    page.goto(base + "/topics/resend/messages/0/0/")
    page.click("text=Re-send")
    page.wait_for_selector("form.produce-form")
    assert "bin:: AP/+" in page.input_value("textarea[name=headers]")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "resend-form.png"), full_page=True)
    page.click("form.produce-form button[type=submit]")
    assert "Wrote 1 message to" in page.locator(".produce-results h2").inner_text()

    records = _api(page, base, "GET", "/topics/resend/records?partition=0")["records"]
    assert len(records) == 2
    original, copy = records

    def exact(r):
        return (
            r["key"]["base64"],
            r["value"]["base64"],
            [(h["key"], h["value"]["base64"]) for h in r["headers"]],
        )

    assert exact(copy) == exact(original)
    assert base64.b64decode(copy["headers"][0]["value"]["base64"]) == b"\x00\xff\xfe"
    assert base64.b64decode(copy["value"]["base64"]) == value
