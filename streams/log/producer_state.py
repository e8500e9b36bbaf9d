"""Idempotent producers: producer ids for the store, and each partition's producer state.

- ``ProducerIds`` (one per store): ids are handed out from blocks whose upper end is persisted
  (``.meta/producer-ids``, written atomically and fsynced) *before* any id of the block is
  handed out, so a restart continues above everything ever handed out and an id is never
  reused.
- ``ProducerStateManager`` (one per partition, owned by its ``PartitionLog``, as Kafka's is
  by its ``UnifiedLog``): per producer id the epoch and the last ``RETAINED_BATCHES`` (5,
  Kafka's ``NUM_BATCHES_TO_RETAIN``) batches. A retried batch is acknowledged with its original
  offsets, a gap in sequence numbers is refused (OUT_OF_ORDER_SEQUENCE_NUMBER), an old epoch
  is fenced, a new epoch must start at sequence 0 (Kafka's ``checkSequence``). A transaction
  marker written with a newer epoch (the coordinator fenced the producer) moves the producer
  to that epoch, as Kafka's ``appendEndTxnMarker`` does.

Recovery (Kafka's producer snapshots, in one file): ``producer-state.json`` in the partition
directory holds the entries and the offset up to which they are complete; it is written when
the partition closes and, when something changed, with each store checkpoint. At open, batches
of the snapshot that recovery cut from the log are forgotten and the log is scanned from that
offset to its end (batch headers only) to catch up. Without a snapshot only the active segment
is scanned (the tail). Producers idle for a day (Kafka's ``producer.id.expiration.ms``) are
forgotten at the next snapshot. A data directory written before producer state moved into the
partitions has one store-wide ``.meta/producer-state.json``: the store hands each partition
its part at open (``legacy_snapshot``) and removes the file once every partition wrote its own.

Thread-safety: the owning partition calls `check_batches`, `record` and `record_marker` under
its write lock, so the check of a record set and its writes are one step for every appender
(the Kafka listener's loop and embedded producers' threads alike). A lock of its own guards the
state against readers (`describe`, the snapshot).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from streams.errors import OutOfOrderSequence, ProducerFenced
from streams.log.checkpoint import write_atomic
from streams.log.records import BatchHeader

if TYPE_CHECKING:
    from streams.log.partition import PartitionLog

log = logging.getLogger(__name__)

RETAINED_BATCHES = 5
PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000  # Kafka's producer.id.expiration.ms
ID_BLOCK = 1000
IDS_FILE = "producer-ids"
STATE_FILE = "producer-state.json"  # in the partition directory
LEGACY_STATE_FILE = "producer-state.json"  # in <data>/.meta, before partitions owned theirs
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


class ProducerDescription(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int = -1  # first offset of its open transaction here, else -1


class ProducerIds:
    """The store's producer id allocator (``<data>/.meta/producer-ids``)."""

    def __init__(self, meta_dir: str):
        self._dir = meta_dir
        self._lock = threading.Lock()
        self._next_id = 0
        self._block_end = 0

    def load(self) -> ProducerIds:
        os.makedirs(self._dir, exist_ok=True)
        try:
            with open(os.path.join(self._dir, IDS_FILE), encoding="utf-8") as f:
                self._next_id = self._block_end = int(json.load(f)["block_end"])
        except FileNotFoundError:
            pass
        return self

    def allocate(self) -> int:
        """A producer id never handed out before, even across restarts (blocking: the first
        id of each block of ``ID_BLOCK`` waits for an fsync)."""
        with self._lock:
            if self._next_id >= self._block_end:
                end = self._next_id + ID_BLOCK
                data = json.dumps({"block_end": end}).encode()
                write_atomic(os.path.join(self._dir, IDS_FILE), data)  # durable first
                self._block_end = end
            pid = self._next_id
            self._next_id += 1
            return pid


def read_legacy_snapshot(meta_dir: str) -> dict[tuple[str, int], tuple[int, list]] | None:
    """The store-wide snapshot of an older data directory, per (topic, partition): (covered
    offset, entries as [producer id, epoch, batches, last seen]); None when there is none."""
    path = os.path.join(meta_dir, LEGACY_STATE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        out: dict[tuple[str, int], tuple[int, list]] = {}
        for key, offset in data["covered"].items():
            topic, _, partition = key.rpartition("\x00")
            out[(topic, int(partition))] = (offset, [])
        for t, p, pid, epoch, batches, last_seen in data["entries"]:
            out.setdefault((t, p), (0, []))[1].append([pid, epoch, batches, last_seen])
        return out
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring unreadable producer state snapshot %s: %s", path, exc)
        return {}


class ProducerStateManager:
    """One partition's idempotent producers (see the module docstring)."""

    def __init__(self, directory: str, clock: Callable[[], int]):
        self.directory = directory
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: dict[int, ProducerEntry] = {}
        self._dirty = False  # changed since the last snapshot

    # ------------------------------------------------------------------ sequences

    def check_batches(self, headers: list[BatchHeader]) -> list[BatchMetadata | None]:
        """Before appending a record set: per batch, the original batch if it is a retry of one
        of the last five, else None (always for markers). Each batch is checked as if the
        earlier new batches of the set were already appended, so a sequence gap between two
        batches of one request is refused too. Raises OutOfOrderSequence or ProducerFenced on
        the first batch that fails, so the caller writes all of them or none."""
        out: list[BatchMetadata | None] = []
        pending: dict[int, tuple[int, int]] = {}  # producer id -> epoch, last seq of the set
        with self._lock:
            for h in headers:
                if h.producer_id < 0 or h.is_control:  # markers carry no sequence
                    out.append(None)
                    continue
                if h.producer_id in pending:
                    epoch, last_seq = pending[h.producer_id]
                    dup = self._check_sequence(h, epoch, last_seq, ())
                else:
                    entry = self._entries.get(h.producer_id)
                    dup = (
                        None  # first batch seen from this producer here
                        if entry is None
                        else self._check_sequence(h, entry.epoch, entry.last_seq, entry.batches)
                    )
                if dup is None:
                    pending[h.producer_id] = (h.producer_epoch, _last_seq(h))
                out.append(dup)
        return out

    def _check_sequence(
        self, h: BatchHeader, epoch: int, last_seq: int, retained
    ) -> BatchMetadata | None:
        """Kafka's ``checkSequence`` against a producer's epoch, last sequence and retained
        batches (the original of a retry is returned)."""
        if h.producer_epoch < epoch:
            raise ProducerFenced(
                f"producer {h.producer_id} epoch {h.producer_epoch} is older than "
                f"{epoch} on {self._where()}"
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
                f"producer {h.producer_id} sent sequence {h.base_sequence} to {self._where()}; "
                f"expected {expected}"
            )
        return None

    def _where(self) -> str:
        """The partition, for an error's message."""
        return os.path.basename(self.directory)

    def record(self, h: BatchHeader, base: int, ts: int) -> None:
        """After appending `h` at `base`: remember it (a no-op for non-idempotent batches)."""
        if h.producer_id < 0:
            return
        with self._lock:
            self._remember(h, base, ts, self.clock())

    def _remember(self, h: BatchHeader, base: int, ts: int, now: int) -> None:
        entry = self._entries.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.epoch:
            entry = self._entries[h.producer_id] = ProducerEntry(
                h.producer_epoch, collections.deque(maxlen=RETAINED_BATCHES)
            )
        entry.last_seen_ms = now
        entry.batches.append(
            BatchMetadata(h.base_sequence, _last_seq(h), base, base + h.last_offset_delta, ts)
        )
        self._dirty = True

    def record_marker(self, producer_id: int, epoch: int) -> None:
        """After a transaction marker of `producer_id` at `epoch`: a newer epoch (the
        coordinator bumped it to fence the producer) replaces the entry, so the old epoch is
        fenced here too and the new one starts at sequence 0."""
        with self._lock:
            self._remember_marker(producer_id, epoch, self.clock())

    def _remember_marker(self, producer_id: int, epoch: int, now: int) -> None:
        entry = self._entries.get(producer_id)
        if entry is None or epoch > entry.epoch:
            self._entries[producer_id] = ProducerEntry(
                epoch, collections.deque(maxlen=RETAINED_BATCHES), now
            )
            self._dirty = True
        else:
            entry.last_seen_ms = now

    def describe(self, open_txns: dict[int, int] | None = None) -> list[ProducerDescription]:
        """The producers remembered here (DescribeProducers); `open_txns`: producer id -> first
        offset of its open transaction here."""
        open_txns = open_txns or {}
        with self._lock:
            return [
                ProducerDescription(
                    pid,
                    e.epoch,
                    e.last_seq,
                    e.batches[-1].timestamp if e.batches else -1,
                    open_txns.get(pid, -1),
                )
                for pid, e in self._entries.items()
            ]

    # ------------------------------------------------------------------ persistence

    def expire(self, now_ms: int) -> int:
        """Forget producers idle for longer than producer.id.expiration.ms; returns how many."""
        with self._lock:
            idle = [
                pid
                for pid, e in self._entries.items()
                if now_ms - e.last_seen_ms > PRODUCER_ID_EXPIRATION_MS
            ]
            for pid in idle:
                del self._entries[pid]
            if idle:
                self._dirty = True
        return len(idle)

    def snapshot_data(self, covered: int) -> bytes | None:
        """The snapshot to write, the entries complete up to `covered` (the caller holds the
        partition's write lock, so no batch below it is still unrecorded); None if nothing
        changed since the last one."""
        self.expire(self.clock())
        with self._lock:
            if not self._dirty:
                return None
            entries = [
                [pid, e.epoch, [list(b) for b in e.batches], e.last_seen_ms]
                for pid, e in self._entries.items()
            ]
            self._dirty = False
        return json.dumps({"version": 1, "covered": covered, "entries": entries}).encode()

    def write_snapshot(self, data: bytes) -> None:
        """Write what `snapshot_data` returned (atomically, fsynced); on failure the next
        checkpoint tries again."""
        try:
            write_atomic(os.path.join(self.directory, STATE_FILE), data)
        except OSError:
            self._dirty = True
            raise

    def load(self, plog: PartitionLog, legacy: tuple[int, list] | None = None) -> None:
        """Recover with the partition (see the module docstring): the snapshot, then the
        batches it does not cover, read from the log."""
        covered, entries = self._read_snapshot(legacy)
        for pid, epoch, batches, last_seen in entries:
            entry = ProducerEntry(epoch, collections.deque(maxlen=RETAINED_BATCHES), last_seen)
            entry.batches.extend(BatchMetadata(*b) for b in batches)
            self._entries[pid] = entry
        self._drop_beyond(plog.log_end_offset)
        self._scan_tail(plog, covered)
        self._dirty = legacy is not None or self._dirty

    def _read_snapshot(self, legacy: tuple[int, list] | None) -> tuple[int | None, list]:
        path = os.path.join(self.directory, STATE_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            return int(data["covered"]), list(data["entries"])
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable producer state snapshot %s: %s", path, exc)
            return None, []
        if legacy is not None:
            return legacy
        return None, []

    def _drop_beyond(self, log_end: int) -> None:
        """Forget snapshot batches that recovery cut from the log (written but never synced
        under a relaxed flush policy): a retry of one of them must be written again."""
        for pid, entry in list(self._entries.items()):
            kept = [b for b in entry.batches if b.last_offset < log_end]
            if len(kept) != len(entry.batches):
                entry.batches = collections.deque(kept, maxlen=RETAINED_BATCHES)
                self._dirty = True
                if not kept:
                    del self._entries[pid]

    def _scan_tail(self, plog: PartitionLog, covered: int | None) -> None:
        """Replay the idempotent batches and markers the snapshot does not cover."""
        if plog.topic.startswith("__"):
            return  # internal topics: written by the broker itself, never by producers
        segments = plog.segments
        start = covered
        if start is None or start > plog.log_end_offset:  # none, or the log was cut shorter
            start = segments[-1].base_offset
        start = max(start, plog.log_start_offset)
        batches = 0
        now = self.clock()
        for seg in segments:
            if seg.next_offset <= start:
                continue
            for h, _ in seg.batches_from(max(start, seg.base_offset), seg.size):
                if h.producer_id < 0 or h.next_offset <= start:
                    continue
                if h.is_control:  # a marker: no sequence, but maybe a newer epoch
                    self._remember_marker(h.producer_id, h.producer_epoch, now)
                else:
                    self._remember(h, h.base_offset, -1, now)
                    batches += 1
        if batches:
            log.info(
                "%s: producer state: replayed %d idempotent batches from the log",
                plog.directory,
                batches,
            )
