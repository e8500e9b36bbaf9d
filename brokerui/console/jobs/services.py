"""Stream jobs for operators: the jobs running inside the broker's process (the demo's, see
``streams.broker.demo_jobs``), their workers' numbers, and an operator's start and stop.

Called alike by the console's views and the JSON API. Numbers come from each worker's
``streams.jobs.metrics.WorkerMetrics``, taken by the worker at most once a second; every row
carries the time they were taken (``as_of_ms``) so pages say how fresh they are. Records per
second are not here: the live charts draw them from the metrics hub (``feeds``, scope
``jobs``). Starting and stopping write one audit record each through the `AuditSink` given:

==================  ==================================================================
action              before / after
==================  ==================================================================
job.start           state / state, partitions ["topic-p"]
job.stop            state, records_in, records_out, partitions / state
job.start.failed    state / reason (the job could not start: a missing input topic...)
==================  ==================================================================
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from brokerui.audit.services import Actor, AuditSink
from streams.errors import JobStateConflict, TidelogError
from streams.jobs.embedded import JobStatus


class JobsHost(Protocol):
    """What the services need of ``streams.jobs.embedded.EmbeddedJobs``."""

    def jobs(self) -> list[JobStatus]: ...

    def status(self, name: str) -> JobStatus: ...

    def start(self, name: str) -> JobStatus: ...

    def stop(self, name: str) -> JobStatus: ...


UNAVAILABLE = (
    "Stream jobs run inside the built-in broker; on an external cluster (TIDELOG_CLUSTER) run "
    "them as workers with python -m streams.jobs run."
)


@dataclasses.dataclass(frozen=True)
class InputLag:
    topic: str
    partition: int
    position: int  # the next offset the job reads
    end: int  # the partition's end offset
    lag_records: int


@dataclasses.dataclass(frozen=True)
class JobRow:
    """One job as the page and the API show it; worker numbers as of ``worker.as_of_ms``."""

    status: JobStatus
    now_ms: int

    def __getattr__(self, name):  # the status's fields, as if they were the row's
        if name.startswith("__") or name == "status":
            raise AttributeError(name)
        return getattr(self.status, name)

    @property
    def running(self) -> bool:
        return self.status.state == "running"

    @property
    def workers(self) -> list:
        """The job's workers (an embedded job has one: this process)."""
        return [] if self.status.worker is None else [self.status.worker]

    @property
    def age_ms(self) -> int | None:
        """How old the worker's numbers are (None: never taken)."""
        w = self.status.worker
        return None if w is None or not w.as_of_ms else max(0, self.now_ms - w.as_of_ms)

    @property
    def lag(self) -> list[InputLag]:
        """Input lag per partition (internal repartition topics included: they are inputs)."""
        w = self.status.worker
        if w is None:
            return []
        rows = [
            InputLag(topic, task.partition, i["position"], i["end"], i["lag_records"])
            for task in w.tasks
            for topic, i in task.inputs.items()
        ]
        return sorted(rows, key=lambda r: (r.topic, r.partition))

    @property
    def watermarks(self) -> list[tuple[str, int, int | None]]:
        """(step, task partition, watermark ms) of every step that keeps one."""
        w = self.status.worker
        if w is None:
            return []
        return sorted(
            (step, t.partition, wm) for t in w.tasks for step, wm in t.watermarks_ms.items()
        )

    @property
    def late_by_step(self) -> dict[str, int]:
        w = self.status.worker
        out: dict[str, int] = {}
        for t in w.tasks if w is not None else ():
            for step, n in t.late.items():
                out[step] = out.get(step, 0) + n
        return out


@dataclasses.dataclass(frozen=True)
class JobsView:
    rows: list[JobRow]
    as_of_ms: int
    unavailable: str | None = None


def jobs_read(*, host: JobsHost | None, now_ms: int) -> JobsView:
    """Every embedded job with its worker's numbers; on an external cluster, none and why."""
    if host is None:
        return JobsView([], now_ms, UNAVAILABLE)
    return JobsView([JobRow(s, now_ms) for s in host.jobs()], now_ms)


def job_read(*, host: JobsHost | None, name: str, now_ms: int) -> JobRow:
    """One job (UnknownJob if there is none of that name)."""
    if host is None:
        from streams.errors import Unsupported

        raise Unsupported(UNAVAILABLE)
    return JobRow(host.status(name), now_ms)


def _partitions(status: JobStatus) -> list[str]:
    return [] if status.worker is None else [f"{t}-{p}" for t, p in status.worker.partitions]


def job_start(*, host: JobsHost, name: str, sink: AuditSink, actor: Actor) -> JobStatus:
    """Start embedded job `name` (audited). A job that cannot start raises (UnknownJob,
    JobStateConflict when it runs already, InvalidConfig for a missing input topic...); a
    start refused for its inputs is audited as ``job.start.failed``."""
    before = host.status(name)
    target = f"job {name}"
    try:
        after = host.start(name)
    except JobStateConflict:
        raise
    except TidelogError as exc:
        actor.record(
            sink,
            "job.start.failed",
            target,
            before={"state": before.state},
            after={"reason": str(exc)},
        )
        raise
    actor.record(
        sink,
        "job.start",
        target,
        before={"state": before.state},
        after={"state": after.state, "partitions": _partitions(after)},
    )
    return after


def job_stop(*, host: JobsHost, name: str, sink: AuditSink, actor: Actor) -> JobStatus:
    """Stop embedded job `name` after it writes and commits what it holds (audited);
    JobStateConflict if it is not running."""
    before = host.status(name)
    after = host.stop(name)
    w = before.worker
    actor.record(
        sink,
        "job.stop",
        f"job {name}",
        before={
            "state": before.state,
            "records_in": None if w is None else w.records_in,
            "records_out": None if w is None else w.records_out,
            "partitions": _partitions(before),
        },
        after={"state": after.state},
    )
    return after
