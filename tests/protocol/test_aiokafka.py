"""aiokafka 0.14 (non-flexible versions only: Metadata v5, Produce v7, Fetch v11, the group
APIs at v1-v5) against the listener: idempotent producer and a group consumer."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def _produce(bootstrap: str, topic: str, n: int) -> list:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        sends = [
            await producer.send(topic, key=b"k%d" % i, value=b"aio-%d" % i, partition=i % 2)
            for i in range(n)
        ]
        return [await s for s in sends]
    finally:
        await producer.stop()


async def _consume_group(bootstrap: str, topic: str, n: int) -> list:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id="aio-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
    )
    await consumer.start()
    got = []
    try:
        while len(got) < n:
            batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 30)
            for msgs in batches.values():
                got += [(m.partition, m.offset, m.key, m.value) for m in msgs]
        await consumer.commit()
    finally:
        await consumer.stop()
    return got


def test_idempotent_producer_and_group_consumer(broker, bootstrap):
    broker.store.create_topic("aio", 2)
    metas = asyncio.run(_produce(bootstrap, "aio", 100))
    assert sorted((m.partition, m.offset) for m in metas) == [
        (p, o) for p in (0, 1) for o in range(50)
    ]
    stored = broker.store.read("aio", 0, 0, max_records=1000)
    assert [r.value for r in stored] == [b"aio-%d" % i for i in range(0, 100, 2)]

    got = asyncio.run(_consume_group(bootstrap, "aio", 100))
    assert sorted(got) == sorted((i % 2, i // 2, b"k%d" % i, b"aio-%d" % i) for i in range(100))
    committed = broker.coordinator.committed("aio-group")
    assert {tp: c.offset for tp, c in committed.items()} == {("aio", 0): 50, ("aio", 1): 50}
