"""Runs of the dual-write race for the console: started in a background thread, read by the
page while they run.

A run is ``streams.eventsourcing.dualwrite.DualWriteRace`` in a scratch directory (its SQLite
files and its log), removed when the run ends: the direct mode, then the cdc mode when a
PostgreSQL is configured (``TIDELOG_DUALWRITE_POSTGRES``; its table, publication, slot and
topic are dropped after the run) or else the log mode; the outcome stays in memory (the last
``KEEP_RUNS`` runs of this server process). One run at a time: a second start while one runs is
refused (``RunBusy``), so the page cannot be used to load the server without bound. A run
changes nothing in the cluster (its log is its own), so it is not audited.

Thread-safety: every function may be called from any request thread.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import tempfile
import threading
import time
import uuid
from collections import OrderedDict

from streams.errors import TidelogError
from streams.eventsourcing.dualwrite import DualWriteRace, Interleaving, ModeResult, Progress

log = logging.getLogger(__name__)

KEEP_RUNS = 10
LOG_MODE = (
    "writes through the log: each writer appends to a Tidelog log (one partition, in a scratch "
    "directory), and two consumers apply it in order, one to the database, one to the index"
)


@dataclasses.dataclass(frozen=True)
class Through:
    """How the second half of a run goes through the log: ``cdc`` (PostgreSQL, logical
    decoding into the broker at `bootstrap`) or ``log`` (writers append to a scratch log);
    `label` says it on the page, with the reason when CDC is not used."""

    mode: str
    label: str
    dsn: str | None = None
    bootstrap: str | None = None

    @classmethod
    def cdc(cls, dsn: str, bootstrap: str) -> Through:
        where = _dsn_summary(dsn)
        return cls(
            "cdc",
            f"the database is PostgreSQL ({where}); each writer makes one write, an upsert into "
            f"a table; logical decoding carries the table's changes through the broker at "
            f"{bootstrap} into a compacted topic, and a consumer applies them to the index",
            dsn,
            bootstrap,
        )

    @classmethod
    def log(cls, reason: str) -> Through:
        return cls("log", f"{LOG_MODE} (not CDC: {reason})")


def _dsn_summary(dsn: str) -> str:
    """Host, port and database of a libpq DSN or URL — never its password."""
    try:
        from psycopg2.extensions import parse_dsn

        parts = parse_dsn(dsn)
    except Exception:  # noqa: BLE001 - a DSN psycopg2 cannot parse is shown as unparsed
        return "its DSN"
    return (
        f"{parts.get('host', 'local socket')}:{parts.get('port', '5432')}/{parts.get('dbname', '')}"
    )


def dualwrite_through() -> Through:
    """CDC when ``TIDELOG_DUALWRITE_POSTGRES`` names a PostgreSQL and the broker's Kafka
    listener is on in plaintext (the capture's producer connects to it); else the log."""
    from django.conf import settings

    dsn = getattr(settings, "TIDELOG_DUALWRITE_POSTGRES", None)
    if not dsn:
        return Through.log("no PostgreSQL configured; set TIDELOG_DUALWRITE_POSTGRES to use one")
    from brokerui.cluster import current

    cluster_url = current().url
    if cluster_url:
        return Through.cdc(dsn, cluster_url.removeprefix("kafka://"))
    from brokerui.broker import get_broker

    broker = get_broker()
    if broker.kafka_address is None:
        return Through.log("the Kafka listener is off (TIDELOG_KAFKA_LISTENER=0)")
    if broker.kafka_security_protocol != "PLAINTEXT":
        return Through.log(f"the Kafka listener needs {broker.kafka_security_protocol}")
    host, port = broker.kafka_address
    return Through.cdc(dsn, f"{host}:{port}")


class RunBusy(TidelogError):
    code = "run_busy"


@dataclasses.dataclass(frozen=True)
class RunView:
    """A run as the page shows it, at `as_of_ms`."""

    id: str
    keys: int
    updates: int
    state: str  # running, done, failed
    progress: Progress
    results: dict[str, ModeResult]  # "direct" and "through"
    through: Through
    error: str
    started_ms: int
    finished_ms: int | None
    as_of_ms: int

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def progress_percent(self) -> float:
        p = self.progress
        return 100.0 * p.updates_done / p.updates_total if p.updates_total else 0.0

    @property
    def elapsed_ms(self) -> int:
        return (self.finished_ms or self.as_of_ms) - self.started_ms


class _Run:
    def __init__(self, race: DualWriteRace, keys: int, updates: int, through: Through, now_ms):
        self.id = uuid.uuid4().hex[:12]
        self.race, self.keys, self.updates, self.through = race, keys, updates, through
        self.state, self.error = "running", ""
        self.results: dict[str, ModeResult] = {}
        self.started_ms, self.finished_ms = now_ms, None


_RUNS: OrderedDict[str, _Run] = OrderedDict()
_LOCK = threading.Lock()


def _now_ms() -> int:
    return int(time.time() * 1000)


def dualwrite_start(
    *,
    keys: int,
    updates: int,
    interleaving: Interleaving | None = None,
    through: Through | None = None,
) -> str:
    """Start a run (direct mode, then through the log) in a background thread; returns its id.
    `interleaving`: how the writers' writes interleave (default: real threads racing with
    random pauses); `through`: CDC or the log (default: ``dualwrite_through()``). Raises
    ``RunBusy`` if one is running, ``InvalidConfig`` for sizes out of range."""
    through = through or dualwrite_through()
    directory = tempfile.mkdtemp(prefix="tidelog-dualwrite-")
    try:
        race = DualWriteRace(
            directory, keys=keys, updates=updates, interleaving=interleaving, seed=time.time_ns()
        )
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    with _LOCK:
        busy = next((r for r in _RUNS.values() if r.state == "running"), None)
        if busy is not None:
            shutil.rmtree(directory, ignore_errors=True)
            raise RunBusy(
                f"a run is under way (started {busy.keys} keys × {busy.updates} updates); "
                "wait for it to finish"
            )
        run = _Run(race, keys, updates, through, _now_ms())
        _RUNS[run.id] = run
        while len(_RUNS) > KEEP_RUNS:
            _RUNS.popitem(last=False)
    threading.Thread(
        target=_execute, args=(run, directory), name=f"dualwrite-{run.id}", daemon=True
    ).start()
    return run.id


def _execute(run: _Run, directory: str) -> None:
    try:
        run.results["direct"] = run.race.run_direct()
        if run.through.mode == "cdc":
            run.results["through"] = run.race.run_cdc(run.through.dsn, run.through.bootstrap)
        else:
            run.results["through"] = run.race.run_log()
        run.state = "done"
    except Exception as exc:
        log.exception("dual-write run %s failed", run.id)
        run.error, run.state = f"{type(exc).__name__}: {exc}", "failed"
    finally:
        run.finished_ms = _now_ms()
        shutil.rmtree(directory, ignore_errors=True)


def dualwrite_read(*, run_id: str) -> RunView:
    """The run `run_id` (KeyError: no such run, or forgotten)."""
    with _LOCK:
        run = _RUNS[run_id]
    return RunView(
        run.id,
        run.keys,
        run.updates,
        run.state,
        run.race.progress(),
        dict(run.results),
        run.through,
        run.error,
        run.started_ms,
        run.finished_ms,
        _now_ms(),
    )


def dualwrite_overview() -> tuple[RunView | None, Through]:
    """The latest run (None: none yet) and how a new run would go through the log."""
    with _LOCK:
        last = next(reversed(_RUNS), None)
    return (None if last is None else dualwrite_read(run_id=last)), dualwrite_through()


def dualwrite_wait(*, run_id: str, timeout_s: float) -> RunView:
    """Poll until the run ends or `timeout_s` passes (for tests and scripts)."""
    deadline = time.monotonic() + timeout_s
    while True:
        view = dualwrite_read(run_id=run_id)
        if not view.running or time.monotonic() > deadline:
            return view
        time.sleep(0.05)
