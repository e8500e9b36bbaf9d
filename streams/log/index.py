"""Sparse per-segment indexes, as in Kafka.

``OffsetIndex`` (``.index``): 8-byte entries, big-endian ``uint32 relative offset, uint32 file
position``; one entry per ``index.interval.bytes`` of log, mapping the base offset of the batch
written at that position. A lookup is a binary search for the floor entry, so a read scans at most
one interval of the log.

``TimeIndex`` (``.timeindex``): 12-byte entries ``int64 max timestamp so far, uint32 relative last
offset``; timestamps are monotonic, so "first offset with timestamp >= T" starts scanning after the
last entry whose timestamp is < T.

Neither file is checksummed. Both are append-only files kept in memory as arrays; they are flushed
with recovery-point checkpoints and rebuilt from the log after an unclean stop. Thread-safety: one
writer (the partition's write lock); readers see a consistent prefix because an entry is published
to the in-memory arrays only after it is complete.
"""

from __future__ import annotations

import bisect
import errno
import os
import struct
from array import array

_OFF = struct.Struct(">II")
_TIME = struct.Struct(">qI")


def _append_entry(fd: int, entry: bytes, size: int) -> None:
    """Append one entry at the end (`size` bytes) of an index file, or raise OSError with the
    file cut back to `size`: a full disk may take part of an entry, and a partial entry would
    shift every later one."""
    try:
        if os.write(fd, entry) != len(entry):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    except OSError:
        os.ftruncate(fd, size)
        os.lseek(fd, 0, os.SEEK_END)
        raise


class OffsetIndex:
    ENTRY = _OFF.size

    def __init__(self, path: str, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self.rel_offsets = array("Q")
        self.positions = array("Q")
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._unsynced = True  # written since the last fsync (a checkpoint skips clean ones)
        self._load()

    def _load(self) -> None:
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        usable = len(data) - len(data) % self.ENTRY
        for rel, pos in _OFF.iter_unpack(data[:usable]):
            self.rel_offsets.append(rel)
            self.positions.append(pos)
        if usable != len(data):
            os.ftruncate(self._fd, usable)
        os.lseek(self._fd, 0, os.SEEK_END)

    def __len__(self) -> int:
        return len(self.rel_offsets)

    def is_sane(self, log_size: int) -> bool:
        """Entries strictly increasing in offset and position, all inside the log file."""
        offs, poss = self.rel_offsets, self.positions
        for i in range(1, len(offs)):
            if offs[i] <= offs[i - 1] or poss[i] <= poss[i - 1]:
                return False
        return not poss or poss[-1] < log_size

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.rel_offsets and rel <= self.rel_offsets[-1]:
            return
        _append_entry(self._fd, _OFF.pack(rel, position), len(self) * self.ENTRY)
        self._unsynced = True
        # positions first: a lock-free reader bisects rel_offsets, then indexes positions
        self.positions.append(position)
        self.rel_offsets.append(rel)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the floor entry for `offset`; (base, 0) when there is none."""
        i = bisect.bisect_right(self.rel_offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.rel_offsets[i], self.positions[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or before file `position`; (base, 0) if none."""
        i = bisect.bisect_right(self.positions, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.rel_offsets[i], self.positions[i]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or beyond `position` (used when the log is truncated)."""
        keep = bisect.bisect_left(self.positions, position)
        self._truncate(keep)

    def _truncate(self, keep: int) -> None:
        del self.rel_offsets[keep:]
        del self.positions[keep:]
        os.ftruncate(self._fd, keep * self.ENTRY)
        os.lseek(self._fd, 0, os.SEEK_END)
        self._unsynced = True

    def reset(self) -> None:
        self._truncate(0)

    def flush(self) -> None:
        """fsync what was written since the last flush (nothing written: no fsync)."""
        if self._unsynced:
            self._unsynced = False  # before: a write racing the fsync sets it again
            try:
                os.fsync(self._fd)
            except OSError:
                self._unsynced = True
                raise

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class TimeIndex:
    ENTRY = _TIME.size

    def __init__(self, path: str, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.rel_offsets = array("Q")
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._unsynced = True  # written since the last fsync (a checkpoint skips clean ones)
        self._load()

    def _load(self) -> None:
        data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        usable = len(data) - len(data) % self.ENTRY
        for ts, rel in _TIME.iter_unpack(data[:usable]):
            self.timestamps.append(ts)
            self.rel_offsets.append(rel)
        if usable != len(data):
            os.ftruncate(self._fd, usable)
        os.lseek(self._fd, 0, os.SEEK_END)

    def __len__(self) -> int:
        return len(self.timestamps)

    def is_sane(self) -> bool:
        ts, offs = self.timestamps, self.rel_offsets
        return all(ts[i] >= ts[i - 1] and offs[i] > offs[i - 1] for i in range(1, len(ts)))

    @property
    def last(self) -> tuple[int, int] | None:
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.base_offset + self.rel_offsets[-1]

    def maybe_append(self, max_timestamp: int, last_offset: int, closing: bool = False) -> None:
        """Add an entry when the segment's max timestamp grew since the last entry; a closing
        entry (segment rolled) is added whenever its offset is new, so the last entry of a
        closed segment always names its last offset."""
        if self.timestamps and (
            max_timestamp < self.timestamps[-1]
            or (max_timestamp == self.timestamps[-1] and not closing)
            or last_offset - self.base_offset <= self.rel_offsets[-1]
        ):
            return
        rel = last_offset - self.base_offset
        _append_entry(self._fd, _TIME.pack(max_timestamp, rel), len(self) * self.ENTRY)
        self._unsynced = True
        # offsets first: a lock-free reader bisects timestamps, then indexes rel_offsets
        self.rel_offsets.append(rel)
        self.timestamps.append(max_timestamp)

    def scan_start(self, timestamp: int) -> int:
        """An offset from which scanning finds the first record with timestamp >= `timestamp`."""
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self.rel_offsets[i] + 1

    def truncate_after_offset(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        keep = bisect.bisect_left(self.rel_offsets, offset - self.base_offset)
        del self.timestamps[keep:]
        del self.rel_offsets[keep:]
        os.ftruncate(self._fd, keep * self.ENTRY)
        os.lseek(self._fd, 0, os.SEEK_END)
        self._unsynced = True

    def reset(self) -> None:
        self.truncate_after_offset(self.base_offset)

    def flush(self) -> None:
        """fsync what was written since the last flush (nothing written: no fsync)."""
        if self._unsynced:
            self._unsynced = False  # before: a write racing the fsync sets it again
            try:
                os.fsync(self._fd)
            except OSError:
                self._unsynced = True
                raise

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
