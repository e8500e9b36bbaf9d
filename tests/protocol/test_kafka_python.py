"""kafka-python against the listener: idempotent producer, assign/seek consumer, offsets by
time, and a consumer group; every test reads back exactly what it wrote."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

from streams.cluster import LocalCluster
from streams.errors import GroupNotEmpty
from streams.groups import GroupState, ResetScope, ResetStrategy


def _produce(bootstrap: str, topic: str, n: int, **options) -> list:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **options)
    try:
        futures = [
            producer.send(topic, key=b"k%d" % i, value=b"value-%d" % i, partition=i % 2)
            for i in range(n)
        ]
        producer.flush()
        return [f.get(timeout=10) for f in futures]
    finally:
        producer.close()


def test_idempotent_producer_and_assigned_consumer(broker, bootstrap):
    broker.store.create_topic("orders", 2)
    metas = _produce(bootstrap, "orders", 200, enable_idempotence=True, acks="all")
    assert [m.offset for m in metas if m.partition == 0] == list(range(100))
    assert [m.offset for m in metas if m.partition == 1] == list(range(100))
    # what the store holds is what was sent, byte for byte, offsets included
    stored = broker.store.read("orders", 1, 0, max_records=1000)
    assert [(r.offset, r.key, r.value) for r in stored] == [
        (i, b"k%d" % (2 * i + 1), b"value-%d" % (2 * i + 1)) for i in range(100)
    ]

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2000
    )
    try:
        tps = [TopicPartition("orders", 0), TopicPartition("orders", 1)]
        consumer.assign(tps)
        consumer.seek(tps[0], 40)
        consumer.seek_to_beginning(tps[1])
        got = {(m.partition, m.offset): (m.key, m.value) for m in consumer}
        assert got == {
            (i % 2, i // 2): (b"k%d" % i, b"value-%d" % i)
            for i in range(200)
            if i // 2 >= 40 or i % 2 == 1
        }
        assert consumer.end_offsets(tps) == {tps[0]: 100, tps[1]: 100}
        assert consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
    finally:
        consumer.close()


def test_offsets_for_times(broker, bootstrap):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    base = int(time.time() * 1000) - 10_000
    for i in range(10):
        producer.send("timed", value=b"%d" % i, partition=0, timestamp_ms=base + i * 100)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition("timed", 0)
        found = consumer.offsets_for_times({tp: base + 450})[tp]
        assert (found.offset, found.timestamp) == (5, base + 500)
        assert consumer.offsets_for_times({tp: base + 10_000})[tp] is None
    finally:
        consumer.close()


def _poll_until(consumer: KafkaConsumer, n: int) -> list:
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=200).values():
            got += [(m.partition, m.offset, m.value) for m in msgs]
    return got


def _group_consumer(bootstrap: str, group: str) -> KafkaConsumer:
    return KafkaConsumer(
        "shared",
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id="kp-consumer",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )


def test_group_seen_by_console_and_reset_through_coordinator(broker, bootstrap):
    """A kafka-python group is the console's group: members and lag through LocalCluster, and
    an offset reset (admin commit) refused while members are in, applied once they left."""
    broker.store.create_topic("shared", 2)
    _produce(bootstrap, "shared", 100, enable_idempotence=True)
    cluster = LocalCluster(broker.store, broker.coordinator)

    consumer = _group_consumer(bootstrap, "kp-group")
    try:
        got = _poll_until(consumer, 80)
        consumer.commit(
            {TopicPartition("shared", p): OffsetAndMetadata(40, "", -1) for p in (0, 1)}
        )
        detail = cluster.describe_group("kp-group")
        assert detail.description.state == "Stable"
        [member] = detail.description.members
        assert member.client_id == "kp-consumer"
        assert member.assignment == {"shared": [0, 1]}
        assert {(p.partition, p.committed, p.lag) for p in detail.lag.partitions} == {
            (0, 40, 10),
            (1, 40, 10),
        }
        plan = cluster.plan_reset(
            group_id="kp-group",
            strategy=ResetStrategy.parse("to-offset", "5"),
            scope=ResetScope(topic="shared"),
        )
        with pytest.raises(GroupNotEmpty):
            cluster.execute_reset(plan=plan)
    finally:
        consumer.close()
    assert sorted(got)[:2] == [(0, 0, b"value-0"), (0, 1, b"value-2")]

    assert broker.coordinator.group_state("kp-group") == GroupState.EMPTY
    cluster.execute_reset(plan=plan)
    assert {tp: c.offset for tp, c in broker.coordinator.committed("kp-group").items()} == {
        ("shared", 0): 5,
        ("shared", 1): 5,
    }
    # the next member of the group starts where the reset put it
    consumer = _group_consumer(bootstrap, "kp-group")
    try:
        again = _poll_until(consumer, 90)
    finally:
        consumer.close()
    assert sorted(again) == sorted(
        (i % 2, i // 2, b"value-%d" % i) for i in range(100) if i // 2 >= 5
    )
