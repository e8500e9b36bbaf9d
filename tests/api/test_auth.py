"""Authentication (token, session), the two roles, and the login redirect the API must avoid."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.http import HttpRequest
from rest_framework.test import APIClient

from brokerui.audit.models import AuditEntry
from tests.api.conftest import API, token_client

# Every mutating endpoint: (method, path, body). Viewers get 403 on each and nothing changes.
MUTATIONS = [
    ("post", "/topics", {"name": "new-topic"}),
    ("patch", "/topics/orders/config", {"set": {"retention.ms": "1000"}}),
    ("post", "/topics/orders/partitions", {"total": 5}),
    ("delete", "/topics/orders", None),
    ("post", "/topics/orders/purge", {"all": True}),
    ("post", "/topics/orders/records", {"value": "x"}),
    ("delete", "/groups/billing", None),
    (
        "post",
        "/groups/billing/reset",
        {"strategy": "to-earliest", "scope": "all_topics", "dry_run": False},
    ),
    ("delete", "/groups/billing/offsets/orders", None),
]


def _call(client, method, path, body):
    return getattr(client, method)(API + path, body, format="json")


def test_anonymous_gets_401_json_not_a_login_redirect(anon):
    response = anon.get(f"{API}/topics")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response.json()["error"]["code"] == "not_authenticated"


@pytest.mark.parametrize("method, path, body", MUTATIONS)
def test_anonymous_mutations_get_401(anon, billing, method, path, body):
    response = _call(anon, method, path, body)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_unknown_token_is_401(anon):
    anon.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = anon.get(f"{API}/topics")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_token_auth_reads(view, orders):
    response = view.get(f"{API}/topics")
    assert response.status_code == 200
    assert [t["name"] for t in response.json()["topics"]] == ["orders"]


def test_session_auth_reads_and_writes_with_csrf(operator, broker):
    client = APIClient(enforce_csrf_checks=True)
    # a request for the login throttle (django-axes), as the login form passes one
    assert client.login(request=HttpRequest(), username="olivia", password="operator-pass-123")
    assert client.get(f"{API}/topics").status_code == 200

    refused = client.post(f"{API}/topics", {"name": "t"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "csrf_failed"

    token = client.get("/accounts/login/").cookies["csrftoken"].value
    created = client.post(f"{API}/topics", {"name": "t"}, format="json", HTTP_X_CSRFTOKEN=token)
    assert created.status_code == 201, created.json()


def test_token_requests_need_no_csrf(operator, broker):
    client = token_client(operator)
    client.enforce_csrf_checks = True
    assert client.post(f"{API}/topics", {"name": "t"}, format="json").status_code == 201


@pytest.mark.parametrize("method, path, body", MUTATIONS)
def test_viewer_cannot_mutate(view, billing, broker, method, path, body):
    ends = {p.partition: p.end_offset for p in broker.store.describe_topic("orders").partitions}

    response = _call(view, method, path, body)

    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "operator_required",
        "message": "This needs the operator role.",
    }
    d = broker.store.describe_topic("orders")
    assert {p.partition: p.end_offset for p in d.partitions} == ends
    assert d.overrides == {} and len(d.partitions) == 3
    assert {tp: c.offset for tp, c in broker.coordinator.committed("billing").items()} == {
        ("orders", 0): 5,
        ("orders", 1): 20,
    }
    assert not AuditEntry.objects.exists()


def test_viewer_may_preview_a_reset(view, billing):
    response = view.post(
        f"{API}/groups/billing/reset",
        {"strategy": "to-earliest", "scope": "all_topics"},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["dry_run"] is True and response.json()["executed"] is False


def test_superuser_is_an_operator(db, orders):
    admin = User.objects.create_superuser("root", password="root-pass-123")
    response = token_client(admin).post(f"{API}/topics", {"name": "by-admin"}, format="json")
    assert response.status_code == 201


def test_user_without_a_role_reads_but_cannot_mutate(db, orders):
    nobody = User.objects.create_user("nobody", password="nobody-pass-123")
    client = token_client(nobody)
    assert client.get(f"{API}/topics/orders").status_code == 200
    response = client.delete(f"{API}/topics/orders")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "operator_required"


@pytest.mark.parametrize("path", ["/nope", "/topics/", "/topics/orders/nope"])
def test_unknown_paths_are_json_404_even_anonymous(anon, path):
    response = anon.get(API + path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_trailing_slash_gets_a_hint(op):
    response = op.get(f"{API}/topics/")
    assert "use /api/v1/topics" in response.json()["error"]["message"]


def test_wrong_method_is_405(op, orders):
    response = op.put(f"{API}/topics/orders", {}, format="json")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_token_from_the_management_command(operator, broker):
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    call_command("drf_create_token", "olivia")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get(user=operator).key}")
    assert client.get(f"{API}/topics").status_code == 200
