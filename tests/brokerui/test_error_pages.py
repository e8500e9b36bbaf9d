"""Error pages (400, 403, 404, 500 and a failed CSRF check) in the console's layout, with the
reason and a way back; a 500's traceback in the server's log; JSON errors under /api/."""

from __future__ import annotations

import io
import logging

import pytest
from django.test import Client
from django.urls import reverse

LAYOUT = 'class="topbar'  # the console's header, from base.html
WAY_BACK = "Back to the overview"


def _page(response) -> str:
    html = response.content.decode()
    assert LAYOUT in html and WAY_BACK in html and 'href="/"' in html, html
    assert "css/tidelog.css" in html
    return html


def test_404_has_the_layout_the_path_and_links_back(viewer_client, broker):
    response = viewer_client.get("/no/such/page/")

    assert response.status_code == 404
    html = _page(response)
    assert "Page not found" in html and "/no/such/page/" in html
    assert "victor" in html  # the signed-in user's header, as on every page


def test_403_tells_the_reason(viewer_client, broker):
    response = viewer_client.get(reverse("console:topic_create"))

    assert response.status_code == 403
    html = _page(response)
    assert "This needs the operator role." in html


def test_400_explains_a_bad_host_without_echoing_settings(db):
    response = Client().get("/", HTTP_HOST="evil.example")

    assert response.status_code == 400
    html = _page(response)
    assert "does not answer to the host name" in html
    assert "ALLOWED_HOSTS" not in html


def test_csrf_failure_page(viewer, broker):
    client = Client(enforce_csrf_checks=True)
    client.force_login(viewer)

    response = client.post(reverse("logout"))

    assert response.status_code == 403
    html = _page(response)
    assert "CSRF" in html and "reload the page" in html


@pytest.fixture
def server_log():
    """What the server's log handler for `django.request` (settings.LOGGING) writes."""
    handlers = [
        h for h in logging.getLogger("django.request").handlers if type(h) is logging.StreamHandler
    ]
    assert handlers, "django.request has no handler: a 500 leaves no trace in the server log"
    stream = io.StringIO()
    old = [(h, h.setStream(stream)) for h in handlers]
    try:
        yield stream
    finally:
        for handler, previous in old:
            handler.setStream(previous)


def test_500_is_logged_with_its_traceback_and_shows_a_styled_page(
    viewer, broker, monkeypatch, server_log, settings
):
    settings.DEBUG = False

    def broken_cluster():
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr("brokerui.console.views.get_cluster", broken_cluster)
    client = Client(raise_request_exception=False)
    client.force_login(viewer)

    response = client.get("/")

    assert response.status_code == 500
    html = _page(response)
    assert "Server error" in html and "server&#x27;s log" in html
    assert "disk is on fire" not in html  # details go to the log, not to the browser
    log = server_log.getvalue()
    assert "Internal Server Error: /" in log
    assert "Traceback (most recent call last)" in log
    assert "RuntimeError: the disk is on fire" in log


def test_errors_under_the_api_stay_json(db):
    response = Client().get("/api/v1/topics", HTTP_HOST="evil.example")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "bad_request" and "host name" in error["message"]
