"""Single sign-on with OpenID Connect (mozilla-django-oidc as the relying party).

On when ``TIDELOG_OIDC_ISSUER`` names the provider (with ``TIDELOG_OIDC_CLIENT_ID`` and
``TIDELOG_OIDC_CLIENT_SECRET``, or ``..._SECRET_FILE``); the login page then offers "Sign in
with <TIDELOG_OIDC_NAME>" beside the local form, and local users stay as they are. The
provider's endpoints come from its discovery document
(``<issuer>/.well-known/openid-configuration``), read at the first sign-in and kept, so the
console starts while the provider is down and its sign-ins fail with the reason until it is up.

A signed-in user is the console user named by the ``preferred_username`` claim (made at the
first sign-in, with no usable password); a local user of that name with a password of their own
is never signed in by the provider (the sign-in is refused and logged), so a provider cannot
take a local account over. The ``groups`` claim (``TIDELOG_OIDC_GROUPS_CLAIM``) replaces the
user's groups at every sign-in: role bindings on those groups (brokerui.access) are what the
user may do, and the groups ``operator`` and ``viewer`` are the cluster-wide roles.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.request

from django.conf import settings
from django.contrib.auth.models import Group
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationRequestView

log = logging.getLogger(__name__)

DISCOVERY_TIMEOUT_S = 5.0
_ENDPOINTS = {  # Django setting -> the discovery document's key
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_discovered: dict[str, str] = {}
_lock = threading.Lock()


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be read; the message says why."""


def discovered(attr: str) -> str:
    """One of the provider's endpoints, from its discovery document (read once)."""
    with _lock:
        if not _discovered:
            url = settings.TIDELOG_OIDC_ISSUER.rstrip("/") + "/.well-known/openid-configuration"
            try:
                with urllib.request.urlopen(url, timeout=DISCOVERY_TIMEOUT_S) as answer:  # noqa: S310
                    document = json.load(answer)
            except (OSError, ValueError) as exc:
                raise ProviderUnavailable(f"cannot read {url}: {exc}") from None
            missing = [key for key in _ENDPOINTS.values() if key not in document]
            if missing:
                raise ProviderUnavailable(f"{url} names no {', '.join(missing)}")
            _discovered.update({name: document[key] for name, key in _ENDPOINTS.items()})
        return _discovered[attr]


def setting(attr: str, *default):
    if attr in _ENDPOINTS:
        return discovered(attr)
    return import_from_settings(attr, *default)


class SignInRequestView(OIDCAuthenticationRequestView):
    """The redirect to the provider, with its endpoint from discovery."""

    @staticmethod
    def get_settings(attr, *args):
        return setting(attr, *args)


class OIDCBackend(OIDCAuthenticationBackend):
    """Console users from the provider's claims: named by ``preferred_username``, in the groups
    of the groups claim."""

    @staticmethod
    def get_settings(attr, *args):
        return setting(attr, *args)

    def verify_claims(self, claims) -> bool:
        return bool(claims.get("preferred_username"))

    def filter_users_by_claims(self, claims):
        name = claims.get("preferred_username", "")
        found = self.UserModel.objects.filter(**{self.UserModel.USERNAME_FIELD: name})
        local = [user for user in found if user.has_usable_password()]
        if local:
            log.warning(
                "OIDC sign-in as %r refused: a local user of that name has a password", name
            )
            return self.UserModel.objects.none()  # create_user then refuses too
        return found

    def create_user(self, claims):
        name = claims["preferred_username"]
        if self.UserModel.objects.filter(**{self.UserModel.USERNAME_FIELD: name}).exists():
            return None  # the local user of that name (filter_users_by_claims refused it)
        user = self.UserModel.objects.create_user(name, email=claims.get("email", ""))
        user.set_unusable_password()
        user.save()
        log.info("OIDC user %s signed in for the first time", name)
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        names = claims.get(settings.TIDELOG_OIDC_GROUPS_CLAIM) or []
        if isinstance(names, str):
            names = [names]
        groups = [Group.objects.get_or_create(name=str(n)[:150])[0] for n in names]
        user.groups.set(groups)
        if claims.get("email") and user.email != claims["email"]:
            user.email = claims["email"]
            user.save(update_fields=["email"])
        return user
