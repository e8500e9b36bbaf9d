"""Consumer group health: the broker keeps a sliding window of every group's commits and every
partition's end offsets, and `GroupHealthMonitor.group_health` turns them into Burrow's
statuses (`streams.groups.evaluator`) plus three numbers people act on:

- lag in time: the age of the oldest record the group has not consumed (now − the timestamp
  of the record at its committed offset); 0 when caught up;
- time to catch up: lag ÷ (consume rate − produce rate), both measured over the window, or
  None with the reason (caught up, not measured yet, not gaining on producers);
- lag as a share of retention: that age over the topic's ``retention.ms``, or the lag's bytes
  over ``retention.bytes``, whichever is larger — at 100 % retention deletes unread records.

Sampling: every `interval_ms` (5 s) the monitor reads the committed offsets of every group
(with their commit times) and the end offset of every partition. A commit whose time differs
from the last one kept is a new commit and goes into the partition's window (the last `window`
commits, Burrow's "intervals"), with the lag at that moment. The windows live in memory: after
a restart they fill again within a minute or so.

Thread-safety: `sample()` runs on the monitor's thread (or a test's); `group_health` and
`all_groups` may be called from any thread.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from streams.errors import OffsetOutOfRange, StorageError, UnknownGroup, UnknownTopic
from streams.groups.evaluator import (
    MIN_COMMITS,
    WINDOW,
    Commit,
    Status,
    evaluate_partition,
    worst,
)
from streams.groups.lag import group_lag
from streams.log.store import is_internal

log = logging.getLogger(__name__)

INTERVAL_MS = 5000
MIN_SPAN_MS = 30_000  # a stop needs at least this long without a commit (with lag)

Key = tuple[str, str, int]  # (group, topic, partition)


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclasses.dataclass(frozen=True)
class PartitionHealth:
    topic: str
    partition: int
    status: Status
    reason: str
    complete: bool  # the window held enough commits to judge more than STOP and ERR
    commits: int  # commits in the window
    lag: int | None  # records; None without a commit
    lag_age_ms: int | None  # age of the oldest unconsumed record; 0 when caught up
    consume_rate: float | None  # records/s over the window
    produce_rate: float | None  # records/s over the window
    catch_up_s: float | None  # None: see catch_up_note
    catch_up_note: str
    retention_share: float | None  # 1.0 = retention is about to delete unread records
    retention_note: str


@dataclasses.dataclass(frozen=True)
class GroupHealth:
    group_id: str
    status: Status
    partitions: tuple[PartitionHealth, ...]

    @property
    def worst(self) -> PartitionHealth | None:
        """The partition that decided the group's status (the largest lag among equals)."""
        if not self.partitions:
            return None
        return max(self.partitions, key=lambda p: (p.status.rank, p.lag or 0))

    @property
    def reason(self) -> str:
        w = self.worst
        if w is None:
            return "no committed offsets to judge"
        if self.status is Status.OK and len(self.partitions) > 1:
            return f"all {len(self.partitions)} partitions OK"
        return f"{w.topic}-{w.partition}: {w.reason}"

    @property
    def lag(self) -> int:
        return sum(p.lag or 0 for p in self.partitions)

    @property
    def lag_age_ms(self) -> int | None:
        ages = [p.lag_age_ms for p in self.partitions if p.lag_age_ms is not None]
        return max(ages) if ages else None

    @property
    def catch_up_s(self) -> float | None:
        """The slowest partition's time to catch up (they are consumed in parallel); None when
        one with lag is not gaining or not measured."""
        lagging = [p for p in self.partitions if p.lag]
        if not lagging:
            return 0.0
        times = [p.catch_up_s for p in lagging if p.catch_up_s is not None]
        return max(times) if len(times) == len(lagging) else None

    @property
    def catch_up_note(self) -> str:
        lagging = [p for p in self.partitions if p.lag]
        if not lagging:
            return "caught up"
        for p in lagging:
            if p.catch_up_s is None:
                return f"{p.topic}-{p.partition}: {p.catch_up_note}"
        return "the slowest partition, at the window's rates"

    @property
    def retention_share(self) -> float | None:
        shares = [p.retention_share for p in self.partitions if p.retention_share is not None]
        return max(shares) if shares else None


class CommitWindows:
    """The last `window` commits of each (group, topic, partition) and the last `window`
    (time, end offset) samples of each partition. Not thread-safe: the monitor locks."""

    def __init__(self, window: int = WINDOW):
        self.window = window
        self._commits: dict[Key, deque[Commit]] = {}
        self._ends: dict[tuple[str, int], deque[tuple[int, int]]] = {}

    def observe_end(self, topic: str, partition: int, end_offset: int, at_ms: int) -> None:
        ends = self._ends.setdefault((topic, partition), deque(maxlen=self.window))
        ends.append((at_ms, end_offset))

    def observe_commit(self, key: Key, *, offset: int, commit_ms: int, end_offset: int) -> bool:
        """Keep a commit unless it is the one kept last (same time); True when kept."""
        commits = self._commits.get(key)
        if commits is None:
            commits = self._commits[key] = deque(maxlen=self.window)
        if commits and commits[-1].timestamp_ms == commit_ms and commits[-1].offset == offset:
            return False
        commits.append(Commit(offset, commit_ms, max(0, end_offset - offset)))
        return True

    def commits(self, key: Key) -> list[Commit]:
        return list(self._commits.get(key, ()))

    def end_offsets(self, topic: str, partition: int) -> list[tuple[int, int]]:
        """(time ms, end offset) samples, oldest first."""
        return list(self._ends.get((topic, partition), ()))

    def keep_only(self, commit_keys: set[Key], partitions: set[tuple[str, int]]) -> None:
        """Forget groups, offsets and partitions that are gone."""
        for key in set(self._commits) - commit_keys:
            del self._commits[key]
        for tp in set(self._ends) - partitions:
            del self._ends[tp]


class GroupHealthMonitor:
    """Samples commits and end offsets every `interval_ms` on its own thread (`start`), and
    judges groups by them (`group_health`)."""

    def __init__(
        self,
        store,
        coordinator,
        *,
        clock: Callable[[], int] = _wall_ms,
        interval_ms: int = INTERVAL_MS,
        window: int = WINDOW,
        min_commits: int = MIN_COMMITS,
        min_span_ms: int = MIN_SPAN_MS,
        allowed_lag: int = 0,
    ):
        self._store = store
        self._coordinator = coordinator
        self._clock = clock
        self.interval_ms = interval_ms
        self.min_commits = min_commits
        self.min_span_ms = min_span_ms
        self.allowed_lag = allowed_lag
        self._windows = CommitWindows(window)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._listeners: list[Callable[[int], None]] = []

    @property
    def clock(self) -> Callable[[], int]:
        return self._clock

    @property
    def window(self) -> int:
        """Commits kept per partition."""
        return self._windows.window

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> GroupHealthMonitor:
        self._thread = threading.Thread(target=self._run, name="group-health", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def add_listener(self, callback: Callable[[int], None]) -> None:
        """Call `callback(now_ms)` after every sample, on the monitor's thread (the alert
        engine evaluates its rules there)."""
        self._listeners.append(callback)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_ms / 1000):
            try:
                now = self.sample()
            except StorageError:
                continue
            except Exception:  # a bad sample must not end the monitor for the process's life
                log.exception("group health: sampling failed; trying again")
                continue
            for callback in list(self._listeners):
                try:
                    callback(now)
                except Exception:
                    log.exception("group health: a listener failed")

    # ------------------------------------------------------------------ sampling

    def sample(self) -> int:
        """Read every partition's end offset and every group's commits once; returns the
        time of the sample."""
        now = self._clock()
        ends: dict[tuple[str, int], int] = {}
        for plog in self._store.all_partitions():
            if not is_internal(plog.topic):
                ends[(plog.topic, plog.partition)] = plog.high_watermark
        seen: set[Key] = set()
        with self._lock:
            for (topic, p), end in ends.items():
                self._windows.observe_end(topic, p, end, now)
            for group, _state in self._coordinator.list_groups():
                for (topic, p), c in self._coordinator.committed(group).items():
                    partition_end = ends.get((topic, p))
                    if partition_end is None:
                        continue
                    key = (group, topic, p)
                    seen.add(key)
                    self._windows.observe_commit(
                        key,
                        offset=c.offset,
                        commit_ms=c.commit_timestamp_ms,
                        end_offset=partition_end,
                    )
            self._windows.keep_only(seen, set(ends))
        return now

    # ------------------------------------------------------------------ judging

    def all_groups(self, now_ms: int | None = None) -> dict[str, GroupHealth]:
        out = {}
        for group, _state in self._coordinator.list_groups():
            try:
                out[group] = self.group_health(group, now_ms)
            except UnknownGroup:
                continue  # deleted meanwhile
        return out

    def group_health(self, group_id: str, now_ms: int | None = None) -> GroupHealth:
        """The group's status and its partitions'; UnknownGroup when there is no such group."""
        now = self._clock() if now_ms is None else now_ms
        lag = group_lag(self._coordinator, self._store, group_id)
        configs: dict[str, dict] = {}
        rows = []
        for row in lag.partitions:
            if row.committed is None:
                rows.append(_not_committed(row))
                continue
            key = (group_id, row.topic, row.partition)
            with self._lock:
                commits = self._windows.commits(key)
                ends = self._windows.end_offsets(row.topic, row.partition)
            verdict = evaluate_partition(
                commits,
                current_lag=row.lag or 0,
                now_ms=now,
                end_offsets=ends,
                allowed_lag=self.allowed_lag,
                min_commits=self.min_commits,
                min_span_ms=self.min_span_ms,
                fallen_behind=row.fallen_behind_retention,
            )
            age = self._lag_age(row, now)
            consume = _rate([(c.timestamp_ms, c.offset) for c in commits])
            produce = _rate(ends)
            catch_up, note = _catch_up(row.lag or 0, consume, produce)
            if row.topic not in configs:
                configs[row.topic] = self._config(row.topic)
            share, share_note = self._retention_share(row, age, configs[row.topic])
            rows.append(
                PartitionHealth(
                    row.topic,
                    row.partition,
                    verdict.status,
                    verdict.reason,
                    verdict.complete,
                    len(commits),
                    row.lag,
                    age,
                    consume,
                    produce,
                    catch_up,
                    note,
                    share,
                    share_note,
                )
            )
        return GroupHealth(group_id, worst(r.status for r in rows), tuple(rows))

    def _lag_age(self, row, now: int) -> int | None:
        if not row.lag:
            return 0
        offset = max(row.committed, row.log_start_offset)
        try:
            records = self._store.read(row.topic, row.partition, offset, 1, 1 << 20)
        except (OffsetOutOfRange, UnknownTopic):
            return None
        if not records:
            return None
        return max(0, now - records[0].timestamp_ms)

    def _config(self, topic: str) -> dict:
        try:
            return self._store.describe_topic(topic).config
        except UnknownTopic:
            return {}

    def _retention_share(self, row, age: int | None, config: dict) -> tuple[float | None, str]:
        retention_ms = int(config.get("retention.ms", "-1"))
        retention_bytes = int(config.get("retention.bytes", "-1"))
        if "delete" not in config.get("cleanup.policy", "delete"):
            return None, "compacted topic: retention does not delete by age"
        shares = []
        if retention_ms > 0 and age is not None:
            shares.append((age / retention_ms, "oldest unread record's age ÷ retention.ms"))
        if retention_bytes > 0 and row.lag:
            try:
                plog = self._store.partition_log(row.topic, row.partition)
            except UnknownTopic:
                plog = None
            records = row.end_offset - row.log_start_offset
            if plog is not None and records > 0:
                lag_bytes = row.lag * plog.size_bytes / records
                shares.append((lag_bytes / retention_bytes, "lag's bytes ÷ retention.bytes"))
        if not shares:
            return None, "no retention limit: nothing is deleted unread"
        return max(shares)


def _not_committed(row) -> PartitionHealth:
    return PartitionHealth(
        row.topic,
        row.partition,
        Status.OK,
        "assigned, no commit yet",
        False,
        0,
        None,
        None,
        None,
        None,
        None,
        "no commit yet",
        None,
        "no commit yet",
    )


def _rate(points: list[tuple[int, int]]) -> float | None:
    """Records/s between the first and the last (time ms, offset) of a window; None with
    fewer than two points or no time between them."""
    if len(points) < 2:
        return None
    (t0, o0), (t1, o1) = points[0], points[-1]
    if t1 <= t0:
        return None
    return max(0, o1 - o0) * 1000 / (t1 - t0)


def _catch_up(lag: int, consume: float | None, produce: float | None) -> tuple[float | None, str]:
    if lag <= 0:
        return 0.0, "caught up"
    if consume is None:
        return None, "not measured yet: fewer than two commits in the window"
    gain = consume - (produce or 0.0)
    if gain <= 0:
        return None, (
            f"not gaining: consuming {consume:.1f} records/s, producing {produce or 0:.1f}"
            " records/s"
        )
    return lag / gain, "lag ÷ (consume rate − produce rate) over the window"
