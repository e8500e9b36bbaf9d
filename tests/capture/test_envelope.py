"""Column values in the change events: each PostgreSQL type's JSON form, and JSON that strict
parsers accept (no bare NaN/Infinity)."""

from __future__ import annotations

import json

import pytest

from streams.capture import envelope, pgoutput


@pytest.mark.parametrize(
    ("type_oid", "raw", "expected"),
    [
        (20, b"-9223372036854775808", -9223372036854775808),
        (23, b"42", 42),
        (701, b"1.5", 1.5),
        (701, b"NaN", "NaN"),
        (700, b"Infinity", "Infinity"),
        (701, b"-Infinity", "-Infinity"),
        (16, b"t", True),
        (16, b"f", False),
        (17, b"\\x0102ff", "AQL/"),
        (1700, b"12.3400", "12.3400"),
        (25, "héllo".encode(), "héllo"),
        (23, None, None),
        (25, pgoutput.UNCHANGED_TOAST, envelope.UNAVAILABLE),
    ],
)
def test_each_type_decodes_to_its_json_value(type_oid, raw, expected):
    assert envelope.decode_value(type_oid, raw) == expected


def _refuse(constant: str):
    raise ValueError(f"not JSON: {constant}")


def test_an_event_with_non_finite_floats_is_strict_json_and_keeps_the_value():
    relation = pgoutput.Relation(
        relation_id=1,
        namespace="public",
        name="m",
        replica_identity="d",
        columns=(
            pgoutput.Column("id", 23, -1, True),
            pgoutput.Column("x", 701, -1, False),
            pgoutput.Column("t", 25, -1, False),
        ),
    )
    schema = envelope.TableSchema(relation, ("id",), "s.public.m", "s", "db")
    row = schema.row((b"1", b"NaN", "ünïcode".encode()))
    begin = pgoutput.Begin(final_lsn=100, commit_ts_us=1_700_000_000_000_000, xid=7)
    value = envelope.change_event(
        schema, op="c", before=None, after=row, lsn=90, begin=begin, ts_ms=5
    )
    doc = json.loads(value, parse_constant=_refuse)
    assert doc["payload"]["after"] == {"id": 1, "x": "NaN", "t": "ünïcode"}
    assert doc["payload"]["source"]["sequence"] == '["100","90"]'
    assert json.loads(doc["payload"]["source"]["sequence"]) == ["100", "90"]
    assert "ünïcode".encode() in value  # UTF-8 as itself, not \\u escapes
    assert schema.key_of(row) == b'{"id":1}'
