"""Confluent Schema Registry's REST API over a `SchemaRegistry`, with no I/O: a `RestRequest`
in, a `RestResponse` out (`handle`). `streams.schemas.server` serves it over HTTP.

The routes, bodies, query parameters and error codes are those of Confluent's API reference
(docs.confluent.io, "Schema Registry API Reference"), as its clients use them. Each route says
whether it writes (operators only) and how a write is audited: `RestResponse.audit` carries
(action, target, before, after) for the server's audit sink.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

from streams.schemas import errors as E
from streams.schemas.formats import PROTOBUF, SCHEMA_TYPES, serialized_protobuf
from streams.schemas.registry import SchemaRegistry, SchemaVersion, parse_references

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_TYPES = (
    "application/vnd.schemaregistry.v1+json",
    "application/vnd.schemaregistry+json",
    "application/json",
    "application/octet-stream",
)


@dataclasses.dataclass(frozen=True)
class RestRequest:
    method: str
    path: str  # without the query string, still percent-encoded
    query: Mapping[str, str] = dataclasses.field(default_factory=dict)
    body: bytes = b""
    content_type: str = ""


@dataclasses.dataclass(frozen=True)
class RestResponse:
    status: int
    body: Any  # JSON-able; a str is sent as it is (the ``/schema`` routes)
    audit: tuple[str, str, Any, Any] | None = None
    raw: bool = False  # body is a str sent as JSON text (``/schema``): no re-encoding

    def encoded(self) -> bytes:
        if self.raw:
            return str(self.body).encode()
        return json.dumps(self.body, separators=(",", ":"), ensure_ascii=False).encode()


def error_response(exc: E.RegistryError) -> RestResponse:
    return RestResponse(exc.status, {"error_code": exc.error_code, "message": exc.message})


Handler = Callable[[SchemaRegistry, RestRequest, list[str]], RestResponse]


@dataclasses.dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern
    handler: Handler
    writes: bool = False


ROUTES: list[Route] = []


def route(method: str, path: str, *, writes: bool = False):
    """Register a handler for `path`, whose ``{name}`` parts match one path segment."""
    pattern = re.compile("^" + re.sub(r"\{\w+\}", "([^/]+)", path) + "/?$")

    def register(fn: Handler) -> Handler:
        ROUTES.append(Route(method, pattern, fn, writes))
        return fn

    return register


def match(method: str, path: str) -> tuple[Route, list[str]]:
    """The route for `method` and `path`, and its path parameters (decoded)."""
    allowed = False
    for r in ROUTES:
        m = r.pattern.match(path)
        if m is None:
            continue
        if r.method == method:
            return r, [unquote(g) for g in m.groups()]
        allowed = True
    if allowed:
        raise E.MethodNotAllowed("HTTP 405 Method Not Allowed")
    raise E.NotFound("HTTP 404 Not Found")


def handle(registry: SchemaRegistry, request: RestRequest) -> RestResponse:
    """Answer `request` (authorization is the caller's: see `Route.writes`)."""
    try:
        r, params = match(request.method, request.path)
        return r.handler(registry, request, params)
    except E.RegistryError as exc:
        return error_response(exc)


# -- request helpers ------------------------------------------------------------------------


def _flag(request: RestRequest, name: str) -> bool:
    return str(request.query.get(name, "false")).lower() == "true"


def _body(request: RestRequest) -> dict:
    if not request.body:
        raise E.BadRequest("a JSON body is needed")
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise E.BadRequest(f"Unrecognized JSON in the request body: {exc}") from None
    if not isinstance(body, dict):
        raise E.BadRequest("the request body must be a JSON object")
    return body


def _schema_args(body: dict) -> dict:
    schema = body.get("schema")
    if not isinstance(schema, str):
        raise E.InvalidSchema("Empty schema" if schema is None else "schema must be a string")
    schema_type = body.get("schemaType") or "AVRO"
    if str(schema_type).upper() not in SCHEMA_TYPES:
        raise E.InvalidSchema(f"Invalid schema type {schema_type!r}")
    return {
        "schema": schema,
        "schema_type": str(schema_type).upper(),
        "references": parse_references(body.get("references")),
    }


def _version_json(ver: SchemaVersion, request: RestRequest, registry) -> dict:
    out = ver.to_json()
    if request.query.get("format") == "serialized" and ver.schema_type == PROTOBUF:
        out["schema"] = serialized_protobuf(registry.parsed(ver.id))
    return out


def _schema_id(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise E.SchemaNotFound(f"Schema {raw} not found") from None


def _subject_target(subject: str) -> str:
    return f"subject {subject}"


# -- routes ---------------------------------------------------------------------------------


@route("GET", "")
def _root(registry, request, params):
    return RestResponse(200, {})


@route("GET", "/contexts")
def _contexts(registry, request, params):
    return RestResponse(200, ["."])


@route("GET", "/schemas/types")
def _types(registry, request, params):
    return RestResponse(200, ["JSON", "PROTOBUF", "AVRO"])


@route("GET", "/schemas")
def _schemas(registry, request, params):
    vers = registry.all_versions(
        deleted=_flag(request, "deleted"),
        latest_only=_flag(request, "latestOnly"),
        prefix=request.query.get("subjectPrefix", ""),
    )
    return RestResponse(200, [_version_json(v, request, registry) for v in vers])


@route("GET", "/schemas/ids/{id}")
def _schema_by_id(registry, request, params):
    ver = registry.schema(_schema_id(params[0]), subject=request.query.get("subject"))
    out = _version_json(ver, request, registry)
    for key in ("subject", "version", "id"):
        out.pop(key)
    return RestResponse(200, out)


@route("GET", "/schemas/ids/{id}/schema")
def _schema_text_by_id(registry, request, params):
    ver = registry.schema(_schema_id(params[0]), subject=request.query.get("subject"))
    return RestResponse(200, ver.schema, raw=True)


@route("GET", "/schemas/ids/{id}/subjects")
def _schema_subjects(registry, request, params):
    schema_id = _schema_id(params[0])
    holders = registry.holders(schema_id, deleted=_flag(request, "deleted"))
    if not holders:
        raise E.SchemaNotFound(f"Schema {schema_id} not found")
    return RestResponse(200, sorted({h.subject for h in holders}))


@route("GET", "/schemas/ids/{id}/versions")
def _schema_versions(registry, request, params):
    schema_id = _schema_id(params[0])
    holders = registry.holders(schema_id, deleted=_flag(request, "deleted"))
    if not holders:
        raise E.SchemaNotFound(f"Schema {schema_id} not found")
    return RestResponse(200, [{"subject": h.subject, "version": h.version} for h in holders])


@route("GET", "/subjects")
def _subjects(registry, request, params):
    prefix = request.query.get("subjectPrefix", "")
    return RestResponse(200, registry.subjects(deleted=_flag(request, "deleted"), prefix=prefix))


@route("POST", "/subjects/{subject}")
def _lookup(registry, request, params):
    ver = registry.lookup(
        params[0],
        **_schema_args(_body(request)),
        normalize=_flag(request, "normalize"),
        deleted=_flag(request, "deleted"),
    )
    return RestResponse(200, _version_json(ver, request, registry))


@route("DELETE", "/subjects/{subject}", writes=True)
def _delete_subject(registry, request, params):
    permanent = _flag(request, "permanent")
    versions = registry.delete_subject(params[0], permanent=permanent)
    action = "schema.subject_delete_permanent" if permanent else "schema.subject_delete"
    return RestResponse(
        200, versions, audit=(action, _subject_target(params[0]), {"versions": versions}, None)
    )


@route("GET", "/subjects/{subject}/versions")
def _versions(registry, request, params):
    return RestResponse(200, registry.versions(params[0], deleted=_flag(request, "deleted")))


@route("POST", "/subjects/{subject}/versions", writes=True)
def _register(registry, request, params):
    body = _body(request)
    args = _schema_args(body)
    result = registry.register(
        params[0],
        **args,
        normalize=_flag(request, "normalize"),
        schema_id=body.get("id") if body.get("id", -1) not in (-1, None) else None,
        version=body.get("version") if body.get("version", -1) not in (-1, None, 0) else None,
    )
    audit = None
    if result.new:
        after = {"id": result.id, "version": result.version, "schemaType": args["schema_type"]}
        audit = ("schema.register", _subject_target(params[0]), None, after)
    return RestResponse(200, {"id": result.id, "version": result.version}, audit=audit)


@route("GET", "/subjects/{subject}/versions/{version}")
def _version(registry, request, params):
    ver = registry.version(params[0], params[1], deleted=_flag(request, "deleted"))
    return RestResponse(200, _version_json(ver, request, registry))


@route("GET", "/subjects/{subject}/versions/{version}/schema")
def _version_schema(registry, request, params):
    ver = registry.version(params[0], params[1], deleted=_flag(request, "deleted"))
    return RestResponse(200, ver.schema, raw=True)


@route("GET", "/subjects/{subject}/versions/{version}/referencedby")
def _referenced_by(registry, request, params):
    ver = registry.version(params[0], params[1], deleted=True)
    return RestResponse(200, registry.referenced_by(ver.subject, ver.version))


@route("DELETE", "/subjects/{subject}/versions/{version}", writes=True)
def _delete_version(registry, request, params):
    permanent = _flag(request, "permanent")
    version = registry.delete_version(params[0], params[1], permanent=permanent)
    action = "schema.delete_permanent" if permanent else "schema.delete"
    target = f"{_subject_target(params[0])} version {version}"
    return RestResponse(200, version, audit=(action, target, {"version": version}, None))


def _compatibility(registry, request, subject: str, version: str | None) -> RestResponse:
    problems = registry.check_compatibility(
        subject, version, **_schema_args(_body(request)), normalize=_flag(request, "normalize")
    )
    out: dict[str, Any] = {"is_compatible": not problems}
    if _flag(request, "verbose"):
        out["messages"] = problems
    return RestResponse(200, out)


@route("POST", "/compatibility/subjects/{subject}/versions/{version}")
def _compatible_with_version(registry, request, params):
    return _compatibility(registry, request, params[0], params[1])


@route("POST", "/compatibility/subjects/{subject}/versions")
def _compatible_with_subject(registry, request, params):
    return _compatibility(registry, request, params[0], None)


def _get_config(registry, request, subject: str | None) -> RestResponse:
    default = subject is None or _flag(request, "defaultToGlobal")
    return RestResponse(
        200, {"compatibilityLevel": registry.config(subject, default_to_global=default)}
    )


def _put_config(registry, request, subject: str | None) -> RestResponse:
    body = _body(request)
    level = body.get("compatibility", body.get("compatibilityLevel"))
    if level is None:
        raise E.InvalidCompatibilityLevel("compatibility is missing")
    before = registry.config(subject)
    level = registry.set_config(subject, level)
    target = _subject_target(subject) if subject else "registry"
    return RestResponse(
        200,
        {"compatibility": level},
        audit=("schema.config", target, {"compatibility": before}, {"compatibility": level}),
    )


def _delete_config(registry, request, subject: str | None) -> RestResponse:
    before = registry.delete_config(subject)
    target = _subject_target(subject) if subject else "registry"
    return RestResponse(
        200,
        {"compatibilityLevel": before},
        audit=("schema.config_delete", target, {"compatibility": before}, None),
    )


route("GET", "/config")(lambda reg, req, p: _get_config(reg, req, None))
route("PUT", "/config", writes=True)(lambda reg, req, p: _put_config(reg, req, None))
route("DELETE", "/config", writes=True)(lambda reg, req, p: _delete_config(reg, req, None))
route("GET", "/config/{subject}")(lambda reg, req, p: _get_config(reg, req, p[0]))
route("PUT", "/config/{subject}", writes=True)(lambda reg, req, p: _put_config(reg, req, p[0]))
route("DELETE", "/config/{subject}", writes=True)(
    lambda reg, req, p: _delete_config(reg, req, p[0])
)


def _get_mode(registry, request, subject: str | None) -> RestResponse:
    default = subject is None or _flag(request, "defaultToGlobal")
    return RestResponse(200, {"mode": registry.mode(subject, default_to_global=default)})


def _put_mode(registry, request, subject: str | None) -> RestResponse:
    mode = _body(request).get("mode")
    if mode is None:
        raise E.InvalidMode("mode is missing")
    before = registry.mode(subject)
    mode = registry.set_mode(subject, mode, force=_flag(request, "force"))
    target = _subject_target(subject) if subject else "registry"
    return RestResponse(
        200, {"mode": mode}, audit=("schema.mode", target, {"mode": before}, {"mode": mode})
    )


def _delete_mode(registry, request, subject: str) -> RestResponse:
    before = registry.delete_mode(subject)
    return RestResponse(
        200,
        {"mode": before},
        audit=("schema.mode_delete", _subject_target(subject), {"mode": before}, None),
    )


route("GET", "/mode")(lambda reg, req, p: _get_mode(reg, req, None))
route("PUT", "/mode", writes=True)(lambda reg, req, p: _put_mode(reg, req, None))
route("GET", "/mode/{subject}")(lambda reg, req, p: _get_mode(reg, req, p[0]))
route("PUT", "/mode/{subject}", writes=True)(lambda reg, req, p: _put_mode(reg, req, p[0]))
route("DELETE", "/mode/{subject}", writes=True)(lambda reg, req, p: _delete_mode(reg, req, p[0]))
