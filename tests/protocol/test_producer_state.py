"""Producer ids and per-partition sequence state, without the network."""

from __future__ import annotations

import pytest

from streams.errors import OutOfOrderSequence, ProducerFenced
from streams.log import LogStore
from streams.log import records as rb
from streams.log.producer_state import (
    ID_BLOCK,
    PRODUCER_ID_EXPIRATION_MS,
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


def test_ids_are_never_reused_even_after_a_crash(store):
    first = ProducerStateManager(store).load()
    ids = [first.allocate_id() for _ in range(3)]
    # a crash: no snapshot, nothing but the persisted block end survives
    second = ProducerStateManager(store).load()
    later = second.allocate_id()
    assert ids == [0, 1, 2]
    assert later >= ID_BLOCK


def test_sequences_epochs_and_retries(store):
    state = ProducerStateManager(store).load()
    h0 = header(7, 0, 0, n=3)
    assert state.check("t", 0, h0) is None
    state.record("t", 0, h0, base=10, ts=-1)
    retry = state.check("t", 0, h0)
    assert (retry.base_offset, retry.last_offset) == (10, 12)
    with pytest.raises(OutOfOrderSequence):
        state.check("t", 0, header(7, 0, 4))
    assert state.check("t", 0, header(7, 0, 3)) is None
    assert state.check("t", 1, header(7, 0, 99)) is None  # per partition: first seen there
    with pytest.raises(OutOfOrderSequence):
        state.check("t", 0, header(7, 1, 5))  # a new epoch starts at 0
    state.record("t", 0, header(7, 1, 0), base=13, ts=-1)
    with pytest.raises(ProducerFenced):
        state.check("t", 0, header(7, 0, 3))


def test_only_the_last_five_batches_are_remembered(store):
    state = ProducerStateManager(store).load()
    for i in range(7):
        state.record("t", 0, header(1, 0, i), base=i, ts=-1)
    assert state.check("t", 0, header(1, 0, 2)).base_offset == 2
    with pytest.raises(OutOfOrderSequence):
        state.check("t", 0, header(1, 0, 1))  # older than the five kept


def test_idle_producers_are_forgotten(store, clock):
    state = ProducerStateManager(store).load()
    state.record("t", 0, header(3, 0, 0), base=0, ts=-1)
    clock.now += PRODUCER_ID_EXPIRATION_MS + 1
    state.snapshot()
    assert state.check("t", 0, header(3, 0, 42)) is None  # unknown again: any sequence


def test_batches_recovery_cut_from_the_log_are_forgotten(store):
    store.create_topic("t", 1)
    state = ProducerStateManager(store).load()
    state.record("t", 0, header(5, 0, 0), base=0, ts=-1)  # snapshot says offset 0 exists ...
    state.snapshot()
    reloaded = ProducerStateManager(store).load()  # ... but the log is empty (cut short)
    assert reloaded.check("t", 0, header(5, 0, 0)) is None  # so a retry is written again


def test_check_batches_follows_the_sequence_across_a_record_set(store):
    state = ProducerStateManager(store).load()
    state.record("t", 0, header(3, 0, 0, n=2), base=0, ts=-1)
    retry, new = state.check_batches("t", 0, [header(3, 0, 0, n=2), header(3, 0, 2, n=2)])
    assert (retry.base_offset, new) == (0, None)
    assert state.check_batches("t", 0, [header(3, 0, 2, n=2), header(3, 0, 4)]) == [None, None]
    with pytest.raises(OutOfOrderSequence):
        state.check_batches("t", 0, [header(3, 0, 2, n=2), header(3, 0, 5)])  # gap in the set
    with pytest.raises(ProducerFenced):
        state.check_batches("t", 0, [header(3, 1, 0), header(3, 0, 1)])  # epoch goes back
