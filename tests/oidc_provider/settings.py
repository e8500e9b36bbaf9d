"""A real OpenID Connect provider for the single sign-on tests: django-oauth-toolkit's, in a
Django process of its own (``manage.py``-less: ``django-admin`` with these settings).

The test names its database (OIDC_PROVIDER_DB) and its RSA signing key (OIDC_PROVIDER_KEY, a
PEM file). Users sign in on its own login page; the ID token and userinfo carry
``preferred_username``, ``email`` and ``groups`` (the user's Django groups)."""

import os
from pathlib import Path

SECRET_KEY = "oidc-provider-for-tests-only-0123456789abcdef"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.oidc_provider.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["OIDC_PROVIDER_DB"]}
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/accounts/login/"
USE_TZ = True
# the console and the provider both on 127.0.0.1: cookies are per host, not per port
SESSION_COOKIE_NAME = "provider_session"
CSRF_COOKIE_NAME = "provider_csrf"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": Path(os.environ["OIDC_PROVIDER_KEY"]).read_text(),
    "PKCE_REQUIRED": True,
    "SCOPES": {"openid": "OpenID Connect", "email": "email", "profile": "profile"},
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.validator.Validator",
}
