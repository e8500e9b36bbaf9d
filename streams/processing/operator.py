"""The window operator: keyed, windowed, mergeable aggregation in event or processing time.

One ``WindowOperator`` owns the state of one job: the open windows (one accumulator list per
window, see ``aggregates``), the watermark and per-input-partition progress, and two timer
queues (``heapq`` of due times, each with the bucket of windows due then, so firing never scans
keys: a tumbling job pushes one heap entry per distinct window end, not per key).

Time semantics (Flink's, in milliseconds; windows are half-open ``[start, end)``):

- **watermark** = ``min`` over the non-idle input partitions of (max event time seen on the
  partition − ``out_of_orderness_ms``); it never goes back. A partition that has sent nothing
  for ``idle_timeout_ms`` of the operator's clock is idle and stops holding the watermark back
  until its next event; if every partition is idle the watermark stays where it is. In
  processing time the watermark is the clock (read on every ``process``/``advance``).
- a window **fires** when ``watermark >= end``. With ``grace_ms`` (allowed lateness) it stays
  open until ``watermark >= end + grace``, then **closes**. An event whose windows have all
  closed is **late**: counted in ``late_count`` and dropped, or appended to ``side_output``.
  Within one event the lateness check uses the watermark *before* that event; the event then
  advances the watermark and due timers fire. A late event still counts as its partition's
  progress (a partition first heard of through a late event holds the watermark from then on).
- emissions (``WindowResult``), ``emit="final"``: revision 0 when the window fires; then one
  *correction* (``correction=True``, next revision) for each event that arrives within grace;
  then, when it closes, a closing emission with ``final=True`` (even if nothing changed since
  the last one: it tells consumers the value is settled). With ``grace_ms == 0`` firing and
  closing coincide: one emission, revision 0, ``final=True``. ``emit="current"``: one emission
  per update (``correction=True`` when the window had fired already), then the closing
  ``final=True`` emission. Either way every window ends with exactly one ``final=True``
  emission (at close, or from ``flush``), whose values are the window's last word. A window
  whose first event arrives within grace after its end emits at once, revision 0, not marked
  as a correction (nothing was emitted before), and closes at ``end + grace``.
- sliding windows follow the rule in ``windows.Sliding``: one window per distinct event time
  of a key, ``[t + 1 - size, t + 1)``; an event is late when its own window has closed.
- session windows that merge report the bounds of earlier-emitted windows they replace in
  ``WindowResult.replaces``, so a consumer can drop those.

Performance: tumbling and hopping windows in event time take dedicated loops
(``process_many``) that allocate nothing per event except the ``(key, start)`` dict key (property
tests check them against the generic per-event path); sliding and session windows, and
processing time, go through per-event methods. Feed batches with ``process_many``: ``process``
is the same loop for one event.

Thread-safety: none; one operator is driven by one thread (the caller serialises).
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import NamedTuple

from streams.errors import InvalidConfig
from streams.processing.aggregates import (
    ACC_LEN,
    ALIVE,
    CNT,
    MAX,
    MIN,
    NEED_MINMAX,
    NEED_SKETCH,
    NEED_SUM,
    REV,
    SK,
    SUM,
    AggregateSpec,
    E,
    K,
    S,
    add_value,
    merge_into,
    new_acc,
    values_builder,
)
from streams.processing.windows import Hopping, Session, Sliding, Tumbling

try:  # the compiled batch loop of tumbling windows, built in place by `make native`
    from streams.processing import _cwindow
except ImportError:  # not built (no C compiler, or run outside make): the pure loops below
    _cwindow = None
else:
    if _cwindow.ACC_INDEXES != (K, S, E, REV, ALIVE, CNT, SUM, MIN, MAX, SK) or (
        _cwindow.ACC_LEN != ACC_LEN  # a stale build
    ):
        _cwindow = None

MIN_TIME = -(1 << 62)  # "no watermark yet": below every real timestamp
_EMITTED, _REPLACED = ACC_LEN, ACC_LEN + 1  # extra slots of session accumulators
_first = itemgetter(0)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class WindowResult(NamedTuple):
    """One emission of one window. ``values`` maps each aggregate's name to its value."""

    key: object
    start: int
    end: int
    values: dict[str, object]
    revision: int  # 0 = first emission, then 1, 2, ... for the same window
    correction: bool  # emitted because an event arrived after the window had fired
    final: bool  # the closing emission: no more updates for this window
    replaces: tuple[tuple[int, int], ...] = ()  # sessions: earlier-emitted bounds merged away


class LateEvent(NamedTuple):
    key: object
    value: object
    event_time: int
    partition: int
    watermark: int | None = None  # the watermark that made it late (its windows had closed)


Event = tuple[object, object, int | None, int]


class WindowOperator:
    """Windowed aggregation over a keyed stream; see the module docstring for the semantics.

    `aggregates` maps output names to specs (``{"n": Count(), "avg": Mean()}``). Values given
    to ``process`` must be numbers when any spec other than ``Count`` is used.
    `clock` (ms) drives processing time and idleness; it defaults to the wall clock. In
    processing time ``event_time`` is ignored, nothing is ever late and ``grace_ms`` has no
    effect.
    """

    def __init__(
        self,
        window: Tumbling | Hopping | Sliding | Session,
        aggregates: Mapping[str, AggregateSpec],
        *,
        time: str = "event",
        out_of_orderness_ms: int = 0,
        grace_ms: int = 0,
        idle_timeout_ms: int | None = None,
        emit: str = "final",
        late: str = "drop",
        clock: Callable[[], int] | None = None,
    ):
        _check_choice("time", time, ("event", "processing"))
        _check_choice("emit", emit, ("final", "current"))
        _check_choice("late", late, ("drop", "side"))
        _check_ms("out_of_orderness_ms", out_of_orderness_ms)
        _check_ms("grace_ms", grace_ms)
        if idle_timeout_ms is not None:
            _check_ms("idle_timeout_ms", idle_timeout_ms, positive=True)
        if not isinstance(window, (Tumbling, Hopping, Sliding, Session)):
            raise InvalidConfig("window", window, "must be Tumbling, Hopping, Sliding or Session")
        if not aggregates:
            raise InvalidConfig("aggregates", aggregates, "needs at least one aggregate")
        for name, spec in aggregates.items():
            if not isinstance(name, str) or not name:
                raise InvalidConfig("aggregates", name, "names must be non-empty strings")
            if not isinstance(spec, AggregateSpec):
                raise InvalidConfig(f"aggregates[{name!r}]", spec, "is not an aggregate spec")
        self.window = window
        self._aggs = list(aggregates.items())
        self._values = values_builder(self._aggs)
        needs = frozenset().union(*(spec.needs for spec in aggregates.values()))
        self._need_sum = NEED_SUM in needs
        self._need_minmax = NEED_MINMAX in needs
        self._sketch = NEED_SKETCH in needs
        self._processing = time == "processing"
        self._ooo = out_of_orderness_ms
        self._grace = 0 if self._processing else grace_ms
        self._idle_timeout = None if self._processing else idle_timeout_ms
        self._current = emit == "current"
        self._side = late == "side"
        self._fast_hopping = True  # tests turn it off to check it against the generic path
        self.compiled = True  # process_records may take the compiled loop (when built)
        self._clock = clock or wall_clock_ms

        self._wm = MIN_TIME
        self._pmax: dict[int, int] = {}  # partition -> max event time seen
        self._last_seen: dict[int, int] = {}  # partition -> clock at its last event
        self._idle: set[int] = set()
        self._fixed: dict[tuple[object, int], list] = {}  # tumbling/hopping: (key, start) -> acc
        # the compiled loop's cache of the windows of its newest start (see _cwindow.pyx)
        self._ccache: dict[object, tuple[list, tuple[object, int]]] = {}
        self._ccache_start: int | None = None
        self._sessions: dict[object, list[list]] = {}  # key -> accs sorted by start
        self._sliding: dict[object, dict[int, list]] = {}  # key -> {end: acc}
        self._slide_ends: dict[object, list[int]] = {}  # key -> sorted window ends
        self._slide_buf: dict[object, list[tuple[int, object]]] = {}  # key -> (t, value) by t
        self._fire_heap: list[int] = []
        self._fire_at: dict[int, list[list]] = {}
        self._close_heap: list[int] = []
        self._close_at: dict[int, list[list]] = {}
        self._gc_heap: list[tuple[int, int, object]] = []  # sliding: (due, seq, key)
        self._gc_seq = 0
        self._open = 0
        self._late_count = 0
        self._corrections = 0
        self.side_output: list[LateEvent] = []

    # ------------------------------------------------------------------ public state

    @property
    def watermark(self) -> int | None:
        return None if self._wm == MIN_TIME else self._wm

    @property
    def late_count(self) -> int:
        return self._late_count

    @property
    def corrections(self) -> int:
        return self._corrections

    @property
    def open_windows(self) -> int:
        return self._open

    @property
    def idle_partitions(self) -> frozenset[int]:
        return frozenset(self._idle)

    # ------------------------------------------------------------------ input

    def process(
        self, key: object, value: object, event_time: int | None = None, partition: int = 0
    ) -> list[WindowResult]:
        """Add one event; returns the emissions it caused (possibly none)."""
        if event_time is None and not self._processing:
            raise ValueError("event_time is required in event-time mode")
        return self.process_many(((key, value, event_time, partition),))

    def process_many(self, events: Iterable[Event]) -> list[WindowResult]:
        """Add events ``(key, value, event_time, partition)`` in order; returns the emissions."""
        out: list[WindowResult] = []
        self._process_into(events, out)
        return out

    @property
    def needs_values(self) -> bool:
        """Whether the specs read the events' values (False: only counts, as ``Count``)."""
        return self._need_sum or self._need_minmax or self._sketch

    def process_records(
        self, recs: list, values: list | None, touched: set | None = None
    ) -> list[WindowResult]:
        """Add records ``(key, _, event_time, ...)`` of partition 0, the record shape of
        ``streams.jobs``' tasks, ``values[i]`` being the value of ``recs[i]`` (None when the
        specs need no values, see ``needs_values``): the same as ``process_many`` of
        ``(key, values[i], event_time, 0)``. With a tumbling window, `touched` (a set) gets
        ``(key, window start)`` of every record, late ones included.

        Tumbling event-time windows without an idle timeout take the compiled loop
        (``_cwindow.pyx``) when it is built; a record it does not take (an event time that is
        not an ``int`` within +-2**62 ms) goes the pure way, and so does the whole batch when
        the operator's state is beyond it. ``compiled = False`` turns it off (tests)."""
        if values is None and self.needs_values:
            raise ValueError("the aggregates read values: give one per record")
        if touched is not None and type(self.window) is not Tumbling:
            raise InvalidConfig("touched", touched, "is kept for tumbling windows only")
        out: list[WindowResult] = []
        fast = None
        if (
            self.compiled
            and _cwindow is not None
            and type(self.window) is Tumbling
            and not self._processing
            and self._idle_timeout is None
        ):
            fast = _cwindow.tumbling_records
        i, n = 0, len(recs)
        while i < n:
            j = n
            if fast is not None:
                i = fast(self, recs, values, touched, out, i)
                j = i + 1  # the record it did not take, the pure way
            if i < n:
                self._records_pure(recs, values, touched, i, j, out)
            i = j
        return out

    def _records_pure(
        self, recs: list, values: list | None, touched: set | None, i: int, j: int, out: list
    ) -> None:
        part = recs[i:j]
        if touched is not None:
            size = self.window.size_ms
            touched.update([(r[0], r[2] - r[2] % size) for r in part])
        vals = values[i:j] if values is not None else [0] * len(part)
        self._process_into([(r[0], v, r[2], 0) for r, v in zip(part, vals, strict=True)], out)

    def _process_into(self, events: Iterable[Event], out: list[WindowResult]) -> None:
        if self._processing:
            self._processing_many(events, out)
        elif type(self.window) is Tumbling:
            self._tumbling_many(events, out)
        elif type(self.window) is Hopping and self._fast_hopping:
            self._hopping_many(events, out)
        else:
            now = self._clock_for_idleness(out)
            for key, value, t, p in events:
                if t is None:
                    raise ValueError("event_time is required in event-time mode")
                self._note_activity(p, now)
                if not self._add(key, value, t, p, out):
                    self._late(key, value, t, p)
                self._observe(t, p, out)

    def advance(self) -> list[WindowResult]:
        """Re-read the clock: processing-time windows fire, idle partitions are released (which
        may advance the watermark) and due timers fire."""
        out: list[WindowResult] = []
        if self._processing:
            self._set_watermark(self._clock(), out)
        else:
            self._clock_for_idleness(out)
        return out

    def add_partitions(self, partitions: Iterable[int]) -> None:
        """Declare input partitions before their first event: each holds the watermark back
        (as if at minus infinity) until it sends events or, with an idle timeout, goes idle.
        Undeclared partitions count from their first event on."""
        now = self._clock() if self._idle_timeout is not None else None
        for p in partitions:
            self._pmax.setdefault(p, MIN_TIME)
            if now is not None:
                self._last_seen.setdefault(p, now)

    def advance_watermark(self, to: int) -> list[WindowResult]:
        """Move the watermark to `to` (if that is ahead) from outside, e.g. to the wall clock
        when a job over broker timestamps has read everything there is; due timers fire."""
        out: list[WindowResult] = []
        self._set_watermark(to, out)
        return out

    def flush(self) -> list[WindowResult]:
        """End of a bounded input: every open window emits its closing (``final``) result, in
        order of window end, and the operator holds nothing afterwards."""
        out: list[WindowResult] = []
        accs = [a for a in self._all_windows() if a[ALIVE]]
        accs.sort(key=lambda a: (a[E], a[S]))
        for acc in accs:
            acc[ALIVE] = False
            self._emit(acc, False, True, out)
        for state in (
            self._fixed,
            self._sessions,
            self._sliding,
            self._slide_ends,
            self._slide_buf,
            self._fire_at,
            self._close_at,
        ):
            state.clear()
        self._fire_heap.clear()
        self._close_heap.clear()
        self._gc_heap.clear()
        self._open = 0
        return out

    # ------------------------------------------------------------------ snapshots (jobs)

    def fixed_window_state(self, key: object, start: int) -> list | None:
        """A tumbling/hopping window's state as ``[revision, count, sum, min, max]`` (min/max
        None when not kept), or None when the window is not open. With ``restore_fixed`` this
        is what ``streams.jobs`` writes to a changelog and reads back (quantile sketches are
        not snapshotted)."""
        acc = self._fixed.get((key, start))
        if acc is None:
            return None
        lo, hi = acc[MIN], acc[MAX]
        return [
            acc[REV],
            acc[CNT],
            acc[SUM],
            None if lo == math.inf else lo,
            None if hi == -math.inf else hi,
        ]

    def progress(self) -> list:
        """``[watermark, {partition: max event time}]`` for a snapshot (MIN_TIME: none)."""
        return [self._wm, dict(self._pmax)]

    def restore_progress(self, watermark: int, partition_max: Mapping[int, int]) -> None:
        """Set the watermark and partitions' progress from a snapshot (before any event)."""
        self._wm = max(self._wm, watermark)
        for p, t in partition_max.items():
            self._pmax[int(p)] = max(self._pmax.get(int(p), MIN_TIME), t)

    def restore_fixed(self, key: object, start: int, state: list) -> bool:
        """Re-open a tumbling/hopping window from ``fixed_window_state``'s snapshot, after
        ``restore_progress``; a window already closed at the watermark is not re-opened
        (returns False)."""
        if type(self.window) not in (Tumbling, Hopping) or self._processing:
            raise InvalidConfig("window", self.window, "only tumbling/hopping can be restored")
        end = start + self.window.size_ms
        if end + self._grace <= self._wm or (key, start) in self._fixed:
            return False
        rev, cnt, total, lo, hi = state
        acc = new_acc(key, start, end, self._sketch)
        acc[REV], acc[CNT], acc[SUM] = rev, cnt, total
        acc[MIN] = math.inf if lo is None else lo
        acc[MAX] = -math.inf if hi is None else hi
        self._fixed[(key, start)] = acc
        self._open += 1
        self._schedule(acc)
        return True

    def session_state(self, key: object) -> list | None:
        """A key's open sessions as ``[[start, end, revision, count, sum, min, max, emitted
        bounds or None], ...]`` (None: it has none), for ``restore_sessions``."""
        sessions = self._sessions.get(key)
        if not sessions:
            return None
        return [
            [
                a[S],
                a[E],
                a[REV],
                a[CNT],
                a[SUM],
                None if a[MIN] == math.inf else a[MIN],
                None if a[MAX] == -math.inf else a[MAX],
                None if a[_EMITTED] is None else list(a[_EMITTED]),
            ]
            for a in sessions
        ]

    def restore_sessions(self, key: object, states: list) -> int:
        """Re-open a key's sessions from ``session_state``'s snapshot, after
        ``restore_progress``; sessions already closed at the watermark are skipped. Returns
        how many were re-opened."""
        if type(self.window) is not Session or self._processing:
            raise InvalidConfig("window", self.window, "restore_sessions needs session windows")
        n = 0
        for start, end, rev, cnt, total, lo, hi, emitted in states:
            if end + self._grace <= self._wm:
                continue
            acc = new_acc(key, start, end, self._sketch) + [
                None if emitted is None else tuple(emitted),
                [],
            ]
            acc[REV], acc[CNT], acc[SUM] = rev, cnt, total
            acc[MIN] = math.inf if lo is None else lo
            acc[MAX] = -math.inf if hi is None else hi
            bisect.insort(self._sessions.setdefault(key, []), acc, key=_start)
            self._open += 1
            self._schedule(acc)
            n += 1
        return n

    # ------------------------------------------------------------------ hot loop: tumbling

    def _tumbling_many(self, events: Iterable[Event], out: list[WindowResult]) -> None:
        size = self.window.size_ms
        grace, ooo = self._grace, self._ooo
        fixed, pmax = self._fixed, self._pmax
        need_sum, need_minmax, sketch = self._need_sum, self._need_minmax, self._sketch
        current = self._current
        fire_heap, close_heap = self._fire_heap, self._close_heap
        now = self._clock_for_idleness(out)
        track = now is not None
        last_seen, idle = self._last_seen, self._idle
        wm = self._wm
        fixed_get, pmax_get = fixed.get, pmax.get
        for key, v, t, p in events:
            if track:
                last_seen[p] = now
                if p in idle:
                    idle.discard(p)
            start = t - t % size
            end = start + size
            if end + grace <= wm:
                self._late(key, v, t, p)  # still news of its partition's progress (below)
            else:
                acc = fixed_get((key, start))
                if acc is None:
                    acc = self._open_fixed(key, start, end)
                acc[CNT] += 1
                if need_sum:
                    acc[SUM] += v
                if need_minmax:
                    if v < acc[MIN]:
                        acc[MIN] = v
                    if v > acc[MAX]:
                        acc[MAX] = v
                if sketch:
                    acc[SK].add(v)
                if current or end <= wm:
                    self._emit(acc, end <= wm and acc[REV] > 0, False, out)
            if t > pmax_get(p, MIN_TIME):
                pmax[p] = t
                cand = (t if len(pmax) == 1 else self._min_active()) - ooo
                if cand > wm:
                    self._wm = wm = cand
                    if (fire_heap and fire_heap[0] <= wm) or (close_heap and close_heap[0] <= wm):
                        self._fire_due(out)

    def _hopping_many(self, events: Iterable[Event], out: list[WindowResult]) -> None:
        """The tumbling loop with an inner loop over the event's windows, earliest first (the
        same steps as ``_add`` + ``_observe``, inlined)."""
        size, step = self.window.size_ms, self.window.step_ms
        grace, ooo = self._grace, self._ooo
        fixed, pmax = self._fixed, self._pmax
        need_sum, need_minmax, sketch = self._need_sum, self._need_minmax, self._sketch
        current = self._current
        fire_heap, close_heap = self._fire_heap, self._close_heap
        now = self._clock_for_idleness(out)
        track = now is not None
        last_seen, idle = self._last_seen, self._idle
        wm = self._wm
        fixed_get, pmax_get = fixed.get, pmax.get
        for key, v, t, p in events:
            if track:
                last_seen[p] = now
                if p in idle:
                    idle.discard(p)
            last = t - t % step
            start = last - (last - t + size - 1) // step * step  # earliest window holding t
            if start > last:
                pass  # in a gap between windows: in none, not late
            elif last + size + grace <= wm:
                self._late(key, v, t, p)  # even its latest window has closed
            else:
                while start <= last:
                    end = start + size
                    if end + grace > wm:
                        acc = fixed_get((key, start))
                        if acc is None:
                            acc = self._open_fixed(key, start, end)
                        acc[CNT] += 1
                        if need_sum:
                            acc[SUM] += v
                        if need_minmax:
                            if v < acc[MIN]:
                                acc[MIN] = v
                            if v > acc[MAX]:
                                acc[MAX] = v
                        if sketch:
                            acc[SK].add(v)
                        if current or end <= wm:
                            self._emit(acc, end <= wm and acc[REV] > 0, False, out)
                    start += step
            if t > pmax_get(p, MIN_TIME):
                pmax[p] = t
                cand = (t if len(pmax) == 1 else self._min_active()) - ooo
                if cand > wm:
                    self._wm = wm = cand
                    if (fire_heap and fire_heap[0] <= wm) or (close_heap and close_heap[0] <= wm):
                        self._fire_due(out)

    # ------------------------------------------------------------------ processing time

    def _processing_many(self, events: Iterable[Event], out: list[WindowResult]) -> None:
        now = self._clock()
        self._set_watermark(now, out)
        for key, value, _t, p in events:
            self._add(key, value, now, p, out)

    # ------------------------------------------------------------------ generic add

    def _add(self, key: object, v: object, t: int, p: int, out: list[WindowResult]) -> bool:
        """Add to the event's windows; False when they have all closed (a late event)."""
        window = self.window
        if type(window) is Session:
            return self._add_session(key, v, t, out)
        if type(window) is Sliding:
            return self._add_sliding(key, v, t, out)
        size, grace, wm = window.size_ms, self._grace, self._wm
        starts = window.starts(t)
        added = not starts  # a hopping gap: in no window, but not late either
        for start in starts:
            end = start + size
            if end + grace <= wm:
                continue
            acc = self._fixed.get((key, start)) or self._open_fixed(key, start, end)
            self._update(acc, v, out)
            added = True
        return added

    def _update(self, acc: list, v: object, out: list[WindowResult]) -> None:
        add_value(acc, v, self._need_sum, self._need_minmax)
        fired = acc[E] <= self._wm
        if self._current or fired:
            self._emit(acc, fired and acc[REV] > 0, False, out)

    def _open_fixed(self, key: object, start: int, end: int) -> list:
        acc = new_acc(key, start, end, self._sketch)
        self._fixed[(key, start)] = acc
        self._open += 1
        self._schedule(acc)
        return acc

    def _schedule(self, acc: list) -> None:
        """Timer for the window's next step at its current end: fire, or close when emitting
        "current" or when the watermark has already passed the end (a window opened or
        extended within grace emits from the update itself)."""
        if self._current or acc[E] <= self._wm:
            _push(self._close_heap, self._close_at, acc[E] + self._grace, acc)
        else:
            _push(self._fire_heap, self._fire_at, acc[E], acc)

    # ------------------------------------------------------------------ sessions

    def _add_session(self, key: object, v: object, t: int, out: list[WindowResult]) -> bool:
        gap = self.window.gap_ms
        sessions = self._sessions.get(key)
        if sessions is None:
            sessions = self._sessions[key] = []
        lo, hi = t, t + gap
        hits = [a for a in sessions if a[S] < hi and lo < a[E]]
        for a in hits:
            lo, hi = min(lo, a[S]), max(hi, a[E])
        if hi + self._grace <= self._wm:
            if not sessions:
                del self._sessions[key]
            return False
        if not hits:
            acc = new_acc(key, lo, hi, self._sketch) + [None, []]
            bisect.insort(sessions, acc, key=_start)
            self._open += 1
            self._schedule(acc)
        else:
            acc = hits[0]  # the earliest: sessions are sorted by start
            for b in hits[1:]:
                self._absorb(acc, b, sessions)
            old_end = acc[E]
            acc[S], acc[E] = lo, hi
            if hi != old_end or len(hits) > 1:
                self._schedule(acc)
        self._update(acc, v, out)
        return True

    def _absorb(self, acc: list, b: list, sessions: list[list]) -> None:
        merge_into(acc, b)
        acc[REV] = max(acc[REV], b[REV])
        if b[_EMITTED] is not None:
            acc[_REPLACED].append(b[_EMITTED])
        acc[_REPLACED].extend(b[_REPLACED])
        b[ALIVE] = False
        sessions.remove(b)
        self._open -= 1

    # ------------------------------------------------------------------ sliding

    def _add_sliding(self, key: object, v: object, t: int, out: list[WindowResult]) -> bool:
        size = self.window.size_ms
        if t + 1 + self._grace <= self._wm:
            return False
        wins = self._sliding.setdefault(key, {})
        ends = self._slide_ends.setdefault(key, [])
        buf = self._slide_buf.setdefault(key, [])
        if t + 1 not in wins:
            acc = new_acc(key, t + 1 - size, t + 1, self._sketch)
            lo = bisect.bisect_right(buf, t - size, key=_first)
            hi = bisect.bisect_right(buf, t, key=_first)
            for _, old in buf[lo:hi]:
                add_value(acc, old, self._need_sum, self._need_minmax)
            wins[t + 1] = acc
            bisect.insort(ends, t + 1)
            self._open += 1
            self._schedule(acc)
        # every window containing t: ends in (t, t + size]
        i, j = bisect.bisect_right(ends, t), bisect.bisect_right(ends, t + size)
        for end in ends[i:j]:
            self._update(wins[end], v, out)
        bisect.insort(buf, (t, v), key=_first)
        return True

    def _prune_sliding(self, key: object) -> None:
        """Forget buffered events no future window can hold; drop a key that holds nothing.
        A key without windows but with buffered events gets a clean-up timer for when its
        newest buffered event can no longer be in any window (dormant keys do not leak)."""
        size, grace = self.window.size_ms, self._grace
        buf = self._slide_buf.get(key)
        if buf:
            del buf[: bisect.bisect_right(buf, self._wm - grace - size, key=_first)]
        if self._sliding.get(key):
            return
        if buf:
            self._gc_seq += 1
            heapq.heappush(self._gc_heap, (buf[-1][0] + size + grace, self._gc_seq, key))
            return
        for state in (self._sliding, self._slide_ends, self._slide_buf):
            state.pop(key, None)

    def _collect_garbage(self) -> None:
        gc_heap, wm = self._gc_heap, self._wm
        while gc_heap and gc_heap[0][0] <= wm:
            key = heapq.heappop(gc_heap)[2]
            if key in self._slide_buf and not self._sliding.get(key):
                self._prune_sliding(key)

    # ------------------------------------------------------------------ watermark and timers

    def _clock_for_idleness(self, out: list[WindowResult]) -> int | None:
        """With an idle timeout: read the clock once, mark partitions idle, maybe advance."""
        if self._idle_timeout is None:
            return None
        now = self._clock()
        newly = [
            p
            for p, seen in self._last_seen.items()
            if p not in self._idle and now - seen >= self._idle_timeout
        ]
        if newly:
            self._idle.update(newly)
            active = self._min_active()
            if active is not None:
                self._set_watermark(active - self._ooo, out)
        return now

    def _note_activity(self, p: int, now: int | None) -> None:
        if now is not None:
            self._last_seen[p] = now
            self._idle.discard(p)

    def _observe(self, t: int, p: int, out: list[WindowResult]) -> None:
        if t > self._pmax.get(p, MIN_TIME):
            self._pmax[p] = t
            self._set_watermark(self._min_active() - self._ooo, out)

    def _min_active(self) -> int | None:
        idle = self._idle
        values = [m for p, m in self._pmax.items() if p not in idle]
        return min(values) if values else None

    def _set_watermark(self, candidate: int, out: list[WindowResult]) -> None:
        if candidate > self._wm:
            self._wm = candidate
            self._fire_due(out)

    def _fire_due(self, out: list[WindowResult]) -> None:
        """Run the timers due at the watermark, earliest first (a fire before a close)."""
        wm, grace = self._wm, self._grace
        fire_heap, close_heap = self._fire_heap, self._close_heap
        while True:
            f = fire_heap[0] if fire_heap and fire_heap[0] <= wm else None
            c = close_heap[0] if close_heap and close_heap[0] <= wm else None
            if f is None and c is None:
                if self._gc_heap:
                    self._collect_garbage()
                return
            if f is not None and (c is None or f <= c):
                heapq.heappop(fire_heap)
                due = [acc for acc in self._fire_at.pop(f) if acc[ALIVE] and acc[E] == f]
                if grace == 0:
                    self._close_all(due, out)
                else:
                    self._fire_all(due, out)
                    if due:  # all end at f: they close together, one timer entry
                        bucket = self._close_at.get(f + grace)
                        if bucket is None:
                            self._close_at[f + grace] = due
                            heapq.heappush(close_heap, f + grace)
                        else:
                            bucket += due
            else:
                heapq.heappop(close_heap)
                due = [acc for acc in self._close_at.pop(c) if acc[ALIVE] and acc[E] + grace == c]
                self._close_all(due, out)

    def _fire_all(self, accs: list[list], out: list[WindowResult]) -> None:
        """First emissions at the window end (grace follows)."""
        if type(self.window) is Session:
            for acc in accs:
                self._emit(acc, acc[REV] > 0, False, out)
            return
        values, append, new, result = self._values, out.append, tuple.__new__, WindowResult
        for acc in accs:  # fixed and sliding windows fire once: revision 0, no correction
            # WindowResult(...) without its Python __new__ (replaces: its default, ())
            append(new(result, (acc[K], acc[S], acc[E], values(acc), acc[REV], False, False, ())))
            acc[REV] += 1

    def _close_all(self, accs: list[list], out: list[WindowResult]) -> None:
        if type(self.window) in (Session, Sliding):
            for acc in accs:
                self._close(acc, out)
            return
        values, append, fixed = self._values, out.append, self._fixed
        new, result = tuple.__new__, WindowResult
        for acc in accs:  # WindowResult(...) without its Python __new__ (see _fire_all)
            append(new(result, (acc[K], acc[S], acc[E], values(acc), acc[REV], False, True, ())))
            acc[REV] += 1
            acc[ALIVE] = False
            del fixed[(acc[K], acc[S])]
        self._open -= len(accs)

    def _close(self, acc: list, out: list[WindowResult]) -> None:
        self._emit(acc, False, True, out)
        acc[ALIVE] = False
        self._open -= 1
        key = acc[K]
        window = self.window
        if type(window) is Session:
            sessions = self._sessions[key]
            sessions.remove(acc)
            if not sessions:
                del self._sessions[key]
        elif type(window) is Sliding:
            del self._sliding[key][acc[E]]
            ends = self._slide_ends[key]
            del ends[bisect.bisect_left(ends, acc[E])]
            self._prune_sliding(key)
        else:
            del self._fixed[(key, acc[S])]

    def _emit(self, acc: list, correction: bool, final: bool, out: list[WindowResult]) -> None:
        values = self._values(acc)
        replaces: tuple[tuple[int, int], ...] = ()
        if len(acc) > ACC_LEN:  # a session: report the bounds it replaces
            bounds = (acc[S], acc[E])
            old = [b for b in acc[_REPLACED] if b != bounds]
            if acc[_EMITTED] is not None and acc[_EMITTED] != bounds:
                old.append(acc[_EMITTED])
            replaces = tuple(sorted(set(old)))
            acc[_EMITTED], acc[_REPLACED] = bounds, []
        out.append(
            WindowResult(acc[K], acc[S], acc[E], values, acc[REV], correction, final, replaces)
        )
        acc[REV] += 1
        if correction:
            self._corrections += 1

    def _late(self, key: object, value: object, t: int, p: int) -> None:
        self._late_count += 1
        if self._side:
            self.side_output.append(LateEvent(key, value, t, p, self._wm))

    def _all_windows(self) -> Iterable[list]:
        yield from self._fixed.values()
        for sessions in self._sessions.values():
            yield from sessions
        for wins in self._sliding.values():
            yield from wins.values()


def extract_values(recs: list, field: str | None, ext: Callable, values: list) -> None:
    """Append the value of each record ``(_, value, ...)`` to `values`: ``ext(value)`` (for a
    dict, its `field` when it has it, as ``ext`` reads it). On an error, ``len(values)`` is
    the index of the record that failed. Compiled (``_cwindow.pyx``) when built."""
    if _cwindow is not None:
        _cwindow.extract_values(recs, field, ext, values)
        return
    extract_values_pure(recs, ext, values)


def extract_values_pure(recs: list, ext: Callable, values: list) -> None:
    append = values.append
    for r in recs:
        append(ext(r[1]))


def _start(acc: list) -> int:
    return acc[S]


def _push(heap: list[int], buckets: dict[int, list[list]], due: int, acc: list) -> None:
    bucket = buckets.get(due)
    if bucket is None:
        buckets[due] = bucket = []
        heapq.heappush(heap, due)
    bucket.append(acc)


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InvalidConfig(name, value, f"must be one of {', '.join(choices)}")


def _check_ms(name: str, value: object, positive: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < (1 if positive else 0):
        kind = "a positive" if positive else "a non-negative"
        raise InvalidConfig(name, value, f"must be {kind} whole number of milliseconds")
