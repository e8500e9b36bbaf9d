"""Avro schemas as programs for the compiled reader (``streams/schemas/_cavro.pyx``).

``program(schema, named)`` turns a schema's JSON (with the named types of the schemas it
references) into a tree of tuples, ``(op, ...)``; ``None`` when the schema has what the
compiled reader leaves to fastavro: a logical type (fastavro turns those into dates,
decimals, UUIDs) or a recursive type. ``reader(schema, named)`` is the compiled read of such
a schema, or None (then fastavro reads it; also when ``_cavro`` is not built).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

try:
    from streams.schemas._cavro import read as _read
except ImportError:  # not built (make native): fastavro reads every schema
    _read = None

OPS = {
    "null": 0, "boolean": 1, "int": 2, "long": 3, "float": 4, "double": 5, "string": 6,
    "bytes": 7, "enum": 8, "fixed": 9, "array": 10, "map": 11, "union": 12, "record": 13,
}  # fmt: skip
PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "string", "bytes")


class _Unsupported(Exception):
    pass


def _full_name(schema: Mapping[str, Any], namespace: str | None) -> str:
    name = str(schema["name"])
    if "." in name:
        return name
    ns = schema.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def named_types(schemas: list[Any]) -> dict[str, Any]:
    """Every named type (record, enum, fixed) defined in `schemas`, by full name."""
    out: dict[str, Any] = {}

    def walk(s: Any, namespace: str | None) -> None:
        if isinstance(s, list):
            for branch in s:
                walk(branch, namespace)
        elif isinstance(s, dict):
            t = s.get("type")
            if t in ("record", "error", "enum", "fixed"):
                full = _full_name(s, namespace)
                out[full] = s
                namespace = full.rpartition(".")[0] or None
            if t in ("record", "error"):
                for f in s.get("fields", []):
                    walk(f.get("type"), namespace)
            elif t == "array":
                walk(s.get("items"), namespace)
            elif t == "map":
                walk(s.get("values"), namespace)
            elif isinstance(t, dict | list):
                walk(t, namespace)

    for s in schemas:
        walk(s, None)
    return out


def program(schema: Any, named: Mapping[str, Any]) -> tuple | None:
    try:
        return _compile(schema, None, named, ())
    except _Unsupported:
        return None


def _compile(s: Any, namespace: str | None, named: Mapping[str, Any], stack: tuple) -> tuple:
    if isinstance(s, list):
        return (OPS["union"], tuple(_compile(b, namespace, named, stack) for b in s))
    if isinstance(s, str):
        if s in PRIMITIVES:
            return (OPS[s],)
        full = s if "." in s or not namespace else f"{namespace}.{s}"
        target = named.get(full, named.get(s))
        if target is None:
            raise _Unsupported(f"unknown type {s}")
        return _compile(target, full.rpartition(".")[0] or None, named, stack)
    if not isinstance(s, dict):
        raise _Unsupported(repr(s))
    if "logicalType" in s:
        raise _Unsupported("logical type")
    t = s.get("type")
    if t in PRIMITIVES:
        return (OPS[t],)
    if isinstance(t, dict | list):
        return _compile(t, namespace, named, stack)
    if t in ("record", "error", "enum", "fixed"):
        full = _full_name(s, namespace)
        if full in stack:
            raise _Unsupported("recursive type")
        inner = full.rpartition(".")[0] or None
        if t == "enum":
            return (OPS["enum"], tuple(str(x) for x in s["symbols"]))
        if t == "fixed":
            return (OPS["fixed"], int(s["size"]))
        fields = s.get("fields", [])
        return (
            OPS["record"],
            tuple(str(f["name"]) for f in fields),
            tuple(_compile(f["type"], inner, named, (*stack, full)) for f in fields),
        )
    if t == "array":
        return (OPS["array"], _compile(s["items"], namespace, named, stack))
    if t == "map":
        return (OPS["map"], _compile(s["values"], namespace, named, stack))
    if isinstance(t, str):
        return _compile(t, namespace, named, stack)
    raise _Unsupported(repr(t))


def reader(schema: Any, references: list[Any]) -> Callable[[bytes, int], tuple[Any, int]] | None:
    """``read(data, pos) -> (value, position after it)`` compiled for `schema` (its JSON;
    `references` the JSON of the schemas it references), or None: fastavro reads it."""
    if _read is None:
        return None
    prog = program(schema, named_types([*references, schema]))
    if prog is None:
        return None
    read = _read

    def run(data: bytes, pos: int) -> tuple[Any, int]:
        return read(data, pos, prog)

    return run
