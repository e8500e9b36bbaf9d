"""`PanelJobs`: one daemon thread running every panel's `WindowOperator` over its topic.

See the package docstring for the time semantics; each poll reads at most ``READ_BUDGET``
records per partition, and subscribers get a `PanelUpdate` per poll that produced something.

Besides the counts, a job keeps the latest ``CORRECTIONS_KEPT`` corrections (each with the
window's values before and after) and the latest ``LATE_KEPT`` late events (with the watermark
that made them late): an update carries the new ones, a snapshot all that are kept, so a page
opened later lists the same corrections its counter counts (all of them while there are at most
``CORRECTIONS_KEPT``).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from streams.errors import ClusterUnavailable, OffsetOutOfRange, TidelogError, UnknownPanel
from streams.processing.operator import LateEvent, WindowResult, wall_clock_ms
from streams.processing.panels.source import RecordSource
from streams.processing.panels.spec import PanelSpec, TopicDecoders, ValueDecoder, _Parser

log = logging.getLogger(__name__)

READ_BATCH = 1000  # records per read call
READ_BUDGET = 5_000  # records per partition per poll: a backlog neither starves other panels
# nor holds the job's lock (which ``snapshot`` waits for) for long
SNAPSHOT_WINDOWS = 10_000  # latest emissions kept per panel (also bounded by backfill age)
CORRECTIONS_KEPT = 200  # latest corrections kept per panel (old -> new values)
LATE_KEPT = 200  # latest late events kept per panel


class Correction(NamedTuple):
    """One correction of a window that had fired: its values before and after."""

    key: object
    start: int
    end: int
    old: dict[str, object] | None  # None: the job no longer held the window's earlier values
    new: dict[str, object]
    revision: int
    seq: int  # 1, 2, ... in the job's order (the last one's equals its corrections counter)


class PanelUpdate(NamedTuple):
    """What a panel's job produced. The counts are totals since the job (re)started; the logs
    hold, in an update, what is new since the previous one, in a snapshot, the latest kept
    (oldest first)."""

    panel_id: str
    results: list[WindowResult]  # new emissions since the previous update (latest per window)
    watermark: int | None
    late_count: int
    corrections: int
    records_read: int
    parse_errors: int
    error: str | None = None  # set when the job stopped (e.g. its topic was deleted)
    correction_log: tuple[Correction, ...] = ()
    late_log: tuple[LateEvent, ...] = ()


class _Job:
    def __init__(
        self,
        source: RecordSource,
        panel_id: str,
        spec: PanelSpec,
        clock: Callable[[], int],
        backfill_ms: int,
        decoder: ValueDecoder | None = None,
    ):
        self.panel_id, self.spec, self.clock = panel_id, spec, clock
        self.source = source
        self.backfill_ms = backfill_ms
        self.operator = spec.operator(clock)
        self.parse = _Parser(spec, decoder)
        self.positions: dict[int, int] = {}
        self.records_read = 0
        self.parse_errors = 0
        self.error: str | None = None
        self.latest: dict[tuple[object, int, int], WindowResult] = {}
        self.last_reported: tuple | None = None
        self.correction_log: deque[Correction] = deque(maxlen=CORRECTIONS_KEPT)
        self.late_log: deque[LateEvent] = deque(maxlen=LATE_KEPT)
        self.new_corrections: list[Correction] = []  # since the previous update
        self.corrections_logged = 0
        self.new_late: list[LateEvent] = []
        self.lock = threading.Lock()  # poll vs snapshot
        self._add_partitions()

    def _add_partitions(self) -> None:
        """Start new partitions at the backfill horizon. Those with records to read are
        declared to the operator so they hold the watermark back until they are read (or
        idle), instead of having their backfill dropped as late."""
        topic, source = self.spec.topic, self.source
        since = self.clock() - self.backfill_ms
        for p in range(len(self.positions), source.partition_count(topic)):
            offset = source.offset_for_timestamp(topic, p, since)
            end = source.offsets(topic, p)[1]
            self.positions[p] = end if offset is None else offset
            if self.positions[p] < end:
                self.operator.add_partitions([p])

    def poll(self) -> tuple[PanelUpdate | None, bool]:
        """Read what is new, feed the operator; returns (update or None, more to read)."""
        if self.error is not None:
            return None, False
        try:
            results, more = self._read_all()
        except ClusterUnavailable as e:  # a remote cluster did not answer: retry next poll
            log.warning("panel %s: %s", self.panel_id, e)
            return None, False
        except TidelogError as e:  # the topic went away: stop, and say why once
            self.error = str(e)
            log.info("panel %s stopped: %s", self.panel_id, e)
            return self._update([]), False
        return self._update(results), more

    def _read_all(self) -> tuple[list[WindowResult], bool]:
        """Read every partition round-robin, a batch at a time, so that no partition's event
        time runs far ahead of another's within one poll."""
        topic, source, op = self.spec.topic, self.source, self.operator
        self._add_partitions()
        results: list[WindowResult] = []
        read = dict.fromkeys(self.positions, 0)
        active = list(self.positions)
        more = False
        while active:
            still = []
            for p in active:
                try:
                    records = source.read(topic, p, self.positions[p], max_records=READ_BATCH)
                except OffsetOutOfRange as e:  # retention removed what we had not read yet
                    self.positions[p] = e.log_start_offset
                    still.append(p)
                    continue
                except ClusterUnavailable as e:  # keep what this round read; retry next poll
                    log.warning("panel %s: %s", self.panel_id, e)
                    return results, False
                if not records:
                    continue
                self.positions[p] = records[-1].offset + 1
                results += op.process_many(self._events(records, p))
                if op.side_output:
                    self.new_late += op.side_output
                    op.side_output.clear()
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
            if r.correction:
                self._note_correction(r, fresh)
            fresh[(r.key, r.start, r.end)] = r
            for start, end in r.replaces:
                fresh.pop((r.key, start, end), None)
                self.latest.pop((r.key, start, end), None)
        self.latest.update(fresh)
        self._trim()
        op = self.operator
        counts = (
            op.watermark,
            op.late_count,
            op.corrections,
            self.records_read,
            self.parse_errors,
            self.error,
        )
        if not fresh and counts == self.last_reported:
            return None
        self.last_reported = counts
        ordered = sorted(fresh.values(), key=_window_order)
        # a backlog may correct thousands of windows in one poll: send what a page keeps
        corrections = tuple(self.new_corrections[-CORRECTIONS_KEPT:])
        late = tuple(self.new_late[-LATE_KEPT:])
        self.correction_log.extend(corrections)
        self.late_log.extend(late)
        self.new_corrections, self.new_late = [], []
        return PanelUpdate(self.panel_id, ordered, *counts, corrections, late)

    def _note_correction(self, r: WindowResult, fresh: dict) -> None:
        """Log a correction with the values the window had before it (its previous emission,
        in this poll or an earlier one; a session that grew: the one it replaces)."""
        before = fresh.get((r.key, r.start, r.end)) or self.latest.get((r.key, r.start, r.end))
        if before is None and len(r.replaces) == 1:
            start, end = r.replaces[0]
            before = fresh.get((r.key, start, end)) or self.latest.get((r.key, start, end))
        old = None if before is None else before.values
        self.corrections_logged += 1
        self.new_corrections.append(
            Correction(r.key, r.start, r.end, old, r.values, r.revision, self.corrections_logged)
        )

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
        return PanelUpdate(
            self.panel_id,
            results,
            op.watermark,
            op.late_count,
            op.corrections,
            self.records_read,
            self.parse_errors,
            self.error,
            tuple(self.correction_log),
            tuple(self.late_log),
        )


def _window_order(r: WindowResult) -> tuple:
    return r.end, r.start, str(r.key)


class PanelJobs:
    """Runs the aggregation job of every panel on one daemon thread (``start``/``close``),
    reading from `source`: a ``LogStore``, or a ``ClusterSource`` over any Cluster."""

    def __init__(
        self,
        source: RecordSource,
        *,
        clock: Callable[[], int] | None = None,
        poll_interval_ms: int = 200,
        backfill_ms: int = 15 * 60_000,
        reading: TopicDecoders | None = None,
    ):
        self.source = source
        self.reading = reading  # how each topic's values are decoded (None: JSON only)
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
        of the last `backfill_ms`. Raises InvalidConfig or UnknownTopic (ClusterUnavailable
        when the source is a cluster that does not answer)."""
        spec.validate()
        with self._lock:
            job = self._jobs.get(panel_id)
            if job is not None and job.spec == spec and job.error is None:
                return
        # built outside the lock: it asks the source for offsets, which on a remote cluster
        # takes round trips that must not hold up the other panels' polls and snapshots
        decoder = self.reading.value(spec.topic) if self.reading is not None else None
        job = _Job(self.source, panel_id, spec, self.clock, self.backfill_ms, decoder)
        with self._lock:
            self._jobs[panel_id] = job
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
