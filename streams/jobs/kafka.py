"""``KafkaLog``: a job's ``JobLog`` over any Kafka-protocol cluster, through confluent-kafka.

What ``python -m streams.jobs run`` uses: it runs unchanged against Tidelog's Kafka listener
and against a Kafka cluster (only the public protocol: consumer groups, ListOffsets, Fetch,
Produce, transactions, CreateTopics).

- **Membership**: one group consumer per worker, group id = the job's name, the eager
  ``range`` assignor (it gives a member the same partition numbers of every input topic, so a
  task's co-partitioned inputs stay together; the cooperative assignors do not promise that).
  ``isolation.level=read_committed`` whatever the guarantee (inputs written by transactional
  producers count only once committed). Rebalance callbacks run inside ``poll``.
- **Reading**: the consumer fetches the assigned partitions; ``read`` serves each partition
  from what was fetched, from the runner's position on. ``end_offset`` is the last fetched
  end of the partition (librdkafka's cached high watermark, so no request is made per read;
  with read_committed the records between the last stable offset and it come once their
  transactions commit).
- **Global sources** (read whole by every task, e.g. a search's queries; Kafka Streams'
  GlobalKTable): a group-less consumer assigned every partition of the global topics,
  read_committed, with ``enable.partition.eof`` so that "nothing more yet" is known without
  waiting. ``read`` serves it from what it fetched, and seeks back when the runner replays a
  global topic from its start to a task it opens. ``end_offset`` is its cached end (asked of
  the cluster until it has fetched), so the first round reads the topics up to their end
  before any input record.
- **Restoring** a task's store: a separate group-less consumer reads the changelog partition
  from its beginning, read_committed, up to its end (``enable.partition.eof``). Only committed
  changelog records are restored.
- **at-least-once**: one idempotent producer per worker. A checkpoint produces every task's
  records, flushes until all are acknowledged, then commits the input offsets (synchronously).
  A record that failed to be delivered aborts its task's checkpoint (offsets not committed,
  task rewound). What can repeat is in ``streams.jobs.runner``'s docstring.
- **exactly-once**: one transactional producer *per task*, ``transactional.id =
  "<prefix><job>-<task>"`` (Kafka Streams' original "exactly_once", not KIP-447's one
  producer per worker). Why: when a task moves, its new owner's ``init_transactions`` with the
  same id fences the old owner and aborts its open transaction at once, so the changelog's and
  outputs' last stable offset moves on immediately and the new owner restores without waiting
  out ``transaction.timeout.ms``; and it needs nothing of the broker beyond transactions (no
  generation checks on TxnOffsetCommit). The price: one producer (and its connections) per
  task, and one transaction per task per checkpoint. The offsets still go with the consumer's
  group metadata (``send_offsets_to_transaction``), so a broker that checks generations
  (KIP-447) also rejects a zombie's offsets. A checkpoint per task: ``begin_transaction``,
  produce its outputs and changelog records, ``send_offsets_to_transaction``,
  ``commit_transaction``. A retriable error retries the commit (e.g. while the broker
  restarts) until `commit_timeout_s`; an abortable one aborts (the task is rewound); a fenced
  producer means another worker owns the task (``TaskMigrated``: the worker rejoins).

Thread-safety: one thread drives a ``KafkaLog`` (the runner's).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator
from itertools import islice

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from streams.errors import TidelogError
from streams.jobs.logs import TP, KeyValue, LogRecord, TaskCheckpoint, TaskMigrated
from streams.librdkafka import FETCH_DEFAULTS  # every consumer's (client_config overrides)

log = logging.getLogger(__name__)

FETCH_BATCH = 2000  # records taken from the consumer per poll
UNAVAILABLE_S = 120.0
STUCK_S = 30.0  # past a transactional call's own timeout: the worker exits (see _watchdog)
STUCK_EXIT_STATUS = 3  # how long a restore or topic creation waits for an unreachable cluster


def take_messages(msgs: list, buffers: dict[TP, deque], rtype: type = LogRecord) -> list:
    """A fetch's messages into the buffers of their partitions: each message without error
    whose ``(topic, partition)`` is a key of `buffers` is appended to that deque as an `rtype`
    record ``(offset, key, value, timestamp)``; messages of other partitions (not, or no
    longer, ours) are dropped. Returns the errors met, end-of-partition ones left out.

    The reference of the compiled ``_ckafka.take`` (tests/jobs/test_ckafka.py), which
    ``KafkaLog`` uses when it is built."""
    errors = []
    new = tuple.__new__  # rtype(...) without the NamedTuple's Python __new__
    tp, buf = None, None  # a fetch's messages come in runs of one partition
    for m in msgs:
        err = m.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                errors.append(err)
            continue
        at = (m.topic() or "", m.partition() or 0)
        if at != tp:
            tp, buf = at, buffers.get(at)
        if buf is not None:
            buf.append(new(rtype, (m.offset() or 0, m.key(), m.value(), m.timestamp()[1])))
    return errors


try:  # the compiled taker, built in place by `make native`
    from streams.jobs._ckafka import take as _take
except ImportError:  # not built: the reference loop
    _take = take_messages


class KafkaLogError(TidelogError):
    code = "job_kafka_error"


class KafkaLog:
    """`bootstrap` "host:port[,...]"; `client_config`: more librdkafka settings for every
    client (security, ``session.timeout.ms`` ...); `exactly_once` as the module docstring;
    `transactional_id_prefix` prefixes each task's transactional id."""

    def __init__(
        self,
        bootstrap: str,
        *,
        exactly_once: bool = False,
        client_config: dict | None = None,
        transactional_id_prefix: str = "tidelog-job-",
        commit_timeout_s: float = 60.0,
        offsets_timeout_s: float = 10.0,
        poll_timeout_s: float = 0.1,
        crash_in_checkpoint: int | None = None,
    ):
        self.exactly_once = exactly_once
        self.base = {"bootstrap.servers": bootstrap, **(client_config or {})}
        # settings only a consumer (or only a producer) knows would be warned about by the other
        self._consumer_only = {
            k: v
            for k, v in self.base.items()
            if k.startswith(("session.", "heartbeat.", "max.poll.", "fetch.", "group."))
        }
        self._common = {k: v for k, v in self.base.items() if k not in self._consumer_only}
        # what every consumer (the group's, the restorer, the global reader) fetches with
        self._fetching = {k: self.base.get(k, v) for k, v in FETCH_DEFAULTS.items()}
        self.prefix = transactional_id_prefix
        self.commit_timeout_s = commit_timeout_s
        self.offsets_timeout_s = offsets_timeout_s
        # fault injection for the crash tests: SIGKILL this process in the middle of the first
        # checkpoint (exactly-once: task transaction) that writes at least N records, once
        # they are on the broker (exactly-once: before commit_transaction; at-least-once:
        # before the offset commit)
        self._crash_at = crash_in_checkpoint
        self.poll_timeout_s = poll_timeout_s
        self.admin = AdminClient(self._common)
        self.consumer: Consumer | None = None
        self._group = ""
        self._topics: list[str] = []
        self._callbacks: tuple = ()
        self._buffers: dict[TP, deque[LogRecord]] = {}
        self._producers: dict[int, Producer] = {}  # exactly-once: one per task
        self._producer: Producer | None = None  # at-least-once: one per worker
        self._failed: list[KafkaError] = []  # at-least-once delivery errors since the flush
        self._restorer: Consumer | None = None
        # global sources: their reader, and per partition what it fetched, the lowest offset
        # it can still hand out without seeking, and where it last reached the end
        self._global: Consumer | None = None
        self._gbuf: dict[TP, deque[LogRecord]] = {}
        self._glow: dict[TP, int] = {}
        self._geof: dict[TP, int] = {}
        self._done: dict[TP, int] = {}  # the offsets last committed

    @property
    def _member(self) -> Consumer:
        """The group consumer (``join`` made it)."""
        if self.consumer is None:
            raise KafkaLogError("the job's log has not joined its group (join() first)")
        return self.consumer

    # ------------------------------------------------------------------ topics

    def partition_count(self, topic: str) -> int | None:
        md = self.admin.list_topics(timeout=30)  # all topics: naming one could auto-create it
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            return None
        return len(t.partitions)

    def create_topic(self, topic: str, partitions: int, config: dict | None) -> None:
        new = NewTopic(
            topic,
            num_partitions=partitions,
            replication_factor=-1,  # the cluster's default
            config={k: str(v) for k, v in (config or {}).items()},
        )
        future = self.admin.create_topics([new], operation_timeout=30)[topic]
        try:
            future.result(timeout=UNAVAILABLE_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise KafkaLogError(f"cannot create topic {topic}: {exc.args[0].str()}") from exc

    # ------------------------------------------------------------------ membership

    def join(self, group, topics, on_assign, on_revoke, on_lost) -> None:
        self._group, self._topics = group, list(topics)
        self._callbacks = (on_assign, on_revoke, on_lost)
        self.consumer = Consumer(
            {
                **FETCH_DEFAULTS,
                **self.base,
                "group.id": group,
                # a worker's client id may carry its views' query endpoint (viewserver)
                "client.id": self.base.get("client.id", f"tidelog-job-{group}"),
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "partition.assignment.strategy": "range",
            }
        )
        self._subscribe()

    def _subscribe(self) -> None:
        self._member.subscribe(
            self._topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost
        )

    def _assigned(self, consumer, partitions: list[TopicPartition]) -> None:
        tps = [(tp.topic, tp.partition) for tp in partitions]
        self._callbacks[0](tps)  # opens the tasks, which seek() to their positions

    def _revoked(self, consumer, partitions: list[TopicPartition]) -> None:
        self._callbacks[1]([(tp.topic, tp.partition) for tp in partitions])
        self._buffers.clear()
        self._done.clear()

    def _lost(self, consumer, partitions: list[TopicPartition]) -> None:
        self._callbacks[2]([(tp.topic, tp.partition) for tp in partitions])
        self._buffers.clear()
        self._done.clear()

    def rejoin(self) -> None:
        """After being fenced: leave the group and join again (a fresh assignment)."""
        self._buffers.clear()
        self._member.unsubscribe()
        self._subscribe()

    def poll(self) -> None:
        self._fetch(0 if any(self._buffers.values()) else self.poll_timeout_s)

    def idle(self, seconds: float) -> None:
        self._fetch(min(seconds, self.poll_timeout_s))

    def _fetch(self, timeout: float) -> None:
        # consume(n, timeout) waits out its whole timeout unless n messages come: take what
        # is fetched already, and wait (if asked to) only for a first message
        consumer = self._member
        msgs = consumer.consume(FETCH_BATCH, 0)
        if not msgs and timeout > 0:
            msgs = consumer.consume(1, timeout)
            if msgs:
                msgs += consumer.consume(FETCH_BATCH - 1, 0)
        for err in _take(msgs, self._buffers, LogRecord):
            log.warning("job %s: fetch: %s", self._group, err.str())

    def claim(self, tasks: list[int]) -> None:
        """Exactly-once: a transactional producer per task, initialised (fencing the task's
        previous owner and aborting its open transaction) before its state is read."""
        if not self.exactly_once:
            # the worker's producer made now: its connections and producer id are ready by
            # the first checkpoint, which otherwise waited for them
            self._at_least_once_producer()
            return
        for p in tasks:
            if p in self._producers:
                continue
            producer = Producer(
                {
                    **self._common,
                    "transactional.id": f"{self.prefix}{self._group}-{p}",
                    "partitioner": "murmur2_random",  # Kafka's (and Tidelog's) key hashing
                    "linger.ms": 5,
                }
            )
            producer.init_transactions(self.commit_timeout_s)
            self._producers[p] = producer

    def release(self, tasks: list[int]) -> None:
        for p in tasks:
            producer = self._producers.pop(p, None)
            if producer is not None:
                producer.flush(10)

    # ------------------------------------------------------------------ reading

    def start_positions(self, group: str, tps: list[TP]) -> dict[TP, int]:
        asked = [TopicPartition(t, p) for t, p in tps]
        done = self._member.committed(asked, timeout=self.commit_timeout_s)
        out = {}
        for tp in done:
            if tp.error is not None:
                raise KafkaLogError(f"committed offset of {tp.topic}-{tp.partition}: {tp.error}")
            if tp.offset >= 0:
                out[(tp.topic, tp.partition)] = tp.offset
            else:
                low, _ = self._member.get_watermark_offsets(tp, timeout=self.commit_timeout_s)
                out[(tp.topic, tp.partition)] = low
        return out

    def start_of(self, topic: str, partition: int) -> int:
        """A global source's partition: where it starts (the reader is assigned it there)."""
        reader = self._global_reader()
        tp = TopicPartition(topic, partition)
        low, _ = reader.get_watermark_offsets(tp, timeout=self.commit_timeout_s)
        if (topic, partition) not in self._gbuf:
            self._gbuf[(topic, partition)] = deque()
            self._glow[(topic, partition)] = low
            reader.assign([TopicPartition(t, q, self._glow[(t, q)]) for t, q in self._gbuf])
        return low

    def _global_reader(self) -> Consumer:
        if self._global is None:
            self._global = Consumer(
                {
                    **self._common,
                    **self._fetching,
                    "group.id": "tidelog-job-global",  # never joined nor committed
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "enable.partition.eof": True,
                }
            )
        return self._global

    def _read_global(self, tp: TP, offset: int, max_records: int) -> list:
        """Records of a global partition from `offset`, blocking until some are fetched or the
        reader is at the end of what it may read (read_committed: an open transaction's
        records come once it commits). ``UNAVAILABLE_S`` at most: the runner only asks for
        offsets below the end it was told, so they are on their way."""
        reader, buf = self._global_reader(), self._gbuf[tp]
        if offset < self._glow[tp]:  # a replay from before what the reader still holds
            reader.seek(TopicPartition(tp[0], tp[1], offset))
            buf.clear()
            self._geof.pop(tp, None)
        self._glow[tp] = offset
        deadline = time.monotonic() + UNAVAILABLE_S
        timeout = 0.0
        while True:
            self._fetch_global(timeout)
            while buf and buf[0].offset < offset:
                buf.popleft()
            if buf or tp in self._geof:
                return list(islice(buf, max_records))  # deque indexing walks its blocks
            if time.monotonic() > deadline:
                raise KafkaLogError(f"reading global {tp[0]}-{tp[1]} at {offset}: nothing came")
            timeout = self.poll_timeout_s

    def _fetch_global(self, timeout: float) -> None:
        for m in self._global_reader().consume(FETCH_BATCH, timeout):
            tp = (m.topic() or "", m.partition() or 0)
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self._geof[tp] = m.offset() or 0  # at the end until a record follows
                else:
                    log.warning("global source %s-%s: %s", tp[0], tp[1], err.str())
                continue
            self._geof.pop(tp, None)
            buf = self._gbuf.get(tp)
            if buf is not None:
                buf.append(LogRecord(m.offset() or 0, m.key(), m.value(), m.timestamp()[1]))

    def seek(self, positions: dict[TP, int]) -> None:
        """(Re)assign `positions` to the consumer and drop what was fetched of them."""
        if not positions:
            return
        parts = [TopicPartition(t, p, off) for (t, p), off in positions.items()]
        for tp in positions:
            self._buffers[tp] = deque()
        if self._pending_assign():
            self._member.assign(self._assignment_with(parts))
        else:
            for part in parts:
                self._member.seek(part)

    def _pending_assign(self) -> bool:
        """Inside the assign callback the new partitions are not assigned yet."""
        assigned = {(tp.topic, tp.partition) for tp in self._member.assignment()}
        return not set(self._buffers) <= assigned

    def _assignment_with(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        given = {(tp.topic, tp.partition) for tp in parts}
        kept = [tp for tp in self._member.assignment() if (tp.topic, tp.partition) not in given]
        return kept + parts

    def read(self, topic: str, partition: int, offset: int, max_records: int) -> list:
        if (topic, partition) in self._gbuf:
            return self._read_global((topic, partition), offset, max_records)
        buf = self._buffers.get((topic, partition))
        if not buf:
            return []
        while buf and buf[0].offset < offset:
            buf.popleft()
        return list(islice(buf, max_records))

    def end_offset(self, topic: str, partition: int) -> int:
        tp = TopicPartition(topic, partition)
        if (topic, partition) in self._gbuf:
            reader = self._global_reader()
            _, high = reader.get_watermark_offsets(tp, cached=True)
            if high is None or high < 0:  # nothing fetched yet: ask the cluster
                _, high = reader.get_watermark_offsets(tp, timeout=self.commit_timeout_s)
            return high
        _, high = self._member.get_watermark_offsets(tp, cached=True)
        return high if high is not None and high >= 0 else 0

    def restore(self, topic: str, partition: int) -> Iterator[KeyValue]:
        if self._restorer is None:
            self._restorer = Consumer(
                {
                    **self._common,
                    **self._fetching,
                    "group.id": f"{self._group}-restore",  # never joined nor committed
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                }
            )
        c = self._restorer
        try:  # an empty changelog (a new task): nothing to read, so no fetch waiting for EOF
            low, high = c.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self.offsets_timeout_s
            )
            if high <= low:
                return
        except KafkaException:
            pass  # the broker does not answer yet: the read below waits for it
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + UNAVAILABLE_S
        try:
            while True:
                msgs = c.consume(FETCH_BATCH, 0.5)
                for m in msgs:
                    err = m.error()
                    if err is None:
                        yield m.key(), m.value()
                    elif err.code() == KafkaError._PARTITION_EOF:
                        return
                    else:
                        log.warning("restore %s-%s: %s", topic, partition, err.str())
                if not msgs and time.monotonic() > deadline:
                    raise KafkaLogError(f"restoring {topic}-{partition}: no end in sight")
                if msgs:
                    deadline = time.monotonic() + UNAVAILABLE_S
        finally:
            c.unassign()

    # ------------------------------------------------------------------ checkpoints

    def checkpoint(self, group: str, tasks: dict[int, TaskCheckpoint]) -> set[int]:
        # nothing new (no record, offsets as last committed): no transaction, no commit
        tasks = {
            p: cp
            for p, cp in tasks.items()
            if cp.records or any(self._done.get(tp) != off for tp, off in cp.offsets.items())
        }
        if self.exactly_once:
            aborted = {p for p, cp in tasks.items() if not self._transaction(p, cp)}
        else:
            aborted = self._at_least_once(tasks)
        for p, cp in tasks.items():
            if p not in aborted:
                self._done.update(cp.offsets)
        return aborted

    def _produce(self, producer: Producer, records) -> None:
        for (topic, partition), recs in records.items():
            for value, key, _, ts in recs:  # (value, key, headers, ts): see logs.Records
                kwargs = {"timestamp": ts} if ts is not None else {}
                if partition is not None:
                    kwargs["partition"] = partition
                while True:
                    try:
                        producer.produce(topic, value, key, **kwargs)
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        producer.poll(0.05)

    def _transaction(self, p: int, cp: TaskCheckpoint) -> bool:
        """One task's checkpoint as one transaction: True once committed, False if aborted."""
        producer = self._producers[p]
        try:
            producer.begin_transaction()
            self._produce(producer, cp.records)
            offsets = [TopicPartition(t, q, off) for (t, q), off in cp.offsets.items()]
            # a short wait: while the group rebalances, the offsets cannot be committed until
            # this worker polls its consumer again (e.g. after a broker restart); abort instead
            with self._watchdog("send_offsets_to_transaction", self.offsets_timeout_s):
                producer.send_offsets_to_transaction(
                    offsets, self._member.consumer_group_metadata(), self.offsets_timeout_s
                )
            if self._crashing(sum(len(r) for r in cp.records.values())):
                producer.flush(self.commit_timeout_s)
                os.kill(os.getpid(), signal.SIGKILL)
            with self._watchdog("commit_transaction", self.commit_timeout_s):
                self._commit(producer)
            return True
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED) or err.fatal():
                self._producers.pop(p, None)
                raise TaskMigrated(f"task {p}: {err.str()}") from exc
            log.warning("job %s task %s: aborting the checkpoint: %s", self._group, p, err.str())
            self._abort(p, producer)
            return False

    def _abort(self, p: int, producer: Producer) -> None:
        """abort_transaction, retried while the error is retriable; a fatal error means the
        producer is done for: the task is given up (``TaskMigrated``)."""
        deadline = time.monotonic() + self.commit_timeout_s
        while True:
            try:
                producer.abort_transaction(max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                err = exc.args[0]
                if err.retriable() and time.monotonic() < deadline:
                    continue
                self._producers.pop(p, None)
                raise TaskMigrated(f"task {p}: abort failed: {err.str()}") from exc

    @contextlib.contextmanager
    def _watchdog(self, what: str, timeout_s: float) -> Iterator[None]:
        """librdkafka 2.16 was seen blocking in send_offsets_to_transaction past its timeout
        after repeated broker restarts (waiting on a condition with no deadline). A call that
        outlives `timeout_s` + ``STUCK_S`` ends the process (exit status 3, after a critical
        log line): a crash loses nothing under either guarantee, and the supervisor (systemd,
        Kubernetes, the tests) starts the worker again."""
        timer = threading.Timer(timeout_s + STUCK_S, self._stuck, (what, timeout_s + STUCK_S))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def _stuck(self, what: str, waited_s: float) -> None:
        log.critical(
            "job %s: %s blocked for %.0f s inside librdkafka; exiting (status 3) for a "
            "supervisor to restart this worker",
            self._group, what, waited_s,
        )  # fmt: skip
        logging.shutdown()
        os._exit(STUCK_EXIT_STATUS)

    def _commit(self, producer: Producer) -> None:
        """commit_transaction, retried while the error is retriable (broker restarting), for
        `commit_timeout_s` in all; then the caller aborts."""
        deadline = time.monotonic() + self.commit_timeout_s
        while True:
            try:
                producer.commit_transaction(max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                err = exc.args[0]
                if not err.retriable() or time.monotonic() > deadline:
                    raise
                log.info("job %s: commit retried: %s", self._group, err.str())

    def _at_least_once_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(
                {
                    **self._common,
                    "enable.idempotence": True,
                    "partitioner": "murmur2_random",
                    "linger.ms": 5,
                    "on_delivery": self._delivered,
                    # a report only for a record that failed (they are what a checkpoint
                    # needs): no Python call per delivered record
                    "delivery.report.only.error": True,
                }
            )
        return self._producer

    def _at_least_once(self, tasks: dict[int, TaskCheckpoint]) -> set[int]:
        producer = self._at_least_once_producer()
        for cp in tasks.values():
            self._produce(producer, cp.records)
        left = producer.flush(self.commit_timeout_s)
        if self._crashing(sum(len(r) for cp in tasks.values() for r in cp.records.values())):
            os.kill(os.getpid(), signal.SIGKILL)
        if left or self._failed:
            log.warning(
                "job %s: %s undelivered, %s failed: rewinding", self._group, left, self._failed
            )
            self._failed.clear()
            return set(tasks)
        offsets = [
            TopicPartition(t, q, off) for cp in tasks.values() for (t, q), off in cp.offsets.items()
        ]
        if offsets:
            try:
                self._member.commit(offsets=offsets, asynchronous=False)
            except KafkaException as exc:
                log.warning(
                    "job %s: offset commit failed, records may repeat: %s", self._group, exc
                )
        return set()

    def _crashing(self, records: int) -> bool:
        return self._crash_at is not None and records >= self._crash_at

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self._failed.append(err)

    def close(self) -> None:
        """Leave the group (the other workers rebalance at once) and close every client."""
        if self.consumer is not None:
            self._member.close()
            self.consumer = None
        if self._producer is not None:
            self._producer.flush(10)
        self.release(list(self._producers))
        if self._restorer is not None:
            self._restorer.close()
            self._restorer = None
        if self._global is not None:
            self._global.close()
            self._global = None
