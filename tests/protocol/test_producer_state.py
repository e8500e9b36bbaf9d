"""Producer ids and a partition's producer state (sequences, epochs, retries), without the
network."""

from __future__ import annotations

import json

import pytest

from streams.errors import OutOfOrderSequence, ProducerFenced
from streams.log import LogStore
from streams.log import records as rb
from streams.log.producer_state import (
    ID_BLOCK,
    PRODUCER_ID_EXPIRATION_MS,
    ProducerIds,
    ProducerStateManager,
)
from streams.log.records import ProducerRecord


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def header(pid: int, epoch: int, seq: int, n: int = 1) -> rb.BatchHeader:
    records = [ProducerRecord(b"v")] * n
    raw = rb.build_batch(
        records, now_ms=0, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    return rb.parse_header(raw)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path, clock):
    s = LogStore.open(tmp_path / "data", clock=clock, background=False)
    yield s
    s.close()


def test_ids_are_never_reused_even_after_a_crash(tmp_path):
    first = ProducerIds(str(tmp_path / "meta")).load()
    ids = [first.allocate() for _ in range(3)]
    # a crash: nothing but the persisted block end survives
    second = ProducerIds(str(tmp_path / "meta")).load()
    later = second.allocate()
    assert ids == [0, 1, 2]
    assert later >= ID_BLOCK


def _state(tmp_path, clock) -> ProducerStateManager:
    return ProducerStateManager(str(tmp_path / "t-0"), clock)


def test_sequences_epochs_and_retries(tmp_path, clock):
    state = _state(tmp_path, clock)
    other = ProducerStateManager(str(tmp_path / "t-1"), clock)
    h0 = header(7, 0, 0, n=3)
    assert state.check_batches([h0]) == [None]
    state.record(h0, base=10, ts=-1)
    (retry,) = state.check_batches([h0])
    assert (retry.base_offset, retry.last_offset) == (10, 12)
    with pytest.raises(OutOfOrderSequence):
        state.check_batches([header(7, 0, 4)])
    assert state.check_batches([header(7, 0, 3)]) == [None]
    assert other.check_batches([header(7, 0, 99)]) == [None]  # per partition: first seen there
    with pytest.raises(OutOfOrderSequence):
        state.check_batches([header(7, 1, 5)])  # a new epoch starts at 0
    state.record(header(7, 1, 0), base=13, ts=-1)
    with pytest.raises(ProducerFenced):
        state.check_batches([header(7, 0, 3)])


def test_only_the_last_five_batches_are_remembered(tmp_path, clock):
    state = _state(tmp_path, clock)
    for i in range(7):
        state.record(header(1, 0, i), base=i, ts=-1)
    assert state.check_batches([header(1, 0, 2)])[0].base_offset == 2
    with pytest.raises(OutOfOrderSequence):
        state.check_batches([header(1, 0, 1)])  # older than the five kept


def test_idle_producers_are_forgotten(tmp_path, clock):
    state = _state(tmp_path, clock)
    state.record(header(3, 0, 0), base=0, ts=-1)
    clock.now += PRODUCER_ID_EXPIRATION_MS + 1
    state.snapshot_data(1)
    assert state.check_batches([header(3, 0, 42)]) == [None]  # unknown again: any sequence


def test_a_marker_of_a_newer_epoch_fences_the_old_one(tmp_path, clock):
    state = _state(tmp_path, clock)
    state.record(header(4, 0, 0, n=2), base=0, ts=-1)
    state.record_marker(4, 1)  # the coordinator bumped the epoch to abort (a fence)
    with pytest.raises(ProducerFenced):
        state.check_batches([header(4, 0, 2)])
    with pytest.raises(OutOfOrderSequence):
        state.check_batches([header(4, 1, 2)])  # the new epoch starts at 0
    assert state.check_batches([header(4, 1, 0)]) == [None]


def test_batches_recovery_cut_from_the_log_are_forgotten(store):
    store.create_topic("t", 1)
    plog = store.partition_log("t", 0)
    plog.producers.record(header(5, 0, 0), base=0, ts=-1)  # the snapshot says offset 0 exists
    plog.producers.write_snapshot(plog.producers.snapshot_data(1))
    reloaded = ProducerStateManager(plog.directory, store.clock)
    reloaded.load(plog)  # ... but the log is empty (cut short)
    assert reloaded.check_batches([header(5, 0, 0)]) == [None]  # so a retry is written again


def test_check_batches_follows_the_sequence_across_a_record_set(tmp_path, clock):
    state = _state(tmp_path, clock)
    state.record(header(3, 0, 0, n=2), base=0, ts=-1)
    retry, new = state.check_batches([header(3, 0, 0, n=2), header(3, 0, 2, n=2)])
    assert (retry.base_offset, new) == (0, None)
    assert state.check_batches([header(3, 0, 2, n=2), header(3, 0, 4)]) == [None, None]
    with pytest.raises(OutOfOrderSequence):
        state.check_batches([header(3, 0, 2, n=2), header(3, 0, 5)])  # gap in the set
    with pytest.raises(ProducerFenced):
        state.check_batches([header(3, 1, 0), header(3, 0, 1)])  # epoch goes back


def test_an_older_store_wide_snapshot_is_handed_to_its_partitions(tmp_path, clock):
    """A data directory from before partitions owned their producer state: the retry of a
    batch the old snapshot remembers (in a segment the tail scan does not read) is still
    answered with its original offsets, and the old file goes once each partition has its own."""
    data = tmp_path / "data"
    with LogStore.open(data, clock=clock, background=False) as s:
        s.create_topic("t", 1, {"segment.bytes": "1024"})
        raw = rb.build_batch(
            [ProducerRecord(b"x" * 600)], now_ms=0, producer_id=9, producer_epoch=0, base_sequence=0
        )
        s.append_raw("t", 0, raw)
        for _ in range(3):  # roll past it: the tail scan alone would not see it
            s.append("t", b"y" * 600, partition=0)
    (data / "t-0" / "producer-state.json").unlink()
    legacy = {
        "version": 0,
        "covered": {"t\x000": 4},
        "entries": [["t", 0, 9, 0, [[0, 0, 0, 0, -1]], clock.now]],
    }
    (data / ".meta" / "producer-state.json").write_text(json.dumps(legacy))
    with LogStore.open(data, clock=clock, background=False) as s:
        assert not (data / ".meta" / "producer-state.json").exists()
        assert (data / "t-0" / "producer-state.json").exists()
        assert s.produce("t", 0, raw).base_offset == 0  # a retry, not written again
        assert s.offsets("t", 0) == (0, 4)
