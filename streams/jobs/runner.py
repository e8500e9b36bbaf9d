"""``Runner``: one worker of a job, over a ``JobLog`` (``streams.jobs.logs``).

The same runner runs over the embedded ``LogStore`` (``Runner(job, store, ...)``: the default
the console uses, alone or with ``group=True`` sharing the partitions through the job's
consumer group) and over any Kafka-protocol cluster (``Runner(job, log=KafkaLog(...))``, what
``python -m streams.jobs run`` starts). The group id is the job's name; the group gives a
worker input partitions, and the worker runs one task per partition number (co-partitioned
inputs: the range assignor gives a member the same numbers of every input topic). When a
worker joins, leaves or dies, the tasks move: the old owner checkpoints and closes them (or,
if it died, simply stops), the new one restores their state from the changelogs and resumes
at the committed offsets.

Each ``poll_once``:

1. per task, reads what is new on each of its input partitions and feeds the records to the
   task in timestamp order (the smallest head first; a partition with unread records holds
   the others back until it has been read, so a join's inputs meet in time order), at most
   `max_records` per partition. (Over Kafka, a partition whose next records have not been
   fetched yet does not hold the others back: a join's or window's grace covers that.) The
   round's records go to the task as one batch (``Task.feed_many``/``feed_merged``: the same
   outcome as one record at a time, see ``streams.jobs.task``); if a step fails, the
   ``RecordError`` names the record it failed on (or, inside a window's aggregation, the
   batch's offsets) and nothing of the batch counts as processed.
2. buffers what the tasks emit — sink records (partitioned by key), repartition records (read
   back in a later round, by whichever task owns their partition);
3. every `checkpoint_interval_ms` (0: after every round, the embedded default) checkpoints.

A **checkpoint** takes each task's changed state-store keys (its changelog records, one
partition per task), its buffered outputs and its input positions, and hands them to the
log's ``checkpoint``:

- **at-least-once**: outputs and changelogs are appended (and, over Kafka, flushed until
  acknowledged), then the input offsets are committed. If the worker dies between two
  checkpoints, what it did since the last one is lost and redone by the next owner: nothing
  is missed. If it dies *during* a checkpoint, after some appends but before the offset
  commit, the next owner reads the inputs since the previous checkpoint again. What can then
  repeat: the sink and repartition records of those inputs (written twice, so a window's
  result or a join's pair can appear twice downstream), and their effect on state — the
  restored changelog may already hold it, so a running count or aggregate counts them twice
  (and a window that re-closes emits again, with those inputs counted twice). A clean stop or
  a rebalance (``close``, revocation) checkpoints first and repeats nothing.
- **exactly-once** (``KafkaLog(exactly_once=True)``): each task's outputs, changelog records
  and input offsets are one Kafka transaction; a task restores its state only from committed
  changelog records (read_committed) and reads its inputs read_committed. A crash before the
  commit aborts everything of that checkpoint (the next owner fences the old producer) and the
  inputs are reprocessed from state as of the previous checkpoint: readers that read_committed
  see each output once. See ``streams.jobs.kafka`` for the transactional ids.

If a checkpoint is aborted (the log returns the task), the task is rewound: closed, reopened
from its committed changelog and offsets. If the task was fenced (``TaskMigrated``: another
worker owns it now), every task is dropped and the worker rejoins its group.

On start, each task's stores are restored from their changelog partitions before anything is
processed; inputs resume at the committed offsets (or the beginning).

After each checkpoint the runner publishes what its tasks' tables changed to the job's views
(``views``: interactive queries and change streams), with the tasks' input positions (over the
embedded store; a runner over another log has no views). What the console shows of a worker
goes to its ``metrics`` (``streams.jobs.metrics.JobMetrics``).

Thread-safety: one thread drives a runner.
"""

from __future__ import annotations

import heapq
import logging
import os
import time
from collections.abc import Callable

from streams.errors import InvalidConfig, TidelogError
from streams.jobs.job import Job
from streams.jobs.logs import TP, EmbeddedLog, JobLog, Records, TaskCheckpoint, TaskMigrated
from streams.jobs.metrics import JobMetrics
from streams.jobs.serde import (
    BYTES,
    JSON,
    SerdeError,
    batch_decoder,
    decode_records,
    merge,
    records_encoder,
    tag,
)
from streams.jobs.state import Store, _tupled, changelog_topic, make_backend
from streams.jobs.task import Task
from streams.jobs.views import RunnerViews, ViewRegistry
from streams.jobs.views import registry as view_registry
from streams.jobs.viewserver import member_client_id
from streams.log import LogStore

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
    """One worker of `job`. Give it either `store` (the embedded ``LogStore``; `coordinator`,
    `group` and `consumer_options` as ``EmbeddedLog``) or `log` (any ``JobLog``, e.g.
    ``KafkaLog``). `checkpoint_interval_ms`: how often ``poll_once`` checkpoints (0: after
    every round)."""

    def __init__(
        self,
        job: Job,
        store: LogStore | None = None,
        *,
        log: JobLog | None = None,
        coordinator=None,
        state_backend: str = "memory",
        state_dir: str | None = None,
        max_records: int = 1000,
        group: bool = False,
        consumer_options: dict | None = None,
        views: ViewRegistry | None = None,
        query_endpoint: str | None = None,
        changelog_config: dict | None = None,
        checkpoint_interval_ms: int = 0,
        metrics: JobMetrics | None = None,
    ):
        if (store is None) == (log is None):
            raise InvalidConfig("log", log, "give a runner either the embedded store or a log")
        if group and log is None and coordinator is None:
            raise InvalidConfig("coordinator", None, "a runner in a group needs the coordinator")
        if state_backend not in ("memory", "rocksdb"):
            raise InvalidConfig("state_backend", state_backend, "must be memory or rocksdb")
        if state_backend == "rocksdb" and not state_dir:
            raise InvalidConfig("state_dir", state_dir, "the rocksdb state backend needs one")
        if checkpoint_interval_ms < 0:
            raise InvalidConfig("checkpoint_interval_ms", checkpoint_interval_ms, "must be >= 0")
        self.job, self.log_store, self.coordinator = job, store, coordinator
        # what the console shows of this worker (streams.jobs.metrics)
        self.metrics = metrics if metrics is not None else JobMetrics(job.name)
        self.joblog: JobLog = log or EmbeddedLog(
            store,
            coordinator,
            group=group,
            consumer_options=consumer_options,
            client_id=member_client_id(job.name, query_endpoint),
        )
        self.group_id = job.name
        self.state_backend, self.state_dir = state_backend, state_dir
        self.max_records = max_records
        self.checkpoint_interval_s = checkpoint_interval_ms / 1000
        self.tasks: dict[int, Task] = {}
        self._inputs: dict[int, list[str]] = {}  # task -> its input topics
        self._positions: dict[tuple[str, int], int] = {}
        self._out: dict[int, Records] = {}  # task -> its outputs since the last checkpoint
        # (topic, partition) -> records read and deserialised that a merge stopped before
        # (``_merge``): the next round starts with them instead of reading them again
        self._unfed: dict[tuple[str, int], list] = {}
        # (topic, partition) -> records read from the log ahead of the position, undecoded
        # (``_read_raw``; only over a log that says how many to read at a time, ``read_ahead``)
        self._ahead: dict[tuple[str, int], list] = {}
        self._read_ahead: int = getattr(self.joblog, "read_ahead", 0)
        # the same, read and decoded straight from the log's batches (``_read_tuples``: over a
        # log with ``read_tuples``, inputs whose serialisers ``serde.batch_decoder`` takes)
        self._ahead_t: dict[tuple[str, int], list] = {}
        # (topic, raw) -> its batch decoder, if any (raw: values of canonical JSON unread, for
        # a task whose join keeps JSON text, ``Task.raw_json_inputs``)
        self._decoders: dict[tuple[str, bool], Callable | None] = {}
        self._serdes = {n.params["topic"]: n.params for n in job.sources()}
        # global sources (a search's queries): every task reads every partition from the start
        self._globals = sorted(
            {n.params["topic"] for n in job.sources() if n.params.get("global_")}
        )
        self._global_pos: dict[tuple[str, int], int] = {}
        self._sinks = {n.params["topic"]: n.params for n in job.nodes if n.kind == "sink"}
        self._started = False
        self.failed: RecordError | None = None  # a failed round's; close() commits nothing
        self.group = group
        # topic configs of new changelog topics (always compacted), e.g. {"segment.bytes": ...}
        self._changelog_config = {**(changelog_config or {}), **CHANGELOG_CONFIG}
        self._counts: dict[str, int] = {}
        self._last_checkpoint = time.monotonic()
        self.views: RunnerViews | None = None  # its tasks' queryable tables (``views``)
        # where its views are published (default: the process's for the store), and the
        # address of a ``viewserver.ViewServer`` on them, advertised in its group member's
        # client id so that other processes route queries of its partitions to it
        self._view_registry, self.query_endpoint = views, query_endpoint

    @property
    def consumer(self):
        """The embedded group member (``group=True`` over the embedded store), else None."""
        return getattr(self.joblog, "consumer", None)

    # ------------------------------------------------------------------ start

    def start(self) -> Runner:
        """Check the inputs, create internal topics, join the group (or take every partition)
        and open the assigned tasks, restoring their state."""
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
        if self.log_store is not None or self._view_registry is not None:
            reg = self._view_registry or view_registry(self.log_store)
            self.views = reg.attach(self, counts)
        for topic in self._globals:
            for p in range(self._check_exists(topic)):
                self._global_pos[(topic, p)] = self.joblog.start_of(topic, p)
        self._started = True
        self.joblog.join(
            self.group_id, sorted(counts), self._on_assign, self._on_revoke, self._on_lost
        )
        return self

    def _open_tasks(self, numbers: list[int]) -> None:
        self.joblog.claim(numbers)  # exactly-once: fences the tasks' previous owner first
        tps = [(t, p) for p in numbers for t, c in self._counts.items() if p < c]
        positions = self.joblog.start_positions(self.group_id, tps)
        for p in numbers:
            self._inputs[p] = [t for t, c in self._counts.items() if p < c]
            for t in self._inputs[p]:
                self._positions[(t, p)] = positions[(t, p)]
            emit, emit_many = self._emitter(p)
            self.tasks[p] = Task(self.job, p, emit, self._opener(p), emit_many)
            self._replay_globals(self.tasks[p])
            if self.views is not None:
                self.views.opened(p, self.tasks[p], self._task_positions(p))
        self.joblog.seek({tp: self._positions[tp] for tp in tps})

    def _task_positions(self, p: int) -> dict[str, int]:
        return {t: self._positions[(t, p)] for t in self._inputs[p]}

    def _replay_globals(self, task: Task) -> None:
        """A new task reads the global topics up to where the runner's other tasks are."""
        for (topic, p), upto in self._global_pos.items():
            pos = self.joblog.start_of(topic, p)
            while pos < upto:
                recs = self._read_at(topic, p, pos, upto)
                if not recs:
                    break
                for key, value, ts, offset in recs:
                    self._feed(task, topic, p, offset, key, value, ts)
                pos = recs[-1][3] + 1

    def _poll_globals(self) -> None:
        """What is new on the global topics goes to every task (before their inputs: a
        query saved before an event was read applies to it)."""
        for (topic, p), pos in list(self._global_pos.items()):
            end = self.joblog.end_offset(topic, p)
            while pos < end:
                recs = self._read_at(topic, p, pos, end)
                if not recs:
                    break
                for key, value, ts, offset in recs:
                    for task in self.tasks.values():
                        self._feed(task, topic, p, offset, key, value, ts)
                pos = recs[-1][3] + 1
            self._global_pos[(topic, p)] = pos

    def _feed(self, task: Task, topic: str, p: int, offset: int, key, value, ts) -> None:
        try:
            task.feed(topic, key, value, ts)
        except Exception as exc:
            raise RecordError(self.job.name, topic, p, offset, exc) from exc

    def _on_assign(self, tps: list[TP]) -> None:
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
        log.info("job %s: owns tasks %s", self.job.name, numbers)

    def _on_revoke(self, tps: list[TP]) -> None:
        """Before a rebalance: checkpoint, then close every task (the next owner restores
        them from the changelogs)."""
        try:
            self.commit()
        except TaskMigrated:
            pass  # fenced meanwhile: the new owner redoes what was not committed
        self._close_tasks()

    def _on_lost(self, tps: list[TP]) -> None:
        """The group took the partitions away without a revocation (this worker was too slow
        or cut off): another worker may own them already, so nothing is committed."""
        log.warning("job %s: lost tasks %s; dropping their uncommitted work", self.job.name, tps)
        self._close_tasks()

    def _close_tasks(self, numbers: list[int] | None = None) -> None:
        numbers = list(self.tasks) if numbers is None else numbers
        if self.views is not None:
            self.views.closed(numbers)
        for p in numbers:
            task = self.tasks.pop(p)
            for store in task.stores.values():
                store.close()
            for t in self._inputs.pop(p):
                self._positions.pop((t, p), None)
                self._unfed.pop((t, p), None)
                self._ahead.pop((t, p), None)
                self._ahead_t.pop((t, p), None)
            self._out.pop(p, None)
        self.joblog.release(numbers)

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
        n = self.joblog.partition_count(topic)
        if n is None:
            raise InvalidConfig(
                "topic",
                topic,
                f"job {self.job.name!r} reads a topic that does not exist; create it first",
            )
        return n

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
        have = self.joblog.partition_count(topic)
        if have is None:
            self.joblog.create_topic(topic, partitions, config)
        elif have < partitions and config is not None:
            raise CoPartitioningError(
                f"{topic} has {have} partitions, the job needs {partitions} (one per task)"
            )

    def _opener(self, p: int) -> Callable[[str], Store]:
        def open_store(name: str) -> Store:
            path = None
            if self.state_dir:
                path = os.path.join(self.state_dir, self.job.name, name, str(p))
            store = Store(name, make_backend(self.state_backend, path))
            for key, value in self.joblog.restore(changelog_topic(self.job.name, name), p):
                store.restore(key, value)
            return store

        return open_store

    def _emitter(self, p: int):
        """Task `p`'s ``emit`` and ``emit_many``: serialise into its buffered outputs."""
        out = self._out.setdefault(p, {})

        def emit(kind: str, topic: str, key: object, value: object, ts: int) -> None:
            params = self._serdes[topic] if kind == "repartition" else self._sinks[topic]
            k = params["key"].serialize(key)
            v = params["value"].serialize(value)
            out.setdefault((topic, None), []).append((v, k, (), ts))

        def emit_many(kind: str, topic: str, recs: list) -> None:
            params = self._serdes[topic] if kind == "repartition" else self._sinks[topic]
            kser, vser = params["key"].serialize, params["value"].serialize
            # "sink-serialized": the values are JSON's bytes already (a join's pairs as text)
            serialized = kind == "sink-serialized"
            if serialized and params["value"] is not JSON:  # (cannot be: the task checks)
                recs = [(r[0], JSON.deserialize(r[1]), *r[2:]) for r in recs]
                serialized = False
            elif serialized:
                vser = BYTES.serialize
            dest = out.get((topic, None))
            if dest is None:
                dest = out[(topic, None)] = []
            append = dest.append
            # the compiled loop (text or bytes keys, JSON values) writes what it takes; the
            # pure one below writes each record it stops at, or every record without it
            fast = records_encoder(params["key"], params["value"], serialized)
            i, n = 0, len(recs)
            r = None
            try:
                if fast is None:
                    for r in recs:
                        append((vser(r[1]), kser(r[0]), (), r[2]))
                    return
                while True:
                    i = fast(recs, i, dest)
                    if i >= n:
                        return
                    r = recs[i]
                    append((vser(r[1]), kser(r[0]), (), r[2]))
                    i += 1
            except Exception:
                task = self.tasks.get(p)
                if task is not None:
                    task.blame(r)
                raise

        return emit, emit_many

    # ------------------------------------------------------------------ run

    def poll_once(self) -> int:
        """Process what is available (up to `max_records` per partition) and, when the
        checkpoint interval has passed, checkpoint; returns the number of input records
        processed."""
        if not self._started:
            self.start()
        self.joblog.poll()  # membership: may revoke and assign tasks
        n = 0
        try:
            self._poll_globals()
            for p, task in list(self.tasks.items()):
                n += self._run_task(p, task)
        except RecordError as exc:
            # part of the failed batch may be in the task's state and outputs already: none
            # of it may be committed (close() will not checkpoint), so that on restart the
            # inputs since the last checkpoint are processed once, from its state
            self.failed = exc
            self.metrics.record_error(exc.topic, exc.partition, exc.offset, exc.cause)
            raise
        if time.monotonic() - self._last_checkpoint >= self.checkpoint_interval_s:
            self._checkpoint_or_rejoin()
        self.metrics.observe(self)
        return n

    def _checkpoint_or_rejoin(self) -> None:
        try:
            self.commit()
        except TaskMigrated as exc:
            log.warning("job %s: %s; rejoining the group", self.job.name, exc)
            self._close_tasks()
            self.joblog.rejoin()

    def _run_task(self, p: int, task: Task) -> int:
        inputs = self._inputs[p]
        if len(inputs) == 1:
            return self._run_single(p, task, inputs[0])
        batches = [self._read(topic, p) for topic in inputs]
        merged, fed = self._merge_fed(p, inputs, batches)  # fed: the prefix taken of each
        if not merged:
            return 0
        try:
            task.feed_merged(inputs, merged)
        except Exception as exc:
            first = merged[0]
            raise self._record_error(p, task, exc, [first[1]], inputs[first[0]]) from exc
        for i, n in enumerate(fed):
            if n:
                self._positions[(inputs[i], p)] = batches[i][n - 1][3] + 1
            if n < len(batches[i]):
                self._unfed[(inputs[i], p)] = batches[i][n:]
        return len(merged)

    def _merge(self, p: int, inputs: list[str], batches: list[list]) -> list[tuple[int, tuple]]:
        """The order a task with several inputs is fed their records: ``(input index,
        record)``, the smallest timestamp first (of equal ones, the earlier input's first).
        A partition whose batch ran out may hold smaller timestamps in its next batch: the
        merge stops once a partition with more to read has no buffered record left (an empty
        batch holds nothing back: nothing of it was fetched)."""
        return self._merge_fed(p, inputs, batches)[0]

    def _merge_fed(
        self, p: int, inputs: list[str], batches: list[list]
    ) -> tuple[list[tuple[int, tuple]], list[int]]:
        """``_merge``'s records and how many of each batch they take (a prefix of each)."""
        merged: list[tuple[int, tuple]] = []
        fed = [0] * len(batches)
        live = [i for i, recs in enumerate(batches) if recs]
        if len(live) == 2:  # the common case (a join of two inputs): a plain two-way merge
            ia, ib = live
            a, b = batches[ia], batches[ib]
            i, j = merge(a, b, ia, ib, merged)  # compiled when built (serde.merge_two)
            fed[ia], fed[ib] = i, j
            if i == len(a):  # a ran out first
                if a[-1][3] + 1 < self.joblog.end_offset(inputs[ia], p):
                    return merged, fed
                rest, k, ir = b, j, ib
            else:
                if b[-1][3] + 1 < self.joblog.end_offset(inputs[ib], p):
                    return merged, fed
                rest, k, ir = a, i, ia
            tag(rest, k, ir, merged)
            fed[ir] = len(rest)
            return merged, fed
        append = merged.append
        heads = [(batches[i][0][2], i, 0) for i in live]
        heapq.heapify(heads)
        while heads:
            _, i, n = heapq.heappop(heads)
            recs = batches[i]
            append((i, recs[n]))
            fed[i] += 1
            if n + 1 < len(recs):
                heapq.heappush(heads, (recs[n + 1][2], i, n + 1))
            elif recs[n][3] + 1 < self.joblog.end_offset(inputs[i], p):
                break
        return merged, fed

    def _run_single(self, p: int, task: Task, topic: str) -> int:
        """A task with one input: its records in offset order, as one batch."""
        recs = self._read(topic, p)
        if not recs:
            return 0
        try:
            task.feed_many(topic, recs)
        except Exception as exc:
            raise self._record_error(p, task, exc, recs, topic) from exc
        self._positions[(topic, p)] = recs[-1][3] + 1
        return len(recs)

    def _record_error(
        self, p: int, task: Task, exc: Exception, recs: list, topic: str
    ) -> RecordError:
        """The ``RecordError`` of a failed batch: the record the failing step named, else
        (a window's aggregation failed) the batch's first record, the message giving the
        batch's offsets. Nothing of the batch counts as processed (its inputs' positions
        stay where the batch began); the job stops and is redone from its checkpoint."""
        failed = task.failed
        if failed is not None and failed[1] is not None:
            return RecordError(self.job.name, failed[0] or topic, p, failed[1], exc)
        where = failed[0] if failed is not None and failed[0] else topic
        err = RecordError(self.job.name, where, p, recs[0][3], exc)
        if len(recs) > 1:
            err.args = (f"{err.args[0]} (in the batch up to offset {recs[-1][3]})",)
        return err

    def _read(self, topic: str, p: int) -> list[tuple[object, object, int, int]]:
        """The next records of `topic`-`p` from its position (at most `max_records`),
        starting with those the last merge left unfed."""
        pos = self._positions[(topic, p)]
        kept = self._unfed.pop((topic, p), None)
        if not kept or kept[0][3] != pos:
            return self._read_at(topic, p, pos, None, ahead=True)
        room = self.max_records - len(kept)
        if room > 0:
            kept += self._read_at(topic, p, kept[-1][3] + 1, None, room, ahead=True)
        return kept

    def _read_raw(self, topic: str, p: int, pos: int, limit: int) -> list:
        """At most `limit` records of `topic`-`p` from `pos` as the log gives them, asking it
        for ``read_ahead`` at a time when it has one (``EmbeddedLog``: a log batch read whole
        is decoded once, where reads of fewer records than it holds each decode it again from
        its start up to their offset). What is read ahead waits, undecoded, in ``_ahead``."""
        key = (topic, p)
        got = self._ahead.pop(key, None)
        if not got or got[0].offset != pos:
            got = []
        if len(got) < limit:
            more = self.joblog.read(
                topic,
                p,
                got[-1].offset + 1 if got else pos,
                max(limit - len(got), self._read_ahead),
            )
            got = got + more if got else more
        if len(got) > limit:
            self._ahead[key] = got[limit:]
            got = got[:limit]
        return got

    def _read_tuples(self, topic: str, p: int, pos: int, limit: int) -> list | None:
        """``_read_raw`` and ``decode_records`` in one: at most `limit` deserialised records
        of `topic`-`p` from `pos`, decoded straight from the log's batches, ``read_ahead`` at
        a time (``EmbeddedLog.read_tuples``; what is read ahead waits, decoded, in
        ``_ahead_t``). None when the log or the topic's serialisers do not allow it, or the
        decoder defers on a batch: the topic is then read the usual way from here on (which
        answers as always, or raises the ``RecordError``)."""
        task = self.tasks.get(p)
        raw = task is not None and topic in task.raw_json_inputs
        decode = self._decoders.get((topic, raw), False)
        if decode is False:
            params = self._serdes[topic]
            decode = None
            if hasattr(self.joblog, "read_tuples"):
                decode = batch_decoder(params["key"], params["value"], params["timestamp"], raw)
            self._decoders[(topic, raw)] = decode
        if decode is None:
            return None
        key = (topic, p)
        got = self._ahead_t.pop(key, None)
        if not got or got[0][3] != pos:
            got = []
        if len(got) < limit:
            more = self.joblog.read_tuples(  # type: ignore[attr-defined]
                topic,
                p,
                got[-1][3] + 1 if got else pos,
                max(limit - len(got), self._read_ahead),
                decode,
            )
            if more is None:
                self._decoders[(topic, raw)] = None
                return None
            got = got + more if got else more
        if len(got) > limit:
            self._ahead_t[key] = got[limit:]
            got = got[:limit]
        return got

    def _read_at(
        self,
        topic: str,
        p: int,
        pos: int,
        end: int | None,
        limit: int | None = None,
        ahead: bool = False,
    ) -> list:
        """Deserialised ``(key, value, ts, offset)`` from `pos` (at most `limit`, by default
        `max_records`; none at or past `end`): the tasks' record shape (``streams.jobs.task``).
        `ahead`: through ``_read_raw`` (a task's input, read in order from its position)."""
        if ahead and self._read_ahead:
            if end is None:
                fast = self._read_tuples(topic, p, pos, limit or self.max_records)
                if fast is not None:
                    return fast
            recs = self._read_raw(topic, p, pos, limit or self.max_records)
        else:
            recs = self.joblog.read(topic, p, pos, limit or self.max_records)
        if end is not None:
            recs = [r for r in recs if r.offset < end]
        if not recs:
            return []
        params = self._serdes[topic]
        extract = params["timestamp"]
        task = self.tasks.get(p) if ahead else None
        raw = task is not None and topic in task.raw_json_inputs
        fast = decode_records(recs, params["key"], params["value"], extract, raw)  # compiled
        if fast is not None:
            return fast
        kdes, vdes = params["key"].deserialize, params["value"].deserialize
        out = []
        append = out.append
        r = None
        try:
            for r in recs:
                key = kdes(r.key)
                if isinstance(key, list):  # JSON keys: lists come back as (hashable) tuples
                    key = _tupled(key)
                value = vdes(r.value)
                # a tombstone has no value to read a time from: its record's timestamp counts
                ts = r.timestamp_ms if extract is None or value is None else extract(value)
                append((key, value, ts, r.offset))
        except (SerdeError, TidelogError) as exc:
            raise RecordError(self.job.name, topic, p, r.offset, exc) from exc
        return out

    def commit(self) -> None:
        """Checkpoint: every task's outputs, changelog records and input offsets go to the
        log (exactly-once: one transaction per task). Tasks whose checkpoint was aborted are
        rewound to their last committed checkpoint. Raises ``TaskMigrated`` if fenced."""
        began = time.monotonic()
        cps: dict[int, TaskCheckpoint] = {}
        taken: dict[int, dict[str, list]] = {}
        for p, task in self.tasks.items():
            task.before_commit()
            out = self._out[p]
            taken[p] = {}
            for name, store in task.stores.items():
                changes = taken[p][name] = store.take_changes()
                if changes:
                    recs = [(v, k, (), None) for k, v in changes]
                    out.setdefault((changelog_topic(self.job.name, name), p), []).extend(recs)
            offsets = {(t, p): self._positions[(t, p)] for t in self._inputs[p]}
            cps[p] = TaskCheckpoint(dict(out), offsets)
            out.clear()
        self._last_checkpoint = time.monotonic()
        aborted = self.joblog.checkpoint(self.group_id, cps) if cps else set()
        if aborted:
            self._rewind(sorted(aborted))
        if self.views is not None:  # what the commit wrote is what views now answer
            for p, by_store in taken.items():
                if p not in aborted:
                    self.views.committed(p, self.tasks[p], by_store, self._task_positions(p))
        self.metrics.checkpointed(began)

    def _rewind(self, numbers: list[int]) -> None:
        """Reopen `numbers` as of their last committed checkpoint (state from the committed
        changelog, inputs from the committed offsets)."""
        log.warning(
            "job %s: checkpoint of tasks %s aborted; rewinding them", self.job.name, numbers
        )
        self._close_tasks(numbers)
        self._open_tasks(numbers)

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
                self.joblog.idle(idle_sleep_s)

    def flush(self) -> None:
        """End of a bounded input: every task flushes (windows close), then commit."""
        for task in self.tasks.values():
            task.flush()
        self.commit()

    def describe(self) -> dict:
        """What a Jobs page shows of this worker: per task its input positions and lag
        (records), late events, watermarks and state size (keys) per store; the checkpoints."""
        tasks = {}
        for p, task in self.tasks.items():
            inputs = {}
            for topic in self._inputs[p]:
                pos = self._positions[(topic, p)]
                end = self.joblog.end_offset(topic, p)
                inputs[topic] = {"position": pos, "lag_records": max(0, end - pos)}
            tasks[p] = {
                "inputs": inputs,
                "late_events": task.late_count(),
                "watermarks_ms": task.watermarks(),
                "state_keys": {name: store.size() for name, store in task.stores.items()},
                "records_in": task.metrics["in"],
                "records_out": task.metrics["out"],
            }
        return {
            "job": self.job.name,
            "state_backend": self.state_backend,
            "processing_guarantee": "exactly-once" if self.joblog.exactly_once else "at-least-once",
            "tasks": tasks,
        }

    def late_count(self) -> int:
        return sum(t.late_count() for t in self.tasks.values())

    def input_positions(self, partition: int) -> dict[str, tuple[int, int]]:
        """Task `partition`'s inputs: topic -> (next offset to read, end offset)."""
        return {
            t: (self._positions[(t, partition)], self.joblog.end_offset(t, partition))
            for t in self._inputs[partition]
        }

    def poll_group(self) -> None:
        """Membership only, no round: in a group, a rebalance that is on (tasks may be
        assigned, their state restored, or revoked). What a caller that skips rounds while
        its inputs are idle calls instead, well within the rebalance timeout (the clients
        heartbeat on threads of their own)."""
        if not self._started:
            self.start()
        self.joblog.poll()

    def close(self) -> None:
        """Checkpoint, close the tasks and, in a group, leave it (the others rebalance at
        once). After a ``RecordError`` (``failed``) there is no checkpoint: what was done
        since the last one is redone by the next run, from that checkpoint."""
        if self._started and self.failed is None:
            try:
                self.commit()
            except TaskMigrated:
                pass
        self.abandon()

    def abandon(self) -> None:
        """Close the tasks and leave the group without a checkpoint (after a failure that
        may have left a task's state half-updated): a restart need not wait for this
        member's session to time out, and redoes what was done since the last checkpoint."""
        self._close_tasks()
        self.joblog.close()
        if self.views is not None:
            self.views.detach()
            self.views = None
