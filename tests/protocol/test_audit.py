"""Admin changes made over the Kafka port reach the listener's `AuditSink` with the console's
action names and payloads, and the client id and address as "who" (confluent-kafka's
AdminClient; the console's sink is tested in tests/brokerui/test_kafka_port.py)."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from tests.protocol.conftest import open_broker

DEADLINE_S = 30


class Recorder:
    """An AuditSink that keeps the events."""

    def __init__(self):
        self.events = []

    def record(self, event) -> None:
        self.events.append(event)


@pytest.fixture
def audited(tmp_path):
    sink = Recorder()
    broker = open_broker(tmp_path / "data", audit=sink)
    host, port = broker.kafka_address
    yield broker, f"{host}:{port}", sink
    broker.close()


def _wait(futures: dict) -> None:
    for future in futures.values():
        future.result(timeout=DEADLINE_S)


def test_admin_client_changes_are_audited_like_the_consoles(audited):
    broker, bootstrap, sink = audited
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "ops-admin"})

    _wait(admin.create_topics([NewTopic("orders", 2, config={"retention.ms": "3600000"})]))
    _wait(admin.create_topics([NewTopic("dry-run", 1)], validate_only=True))
    resource = ConfigResource(
        "topic",
        "orders",
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    _wait(admin.incremental_alter_configs([resource]))
    _wait(admin.create_partitions([NewPartitions("orders", 3)]))

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        producer.produce("orders", value=b"v%d" % i, partition=0)
    assert producer.flush(DEADLINE_S) == 0
    _wait(admin.delete_records([TopicPartition("orders", 0, 4)]))

    offsets = ConsumerGroupTopicPartitions("billing", [TopicPartition("orders", 0, 7)])
    _wait(admin.alter_consumer_group_offsets([offsets]))
    _wait(admin.alter_consumer_group_offsets([offsets]))  # no change: no record
    _wait(admin.delete_consumer_groups(["billing"]))
    _wait(admin.delete_topics(["orders"]))

    actions = [(e.action, e.target) for e in sink.events]
    assert actions == [
        ("topic.create", "topic orders"),
        ("topic.config", "topic orders"),
        ("topic.add_partitions", "topic orders"),
        ("topic.purge", "topic orders"),
        ("group.reset", "group billing"),
        ("group.delete", "group billing"),
        ("topic.delete", "topic orders"),
    ]
    for event in sink.events:
        assert re.fullmatch(r"ops-admin@127\.0\.0\.1:\d+", event.who), event.who
        assert event.client_id == "ops-admin" and event.user is None
    by_action = {e.action: e for e in sink.events}
    create = by_action["topic.create"]
    assert create.before is None
    assert create.after == {"partitions": 2, "config": {"retention.ms": "3600000"}}
    config = by_action["topic.config"]
    assert (config.before, config.after) == (
        {"retention.ms": "3600000"},
        {"retention.ms": "7200000"},
    )
    parts = by_action["topic.add_partitions"]
    assert (parts.before, parts.after) == ({"partitions": 2}, {"partitions": 3})
    purge = by_action["topic.purge"]
    assert purge.before == {"log_start_offsets": {"0": 0}}
    assert purge.after == {
        "log_start_offsets": {"0": 4},
        "records_deleted": 4,
        "request": {"partition": 0, "mode": "offset", "before_offset": 4},
    }
    reset = by_action["group.reset"]
    assert reset.before == {"offsets": {"orders": {"0": None}}}
    assert reset.after["offsets"] == {"orders": {"0": 7}}
    group = by_action["group.delete"]
    assert (group.before, group.after) == ({"offsets": {"orders": {"0": 7}}}, None)
    delete = by_action["topic.delete"]
    assert delete.before == {
        "partitions": 3,
        "records": 6,
        "size_bytes": delete.before["size_bytes"],
        "config": {"retention.ms": "7200000"},
        "end_offsets": {"0": 10, "1": 0, "2": 0},
    }
    assert delete.before["size_bytes"] > 0


def test_refused_and_failed_changes(audited):
    broker, bootstrap, sink = audited
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "ops-admin"})
    broker.store.create_topic("orders", 1)
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        _wait(admin.create_topics([NewTopic("orders", 1)]))
    with pytest.raises(Exception, match="UNKNOWN_TOPIC"):
        _wait(admin.delete_topics(["never-was"]))
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED"):  # internal topic
        _wait(admin.create_partitions([NewPartitions("__consumer_offsets", 60)]))
    assert sink.events == []


def test_changes_naming_topics_by_id_are_audited_under_the_topic_name(audited):
    """OffsetCommit v10 and DeleteTopics v6 name topics by id (KIP-516): the audit log still
    says which topic."""
    import uuid

    from streams.protocol import codec
    from tests.protocol.wire import WireClient

    broker, bootstrap, sink = audited
    broker.store.create_topic("orders", 1)
    topic_id = uuid.UUID(hex=broker.store.topic_id("orders"))
    oc = codec.request_class(8)[10].OffsetCommitRequestTopic
    dt = codec.request_class(20)[6].DeleteTopicState
    with WireClient(bootstrap) as c:
        committed = c.call(
            8,
            10,
            group_id="billing",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[
                oc(
                    topic_id=topic_id,
                    partitions=[
                        oc.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=-2, committed_metadata=None
                        )
                    ],
                )
            ],
        )
        assert committed.topics[0].partitions[0].error_code == 0
        deleted = c.call(20, 6, topics=[dt(name=None, topic_id=topic_id)], timeout_ms=5000)
        assert deleted.responses[0].error_code == 0
    by_action = {e.action: e for e in sink.events}
    assert [(e.action, e.target) for e in sink.events] == [
        ("group.reset", "group billing"),
        ("topic.delete", "topic orders"),
    ]
    assert by_action["group.reset"].before == {"offsets": {"orders": {"0": None}}}
    assert by_action["group.reset"].after["offsets"] == {"orders": {"0": -2}}


def test_kafka_python_offset_changes_and_a_refused_group_delete(audited):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    from kafka.structs import OffsetAndMetadata

    broker, bootstrap, sink = audited
    broker.store.create_topic("ledger", 2)
    broker.coordinator.commit_offsets("ops", {("ledger", 0): 5, ("ledger", 1): 2})
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin")
    try:
        admin.delete_group_offsets("ops", [KTopicPartition("ledger", 0)])
        admin.alter_group_offsets(
            "ops", {KTopicPartition("ledger", 1): OffsetAndMetadata(1, "", -1)}
        )
    finally:
        admin.close()

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "busy", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["ledger"])
    deadline = time.monotonic() + DEADLINE_S
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    confluent = AdminClient({"bootstrap.servers": bootstrap, "client.id": "ops-admin"})
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        _wait(confluent.delete_consumer_groups(["busy"]))
    consumer.close()

    events = {(e.action, e.target): e for e in sink.events}
    assert list(events) == [
        ("group.offsets.delete", "group ops"),
        ("group.reset", "group ops"),
        ("group.delete.refused", "group busy"),
    ]
    deleted = events[("group.offsets.delete", "group ops")]
    assert deleted.before == {"topic": "ledger", "offsets": {"ledger": {"0": 5, "1": 2}}}
    assert deleted.after == {"topic": "ledger", "offsets": None}
    assert re.fullmatch(r"kp-admin@127\.0\.0\.1:\d+", deleted.who)
    reset = events[("group.reset", "group ops")]
    assert reset.before == {"offsets": {"ledger": {"1": 2}}}
    assert reset.after["offsets"] == {"ledger": {"1": 1}}
    refused = events[("group.delete.refused", "group busy")]
    assert "active members" in refused.after["reason"]
