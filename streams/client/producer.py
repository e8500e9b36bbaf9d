"""A batching producer over the embedded log store, with Kafka's producer knobs.

``send`` returns at once with a Future of ``AppendResult``. Records wait in a per-partition
accumulator until ``batch.size`` bytes are ready or ``linger.ms`` has passed since the first one,
then a sender thread appends each batch in one call (``LogStore.append_batch``: one fdatasync for
the whole batch under the default durability). Keyed records are partitioned at send time
(murmur2, as Kafka); unkeyed ones are batched together and stick to one partition per batch.

Transactions (Kafka's producer API): given a `transactional_id` and the broker's transaction
coordinator, ``init_transactions`` gets a producer id and epoch (fencing an older instance with
the same id), ``begin_transaction``, ``send``, ``send_offsets_to_transaction`` and
``commit_transaction``/``abort_transaction`` work as a Kafka client's do. Each batch is then
written as a Kafka client's would be — a transactional v2 batch with the producer id, epoch and
sequence — through ``LogStore.produce``, as the Kafka listener writes a client's, after its
partition was added to the transaction; the coordinator writes the markers. Unkeyed records of a
transaction go to one partition per batch, picked at send time.

Either way every record takes the log's one append path (``PartitionLog.append_batches``:
producer-state check, transaction check and write under the partition's write lock), so the
sender thread's writes and the Kafka listener's to the same partition are ordered by that lock.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from concurrent.futures import Future

from streams.errors import InvalidTxnState, StoreClosed
from streams.log import AppendResult, LogStore, ProducerRecord
from streams.log import records as rb
from streams.log.partitioner import partition_for_key

log = logging.getLogger(__name__)


class _Batch:
    __slots__ = ("records", "futures", "size", "created")

    def __init__(self, now: float):
        self.records: list[ProducerRecord] = []
        self.futures: list[Future] = []
        self.size = 0
        self.created = now


class Producer:
    def __init__(
        self,
        store: LogStore,
        *,
        linger_ms: float = 5,
        batch_size: int = 16_384,
        max_buffered_records: int = 1_000_000,
        transactional_id: str | None = None,
        transactions=None,
        transaction_timeout_ms: int = 60_000,
    ):
        if transactional_id is not None and transactions is None:
            raise ValueError("a transactional_id needs the transaction coordinator")
        self.store = store
        self.transactional_id = transactional_id
        self._transactions = transactions
        self.transaction_timeout_ms = transaction_timeout_ms
        self._pid = self._epoch = -1
        self._in_txn = False
        self._txn_started = False  # the coordinator has a transaction open for it
        self._txn_partitions: set[tuple[str, int]] = set()
        self._sequences: dict[tuple[str, int], int] = {}
        self.linger_s = linger_ms / 1000
        self.batch_size = batch_size
        self.max_buffered_records = max_buffered_records
        self._batches: dict[tuple[str, int | None], _Batch] = {}
        self._buffered = 0
        self._cond = threading.Condition()
        self._closed = False
        self._flush_now = False
        self._in_flight = 0
        self._sender = threading.Thread(target=self._run, name="tidelog-producer", daemon=True)
        self._sender.start()

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers=(),
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Future:
        """Queue one record; the Future resolves to its AppendResult (or the append's error)."""
        if partition is None and key is not None:
            partition = partition_for_key(key, self.store.partition_count(topic))
        elif partition is None and self.transactional_id is not None:
            partition = random.randrange(self.store.partition_count(topic))
        if self.transactional_id is not None and not self._in_txn:
            raise InvalidTxnState("send() of a transactional producer needs begin_transaction()")
        fut: Future = Future()
        rec = ProducerRecord(value, key, tuple(headers), timestamp_ms)
        with self._cond:
            if self._closed:
                raise StoreClosed("the producer is closed")
            while self._buffered >= self.max_buffered_records:  # back-pressure on the caller
                self._cond.wait()
            batch = self._batches.get((topic, partition))
            if batch is None:
                batch = self._batches[(topic, partition)] = _Batch(time.monotonic())
            batch.records.append(rec)
            batch.futures.append(fut)
            batch.size += len(value or b"") + len(key or b"") + 16
            self._buffered += 1
            # a new batch: the sender may be waiting with no deadline (nothing was queued)
            if batch.size >= self.batch_size or len(batch.records) == 1:
                self._cond.notify_all()
        return fut

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued and wait until it is appended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flush_now = True
            self._cond.notify_all()
            while self._batches or self._in_flight:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"{self._buffered} records still unsent after {timeout} s")
                self._cond.wait(remaining)
            self._flush_now = False

    def close(self, timeout: float | None = None) -> None:
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._sender.join()

    # ------------------------------------------------------------------ sender thread

    def _ready(self, now: float) -> list[tuple[tuple[str, int | None], _Batch]]:
        return [
            (k, b)
            for k, b in self._batches.items()
            if self._flush_now
            or self._closed
            or b.size >= self.batch_size
            or now - b.created >= self.linger_s
        ]

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    ready = self._ready(now)
                    if ready or (self._closed and not self._batches):
                        break
                    oldest = min((b.created for b in self._batches.values()), default=None)
                    wait = None if oldest is None else max(0.0, oldest + self.linger_s - now)
                    self._cond.wait(wait)
                if not ready and self._closed:
                    return
                for key, _ in ready:
                    del self._batches[key]
                self._in_flight += len(ready)
            for (topic, partition), batch in ready:
                self._send_batch(topic, partition, batch)
            with self._cond:
                self._in_flight -= len(ready)
                self._buffered -= sum(len(b.records) for _, b in ready)
                self._cond.notify_all()

    # ------------------------------------------------------------------ transactions

    def init_transactions(self) -> None:
        """Get this transactional id's producer id and a new epoch (an older instance with the
        same id is fenced and its open transaction aborted)."""
        self._require_transactional()
        self._pid, self._epoch = self._transactions.init_producer_id(
            self.transactional_id, self.transaction_timeout_ms
        )
        self._sequences.clear()

    def begin_transaction(self) -> None:
        self._require_transactional()
        if self._pid < 0:
            raise InvalidTxnState("init_transactions() first")
        if self._in_txn:
            raise InvalidTxnState("a transaction is already open")
        self._in_txn = True
        self._txn_partitions = set()

    def send_offsets_to_transaction(
        self, offsets: dict[tuple[str, int], int], group_id: str
    ) -> None:
        """The group's offsets (next offset to read per partition) commit with the transaction."""
        self._require_open()
        self._transactions.add_offsets(self.transactional_id, self._pid, self._epoch, group_id)
        self._txn_started = True
        staged = {tp: (offset, "") for tp, offset in offsets.items()}
        self._transactions.txn_offset_commit(
            self.transactional_id, self._pid, self._epoch, group_id, staged
        )

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._require_open()
        self.flush(timeout)
        self._end(commit=True)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._require_open()
        self.flush(timeout)  # what was sent is written, then aborted: readers skip it
        self._end(commit=False)

    def _end(self, commit: bool) -> None:
        """EndTxn, unless nothing reached the coordinator (no partition, no offsets): then
        there is no transaction to end, as Kafka clients skip it too."""
        try:
            if self._txn_started:
                self._transactions.end_txn(self.transactional_id, self._pid, self._epoch, commit)
        finally:
            self._in_txn = self._txn_started = False
            self._txn_partitions = set()

    def _require_transactional(self) -> None:
        if self.transactional_id is None:
            raise InvalidTxnState("this producer has no transactional_id")

    def _require_open(self) -> None:
        self._require_transactional()
        if not self._in_txn:
            raise InvalidTxnState("no transaction is open (begin_transaction() first)")

    def _append_transactional(self, topic: str, partition: int, records) -> list[AppendResult]:
        """One transactional batch through the log's entry point for client batches."""
        tp = (topic, partition)
        if tp not in self._txn_partitions:
            self._transactions.add_partitions(self.transactional_id, self._pid, self._epoch, [tp])
            self._txn_partitions.add(tp)
            self._txn_started = True
        seq = self._sequences.get(tp, 0)
        now = self.store.clock()
        data = rb.build_batch(
            records,
            now_ms=now,
            producer_id=self._pid,
            producer_epoch=self._epoch,
            base_sequence=seq,
            attributes_extra=rb.ATTR_TRANSACTIONAL,
        )
        done = self.store.produce(topic, partition, data, self._transactions.verify_produce)
        self._sequences[tp] = (seq + len(records)) % (2**31)
        if done.sync_to is not None:
            # the AddPartitionsToTxn record first (it was not fsynced on its own), so the
            # records are never on disk in a transaction the coordinator could forget
            self._transactions.sync_state()
            self.store.sync_to(topic, partition, done.sync_to)
        return [
            AppendResult(
                topic,
                partition,
                done.base_offset + i,
                now if r.timestamp_ms is None else r.timestamp_ms,
            )
            for i, r in enumerate(records)
        ]

    def _send_batch(self, topic: str, partition: int | None, batch: _Batch) -> None:
        try:
            if self.transactional_id is not None:
                results = self._append_transactional(topic, partition, batch.records)
            else:
                results = self.store.append_batch(topic, batch.records, partition=partition)
        except Exception as exc:  # noqa: BLE001 - the error belongs to each record's Future
            for fut in batch.futures:
                fut.set_exception(exc)
            return
        for fut, result in zip(batch.futures, results, strict=True):
            fut.set_result(result)
