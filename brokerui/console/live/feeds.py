"""The sources of live data (the broker's metrics hub and panel jobs) and their wire format.

- `metrics_hub()`: the running broker's, or None when it has none (or on an external cluster);
- `panel_jobs()`: the broker's, or on an external cluster the process-wide jobs reading it;
- `embedded_jobs()` / `job_topics()`: the broker's stream jobs (None on an external cluster)
  and what the ``jobs`` scope draws of them;
- `encode_points()`: points as the browser gets them;
- `MetricsFanOut` / `PanelFanOut`: the relay deliveries, from one batch to the Channels groups
  of the scopes that draw it (see `scopes.route`).

The fan-outs run on the event loop only (called by `relay.Relay`).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable

from channels.layers import get_channel_layer

from brokerui.broker import get_broker
from brokerui.cluster import external_panel_jobs, is_external
from brokerui.console.live.scopes import NO_JOBS, JobTopics, Scope, learn_readers, route
from streams.broker.metrics import parse_series

POINTS_EVENT = "metrics.points"  # handled by MetricsConsumer.metrics_points
PANEL_EVENT = "panel.update"  # handled by PanelConsumer.panel_update
SEARCH_EVENT = "search.matches"  # handled by SearchConsumer.search_matches


def metrics_hub():
    """The broker's `MetricsHub`, or None when the broker runs without one (or the console
    works on an external cluster, TIDELOG_CLUSTER: no local broker, no live metrics)."""
    if is_external():
        return None
    return getattr(get_broker(), "metrics", None)


def panel_jobs():
    """The broker's `PanelJobs` (None when it runs without them), or on an external cluster
    (TIDELOG_CLUSTER) the jobs reading that cluster, started on first use."""
    if is_external():
        return external_panel_jobs()
    return getattr(get_broker(), "panels", None)


def embedded_jobs():
    """The broker's `EmbeddedJobs` (stream jobs in its process), or None on an external
    cluster (TIDELOG_CLUSTER: jobs run as their own workers there)."""
    if is_external():
        return None
    return getattr(get_broker(), "jobs", None)


def capture_sources():
    """The broker's `CaptureSources` (change data capture in its process), or None on an
    external cluster (TIDELOG_CLUSTER: run ``python -m streams.capture`` there)."""
    if is_external():
        return None
    return getattr(get_broker(), "capture", None)


def job_topics() -> JobTopics:
    """The embedded jobs' names and output topics (what the ``jobs`` scope draws)."""
    host = embedded_jobs()
    if host is None:
        return NO_JOBS
    statuses = host.jobs()
    return JobTopics(
        frozenset(s.name for s in statuses), frozenset(t for s in statuses for t in s.outputs)
    )


def as_row(point) -> list:
    """A point as a plain list [series, t, w, v, rev, partial] (what the channel layer
    carries; partial 1: the window is not final, its value so far)."""
    series, t, w, v, rev, partial = point
    return [series, int(t), int(w), float(v), int(rev), int(bool(partial))]


def encode_points(rows: Iterable[list]) -> dict:
    """``{"series": {name: [kind, parts]}, "points": [[name, t, w, v, rev, partial], …]}``."""
    rows = [r for r in rows if math.isfinite(r[3])]
    names = {r[0] for r in rows}
    meta = {}
    for name in names:
        kind, parts = parse_series(name)
        meta[name] = [kind, list(parts)]
    return {"series": meta, "points": rows}


class MetricsFanOut:
    """Sends each batch of the hub's points to the groups of the scopes that draw them."""

    def __init__(self, jobs: JobTopics = NO_JOBS) -> None:
        self.readers: dict[str, set[str]] = {}  # topic -> groups reading it, learned as we go
        self.jobs = jobs  # the stream jobs and their outputs (the jobs scope)

    async def __call__(self, points) -> None:
        rows = [as_row(p) for p in points]
        learn_readers((r[0] for r in rows), self.readers)
        by_group: dict[str, list] = defaultdict(list)
        for row in rows:
            for scope in route(row[0], self.readers, self.jobs):
                by_group[scope.group_name].append(row)
        layer = get_channel_layer()
        for group, batch in by_group.items():
            await layer.group_send(group, {"type": POINTS_EVENT, "points": batch})


def encode_update(update) -> dict:
    """A `PanelUpdate` as JSON-able data (results, watermark, late count, corrections…)."""
    data = _result(update)
    for name in ("results", "correction_log", "late_log"):
        data[name] = [_result(r) for r in data.get(name, ())]
    return _plain(data)


def _result(r) -> dict:
    """A dataclass or named tuple as a dict (one level: nested ones are converted too)."""
    if dataclasses.is_dataclass(r):
        r = dataclasses.asdict(r)
    elif hasattr(r, "_asdict"):
        r = r._asdict()
    return dict(r)


def _plain(value):
    """Keys as strings, tuples as lists, non-finite floats as None: what JSON can carry."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class PanelFanOut:
    """Sends each `PanelUpdate` to the group of its panel's scope."""

    async def __call__(self, update) -> None:
        group = Scope("panel", str(update.panel_id)).group_name
        await get_channel_layer().group_send(
            group, {"type": PANEL_EVENT, "update": encode_update(update)}
        )


class SearchFanOut:
    """Sends each batch of saved-search matches to the groups of their searches' pages."""

    async def __call__(self, matches: list[dict]) -> None:
        from brokerui.console.search.services import match_row

        by_group: dict[str, list] = defaultdict(list)
        for m in matches:
            if isinstance(m.get("query"), str):
                by_group[Scope("search", m["query"]).group_name].append(match_row(m))
        layer = get_channel_layer()
        for group, batch in by_group.items():
            await layer.group_send(group, {"type": SEARCH_EVENT, "matches": batch})
