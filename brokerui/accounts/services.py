"""Account actions: the user's own API token and password change, and failed logins. Each is
audited through the `AuditSink` the caller passes (the views and the login signal receiver give
the process's, ``brokerui.audit.services.process_sink()``), like every other change.

One token per user (Django REST framework's ``authtoken``): creating a new one replaces the old
one, so a leaked token is rotated by creating a new one and revoked by revoking it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from rest_framework.authtoken.models import Token

from brokerui.audit.services import AuditSink

SHOWN_PREFIX = 6  # characters of a stored token shown on the page (the whole key only once)


@dataclass(frozen=True)
class TokenInfo:
    prefix: str
    created: datetime


def token_get(*, user) -> TokenInfo | None:
    token = Token.objects.filter(user=user).first()
    if token is None:
        return None
    return TokenInfo(prefix=token.key[:SHOWN_PREFIX], created=token.created)


def token_create(*, user, sink: AuditSink) -> str:
    """A new token for `user`, replacing (and so revoking) any previous one; returns its key."""
    with transaction.atomic():
        replaced = Token.objects.filter(user=user).delete()[0] > 0
        token = Token.objects.create(user=user)
    sink.record(
        user,
        "token.create",
        _target(user),
        before={"token": "replaced"} if replaced else None,
        after={"token": token.key[:SHOWN_PREFIX] + "…", "created": token.created.isoformat()},
    )
    return token.key


def token_revoke(*, user, sink: AuditSink) -> bool:
    """Delete `user`'s token; False when there was none (nothing is audited then)."""
    token = Token.objects.filter(user=user).first()
    if token is None:
        return False
    before = {"token": token.key[:SHOWN_PREFIX] + "…", "created": token.created.isoformat()}
    token.delete()
    sink.record(user, "token.revoke", _target(user), before=before)
    return True


def password_change_record(*, user, sink: AuditSink) -> None:
    """Audit a password change (Django's form has already set and saved the new password)."""
    sink.record(user, "user.password_change", _target(user))


def _target(user) -> str:
    return f"user {user.get_username()}"


def login_failure_record(
    *,
    username: str,
    address: str | None,
    failures: int,
    limit: int,
    locked_out: bool,
    via: str | None = None,
    sink: AuditSink,
) -> None:
    """Audit a failed login (the throttle counted it): `failures` of `limit` for that user
    name or address; `locked_out` when this failure started the lockout; `via` names a sign-in
    other than the login page (a Kafka client)."""
    details = {"address": address, "failures": failures, "limit": limit}
    if via:
        details["via"] = via
    target = f"user {username[:150]}"
    who = f"anonymous from {address or 'unknown address'}"
    sink.record(None, "user.login_failed", target, after=details, who=who)
    if locked_out:
        sink.record(None, "user.locked_out", target, after=details, who=who)
