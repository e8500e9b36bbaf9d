"""Damaged ranges of a partition's log: finding them, and remembering them on disk.

A segment file is a run of record batches. `walk` reads one from any position and tells each
batch that is whole and valid (framing, magic, CRC-32C, offsets that follow on) apart from the
damaged bytes between them, and after damage *resynchronises*: it looks for the next position
where a valid batch starts (its magic byte in place, a base offset at or after the expected one,
its CRC-32C right, and the batch after it, if any, framed where it should be). So damage in the
middle of a segment costs only the offsets it covers: the batches after it are found, kept and
read as before, and no acknowledged record is lost because of damage that lies before it.

A `DamagedRange` names such a range: the segment file, the bytes, the offsets it covers (from
the offset expected where the damage starts to the first offset of what follows) and why. A
partition keeps its ranges in ``damaged-ranges.json`` in its directory, with the ones an
operator repaired (``manage.py verify_log --repair``: the damaged bytes cut out, the offsets
accepted as lost), so a later recovery neither reports a repaired gap again nor mistakes it for
new damage.

Thread-safety: `walk` reads a file descriptor with ``pread`` only; the ranges are immutable.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from streams.errors import CorruptRecord
from streams.log import checkpoint
from streams.log import records as rb

log = logging.getLogger(__name__)

FILE = "damaged-ranges.json"
CHUNK = 1 << 20
MAGIC_POSITION = 16  # of the magic byte inside a batch
MAX_OFFSET_JUMP = 2**31  # a batch holds at most 2^31 offsets: a resync never skips more


@dataclasses.dataclass(frozen=True)
class DamagedRange:
    segment: int  # base offset of the segment file
    file: str  # the segment's file name
    start: int  # first damaged byte
    end: int  # byte after the damage (== start: bytes are missing, e.g. a file cut short)
    first_offset: int  # first offset the damage covers
    end_offset: int  # offset after it (the first of what follows)
    reason: str
    found_ms: int
    repaired_ms: int | None = None  # set once an operator cut it out (the offsets are lost)

    @property
    def offset_count(self) -> int:
        return self.end_offset - self.first_offset

    @property
    def byte_count(self) -> int:
        return self.end - self.start

    def covers(self, offset: int) -> bool:
        return self.first_offset <= offset < self.end_offset

    def offsets_text(self) -> str:
        if self.offset_count <= 0:
            return "no offsets"
        if self.offset_count == 1:
            return f"offset {self.first_offset}"
        return f"offsets {self.first_offset}..{self.end_offset - 1}"

    def describe(self) -> str:
        where = (
            f"bytes {self.start:,}..{self.end - 1:,} ({self.byte_count:,} bytes)"
            if self.byte_count
            else f"missing after byte {self.start:,}"
        )
        return f"{self.offsets_text()} in {self.file}, {where}: {self.reason}"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def load(directory: str) -> list[DamagedRange]:
    """The ranges recorded in a partition directory (damaged and repaired)."""
    path = os.path.join(directory, FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return [DamagedRange(**entry) for entry in data["ranges"]]
    except FileNotFoundError:
        return []
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("%s: unreadable (%s); the log is re-checked instead", path, exc)
        return []


def save(directory: str, ranges: Iterable[DamagedRange]) -> None:
    ranges = sorted(ranges, key=lambda r: (r.segment, r.start, r.first_offset))
    path = os.path.join(directory, FILE)
    if not ranges:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    body = {"version": 1, "ranges": [r.to_json() for r in ranges]}
    checkpoint.write_atomic(path, json.dumps(body, indent=1).encode())


# --------------------------------------------------------------------------- walking


class Batch(NamedTuple):
    position: int
    size: int
    base_offset: int
    next_offset: int
    max_timestamp: int


class Gap(NamedTuple):
    start: int
    end: int  # where the next valid batch starts, or the end of the walk
    reason: str
    next_base: int | None  # base offset of that batch; None when nothing valid follows


class _Reader:
    """pread in large chunks; `get` returns bytes at an absolute position."""

    def __init__(self, fd: int, end: int):
        self.fd, self.end = fd, end
        self.buf = b""
        self.buf_pos = 0

    def get(self, position: int, n: int) -> memoryview:
        off = position - self.buf_pos
        if off < 0 or off + n > len(self.buf):
            self.buf = os.pread(self.fd, min(max(CHUNK, n), self.end - position), position)
            self.buf_pos, off = position, 0
        return memoryview(self.buf)[off : off + n]


def walk(
    fd: int,
    position: int,
    end: int,
    expected: int,
    contiguous: bool,
    accepted_jumps: frozenset[tuple[int, int]] = frozenset(),
) -> Iterator[Batch | Gap]:
    """Every valid batch in [position, end) and the damaged gaps between them, in file order.

    `expected`: the base offset the first batch must have (contiguous) or exceed (not);
    `accepted_jumps`: (from, to) offset jumps that are not damage (repaired ranges)."""
    reader = _Reader(fd, end)
    while position < end:
        batch, reason = _batch_at(reader, position, end, expected, contiguous, accepted_jumps)
        if batch is not None:
            yield batch
            expected = batch.next_offset
            position += batch.size
            continue
        found = _resync(reader, position + 1, end, expected, contiguous)
        if found is None:
            yield Gap(position, end, reason, None)
            return
        yield Gap(position, found.position, reason, found.base_offset)
        position, expected = found.position, found.base_offset


def _batch_at(reader, position, end, expected, contiguous, accepted_jumps):
    """(Batch, None) for a valid batch at `position`, else (None, the reason)."""
    if end - position < rb.LOG_OVERHEAD:
        return None, f"{end - position} trailing bytes, too few for a batch"
    base, size = rb.peek_size(reader.get(position, rb.LOG_OVERHEAD))
    if size < rb.HEADER_SIZE:
        return None, f"batch length {size - rb.LOG_OVERHEAD} is smaller than a batch header"
    if position + size > end:
        return None, f"batch of {size:,} bytes runs past the end of the file ({end:,})"
    try:
        h = rb.validate_batch(reader.get(position, size), 0, size)
    except CorruptRecord as exc:
        return None, str(exc)
    jumped = (expected, base) in accepted_jumps
    if contiguous and base != expected and not jumped:
        return None, f"base offset {base}, expected {expected}"
    if not contiguous and base < expected:
        return None, f"base offset {base} is below {expected}, where the previous batch ended"
    return Batch(position, size, base, h.next_offset, h.max_timestamp), None


def _resync(reader, position, end, expected, contiguous) -> Batch | None:
    """The first position at or after `position` where a valid batch starts (see the module
    docstring), found by its magic byte; cheap checks go first, the CRC last."""
    search = position + MAGIC_POSITION
    while search + rb.HEADER_SIZE - MAGIC_POSITION <= end:
        window = reader.get(search, min(CHUNK, end - search))
        i = bytes(window).find(bytes([rb.MAGIC]))
        if i < 0:
            search += len(window)
            continue
        candidate = search + i - MAGIC_POSITION
        search += i + 1
        if candidate + rb.HEADER_SIZE > end:
            return None
        base, size = rb.peek_size(reader.get(candidate, rb.LOG_OVERHEAD))
        if not (expected <= base < expected + MAX_OFFSET_JUMP and rb.HEADER_SIZE <= size):
            continue
        if candidate + size > end:
            continue
        batch, _ = _batch_at(reader, candidate, end, base, contiguous, frozenset())
        if batch is not None and _followed_well(reader, batch, end):
            return batch
    return None


def _followed_well(reader, batch: Batch, end: int) -> bool:
    """Is the batch at the end of the file, or followed by something framed like a batch? (So
    a batch stored *inside* a damaged record's value is rarely taken for a real one.)"""
    after = batch.position + batch.size
    if after == end:
        return True
    if end - after < rb.HEADER_SIZE:
        return False
    h = rb.parse_header(reader.get(after, rb.HEADER_SIZE))
    return h.magic == rb.MAGIC and h.size >= rb.HEADER_SIZE
