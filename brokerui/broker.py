"""The process-wide broker that the web layer talks to.

Started once, lazily, by the first `get_broker()` call (the ASGI entry point makes that call at
start-up), and closed at interpreter exit. Daphne turns SIGINT and SIGTERM into a normal exit, so
the broker's close (flush, recovery points, lock release) runs on those too.
"""

from __future__ import annotations

import atexit
import threading

from django.conf import settings

from streams.broker.runtime import Broker
from streams.protocol import ListenerConfig
from streams.protocol.security import MECHANISMS
from streams.schemas import RegistryConfig

_lock = threading.Lock()
_broker: Broker | None = None
_atexit_registered = False


def get_broker() -> Broker:
    global _broker, _atexit_registered
    with _lock:
        if _broker is None:
            broker = Broker.open(settings.TIDELOG_DATA_DIR, demo=settings.TIDELOG_DEMO)
            config = _listener_config(broker)
            if config is not None:
                broker.start_kafka_listener(config)  # closes the broker if it cannot start
            registry = _registry_config(broker)
            if registry is not None:
                broker.start_schema_registry(registry)  # closes the broker if it cannot start
            _broker = broker
            if not _atexit_registered:
                atexit.register(close_broker)
                _atexit_registered = True
        return _broker


def _listener_config(broker: Broker) -> ListenerConfig | None:
    """The Kafka listener on TIDELOG_KAFKA_PORT, unless TIDELOG_KAFKA_LISTENER=0: its admin
    changes go to the audit log; with TIDELOG_KAFKA_SASL it signs in the console's users, and
    with TIDELOG_KAFKA_TLS_CERT/_KEY it speaks TLS."""
    if not getattr(settings, "TIDELOG_KAFKA_LISTENER", True):
        return None
    from brokerui.kafkaport.adapters import ConsoleAuthenticator, KafkaAuditSink

    cert = getattr(settings, "TIDELOG_KAFKA_TLS_CERT", None)
    key = getattr(settings, "TIDELOG_KAFKA_TLS_KEY", None)
    sasl = getattr(settings, "TIDELOG_KAFKA_SASL", False)
    return ListenerConfig(
        port=settings.TIDELOG_KAFKA_PORT,
        auto_create_topics=settings.TIDELOG_KAFKA_AUTO_CREATE,
        default_partitions=settings.TIDELOG_KAFKA_DEFAULT_PARTITIONS,
        max_request_bytes=settings.TIDELOG_KAFKA_MAX_REQUEST_BYTES,
        tls_cert_file=str(cert) if cert else None,
        tls_key_file=str(key) if key else None,
        authenticator=ConsoleAuthenticator() if sasl else None,
        audit=KafkaAuditSink(broker),
        super_users=frozenset(getattr(settings, "TIDELOG_KAFKA_SUPER_USERS", ())),
    )


def _registry_config(broker: Broker) -> RegistryConfig | None:
    """The schema registry's REST API on TIDELOG_REGISTRY_PORT, unless TIDELOG_REGISTRY=0:
    the console's users sign in (viewers read, operators write), changes are audited."""
    if not getattr(settings, "TIDELOG_REGISTRY", True):
        return None
    from brokerui.kafkaport.adapters import RegistryAuditSink, RegistryConsoleAuthenticator

    return RegistryConfig(
        port=settings.TIDELOG_REGISTRY_PORT,
        authenticator=RegistryConsoleAuthenticator(),
        audit=RegistryAuditSink(broker),
    )


def registry_summary(broker: Broker) -> str:
    """One line saying where the schema registry is (printed at start-up)."""
    if broker.registry_address is None:
        return "Schema registry: off (TIDELOG_REGISTRY=0)"
    host, port = broker.registry_address
    return (
        f"Schema registry (Confluent's REST API) on http://{host}:{port}: the console's users "
        "and roles, HTTP Basic or an API token"
    )


def kafka_listener_summary(broker: Broker) -> str:
    """One line saying where the Kafka listener is and in which mode (printed at start-up)."""
    if broker.kafka_address is None:
        return "Kafka protocol: off (TIDELOG_KAFKA_LISTENER=0)"
    host, port = broker.kafka_address
    mode = broker.kafka_security_protocol
    open_ = "open: no authentication (TIDELOG_KAFKA_SASL=1 requires the console's users)"
    if mode == "PLAINTEXT":
        how = f"plaintext, {open_}"
    elif mode == "SSL":
        how = f"TLS, {open_}"
    else:
        tls = "TLS" if mode == "SASL_SSL" else "no TLS"
        how = f"SASL {', '.join(MECHANISMS)} with the console's users and roles, {tls}"
    return f"Kafka protocol on {host}:{port}: {mode} ({how})"


def open_broker() -> Broker | None:
    """The process's broker if it is open now (None: not opened, or closed); never opens it."""
    with _lock:
        return _broker


def close_broker() -> None:
    """Close the broker if one is running; the next `get_broker()` starts a new one."""
    global _broker
    with _lock:
        broker, _broker = _broker, None
    if broker is not None:
        broker.close()
