"""The clusters the web layer talks to, behind `streams.cluster`: the in-process broker's
(``LocalCluster``) and any number of external Kafka-protocol clusters (``KafkaCluster``), each
named (``TIDELOG_CONFIG``'s ``[clusters.NAME]``, or ``TIDELOG_CLUSTER`` alone as ``default``;
``brokerui.config._clusters``).

Which one a request works on is the *current* cluster: the default (the first) unless the
request's path is ``/c/NAME/...``, where `ClusterMiddleware` makes NAME current for the request
(`using`) and gives it a URLconf of its own (`urlconf_for`), so every ``reverse()`` and ``{% url
%}`` of that request carries the prefix: pages, forms and API paths stay on their cluster.
`get_cluster()`, `is_external()`, `external_panel_jobs()` and `current()` answer for the
current cluster.

An external cluster's client properties (SASL, TLS: ``client_properties`` of its table, or
``TIDELOG_CLUSTER_CONFIG``; `streams.cluster.connection`) are read when the console first
connects to it; a file that cannot be read, a secret it names that is not there or settings
that cannot connect are `ClusterUnavailable` (a 503 page saying which line, never the secret)
and are read again on the next request, once fixed.

One ``KafkaCluster`` per process and cluster, created on first use (its clients keep
connections open, with their own timeout: an unreachable cluster slows only its own pages) and
closed at interpreter exit; the same for each external cluster's metric panels
(`external_panel_jobs`). Thread-safe.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import sys
import threading
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING

from django.conf import settings

from brokerui.config import BUILTIN, ClusterEntry
from streams.cluster import Cluster, LocalCluster

if TYPE_CHECKING:
    from streams.cluster.kafka import KafkaCluster

PREFIX = "c"  # /c/NAME/...: a cluster's pages
_lock = threading.Lock()
_external: dict[tuple, KafkaCluster] = {}
_panels: dict[tuple, tuple] = {}  # key -> (PanelJobs, the KafkaCluster it reads through)
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("cluster", default=None)
_urlconfs: dict[str, str] = {}


# ====================================================================== which cluster


def entries() -> tuple[ClusterEntry, ...]:
    """Every cluster of the console, the default first."""
    listed = tuple(getattr(settings, "TIDELOG_CLUSTERS", None) or (ClusterEntry(BUILTIN),))
    url = getattr(settings, "TIDELOG_CLUSTER", None)
    if url and listed[0].url != url:  # TIDELOG_CLUSTER alone (or set over the list)
        props = getattr(settings, "TIDELOG_CLUSTER_CONFIG", None)
        return (ClusterEntry("default", url, props),)
    if not url and not listed[0].builtin:  # the default cluster was set to the built-in one
        return (ClusterEntry(BUILTIN), *[e for e in listed if not e.builtin])
    return listed


def find(name: str) -> ClusterEntry | None:
    return next((e for e in entries() if e.name == name), None)


def current() -> ClusterEntry:
    """The cluster the current request (or `using` block) works on."""
    all_ = entries()
    name = _current.get()
    if name is not None:
        for entry in all_:
            if entry.name == name:
                return entry
    return all_[0]


def is_default(entry: ClusterEntry) -> bool:
    return entry.name == entries()[0].name


@contextlib.contextmanager
def using(name: str | None) -> Iterator[None]:
    """Make cluster `name` current inside the block (None: the default)."""
    token = _current.set(name)
    try:
        yield
    finally:
        _current.reset(token)


def get_cluster() -> Cluster:
    """The current cluster: LocalCluster or KafkaCluster (same interface)."""
    entry = current()
    if not entry.builtin:
        return external_cluster(entry)
    from brokerui.broker import get_broker

    broker = get_broker()
    return LocalCluster(broker.store, broker.coordinator, broker.transactions)


def is_external() -> bool:
    """True when the current cluster is an external one: local-only features (live metrics,
    segment files, the data directory, jobs, capture) are not available there."""
    return not current().builtin


def has_builtin() -> bool:
    """Whether the built-in broker is one of the clusters (else none is opened)."""
    return any(e.builtin for e in entries())


def cluster_context(request) -> dict:
    """Template context: ``external_cluster`` hides what only the built-in broker knows;
    ``clusters`` and ``current_cluster`` draw the switcher."""
    entry = current()
    return {
        "external_cluster": not entry.builtin,
        "current_cluster": entry.name,
        "clusters": [
            {"name": e.name, "url": home_url(e), "external": not e.builtin} for e in entries()
        ],
    }


def home_url(entry: ClusterEntry) -> str:
    """The overview of `entry`: / for the default cluster, /c/NAME/ for every other."""
    return "/" if is_default(entry) else f"/{PREFIX}/{entry.name}/"


# ====================================================================== URLs


def urlconf_for(name: str) -> str:
    """The dotted name of a URLconf serving cluster `name` under /c/NAME/ (made once per
    name, as a module in sys.modules), with the cluster-less routes (sign-in, /metrics)
    where they are."""
    with _lock:
        dotted = _urlconfs.get(name)
        if dotted is None:
            from django.urls import include, path

            from brokerui import urls as root

            dotted = f"brokerui._cluster_urls_{name.replace('-', '_')}"
            module = types.ModuleType(dotted)
            module.urlpatterns = [  # type: ignore[attr-defined]
                *root.shared_patterns,
                path(f"{PREFIX}/{name}/", include(list(root.cluster_patterns))),
            ]
            for handler in ("handler400", "handler403", "handler404", "handler500"):
                setattr(module, handler, getattr(root, handler))
            sys.modules[dotted] = module
            _urlconfs[name] = dotted
        return dotted


def split_path(path: str) -> tuple[str | None, str]:
    """(NAME, the rest) of a path under /c/NAME/; (None, path) for any other."""
    head = f"/{PREFIX}/"
    if path.startswith(head):
        name, sep, rest = path[len(head) :].partition("/")
        if sep and name:
            return name, "/" + rest
    return None, path


def is_api_path(path: str) -> bool:
    """A JSON API path, on any cluster (/api/v1/..., /c/NAME/api/v1/...)."""
    return split_path(path)[1].startswith("/api/")


# ====================================================================== external clusters


def client_properties(entry: ClusterEntry | None = None) -> dict[str, str]:
    """The external cluster's client properties, {} when it has none. Raises
    ClusterUnavailable with the reason when they cannot be used."""
    entry = entry or current()
    path = entry.client_properties
    if not path:
        return {}
    from streams.cluster.connection import load_client_properties
    from streams.errors import ClusterUnavailable, InvalidConfig

    what = f"cluster {entry.name}'s client_properties" if not is_default(entry) else (
        "TIDELOG_CLUSTER_CONFIG"
    )  # fmt: skip
    try:
        return load_client_properties(path, what=what)
    except InvalidConfig as exc:
        raise ClusterUnavailable(f"the cluster's connection settings: {exc}") from None


def _key(entry: ClusterEntry) -> tuple:
    return (entry.name, entry.url, str(entry.client_properties or ""))


def external_cluster(entry: ClusterEntry) -> KafkaCluster:
    from streams.cluster.kafka import KafkaCluster

    with _lock:
        cluster = _external.get(_key(entry))
        if cluster is None:
            conf = client_properties(entry)  # raises: nothing is cached, the next request retries
            if not _external and not _panels:
                atexit.register(close_external_clusters)
            assert entry.url is not None  # an external cluster's
            cluster = KafkaCluster.from_url(entry.url, client_config=conf)
            _external[_key(entry)] = cluster
        return cluster


def external_panel_jobs():
    """The panel jobs over the current external cluster, started on first use; None on the
    built-in broker (whose own jobs read its store)."""
    entry = current()
    if entry.builtin:
        return None
    from streams.cluster.kafka import KafkaCluster
    from streams.processing.panels import ClusterSource, PanelJobs

    with _lock:
        running = _panels.get(_key(entry))
        if running is None:
            conf = client_properties(entry)
            if not _external and not _panels:
                atexit.register(close_external_clusters)
            # clients of their own: a panel's backfill never queues the console's browsing
            # behind it on the shared reader, and the cluster sees who reads (client.id)
            assert entry.url is not None  # an external cluster's
            cluster = KafkaCluster.from_url(
                entry.url, client_config={**conf, "client.id": "tidelog-panels"}
            )
            from brokerui.schemas import console_reading

            jobs = PanelJobs(ClusterSource(cluster), reading=console_reading())
            running = _panels[_key(entry)] = (jobs.start(), cluster)
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
