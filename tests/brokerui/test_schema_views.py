"""The Schemas pages (issue requirement 8): the subjects with their type, versions, ids, level
and topic (TopicNameStrategy); one subject's versions, a version's schema, references both
ways and a side-by-side diff; registering with the check run as one types (compatible,
incompatible, a parse error with its line and column); the compatibility level; soft and
permanent deletes behind a typed confirmation, permanent only once soft-deleted; every change
audited as the registry's REST API audits it (source ``console``); viewers refused on every
POST."""

from __future__ import annotations

import html
import json

import pytest

from brokerui.audit.models import AuditEntry
from brokerui.console.schemas import services
from streams.schemas import errors as E
from streams.schemas.registry import SchemaReference


def avro(*fields, name="Order", namespace="shop") -> str:
    return json.dumps(
        {"type": "record", "name": name, "namespace": namespace, "fields": list(fields)}
    )


V1 = avro({"name": "id", "type": "string"})
V2 = avro({"name": "id", "type": "string"}, {"name": "amount", "type": "double", "default": 0})
# a field without a default: the new schema cannot read what v2 wrote without it (BACKWARD)
INCOMPATIBLE = avro(
    {"name": "id", "type": "string"},
    {"name": "amount", "type": "double", "default": 0},
    {"name": "currency", "type": "string"},
)
NOT_JSON = '{\n  "type": "record",\n  "name": "Order"\n  "fields": []\n}'


@pytest.fixture
def registry(broker):
    return broker.schemas


@pytest.fixture
def orders(broker, registry):
    """Topic orders and subject orders-value with two versions (ids 1 and 2)."""
    broker.store.create_topic("orders", 1, {})
    registry.register("orders-value", V1)
    registry.register("orders-value", V2)
    return registry


def text(response) -> str:
    return html.unescape(response.content.decode())


def entries(action: str):
    return list(AuditEntry.objects.filter(action=action).order_by("id"))


def check(client, **data):
    data = {"subject": "orders-value", "schema_type": "AVRO", "references": "", **data}
    response = client.post("/new-schema/check/", data)
    assert response.status_code == 200
    return text(response)


# ====================================================================== the list


def test_the_list_shows_each_subject_with_its_versions_level_and_topic(
    operator_client, orders, registry
):
    registry.register("lonely-value", json.dumps({"type": "object"}), "JSON")
    registry.set_config("lonely-value", "FULL")
    page = text(operator_client.get("/schemas/"))
    assert 'data-subject="orders-value"' in page and 'data-subject="lonely-value"' in page
    row = page.split('data-subject="orders-value"')[1].split("</tr>")[0]
    cells = [c.split(">", 1)[1].split("</td")[0] for c in row.split("<td")[1:]]
    assert cells[1:6] == ["AVRO", "2", "2", "2", "BACKWARD (global)"]
    assert 'href="/topics/orders/"' in row  # orders-value describes topic orders
    lonely = page.split('data-subject="lonely-value"')[1].split("</tr>")[0]
    assert "JSON" in lonely and "FULL" in lonely and "(global)" not in lonely
    assert "—" in lonely  # no topic lonely
    assert 'data-stat="global-level">BACKWARD' in page
    assert 'data-stat="global-mode">READWRITE' in page
    assert 'data-stat="subjects">2' in page
    assert "http://127.0.0.1:" in page and "SchemaRegistryClient" in page
    assert '"basic.auth.user.info": "olivia:<password>"' in page
    assert "as of" in page and "UTC" in page  # freshness
    assert 'href="/schemas/"' in page and 'aria-current="page">Schemas' in page  # the top bar


def test_the_filter_and_the_soft_deleted_toggle(operator_client, orders, registry):
    registry.register("payments-value", V1)
    registry.register("gone-value", V1)
    registry.delete_subject("gone-value", permanent=False)
    page = text(operator_client.get("/schemas/?q=ORD"))
    assert 'data-subject="orders-value"' in page and 'data-subject="payments-value"' not in page
    page = text(operator_client.get("/schemas/"))
    assert 'data-subject="gone-value"' not in page
    page = text(operator_client.get("/schemas/?deleted=1"))
    row = page.split('data-subject="gone-value"')[1].split("</tr>")[0]
    assert "soft-deleted" in row and 'href="/schemas/gone-value/?deleted=1"' in page
    # the htmx refresh of the filter answers the table only
    partial = operator_client.get(
        "/schemas/?q=pay", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="schema-table"
    )
    body = text(partial)
    assert "<html" not in body and 'data-subject="payments-value"' in body
    assert 'data-subject="orders-value"' not in body
    assert "No subjects match “zzz”" in text(operator_client.get("/schemas/?q=zzz"))


def test_the_empty_state_says_how_to_register(operator_client, viewer, client, broker):
    page = text(operator_client.get("/schemas/"))
    assert "No schemas registered yet" in page and "Register the first schema" in page
    assert 'action="/new-schema/"' in page and 'name="schema"' in page  # the form, here
    host, port = broker.registry_address
    assert f"http://{host}:{port}" in page and "SchemaRegistryClient" in page
    client.force_login(viewer)
    page = text(client.get("/schemas/"))
    assert "No schemas registered yet" in page and 'name="schema"' not in page
    assert "SchemaRegistryClient" in page and '"victor:<password>"' in page


def test_an_external_cluster_has_no_registry_of_ours(operator_client, db, monkeypatch):
    monkeypatch.setattr("brokerui.cluster.is_external", lambda: True)
    response = operator_client.get("/schemas/")
    assert response.status_code == 200 and "external cluster" in text(response)


# ====================================================================== one subject


def test_the_subject_page_shows_versions_and_the_schema_pretty_printed(operator_client, orders):
    page = text(operator_client.get("/schemas/orders-value/"))
    assert 'data-version="1"' in page and 'data-version="2"' in page
    assert 'data-stat="latest">v2' in page and 'data-stat="schema-id">2' in page
    # JSON pretty-printed (two-space indent), not the compact text registered
    assert '{\n  "type": "record",\n  "name": "Order",' in page
    assert 'data-stat="level">BACKWARD' in page and "(the global level)" in page
    assert 'href="/topics/orders/"' in page
    page = text(operator_client.get("/schemas/orders-value/?version=1"))
    shown = page.split('class="schema-text"')[1].split("</pre>")[0]
    assert 'data-stat="schema-id">1' in page and '"id"' in shown and '"amount"' not in shown
    assert operator_client.get("/schemas/orders-value/?version=9").status_code == 404
    assert operator_client.get("/schemas/orders-value/?version=x").status_code == 404
    assert operator_client.get("/schemas/nothing-value/").status_code == 404


def test_references_link_both_ways(operator_client, registry):
    address = avro({"name": "city", "type": "string"}, name="Address")
    registry.register("address-value", address)
    customer = avro(
        {"name": "name", "type": "string"},
        {"name": "home", "type": "shop.Address"},
        name="Customer",
    )
    registry.register(
        "customer-value", customer, references=[SchemaReference("shop.Address", "address-value", 1)]
    )
    page = text(operator_client.get("/schemas/customer-value/"))
    assert 'href="/schemas/address-value/?version=1&deleted=1">address-value v1</a>' in page
    page = text(operator_client.get("/schemas/address-value/"))
    assert 'href="/schemas/customer-value/?version=1">customer-value v1</a>' in page
    assert "referenced</small>" in page  # it cannot be deleted while referenced
    assert 'data-delete="1"' not in page
    plan = operator_client.get("/schemas/address-value/versions/1/delete/")
    assert plan.status_code == 409 and "Other schemas reference it" in text(plan)


def test_two_versions_side_by_side(operator_client, orders):
    page = text(operator_client.get("/schemas/orders-value/"))
    diff = page.split('id="schema-diff"')[1]
    assert "From version 1 (id 1) to version 2 (id 2)" in diff
    added = [r for r in diff.split("<tr")[1:] if 'data-kind="added"' in r]
    same = [r for r in diff.split("<tr")[1:] if 'data-kind="same"' in r]
    assert any('"name": "amount"' in r for r in added)
    assert all("added: " in r for r in added)  # marked for screen readers too
    assert len(added) == 5 and any('"name": "id"' in r for r in same)
    assert not any("removed: " in r or "added: " in r for r in same)
    # picking the sides: the htmx refresh answers the diff only
    partial = operator_client.get(
        "/schemas/orders-value/?left=2&right=1",
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="schema-diff",
    )
    body = text(partial)
    assert "<html" not in body
    assert 'id="schema-diff"' in body and "From version 2 (id 2) to version 1 (id 1)" in body
    assert 'data-kind="removed"' in body
    same = text(operator_client.get("/schemas/orders-value/?left=2&right=2"))
    assert "are the same text (one schema, id 2)" in same


def test_diff_lines_pairs_a_replaced_block():
    rows = services.diff_lines(["a", "b", "c", "d"], ["a", "B", "c", "e", "f"])
    assert [(r.kind, r.left_no, r.right_no) for r in rows] == [
        ("same", 1, 1),
        ("changed", 2, 2),
        ("same", 3, 3),
        ("changed", 4, 4),
        ("added", None, 5),
    ]


# ====================================================================== check as you type


def test_the_check_says_compatible_with_the_version_and_level(operator_client, orders):
    v3 = avro(
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double", "default": 0},
        {"name": "note", "type": ["null", "string"], "default": None},
    )
    page = check(operator_client, schema=v3)
    assert 'data-check-state="ok"' in page
    assert "Compatible with version 2 under BACKWARD; it would be version 3" in page
    page = check(operator_client, schema=V2)
    assert 'data-check-state="same"' in page and "Already registered as version 2 (id 2)" in page
    page = check(operator_client, subject="brand-new-value", schema=V1)
    assert "New subject: it would be version 1" in page
    assert 'data-check-state="empty"' in check(operator_client, schema="  ")


def test_the_check_lists_the_problems_of_an_incompatible_schema(operator_client, orders):
    page = check(operator_client, schema=INCOMPATIBLE)
    assert 'data-check-state="incompatible"' in page
    assert "Not compatible with version 2 under BACKWARD" in page
    problems = page.split('class="problems">')[1].split("</ul>")[0]
    assert "currency" in problems and "(new reads version 2)" in problems


def test_the_check_shows_a_parse_error_with_its_line_and_column(operator_client, orders):
    page = check(operator_client, schema=NOT_JSON)
    assert 'data-check-state="invalid"' in page
    assert "Line 4, column 3:" in page and "is not JSON" in page
    assert '  "fields": []\n<span class="caret">  ^</span>' in page  # the line, a caret under it
    page = check(operator_client, schema=V1, references="only-two parts")
    assert 'data-check-state="invalid"' in page and "reference line 1" in page


def test_a_transitive_level_checks_every_version(operator_client, orders, registry):
    registry.set_config("orders-value", "FULL_TRANSITIVE")
    v3 = avro(
        {"name": "id", "type": "string"},
        {"name": "amount", "type": "double", "default": 0},
        {"name": "note", "type": "string", "default": ""},
    )
    assert "Compatible with versions 1–2 under FULL_TRANSITIVE" in check(operator_client, schema=v3)


# ====================================================================== register


def test_registering_a_new_subject_and_a_new_version(operator_client, operator, registry):
    form = text(operator_client.get("/new-schema/"))
    assert 'name="subject"' in form and 'hx-post="/new-schema/check/"' in form
    assert 'hx-trigger="load, keyup changed delay:500ms, change"' in form
    response = operator_client.post(
        "/new-schema/", {"subject": "orders-value", "schema": V1, "schema_type": "AVRO"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/schemas/orders-value/?version=1"
    assert registry.version("orders-value", 1).id == 1
    page = text(operator_client.get(response["Location"]))
    assert "Registered orders-value version 1 (schema id 1)." in page

    # a subject's own page starts from its latest version
    form = text(operator_client.get("/schemas/orders-value/register/"))
    assert '<input type="hidden" name="subject" value="orders-value">' in form
    assert '"name": "id"' in form and "Starts from the latest version, 1 (id 1)" in form
    response = operator_client.post(
        "/schemas/orders-value/register/", {"schema": V2, "schema_type": "AVRO"}
    )
    assert response["Location"] == "/schemas/orders-value/?version=2"
    (first, second) = entries("schema.register")
    assert (first.target, first.source, first.user) == ("subject orders-value", "console", operator)
    assert first.before is None and first.after == {"id": 1, "version": 1, "schemaType": "AVRO"}
    assert second.after == {"id": 2, "version": 2, "schemaType": "AVRO"}

    # the same schema again: its version, nothing written, nothing audited
    response = operator_client.post(
        "/schemas/orders-value/register/", {"schema": V2, "schema_type": "AVRO"}, follow=True
    )
    assert "has this schema already: version 2 (schema id 2)" in text(response)
    assert len(entries("schema.register")) == 2


def test_a_refused_registration_is_409_or_422_and_writes_nothing(operator_client, orders):
    response = operator_client.post(
        "/schemas/orders-value/register/", {"schema": INCOMPATIBLE, "schema_type": "AVRO"}
    )
    assert response.status_code == 409
    page = text(response)
    assert "Not registered (409, incompatible; error code 409)" in page and "currency" in page
    assert INCOMPATIBLE in page  # what was typed is kept
    response = operator_client.post(
        "/schemas/orders-value/register/", {"schema": NOT_JSON, "schema_type": "AVRO"}
    )
    assert response.status_code == 422 and "error code 42201" in text(response)
    response = operator_client.post("/new-schema/", {"subject": "", "schema": V1})
    assert response.status_code == 422
    response = operator_client.post(
        "/new-schema/", {"subject": "x-value", "schema": "message {", "schema_type": "PROTOBUF"}
    )
    assert response.status_code == 422  # an unparsable .proto: invalid, never a 500
    response = operator_client.post(
        "/new-schema/", {"subject": "x-value", "schema": V1, "schema_type": "XML"}
    )
    assert response.status_code == 422
    assert orders.versions("orders-value") == [1, 2] and "x-value" not in orders.subjects()
    assert entries("schema.register") == []


def test_a_read_only_subject_refuses_with_422(operator_client, orders, registry):
    registry.set_mode("orders-value", "READONLY")
    assert 'data-check-state="refused"' in check(operator_client, schema=V1.replace("id", "k"))
    response = operator_client.post("/schemas/orders-value/register/", {"schema": INCOMPATIBLE})
    assert response.status_code == 422 and "read-only" in text(response)


# ====================================================================== compatibility level


def test_changing_the_level_is_audited(operator_client, operator, orders, registry):
    response = operator_client.post("/schemas/orders-value/config/", {"level": "FULL"})
    assert response.status_code == 302 and response["Location"] == "/schemas/orders-value/"
    assert registry.config("orders-value") == "FULL"
    (entry,) = entries("schema.config")
    assert entry.target == "subject orders-value" and entry.source == "console"
    assert (entry.before, entry.after) == ({"compatibility": "BACKWARD"}, {"compatibility": "FULL"})
    page = text(operator_client.get("/schemas/orders-value/"))
    assert "BACKWARD → FULL" in page and 'data-stat="level">FULL' in page

    operator_client.post("/schemas/orders-value/config/", {"level": "FULL"})  # no change
    assert len(entries("schema.config")) == 1
    operator_client.post("/schemas/orders-value/config/", {"level": ""})  # the global one again
    assert registry.config("orders-value", default_to_global=True) == "BACKWARD"
    (unset,) = entries("schema.config_delete")
    assert unset.before == {"compatibility": "FULL"} and unset.after is None
    response = operator_client.post(
        "/schemas/orders-value/config/", {"level": "SIDEWAYS"}, follow=True
    )
    assert "did not change: Invalid compatibility level" in text(response)
    assert operator_client.post("/schemas/nothing/config/", {"level": "FULL"}).status_code == 404


# ====================================================================== deletes


def test_a_version_is_deleted_behind_a_typed_confirmation(operator_client, orders, registry):
    page = text(operator_client.get("/schemas/orders-value/"))
    assert 'href="/schemas/orders-value/versions/1/delete/"' in page
    assert "delete-permanently" not in page.split('id="danger-h"')[0]  # nothing soft-deleted
    confirm = text(operator_client.get("/schemas/orders-value/versions/1/delete/"))
    assert 'data-expected="orders-value version 1"' in confirm
    response = operator_client.post(
        "/schemas/orders-value/versions/1/delete/", {"confirm": "orders-value"}
    )
    assert response.status_code == 200 and "type 'orders-value version 1' exactly" in text(response)
    assert registry.versions("orders-value") == [1, 2] and entries("schema.delete") == []

    response = operator_client.post(
        "/schemas/orders-value/versions/1/delete/", {"confirm": "orders-value version 1"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/schemas/orders-value/?deleted=1"
    assert registry.versions("orders-value") == [2]
    assert registry.version("orders-value", 1, deleted=True).deleted
    (entry,) = entries("schema.delete")
    assert entry.target == "subject orders-value version 1" and entry.source == "console"
    assert entry.before == {"version": 1} and entry.after is None


def test_a_permanent_delete_only_once_soft_deleted(operator_client, orders, registry):
    # not offered, and refused, while the version is live
    refused = operator_client.get("/schemas/orders-value/versions/1/delete-permanently/")
    assert refused.status_code == 409 and "is not soft-deleted: delete it first" in text(refused)
    assert 'name="confirm"' not in text(refused)
    response = operator_client.post(
        "/schemas/orders-value/versions/1/delete-permanently/",
        {"confirm": "orders-value version 1"},
    )
    assert response.status_code == 409 and registry.versions("orders-value") == [1, 2]

    registry.delete_version("orders-value", 1, permanent=False)
    page = text(operator_client.get("/schemas/orders-value/?deleted=1"))
    assert 'href="/schemas/orders-value/versions/1/delete-permanently/"' in page
    assert 'href="/schemas/orders-value/versions/2/delete-permanently/"' not in page
    assert "delete-permanently" not in text(operator_client.get("/schemas/orders-value/"))
    response = operator_client.post(
        "/schemas/orders-value/versions/1/delete-permanently/",
        {"confirm": "orders-value version 1"},
    )
    assert response.status_code == 302
    assert registry.versions("orders-value", deleted=True) == [2]
    (entry,) = entries("schema.delete_permanent")
    assert entry.target == "subject orders-value version 1" and entry.before == {"version": 1}


def test_a_subject_soft_then_permanently(operator_client, orders, registry):
    page = text(operator_client.get("/schemas/orders-value/"))
    assert 'href="/schemas/orders-value/delete/"' in page
    assert 'href="/schemas/orders-value/delete-permanently/"' not in page
    assert operator_client.get("/schemas/orders-value/delete-permanently/").status_code == 409
    confirm = text(operator_client.get("/schemas/orders-value/delete/"))
    assert 'data-expected="orders-value"' in confirm and "Topic <a" in confirm  # it warns
    response = operator_client.post("/schemas/orders-value/delete/", {"confirm": "orders-value"})
    assert response["Location"] == "/schemas/orders-value/?deleted=1"
    assert registry.subjects() == [] and registry.subjects(deleted=True) == ["orders-value"]
    (soft,) = entries("schema.subject_delete")
    assert soft.target == "subject orders-value" and soft.before == {"versions": [1, 2]}

    page = text(operator_client.get(response["Location"]))
    assert 'href="/schemas/orders-value/delete-permanently/"' in page
    assert operator_client.get("/schemas/orders-value/delete/").status_code == 409  # done
    response = operator_client.post(
        "/schemas/orders-value/delete-permanently/", {"confirm": "orders-value"}
    )
    assert response["Location"] == "/schemas/?deleted=1"
    assert registry.subjects(deleted=True) == []
    (hard,) = entries("schema.subject_delete_permanent")
    assert hard.before == {"versions": [1, 2]} and hard.source == "console"


def test_the_console_audits_as_the_registry_api_does(db, orders, registry):
    """Same action, target and payload as ``streams.schemas.rest`` writes for the change."""
    from brokerui.audit.services import Actor, AuditLog
    from streams.schemas.rest import RestRequest, handle

    actor, sink = Actor(None, "console", "test"), AuditLog(None)
    services.schema_version_delete(
        registry=registry, sink=sink, actor=actor, subject="orders-value", version=1
    )
    rest = handle(registry, RestRequest("DELETE", "/subjects/orders-value/versions/2"))
    assert rest.audit == ("schema.delete", "subject orders-value version 2", {"version": 2}, None)
    (entry,) = entries("schema.delete")
    assert (entry.action, entry.target, entry.before, entry.after) == (
        "schema.delete",
        "subject orders-value version 1",
        {"version": 1},
        None,
    )
    with pytest.raises(E.VersionNotSoftDeleted):  # the registry's refusal, nothing audited
        services.schema_version_delete(
            registry=registry,
            sink=sink,
            actor=actor,
            subject="orders-value",
            version=registry.register("orders-value", V1).version,
            permanent=True,
        )
    assert len(entries("schema.delete_permanent")) == 0


# ====================================================================== viewers


POSTS = [
    ("/new-schema/", {"subject": "v-value", "schema": V1}),
    ("/new-schema/check/", {"subject": "orders-value", "schema": V1}),
    ("/schemas/orders-value/register/", {"schema": V1}),
    ("/schemas/orders-value/config/", {"level": "NONE"}),
    ("/schemas/orders-value/delete/", {"confirm": "orders-value"}),
    ("/schemas/orders-value/delete-permanently/", {"confirm": "orders-value"}),
    ("/schemas/orders-value/versions/1/delete/", {"confirm": "orders-value version 1"}),
    (
        "/schemas/orders-value/versions/1/delete-permanently/",
        {"confirm": "orders-value version 1"},
    ),
]


@pytest.mark.parametrize("url,data", POSTS, ids=[u for u, _ in POSTS])
def test_viewers_are_refused_every_post(viewer_client, orders, url, data):
    assert viewer_client.post(url, data).status_code == 403
    assert orders.versions("orders-value") == [1, 2] and orders.config("orders-value") == "BACKWARD"
    assert not AuditEntry.objects.filter(action__startswith="schema.").exists()


def test_viewers_see_no_write_buttons(viewer_client, orders):
    page = text(viewer_client.get("/schemas/orders-value/"))
    assert "/register/" not in page and "/delete" not in page and "/config/" not in page
    assert "(operators change it)" in page
    listing = text(viewer_client.get("/schemas/"))
    assert 'href="/new-schema/"' not in listing
    assert viewer_client.get("/new-schema/").status_code == 403
    assert viewer_client.get("/schemas/orders-value/versions/1/delete/").status_code == 403
