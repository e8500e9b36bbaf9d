"""The Kafka listener's seams (``streams.protocol.security.Authenticator`` and
``streams.protocol.audit.AuditSink``) over the console's users, role bindings and audit log:
the Kafka port grants what the console's bindings grant on the built-in broker
(brokerui.access), per topic and group where a binding is scoped to them.

Both are called on the listener's worker threads, outside any request: each call first drops
database connections Django would have closed at the end of a request.

Sign-ins on the Kafka port share the console's login throttle (django-axes, settings.AXES_*):
a user name or address locked out by failed console logins is refused here too, and each
failed PLAIN password or SCRAM proof counts, logged and audited by brokerui.accounts as a
failed console login is (Django's ``user_login_failed`` signal, with a stand-in request
carrying the client's address).
"""

from __future__ import annotations

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_login_failed
from django.db import close_old_connections
from django.http import HttpRequest

from brokerui.access import services as access
from brokerui.access.grants import CLUSTER, BindingGrants
from brokerui.audit import services as audit
from brokerui.config import BUILTIN
from brokerui.kafkaport.models import ScramCredential
from brokerui.kafkaport.services import scram_credentials_set
from streams.protocol import security
from streams.protocol.audit import AuditEvent
from streams.protocol.security import AuthenticationFailed, Peer, Role

KAFKA_PATH = "/kafka/sasl"  # the throttle's "path" of a Kafka-port sign-in
REGISTRY_CLIENT = "\x00schema-registry"  # a Peer's client id for a schema registry sign-in


def _active_user(username: str):
    User = get_user_model()
    try:
        user = User.objects.get(**{User.USERNAME_FIELD: username})
    except User.DoesNotExist:
        return None
    return user if user.is_active else None


def _throttle_request(peer: Peer) -> HttpRequest:
    """A stand-in request for django-axes, which keys on REMOTE_ADDR and the user name."""
    request = HttpRequest()
    request.method = "POST"
    request.path = request.path_info = KAFKA_PATH
    request.META["REMOTE_ADDR"] = peer.address
    if peer.client_id == REGISTRY_CLIENT:
        request.login_via = "schema registry client"
    else:
        request.login_via = f"Kafka client {peer.client_id or '(no client id)'}"
    request.META["HTTP_USER_AGENT"] = request.login_via
    return request


def _admit(user: str, peer: Peer) -> None:
    """Raise AuthenticationFailed when the throttle has locked out `user` or `peer`'s address
    (logged as a refused console login is; not counted, as the console does not)."""
    request = _throttle_request(peer)
    credentials = {"username": user}
    if AxesProxyHandler.is_allowed(request, credentials):
        return
    request.axes_locked_out = True
    user_login_failed.send(sender=ConsoleAuthenticator, credentials=credentials, request=request)
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    raise AuthenticationFailed(
        f"Authentication failed: user {user!r} or address {peer.address} is locked out after "
        f"{settings.AXES_FAILURE_LIMIT} failed sign-ins; try again in {minutes} min or ask an "
        "operator to unlock it"
    )


def _result(user: str, peer: Peer, found) -> None:
    """Count a failed sign-in (`found` None) with the throttle, which logs and audits it, or
    tell it of a successful one (it resets the failures when AXES_RESET_ON_SUCCESS is set)."""
    request = _throttle_request(peer)
    if found is None:
        user_login_failed.send(
            sender=ConsoleAuthenticator, credentials={"username": user}, request=request
        )
    else:
        AxesProxyHandler.user_logged_in(ConsoleAuthenticator, request, found)


class ConsoleAuthenticator:
    """Console users sign in on the Kafka port with their console password: PLAIN checks it
    with Django's password hasher, SCRAM uses the credentials derived when it was set. Both go
    through the console's login throttle (see the module's docstring)."""

    def check_plain(self, user: str, password: str, peer: Peer) -> bool:
        close_old_connections()
        _admit(user, peer)
        found = _active_user(user)
        if found is None:
            get_user_model()().set_password(password)  # as long as a real check (Django's way)
        elif not found.check_password(password):
            found = None
        _result(user, peer, found)
        if found is None:
            return False
        if not found.scram_credentials.exists():  # a password set before SCRAM was offered
            scram_credentials_set(user=found, password=password)
        return True

    def scram_credential(
        self, user: str, mechanism: str, peer: Peer
    ) -> security.ScramCredential | None:
        close_old_connections()
        _admit(user, peer)
        found = _active_user(user)
        if found is None or not found.has_usable_password():
            return None
        row = ScramCredential.objects.filter(user=found, mechanism=mechanism).first()
        if row is None:
            return None
        return security.ScramCredential(
            bytes(row.salt), bytes(row.stored_key), bytes(row.server_key), row.iterations
        )

    def scram_result(self, user: str, mechanism: str, peer: Peer, ok: bool) -> None:
        close_old_connections()
        _result(user, peer, _active_user(user) if ok else None)

    def role(self, user: str) -> Role:
        """`user`'s role on the built-in broker as a whole (its bindings on the cluster)."""
        return self._grants(user).cluster_role()

    def grants(self, user: str) -> BindingGrants | None:
        """`user`'s roles per topic and group, when some binding is scoped to them."""
        found = self._grants(user)
        return found if any(b.kind != CLUSTER for b in found.bindings) else None

    def _grants(self, user: str) -> BindingGrants:
        close_old_connections()
        found = _active_user(user)
        if found is None:
            return BindingGrants(BUILTIN, ())
        return access.grants_for(found, BUILTIN, console_default=False)


class KafkaAuditSink:
    """Admin changes made over the Kafka port go to the console's audit log (the database and
    the `broker`'s ``__audit`` topic) with source ``kafka``; "who" is the client id and
    address, after the SASL user when there is one."""

    def __init__(self, broker):
        self.broker = broker
        self.sink = audit.AuditLog(broker.store, cluster=BUILTIN)

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


class RegistryConsoleAuthenticator:
    """The schema registry's seam (``streams.schemas.server.RegistryAuthenticator``) over the
    console's users: HTTP Basic with the console password (through the same login throttle as
    the Kafka port's PLAIN), or the user's API token (``Authorization: Bearer`` or ``Token``)."""

    def __init__(self):
        self._console = ConsoleAuthenticator()

    def check_password(self, user: str, password: str, address: str) -> bool:
        peer = Peer(address.rpartition(":")[0] or address, REGISTRY_CLIENT)
        try:
            return self._console.check_plain(user, password, peer)
        except AuthenticationFailed:
            return False

    def user_for_token(self, token: str) -> str | None:
        from rest_framework.authtoken.models import Token

        close_old_connections()
        row = Token.objects.select_related("user").filter(key=token).first()
        if row is None or not row.user.is_active:
            return None
        return row.user.get_username()

    def role(self, user: str) -> Role:
        return self._console.role(user)


class RegistryAuditSink:
    """Schema registry changes go to the console's audit log with source ``registry``."""

    def __init__(self, broker):
        self.sink = audit.AuditLog(broker.store, cluster=BUILTIN)

    def record(self, event) -> None:
        close_old_connections()
        user = _active_user(event.user) if event.user else None
        who = f"{event.user or '(no user)'} ({event.user_agent or 'no user agent'}@{event.address})"
        audit.record(
            user,
            event.action,
            event.target,
            before=event.before,
            after=event.after,
            source="registry",
            who=who,
            sink=self.sink,
        )
