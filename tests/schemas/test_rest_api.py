"""The REST API, route by route, as Confluent Schema Registry's API reference answers it: the
bodies field by field, the content type, the error codes; and the state rebuilt from
``_schemas`` after a restart."""

from __future__ import annotations

import http.client
import json

import pytest

from streams.schemas import RegistryConfig, RegistryServer, SchemaRegistry, StoreSchemaLog
from streams.schemas.registry import SCHEMAS_TOPIC

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}],
}
# adds a field with a default: BACKWARD compatible
ORDER_V2 = {
    **ORDER_V1,
    "fields": ORDER_V1["fields"] + [{"name": "note", "type": "string", "default": ""}],
}
# adds a field without a default: not BACKWARD compatible
ORDER_BAD = {**ORDER_V1, "fields": ORDER_V1["fields"] + [{"name": "vip", "type": "boolean"}]}


def call(server, method, path, body=None, headers=None):
    conn = http.client.HTTPConnection(*server.address, timeout=10)
    data = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    hdrs = {"Content-Type": "application/vnd.schemaregistry.v1+json", **(headers or {})}
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    assert resp.getheader("Content-Type") == "application/vnd.schemaregistry.v1+json"
    return resp.status, json.loads(raw) if raw else None


def register(server, subject, schema, **extra):
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return call(server, "POST", f"/subjects/{subject}/versions", {"schema": text, **extra})


def test_register_get_and_list(server):
    assert register(server, "orders-value", ORDER_V1) == (200, {"id": 1, "version": 1})
    # the same schema again (other whitespace): the same id and version, nothing new
    spaced = json.dumps(ORDER_V1, indent=4)
    assert register(server, "orders-value", spaced) == (200, {"id": 1, "version": 1})
    # the same schema under another subject: the same id, that subject's version 1
    assert register(server, "archive-value", ORDER_V1) == (200, {"id": 1, "version": 1})
    assert register(server, "orders-value", ORDER_V2) == (200, {"id": 2, "version": 2})

    assert call(server, "GET", "/subjects") == (200, ["archive-value", "orders-value"])
    assert call(server, "GET", "/subjects?subjectPrefix=ord") == (200, ["orders-value"])
    assert call(server, "GET", "/subjects/orders-value/versions") == (200, [1, 2])
    status, body = call(server, "GET", "/subjects/orders-value/versions/latest")
    assert status == 200
    assert body == {
        "subject": "orders-value",
        "version": 2,
        "id": 2,
        "schema": json.dumps(ORDER_V2),
    }  # no schemaType for AVRO, as Confluent
    assert call(server, "GET", "/subjects/orders-value/versions/-1")[1]["version"] == 2
    status, body = call(server, "GET", "/subjects/orders-value/versions/1/schema")
    assert (status, body) == (200, ORDER_V1)
    assert call(server, "GET", "/schemas/ids/1") == (200, {"schema": json.dumps(ORDER_V1)})
    assert call(server, "GET", "/schemas/ids/1/schema") == (200, ORDER_V1)
    assert call(server, "GET", "/schemas/ids/1/versions") == (
        200,
        [{"subject": "archive-value", "version": 1}, {"subject": "orders-value", "version": 1}],
    )
    assert call(server, "GET", "/schemas/ids/1/subjects") == (
        200,
        ["archive-value", "orders-value"],
    )
    assert call(server, "GET", "/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])
    status, every = call(server, "GET", "/schemas?latestOnly=true")
    assert [(s["subject"], s["version"]) for s in every] == [
        ("archive-value", 1),
        ("orders-value", 2),
    ]
    assert call(server, "GET", "/") == (200, {})


def test_lookup(server):
    register(server, "orders-value", ORDER_V1)
    status, body = call(
        server, "POST", "/subjects/orders-value", {"schema": json.dumps(ORDER_V1, indent=2)}
    )
    assert status == 200
    assert body == {
        "subject": "orders-value",
        "version": 1,
        "id": 1,
        "schema": json.dumps(ORDER_V1),
    }
    status, body = call(server, "POST", "/subjects/orders-value", {"schema": json.dumps(ORDER_V2)})
    assert (status, body["error_code"]) == (404, 40403)
    status, body = call(server, "POST", "/subjects/nope", {"schema": json.dumps(ORDER_V1)})
    assert (status, body["error_code"]) == (404, 40401)


def test_errors_have_confluents_codes(server):
    register(server, "orders-value", ORDER_V1)
    cases = [
        ("GET", "/subjects/nope/versions", None, 404, 40401),
        ("GET", "/subjects/orders-value/versions/7", None, 404, 40402),
        ("GET", "/subjects/orders-value/versions/0", None, 422, 42202),
        ("GET", "/subjects/orders-value/versions/abc", None, 422, 42202),
        ("GET", "/schemas/ids/99", None, 404, 40403),
        ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
        ("PUT", "/mode", {"mode": "SOMETIMES"}, 422, 42204),
        ("GET", "/config/orders-value", None, 404, 40408),
        ("GET", "/mode/orders-value", None, 404, 40409),
        ("GET", "/no/such/route", None, 404, 404),
        ("PUT", "/subjects", None, 405, 405),
    ]
    for method, path, body, status, code in cases:
        got_status, got = call(server, method, path, body)
        assert (got_status, got["error_code"]) == (status, code), (method, path, got)
        assert got["message"]


def test_bad_input_is_a_clear_422_never_a_500(server):
    status, body = register(server, "s", '{"type": "record", "name": "A" "fields": []}')
    assert (status, body["error_code"]) == (422, 42201)
    assert "line 1, column 32" in body["message"]
    status, body = register(
        server, "s", {"type": "record", "name": "A", "fields": [{"name": "x", "type": "nope"}]}
    )
    assert (status, body["error_code"]) == (422, 42201) and "nope" in body["message"]
    status, body = register(
        server, "s", "syntax = 'proto3';\nmessage A { int32 x = 1 }", schemaType="PROTOBUF"
    )
    assert (status, body["error_code"]) == (422, 42201)
    assert "line 2" in body["message"], body
    status, body = register(server, "s", {"type": "nonsense"}, schemaType="JSON")
    assert (status, body["error_code"]) == (422, 42201)
    status, body = register(server, "s", ORDER_V1, schemaType="XML")
    assert (status, body["error_code"]) == (422, 42201)
    status, body = call(server, "POST", "/subjects/s/versions", b"{not json")
    assert status == 400 and body["error_code"] == 400
    status, body = register(
        server, "s", ORDER_V1, references=[{"name": "x", "subject": "missing", "version": 1}]
    )
    assert (status, body["error_code"]) == (422, 42201) and "missing" in body["message"]
    assert call(server, "GET", "/subjects")[1] == []  # nothing was registered by any of it


def test_compatibility_check_and_levels(server):
    register(server, "orders-value", ORDER_V1)
    status, body = register(server, "orders-value", ORDER_BAD)
    assert (status, body["error_code"]) == (409, 409)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in body["message"] and "vip" in body["message"]

    path = "/compatibility/subjects/orders-value/versions/latest?verbose=true"
    status, body = call(server, "POST", path, {"schema": json.dumps(ORDER_BAD)})
    assert status == 200 and body["is_compatible"] is False and body["messages"]
    status, body = call(server, "POST", path, {"schema": json.dumps(ORDER_V2)})
    assert (status, body) == (200, {"is_compatible": True, "messages": []})
    path = "/compatibility/subjects/orders-value/versions/latest"
    assert call(server, "POST", path, {"schema": json.dumps(ORDER_V2)}) == (
        200,
        {"is_compatible": True},
    )

    assert call(server, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call(server, "PUT", "/config/orders-value", {"compatibility": "none"}) == (
        200,
        {"compatibility": "NONE"},
    )
    assert call(server, "GET", "/config/orders-value") == (200, {"compatibilityLevel": "NONE"})
    assert register(server, "orders-value", ORDER_BAD)[0] == 200  # NONE lets it in
    assert call(server, "DELETE", "/config/orders-value") == (200, {"compatibilityLevel": "NONE"})
    assert call(server, "GET", "/config/orders-value?defaultToGlobal=true") == (
        200,
        {"compatibilityLevel": "BACKWARD"},
    )


def test_modes(server):
    register(server, "orders-value", ORDER_V1)
    assert call(server, "GET", "/mode") == (200, {"mode": "READWRITE"})
    assert call(server, "PUT", "/mode/orders-value", {"mode": "READONLY"}) == (
        200,
        {"mode": "READONLY"},
    )
    status, body = register(server, "orders-value", ORDER_V2)
    assert (status, body["error_code"]) == (422, 42205)
    assert call(server, "DELETE", "/mode/orders-value") == (200, {"mode": "READONLY"})
    assert register(server, "orders-value", ORDER_V2)[0] == 200
    # IMPORT keeps the ids and versions it is given (a migration from another registry)
    status, body = call(server, "PUT", "/mode", {"mode": "IMPORT"})
    assert (status, body["error_code"]) == (422, 42205)  # subjects exist: needs force
    assert call(server, "PUT", "/mode?force=true", {"mode": "IMPORT"})[0] == 200
    status, body = register(server, "imported", ORDER_BAD, id=100, version=7)
    assert (status, body) == (200, {"id": 100, "version": 7})
    assert call(server, "GET", "/subjects/imported/versions/7")[1]["id"] == 100


def test_soft_and_permanent_deletes(server):
    register(server, "orders-value", ORDER_V1)
    register(server, "orders-value", ORDER_V2)
    status, body = call(server, "DELETE", "/subjects/orders-value/versions/1?permanent=true")
    assert (status, body["error_code"]) == (404, 40407)  # soft-delete first
    assert call(server, "DELETE", "/subjects/orders-value/versions/1") == (200, 1)
    assert call(server, "GET", "/subjects/orders-value/versions") == (200, [2])
    assert call(server, "GET", "/subjects/orders-value/versions?deleted=true") == (200, [1, 2])
    assert call(server, "GET", "/subjects/orders-value/versions/1")[0] == 404
    assert call(server, "GET", "/subjects/orders-value/versions/1?deleted=true")[1]["id"] == 1
    assert call(server, "GET", "/schemas/ids/1")[0] == 200  # ids stay readable
    assert call(server, "DELETE", "/subjects/orders-value/versions/1?permanent=true") == (200, 1)
    assert call(server, "GET", "/subjects/orders-value/versions?deleted=true") == (200, [2])

    status, body = call(server, "DELETE", "/subjects/orders-value?permanent=true")
    assert (status, body["error_code"]) == (404, 40405)
    assert call(server, "DELETE", "/subjects/orders-value") == (200, [2])
    assert call(server, "GET", "/subjects") == (200, [])
    assert call(server, "GET", "/subjects?deleted=true") == (200, ["orders-value"])
    status, body = call(server, "DELETE", "/subjects/orders-value")
    assert (status, body["error_code"]) == (404, 40404)
    # a subject registered again after a soft delete goes on from its last version; the
    # schema of id 1 was deleted for good, so it is a new schema with a new id (never reused)
    assert register(server, "orders-value", ORDER_V1) == (200, {"id": 3, "version": 3})
    call(server, "DELETE", "/subjects/orders-value")
    assert call(server, "DELETE", "/subjects/orders-value?permanent=true") == (200, [2, 3])
    assert call(server, "GET", "/subjects?deleted=true") == (200, [])


def test_references_avro_and_a_referenced_version_cannot_be_deleted(server):
    money = {
        "type": "record",
        "name": "Money",
        "namespace": "shop",
        "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "string"}],
    }
    assert register(server, "money", money) == (200, {"id": 1, "version": 1})
    order = {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [{"name": "total", "type": "shop.Money"}],
    }
    refs = [{"name": "shop.Money", "subject": "money", "version": 1}]
    assert register(server, "orders-value", order, references=refs) == (
        200,
        {"id": 2, "version": 1},
    )
    status, body = call(server, "GET", "/subjects/orders-value/versions/1")
    assert body["references"] == refs
    assert call(server, "GET", "/schemas/ids/2")[1]["references"] == refs
    assert call(server, "GET", "/subjects/money/versions/1/referencedby") == (200, [2])
    status, body = call(server, "DELETE", "/subjects/money/versions/1")
    assert (status, body["error_code"]) == (422, 42206)
    # without the reference the type is unknown
    status, body = register(server, "other", order)
    assert (status, body["error_code"]) == (422, 42201)


def test_state_is_rebuilt_from_the_topic_after_a_restart(store, tmp_path):
    from streams.log import LogStore

    registry = SchemaRegistry(StoreSchemaLog(store))
    server = RegistryServer(registry, RegistryConfig(port=0)).start()
    try:
        register(server, "orders-value", ORDER_V1)
        register(server, "orders-value", ORDER_V2)
        register(server, "b", ORDER_V2)
        call(server, "PUT", "/config/b", {"compatibility": "FULL"})
        call(server, "PUT", "/mode/b", {"mode": "READONLY"})
        call(server, "DELETE", "/subjects/orders-value/versions/1")
    finally:
        server.stop()
    store.close()
    reopened = LogStore.open(tmp_path / "data")
    try:
        again = SchemaRegistry(StoreSchemaLog(reopened))
        assert again.subjects() == ["b", "orders-value"]
        assert again.versions("orders-value") == [2]
        assert again.versions("orders-value", deleted=True) == [1, 2]
        assert again.version("b", "latest").id == 2
        assert again.config("b") == "FULL" and again.mode("b") == "READONLY"
        # a new schema takes the next id, never one in use
        assert again.register("c", json.dumps({"type": "string"})).id == 3
        # the records are Confluent's layout: JSON keys with keytype and magic
        keys = [json.loads(k) for k, _ in StoreSchemaLog(reopened).records()]
        assert keys[0] == {"keytype": "SCHEMA", "subject": "orders-value", "version": 1, "magic": 1}
        assert {"keytype": "CONFIG", "subject": "b", "magic": 0} in keys
        assert reopened.describe_topic(SCHEMAS_TOPIC).config["cleanup.policy"] == "compact"
    finally:
        reopened.close()


@pytest.mark.parametrize("prefix", ["/subjects/a%2Fb.proto/versions"])
def test_subject_names_with_slashes_are_percent_encoded(server, prefix):
    text = 'syntax = "proto3";\npackage x;\nmessage A { int32 n = 1; }\n'
    assert call(server, "POST", prefix, {"schema": text, "schemaType": "PROTOBUF"})[0] == 200
    assert call(server, "GET", "/subjects") == (200, ["a/b.proto"])
