"""Django settings for Tidelog. Every value that varies comes from `brokerui.config`."""

from __future__ import annotations

from datetime import timedelta

import dj_database_url
from csp.constants import NONE, SELF

from brokerui.config import (
    REPO_DIR,
    Config,
    channel_layers,
    ensure_data_dir,
    ensure_private_sqlite,
    load_or_create_secret_key,
)

CONFIG = Config.from_env()
BASE_DIR = REPO_DIR

# The broker's data directory also holds the SQLite database and the generated secret key.
TIDELOG_DATA_DIR = ensure_data_dir(CONFIG.data_dir)
TIDELOG_DEMO = CONFIG.demo
TIDELOG_HTTP_PORT = CONFIG.http_port
TIDELOG_KAFKA_PORT = CONFIG.kafka_port
TIDELOG_KAFKA_LISTENER = CONFIG.kafka_listener
TIDELOG_KAFKA_AUTO_CREATE = CONFIG.kafka_auto_create
TIDELOG_KAFKA_DEFAULT_PARTITIONS = CONFIG.kafka_default_partitions
TIDELOG_KAFKA_MAX_REQUEST_BYTES = CONFIG.kafka_max_request_bytes
TIDELOG_KAFKA_SASL = CONFIG.kafka_sasl
TIDELOG_KAFKA_TLS_CERT = CONFIG.kafka_tls_cert
TIDELOG_KAFKA_TLS_KEY = CONFIG.kafka_tls_key
# Kafka's super.users ("User:admin;User:ops"): past every ACL on the Kafka port
TIDELOG_KAFKA_SUPER_USERS = CONFIG.kafka_super_users
# kafka://host:port[,...]: the console works on that cluster; no local broker is opened
TIDELOG_CLUSTER = CONFIG.cluster_url
# its client properties file (SASL, TLS; librdkafka's names; secrets as ${env:..}/${file:..})
TIDELOG_CLUSTER_CONFIG = CONFIG.cluster_config
# every cluster of the console (TIDELOG_CONFIG), the default first: brokerui.cluster
TIDELOG_CLUSTERS = CONFIG.clusters
# TIDELOG_EXPORT=0 turns off exporting records from the message pages (compliance)
TIDELOG_EXPORT_ENABLED = CONFIG.export_enabled
# a PostgreSQL DSN: the dual-write page runs its writers through CDC from it (else the log)
TIDELOG_DUALWRITE_POSTGRES = CONFIG.dualwrite_postgres
# the schema registry's REST API (Confluent's) on 127.0.0.1:TIDELOG_REGISTRY_PORT, unless
# TIDELOG_REGISTRY=0; the console's users and roles sign in to it
TIDELOG_REGISTRY = CONFIG.registry
TIDELOG_REGISTRY_PORT = CONFIG.registry_port
# an external schema registry (https://…, basic auth from TIDELOG_SCHEMA_REGISTRY_AUTH=user:pass):
# the console reads registry-encoded values with it instead of the built-in one
TIDELOG_SCHEMA_REGISTRY = CONFIG.schema_registry_url
TIDELOG_SCHEMA_REGISTRY_AUTH = CONFIG.schema_registry_auth

SECRET_KEY = CONFIG.secret_key or load_or_create_secret_key(TIDELOG_DATA_DIR)
DEBUG = CONFIG.debug
ALLOWED_HOSTS = list(CONFIG.allowed_hosts)

INSTALLED_APPS = [
    "daphne",  # first, so that `manage.py runserver` is Daphne's ASGI server
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "brokerui.console",
    "axes",  # before brokerui.accounts: its failure handler runs before the one that logs
    "brokerui.accounts",
    "brokerui.audit",
    "brokerui.kafkaport",
    "brokerui.access",  # role bindings: a role on a cluster, or on topics or groups by prefix
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "brokerui.api",
    "brokerui.metrics",  # /metrics for Prometheus; installs the engine's instruments
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # /c/NAME/...: that cluster's pages (brokerui.cluster), before anything resolves the URL
    "brokerui.console.middleware.ClusterMiddleware",
    "csp.middleware.CSPMiddleware",  # the Content-Security-Policy header (CONTENT_SECURITY_POLICY)
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "brokerui.request_limits.RequestSizeLimitMiddleware",  # 413 over DATA_UPLOAD_MAX_MEMORY_SIZE
    "brokerui.console.middleware.HtmxLoginRedirectMiddleware",
    # a view whose external cluster does not answer: the 503 page with the reason
    "brokerui.console.middleware.ClusterUnavailableMiddleware",
    # every page needs a login; the login view itself is exempt (Django 5.1+)
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    # a topic or group the user may not read (brokerui.access): 403, after the login check
    "brokerui.console.roles.AccessMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last: turns a locked-out login into the lockout page (429)
    "axes.middleware.AxesMiddleware",
]

# The largest request body Django reads into memory, in bytes: form fields and the JSON API's
# bodies (a batch of records at the default max.message.bytes in base64); uploaded files are
# not counted. Django's default is 2.5 MB. A larger body is answered 413 with this limit
# (brokerui/request_limits.py); None would mean no limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = 16 * 1024 * 1024

ROOT_URLCONF = "brokerui.urls"
ASGI_APPLICATION = "brokerui.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "brokerui.console.context_processors.roles",
                "brokerui.cluster.cluster_context",
            ],
        },
    },
]

DATABASES = {"default": dj_database_url.parse(CONFIG.database_url, conn_max_age=0)}
ensure_private_sqlite(DATABASES["default"])  # sessions and API tokens: 0600, like the key
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CHANNEL_LAYERS = channel_layers(CONFIG.redis_url)

# Login throttle (django-axes): after AXES_FAILURE_LIMIT failed logins for one user name, or
# from one address, within the cool-off, logins for it are refused until the cool-off has passed
# since the last counted failure (refused tries are logged, not counted).
# The address is REMOTE_ADDR only (forwarded headers can be forged). brokerui.accounts logs and
# audits failures. Unlock early: `manage.py axes_reset_username NAME` / `axes_reset_ip ADDRESS`.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out login
    # Django's ModelBackend, which also derives the SCRAM credentials of users created without them
    "brokerui.kafkaport.backends.ModelBackendWithScram",
]
# Single sign-on with OpenID Connect (brokerui.accounts.oidc), beside the local users: on when
# TIDELOG_OIDC_ISSUER names the provider.
TIDELOG_OIDC_ISSUER = CONFIG.oidc_issuer
TIDELOG_OIDC_NAME = CONFIG.oidc_name
TIDELOG_OIDC_GROUPS_CLAIM = CONFIG.oidc_groups_claim
if TIDELOG_OIDC_ISSUER:
    AUTHENTICATION_BACKENDS.insert(1, "brokerui.accounts.oidc.OIDCBackend")
    OIDC_RP_CLIENT_ID = CONFIG.oidc_client_id
    OIDC_RP_CLIENT_SECRET = CONFIG.oidc_client_secret
    OIDC_RP_SIGN_ALGO = "RS256"
    OIDC_RP_SCOPES = CONFIG.oidc_scopes
    OIDC_USE_PKCE = True
    OIDC_AUTHENTICATE_CLASS = "brokerui.accounts.oidc.SignInRequestView"
    LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso=failed"
AXES_FAILURE_LIMIT = 10
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one locks
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "brokerui.accounts.views.locked_out"  # a styled page, 429
AXES_VERBOSE = False

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    # not a check: derives the password's SCRAM credentials for the Kafka port once it is set
    {"NAME": "brokerui.kafkaport.passwords.KafkaScramCredentials"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Served by the ASGI app itself (see brokerui/asgi.py), from these folders, with DEBUG on or off.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:home"
LOGOUT_REDIRECT_URL = "login"

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]

# The JSON API under /api/v1/ (brokerui.api): token or session auth, JSON errors with stable codes.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # first, so an anonymous request gets 401 with `WWW-Authenticate: Token`
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # bodies are bounded by DATA_UPLOAD_MAX_MEMORY_SIZE (above): 413 from brokerui.request_limits
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "brokerui.api.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Tidelog API",
    "VERSION": "v1",
    "DESCRIPTION": "Topics, records and consumer groups of a Tidelog broker.",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_GENERATE_CHOICE_DESCRIPTION": False,
}

# Content-Security-Policy (django-csp): scripts and styles from this origin only, no inline
# script or style, no eval. Pages load their JS from /static/ (static/js/console.js attaches what
# inline handlers did); htmx runs without eval (the htmx-config meta tag in base.html; no trigger
# filters) and without its inline indicator <style>; Plotly's global rules come from a static
# stylesheet (static/vendor/plotly-basic-*.css) and it styles its SVG through the CSSOM, which
# style-src does not restrict. data: images are Pico's icons in its CSS.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],  # fetches and the live metrics WebSocket (same origin)
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "streams": {"handlers": ["console"], "level": "INFO"},
        "brokerui": {"handlers": ["console"], "level": "INFO"},
        # Daphne's one line per request under `manage.py runserver`.
        "django.channels.server": {"handlers": ["console"], "level": "INFO"},
        # a 500's traceback (Django's own handler prints it only with DEBUG on)
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
        # brokerui.accounts logs one line per failed login; axes' own lines would repeat it
        "axes": {"level": "ERROR"},
    },
}
