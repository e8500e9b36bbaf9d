"""The login throttle (django-axes): per user name and per address, failures logged in one line
and audited, a clear lockout page; the API takes no password, so it is no way around it."""

from __future__ import annotations

import base64
import logging

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from brokerui.audit.models import AuditEntry

LIMIT = getattr(settings, "AXES_FAILURE_LIMIT", 10)  # getattr: also runs on code without axes


def _login(client: Client, username: str, password: str):
    return client.post(reverse("login"), {"username": username, "password": password})


def _logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.fixture
def login_log(caplog):
    caplog.set_level(logging.INFO)
    return caplog


def test_thirty_wrong_passwords_then_the_right_one_is_refused(viewer, broker, login_log):
    client = Client()
    for _ in range(30):
        response = _login(client, "victor", "wrong-password")
        assert response.status_code in (200, 429)
        assert not _logged_in(client)

    right = _login(client, "victor", "viewer-pass-123")

    assert right.status_code == 429
    assert not _logged_in(client)
    html = right.content.decode()
    assert "Too many failed logins" in html and 'class="topbar' in html  # the console layout
    assert f"after <strong>{LIMIT}</strong> failed attempts" in html
    assert "15 minutes" in html and "axes_reset_username" in html
    assert right["Retry-After"] == "900"
    # from another address, under another name, logins still work
    other = Client(REMOTE_ADDR="10.9.8.7")
    assert _login(other, "olivia-not-here", "x").status_code == 200


def test_one_address_trying_many_user_names_is_throttled(viewer, operator, broker):
    spray = Client(REMOTE_ADDR="192.0.2.10")
    for i in range(LIMIT):
        _login(spray, f"user{i}", "guess")

    assert _login(spray, "olivia", "operator-pass-123").status_code == 429
    assert not _logged_in(spray)
    elsewhere = Client(REMOTE_ADDR="192.0.2.99")
    assert _login(elsewhere, "olivia", "operator-pass-123").status_code == 302
    assert _logged_in(elsewhere)


def test_failures_are_logged_in_one_line_each_and_audited(viewer, broker, login_log):
    client = Client(REMOTE_ADDR="198.51.100.7")
    for _ in range(LIMIT + 3):
        _login(client, "victor", "wrong-password")

    lines = [r for r in login_log.records if r.levelno >= logging.WARNING]
    assert all(r.name == "brokerui.accounts" for r in lines), [r.name for r in lines]
    assert len(lines) == LIMIT + 3  # one line per try, nothing else
    first = lines[0].getMessage()
    assert first == (
        f"login failed: user 'victor' from 198.51.100.7, 1 of {LIMIT} failures before a "
        "15 min lockout"
    )
    assert "locked out for 15 min" in lines[LIMIT - 1].getMessage()
    assert lines[-1].getMessage().startswith("login refused (locked out): user 'victor'")
    assert "wrong-password" not in login_log.text

    failed = AuditEntry.objects.filter(action="user.login_failed", target="user victor")
    locked = AuditEntry.objects.filter(action="user.locked_out", target="user victor")
    assert failed.count() == LIMIT  # refused tries during the lockout are not audited
    assert locked.count() == 1
    entry = locked.get()
    assert entry.username == "anonymous from 198.51.100.7"
    assert entry.after == {"address": "198.51.100.7", "failures": LIMIT, "limit": LIMIT}
    assert entry.user is None


def test_a_successful_login_below_the_limit_still_works(viewer, broker):
    client = Client()
    for _ in range(LIMIT - 1):
        _login(client, "victor", "wrong-password")

    assert _login(client, "victor", "viewer-pass-123").status_code == 302
    assert _logged_in(client)


def test_the_api_takes_no_password_so_it_cannot_bypass_the_throttle(viewer, broker):
    """Token or session only: HTTP Basic with the right password is refused, so guessing
    passwords goes through the throttled login form; tokens are 160-bit random keys."""
    basic = base64.b64encode(b"victor:viewer-pass-123").decode()

    response = Client().get("/api/v1/topics", HTTP_AUTHORIZATION=f"Basic {basic}")

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")
    assert not AuditEntry.objects.filter(action="user.login_failed").exists()


def test_the_login_page_states_the_rule(db):
    html = Client().get(reverse("login")).content.decode()

    assert f"After {LIMIT} failed logins" in html and "paused for 15 minutes" in html
