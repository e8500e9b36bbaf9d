"""The API reference page, built from the generated OpenAPI schema (so it never drifts from it).

Swagger UI and Redoc load their scripts from a CDN, which this offline machine cannot reach, so
the page is rendered on the server: every path and method with its summary, parameters, request
body and responses, and every schema component with its fields. Everything taken from the
schema is escaped.
"""

from __future__ import annotations

import json
import re

from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from brokerui.api.errors import DOMAIN_STATUS

METHODS = ("get", "post", "put", "patch", "delete")

# What each engine error code means, for the table of codes.
ENGINE_NOTES = {
    "unknown_topic": "no such topic",
    "unknown_partition": "the topic has no such partition; `partition_count` says how many",
    "unknown_group": "no such consumer group",
    "topic_already_exists": "a topic with that name exists",
    "group_not_empty": "the group has active members (`state`, `members`); stop them first",
    "rebalance_in_progress": "the group is rebalancing; retry",
    "illegal_generation": "a stale group generation",
    "unknown_member_id": "no such group member",
    "inconsistent_group_protocol": "the group's members use another protocol",
    "invalid_session_timeout": "a session timeout outside the broker's bounds",
    "no_offset_for_partition": "no committed offset and no reset policy",
    "invalid_topic_name": "1..249 characters of ASCII letters, digits, '.', '_' and '-'",
    "invalid_config": "an unknown config key or a bad value (`key`, `value`, `reason`)",
    "invalid_partitions": "a partition count out of range, or fewer than now",
    "invalid_record": "a record or request the broker does not accept (e.g. purging a "
    "compacted topic)",
    "invalid_reset": "an unknown reset strategy or a bad value for it",
    "record_too_large": "a record over the topic's max.message.bytes",
    "offset_out_of_range": "outside [`log_start_offset`, `end_offset`], both in the body",
    "corrupt_record": "damaged data on disk",
    "log_damaged": "the offset lies in a damaged range of the log (listed in the partition's "
    "`damaged`); `manage.py verify_log --repair` cuts it out",
    "storage_error": "the disk refused the write (full, quota, I/O error); nothing was stored, "
    "retry once there is room",
    "store_closed": "the broker is shutting down",
    "data_dir_locked": "another process owns the data directory",
    "cluster_unavailable": "the external Kafka cluster (`TIDELOG_CLUSTER`) did not answer",
    "cluster_error": "the external Kafka cluster refused the request; the message says why",
    "unsupported": "not available on this cluster (e.g. OffsetDelete on an external one)",
}

# Codes the API layer itself answers with (the engine's come from DOMAIN_STATUS).
API_CODES = [
    ("invalid_request", 400, "the body or query failed validation; `fields` says where"),
    ("parse_error", 400, "the body is not JSON"),
    ("not_authenticated", 401, "no token or session"),
    ("authentication_failed", 401, "an unknown token"),
    ("permission_denied", 403, "refused"),
    ("operator_required", 403, "the action needs the operator role"),
    ("csrf_failed", 403, "a session request without its CSRF token"),
    ("internal_topic", 403, "internal topics (`__*`, `_schemas`) are managed by the broker"),
    ("not_found", 404, "no such endpoint"),
    ("method_not_allowed", 405, "the endpoint does not take this method"),
    ("request_too_large", 413, "the request body is over the limit"),
    ("unsupported_media_type", 415, "send application/json"),
    ("internal_error", 500, "a bug: the server log has the traceback"),
]

_CODE = re.compile(r"`([^`]+)`")


def text_html(text: str) -> SafeString:
    """Escaped text with `code` spans (the little Markdown that descriptions use)."""
    return mark_safe(_CODE.sub(r"<code>\1</code>", escape(text or "")))


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def type_html(schema: dict | None) -> SafeString:
    """A short description of a schema, linking component references."""
    if not schema:
        return mark_safe("—")
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return format_html('<a href="#schema-{}"><code>{}</code></a>', name, name)
    for combo, word in (("oneOf", "one of"), ("anyOf", "any of"), ("allOf", "all of")):
        if combo in schema:
            parts = [type_html(sub) for sub in schema[combo]]
            if combo == "allOf" and len(parts) == 1:
                out = parts[0]
            else:
                out = format_html("{} ({})", word, mark_safe(" | ".join(parts)))
            return _nullable(out, schema)
    kind = schema.get("type", "any")
    if kind == "array":
        out = format_html("array of {}", type_html(schema.get("items")))
    elif kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        value = type_html(extra) if isinstance(extra, dict) and extra else mark_safe("any")
        out = format_html("object: name → {}", value)
    elif kind == "object" and "properties" in schema:
        fields = format_html_join(
            ", ",
            "<code>{}</code>: {}",
            ((name, type_html(sub)) for name, sub in schema["properties"].items()),
        )
        out = format_html("object {{ {} }}", fields)
    else:
        out = format_html("<code>{}</code>", kind)
        if schema.get("format"):
            out = format_html("{} <small>({})</small>", out, schema["format"])
    if schema.get("enum"):
        choices = ", ".join(str(e) for e in schema["enum"] if e is not None)
        out = format_html("{}: {}", out, choices)
    return _nullable(out, schema)


def _nullable(out: SafeString, schema: dict) -> SafeString:
    return format_html("{} or null", out) if schema.get("nullable") else out


def _notes(schema: dict) -> str:
    notes = []
    for key, label in (
        ("default", "default"),
        ("minimum", "min"),
        ("maximum", "max"),
        ("maxItems", "at most"),
        ("minItems", "at least"),
    ):
        if key in schema:
            notes.append(f"{label} {json.dumps(schema[key])}")
    if schema.get("readOnly"):
        notes.append("read only")
    if schema.get("writeOnly"):
        notes.append("write only")
    return "; ".join(notes)


def _body(content: dict | None) -> dict | None:
    if not content:
        return None
    media, spec = next(iter(content.items()))
    return {"media_type": media, "type": type_html(spec.get("schema"))}


def _operation(path: str, method: str, op: dict, path_params: list) -> dict:
    params = []
    for p in [*path_params, *op.get("parameters", [])]:
        sch = p.get("schema", {})
        params.append(
            {
                "name": p["name"],
                "in": p["in"],
                "required": p.get("required", False),
                "type": type_html(sch),
                "description": text_html(p.get("description", "")),
                "notes": _notes(sch),
            }
        )
    params.sort(key=lambda p: (p["in"] != "path", not p["required"], p["name"]))
    request = op.get("requestBody")
    responses = [
        {
            "status": code,
            "description": text_html(r.get("description", "")),
            "body": _body(r.get("content")),
        }
        for code, r in sorted(op.get("responses", {}).items())
    ]
    return {
        "id": op.get("operationId", f"{method}-{path}"),
        "path": path,
        "method": method.upper(),
        "summary": text_html(op.get("summary", "")),
        "description": text_html(op.get("description", "")),
        "tag": (op.get("tags") or ["other"])[0],
        "parameters": params,
        "request": _body(request.get("content")) if request else None,
        "request_required": bool(request and request.get("required")),
        "responses": responses,
        "security": [name for req in op.get("security", []) for name in req],
    }


def _component(name: str, schema: dict) -> dict:
    required = set(schema.get("required", []))
    fields = [
        {
            "name": field,
            "type": type_html(sub),
            "required": field in required,
            "description": text_html(sub.get("description", "")),
            "notes": _notes(sub),
        }
        for field, sub in schema.get("properties", {}).items()
    ]
    return {
        "name": name,
        "description": text_html(schema.get("description", "")),
        "fields": fields,
        "type": None if fields else type_html(schema),
    }


def _error_codes() -> list[dict]:
    engine = [
        {"code": cls.code, "status": status, "note": text_html(ENGINE_NOTES.get(cls.code, ""))}
        for cls, status in DOMAIN_STATUS.items()
        if cls.code not in ("tidelog_error", "group_error")
    ]
    api = [{"code": c, "status": st, "note": text_html(note)} for c, st, note in API_CODES]
    return sorted(api + engine, key=lambda e: (e["status"], e["code"]))


def build(schema: dict) -> dict:
    """Template context for ``api/docs.html`` from a schema dict."""
    operations = []
    for path, item in schema.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                operations.append(
                    _operation(path, method, item[method], item.get("parameters", []))
                )
    tags: dict[str, list] = {}
    for op in operations:
        tags.setdefault(op["tag"], []).append(op)
    components = schema.get("components", {})
    return {
        "info": schema.get("info", {}),
        "openapi": schema.get("openapi", ""),
        "tags": sorted(tags.items()),
        "operations": operations,
        "components": [
            _component(n, sch) for n, sch in sorted(components.get("schemas", {}).items())
        ],
        "security_schemes": sorted(components.get("securitySchemes", {}).items()),
        "error_codes": _error_codes(),
    }
