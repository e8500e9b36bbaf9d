"""The transaction coordinator: Kafka's ``TransactionCoordinator`` for one node (KIP-98).

Per transactional id it keeps the producer id and epoch, the state and the partitions and
consumer-group offsets of the ongoing transaction. States (Kafka's ``TransactionState``)::

    Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn--> PrepareCommit | PrepareAbort
    PrepareCommit --markers written, offsets committed--> CompleteCommit
    PrepareAbort --markers written--> CompleteAbort
    Complete* --AddPartitions--> Ongoing;  any --InitProducerId--> Empty (epoch + 1)

Every transition is written to the compacted topic ``__transaction_state`` (key: Kafka's
``TransactionLogKey`` v0, the transactional id; value: JSON, see ``_encode``), so a coordinator
restarted after a crash (``load``) finishes what it had started as Kafka's does: a
PrepareCommit is completed (markers written again, the offsets committed), a PrepareAbort
aborted; an Ongoing transaction stays open and is aborted by the transaction timeout (its start
time is in the record) unless its producer ends it first.

What is on disk before the coordinator answers or acts (each fsync is a group commit with
whatever else was written to that log):

- Empty (InitProducerId), the offsets of TxnOffsetCommit, and PrepareCommit/PrepareAbort:
  fsynced before the answer. The Prepare* record is the commit point: EndTxn is answered once
  it is durable.
- Ongoing from AddPartitionsToTxn: not fsynced before its answer; a transactional produce to
  the partition is acknowledged only once it is (``sync_state``: the listener runs it beside
  the partition's fdatasync). A crash of the machine between the two fsyncs can leave records
  in a partition whose AddPartitionsToTxn was lost: never acknowledged, never committed, and
  aborted at the next load (``_abort_hanging``, Kafka's hanging transactions).
- The markers and a commit's offsets: written after EndTxn's answer by the completer thread
  (all markers appended, then each partition synced, beside the offsets' fsync), then the
  Complete* record, with no fsync of its own: a later fsync of ``__transaction_state`` (the
  next state write or the timer thread's turn) covers it, and a crash before that replays
  Prepare*, whose completion is written again. A partition's last stable offset moves when
  its marker is appended; the transactional id's next request (AddPartitionsToTxn,
  AddOffsetsToTxn, TxnOffsetCommit, InitProducerId, a retried EndTxn) waits for the markers,
  up to ``COMPLETION_WAIT_S``, then is answered CONCURRENT_TRANSACTIONS and retried by the
  client, as Kafka's coordinator answers it. A next transaction thus never writes behind a
  missing marker.
- All of the above is under the default flush policy (``flush.messages=1``). A store opened
  with a relaxed one (``LogStore.open(topic_defaults=KAFKA_FLUSH_DEFAULTS)``, Kafka's default)
  fsyncs none of it before answering: state records, markers and a commit's offsets reach the
  page cache in the same order, so a crash of the process loses nothing, and the disk within
  ``flush.ms``, so a power loss can lose the last transactions, as on a Kafka broker. The
  listener's EndTxn is then answered on its event loop at PrepareCommit, and the markers and
  offsets are written there right after the answer (``end_txn``'s `complete_soon`), with the
  same rule for the id's next request.
- AddOffsetsToTxn's Ongoing record is not fsynced on its own: the group only matters through
  TxnOffsetCommit, whose fsynced record carries it (if a crash loses it, TxnOffsetCommit is
  refused and the client aborts).

- ``InitProducerId`` bumps the epoch every time, fencing the older instance: its next request
  gets PRODUCER_FENCED (INVALID_PRODUCER_EPOCH on old request versions; produce always
  INVALID_PRODUCER_EPOCH). An ongoing transaction of the old instance is aborted first, with
  the epoch bumped once for the abort markers and once more for the new instance (Kafka's
  PrepareEpochFence, then the client's retry). An exhausted epoch gets a new producer id.
- Consumer offsets sent in a transaction (``TxnOffsetCommit``) are kept with the transaction
  (in its state record) and written to ``__consumer_offsets`` only when it commits: a reader of
  the group's offsets never sees them before, nor ever if it aborts.
- A transactional produce is written only if its partition was added to the ongoing
  transaction of that producer id and epoch (``verify_produce``, KIP-890 part 1), so a late
  write of a finished transaction cannot open a transaction nobody will end.
- KIP-890 part 2 (epoch bump at the end of every transaction): done for EndTxn v5, whose
  response carries the new epoch; older EndTxn versions keep the epoch (their clients would be
  fenced by a bump they are not told of). kafka-python 3.0 (EndTxn v3), aiokafka 0.14 (v0) and
  librdkafka 2.16 do not send v5.
- The transaction timeout (``transaction.timeout.ms`` of the producer, at most
  ``MAX_TIMEOUT_MS``) aborts a transaction left open, bumping the epoch (``tick``).

Thread-safety: one lock guards all state and is held while state records are written, and
while markers are written except by the completer thread (blocking: call from a worker thread,
never an event loop). The completer holds a decided transaction alone: every request of its
transactional id waits for it, and the timer thread skips it. ``verify_produce`` takes no
lock: it reads a dict replaced entry by entry, and the log calls it under the partition's write
lock; the entry is removed when the transaction is decided, before its Prepare* record and
markers are written, so a produce cannot slip in after its transaction's marker.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import enum
import functools
import json
import logging
import queue
import struct
import threading
from collections.abc import Callable

import orjson

from streams.errors import (
    ConcurrentTransactions,
    InvalidProducerIdMapping,
    InvalidTransactionTimeout,
    InvalidTxnState,
    ProducerFenced,
    TidelogError,
    TransactionalProducerFenced,
    UnknownTransactionalId,
)
from streams.log import LogStore, ProducerRecord
from streams.log.records import BatchHeader  # the type of what ``verify_produce`` is given

log = logging.getLogger(__name__)

TXN_STATE_TOPIC = "__transaction_state"
TXN_STATE_CONFIG = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}
MAX_TIMEOUT_MS = 15 * 60 * 1000  # Kafka's transaction.max.timeout.ms
MAX_EPOCH = 32767
# how long a request of a transactional id whose markers are being written waits for them
# before answering CONCURRENT_TRANSACTIONS (the client retries then, as Kafka's clients do)
COMPLETION_WAIT_S = 1.0
_KEY_VERSION = struct.Struct(">hh")

TopicPartition = tuple[str, int]


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[TopicPartition] = dataclasses.field(default_factory=set)
    # group -> (topic, partition) -> (offset, metadata): committed with the transaction
    offsets: dict[str, dict[TopicPartition, tuple[int, str]]] = dataclasses.field(
        default_factory=dict
    )
    start_ms: int = -1
    update_ms: int = -1


@dataclasses.dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int
    partitions: tuple[TopicPartition, ...]
    groups: tuple[str, ...]


class GroupOffsets:
    """What the coordinator needs of the group coordinator (a typing seam)."""

    def commit_transactional_offsets(
        self, group_id: str, offsets: dict[TopicPartition, tuple[int, str]], durable: bool = True
    ) -> None: ...

    def held_if_commits_unsynced(
        self, commits: dict[str, int]
    ) -> contextlib.AbstractContextManager[bool]: ...


class TransactionCoordinator:
    def __init__(
        self,
        store: LogStore,
        groups: GroupOffsets | None,
        allocate_id: Callable[[], int],
        *,
        clock: Callable[[], int] | None = None,
        abort_check_interval_s: float = 1.0,
    ):
        self.store = store
        self.groups = groups
        self.allocate_id = allocate_id
        self.clock = clock or store.clock
        self.abort_check_interval_s = abort_check_interval_s
        self._lock = threading.RLock()
        self._done = threading.Condition(self._lock)  # a completion finished (or failed)
        self._txns: dict[str, TxnMetadata] = {}
        # transactional ids whose markers the completer thread has yet to write
        self._completing: set[str] = set()
        self._queue: queue.SimpleQueue[TxnMetadata | None] = queue.SimpleQueue()
        self._completer: threading.Thread | None = None
        self._completer_lock = threading.Lock()  # starts it once (``_to_completer``)
        self._state_end = 0  # the end offset of what was appended to __transaction_state
        # syncs a commit's markers while the completer commits its offsets (``_complete``)
        self._sync_pool: concurrent.futures.ThreadPoolExecutor | None = None
        # producer id -> (epoch, partitions) of its ongoing transaction (see verify_produce)
        self._ongoing: dict[int, tuple[int, frozenset[TopicPartition]]] = {}
        self._epochs: dict[int, int] = {}  # producer id of a transactional id -> its epoch
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ================================================================== lifecycle

    def load(self) -> TransactionCoordinator:
        """Create ``__transaction_state`` if needed, replay it, and finish every transaction a
        crash left in PrepareCommit or PrepareAbort."""
        topic = TXN_STATE_TOPIC
        if topic not in self.store.list_topics():
            self.store.create_topic(topic, 1, TXN_STATE_CONFIG)
        start, end = self.store.offsets(topic, 0)
        offset = start
        while offset < end:
            batch = self.store.read(topic, 0, offset, max_records=10_000, max_bytes=8 << 20)
            if not batch:
                break
            for rec in batch:
                if rec.key is None:
                    continue
                txn_id = _decode_key(rec.key)
                if rec.value is None:
                    self._txns.pop(txn_id, None)
                else:
                    self._txns[txn_id] = _decode(txn_id, rec.value)
            offset = batch[-1].offset + 1
        with self._lock:
            for meta in self._txns.values():
                self._epochs[meta.producer_id] = meta.producer_epoch
                if meta.state == TxnState.ONGOING:
                    self._ongoing[meta.producer_id] = (
                        meta.producer_epoch,
                        frozenset(meta.partitions),
                    )
            unfinished = [
                m
                for m in self._txns.values()
                if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
            ]
            for meta in unfinished:
                log.warning(
                    "transaction %s (producer %d epoch %d) was in %s when the coordinator "
                    "stopped: completing it",
                    meta.transactional_id,
                    meta.producer_id,
                    meta.producer_epoch,
                    meta.state,
                )
                self._try_complete(meta)
            self._abort_hanging()
        log.info("loaded %d transactional ids from %s", len(self._txns), topic)
        return self

    def _abort_hanging(self) -> None:
        """Abort every transaction open in a partition that no ongoing transaction of the
        coordinator holds (Kafka's hanging transactions; lock held, at load). Its records got
        there while their AddPartitionsToTxn record was not on disk yet, and a crash (of the
        machine: a process crash keeps both in the page cache) lost the record: no produce of
        them was acknowledged then (``sync_state``), and no commit can have been decided
        (PrepareCommit follows in the same log), so aborting is the only outcome. Without it
        the partition's last stable offset would stay behind them for good."""
        # a Prepare* transaction whose markers could not be written yet (``_try_complete``
        # failed) still holds its partitions: they are completed as decided, never aborted
        holding = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
        ongoing = {m.producer_id: m for m in self._txns.values() if m.state in holding}
        for topic in self.store.list_topics():
            for partition in range(self.store.partition_count(topic)):
                for p in self.store.describe_producers(topic, partition):
                    if p.current_txn_start_offset < 0:
                        continue
                    meta = ongoing.get(p.producer_id)
                    if meta is not None and (topic, partition) in meta.partitions:
                        continue
                    epoch = max(p.epoch, self._epochs.get(p.producer_id, -1))
                    log.warning(
                        "%s-%d: the transaction of producer %d epoch %d open from offset %d "
                        "is in no ongoing transaction (its AddPartitionsToTxn was lost in a "
                        "crash): aborting it",
                        topic, partition, p.producer_id, p.epoch, p.current_txn_start_offset,
                    )  # fmt: skip
                    self.store.write_markers([(topic, partition)], p.producer_id, epoch, False)

    def start(self) -> TransactionCoordinator:
        """Start the thread that aborts transactions past their timeout."""
        self._thread = threading.Thread(target=self._run, name="tidelog-txn-timeouts", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.abort_check_interval_s):
            try:
                self.abort_timed_out(self.clock())
                self._sync_state()  # Complete* records the completer left unsynced
            except Exception:  # noqa: BLE001 - try again next turn
                log.exception("aborting timed-out transactions failed")

    def close(self) -> None:
        """Stop the timeout thread and the completer, after the completions already decided
        (a transaction whose PrepareCommit was answered has its markers written first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._completer_lock:
            completer, self._completer = self._completer, None
        if completer is not None:
            self._queue.put(None)
            completer.join()
        with self._lock:  # completions an event loop was to do but never got to
            for txn_id in list(self._completing):
                meta = self._txns.get(txn_id)
                if meta is not None:
                    self._try_complete(meta)
                self._completing.discard(txn_id)
        if self._sync_pool is not None:
            self._sync_pool.shutdown()

    # ================================================================== requests

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[int, int]:
        """InitProducerId with a transactional id: (producer id, epoch), the epoch one higher
        than any instance had, so older instances are fenced. `producer_id`/`producer_epoch`
        (v3+, KIP-360): the caller's current ones, which must be this id's."""
        if not transactional_id:
            raise InvalidTxnState("the transactional id must not be empty")
        if not 0 < timeout_ms <= MAX_TIMEOUT_MS:
            raise InvalidTransactionTimeout(
                f"transaction timeout {timeout_ms} ms is not within 1..{MAX_TIMEOUT_MS} ms"
            )
        with self._lock:
            self._await_completion(transactional_id)
            now = self.clock()
            meta = self._txns.get(transactional_id)
            if meta is None:
                meta = TxnMetadata(transactional_id, self.allocate_id(), -1, timeout_ms)
            elif producer_id >= 0 and (
                producer_id != meta.producer_id or producer_epoch != meta.producer_epoch
            ):
                raise TransactionalProducerFenced(
                    f"transactional id {transactional_id!r} is now producer {meta.producer_id} "
                    f"epoch {meta.producer_epoch}, not {producer_id} epoch {producer_epoch}"
                )
            elif meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._complete(meta)  # finished here rather than answering "retry"
            elif meta.state == TxnState.ONGOING:
                # fence the older instance and abort its transaction (PrepareEpochFence)
                self._bump_epoch(meta)
                self._end(meta, commit=False, now=now)
            self._bump_epoch(meta)
            meta.timeout_ms = timeout_ms
            meta.state = TxnState.EMPTY
            meta.partitions = set()
            meta.offsets = {}
            meta.start_ms = -1
            meta.update_ms = now
            self._persist(meta)
            self._txns[transactional_id] = meta
            log.info(
                "transactional id %s: producer %d epoch %d",
                transactional_id,
                meta.producer_id,
                meta.producer_epoch,
            )
            return meta.producer_id, meta.producer_epoch

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions
    ) -> None:
        """AddPartitionsToTxn: the partitions take part in the ongoing transaction (which
        starts here if none is ongoing)."""
        with self._lock:
            meta = self._checked(transactional_id, producer_id, epoch)
            if meta.state == TxnState.ONGOING and meta.partitions.issuperset(partitions):
                return
            self._begin(meta)
            meta.partitions |= set(partitions)
            # no fsync of its own: a transactional produce is acknowledged only once the
            # state log is on disk too (``sync_state``, beside the partition's fdatasync), and
            # records a crash left in a partition its transaction never durably added are
            # aborted at the next load (``_abort_hanging``)
            self._persist(meta, durable=False)
            self._ongoing[meta.producer_id] = (meta.producer_epoch, frozenset(meta.partitions))

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> None:
        """AddOffsetsToTxn: the group's offsets will be committed with the transaction."""
        with self._lock:
            meta = self._checked(transactional_id, producer_id, epoch)
            if meta.state == TxnState.ONGOING and group in meta.offsets:
                return
            self._begin(meta)
            meta.offsets.setdefault(group, {})
            # no fsync of its own: the group matters only through TxnOffsetCommit, whose
            # (fsynced) record carries it; a crash before that loses it and TxnOffsetCommit
            # is refused (INVALID_TXN_STATE), so the client aborts, never commits without it
            self._persist(meta, durable=False)
            self._ongoing[meta.producer_id] = (meta.producer_epoch, frozenset(meta.partitions))

    def txn_offset_commit(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        group: str,
        offsets: dict[TopicPartition, tuple[int, str]],
    ) -> None:
        """TxnOffsetCommit: stage the offsets; they reach ``__consumer_offsets`` at commit."""
        with self._lock:
            meta = self._checked(transactional_id, producer_id, epoch)
            if meta.state != TxnState.ONGOING or group not in meta.offsets:
                raise InvalidTxnState(
                    f"group {group!r} was not added to the ongoing transaction of "
                    f"{transactional_id!r} (AddOffsetsToTxn first)"
                )
            meta.offsets[group].update(offsets)
            meta.update_ms = self.clock()
            self._persist(meta)

    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        commit: bool,
        bump_epoch: bool = False,
        *,
        wait_for_markers: bool = True,
        complete_soon: Callable[[Callable[[], None]], None] | None = None,
    ) -> tuple[int, int]:
        """EndTxn: commit or abort the ongoing transaction; returns (producer id, epoch),
        the epoch bumped when `bump_epoch` (EndTxn v5, KIP-890).

        The decision (PrepareCommit or PrepareAbort) is on disk when this returns: that is
        the commit point. With `wait_for_markers` the markers (and a commit's offsets) are
        written and the transaction is Complete before it returns too; without (the
        listener's EndTxn, as Kafka answers it), the completer thread writes them after, and
        the transactional id's next request waits for that (``_checked``). Under a relaxed
        flush policy nothing waits for the disk and they are written here, or, given
        `complete_soon` (an event loop's caller inside ``held_if_unblocked``: it schedules
        the callable it is given, e.g. after the answer is written), by that callable
        (``_complete_soon``), which the id's next request waits for likewise."""
        with self._lock:
            self._await_completion(transactional_id)  # a retry: answered by its outcome
            meta = self._checked(transactional_id, producer_id, epoch, prepared_ok=True)
            done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            if meta.state == done and not bump_epoch:
                return meta.producer_id, meta.producer_epoch  # a retry of what was done
            prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            if meta.state == prepared:  # a retry after the markers failed: try again
                self._complete(meta)
                return meta.producer_id, meta.producer_epoch
            if meta.state != TxnState.ONGOING:
                verb = "commit" if commit else "abort"
                raise InvalidTxnState(
                    f"cannot {verb} transaction {transactional_id!r}: it is {meta.state}"
                )
            if bump_epoch:
                self._bump_epoch(meta)
            self._end(meta, commit, self.clock(), wait_for_markers, complete_soon)
            return meta.producer_id, meta.producer_epoch

    def abort_if_current(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        start_ms: int | None = None,
    ) -> TransactionDescription:
        """An operator's abort (``kafka-transactions.sh --abort``), checked and done under the
        coordinator's lock: the ongoing transaction of `transactional_id` is aborted only if it
        is still producer `producer_id` at `producer_epoch` (and, given `start_ms`, still the
        transaction that started then, not a later one of the same epoch). Its ABORT markers
        are written, its offsets dropped and the epoch bumped, so its producer is fenced, as
        the transaction timeout does. Otherwise InvalidTxnState (UnknownTransactionalId for an
        id the coordinator does not know) and nothing changes. Returns the transaction as it
        was before the abort."""
        with self._lock:
            meta = self._txns.get(transactional_id)
            if meta is None:
                raise UnknownTransactionalId(transactional_id)
            before = _describe(meta)
            if meta.state != TxnState.ONGOING:
                raise InvalidTxnState(
                    f"transaction {transactional_id!r} is {meta.state}, not Ongoing: "
                    "there is nothing to abort"
                )
            if (meta.producer_id, meta.producer_epoch) != (producer_id, producer_epoch):
                raise InvalidTxnState(
                    f"transaction {transactional_id!r} is now producer {meta.producer_id} epoch "
                    f"{meta.producer_epoch}, not producer {producer_id} epoch {producer_epoch} "
                    "as shown: look at it again before aborting"
                )
            if start_ms is not None and meta.start_ms != start_ms:
                raise InvalidTxnState(
                    f"transaction {transactional_id!r} shown was started at {start_ms} ms; the "
                    f"ongoing one started at {meta.start_ms} ms: look at it again before aborting"
                )
            self._bump_epoch(meta)
            self._end(meta, commit=False, now=self.clock())
            return before

    @contextlib.contextmanager
    def held_if_unblocked(self, transactional_id: str, commit: bool | None = None):
        """Hold the coordinator's lock, yielding True, if a request of `transactional_id` can
        be answered on the caller's thread (an event loop) without waiting on the disk or on
        another thread: the lock is free now (never waited for), the state log is not
        fsynced per write (a relaxed flush policy, e.g. Kafka's), and no completion of the id
        is pending. For an EndTxn (`commit` given) also only a commit: an abort fdatasyncs
        the aborted index; a commit's group offsets, if it stages any, need the group
        coordinator's lock free too (a rebalance holds it over an fsync), held here as well,
        and ``__consumer_offsets`` due no fdatasync (``held_if_commits_unsynced``). Else
        yields False without the locks: call from a worker thread then. Every request method
        may run inside (the locks are reentrant)."""
        if self._state_synced_each_write() or not self._lock.acquire(blocking=False):
            yield False
            return
        try:
            with contextlib.ExitStack() as held:
                yield transactional_id not in self._completing and (
                    commit is None or (commit and self._commits_unblocked(transactional_id, held))
                )
        finally:
            self._lock.release()

    def _commits_unblocked(self, transactional_id: str, held: contextlib.ExitStack) -> bool:
        """Whether committing the id's transaction waits on nothing (lock held): no partition
        of it fsyncs each write (its own flush.messages=1), and its group offsets, if any,
        can be written at once (the group coordinator's lock, then taken into `held`)."""
        meta = self._txns.get(transactional_id)
        if meta is None:
            return True
        if any(self._synced_each_write(t, p) for t, p in meta.partitions):
            return False
        commits = {g: len(o) for g, o in meta.offsets.items() if o}
        if not commits:
            return True
        if self.groups is None:
            return True
        return held.enter_context(self.groups.held_if_commits_unsynced(commits))

    def _synced_each_write(self, topic: str, partition: int) -> bool:
        """Whether the partition is fsynced before each write is acknowledged (False if it
        is gone: nothing is written there)."""
        try:
            plog = self.store.partition_log(topic, partition)
        except TidelogError:
            return False
        return plog.config.get("flush.messages") == 1

    def verify_produce(self, topic: str, partition: int, h: BatchHeader) -> None:
        """Before a transactional batch is written (under the partition's write lock): its
        producer must have an ongoing transaction of this epoch holding this partition."""
        entry = self._ongoing.get(h.producer_id)
        if entry is None:
            current = self._epochs.get(h.producer_id)
            if current is None:
                raise InvalidProducerIdMapping(
                    f"producer {h.producer_id} has no transactional id (InitProducerId first)"
                )
            if h.producer_epoch < current:
                raise ProducerFenced(
                    f"producer {h.producer_id} epoch {h.producer_epoch} is fenced (epoch {current})"
                )
            raise InvalidTxnState(
                f"producer {h.producer_id} epoch {h.producer_epoch} has no ongoing transaction"
            )
        current, partitions = entry
        if h.producer_epoch != current:
            raise ProducerFenced(
                f"producer {h.producer_id} epoch {h.producer_epoch} is fenced (epoch {current})"
            )
        if (topic, partition) not in partitions:
            raise InvalidTxnState(
                f"{topic}-{partition} was not added to the transaction of producer "
                f"{h.producer_id} (AddPartitionsToTxn first)"
            )

    def abort_timed_out(self, now: int) -> int:
        """Abort every transaction open longer than its timeout, bumping the epoch so its
        producer is fenced; returns how many. Also retries the completion of transactions
        whose markers could not be written (a disk error)."""
        with self._lock:
            for meta in list(self._txns.values()):
                if (
                    meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
                    and meta.transactional_id not in self._completing
                ):
                    self._try_complete(meta)
            late = [
                m
                for m in self._txns.values()
                if m.state == TxnState.ONGOING and now - m.start_ms > m.timeout_ms
            ]
            for meta in late:
                log.warning(
                    "transaction %s (producer %d epoch %d) open for %d ms, longer than its "
                    "timeout of %d ms: aborting it",
                    meta.transactional_id,
                    meta.producer_id,
                    meta.producer_epoch,
                    now - meta.start_ms,
                    meta.timeout_ms,
                )
                self._bump_epoch(meta)
                self._end(meta, commit=False, now=now)
            return len(late)

    # ================================================================== reads

    def describe(self) -> list[TransactionDescription]:
        with self._lock:
            return [_describe(m) for m in self._txns.values()]

    # ================================================================== internals

    def _checked(
        self, transactional_id: str, producer_id: int, epoch: int, prepared_ok: bool = False
    ) -> TxnMetadata:
        if not prepared_ok:  # the next transaction starts only after the last one's markers
            self._await_completion(transactional_id)
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            raise InvalidProducerIdMapping(
                f"producer {producer_id} is not the producer of transactional id "
                f"{transactional_id!r}"
            )
        if epoch != meta.producer_epoch:
            raise TransactionalProducerFenced(
                f"producer {producer_id} epoch {epoch} of {transactional_id!r} is fenced: "
                f"the current epoch is {meta.producer_epoch}"
            )
        if not prepared_ok and meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise ConcurrentTransactions(f"{transactional_id!r} is completing a transaction")
        return meta

    def _await_completion(self, transactional_id: str) -> None:
        """Wait (under the lock, which the wait releases) until the completer has written the
        markers of `transactional_id`'s decided transaction, at most COMPLETION_WAIT_S; if it
        has not by then, ConcurrentTransactions (the client retries)."""
        if transactional_id not in self._completing:
            return
        if not self._done.wait_for(
            lambda: transactional_id not in self._completing, COMPLETION_WAIT_S
        ):
            raise ConcurrentTransactions(
                f"{transactional_id!r} is still writing the markers of its last transaction"
            )

    def _begin(self, meta: TxnMetadata) -> None:
        now = self.clock()
        if meta.state != TxnState.ONGOING:
            meta.state = TxnState.ONGOING
            meta.partitions = set()
            meta.offsets = {}
            meta.start_ms = now
        meta.update_ms = now

    def _bump_epoch(self, meta: TxnMetadata) -> None:
        if meta.producer_epoch >= MAX_EPOCH - 1:  # exhausted: a new producer id
            self._ongoing.pop(meta.producer_id, None)
            meta.producer_id = self.allocate_id()
            meta.producer_epoch = 0
        else:
            meta.producer_epoch += 1
        self._epochs[meta.producer_id] = meta.producer_epoch

    def _end(
        self,
        meta: TxnMetadata,
        commit: bool,
        now: int,
        wait: bool = True,
        complete_soon: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        """Decide the transaction: Prepare* on disk (the commit point: a restart finishes
        it), then its completion, here (`wait`), by `complete_soon`'s callable, or by the
        completer thread (see ``end_txn``)."""
        meta.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        meta.update_ms = now
        # no batch of this transaction is written after its decision (see verify_produce)
        self._ongoing.pop(meta.producer_id, None)
        self._persist(meta)
        if not wait and not self._state_synced_each_write() and complete_soon is not None:
            # the caller (an event loop) answers first and completes a turn later
            self._completing.add(meta.transactional_id)
            complete_soon(functools.partial(self._complete_soon, meta))
            return
        if wait or not self._state_synced_each_write():
            # under a relaxed flush policy nothing below waits for the disk: completing here
            # costs less than handing the transaction to the completer thread
            self._complete(meta)
            return
        self._completing.add(meta.transactional_id)
        self._to_completer(meta)

    def _to_completer(self, meta: TxnMetadata) -> None:
        """Queue the completion of `meta` (its id in ``_completing``) for the completer
        thread, started if need be."""
        with self._completer_lock:
            if self._completer is None:
                self._completer = threading.Thread(
                    target=self._run_completer, name="tidelog-txn-markers", daemon=True
                )
                self._completer.start()
        self._queue.put(meta)

    def _complete_soon(self, meta: TxnMetadata) -> None:
        """The completion ``end_txn`` left to its `complete_soon` (on the caller's event
        loop, with nothing to wait for): done here if it still waits on nothing (the lock
        free, a commit whose offsets need neither a busy group coordinator nor an fdatasync:
        see ``held_if_unblocked``), else handed to the completer thread. A completion the
        disk refuses stays Prepare* and is retried (the timer thread, a retried EndTxn)."""
        if not self._lock.acquire(blocking=False):
            self._to_completer(meta)  # e.g. a worker thread holds it over an fsync
            return
        try:
            if meta.transactional_id not in self._completing:
                return  # completed meanwhile (``close``)
            with contextlib.ExitStack() as held:
                if meta.state != TxnState.PREPARE_COMMIT or not self._commits_unblocked(
                    meta.transactional_id, held
                ):
                    self._to_completer(meta)
                    return
                try:
                    self._complete(meta)
                except Exception:  # noqa: BLE001 - left Prepare*, retried later
                    log.exception(
                        "transaction %s: cannot write its markers yet; retrying",
                        meta.transactional_id,
                    )
                finally:
                    self._completing.discard(meta.transactional_id)
                    self._done.notify_all()
        finally:
            self._lock.release()

    def _run_completer(self) -> None:
        """Complete decided transactions in order (markers, offsets, then Complete* without
        an fsync of its own: the next fsync of ``__transaction_state`` covers it, at the
        latest the timer thread's within ``abort_check_interval_s``). A completion the disk
        refuses stays Prepare* and is retried by the timer thread or the producer's retry."""
        while True:
            meta = self._queue.get()
            if meta is None:
                return
            try:
                if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                    self._complete(meta, durable=False)
            except Exception:  # noqa: BLE001 - left Prepare*, retried later
                log.exception(
                    "transaction %s: cannot write its markers yet; retrying",
                    meta.transactional_id,
                )
            finally:
                with self._lock:
                    self._completing.discard(meta.transactional_id)
                    self._done.notify_all()

    def _try_complete(self, meta: TxnMetadata) -> None:
        """`_complete`, logging a failure: the transaction stays Prepare* and is retried."""
        try:
            self._complete(meta)
        except TidelogError as exc:
            log.error(
                "transaction %s: cannot write its %s markers yet (%s); retrying",
                meta.transactional_id,
                "COMMIT" if meta.state == TxnState.PREPARE_COMMIT else "ABORT",
                exc,
            )

    def _complete(self, meta: TxnMetadata, durable: bool = True) -> None:
        """Write the markers (and, for a commit, the offsets) of a Prepare* transaction, both
        on disk, then its Complete* state: fsynced when `durable`, else left to the next
        fsync of ``__transaction_state`` (a crash before it replays Prepare*, whose
        completion is written again: the same markers and offsets). Called under the lock,
        or by the completer without it (nothing else touches a transaction it holds)."""
        with self._lock:
            commit = meta.state == TxnState.PREPARE_COMMIT
            pid, epoch = meta.producer_id, meta.producer_epoch
            partitions = sorted(meta.partitions)
            offsets = sorted((g, dict(o)) for g, o in meta.offsets.items() if o)
        markers, gone = self.store.append_markers(partitions, pid, epoch, commit)
        for topic, partition in gone:
            log.warning("transaction %s: %s-%d is gone", meta.transactional_id, topic, partition)
        with_offsets = commit and bool(offsets) and self.groups is not None
        synced = None
        if with_offsets and any(self._synced_each_write(t, p) for t, p, _ in markers):
            # the markers' fsyncs and the offsets' run side by side; both end before Complete*
            synced = self._syncer().submit(self.store.sync_markers, markers, commit)
        try:
            if synced is None:  # nothing to overlap: sync (an abort's index) here first
                self.store.sync_markers(markers, commit)
            if with_offsets:
                offsets_durable = self._state_synced_each_write()
                for group, group_offsets in offsets:
                    self.groups.commit_transactional_offsets(group, group_offsets, offsets_durable)
        finally:
            if synced is not None:
                synced.result()
        with self._lock:
            meta.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            meta.update_ms = self.clock()
            self._persist(meta, durable=durable)

    def _persist(self, meta: TxnMetadata, durable: bool = True) -> None:
        """Append the state record; with `durable`, wait until it (and every record before
        it) is on disk."""
        record = ProducerRecord(_encode(meta), _encode_key(meta.transactional_id))
        done = self.store.append_unsynced(TXN_STATE_TOPIC, 0, [record])
        self._state_end = max(self._state_end, done.base_offset + 1)
        if durable and done.sync_to is not None:
            self.store.sync_to(TXN_STATE_TOPIC, 0, done.sync_to)

    def _state_synced_each_write(self) -> bool:
        """Whether ``__transaction_state`` is fsynced before each answer (the default flush
        policy); a commit's offsets are then fsynced before its Complete* record, otherwise
        they follow ``__consumer_offsets``' own flush policy, as the state records do theirs."""
        return self._synced_each_write(TXN_STATE_TOPIC, 0)

    def sync_state(self) -> None:
        """Before a transactional produce is acknowledged (blocking, any thread): every state
        record appended so far on disk if the flush policy of ``__transaction_state`` wants
        each write synced, so the AddPartitionsToTxn that let the records in is on disk when
        they are (one group-committed fdatasync; run beside the partition's, not after it).
        StorageError if the disk failed."""
        if self._state_synced_each_write():
            self._sync_state()

    def _sync_state(self) -> None:
        """Put every state record appended so far on disk (nothing to do if it is)."""
        with self._lock:
            end = self._state_end
        self.store.sync_to(TXN_STATE_TOPIC, 0, end)

    def _syncer(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._sync_pool is None:
                self._sync_pool = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix="tidelog-txn-sync"
                )
            return self._sync_pool


def _describe(m: TxnMetadata) -> TransactionDescription:
    return TransactionDescription(
        m.transactional_id,
        m.producer_id,
        m.producer_epoch,
        str(m.state),
        m.timeout_ms,
        m.start_ms,
        tuple(sorted(m.partitions)),
        tuple(sorted(m.offsets)),
    )


# ---------------------------------------------------------------------- records


def _encode_key(transactional_id: str) -> bytes:
    """Kafka's TransactionLogKey v0: int16 version, string transactional id."""
    raw = transactional_id.encode()
    return _KEY_VERSION.pack(0, len(raw)) + raw


def _decode_key(key: bytes) -> str:
    _, size = _KEY_VERSION.unpack_from(key)
    return key[4 : 4 + size].decode()


def _encode(meta: TxnMetadata) -> bytes:
    """The value: JSON (version 0) of the fields of Kafka's TransactionLogValue plus the
    offsets the transaction will commit (Kafka keeps those as transactional records in
    ``__consumer_offsets``; here they wait with the transaction)."""
    return orjson.dumps(
        {
            "version": 0,
            "producer_id": meta.producer_id,
            "producer_epoch": meta.producer_epoch,
            "timeout_ms": meta.timeout_ms,
            "state": meta.state.value,
            "partitions": sorted(meta.partitions),
            "offsets": {
                g: [[t, p, o, md] for (t, p), (o, md) in sorted(offs.items())]
                for g, offs in meta.offsets.items()
            },
            "start_ms": meta.start_ms,
            "update_ms": meta.update_ms,
        }
    )


def _decode(transactional_id: str, value: bytes) -> TxnMetadata:
    try:
        d = json.loads(value)
        return TxnMetadata(
            transactional_id,
            d["producer_id"],
            d["producer_epoch"],
            d["timeout_ms"],
            TxnState(d["state"]),
            {(t, p) for t, p in d["partitions"]},
            {g: {(t, p): (o, md) for t, p, o, md in rows} for g, rows in d["offsets"].items()},
            d["start_ms"],
            d["update_ms"],
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise TidelogError(
            f"unreadable {TXN_STATE_TOPIC} record for {transactional_id!r}: {exc}"
        ) from None
