"""What is on disk when a transactional produce is acknowledged, with confluent-kafka: its
records, and the coordinator's record of the AddPartitionsToTxn that let them in (answered
without an fdatasync of its own, then synced beside the records' fdatasync), so a crash of the
machine never leaves an acknowledged record in a transaction the coordinator forgot.

``os.fdatasync`` is wrapped by a recorder that calls the real one (tests/log/test_durability):
it notes each synced file and how many bytes it held when the sync began.
"""

from __future__ import annotations

import os

from confluent_kafka import Producer

from tests.log.test_durability import SyncLog

DEADLINE_S = 30


def test_an_acknowledged_transactional_produce_has_its_transaction_state_on_disk(
    broker, bootstrap, monkeypatch
):
    broker.store.create_topic("durable", 1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "durable", "linger.ms": 0})
    p.init_transactions(DEADLINE_S)
    syncs = SyncLog(monkeypatch)
    acked: list = []
    p.begin_transaction()
    p.produce("durable", b"v", on_delivery=lambda err, msg: acked.append(err))
    assert p.flush(DEADLINE_S) == 0 and acked == [None]
    state = broker.store.partition_log("__transaction_state", 0).segments[-1].path
    records = broker.store.partition_log("durable", 0).segments[-1].path
    done = list(syncs.syncs)  # the syncs that had completed when the record was acknowledged
    # nothing is written to either log between the acknowledgement and here (no commit yet)
    for path in (state, records):
        size = os.path.getsize(path)
        assert any(
            synced == os.path.realpath(path) and covered >= size for synced, covered in done
        ), f"{os.path.basename(os.path.dirname(path))} was not on disk at the acknowledgement"
    p.commit_transaction(DEADLINE_S)
