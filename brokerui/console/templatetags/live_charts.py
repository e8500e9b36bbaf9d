"""`{% live_charts "topic" topic.name %}`: the live charts of a page (see static/js/live.js)."""

from __future__ import annotations

from django import template

from brokerui.cluster import is_external
from brokerui.console.live import feeds

register = template.Library()


@register.inclusion_tag("console/live/partials/charts.html")
def live_charts(scope: str, name: str = "") -> dict:
    return {
        "scope": scope,
        "name": name,
        "available": feeds.metrics_hub() is not None,
        "external": is_external(),  # TIDELOG_CLUSTER: live metrics are the built-in broker's
    }
