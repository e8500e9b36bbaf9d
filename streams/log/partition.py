"""One partition's log: an ordered list of segments in ``<data>/<topic>-<partition>/``.

Offsets:
    log_start_offset  first readable offset (raised by retention and delete-records)
    high_watermark    end of what readers may see; under the default flush policy
                      (``flush.messages=1``) only what is on disk, otherwise the log end
    log end offset    next offset to assign

Writers: one at a time (``_write_lock``), every record through ``append_batches`` (producer
state, transaction check, write; see ``produce`` for the validation before it). Durability uses
group commit: an appender that must wait for disk calls ``_sync_to(its end offset)``; the first to
take ``_flush_lock`` syncs everything written so far (segments a roll sealed since, then the
active one), and the others find their offsets already covered. ``append_batches`` never fsyncs,
not even when it rolls a segment, so a writer on an event loop does not wait for the disk; the
callers that wait (``append``, ``write_marker``, the listener's group commit) sync afterwards,
outside the write lock.

Readers never take a lock. They read ``high_watermark`` first, then the segment list (replaced,
never mutated, when segments are added or removed), then each segment's ``size``; everything
below those marks is complete on disk.

Damage (see ``damage``): every batch a reader hands out is checked (CRC-32C); a read stops
before a damaged range and an offset inside one raises LogDamaged (Kafka's CORRUPT_MESSAGE).
The recovery point is the last verified point: at open the active segment is checked whole,
after a clean shutdown too, and after an unclean one every segment from the recovery point on.
Damage is recorded (``damaged-ranges.json``) and kept in place, never a reason to cut the
records after it; only a torn tail past the recovery point is cut. An active segment found
damaged (at open or by a read) is closed and a new one started, so nothing is appended behind
damage. Kafka keeps a partition writable in the same case (it cuts the damage at recovery and
re-replicates); a single node cannot re-replicate, so the damage stays readable as an error
until an operator repairs it (``verify.repair_partition``, ``manage.py verify_log --repair``).
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

from streams import telemetry
from streams.errors import (
    CorruptRecord,
    LogDamaged,
    OffsetOutOfRange,
    StorageError,
    StoreClosed,
)
from streams.log import checkpoint, damage, produce, txn
from streams.log import records as rb
from streams.log.config import TopicConfig
from streams.log.produce import Appended, Batch
from streams.log.producer_state import ProducerStateManager
from streams.log.records import ProducerRecord, Record
from streams.log.refusals import RefusalLog
from streams.log.segment import NO_TIMESTAMP, LogSegment, SegmentDamage, segment_name

log = logging.getLogger(__name__)

MAX_RELATIVE_OFFSET = 2**31 - 1


class Written(NamedTuple):
    """Where ``append_batches`` put one batch (or, for a retry, where its original is)."""

    base_offset: int
    last_offset: int
    timestamp: int  # the append time under LogAppendTime, else -1 (a retry: the original's)
    retry: bool  # not written: a retry of one of the producer's last five batches
    sync: bool = True  # acknowledge only after sync_to(last_offset + 1)


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PartitionLog:
    def __init__(
        self,
        directory: str,
        topic: str,
        partition: int,
        config: TopicConfig,
        clock: Callable[[], int],
        segments: list[LogSegment],
        log_start_offset: int,
    ):
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.clock = clock
        self._set_segments(segments)
        self.log_start_offset = max(log_start_offset, segments[0].base_offset)
        self._next_offset = segments[-1].next_offset
        self.high_watermark = self._next_offset
        self._flushed = self._next_offset
        self._unflushed_records = 0
        self._last_flush_ms = clock()
        self.last_append_ms: int | None = None
        # bytes appended since this process opened the partition (for rate metrics)
        self.bytes_appended = 0
        self._write_lock = threading.RLock()  # re-entered by append_batches
        self._unsynced: list[LogSegment] = []  # sealed by a roll, not fsynced yet
        self._dir_unsynced = False  # a roll made files whose directory entry is not synced
        self._flush_lock = threading.Lock()
        self._closed = False
        self._refusals = RefusalLog(f"{topic}-{partition}")
        self._ranges: tuple[damage.DamagedRange, ...] = ()  # damaged and repaired ranges
        self._damaged: tuple[damage.DamagedRange, ...] = ()
        self._offline: StorageError | None = None  # set by a failed fsync, until a restart
        self._verified_at_close: tuple[int, int, int] | None = None
        self.on_log_start_change: Callable[[PartitionLog], None] | None = None
        # called (from the appending or syncing thread) each time the high watermark advances;
        # must be cheap and must not block: the Kafka listener wakes its long-polling fetches
        self.on_append: Callable[[PartitionLog], None] | None = None
        self.cleaner_next_horizon: int | None = None  # earliest tombstone delete horizon
        self.contiguous = not config.compact  # set by open(): false once ever compacted
        self.txns = txn.PartitionTxns(directory)  # open transactions, aborted index (``txn``)
        self.producers = ProducerStateManager(directory, clock)  # idempotent producers

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        directory: str,
        topic: str,
        partition: int,
        config: TopicConfig,
        clock: Callable[[], int],
        *,
        log_start_offset: int = 0,
        recovery_point: int | None = None,
        clean: bool | None = None,
        verified: tuple[int, int, int] | None = None,
        contiguous: bool = True,
        legacy_producer_state: tuple[int, list] | None = None,
    ) -> PartitionLog:
        """Open (creating if needed) a partition directory.

        `recovery_point`: the offset below which everything was on disk (after a clean
        shutdown, the log end then). `clean`: the store was shut down cleanly (default: when no
        recovery point is given). `verified`: the last verified point, (segment base, position,
        CRC-32C of the bytes before it) of the active segment, from the checkpoint
        (``verified_point``). The active segment is checked whole either way (see
        ``LogSegment.load_active``); after an unclean stop every segment from the recovery
        point on is re-validated too. Damage is kept in place and recorded, never cut, except a
        torn tail past the recovery point; an active segment holding damage is closed and a
        new one started after it, so nothing is ever appended behind damage. `contiguous`
        False (a topic that was ever compacted) allows gaps between batches. The partition's
        transactions and producer state are recovered with it (``txn``, ``producer_state``;
        `legacy_producer_state`: this partition's part of an older store-wide snapshot).
        """
        if clean is None:
            clean = recovery_point is None
        rp = recovery_point or 0
        os.makedirs(directory, exist_ok=True)
        _finish_interrupted_operations(directory)
        interval = config.get("index.interval.bytes")
        bases = sorted(
            int(name[:-4])
            for name in os.listdir(directory)
            if name.endswith(".log") and name[:-4].isdigit()
        )
        if not bases:
            seg = LogSegment(directory, log_start_offset, interval, contiguous)
            fsync_dir(directory)
            plog = cls(directory, topic, partition, config, clock, [seg], log_start_offset)
            plog.contiguous = contiguous
            plog.txns.load(plog)
            plog.producers.load(plog, legacy_producer_state)
            return plog
        segments = [LogSegment(directory, b, interval, contiguous) for b in bases]
        recorded = damage.load(directory)
        jumps = _jumps_by_segment(recorded)
        prefix = verified[1:] if verified is not None and verified[0] == bases[-1] else None
        if clean:
            found = {}
            for seg, nxt in zip(segments, segments[1:], strict=False):
                found[seg] = seg.load_closed(nxt.base_offset, jumps.get(seg.base_offset, ()))
            found[segments[-1]] = segments[-1].load_active(rp, jumps.get(bases[-1], ()), prefix)
        else:
            found = _recover(segments, rp, jumps, prefix)
        ranges = collect_damage(segments, recorded, found, rp, clock())
        _check_contiguous(segments, directory)
        for seg in segments[:-1]:
            seg.closed = True
        plog = cls(directory, topic, partition, config, clock, segments, log_start_offset)
        plog.contiguous = contiguous
        plog._set_ranges(ranges, recorded)
        known = [d for d in plog.damaged if d in recorded]
        if known:  # found before: one reminder per start (new ones were logged in full)
            log.warning(
                "%s-%d: %d damaged range%s recorded (%s); reads there answer CORRUPT_MESSAGE "
                "until `manage.py verify_log --topic %s --repair` cuts them out",
                topic, partition, len(known), "s" * (len(known) != 1),
                ", ".join(d.offsets_text() for d in known), topic,
            )  # fmt: skip
        if plog.log_start_offset > plog._next_offset:
            log.warning(
                "%s: log start offset %d is past the log end %d; starting an empty segment there",
                directory,
                plog.log_start_offset,
                plog._next_offset,
            )
            plog._reset_to(plog.log_start_offset)
        elif plog._segments[-1].damage:
            plog._roll()  # never append behind damage: it stays in a closed segment
        plog.txns.load(plog)
        plog.producers.load(plog, legacy_producer_state)
        return plog

    # ------------------------------------------------------------------ state

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def last_stable_offset(self) -> int:
        """Where read_committed readers stop: the first offset of the earliest transaction
        still open here, else the high watermark (Kafka's LSO)."""
        return self.txns.stable_offset(self.high_watermark)

    @property
    def recovery_point(self) -> int:
        return self._flushed

    @property
    def segments(self) -> list[LogSegment]:
        return self._segments

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def _sync_each_append(self) -> bool:
        return self.config.get("flush.messages") == 1

    def appends_unsynced(self, records: int) -> bool:
        """Whether appending `records` more now waits on no fdatasync: the flush policy syncs
        neither each append nor once these cross ``flush.messages`` (a snapshot: another
        appender may change it, unless the caller serialises the partition's writes)."""
        flush_messages = self.config.get("flush.messages")
        return flush_messages != 1 and self._unflushed_records + records < flush_messages

    # ------------------------------------------------------------------ appending

    def append(self, batch_records: Sequence[ProducerRecord]) -> tuple[int, int]:
        """Append records as one batch the store encodes (``produce.store_batch``) and wait
        for the disk per the flush policy; return (base offset, batch max timestamp)."""
        now = self.clock()
        h, batch = produce.store_batch(self.config, self.topic, batch_records, now)
        (written,) = self.append_batches([(h, batch)], now)
        if written.sync:
            self._sync_to(written.last_offset + 1)
        return written.base_offset, (now if written.timestamp < 0 else h.max_timestamp)

    def append_unsynced(self, batch_records: Sequence[ProducerRecord]) -> Appended:
        """Records the broker writes itself (a coordinator's state record: Kafka's
        ``AppendOrigin.COORDINATOR``), as one batch the store encodes (``produce.store_batch``,
        no client validation to repeat), through ``append_batches``, without waiting for the
        disk: ``sync_to(result.sync_to)`` before relying on them, as for a client's."""
        now = self.clock()
        h, batch = produce.store_batch(self.config, self.topic, batch_records, now)
        (written,) = self.append_batches([(h, batch)], now)
        sync_to = written.last_offset + 1 if written.sync else None
        return Appended(written.base_offset, written.timestamp, sync_to, self.log_start_offset)

    def append_record_set(
        self, data: bytes, verify_txn: Callable[[rb.BatchHeader], None] | None = None
    ) -> Appended:
        """A Kafka client's record set (``produce.client_batches`` validates it), through
        ``append_batches``, without waiting for the disk: the result says up to which offset
        to ``sync_to`` (from any thread) before acknowledging, so many requests share one
        fdatasync (group commit). A retried batch is answered with the original's offsets.

        Raises CorruptRecord, InvalidRecord, RecordTooLarge, OutOfOrderSequence or
        ProducerFenced with nothing written, or what `verify_txn(header)` raises for a
        transactional batch (that batch and the ones after it are not written)."""
        now = self.clock()
        batches = produce.client_batches(self.config, self.topic, data, now)
        results = self.append_batches(batches, now, verify_txn)
        instruments = telemetry.current()
        for (h, batch), r in zip(batches, results, strict=True):
            if not r.retry:
                instruments.records_in(self.topic, h.count, len(batch))
        first = results[0]
        syncs = [r.last_offset + 1 for r in results if r.sync]
        return Appended(
            first.base_offset,
            first.timestamp,
            max(syncs) if syncs else None,
            self.log_start_offset,
        )

    def append_raw(self, batch: bytes) -> tuple[int, int, int]:
        """Store one client-built v2 batch (``append_record_set``) and wait for the disk.
        Returns (base offset, last offset, timestamp) — the timestamp is the append time
        under LogAppendTime, else -1 as in Kafka."""
        done = self.append_record_set(batch)
        last = done.base_offset + rb.parse_header(batch).last_offset_delta
        if done.sync_to is not None:
            self.sync_to(done.sync_to)
        return done.base_offset, last, done.timestamp

    def write_marker(
        self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int = 0
    ) -> int:
        """Write a COMMIT or ABORT control batch for `producer_id` and wait for the disk as the
        flush policy wants (``append_marker`` then ``sync_marker``). Returns its offset."""
        offset = self.append_marker(producer_id, epoch, commit, coordinator_epoch)
        self.sync_marker(offset, commit)
        return offset

    def append_marker(
        self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int = 0
    ) -> int:
        """Write a COMMIT or ABORT control batch for `producer_id` (``append_batches``)
        without waiting for the disk: its transaction here ends (the last stable offset moves
        past it; an abort joins the aborted index in memory). Returns the marker's offset;
        ``sync_marker`` it before relying on it."""
        now = self.clock()
        batch = txn.marker_batch(producer_id, epoch, commit, coordinator_epoch, now)
        (written,) = self.append_batches([(rb.parse_header(batch), batch)], now)
        return written.base_offset

    def sync_marker(self, offset: int, commit: bool) -> None:
        """Return once the marker at `offset` is on disk (group commit) as the flush policy
        wants it (under ``flush.messages=1``; otherwise it reaches the disk with the
        partition's next flush, as any record does), and for an abort its aborted-index entry
        too (saved after the marker)."""
        if self._sync_each_append:
            self.sync_to(offset + 1)
        if not commit:
            self.txns.save()

    def append_batches(
        self,
        batches: list[Batch],
        now: int,
        verify_txn: Callable[[rb.BatchHeader], None] | None = None,
    ) -> list[Written]:
        """The one append step every record takes (Kafka's ``UnifiedLog.append``), for batches
        the validator (``produce``) made, under the write lock as one step:

        1. every idempotent batch's sequence is checked against the producer state
           (``ProducerStateManager.check_batches``): a retry of one of the producer's last five
           batches is not written again, its original is returned (``retry``);
        2. a transactional batch is written only if `verify_txn(header)` lets it (the
           coordinator's check that its producer's ongoing transaction holds this partition:
           KIP-890 part 1); it opens its producer's transaction here (``txn``);
        3. a control batch (a marker) ends its producer's transaction here and may move the
           producer to a newer epoch;
        4. each written batch is recorded in the producer state.

        Does not wait for the disk; returns each batch's place and whether the flush policy
        wants a sync (``sync_to(last + 1)``, from any thread) before it is acknowledged."""
        out: list[Written] = []
        ts = now if self.config.log_append_time else -1
        with self._write_lock:
            self._check_writable()
            if any(h.producer_id >= 0 for h, _ in batches):
                dups = self.producers.check_batches([h for h, _ in batches])
            else:  # no idempotent producer: nothing to check (the store's own appends)
                dups = [None] * len(batches)
            for (h, batch), dup in zip(batches, dups, strict=True):
                if dup is not None:
                    out.append(Written(dup.base_offset, dup.last_offset, dup.timestamp, True))
                    continue
                before = after = None
                if h.is_control:

                    def after(base: int, h=h, batch=batch) -> None:
                        kind = txn.marker_type(batch, h)
                        if kind is not None:
                            hw = self.high_watermark
                            self.txns.end(h.producer_id, kind == txn.COMMIT, base, hw)
                        self.producers.record_marker(h.producer_id, h.producer_epoch)

                elif h.producer_id >= 0:  # idempotent, maybe transactional
                    if txn.is_transactional(h) and verify_txn is not None:

                        def before(h=h) -> None:
                            verify_txn(h)

                    def after(base: int, h=h) -> None:
                        if txn.is_transactional(h):
                            self.txns.begin_if_new(h, base)
                        self.producers.record(h, base, ts)

                base, sync = self._append_batch(
                    batch, h.count, h.max_timestamp, now, wait=False, before=before, after=after
                )
                out.append(Written(base, base + h.last_offset_delta, ts, False, sync))
        return out

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreClosed(f"{self.topic}-{self.partition} is closed")
        if self._offline is not None:
            raise self._offline

    def _append_batch(
        self,
        batch: bytes,
        count: int,
        max_ts: int,
        now: int,
        wait: bool = True,
        before: Callable[[], None] | None = None,
        after: Callable[[int], None] | None = None,
    ) -> tuple[int, bool]:
        """Write under the lock; returns (base offset, whether a sync is due). With `wait`,
        that sync is done before returning. `before()` runs under the lock first (it may
        refuse the write by raising), `after(base)` once written, before the high watermark
        moves (the transaction bookkeeping)."""
        with self._write_lock:
            self._check_writable()
            if before is not None:
                before()
            base = self._next_offset
            try:
                seg = self._segments[-1]
                if self._should_roll(seg, len(batch), count, now):
                    seg = self._roll()
                seg.append(batch, base, base + count, max_ts, now)
            except OSError as exc:
                offsets = f"offsets {base}..{base + count - 1}" if count > 1 else f"offset {base}"
                raise self._refusals.refused(
                    f"append {len(batch):,} bytes ({offsets}) to "
                    f"{os.path.basename(self._segments[-1].path)}",
                    exc,
                    "nothing was stored and the log is unchanged; each new write tries again",
                ) from None
            self._refusals.succeeded()
            if after is not None:
                after(base)
            end = self._next_offset = base + count
            self.last_append_ms = now
            self.bytes_appended += len(batch)
            sync = self._sync_each_append
            flush_due = False
            if not sync:
                self.high_watermark = end
                self._unflushed_records += count
                # the appender that crosses flush.messages claims the flush, under the lock,
                # so concurrent appenders do not all sync for the same records
                if self._unflushed_records >= self.config.get("flush.messages"):
                    self._unflushed_records = 0
                    flush_due = True
        if not sync:
            self._notify_append()
        if wait and (sync or flush_due):
            self._sync_to(end)
        return base, sync or flush_due

    def _notify_append(self) -> None:
        callback = self.on_append
        if callback is not None:
            callback(self)

    def _should_roll(self, seg: LogSegment, size: int, count: int, now: int) -> bool:
        if seg.size == 0:
            return False
        cfg = self.config
        return (
            seg.size + size > cfg.get("segment.bytes")
            or (
                seg.first_append_ms is not None
                and now - seg.first_append_ms >= cfg.get("segment.ms")
            )
            or self._next_offset + count - seg.base_offset > MAX_RELATIVE_OFFSET
        )

    def _roll(self) -> LogSegment:
        """Seal the active segment and start a new one at the log end (write lock held).

        The new segment's files are made first: a disk that refuses them (OSError) leaves the
        active segment as it was, and the next append tries again. Nothing is fsynced here, so
        an append that rolls does not wait for the disk (Kafka schedules the same flush after a
        roll): the sealed segment, its indexes and the directory entry of the new one are
        fsynced by the next ``sync_to`` (or ``close``), before the recovery point passes them."""
        old = self._segments[-1]
        new = self._new_segment(self._next_offset)
        try:
            old.add_closing_entry()
        except OSError:
            _unlink_segment_files(new)
            raise
        old.closed = True
        self._unsynced.append(old)
        self._dir_unsynced = True
        self._set_segments(self._segments + [new])
        return new

    def _flush_sealed(self, sealed: list[LogSegment]) -> None:
        """Fsync segments sealed by a roll since the last sync, and the directory (their
        successors' entries); flush lock held. A segment retention or the cleaner has removed
        meanwhile is skipped."""
        if self._dir_unsynced:
            self._dir_unsynced = False
            fsync_dir(self.directory)
        for seg in sealed:
            try:
                seg.flush()
            except OSError:
                if seg in self._segments:
                    raise
            try:
                self._unsynced.remove(seg)
            except ValueError:
                pass

    def _new_segment(self, base_offset: int) -> LogSegment:
        cfg = self.config
        args = (self.directory, base_offset, cfg.get("index.interval.bytes"), self.contiguous)
        try:
            return LogSegment(*args)
        except OSError:  # e.g. no inode left: remove the files that were made
            for suffix in (".log", ".index", ".timeindex"):
                try:
                    os.unlink(os.path.join(self.directory, segment_name(base_offset) + suffix))
                except FileNotFoundError:
                    pass
            raise

    def _flush_or_go_offline(self, flush: Callable[[], None]) -> None:
        """Run an fsync; if the disk fails it, the partition goes offline (flush lock held).

        After a failed fsync the kernel may have dropped the unwritten pages and a retry can
        report success without writing them ("fsyncgate"), so nothing written since the last
        good sync can be acknowledged. As Kafka takes a failed log directory offline, the
        partition refuses appends and syncs (KAFKA_STORAGE_ERROR) until the broker restarts;
        the next open re-validates the log past the last good sync (the recovery point)."""
        started = time.perf_counter()
        try:
            flush()
        except OSError as exc:
            self._offline = StorageError(
                f"{self.topic}-{self.partition} is offline: the disk failed to sync "
                f"{os.path.basename(self._segments[-1].path)} ({exc.strerror or exc}); "
                f"offsets from {self._flushed} may not be on disk, so the partition takes no "
                "more writes until the broker is restarted (reads up to the high watermark go "
                "on)",
                exc.errno,
            )
            log.error("%s", self._offline)
            raise self._offline from None
        telemetry.current().fsync(time.perf_counter() - started)

    def take_offline(self, error: StorageError) -> None:
        """Refuse every append and sync from now on with `error` (the store found its data
        directory replaced: see ``LogStore._check_own_dir``); ``close`` then writes nothing."""
        with self._write_lock:
            self._offline = error

    def roll(self) -> None:
        """Force a new active segment (if the current one holds data)."""
        with self._write_lock:
            if self._segments[-1].size:
                try:
                    self._roll()
                except OSError as exc:
                    raise self._refusals.refused(
                        "start a new segment", exc, "the active segment takes the next writes"
                    ) from None

    def sync_to(self, end: int) -> None:
        """Group commit: return once every offset below `end` is on disk."""
        self._sync_to(end)

    def _sync_to(self, end: int) -> None:
        """Group commit: return once every offset below `end` is on disk."""
        if self._flushed >= end:
            return
        with self._write_lock:  # one view: every offset below `target` is in these segments
            target = self._next_offset  # everything whose write has completed
            active = self._segments[-1]
            sealed = list(self._unsynced)
        with self._flush_lock:
            if self._flushed >= end:
                return
            if self._offline is not None:
                raise self._offline
            if sealed or self._dir_unsynced:
                self._flush_or_go_offline(lambda: self._flush_sealed(sealed))
            self._flush_or_go_offline(active.flush_log)
            self._note_flushed(target)

    def _note_flushed(self, target: int) -> None:
        if target > self._flushed:
            self._flushed = target
            self._last_flush_ms = self.clock()
            if self._sync_each_append and target > self.high_watermark:
                self.high_watermark = target
                self._notify_append()

    def flush(self) -> None:
        self._sync_to(self._next_offset)

    def maybe_flush(self, now: int) -> None:
        """Interval policy (flush.ms), called by the store's background thread."""
        if self._flushed < self._next_offset and now - self._last_flush_ms >= self.config.get(
            "flush.ms"
        ):
            with self._write_lock:
                self._unflushed_records = 0
            self.flush()

    def snapshot_producers(self) -> None:
        """Write the producer state snapshot if it changed (``producer_state``): its entries
        are taken under the write lock, complete up to the log end then."""
        with self._write_lock:
            data = self.producers.snapshot_data(self._next_offset)
        if data is not None:
            self.producers.write_snapshot(data)

    def verified_point(self) -> tuple[int, int, int] | None:
        """(active segment base, position, CRC-32C of its bytes before it): the last verified
        point the next open starts from (see ``LogSegment.load_active``). Reads what was
        appended since the last call (the maintenance thread, with each checkpoint)."""
        if self._closed:
            return self._verified_at_close
        seg = self._segments[-1]
        return (seg.base_offset, *seg.advance_checksum())

    def checkpoint_recovery_point(self) -> int:
        """Flush the active segment's indexes; return the offset below which all is durable."""
        rp = self._flushed
        seg = self._segments[-1]
        if self.txns.active:  # where the next open scans from for open transactions
            self.txns.save_checkpoint(min(self.last_stable_offset, rp))
        if not self._closed:
            self.snapshot_producers()
        if not self._closed:
            seg.index.flush()
            seg.time_index.flush()
        return rp

    # ------------------------------------------------------------------ reading

    def _check_range(self, offset: int) -> int:
        hw = self.high_watermark
        start = self.log_start_offset
        if offset < start or offset > hw:
            raise OffsetOutOfRange(self.topic, self.partition, offset, start, hw)
        return hw

    def _segments_from(self, offset: int, clamp: bool = False) -> list[LogSegment]:
        """The segments holding `offset` and after, from one snapshot of the segment list.

        Raises OffsetOutOfRange when retention or delete-records removed `offset` after the
        caller checked the range (the snapshot is taken after the check)."""
        segs, bases = self._view
        if clamp:
            offset = max(offset, bases[0])
        elif offset < bases[0] or offset < self.log_start_offset:
            raise OffsetOutOfRange(
                self.topic, self.partition, offset, self.log_start_offset, self.high_watermark
            )
        i = bisect.bisect_right(bases, offset) - 1
        return segs[i:]

    def read(
        self,
        offset: int,
        max_records: int = 500,
        max_bytes: int = 1 << 20,
        committed: bool = False,
    ) -> list[Record]:
        """Records from `offset` on, at most `max_records` and `max_bytes` of encoded records
        (always at least one record when any is available). Transaction markers (control
        batches) are not records and are skipped. An empty list before the high watermark
        means compaction removed every record in [offset, high watermark) or only markers
        are there.

        `committed` (read_committed): up to the last stable offset only, and without the
        records of aborted transactions.

        Every batch read is checked (CRC-32C): reads stop before damage, and an offset inside
        a damaged range raises LogDamaged (Kafka's CORRUPT_MESSAGE), never garbled records."""
        lso = self.last_stable_offset
        hw = self._check_range(offset)
        if committed:
            hw = min(hw, lso)
        aborted = txn.aborted_by_producer(self.txns.aborted) if committed else None
        return self._around_damage(
            lambda out: self._read_into(out, offset, hw, max_records, max_bytes, aborted), offset
        )

    def _read_into(
        self, out: list, offset: int, hw: int, max_records: int, budget: int, aborted=None
    ) -> None:
        limit = self._damage_limit(offset, hw)
        for seg in self._segments_from(offset):
            for h, batch in seg.read_from(offset, seg.size):
                if h.base_offset >= limit:
                    return
                if h.next_offset <= offset:
                    continue
                if h.is_control or (aborted and txn.is_aborted(aborted, h)):
                    offset = h.next_offset  # a marker, or an aborted transaction's records
                    continue
                recs, used, complete = rb.decode_from(
                    batch, h, offset, max_records - len(out), max(budget, 0), not out
                )
                if h.next_offset > limit:  # the high watermark can lag the log end mid-flush
                    recs = [r for r in recs if r.offset < limit]
                out += recs
                budget -= used
                if not complete or len(out) >= max_records:
                    return
                offset = h.next_offset

    def read_batches(self, offset: int, max_bytes: int, until: int | None = None) -> bytes:
        """Whole raw batches starting with the one containing `offset`, never past the high
        watermark (nor `until`: read_committed readers pass the last stable offset); at least
        one batch even if it exceeds `max_bytes` (as Kafka's Fetch). Checked as ``read``
        checks them."""
        hw = self._check_range(offset)
        if until is not None:
            hw = min(hw, until)
        out = self._around_damage(
            lambda out: self._batches_into(out, offset, hw, max_bytes), offset
        )
        return b"".join(out)

    def _batches_into(self, out: list, offset: int, hw: int, max_bytes: int) -> None:
        limit = self._damage_limit(offset, hw)
        total = 0
        for seg in self._segments_from(offset):
            for h, batch in seg.read_from(offset, seg.size):
                if h.base_offset >= limit:
                    return
                if h.next_offset <= offset:
                    continue
                if out and total + h.size > max_bytes:
                    return
                out.append(bytes(batch))
                total += h.size

    def batch_headers(self, offset: int, until: int, max_batches: int) -> list[rb.BatchHeader]:
        """The headers of the batches holding offsets in [`offset`, `until`), at most
        `max_batches`, never past the high watermark: read header by header, unchecked, with
        no record read (``LogSegment.headers_from``); for readers of offsets and timestamps
        only. OffsetOutOfRange as ``read_batches``."""
        hw = self._check_range(offset)
        until = min(until, hw)
        out: list[rb.BatchHeader] = []
        for seg in self._segments_from(offset):
            for h in seg.headers_from(offset, seg.size):
                if h.base_offset >= until or len(out) >= max_batches:
                    return out
                if h.next_offset > offset:
                    out.append(h)
        return out

    def offset_for_timestamp(self, timestamp: int) -> int | None:
        """The offset of the first record whose timestamp is >= `timestamp`, or None.

        The time index gives the batch to start from; batches whose max timestamp is below
        the target are skipped by their headers; inside a batch only the record prefixes
        (length, timestamp and offset deltas) are read. Damaged ranges are skipped."""
        for _ in range(3):
            try:
                return self._offset_for_timestamp(timestamp)
            except SegmentDamage as exc:
                self.note_damage(exc)  # known now: the next pass jumps over it
        return None

    def _offset_for_timestamp(self, timestamp: int) -> int | None:
        hw = self.high_watermark
        start = self.log_start_offset
        for seg in self._segments_from(start, clamp=True):
            if seg.max_timestamp < timestamp:
                continue
            offset = max(seg.time_scan_start(timestamp), start)
            for h, batch in seg.read_from(offset, seg.size, skip_damage=True):
                if h.base_offset >= hw:
                    return None
                if h.max_timestamp < timestamp or h.next_offset <= offset:
                    continue
                found = rb.first_at_or_after(batch, h, offset, timestamp)
                if found is not None:
                    return found if found < hw else None
        return None

    # ------------------------------------------------------------------ damage

    @property
    def damaged(self) -> tuple[damage.DamagedRange, ...]:
        """The damaged ranges not repaired yet, by offset (not those below the log start:
        retention or delete-records took those offsets anyway)."""
        start = self.log_start_offset
        return tuple(d for d in self._damaged if d.end_offset > start or d.end_offset == 0)

    @property
    def damage_ranges(self) -> tuple[damage.DamagedRange, ...]:
        """Every recorded range, damaged and repaired."""
        return self._ranges

    def _around_damage(self, read_into, offset: int) -> list:
        """Run a read; damage met on the way is recorded and the read ends before it (what was
        read so far is returned), or raises LogDamaged when `offset` lies inside it."""
        for _ in range(3):
            out: list = []
            try:
                read_into(out)
                return out
            except SegmentDamage as exc:
                found = self.note_damage(exc)
                if out:
                    return out
                if found.covers(offset):
                    raise self._damaged_error(found, offset) from None
        raise self._damaged_error(None, offset)

    def _damage_limit(self, offset: int, hw: int) -> int:
        """Where a read from `offset` must stop: the high watermark or the next damaged range;
        LogDamaged when `offset` lies in one."""
        for d in self._damaged:
            if d.covers(offset):
                raise self._damaged_error(d, offset)
            if d.first_offset > offset:
                return min(d.first_offset, hw)
        return hw

    def _damaged_error(self, d: damage.DamagedRange | None, offset: int) -> LogDamaged:
        what = d.describe() if d is not None else "damage was met on every attempt"
        return LogDamaged(
            f"{self.topic}-{self.partition}: offset {offset} cannot be read, the log is damaged "
            f"there ({what}); `manage.py verify_log --topic {self.topic} --repair` (broker "
            "stopped) cuts the damage out",
            topic=self.topic,
            partition=self.partition,
            offset=offset,
            first_offset=d.first_offset if d is not None else None,
            end_offset=d.end_offset if d is not None else None,
        )

    def note_damage(self, exc: SegmentDamage) -> damage.DamagedRange:
        """Record damage a reader met (logged, kept in the partition's damaged-ranges file);
        damage in the active segment closes it, so nothing is appended behind it."""
        if exc.known is not None:
            return exc.known
        seg = exc.segment
        with self._write_lock:
            for d in seg.damage:
                if d.start <= exc.position < max(d.end, d.start + 1):
                    return d
            found = self._locate(seg, exc.position, exc.reason)
            if seg in self._segments:
                self._set_ranges((*self._ranges, found), self._ranges)
                if seg is self._segments[-1] and not self._closed:
                    try:
                        self._roll()
                    except (OSError, StorageError) as roll_error:
                        log.warning(
                            "%s: could not start a new segment after the damage: %s",
                            self.directory,
                            roll_error,
                        )
            return found

    def record_damage(self, ranges) -> None:
        """Replace the recorded ranges (a full verification found these); damage in the active
        segment closes it."""
        with self._write_lock:
            self._set_ranges(ranges, self._ranges)
            if self._segments[-1].damage and not self._closed:
                self._roll()

    def mark_repaired(self, ranges, repaired) -> None:
        """`ranges` were cut out (``verify.repair_partition``): record them as `repaired`."""
        with self._write_lock:
            kept = [r for r in self._ranges if r not in ranges]
            self._set_ranges([*kept, *repaired], self._ranges)

    def _locate(self, seg: LogSegment, position: int, reason: str) -> damage.DamagedRange:
        """The damaged range starting at `position`: the offset expected there (walked from the
        index entry before it) up to the next valid batch (or the segment's end)."""
        expected, at = seg.index.lookup_position(position)
        for pos, batch in seg.iter_batches(at, position):
            expected = rb.parse_header(batch).next_offset
            at = pos + len(batch)
        if at != position:  # the headers before it do not lead here: trust what it says
            expected = rb.peek_size(os.pread(seg.fd, rb.LOG_OVERHEAD, position))[0]
        segs = self._segments
        nxt = segs[segs.index(seg) + 1].base_offset if seg in segs[:-1] else seg.next_offset
        gap = next(
            (
                g
                for g in damage.walk(
                    seg.fd, position, seg.size, expected, seg.contiguous, seg.jumps
                )
                if isinstance(g, damage.Gap)
            ),
            damage.Gap(position, position, reason, None),
        )
        end = gap.next_base if gap.next_base is not None else max(nxt, expected)
        return damage.DamagedRange(
            seg.base_offset,
            os.path.basename(seg.path),
            gap.start,
            gap.end,
            expected,
            end,
            reason,
            self.clock(),
        )

    def _set_ranges(self, ranges, previous) -> None:
        """Install the recorded ranges on the segments; log the new ones, save when changed.
        A range found again keeps the time it was first found."""
        known = {(r.segment, r.start, r.end, r.repaired_ms is None): r for r in previous}
        merged: dict = {}
        for r in ranges:
            key = (r.segment, r.start, r.end, r.repaired_ms is None)
            merged.setdefault(key, known.get(key, r))
        ranges = sorted(merged.values(), key=lambda r: (r.first_offset, r.segment, r.start))
        self._ranges = tuple(ranges)
        self._damaged = tuple(r for r in ranges if r.repaired_ms is None)
        for seg in self._segments:
            seg.set_damage(
                (r for r in self._damaged if r.segment == seg.base_offset),
                (
                    (r.first_offset, r.end_offset)
                    for r in ranges
                    if r.repaired_ms is not None and r.segment == seg.base_offset
                ),
            )
        for key, r in merged.items():
            if key not in known and r.repaired_ms is None:
                log.error(
                    "%s-%d: damaged log: %s; kept in place, reads there answer CORRUPT_MESSAGE "
                    "until `manage.py verify_log --topic %s --repair` cuts it out",
                    self.topic,
                    self.partition,
                    r.describe(),
                    self.topic,
                )
        if set(merged.values()) != set(previous):
            try:
                damage.save(self.directory, self._ranges)
            except OSError as exc:
                log.warning("%s: could not record the damaged ranges: %s", self.directory, exc)

    # ------------------------------------------------------------------ deleting

    def delete_records(self, before_offset: int) -> int:
        """Kafka's DeleteRecords: raise the log start offset to `before_offset` (<= HW)."""
        hw = self.high_watermark
        if before_offset == -1:
            before_offset = hw
        if not self.log_start_offset <= before_offset <= hw:
            raise OffsetOutOfRange(
                self.topic, self.partition, before_offset, self.log_start_offset, hw
            )
        with self._write_lock:
            if before_offset > self.log_start_offset:
                self.log_start_offset = before_offset
        if self.on_log_start_change:
            self.on_log_start_change(self)
        self.delete_segments_below_start()
        return self.log_start_offset

    def delete_segments_below_start(self) -> int:
        start = self.log_start_offset
        return self._delete_where(
            lambda seg, nxt: nxt is not None and nxt <= start, "below log start"
        )

    def apply_retention(self, now: int) -> int:
        """Delete whole segments past retention.ms / retention.bytes; return how many."""
        cfg = self.config
        if not cfg.delete:
            return self.delete_segments_below_start()
        deleted = self.delete_segments_below_start()
        retention_ms = cfg.get("retention.ms")
        if retention_ms >= 0:
            limit = now - retention_ms
            segs = self._segments
            if segs[-1].size and all(0 <= s.max_timestamp < limit for s in segs):
                self.roll()  # everything expired: keep an empty active segment
            deleted += self._delete_where(
                lambda seg, nxt: nxt is not None and 0 <= seg.max_timestamp < limit,
                f"older than retention.ms={retention_ms}",
            )
        retention_bytes = cfg.get("retention.bytes")
        if retention_bytes >= 0:
            excess = [self.size_bytes - retention_bytes]

            def over(seg: LogSegment, nxt: int | None) -> bool:
                if nxt is None or excess[0] - seg.size < 0:
                    return False
                excess[0] -= seg.size
                return True

            deleted += self._delete_where(over, f"beyond retention.bytes={retention_bytes}")
        return deleted

    def _delete_where(self, predicate, why: str) -> int:
        """Delete leading closed segments matching `predicate(segment, next segment base)`."""
        with self._write_lock:
            segs = self._segments
            doomed = []
            for i, seg in enumerate(segs[:-1]):
                if not predicate(seg, segs[i + 1].base_offset):
                    break
                doomed.append(seg)
            if not doomed:
                return 0
            keep = segs[len(doomed) :]
            self._set_segments(keep)
            if keep[0].base_offset > self.log_start_offset:
                self.log_start_offset = keep[0].base_offset
            self.txns.forget_below(self.log_start_offset)
        for seg in doomed:
            log.info(
                "%s: deleting segment %d (%d bytes), %s",
                self.directory,
                seg.base_offset,
                seg.size,
                why,
            )
            _unlink_segment_files(seg)
        self._forget_ranges_of(doomed)
        return len(doomed)

    def _forget_ranges_of(self, gone: list[LogSegment]) -> None:
        bases = {seg.base_offset for seg in gone}
        if any(r.segment in bases for r in self._ranges):
            with self._write_lock:
                kept = [r for r in self._ranges if r.segment not in bases]
                self._set_ranges(kept, self._ranges)

    def _set_segments(self, segments: list[LogSegment]) -> None:
        # one attribute, so a reader never pairs a new segment list with old base offsets
        self._view = (segments, [s.base_offset for s in segments])

    @property
    def _segments(self) -> list[LogSegment]:
        return self._view[0]

    def replace_segment(self, old: LogSegment, install: Callable[[], LogSegment]) -> bool:
        """Swap a cleaned copy in for the closed segment `old`: `install()` moves its files into
        place and returns it, under the write lock. False (nothing done) if `old` is gone."""
        with self._write_lock:
            segs = self._segments
            if old not in segs[:-1]:
                return False
            i = segs.index(old)
            self._set_segments(segs[:i] + [install()] + segs[i + 1 :])
            return True

    def _reset_to(self, offset: int) -> None:
        """Drop every segment and start empty at `offset` (log start beyond the log end)."""
        with self._write_lock:
            old = self._segments
            new = self._new_segment(offset)
            self._set_segments([new])
            self._next_offset = self.high_watermark = self._flushed = offset
        for seg in old:
            _unlink_segment_files(seg)
        fsync_dir(self.directory)
        self._forget_ranges_of(old)

    def truncate_all(self) -> None:
        """Remove every record: used when a topic is purged to its end."""
        self.delete_records(self.high_watermark)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush and close. An offline partition (a failed sync) is closed without claiming
        its tail is on disk: its recovery point stays at the last good sync."""
        with self._write_lock:
            if self._closed:
                return
            try:
                with self._flush_lock:
                    if self._offline is None:
                        sealed = list(self._unsynced)
                        self._flush_or_go_offline(lambda: self._flush_sealed(sealed))
                        self._flush_or_go_offline(self._segments[-1].flush)
                        self._note_flushed(self._next_offset)
                if self._offline is None:
                    self.snapshot_producers()
            except StorageError:
                pass  # logged; the recovery point says what is known to be on disk
            except OSError as exc:  # the snapshot: the next open scans the log instead
                log.warning("%s: no producer state snapshot written: %s", self.directory, exc)
            finally:
                try:
                    self._verified_at_close = self.verified_point()
                except OSError as exc:
                    log.warning("%s: no verified point recorded: %s", self.directory, exc)
                self._closed = True
                for seg in self._segments:
                    seg.close()

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"hw={self.high_watermark}, segments={len(self._segments)})"
        )


def _unlink_segment_files(seg: LogSegment) -> None:
    for path in seg.file_paths():
        try:
            os.rename(path, path + ".deleted")
            os.unlink(path + ".deleted")
        except FileNotFoundError:
            pass


def _finish_interrupted_operations(directory: str) -> None:
    """Complete or undo what a crash interrupted, as Kafka's LogLoader does:
    ``.cleaned`` (a cleaner copy not yet committed) and ``.deleted`` files are removed;
    ``.swap`` files (a committed cleaner copy) replace the segment files they shadow."""
    shutil.rmtree(os.path.join(directory, "cleaner-tmp"), ignore_errors=True)
    checkpoint.remove_leftover_tmp(directory)  # of damaged-ranges.json
    names = os.listdir(directory)
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith((".cleaned", ".deleted")):
            log.info("%s: removing leftover %s", directory, name)
            os.unlink(path)
    swapped = {name.split(".")[0] for name in names if name.endswith(".log.swap")}
    for name in names:
        if name.endswith(".swap"):
            final = os.path.join(directory, name[: -len(".swap")])
            log.warning("%s: completing interrupted segment swap of %s", directory, name)
            os.replace(os.path.join(directory, name), final)
    for prefix in swapped:  # a half-finished swap may pair old indexes with the new log
        for suffix in (".index", ".timeindex"):
            try:
                os.unlink(os.path.join(directory, prefix + suffix))
            except FileNotFoundError:
                pass
    fsync_dir(directory)


def _recover(segments: list[LogSegment], recovery_point: int, jumps, prefix) -> dict:
    """Re-validate everything at or after the recovery point (the active segment whole).
    Damage is returned per segment, kept in place: only a torn tail of the active segment past
    the recovery point is cut. The segments after damage stay: their records were written (and
    may have been acknowledged) after it, and their offsets still follow on."""
    bases = [s.base_offset for s in segments]
    first = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
    found = {}
    for seg, nxt in zip(segments[:first], segments[1 : first + 1], strict=True):
        found[seg] = seg.load_closed(nxt.base_offset, jumps.get(seg.base_offset, ()))
    for i in range(first, len(segments)):
        seg = segments[i]
        seg_jumps = jumps.get(seg.base_offset, ())
        if i == len(segments) - 1:
            found[seg] = seg.load_active(recovery_point, seg_jumps, prefix)
            break
        position = seg.index.lookup(recovery_point)[1] if i == first else 0
        found[seg] = seg.rebuild_from(position, None, seg_jumps)
        seg.add_closing_entry()
    return found


def collect_damage(
    segments: list[LogSegment], recorded: list, found: dict, rp: int, now: int
) -> list[damage.DamagedRange]:
    """Every range known after an open: the damage the scans found, the recorded ranges of the
    segments that were not scanned, and offsets missing between segments or at the end (below
    the recovery point, so they were on disk). Sets each damaged segment's next offset past
    its damage, so offsets are never reused. Repaired ranges of live segments are kept."""
    live = {s.base_offset: s for s in segments}
    scanned = {seg.base_offset for seg, rebuilt in found.items() if rebuilt.scanned}
    out = [
        r
        for r in recorded
        if r.segment in live and (r.repaired_ms is not None or r.segment not in scanned)
    ]
    for i, seg in enumerate(segments):
        nxt = segments[i + 1].base_offset if i + 1 < len(segments) else None
        name = os.path.basename(seg.path)
        before = seg.next_offset
        gaps = found[seg].gaps if seg in found else []
        for g in gaps:
            end = g.next_base
            if end is None:  # a damaged tail, kept: up to the next segment or the last log end
                end = max(nxt if nxt is not None else rp, g.first_offset)
                seg.next_offset = max(seg.next_offset, end)
            out.append(
                damage.DamagedRange(
                    seg.base_offset, name, g.start, g.end, g.first_offset, end, g.reason, now
                )
            )
        end = nxt if nxt is not None else rp
        if seg.next_offset < end and (nxt is None or seg.contiguous):
            jump = (seg.next_offset, end)
            repaired = any(
                (r.first_offset, r.end_offset) == jump and r.segment == seg.base_offset for r in out
            )
            if not repaired:
                what = "the next segment starts" if nxt is not None else "the recovery point is"
                out.append(
                    damage.DamagedRange(
                        seg.base_offset,
                        name,
                        seg.size,
                        seg.size,
                        seg.next_offset,
                        end,
                        f"the file ends at offset {seg.next_offset} but {what} at {end}: "
                        "it was cut short",
                        now,
                    )
                )
            seg.next_offset = end
        if nxt is not None and seg.next_offset != before:
            seg.add_closing_entry()  # naming the new end, which the next open then trusts
    return out


def _jumps_by_segment(recorded: list[damage.DamagedRange]) -> dict[int, frozenset]:
    """Per segment, the offset jumps repaired ranges left (not damage when met again)."""
    out: dict[int, set] = {}
    for r in recorded:
        if r.repaired_ms is not None:
            out.setdefault(r.segment, set()).add((r.first_offset, r.end_offset))
    return {k: frozenset(v) for k, v in out.items()}


def _check_contiguous(segments: list[LogSegment], directory: str) -> None:
    for prev, seg in zip(segments, segments[1:], strict=False):
        if seg.base_offset < prev.next_offset:
            raise CorruptRecord(
                f"{directory}: segment {seg.base_offset} overlaps the previous one, which ends "
                f"at offset {prev.next_offset}"
            )


__all__ = ["PartitionLog", "NO_TIMESTAMP", "fsync_dir"]
