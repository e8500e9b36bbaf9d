"""How Tidelog connects to an external cluster: client properties in librdkafka's vocabulary.

The properties file is Kafka's ``client.properties`` (what ``--command-config`` takes), with
librdkafka's names, e.g.::

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.username=tidelog-console
    sasl.password=${env:TIDELOG_CLUSTER_PASSWORD}
    ssl.ca.location=/etc/tidelog/cluster-ca.pem
    ssl.endpoint.identification.algorithm=https

A value may name where the secret is instead of holding it, as Kafka's config providers do:
``${env:NAME}`` (an environment variable) or ``${file:/path}`` (a file's contents, the trailing
newline dropped). `read_client_properties` resolves them; `redacted` gives a configuration
fit for a page, a log line or the audit log (every secret as ``[hidden]``).

`check_client_properties` refuses, with one clear sentence, what would otherwise fail later and
less clearly: an unknown security protocol or SASL mechanism, SASL without a user, a CA or
certificate file that is not there. Every client Tidelog makes for a cluster (the console's
admin, producer and reader, panels, the consumer-groups command, job workers, kafka-python's
admin for OffsetDelete) is made with the same properties.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import ssl
import threading
from collections.abc import Mapping
from pathlib import Path

from streams.errors import InvalidConfig

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# properties whose values are secrets: never shown, logged or audited
SECRET_KEYS = frozenset(
    {
        "sasl.password",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.keystore.password",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "sasl.jaas.config",
    }
)
HIDDEN = "[hidden]"
_FILES = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")
_REFERENCE = re.compile(r"\$\{(env|file):([^}]+)\}")


def read_client_properties(path: str | os.PathLike, *, what: str = "") -> dict[str, str]:
    """The properties of the file at `path`: ``key=value`` (or ``key: value``) lines, ``#``
    and ``!`` comments, ``${env:NAME}`` and ``${file:/path}`` resolved. Raises InvalidConfig
    saying which line (or which reference) is wrong; a secret's value is never in the message.
    `what` names the setting that gave the path, for the message."""
    where = what or str(path)
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidConfig(where, str(path), exc.strerror or str(exc)) from None
    out: dict[str, str] = {}
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=") if "=" in line else line.partition(":")
        key = key.strip()
        if not sep or not key:
            raise InvalidConfig(f"{where}, line {n}", line[:40], "expected key=value")
        out[key] = _resolve(key, value.strip(), f"{where}, line {n}")
    return out


def _resolve(key: str, value: str, where: str) -> str:
    def one(m: re.Match) -> str:
        kind, name = m.group(1), m.group(2).strip()
        if kind == "env":
            found = os.environ.get(name)
            if found is None:
                raise InvalidConfig(where, key, f"the environment variable {name} is not set")
            return found
        try:
            return Path(name).read_text(encoding="utf-8").removesuffix("\n")
        except OSError as exc:
            raise InvalidConfig(where, key, f"{name}: {exc.strerror or exc}") from None

    return _REFERENCE.sub(one, value)


def check_client_properties(conf: Mapping[str, str], *, what: str = "the cluster's settings"):
    """Refuse (InvalidConfig) settings that cannot connect, each with one sentence."""
    protocol = conf.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise InvalidConfig(
            f"{what}: security.protocol", protocol, f"expected one of {', '.join(PROTOCOLS)}"
        )
    mechanism = (conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "").upper()
    if protocol.startswith("SASL"):
        mechanism = mechanism or "GSSAPI"
        if mechanism not in SASL_MECHANISMS:
            raise InvalidConfig(
                f"{what}: sasl.mechanism",
                mechanism,
                f"expected one of {', '.join(SASL_MECHANISMS)}",
            )
        if mechanism != "OAUTHBEARER" and not conf.get("sasl.username"):
            raise InvalidConfig(
                f"{what}: sasl.username", "", f"{mechanism} needs a user and a password"
            )
    for key in _FILES:
        path = conf.get(key)
        if path and not Path(path).is_file():
            raise InvalidConfig(f"{what}: {key}", path, "no such file")
    algorithm = conf.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None and algorithm.lower() not in ("https", "none"):
        raise InvalidConfig(
            f"{what}: ssl.endpoint.identification.algorithm", algorithm, "expected https or none"
        )


def load_client_properties(path: str | os.PathLike, *, what: str = "") -> dict[str, str]:
    """The properties of the file at `path`, read (`read_client_properties`) and checked
    (`check_client_properties`): what every entry point (console, CLI, workers) calls."""
    conf = read_client_properties(path, what=what)
    check_client_properties(conf, what=what or str(path))
    return conf


def redacted(conf: Mapping[str, str]) -> dict[str, str]:
    """`conf` with every secret replaced by ``[hidden]`` (for pages, logs, the audit log)."""
    return {k: (HIDDEN if k in SECRET_KEYS else v) for k, v in conf.items()}


def hide_secrets(text: str, conf: Mapping[str, str]) -> str:
    """`text` (an error from a client, say) with any secret of `conf` in it hidden."""
    for key in SECRET_KEYS:
        secret = conf.get(key)
        if secret and len(secret) >= 3:
            text = text.replace(secret, HIDDEN)
    return text


class _HideSecrets(logging.Filter):
    """Rewrites a log record holding a known secret (kafka-python logs its whole configuration,
    password included, at DEBUG when a client starts)."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def add(self, conf: Mapping[str, str]) -> None:
        with self._lock:
            self._secrets |= {v for k, v in conf.items() if k in SECRET_KEYS and v and len(v) >= 3}

    def filter(self, record: logging.LogRecord) -> bool:
        if self._secrets:
            text = record.getMessage()
            hidden = text
            for secret in self._secrets:
                hidden = hidden.replace(secret, HIDDEN)
            if hidden != text:
                record.msg, record.args = hidden, None
        return True


_LOG_FILTER = _HideSecrets()


def hide_secrets_in_logs(conf: Mapping[str, str], *loggers: str) -> None:
    """Keep `conf`'s secrets out of what the named loggers write (a filter on each, once)."""
    _LOG_FILTER.add(conf)
    for name in loggers:
        logger = logging.getLogger(name)
        if _LOG_FILTER not in logger.filters:
            logger.addFilter(_LOG_FILTER)


def tls_refusal(conf: Mapping[str, str], timeout_s: float = 5.0) -> str | None:
    """Why the first bootstrap server's certificate is not trusted, as OpenSSL says it
    ("certificate has expired", "self-signed certificate", "Hostname mismatch..."), from a
    TLS handshake of our own with the same CA and host name check: librdkafka says only
    "certificate verify failed". None when that handshake succeeds, or cannot be made."""
    if not str(conf.get("security.protocol", "")).upper().endswith("SSL"):
        return None
    first = str(conf.get("bootstrap.servers", "")).split(",")[0].strip()
    host, _, port = first.rpartition(":")
    if not host or not port.isdigit():
        return None
    host = host.strip("[]")
    try:
        context = ssl.create_default_context(cafile=conf.get("ssl.ca.location") or None)
        context.check_hostname = conf.get("ssl.endpoint.identification.algorithm", "https") != (
            "none"
        )
        with socket.create_connection((host, int(port)), timeout=timeout_s) as raw:
            with context.wrap_socket(raw, server_hostname=host):
                return None
    except ssl.SSLCertVerificationError as exc:
        return exc.verify_message or str(exc)
    except (OSError, ValueError):  # unreachable, or a CA file OpenSSL cannot read: not this
        return None
