"""confluent-kafka (librdkafka 2.16) against the listener: an idempotent acks=all producer with
lz4 and zstd, a group of three consumers rebalancing when one leaves, and the AdminClient."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from streams.log import compression
from streams.log import records as rb

DEADLINE_S = 30


def _produce(bootstrap: str, topic: str, values: list[bytes], **config) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    errors = []
    for i, value in enumerate(values):
        producer.produce(
            topic,
            key=b"k%d" % i,
            value=value,
            on_delivery=lambda err, _msg: errors.append(err) if err else None,
        )
    assert producer.flush(DEADLINE_S) == 0
    assert errors == []


def _stored_codecs(store, topic: str, partition: int) -> set[int]:
    raw = store.read_batches(topic, partition, 0, 1 << 24)
    codecs, pos = set(), 0
    while pos < len(raw):
        h = rb.parse_header(raw, pos)
        codecs.add(h.codec)
        pos += h.size
    return codecs


@pytest.mark.parametrize(
    ("codec", "codec_id"), [("lz4", compression.LZ4), ("zstd", compression.ZSTD)]
)
def test_idempotent_acks_all_producer_with_compression(broker, bootstrap, codec, codec_id):
    broker.store.create_topic("compressed", 1)
    values = [b"value %05d " % i + b"x" * (i % 50) for i in range(3000)]
    _produce(
        bootstrap,
        "compressed",
        values,
        **{"acks": "all", "enable.idempotence": True, "compression.type": codec},
    )
    stored = broker.store.read("compressed", 0, 0, max_records=10_000)
    assert [(r.offset, r.key, r.value) for r in stored] == [
        (i, b"k%d" % i, v) for i, v in enumerate(values)
    ]
    assert _stored_codecs(broker.store, "compressed", 0) == {codec_id}  # kept as sent

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition("compressed", 0, 0)])
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < len(values) and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.5):
                assert m.error() is None
                got.append((m.offset(), m.value()))
        assert got == list(enumerate(values))
    finally:
        consumer.close()


def _group_consumer(bootstrap: str, name: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "trio",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
        }
    )
    consumer.subscribe(["trio-topic"])
    return consumer


def _poll_all(consumers, seen: dict, until) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not until() and time.monotonic() < deadline:
        for c in consumers:
            msgs = c.consume(500, timeout=0.1)
            for m in msgs:
                assert m.error() is None
                seen[(m.partition(), m.offset())] = m.value()
            if msgs:
                c.commit(asynchronous=False)


def test_group_of_three_rebalances_when_one_leaves(broker, bootstrap):
    broker.store.create_topic("trio-topic", 6)
    first = [b"first-%d" % i for i in range(600)]
    _produce(bootstrap, "trio-topic", first, acks="all")
    consumers = [_group_consumer(bootstrap, f"c{i}") for i in range(3)]
    seen: dict = {}
    try:
        _poll_all(consumers, seen, lambda: len(seen) == 600 and _assigned(consumers) == [2, 2, 2])
        assert sorted(seen.values()) == sorted(first)
        assert _assigned(consumers) == [2, 2, 2]
        desc = broker.coordinator.describe_group("trio")
        assert (desc.state, len(desc.members)) == ("Stable", 3)

        consumers.pop().close()  # leaves the group: its partitions move to the others
        second = [b"second-%d" % i for i in range(300)]
        _produce(bootstrap, "trio-topic", second, acks="all")
        _poll_all(consumers, seen, lambda: len(seen) == 900 and _assigned(consumers) == [3, 3])
        assert sorted(seen.values()) == sorted(first + second)
        assert _assigned(consumers) == [3, 3]
        assert len(broker.coordinator.describe_group("trio").members) == 2
    finally:
        for c in consumers:
            c.close()
    committed = broker.coordinator.committed("trio")
    ends = {("trio-topic", p): broker.store.offsets("trio-topic", p)[1] for p in range(6)}
    assert {tp: c.offset for tp, c in committed.items()} == ends
    assert broker.coordinator.describe_group("trio").state == "Empty"


def _assigned(consumers) -> list[int]:
    return [len(c.assignment()) for c in consumers]


def test_admin_client_topics_configs_and_groups(broker, bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("adm", 2, 1, config={"retention.ms": "3600000"})])
    assert futures["adm"].result(timeout=DEADLINE_S) is None
    assert len(broker.store.describe_topic("adm").partitions) == 2

    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic("adm", 1, 1)])["adm"].result(timeout=DEADLINE_S)

    topic = ConfigResource(ConfigResource.Type.TOPIC, "adm")
    configs = admin.describe_configs([topic])[topic].result(timeout=DEADLINE_S)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"

    change = ConfigResource(
        ConfigResource.Type.TOPIC,
        "adm",
        incremental_configs=[
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    admin.incremental_alter_configs([change])[change].result(timeout=DEADLINE_S)
    overrides = broker.store.describe_topic("adm").overrides
    assert overrides["retention.ms"] == "60000"
    assert overrides["cleanup.policy"] == "compact,delete"

    admin.create_partitions([NewPartitions("adm", 4)])["adm"].result(timeout=DEADLINE_S)
    meta = admin.list_topics(timeout=DEADLINE_S)
    assert sorted(meta.topics["adm"].partitions) == [0, 1, 2, 3]

    broker.coordinator.commit_offsets("idle-group", {("adm", 0): 0})
    listed = admin.list_consumer_groups().result(timeout=DEADLINE_S)
    assert "idle-group" in {g.group_id for g in listed.valid}
    admin.delete_consumer_groups(["idle-group"])["idle-group"].result(timeout=DEADLINE_S)
    assert "idle-group" not in {g for g, _ in broker.coordinator.list_groups()}

    admin.delete_topics(["adm"])["adm"].result(timeout=DEADLINE_S)
    assert "adm" not in broker.store.list_topics()
