"""Views derived from an events topic by stream jobs.

A view is a job (``streams.jobs``) that reads the events topic from offset 0 and writes what
it derives somewhere: a SQLite table through ``SqliteView`` (``Stream.foreach``), or another
topic (a running aggregate ``.to(topic)``). The job runner is at-least-once, so a sink outside
the log must be idempotent: ``SqliteView`` stores each aggregate's last applied version in the
same SQLite transaction as the rows it changes and skips an event it already applied. Because
events of an aggregate are in one partition, in version order, a view never sees version n+1
before n (``ViewGap`` if it does: the view missed events, rebuild it).

Rebuilding a view is running its job into an empty store from offset 0; adding a view later is
the same thing — the log holds the whole history (see ``catch_up``).

Thread-safety: a ``SqliteView`` serialises its writes with a lock (one job task per partition
may call ``apply`` from the runner's thread; readers may read from others).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

from streams.errors import TidelogError
from streams.eventsourcing.store import Event
from streams.jobs import JSON, TEXT, Job
from streams.jobs.runner import Runner
from streams.log.store import LogStore


class ViewGap(TidelogError):
    """A view got an aggregate's event out of version order: it missed events."""

    code = "view_gap"


class SqliteView:
    """A read model in SQLite, kept by ``apply`` (subclasses write ``project``, ``SCHEMA`` and
    ``TABLES``).

    `path` is a database file (":memory:" for a private in-memory one)."""

    SCHEMA = ""
    TABLES: tuple[str, ...] = ()

    def __init__(self, path: str = ":memory:"):
        self.path = path
        self.lock = threading.Lock()
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(
            "CREATE TABLE IF NOT EXISTS es_versions"
            " (aggregate TEXT PRIMARY KEY, version INTEGER NOT NULL);" + self.SCHEMA
        )

    def project(self, db: sqlite3.Connection, event: Event) -> None:
        """Change the rows for `event` (inside the transaction ``apply`` opened)."""
        raise NotImplementedError

    def apply(self, key: object, value: object, ts: int) -> bool:
        """Apply one event (a ``Stream.foreach`` function); False if it was applied already."""
        if value is None:
            return False
        event = Event.from_json(value)  # type: ignore[arg-type]
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                row = self.db.execute(
                    "SELECT version FROM es_versions WHERE aggregate = ?", (event.aggregate,)
                ).fetchone()
                have = row[0] if row else 0
                if event.version <= have:
                    self.db.execute("ROLLBACK")
                    return False
                if event.version != have + 1:
                    raise ViewGap(
                        f"{event.aggregate}: event version {event.version} after {have}: the "
                        "view missed events; rebuild it from offset 0"
                    )
                self.project(self.db, event)
                self.db.execute(
                    "INSERT INTO es_versions (aggregate, version) VALUES (?, ?)"
                    " ON CONFLICT (aggregate) DO UPDATE SET version = excluded.version",
                    (event.aggregate, event.version),
                )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return True

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self.lock:
            return self.db.execute(sql, params).fetchall()

    def dump(self) -> dict[str, list[tuple]]:
        """The rows of every table in ``TABLES`` and the versions, sorted: what two builds of
        a view are compared by."""
        with self.lock:
            return {
                t: sorted(self.db.execute(f'SELECT * FROM "{t}"').fetchall())
                for t in (*self.TABLES, "es_versions")
            }

    def close(self) -> None:
        self.db.close()


def view_job(name: str, topic: str, apply: Callable[[object, object, int], object]) -> Job:
    """A job named `name` that feeds every event of `topic` to `apply` (e.g. a view's)."""
    job = Job(name)
    job.stream(topic, key=TEXT, value=JSON).foreach(apply)
    return job


def catch_up(job: Job, store: LogStore, coordinator=None) -> int:
    """Run `job` until it has read every event there is; returns the events read. Without a
    `coordinator` (``streams.groups.GroupCoordinator``) it starts at the log start every time —
    right for a ``SqliteView`` (idempotent) being built or rebuilt; a job with state (a
    running aggregate) needs the coordinator, which keeps its committed offsets between runs."""
    runner = Runner(job, store, coordinator=coordinator)
    try:
        return runner.run_until_idle()
    finally:
        runner.close()
