"""The Cluster the web layer talks to, behind `streams.cluster`: the in-process broker's
(``LocalCluster``), or an external Kafka-protocol cluster (``KafkaCluster``) when
``TIDELOG_CLUSTER=kafka://host:port[,...]`` is set.

One ``KafkaCluster`` per process and URL, created on first use (its clients keep connections
open) and closed at interpreter exit. Thread-safe.
"""

from __future__ import annotations

import atexit
import threading

from django.conf import settings

from streams.cluster import LocalCluster

_lock = threading.Lock()
_external: dict[str, object] = {}


def get_cluster():
    """The process's Cluster: LocalCluster or KafkaCluster (same interface)."""
    url = getattr(settings, "TIDELOG_CLUSTER", None)
    if url:
        return external_cluster(url)
    from brokerui.broker import get_broker

    broker = get_broker()
    return LocalCluster(broker.store, broker.coordinator)


def is_external() -> bool:
    """True when the console works on an external cluster: local-only features (live metrics,
    segment files, the data directory) are not available."""
    return bool(getattr(settings, "TIDELOG_CLUSTER", None))


def cluster_context(request) -> dict:
    """Template context: ``external_cluster`` hides what only the built-in broker knows."""
    return {"external_cluster": is_external()}


def external_cluster(url: str):
    from streams.cluster.kafka import KafkaCluster

    with _lock:
        cluster = _external.get(url)
        if cluster is None:
            if not _external:
                atexit.register(close_external_clusters)
            cluster = _external[url] = KafkaCluster.from_url(url)
        return cluster


def close_external_clusters() -> None:
    with _lock:
        clusters = list(_external.values())
        _external.clear()
    for cluster in clusters:
        cluster.close()
