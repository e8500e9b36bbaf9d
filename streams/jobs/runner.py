"""``Runner``: one worker that runs a job over the embedded ``LogStore``.

By default a runner is the job's only worker: it owns every partition of the job's inputs
(one task per partition number) and commits its input offsets to the group coordinator under
the job's name (when given one). With ``group=True`` it joins the job's consumer group
(``streams.client.Consumer``, group id = the job's name) and runs the tasks of the partitions
the group assigns it; on a rebalance it writes and commits everything, closes its tasks, and
opens the newly assigned ones, restored from their changelogs. (The ``python -m streams.jobs``
command, a Kafka-protocol client for other clusters and standby replicas are item 4's rest.)

Each ``poll_once``:

1. per task, reads what is new on each of its input partitions and feeds the records to the
   task in timestamp order (the smallest head first; a partition with unread records holds
   the others back until it has been read, so a join's inputs meet in time order), at most
   `max_records` per partition;
2. appends what the tasks emitted — sink records (partitioned by key), repartition records
   (read back in a later round) and the changed keys of every state store to its changelog
   partition — then commits the input offsets. That is at-least-once: after a crash between
   the appends and the commit, the records since the last commit are read again, so their
   outputs repeat, and they are applied again to state restored from changelogs that
   already hold their effect (a count can count them twice). A clean stop (``close``)
   commits and repeats nothing. Exactly-once (outputs, changelogs and offsets in one
   transaction) is issue 13 item 5.

On start, each task's stores are restored from their changelog partitions before anything is
processed; inputs resume at the committed offsets (or the beginning).

After each commit the runner publishes what its tasks' tables changed to the job's views
(``views``: interactive queries and change streams), with the tasks' input positions.

Thread-safety: one thread drives a runner.
"""

from __future__ import annotations

import heapq
import logging
import os
import time
from collections.abc import Callable

from streams.client import CommitFailed, Consumer
from streams.errors import GroupError, InvalidConfig, TidelogError, TopicAlreadyExists, UnknownTopic
from streams.jobs.job import Job
from streams.jobs.metrics import JobMetrics
from streams.jobs.serde import SerdeError
from streams.jobs.state import Store, _tupled, changelog_topic, make_backend
from streams.jobs.task import Task
from streams.jobs.views import RunnerViews
from streams.jobs.views import registry as view_registry
from streams.log import LogStore, ProducerRecord

log = logging.getLogger(__name__)

CHANGELOG_CONFIG = {"cleanup.policy": "compact"}


class CoPartitioningError(TidelogError):
    """A join's inputs do not have the same number of partitions (found at start)."""

    code = "not_co_partitioned"


class RecordError(TidelogError):
    """A record could not be read or processed: names its topic, partition and offset. The
    runner stops without committing it, so nothing is lost; it is read again on restart."""

    code = "job_record_error"

    def __init__(self, job: str, topic: str, partition: int, offset: int, cause: BaseException):
        super().__init__(
            f"job {job!r}: record {topic}-{partition} offset {offset}: "
            f"{type(cause).__name__}: {cause}"
        )
        self.topic, self.partition, self.offset, self.cause = topic, partition, offset, cause


class Runner:
    def __init__(
        self,
        job: Job,
        store: LogStore,
        *,
        coordinator=None,
        state_backend: str = "memory",
        state_dir: str | None = None,
        max_records: int = 1000,
        group: bool = False,
        consumer_options: dict | None = None,
        changelog_config: dict | None = None,
        metrics: JobMetrics | None = None,
    ):
        self.job, self.log_store, self.coordinator = job, store, coordinator
        # what the console shows of this worker (streams.jobs.metrics)
        self.metrics = metrics if metrics is not None else JobMetrics(job.name)
        self.group_id = job.name
        self.state_backend, self.state_dir = state_backend, state_dir
        self.max_records = max_records
        if state_backend not in ("memory", "rocksdb"):
            raise InvalidConfig("state_backend", state_backend, "must be memory or rocksdb")
        if state_backend == "rocksdb" and not state_dir:
            raise InvalidConfig("state_dir", state_dir, "the rocksdb state backend needs one")
        self.tasks: dict[int, Task] = {}
        self._inputs: dict[int, list[str]] = {}  # task -> its input topics
        self._positions: dict[tuple[str, int], int] = {}
        self._out: dict[tuple[str, int | None], list[ProducerRecord]] = {}
        self._serdes = {n.params["topic"]: n.params for n in job.sources()}
        # global sources (a search's queries): every task reads every partition from the start
        self._globals = sorted(
            {n.params["topic"] for n in job.sources() if n.params.get("global_")}
        )
        self._global_pos: dict[tuple[str, int], int] = {}
        self._sinks = {n.params["topic"]: n.params for n in job.nodes if n.kind == "sink"}
        self._started = False
        self.group = group
        if group and coordinator is None:
            raise InvalidConfig("coordinator", None, "a runner in a group needs the coordinator")
        self._consumer_options = consumer_options or {}
        # topic configs of new changelog topics (always compacted), e.g. {"segment.bytes": ...}
        self._changelog_config = {**(changelog_config or {}), **CHANGELOG_CONFIG}
        self.consumer: Consumer | None = None
        self._counts: dict[str, int] = {}
        self.views: RunnerViews | None = None  # its tasks' queryable tables (``views``)

    # ------------------------------------------------------------------ start

    def start(self) -> Runner:
        """Check the inputs, create internal topics, open tasks and restore their state."""
        counts = self._input_counts()
        self._check_co_partitioning(counts)
        n_tasks = max(counts.values())
        for node in self.job.nodes:
            if node.kind == "repartition":
                self._ensure_topic(node.params["topic"], counts[node.params["topic"]], None)
        for node in self.job.nodes:
            if node.kind == "sink":
                self._ensure_topic(node.params["topic"], n_tasks, None)
        for store in self.job.stores():
            topic = changelog_topic(self.job.name, store)
            self._ensure_topic(topic, n_tasks, self._changelog_config)
        self._counts = counts
        self.views = view_registry(self.log_store).attach(self, counts)
        for topic in self._globals:
            self._check_exists(topic)
            for p in range(self.log_store.partition_count(topic)):
                self._global_pos[(topic, p)] = self.log_store.offsets(topic, p)[0]
        if self.group:
            self.consumer = Consumer(
                self.log_store,
                self.coordinator,
                self.group_id,
                client_id=f"tidelog-job-{self.job.name}",
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                **self._consumer_options,
            )
            self.consumer.on_assign = self._on_assign
            self.consumer.on_revoke = self._on_revoke
            self.consumer.subscribe(sorted(counts))
        else:
            self._open_tasks(range(n_tasks))
        self._started = True
        return self

    def _open_tasks(self, partitions) -> None:
        committed = {}
        if self.coordinator is not None:
            done = self.coordinator.committed(self.group_id)
            committed = {tp: c.offset for tp, c in done.items()}
        for p in partitions:
            topics = [t for t, c in self._counts.items() if p < c]
            self._inputs[p] = topics
            for t in topics:
                self._positions[(t, p)] = committed.get((t, p), self.log_store.offsets(t, p)[0])
            self.tasks[p] = Task(self.job, p, self._emitter(p), self._opener(p))
            self._replay_globals(self.tasks[p])
            if self.views is not None:
                self.views.opened(p, self.tasks[p], self._task_positions(p))

    def _task_positions(self, p: int) -> dict[str, int]:
        return {t: self._positions[(t, p)] for t in self._inputs[p]}

    def _replay_globals(self, task: Task) -> None:
        """A new task reads the global topics up to where the runner's other tasks are."""
        for (topic, p), upto in self._global_pos.items():
            pos = self.log_store.offsets(topic, p)[0]
            while pos < upto:
                recs = self._read_at(topic, p, pos, upto)
                if not recs:
                    break
                for offset, key, value, ts in recs:
                    self._feed(task, topic, p, offset, key, value, ts)
                pos = recs[-1][0] + 1

    def _poll_globals(self) -> None:
        """What is new on the global topics goes to every task (before their inputs: a
        query saved before an event was read applies to it)."""
        for (topic, p), pos in list(self._global_pos.items()):
            end = self.log_store.offsets(topic, p)[1]
            while pos < end:
                recs = self._read_at(topic, p, pos, end)
                if not recs:
                    break
                for offset, key, value, ts in recs:
                    for task in self.tasks.values():
                        self._feed(task, topic, p, offset, key, value, ts)
                pos = recs[-1][0] + 1
            self._global_pos[(topic, p)] = pos

    def _feed(self, task: Task, topic: str, p: int, offset: int, key, value, ts) -> None:
        try:
            task.feed(topic, key, value, ts)
        except Exception as exc:
            raise RecordError(self.job.name, topic, p, offset, exc) from exc

    def _on_assign(self, tps: list[tuple[str, int]]) -> None:
        """The group gave this worker `tps`: one task per partition number, restored from its
        changelogs (the range assignor gives a member the same numbers of co-partitioned
        topics)."""
        numbers = sorted({p for _, p in tps})
        missing = [
            (t, p)
            for p in numbers
            for t in self._counts
            if p < self._counts[t] and (t, p) not in tps
        ]
        if missing:
            log.warning("job %s: task inputs split between workers: %s", self.job.name, missing)
        self._open_tasks(numbers)
        log.info("job %s: %s owns tasks %s", self.job.name, self.consumer.member_id, numbers)

    def _on_revoke(self, tps: list[tuple[str, int]]) -> None:
        """Before a rebalance: write outputs and changelogs, commit, close every task (the
        next owner restores them from the changelogs)."""
        self.commit()
        self._close_tasks()

    def _close_tasks(self) -> None:
        if self.views is not None:
            self.views.closed(list(self.tasks))
        for task in self.tasks.values():
            for store in task.stores.values():
                store.close()
        self.tasks.clear()
        self._inputs.clear()
        self._positions.clear()

    def _input_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for node in self.job.sources():
            topic = node.params["topic"]
            if node.params.get("internal") or node.params.get("global_"):
                continue
            counts[topic] = self._check_exists(topic)
        first = next(iter(counts.values()), 1)
        for node in self.job.sources():
            if node.params.get("internal"):
                counts[node.params["topic"]] = node.params.get("partitions") or first
        return counts

    def _check_exists(self, topic: str) -> int:
        """`topic`'s partition count; a clear error if it does not exist."""
        try:
            return self.log_store.partition_count(topic)
        except UnknownTopic as exc:
            raise InvalidConfig(
                "topic",
                topic,
                f"job {self.job.name!r} reads a topic that does not exist; create it first",
            ) from exc

    def _check_co_partitioning(self, counts: dict[str, int]) -> None:
        by_id = {n.id: n for n in self.job.nodes}

        def upstream_topics(node) -> set[str]:
            if node.kind == "source":
                return set() if node.params.get("global_") else {node.params["topic"]}
            return set().union(*(upstream_topics(p) for p, _ in node.parents))

        for node in self.job.nodes:
            if node.kind not in ("interval_join", "asof_join", "table_join"):
                continue
            topics = sorted(set().union(*(upstream_topics(by_id[p.id]) for p, _ in node.parents)))
            if len({counts[t] for t in topics}) > 1:
                detail = ", ".join(f"{t} has {counts[t]}" for t in topics)
                raise CoPartitioningError(
                    f"the join {node.name!r} of job {self.job.name!r} needs co-partitioned "
                    f"inputs (the same number of partitions): {detail}. Repartition one side "
                    "(stream.repartition(partitions=N)) or give the topics equal counts",
                )

    def _ensure_topic(self, topic: str, partitions: int, config) -> None:
        if topic in self.log_store.list_topics():
            have = self.log_store.partition_count(topic)
            if have < partitions and config is not None:
                raise CoPartitioningError(
                    f"{topic} has {have} partitions, the job needs {partitions} (one per task)"
                )
            return
        try:
            self.log_store.create_topic(topic, partitions, config)
        except TopicAlreadyExists:
            pass  # another worker of the job created it meanwhile

    def _opener(self, p: int) -> Callable[[str], Store]:
        def open_store(name: str) -> Store:
            path = None
            if self.state_dir:
                path = os.path.join(self.state_dir, self.job.name, name, str(p))
            store = Store(name, make_backend(self.state_backend, path))
            topic = changelog_topic(self.job.name, name)
            start, end = self.log_store.offsets(topic, p)
            pos = start
            while pos < end:
                recs = self.log_store.read(topic, p, pos, max_records=5000)
                if not recs:
                    break
                for r in recs:
                    store.restore(r.key, r.value)
                pos = recs[-1].offset + 1
            return store

        return open_store

    def _emitter(self, p: int):
        def emit(kind: str, topic: str, key: object, value: object, ts: int) -> None:
            params = self._serdes[topic] if kind == "repartition" else self._sinks[topic]
            k = params["key"].serialize(key)
            v = params["value"].serialize(value)
            self._out.setdefault((topic, None), []).append(ProducerRecord(v, k, (), ts))

        return emit

    # ------------------------------------------------------------------ run

    def poll_once(self) -> int:
        """Process what is available (up to `max_records` per partition), write the outputs
        and changelogs, commit; returns the number of input records processed."""
        if not self._started:
            self.start()
        if self.consumer is not None:
            # membership, heartbeats and rebalances run inside poll (as in Kafka's client);
            # the runner reads by itself from its own positions, so the record is not used
            self.consumer.poll(0, max_records=1)
        self._poll_globals()
        n = 0
        try:
            for p, task in list(self.tasks.items()):
                n += self._run_task(p, task)
        except RecordError as exc:
            self.metrics.record_error(exc.topic, exc.partition, exc.offset, exc.cause)
            raise
        self.commit()
        self.metrics.observe(self)
        return n

    def _run_task(self, p: int, task: Task) -> int:
        heads: list[tuple[int, int, int, list, int, str]] = []  # (ts, prio, seq, recs, i, topic)
        for prio, topic in enumerate(self._inputs[p]):
            recs = self._read(topic, p)
            if recs:
                heapq.heappush(heads, (recs[0][3], prio, 0, recs, 0, topic))
        n = 0
        # a partition whose batch ran out may hold smaller timestamps in its next batch: stop
        # feeding once any partition with more to read has no buffered record left
        while heads:
            ts, prio, _, recs, i, topic = heapq.heappop(heads)
            offset, key, value, ts = recs[i]
            try:
                task.feed(topic, key, value, ts)
            except Exception as exc:
                raise RecordError(self.job.name, topic, p, offset, exc) from exc
            self._positions[(topic, p)] = offset + 1
            n += 1
            if i + 1 < len(recs):
                heapq.heappush(heads, (recs[i + 1][3], prio, i + 1, recs, i + 1, topic))
            elif self._positions[(topic, p)] < self.log_store.offsets(topic, p)[1]:
                break
        return n

    def _read(self, topic: str, p: int) -> list[tuple[int, object, object, int]]:
        pos = self._positions[(topic, p)]
        start, end = self.log_store.offsets(topic, p)
        if pos < start:
            pos = self._positions[(topic, p)] = start
        if pos >= end:
            return []
        return self._read_at(topic, p, pos, end)

    def _read_at(self, topic: str, p: int, pos: int, end: int) -> list:
        """Deserialised ``(offset, key, value, ts)`` from `pos` (at most `max_records`, none
        at or past `end`)."""
        recs = self.log_store.read(topic, p, pos, max_records=self.max_records)
        recs = [r for r in recs if r.offset < end]
        params = self._serdes[topic]
        extract = params["timestamp"]
        out = []
        for r in recs:
            try:
                key = _tupled(params["key"].deserialize(r.key))
                value = params["value"].deserialize(r.value)
                # a tombstone has no value to read a time from: its record's timestamp counts
                ts = r.timestamp_ms if extract is None or value is None else extract(value)
            except (SerdeError, TidelogError) as exc:
                raise RecordError(self.job.name, topic, p, r.offset, exc) from exc
            out.append((r.offset, key, value, ts))
        return out

    def commit(self) -> None:
        """Write outputs and changelogs, then commit input offsets (at-least-once)."""
        started = time.monotonic()
        taken: dict[int, dict[str, list]] = {}
        for p, task in self.tasks.items():
            task.before_commit()
            taken[p] = {}
            for name, store in task.stores.items():
                changes = taken[p][name] = store.take_changes()
                if changes:
                    recs = [ProducerRecord(v, k, (), None) for k, v in changes]
                    self._out.setdefault((changelog_topic(self.job.name, name), p), []).extend(recs)
        out, self._out = self._out, {}
        for (topic, partition), recs in out.items():
            self.log_store.append_batch(topic, recs, partition=partition)
        if self.consumer is not None:
            if self._positions:
                try:
                    self.consumer.commit(dict(self._positions))
                except (CommitFailed, GroupError) as exc:
                    log.warning("job %s: commit failed, records may repeat: %s", self.job.name, exc)
        elif self.coordinator is not None and self._positions:
            self.coordinator.commit_offsets(self.group_id, dict(self._positions))
        if self.views is not None:  # what the commit wrote is what views now answer
            for p, by_store in taken.items():
                self.views.committed(p, self.tasks[p], by_store, self._task_positions(p))
        self.metrics.checkpointed(started)

    def run_until_idle(self, max_rounds: int = 1_000_000) -> int:
        """Poll until a round finds nothing to process (repartitioned records included)."""
        total = 0
        for _ in range(max_rounds):
            n = self.poll_once()
            total += n
            if n == 0:
                return total
        return total

    def run(self, should_stop: Callable[[], bool], idle_sleep_s: float = 0.05) -> None:
        while not should_stop():
            if self.poll_once() == 0:
                time.sleep(idle_sleep_s)

    def flush(self) -> None:
        """End of a bounded input: every task flushes (windows close), then commit."""
        for task in self.tasks.values():
            task.flush()
        self.commit()

    def describe(self) -> dict:
        """What a Jobs page shows of this worker: per task its input positions and lag
        (records), late events, watermarks and state size (keys) per store."""
        tasks = {}
        for p, task in self.tasks.items():
            inputs = {}
            for topic in self._inputs[p]:
                pos = self._positions[(topic, p)]
                end = self.log_store.offsets(topic, p)[1]
                inputs[topic] = {"position": pos, "lag_records": max(0, end - pos)}
            tasks[p] = {
                "inputs": inputs,
                "late_events": task.late_count(),
                "watermarks_ms": task.watermarks(),
                "state_keys": {name: store.size() for name, store in task.stores.items()},
                "records_in": task.metrics["in"],
                "records_out": task.metrics["out"],
            }
        return {"job": self.job.name, "state_backend": self.state_backend, "tasks": tasks}

    def late_count(self) -> int:
        return sum(t.late_count() for t in self.tasks.values())

    def input_positions(self, partition: int) -> dict[str, tuple[int, int]]:
        """Task `partition`'s inputs: topic -> (next offset to read, end offset)."""
        return {
            t: (self._positions[(t, partition)], self.log_store.offsets(t, partition)[1])
            for t in self._inputs[partition]
        }

    def close(self) -> None:
        """Commit, close the tasks and, in a group, leave it (the others rebalance at once)."""
        self.commit()
        self._close_tasks()
        if self.consumer is not None:
            self.consumer.close(autocommit=False)
            self.consumer = None
        if self.views is not None:
            self.views.detach()
            self.views = None
