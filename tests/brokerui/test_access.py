"""Role bindings by scope (brokerui.access): the rules, and the same refusal through the
console's pages, the JSON API and ``/metrics`` (the Kafka port's is in test_kafka_port.py,
the WebSockets' in live/test_access_socket.py); the Access page that manages them, audited."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from rest_framework.test import APIClient

from brokerui.access import grants as g
from brokerui.access.models import RoleBinding
from brokerui.audit.models import AuditEntry
from streams.protocol.security import Role

API = "/api/v1"


def bind(subject, role, kind="cluster", pattern="*", cluster="*", subject_type="user"):
    return RoleBinding.objects.create(
        subject_type=subject_type, subject=subject, role=role, kind=kind, pattern=pattern,
        cluster=cluster,
    )  # fmt: skip


# ---------------------------------------------------------------------- the rules


def test_roles_add_up_over_scopes():
    grants = g.BindingGrants.of(
        "local",
        [
            g.Binding(Role.OPERATOR, "*", g.TOPIC, "team-a.*"),
            g.Binding(Role.VIEWER, "local", g.CLUSTER),
            g.Binding(Role.OPERATOR, "prod", g.CLUSTER),  # another cluster's: not here
            g.Binding(Role.VIEWER, "*", g.GROUP, "billing"),
        ],
    )
    assert grants.role_on(g.TOPIC, "team-a.orders") == Role.OPERATOR
    assert grants.role_on(g.TOPIC, "team-ab") == Role.VIEWER  # the prefix is "team-a."
    assert grants.role_on(g.TOPIC, "payments") == Role.VIEWER
    assert grants.role_on(g.GROUP, "team-a.orders") == Role.VIEWER  # topics' binding only
    assert grants.cluster_role() == Role.VIEWER
    assert grants.highest() == Role.OPERATOR

    narrow = g.BindingGrants.of("prod", [g.Binding(Role.VIEWER, "*", g.TOPIC, "team-a.*")])
    assert narrow.visible(g.TOPIC, ["team-a.x", "team-b.x", "team-a."]) == ["team-a.x", "team-a."]
    assert narrow.role_on(g.GROUP, "anything") == Role.NONE
    assert narrow.cluster_role() == Role.NONE


@pytest.mark.parametrize(
    "kind, pattern, reason",
    [
        ("topic", "", "needs a name or a prefix"),
        ("topic", "team*a", r"at most one '\*', at the end"),
        ("topic", "a b", "is not a topic name"),
        ("broker", "x", "scope must be one of"),
    ],
)
def test_a_bad_pattern_is_refused_with_the_reason(kind, pattern, reason):
    with pytest.raises(g.BadBinding, match=reason):
        g.check_pattern(kind, pattern)


# ---------------------------------------------------------------------- one refusal per path


@pytest.fixture
def tess(db):
    """Operator of the topics team-a.* and viewer of the cluster."""
    user = User.objects.create_user("tess", password="team-a-pass-123")
    bind("tess", "operator", "topic", "team-a.*")
    bind("tess", "viewer")
    return user


@pytest.fixture
def rita(db):
    """Viewer of the topics team-a.* and of nothing else."""
    user = User.objects.create_user("rita", password="team-a-pass-123")
    bind("rita", "viewer", "topic", "team-a.*")
    return user


@pytest.fixture
def topics(broker):
    for name in ("team-a.orders", "payments"):
        broker.store.create_topic(name, 1)
        broker.store.append(name, b'{"n": 1}', partition=0)
    return broker


def test_pages_follow_the_bindings(client, topics, tess, rita):
    client.force_login(tess)
    assert client.get("/topics/team-a.orders/purge/").status_code == 200
    refused = client.post("/topics/payments/purge/", {"partition": "0", "confirm": "yes"})
    assert refused.status_code == 403
    assert "This needs the operator role on the topic payments." in refused.content.decode()
    assert topics.store.describe_topic("payments").partitions[0].end_offset == 1
    page = client.get("/topics/payments/").content.decode()
    assert "Edit config" not in page  # a viewer there: no change offered
    assert "Edit config" in client.get("/topics/team-a.orders/").content.decode()
    assert "tess · viewer, operator (scoped)" in page

    client.force_login(rita)
    listed = client.get("/topics/").content.decode()
    assert "team-a.orders" in listed and "payments" not in listed
    hidden = client.get("/topics/payments/messages/")
    assert hidden.status_code == 403
    assert "This needs the viewer role on the topic payments." in hidden.content.decode()
    assert "payments" not in client.get("/").content.decode()


def test_a_topic_is_created_where_the_user_is_operator(client, topics, tess):
    client.force_login(tess)
    assert client.get("/new-topic/").status_code == 200
    form = {"partitions": "1", "cleanup_policy": "delete", "retention_ms": str(7 * 86_400_000),
            "retention_bytes": "-1"}  # fmt: skip
    made = client.post("/new-topic/", {"name": "team-a.refunds", **form})
    assert made.status_code == 302
    refused = client.post("/new-topic/", {"name": "team-b.refunds", **form})
    assert refused.status_code == 403
    names = topics.store.list_topics()
    assert "team-a.refunds" in names and "team-b.refunds" not in names


def test_the_api_follows_the_bindings(topics, tess, rita):
    api = APIClient()
    api.force_authenticate(tess)
    done = api.post(f"{API}/topics/team-a.orders/records", {"value": "x"}, format="json")
    assert done.status_code == 201
    refused = api.post(f"{API}/topics/payments/records", {"value": "x"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"] == {
        "code": "operator_required",
        "message": "This needs the operator role on the topic payments.",
    }
    created = api.post(f"{API}/topics", {"name": "team-b.x"}, format="json")
    assert created.status_code == 403
    assert created.json()["error"]["code"] == "operator_required"

    api.force_authenticate(rita)
    listed = api.get(f"{API}/topics").json()
    assert [t["name"] for t in listed["topics"]] == ["team-a.orders"]
    hidden = api.get(f"{API}/topics/payments")
    assert hidden.status_code == 403
    assert hidden.json()["error"]["message"] == "This needs the viewer role on the topic payments."


def test_metrics_show_only_what_the_scraper_reads(client, topics, rita, tess):
    client.force_login(rita)
    body = client.get("/metrics").content.decode()
    assert 'topic="team-a.orders"' in body
    assert 'topic="payments"' not in body
    client.force_login(tess)
    assert 'topic="payments"' in client.get("/metrics").content.decode()


def test_group_bindings_refuse_an_offset_reset(topics, db):
    User.objects.create_user("gail")
    bind("gail", "viewer")
    bind("gail", "operator", "group", "team-a.*")
    api = APIClient()
    api.force_authenticate(User.objects.get(username="gail"))
    body = {"strategy": "to-earliest", "scope": "all_topics", "dry_run": False}
    refused = api.post(f"{API}/groups/billing/reset", body, format="json")
    assert refused.status_code == 403
    assert (
        refused.json()["error"]["message"] == "This needs the operator role on the group billing."
    )


def test_a_group_binding_reaches_its_members(client, topics, db):
    user = User.objects.create_user("gus")
    team = Group.objects.create(name="team-a")
    user.groups.add(team)
    bind("team-a", "operator", "topic", "team-a.*", subject_type="group")
    client.force_login(user)
    assert client.get("/topics/team-a.orders/purge/").status_code == 200
    assert client.get("/topics/payments/").status_code == 403


# ---------------------------------------------------------------------- the Access page


def test_access_page_binds_and_unbinds_audited(client, operator, viewer, topics):
    client.force_login(operator)
    added = client.post(
        "/access/bindings/",
        {"subject_type": "user", "subject": "victor", "role": "operator", "cluster": "local",
         "kind": "topic", "pattern": "team-a.*"},
    )  # fmt: skip
    assert added.status_code == 302
    row = RoleBinding.objects.get(subject="victor")
    assert (row.role, row.cluster, row.kind, row.pattern) == (
        "operator",
        "local",
        "topic",
        "team-a.*",
    )
    page = client.get("/access/").content.decode()
    assert "team-a.*" in page and "victor" in page

    bad = client.post(
        "/access/bindings/",
        {"subject_type": "user", "subject": "victor", "role": "operator", "cluster": "nowhere",
         "kind": "topic", "pattern": "x"},
    )  # fmt: skip
    assert bad.status_code == 400
    text = bad.content.decode()
    assert "no cluster is named &#x27;nowhere&#x27;" in text
    assert 'value="victor"' in text  # what was typed is kept

    assert client.get(f"/access/bindings/{row.pk}/remove/").status_code == 200  # confirmation
    assert client.post(f"/access/bindings/{row.pk}/remove/", {"confirm": "yes"}).status_code == 302
    assert not RoleBinding.objects.filter(subject="victor").exists()
    actions = list(AuditEntry.objects.order_by("id").values_list("action", "target", "cluster"))
    assert actions[-2:] == [
        ("access.bind", "user:victor", "local"),
        ("access.unbind", "user:victor", "local"),
    ]


def test_only_managers_change_bindings(client, viewer, tess, topics):
    for user in (viewer, tess):
        client.force_login(user)
        assert client.get("/access/").status_code == 200  # everyone sees who may do what
        refused = client.post(
            "/access/bindings/",
            {"subject_type": "user", "subject": user.username, "role": "operator",
             "cluster": "*", "kind": "cluster"},
        )  # fmt: skip
        assert refused.status_code == 403
    assert not RoleBinding.objects.filter(kind="cluster", role="operator").exists()
