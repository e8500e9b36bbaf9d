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

_lock = threading.Lock()
_broker: Broker | None = None
_atexit_registered = False


def get_broker() -> Broker:
    global _broker, _atexit_registered
    with _lock:
        if _broker is None:
            _broker = Broker.open(
                settings.TIDELOG_DATA_DIR,
                demo=settings.TIDELOG_DEMO,
                kafka_listener=_listener_config(),
            )
            if not _atexit_registered:
                atexit.register(close_broker)
                _atexit_registered = True
        return _broker


def _listener_config() -> ListenerConfig | None:
    """The Kafka listener on TIDELOG_KAFKA_PORT, unless TIDELOG_KAFKA_LISTENER=0."""
    if not getattr(settings, "TIDELOG_KAFKA_LISTENER", True):
        return None
    return ListenerConfig(
        port=settings.TIDELOG_KAFKA_PORT,
        auto_create_topics=settings.TIDELOG_KAFKA_AUTO_CREATE,
        default_partitions=settings.TIDELOG_KAFKA_DEFAULT_PARTITIONS,
        max_request_bytes=settings.TIDELOG_KAFKA_MAX_REQUEST_BYTES,
    )


def close_broker() -> None:
    """Close the broker if one is running; the next `get_broker()` starts a new one."""
    global _broker
    with _lock:
        broker, _broker = _broker, None
    if broker is not None:
        broker.close()
