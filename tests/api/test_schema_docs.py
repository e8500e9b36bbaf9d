"""The OpenAPI schema at /api/v1/schema and the server-rendered docs page at /api/v1/docs."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from django.core.management import call_command
from drf_spectacular.validation import validate_schema

from tests.api.conftest import API

OPERATIONS = {
    "/api/v1/topics": {"get", "post"},
    "/api/v1/topics/{name}": {"get", "delete"},
    "/api/v1/topics/{name}/config": {"get", "patch"},
    "/api/v1/topics/{name}/partitions": {"post"},
    "/api/v1/topics/{name}/purge": {"post"},
    "/api/v1/topics/{name}/records": {"get", "post"},
    "/api/v1/groups": {"get"},
    "/api/v1/groups/{group_id}": {"get", "delete"},
    "/api/v1/groups/{group_id}/reset": {"post"},
    "/api/v1/groups/{group_id}/offsets/{topic}": {"delete"},
    "/api/v1/transactions": {"get"},
    "/api/v1/transactions/{transactional_id}/abort": {"post"},
    "/api/v1/jobs": {"get"},
    "/api/v1/capture": {"get"},
    "/api/v1/jobs/{name}": {"get"},
    "/api/v1/jobs/{name}/start": {"post"},
    "/api/v1/jobs/{name}/stop": {"post"},
    "/api/v1/views": {"get"},
    "/api/v1/views/{job}/{view}": {"get"},
}
HTTP_METHODS = {"get", "post", "put", "patch", "delete"}


def _check(schema: dict) -> None:
    validate_schema(schema)  # against the OpenAPI 3.0 JSON schema
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "Tidelog API" and schema["info"]["version"] == "v1"
    assert {p: set(ops) & HTTP_METHODS for p, ops in schema["paths"].items()} == OPERATIONS
    for path, ops in schema["paths"].items():
        for method in ops.keys() & HTTP_METHODS:
            op = ops[method]
            assert op["summary"], (method, path)
            assert "401" in op["responses"], (method, path)
            assert {"tokenAuth": []} in op["security"] and {"cookieAuth": []} in op["security"]
    schemes = schema["components"]["securitySchemes"]
    assert schemes["tokenAuth"]["in"] == "header" and schemes["cookieAuth"]["in"] == "cookie"


def test_schema_yaml(view):
    response = view.get(f"{API}/schema")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi")
    _check(yaml.safe_load(response.content))


def test_schema_json(view):
    response = view.get(f"{API}/schema", {"format": "json"})
    assert response.status_code == 200
    schema = json.loads(response.content)
    _check(schema)
    fetch = schema["paths"]["/api/v1/topics/{name}/records"]["get"]
    assert {p["name"] for p in fetch["parameters"]} == {
        "name",
        "partition",
        "offset",
        "timestamp",
        "limit",
    }
    assert set(fetch["responses"]) == {"200", "400", "401", "404", "416"}
    reset = schema["paths"]["/api/v1/groups/{group_id}/reset"]["post"]
    assert "409" in reset["responses"]
    assert reset["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ResetRequest"
    )


def test_schema_needs_a_user(anon):
    response = anon.get(f"{API}/schema")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_schema_generates_without_warnings(tmp_path, broker):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert yaml.safe_load(out.read_text())["paths"].keys() == OPERATIONS.keys()


@pytest.fixture
def docs_html(client, viewer, broker):
    client.force_login(viewer)
    response = client.get(f"{API}/docs")
    assert response.status_code == 200
    return response.content.decode()


def test_docs_page_lists_every_operation(docs_html):
    for path, methods in OPERATIONS.items():
        for method in methods:
            assert f'data-path="{path}" data-method="{method.upper()}"' in docs_html, (path, method)
    for text in [
        "Fetch records from one partition",
        "Reset committed offsets",
        "drf_create_token",
        "offset_out_of_range",
        "group_not_empty",
        'id="schema-ResetRequest"',
        'href="#schema-FetchResult"',
        "partition",
        "before_timestamp",
    ]:
        assert text in docs_html, text


def test_docs_page_loads_nothing_from_elsewhere(docs_html):
    external = re.findall(r'(?:src|href)="((?:https?:)?//[^"]*)"', docs_html)
    assert external == []
    assert '<script src="/static/' in docs_html or "<script" not in docs_html.split("</head>")[1]


def test_docs_page_needs_a_login(client, broker):
    response = client.get(f"{API}/docs")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_docs_helpers_escape_what_they_render():
    from brokerui.api.docs import text_html, type_html

    assert text_html("use `<b>` & <i>") == "use <code>&lt;b&gt;</code> &amp; &lt;i&gt;"
    html = type_html({"type": "object", "properties": {"<x>": {"$ref": "#/c/<Y>"}}})
    assert "<x>" not in html and "&lt;x&gt;" in html and "&lt;Y&gt;" in html
