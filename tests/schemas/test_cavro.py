"""The compiled Avro reader (streams/schemas/_cavro.pyx, built by `make native`) against
fastavro: random schemas (records nested, enums, unions, arrays, maps, fixed, every
primitive), random data written by fastavro, read by both: the same values; cut or damaged
payloads: an error from both (truncation or a misfit), never a crash; schemas with logical or
recursive types are left to fastavro."""

from __future__ import annotations

import io
import random

import pytest
from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import parse_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.schemas import avro_program
from streams.schemas.wire import SchemaDecoder, Undecodable, encode_header

PRIMS = ["null", "boolean", "int", "long", "float", "double", "string", "bytes"]


def test_the_compiled_reader_is_built():
    assert avro_program._read is not None, "streams/schemas/_cavro is not built: make native"


def _type(rng: random.Random, depth: int, names: list[str]):
    kind = rng.random()
    if depth > 2 or kind < 0.45:
        return rng.choice(PRIMS)
    name = f"T{len(names)}"
    names.append(name)
    if kind < 0.55:
        return {
            "type": "enum",
            "name": name,
            "symbols": rng.sample(list("ABCDEFG"), rng.randint(1, 4)),
        }
    if kind < 0.62:
        return {"type": "fixed", "name": name, "size": rng.randint(0, 6)}
    if kind < 0.72:
        return {"type": "array", "items": _type(rng, depth + 1, names)}
    if kind < 0.8:
        return {"type": "map", "values": _type(rng, depth + 1, names)}
    if kind < 0.9:
        branches = ["null", *rng.sample(["int", "string", "double", "boolean"], rng.randint(1, 2))]
        return branches
    return _record(rng, depth + 1, names, name)


def _record(rng: random.Random, depth: int, names: list[str], name: str = "R") -> dict:
    fields = [{"name": f"f{i}", "type": _type(rng, depth, names)} for i in range(rng.randint(1, 6))]
    return {"type": "record", "name": name, "namespace": "t", "fields": fields}


def _value(rng: random.Random, t):
    if isinstance(t, list):
        branch = rng.choice(t)
        return _value(rng, branch)
    if isinstance(t, dict):
        kind = t["type"]
        if kind == "enum":
            return rng.choice(t["symbols"])
        if kind == "fixed":
            return bytes(rng.randrange(256) for _ in range(t["size"]))
        if kind == "array":
            return [_value(rng, t["items"]) for _ in range(rng.randint(0, 3))]
        if kind == "map":
            return {f"k{i}é": _value(rng, t["values"]) for i in range(rng.randint(0, 3))}
        return {f["name"]: _value(rng, f["type"]) for f in t["fields"]}
    return {
        "null": lambda: None,
        "boolean": lambda: rng.random() < 0.5,
        "int": lambda: rng.randint(-(2**31), 2**31 - 1),
        "long": lambda: rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randint(-(2**40), 2**40)]),
        "float": lambda: rng.choice([0.0, -1.5, 3.25, 1e30]),
        "double": lambda: rng.choice([0.0, -1e-300, rng.random() * 1e12]),
        "string": lambda: rng.choice(["", "a", "héllo ✓", "x" * 200]),
        "bytes": lambda: bytes(rng.randrange(256) for _ in range(rng.randint(0, 5))),
    }[t]()


def _write(schema: dict, datum) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(schema), datum)
    return buf.getvalue()


def _fastavro(schema: dict, data: bytes):
    buf = io.BytesIO(data)
    value = schemaless_reader(buf, parse_schema(schema), None)
    return value, buf.tell()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32))
def test_the_same_values_as_fastavro(seed):
    rng = random.Random(seed)
    schema = _record(rng, 0, [])
    read = avro_program.reader(schema, [])
    assert read is not None, schema
    for _ in range(5):
        data = _write(schema, _value(rng, schema))
        assert read(data, 0) == _fastavro(schema, data), schema
        prefixed = b"\x00\x00\x00\x00\x07" + data
        assert read(prefixed, 5) == (_fastavro(schema, data)[0], len(prefixed))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.data())
def test_cut_or_damaged_payloads_are_errors_not_crashes(seed, data):
    rng = random.Random(seed)
    schema = _record(rng, 0, [])
    read = avro_program.reader(schema, [])
    payload = bytearray(_write(schema, _value(rng, schema)))
    if payload and data.draw(st.booleans()):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    else:
        del payload[data.draw(st.integers(0, len(payload))) :]
    try:
        value, end = read(bytes(payload), 0)
    except (EOFError, ValueError):
        return  # the compiled reader refuses it; fastavro may or may not
    # read: fastavro reads the same from it (damage a reader cannot see: a changed number)
    try:
        expected = _fastavro(schema, bytes(payload))
    except Exception:  # noqa: BLE001 - e.g. a float fastavro reads and a string it refuses
        pytest.fail(f"compiled read {value!r} where fastavro fails ({schema})")
    # by repr: a damaged double may be NaN, which equals nothing, itself included
    assert repr((value, end)) == repr(expected)


def test_logical_and_recursive_types_are_left_to_fastavro():
    dated = {"type": "record", "name": "D", "fields": [
        {"name": "day", "type": {"type": "int", "logicalType": "date"}}]}  # fmt: skip
    tree = {"type": "record", "name": "Node", "fields": [
        {"name": "kids", "type": {"type": "array", "items": "Node"}}]}  # fmt: skip
    assert avro_program.reader(dated, []) is None
    assert avro_program.reader(tree, []) is None
    named = {"type": "record", "name": "Use", "namespace": "n", "fields": [
        {"name": "a", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
        {"name": "b", "type": "E"}, {"name": "c", "type": "n.E"}]}  # fmt: skip
    data = _write(named, {"a": "Y", "b": "X", "c": "Y"})
    assert avro_program.reader(named, [])(data, 0) == _fastavro(named, data)


def test_the_decoder_reads_with_it_and_says_why_it_cannot(registry):
    import json

    schema = {"type": "record", "name": "O", "fields": [{"name": "id", "type": "string"}]}
    schema_id = registry.register("o-value", json.dumps(schema)).id
    decoder = SchemaDecoder(registry)
    good = encode_header(schema_id) + _write(schema, {"id": "o-1"})
    assert decoder.value(good) == {"id": "o-1"}
    with pytest.raises(Undecodable, match="truncated"):
        decoder.value(good[:-1])
    with pytest.raises(Undecodable, match="1 bytes are left"):
        decoder.value(good + b"\x00")
    with pytest.raises(Undecodable, match="not Avro of this schema"):
        decoder.value(encode_header(schema_id) + b"\x01")  # a negative length
