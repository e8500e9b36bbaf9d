"""The listener's event loop and what it answers without the thread pool (issue 12 item 10: the
transactional produce path's CPU): uvloop by default, asyncio's loop on request; under Kafka's
flush policy a transaction's AddPartitionsToTxn and its commit's EndTxn (with group offsets
too) are answered on the loop, so a transactional producer, or a consume-transform-produce
one, commits even while every worker thread is busy.

The busy pool is injected, not timed: every worker waits on an Event the test sets at the end.
A listener that sends those requests to the pool cannot answer them meanwhile, and the
producer's commit then fails with its timeout (a stuck test ends, never passes).
"""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
import uvloop
from confluent_kafka import Consumer, Producer, TopicPartition

from streams.broker.runtime import Broker
from streams.log import KAFKA_FLUSH_DEFAULTS
from streams.protocol import ListenerConfig
from tests.tls import self_signed_cert

TIMEOUT_S = 30


def _bootstrap(broker: Broker) -> str:
    host, port = broker.kafka_address
    return f"{host}:{port}"


def _round_trip(bootstrap: str, topic: str) -> list[bytes]:
    """Produce three records (idempotent) and read them back."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in (b"a", b"b", b"c"):
        p.produce(topic, v)
    assert p.flush(TIMEOUT_S) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        got = [m.value() for m in c.consume(3, TIMEOUT_S) if m.error() is None]
    finally:
        c.close()
    return got


def _occupy(broker: Broker, release: threading.Event) -> list:
    """Take every worker thread of the listener's pool until `release` is set; returns their
    futures once all are taken."""
    listener = broker._listener
    workers = listener.config.worker_threads
    started = threading.Barrier(workers + 1)

    def occupy() -> None:
        started.wait()
        release.wait(TIMEOUT_S * 4)

    held = [listener._executor.submit(occupy) for _ in range(workers)]
    started.wait(TIMEOUT_S)
    return held


@pytest.mark.parametrize(
    ("event_loop", "loop_type"), [("uvloop", uvloop.Loop), ("asyncio", asyncio.BaseEventLoop)]
)
def test_the_listener_runs_on_the_event_loop_asked_for(tmp_path, event_loop, loop_type):
    broker = Broker.open(
        tmp_path / "data", kafka_listener=ListenerConfig(port=0, event_loop=event_loop)
    )
    try:
        loop = broker._listener._loop
        assert isinstance(loop, loop_type)
        assert isinstance(loop, uvloop.Loop) == (event_loop == "uvloop")
        broker.store.create_topic("loop", 1)
        assert _round_trip(_bootstrap(broker), "loop") == [b"a", b"b", b"c"]
    finally:
        broker.close()


def test_uvloop_is_the_default_and_an_unknown_loop_is_refused(tmp_path):
    assert ListenerConfig().event_loop == "uvloop"
    cert, key = self_signed_cert(tmp_path)
    tls = Broker.open(
        tmp_path / "tls",
        kafka_listener=ListenerConfig(port=0, tls_cert_file=str(cert), tls_key_file=str(key)),
    )
    try:  # a TLS listener stays on asyncio's loop (see streams.protocol.server)
        assert not isinstance(tls._listener._loop, uvloop.Loop)
    finally:
        tls.close()
    with pytest.raises(ValueError, match="event_loop"):
        Broker.open(tmp_path / "data", kafka_listener=ListenerConfig(port=0, event_loop="trio"))


def test_a_commit_under_kafkas_flush_policy_is_answered_while_the_pool_is_busy(tmp_path):
    broker = Broker.open(
        tmp_path / "data",
        kafka_listener=ListenerConfig(port=0),
        topic_defaults=KAFKA_FLUSH_DEFAULTS,
    )
    release = threading.Event()
    try:
        bootstrap = _bootstrap(broker)
        broker.store.create_topic("busy", 1)
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "busy-txn"})
        p.init_transactions(TIMEOUT_S)  # InitProducerId goes through the pool: before it is busy
        held = _occupy(broker, release)
        for _ in range(2):
            p.begin_transaction()
            for i in range(10):
                p.produce("busy", b"%d" % i)
            p.commit_transaction(TIMEOUT_S)
        assert not any(f.done() for f in held)  # the pool stayed busy all along
        # the markers are written on the loop right after the answer, before it reads the
        # next request: one more round trip, and the test (another thread) sees them too
        p.list_topics("busy", TIMEOUT_S)
        plog = broker.store.partition_log("busy", 0)
        assert plog.txns.open == {}
        # 20 records and 2 COMMIT markers, all stable
        assert plog.last_stable_offset == plog.high_watermark == 22
        assert len(broker.store.read("busy", 0, 0, committed=True)) == 20
    finally:
        release.set()
        broker.close()


def test_send_offsets_under_kafkas_flush_policy_is_answered_while_the_pool_is_busy(tmp_path):
    """AddOffsetsToTxn and TxnOffsetCommit (with its member check against the group) on the
    loop, and the commit of those offsets too (the group coordinator's lock free, no
    fdatasync of ``__consumer_offsets`` due): its markers and offsets are written on the loop
    right after its answer, before the loop reads any other request."""
    broker = Broker.open(
        tmp_path / "data",
        kafka_listener=ListenerConfig(port=0),
        coordinator_options={"initial_rebalance_delay_ms": 0},
        topic_defaults=KAFKA_FLUSH_DEFAULTS,
    )
    release = threading.Event()
    try:
        bootstrap = _bootstrap(broker)
        broker.store.create_topic("in", 1)
        broker.store.create_topic("out", 1)
        assert _round_trip(bootstrap, "in") == [b"a", b"b", b"c"]
        consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": "copier", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": "read_committed",
        })  # fmt: skip
        consumer.subscribe(["in"])
        got = []
        while len(got) < 3:  # joins the group (its member id and generation)
            got += [m for m in consumer.consume(3, TIMEOUT_S) if m.error() is None]
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "copier-txn"})
        p.init_transactions(TIMEOUT_S)
        held = _occupy(broker, release)
        p.begin_transaction()
        for m in got:
            p.produce("out", m.value())
        p.flush(TIMEOUT_S)
        p.send_offsets_to_transaction(
            [TopicPartition("in", 0, got[-1].offset() + 1)],
            consumer.consumer_group_metadata(),
            TIMEOUT_S,
        )
        p.commit_transaction(TIMEOUT_S)
        assert not any(f.done() for f in held)  # the pool stayed busy all along
        release.set()
        # the next request read from a client finds them written (the test reads the broker
        # from another thread, racing the loop: it asks over the wire instead)
        (committed,) = consumer.committed([TopicPartition("in", 0)], TIMEOUT_S)
        assert committed.offset == 3
        assert broker.coordinator.offsets.committed("copier")[("in", 0)].offset == 3
        assert [r.value for r in broker.store.read("out", 0, 0, committed=True)] == [
            b"a", b"b", b"c"
        ]  # fmt: skip
        consumer.close()
    finally:
        release.set()
        broker.close()
