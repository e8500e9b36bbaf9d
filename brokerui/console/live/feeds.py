"""The sources of live data (the broker's metrics hub and panel jobs) and their wire format.

- `metrics_hub()`: the running broker's, or None when it has none (or on an external cluster);
- `panel_jobs()`: the broker's, or on an external cluster the process-wide jobs reading it;
- `embedded_jobs()` / `job_topics()`: the broker's stream jobs (None on an external cluster)
  and what the ``jobs`` scope draws of them;
- `encode_points()` / `points_message()`: points as the browser gets them;
- `MetricsFanOut` / `PanelFanOut`: the relay deliveries, from one batch to the sockets of the
  scopes that draw it (see `scopes.route`). Panels go through their Channels groups; metrics
  through a `ChartStream` per scope and resolution, which downsamples and encodes a batch once
  and hands the text straight to its sockets (`PointsSink`), all of them on this process's
  loop: the chart windows never pass through the channel layer.

The fan-outs run on the event loop only (called by `relay.Relay`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections import defaultdict, deque
from collections.abc import Iterable
from typing import Protocol

from channels.layers import get_channel_layer

from brokerui.broker import get_broker
from brokerui.cluster import external_panel_jobs, is_external
from brokerui.console.live.scopes import NO_JOBS, JobTopics, Scope, learn_readers, route
from streams.broker.metrics import parse_series
from streams.broker.metrics.downsample import ChartFeed, Plan

log = logging.getLogger(__name__)

POINTS_EVENT = "metrics.points"  # a ChartStream's event, handed to MetricsConsumer.metrics_points
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


class PointsSink(Protocol):
    """A socket drawing a `ChartStream` (`MetricsConsumer`): takes each event of the windows
    a batch changed, on the event loop, and must not wait on its page (a page that falls
    behind is sent the newest state later: `LiveConsumer.send_live`)."""

    async def metrics_points(self, event: dict) -> None: ...


class ChartStream:
    """The live windows of one scope at one resolution, shared by every socket drawing it.

    A socket's chart only differs from another's of the same scope and range by where its
    history started, and each live message carries the changed windows' whole values so far,
    so one `ChartFeed` per (scope, plan) serves them all: the fan-out feeds it once per batch
    and encodes what changed once, as the JSON text each socket sends with its own seq
    (`LiveConsumer.send_live`). With 20 dashboards open that is one downsample and one
    ``json.dumps`` per batch instead of twenty, on the loop the broker's threads share.

    The stream and its sockets live on one event loop (the hub's relay is per loop), so the
    text goes to them by a call (`publish`), not through the channel layer: no copy of the
    event per socket, no layer round trip (with Redis, one per socket and batch), no dispatch.

    It starts empty and is seeded by its first subscriber's backfill (a whole range read from
    history, `seed`); the batches that arrive meanwhile are kept and replayed into it (a
    window seen twice replaces its value, a partial never replaces its closed window), so a
    final window is never missed. Runs on the event loop only.
    """

    PENDING_MAX = 100_000  # points kept while the first backfill reads history

    def __init__(self, scope: Scope, plan: Plan) -> None:
        self.scope, self.plan = scope, plan
        self.sinks: dict[PointsSink, None] = {}  # in the order they attached
        self._chart: ChartFeed | None = None
        self._pending: deque = deque(maxlen=self.PENDING_MAX)

    @property
    def users(self) -> int:
        return len(self.sinks)

    async def publish(self, event: dict) -> None:
        """Hand `event` to every socket of the stream; one failing socket spoils no other."""
        for sink in list(self.sinks):
            try:
                await sink.metrics_points(event)
            except Exception as exc:  # noqa: BLE001 - e.g. a socket closed, not yet detached
                log.info("live metrics: a socket did not take its points (%s)", exc)

    @property
    def seeded(self) -> bool:
        return self._chart is not None

    def seed(self, chart: ChartFeed) -> dict | None:
        """Take `chart`, just backfilled over the whole range (the first subscriber's; nobody
        else feeds it from now on), unless seeded already; returns the event of what the
        batches kept meanwhile changed, or None."""
        if self._chart is not None:
            return None
        self._chart = chart
        pending = list(self._pending)
        self._pending.clear()
        return self.event(chart.live(pending))

    def live(self, points: list) -> dict | None:
        """Feed a batch of the hub's points (of this scope); the channel-layer event of the
        windows they changed, or None (nothing changed, or not seeded yet)."""
        if self._chart is None:
            self._pending.extend(points)
            return None
        return self.event(self._chart.live(points))

    def event(self, windows: list) -> dict | None:
        rows = [as_row(p) for p in windows]
        if not rows:
            return None
        body = points_message("points", self.plan, rows)
        return {"type": POINTS_EVENT, "body": body, "latest": max(r[1] for r in rows)}


def points_message(kind: str, plan: Plan, rows: list[list], **extra) -> str:
    """A ``backfill`` or ``points`` message as JSON text (without its seq: `send_live`)."""
    message = {
        "type": kind,
        "resolution": plan.step_ms,
        "range_ms": plan.range_ms,
        **extra,
        **encode_points(rows),
    }
    return json.dumps(message, separators=(",", ":"), allow_nan=False)


class MetricsFanOut:
    """Feeds each batch of the hub's points to the `ChartStream`s of the scopes that draw
    them, and hands what changed to each stream's sockets."""

    def __init__(self, jobs: JobTopics = NO_JOBS) -> None:
        self.readers: dict[str, set[str]] = {}  # topic -> groups reading it, learned as we go
        self.jobs = jobs  # the stream jobs and their outputs (the jobs scope)
        self.streams: dict[tuple[Scope, Plan], ChartStream] = {}

    def attach(self, scope: Scope, plan: Plan, sink: PointsSink) -> ChartStream:
        """The stream of (`scope`, `plan`), which hands its windows to `sink` from now on."""
        stream = self.streams.get((scope, plan))
        if stream is None:
            stream = self.streams[(scope, plan)] = ChartStream(scope, plan)
        stream.sinks[sink] = None
        return stream

    def detach(self, stream: ChartStream, sink: PointsSink) -> None:
        """`sink` takes no more windows; the last one to go ends the stream."""
        stream.sinks.pop(sink, None)
        if not stream.sinks and self.streams.get((stream.scope, stream.plan)) is stream:
            del self.streams[(stream.scope, stream.plan)]

    async def seed(self, stream: ChartStream, chart: ChartFeed) -> None:
        event = stream.seed(chart)
        if event is not None:
            await stream.publish(event)

    async def __call__(self, points) -> None:
        learn_readers((p.series for p in points), self.readers)
        by_scope: dict[Scope, list] = defaultdict(list)
        for point in points:
            if math.isfinite(point.v):
                for scope in route(point.series, self.readers, self.jobs):
                    by_scope[scope].append(point)
        for stream in list(self.streams.values()):
            batch = by_scope.get(stream.scope)
            event = stream.live(batch) if batch else None
            if event is not None:
                await stream.publish(event)


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
