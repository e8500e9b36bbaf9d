"""Debezium's change-event envelope, as Kafka Connect's JsonConverter writes it.

The value is ``{"schema": ..., "payload": {"before", "after", "source", "op", "ts_ms",
"transaction"}}`` (the converter's default ``schemas.enable=true``), so the field list of the
table travels in every event and a column added or dropped shows in the next event's schema.
The key is the primary key's columns as a plain JSON object (``{"id": 7}``, the key converter
with ``schemas.enable=false``): a key must not change when the table's schema does, or log
compaction would keep two records for one row.

Values are decoded from PostgreSQL's text output by type: integers, floats and booleans as JSON
numbers and booleans, ``bytea`` as base64 (Connect's ``bytes``), ``numeric`` as a string
(Debezium's ``decimal.handling.mode=string``), ``json``/``jsonb`` as the JSON text
(``io.debezium.data.Json``), dates and times as PostgreSQL prints them (not Debezium's
epoch-based ``time.precision.mode``). A float that is not finite (``NaN``, ``Infinity``,
``-Infinity``) is that word as a string, as JSON has no such numbers. A TOASTed value an
update did not touch is ``__debezium_unavailable_value``, as in Debezium.
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from streams.capture import pgoutput

CONNECTOR = "postgresql"
VERSION = "tidelog-capture-1"
UNAVAILABLE = "__debezium_unavailable_value"

# PostgreSQL type oid -> (Connect type, Connect semantic name or None)
_TYPES: dict[int, tuple[str, str | None]] = {
    16: ("boolean", None),
    17: ("bytes", None),
    20: ("int64", None),
    21: ("int16", None),
    23: ("int32", None),
    26: ("int64", None),  # oid
    700: ("float32", None),
    701: ("float64", None),
    1700: ("string", None),  # numeric
    114: ("string", "io.debezium.data.Json"),
    3802: ("string", "io.debezium.data.Json"),
    2950: ("string", "io.debezium.data.Uuid"),
    1082: ("string", "io.debezium.time.Date"),
    1114: ("string", "io.debezium.time.Timestamp"),
    1184: ("string", "io.debezium.time.ZonedTimestamp"),
}


def connect_type(type_oid: int) -> tuple[str, str | None]:
    return _TYPES.get(type_oid, ("string", None))


def _float(raw: bytes) -> float | str:
    value = float(raw)  # also 'NaN', 'Infinity'
    return value if math.isfinite(value) else raw.decode()


def _bool(raw: bytes) -> bool:
    return raw == b"t"


def _bytea(raw: bytes) -> str:  # bytea's text form is hex: \x0102
    return base64.b64encode(bytes.fromhex(raw[2:].decode())).decode()


_DECODERS: dict[str, Callable[[bytes], Any]] = {
    # builtins, not wrappers: no Python frame per column (int() takes PostgreSQL's digits)
    "int16": int,
    "int32": int,
    "int64": int,
    "float32": _float,
    "float64": _float,
    "boolean": _bool,
    "bytes": _bytea,
}


def decoder_for(type_oid: int) -> Callable[[bytes], Any]:
    """The function that turns a column's text (as pgoutput sent it) into its JSON value."""
    return _DECODERS.get(connect_type(type_oid)[0], bytes.decode)  # UTF-8 text


def decode_value(type_oid: int, raw: pgoutput.Value) -> Any:
    """A column's JSON value from the text pgoutput sent."""
    if raw is None:
        return None
    if raw is pgoutput.UNCHANGED_TOAST:
        return UNAVAILABLE
    assert isinstance(raw, bytes)
    return decoder_for(type_oid)(raw)


@dataclass(frozen=True)
class TableSchema:
    """One version of a captured table: the Relation message and the primary key columns."""

    relation: pgoutput.Relation
    key_columns: tuple[str, ...]
    topic: str
    server: str  # Debezium's topic prefix / logical server name
    database: str

    def row(self, values: Sequence[pgoutput.Value]) -> dict[str, Any]:
        """A tuple as ``{column: value}`` (a ``K`` old tuple has NULL outside the key)."""
        if len(values) != len(self.relation.columns):
            raise pgoutput.PgOutputError(
                f"{self.qualified_name}: tuple of {len(values)} columns, relation has "
                f"{len(self.relation.columns)}"
            )
        row: dict[str, Any] = {}
        for (name, decode), raw in zip(self._decoders, values, strict=True):
            if raw is None:
                row[name] = None
            elif raw is pgoutput.UNCHANGED_TOAST:
                row[name] = UNAVAILABLE
            else:  # bytes (an identity test above, not isinstance: this runs per column)
                row[name] = decode(raw)  # type: ignore[arg-type]
        return row

    @functools.cached_property
    def _decoders(self) -> list[tuple[str, Callable[[bytes], Any]]]:
        return [(c.name, decoder_for(c.type_oid)) for c in self.relation.columns]

    @property
    def qualified_name(self) -> str:
        return f"{self.relation.namespace}.{self.relation.name}"

    def key_of(self, row: dict[str, Any]) -> bytes:
        return dumps({name: row[name] for name in self.key_columns})

    def event_parts(
        self, begin: pgoutput.Begin, snapshot: str
    ) -> tuple[bytes, bytes, bytes, bytes]:
        """The bytes of an event that are the same for every change of one transaction (see
        `change_event`), kept for the last transaction asked about."""
        last = self._last_parts
        if last and last[0] is begin and last[1] == snapshot:
            return last[2]
        rel = self.relation
        final = b"%d" % begin.final_lsn
        parts = (
            b'{"schema":' + self.schema_json + b',"payload":{"before":',
            b',"source":{"version":'
            + dumps(VERSION)
            + b',"connector":'
            + dumps(CONNECTOR)
            + b',"name":'
            + dumps(self.server)
            + b',"ts_ms":%d' % (begin.commit_ts_us // 1000)
            + b',"snapshot":'
            + dumps(snapshot)
            + b',"db":'
            + dumps(self.database)
            + b',"sequence":"[\\"'  # the JSON string ["<commit lsn>","<lsn>"]
            + final
            + b'\\",\\"',
            b'\\"]","schema":'
            + dumps(rel.namespace)
            + b',"table":'
            + dumps(rel.name)
            + b',"txId":%d' % begin.xid
            + b',"lsn":',
            b',"commit_lsn":' + final + b'},"op":"',
        )
        last[:] = (begin, snapshot, parts)
        return parts

    @functools.cached_property
    def _last_parts(self) -> list[Any]:
        return []

    @functools.cached_property
    def schema_json(self) -> bytes:
        """`value_schema` serialised once per table version (it is in every event)."""
        return dumps(self.value_schema())

    def value_schema(self) -> dict[str, Any]:
        name = f"{self.server}.{self.relation.namespace}.{self.relation.name}"
        fields = []
        for column in self.relation.columns:
            kind, semantic = connect_type(column.type_oid)
            field: dict[str, Any] = {
                "type": kind,
                "optional": column.name not in self.key_columns,
                "field": column.name,
            }
            if semantic:
                field["name"] = semantic
            fields.append(field)
        row = {"type": "struct", "fields": fields, "optional": True, "name": f"{name}.Value"}
        return {
            "type": "struct",
            "optional": False,
            "name": f"{name}.Envelope",
            "fields": [
                {**row, "field": "before"},
                {**row, "field": "after"},
                {
                    "type": "struct",
                    "fields": SOURCE_FIELDS,
                    "optional": False,
                    "name": "io.debezium.connector.postgresql.Source",
                    "field": "source",
                },
                {"type": "string", "optional": False, "field": "op"},
                {"type": "int64", "optional": True, "field": "ts_ms"},
            ],
        }


SOURCE_FIELDS = [
    {"type": "string", "optional": False, "field": "version"},
    {"type": "string", "optional": False, "field": "connector"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "int64", "optional": False, "field": "ts_ms"},
    {"type": "string", "optional": True, "field": "snapshot"},
    {"type": "string", "optional": False, "field": "db"},
    {"type": "string", "optional": True, "field": "sequence"},
    {"type": "string", "optional": False, "field": "schema"},
    {"type": "string", "optional": False, "field": "table"},
    {"type": "int64", "optional": True, "field": "txId"},
    {"type": "int64", "optional": True, "field": "lsn"},
    {"type": "int64", "optional": True, "field": "commit_lsn"},
]


def dumps(obj: Any) -> bytes:
    """Compact JSON, UTF-8 (non-ASCII characters as themselves), keys in insertion order: what
    ``json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()`` writes, by orjson
    (several times faster; the capture's hottest step)."""
    return orjson.dumps(obj)


def change_event(
    table: TableSchema,
    *,
    op: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    lsn: int,
    begin: pgoutput.Begin,
    ts_ms: int,
    snapshot: str = "false",
) -> bytes:
    """The value of one change event (op ``c``, ``u``, ``d``; ``r`` a snapshot's read, with
    `snapshot` ``"incremental"`` as in Debezium's incremental snapshots): compact JSON of
    ``{"schema": <value_schema>, "payload": {"before", "after", "source": {"version",
    "connector", "name", "ts_ms", "snapshot", "db", "sequence", "schema", "table", "txId",
    "lsn", "commit_lsn"}, "op", "ts_ms", "transaction": null}}``, keys in that order, where
    ``sequence`` is the JSON text ``["<commit lsn>","<lsn>"]`` as a string.

    Only the rows go through the JSON encoder; the rest is spliced from bytes made once per
    table version (the schema) and per transaction (`TableSchema.event_parts`): the capture's
    hottest step."""
    head, source, source_lsn, op_at = table.event_parts(begin, snapshot)
    lsn_text = b"%d" % lsn
    return b"".join(
        (
            head,
            dumps(before),
            b',"after":',
            dumps(after),
            source,
            lsn_text,
            source_lsn,
            lsn_text,
            op_at,
            op.encode(),
            b'","ts_ms":%d,"transaction":null}}' % ts_ms,
        )
    )
