"""Avro compatibility against a brute-force check: random writer schemas, readers made from
them by random changes, random data written with the writer and read with the reader
(fastavro's schema resolution). Whenever the registry calls a pair compatible, every datum
must read; whenever a datum cannot be read, the registry must have called it incompatible.
And every level, each with its _TRANSITIVE form, on a subject's history."""

from __future__ import annotations

import copy
import io
import json
import random

import pytest
from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import parse_schema
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from streams.schemas import errors as E
from streams.schemas.errors import SchemaParseError
from streams.schemas.formats import AVRO, FORMATS

SCALARS = ["int", "long", "float", "double", "string", "bytes", "boolean"]


def _writer(rng: random.Random) -> dict:
    fields = []
    for i in range(rng.randint(1, 5)):
        kind = rng.random()
        if kind < 0.6:
            t = rng.choice(SCALARS)
        elif kind < 0.75:
            t = {"type": "enum", "name": f"E{i}", "symbols": rng.sample(list("ABCDE"), 3)}
        elif kind < 0.9:
            t = ["null", rng.choice(SCALARS)]
        else:
            t = {"type": "array", "items": rng.choice(SCALARS)}
        fields.append({"name": f"f{i}", "type": t})
    return {"type": "record", "name": "R", "fields": fields}


def _default(t):
    if isinstance(t, list):
        return None
    if isinstance(t, dict):
        return t["symbols"][0] if t["type"] == "enum" else []
    return {"int": 0, "long": 0, "float": 0.0, "double": 0.0, "string": "", "bytes": "",
            "boolean": False}[t]  # fmt: skip


def _mutate(schema: dict, rng: random.Random) -> dict:
    reader = copy.deepcopy(schema)
    fields = reader["fields"]
    for _ in range(rng.randint(1, 3)):
        change = rng.choice(["add", "add_default", "remove", "retype", "enum", "union", "rename"])
        if change in ("add", "add_default"):
            t = rng.choice(SCALARS)
            field = {"name": f"n{rng.randint(0, 99)}", "type": t}
            if change == "add_default":
                field["default"] = _default(t)
            if all(f["name"] != field["name"] for f in fields):
                fields.append(field)
        elif change == "remove" and len(fields) > 1:
            fields.pop(rng.randrange(len(fields)))
        elif change == "retype":
            rng.choice(fields)["type"] = rng.choice(SCALARS)
        elif change == "enum":
            enums = [
                f for f in fields if isinstance(f["type"], dict) and f["type"]["type"] == "enum"
            ]
            if enums:
                f = rng.choice(enums)
                f["type"]["symbols"] = rng.sample(list("ABCDEFG"), rng.randint(1, 5))
        elif change == "union":
            f = rng.choice(fields)
            f["type"] = ["null", f["type"]] if not isinstance(f["type"], list) else f["type"][1]
        elif change == "rename":
            f = rng.choice(fields)
            f["name"] = f["name"] + "x"
    return reader


def _datum(schema: dict, rng: random.Random) -> dict:
    def value(t):
        if isinstance(t, list):
            return None if rng.random() < 0.5 else value(t[1])
        if isinstance(t, dict):
            if t["type"] == "enum":
                return rng.choice(t["symbols"])
            return [value(t["items"]) for _ in range(rng.randint(0, 3))]
        return {
            "int": lambda: rng.randint(-(2**31), 2**31 - 1),
            "long": lambda: rng.randint(-(2**40), 2**40),
            "float": lambda: rng.choice([0.5, -2.25, 1e10]),
            "double": lambda: rng.random(),
            "string": lambda: rng.choice(["", "a", "héllo"]),
            # ASCII bytes: the spec promotes bytes to string, and reading bytes that are not
            # UTF-8 as a string fails in any reader, whatever the schemas say
            "bytes": lambda: bytes(rng.randrange(32, 127) for _ in range(rng.randint(0, 4))),
            "boolean": lambda: rng.random() < 0.5,
        }[t]()

    return {f["name"]: value(f["type"]) for f in schema["fields"]}


def _reads(writer: dict, reader: dict, datum: dict) -> bool:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(writer), datum)
    buf.seek(0)
    try:
        schemaless_reader(buf, parse_schema(writer), parse_schema(reader))
    except Exception:  # noqa: BLE001 - any failure to resolve counts
        return False
    return True


def _parse(obj):
    return FORMATS[AVRO].parse(json.dumps(obj), {})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
def test_the_checker_agrees_with_reading_random_data(seed):
    rng = random.Random(seed)
    writer = _writer(rng)
    reader = _mutate(writer, rng)
    try:
        parsed_reader = _parse(reader)
    except SchemaParseError:  # a mutation gave a default of another type: not a schema
        assume(False)
    problems = FORMATS[AVRO].incompatibilities(parsed_reader, _parse(writer))
    results = [_reads(writer, reader, _datum(writer, rng)) for _ in range(8)]
    if not problems:
        assert all(results), (writer, reader)
    if not all(results):
        assert problems, (writer, reader)


@pytest.mark.parametrize(
    "level",
    ["BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
     "FULL_TRANSITIVE", "NONE"],
)  # fmt: skip
def test_every_level_and_its_transitive_form(registry, level):
    a = {"name": "a", "type": "string"}
    b = {"name": "b", "type": "string", "default": ""}
    v1 = {"type": "record", "name": "R", "fields": [a]}
    v2 = {"type": "record", "name": "R", "fields": [a, b]}
    v3 = {"type": "record", "name": "R", "fields": [b]}
    registry.set_config("s", "NONE")
    registry.register("s", json.dumps(v1))
    registry.register("s", json.dumps(v2))
    registry.set_config("s", level)
    # v3 {b} reads v1's and v2's data (a ignored, b defaulted): BACKWARD holds; v1 and v2
    # cannot read v3's data (a is missing and has no default): every FORWARD form fails
    problems = registry.check_compatibility("s", None, json.dumps(v3))
    forward_fails = level in ("FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
    assert bool(problems) == forward_fails, problems
    # a v4 that only the newest version can read: {a, b, c default}
    v4 = {"type": "record", "name": "R", "fields": [a, b, {"name": "c", "type": "int",
                                                          "default": 0}]}  # fmt: skip
    problems = registry.check_compatibility("s", None, json.dumps(v4))
    assert not problems, problems
    # a v5 that reads v2 but not v1's data: b without a default
    v5 = {"type": "record", "name": "R", "fields": [a, {"name": "b", "type": "string"}]}
    problems = registry.check_compatibility("s", None, json.dumps(v5))
    transitive_back = level in ("BACKWARD_TRANSITIVE", "FULL_TRANSITIVE")
    plain_back = level in ("BACKWARD", "FULL")
    if level == "NONE":
        assert not problems
    elif transitive_back:
        assert problems and "version 1" in " ".join(problems)
    elif plain_back:
        assert not problems  # only the latest (v2) is compared: v5 reads v2's data
    if problems:  # registering is refused exactly when the check says so
        with pytest.raises(E.IncompatibleSchema):
            registry.register("s", json.dumps(v5))
    else:
        assert registry.register("s", json.dumps(v5)).new
