"""Failed logins: one log line each, and an audit entry for each failure the throttle counts
(django-axes, see settings.AXES_*): at most its limit per user name or address per cool-off,
so an attack cannot flood the audit log. Tries refused while locked out are logged only."""

from __future__ import annotations

import logging

from django.conf import settings

from brokerui.accounts import services
from brokerui.audit.services import process_sink

log = logging.getLogger("brokerui.accounts")


def login_failed(sender, credentials: dict, request=None, **kwargs) -> None:
    """`user_login_failed`, after axes' own handler has counted the failure."""
    username = str(credentials.get("username") or "")
    # set by a sign-in that is not the login page (brokerui.kafkaport: "Kafka client <id>")
    via = getattr(request, "login_via", None)
    where = f" ({via})" if via else ""
    address = getattr(request, "axes_ip_address", None)
    if address is None and request is not None:
        address = request.META.get("REMOTE_ADDR")
    failures = getattr(request, "axes_failures_since_start", None)
    limit = settings.AXES_FAILURE_LIMIT
    locked = bool(getattr(request, "axes_locked_out", False))
    if locked and failures is None:  # refused before the password was checked
        log.warning(
            "login refused (locked out): user %r from %s%s; unlock with manage.py "
            "axes_reset_username or axes_reset_ip",
            username,
            address,
            where,
        )
        return
    if failures is None:  # the throttle did not count it (no request, or axes disabled)
        log.warning(
            "login failed: user %r from %s%s (not counted by the throttle)",
            username,
            address,
            where,
        )
        return
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    if locked:
        log.warning(
            "login failed: user %r from %s%s, %d of %d failures: locked out for %d min",
            username,
            address,
            where,
            failures,
            limit,
            minutes,
        )
    else:
        log.warning(
            "login failed: user %r from %s%s, %d of %d failures before a %d min lockout",
            username,
            address,
            where,
            failures,
            limit,
            minutes,
        )
    services.login_failure_record(
        username=username,
        address=address,
        failures=failures,
        limit=limit,
        locked_out=locked and failures == limit,
        via=via,
        sink=process_sink(),
    )
