"""The operator's abort (``TransactionCoordinator.abort_if_current``): the coordinator checks
that the ongoing transaction is still the one the operator saw — producer id, epoch and start
time — and aborts it under the same lock, so nothing can end it and begin the next one between
the check and the abort (the check-then-act race of a describe followed by EndTxn)."""

from __future__ import annotations

import pytest

from streams.errors import InvalidTxnState, ProducerFenced, UnknownTransactionalId
from streams.txn import TxnState
from tests.txn.test_coordinator import Broker, Clock


@pytest.fixture
def broker(tmp_path):
    clock = Clock()
    b = Broker(tmp_path, clock)
    b.clock = clock
    yield b
    b.close()


def _state(b: Broker, txn_id: str):
    return next(t for t in b.txns.describe() if t.transactional_id == txn_id)


def test_aborts_the_transaction_seen_and_fences_its_producer(broker):
    b = broker
    pid, epoch = b.txns.init_producer_id("app", 60_000)
    b.txns.add_partitions("app", pid, epoch, [("t", 0)])
    b.produce(0, [b"hanging"], pid, epoch, 0)
    seen = _state(b, "app")

    before = b.txns.abort_if_current("app", pid, epoch, seen.start_ms)

    assert before == seen
    after = _state(b, "app")
    assert (after.state, after.producer_epoch) == (str(TxnState.COMPLETE_ABORT), epoch + 1)
    assert b.store.read("t", 0, 0, committed=True) == []  # its record is aborted
    with pytest.raises(ProducerFenced):
        b.produce(0, [b"zombie"], pid, epoch, 1)


def test_refuses_a_later_transaction_of_the_same_epoch(broker):
    b = broker
    pid, epoch = b.txns.init_producer_id("app", 60_000)
    b.txns.add_partitions("app", pid, epoch, [("t", 0)])
    seen = _state(b, "app")
    b.txns.end_txn("app", pid, epoch, commit=True)  # EndTxn < v5: the epoch stays
    b.clock.now += 1
    b.txns.add_partitions("app", pid, epoch, [("t", 1)])

    with pytest.raises(InvalidTxnState, match="look at it again"):
        b.txns.abort_if_current("app", pid, epoch, seen.start_ms)
    now = _state(b, "app")
    assert (now.state, now.producer_epoch, now.partitions) == ("Ongoing", epoch, (("t", 1),))


def test_refuses_another_epoch_a_finished_transaction_and_an_unknown_id(broker):
    b = broker
    pid, epoch = b.txns.init_producer_id("app", 60_000)
    b.txns.add_partitions("app", pid, epoch, [("t", 0)])
    with pytest.raises(InvalidTxnState, match="epoch"):
        b.txns.abort_if_current("app", pid, epoch - 1)
    assert _state(b, "app").state == "Ongoing"
    b.txns.end_txn("app", pid, epoch, commit=True)
    with pytest.raises(InvalidTxnState, match="not Ongoing"):
        b.txns.abort_if_current("app", pid, epoch)
    assert _state(b, "app").state == "CompleteCommit"
    with pytest.raises(UnknownTransactionalId):
        b.txns.abort_if_current("nobody", pid, epoch)
