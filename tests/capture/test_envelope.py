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


@pytest.mark.parametrize(
    ("op", "snapshot", "old", "new"),
    [
        ("c", "false", None, (b"1", b"2.5", b'say "hi"')),
        ("u", "false", (b"1", b"1", b"a"), (b"1", b"2", b"b")),
        ("d", "false", (b"1", None, b"a"), None),
        ("r", "incremental", None, (b"2", b"-0.5", "ü".encode())),
    ],
)
def test_an_event_is_the_compact_json_of_debeziums_envelope(op, snapshot, old, new):
    """The spliced event is byte for byte the compact JSON of the envelope built as a document,
    keys in Debezium's order, for every op, a second transaction and names that need escaping."""
    relation = pgoutput.Relation(
        relation_id=1,
        namespace='sch"ema',
        name="tä",
        replica_identity="d",
        columns=(
            pgoutput.Column("id", 20, -1, True),
            pgoutput.Column("x", 701, -1, False),
            pgoutput.Column("t", 25, -1, False),
        ),
    )
    schema = envelope.TableSchema(relation, ("id",), "topic", 'se"rver', "dé")
    before = schema.row(old) if old else None
    after = schema.row(new) if new else None
    for begin, lsn in (
        (pgoutput.Begin(final_lsn=2**40 + 5, commit_ts_us=1_700_000_000_123_456, xid=7), 2**40),
        (pgoutput.Begin(final_lsn=2**41, commit_ts_us=1_700_000_001_000_999, xid=2**32 - 1), 3),
    ):
        value = envelope.change_event(
            schema,
            op=op,
            before=before,
            after=after,
            lsn=lsn,
            begin=begin,
            ts_ms=1_700_000_002_000,
            snapshot=snapshot,
        )
        document = {
            "schema": schema.value_schema(),
            "payload": {
                "before": before,
                "after": after,
                "source": {
                    "version": envelope.VERSION,
                    "connector": "postgresql",
                    "name": 'se"rver',
                    "ts_ms": begin.commit_ts_us // 1000,
                    "snapshot": snapshot,
                    "db": "dé",
                    "sequence": json.dumps([str(begin.final_lsn), str(lsn)], separators=(",", ":")),
                    "schema": 'sch"ema',
                    "table": "tä",
                    "txId": begin.xid,
                    "lsn": lsn,
                    "commit_lsn": begin.final_lsn,
                },
                "op": op,
                "ts_ms": 1_700_000_002_000,
                "transaction": None,
            },
        }
        expected = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
        assert value == expected
