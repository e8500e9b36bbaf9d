"""JSON Schema compatibility: change by change, on a subject, and against a brute-force check:
random writer schemas, readers made from them by random changes, random documents valid
under the writer validated with the reader (jsonschema). Whenever the checker calls a pair
compatible, every such document must be valid under the reader."""

from __future__ import annotations

import copy
import json
import random

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.schemas import errors as E
from streams.schemas.compat_jsonschema import jsonschema_incompatibilities
from streams.schemas.formats import FORMATS, JSON


def obj(props: dict, required=(), **more) -> dict:
    return {"type": "object", "properties": props, "required": list(required), **more}


S, INT, N = {"type": "string"}, {"type": "integer"}, {"type": "number"}

# (what changes, writer, reader, the kinds of incompatibility expected)
CASES = [
    ("the same", obj({"a": S}), obj({"a": S}), set()),
    ("an optional property added, writer closed",
     obj({"a": S}, additionalProperties=False), obj({"a": S, "b": INT}), set()),
    ("a property added to an open model", obj({"a": S}), obj({"a": S, "b": INT}),
     {"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"}),
    ("an untyped property added to an open model", obj({"a": S}), obj({"a": S, "b": {}}), set()),
    ("a property removed, reader open", obj({"a": S, "b": INT}), obj({"a": S}), set()),
    ("a property removed, both closed", obj({"a": S, "b": INT}, additionalProperties=False),
     obj({"a": S}, additionalProperties=False), {"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"}),
    ("a required property added", obj({"a": S, "b": INT}), obj({"a": S, "b": INT}, ["b"]),
     {"REQUIRED_ATTRIBUTE_ADDED"}),
    ("a required property dropped", obj({"a": S}, ["a"]), obj({"a": S}), set()),
    ("integer -> number", obj({"a": INT}), obj({"a": N}), set()),
    ("number -> integer", obj({"a": N}), obj({"a": INT}), {"TYPE_NARROWED"}),
    ("string -> integer", obj({"a": S}), obj({"a": INT}), {"TYPE_CHANGED"}),
    ("a type added to a list", obj({"a": S}), obj({"a": {"type": ["string", "null"]}}), set()),
    ("a type removed from a list", obj({"a": {"type": ["string", "null"]}}), obj({"a": S}),
     {"TYPE_NARROWED"}),
    ("maxLength added", obj({"a": S}), obj({"a": {"type": "string", "maxLength": 5}}),
     {"MAX_LENGTH_ADDED"}),
    ("maxLength increased", obj({"a": {"type": "string", "maxLength": 5}}),
     obj({"a": {"type": "string", "maxLength": 9}}), set()),
    ("minLength increased", obj({"a": {"type": "string", "minLength": 1}}),
     obj({"a": {"type": "string", "minLength": 2}}), {"MIN_LENGTH_INCREASED"}),
    ("pattern added", obj({"a": S}), obj({"a": {"type": "string", "pattern": "^x"}}),
     {"PATTERN_ADDED"}),
    ("minimum increased", obj({"a": {"type": "integer", "minimum": 0}}),
     obj({"a": {"type": "integer", "minimum": 1}}), {"MINIMUM_INCREASED"}),
    ("minimum -> exclusive at one below", obj({"a": {"type": "integer", "minimum": 1}}),
     obj({"a": {"type": "integer", "exclusiveMinimum": 0.5}}), set()),
    ("maximum decreased", obj({"a": {"type": "number", "maximum": 10}}),
     obj({"a": {"type": "number", "maximum": 9}}), {"MAXIMUM_DECREASED"}),
    ("maximum made exclusive", obj({"a": {"type": "number", "maximum": 10}}),
     obj({"a": {"type": "number", "exclusiveMaximum": 10}}), {"MAXIMUM_DECREASED"}),
    ("multipleOf 2 -> 4", obj({"a": {"type": "integer", "multipleOf": 2}}),
     obj({"a": {"type": "integer", "multipleOf": 4}}), {"MULTIPLE_OF_CHANGED"}),
    ("multipleOf 4 -> 2", obj({"a": {"type": "integer", "multipleOf": 4}}),
     obj({"a": {"type": "integer", "multipleOf": 2}}), set()),
    ("enum extended", obj({"a": {"enum": ["x", "y"]}}), obj({"a": {"enum": ["x", "y", "z"]}}),
     set()),
    ("enum narrowed", obj({"a": {"enum": ["x", "y"]}}), obj({"a": {"enum": ["x"]}}),
     {"ENUM_ARRAY_NARROWED"}),
    ("enum -> its type", obj({"a": {"enum": ["x", "y"]}}), obj({"a": S}), set()),
    ("enum added", obj({"a": S}), obj({"a": {"enum": ["x"]}}), {"ENUM_ARRAY_NARROWED"}),
    ("array items narrowed", obj({"a": {"type": "array", "items": N}}),
     obj({"a": {"type": "array", "items": INT}}), {"TYPE_NARROWED"}),
    ("maxItems added", obj({"a": {"type": "array"}}),
     obj({"a": {"type": "array", "maxItems": 3}}), {"MAX_ITEMS_ADDED"}),
    ("uniqueItems added", obj({"a": {"type": "array"}}),
     obj({"a": {"type": "array", "uniqueItems": True}}), {"UNIQUE_ITEMS_ADDED"}),
    ("additionalProperties removed", obj({"a": S}), obj({"a": S}, additionalProperties=False),
     {"ADDITIONAL_PROPERTIES_REMOVED"}),
    ("additionalProperties narrowed", obj({"a": S}, additionalProperties=N),
     obj({"a": S}, additionalProperties=INT), {"ADDITIONAL_PROPERTIES_NARROWED"}),
    ("additionalProperties opened", obj({"a": S}, additionalProperties=False), obj({"a": S}),
     set()),
    ("anyOf extended", {"anyOf": [S, INT]}, {"anyOf": [S, INT, {"type": "null"}]}, set()),
    ("anyOf narrowed", {"anyOf": [S, INT]}, {"anyOf": [S]}, {"SUM_TYPE_NARROWED"}),
    ("a type -> anyOf containing it", S, {"anyOf": [S, INT]}, set()),
    ("oneOf changed", {"oneOf": [S, INT]}, {"oneOf": [S, INT, N]}, {"COMBINED_TYPE_CHANGED"}),
    ("allOf part added", obj({"a": S}), {"allOf": [obj({"a": S}), {"required": ["a"]}]},
     {"REQUIRED_ATTRIBUTE_ADDED"}),
    ("not added", S, {"type": "string", "not": {"const": ""}}, {"KEYWORD_NOT_COMPARED"}),
    ("an untyped writer, a typed reader", {}, S, {"TYPE_NARROWED"}),
    ("a $ref followed",
     {"$defs": {"t": INT}, "type": "object", "properties": {"a": {"$ref": "#/$defs/t"}}},
     {"$defs": {"t": N}, "type": "object", "properties": {"a": {"$ref": "#/$defs/t"}}}, set()),
    ("a $ref's target narrowed",
     {"$defs": {"t": N}, "type": "object", "properties": {"a": {"$ref": "#/$defs/t"}}},
     {"$defs": {"t": INT}, "type": "object", "properties": {"a": {"$ref": "#/$defs/t"}}},
     {"TYPE_NARROWED"}),
    ("a recursive tree",
     {"$defs": {"n": obj({"v": INT, "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}})},
      "$ref": "#/$defs/n"},
     {"$defs": {"n": obj({"v": N, "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}})},
      "$ref": "#/$defs/n"}, set()),
    ("a dependency added", obj({"a": S, "b": S}),
     obj({"a": S, "b": S}, dependentRequired={"a": ["b"]}), {"DEPENDENCY_ARRAY_EXTENDED"}),
    ("a tuple's item narrowed",
     {"type": "array", "prefixItems": [S, N]}, {"type": "array", "prefixItems": [S, INT]},
     {"TYPE_NARROWED"}),
    ("false reads nothing", S, False, {"SCHEMA_CLOSED"}),
    ("true reads everything", S, True, set()),
]  # fmt: skip
_IDS = [c[0] for c in CASES]


@pytest.mark.parametrize(("change", "writer", "reader", "expected"), CASES, ids=_IDS)
def test_a_change(change, writer, reader, expected):
    problems = jsonschema_incompatibilities(reader, writer)
    assert {p.split(":", 1)[0] for p in problems} == expected, problems


def test_the_reason_names_the_place_and_the_values():
    [problem] = jsonschema_incompatibilities(
        obj({"name": {"type": "string", "maxLength": 10}}),
        obj({"name": {"type": "string", "maxLength": 40}}),
    )
    assert problem == (
        "MAX_LENGTH_DECREASED: the reader's maxLength 10 is below the writer's 40 "
        "(at #/properties/name)"
    )


def test_references_to_other_subjects_are_followed(registry):
    registry.register("address", json.dumps(obj({"zip": S})), JSON)
    registry.set_config("address", "NONE")
    registry.register("address", json.dumps(obj({"zip": INT})), JSON)
    from streams.schemas.registry import SchemaReference

    person = json.dumps(obj({"home": {"$ref": "address.json"}}))
    registry.register("person-value", person, JSON, [SchemaReference("address.json", "address", 1)])
    problems = registry.check_compatibility(
        "person-value", None, person, JSON, [SchemaReference("address.json", "address", 2)]
    )
    assert any(p.startswith("TYPE_CHANGED") and "zip" in p for p in problems), problems


def test_a_subject_refuses_an_incompatible_json_schema(registry):
    v1 = obj({"id": S, "qty": INT}, ["id"], additionalProperties=False)
    v2 = obj({"id": S, "qty": INT, "note": S}, ["id"], additionalProperties=False)
    bad = obj({"id": S, "qty": INT, "note": S}, ["id", "note"])
    registry.register("cart-value", json.dumps(v1), JSON)
    assert registry.register("cart-value", json.dumps(v2), JSON).version == 2
    problems = registry.check_compatibility("cart-value", None, json.dumps(bad), JSON)
    assert problems and "REQUIRED_ATTRIBUTE_ADDED" in problems[0], problems
    with pytest.raises(E.IncompatibleSchema):
        registry.register("cart-value", json.dumps(bad), JSON)
    # FULL: both ways; closing an open model is not forward-compatible the other way round
    registry.set_config("cart-value", "FULL")
    v3 = obj({"id": S, "qty": INT, "note": S}, ["id"])
    assert registry.check_compatibility("cart-value", None, json.dumps(v3), JSON)


# -- the brute-force check --------------------------------------------------------------------

LEAVES = ["string", "integer", "number", "boolean", "null", "enum", "array"]


def _leaf(rng: random.Random) -> dict:
    kind = rng.choice(LEAVES)
    if kind == "enum":
        return {"enum": rng.sample(["a", "b", "c", 1, 2, None], rng.randint(1, 3))}
    s: dict = {"type": kind}
    if kind == "string" and rng.random() < 0.4:
        s[rng.choice(["minLength", "maxLength"])] = rng.randint(0, 4)
    if kind in ("integer", "number") and rng.random() < 0.5:
        s[rng.choice(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"])] = rng.randint(
            -3, 3
        )
    if kind == "integer" and rng.random() < 0.2:
        s["multipleOf"] = rng.choice([1, 2, 3, 4])
    if kind == "array":
        s["items"] = {"type": rng.choice(["string", "integer", "number"])}
        if rng.random() < 0.3:
            s["maxItems"] = rng.randint(0, 3)
    return s


def _schema(rng: random.Random) -> dict:
    names = rng.sample(list("abcdef"), rng.randint(1, 4))
    s = {"type": "object", "properties": {n: _leaf(rng) for n in names}}
    s["required"] = [n for n in names if rng.random() < 0.4]
    if rng.random() < 0.4:
        s["additionalProperties"] = rng.choice([False, {"type": "integer"}, {"type": "number"}])
    return s


def _mutate(schema: dict, rng: random.Random) -> dict:
    r = copy.deepcopy(schema)
    for _ in range(rng.randint(1, 3)):
        change = rng.choice(["retype", "add", "remove", "require", "unrequire", "closed", "bound"])
        props = r["properties"]
        name = rng.choice(list("abcdefg"))
        if change == "retype" and name in props:
            props[name] = _leaf(rng)
        elif change == "add" and name not in props:
            props[name] = rng.choice([_leaf(rng), {}])
        elif change == "remove" and name in props and len(props) > 1:
            del props[name]
            r["required"] = [n for n in r["required"] if n != name]
        elif change == "require" and name in props and name not in r["required"]:
            r["required"].append(name)
        elif change == "unrequire":
            r["required"] = [n for n in r["required"] if n != name]
        elif change == "closed":
            r["additionalProperties"] = rng.choice(
                [False, True, {"type": "integer"}, {"type": "number"}]
            )
        elif (
            change == "bound" and name in props and props[name].get("type") in ("integer", "number")
        ):
            props[name]["minimum"] = rng.randint(-3, 3)
    return r


def _value(rng: random.Random, schema) -> object:
    """A value that often meets `schema` and sometimes a neighbouring one."""
    if isinstance(schema, dict) and "enum" in schema and rng.random() < 0.8:
        return rng.choice(schema["enum"])
    kind = schema.get("type") if isinstance(schema, dict) and rng.random() < 0.85 else None
    kind = kind or rng.choice(["string", "integer", "number", "boolean", "null", "array"])
    if kind == "string":
        return "x" * rng.randint(0, 6)
    if kind == "integer":
        return rng.randint(-5, 5)
    if kind == "number":
        return rng.choice([rng.randint(-5, 5), rng.randint(-10, 10) / 2])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    items = schema.get("items", {}) if isinstance(schema, dict) else {}
    return [_value(rng, items) for _ in range(rng.randint(0, 4))]


def _document(rng: random.Random, writer: dict, reader: dict) -> dict:
    doc = {}
    for name in sorted(set(writer["properties"]) | set(reader["properties"]) | {"z"}):
        if rng.random() < 0.6:
            doc[name] = _value(
                rng, writer["properties"].get(name, writer.get("additionalProperties", {}))
            )
    return doc


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
def test_the_checker_agrees_with_validating_random_documents(seed):
    rng = random.Random(seed)
    writer = _schema(rng)
    reader = _mutate(writer, rng)
    problems = jsonschema_incompatibilities(reader, writer)
    w, r = jsonschema.Draft202012Validator(writer), jsonschema.Draft202012Validator(reader)
    for _ in range(30):
        doc = _document(rng, writer, reader)
        if w.is_valid(doc) and not problems:
            assert r.is_valid(doc), (writer, reader, doc)


def test_the_brute_force_check_finds_documents_the_checker_refuses():
    """The check above could fail: over the same draws, the documents it validates reach the
    reader's refusals often."""
    refused = caught = 0
    for seed in range(300):
        rng = random.Random(seed)
        writer = _schema(rng)
        reader = _mutate(writer, rng)
        if not jsonschema_incompatibilities(reader, writer):
            continue
        refused += 1
        w, r = jsonschema.Draft202012Validator(writer), jsonschema.Draft202012Validator(reader)
        docs = [_document(rng, writer, reader) for _ in range(30)]
        caught += any(w.is_valid(d) and not r.is_valid(d) for d in docs)
    assert refused > 50 and caught > refused // 3, (refused, caught)


def test_the_registry_format_checks_json_schemas():
    reader = FORMATS[JSON].parse(json.dumps(obj({"a": INT})), {})
    writer = FORMATS[JSON].parse(json.dumps(obj({"a": S})), {})
    assert FORMATS[JSON].incompatibilities(reader, writer)
    assert not FORMATS[JSON].incompatibilities(writer, writer)
