"""``JobMetrics``: what one worker of a job reports about itself (the console's Jobs page).

A worker (a ``Runner``) owns one ``JobMetrics``. The runner's thread writes it — ``observe``
after a round of processing (at most once per ``every_ms``: it walks every task and store),
``checkpointed`` after each checkpoint, ``record_error`` when a record fails — and any other
thread reads ``snapshot()``: a frozen ``WorkerMetrics`` with the time it was taken
(``as_of_ms``), so a page can say how fresh each number is.

Counts (records in and out, late and dropped events) are totals since the worker opened its
current tasks (a rebalance that moves a task away takes its counts with it). Records per
second are not kept here: the broker's metrics hub measures them from the job's offset commits
(``group_records/<job>``) and its output topics (``records_in/<topic>``) like any consumer
group's and producer's, and the console charts those.

Thread-safety: one writer thread, any number of readers (a lock guards the snapshot swap).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

MAX_ERRORS = 20  # the newest record errors kept per worker


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class RecordFault:
    """A record the job failed on: where it is, what went wrong, when."""

    topic: str
    partition: int
    offset: int
    error: str
    at_ms: int


@dataclass(frozen=True)
class TaskMetrics:
    """One task (input partition number) of a worker."""

    partition: int
    inputs: dict[str, dict]  # topic -> {"position", "end", "lag_records"}
    watermarks_ms: dict[str, int | None]  # step -> event-time watermark (None: no event yet)
    late: dict[str, int]  # step -> late events
    dropped: int  # late events of steps without a late() side output: lost
    state_keys: dict[str, int]  # store -> keys
    records_in: int
    records_out: int


@dataclass(frozen=True)
class WorkerMetrics:
    job: str
    host: str
    pid: int
    started_ms: int
    as_of_ms: int  # when the task numbers below were taken (0: never)
    status: str  # "starting", "running", "failed", "stopped"
    tasks: list[TaskMetrics] = field(default_factory=list)
    last_checkpoint_ms: int | None = None
    last_checkpoint_duration_ms: float | None = None
    checkpoints: int = 0
    errors: list[RecordFault] = field(default_factory=list)
    error_count: int = 0

    @property
    def partitions(self) -> list[tuple[str, int]]:
        """The input partitions this worker owns, as (topic, partition)."""
        return sorted((t, task.partition) for task in self.tasks for t in task.inputs)

    @property
    def records_in(self) -> int:
        return sum(t.records_in for t in self.tasks)

    @property
    def records_out(self) -> int:
        return sum(t.records_out for t in self.tasks)

    @property
    def late(self) -> int:
        return sum(sum(t.late.values()) for t in self.tasks)

    @property
    def dropped(self) -> int:
        return sum(t.dropped for t in self.tasks)

    @property
    def lag_records(self) -> int:
        return sum(i["lag_records"] for t in self.tasks for i in t.inputs.values())

    @property
    def state_keys(self) -> dict[str, int]:
        """Keys per store, over this worker's tasks."""
        out: dict[str, int] = {}
        for t in self.tasks:
            for store, n in t.state_keys.items():
                out[store] = out.get(store, 0) + n
        return out

    @property
    def keeps_watermark(self) -> bool:
        """Whether any step keeps an event-time watermark (a window, a join, a pattern): a job
        of filters, maps and re-keying has none to show."""
        return any(t.watermarks_ms for t in self.tasks)

    @property
    def watermark_ms(self) -> int | None:
        """The slowest watermark of any step of any task (None: no step has one yet)."""
        marks = [w for t in self.tasks for w in t.watermarks_ms.values() if w is not None]
        return min(marks) if marks else None


class Observable(Protocol):
    """What ``observe`` reads of a runner: its tasks, and ``describe()`` (per task its
    inputs' positions and lag)."""

    tasks: dict

    def describe(self) -> dict: ...


class JobMetrics:
    def __init__(
        self,
        job: str,
        *,
        every_ms: int = 1000,
        clock: Callable[[], int] = wall_ms,
        host: str | None = None,
        pid: int | None = None,
    ):
        self.job, self.every_ms, self._clock = job, every_ms, clock
        self.host = host or socket.gethostname()
        self.pid = pid if pid is not None else os.getpid()
        self.started_ms = clock()
        self._lock = threading.Lock()
        self._status = "starting"
        self._tasks: list[TaskMetrics] = []
        self._as_of = 0
        self._ckpt_at: int | None = None
        self._ckpt_ms: float | None = None
        self._ckpts = 0
        self._errors: deque[RecordFault] = deque(maxlen=MAX_ERRORS)
        self._error_count = 0

    # ------------------------------------------------------------------ writer side

    def observe(self, runner: Observable, *, force: bool = False) -> bool:
        """Take the task numbers from `runner` (its thread only); skipped when the last look is
        younger than ``every_ms`` unless `force`. Returns whether it looked."""
        now = self._clock()
        if not force and now - self._as_of < self.every_ms:
            return False
        tasks = []
        described = runner.describe()["tasks"]
        for p, task in sorted(runner.tasks.items()):
            inputs = {
                topic: {
                    "position": i["position"],
                    "end": i["position"] + i["lag_records"],
                    "lag_records": i["lag_records"],
                }
                for topic, i in described[p]["inputs"].items()
            }
            late = task.late_counts()
            tasks.append(
                TaskMetrics(
                    partition=p,
                    inputs=inputs,
                    watermarks_ms=task.watermarks(),
                    late={step: n for step, (n, _) in late.items()},
                    dropped=sum(n for n, side in late.values() if not side),
                    state_keys={name: s.size() for name, s in task.stores.items()},
                    records_in=task.metrics["in"],
                    records_out=task.metrics["out"],
                )
            )
        with self._lock:
            self._tasks, self._as_of = tasks, now
            if self._status == "starting":
                self._status = "running"
        return True

    def checkpointed(self, started_monotonic: float) -> None:
        """A checkpoint that began at `started_monotonic` (``time.monotonic()``) just ended."""
        duration = (time.monotonic() - started_monotonic) * 1000
        with self._lock:
            self._ckpt_at, self._ckpt_ms = self._clock(), duration
            self._ckpts += 1

    def record_error(self, topic: str, partition: int, offset: int, error: BaseException) -> None:
        fault = RecordFault(
            topic, partition, offset, f"{type(error).__name__}: {error}", self._clock()
        )
        with self._lock:
            self._errors.append(fault)
            self._error_count += 1

    def set_status(self, status: str) -> None:
        with self._lock:
            self._status = status

    # ------------------------------------------------------------------ reader side

    def snapshot(self) -> WorkerMetrics:
        with self._lock:
            return WorkerMetrics(
                job=self.job,
                host=self.host,
                pid=self.pid,
                started_ms=self.started_ms,
                as_of_ms=self._as_of,
                status=self._status,
                tasks=list(self._tasks),
                last_checkpoint_ms=self._ckpt_at,
                last_checkpoint_duration_ms=self._ckpt_ms,
                checkpoints=self._ckpts,
                errors=list(self._errors),
                error_count=self._error_count,
            )
