"""A checkpoint fsyncs an index only when it was written since the last one: a broker of 5,000
idle partitions made 10,000 fsyncs every checkpoint interval for nothing."""

from __future__ import annotations

import streams.log.index as index_module
from streams.log.index import OffsetIndex, TimeIndex


def test_an_index_is_fsynced_only_when_written_since_the_last_flush(tmp_path, monkeypatch):
    synced: list[int] = []
    real = index_module.os.fsync
    monkeypatch.setattr(index_module.os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    offsets = OffsetIndex(str(tmp_path / "0.index"), 0)
    times = TimeIndex(str(tmp_path / "0.timeindex"), 0)
    try:
        offsets.flush()
        times.flush()
        assert len(synced) == 2  # new files: synced once
        offsets.flush()
        times.flush()
        assert len(synced) == 2  # nothing written since: no fsync
        offsets.append(10, 4096)
        times.maybe_append(1_000, 10)
        offsets.flush()
        times.flush()
        assert len(synced) == 4
        times.truncate_after_offset(5)  # a truncation is a write too
        times.flush()
        offsets.flush()
        assert len(synced) == 5
    finally:
        offsets.close()
        times.close()
    reopened = OffsetIndex(str(tmp_path / "0.index"), 0)
    try:
        assert reopened.lookup(10) == (10, 4096)  # what was synced is there
    finally:
        reopened.close()
