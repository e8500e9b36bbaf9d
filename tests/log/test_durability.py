"""Durability (issue 2, requirement 8): by default an append returns only once its bytes are on
disk, with group commit; ``flush.messages`` / ``flush.ms`` trade that for fewer syncs.

``os.fdatasync`` is wrapped (monkeypatch) by a counter that calls the real one, so every sync
still happens; the wrapper notes which file it synced and how many bytes that file held when the
sync started (all of them are on disk when it returns).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from pathlib import Path

import pytest

from streams.log import LogStore


class SyncLog:
    """Counts real fdatasync calls: ``syncs`` holds (file, bytes covered) in completion order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.real = os.fdatasync
        self.syncs: list[tuple[str, int]] = []
        monkeypatch.setattr(os, "fdatasync", self._fdatasync)

    def _fdatasync(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        covered = os.fstat(fd).st_size  # every byte written before the sync starts is covered
        self.real(fd)
        self.syncs.append((path, covered))  # list.append is atomic: a consistent prefix

    def __len__(self) -> int:
        return len(self.syncs)


def batch_ends(log_file: Path) -> dict[int, int]:
    """base offset -> file position just after that batch, read straight from the file."""
    data = log_file.read_bytes()
    ends, pos = {}, 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        pos += 12 + length
        ends[base] = pos
    return ends


def test_group_commit_shares_syncs_and_acks_only_synced_appends(tmp_path, monkeypatch):
    threads, per_thread = 8, 200
    store = LogStore.open(str(tmp_path), background=False)
    store.create_topic("t", 1)  # default flush policy: flush.messages=1
    syncs = SyncLog(monkeypatch)
    acks: list[list[tuple[int, int]]] = [[] for _ in range(threads)]
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def appender(n: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                result = store.append("t", b"%d:%d:" % (n, i) + b"x" * (i % 97), partition=0)
                # How many syncs had completed when the append returned. A sync finishing in
                # the instant between the return and this read is credited too, so a store that
                # acknowledged early could slip through once in a while, never systematically.
                acks[n].append((result.offset, len(syncs)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=appender, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    total_syncs = len(syncs)
    plog = store.partition_log("t", 0)
    assert len(plog.segments) == 1
    log_file = Path(plog.segments[0].path)
    store.close()

    appends = threads * per_thread
    offsets = sorted(offset for acked in acks for offset, _ in acked)
    assert offsets == list(range(appends))
    print(f"{appends} appends, {total_syncs} fdatasync calls")
    assert 0 < total_syncs < appends, "no group commit: every append paid its own sync"

    ends = batch_ends(log_file)
    real_path = os.path.realpath(log_file)
    for acked in acks:
        for offset, synced_before_return in acked:
            end = ends[offset]
            assert any(
                path == real_path and covered >= end
                for path, covered in syncs.syncs[:synced_before_return]
            ), f"offset {offset} was acknowledged before a sync covered its bytes (..{end})"


def test_flush_messages_100_syncs_every_100_records(tmp_path, monkeypatch):
    appends = 1000
    with LogStore.open(str(tmp_path), background=False) as store:
        store.create_topic("t", 1, {"flush.messages": "100"})
        plog = store.partition_log("t", 0)
        syncs = SyncLog(monkeypatch)
        for i in range(appends):
            assert store.append("t", b"v%d" % i, partition=0).offset == i
            # Readers see every record at once, synced or not: the high watermark is the log end.
            assert plog.high_watermark == plog.log_end_offset == i + 1
            assert store.read("t", 0, i)[0].value == b"v%d" % i
            assert plog.recovery_point == (i + 1) // 100 * 100
            assert len(syncs) == (i + 1) // 100
        assert len(syncs) == appends // 100


def test_flush_messages_100_with_concurrent_appenders_stays_bounded(tmp_path, monkeypatch):
    threads, per_thread = 4, 500
    with LogStore.open(str(tmp_path), background=False) as store:
        store.create_topic("t", 1, {"flush.messages": "100"})
        syncs = SyncLog(monkeypatch)

        def appender() -> None:
            for i in range(per_thread):
                store.append("t", b"v%d" % i, partition=0)

        workers = [threading.Thread(target=appender) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        appends = threads * per_thread
        plog = store.partition_log("t", 0)
        assert plog.high_watermark == plog.log_end_offset == appends
        expected = appends // 100
        # Not exact under concurrency: appenders that cross the threshold while another one is
        # syncing sync again (on this machine ~1.7x the ideal count), and the reset after a sync
        # forgets records appended during it. Bounded all the same: nowhere near one per append.
        print(f"{appends} appends, {len(syncs)} syncs")
        assert expected // 2 <= len(syncs) <= 2 * expected + threads


class Clock:
    def __init__(self, now: int = 1_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


def wait_for(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_flush_ms_background_thread_moves_the_recovery_point(tmp_path, monkeypatch):
    """flush.ms on the wall clock: after the appends stop and flush.ms passes, the background
    thread syncs and the recovery point reaches the log end with no further append."""
    flush_ms = 300
    with LogStore.open(str(tmp_path), background=True) as store:
        store.create_topic("t", 1, {"flush.messages": "1000000", "flush.ms": str(flush_ms)})
        plog = store.partition_log("t", 0)
        syncs = SyncLog(monkeypatch)
        for i in range(50):
            store.append("t", b"v%d" % i, partition=0)
        assert plog.high_watermark == plog.log_end_offset == 50
        time.sleep(flush_ms / 1000)
        assert wait_for(lambda: plog.recovery_point == 50), (
            f"recovery point {plog.recovery_point} never reached the log end 50"
        )
        assert len(syncs) >= 1


def test_flush_ms_is_not_reached_before_the_interval(tmp_path, monkeypatch):
    """The same with a clock we move: nothing is synced until flush.ms has passed on the store's
    clock, then the background thread syncs everything by itself."""
    clock = Clock()
    with LogStore.open(str(tmp_path), clock=clock, background=True) as store:
        store.create_topic("t", 1, {"flush.messages": "1000000", "flush.ms": "1000"})
        plog = store.partition_log("t", 0)
        syncs = SyncLog(monkeypatch)
        for i in range(50):
            store.append("t", b"v%d" % i, partition=0)
        time.sleep(0.5)  # five background ticks on a clock that does not move
        assert plog.recovery_point == 0 and len(syncs) == 0
        assert store.read("t", 0, 49)[0].value == b"v49"
        clock.now += 999
        time.sleep(0.3)
        assert plog.recovery_point == 0 and len(syncs) == 0
        clock.now += 1
        assert wait_for(lambda: plog.recovery_point == 50)
        assert len(syncs) == 1
        for i in range(50, 80):
            store.append("t", b"v%d" % i, partition=0)
        clock.now += 1000
        assert wait_for(lambda: plog.recovery_point == 80)
        assert len(syncs) == 2


def test_a_sealed_segment_is_on_disk_before_the_append_that_rolled_is_acknowledged(
    tmp_path, monkeypatch
):
    """A roll leaves the sealed segment's fsync to the next sync (so an appender on an event
    loop does not wait for it), which must still come before the acknowledgement: when that
    fsync fails, the append that rolled fails (KAFKA_STORAGE_ERROR) and nothing past the last
    good sync becomes visible."""
    from streams.errors import StorageError
    from streams.log.segment import LogSegment

    original = LogSegment.flush
    flushed: list[int] = []
    fail = {"on": False}

    def flush(self):
        if fail["on"]:
            raise OSError(5, "Input/output error")
        original(self)
        flushed.append(self.base_offset)

    monkeypatch.setattr(LogSegment, "flush", flush)
    with LogStore.open(tmp_path / "ok", background=False) as store:
        store.create_topic("t", 1, {"segment.bytes": "1024"})
        store.append("t", b"a" * 700, partition=0)
        store.append("t", b"b" * 700, partition=0)  # rolls: segment 0 sealed
        assert flushed == [0]
        assert store.partition_log("t", 0).recovery_point == 2
    with LogStore.open(tmp_path / "failing", background=False) as store:
        store.create_topic("t", 1, {"segment.bytes": "1024"})
        store.append("t", b"a" * 700, partition=0)
        fail["on"] = True
        with pytest.raises(StorageError):
            store.append("t", b"b" * 700, partition=0)
        assert store.offsets("t", 0) == (0, 1)  # the unsynced record is not visible
        fail["on"] = False


def test_append_runs_waits_for_the_disk_once_for_all_its_runs(tmp_path, monkeypatch):
    """A job's checkpoint appends its outputs as runs (``LogStore.append_runs``): each run its
    own batch, in order, and under ``flush.messages=1`` one fdatasync after the last (one per
    run before), with every run on disk when it returns; a run over max.message.bytes is
    split as ``append_batch`` splits it; readers see the runs once they are synced."""
    store = LogStore.open(str(tmp_path), background=False)
    store.create_topic("t", 1)  # default flush policy: flush.messages=1
    store.create_topic("small", 1, {"max.message.bytes": "2000"})
    runs = [[(b"v%d-%d" % (r, i), b"k%d" % i, (), 1000 + i) for i in range(50)] for r in range(6)]
    syncs = SyncLog(monkeypatch)
    store.append_runs("t", 0, runs)
    assert len(syncs) == 1
    log_file = Path(store.partition_log("t", 0).segments[-1].path)
    assert syncs.syncs[0][1] == log_file.stat().st_size  # every run covered by that sync
    assert sorted(batch_ends(log_file)) == [50 * r for r in range(6)]  # a batch per run
    assert [r.value for r in store.read("t", 0, 0, max_records=1000)] == [
        v for run in runs for v, _, _, _ in run
    ]
    store.append_runs("t", None, runs[:2])  # one partition: that one, still one sync
    assert len(syncs) == 2 and store.offsets("t", 0) == (0, 400)
    big = [[(b"x" * 300, b"k", (), 1) for _ in range(20)]]  # ~6 KB: split in halves to fit
    store.append_runs("small", 0, big)
    assert len(syncs) == 3
    assert [r.value for r in store.read("small", 0, 0, max_records=100)] == [b"x" * 300] * 20
    with pytest.raises(Exception, match="partition"):
        store.append_runs("t", 3, runs[:1])
    store.close()
