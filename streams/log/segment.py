"""A log segment: one ``<base offset>.log`` file of record batches plus its two sparse indexes.

File names are the base offset as 20 zero-padded digits, as in Kafka. The ``.log`` file is the
concatenation of v2 record batches exactly as they travel on the wire (see ``records``).

Index rule: after ``index.interval.bytes`` of log since the last entry, the next batch gets an
offset-index entry ``(batch base offset, position)`` and a time-index entry summarising everything
*before* that batch ``(max timestamp so far, base offset - 1)``. Summarising the prefix means a
recovery that restarts at an index entry keeps a time index that is exact for what it kept. A
closing entry ``(segment max timestamp, last offset)`` is added when the segment is rolled.

Thread-safety: ``append``/``truncate`` are called by the partition's single writer. Readers call
``iter_batches`` with an end position they captured from ``size``; ``size`` is advanced only after
the bytes are written, so readers only ever see whole batches and never wait for the writer.
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c as _crc32c

from streams.errors import CorruptRecord
from streams.log import damage
from streams.log import records as rb
from streams.log.index import OffsetIndex, TimeIndex

log = logging.getLogger(__name__)

CHUNK = 256 * 1024
_HEADERS_CHUNK = 16 * 1024  # headers_from reads batches up to this size in chunks
_BASE = struct.Struct(">q")
NO_TIMESTAMP = -1


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class SegmentGap(NamedTuple):
    """Damaged bytes found in a segment (see ``damage``): [start, end) of the file, covering
    offsets from `first_offset` up to `next_base` (None: nothing valid follows in the file)."""

    start: int
    end: int
    first_offset: int
    next_base: int | None
    reason: str


class Rebuilt(NamedTuple):
    cut: int  # bytes cut from a torn tail
    gaps: list[SegmentGap]  # damage kept in place
    scanned: bool = True  # False: restored from the indexes without reading the batches


class SegmentDamage(Exception):
    """A reader met damaged bytes at `position` (`known`: a range already recorded)."""

    def __init__(self, segment: LogSegment, position: int, reason: str, known=None):
        super().__init__(f"{segment.path}: damaged batch at byte {position}: {reason}")
        self.segment, self.position, self.reason, self.known = segment, position, reason, known


class LogSegment:
    def __init__(
        self,
        directory: str,
        base_offset: int,
        index_interval: int = 4096,
        contiguous: bool = True,
    ):
        # contiguous: every batch starts where the previous one ended (false on compacted
        # topics, whose cleaned segments have gaps); recovery then checks exact base offsets.
        self.contiguous = contiguous
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval = index_interval
        prefix = os.path.join(directory, segment_name(base_offset))
        self.path = prefix + ".log"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.index = OffsetIndex(prefix + ".index", base_offset)
        self.time_index = TimeIndex(prefix + ".timeindex", base_offset)
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.first_append_ms: int | None = None  # wall clock of the first batch, for segment.ms
        self._bytes_since_index = 0
        self._warned_index = False
        self.closed = False
        self.set_damage(())
        # (position, CRC-32C of the file's first `position` bytes): how far the active segment
        # is known good, for the verified-position checkpoint (see ``load_active``)
        self.checksum = (0, 0)

    # ---------------------------------------------------------------- loading

    def load_closed(self, next_base: int | None = None, jumps=frozenset()) -> Rebuilt:
        """Restore state of a rolled segment from its closing time-index entry, when that entry
        agrees with where the next segment starts; otherwise rebuild it by scanning (damage it
        finds is returned, never cut: a closed segment was synced when it was rolled)."""
        last = self.time_index.last
        if last is not None and self.index.is_sane(self.size) and self.time_index.is_sane():
            max_ts, last_offset = last
            fits = next_base is None or (
                last_offset == next_base - 1
                if self.contiguous
                else self.base_offset <= last_offset < next_base
            )
            if fits:
                self.max_timestamp = max_ts
                self.next_offset = last_offset + 1
                self.first_append_ms = max_ts
                return Rebuilt(0, [], scanned=False)
            log.warning(
                "%s: closing index entry (offset %d) disagrees with the next segment (%s); "
                "rebuilding the indexes",
                self.path,
                last_offset,
                next_base,
            )
        rebuilt = self.rebuild_from(0, jumps=jumps)
        self.add_closing_entry()  # so the next open reads it instead of scanning again
        return rebuilt

    def load_active(
        self, cut_tail_from: int, jumps=frozenset(), verified: tuple[int, int] | None = None
    ) -> Rebuilt:
        """Check the active segment. `verified`: (position, CRC-32C of the bytes before it), the
        last verified point a checkpoint recorded (at a clean shutdown: the whole file).

        The whole file's CRC-32C is computed (at C speed); when the verified prefix still has
        its checksum, only what lies after it is validated batch by batch (after a clean
        shutdown, usually nothing); when it does not (damage) or none was recorded, every batch
        is. Anything off rebuilds the indexes, and damage is reported (a damaged tail that
        starts at or after `cut_tail_from`, the recovery point, is a torn write and is cut)."""
        trusted, crc = self._file_checksum(verified)
        if trusted == self.size and self._restore_tail():
            self.checksum = (self.size, crc)
            return Rebuilt(0, [])
        if trusted == 0 and self._verify_all(jumps):
            self.checksum = (self.size, crc)
            return Rebuilt(0, [])
        rebuilt = self.rebuild_from(trusted, cut_tail_from, jumps)
        self.checksum = (self.size, self._file_checksum(None)[1])
        return rebuilt

    def _indexed_past_end(self) -> tuple[int, int] | None:
        """(offset, position) of the first .index entry at or past the end of the file, when
        both indexes are in order and the .timeindex reaches the offset just before it (the two
        are written together: a batch was there, and the file was cut short after); else None
        (garbage appended to one index names nothing)."""
        offsets, positions = self.index.rel_offsets, self.index.positions
        if not positions or positions[-1] < self.size:
            return None
        if not (self.index.is_sane(1 << 63) and self.time_index.is_sane()):
            return None
        i = bisect.bisect_left(positions, self.size)
        offset = self.base_offset + offsets[i]
        last = self.time_index.last
        if last is None or last[1] < offset - 1:
            return None
        return offset, positions[i]

    def _file_checksum(self, verified: tuple[int, int] | None) -> tuple[int, int]:
        """(how many leading bytes match the recorded checksum, CRC-32C of the whole file)."""
        position, expected = verified if verified is not None else (0, 0)
        if not 0 <= position <= self.size:
            position = 0
        crc, at, trusted = 0, 0, 0
        while at < self.size:
            if at == position:
                trusted = position if crc == expected else 0
            stop = position if at < position else self.size
            chunk = os.pread(self.fd, min(CHUNK * 16, stop - at), at)
            if not chunk:
                break
            crc = _crc32c.crc32c(chunk, crc)
            at += len(chunk)
        if at == position:
            trusted = position if crc == expected else 0
        return trusted, crc

    def advance_checksum(self) -> tuple[int, int]:
        """Extend the checksum of the verified prefix over what was appended since (the
        maintenance thread, with each checkpoint): returns (position, CRC-32C)."""
        position, crc = self.checksum
        end = self.size
        while position < end:
            chunk = os.pread(self.fd, min(CHUNK * 16, end - position), position)
            if not chunk:
                break
            crc = _crc32c.crc32c(chunk, crc)
            position += len(chunk)
        self.checksum = (position, crc)
        return self.checksum

    def _restore_tail(self) -> bool:
        """Restore the tail state from the indexes and the batch headers after the last index
        entry (the bytes are known good); False when the indexes do not fit the log."""
        if not (self.index.is_sane(self.size) and self.time_index.is_sane()):
            return False
        offset, position = self.index.lookup(2**62)
        if position and not self._entry_is_valid(offset, position):
            return False
        last = self.time_index.last
        next_offset = max(self.base_offset, offset)
        max_ts = last[0] if last else NO_TIMESTAMP
        end = position
        for pos, h in self._headers_from(position, self.size):
            next_offset, max_ts, end = h.next_offset, max(max_ts, h.max_timestamp), pos + h.size
        if end != self.size or (last is not None and last[1] >= max(next_offset, 1)):
            return False
        self.next_offset, self.max_timestamp = next_offset, max_ts
        self._bytes_since_index = self.size - position
        if self.size:
            self.first_append_ms = self._first_timestamp()
        return True

    def _verify_all(self, jumps) -> bool:
        """One pass over the whole file: every batch valid, every index entry at a batch start
        with its base offset, the time index before the end. Sets the tail state when so."""
        entries, positions = self.index.rel_offsets, self.index.positions
        i, next_offset, max_ts = 0, self.base_offset, NO_TIMESTAMP
        walked = damage.walk(self.fd, 0, self.size, self.base_offset, self.contiguous, jumps)
        for item in walked:
            if isinstance(item, damage.Gap):
                return False
            while i < len(positions) and positions[i] <= item.position:
                entry_offset = entries[i] + self.base_offset
                if positions[i] != item.position or entry_offset != item.base_offset:
                    return False
                i += 1
            next_offset = item.next_offset
            max_ts = max(max_ts, item.max_timestamp)
        last = self.time_index.last
        if i < len(positions) or not self.time_index.is_sane():
            return False
        if last is not None and not self.base_offset <= last[1] < max(next_offset, 1):
            return False
        self.next_offset, self.max_timestamp = next_offset, max_ts
        self._bytes_since_index = self.size - (positions[-1] if positions else 0)
        if self.size:
            self.first_append_ms = self._first_timestamp()
        return True

    def _first_timestamp(self) -> int:
        head = os.pread(self.fd, rb.HEADER_SIZE, 0)
        if len(head) < rb.HEADER_SIZE:
            return NO_TIMESTAMP
        return rb.parse_header(head).max_timestamp

    def rebuild_from(
        self, position: int, cut_tail_from: int | None = None, jumps=frozenset()
    ) -> Rebuilt:
        """Re-validate every batch from `position` (an index entry position or 0) and rebuild
        the indexes from there over the valid batches. Damaged bytes between valid batches are
        kept and returned as gaps; a damaged tail (nothing valid after it) whose first offset
        is at or after `cut_tail_from` is cut (a torn write), else kept and returned too.
        `jumps`: offset jumps that are repaired ranges, not damage."""
        # an active segment cut short at a batch boundary leaves nothing torn to find; its
        # indexes, written before the cut, still name a batch past the end
        named = self._indexed_past_end() if position == 0 and cut_tail_from is not None else None
        if position == 0:
            self.index.reset()
            self.time_index.reset()
            self.max_timestamp = NO_TIMESTAMP
            self.next_offset = self.base_offset
        elif not self._entry_is_valid(*self.index.lookup_position(position)):
            log.warning(
                "%s: index entry at position %d does not point at a batch; "
                "re-validating the whole segment",
                self.path,
                position,
            )
            return self.rebuild_from(0, cut_tail_from, jumps)
        else:
            offset, position = self.index.lookup_position(position)
            # keep the (verified) entry we restart from; the scan re-adds the ones after it
            self.index.truncate_to_position(position + 1)
            self.time_index.truncate_after_offset(offset)
            last = self.time_index.last
            self.max_timestamp = last[0] if last else NO_TIMESTAMP
            self.next_offset = offset
        self._bytes_since_index = 0
        gaps = []
        walked = damage.walk(self.fd, position, self.size, self.next_offset, self.contiguous, jumps)
        for item in walked:
            if isinstance(item, damage.Gap):
                gaps.append(
                    SegmentGap(item.start, item.end, self.next_offset, item.next_base, item.reason)
                )
                continue
            self._index_batch(item.position, item.base_offset, item.size)
            self.next_offset = item.next_offset
            self.max_timestamp = max(self.max_timestamp, item.max_timestamp)
        cut = 0
        tail = gaps[-1] if gaps and gaps[-1].next_base is None else None
        if tail is not None and cut_tail_from is not None and tail.first_offset >= cut_tail_from:
            gaps.pop()
            cut = self.size - tail.start
            log.warning(
                "%s: cut %d bytes after position %d (offsets from %d): %s",
                self.path,
                cut,
                tail.start,
                tail.first_offset,
                tail.reason if tail.start else f"{tail.reason} (a torn write)",
            )
            os.ftruncate(self.fd, tail.start)
            self.size = tail.start
        elif named is not None and self.next_offset <= named[0]:
            log.warning(
                "%s: cut short at byte %d (offsets from %d are gone): its index names a batch "
                "at byte %d (offset %d), past the end of the file (a torn write)",
                self.path,
                self.size,
                self.next_offset,
                named[1],
                named[0],
            )
        if self.size and self.first_append_ms is None:
            self.first_append_ms = self._first_timestamp()
        return Rebuilt(cut, gaps)

    # ---------------------------------------------------------------- writing

    def append(self, batch: bytes, base_offset: int, next_offset: int, max_ts: int, now_ms: int):
        """Write one batch at the end. Raises OSError (a full disk, an I/O error) with the
        segment as it was: whatever part of the batch landed is cut back, index entries too."""
        position = self.size
        try:
            self._write_batch(batch, base_offset, position)
            self._index_batch(position, base_offset, len(batch))
        except OSError:
            self._cut_back(position)
            raise
        self.next_offset = next_offset
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
        if self.first_append_ms is None:
            self.first_append_ms = now_ms
        self.size = position + len(batch)  # publish last: readers stop at `size`

    def _write_batch(self, batch: bytes, base_offset: int, position: int) -> None:
        # The batch is written as given except its first 8 bytes, the base offset this log
        # assigns (not covered by the CRC), so a client's batch is stored without a copy.
        written = os.pwritev(self.fd, [_BASE.pack(base_offset), memoryview(batch)[8:]], position)
        while written < len(batch):  # a short write: write the rest, which on a full disk
            rest = memoryview(_BASE.pack(base_offset) + batch[8:])[written:]  # raises ENOSPC
            n = os.pwrite(self.fd, rest, position + written)
            if n <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.path)
            written += n

    def _cut_back(self, position: int) -> None:
        try:
            os.ftruncate(self.fd, position)
        except OSError as exc:  # harmless: readers stop at `size`, the next write overwrites
            log.warning(
                "%s: could not cut a refused write back to %d: %s", self.path, position, exc
            )

    def _index_batch(self, position: int, base_offset: int, size: int) -> None:
        if self._bytes_since_index > self.index_interval:
            self.time_index.maybe_append(self.max_timestamp, base_offset - 1)
            self.index.append(base_offset, position)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def seal(self) -> None:
        """Close a finished copy (the cleaner's): add the closing time-index entry and flush
        everything. (A roll seals the active segment without waiting for the disk: see
        ``PartitionLog._roll``.)"""
        self.add_closing_entry()
        self.flush()
        self.closed = True

    def add_closing_entry(self) -> None:
        """The time-index entry naming a closed segment's last offset, which later opens read
        instead of scanning the segment (``load_closed``)."""
        if self.next_offset > self.base_offset:
            self.time_index.maybe_append(self.max_timestamp, self.next_offset - 1, closing=True)

    def flush(self) -> None:
        os.fdatasync(self.fd)
        self.index.flush()
        self.time_index.flush()

    def flush_log(self) -> None:
        os.fdatasync(self.fd)

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose base offset is >= `offset` (offset must start a batch)."""
        position = self.position_of(offset, exact_batch_start=True)
        os.ftruncate(self.fd, position)
        self.size = position
        self.rebuild_from(0)

    # ---------------------------------------------------------------- reading

    def set_damage(self, ranges, jumps=frozenset()) -> None:
        """The damaged ranges known in this segment, and the repaired offset jumps in it."""
        self.damage = tuple(sorted(ranges, key=lambda d: d.start))
        self.jumps = frozenset(jumps)
        self._damage_at = {d.start: d for d in self.damage if d.end > d.start}

    def iter_batches(
        self, position: int, end: int, strict: bool = False, stop_at_damage: bool = False
    ) -> Iterator[tuple[int, memoryview]]:
        """Yield (position, batch bytes) for whole batches in [position, end).

        Known damaged ranges are jumped over, or with `stop_at_damage` end the iteration with
        SegmentDamage. A batch that does not fit before `end` ends the iteration quietly (an
        in-flight or torn tail), or with `strict` (readers, whose `end` is a published size:
        everything before it is whole) raises SegmentDamage, as do impossible sizes.
        """
        fd = self.fd
        buf = b""
        buf_pos = position
        damaged = self._damage_at
        while position < end:
            if damaged and position in damaged:
                d = damaged[position]
                if stop_at_damage:
                    raise SegmentDamage(self, position, d.reason, d)
                position = d.end
                continue
            off = position - buf_pos
            if off + rb.HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(CHUNK, end - position), position)
                buf_pos, off = position, 0
            if len(buf) - off < rb.LOG_OVERHEAD:
                if strict:
                    raise SegmentDamage(self, position, f"{end - position} trailing bytes")
                return
            _, size = rb.peek_size(buf, off)
            if size < rb.HEADER_SIZE or position + size > end:
                if strict:
                    raise SegmentDamage(
                        self, position, f"batch declares {size:,} bytes, {end - position:,} left"
                    )
                return
            if off + size > len(buf):
                buf = os.pread(fd, min(max(CHUNK, size), end - position), position)
                buf_pos, off = position, 0
                if len(buf) < size:  # the file is shorter than its published size
                    if strict:
                        raise SegmentDamage(self, position, "the file ends inside this batch")
                    return
            yield position, memoryview(buf)[off : off + size]
            position += size

    def _headers_from(self, position: int, end: int, strict: bool = False):
        for pos, batch in self.iter_batches(position, end, strict):
            yield pos, rb.parse_header(batch)

    def position_of(
        self, offset: int, exact_batch_start: bool = False, strict: bool = False
    ) -> int:
        """File position of the batch containing `offset` (or the first batch after it).
        Known damage is skipped; other damage on the way ends the scan (the segment's end is
        returned), or with `strict` raises SegmentDamage."""
        entry, position = self.index.lookup(offset)
        end = self.size
        if position and not self._entry_is_valid(entry, position):
            if not self._warned_index:
                self._warned_index = True
                log.warning(
                    "%s: index entry for offset %d is damaged; scanning the segment "
                    "instead (it is rebuilt at the next unclean start)",
                    self.path,
                    entry,
                )
            position = 0
        for pos, h in self._headers_from(position, end, strict):
            if h.next_offset > offset:
                if exact_batch_start and h.base_offset != offset:
                    raise CorruptRecord(f"offset {offset} is not the start of a batch")
                return pos
        return end

    def _entry_is_valid(self, offset: int, position: int) -> bool:
        """Does an index entry point at the start of a batch with that base offset?"""
        if position == 0:
            return offset == self.base_offset or not self.contiguous
        head = os.pread(self.fd, rb.HEADER_SIZE, position)
        if len(head) < rb.HEADER_SIZE:
            return False
        h = rb.parse_header(head)
        return h.base_offset == offset and h.magic == rb.MAGIC

    def batches_from(self, offset: int, end: int) -> Iterator[tuple[rb.BatchHeader, memoryview]]:
        """Batches that hold offsets >= `offset`, starting with the one containing it, as their
        headers say (unchecked; known damage skipped, unknown damage ends the iteration)."""
        for _, batch in self.iter_batches(self.position_of(offset), end):
            h = rb.parse_header(batch)
            yield h, batch

    def headers_from(self, offset: int, end: int) -> Iterator[rb.BatchHeader]:
        """The headers of the batches holding offsets >= `offset`, as ``batches_from`` finds
        them (unchecked; known damage skipped, an impossible header ends the iteration), with
        no batch body read past the first: after a batch larger than ``_HEADERS_CHUNK`` the
        next header is read alone (a pread of ``HEADER_SIZE`` bytes), after a smaller one a
        chunk of the following batches. For readers of offsets and timestamps only (the
        metrics' event times)."""
        position = self.position_of(offset)
        damaged = self._damage_at
        fd = self.fd
        buf, buf_pos = b"", position
        size = 0
        while position + rb.HEADER_SIZE <= end:
            if damaged and position in damaged:
                position = damaged[position].end
                continue
            off = position - buf_pos
            if off < 0 or off + rb.HEADER_SIZE > len(buf):
                want = rb.HEADER_SIZE if size > _HEADERS_CHUNK else _HEADERS_CHUNK
                buf, buf_pos, off = os.pread(fd, min(want, end - position), position), position, 0
                if len(buf) < rb.HEADER_SIZE:
                    return
            h = rb.parse_header(buf, off)
            size = h.size
            if h.magic != rb.MAGIC or size < rb.HEADER_SIZE or position + size > end:
                return
            yield h
            position += size

    def read_from(
        self, offset: int, end: int, skip_damage: bool = False
    ) -> Iterator[tuple[rb.BatchHeader, memoryview]]:
        """`batches_from` for readers that hand records out: each batch is checked (framing,
        magic, CRC-32C, offsets following on) and damage raises SegmentDamage, known damage
        too unless `skip_damage` (it is then jumped over)."""
        position = self.position_of(offset, strict=True)
        expected = None
        for pos, batch in self.iter_batches(position, end, True, not skip_damage):
            h = rb.parse_header(batch)
            if h.magic != rb.MAGIC or _crc32c.crc32c(batch[rb.CRC_START :]) != h.crc:
                try:  # the reason, in words
                    rb.validate_batch(batch, 0, len(batch))
                except CorruptRecord as exc:
                    raise SegmentDamage(self, pos, str(exc)) from None
            if expected is not None and not self._follows(expected, h.base_offset):
                raise SegmentDamage(self, pos, f"base offset {h.base_offset}, expected {expected}")
            expected = h.next_offset
            yield h, batch
            if skip_damage and pos + h.size in self._damage_at:
                expected = None  # offsets jump over a damaged range

    def _follows(self, expected: int, base: int) -> bool:
        if not self.contiguous:
            return base >= expected
        return base == expected or (expected, base) in self.jumps

    def time_scan_start(self, timestamp: int) -> int:
        return self.time_index.scan_start(timestamp)

    # ---------------------------------------------------------------- lifecycle

    def close(self) -> None:
        for f in (self.index, self.time_index):
            f.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        # A segment removed by retention or compaction is closed when its last reader lets go
        # of it, never under a reader's feet (closing early could hand its fd number to another
        # file).
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def file_paths(self) -> list[str]:
        return [self.path, self.index.path, self.time_index.path]

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"
