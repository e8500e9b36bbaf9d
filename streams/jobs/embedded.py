"""``EmbeddedJobs``: stream jobs run inside the broker's process (the demo's, and the console's
start/stop), each one ``Runner`` on its own thread over the broker's ``LogStore``.

A job is registered as a ``JobSpec`` (a name, a function that builds the ``Job``, a sentence
saying what it shows); ``start(name)`` builds it, starts its runner (inputs checked, internal
topics created, state restored from changelogs — an error here is raised to the caller and
nothing runs) and runs it on a daemon thread until ``stop(name)``, which writes and commits
what the job holds (``Runner.close``) before returning. The thread runs a round (read,
process, checkpoint: outputs, changelogs, offsets) at most every ``round_interval_s`` — at
once while a backlog fills whole rounds — and none while no input has records to read, so an
idle job writes nothing and a busy one commits about once a second, not once per record.
A job whose record fails
(``RecordError``) stops with status ``failed``, its error kept in its metrics, its input
offsets left before the failing record (nothing is lost; a restart reads it again).

The runner is the job's only worker: the one member of the job's consumer group (named after
the job), so it owns every partition, its offsets are committed under the job's name (the
broker's metrics hub measures its records per second and lag like any group's), and an
offset reset of that group is refused while the job runs, as Kafka refuses one while a
group has members.

Thread-safety: ``start``/``stop``/``jobs`` may be called from any thread (one lock guards the
table; a job's runner is touched only by its own thread).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from streams.errors import JobStateConflict, UnknownJob
from streams.jobs.job import Job
from streams.jobs.metrics import JobMetrics, WorkerMetrics
from streams.jobs.runner import RecordError, Runner

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSpec:
    name: str
    build: Callable[[], Job]
    description: str = ""


@dataclass(frozen=True)
class JobStatus:
    """One embedded job as the console shows it."""

    name: str
    description: str
    state: str  # "stopped" (never started or stopped), "starting", "running", "failed"
    inputs: list[str]
    outputs: list[str]  # every topic it writes, its late side outputs included
    late_outputs: list[str]  # the topics of its ``Stream.late()`` side outputs
    worker: WorkerMetrics | None  # the last run's worker (None: never started)
    failure: str | None = None  # why it failed (the record error, or the start error)


# An embedded job is the one member of its consumer group (the group is named after the job),
# as a Kafka Streams application's instances are members of theirs: the console shows the
# group Stable with the job's member, and refuses an offset reset while the job runs (stop it,
# reset, start it: a replay). Its client heartbeats from a thread of its own, as Kafka's Java
# client does; the job's thread polls once per round, or once per idle wait
# (``round_interval_s``) when there is nothing to read, so that it takes part in a rebalance
# (another worker of the job joining through the Kafka port) within the rebalance timeout.
# The client's own timeouts (``streams.client.Consumer``: session 10 s, rebalance 30 s) hold.
GROUP_OPTIONS: dict = {}


class _Running:
    def __init__(self, runner: Runner):
        self.runner = runner
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.failure: str | None = None


def _has_input(runner: Runner) -> bool:
    """Whether any input partition of the runner's tasks has records it has not read."""
    tasks = runner.describe()["tasks"].values()
    return any(i["lag_records"] > 0 for t in tasks for i in t["inputs"].values())


class EmbeddedJobs:
    def __init__(
        self,
        store,
        coordinator,
        *,
        round_interval_s: float = 1.0,
        metrics_every_ms: int = 1000,
        group_options: dict | None = None,
    ):
        """`group_options`: the job's group client's (``streams.client.Consumer``) timeouts,
        ``GROUP_OPTIONS`` by default; `round_interval_s` must stay well under its rebalance
        timeout (an idle job polls once per interval)."""
        self._store, self._coordinator = store, coordinator
        self._round_interval = round_interval_s
        self._group_options = GROUP_OPTIONS if group_options is None else group_options
        self._metrics_every = metrics_every_ms
        self._lock = threading.Lock()
        self._specs: dict[str, JobSpec] = {}
        self._graphs: dict[str, Job] = {}
        self._runs: dict[str, _Running] = {}  # the latest run of each job started

    def register(self, spec: JobSpec) -> None:
        job = spec.build()  # built once here to list its topics (and fail early if it cannot)
        if job.name != spec.name:
            raise ValueError(f"job spec {spec.name!r} builds a job named {job.name!r}")
        with self._lock:
            self._specs[spec.name] = spec
            self._graphs[spec.name] = job

    def names(self) -> list[str]:
        with self._lock:
            return list(self._specs)

    def start(self, name: str) -> JobStatus:
        """Start job `name`: UnknownJob, JobStateConflict (running already), or what the
        runner's start raises (a missing input topic: InvalidConfig, CoPartitioningError)."""
        with self._lock:
            spec = self._specs.get(name)
            if spec is None:
                raise UnknownJob(name)
            run = self._runs.get(name)
            if run is not None and run.thread is not None and run.thread.is_alive():
                raise JobStateConflict(name, "running", f"job {name!r} is running already")
            metrics = JobMetrics(name, every_ms=self._metrics_every)
            runner = Runner(
                spec.build(),
                self._store,
                coordinator=self._coordinator,
                metrics=metrics,
                group=True,
                consumer_options=self._group_options,
            )
            run = _Running(runner)
            try:
                runner.start()  # raises on bad inputs: nothing is left running
                runner.poll_group()  # joins: its tasks open, their state restored, now
            except BaseException:
                runner.abandon()
                raise
            metrics.observe(runner, force=True)
            run.thread = threading.Thread(
                target=self._loop, args=(run,), name=f"tidelog-job-{name}", daemon=True
            )
            self._runs[name] = run
            run.thread.start()
        log.info("embedded job %s started", name)
        return self.status(name)

    def stop(self, name: str, timeout: float = 10.0) -> JobStatus:
        """Stop job `name` after it writes and commits what it holds."""
        with self._lock:
            if name not in self._specs:
                raise UnknownJob(name)
            run = self._runs.get(name)
        if run is None or run.thread is None or not run.thread.is_alive():
            raise JobStateConflict(name, "stopped", f"job {name!r} is not running")
        run.stop.set()
        run.thread.join(timeout)
        if run.thread.is_alive():
            log.warning("embedded job %s did not stop within %.0f s", name, timeout)
        log.info("embedded job %s stopped", name)
        return self.status(name)

    def _loop(self, run: _Running) -> None:
        runner, metrics = run.runner, run.runner.metrics
        try:
            while not run.stop.is_set():
                began = time.monotonic()
                if _has_input(runner):
                    if runner.poll_once() >= runner.max_records:
                        continue  # a backlog: catch up without pausing
                else:
                    runner.poll_group()  # no round: a rebalance, if one is on
                    metrics.observe(runner)  # the numbers stay fresh
                run.stop.wait(max(0.0, self._round_interval - (time.monotonic() - began)))
        except RecordError as exc:
            run.failure = str(exc)
            metrics.set_status("failed")
            log.error("embedded job %s failed: %s", runner.job.name, exc)
            self._leave(runner)
            return
        except Exception as exc:  # the store closing under it, a bug in a job's function
            run.failure = f"{type(exc).__name__}: {exc}"
            metrics.set_status("failed")
            log.exception("embedded job %s failed", runner.job.name)
            self._leave(runner)
            return
        try:
            metrics.observe(runner, force=True)
            runner.close()
        except Exception:
            log.exception("embedded job %s: closing failed", runner.job.name)
        metrics.set_status("stopped")

    @staticmethod
    def _leave(runner: Runner) -> None:
        """A failed job leaves its group, with no checkpoint (its offsets stay before what
        it had not committed); a restart then joins at once."""
        try:
            runner.abandon()
        except Exception:
            log.exception("embedded job %s: leaving its group failed", runner.job.name)

    def status(self, name: str) -> JobStatus:
        with self._lock:
            spec = self._specs.get(name)
            if spec is None:
                raise UnknownJob(name)
            job, run = self._graphs[name], self._runs.get(name)
        worker = None if run is None else run.runner.metrics.snapshot()
        state = "stopped" if worker is None else worker.status
        if state == "running" and not (run.thread and run.thread.is_alive()):
            state = "stopped"
        return JobStatus(
            name=name,
            description=spec.description,
            state=state,
            # each topic once, in the graph's order (several sinks may write one topic)
            inputs=_once(n.params["topic"] for n in job.sources() if not n.params.get("internal")),
            outputs=_once(n.params["topic"] for n in job.nodes if n.kind == "sink"),
            late_outputs=_once(
                n.params["topic"]
                for n in job.nodes
                if n.kind == "sink" and n.parents[0][0].kind == "late_events"
            ),
            worker=worker,
            failure=None if run is None else run.failure,
        )

    def jobs(self) -> list[JobStatus]:
        return [self.status(name) for name in self.names()]

    def close(self) -> None:
        """Stop every running job (each commits what it holds)."""
        for name in self.names():
            try:
                self.stop(name)
            except JobStateConflict:
                pass


def _once(topics: Iterable[str]) -> list[str]:
    """`topics` without repeats, each where it first came."""
    return list(dict.fromkeys(topics))
