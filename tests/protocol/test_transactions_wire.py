"""Transactions at the byte level, where clients cannot take us: KIP-890 (a transactional
produce to a partition the transaction never added is refused; EndTxn v5 bumps the epoch and
says so), PRODUCER_FENCED against INVALID_PRODUCER_EPOCH by request version, and Fetch's
aborted-transactions list."""

from __future__ import annotations

import time

from streams.log import records as rb
from streams.log.records import ProducerRecord
from streams.protocol import codec
from tests.protocol.wire import WireClient

PRODUCE, FETCH, INIT_PID, ADD_PARTITIONS, END_TXN = 0, 1, 22, 24, 26
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED = 47, 48, 90
P = codec.request_class(PRODUCE)
A = codec.request_class(ADD_PARTITIONS)
F = codec.request_class(FETCH)


def _txn_batch(values, pid, epoch, seq) -> bytes:
    return rb.build_batch(
        [ProducerRecord(v) for v in values],
        now_ms=1_700_000_000_000,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes_extra=rb.ATTR_TRANSACTIONAL,
    )


def _produce(c: WireClient, topic: str, data: bytes, txn_id: str) -> int:
    resp = c.call(
        PRODUCE,
        9,
        transactional_id=txn_id,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            P.TopicProduceData(
                name=topic, partition_data=[P.TopicProduceData.PartitionProduceData(0, data)]
            )
        ],
    )
    return resp.responses[0].partition_responses[0].error_code


def _init(c: WireClient, txn_id: str) -> tuple[int, int]:
    r = c.call(INIT_PID, 4, transactional_id=txn_id, transaction_timeout_ms=60_000)
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def _add(c: WireClient, txn_id: str, pid: int, epoch: int, topic: str, version: int = 3) -> int:
    r = c.call(
        ADD_PARTITIONS,
        version,
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[0])],
    )
    return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def _settled(broker, txn_id: str) -> None:
    """Wait until the coordinator wrote the markers of `txn_id`'s ended transaction (EndTxn
    is answered before them, as Kafka's)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        states = {t.transactional_id: t.state for t in broker.transactions.describe()}
        if states.get(txn_id) in ("CompleteCommit", "CompleteAbort"):
            return
        time.sleep(0.01)
    raise AssertionError(f"{txn_id}: markers not written within 30 s")


def _end(c: WireClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int):
    return c.call(
        END_TXN,
        version,
        transactional_id=txn_id,
        producer_id=pid,
        producer_epoch=epoch,
        committed=commit,
    )


def test_a_transactional_produce_needs_its_partition_added_first(broker, bootstrap):
    """KIP-890 part 1: without it, a late produce of an ended transaction would open a
    transaction nobody ends, and hold every read_committed reader at it forever."""
    broker.store.create_topic("verify", 1)
    with WireClient(bootstrap) as c:
        pid, epoch = _init(c, "v-txn")
        assert _produce(c, "verify", _txn_batch([b"early"], pid, epoch, 0), "v-txn") == (
            INVALID_TXN_STATE
        )
        assert _add(c, "v-txn", pid, epoch, "verify") == 0
        assert _produce(c, "verify", _txn_batch([b"in"], pid, epoch, 0), "v-txn") == 0
        assert _end(c, "v-txn", pid, epoch, True, 3).error_code == 0
        _settled(broker, "v-txn")
        # the same producer and epoch, after the commit: refused, nothing opened
        assert _produce(c, "verify", _txn_batch([b"late"], pid, epoch, 1), "v-txn") == (
            INVALID_TXN_STATE
        )
    plog = broker.store.partition_log("verify", 0)
    assert plog.txns.open == {}
    assert plog.last_stable_offset == plog.high_watermark == 2
    assert [r.value for r in broker.store.read("verify", 0, 0)] == [b"in"]


def test_end_txn_v5_bumps_the_epoch_and_fences_the_previous_one(broker, bootstrap):
    broker.store.create_topic("bump", 1)
    with WireClient(bootstrap) as c:
        pid, epoch = _init(c, "b-txn")
        assert _add(c, "b-txn", pid, epoch, "bump") == 0
        r = _end(c, "b-txn", pid, epoch, True, 5)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
        # a delayed EndTxn of the finished transaction cannot land on the next one
        assert _add(c, "b-txn", pid, epoch + 1, "bump") == 0
        assert _end(c, "b-txn", pid, epoch, False, 5).error_code == PRODUCER_FENCED
        assert _end(c, "b-txn", pid, epoch + 1, True, 3).error_code == 0


def test_a_fenced_producer_gets_the_error_its_request_version_knows(broker, bootstrap):
    broker.store.create_topic("fence", 1)
    with WireClient(bootstrap) as c:
        pid, old = _init(c, "f-txn")
        _, new = _init(c, "f-txn")
        assert new == old + 1
        assert _add(c, "f-txn", pid, old, "fence", version=1) == INVALID_PRODUCER_EPOCH
        assert _add(c, "f-txn", pid, old, "fence", version=2) == PRODUCER_FENCED
        assert _end(c, "f-txn", pid, old, True, 1).error_code == INVALID_PRODUCER_EPOCH
        assert _add(c, "f-txn", pid, new, "fence") == 0
        # a produce of the old epoch after the new one began: INVALID_PRODUCER_EPOCH
        assert _produce(c, "fence", _txn_batch([b"z"], pid, old, 0), "f-txn") == (
            INVALID_PRODUCER_EPOCH
        )


def test_fetch_read_committed_lists_the_aborted_transactions_in_range(broker, bootstrap):
    broker.store.create_topic("ab", 1)
    with WireClient(bootstrap) as c:
        pid, epoch = _init(c, "ab-txn")
        assert _add(c, "ab-txn", pid, epoch, "ab") == 0
        assert _produce(c, "ab", _txn_batch([b"x", b"y"], pid, epoch, 0), "ab-txn") == 0
        assert _end(c, "ab-txn", pid, epoch, False, 3).error_code == 0
        _settled(broker, "ab-txn")

        def fetch(isolation: int):
            r = c.call(
                FETCH,
                11,
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=isolation,
                session_id=0,
                session_epoch=-1,
                topics=[
                    F.FetchTopic(
                        topic="ab",
                        partitions=[
                            F.FetchTopic.FetchPartition(
                                partition=0,
                                current_leader_epoch=-1,
                                fetch_offset=0,
                                log_start_offset=-1,
                                partition_max_bytes=1 << 20,
                            )
                        ],
                    )
                ],
                forgotten_topics_data=[],
                rack_id="",
            )
            return r.responses[0].partitions[0]

        committed = fetch(1)
        assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [
            (pid, 0)
        ]
        assert committed.last_stable_offset == committed.high_watermark == 3
        assert fetch(0).aborted_transactions is None
