"""``JobLog``: what a job's ``Runner`` needs from "the log", and the embedded implementation.

One ``Runner`` (and one ``Task``) logic runs over two logs:

- ``EmbeddedLog`` (here): the broker's own ``LogStore`` in the same process — the embedded
  default the console uses for its demo jobs. Alone (``group=False``) the runner owns every
  partition and commits its offsets to the ``GroupCoordinator``; with ``group=True`` it is one
  member of the job's consumer group (``streams.client.Consumer``). At-least-once only.
- ``streams.jobs.kafka.KafkaLog``: any Kafka-protocol cluster (Tidelog's listener included)
  through confluent-kafka, at-least-once or exactly-once (``python -m streams.jobs run``).

What the runner asks of a log (the ``JobLog`` Protocol):

- topics: ``partition_count`` (None when the topic does not exist) and ``create_topic``
  (compacted changelog topics, sinks, repartition topics; an existing topic is left alone);
- membership: ``join`` the job's group over its input topics with ``on_assign(tps)`` /
  ``on_revoke(tps)`` / ``on_lost(tps)`` callbacks, called from inside ``poll`` (as Kafka's
  clients do); ``idle(seconds)`` when a round found nothing to do; ``claim(tasks)`` before a
  task's state and offsets are read (exactly-once: fence the task's previous owner),
  ``release(tasks)`` after it is closed;
- reading: ``start_positions`` (the group's committed offsets, or the log start), ``start_of``
  (a partition's log start, for global sources read whole by every task),
  ``read(topic, partition, offset, max_records)``, ``end_offset`` (where a reader of this log
  stops: the last stable offset for read_committed), ``restore(topic, partition)`` (a
  changelog partition's committed records, for a task's state), ``seek`` (rewind a partition
  after an aborted checkpoint);
- writing: ``checkpoint(group, {task: (records, offsets)})`` — append each task's outputs and
  changelog records and commit its input offsets; with exactly-once each task's share is one
  transaction. It returns the tasks whose checkpoint was aborted (their records were not
  written and their offsets not committed: the runner rewinds them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple, Protocol

from streams.client import CommitFailed, Consumer
from streams.errors import GroupError, TidelogError, TopicAlreadyExists, UnknownTopic
from streams.log import LogStore, compression
from streams.log import records as rb

log = logging.getLogger(__name__)

TP = tuple[str, int]
# records a task writes at a checkpoint, by (topic, partition); partition None: by key. Each
# is ``(value, key, headers, ts)``: a plain tuple (the runner buffers them so: a NamedTuple
# stays tracked by the cycle collector, which then walks every buffered output) or a
# ``ProducerRecord``
Records = dict[tuple[str, int | None], list[tuple]]
Callback = Callable[[list[TP]], None]
KeyValue = tuple[bytes | None, bytes | None]  # a changelog record: key, value (None: deleted)


# a checkpoint appends a destination's records in runs of about this many bytes of keys and
# values (``_runs``): one batch of them fits the default max.message.bytes (1 MiB), where
# one append of them all would be encoded whole, refused as too large and split in halves,
# re-encoded, until the halves fit (several encodings of the same records)
APPEND_BYTES = 512 * 1024


try:  # the compiled cut (``_crecords.runs``), built in place by `make native`
    from streams.jobs._crecords import runs as _native_runs
except ImportError:  # not built: the pure loop cuts every checkpoint
    _native_runs = None


def _runs(recs: list, limit: int) -> list[list]:
    """``_runs_pure`` by the compiled loop (``_crecords.runs``, the same runs) when it is built
    and takes the records (plain tuples or ``ProducerRecord``s, bytes or None keys and
    values), else by the pure one."""
    if _native_runs is not None:
        cut = _native_runs(recs, limit)
        if cut is not None:
            return cut
    return _runs_pure(recs, limit)


def _runs_pure(recs: list, limit: int) -> list[list]:
    """`recs` (``(value, key, headers, ts)``) cut into runs in order, each of at most `limit`
    bytes of keys and values and per-record overhead (a run of one record may be more); a
    list that fits is returned whole, uncopied. Only a size hint: ``LogStore.append_batch``
    still splits a batch the topic's max.message.bytes refuses."""
    runs = []
    start = size = 0
    i = -1
    for value, key, _, _ in recs:
        i += 1
        n = 16 + (0 if value is None else len(value)) + (0 if key is None else len(key))
        if size + n > limit and i > start:
            runs.append(recs[start:i])
            start, size = i, 0
        size += n
    if start == 0:
        return [recs]
    runs.append(recs[start:])
    return runs


class LogRecord(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


class TaskCheckpoint(NamedTuple):
    records: Records
    offsets: dict[TP, int]  # next offset to read, per input partition of the task


class TaskMigrated(Exception):  # noqa: N818 - Kafka Streams' name for it
    """Another worker owns these tasks now (this one was fenced): drop them and rejoin."""


class JobLog(Protocol):
    exactly_once: bool

    def partition_count(self, topic: str) -> int | None: ...

    def create_topic(self, topic: str, partitions: int, config: dict | None) -> None: ...

    def join(
        self, group: str, topics: list[str], on_assign: Callback, on_revoke: Callback,
        on_lost: Callback,
    ) -> None: ...  # fmt: skip

    def poll(self) -> None: ...

    def idle(self, seconds: float) -> None: ...

    def claim(self, tasks: list[int]) -> None: ...

    def release(self, tasks: list[int]) -> None: ...

    def start_positions(self, group: str, tps: list[TP]) -> dict[TP, int]: ...

    def start_of(self, topic: str, partition: int) -> int: ...

    def read(self, topic: str, partition: int, offset: int, max_records: int) -> list: ...

    def end_offset(self, topic: str, partition: int) -> int: ...

    def restore(self, topic: str, partition: int) -> Iterator[KeyValue]: ...

    def seek(self, positions: dict[TP, int]) -> None: ...

    def checkpoint(self, group: str, tasks: dict[int, TaskCheckpoint]) -> set[int]: ...

    def rejoin(self) -> None: ...

    def close(self) -> None: ...


class EmbeddedLog:
    """The broker's ``LogStore`` in this process (at-least-once; see the module docstring).

    `coordinator`: the ``GroupCoordinator`` offsets are committed to (None: none are, and a
    restart reads from the beginning); `group`: share the partitions with the job's other
    workers through ``streams.client.Consumer`` (needs the coordinator)."""

    exactly_once = False
    # records a runner asks ``read`` for at a time, at least (``Runner._read_raw``): a batch
    # of the store read whole is decoded once
    read_ahead = 5000

    def __init__(
        self,
        store: LogStore,
        coordinator=None,
        *,
        group: bool = False,
        consumer_options: dict | None = None,
        client_id: str = "tidelog-job",
    ):
        self.store, self.coordinator, self.group = store, coordinator, group
        self._consumer_options = consumer_options or {}
        self._client_id = client_id
        self.consumer: Consumer | None = None
        self._done: dict[TP, int] = {}  # the offsets last committed (unchanged: not again)

    def partition_count(self, topic: str) -> int | None:
        try:
            return self.store.partition_count(topic)
        except UnknownTopic:
            return None

    def create_topic(self, topic: str, partitions: int, config: dict | None) -> None:
        try:
            self.store.create_topic(topic, partitions, config)
        except TopicAlreadyExists:
            pass  # another worker of the job created it meanwhile

    def join(self, group, topics, on_assign, on_revoke, on_lost) -> None:
        if not self.group:
            on_assign([(t, p) for t in topics for p in range(self.store.partition_count(t))])
            return
        consumer = self.consumer = Consumer(
            self.store,
            self.coordinator,
            group,
            client_id=self._client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **self._consumer_options,
        )
        consumer.on_assign = on_assign

        def revoked(tps: list[TP]) -> None:
            self._done.clear()
            on_revoke(tps)

        consumer.on_revoke = revoked
        consumer.subscribe(topics)

    def poll(self) -> None:
        if self.consumer is not None:
            # membership, heartbeats and rebalances run inside poll (as in Kafka's client);
            # the runner reads by itself from its own positions, so the record is not used
            self.consumer.poll(0, max_records=1)

    def idle(self, seconds: float) -> None:
        time.sleep(seconds)

    def claim(self, tasks: list[int]) -> None:
        pass

    def release(self, tasks: list[int]) -> None:
        pass

    def start_positions(self, group: str, tps: list[TP]) -> dict[TP, int]:
        committed = {}
        if self.coordinator is not None:
            committed = {tp: c.offset for tp, c in self.coordinator.committed(group).items()}
        return {tp: committed.get(tp, self.store.offsets(*tp)[0]) for tp in tps}

    def start_of(self, topic: str, partition: int) -> int:
        return self.store.offsets(topic, partition)[0]

    def read(self, topic: str, partition: int, offset: int, max_records: int) -> list:
        start, end = self.store.offsets(topic, partition)
        offset = max(offset, start)
        if offset >= end:
            return []
        return self.store.read(topic, partition, offset, max_records=max_records)

    def read_tuples(
        self, topic: str, partition: int, offset: int, max_records: int, decode: Callable
    ) -> list | None:
        """``read``'s records (about `max_records`: whole batches) as the runner's ``(key,
        value, ts, offset)`` tuples, decoded straight from the store's raw batches
        (``LogStore.read_batches``, checked as ``read`` checks them) by `decode`
        (``serde.batch_decoder``'s), without ``Record``s in between; transaction markers
        skipped, as ``read`` skips them. None where `decode` defers (the runner then reads
        the usual way, which answers or raises)."""
        start, end = self.store.offsets(topic, partition)
        offset = max(offset, start)
        if offset >= end:
            return []
        out: list = []
        budget = 1  # the first read takes one batch (at least one is read, whatever its size)
        while offset < end and len(out) < max_records:
            try:
                raw = self.store.read_batches(topic, partition, offset, budget)
            except TidelogError:
                if out:  # damage ahead: what precedes it is read now, as ``read`` does
                    return out
                raise
            if not raw:
                break
            view = memoryview(raw)
            pos, size, had = 0, len(raw), len(out)
            while pos < size:
                h = rb.parse_header(raw, pos)
                after = pos + rb.LOG_OVERHEAD + h.length
                if h.base_offset >= end:
                    return out
                if not h.attributes & rb.ATTR_CONTROL and h.next_offset > offset:
                    body: bytes | memoryview = view[pos + rb.HEADER_SIZE : after]
                    if h.attributes & rb.ATTR_CODEC_MASK:
                        body = compression.decompress(h.attributes & rb.ATTR_CODEC_MASK, body)
                    done = decode(body, h, offset, end, out)
                    if done < 0:
                        return None
                    if done:
                        return out
                offset = max(offset, h.next_offset)
                pos = after
            # the next read: about the bytes the records still wanted take, at these sizes
            per = size // max(len(out) - had, 1)
            budget = min(max(per * (max_records - len(out)), 1), 1 << 20)
        return out

    def end_offset(self, topic: str, partition: int) -> int:
        return self.store.offsets(topic, partition)[1]

    def restore(self, topic: str, partition: int) -> Iterator[KeyValue]:
        pos, end = self.store.offsets(topic, partition, committed=True)
        while pos < end:
            recs = self.store.read(topic, partition, pos, max_records=5000, committed=True)
            if not recs:
                break
            for r in recs:
                yield r.key, r.value
            pos = recs[-1].offset + 1

    def seek(self, positions: dict[TP, int]) -> None:
        pass  # the runner reads from its own positions

    def checkpoint(self, group: str, tasks: dict[int, TaskCheckpoint]) -> set[int]:
        batches: Records = {}
        offsets: dict[TP, int] = {}
        for cp in tasks.values():
            for dest, recs in cp.records.items():
                batches.setdefault(dest, []).extend(recs)
            offsets.update((tp, off) for tp, off in cp.offsets.items() if self._done.get(tp) != off)
        for (topic, partition), recs in batches.items():  # one fdatasync per partition
            self.store.append_runs(topic, partition, _runs(recs, APPEND_BYTES))
        if self.consumer is not None:
            if offsets:
                try:
                    self.consumer.commit(offsets)
                except (CommitFailed, GroupError) as exc:
                    log.warning("group %s: commit failed, records may repeat: %s", group, exc)
                    return set()
        elif self.coordinator is not None and offsets:
            self.coordinator.commit_offsets(group, offsets)
        self._done.update(offsets)
        return set()

    def rejoin(self) -> None:
        pass

    def close(self) -> None:
        """Leave the group (the others rebalance at once); the store stays open (not ours)."""
        if self.consumer is not None:
            self.consumer.close(autocommit=False)
            self.consumer = None
