"""The console's users as the Kafka port sees them: SCRAM credentials derived when a password is
set (Django's password-changed hook, the first admin, a first sign-in), and the
`ConsoleAuthenticator` answering PLAIN, SCRAM look-ups and roles."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.urls import reverse

from brokerui.audit.models import AuditEntry
from brokerui.kafkaport.adapters import ConsoleAuthenticator
from brokerui.kafkaport.models import ScramCredential
from streams.protocol.security import (
    PLAIN,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    AuthenticationFailed,
    Peer,
    Role,
    SaslExchange,
    scram_credential,
)

pytestmark = pytest.mark.django_db
PEER = Peer("192.0.2.5", "credentials-test")


def _matches(user: User, mechanism: str, password: str) -> bool:
    """Whether the stored credential is the one `password` gives (same salt and iterations)."""
    row = ScramCredential.objects.get(user=user, mechanism=mechanism)
    derived = scram_credential(mechanism, password, iterations=row.iterations, salt=bytes(row.salt))
    return (derived.stored_key, derived.server_key) == (
        bytes(row.stored_key),
        bytes(row.server_key),
    )


def test_setting_a_password_derives_both_scram_credentials():
    user = User.objects.create_user("alice")
    assert not ScramCredential.objects.filter(user=user).exists()
    user.set_password("first-pass-123")
    user.save()
    assert _matches(user, SCRAM_SHA_256, "first-pass-123")
    assert _matches(user, SCRAM_SHA_512, "first-pass-123")
    user.set_password("second-pass-456")
    user.save()
    assert ScramCredential.objects.filter(user=user).count() == 2
    assert _matches(user, SCRAM_SHA_512, "second-pass-456")
    assert not _matches(user, SCRAM_SHA_512, "first-pass-123")


def test_the_first_admin_can_use_scram_at_once():
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    password = re.search(r"with password\s+(\S+)", out.getvalue()).group(1)
    admin = User.objects.get(username="admin")
    assert _matches(admin, SCRAM_SHA_256, password) and _matches(admin, SCRAM_SHA_512, password)


def test_a_user_made_by_create_user_gets_them_at_the_first_console_sign_in(client):
    user = User.objects.create_user("bob", password="bob-pass-123")
    assert not ScramCredential.objects.filter(user=user).exists()  # Django calls no hook here
    response = client.post(reverse("login"), {"username": "bob", "password": "bob-pass-123"})
    assert response.status_code == 302
    assert _matches(user, SCRAM_SHA_512, "bob-pass-123")


def test_the_authenticator_answers_with_the_console_s_users_and_roles(broker):
    # get_or_create: a transactional test run before this one (on its worker) flushed the roles
    operators = Group.objects.get_or_create(name="operator")[0]
    viewers = Group.objects.get_or_create(name="viewer")[0]
    olivia = User.objects.create_user("olivia", password="operator-pass-123")
    olivia.groups.add(operators)
    victor = User.objects.create_user("victor", password="viewer-pass-123")
    victor.groups.add(viewers)
    User.objects.create_user("nora", password="no-role-pass-123")
    User.objects.create_superuser("root", password="root-pass-123")
    auth = ConsoleAuthenticator()

    roles = {name: auth.role(name) for name in ("olivia", "victor", "nora", "root", "ghost")}
    assert roles == {
        "olivia": Role.OPERATOR,
        "victor": Role.VIEWER,
        "nora": Role.NONE,
        "root": Role.OPERATOR,
        "ghost": Role.NONE,
    }
    assert not auth.check_plain("olivia", "wrong", PEER)
    assert not auth.check_plain("ghost", "whatever", PEER)
    assert auth.scram_credential("olivia", SCRAM_SHA_256, PEER) is None  # not derived yet
    assert auth.check_plain("olivia", "operator-pass-123", PEER)  # ...and derived by that sign-in
    cred = auth.scram_credential("olivia", SCRAM_SHA_256, PEER)
    assert cred == scram_credential(
        SCRAM_SHA_256, "operator-pass-123", iterations=cred.iterations, salt=cred.salt
    )

    olivia.is_active = False
    olivia.save()
    assert auth.role("olivia") == Role.NONE
    assert auth.scram_credential("olivia", SCRAM_SHA_256, PEER) is None
    assert not auth.check_plain("olivia", "operator-pass-123", PEER)
    victor.set_password("viewer-pass-456")
    victor.save()
    assert auth.scram_credential("victor", SCRAM_SHA_512, PEER) is not None
    victor.set_unusable_password()
    victor.save()
    assert auth.scram_credential("victor", SCRAM_SHA_512, PEER) is None


def test_failed_kafka_sign_ins_count_in_the_login_throttle(settings, broker):
    settings.AXES_FAILURE_LIMIT = 3
    User.objects.create_user("olivia", password="operator-pass-123")
    auth, other = ConsoleAuthenticator(), Peer("192.0.2.77", "elsewhere")
    for _ in range(3):
        exchange = SaslExchange(PLAIN, auth, PEER)
        with pytest.raises(AuthenticationFailed, match="Invalid username or password"):
            exchange.step(b"\0olivia\0guess")

    for peer in (PEER, other):  # the user name is locked, from any address
        with pytest.raises(AuthenticationFailed, match="is locked out after 3 failed sign-ins"):
            SaslExchange(PLAIN, auth, peer).step(b"\0olivia\0operator-pass-123")
        scram = SaslExchange(SCRAM_SHA_256, auth, peer)
        with pytest.raises(AuthenticationFailed, match="is locked out"):
            scram.step(b"n,,n=olivia,r=abcdefgh")
    # and so is the address, for any user name
    with pytest.raises(AuthenticationFailed, match="is locked out"):
        SaslExchange(PLAIN, auth, PEER).step(b"\0someone\0whatever")
    failed = AuditEntry.objects.filter(action="user.login_failed").order_by("id")
    assert [e.after["address"] for e in failed] == ["192.0.2.5"] * 3
    assert [e.after["via"] for e in failed] == ["Kafka client credentials-test"] * 3
