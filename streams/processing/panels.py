"""Topic aggregation jobs: the live numbers behind the console's user-defined panels.

A ``PanelSpec`` says what to compute over one topic's JSON records (an aggregation of a field,
grouped by another, in tumbling/hopping/sliding/session windows). ``PanelJobs`` runs one
``WindowOperator`` per panel over every partition of the topic, read straight from the
``LogStore`` by one daemon thread, and hands each poll's new emissions to subscribers as a
``PanelUpdate``; ``snapshot`` gives a page that opens later the latest result per window.

Time: with ``time_field`` the job runs in event time (the field holds epoch milliseconds or an
ISO-8601 string), each topic partition is an input partition of the operator, and a partition
that sends nothing for ``IDLE_TIMEOUT_MS`` stops holding the watermark back; if every partition
is quiet the watermark waits for new records, as event time must. Without ``time_field`` the
job uses *processing time as the broker saw it*: each record's log timestamp (its append time),
and once the job has read everything there is, the watermark follows the clock (minus the
out-of-orderness). A backfill then lands in the windows its records were written in instead
of piling into the current one (no fake spike after a restart), and quiet topics still close
their windows on time.

Jobs emit ``current`` results (every update, so a chart moves as records arrive, then one
``final`` emission per window); within one poll only the latest emission per window is kept.
Records that are not JSON, lack a field, or hold a non-number where a number is needed count
as ``parse_errors`` and are skipped.

Thread-safety: every public method may be called from any thread. The set of jobs is guarded
by one lock and each job's state by its own (held while it polls, at most ``READ_BUDGET``
records per partition); subscriber callbacks run on the jobs thread, outside the locks, and
must not block.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from streams.errors import InvalidConfig, OffsetOutOfRange, TidelogError, UnknownPanel
from streams.processing.aggregates import (
    AggregateSpec,
    Count,
    Max,
    Mean,
    Min,
    Quantile,
    Sum,
)
from streams.processing.operator import WindowOperator, WindowResult, wall_clock_ms
from streams.processing.windows import Hopping, Session, Sliding, Tumbling

log = logging.getLogger(__name__)

AGGREGATIONS = ("count", "sum", "min", "max", "mean", "p50", "p95", "p99")
WINDOWS = ("tumbling", "hopping", "sliding", "session")
IDLE_TIMEOUT_MS = 5_000
MIN_SIZE_MS = 100
MAX_SIZE_MS = 24 * 3600_000
MAX_WINDOWS_PER_EVENT = 100  # hopping: size / step
MAX_DELAY_MS = 3600_000  # lateness and out-of-orderness
READ_BATCH = 1000  # records per read call
READ_BUDGET = 5_000  # records per partition per poll: a backlog neither starves other panels
# nor holds the job's lock (which ``snapshot`` waits for) for long
SNAPSHOT_WINDOWS = 10_000  # latest emissions kept per panel (also bounded by backfill age)

_MISSING = object()
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _aggregate(name: str) -> AggregateSpec:
    return {
        "count": Count, "sum": Sum, "min": Min, "max": Max, "mean": Mean,
    }.get(name, lambda: Quantile(int(name[1:]) / 100))()


@dataclass(frozen=True)
class PanelSpec:
    """What one panel computes. ``validate`` (and ``from_dict``) raise ``InvalidConfig`` whose
    ``key`` is the offending field's name."""

    topic: str
    aggregation: str  # one of AGGREGATIONS
    value_field: str | None = None  # dotted JSON path ("total", "items.0.qty"); not for count
    group_by: str | None = None  # dotted JSON path; its value as text is the key; None -> "all"
    window: str = "tumbling"  # one of WINDOWS
    size_ms: int = 10_000
    step_ms: int | None = None  # hopping only
    gap_ms: int | None = None  # session only
    time_field: str | None = None  # dotted path to epoch ms or ISO-8601; None -> log timestamp
    lateness_ms: int = 0  # grace
    out_of_orderness_ms: int = 0

    def validate(self) -> None:
        if not isinstance(self.topic, str) or not self.topic.strip():
            raise InvalidConfig("topic", self.topic, "name a topic")
        if self.aggregation not in AGGREGATIONS:
            raise InvalidConfig("aggregation", self.aggregation,
                                f"must be one of {', '.join(AGGREGATIONS)}")
        if self.aggregation != "count" and self.value_field is None:
            raise InvalidConfig("value_field", None,
                                f"{self.aggregation} needs a field to aggregate")
        for name in ("value_field", "group_by", "time_field"):
            _check_path(name, getattr(self, name))
        if self.window not in WINDOWS:
            raise InvalidConfig("window", self.window, f"must be one of {', '.join(WINDOWS)}")
        if self.window != "session":
            _check_int("size_ms", self.size_ms, MIN_SIZE_MS, MAX_SIZE_MS)
        if self.window == "hopping":
            if self.step_ms is None:
                raise InvalidConfig("step_ms", None, "a hopping window needs a step")
            _check_int("step_ms", self.step_ms, 1, self.size_ms)
            if self.size_ms / self.step_ms > MAX_WINDOWS_PER_EVENT:
                raise InvalidConfig("step_ms", self.step_ms,
                                    f"size/step may be at most {MAX_WINDOWS_PER_EVENT}")
        if self.window == "session":
            if self.gap_ms is None:
                raise InvalidConfig("gap_ms", None, "a session window needs a gap")
            _check_int("gap_ms", self.gap_ms, MIN_SIZE_MS, MAX_SIZE_MS)
        _check_int("lateness_ms", self.lateness_ms, 0, MAX_DELAY_MS)
        _check_int("out_of_orderness_ms", self.out_of_orderness_ms, 0, MAX_DELAY_MS)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> PanelSpec:
        """Build and validate a spec from form or JSON data: numbers may be strings, empty
        strings and None mean "not set" (the default), and keys that are not fields are
        ignored."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, object] = {}
        for name, value in d.items():
            if name not in names:
                continue
            if isinstance(value, str):
                value = value.strip()
                if value == "" and name not in ("topic", "aggregation"):
                    continue
            if value is None and names[name].default is not None:
                continue  # "not given": keep the default (size, lateness, ...)
            if name.endswith("_ms") and value is not None:
                value = _coerce_int(name, value)
            kwargs[name] = value
        for required in ("topic", "aggregation"):
            if required not in kwargs:
                raise InvalidConfig(required, None, "is required")
        spec = cls(**kwargs)
        spec.validate()
        return spec

    def operator(self, clock: Callable[[], int]) -> WindowOperator:
        """The window operator this spec runs (validated first)."""
        self.validate()
        window = {
            "tumbling": lambda: Tumbling(self.size_ms),
            "hopping": lambda: Hopping(self.size_ms, self.step_ms),
            "sliding": lambda: Sliding(self.size_ms),
            "session": lambda: Session(self.gap_ms),
        }[self.window]()
        return WindowOperator(
            window, {self.aggregation: _aggregate(self.aggregation)},
            out_of_orderness_ms=self.out_of_orderness_ms, grace_ms=self.lateness_ms,
            idle_timeout_ms=IDLE_TIMEOUT_MS if self.time_field else None,
            emit="current", late="drop", clock=clock,
        )


class PanelUpdate(NamedTuple):
    """What a panel's job produced. The counts are totals since the job (re)started."""

    panel_id: str
    results: list[WindowResult]  # new emissions since the previous update (latest per window)
    watermark: int | None
    late_count: int
    corrections: int
    records_read: int
    parse_errors: int
    error: str | None = None  # set when the job stopped (e.g. its topic was deleted)


def _check_path(name: str, path: object) -> None:
    if path is None:
        return
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        raise InvalidConfig(name, path, "must be a dotted JSON path such as total or items.0.qty")


def _check_int(name: str, value: object, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfig(name, value, "must be a whole number of milliseconds")
    if not lo <= value <= hi:
        raise InvalidConfig(name, value, f"must be between {lo} and {hi} ms")


def _coerce_int(name: str, value: object) -> object:
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise InvalidConfig(name, value, "must be a whole number of milliseconds") from None
        if not number.is_integer():
            raise InvalidConfig(name, value, "must be a whole number of milliseconds")
        return int(number)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# ------------------------------------------------------------------------------ record parsing


def extract(doc: object, path: str) -> object:
    """The value at a dotted path (list items by index), or ``_MISSING``."""
    for part in path.split("."):
        if isinstance(doc, dict):
            doc = doc.get(part, _MISSING)
        elif isinstance(doc, list):
            try:
                doc = doc[int(part)]
            except (ValueError, IndexError):
                return _MISSING
        else:
            return _MISSING
        if doc is _MISSING:
            return _MISSING
    return doc


def _number(value: object) -> float | None:
    if isinstance(value, bool) or value is None or value is _MISSING:
        return None
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def parse_time(value: object) -> int | None:
    """Epoch milliseconds from a number or an ISO-8601 string (naive means UTC)."""
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return (dt - _EPOCH) // _MS  # exact: no float rounding of the milliseconds
    number = _number(value)
    return None if number is None else int(number)


class _Parser:
    """Turns one record into ``(key, value, event_time)`` or None (a parse error)."""

    def __init__(self, spec: PanelSpec):
        self.value_field = spec.value_field if spec.aggregation != "count" else None
        self.group_by = spec.group_by
        self.time_field = spec.time_field

    def __call__(self, raw: bytes | None, log_ts: int) -> tuple[str, object, int] | None:
        try:
            doc = json.loads(raw) if raw is not None else _MISSING
        except ValueError:
            return None
        if doc is _MISSING:
            return None
        value = None
        if self.value_field is not None:
            value = _number(extract(doc, self.value_field))
            if value is None:
                return None
        key = "all"
        if self.group_by is not None:
            group = extract(doc, self.group_by)
            if group is _MISSING:
                return None
            key = group if isinstance(group, str) else json.dumps(group, sort_keys=True)
        t = log_ts
        if self.time_field is not None:
            t = parse_time(extract(doc, self.time_field))
            if t is None:
                return None
        return key, value, t


# ------------------------------------------------------------------------------ jobs


class _Job:
    def __init__(self, store, panel_id: str, spec: PanelSpec, clock: Callable[[], int],
                 backfill_ms: int):
        self.panel_id, self.spec, self.clock = panel_id, spec, clock
        self.store = store
        self.backfill_ms = backfill_ms
        self.operator = spec.operator(clock)
        self.parse = _Parser(spec)
        self.positions: dict[int, int] = {}
        self.records_read = 0
        self.parse_errors = 0
        self.error: str | None = None
        self.latest: dict[tuple[object, int, int], WindowResult] = {}
        self.last_reported: tuple | None = None
        self.lock = threading.Lock()  # poll vs snapshot
        self._add_partitions()

    def _add_partitions(self) -> None:
        """Start new partitions at the backfill horizon. Those with records to read are
        declared to the operator so they hold the watermark back until they are read (or
        idle), instead of having their backfill dropped as late."""
        topic, store = self.spec.topic, self.store
        since = self.clock() - self.backfill_ms
        for p in range(len(self.positions), store.partition_count(topic)):
            offset = store.offset_for_timestamp(topic, p, since)
            end = store.offsets(topic, p)[1]
            self.positions[p] = end if offset is None else offset
            if self.positions[p] < end:
                self.operator.add_partitions([p])

    def poll(self) -> tuple[PanelUpdate | None, bool]:
        """Read what is new, feed the operator; returns (update or None, more to read)."""
        if self.error is not None:
            return None, False
        try:
            results, more = self._read_all()
        except TidelogError as e:  # the topic went away: stop, and say why once
            self.error = str(e)
            log.info("panel %s stopped: %s", self.panel_id, e)
            return self._update([]), False
        return self._update(results), more

    def _read_all(self) -> tuple[list[WindowResult], bool]:
        """Read every partition round-robin, a batch at a time, so that no partition's event
        time runs far ahead of another's within one poll."""
        topic, store, op = self.spec.topic, self.store, self.operator
        self._add_partitions()
        results: list[WindowResult] = []
        read = dict.fromkeys(self.positions, 0)
        active = list(self.positions)
        more = False
        while active:
            still = []
            for p in active:
                try:
                    records = store.read(topic, p, self.positions[p], max_records=READ_BATCH)
                except OffsetOutOfRange as e:  # retention removed what we had not read yet
                    self.positions[p] = e.log_start_offset
                    still.append(p)
                    continue
                if not records:
                    continue
                self.positions[p] = records[-1].offset + 1
                results += op.process_many(self._events(records, p))
                read[p] += len(records)
                if read[p] < READ_BUDGET:
                    still.append(p)
                else:
                    more = True
            active = still
        results += op.advance()
        if self.spec.time_field is None and not more:
            results += op.advance_watermark(self.clock() - self.spec.out_of_orderness_ms)
        return results, more

    def _events(self, records, p: int):
        parse = self.parse
        for r in records:
            self.records_read += 1
            event = parse(r.value, r.timestamp_ms)
            if event is None:
                self.parse_errors += 1
                continue
            yield (*event, p)

    def _update(self, results: list[WindowResult]) -> PanelUpdate | None:
        fresh: dict[tuple[object, int, int], WindowResult] = {}
        for r in results:
            fresh[(r.key, r.start, r.end)] = r
            for start, end in r.replaces:
                fresh.pop((r.key, start, end), None)
                self.latest.pop((r.key, start, end), None)
        self.latest.update(fresh)
        self._trim()
        op = self.operator
        counts = (op.watermark, op.late_count, op.corrections, self.records_read,
                  self.parse_errors, self.error)
        if not fresh and counts == self.last_reported:
            return None
        self.last_reported = counts
        ordered = sorted(fresh.values(), key=_window_order)
        return PanelUpdate(self.panel_id, ordered, *counts)

    def _trim(self) -> None:
        horizon = self.clock() - self.backfill_ms
        stale = [k for k, r in self.latest.items() if r.end < horizon]
        for k in stale:
            del self.latest[k]
        excess = len(self.latest) - SNAPSHOT_WINDOWS
        if excess > 0:
            for k in sorted(self.latest, key=lambda k: self.latest[k].end)[:excess]:
                del self.latest[k]

    def snapshot(self) -> PanelUpdate:
        op = self.operator
        results = sorted(self.latest.values(), key=_window_order)
        return PanelUpdate(self.panel_id, results, op.watermark, op.late_count, op.corrections,
                           self.records_read, self.parse_errors, self.error)


def _window_order(r: WindowResult) -> tuple:
    return r.end, r.start, str(r.key)


class PanelJobs:
    """Runs the aggregation job of every panel on one daemon thread (``start``/``close``)."""

    def __init__(self, store, *, clock: Callable[[], int] | None = None,
                 poll_interval_ms: int = 200, backfill_ms: int = 15 * 60_000):
        self.store = store
        self.clock = clock or wall_clock_ms
        self.poll_interval_ms = poll_interval_ms
        self.backfill_ms = backfill_ms
        self._jobs: dict[str, _Job] = {}
        self._subscribers: tuple[Callable[[PanelUpdate], None], ...] = ()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PanelJobs:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="panel-jobs", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> PanelJobs:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def ensure(self, panel_id: str, spec: PanelSpec) -> None:
        """Run `spec` for `panel_id` (restarting the job if the spec changed) from the records
        of the last `backfill_ms`. Raises InvalidConfig or UnknownTopic."""
        spec.validate()
        with self._lock:
            job = self._jobs.get(panel_id)
            if job is not None and job.spec == spec and job.error is None:
                return
            self._jobs[panel_id] = _Job(self.store, panel_id, spec, self.clock, self.backfill_ms)
        self._wake.set()

    def remove(self, panel_id: str) -> None:
        with self._lock:
            self._jobs.pop(panel_id, None)

    def panel_ids(self) -> list[str]:
        with self._lock:
            return list(self._jobs)

    def subscribe(self, callback: Callable[[PanelUpdate], None]) -> Callable[[], None]:
        """Call `callback(update)` after every poll that changed a panel; returns the
        unsubscribe function. Callbacks run on the jobs thread and must not block."""
        with self._lock:
            self._subscribers = (*self._subscribers, callback)

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = tuple(s for s in self._subscribers if s is not callback)

        return unsubscribe

    def snapshot(self, panel_id: str) -> PanelUpdate:
        """The latest emission per window still held (the last `backfill_ms`), with the job's
        watermark and counts. Raises UnknownPanel."""
        with self._lock:
            job = self._jobs.get(panel_id)
        if job is None:
            raise UnknownPanel(panel_id)
        with job.lock:
            return job.snapshot()

    def poll_once(self) -> bool:
        """One round over every job (what the thread does); True if a job has more to read."""
        updates: list[PanelUpdate] = []
        more = False
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            with job.lock:
                update, job_more = job.poll()
            with self._lock:
                current = self._jobs.get(job.panel_id) is job  # not replaced or removed meanwhile
            more = more or (job_more and current)
            if update is not None and current:
                updates.append(update)
        with self._lock:
            subscribers = self._subscribers
        for update in updates:
            for callback in subscribers:
                try:
                    callback(update)
                except Exception:  # one broken subscriber must not stop the panels
                    log.exception("panel subscriber %r failed", callback)
        return more

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                more = self.poll_once()
            except Exception:  # keep the thread alive; the next poll retries
                log.exception("panel jobs poll failed")
                more = False
            if not more:
                self._wake.wait(self.poll_interval_ms / 1000)
                self._wake.clear()
