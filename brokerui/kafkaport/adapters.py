"""The Kafka listener's seams (``streams.protocol.security.Authenticator`` and
``streams.protocol.audit.AuditSink``) over the console's users, roles and audit log.

Both are called on the listener's worker threads, outside any request: each call first drops
database connections Django would have closed at the end of a request.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import close_old_connections

from brokerui.audit import services as audit
from brokerui.console.roles import VIEWER, is_operator
from brokerui.kafkaport.models import ScramCredential
from brokerui.kafkaport.services import scram_credentials_set
from streams.protocol import security
from streams.protocol.audit import AuditEvent
from streams.protocol.security import Role


def _active_user(username: str):
    User = get_user_model()
    try:
        user = User.objects.get(**{User.USERNAME_FIELD: username})
    except User.DoesNotExist:
        return None
    return user if user.is_active else None


class ConsoleAuthenticator:
    """Console users sign in on the Kafka port with their console password: PLAIN checks it
    with Django's password hasher, SCRAM uses the credentials derived when it was set."""

    def check_plain(self, user: str, password: str) -> bool:
        close_old_connections()
        found = _active_user(user)
        if found is None:
            get_user_model()().set_password(password)  # as long as a real check (Django's way)
            return False
        if not found.check_password(password):
            return False
        if not found.scram_credentials.exists():  # a password set before SCRAM was offered
            scram_credentials_set(user=found, password=password)
        return True

    def scram_credential(self, user: str, mechanism: str) -> security.ScramCredential | None:
        close_old_connections()
        found = _active_user(user)
        if found is None or not found.has_usable_password():
            return None
        row = ScramCredential.objects.filter(user=found, mechanism=mechanism).first()
        if row is None:
            return None
        return security.ScramCredential(
            bytes(row.salt), bytes(row.stored_key), bytes(row.server_key), row.iterations
        )

    def role(self, user: str) -> Role:
        close_old_connections()
        found = _active_user(user)
        if found is None:
            return Role.NONE
        if is_operator(found):
            return Role.OPERATOR
        if found.groups.filter(name=VIEWER).exists():
            return Role.VIEWER
        return Role.NONE


class KafkaAuditSink:
    """Admin changes made over the Kafka port go to the console's audit log (the database and
    the `broker`'s ``__audit`` topic) with source ``kafka``; "who" is the client id and
    address, after the SASL user when there is one."""

    def __init__(self, broker):
        self.broker = broker
        self.sink = audit.AuditLog(broker.store)

    def record(self, event: AuditEvent) -> None:
        close_old_connections()
        user = _active_user(event.user) if event.user else None
        audit.record(
            user,
            event.action,
            event.target,
            before=event.before,
            after=event.after,
            source="kafka",
            who=event.who,
            sink=self.sink,
        )
