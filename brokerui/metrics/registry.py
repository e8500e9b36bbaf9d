"""The process's metrics registry: the cluster collector, the engine's instruments and
prometheus_client's process/platform/GC collectors, in one ``CollectorRegistry`` of Tidelog's own
(not prometheus_client's global one, so importing a library that registers there adds nothing)."""

from __future__ import annotations

import threading

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
)

from brokerui.metrics.collector import ClusterCollector
from brokerui.metrics.instruments import PrometheusInstruments
from streams import telemetry

_lock = threading.Lock()
_registry: CollectorRegistry | None = None
_instruments: PrometheusInstruments | None = None


def _cluster():
    from brokerui.cluster import get_cluster

    return get_cluster()


def registry() -> CollectorRegistry:
    global _registry, _instruments
    with _lock:
        if _registry is None:
            reg = CollectorRegistry()
            ProcessCollector(registry=reg)
            PlatformCollector(registry=reg)
            GCCollector(registry=reg)
            reg.register(ClusterCollector(_cluster))
            _instruments = PrometheusInstruments(reg)
            _registry = reg
        return _registry


def install_instruments() -> PrometheusInstruments:
    """Make the engine report to this registry's instruments (``streams.telemetry``)."""
    registry()
    telemetry.install(_instruments)
    return _instruments
