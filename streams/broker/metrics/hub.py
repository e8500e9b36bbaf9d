"""`MetricsHub`: the broker's live metrics — sampled every second, windowed, kept, pushed.

Every second, just after the second boundary T, the hub takes a `CounterSampler` sample and
feeds it to three window operators from `streams.processing` (the same ones user jobs use):

- a processing-time 1-second tumbling window, whose sample clock is set to T − 1 while the
  sample goes in and to T before `advance()`, so the window [T − 1 s, T) closes at once;
- a processing-time 1-minute tumbling window over the same sample (the rollup);
- an event-time 1-second tumbling count per group over the timestamps of the records the group
  committed past — its consume rate in event time, which a stop-and-catch-up does not spike.

Rates are summed (a minute the broker was up for only part of: the mean of its seconds × 60,
see `_point`), gauges keep their peak (one sample per second: the value itself). Each batch
of closed windows goes to the internal topic ``__metrics`` (retention one day) so history
survives a restart — its 1-second windows to partition 0, its 1-minute rollups to partition 1,
so a day of rollups (what the 6-hour and 24-hour charts read, see `downsample`) is 1,440 small
records, not 86,400 large ones — to an in-memory ring of the last hour (served without touching
the disk), and to subscribers.

While anyone subscribes, the hub also looks every 100 ms between the ticks (`partial`): the
series that moved since the last look (`CounterSampler.peek`: counters read, nothing per
record) go to the subscribers as *partial* points of the open second and minute, their values
so far, so a chart's newest point is at most a tenth of a second old. Partial points are never
kept; the closed window replaces its partials.

Thread-safety: `tick()` and `partial()` run on the hub's own thread (or a test's);
`subscribe`, `history` and `close` may be called from any thread.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from streams.broker.metrics.sampler import CounterSampler, Sample
from streams.broker.metrics.series import (
    GAUGE_KINDS,
    MINUTE_MS,
    SECOND_MS,
    Point,
    series,
)
from streams.errors import LogDamaged, StorageError, TopicAlreadyExists
from streams.processing import Count, Max, Sum, Tumbling, WindowOperator

log = logging.getLogger(__name__)

METRICS_TOPIC = "__metrics"
SECONDS_PARTITION = 0  # 1-second windows (and, before the rollup partition, everything)
ROLLUP_PARTITION = 1  # 1-minute rollups
METRICS_TOPIC_CONFIG = {
    "retention.ms": str(24 * 3600 * 1000),
    "segment.ms": str(3600 * 1000),  # hourly segments, so retention trims hour by hour
    "compression.type": "zstd",
    # a lost second of metrics on power loss is fine; a clean shutdown flushes everything
    "flush.messages": "1000000",
    "flush.ms": "5000",
}
EVENT_TIME_OUT_OF_ORDERNESS_MS = 1000
EVENT_TIME_GRACE_MS = 5000
EVENT_TIME_IDLE_MS = 5000
RING_MS = 3600 * 1000
TICK_AFTER_MS = 5  # a tick runs this long after the second boundary
PARTIAL_MS = 100  # the open windows go to subscribers this often (at 200 ms, the wait alone
# was the p99 budget of 250 ms from produce to browser: issue 27)
Subscriber = Callable[[list[Point]], None]


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class MetricsHub:
    def __init__(
        self,
        store,
        coordinator,
        *,
        clock: Callable[[], int] = _wall_ms,
        persist: bool = True,
    ):
        self._store = store
        self._clock = clock
        self._persist = persist
        self._sampler = CounterSampler(store, coordinator)
        self._sample_ms = 0  # the clock the processing-time operators read
        self._seconds = self._processing_operator(SECOND_MS)
        self._minutes = self._processing_operator(MINUTE_MS)
        # one event-time operator per group: each group's watermark follows its own progress
        # (a stopped or slow group must not hold back, or be run over by, another one)
        self._event_time: dict[str, _GroupEventTime] = {}
        self._lock = threading.Lock()
        self._subscribers: list[Subscriber] = []
        self._ring: deque[tuple[int, list[Point]]] = deque()
        self._ring_start = clock()
        self._last_tick: int | None = None  # the start of the open second
        self._sampled_at = 0  # the clock at the last tick's sample
        self._open: dict[tuple[str, int], Point] = {}  # (series, w) -> its newest partial
        self._stop = threading.Event()
        self._copy_pending = False
        self._thread: threading.Thread | None = None
        if persist:
            self._ensure_topic()
            self._load_ring()

    def _processing_operator(self, size_ms: int) -> WindowOperator:
        return WindowOperator(
            Tumbling(size_ms),
            {"sum": Sum(), "max": Max(), "n": Count()},
            time="processing",
            clock=lambda: self._sample_ms,
        )

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> MetricsHub:
        self._thread = threading.Thread(target=self._run, name="metrics-hub", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        try:
            self.copy_old_rollups()  # before the first tick (a baseline): no window is lost
        except Exception:
            log.exception("metrics: copying the older rollups failed; their history is not shown")
        while True:
            # wake just after the next second boundary (the window that just ended closes),
            # and while anyone listens every PARTIAL_MS between (the open window so far)
            with self._lock:
                step = PARTIAL_MS if self._subscribers else SECOND_MS
            delay = (step - (self._clock() - TICK_AFTER_MS) % step) / 1000
            if self._stop.wait(delay):
                return
            now = self._clock()
            due = self._last_tick is None or now - now % SECOND_MS > self._last_tick
            try:
                if due:
                    self.tick()
                else:
                    self.partial()
            except StorageError:  # a full disk: its partition logged one line for the streak
                pass
            except Exception:  # a bad tick must not end the metrics for the process's life
                log.exception("metrics: sampling failed; trying again next second")

    # ------------------------------------------------------------------ sampling

    def tick(self) -> list[Point]:
        """Take one sample and emit the windows that closed; returns the emitted points."""
        now = self._clock()
        boundary = now - now % SECOND_MS
        sample = self._sampler.sample()
        self._sampled_at = self._clock()
        if self._last_tick is None:  # the first sample is only a baseline
            self._last_tick = boundary
            return []
        self._last_tick = boundary
        with self._lock:
            self._open = {}  # the windows they were of close now
        points = self._processing_points(sample, boundary)
        points += self._event_time_points(sample)
        if points:
            self._emit(now, points)
        return points

    def partial(self) -> list[Point]:
        """The open second and minute so far, for the subscribers alone (not kept: the closed
        windows replace them): each series that moved since the previous partial
        (`CounterSampler.peek`) as two `partial` points. A rate's second is the rate measured
        since the last tick, as a total over the second; its minute the mean rate of its
        seconds so far with this one, as `_point` computes the closed minute; a gauge's second
        is its value now, its minute the peak so far. Returns the points."""
        if self._last_tick is None:
            return []
        start = self._last_tick
        elapsed = self._clock() - self._sampled_at
        if elapsed <= 0:
            return []
        peek = self._sampler.peek()
        minute = start - start % MINUTE_MS
        per_minute = MINUTE_MS // SECOND_MS
        points: list[Point] = []
        for name, amount in peek.rates.items():
            points.append(Point(name, start, SECOND_MS, amount * SECOND_MS / elapsed, 0, True))
            state = self._minutes.fixed_window_state(name, minute)
            n, total = (state[1], state[2]) if state else (0, 0.0)
            value = (total + amount) * per_minute / (n + elapsed / SECOND_MS)
            points.append(Point(name, minute, MINUTE_MS, value, 0, True))
        for name, value in peek.gauges.items():
            points.append(Point(name, start, SECOND_MS, value, 0, True))
            state = self._minutes.fixed_window_state(name, minute)
            peak = state[4] if state and state[4] is not None else value
            points.append(Point(name, minute, MINUTE_MS, max(peak, value), 0, True))
        if points:
            with self._lock:
                for point in points:
                    self._open[(point.series, point.w)] = point
            self._deliver(points)
        return points

    def _processing_points(self, sample: Sample, boundary: int) -> list[Point]:
        events = [(name, value, None, 0) for name, value in sample.rates.items()]
        events += [(name, value, None, 0) for name, value in sample.gauges.items()]
        self._sample_ms = boundary - 1  # the sample belongs to [boundary - 1 s, boundary)
        self._seconds.process_many(events)
        self._minutes.process_many(events)
        self._sample_ms = boundary
        out = [_point(r, SECOND_MS) for r in self._seconds.advance()]
        out += [_point(r, MINUTE_MS) for r in self._minutes.advance()]
        return out

    def _event_time_points(self, sample: Sample) -> list[Point]:
        by_group: dict[str, list] = {}
        for c in sample.consumed:
            by_group.setdefault(c.group, []).append(c)
        out: list[Point] = []
        for group in by_group.keys() | self._event_time.keys():
            op = self._event_time.get(group)
            if op is None:
                op = self._event_time[group] = _GroupEventTime(group, self._clock)
            out += op.points(by_group.get(group, ()))
        return out

    # ------------------------------------------------------------------ emitting

    def _emit(self, now: int, points: list[Point]) -> None:
        if self._persist:
            seconds = [p for p in points if p.w != MINUTE_MS]
            rollups = [p for p in points if p.w == MINUTE_MS]
            for partition, batch in ((SECONDS_PARTITION, seconds), (ROLLUP_PARTITION, rollups)):
                if batch:
                    value = json.dumps({"p": [p.closed() for p in batch]}, separators=(",", ":"))
                    self._store.append(
                        METRICS_TOPIC, value.encode(), partition=partition, timestamp_ms=now
                    )
        with self._lock:
            self._ring.append((now, points))
            while self._ring and self._ring[0][0] < now - RING_MS:
                self._ring_start = self._ring.popleft()[0]
        self._deliver(points)

    def _deliver(self, points: list[Point]) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            try:
                callback(points)
            except Exception:
                log.exception("metrics: a subscriber failed")

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(points)` with every batch of closed windows and, every PARTIAL_MS
        between, of open ones (`partial`) — from the hub's thread; it must not block.
        Returns the function that unsubscribes."""
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    # ------------------------------------------------------------------ history

    def history(
        self,
        since_ms: int,
        until_ms: int | None = None,
        *,
        resolution_ms: int = SECOND_MS,
        match: Callable[[str], bool] | None = None,
        open_windows: bool = False,
    ) -> list[Point]:
        """Points of windows starting in [since_ms, until_ms) at one resolution, oldest first
        (corrections follow the point they correct); with `open_windows`, last the open ones
        as the latest `partial` said them. The last hour comes from memory, older history
        from ``__metrics``."""
        with self._lock:
            in_ring = since_ms >= self._ring_start
            batches = list(self._ring) if in_ring else None
            still_open = list(self._open.values()) if open_windows else []
        if batches is None:
            partition = ROLLUP_PARTITION if resolution_ms == MINUTE_MS else SECONDS_PARTITION
            batches = self._read_topic(since_ms, partition)
        batches.append((0, still_open))
        until = until_ms if until_ms is not None else 1 << 62
        return [
            p
            for _emitted, points in batches
            for p in points
            if p.w == resolution_ms
            and since_ms <= p.t < until
            and (match is None or match(p.series))
        ]

    def _ensure_topic(self) -> None:
        if METRICS_TOPIC not in self._store.list_topics():
            try:
                self._store.create_topic(METRICS_TOPIC, 2, dict(METRICS_TOPIC_CONFIG))
                return
            except TopicAlreadyExists:
                pass
        if self._store.partition_count(METRICS_TOPIC) < 2:  # made by a version without rollups
            self._store.add_partitions(METRICS_TOPIC, 2)
            self._copy_pending = True

    def copy_old_rollups(self) -> int:
        """Once, after `_ensure_topic` added the rollup partition to an older ``__metrics``:
        copy the 1-minute rollups kept until then among the 1-second windows of partition 0
        to partition 1 (read record by record: a day of partition 0 is large), so the 6-hour
        and 24-hour charts keep that history. Returns how many batches were copied."""
        if not self._copy_pending:
            return 0
        self._copy_pending = False
        offset, end = self._store.offsets(METRICS_TOPIC, SECONDS_PARTITION)
        copied = 0
        while offset < end:
            records = self._store.read(METRICS_TOPIC, SECONDS_PARTITION, offset, 500, 8 << 20)
            if not records:
                break
            for r in records:
                if r.offset >= end:
                    break
                rollups = [p for p in _decode(r.value) if p.w == MINUTE_MS]
                if rollups:
                    value = json.dumps({"p": [p.closed() for p in rollups]}, separators=(",", ":"))
                    self._store.append(
                        METRICS_TOPIC,
                        value.encode(),
                        partition=ROLLUP_PARTITION,
                        timestamp_ms=r.timestamp_ms,
                    )
                    copied += 1
            offset = records[-1].offset + 1
        if copied:
            log.info("metrics: copied %d minutes of rollups to their own partition", copied)
        return copied

    def _load_ring(self) -> None:
        since = self._clock() - RING_MS
        batches = self._read_topic(since, SECONDS_PARTITION)
        batches += self._read_topic(since, ROLLUP_PARTITION)
        batches.sort(key=_emitted_at)  # stable: a second's windows stay before its rollups
        with self._lock:
            self._ring.extend(batches)
            self._ring_start = since

    def _read_topic(self, since_ms: int, partition: int) -> list[tuple[int, list[Point]]]:
        """Every batch of `partition` emitted at or after `since_ms` (a window is emitted after
        it starts)."""
        if not self._persist:
            return []
        offset = self._store.offset_for_timestamp(METRICS_TOPIC, partition, since_ms)
        if offset is None:
            return []
        out: list[tuple[int, list[Point]]] = []
        while True:
            try:
                records = self._store.read(METRICS_TOPIC, partition, offset, 1000, 8 << 20)
            except LogDamaged as exc:  # lost history must not keep the broker from starting
                log.warning("metrics: skipping damaged history (%s)", exc)
                offset = max(exc.end_offset, offset + 1)
                continue
            if not records:
                return out
            for r in records:
                out.append((r.timestamp_ms, _decode(r.value)))
            offset = records[-1].offset + 1


class _GroupEventTime:
    """One group's consume rate in event time: a 1-second tumbling sum over the records it
    committed past, each (topic, partition) an input partition of the operator."""

    def __init__(self, group: str, clock: Callable[[], int]):
        self.name = series("group_records_et", group)
        self.inputs: dict[tuple[str, int], int] = {}
        self.operator = WindowOperator(
            Tumbling(SECOND_MS),
            {"n": Sum()},  # fed (event time, record count) pairs, one per batch and window
            time="event",
            out_of_orderness_ms=EVENT_TIME_OUT_OF_ORDERNESS_MS,
            grace_ms=EVENT_TIME_GRACE_MS,
            idle_timeout_ms=EVENT_TIME_IDLE_MS,
            clock=clock,
        )

    def points(self, consumed) -> list[Point]:
        events = []
        for c in consumed:
            source = self.inputs.setdefault((c.topic, c.partition), len(self.inputs))
            events.extend((self.name, n, ts, source) for ts, n in c.counts)
        # merged by event time: a catch-up reads each partition's backlog in turn, and a
        # partition idle until now would otherwise let the watermark run ahead of it
        events.sort(key=_event_time_of)
        results = self.operator.process_many(events) if events else []
        results += self.operator.advance()
        return [
            Point(r.key, r.start, r.end - r.start, r.values["n"], r.revision)
            for r in results
            if r.revision == 0 or r.correction  # a closing emission repeats the last value
        ]


def _emitted_at(batch: tuple[int, list[Point]]) -> int:
    return batch[0]


def _event_time_of(event: tuple) -> int:
    return event[2]


def _point(result, size_ms: int) -> Point:
    """A closed window as a point: a gauge's peak; a rate's total, where a 1-minute rollup of
    fewer than 60 samples (the broker was up for part of the minute) is the mean of its
    seconds × 60 — the average rate while measured, not a dip to a fraction of it."""
    kind = result.key.split("/", 1)[0]
    if kind in GAUGE_KINDS:
        value = result.values["max"]
    else:
        values = result.values
        value = values["sum"] * (size_ms // SECOND_MS) / values["n"] if values["n"] else 0.0
    return Point(result.key, result.start, size_ms, value, result.revision)


def _decode(value: bytes | None) -> list[Point]:
    try:
        return [Point(*p) for p in json.loads(value or b"{}").get("p", [])]
    except (ValueError, TypeError):
        log.warning("metrics: skipping an unreadable __metrics record")
        return []


def series_matching(prefixes: Iterable[str]) -> Callable[[str], bool]:
    """A `match` for `history()`: series whose name starts with one of `prefixes`."""
    wanted = tuple(prefixes)
    return lambda name: name.startswith(wanted)
