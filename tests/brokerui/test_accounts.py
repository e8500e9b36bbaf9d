"""Account pages: Django's /accounts/ routes answer (no 500), password change, the user's own API
token (create, shown once, replace, revoke), the reset-by-email flow off with an explanation."""

from __future__ import annotations

import re

import pytest
from django.http import HttpRequest
from django.test import Client
from django.urls import reverse

from brokerui.audit.models import AuditEntry

ACCOUNT_PATHS = [
    "/accounts/password_change/",
    "/accounts/password_change/done/",
    "/accounts/password_reset/",
    "/accounts/password_reset/done/",
    "/accounts/reset/MQ/set-password/",
    "/accounts/reset/done/",
]


@pytest.mark.parametrize("path", ACCOUNT_PATHS)
def test_every_account_page_answers_without_a_server_error(viewer_client, broker, path):
    anonymous = Client(raise_request_exception=False)
    viewer_client.raise_request_exception = False

    for client in (viewer_client, anonymous):
        response = client.get(path, follow=True)
        assert response.status_code in (200, 404), (path, response.status_code)
        assert 'class="topbar' in response.content.decode()  # the console's layout


def test_password_reset_by_email_is_off_and_says_what_to_do(db):
    client = Client(raise_request_exception=False)

    shown = client.get("/accounts/password_reset/")
    posted = client.post("/accounts/password_reset/", {"email": "victor@example.com"})

    for response in (shown, posted):
        assert response.status_code == 404
        html = response.content.decode()
        assert "Password reset by email is off" in html
        assert "manage.py changepassword" in html


def test_password_change_checks_the_old_password_then_changes_and_audits(
    viewer_client, viewer, broker
):
    url = reverse("password_change")
    page = viewer_client.get(url)
    assert page.status_code == 200
    assert "Current password" in page.content.decode()

    wrong = viewer_client.post(
        url,
        {"old_password": "nope", "new_password1": "n3w-Secret-pw", "new_password2": "n3w-Secret"},
    )
    assert wrong.status_code == 200
    assert "incorrectly" in wrong.content.decode()  # Django's message, next to the field

    weak = viewer_client.post(
        url,
        {"old_password": "viewer-pass-123", "new_password1": "123", "new_password2": "123"},
    )
    assert weak.status_code == 200
    assert "too short" in weak.content.decode()

    done = viewer_client.post(
        url,
        {
            "old_password": "viewer-pass-123",
            "new_password1": "n3w-Secret-pw",
            "new_password2": "n3w-Secret-pw",
        },
        follow=True,
    )
    assert done.redirect_chain[-1][0] == reverse("account")
    assert "Password changed" in done.content.decode()
    assert Client().login(request=HttpRequest(), username="victor", password="n3w-Secret-pw")
    assert AuditEntry.objects.filter(action="user.password_change", target="user victor").exists()


def test_a_user_creates_uses_replaces_and_revokes_their_own_token(viewer_client, broker):
    account = viewer_client.get(reverse("account"))
    assert "You have no API token" in account.content.decode()

    created = viewer_client.post(reverse("token_create"), follow=True)
    html = created.content.decode()
    key = re.search(r'id="new-token"[^>]*value="([0-9a-f]{40})"', html).group(1)
    assert created["Cache-Control"] == "no-store"
    assert key not in viewer_client.get(reverse("account")).content.decode()  # shown once

    api = Client()
    assert api.get("/api/v1/topics", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200

    viewer_client.post(reverse("token_create"), follow=True)  # replace: the old key stops
    assert api.get("/api/v1/topics", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401

    revoked = viewer_client.post(reverse("token_revoke"), follow=True)
    assert "API token revoked" in revoked.content.decode()
    assert "You have no API token" in revoked.content.decode()

    actions = list(
        AuditEntry.objects.filter(target="user victor")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == ["token.create", "token.create", "token.revoke"]
    assert all(key not in str(e.after) + str(e.before) for e in AuditEntry.objects.all())


def test_token_actions_need_post(viewer_client, broker):
    assert viewer_client.get(reverse("token_create")).status_code == 405
    assert viewer_client.get(reverse("token_revoke")).status_code == 405


def test_the_header_links_to_the_account_page(viewer_client, broker):
    html = viewer_client.get("/").content.decode()

    assert f'href="{reverse("account")}"' in html
