"""The audit sink is explicit: services write through the `AuditSink` they are given, and the
process's sink is chosen once (the built-in broker's ``__audit`` topic, or the database only on
an external cluster), not found with ``getattr(cluster, "store")``."""

from __future__ import annotations

from brokerui.audit.models import AuditEntry
from brokerui.audit.services import AUDIT_TOPIC, Actor, AuditLog, AuditSink, process_sink
from brokerui.console.groups import services as group_services
from brokerui.console.topics import services as topic_services
from streams.cluster import LocalCluster


class Recorder:
    def __init__(self):
        self.calls = []

    def record(self, user, action, target, *, before=None, after=None, source="console", who=None):
        self.calls.append((action, target, before, after, source, who))


def test_services_write_through_the_sink_they_are_given(db, broker):
    sink: AuditSink = Recorder()
    cluster = LocalCluster(broker.store, broker.coordinator)
    actor = Actor(None, "cli", "cli:ops")
    topic_services.topic_create(
        cluster=cluster, sink=sink, actor=actor, name="t", partitions=1, config={}
    )
    broker.coordinator.commit_offsets("g", {("t", 0): 0})
    group_services.group_delete(cluster=cluster, sink=sink, actor=actor, group_id="g")
    assert sink.calls == [
        ("topic.create", "topic t", None, {"partitions": 1, "config": {}}, "cli", "cli:ops"),
        ("group.delete", "group g", {"offsets": {"t": {"0": 0}}}, None, "cli", "cli:ops"),
    ]
    assert not AuditEntry.objects.exists()
    assert AUDIT_TOPIC not in broker.store.list_topics()


def test_audit_log_writes_the_database_and_its_store(db, broker):
    entry = AuditLog(broker.store).record(None, "topic.create", "topic t", who="cli:ops")
    assert AuditEntry.objects.get().pk == entry.pk
    assert b'"topic.create"' in broker.store.read(AUDIT_TOPIC, 0, 0)[-1].value


def test_process_sink(settings, broker):
    assert process_sink().store is broker.store
    settings.TIDELOG_CLUSTER = "kafka://127.0.0.1:1"
    assert process_sink().store is None  # an external cluster's __* topics are not ours
