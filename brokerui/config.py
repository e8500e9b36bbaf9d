"""Tidelog's configuration: every environment variable the project reads, parsed in one place.

`Config.from_env()` turns the environment into a frozen value with safe defaults; settings.py
reads it once. Nothing else in the project looks at `os.environ` for Tidelog settings.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class ConfigError(ValueError):
    """An environment variable holds a value Tidelog cannot use."""


BUILTIN = "local"  # the built-in broker's name among the clusters
_CLUSTER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class ClusterEntry:
    """One cluster the console shows: the built-in broker (`url` None) or an external one."""

    name: str
    url: str | None = None  # kafka://host:port[,...]; None: the built-in broker
    client_properties: Path | None = None  # its SASL/TLS settings (streams.cluster.connection)

    @property
    def builtin(self) -> bool:
        return self.url is None


@dataclass(frozen=True)
class Config:
    data_dir: Path
    debug: bool
    demo: bool
    http_port: int
    kafka_port: int
    allowed_hosts: tuple[str, ...]
    database_url: str
    redis_url: str | None
    secret_key: str | None  # None: generated once and kept in <data_dir>/.secret_key
    cluster_url: str | None = None  # kafka://host:port[,...]: an external cluster, no local broker
    # its client properties (librdkafka's names: SASL, TLS), TIDELOG_CLUSTER_CONFIG
    cluster_config: Path | None = None
    # the clusters of the console, the default one first (TIDELOG_CONFIG's [clusters.*], else
    # TIDELOG_CLUSTER alone, else the built-in broker alone)
    clusters: tuple[ClusterEntry, ...] = (ClusterEntry(BUILTIN),)
    kafka_listener: bool = True  # serve the Kafka protocol on kafka_port (TIDELOG_KAFKA_LISTENER)
    kafka_auto_create: bool = True  # Kafka's auto.create.topics.enable
    kafka_default_partitions: int = 1  # Kafka's num.partitions, for auto-created topics
    kafka_max_request_bytes: int = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
    kafka_sasl: bool = False  # require SASL (PLAIN, SCRAM-SHA-256/512) with the console's users
    kafka_tls_cert: Path | None = None  # PEM certificate: the Kafka listener speaks TLS
    kafka_tls_key: Path | None = None  # its private key (PEM)
    # Kafka's super.users: allowed everything on the Kafka port whatever the ACLs say
    kafka_super_users: tuple[str, ...] = ()
    export_enabled: bool = True  # TIDELOG_EXPORT=0: the message pages offer no export
    # a PostgreSQL DSN (wal_level=logical, replication rights): the dual-write page's cdc mode
    dualwrite_postgres: str | None = None
    registry: bool = True  # serve the schema registry's REST API (TIDELOG_REGISTRY)
    registry_port: int = 8081  # Confluent's default (TIDELOG_REGISTRY_PORT; 0: a free port)
    # an external schema registry's URL (TIDELOG_SCHEMA_REGISTRY): values are read with it
    schema_registry_url: str | None = None
    schema_registry_auth: str | None = None  # user:password (TIDELOG_SCHEMA_REGISTRY_AUTH)
    # single sign-on (brokerui.accounts.oidc): the OpenID Connect provider's issuer URL
    oidc_issuer: str | None = None
    oidc_name: str = "single sign-on"  # the login button's "Sign in with ..."
    oidc_client_id: str = ""
    oidc_client_secret: str = ""  # TIDELOG_OIDC_CLIENT_SECRET, or ..._SECRET_FILE
    oidc_scopes: str = "openid email profile"
    oidc_groups_claim: str = "groups"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        data_dir = _path(env.get("TIDELOG_DATA_DIR"), default=REPO_DIR / "data")
        cluster_url = _cluster_url(env.get("TIDELOG_CLUSTER", ""))
        cluster_config = _cluster_config(env.get("TIDELOG_CLUSTER_CONFIG", ""))
        clusters = _clusters(env.get("TIDELOG_CONFIG", ""), cluster_url, cluster_config)
        if not clusters[0].builtin:  # the default cluster is external: no local broker
            cluster_url, cluster_config = clusters[0].url, clusters[0].client_properties
        return cls(
            data_dir=data_dir,
            debug=_flag(env, "TIDELOG_DEBUG", default=False),
            demo=_flag(env, "TIDELOG_DEMO", default=True),
            http_port=_port(env, "TIDELOG_HTTP_PORT", default=8000),
            kafka_port=_port(env, "TIDELOG_KAFKA_PORT", default=9092),
            allowed_hosts=("127.0.0.1", "localhost", "[::1]")
            + _csv(env.get("TIDELOG_ALLOWED_HOSTS", "")),
            database_url=env.get("DATABASE_URL") or f"sqlite:///{data_dir / 'tidelog.sqlite3'}",
            redis_url=env.get("REDIS_URL") or None,
            secret_key=env.get("TIDELOG_SECRET_KEY") or None,
            cluster_url=cluster_url,
            cluster_config=cluster_config,
            clusters=clusters,
            kafka_listener=_flag(env, "TIDELOG_KAFKA_LISTENER", default=True),
            kafka_auto_create=_flag(env, "TIDELOG_KAFKA_AUTO_CREATE", default=True),
            kafka_default_partitions=_int(
                env, "TIDELOG_KAFKA_DEFAULT_PARTITIONS", default=1, lo=1, hi=10_000
            ),
            kafka_max_request_bytes=_int(
                env,
                "TIDELOG_KAFKA_MAX_REQUEST_BYTES",
                default=100 * 1024 * 1024,
                lo=1024,
                hi=2**31 - 1,
            ),
            kafka_sasl=_flag(env, "TIDELOG_KAFKA_SASL", default=False),
            kafka_super_users=_super_users(env.get("TIDELOG_KAFKA_SUPER_USERS", "")),
            export_enabled=_flag(env, "TIDELOG_EXPORT", default=True),
            dualwrite_postgres=env.get("TIDELOG_DUALWRITE_POSTGRES") or None,
            registry=_flag(env, "TIDELOG_REGISTRY", default=True),
            registry_port=_int(env, "TIDELOG_REGISTRY_PORT", default=8081, lo=0, hi=65535),
            schema_registry_url=_registry_url(env.get("TIDELOG_SCHEMA_REGISTRY", "")),
            schema_registry_auth=env.get("TIDELOG_SCHEMA_REGISTRY_AUTH") or None,
            **_tls_files(env),
            **_oidc(env),
        )


def _oidc(env: Mapping[str, str]) -> dict:
    """TIDELOG_OIDC_*: nothing when no issuer is named; with one, a client id and a secret (or a
    file holding it) are required."""
    issuer = env.get("TIDELOG_OIDC_ISSUER", "").strip()
    if not issuer:
        return {}
    if not issuer.startswith(("https://", "http://")):
        raise ConfigError(f"TIDELOG_OIDC_ISSUER must be an http(s) URL, not {issuer!r}")
    client_id = env.get("TIDELOG_OIDC_CLIENT_ID", "").strip()
    secret = env.get("TIDELOG_OIDC_CLIENT_SECRET", "")
    secret_file = env.get("TIDELOG_OIDC_CLIENT_SECRET_FILE", "").strip()
    if secret_file:
        try:
            secret = Path(secret_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"TIDELOG_OIDC_CLIENT_SECRET_FILE: cannot read it: {exc}") from None
    if not client_id or not secret:
        raise ConfigError(
            "TIDELOG_OIDC_ISSUER needs TIDELOG_OIDC_CLIENT_ID and TIDELOG_OIDC_CLIENT_SECRET "
            "(or TIDELOG_OIDC_CLIENT_SECRET_FILE)"
        )
    return {
        "oidc_issuer": issuer,
        "oidc_name": env.get("TIDELOG_OIDC_NAME", "").strip() or "single sign-on",
        "oidc_client_id": client_id,
        "oidc_client_secret": secret,
        "oidc_scopes": env.get("TIDELOG_OIDC_SCOPES", "").strip() or "openid email profile",
        "oidc_groups_claim": env.get("TIDELOG_OIDC_GROUPS_CLAIM", "").strip() or "groups",
    }


def _registry_url(value: str) -> str | None:
    value = value.strip()
    if not value:
        return None
    if not value.startswith(("http://", "https://")):
        raise ConfigError(f"TIDELOG_SCHEMA_REGISTRY={value!r}: expected an http:// or https:// URL")
    return value.rstrip("/")


def _path(value: str | None, *, default: Path) -> Path:
    if not value:
        return default
    return Path(value).expanduser().resolve()


def _flag(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    value = env.get(name)
    if value is None:
        return default
    value = value.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={value!r}: expected 1 or 0 (also true/false, yes/no, on/off)")


def _port(env: Mapping[str, str], name: str, *, default: int) -> int:
    value = env.get(name)
    if not value:
        return default
    try:
        port = int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r}: expected a TCP port number") from None
    if not 1 <= port <= 65535:
        raise ConfigError(f"{name}={port}: a TCP port is between 1 and 65535")
    return port


def _int(env: Mapping[str, str], name: str, *, default: int, lo: int, hi: int) -> int:
    value = env.get(name)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{name}={value!r}: expected a whole number") from None
    if not lo <= number <= hi:
        raise ConfigError(f"{name}={number}: expected a number between {lo:,} and {hi:,}")
    return number


def _tls_files(env: Mapping[str, str]) -> dict[str, Path | None]:
    """TIDELOG_KAFKA_TLS_CERT and TIDELOG_KAFKA_TLS_KEY: both or neither, and loadable."""
    cert = env.get("TIDELOG_KAFKA_TLS_CERT", "").strip()
    key = env.get("TIDELOG_KAFKA_TLS_KEY", "").strip()
    if not cert and not key:
        return {"kafka_tls_cert": None, "kafka_tls_key": None}
    if not cert or not key:
        given, missing = (
            ("TIDELOG_KAFKA_TLS_CERT", "TIDELOG_KAFKA_TLS_KEY")
            if cert
            else ("TIDELOG_KAFKA_TLS_KEY", "TIDELOG_KAFKA_TLS_CERT")
        )
        raise ConfigError(f"{given} is set but {missing} is not: TLS needs both (PEM files)")
    cert_path, key_path = _path(cert, default=REPO_DIR), _path(key, default=REPO_DIR)
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_path, key_path)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"TIDELOG_KAFKA_TLS_CERT={cert!r}, TIDELOG_KAFKA_TLS_KEY={key!r}: cannot load the "
            f"certificate and its key ({exc.strerror or exc}); both must be PEM files"
        ) from None
    return {"kafka_tls_cert": cert_path, "kafka_tls_key": key_path}


def _clusters(
    config_file: str, url: str | None, properties: Path | None
) -> tuple[ClusterEntry, ...]:
    """The console's clusters. With TIDELOG_CONFIG (a TOML file)::

        builtin = true              # the built-in broker, as "local" (the default: true)

        [clusters.prod]
        bootstrap = "kafka://kafka-1:9092,kafka-2:9092"
        client_properties = "/etc/tidelog/prod.properties"   # SASL, TLS (optional)

    the built-in broker first (when on), then the [clusters.NAME] tables in their order; the
    first is the default (the pages at /, and /c/NAME/ for every one). Without it,
    TIDELOG_CLUSTER alone (named "default") or the built-in broker alone."""
    config_file = config_file.strip()
    if not config_file:
        if url:
            return (ClusterEntry("default", url, properties),)
        return (ClusterEntry(BUILTIN),)
    what = f"TIDELOG_CONFIG={config_file!r}"
    path = Path(config_file).expanduser()
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{what}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what}: not TOML: {exc}") from None
    if url:
        raise ConfigError(f"{what}: name the clusters there, not also with TIDELOG_CLUSTER")
    unknown = set(doc) - {"builtin", "clusters"}
    if unknown:
        raise ConfigError(f"{what}: unknown settings {sorted(unknown)} (builtin, clusters)")
    builtin = doc.get("builtin", True)
    if not isinstance(builtin, bool):
        raise ConfigError(f"{what}: builtin = {builtin!r}: expected true or false")
    out = [ClusterEntry(BUILTIN)] if builtin else []
    tables = doc.get("clusters", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{what}: clusters must be tables, [clusters.NAME]")
    for name, table in tables.items():
        where = f"{what}, [clusters.{name}]"
        if not _CLUSTER_NAME.fullmatch(name) or name == BUILTIN:
            raise ConfigError(
                f"{where}: a cluster's name is 1-32 lower-case letters, digits, - and _ "
                f"(not {BUILTIN!r}, the built-in broker's)"
            )
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: expected a table with bootstrap = ...")
        extra = set(table) - {"bootstrap", "client_properties"}
        if extra:
            raise ConfigError(f"{where}: unknown settings {sorted(extra)}")
        bootstrap = str(table.get("bootstrap", ""))
        if not bootstrap.startswith("kafka://"):
            bootstrap = f"kafka://{bootstrap}" if bootstrap else ""
        try:
            cluster_url = _cluster_url(bootstrap)
        except ConfigError:
            raise ConfigError(
                f"{where}: bootstrap = {table.get('bootstrap')!r}: expected "
                "kafka://host:port[,host2:port]"
            ) from None
        if cluster_url is None:
            raise ConfigError(f"{where}: bootstrap = ... is missing")
        props = table.get("client_properties")
        props_path = None
        if props:
            props_path = (path.parent / Path(str(props)).expanduser()).resolve()
            if not props_path.is_file():
                raise ConfigError(f"{where}: client_properties = {props!r}: no such file")
        out.append(ClusterEntry(name, cluster_url, props_path))
    if not out:
        raise ConfigError(f"{what}: no clusters (builtin = false and no [clusters.NAME])")
    return tuple(out)


def _cluster_url(value: str) -> str | None:
    value = value.strip()
    if not value:
        return None
    scheme, _, servers = value.partition("://")
    hosts = [s for s in servers.rstrip("/").split(",") if s.strip()]
    if scheme != "kafka" or not hosts or any(not h.rpartition(":")[2].isdigit() for h in hosts):
        raise ConfigError(
            f"TIDELOG_CLUSTER={value!r}: expected kafka://host:port[,host2:port] "
            "(unset it to use the built-in broker)"
        )
    return value


def _cluster_config(value: str) -> Path | None:
    """The client properties file of the external cluster (``streams.cluster.connection``):
    its existence is checked now, its contents (and the secrets it names) when the console
    first connects, so that an error there is a page that says so, not a server that will
    not start."""
    value = value.strip()
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"TIDELOG_CLUSTER_CONFIG={value!r}: no such file (client properties: "
            "security.protocol=SASL_SSL, sasl.mechanism=..., one key=value per line)"
        )
    return path


def _super_users(value: str) -> tuple[str, ...]:
    from streams.acl.model import InvalidAcl, parse_super_users

    try:
        return parse_super_users(value)
    except InvalidAcl as exc:
        raise ConfigError(f"TIDELOG_KAFKA_SUPER_USERS: {exc}") from None


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def channel_layers(redis_url: str | None) -> dict:
    """Django's CHANNEL_LAYERS: in memory (one process), or Redis at `redis_url`.

    A socket's channel waits for its next message with BZPOPMIN, 5 s at a time (channels-redis's
    brpop_timeout), and redis-py 8 gives every read a 5-s socket_timeout by default, so an idle
    socket (a paused chart, a quiet panel) was torn down with 1011 every 5 s
    (django/channels_redis#422): the read gets the pop's 5 s and room beside them."""
    if not redis_url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": redis_url, "socket_timeout": 15}]},
        }
    }


def ensure_data_dir(data_dir: Path) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    return data_dir


def load_or_create_secret_key(data_dir: Path) -> str:
    """The key in `<data_dir>/.secret_key`, created (mode 0600) on first use.

    Written to a temporary file and hard-linked into place, so two processes starting at once
    agree on one key and no reader ever sees a half-written file.
    """
    path = data_dir / ".secret_key"
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    tmp = data_dir / f".secret_key.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, secrets.token_urlsafe(50).encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process won the race: use its key
    finally:
        tmp.unlink()
    return _read_secret(path)


def ensure_private_sqlite(database: dict) -> None:
    """Create the SQLite database file owner-only (0600) before Django opens it, and tighten an
    existing one that others can read: it holds sessions and API tokens.

    SQLite gives its journal and WAL files the database file's mode, so they follow. Other
    engines, and in-memory databases, are left alone.
    """
    if not database.get("ENGINE", "").endswith("sqlite3"):
        return
    name = str(database.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:"):
        return
    path = Path(name)
    if not path.parent.is_dir():
        return  # SQLite says "unable to open database file" on connect
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
    else:
        os.close(fd)  # an empty file is a valid new SQLite database


def _read_secret(path: Path) -> str:
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)  # a key readable by others is tightened, not trusted as is
    key = path.read_text(encoding="ascii").strip()
    if len(key) < 32:
        raise ConfigError(f"{path} holds a key shorter than 32 characters; delete it to renew")
    return key
