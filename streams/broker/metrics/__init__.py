"""Broker metrics: counters sampled every second, windowed with `streams.processing`, kept in
``__metrics`` and pushed to subscribers. See `hub.MetricsHub` and `series` for the names."""

from streams.broker.metrics.hub import METRICS_TOPIC, MetricsHub, series_matching
from streams.broker.metrics.series import (
    GAUGE_KINDS,
    MINUTE_MS,
    RATE_KINDS,
    SECOND_MS,
    Point,
    parse_series,
    series,
)

__all__ = [
    "GAUGE_KINDS",
    "METRICS_TOPIC",
    "MINUTE_MS",
    "RATE_KINDS",
    "SECOND_MS",
    "MetricsHub",
    "Point",
    "parse_series",
    "series",
    "series_matching",
]
