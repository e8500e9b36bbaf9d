"""EndTxn answered at the commit point, markers after (as Kafka's coordinator does), with
confluent-kafka (librdkafka): ``commit_transaction`` returns once PrepareCommit is on disk
while the COMMIT marker is still held back; a read_committed consumer sees none of the
transaction's records until the marker is written, then all of them once; and the producer's
next transaction goes on after it (its AddPartitionsToTxn waits or is retried meanwhile)."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

DEADLINE_S = 30


def test_commit_returns_before_the_markers_and_readers_wait_for_them(
    broker, bootstrap, monkeypatch
):
    broker.store.create_topic("late-markers", 1)
    released = threading.Event()
    append_markers = broker.store.append_markers

    def held(*args, **kwargs):
        released.wait()
        return append_markers(*args, **kwargs)

    monkeypatch.setattr(broker.store, "append_markers", held)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "late"})
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "late-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        p.init_transactions(DEADLINE_S)
        p.begin_transaction()
        for i in range(3):
            p.produce("late-markers", b"v%d" % i, partition=0)
        p.commit_transaction(DEADLINE_S)  # the old coordinator blocked here on the markers
        plog = broker.store.partition_log("late-markers", 0)
        assert plog.txns.open and plog.last_stable_offset == 0  # the marker is not written

        c.assign([TopicPartition("late-markers", 0, 0)])
        seen = [m.value() for m in c.consume(10, timeout=1.0) if m.error() is None]
        assert seen == []  # nothing of it before its marker

        released.set()
        p.begin_transaction()  # the next transaction: after the markers
        p.produce("late-markers", b"v3", partition=0)
        p.commit_transaction(DEADLINE_S)
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < 4 and time.monotonic() < deadline:
            seen += [m.value() for m in c.consume(10, timeout=0.2) if m.error() is None]
        assert seen == [b"v0", b"v1", b"v2", b"v3"]
    finally:
        released.set()
        c.close()
        p.flush(5)
