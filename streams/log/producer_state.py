"""Idempotent producers: producer ids and, per producer and partition, the last batches.

- Producer ids are handed out from blocks whose upper end is persisted (``.meta/producer-ids``,
  written atomically and fsynced) *before* any id of the block is handed out, so a restart
  continues above everything ever handed out and an id is never reused.
- Per (topic, partition, producer id) the last ``RETAINED_BATCHES`` (5, Kafka's
  ``NUM_BATCHES_TO_RETAIN``) batches are remembered: a retried batch is acknowledged with its
  original offsets, a gap in sequence numbers is refused (OUT_OF_ORDER_SEQUENCE_NUMBER), an old
  epoch is fenced, a new epoch must start at sequence 0 (Kafka's ``checkSequence``).
- That state survives a restart the Kafka way: a snapshot (``.meta/producer-state.json``) is
  written on close and periodically, each partition's entry saying up to which offset it is
  complete; on open the log is scanned from there to its end (batch headers only) to catch up.
  Without a snapshot for a partition only its active segment is scanned (the tail). Producers
  idle for a day (Kafka's ``producer.id.expiration.ms``) are forgotten at the next snapshot.

Thread-safety: one lock guards all state. ``streams.log.produce`` calls `check_batches` for a
record set and `record` for each batch it then writes, on the listener's event loop without
yielding in between, so no other client append to that partition interleaves between the
checks and the writes.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import threading
from typing import NamedTuple

from streams.errors import OutOfOrderSequence, ProducerFenced
from streams.log.checkpoint import write_atomic
from streams.log.records import BatchHeader
from streams.log.store import LogStore

log = logging.getLogger(__name__)

RETAINED_BATCHES = 5
PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms
ID_BLOCK = 1000
IDS_FILE = "producer-ids"
STATE_FILE = "producer-state.json"
_INT32_MAX = 2**31 - 1


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int


@dataclasses.dataclass
class ProducerEntry:
    epoch: int
    batches: collections.deque  # of BatchMetadata, oldest first
    last_seen_ms: int = 0  # wall clock of the last batch: idle producers are forgotten

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


def _last_seq(h: BatchHeader) -> int:
    return (h.base_sequence + h.last_offset_delta) % (_INT32_MAX + 1)


def _next_seq(seq: int) -> int:
    return 0 if seq == _INT32_MAX else seq + 1


Key = tuple[str, int, int]  # topic, partition, producer id


class ProducerDescription(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int


class ProducerStateManager:
    def __init__(self, store: LogStore):
        self.store = store
        self._dir = os.path.join(store.path, ".meta")
        self._lock = threading.Lock()
        self._entries: dict[Key, ProducerEntry] = {}
        self._next_id = 0
        self._block_end = 0

    # ------------------------------------------------------------------ ids

    def load(self) -> ProducerStateManager:
        os.makedirs(self._dir, exist_ok=True)
        try:
            with open(os.path.join(self._dir, IDS_FILE), encoding="utf-8") as f:
                self._next_id = self._block_end = int(json.load(f)["block_end"])
        except FileNotFoundError:
            pass
        covered = self._load_snapshot()
        self._drop_beyond_log_end()
        self._scan_tail(covered)
        return self

    def allocate_id(self) -> int:
        """A producer id never handed out before, even across restarts."""
        with self._lock:
            if self._next_id >= self._block_end:
                end = self._next_id + ID_BLOCK
                data = json.dumps({"block_end": end}).encode()
                write_atomic(os.path.join(self._dir, IDS_FILE), data)  # durable first
                self._block_end = end
            pid = self._next_id
            self._next_id += 1
            return pid

    # ------------------------------------------------------------------ sequences

    def check(self, topic: str, partition: int, h: BatchHeader) -> BatchMetadata | None:
        """Before appending: the original batch if `h` is a retry of one of the last five,
        None if it may be appended; raises OutOfOrderSequence or ProducerFenced."""
        return self.check_batches(topic, partition, [h])[0]

    def check_batches(
        self, topic: str, partition: int, headers: list[BatchHeader]
    ) -> list[BatchMetadata | None]:
        """`check` for every batch of one partition's record set, before any is written: each
        batch is checked as if the earlier new batches of the set were already appended, so a
        sequence gap between two batches of one request is refused too. Raises on the first
        batch that fails, so the caller writes all of them or none."""
        out: list[BatchMetadata | None] = []
        pending: dict[int, tuple[int, int]] = {}  # producer id -> epoch, last seq of the set
        with self._lock:
            for h in headers:
                if h.producer_id < 0:
                    out.append(None)
                    continue
                if h.producer_id in pending:
                    epoch, last_seq = pending[h.producer_id]
                    dup = self._check_sequence(topic, partition, h, epoch, last_seq, ())
                else:
                    dup = self._check_stored(topic, partition, h)
                if dup is None:
                    pending[h.producer_id] = (h.producer_epoch, _last_seq(h))
                out.append(dup)
        return out

    def _check_stored(self, topic: str, partition: int, h: BatchHeader) -> BatchMetadata | None:
        entry = self._entries.get((topic, partition, h.producer_id))
        if entry is None:
            return None  # first batch seen from this producer here
        return self._check_sequence(topic, partition, h, entry.epoch, entry.last_seq, entry.batches)

    @staticmethod
    def _check_sequence(
        topic: str, partition: int, h: BatchHeader, epoch: int, last_seq: int, retained
    ) -> BatchMetadata | None:
        """Kafka's ``checkSequence`` against a producer's epoch, last sequence and retained
        batches (the original of a retry is returned)."""
        if h.producer_epoch < epoch:
            raise ProducerFenced(
                f"producer {h.producer_id} epoch {h.producer_epoch} is older than "
                f"{epoch} on {topic}-{partition}"
            )
        if h.producer_epoch > epoch:
            if h.base_sequence != 0:
                raise OutOfOrderSequence(
                    f"producer {h.producer_id} epoch {h.producer_epoch} must start at "
                    f"sequence 0, not {h.base_sequence}"
                )
            return None
        last = _last_seq(h)
        for b in retained:
            if b.first_seq == h.base_sequence and b.last_seq == last:
                return b
        expected = _next_seq(last_seq)
        if h.base_sequence != expected:
            raise OutOfOrderSequence(
                f"producer {h.producer_id} sent sequence {h.base_sequence} to "
                f"{topic}-{partition}; expected {expected}"
            )
        return None

    def record(self, topic: str, partition: int, h: BatchHeader, base: int, ts: int) -> None:
        """After appending `h` at `base`: remember it (a no-op for non-idempotent batches)."""
        if h.producer_id < 0:
            return
        with self._lock:
            self._remember(topic, partition, h, base, ts)

    def _remember(self, topic: str, partition: int, h: BatchHeader, base: int, ts: int) -> None:
        key = (topic, partition, h.producer_id)
        entry = self._entries.get(key)
        if entry is None or h.producer_epoch != entry.epoch:
            entry = self._entries[key] = ProducerEntry(
                h.producer_epoch, collections.deque(maxlen=RETAINED_BATCHES)
            )
        entry.last_seen_ms = self.store.clock()
        entry.batches.append(
            BatchMetadata(h.base_sequence, _last_seq(h), base, base + h.last_offset_delta, ts)
        )

    def describe(self, topic: str, partition: int) -> list[ProducerDescription]:
        """The producers remembered for one partition (DescribeProducers)."""
        with self._lock:
            return [
                ProducerDescription(
                    pid,
                    e.epoch,
                    e.last_seq,
                    e.batches[-1].timestamp if e.batches else -1,
                )
                for (t, p, pid), e in self._entries.items()
                if t == topic and p == partition
            ]

    def forget_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self._entries if k[0] == topic]:
                del self._entries[key]

    # ------------------------------------------------------------------ persistence

    def expire(self, now_ms: int) -> int:
        """Forget producers idle for longer than producer.id.expiration.ms; returns how many."""
        with self._lock:
            idle = [
                key
                for key, e in self._entries.items()
                if now_ms - e.last_seen_ms > PRODUCER_ID_EXPIRATION_MS
            ]
            for key in idle:
                del self._entries[key]
        return len(idle)

    def snapshot(self) -> None:
        """Write every entry, with the offset up to which each partition is covered (after
        forgetting idle producers, so the state stays bounded)."""
        self.expire(self.store.clock())
        with self._lock:
            covered = {}
            for plog in self.store.all_partitions():
                covered[f"{plog.topic}\x00{plog.partition}"] = plog.high_watermark
            entries = [
                [t, p, pid, e.epoch, [list(b) for b in e.batches], e.last_seen_ms]
                for (t, p, pid), e in self._entries.items()
            ]
        data = json.dumps({"version": 0, "covered": covered, "entries": entries}).encode()
        write_atomic(os.path.join(self._dir, STATE_FILE), data)

    def _load_snapshot(self) -> dict[tuple[str, int], int]:
        try:
            with open(os.path.join(self._dir, STATE_FILE), encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable producer state snapshot: %s", exc)
            return {}
        for t, p, pid, epoch, batches, last_seen in data["entries"]:
            entry = ProducerEntry(epoch, collections.deque(maxlen=RETAINED_BATCHES), last_seen)
            entry.batches.extend(BatchMetadata(*b) for b in batches)
            self._entries[(t, p, pid)] = entry
        out = {}
        for key, offset in data["covered"].items():
            topic, _, partition = key.rpartition("\x00")
            out[(topic, int(partition))] = offset
        return out

    def _drop_beyond_log_end(self) -> None:
        """Forget snapshot batches that recovery cut from the log (written but never synced
        under a relaxed flush policy): a retry of one of them must be written again."""
        ends = {(p.topic, p.partition): p.log_end_offset for p in self.store.all_partitions()}
        for key, entry in list(self._entries.items()):
            end = ends.get(key[:2], -1)
            kept = [b for b in entry.batches if b.last_offset < end]
            if len(kept) != len(entry.batches):
                entry.batches = collections.deque(kept, maxlen=RETAINED_BATCHES)
            if not kept:
                del self._entries[key]

    def _scan_tail(self, covered: dict[tuple[str, int], int]) -> None:
        """Replay idempotent batch headers the snapshot does not cover."""
        batches = 0
        for plog in self.store.all_partitions():
            if plog.topic.startswith("__"):
                continue
            start = covered.get((plog.topic, plog.partition))
            if start is None:
                start = plog.segments[-1].base_offset
            if start > plog.high_watermark:  # the log was cut shorter than the snapshot
                start = plog.segments[-1].base_offset
            start = max(start, plog.log_start_offset)
            for seg in plog.segments:
                if seg.next_offset <= start:
                    continue
                for h, _ in seg.batches_from(max(start, seg.base_offset), seg.size):
                    # markers (control batches) carry a producer id but no sequence
                    if h.producer_id >= 0 and not h.is_control and h.next_offset > start:
                        self._remember(plog.topic, plog.partition, h, h.base_offset, -1)
                        batches += 1
        if batches:
            log.info("producer state: replayed %d idempotent batches from the log tail", batches)
