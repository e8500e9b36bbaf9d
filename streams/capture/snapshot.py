"""Snapshots that line up with the change stream: the DBLog algorithm (Netflix, 2019; Debezium's
incremental snapshots implement it).

A table is read in chunks by primary key while the stream runs. For each chunk the capture
writes a *low watermark* into the change stream itself (``pg_logical_emit_message``, a
transactional logical decoding message, so it arrives in commit order), selects the chunk, and
writes a *high watermark*. While the stream is between the two watermarks, every change event of
a key in the chunk drops that key from the chunk: the stream already carries a state of that row
at least as new as the one selected. At the high watermark the rows left are written as read
events (``op: "r"``) -- after every change committed before the select, before every change
committed after it -- so a consumer folding the topic by key ends with the table's state, while
writes go on. Snapshots can be paused (between chunks) and resumed, run for a whole table or for
chosen keys.

Resuming after a restart. A snapshot's progress (table, chosen keys, chunk size, the greatest
key read, the counters) is a small JSON document, `progress_value`, written to a compacted
topic ``<server>.__snapshots`` keyed by the snapshot's id (`progress_key`): once when it
starts, then after each chunk -- and only once every record of that chunk has been
acknowledged by the log, so the progress never gets ahead of the records. A capture that starts
(after a kill -9 or a clean stop) reads that topic back and queues each unfinished snapshot
again from its last recorded key, with its counters, its ``resumed_from`` saying where it picked
up. A crash between a chunk's acknowledgement and its progress record means that chunk (or the
few acknowledged since the last record) is read again: harmless, as each re-read chunk goes
through its own watermarks and so writes rows no older than the stream; no row is skipped.

Why a topic of its own rather than a header on the read records (as the capture position
is): the position is recovered from a topic's *last* record, but a chunk's records are followed
by any number of change events of the same topic, so the last chunk would have to be searched
for backwards through the log; a snapshot of chosen keys writes no record at all when every key
is gone; and a compacted progress topic gives the console the state of every snapshot, finished
ones included, in one small read. It holds one record per snapshot ever requested (kept, so
"snapshot as of offset N" survives a restart).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from streams.capture import pgoutput
from streams.capture.envelope import TableSchema

WATERMARK_PREFIX = "tidelog.capture.watermark"
DEFAULT_CHUNK_ROWS = 1024


@dataclass
class SnapshotJob:
    """One table's snapshot (or the chosen keys of it), read chunk by chunk."""

    oid: int
    table: str  # schema.table
    keys: list[dict[str, Any]] | None = None  # None: the whole table
    chunk_rows: int = DEFAULT_CHUNK_ROWS
    last_key: tuple | None = None  # the greatest primary key read so far
    chunks: int = 0
    rows_selected: int = 0
    rows_written: int = 0  # selected and not superseded by a change inside their window
    rows_dropped: int = 0
    done: bool = False
    as_of_lsn: int = 0  # the high watermark's commit LSN of the last chunk
    as_of_offset: int | None = None  # the log offset of its last record acknowledged so far
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    requested_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # where a snapshot restored from the progress topic picked up after a restart: its last
    # recorded key and counters then (None: not resumed); chunks - resumed_from["chunks"] is
    # what this run has read
    resumed_from: dict[str, Any] | None = None
    recorded: bool = False  # its progress record has been written once


def _json_key_value(value: Any) -> Any:
    """A primary key value as JSON that PostgreSQL reads back as that value: numbers and text as
    they are, anything else (numeric, uuid, dates, bytea) as its text form, a literal PostgreSQL
    casts to the key column's type in the chunk's ``WHERE (key) > (...)``."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, memoryview | bytes):
        return "\\x" + bytes(value).hex()
    return str(value)


def progress_key(job: SnapshotJob) -> bytes:
    return json.dumps({"table": job.table, "id": job.id}, sort_keys=True).encode()


def progress_value(job: SnapshotJob, **overrides: Any) -> bytes:
    """The snapshot's progress document (`overrides` replace counters, e.g. those of the chunk
    just acknowledged rather than of the chunk now being read)."""
    doc = {
        "id": job.id,
        "table": job.table,
        "keys": job.keys,
        "chunk_rows": job.chunk_rows,
        "last_key": [_json_key_value(v) for v in job.last_key] if job.last_key else None,
        "chunks": job.chunks,
        "rows_selected": job.rows_selected,
        "rows_written": job.rows_written,
        "rows_dropped": job.rows_dropped,
        "done": job.done,
        "as_of_lsn": job.as_of_lsn,
        "as_of_offset": job.as_of_offset,
        "requested_ms": job.requested_ms,
        "resumed_from": job.resumed_from,
        "ts_ms": int(time.time() * 1000),
    }
    doc.update(overrides)
    return json.dumps(doc, default=str).encode()


def job_from_progress(oid: int, doc: dict[str, Any]) -> SnapshotJob:
    """The snapshot a progress document describes, ready to go on from its last key."""
    last_key = tuple(doc["last_key"]) if doc.get("last_key") is not None else None
    job = SnapshotJob(
        oid=oid,
        table=doc["table"],
        keys=doc.get("keys"),
        chunk_rows=int(doc["chunk_rows"]),
        last_key=last_key,
        chunks=int(doc["chunks"]),
        rows_selected=int(doc["rows_selected"]),
        rows_written=int(doc["rows_written"]),
        rows_dropped=int(doc["rows_dropped"]),
        done=bool(doc["done"]),
        as_of_lsn=int(doc["as_of_lsn"]),
        as_of_offset=doc.get("as_of_offset"),
        id=doc["id"],
        requested_ms=int(doc.get("requested_ms") or 0),
        resumed_from=doc.get("resumed_from"),
        recorded=True,
    )
    if not job.done:
        job.resumed_from = {
            "last_key": doc.get("last_key"),
            "chunks": job.chunks,
            "rows_selected": job.rows_selected,
            "rows_written": job.rows_written,
            "as_of_offset": job.as_of_offset,
        }
    return job


@dataclass
class ChunkWindow:
    """A chunk between its watermarks: the selected rows, by key, until the high watermark."""

    id: str
    job: SnapshotJob
    schema: TableSchema
    rows: dict[bytes, dict[str, Any]] = field(default_factory=dict)
    open: bool = False  # the low watermark has gone by in the stream
    last_key: tuple | None = None
    full: bool = False  # as many rows as asked: there may be more


def table_schema(conn: Any, oid: int, key_columns: tuple[str, ...], **names: Any) -> TableSchema:
    """The table's current columns from the catalog, as a pgoutput Relation would give them."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT n.nspname, c.relname, c.relreplident FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = %s",
            (oid,),
        )
        namespace, name, identity = cur.fetchone()
        cur.execute(
            "SELECT attname, atttypid, atttypmod FROM pg_attribute WHERE attrelid = %s "
            "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (oid,),
        )
        columns = tuple(pgoutput.Column(n, t, m, n in key_columns) for n, t, m in cur.fetchall())
    relation = pgoutput.Relation(oid, namespace, name, identity, columns)
    return TableSchema(relation=relation, key_columns=key_columns, **names)


def watermark(conn: Any, kind: str, window_id: str) -> None:
    """A low or high watermark, committed into the change stream."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT pg_logical_emit_message(true, %s, %s)",
            (WATERMARK_PREFIX, json.dumps({"watermark": kind, "id": window_id})),
        )


def parse_watermark(msg: pgoutput.Message) -> tuple[str, str] | None:
    if msg.prefix != WATERMARK_PREFIX:
        return None
    doc = json.loads(msg.content)
    return doc["watermark"], doc["id"]


def read_chunk(conn: Any, job: SnapshotJob, schema: TableSchema) -> ChunkWindow:
    """Low watermark, the chunk's select, high watermark (each committed on its own: `conn` is
    in autocommit mode); the rows as pgoutput would have sent them (text)."""
    from psycopg2 import sql

    window = ChunkWindow(id=uuid.uuid4().hex, job=job, schema=schema)
    rel = schema.relation
    keys = [sql.Identifier(k) for k in schema.key_columns]
    key_row = sql.SQL("({})").format(sql.SQL(", ").join(keys))
    columns = sql.SQL(", ").join(
        sql.SQL("{}::text").format(sql.Identifier(c.name)) for c in rel.columns
    )
    query = sql.SQL("SELECT {}, {} FROM {}").format(
        sql.SQL(", ").join(keys), columns, sql.Identifier(rel.namespace, rel.name)
    )
    params: list[Any] = []
    if job.keys is not None:
        wanted = [tuple(k[c] for c in schema.key_columns) for k in job.keys]
        placeholders = sql.SQL(", ").join(
            sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * len(keys)))
            for _ in wanted
        )
        query += sql.SQL(" WHERE {} IN ({})").format(key_row, placeholders)
        params = [v for key in wanted for v in key]
    elif job.last_key is not None:
        query += sql.SQL(" WHERE {} > ({})").format(
            key_row, sql.SQL(", ").join(sql.Placeholder() * len(keys))
        )
        params = list(job.last_key)
    query += sql.SQL(" ORDER BY {}").format(  # by position: the text columns share the names
        sql.SQL(", ").join(sql.Literal(i + 1) for i in range(len(keys)))
    )
    if job.keys is None:
        query += sql.SQL(" LIMIT {}").format(sql.Literal(job.chunk_rows))

    watermark(conn, "low", window.id)
    with conn.cursor() as cur:
        cur.execute(query, params)
        fetched = cur.fetchall()
    watermark(conn, "high", window.id)

    width = len(keys)
    for record in fetched:
        values = tuple(None if v is None else v.encode() for v in record[width:])
        row = schema.row(values)
        window.rows[schema.key_of(row)] = row
        window.last_key = tuple(record[:width])
    window.full = job.keys is None and len(fetched) >= job.chunk_rows
    job.rows_selected += len(fetched)
    return window
