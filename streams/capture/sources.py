"""``CaptureSources``: change-data-capture sources run inside the broker's process (what the
console's Capture page starts, watches and stops), each one ``PostgresCapture`` on its own
thread writing through the broker's Kafka listener.

``start`` checks the source's setup synchronously (tables with primary keys, publication, slot,
topics; a problem is raised as ``CaptureError`` and nothing runs) and then streams on a daemon
thread until ``stop``, which flushes what was sent, confirms that position to PostgreSQL and
returns. A source whose stream fails (PostgreSQL gone, the log refusing a record) keeps its
status ``failed`` with the reason; its slot keeps the position, so starting it again loses
nothing.

``sources()`` reports each source as a ``SourceStatus``: its tables and slot, the LSN confirmed
to PostgreSQL, the lag in bytes (``pg_current_wal_lsn() - confirmed_flush_lsn`` of its slot,
asked of PostgreSQL at that moment; None when PostgreSQL cannot be reached) and in seconds (the
age of the oldest transaction received but not yet in the log), counts, schema changes and
every snapshot's progress (chunks, rows, "as of" LSN and log offset).

Thread-safety: every method may be called from any thread (one lock guards the table; a
source's capture is driven by its own thread; ``request_snapshot``/pause/resume are the
capture's thread-safe calls).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streams.capture.pgoutput import format_lsn
from streams.capture.postgres import CaptureError, PostgresCapture, split_table_name
from streams.capture.snapshot import SnapshotJob

NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
STATUS_TIMEOUT_S = 2


@dataclass(frozen=True)
class SnapshotStatus:
    table: str
    keys: int | None  # how many keys were asked for (None: the whole table)
    chunks: int
    rows_written: int
    rows_dropped: int  # read, but superseded by a change inside their chunk's window
    done: bool
    as_of_lsn: str | None  # the last chunk's high watermark (None: no chunk yet)
    as_of_offset: int | None  # the log offset of its last record acknowledged so far
    # a snapshot that went on after a restart: its last key and counters then (None: not
    # resumed; chunks - resumed_from["chunks"] were read since)
    resumed_from: dict[str, Any] | None = None


@dataclass(frozen=True)
class SourceStatus:
    name: str
    dsn: str  # with any password masked
    tables: list[str]
    slot: str
    publication: str
    topic_prefix: str  # topics are PREFIX.SCHEMA.TABLE
    topics: list[str]
    state: str  # "starting", "running", "stopped", "failed"
    error: str | None
    started_ms: int
    as_of_ms: int  # when these numbers were taken
    confirmed_lsn: str
    lag_bytes: int | None  # None: unknown, `lag_note` says why
    lag_note: str | None  # why there is no lag in bytes (no slot yet, PostgreSQL silent)
    lag_seconds: float
    transactions: int
    records: int
    skipped_records: int
    schema_changes: list[str]
    snapshots: list[SnapshotStatus]
    snapshots_paused: bool


def mask_dsn(dsn: str) -> str:
    """`dsn` with its password (``password=…`` or the ``user:…@`` of a URL) masked."""
    masked = re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", dsn)
    return re.sub(r"(postgres(?:ql)?://[^:/@]+:)[^@]*@", r"\1***@", masked)


class _Source:
    def __init__(self, name: str, dsn: str, tables: list[str], capture: PostgresCapture):
        self.name, self.dsn, self.tables, self.capture = name, dsn, tables, capture
        self.thread: threading.Thread | None = None
        self.error: str | None = None
        self.state = "starting"
        self.started_ms = int(time.time() * 1000)


class CaptureSources:
    """The capture sources of one broker. `bootstrap()` gives the broker's Kafka listener
    address (``HOST:PORT``), or None when it has none (then nothing can start)."""

    def __init__(self, bootstrap: Callable[[], str | None], *, start_timeout_s: float = 60.0):
        self._bootstrap = bootstrap
        self._start_timeout = start_timeout_s
        self._sources: dict[str, _Source] = {}
        self._lock = threading.Lock()

    def start(
        self, name: str, *, dsn: str, tables: Sequence[str], snapshot: bool = False
    ) -> SourceStatus:
        """Start capturing `tables` of the database at `dsn` as source `name` (its slot and
        publication are named ``tidelog_<name>``, its topics ``<name>.<schema>.<table>``).
        `snapshot`: also read the tables' current rows (DBLog chunks). Raises CaptureError
        for anything the user must fix; nothing runs then."""
        if not NAME.match(name or ""):
            raise CaptureError(
                f"source name {name!r}: use 1-63 lower-case letters, digits and _ "
                "(it names the replication slot)"
            )
        names = [t.strip() for t in tables if t.strip()]
        if not names:
            raise CaptureError("name at least one table (TABLE or SCHEMA.TABLE)")
        for table in names:
            split_table_name(table)
        if not dsn.strip():
            raise CaptureError("give the database's connection string (DSN)")
        bootstrap = self._bootstrap()
        if bootstrap is None:
            raise CaptureError(
                "capture writes through the broker's Kafka listener, which is off "
                "(TIDELOG_KAFKA_LISTENER)"
            )
        with self._lock:
            old = self._sources.get(name)
            if old is not None and old.state in ("starting", "running"):
                raise CaptureError(f"source {name} is already {old.state}")
            capture = PostgresCapture(
                dsn=dsn,
                tables=names,
                bootstrap=bootstrap,
                slot=f"tidelog_{name}",
                publication=f"tidelog_{name}",
                server=name,
                snapshot_tables=names if snapshot else (),
            )
            source = self._sources[name] = _Source(name, dsn, names, capture)
        source.thread = threading.Thread(
            target=self._run, args=(source,), name=f"capture-{name}", daemon=True
        )
        source.thread.start()
        if not capture.ready.wait(self._start_timeout) and source.error is None:
            capture.stop()
            source.state, source.error = "failed", "did not start in time"
        if source.error is not None:
            raise CaptureError(source.error)
        return self.status(name)

    def _run(self, source: _Source) -> None:
        try:
            source.state = "running" if source.capture.ready.is_set() else "starting"
            source.capture.run()
            source.state = "stopped"
        except Exception as exc:  # kept for the page: the source shows failed with the reason
            source.error = f"{type(exc).__name__}: {str(exc).strip()}"
            source.state = "failed"
        finally:
            source.capture.ready.set()  # a start() still waiting learns of the failure

    def stop(self, name: str, timeout_s: float = 60.0) -> SourceStatus:
        """Stop source `name`: what it sent is flushed and confirmed to PostgreSQL first."""
        source = self._get(name)
        source.capture.stop()
        if source.thread is not None:
            source.thread.join(timeout_s)
        return self.status(name)

    def request_snapshot(
        self, name: str, table: str, keys: Sequence[dict] | None = None
    ) -> SnapshotStatus:
        source = self._get(name)
        if source.state != "running":
            raise CaptureError(f"source {name} is {source.state}: start it first")
        return _snapshot_status(source.capture.request_snapshot(table, keys=keys))

    def pause_snapshots(self, name: str) -> None:
        self._get(name).capture.pause_snapshots()

    def resume_snapshots(self, name: str) -> None:
        self._get(name).capture.resume_snapshots()

    def sources(self) -> list[SourceStatus]:
        with self._lock:
            names = sorted(self._sources)
        return [self.status(n) for n in names]

    def status(self, name: str) -> SourceStatus:
        source = self._get(name)
        capture = source.capture
        if source.state == "starting" and capture.ready.is_set() and source.error is None:
            source.state = "running"
        stats = capture.stats
        lag_bytes, lag_note = _slot_lag_bytes(source.dsn, capture.slot)
        return SourceStatus(
            name=source.name,
            dsn=mask_dsn(source.dsn),
            tables=list(source.tables),
            slot=capture.slot,
            publication=capture.publication,
            topic_prefix=capture.server,
            topics=[f"{capture.server}.{'.'.join(split_table_name(t))}" for t in source.tables],
            state=source.state,
            error=source.error,
            started_ms=source.started_ms,
            as_of_ms=int(time.time() * 1000),
            confirmed_lsn=format_lsn(stats.confirmed_lsn),
            lag_bytes=lag_bytes,
            lag_note=lag_note,
            lag_seconds=capture.lag_seconds() if source.state == "running" else 0.0,
            transactions=stats.transactions,
            records=stats.records,
            skipped_records=stats.skipped_records,
            schema_changes=list(stats.schema_changes),
            snapshots=[_snapshot_status(j) for j in list(capture.snapshots)],
            snapshots_paused=capture.snapshots_paused,
        )

    def _get(self, name: str) -> _Source:
        with self._lock:
            source = self._sources.get(name)
        if source is None:
            raise CaptureError(f"no capture source named {name!r}")
        return source

    def close(self) -> None:
        with self._lock:
            sources = list(self._sources.values())
        for source in sources:
            source.capture.stop()
        for source in sources:
            if source.thread is not None:
                source.thread.join(30)


def _snapshot_status(job: SnapshotJob) -> SnapshotStatus:
    return SnapshotStatus(
        table=job.table,
        keys=len(job.keys) if job.keys is not None else None,
        chunks=job.chunks,
        rows_written=job.rows_written,
        rows_dropped=job.rows_dropped,
        done=job.done,
        as_of_lsn=format_lsn(job.as_of_lsn) if job.as_of_lsn else None,
        as_of_offset=job.as_of_offset,
        resumed_from=job.resumed_from,
    )


def _slot_lag_bytes(dsn: str, slot: str) -> tuple[int | None, str | None]:
    """How far the slot's confirmed position is behind PostgreSQL's WAL, in bytes; or None
    and why not."""
    import psycopg2

    try:
        conn = psycopg2.connect(dsn, connect_timeout=STATUS_TIMEOUT_S)
    except psycopg2.Error:
        return None, "PostgreSQL did not answer"
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint "
                "FROM pg_replication_slots WHERE slot_name = %s",
                (slot,),
            )
            row = cur.fetchone()
        if not row:
            return None, "no replication slot (yet)"
        if row[0] is None:
            return None, "the slot has confirmed nothing yet"
        return int(row[0]), None
    except psycopg2.Error as exc:
        return None, f"PostgreSQL refused: {str(exc).strip()}"
    finally:
        conn.close()


__all__ = ["CaptureSources", "SnapshotStatus", "SourceStatus", "mask_dsn"]
