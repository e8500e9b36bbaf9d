"""Console pages outside the areas: the overview at `/`.

The overview answers "is everything all right?" at a glance: totals, the topics taking the most
writes right now, and the consumer groups by status (Burrow's rules, worst first). It refreshes
itself every 10 s while the tab is visible (htmx polling, dropped while a refresh is still in
flight).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from brokerui import cluster_health
from brokerui.access.grants import GROUP, TOPIC
from brokerui.access.services import group_id as _group_id
from brokerui.access.services import visible_items
from brokerui.cluster import get_cluster
from brokerui.console.alerts import services as alert_services
from brokerui.console.groups import services as group_services
from brokerui.console.topics.stats import (
    RATE_WINDOW_MS,
    TopicRow,
    now_ms,
    snapshot_as_of,
    topic_rate,
)
from streams.errors import UnknownTopic

BUSIEST = 8
GROUPS = 10


def home(request: HttpRequest) -> HttpResponse:
    cluster = get_cluster()
    now = now_ms()
    everything = visible_items(request.user, TOPIC, cluster.list_topics(include_internal=True))
    topics = [t for t in everything if not t.internal]
    internal = [t for t in everything if t.internal]
    rows = [TopicRow(t, _rate(cluster, t, now)) for t in topics]
    busiest = sorted(
        rows, key=lambda r: (r.rate, r.topic.last_append_ms or -1, r.topic.name), reverse=True
    )[:BUSIEST]
    health = group_services.groups_health_read(source=group_services.health_source())
    groups = sorted(
        visible_items(request.user, GROUP, cluster.list_groups(), name=_group_id),
        key=lambda g: (-_rank(health.get(g.group_id)), -g.total_lag, g.group_id),
    )
    context = {
        "nav": "overview",
        "now_ms": now,
        "snapshot_ms": snapshot_as_of(everything),
        "topics": topics,
        "totals": {
            "topics": len(topics),
            "partitions": sum(t.partitions for t in topics),
            "records": sum(t.record_count for t in topics),
            "size": sum(t.size_bytes for t in topics),
            "rate": TopicRow(None, sum(r.rate for r in rows)).rate_text,
            "internal": len(internal),
            "internal_size": sum(t.size_bytes for t in internal),
        },
        "busiest": busiest,
        "groups": groups[:GROUPS],
        "group_count": len(groups),
        "health": health,
        "status_counts": group_services.status_counts(health),
        "alerts": alert_services.alerts_read(alerts=alert_services.alerts_source()),
        "behind": sum(1 for g in groups if g.fallen_behind),
        "total_lag": sum(g.total_lag for g in groups),
        "rate_window_s": RATE_WINDOW_MS // 1000,
        "cluster_health": cluster_health.snapshot(),  # [] with one cluster
    }
    if request.htmx and not request.htmx.history_restore_request:
        return render(request, "console/topics/partials/overview.html", context)
    return render(request, "console/home.html", context)


def _rank(health) -> int:
    return health.status.rank if health is not None else -1


def _rate(cluster, summary, now) -> float:
    try:
        return topic_rate(cluster, summary, now)
    except UnknownTopic:
        return 0.0
