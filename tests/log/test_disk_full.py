"""The log store on a full disk (issue 10, item 4), on a real small tmpfs: a refused append
raises StorageError and leaves the segment, its indexes and the partition exactly as they were;
a refused roll or topic create leaves no half-made files; once space returns, appends go on by
themselves and a reopened store (clean or after a crash) reads exactly the accepted records."""

from __future__ import annotations

import errno
import os

import pytest

from streams.errors import StorageError
from streams.log import LogStore, ProducerRecord
from tests.small_disk import fill, small_tmpfs

CONFIG = {"index.interval.bytes": "1024", "segment.bytes": str(64 * 1024)}


@pytest.fixture
def disk(tmp_path):
    with small_tmpfs(tmp_path / "disk", 4 * 1024 * 1024) as path:
        yield path


def _value(i: int) -> bytes:
    return b"%06d:" % i + bytes(range(256)) * 12


def _files_match_memory(plog) -> None:
    for seg in plog.segments:
        assert os.path.getsize(seg.path) == seg.size
        assert os.path.getsize(seg.index.path) == len(seg.index) * 8
        assert os.path.getsize(seg.time_index.path) == len(seg.time_index) * 12


def _values(store, topic: str = "t") -> list[bytes]:
    start, end = store.offsets(topic, 0)
    out, offset = [], start
    while offset < end:
        got = store.read(topic, 0, offset, max_records=1000, max_bytes=1 << 30)
        out += [r.value for r in got]
        offset = got[-1].offset + 1
    assert [r for r in range(start, end)] == list(range(start, start + len(out)))
    return out


@pytest.mark.parametrize("reopen", ["clean", "after-a-crash"])
def test_refused_appends_change_nothing_and_writes_resume_with_space(disk, reopen):
    data = disk / "data"
    store = LogStore.open(str(data), background=False)
    store.create_topic("t", 1, CONFIG)
    plog = store.partition_log("t", 0)
    filler = fill(disk, 40 * 1024)
    accepted, refused = [], 0
    for i in range(120):  # a few hundred KB into about 40 KB
        before = (plog.log_end_offset, [s.size for s in plog.segments])
        try:
            store.append_batch("t", [ProducerRecord(_value(i), b"k")], partition=0)
        except StorageError as exc:
            refused += 1
            assert exc.errno == errno.ENOSPC and "t-0" in str(exc)
            assert (plog.log_end_offset, [s.size for s in plog.segments]) == before
            _files_match_memory(plog)
        else:
            accepted.append(i)
    assert refused and accepted
    assert _values(store) == [_value(i) for i in accepted]

    filler.unlink()
    for i in range(120, 180):  # several segment rolls too
        store.append_batch("t", [ProducerRecord(_value(i), b"k")], partition=0)
        accepted.append(i)
    _files_match_memory(plog)
    assert len(plog.segments) > 1
    if reopen == "clean":
        store.close()
    else:  # as after kill -9: no clean-shutdown marker, recovery from the recovery points
        store.write_checkpoints()
        for p in store.all_partitions():
            p.close()
        store._unlock()
    with LogStore.open(str(data), background=False) as again:
        assert _values(again) == [_value(i) for i in accepted]


def test_a_refused_roll_leaves_no_half_made_segment(disk):
    store = LogStore.open(str(disk / "data"), background=False)
    store.create_topic("t", 1, {"segment.bytes": "4096"})
    plog = store.partition_log("t", 0)
    store.append("t", _value(0), partition=0)
    filler = fill(disk, 0)
    names = sorted(os.listdir(plog.directory))
    with pytest.raises(StorageError):
        for i in range(1, 20):  # the second append needs a roll
            store.append("t", _value(i), partition=0)
    assert sorted(os.listdir(plog.directory)) == names
    filler.unlink()
    store.append("t", _value(99), partition=0)
    assert _values(store)[-1] == _value(99)
    store.close()


def test_creating_a_topic_on_a_full_disk_leaves_nothing(disk):
    store = LogStore.open(str(disk / "data"), background=False)
    before = sorted(os.listdir(store.path))
    filler = fill(disk, 0)
    with pytest.raises(StorageError, match="could not create topic 'new'"):
        store.create_topic("new", 3)
    assert sorted(os.listdir(store.path)) == before
    assert store.list_topics() == []
    filler.unlink()
    store.create_topic("new", 3)
    store.close()


def test_a_failed_fsync_takes_the_partition_offline_until_a_restart(tmp_path, monkeypatch, caplog):
    """After a failed fsync the kernel may have dropped the pages, and a retried fsync can
    succeed without writing them: nothing since the last good sync may be acknowledged. The
    partition refuses appends (as Kafka takes a failed log directory offline), reads go on, the
    recovery point stays at the last good sync, and a restart brings it back."""
    store = LogStore.open(str(tmp_path / "data"), background=False)
    store.create_topic("t", 2)
    store.append("t", b"synced", partition=0)
    real = os.fdatasync

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(StorageError, match="t-0 is offline"):
        store.append("t", b"maybe lost", partition=0)
    monkeypatch.setattr(os, "fdatasync", real)
    with pytest.raises(StorageError, match="t-0 is offline"):
        store.append("t", b"refused", partition=0)
    store.append("t", b"other partition", partition=1)  # only that partition is offline
    assert [r.value for r in store.read("t", 0, 0)] == [b"synced"]  # the high watermark held
    assert "t-0 is offline" in caplog.text
    plog = store.partition_log("t", 0)
    store.close()
    assert plog.recovery_point == 1
    with LogStore.open(str(tmp_path / "data"), background=False) as again:
        again.append("t", b"after restart", partition=0)
        values = [r.value for r in again.read("t", 0, 0)]
    assert values[0] == b"synced" and values[-1] == b"after restart"
