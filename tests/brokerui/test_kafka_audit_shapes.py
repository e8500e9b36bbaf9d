"""One audit payload per action: the same change made in the console and over the Kafka port
(confluent-kafka's AdminClient) is recorded with the same action and the same before/after."""

from __future__ import annotations

import html as htmllib
import re

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


# ---------------------------------------------- console, JSON API and command line: one service


@pytest.fixture
def sources(operator, operator_client, broker, monkeypatch):
    """Make the same change from the console (session), the API (token) and
    ``manage.py consumer_groups`` (sharing the broker's engine); read back each one's entry."""
    import contextlib

    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from brokerui.console.management.commands import consumer_groups as command_module

    @contextlib.contextmanager
    def shared(_path):
        yield broker.store, broker.coordinator

    monkeypatch.setattr(command_module, "open_engine", shared)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=operator).key}")
    broker.store.create_topic("orders", 2)
    for p in (0, 1):
        for i in range(10):
            broker.store.append("orders", b"r%d" % i, partition=p)
    return operator_client, api


def _cli(*args: str) -> str:
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("consumer_groups", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _entries(action: str) -> dict[str, tuple]:
    """{source: (target's kind, before, after)} of the latest entry of `action` per source."""
    out = {}
    for e in AuditEntry.objects.filter(action=action).order_by("id"):
        out[e.source] = (e.target.split()[0], e.before, e.after)
    return out


def _commit(broker, *groups: str) -> None:
    for group in groups:
        broker.coordinator.commit_offsets(group, {("orders", 0): 4, ("orders", 1): 9})


def test_group_reset_one_shape(sources, broker):
    console, api = sources
    _commit(broker, "g-console", "g-api", "g-cli")
    url = reverse("console:group_reset", args=["g-console"])
    html = console.post(url, {"action": "preview", "scope": "all", "strategy": "to-earliest"})
    token = re.search(r'name="plan" value="([^"]+)"', html.content.decode()).group(1)
    applied = console.post(url, {"action": "apply", "plan": htmllib.unescape(token)})
    assert applied.status_code == 200
    body = {"strategy": "to-earliest", "scope": "all_topics", "dry_run": False}
    assert api.post("/api/v1/groups/g-api/reset", body, format="json").status_code == 200
    _cli("--reset-offsets", "--group", "g-cli", "--all-topics", "--to-earliest", "--execute")
    entries = _entries("group.reset")
    assert set(entries) == {"console", "api", "cli"}
    assert (
        entries["console"]
        == entries["api"]
        == entries["cli"]
        == (
            "group",
            {"offsets": {"orders": {"0": 4, "1": 9}}},
            {"strategy": "to-earliest", "offsets": {"orders": {"0": 0, "1": 0}}},
        )
    )


def test_group_delete_one_shape(sources, broker, kafka):
    console, api = sources
    admin, sink = kafka
    _commit(broker, "g-console", "g-api", "g-cli", "g-kafka")
    console.post(reverse("console:group_delete", args=["g-console"]))
    assert api.delete("/api/v1/groups/g-api").status_code == 204
    _cli("--delete", "--group", "g-cli")
    _done(admin.delete_consumer_groups(["g-kafka"]))
    entries = _entries("group.delete")
    assert set(entries) == {"console", "api", "cli"}
    assert entries["console"] == entries["api"] == entries["cli"]
    assert entries["cli"][1:] == _kafka(sink, "group.delete")


def test_group_offsets_delete_one_shape(sources, broker):
    console, api = sources
    _commit(broker, "g-console", "g-api", "g-cli")
    console.post(reverse("console:group_delete_offsets", args=["g-console"]), {"topic": "orders"})
    assert api.delete("/api/v1/groups/g-api/offsets/orders").status_code == 200
    _cli("--delete-offsets", "--group", "g-cli", "--topic", "orders")
    entries = _entries("group.offsets.delete")
    assert set(entries) == {"console", "api", "cli"}
    assert (
        entries["console"]
        == entries["api"]
        == entries["cli"]
        == (
            "group",
            {"topic": "orders", "offsets": {"orders": {"0": 4, "1": 9}}},
            {"topic": "orders", "offsets": None},
        )
    )


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_topic_changes_one_shape_console_api_kafka(sources, broker, kafka):
    """Each topic change made from the console, the API and a Kafka client is recorded with
    the same action and payload (the API wrote ``topic.partitions`` and smaller payloads)."""
    console, api = sources
    admin, sink = kafka
    api_url = "/api/v1/topics"

    console.post(reverse("console:topic_create"), {"name": "c", "partitions": "2", **CONFIG_FORM})
    body = {"name": "a", "partitions": 2, "config": {"retention.ms": "3600000"}}
    assert api.post(api_url, body, format="json").status_code == 201
    _done(admin.create_topics([NewTopic("k", 2, config={"retention.ms": "3600000"})]))

    console.post(reverse("console:topic_config", args=["c"]), {"retention.ms": "7200000"})
    body = {"set": {"retention.ms": "7200000"}}
    assert api.patch(f"{api_url}/a/config", body, format="json").status_code == 200
    _done(admin.alter_configs([_topic_config("k", {"retention.ms": "7200000"})]))

    console.post(reverse("console:topic_partitions", args=["c"]), {"total": "3"})
    assert api.post(f"{api_url}/a/partitions", {"total": 3}, format="json").status_code == 200
    _done(admin.create_partitions([NewPartitions("k", 3)]))

    for topic in ("c", "a", "k"):
        for i in range(5):
            broker.store.append(topic, b"record %d" % i, partition=0, timestamp_ms=1_000 + i)
    console.post(
        reverse("console:topic_purge", args=["c"]),
        {"partition": "0", "mode": "offset", "offset": "3"},
    )
    body = {"partitions": [0], "before_offset": 3}
    assert api.post(f"{api_url}/a/purge", body, format="json").status_code == 200
    _done(admin.delete_records([TopicPartition("k", 0, 3)]))

    console.post(reverse("console:topic_delete", args=["c"]), {"confirm": "c"})
    assert api.delete(f"{api_url}/a").status_code == 204
    _done(admin.delete_topics(["k"]))

    for action in (
        "topic.create",
        "topic.config",
        "topic.add_partitions",
        "topic.purge",
        "topic.delete",
    ):
        entries = _entries(action)
        assert set(entries) == {"console", "api"}, action
        assert entries["console"] == entries["api"], action
        assert entries["api"][1:] == _kafka(sink, action), action
    assert not AuditEntry.objects.filter(action="topic.partitions").exists()


def test_produce_one_shape(sources, broker):
    console, api = sources
    for topic in ("pc", "pa"):
        broker.store.create_topic(topic, 1)
    data = {"topic": "pc", "encoding": "text", "count": "1", "key": "k", "value": "v"}
    assert console.post(reverse("console:produce", args=["pc"]), data).status_code == 200
    body = {"key": "k", "value": "v"}
    assert api.post("/api/v1/topics/pa/records", body, format="json").status_code == 201
    entries = _entries("records.produce")
    assert (
        entries["console"]
        == entries["api"]
        == (
            "topic",
            None,
            {
                "records": 1,
                "tombstones": 0,
                "partitions": {"0": {"first": 0, "last": 0, "count": 1}},
            },
        )
    )
