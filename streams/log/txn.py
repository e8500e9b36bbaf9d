"""A partition's transactions: the open ones, the last stable offset and the aborted index.

Kafka keeps the same per partition (``ProducerStateManager``'s ongoing transactions and the
``.txnindex`` files of ``TransactionIndex``):

- ``open``: producer id -> offset of the first batch of its open transaction here. The last
  stable offset (LSO) is the lowest of those, else the high watermark: a read_committed reader
  never reads past it.
- ``aborted``: one entry per aborted transaction (producer id, first offset, last offset = the
  ABORT marker's, the LSO once it was aborted), in Kafka's 34-byte ``.txnindex`` entry layout
  (int16 version 0, int64 producer id, int64 first offset, int64 last offset, int64 LSO), in
  ``aborted.txnindex`` in the partition directory, appended and fsynced after the marker is.
  Fetch answers read_committed consumers with the entries overlapping what it returns, so they
  drop those producers' records up to the marker.

Both change only under the partition's write lock, in the same step that writes the batch or
marker, so a reader never sees the data of a transaction as stable before its ABORT entry.

Recovery: a partition that ever held a transactional batch has ``txn.checkpoint`` (an LSO it
once had: every transaction open later started at or after it). At open, the index file is
read (entries past the log end are dropped: recovery cut them) and the log is scanned from the
checkpoint, batch headers only plus each marker's key, to rebuild the open transactions and any
abort whose index entry the crash lost. The checkpoint is rewritten with each store checkpoint.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
from typing import NamedTuple

from streams.log import checkpoint
from streams.log import records as rb

log = logging.getLogger(__name__)

INDEX_FILE = "aborted.txnindex"
CHECKPOINT_FILE = "txn.checkpoint"
_ENTRY = struct.Struct(">hqqqq")  # Kafka's AbortedTxn (TransactionIndex.java)
_MARKER_KEY = struct.Struct(">hh")  # version, type
_MARKER_VALUE = struct.Struct(">hi")  # version, coordinator epoch
ABORT, COMMIT = 0, 1


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def marker_batch(producer_id: int, epoch: int, commit: bool, coordinator_epoch: int, now: int):
    """A control batch holding one COMMIT or ABORT marker (Kafka's EndTransactionMarker)."""
    key = _MARKER_KEY.pack(0, COMMIT if commit else ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    return rb.build_batch(
        [rb.ProducerRecord(value, key)],
        now_ms=now,
        producer_id=producer_id,
        producer_epoch=epoch,
        attributes_extra=rb.ATTR_TRANSACTIONAL | rb.ATTR_CONTROL,
    )


def marker_type(batch: bytes, h: rb.BatchHeader) -> int | None:
    """COMMIT or ABORT for a control batch, None when it is no transaction marker."""
    recs = rb.decode_records(batch, h)
    if not recs or recs[0].key is None or len(recs[0].key) < _MARKER_KEY.size:
        return None
    _, kind = _MARKER_KEY.unpack_from(recs[0].key)
    return kind if kind in (ABORT, COMMIT) else None


def is_transactional(h: rb.BatchHeader) -> bool:
    return bool(h.attributes & rb.ATTR_TRANSACTIONAL)


def aborted_by_producer(aborted) -> dict[int, list[tuple[int, int]]]:
    """Producer id -> (first offset, marker offset) of each of its aborted transactions."""
    out: dict[int, list[tuple[int, int]]] = {}
    for a in aborted:
        out.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
    return out


def is_aborted(by_producer: dict[int, list[tuple[int, int]]], h: rb.BatchHeader) -> bool:
    """Whether a data batch belongs to an aborted transaction."""
    if not h.attributes & rb.ATTR_TRANSACTIONAL:
        return False
    ranges = by_producer.get(h.producer_id)
    return bool(ranges) and any(first <= h.base_offset <= last for first, last in ranges)


class PartitionTxns:
    """The transaction state of one partition (see the module docstring). Mutated only under
    the partition's write lock; read without it (plain attribute reads)."""

    def __init__(self, directory: str):
        self.directory = directory
        self.open: dict[int, int] = {}
        self.aborted: tuple[AbortedTxn, ...] = ()
        self.active = os.path.exists(os.path.join(directory, CHECKPOINT_FILE))
        self._unsaved: list[AbortedTxn] = []
        # save() runs outside the write lock, after the marker's fsync, from whichever thread
        # wrote the marker: one at a time, or two would append the same entries twice
        self._save_lock = threading.Lock()

    # ------------------------------------------------------------------ under the write lock

    def begin_if_new(self, h: rb.BatchHeader, base: int) -> None:
        """A transactional data batch written at `base`: opens its producer's transaction
        here unless one is open already."""
        if h.producer_id not in self.open:
            if not self.active:
                self.active = True
                self.save_checkpoint(base)
            self.open[h.producer_id] = base

    def end(self, producer_id: int, commit: bool, marker_offset: int, hw: int) -> None:
        """A marker was written at `marker_offset`: the producer's transaction here is over;
        an abort is added to the aborted index (in memory now, on disk by ``save``)."""
        first = self.open.pop(producer_id, None)
        if first is None or commit:
            return
        entry = AbortedTxn(producer_id, first, marker_offset, self.stable_offset(hw))
        self.aborted = (*self.aborted, entry)
        self._unsaved.append(entry)

    # ------------------------------------------------------------------ reads

    def stable_offset(self, hw: int) -> int:
        opened = self.open
        if not opened:
            return hw
        return min(hw, min(opened.values()))

    def aborted_in(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping [start, end)."""
        return [
            (a.producer_id, a.first_offset)
            for a in self.aborted
            if a.last_offset >= start and a.first_offset < end
        ]

    # ------------------------------------------------------------------ files

    def save(self) -> None:
        """Append the aborts not yet on disk to the index file (fsynced). Thread-safe: one
        saver at a time, and ``end`` may add entries meanwhile (kept for the next save)."""
        with self._save_lock:
            pending = list(self._unsaved)  # kept until written: the checkpoint stays below them
            if not pending:
                return
            data = b"".join(_ENTRY.pack(0, *a) for a in pending)
            path = os.path.join(self.directory, INDEX_FILE)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.lseek(fd, 0, os.SEEK_END)
                os.write(fd, data)
                os.fdatasync(fd)
            finally:
                os.close(fd)
            del self._unsaved[: len(pending)]  # in place: `end` appends to this list

    def save_checkpoint(self, lso: int) -> None:
        """Record where the next open scans from: `lso`, or the first offset of an abort
        whose index entry is not on disk yet, if lower."""
        unsaved = self._unsaved
        if unsaved:
            lso = min(lso, *(a.first_offset for a in unsaved))
        checkpoint.write_atomic(os.path.join(self.directory, CHECKPOINT_FILE), b"%d\n" % lso)

    def load(self, plog) -> None:
        """Rebuild from the index file and a scan of the log from the checkpoint."""
        if not self.active:
            return
        try:
            with open(os.path.join(self.directory, CHECKPOINT_FILE), "rb") as f:
                start = int(f.read().strip() or 0)
        except (OSError, ValueError) as exc:
            why = f"unreadable {CHECKPOINT_FILE} ({exc}); scanning the whole log"
            log.warning("%s: %s", plog, why)
            start = 0
        end = plog.log_end_offset
        entries = []
        seen: set[tuple[int, int]] = set()
        try:
            with open(os.path.join(self.directory, INDEX_FILE), "rb") as f:
                data = f.read()
            for pos in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
                _, *fields = _ENTRY.unpack_from(data, pos)
                a = AbortedTxn(*fields)
                # past the log end: cut by recovery; twice: an index an older version wrote
                # from two threads (a reader would skip the producer up to a second marker)
                if a.last_offset < end and (a.producer_id, a.first_offset) not in seen:
                    seen.add((a.producer_id, a.first_offset))
                    entries.append(a)
        except FileNotFoundError:
            pass
        known = {(a.producer_id, a.first_offset) for a in entries}
        self.aborted = ()
        start = max(min(start, end), plog.log_start_offset)
        for seg in plog.segments:
            if seg.next_offset <= start:
                continue
            for h, batch in seg.batches_from(max(start, seg.base_offset), seg.size):
                if h.next_offset <= start or not is_transactional(h):
                    continue
                if not h.is_control:
                    self.begin_if_new(h, h.base_offset)
                    continue
                kind = marker_type(bytes(batch), h)
                if kind is not None:
                    self.end(h.producer_id, kind == COMMIT, h.base_offset, h.base_offset)
        lost = [a for a in self.aborted if (a.producer_id, a.first_offset) not in known]
        self.aborted = tuple(sorted([*entries, *lost], key=lambda a: a.last_offset))
        self._unsaved = lost
        if lost:
            self.save()
        if lost or self.open:
            log.info(
                "%s: %d open transaction(s) and %d abort(s) missing from %s recovered from the log",
                plog,
                len(self.open),
                len(lost),
                INDEX_FILE,
            )

    def forget_below(self, start: int) -> None:
        """Drop index entries wholly below the log start (retention took those offsets)."""
        kept = tuple(a for a in self.aborted if a.last_offset >= start)
        if len(kept) != len(self.aborted):
            self.aborted = kept
