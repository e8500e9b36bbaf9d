"""The Cluster the web layer talks to, behind `streams.cluster`: the in-process broker's
(``LocalCluster``), or an external Kafka-protocol cluster (``KafkaCluster``) when
``TIDELOG_CLUSTER=kafka://host:port[,...]`` is set.

Its client properties (SASL, TLS: ``TIDELOG_CLUSTER_CONFIG``, `streams.cluster.connection`)
are read when the console first connects; a file that cannot be read, a secret it names that is
not there or settings that cannot connect are `ClusterUnavailable` (a 503 page saying which
line, never the secret) and are read again on the next request, once fixed.

One ``KafkaCluster`` per process and URL, created on first use (its clients keep connections
open) and closed at interpreter exit. On an external cluster the users' metric panels run in one
process-wide ``PanelJobs`` reading it through a ``ClusterSource`` over a ``KafkaCluster`` of their
own (`external_panel_jobs`: started on first use, closed at exit). Thread-safe.
"""

from __future__ import annotations

import atexit
import threading
from typing import TYPE_CHECKING

from django.conf import settings

from streams.cluster import Cluster, LocalCluster

if TYPE_CHECKING:
    from streams.cluster.kafka import KafkaCluster

_lock = threading.Lock()
_external: dict[str, KafkaCluster] = {}
_panels: dict[str, tuple] = {}  # url -> (PanelJobs, the KafkaCluster it reads through)


def get_cluster() -> Cluster:
    """The process's Cluster: LocalCluster or KafkaCluster (same interface)."""
    url = getattr(settings, "TIDELOG_CLUSTER", None)
    if url:
        return external_cluster(url)
    from brokerui.broker import get_broker

    broker = get_broker()
    return LocalCluster(broker.store, broker.coordinator, broker.transactions)


def is_external() -> bool:
    """True when the console works on an external cluster: local-only features (live metrics,
    segment files, the data directory) are not available."""
    return bool(getattr(settings, "TIDELOG_CLUSTER", None))


def cluster_context(request) -> dict:
    """Template context: ``external_cluster`` hides what only the built-in broker knows."""
    return {"external_cluster": is_external()}


def client_properties() -> dict[str, str]:
    """The external cluster's client properties (TIDELOG_CLUSTER_CONFIG), {} when not set.
    Raises ClusterUnavailable with the reason when they cannot be used."""
    path = getattr(settings, "TIDELOG_CLUSTER_CONFIG", None)
    if not path:
        return {}
    from streams.cluster.connection import load_client_properties
    from streams.errors import ClusterUnavailable, InvalidConfig

    try:
        return load_client_properties(path, what="TIDELOG_CLUSTER_CONFIG")
    except InvalidConfig as exc:
        raise ClusterUnavailable(f"the cluster's connection settings: {exc}") from None


def _key(url: str) -> str:
    return f"{url} {getattr(settings, 'TIDELOG_CLUSTER_CONFIG', None) or ''}"


def external_cluster(url: str) -> KafkaCluster:
    from streams.cluster.kafka import KafkaCluster

    with _lock:
        cluster = _external.get(_key(url))
        if cluster is None:
            conf = client_properties()  # raises: nothing is cached, the next request retries
            if not _external and not _panels:
                atexit.register(close_external_clusters)
            cluster = _external[_key(url)] = KafkaCluster.from_url(url, client_config=conf)
        return cluster


def external_panel_jobs():
    """The panel jobs over the external cluster (TIDELOG_CLUSTER), started on first use; None
    when the console runs on the built-in broker (whose own jobs read its store)."""
    url = getattr(settings, "TIDELOG_CLUSTER", None)
    if not url:
        return None
    from streams.cluster.kafka import KafkaCluster
    from streams.processing.panels import ClusterSource, PanelJobs

    with _lock:
        running = _panels.get(_key(url))
        if running is None:
            conf = client_properties()
            if not _external and not _panels:
                atexit.register(close_external_clusters)
            # clients of their own: a panel's backfill never queues the console's browsing
            # behind it on the shared reader, and the cluster sees who reads (client.id)
            cluster = KafkaCluster.from_url(
                url, client_config={**conf, "client.id": "tidelog-panels"}
            )
            from brokerui.schemas import console_reading

            jobs = PanelJobs(ClusterSource(cluster), reading=console_reading())
            running = _panels[_key(url)] = (jobs.start(), cluster)
        return running[0]


def close_external_clusters() -> None:
    with _lock:
        panels, clusters = list(_panels.values()), list(_external.values())
        _panels.clear()
        _external.clear()
    for jobs, cluster in panels:  # the jobs' thread first: it reads through the cluster
        jobs.close()
        cluster.close()
    for cluster in clusters:
        cluster.close()
