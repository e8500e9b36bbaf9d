"""Admin changes made over the Kafka port reach the listener's `AuditSink` with the console's
action names and payloads, and the client id and address as "who" (confluent-kafka's
AdminClient; the console's sink is tested in tests/brokerui/test_kafka_port.py)."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
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
