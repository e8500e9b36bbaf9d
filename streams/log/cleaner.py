"""Log compaction for ``cleanup.policy=compact``: keep the latest record per key.

One pass over a partition:

1. The cleanable range is the prefix of closed segments whose records are all older than
   ``min.compaction.lag.ms`` and below the last stable offset (a record of a transaction still
   open may yet be aborted: it must not supersede anything); the active segment is never
   touched.
2. A map key -> last offset is built over that range, leaving out records of aborted
   transactions (the partition's aborted index, ``txn``): they never supersede anything.
3. Each cleanable segment is copied, keeping a record only if it is the latest for its key, with
   its original offset (offsets get gaps; batches keep their boundaries). Records of aborted
   transactions are dropped; transaction markers (control batches) are kept.
4. Tombstones (null values) are kept until a delete horizon: the first pass that keeps one
   stamps its batch with horizon = now + ``delete.retention.ms`` (KIP-534: attribute bit 6, the
   horizon in baseTimestamp, record timestamps re-based so they read back unchanged); a pass after
   the horizon drops it. A consumer that reads from offset 0 within ``delete.retention.ms`` sees
   the deletion.
5. Swap, as Kafka's cleaner: the copy is written in ``cleaner-tmp/`` and fsynced, then renamed
   to ``<name>.swap`` (the commit point), then over the segment's files, all under the
   partition's write lock. A crash before the commit point leaves the old segment; after it,
   the next open finishes the swap and rebuilds the segment's indexes. Readers holding the old
   segment keep reading its (unlinked) file.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterable

from streams.log import records as rb
from streams.log import txn
from streams.log.partition import PartitionLog, fsync_dir
from streams.log.records import ProducerRecord, Record
from streams.log.segment import LogSegment, SegmentDamage

log = logging.getLogger(__name__)

TMP_DIR = "cleaner-tmp"


class Cleaner:
    """Compacts partitions. `offsets` is the store's cleaner checkpoint (first dirty offset)."""

    def __init__(self, offsets: dict[tuple[str, int], int], crash_at: str | None = None):
        self.offsets = offsets
        self.crash_at = crash_at  # tests: raise at "copied" or "committed" to simulate a crash

    def clean(self, plog: PartitionLog, now: int, force: bool = False) -> bool:
        """One pass; False when there was nothing (worth) cleaning. Damaged segments and the
        ones after them are left alone (reading them would lose what follows the damage);
        damage met on the way is recorded and ends the pass."""
        try:
            return self._clean(plog, now, force)
        except SegmentDamage as exc:
            found = plog.note_damage(exc)
            log.warning(
                "compaction of %s-%d stopped at damaged data (%s)",
                plog.topic,
                plog.partition,
                found.describe(),
            )
            return False

    def _clean(self, plog: PartitionLog, now: int, force: bool) -> bool:
        cleanable = self._cleanable_segments(plog, now)
        if not cleanable:
            return False
        key = (plog.topic, plog.partition)
        end = cleanable[-1].next_offset
        if not force and not self._worth_cleaning(plog, cleanable, now):
            return False
        latest = self._latest_offsets(plog, cleanable)
        changed = sum(1 for seg in cleanable if self._clean_segment(plog, seg, latest, now))
        self.offsets[key] = end
        plog.cleaner_next_horizon = _min_horizon(plog.segments[: len(cleanable)])
        if changed:
            log.info(
                "compacted %s-%d up to offset %d (%d segments rewritten)",
                plog.topic,
                plog.partition,
                end,
                changed,
            )
        return True

    # ------------------------------------------------------------------ selection

    @staticmethod
    def _cleanable_segments(plog: PartitionLog, now: int) -> list[LogSegment]:
        lag = plog.config.get("min.compaction.lag.ms")
        stable = plog.last_stable_offset
        segments = plog.segments
        out = []
        for i, seg in enumerate(segments[:-1]):
            if seg.damage or (lag > 0 and seg.max_timestamp > now - lag):
                break
            if segments[i + 1].base_offset > stable:  # holds an open transaction's records
                break
            out.append(seg)
        return out

    def _worth_cleaning(self, plog: PartitionLog, cleanable: list[LogSegment], now: int) -> bool:
        first_dirty = self.offsets.get((plog.topic, plog.partition), 0)
        total = sum(s.size for s in cleanable)
        dirty = sum(s.size for s in cleanable if s.base_offset >= first_dirty)
        horizon = plog.cleaner_next_horizon
        if horizon is not None and horizon <= now:
            return True
        return total > 0 and dirty / total >= plog.config.get("min.cleanable.dirty.ratio")

    @staticmethod
    def _latest_offsets(plog: PartitionLog, segments: list[LogSegment]) -> dict[bytes, int]:
        latest: dict[bytes, int] = {}
        start = plog.log_start_offset
        aborted = txn.aborted_by_producer(plog.txns.aborted)
        for seg in segments:
            for h, batch in seg.read_from(seg.base_offset, seg.size):
                if h.is_control or txn.is_aborted(aborted, h):
                    continue
                for r in rb.decode_records(batch, h):
                    if r.offset >= start and r.key is not None:
                        latest[r.key] = r.offset
        return latest

    # ------------------------------------------------------------------ copying

    def _clean_segment(self, plog, seg: LogSegment, latest: dict[bytes, int], now: int) -> bool:
        """Rewrite `seg` if anything in it can go or needs a delete horizon; True if it did."""
        retention = plog.config.get("delete.retention.ms")
        start = plog.log_start_offset
        out_batches: list[tuple[bytes, int, int, int]] = []
        changed = False
        aborted = txn.aborted_by_producer(plog.txns.aborted)
        for h, batch in seg.read_from(seg.base_offset, seg.size):
            if h.is_control:
                out_batches.append((bytes(batch), h.base_offset, h.next_offset, h.max_timestamp))
                continue
            if txn.is_aborted(aborted, h):
                changed = True
                continue
            horizon = h.base_timestamp if h.attributes & rb.ATTR_DELETE_HORIZON else None
            kept: list[Record] = []
            for r in rb.decode_records(batch, h):
                superseded = r.offset < start or r.key is None or latest.get(r.key) != r.offset
                expired = r.value is None and horizon is not None and horizon <= now
                if not (superseded or expired):
                    kept.append(r)
            has_tombstone = any(r.value is None for r in kept)
            if len(kept) == h.count and (horizon is not None or not has_tombstone):
                out_batches.append((bytes(batch), h.base_offset, h.next_offset, h.max_timestamp))
                continue
            changed = True
            if kept:
                if has_tombstone and horizon is None:
                    horizon = now + retention
                out_batches.append(_rebuild(kept, h, horizon if has_tombstone else None, now))
        if changed:
            self._swap(plog, seg, out_batches, now)
        return changed

    def _swap(self, plog: PartitionLog, old: LogSegment, batches, now: int) -> None:
        swap_segment(plog, old, batches, now, crash_at=self.crash_at)


def swap_segment(
    plog: PartitionLog,
    old: LogSegment,
    batches: Iterable[tuple[bytes, int, int, int]],
    now: int,
    *,
    before_commit: Callable[[], None] | None = None,
    crash_at: str | None = None,
) -> bool:
    """Replace the closed segment `old` by a copy made of `batches` ((bytes, base offset, next
    offset, max timestamp), in order), with the crash-safe swap described in the module
    docstring; `before_commit` runs once the copy is on disk, before the commit point (the
    repair records the cut there). False (nothing changed) if `old` is gone meanwhile."""
    tmp = os.path.join(plog.directory, TMP_DIR)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    copy = LogSegment(tmp, old.base_offset, plog.config.get("index.interval.bytes"), False)
    for data, base, nxt, max_ts in batches:
        copy.append(data, base, nxt, max_ts, now)
    copy.next_offset = max(copy.next_offset, old.next_offset)
    copy.seal()
    paths = copy.file_paths()
    copy.close()
    if crash_at == "copied":
        raise RuntimeError("simulated crash after copying")
    if before_commit is not None:
        before_commit()

    def install() -> LogSegment:
        for path in paths:
            os.rename(path, os.path.join(plog.directory, os.path.basename(path) + ".swap"))
        fsync_dir(plog.directory)  # commit point: the swap files exist
        if crash_at == "committed":
            raise RuntimeError("simulated crash after the commit point")
        for path in paths:
            name = os.path.basename(path)
            os.replace(
                os.path.join(plog.directory, name + ".swap"), os.path.join(plog.directory, name)
            )
        fsync_dir(plog.directory)
        new = LogSegment(
            plog.directory, old.base_offset, plog.config.get("index.interval.bytes"), False
        )
        new.load_closed()
        new.next_offset = max(new.next_offset, old.next_offset)
        new.contiguous = old.contiguous
        new.closed = True
        return new

    done = plog.replace_segment(old, install)
    shutil.rmtree(tmp, ignore_errors=True)
    return done


def _rebuild(kept: list[Record], h: rb.BatchHeader, horizon: int | None, now: int):
    base = kept[0].offset
    data = rb.build_batch(
        [ProducerRecord(r.value, r.key, r.headers, r.timestamp_ms) for r in kept],
        base_offset=base,
        now_ms=now,
        codec=h.codec,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        attributes_extra=(h.attributes & rb.ATTR_TRANSACTIONAL)
        | (rb.ATTR_DELETE_HORIZON if horizon is not None else 0),
        base_ts=horizon,
        offset_deltas=[r.offset - base for r in kept],
    )
    return data, base, kept[-1].offset + 1, max(r.timestamp_ms for r in kept)


def _min_horizon(segments: list[LogSegment]) -> int | None:
    """Earliest delete horizon among surviving tombstone batches: when to clean again."""
    best = None
    for seg in segments:
        for h, _ in seg.batches_from(seg.base_offset, seg.size):  # headers only; damage skipped
            if h.attributes & rb.ATTR_DELETE_HORIZON and (best is None or h.base_timestamp < best):
                best = h.base_timestamp
    return best
