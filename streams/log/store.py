"""The log store: one data directory of topics and partitions, owned by one process.

Layout of a data directory::

    .lock                               exclusive flock, holds the owner's pid
    .clean-shutdown                     present only between a clean close and the next open
    .meta/topics/<topic>.json           topic id, partition count and config overrides
    .meta/producer-ids                  end of the block of producer ids handed out
    <topic>-<partition>/                segment files (see ``segment`` and ``partition``),
                                        damaged-ranges.json when damage was found (``damage``),
                                        producer-state.json (``producer_state``), the aborted
                                        index and txn.checkpoint (``txn``)
    recovery-point-offset-checkpoint    per partition: everything below is on disk, indexes too
    log-start-offset-checkpoint         per partition: first readable offset
    cleaner-offset-checkpoint           per partition: end of the range the cleaner last compacted
    verified-position-checkpoint        per partition: the last verified point, (active segment,
                                        byte position, CRC-32C of the bytes before it)

A topic's id (KIP-516: a random UUID, as hex) is chosen when it is created and kept in its
metadata file, so it stays the same across restarts and differs for a topic deleted and created
again under the same name; a topic whose file has none (written by an early version) gets one
when the store opens, written back at once.

A topic's metadata file is its commit point: partition directories are created before it and
removed after it (a create that fails removes what it made), and directories that have no
metadata are leftovers of an interrupted create or delete, removed at the next open. Topic names
have up to 249 characters, as in Kafka, so every name derived from one fits in 255: a partition
directory is at most 254, a deleted one is renamed ``<topic, cut>-<partition>.<id>-delete``
(Kafka's scheme) before removal, and temporary files are named without the topic's full name.

Thread-safety: every method may be called from any thread. Topic creation and deletion are
serialised by one lock; appends and reads go straight to the partition logs.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from streams.errors import (
    DataDirLocked,
    InvalidPartitions,
    OffsetOutOfRange,
    RecordTooLarge,
    StorageError,
    StoreClosed,
    TopicAlreadyExists,
    UnknownPartition,
    UnknownTopic,
    UnknownTopicId,
)
from streams.log import checkpoint
from streams.log import records as rb
from streams.log.config import TopicConfig, validate_topic_name
from streams.log.damage import DamagedRange
from streams.log.partition import PartitionLog, fsync_dir
from streams.log.partitioner import StickyPartitioner, partition_for_key
from streams.log.produce import Appended
from streams.log.producer_state import (
    LEGACY_STATE_FILE,
    ProducerDescription,
    ProducerIds,
    read_legacy_snapshot,
)
from streams.log.records import ProducerRecord, Record
from streams.log.refusals import RefusalLog

log = logging.getLogger(__name__)

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
CLEANER_FILE = "cleaner-offset-checkpoint"
VERIFIED_FILE = "verified-position-checkpoint"
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
LOCK_FILE = ".lock"
MAX_PARTITIONS = 10_000
NAME_MAX = 255  # longest file name: <topic>-<partition> of a 249-character topic takes 254
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendResult(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp_ms: int


class FetchedData(NamedTuple):
    """One partition's part of a Kafka Fetch answer (``LogStore.fetch``)."""

    records: bytes  # whole raw batches, as stored
    next_offset: int  # after the last batch in `records` (the fetch offset when empty)
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]]  # read_committed: (producer id, first offset) in range


LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, MAX_TIMESTAMP = -1, -2, -3  # ListOffsets' special ones


_RECORD_TYPES = frozenset((tuple, ProducerRecord))


def _as_records(records: Iterable[ProducerRecord | tuple]) -> list:
    """`records` as ``append_batch`` takes them on: a ProducerRecord, or a plain tuple of its
    four fields, goes on as it is (read by position from here on); any other shape (fewer
    fields, a list) becomes one. A list of only those (a runner's outputs) is checked by
    C-level scans (the types, then the tuples' lengths) and copied whole."""
    if type(records) is list:
        types = set(map(type, records))
        if types <= _RECORD_TYPES and (tuple not in types or set(map(len, records)) <= {4}):
            return records[:]
    return [
        r if type(r) is ProducerRecord or (type(r) is tuple and len(r) == 4) else ProducerRecord(*r)
        for r in records
    ]


class AppendResults(Sequence[AppendResult]):
    """Where each record of an ``append_batch`` call landed, in input order.

    Kept as one run per partition (base offset, timestamp) and built into ``AppendResult``s on
    access, so a batch of thousands of records costs no per-record objects unless asked for.
    """

    def __init__(self, topic: str, count: int):
        self.topic = topic
        self._count = count
        self._runs: list[tuple[list[int] | None, int, int, int, list | None]] = []

    def add_run(self, indexes, partition, base, default_ts, records) -> None:
        """`indexes` None means all records in order; `records`: the run's records, whose
        timestamps (``r[3]``, None: `default_ts`) are read on access only; None: all have
        `default_ts` (LogAppendTime)."""
        self._runs.append((indexes, partition, base, default_ts, records))
        self._where = None

    def _index(self) -> list[tuple[int, int, int]]:
        if getattr(self, "_where", None) is None:
            where: list = [None] * self._count
            for indexes, partition, base, default_ts, stamps in self._runs:
                for j, i in enumerate(range(self._count) if indexes is None else indexes):
                    ts = default_ts if stamps is None or stamps[j][3] is None else stamps[j][3]
                    where[i] = (partition, base + j, ts)
            self._where = where
        return self._where

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._count))]
        if i < 0:
            i += self._count
        if len(self._runs) == 1 and self._runs[0][0] is None:
            _, partition, base, default_ts, stamps = self._runs[0]
            if not 0 <= i < self._count:
                raise IndexError(i)
            ts = default_ts if stamps is None or stamps[i][3] is None else stamps[i][3]
            return AppendResult(self.topic, partition, base + i, ts)
        partition, offset, ts = self._index()[i]
        return AppendResult(self.topic, partition, offset, ts)

    def __repr__(self) -> str:
        return f"AppendResults({list(self)!r})"


@dataclasses.dataclass(frozen=True)
class PartitionDescription:
    partition: int
    log_start_offset: int
    end_offset: int  # the high watermark: what consumers can read up to
    log_end_offset: int
    size_bytes: int
    segment_count: int
    last_append_ms: int | None
    damaged: tuple[DamagedRange, ...] = ()  # ranges of the log that cannot be read (CRC)

    @property
    def record_count(self) -> int:
        """Offsets in [start, end); on a compacted topic an upper bound (offsets have gaps)."""
        return self.end_offset - self.log_start_offset


@dataclasses.dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    internal: bool
    config: dict[str, str]
    overrides: dict[str, str]
    partitions: list[PartitionDescription]
    created_ms: int

    @property
    def size_bytes(self) -> int:
        return sum(p.size_bytes for p in self.partitions)

    @property
    def record_count(self) -> int:
        return sum(p.record_count for p in self.partitions)


@dataclasses.dataclass
class _Topic:
    name: str
    topic_id: str
    config: TopicConfig
    created_ms: int
    partitions: list[PartitionLog]
    # False once the topic has ever been compacted: its offsets may have gaps, so recovery
    # must not treat a gap as damage
    contiguous: bool = True
    sticky: StickyPartitioner = dataclasses.field(default_factory=StickyPartitioner)

    def meta(self) -> dict:
        return {
            "name": self.name,
            "id": self.topic_id,
            "partitions": len(self.partitions),
            "config": dict(self.config.overrides),
            "created_ms": self.created_ms,
            "contiguous": self.contiguous,
        }


#: Topics kept by the broker itself beside the ``__`` ones: the schema registry's log
#: (Confluent's name for it, so its layout can be read by another registry later).
BROKER_TOPICS = frozenset({"_schemas"})


def is_internal(topic: str) -> bool:
    """Whether ``topic`` is the broker's own: ``__*`` (Kafka's convention) or ``_schemas``."""
    return topic.startswith("__") or topic in BROKER_TOPICS


class LogStore:
    """A data directory of partitioned logs. Use ``LogStore.open(path)``."""

    def __init__(
        self,
        path: str,
        clock: Callable[[], int],
        topic_defaults: Mapping[str, object] | None = None,
    ):
        self.path = os.path.abspath(path)
        self.clock = clock
        # the config of every key a topic leaves unset (Kafka's broker-level log.* configs)
        self.topic_defaults = TopicConfig.from_mapping(None, topic_defaults).defaults
        self._topics: dict[str, _Topic] = {}
        self._names_by_id: dict[str, str] = {}
        self._admin_lock = threading.RLock()
        self._lock_fd = -1
        self._lost: StorageError | None = None  # set when the data directory was replaced
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.cleaner_offsets: dict[tuple[str, int], int] = {}
        self.was_clean_shutdown = True
        self._refusals = RefusalLog(f"{self.path}")
        self._append_listeners: tuple[Callable[[PartitionLog], None], ...] = ()
        self._producer_ids = ProducerIds(os.path.join(self.path, ".meta"))

    # ================================================================== lifecycle

    @classmethod
    def open(
        cls,
        path: str,
        *,
        clock: Callable[[], int] = wall_clock_ms,
        background: bool = True,
        checkpoint_interval_ms: int = 5_000,
        retention_check_interval_ms: int = 300_000,
        topic_defaults: Mapping[str, object] | None = None,
    ) -> LogStore:
        """Open (creating if needed) a data directory and take its exclusive lock.

        After an unclean stop, every partition is recovered from its recovery point.
        With `background`, a thread flushes by interval, writes checkpoints and applies
        retention and compaction. `topic_defaults`: topic configs for every key a topic does
        not set itself (Kafka's broker configs, e.g. ``config.KAFKA_FLUSH_DEFAULTS``); not
        stored: each open says them again, and a topic's own keys always win.
        """
        os.makedirs(path, exist_ok=True)
        store = cls(path, clock, topic_defaults)
        store._lock()
        try:
            store._load()
        except BaseException:
            store._unlock()
            raise
        if background:
            store.start_background(checkpoint_interval_ms, retention_check_interval_ms)
        return store

    def _lock(self) -> None:
        lock_path = os.path.join(self.path, LOCK_FILE)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise DataDirLocked(self.path, int(holder) if holder.isdigit() else None) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _check_own_dir(self) -> None:
        """Raise StorageError (and take every partition offline) once the data directory is
        no longer the one this store locked: removed, or removed and made again (``rm -rf``
        while the broker runs, then another broker started there). The lock is held on the
        old lock file's inode, so the new broker's lock succeeds; this store writes its files
        by path, so a checkpoint, producer snapshot or clean-shutdown marker written now would
        land in the other broker's directory (its recovery points naming offsets its logs
        never held), and retention or a topic deletion would remove the other broker's files.
        Called before each of the store's own writes (checkpoints, topic metadata, new
        partitions, retention, compaction, deleted records or topics, close): the maintenance
        thread's checkpoint turn usually notices first. Until then (one checkpoint interval at
        most) a partition's roll, producer snapshot or transaction index may still land there;
        after it, every partition refuses appends (KAFKA_STORAGE_ERROR) and writes nothing."""
        if self._lost is not None:
            raise self._lost
        if self._lock_fd < 0:  # closed (or never locked): nothing to compare
            return
        held = os.fstat(self._lock_fd)
        try:
            now = os.stat(os.path.join(self.path, LOCK_FILE))
            same = (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
        except FileNotFoundError:
            same = False
        if same:
            return
        self._lost = StorageError(
            f"data directory {self.path} was removed or replaced while this broker ran (its "
            "lock file is not the one this broker holds): every partition is offline and "
            "nothing more is written there; stop this broker",
            errno.ENOENT,
        )
        log.error("%s", self._lost)
        for plog in self.all_partitions():
            plog.take_offline(self._lost)
        raise self._lost

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            os.ftruncate(self._lock_fd, 0)
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _meta_dir(self) -> str:
        return os.path.join(self.path, ".meta", "topics")

    def _load(self) -> None:
        os.makedirs(self._meta_dir(), exist_ok=True)
        for directory in (self.path, os.path.dirname(self._meta_dir()), self._meta_dir()):
            checkpoint.remove_leftover_tmp(directory)
        marker = os.path.join(self.path, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        metas = self._read_metas()
        self.was_clean_shutdown = clean or not metas
        recovery = checkpoint.read(os.path.join(self.path, RECOVERY_POINT_FILE))
        starts = checkpoint.read(os.path.join(self.path, LOG_START_FILE))
        self.cleaner_offsets = checkpoint.read(os.path.join(self.path, CLEANER_FILE))
        verified = checkpoint.read(os.path.join(self.path, VERIFIED_FILE), width=3)
        if not clean and metas:
            log.warning("%s was not shut down cleanly; recovering from recovery points", self.path)
        self._remove_orphans(metas)
        self._producer_ids.load()
        legacy = read_legacy_snapshot(os.path.dirname(self._meta_dir()))
        for meta in metas:
            config = TopicConfig.from_mapping(meta["config"], self.topic_defaults)
            topic_id = _valid_topic_id(meta.get("id"))
            created = meta["created_ms"]
            topic = _Topic(meta["name"], topic_id or _new_topic_id(), config, created, [])
            topic.contiguous = meta.get("contiguous", not config.compact) and not config.compact
            for p in range(meta["partitions"]):
                key = (topic.name, p)
                plog = PartitionLog.open(
                    self._partition_dir(topic.name, p),
                    topic.name,
                    p,
                    config,
                    self.clock,
                    log_start_offset=starts.get(key, 0),
                    recovery_point=recovery.get(key, 0),
                    clean=clean,
                    verified=verified.get(key),
                    contiguous=topic.contiguous,
                    legacy_producer_state=None if legacy is None else legacy.get(key),
                )
                plog.on_log_start_change = self._on_log_start_change
                plog.on_append = self._on_append
                topic.partitions.append(plog)
            self._topics[topic.name] = topic
            self._names_by_id[topic.topic_id] = topic.name
            if topic_id is None:
                log.info("topic %s had no topic id: it is now %s", topic.name, topic.topic_id)
                try:
                    self._write_meta(topic)
                except OSError as exc:  # kept in memory; written with the next metadata change
                    log.warning("topic %s: cannot write its new id: %s", topic.name, exc)
        if legacy is not None:
            self._adopt_legacy_producer_state()
        if clean:
            os.unlink(marker)
            fsync_dir(self.path)
        else:
            self.write_checkpoints()

    def _adopt_legacy_producer_state(self) -> None:
        """An older data directory kept one store-wide producer state snapshot: once every
        partition has written its own part, it goes."""
        try:
            for plog in self.all_partitions():
                plog.snapshot_producers()
            os.unlink(os.path.join(self.path, ".meta", LEGACY_STATE_FILE))
        except OSError as exc:  # kept: the next open hands it out again
            log.warning("%s: the old producer state snapshot stays: %s", self.path, exc)

    def _read_metas(self) -> list[dict]:
        metas = []
        for name in sorted(os.listdir(self._meta_dir())):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(self._meta_dir(), name), encoding="utf-8") as f:
                metas.append(json.load(f))
        return metas

    def _remove_orphans(self, metas: list[dict]) -> None:
        known = {m["name"]: m["partitions"] for m in metas}
        for name in os.listdir(self.path):
            full = os.path.join(self.path, name)
            if not os.path.isdir(full) or name.startswith("."):
                continue
            if name.endswith("-delete"):
                shutil.rmtree(full, ignore_errors=True)
                continue
            m = _PARTITION_DIR.match(name)
            if m and int(m.group(2)) >= known.get(m.group(1), 0):
                log.warning("removing %s: no topic owns it (interrupted create or delete)", full)
                shutil.rmtree(full, ignore_errors=True)

    def start_background(self, checkpoint_interval_ms: int, retention_check_interval_ms: int):
        from streams.log.maintenance import Maintenance

        self._maintenance = Maintenance(self, checkpoint_interval_ms, retention_check_interval_ms)
        self._thread = threading.Thread(
            target=self._maintenance.run,
            args=(self._stop,),
            name="tidelog-log-maintenance",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Flush everything, write checkpoints and the clean-shutdown marker, release the lock."""
        if self._closed:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._admin_lock:
            try:
                try:
                    self._check_own_dir()  # if lost, the partitions close without writing
                finally:
                    for topic in self._topics.values():
                        for plog in topic.partitions:
                            plog.close()
                self.write_checkpoints()
                checkpoint.write_atomic(os.path.join(self.path, CLEAN_SHUTDOWN_FILE), b"")
            except (OSError, StorageError) as exc:
                log.warning(
                    "%s: closed without the clean-shutdown marker (%s); the next open recovers "
                    "every partition from its recovery point",
                    self.path,
                    exc,
                )
            finally:
                self._closed = True
                self._unlock()

    def __enter__(self) -> LogStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def write_checkpoints(self) -> None:
        """Persist recovery points, log start offsets and cleaner offsets (StorageError when
        the disk refuses: the previous checkpoints stay, logged once per streak)."""
        recovery, starts, verified = {}, {}, {}
        self._check_own_dir()
        try:
            for topic in list(self._topics.values()):
                for plog in topic.partitions:
                    key = (topic.name, plog.partition)
                    recovery[key] = plog.checkpoint_recovery_point()
                    starts[key] = plog.log_start_offset
                    point = plog.verified_point()
                    if point is not None:
                        verified[key] = point
            checkpoint.write(os.path.join(self.path, RECOVERY_POINT_FILE), recovery)
            checkpoint.write(os.path.join(self.path, VERIFIED_FILE), verified)
            checkpoint.write(os.path.join(self.path, LOG_START_FILE), starts)
            live = {k: v for k, v in self.cleaner_offsets.items() if k in recovery}
            checkpoint.write(os.path.join(self.path, CLEANER_FILE), live)
        except OSError as exc:
            raise self._refusals.refused(
                "write the checkpoints", exc, "the previous ones stay; the next turn tries again"
            ) from None
        self._refusals.succeeded()

    def _on_log_start_change(self, plog: PartitionLog) -> None:
        # Deleted records must stay deleted after a crash: checkpoint before returning.
        with self._admin_lock:
            self._check_own_dir()
            starts = {
                (t.name, p.partition): p.log_start_offset
                for t in self._topics.values()
                for p in t.partitions
            }
            try:
                checkpoint.write(os.path.join(self.path, LOG_START_FILE), starts)
            except OSError as exc:
                raise self._refusals.refused(
                    f"record the new log start offset of {plog.topic}-{plog.partition}",
                    exc,
                    "the records are deleted now but may come back after a crash",
                ) from None

    def add_append_listener(self, listener: Callable[[PartitionLog], None]) -> None:
        """Call `listener(partition_log)` whenever a partition's high watermark advances.

        It runs on the appending (or syncing) thread, possibly under the partition's flush
        lock: it must be quick and never block (hand the news to another thread or loop)."""
        with self._admin_lock:
            self._append_listeners = (*self._append_listeners, listener)

    def remove_append_listener(self, listener: Callable[[PartitionLog], None]) -> None:
        with self._admin_lock:
            self._append_listeners = tuple(x for x in self._append_listeners if x != listener)

    def _on_append(self, plog: PartitionLog) -> None:
        for listener in self._append_listeners:  # a tuple, replaced whole: no lock needed
            listener(plog)

    # ================================================================== topics

    def _partition_dir(self, topic: str, partition: int) -> str:
        return os.path.join(self.path, f"{topic}-{partition}")

    def _topic(self, name: str) -> _Topic:
        if self._closed:
            raise StoreClosed(f"the log store at {self.path} is closed")
        try:
            return self._topics[name]
        except KeyError:
            raise UnknownTopic(name) from None

    def partition_log(self, topic: str, partition: int) -> PartitionLog:
        t = self._topic(topic)
        if not 0 <= partition < len(t.partitions):
            raise UnknownPartition(topic, partition, len(t.partitions))
        return t.partitions[partition]

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, object] | None = None
    ) -> TopicDescription:
        validate_topic_name(name)
        _check_partition_count(partitions)
        cfg = TopicConfig.from_mapping(config, self.topic_defaults)
        with self._admin_lock:
            if self._closed:
                raise StoreClosed(f"the log store at {self.path} is closed")
            if name in self._topics:
                raise TopicAlreadyExists(name)
            topic = _Topic(name, _new_topic_id(), cfg, self.clock(), [], not cfg.compact)
            try:
                for p in range(partitions):
                    topic.partitions.append(self._open_new_partition(topic, p))
                self._write_meta(topic)
            except BaseException as exc:
                self._discard_new_partitions(topic, 0, partitions)
                if isinstance(exc, OSError):
                    raise _storage_error(f"create topic {name!r}", exc) from exc
                raise
            self._topics[name] = topic
            self._names_by_id[topic.topic_id] = name
        log.info("created topic %s with %d partitions %s", name, partitions, dict(cfg.overrides))
        return self.describe_topic(name)

    def _open_new_partition(self, topic: _Topic, p: int) -> PartitionLog:
        self._check_own_dir()
        directory = self._partition_dir(topic.name, p)
        if os.path.exists(directory):
            shutil.rmtree(directory)
        plog = PartitionLog.open(
            directory, topic.name, p, topic.config, self.clock, contiguous=topic.contiguous
        )
        plog.on_log_start_change = self._on_log_start_change
        plog.on_append = self._on_append
        return plog

    def _discard_new_partitions(self, topic: _Topic, first: int, end: int) -> None:
        """Undo a create (or an add of partitions) that failed: close the partitions it opened
        and remove every directory it may have made, so nothing is left on disk."""
        for plog in topic.partitions[first:]:
            try:
                plog.close()
            except OSError as exc:  # a full disk may refuse the flush; the files go anyway
                log.warning("%s: closing after a failed create: %s", plog.directory, exc)
        del topic.partitions[first:]
        for p in range(first, end):
            shutil.rmtree(self._partition_dir(topic.name, p), ignore_errors=True)
        try:
            fsync_dir(self.path)
        except OSError:
            pass

    def _write_meta(self, topic: _Topic) -> None:
        self._check_own_dir()
        data = json.dumps(topic.meta(), indent=1, sort_keys=True).encode()
        checkpoint.write_atomic(os.path.join(self._meta_dir(), f"{topic.name}.json"), data)

    def delete_topic(self, name: str) -> None:
        with self._admin_lock:
            topic = self._topic(name)
            self._check_own_dir()
            try:
                os.unlink(os.path.join(self._meta_dir(), f"{name}.json"))
                fsync_dir(self._meta_dir())
            except OSError as exc:
                raise _storage_error(f"delete topic {name!r}", exc) from exc
            del self._topics[name]
            self._names_by_id.pop(topic.topic_id, None)
            for plog in topic.partitions:
                _remove_partition_dir(plog, topic.topic_id)
            for p in range(len(topic.partitions)):
                self.cleaner_offsets.pop((name, p), None)
            try:  # a topic re-created under this name must not inherit these recovery points
                self.write_checkpoints()
            except StorageError:
                pass  # logged; the next turn of the maintenance thread writes them
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, total: int) -> TopicDescription:
        """Grow a topic to `total` partitions. Kafka never removes partitions: neither do we."""
        _check_partition_count(total)
        with self._admin_lock:
            topic = self._topic(name)
            current = len(topic.partitions)
            if total < current:
                raise InvalidPartitions(
                    f"topic {name!r} has {current} partitions; partitions can only be added, "
                    "never removed (records and keyed ordering live in them)"
                )
            if total == current:
                raise InvalidPartitions(f"topic {name!r} already has {current} partitions")
            grown = dataclasses.replace(topic, partitions=list(topic.partitions))
            try:
                for p in range(current, total):
                    grown.partitions.append(self._open_new_partition(topic, p))
                self._write_meta(grown)
            except BaseException as exc:
                self._discard_new_partitions(grown, current, total)
                if isinstance(exc, OSError):
                    raise _storage_error(f"add partitions to topic {name!r}", exc) from exc
                raise
            topic.partitions = grown.partitions
        return self.describe_topic(name)

    def alter_config(
        self, name: str, set_: Mapping[str, object] | None = None, delete: Sequence[str] = ()
    ) -> TopicDescription:
        """Set and/or reset (to the default) config keys of a topic, validated as a whole."""
        with self._admin_lock:
            topic = self._topic(name)
            cfg = topic.config.updated(dict(set_ or {}), tuple(delete))
            contiguous = topic.contiguous and not cfg.compact
            try:  # on disk first: a refused write leaves the topic as it was
                self._write_meta(dataclasses.replace(topic, config=cfg, contiguous=contiguous))
            except OSError as exc:
                raise _storage_error(f"change the config of topic {name!r}", exc) from exc
            topic.config = cfg
            topic.contiguous = contiguous
            for plog in topic.partitions:
                plog.config = cfg
                plog.contiguous = topic.contiguous
        return self.describe_topic(name)

    def list_topics(self, include_internal: bool = True) -> list[str]:
        names = sorted(self._topics)
        return names if include_internal else [n for n in names if not is_internal(n)]

    def describe_topic(self, name: str) -> TopicDescription:
        topic = self._topic(name)
        return TopicDescription(
            name=topic.name,
            topic_id=topic.topic_id,
            internal=is_internal(topic.name),
            config=topic.config.as_dict(),
            overrides=dict(topic.config.overrides),
            partitions=[_describe_partition(p) for p in topic.partitions],
            created_ms=topic.created_ms,
        )

    def has_topic(self, name: str) -> bool:
        return name in self._topics

    def partition_count(self, name: str) -> int:
        return len(self._topic(name).partitions)

    def topic_id(self, name: str) -> str:
        """The topic's id (KIP-516), 32 hex digits; UnknownTopic if there is no such topic."""
        return self._topic(name).topic_id

    def topic_name(self, topic_id: str) -> str:
        """The name of the topic with this id (32 hex digits, any case); UnknownTopicId if
        none has it (the topic was deleted, perhaps re-created under a new id)."""
        if self._closed:
            raise StoreClosed(f"the log store at {self.path} is closed")
        name = self._names_by_id.get(topic_id.lower())
        if name is None:
            raise UnknownTopicId(topic_id)
        return name

    # ================================================================== records

    def append(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> AppendResult:
        """Append one record; returns where it landed once it is durable (per flush policy)."""
        return self.append_batch(
            topic, [ProducerRecord(value, key, tuple(headers), timestamp_ms)], partition
        )[0]

    def append_batch(
        self,
        topic: str,
        records: Iterable[ProducerRecord | tuple],
        partition: int | None = None,
    ) -> AppendResults:
        """Append records, one batch per partition. Keyed records go to murmur2(key) % n;
        unkeyed ones all go to one partition, which moves on with each call (sticky).
        Returns where each record landed, in input order, once durable per the flush policy."""
        t = self._topic(topic)
        recs = _as_records(records)
        n = len(t.partitions)
        if partition is not None and not 0 <= partition < n:
            raise UnknownPartition(topic, partition, n)
        results = AppendResults(topic, len(recs))
        if partition is None and all(r[1] is None for r in recs):
            partition = t.sticky.next_partition(n)
        elif partition is None and n == 1:
            partition = 0  # nothing to choose: where every keyed and unkeyed record goes
        if partition is not None:
            self._append_group(t.partitions[partition], recs, None, results)
            return results
        groups: dict[int, list[int]] = {}
        sticky = None
        for i, r in enumerate(recs):
            if r[1] is not None:
                p = partition_for_key(r[1], n)
            else:
                if sticky is None:
                    sticky = t.sticky.next_partition(n)
                p = sticky
            groups.setdefault(p, []).append(i)
        for p, idxs in groups.items():
            self._append_group(t.partitions[p], [recs[i] for i in idxs], idxs, results)
        return results

    def _append_group(self, plog: PartitionLog, recs, idxs, results: AppendResults) -> None:
        """Append as one batch; a batch over max.message.bytes is split in halves."""
        try:
            base, now = plog.append(recs)
        except RecordTooLarge:
            if len(recs) == 1:
                raise
            half = len(recs) // 2
            self._append_group(plog, recs[:half], (idxs or range(len(recs)))[:half], results)
            self._append_group(plog, recs[half:], list(idxs or range(len(recs)))[half:], results)
            return
        # the timestamps are read from the records on access (``recs`` is this call's own
        # list, never changed after): no pass over them here
        stamped = None if plog.config.log_append_time else recs
        results.add_run(
            list(idxs) if idxs is not None else None, plog.partition, base, now, stamped
        )

    def append_runs(self, topic: str, partition: int | None, runs: Iterable[list]) -> None:
        """Append each run of records (as ``append_batch`` takes them) to one partition as a
        batch of its own, in order (a batch over max.message.bytes split in halves, as
        ``append_batch`` splits it), and wait for the disk once, after the last, as the flush
        policy wants: under ``flush.messages=1`` one fdatasync for them all (a job's
        checkpoint: its outputs, cut into runs), where a call of ``append_batch`` per run
        waits for one each. Readers see the runs once they are on disk, as always.
        `partition` None: the records' keys choose, as ``append_batch`` lets them (one
        partition: that one; several: a call of ``append_batch`` per run)."""
        t = self._topic(topic)
        if partition is None and len(t.partitions) == 1:
            partition = 0
        if partition is None:
            for run in runs:
                self.append_batch(topic, run)
            return
        if not 0 <= partition < len(t.partitions):
            raise UnknownPartition(topic, partition, len(t.partitions))
        plog = t.partitions[partition]
        sync_to = 0
        for run in runs:
            sync_to = max(sync_to, self._append_unsynced(plog, _as_records(run)))
        if sync_to:
            plog.sync_to(sync_to)

    def _append_unsynced(self, plog: PartitionLog, recs: list) -> int:
        """``_append_group`` without waiting for the disk: the offset to ``sync_to`` for
        these records (0: none needed)."""
        try:
            appended = plog.append_unsynced(recs)
        except RecordTooLarge:
            if len(recs) <= 1:
                raise
            half = len(recs) // 2
            return max(
                self._append_unsynced(plog, recs[:half]), self._append_unsynced(plog, recs[half:])
            )
        return appended.sync_to or 0

    def append_raw(self, topic: str, partition: int, batch: bytes) -> tuple[int, int, int]:
        """Store a client's v2 record batch as received (see ``PartitionLog.append_raw``)."""
        return self.partition_log(topic, partition).append_raw(batch)

    # ================================================================== Kafka clients' path

    def produce(
        self,
        topic: str,
        partition: int,
        data: bytes,
        verify_txn: Callable[[str, int, rb.BatchHeader], None] | None = None,
    ) -> Appended:
        """A Kafka client's record set for one partition, validated, deduplicated against the
        partition's producer state and written (``PartitionLog.append_record_set``), without
        waiting for the disk: call `sync_to(topic, partition, result.sync_to)` (any thread)
        before acknowledging it. `verify_txn(topic, partition, header)` may refuse a
        transactional batch (the transaction coordinator's check)."""
        plog = self.partition_log(topic, partition)
        if verify_txn is None:
            return plog.append_record_set(data)
        return plog.append_record_set(data, lambda h: verify_txn(topic, partition, h))

    def append_unsynced(
        self, topic: str, partition: int, records: Sequence[ProducerRecord]
    ) -> Appended:
        """Records the broker writes itself (a coordinator's state), as one batch, without
        waiting for the disk (``PartitionLog.append_unsynced``): call `sync_to(topic,
        partition, result.sync_to)` before relying on them."""
        return self.partition_log(topic, partition).append_unsynced(records)

    def sync_to(self, topic: str, partition: int, end: int) -> None:
        """Return once every offset below `end` of the partition is on disk (group commit);
        StorageError if the disk failed (the partition is offline then)."""
        self.partition_log(topic, partition).sync_to(end)

    def write_marker(
        self, topic: str, partition: int, producer_id: int, epoch: int, commit: bool
    ) -> int:
        """A COMMIT or ABORT marker of the producer's transaction, on disk when this returns
        under the default flush policy (``PartitionLog.write_marker``); its offset."""
        return self.partition_log(topic, partition).write_marker(producer_id, epoch, commit)

    def write_markers(
        self, partitions, producer_id: int, epoch: int, commit: bool
    ) -> list[tuple[str, int]]:
        """COMMIT or ABORT markers of the producer's transaction into each of `partitions`,
        on disk when this returns under the default flush policy (``append_markers`` then
        ``sync_markers``). Returns the partitions that no longer exist (nothing is written to
        those)."""
        markers, gone = self.append_markers(partitions, producer_id, epoch, commit)
        self.sync_markers(markers, commit)
        return gone

    def append_markers(
        self, partitions, producer_id: int, epoch: int, commit: bool
    ) -> tuple[list[tuple[str, int, int]], list[tuple[str, int]]]:
        """Append COMMIT or ABORT markers of the producer's transaction to each of
        `partitions` without waiting for the disk (each partition's last stable offset moves
        at once). Returns ((topic, partition, marker offset) of each, the partitions that no
        longer exist); ``sync_markers`` them before relying on them."""
        gone: list[tuple[str, int]] = []
        markers = []
        for topic, partition in partitions:
            try:
                plog = self.partition_log(topic, partition)
            except (UnknownTopic, UnknownPartition):
                gone.append((topic, partition))
                continue
            markers.append((topic, partition, plog.append_marker(producer_id, epoch, commit)))
        return markers, gone

    def sync_markers(self, markers: list[tuple[str, int, int]], commit: bool) -> None:
        """Return once the markers ``append_markers`` wrote are on disk as each partition's
        flush policy wants (under ``flush.messages=1``, group commit: one fdatasync per
        partition, shared with whatever else was written there), with an abort's
        aborted-index entries."""
        for topic, partition, offset in markers:
            self.partition_log(topic, partition).sync_marker(offset, commit)

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before by this data directory (blocking: may wait
        for an fsync)."""
        return self._producer_ids.allocate()

    def describe_producers(self, topic: str, partition: int) -> list[ProducerDescription]:
        """The idempotent and transactional producers the partition remembers, each with the
        first offset of its open transaction there (-1: none)."""
        plog = self.partition_log(topic, partition)
        return plog.producers.describe(dict(plog.txns.open))

    def check_partition(self, topic: str, partition: int) -> None:
        """UnknownTopic or UnknownPartition unless the partition exists."""
        self.partition_log(topic, partition)

    def fetch(
        self, topic: str, partition: int, offset: int, max_bytes: int, committed: bool = False
    ) -> FetchedData:
        """Whole raw batches from `offset` for a Kafka Fetch: at most `max_bytes` (at least
        one batch), up to the high watermark, or with `committed` (read_committed) up to the
        last stable offset with the aborted transactions in range. OffsetOutOfRange outside
        [log start, high watermark]; LogDamaged at a damaged offset."""
        plog = self.partition_log(topic, partition)
        lso = plog.last_stable_offset  # before the high watermark: it never passes it
        hw = plog.high_watermark
        start = plog.log_start_offset
        if not start <= offset <= hw:
            raise OffsetOutOfRange(topic, partition, offset, start, hw)
        end = lso if committed else hw
        data = b""
        if offset < end and max_bytes > 0:
            data = plog.read_batches(offset, max_bytes, until=end)
        read_to = _next_offset(data, offset)
        aborted = plog.txns.aborted_in(offset, read_to) if committed and data else []
        return FetchedData(data, read_to, hw, lso, start, aborted)

    def list_offset(
        self, topic: str, partition: int, timestamp: int, committed: bool = False
    ) -> tuple[int, int]:
        """Kafka's ListOffsets for one partition: (offset, its record's timestamp or -1).
        `timestamp` -1 is the latest offset (the high watermark, or with `committed` the last
        stable offset), -2 the earliest (the log start), -3 the record with the largest
        timestamp; else the first record at or after it. (-1, -1) when there is none."""
        plog = self.partition_log(topic, partition)
        if timestamp == LATEST_TIMESTAMP:
            return plog.last_stable_offset if committed else plog.high_watermark, -1
        if timestamp == EARLIEST_TIMESTAMP:
            return plog.log_start_offset, -1
        if timestamp == MAX_TIMESTAMP:
            timestamp = max((s.max_timestamp for s in plog.segments), default=-1)
            if timestamp < 0:
                return -1, -1
        found = plog.offset_for_timestamp(timestamp)
        if found is None:
            return -1, -1
        records = plog.read(found, max_records=1)
        return found, records[0].timestamp_ms if records else timestamp

    def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_records: int = 500,
        max_bytes: int = 1 << 20,
        committed: bool = False,
    ) -> list[Record]:
        """Records from `offset`; OffsetOutOfRange (with both bounds) outside [start, end].
        `committed`: read_committed (up to the last stable offset, no aborted records)."""
        plog = self.partition_log(topic, partition)
        return plog.read(offset, max_records, max_bytes, committed)

    def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int) -> bytes:
        return self.partition_log(topic, partition).read_batches(offset, max_bytes)

    def batch_headers(
        self, topic: str, partition: int, offset: int, until: int, max_batches: int
    ) -> list[rb.BatchHeader]:
        """``PartitionLog.batch_headers``: the headers of the batches holding [offset, until),
        with no record read."""
        return self.partition_log(topic, partition).batch_headers(offset, until, max_batches)

    def offsets(self, topic: str, partition: int, committed: bool = False) -> tuple[int, int]:
        """(earliest, latest): the log start offset and the high watermark (`committed`: the
        last stable offset, where read_committed readers stop)."""
        plog = self.partition_log(topic, partition)
        latest = plog.last_stable_offset if committed else plog.high_watermark
        return plog.log_start_offset, latest

    def offset_for_timestamp(self, topic: str, partition: int, timestamp_ms: int) -> int | None:
        """First offset whose timestamp is >= `timestamp_ms`, or None when there is none."""
        return self.partition_log(topic, partition).offset_for_timestamp(timestamp_ms)

    def delete_records(self, topic: str, before: Mapping[int, int]) -> dict[int, int]:
        """Kafka's DeleteRecords: per partition, make `offset` the new log start (-1 = end).
        Returns the new log start offsets."""
        t = self._topic(topic)
        for p in before:
            if not 0 <= p < len(t.partitions):
                raise UnknownPartition(topic, p, len(t.partitions))
        self._check_own_dir()
        return {p: t.partitions[p].delete_records(off) for p, off in before.items()}

    # ================================================================== maintenance

    def all_partitions(self) -> list[PartitionLog]:
        return [p for t in list(self._topics.values()) for p in t.partitions]

    def apply_retention(self, now: int | None = None) -> int:
        """Delete segments past retention in every partition now; returns how many."""
        now = self.clock() if now is None else now
        self._check_own_dir()
        return sum(p.apply_retention(now) for p in self.all_partitions())

    def compact(self, now: int | None = None, force: bool = False) -> int:
        """Run the cleaner over compacted topics now; returns the partitions cleaned."""
        from streams.log.cleaner import Cleaner

        now = self.clock() if now is None else now
        self._check_own_dir()
        cleaner = Cleaner(self.cleaner_offsets)
        cleaned = 0
        for plog in self.all_partitions():
            if plog.config.compact and cleaner.clean(plog, now, force=force):
                cleaned += 1
        return cleaned


def _describe_partition(p: PartitionLog) -> PartitionDescription:
    segs = p.segments
    return PartitionDescription(
        partition=p.partition,
        log_start_offset=p.log_start_offset,
        end_offset=p.high_watermark,
        log_end_offset=p.log_end_offset,
        size_bytes=sum(s.size for s in segs),
        segment_count=len(segs),
        last_append_ms=p.last_append_ms if p.last_append_ms is not None else _last_ts(segs),
        damaged=p.damaged,
    )


def _next_offset(data: bytes, offset: int) -> int:
    """The offset after the last whole batch of `data` (`offset` when there is none)."""
    pos, end = 0, offset
    while pos + rb.HEADER_SIZE <= len(data):
        h = rb.parse_header(data, pos)
        if pos + h.size > len(data):
            break
        end, pos = h.next_offset, pos + h.size
    return end


def _last_ts(segs) -> int | None:
    ts = max((s.max_timestamp for s in segs), default=-1)
    return ts if ts >= 0 else None


def _storage_error(action: str, exc: OSError) -> StorageError:
    where = f" ({exc.filename})" if exc.filename else ""
    return StorageError(f"could not {action}: {exc.strerror or exc}{where}", exc.errno)


def _remove_partition_dir(plog: PartitionLog, topic_id: str) -> None:
    """Close a deleted topic's partition and remove its directory: renamed first, as Kafka does
    (``<topic, cut to fit>-<partition>.<topic id>-delete``), so a crash midway leaves a name
    the next open removes, never a directory that looks like a live partition."""
    try:
        plog.close()
    except OSError as exc:
        log.warning("%s: closing a deleted partition: %s", plog.directory, exc)
    suffix = f"-{plog.partition}.{topic_id}-delete"
    doomed = os.path.join(
        os.path.dirname(plog.directory), plog.topic[: NAME_MAX - len(suffix)] + suffix
    )
    try:
        os.rename(plog.directory, doomed)
    except OSError as exc:
        log.warning("%s: could not rename it for deletion (%s); removing it in place", doomed, exc)
        doomed = plog.directory
    shutil.rmtree(doomed, ignore_errors=True)


def _new_topic_id() -> str:
    return uuid.uuid4().hex  # version 4: never the all-zero id, which means "no id" on the wire


def _valid_topic_id(value: object) -> str | None:
    """`value` as a topic id (32 lowercase hex digits, not all zero), or None."""
    if not isinstance(value, str):
        return None
    try:
        parsed = uuid.UUID(hex=value)
    except ValueError:
        return None
    return parsed.hex if parsed.int else None


def _check_partition_count(n: int) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_PARTITIONS:
        raise InvalidPartitions(
            f"partition count must be between 1 and {MAX_PARTITIONS}, got {n!r}"
        )
