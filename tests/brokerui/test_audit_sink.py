"""The audit sink is explicit: services write through the `AuditSink` they are given, and the
process's sink is chosen once (the built-in broker's ``__audit`` topic, or the database only on
an external cluster), not found with ``getattr(cluster, "store")``."""

from __future__ import annotations

from pathlib import Path

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


REPO = Path(__file__).resolve().parents[2]
# every service module of the web app (brokerui/**/services.py)
SERVICE_MODULES = sorted(
    ".".join(p.relative_to(REPO).with_suffix("").parts)
    for p in (REPO / "brokerui").rglob("services.py")
)


def test_no_service_falls_back_to_the_process_sink():
    """Every function that audits takes its sink as a required keyword: none picks the
    process's sink itself when the caller forgets to pass one."""
    import importlib
    import inspect

    auditing = []
    for name in SERVICE_MODULES:
        module = importlib.import_module(name)
        for fname, fn in inspect.getmembers(module, inspect.isfunction):
            if fname.startswith("_") or fn.__module__ != name:
                continue  # private helpers get the sink from the service that calls them
            if "sink" not in inspect.signature(fn).parameters:
                continue
            auditing.append(f"{name}.{fname}")
            sink = inspect.signature(fn).parameters["sink"]
            assert sink.kind is inspect.Parameter.KEYWORD_ONLY, fname
            assert sink.default is inspect.Parameter.empty, f"{name}.{fname} defaults its sink"
    assert "brokerui.console.live.services" in SERVICE_MODULES
    for expected in ("panel_create", "panel_update", "panel_delete", "token_create"):
        assert any(a.endswith("." + expected) for a in auditing), expected


def test_panel_and_account_changes_write_through_the_sink_they_are_given(db, broker, viewer):
    from brokerui.accounts import services as account_services
    from brokerui.console.live import services as panel_services
    from streams.processing.panels import PanelSpec

    broker.store.create_topic("orders", 1)
    sink: AuditSink = Recorder()
    spec = PanelSpec(topic="orders", aggregation="count")
    panel = panel_services.panel_create(user=viewer, name="Orders", spec=spec, sink=sink)
    pk = panel.pk
    panel_services.panel_update(panel=panel, user=viewer, name="All orders", spec=spec, sink=sink)
    panel_services.panel_delete(panel=panel, user=viewer, sink=sink)
    account_services.token_create(user=viewer, sink=sink)
    account_services.token_revoke(user=viewer, sink=sink)
    account_services.password_change_record(user=viewer, sink=sink)
    account_services.login_failure_record(
        username="victor", address="10.0.0.9", failures=10, limit=10, locked_out=True, sink=sink
    )
    assert [(action, target) for action, target, *_ in sink.calls] == [
        ("panel.create", f"panel {pk} Orders"),
        ("panel.update", f"panel {pk} All orders"),
        ("panel.delete", f"panel {pk} All orders"),
        ("token.create", "user victor"),
        ("token.revoke", "user victor"),
        ("user.password_change", "user victor"),
        ("user.login_failed", "user victor"),
        ("user.locked_out", "user victor"),
    ]
    assert not AuditEntry.objects.exists()
    assert AUDIT_TOPIC not in broker.store.list_topics()


def test_console_panel_and_account_pages_audit_to_the_process_sink(viewer_client, broker):
    """The views pass the process's sink: the database and the broker's ``__audit`` topic."""
    from django.urls import reverse

    broker.store.create_topic("orders", 1)
    broker.store.append("orders", b'{"total": 12.5}')
    form = {"name": "Orders", "topic": "orders", "aggregation": "sum", "value_field": "total"}
    form.update(window="tumbling", size_s="10", lateness_s="0", out_of_orderness_s="0")
    assert viewer_client.post(reverse("console:panels"), form).status_code == 302
    viewer_client.post(reverse("token_create"))
    actions = [e.action for e in AuditEntry.objects.order_by("id")]
    assert actions == ["panel.create", "token.create"]
    topic = [r.value for r in broker.store.read(AUDIT_TOPIC, 0, 0)]
    assert [b'"panel.create"' in v for v in topic] == [True, False]
    assert b'"token.create"' in topic[1]
