"""The Cluster the web layer talks to: the in-process broker's, behind `streams.cluster`."""

from __future__ import annotations

from brokerui.broker import get_broker
from streams.cluster import LocalCluster


def get_cluster() -> LocalCluster:
    broker = get_broker()
    return LocalCluster(broker.store, broker.coordinator)
