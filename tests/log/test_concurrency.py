"""One writer per partition, readers never wait (issue 2, requirement 12).

Appender threads and tailing reader threads share one partition with small segments (so the
segment list is replaced under the readers' feet) for a few seconds. Readers check that offsets
go up by exactly one, that each producer's counter appears in order, and finally that they saw
every record, byte for byte as it was appended. A variant deletes old segments by retention all
the while: readers that fall below the log start get OffsetOutOfRange with both bounds and jump.

``TIDELOG_CONCURRENCY_SECONDS`` (default 2.5) sets how long the appenders run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import sys
import threading
import time
from array import array

import pytest

from streams.errors import OffsetOutOfRange
from streams.log import LogStore, ProducerRecord

DURATION = float(os.environ.get("TIDELOG_CONCURRENCY_SECONDS", "2.5"))
APPENDERS = 4
READERS = 4


@pytest.fixture(autouse=True)
def frequent_thread_switches():
    """Switch threads every 100 µs instead of every 5 ms: many more interleavings per second."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(before)


def digest(value: bytes) -> bytes:
    return hashlib.blake2b(value, digest_size=16).digest()


def parse(value: bytes) -> tuple[int, int]:
    producer, counter, _ = value.split(b":", 2)
    return int(producer[1:]), int(counter)


@dataclasses.dataclass
class Appended:
    """What one appender was acknowledged: offset -> digest of the value, and its count."""

    producer: int
    offsets: dict[int, bytes] = dataclasses.field(default_factory=dict)
    count: int = 0


def appender(store: LogStore, producer: int, stop: threading.Event, out: Appended, errors: list):
    rng = random.Random(producer)
    counter = 0
    try:
        while not stop.is_set():
            n = 1 if rng.random() < 0.6 else rng.randint(2, 6)
            values = [
                b"p%d:%d:" % (producer, counter + i) + rng.randbytes(rng.randint(0, 400))
                for i in range(n)
            ]
            if n == 1:
                results = [store.append("t", values[0], key=b"p%d" % producer, partition=0)]
            else:
                results = store.append_batch(
                    "t", [ProducerRecord(v, b"p%d" % producer) for v in values], partition=0
                )
            for r, v in zip(results, values, strict=True):
                out.offsets[r.offset] = digest(v)
            counter += n
        out.count = counter
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


@dataclasses.dataclass
class Reader:
    """A tailing reader: what it saw, and the jumps it made (retention variant)."""

    name: str
    slow: bool = False
    position: int = 0
    seen: dict[int, bytes] = dataclasses.field(default_factory=dict)  # offset -> digest
    order: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (producer, counter)
    jumps: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)
    reads: int = 0


def tail(
    store: LogStore,
    reader: Reader,
    appenders_done: threading.Event,
    final_end: list[int],
    retention: bool,
    errors: list,
) -> None:
    rng = random.Random(reader.name)
    last_counter: dict[int, int] = {}
    gap_allowed: set[int] = set()  # producers whose records we may have skipped by a jump
    try:
        while True:
            start, hw = store.offsets("t", 0)
            if reader.position >= hw:
                if appenders_done.is_set() and final_end and reader.position >= final_end[0]:
                    return
                time.sleep(0.0005)
                continue
            try:
                records = store.read("t", 0, reader.position, max_records=rng.randint(1, 300))
            except OffsetOutOfRange as exc:
                assert retention, f"{reader.name}: {exc}"
                assert exc.offset == reader.position
                assert reader.position < exc.log_start_offset <= exc.end_offset, str(exc)
                reader.jumps.append((reader.position, exc.log_start_offset, exc.end_offset))
                reader.position = exc.log_start_offset
                gap_allowed = set(range(APPENDERS))
                continue
            reader.reads += 1
            assert records, f"{reader.name}: empty read at {reader.position} below {hw}"
            end_now = store.offsets("t", 0)[1]
            for r in records:
                assert r.offset == reader.position, (
                    f"{reader.name}: got offset {r.offset} reading from {reader.position} "
                    f"({'a gap' if r.offset > reader.position else 'a duplicate'})"
                )
                assert r.offset < end_now, f"{reader.name}: read {r.offset} past the end"
                producer, counter = parse(r.value)
                assert r.key == b"p%d" % producer
                previous = last_counter.get(producer, -1)
                if producer in gap_allowed:
                    assert counter > previous, f"{reader.name}: p{producer} went back"
                    gap_allowed.discard(producer)
                else:
                    assert counter == previous + 1, (
                        f"{reader.name}: p{producer} counter {counter} after {previous} "
                        f"at offset {r.offset}"
                    )
                last_counter[producer] = counter
                reader.seen[r.offset] = digest(r.value)
                reader.order.append((producer, counter))
                reader.position += 1
            if reader.slow:
                time.sleep(rng.uniform(0.01, 0.03))
                if retention and rng.random() < 0.2:
                    # Stall until retention has deleted our position: the next read is below
                    # the log start, however fast or slow this machine appends.
                    while store.offsets("t", 0)[0] <= reader.position:
                        if appenders_done.is_set():
                            break
                        time.sleep(0.005)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


def run_workload(store: LogStore, retention: bool) -> tuple[list[Appended], list[Reader]]:
    stop, appenders_done = threading.Event(), threading.Event()
    final_end: list[int] = []
    errors: list[BaseException] = []
    appended = [Appended(p) for p in range(APPENDERS)]
    # In the retention variant half the readers are slow, so retention overtakes them.
    readers = [Reader(f"reader-{i}", slow=retention and i % 2 == 1) for i in range(READERS)]
    threads = [
        threading.Thread(target=appender, args=(store, p, stop, appended[p], errors))
        for p in range(APPENDERS)
    ]
    reader_threads = [
        threading.Thread(target=tail, args=(store, r, appenders_done, final_end, retention, errors))
        for r in readers
    ]
    retention_stop = threading.Event()

    def apply_retention() -> None:
        while not retention_stop.wait(0.005):
            try:
                store.apply_retention()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

    retention_thread = threading.Thread(target=apply_retention)
    for t in reader_threads + threads:
        t.start()
    if retention:
        retention_thread.start()
    deadline = time.monotonic() + DURATION
    while time.monotonic() < deadline and not errors:
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    retention_stop.set()
    if retention:
        retention_thread.join()
    final_end.append(store.partition_log("t", 0).log_end_offset)
    appenders_done.set()
    for t in reader_threads:
        t.join(60)
        assert not t.is_alive(), "a reader never reached the end"
    assert not errors, errors[0]
    return appended, readers


def check_appended(appended: list[Appended], end: int) -> dict[int, bytes]:
    every: dict[int, bytes] = {}
    for a in appended:
        assert a.count > 0
        assert len(a.offsets) == a.count
        assert not every.keys() & a.offsets.keys(), "two appends got the same offset"
        every.update(a.offsets)
    assert sorted(every) == list(range(end)), "appends left a gap in the offsets"
    return every


def test_concurrent_appenders_and_tailing_readers(tmp_path):
    with LogStore.open(str(tmp_path), background=False) as store:
        store.create_topic("t", 1, {"segment.bytes": "16384", "index.interval.bytes": "1024"})
        appended, readers = run_workload(store, retention=False)
        plog = store.partition_log("t", 0)
        end = plog.log_end_offset
        assert plog.high_watermark == end
        segments = len(plog.segments)
    every = check_appended(appended, end)
    print(f"{end} records in {segments} segments; reads per reader: {[r.reads for r in readers]}")
    assert segments > 10, "the segments hardly rolled"
    for r in readers:
        assert r.seen == every, f"{r.name} did not see exactly every record as appended"
        assert r.order == readers[0].order


def test_concurrent_readers_with_retention_deleting_segments(tmp_path):
    with LogStore.open(str(tmp_path), background=False) as store:
        store.create_topic(
            "t",
            1,
            {"segment.bytes": "8192", "retention.bytes": "65536", "index.interval.bytes": "1024"},
        )
        appended, readers = run_workload(store, retention=True)
        start, end = store.offsets("t", 0)
    every = check_appended(appended, end)
    jumps = sum(len(r.jumps) for r in readers)
    print(f"{end} records, log start {start}; jumps per reader: {[len(r.jumps) for r in readers]}")
    assert start > 0, "retention deleted nothing"
    assert jumps > 0, "no reader ever fell below the log start"
    for r in readers:
        assert r.position == end
        for offset, value_digest in r.seen.items():
            assert every[offset] == value_digest, f"{r.name}: offset {offset} differs"
        # Everything from the last jump on was seen without a hole.
        resumed = r.jumps[-1][1] if r.jumps else 0
        assert all(o in r.seen for o in range(resumed, end)), f"{r.name} missed records"


# --- forced interleavings ---------------------------------------------------------------------
# The stress tests above hit these races only by luck. Each test below forces one interleaving:
# the hook only chooses *when* the other thread runs; the check, index, append and deletion are
# the real ones. Both failed at eec4d82 and guard the fixes of 7e4c78b.


def test_read_racing_a_segment_deletion_raises_instead_of_skipping(tmp_path):
    """Another thread deletes the segment holding `offset` right after the reader's range check
    passed. read() used to fall back to the first remaining segment and silently return records
    from the new log start; it must raise OffsetOutOfRange with the new bounds (or serve the
    records from the snapshot it already holds)."""
    with LogStore.open(str(tmp_path), background=False) as store:
        store.create_topic("t", 1, {"segment.bytes": "1024"})
        for i in range(50):
            store.append("t", b"%03d" % i + b"x" * 100, partition=0)
        plog = store.partition_log("t", 0)
        assert len(plog.segments) > 5
        real_check = plog._check_range
        hooked = []

        def check_then_delete(offset):
            hw = real_check(offset)
            plog._check_range = real_check
            hooked.append(offset)
            store.delete_records("t", {0: 20})  # "another thread" runs here
            return hw

        plog._check_range = check_then_delete
        try:
            records = store.read("t", 0, 0, max_records=3)
        except OffsetOutOfRange as exc:
            assert (exc.log_start_offset, exc.end_offset) == (20, 50)
            records = None
        assert hooked == [0], "the hook was not reached: adapt it to PartitionLog.read"
        if records is not None:
            assert [r.offset for r in records] == [0, 1, 2], "read(0) skipped to later offsets"


class DelayedAppend(array):
    """An array whose append sleeps first (releasing the GIL), so a concurrent reader runs in
    the instant between an index's two in-memory appends, whichever comes first."""

    def append(self, value: int) -> None:
        time.sleep(0.002)
        super().append(value)


def test_reader_at_the_end_never_sees_half_an_index_entry(tmp_path):
    """A reader polling at the high watermark (a consumer tailing the log) while the writer
    indexes new batches. OffsetIndex.append used to publish rel_offsets before positions; a
    reader in between bisected the new offset and indexed a position not there yet
    (IndexError)."""
    with LogStore.open(str(tmp_path), background=False) as store:
        # An index entry for every batch after the first; the high watermark is the log end.
        store.create_topic("t", 1, {"index.interval.bytes": "0", "flush.messages": "1000000"})
        store.append("t", b"first", partition=0)
        plog = store.partition_log("t", 0)
        index = plog.segments[-1].index
        index.positions = DelayedAppend("Q", index.positions)
        index.rel_offsets = DelayedAppend("Q", index.rel_offsets)
        done = threading.Event()
        errors: list[BaseException] = []
        reads = [0]

        def tail_at_the_end() -> None:
            while not done.is_set():
                try:
                    store.read("t", 0, plog.high_watermark)
                except BaseException as exc:  # noqa: BLE001 - re-raised below
                    errors.append(exc)
                    return
                reads[0] += 1

        reader = threading.Thread(target=tail_at_the_end)
        reader.start()
        try:
            for i in range(20):
                store.append("t", b"v%d" % i, partition=0)
        finally:
            done.set()
            reader.join()
        assert len(index.positions) == len(index.rel_offsets) == 20
        if errors:
            raise errors[0]
        assert reads[0] > 20, "the reader hardly ran while entries were being published"
        assert [r.value for r in store.read("t", 0, 0)] == [b"first"] + [
            b"v%d" % i for i in range(20)
        ]
