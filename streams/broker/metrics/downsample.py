"""What a chart of a time range is drawn at, and coarse windows computed from fine ones.

A range is drawn at one resolution (`plan_for`), a few hundred points at most, so a chart reads
as a line and not as a barcode:

=========  ==========  ==========================================  ==========
range      resolution  computed from                               points
=========  ==========  ==========================================  ==========
5 min      1 s         the hub's 1-second windows, as they are     300
15 min     10 s        the hub's 1-second windows                  90
60 min     1 min       the hub's 1-minute rollups, as they are     60
6 h        5 min       the 1-minute rollups kept in ``__metrics``  72
24 h       15 min      the 1-minute rollups kept in ``__metrics``  96
=========  ==========  ==========================================  ==========

`ChartFeed` is one chart subscription (a backfill, then live windows) over a `Downsampler`,
which turns fine windows into coarse ones (aligned to the epoch, so to UTC minutes):

- a *rate* kind's fine window holds its total (records or bytes in the window); the coarse value
  is the **average rate** over the fine windows present, times the coarse length: ``sum ÷
  covered ms × w``. The chart's per-second value (v ÷ w in seconds) is then the mean of the
  per-second rates, so a coarse window only partly covered (the server started in it, a gap,
  the window still open) is not drawn at a fraction of its height;
- a *sparse* rate (`series.SPARSE_KINDS`: event-time counts, whose windows exist only where
  records are) is the **total** of its fine windows: a missing one is a zero, not a gap;
- a *gauge* kind's coarse value is the **peak** (max) of its fine windows: a lag spike inside
  15 minutes is not averaged away;
- a fine window seen again (a correction, rev > 0, or the same window twice) **replaces** the
  value it had, never adds to it.

Fed incrementally, it returns each coarse window that changed, its value so far (the open
window grows as its fine windows close, and as the hub's partial ones fill), marked `partial`
until it is final; the chart replaces a window by its start. What did not change is not
returned: a socket sends deltas. It keeps
the last `keep_ms` of windows (older fine windows, arriving late, are dropped: their coarse
window was already complete).

Pure Python, no Django. Not thread-safe: one owner (a WebSocket consumer, a history read).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from streams.broker.metrics.series import MINUTE_MS, SECOND_MS, Point, is_rate, is_sparse


class Plan(NamedTuple):
    """How a range is drawn: windows of `step_ms`, computed from windows of `source_ms`."""

    range_ms: int
    step_ms: int
    source_ms: int


PLANS = (
    Plan(5 * MINUTE_MS, SECOND_MS, SECOND_MS),
    Plan(15 * MINUTE_MS, 10 * SECOND_MS, SECOND_MS),
    Plan(60 * MINUTE_MS, MINUTE_MS, MINUTE_MS),
    Plan(6 * 60 * MINUTE_MS, 5 * MINUTE_MS, MINUTE_MS),
    Plan(24 * 60 * MINUTE_MS, 15 * MINUTE_MS, MINUTE_MS),
)
DEFAULT_RANGE_MS = 15 * MINUTE_MS


def plan_for(range_ms: int | None) -> Plan:
    """The plan of the shortest range that holds `range_ms` (longer than 24 h: the 24-hour one;
    None or not positive: the default 15 minutes). The plan's range is what is drawn."""
    if range_ms is None or range_ms <= 0:
        range_ms = DEFAULT_RANGE_MS
    for plan in PLANS:
        if range_ms <= plan.range_ms:
            return plan
    return PLANS[-1]


def bucket_start(t: int, step_ms: int) -> int:
    return t - t % step_ms


def aggregate(name: str, values: Iterable[float], *, source_ms: int, step_ms: int) -> float:
    """The coarse value of series `name` from its fine windows' `values` (at least one)."""
    values = list(values)
    if not values:
        raise ValueError("a coarse window needs at least one fine window")
    if is_sparse(name):
        return sum(values)
    if is_rate(name):
        return sum(values) * step_ms / (len(values) * source_ms)
    return max(values)


class _Bucket:
    __slots__ = ("fine", "partial", "emitted", "last")

    def __init__(self) -> None:
        self.fine: dict[int, float] = {}  # fine window start -> its value (latest revision)
        self.partial: set[int] = set()  # fine windows still open (their value so far)
        self.emitted = 0
        self.last: tuple[float, bool] | None = None  # the value and openness last emitted


class Downsampler:
    def __init__(self, step_ms: int, source_ms: int, *, keep_ms: int | None = None):
        if step_ms <= 0 or source_ms <= 0 or step_ms % source_ms:
            raise ValueError(
                f"a {step_ms} ms window cannot be made of {source_ms} ms windows "
                "(it must be a whole multiple)"
            )
        self.step_ms, self.source_ms = step_ms, source_ms
        self.keep_ms = keep_ms if keep_ms is not None else max(2 * step_ms, MINUTE_MS)
        self._buckets: dict[tuple[str, int], _Bucket] = {}
        self._newest: int | None = None
        self._horizon: int | None = None  # coarse windows starting before it are done
        self._closed_until: int | None = None  # the end of the newest closed fine window

    @classmethod
    def for_plan(cls, plan: Plan, **kwargs) -> Downsampler:
        return cls(plan.step_ms, plan.source_ms, **kwargs)

    def feed(self, points: Iterable[Point]) -> list[Point]:
        """Take fine windows (others are ignored), closed or partial; return the coarse
        windows whose value or openness they changed, oldest first, each with its value so
        far. A coarse window is `partial` (not final) while a fine window in it is, or while
        its last fine window has not closed; a partial fine window is replaced by the next
        partial or its closed window, and never replaces a closed one (it came late)."""
        touched: dict[tuple[str, int], None] = {}
        for p in points:
            if p.w != self.source_ms:
                continue
            start = bucket_start(p.t, self.step_ms)
            if self._horizon is not None and start < self._horizon:
                continue  # late for a window that is complete and forgotten
            key = (p.series, start)
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket()
            if p.partial:
                if p.t in bucket.fine and p.t not in bucket.partial:
                    continue  # that window has closed already
                bucket.partial.add(p.t)
            else:
                bucket.partial.discard(p.t)
                if self._closed_until is None or p.t + p.w > self._closed_until:
                    self._closed_until = p.t + p.w
            bucket.fine[p.t] = p.v
            touched[key] = None
            if self._newest is None or p.t > self._newest:
                self._newest = p.t
        out = [point for key in touched if (point := self._point(key)) is not None]
        self._forget()
        out.sort(key=lambda p: (p.t, p.series))
        return out

    def _point(self, key: tuple[str, int]) -> Point | None:
        """The coarse window `key` as now, or None when that is what was last emitted."""
        name, start = key
        bucket = self._buckets[key]
        value = aggregate(
            name, bucket.fine.values(), source_ms=self.source_ms, step_ms=self.step_ms
        )
        closed_until = self._closed_until
        partial = (
            bool(bucket.partial) or closed_until is None or start + self.step_ms > closed_until
        )
        if bucket.last == (value, partial):
            return None
        bucket.last = (value, partial)
        point = Point(name, start, self.step_ms, value, bucket.emitted, partial)
        bucket.emitted += 1
        return point

    def _forget(self) -> None:
        if self._newest is None:
            return
        horizon = bucket_start(self._newest - self.keep_ms, self.step_ms)
        if self._horizon is not None and horizon <= self._horizon:
            return
        self._horizon = horizon
        for key in [k for k in self._buckets if k[1] < horizon]:
            del self._buckets[key]


def downsample(points: Iterable[Point], step_ms: int, source_ms: int) -> list[Point]:
    """The coarse windows of `points` (a whole history at once), oldest first."""
    return Downsampler(step_ms, source_ms, keep_ms=1 << 62).feed(points)


class ChartFeed:
    """One chart subscription (a page's range): which history to read, and the windows at its
    resolution — a backfill from history first, then each batch of live windows."""

    def __init__(self, range_ms: int | None):
        self.plan = plan_for(range_ms)
        self._live = Downsampler.for_plan(self.plan)

    @property
    def resolution_ms(self) -> int:
        return self.plan.step_ms

    def since(self, *, now_ms: int, since_ms: int | None = None) -> int:
        """Where the history to read starts: `since_ms` (a reconnect's last window, inclusive:
        it may have been open) or the whole range, never more than the range back; always
        the start of a window, so the first one is whole."""
        earliest = now_ms - self.plan.range_ms
        start = earliest if since_ms is None else max(since_ms, earliest)
        return bucket_start(start, self.plan.step_ms)

    def backfill(self, history: Iterable[Point]) -> list[Point]:
        """The windows of `history` (fine windows from `since()` on); live windows continue
        from them (an open window keeps growing)."""
        self._live = Downsampler.for_plan(self.plan)
        return self._live.feed(history)

    def live(self, points: Iterable[Point]) -> list[Point]:
        return self._live.feed(points)
