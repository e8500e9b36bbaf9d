"""Writes and reads of users' metric panels: the database row, the broker's panel job, the audit.

A panel is a `MetricPanel` row (the user's, with its `PanelSpec` as JSON) plus a job under
`MetricPanel.panel_id` in `feeds.panel_jobs()`: the built-in broker's, or on an external cluster
the process-wide jobs reading it. Jobs live in memory, so they are re-ensured when a
panel's page is opened and for every saved panel at start-up (`ensure_saved_panels`). A spec's
field paths are checked against a sample of the topic's records before it is saved. Creating,
changing and deleting a panel is audited through the `sink` the caller gives; it changes
nothing else in the cluster.

Thread-safety: as Django's ORM (one call per request or worker thread).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django.db import DatabaseError, connections

from brokerui.audit import services as audit
from brokerui.cluster import get_cluster
from brokerui.console.live import feeds
from brokerui.console.live.models import MetricPanel
from streams.broker.metrics.downsample import ChartFeed

log = logging.getLogger(__name__)


def _spec_class():
    from streams.processing.panels import PanelSpec

    return PanelSpec


def spec_of(panel: MetricPanel):
    return _spec_class().from_dict(panel.spec)


def _target(panel: MetricPanel) -> str:
    return f"panel {panel.pk} {panel.name}"


def panel_check_fields(*, spec, accept_partial: bool = False) -> int:
    """Check `spec`'s field paths against the newest records of its topic (through the
    cluster's public reads, so an external cluster too); returns how many were sampled (0: an
    empty topic, nothing to check). Raises FieldsDoNotFit when no sampled record fits a field,
    or some do not and `accept_partial` is false (UnknownTopic, ClusterUnavailable)."""
    from brokerui.schemas import console_reading
    from streams.errors import FieldsDoNotFit
    from streams.processing.panels import ClusterSource
    from streams.processing.panels.sample import check_sample, sample_values

    values = sample_values(ClusterSource(get_cluster()), spec.topic)
    problems = check_sample(spec, values, console_reading().value(spec.topic))
    if problems and not (accept_partial and not any(p.fatal for p in problems)):
        raise FieldsDoNotFit(problems)
    return len(values)


def panel_create(
    *,
    user,
    name: str,
    spec,
    sink: audit.AuditSink,
    accept_partial: bool = False,
) -> MetricPanel:
    """Save a validated `PanelSpec` as `user`'s panel (its fields checked against a sample of
    the topic: `panel_check_fields`), start its job, audit it."""
    spec.validate()
    panel_check_fields(spec=spec, accept_partial=accept_partial)
    panel = MetricPanel.objects.create(user=user, name=name, spec=spec.to_dict())
    ensure_panel(panel)
    audit.record(
        user, "panel.create", _target(panel), after={"name": name, **panel.spec}, sink=sink
    )
    return panel


def panel_update(
    *,
    panel: MetricPanel,
    user,
    name: str,
    spec,
    sink: audit.AuditSink,
    accept_partial: bool = False,
) -> MetricPanel:
    """Change a panel's name and spec (checked as by `panel_create`); its job restarts with
    the new spec."""
    spec.validate()
    panel_check_fields(spec=spec, accept_partial=accept_partial)
    before = {"name": panel.name, **panel.spec}
    panel.name, panel.spec = name, spec.to_dict()
    panel.save(update_fields=["name", "spec", "updated_at"])
    jobs = feeds.panel_jobs()
    if jobs is not None:
        jobs.remove(panel.panel_id)
    ensure_panel(panel)
    audit.record(
        user,
        "panel.update",
        _target(panel),
        before=before,
        after={"name": name, **panel.spec},
        sink=sink,
    )
    return panel


def panel_delete(*, panel: MetricPanel, user, sink: audit.AuditSink) -> None:
    jobs = feeds.panel_jobs()
    if jobs is not None:
        jobs.remove(panel.panel_id)
    before = {"name": panel.name, **panel.spec}
    target = _target(panel)
    panel.delete()
    audit.record(user, "panel.delete", target, before=before, sink=sink)


def ensure_panel(panel: MetricPanel) -> bool:
    """Make sure the panel's job runs; False when the broker has no panel jobs."""
    jobs = feeds.panel_jobs()
    if jobs is None:
        return False
    jobs.ensure(panel.panel_id, spec_of(panel))
    return True


def ensure_saved_panels() -> int:
    """Start the jobs of every saved panel (at start-up); returns how many were started."""
    started = 0
    for panel in MetricPanel.objects.all():
        try:
            started += ensure_panel(panel)
        except Exception:  # one broken panel must not keep the others (or the server) down
            log.exception("panel %s could not be started", panel.pk)
    return started


def panel_snapshot(panel: MetricPanel) -> dict | None:
    """The panel's current state as JSON-able data, or None without panel jobs."""
    jobs = feeds.panel_jobs()
    if jobs is None:
        return None
    ensure_panel(panel)
    return feeds.encode_update(jobs.snapshot(panel.panel_id))


def metrics_backfill(
    *, hub, chart: ChartFeed, match: Callable[[str], bool], now_ms: int, since_ms: int | None
) -> tuple[int, list[list]]:
    """A live chart's history at its resolution, from `since_ms` (None: its whole range), up
    to the open windows so far, as rows for the socket; the chart's live windows continue
    from it. Returns (start, rows)."""
    since = chart.since(now_ms=now_ms, since_ms=since_ms)
    history = hub.history(since, resolution_ms=chart.plan.source_ms, match=match, open_windows=True)
    return since, [feeds.as_row(p) for p in chart.backfill(history)]


def start_saved_panels() -> threading.Thread:
    """`ensure_saved_panels` in a thread of its own (the server starts meanwhile; a database
    that is not migrated yet only means no panels)."""

    def run() -> None:
        try:
            count = ensure_saved_panels()
        except DatabaseError as exc:
            log.warning("saved metric panels not started: %s", exc)
        else:
            if count:
                log.info("started %d saved metric panel(s)", count)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, name="start-saved-panels", daemon=True)
    thread.start()
    return thread
