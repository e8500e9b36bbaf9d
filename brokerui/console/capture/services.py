"""Change data capture for operators: the capture sources running inside the broker's process
(``streams.capture.sources.CaptureSources``), their progress, and an operator's start, stop
and snapshot. Called alike by the console's views and the JSON API. Every action writes one
audit record through the `AuditSink` given:

===================  ===============================================================
action               before / after
===================  ===============================================================
capture.start        - / state, tables, slot, snapshot (DSN with its password masked)
capture.start.failed - / reason (a table without a primary key, PostgreSQL refused...)
capture.stop         state, confirmed LSN, records / state, confirmed LSN
capture.snapshot     - / table, keys (how many; none: the whole table)
===================  ===============================================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from brokerui.audit.services import Actor, AuditSink
from streams.capture.postgres import CaptureError
from streams.capture.sources import SnapshotStatus, SourceStatus

UNAVAILABLE = (
    "Capture sources run inside the built-in broker; on an external cluster (TIDELOG_CLUSTER) "
    "run them as their own process: python -m streams.capture postgres --dsn … --tables … "
    "--bootstrap HOST:PORT."
)


class CaptureHost(Protocol):
    """What the services need of ``streams.capture.sources.CaptureSources``."""

    def sources(self) -> list[SourceStatus]: ...

    def status(self, name: str) -> SourceStatus: ...

    def start(
        self, name: str, *, dsn: str, tables: Sequence[str], snapshot: bool = False
    ) -> SourceStatus: ...

    def stop(self, name: str) -> SourceStatus: ...

    def request_snapshot(
        self, name: str, table: str, keys: Sequence[dict] | None = None
    ) -> SnapshotStatus: ...


@dataclasses.dataclass(frozen=True)
class CaptureView:
    sources: list[SourceStatus]
    as_of_ms: int
    unavailable: str | None = None


def capture_read(*, host: CaptureHost | None, now_ms: int) -> CaptureView:
    """Every capture source with its progress; on an external cluster, none and why."""
    if host is None:
        return CaptureView([], now_ms, UNAVAILABLE)
    return CaptureView(host.sources(), now_ms)


def source_read(*, host: CaptureHost | None, name: str) -> SourceStatus:
    if host is None:
        raise CaptureError(UNAVAILABLE)
    return host.status(name)


def capture_start(
    *,
    host: CaptureHost | None,
    name: str,
    dsn: str,
    tables: Sequence[str],
    snapshot: bool,
    sink: AuditSink,
    actor: Actor,
) -> SourceStatus:
    """Start capture source `name` (audited; a refused start as ``capture.start.failed``)."""
    if host is None:
        raise CaptureError(UNAVAILABLE)
    target = f"capture {name}"
    try:
        status = host.start(name, dsn=dsn, tables=tables, snapshot=snapshot)
    except CaptureError as exc:
        actor.record(sink, "capture.start.failed", target, after={"reason": str(exc)})
        raise
    actor.record(
        sink,
        "capture.start",
        target,
        after={
            "state": status.state,
            "dsn": status.dsn,
            "tables": status.tables,
            "slot": status.slot,
            "snapshot": snapshot,
        },
    )
    return status


def capture_stop(*, host: CaptureHost | None, name: str, sink: AuditSink, actor: Actor):
    """Stop source `name` after it flushes and confirms what it sent (audited)."""
    if host is None:
        raise CaptureError(UNAVAILABLE)
    before = host.status(name)
    if before.state not in ("starting", "running"):
        raise CaptureError(f"source {name} is {before.state}, not running")
    after = host.stop(name)
    actor.record(
        sink,
        "capture.stop",
        f"capture {name}",
        before={
            "state": before.state,
            "confirmed_lsn": before.confirmed_lsn,
            "records": before.records,
        },  # fmt: skip
        after={"state": after.state, "confirmed_lsn": after.confirmed_lsn},
    )
    return after


def parse_keys(text: str, key_columns_hint: str = "") -> list[dict] | None:
    """Keys typed one per line as JSON objects (``{"id": 7}``); blank: None (the whole
    table). Raises CaptureError naming the bad line."""
    import json

    keys = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            key = json.loads(line)
        except ValueError as exc:
            raise CaptureError(f"line {n}: not JSON ({exc.msg}): {line.strip()!r}") from None
        if not isinstance(key, dict) or not key:
            raise CaptureError(f'line {n}: a key is a JSON object such as {{"id": 7}}')
        keys.append(key)
    return keys or None


def capture_snapshot(
    *,
    host: CaptureHost | None,
    name: str,
    table: str,
    keys_text: str,
    sink: AuditSink,
    actor: Actor,
) -> SnapshotStatus:
    """Queue a snapshot of `table` (or of the keys typed, one JSON object per line)."""
    if host is None:
        raise CaptureError(UNAVAILABLE)
    keys = parse_keys(keys_text)
    job = host.request_snapshot(name, table, keys)
    actor.record(
        sink,
        "capture.snapshot",
        f"capture {name}",
        after={"table": job.table, "keys": None if keys is None else len(keys)},
    )
    return job
