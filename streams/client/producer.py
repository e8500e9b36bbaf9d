"""A batching producer over the embedded log store, with Kafka's producer knobs.

``send`` returns at once with a Future of ``AppendResult``. Records wait in a per-partition
accumulator until ``batch.size`` bytes are ready or ``linger.ms`` has passed since the first one,
then a sender thread appends each batch in one call (one fdatasync for the whole batch under the
default durability). Keyed records are partitioned at send time (murmur2, as Kafka); unkeyed ones
are batched together and stick to one partition per batch.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future

from streams.errors import StoreClosed
from streams.log import LogStore, ProducerRecord
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
    ):
        self.store = store
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
            if batch.size >= self.batch_size:
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

    def _send_batch(self, topic: str, partition: int | None, batch: _Batch) -> None:
        try:
            results = self.store.append_batch(topic, batch.records, partition=partition)
        except Exception as exc:  # noqa: BLE001 - the error belongs to each record's Future
            for fut in batch.futures:
                fut.set_exception(exc)
            return
        for fut, result in zip(batch.futures, results, strict=True):
            fut.set_result(result)
