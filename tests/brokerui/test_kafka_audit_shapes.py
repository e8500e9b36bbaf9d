"""One audit payload per action: the same change made in the console and over the Kafka port
(confluent-kafka's AdminClient) is recorded with the same action and the same before/after."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from django.urls import reverse

from brokerui.audit.models import AuditEntry
from streams.protocol import ListenerConfig

DEADLINE_S = 30
CONFIG_FORM = {"cleanup_policy": "delete", "retention_ms": "3600000", "retention_bytes": "-1"}


class Recorder:
    def __init__(self):
        self.events = []

    def record(self, event) -> None:
        self.events.append(event)


@pytest.fixture
def kafka(broker):
    """An AdminClient on a Kafka listener of the console's broker, and what it records."""
    sink = Recorder()
    broker.start_kafka_listener(ListenerConfig(port=0, audit=sink))
    host, port = broker.kafka_address
    return AdminClient({"bootstrap.servers": f"{host}:{port}"}), sink


def _done(futures: dict) -> None:
    for future in futures.values():
        future.result(timeout=DEADLINE_S)


def _console(action: str) -> tuple:
    entry = AuditEntry.objects.filter(action=action).latest("id")
    return entry.before, entry.after


def _kafka(sink: Recorder, action: str) -> tuple:
    event = [e for e in sink.events if e.action == action][-1]
    return event.before, event.after


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_topic_changes(operator_client, broker, kafka):
    admin, sink = kafka
    post = operator_client.post

    assert post(reverse("console:topic_create"), {"name": "c", "partitions": "2", **CONFIG_FORM})
    _done(admin.create_topics([NewTopic("k", 2, config={"retention.ms": "3600000"})]))
    assert _console("topic.create") == _kafka(sink, "topic.create")

    post(reverse("console:topic_config", args=["c"]), {"retention.ms": "7200000"})
    _done(admin.alter_configs([_topic_config("k", {"retention.ms": "7200000"})]))
    assert _console("topic.config") == _kafka(sink, "topic.config")

    post(reverse("console:topic_partitions", args=["c"]), {"total": "3"})
    _done(admin.create_partitions([NewPartitions("k", 3)]))
    assert _console("topic.add_partitions") == _kafka(sink, "topic.add_partitions")

    for topic in ("c", "k"):
        for i in range(5):
            broker.store.append(topic, b"record %d" % i, partition=0, timestamp_ms=1_000 + i)
    post(
        reverse("console:topic_purge", args=["c"]),
        {"partition": "0", "mode": "offset", "offset": "3"},
    )
    _done(admin.delete_records([TopicPartition("k", 0, 3)]))
    assert _console("topic.purge") == _kafka(sink, "topic.purge")

    post(reverse("console:topic_delete", args=["c"]), {"confirm": "c"})
    _done(admin.delete_topics(["k"]))
    assert _console("topic.delete") == _kafka(sink, "topic.delete")
    assert [e.action for e in sink.events] == [
        "topic.create",
        "topic.config",
        "topic.add_partitions",
        "topic.purge",
        "topic.delete",
    ]


def test_group_delete(operator_client, broker, kafka):
    admin, sink = kafka
    broker.store.create_topic("orders", 2)
    for group in ("console-group", "kafka-group"):
        broker.coordinator.commit_offsets(group, {("orders", 0): 4, ("orders", 1): 9})
    operator_client.post(reverse("console:group_delete", args=["console-group"]))
    _done(admin.delete_consumer_groups(["kafka-group"]))
    assert _console("group.delete") == _kafka(sink, "group.delete")


def _topic_config(name: str, values: dict):
    from confluent_kafka.admin import ConfigResource

    return ConfigResource("topic", name, set_config=values)
