"""kafka-python against the listener: idempotent producer, assign/seek consumer, offsets by
time, and a consumer group; every test reads back exactly what it wrote."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


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
