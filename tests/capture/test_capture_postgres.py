"""Change data capture from a real PostgreSQL (logical decoding, pgoutput) into a real Tidelog
broker through its Kafka listener: Debezium envelopes keyed by primary key in commit order,
tombstones after deletes, compacted topics, schema changes, refused tables."""

from __future__ import annotations

import psycopg2
import pytest

from streams.capture.postgres import CaptureError, PostgresCapture
from streams.log import compression, produce
from tests.capture.helpers import (
    CaptureThread,
    execute,
    fold,
    read_topic,
    run_capture,
    table_rows,
    wait_for,
)


def _topic_len(bootstrap, topic):
    return lambda: len(read_topic(bootstrap, topic))


def test_inserts_updates_deletes_become_debezium_events_in_commit_order(pg_dsn, bootstrap, broker):
    execute(
        pg_dsn,
        "CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(8,2), "
        "stock bigint, active boolean, doc jsonb)",
        "CREATE TABLE other (id int PRIMARY KEY, v text)",
    )
    with CaptureThread(dsn=pg_dsn, tables=["items", "public.other"], bootstrap=bootstrap):
        execute(
            pg_dsn,
            "INSERT INTO items VALUES (1, 'pen', 1.50, 10, true, '{\"a\": 1}'), "
            "(2, 'ink', 3.25, 5, false, null)",
        )
        execute(
            pg_dsn, "UPDATE items SET stock = 9 WHERE id = 1", "INSERT INTO other VALUES (1, 'x')"
        )
        execute(pg_dsn, "DELETE FROM items WHERE id = 2")
        execute(pg_dsn, "UPDATE items SET id = 3 WHERE id = 1")  # a primary key change
        wait_for(lambda: len(read_topic(bootstrap, "tidelog.public.items")) >= 8, "8 records")
        wait_for(lambda: read_topic(bootstrap, "tidelog.public.other"), "other's record")

    records = read_topic(bootstrap, "tidelog.public.items")
    summary = [(r.key, r.value and r.value["op"]) for r in records]
    assert summary == [
        ({"id": 1}, "c"),
        ({"id": 2}, "c"),
        ({"id": 1}, "u"),
        ({"id": 2}, "d"),
        ({"id": 2}, None),  # the tombstone
        ({"id": 1}, "d"),  # the key change: delete + tombstone of the old key, create of the new
        ({"id": 1}, None),
        ({"id": 3}, "c"),
    ]
    first = records[0].value
    assert first["before"] is None
    assert first["after"] == {
        "id": 1, "name": "pen", "price": "1.50", "stock": 10, "active": True, "doc": '{"a": 1}',
    }  # fmt: skip
    assert records[2].value["after"]["stock"] == 9
    assert records[3].value["before"]["id"] == 2 and records[3].value["after"] is None
    source = first["source"]
    assert source["connector"] == "postgresql"
    assert (source["db"], source["schema"], source["table"]) == (
        pg_dsn.split("dbname=")[1], "public", "items",
    )  # fmt: skip
    assert isinstance(source["txId"], int) and isinstance(source["lsn"], int)
    assert isinstance(first["ts_ms"], int)
    # the two inserts share a transaction; later transactions have larger commit LSNs
    assert records[0].value["source"]["txId"] == records[1].value["source"]["txId"]
    commit_lsns = [r.value["source"]["commit_lsn"] for r in records if r.value]
    assert commit_lsns == sorted(commit_lsns)
    fields = [f["field"] for f in records[0].schema["fields"][1]["fields"]]
    assert fields == ["id", "name", "price", "stock", "active", "doc"]

    as_text = "json_build_object('id', id, 'name', name, 'price', price::text, 'stock', stock, "
    as_text += "'active', active, 'doc', doc::text)"
    assert fold(records) == table_rows(pg_dsn, "items", as_text)
    assert broker.store.describe_topic("tidelog.public.items").config["cleanup.policy"] == "compact"
    stored = broker.store.read_batches("tidelog.public.items", 0, 0, 1 << 20)
    codecs = {compression.NAMES[h.codec] for h, _ in produce.split_batches(stored)}
    assert codecs == {"lz4"}  # the producer's default compression
    assert [r.value["after"] for r in read_topic(bootstrap, "tidelog.public.other")] == [
        {"id": 1, "v": "x"}
    ]


def test_a_restart_continues_from_the_confirmed_position_without_duplicates(pg_dsn, bootstrap):
    execute(pg_dsn, "CREATE TABLE items (id int PRIMARY KEY, n int)")
    with CaptureThread(dsn=pg_dsn, tables=["items"], bootstrap=bootstrap):
        execute(pg_dsn, "INSERT INTO items VALUES (1, 1)")
        wait_for(_topic_len(bootstrap, "tidelog.public.items"), "the first record")
    execute(pg_dsn, "INSERT INTO items VALUES (2, 1)", "UPDATE items SET n = 2 WHERE id = 1")
    with CaptureThread(dsn=pg_dsn, tables=["items"], bootstrap=bootstrap) as capture:
        wait_for(lambda: len(read_topic(bootstrap, "tidelog.public.items")) >= 3, "3 records")
    assert capture.stats.skipped_records == 0  # a clean stop confirmed all it had written
    records = read_topic(bootstrap, "tidelog.public.items")
    assert [(r.key["id"], r.value["op"]) for r in records] == [(1, "c"), (2, "c"), (1, "u")]
    assert fold(records) == table_rows(pg_dsn, "items")


def test_added_and_dropped_columns_show_in_the_events_schema(pg_dsn, bootstrap):
    execute(pg_dsn, "CREATE TABLE items (id int PRIMARY KEY, name text)")
    with CaptureThread(dsn=pg_dsn, tables=["items"], bootstrap=bootstrap) as capture:
        execute(pg_dsn, "INSERT INTO items VALUES (1, 'a')")
        execute(
            pg_dsn,
            "ALTER TABLE items ADD COLUMN colour text",
            "INSERT INTO items VALUES (2, 'b', 'red')",
        )
        execute(
            pg_dsn,
            "ALTER TABLE items DROP COLUMN name",
            "UPDATE items SET colour = 'blue' WHERE id = 1",
        )
        wait_for(lambda: len(read_topic(bootstrap, "tidelog.public.items")) >= 3, "3 records")
    records = read_topic(bootstrap, "tidelog.public.items")

    def columns(record):
        return [f["field"] for f in record.schema["fields"][1]["fields"]]

    assert [columns(r) for r in records] == [
        ["id", "name"],
        ["id", "name", "colour"],
        ["id", "colour"],
    ]
    assert [r.value["after"] for r in records] == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b", "colour": "red"},
        {"id": 1, "colour": "blue"},
    ]
    assert len(capture.stats.schema_changes) == 2


def test_large_values_an_update_left_alone(pg_dsn, bootstrap):
    """PostgreSQL does not resend a TOASTed value an update did not touch: Debezium's
    placeholder stands in, unless REPLICA IDENTITY FULL gives the old row to take it from."""
    big = "".join(f"{i:08x}" for i in range(2000))  # 16 kB that does not compress: TOASTed
    execute(
        pg_dsn,
        "CREATE TABLE docs (id int PRIMARY KEY, n int, body text)",
        "CREATE TABLE full_docs (id int PRIMARY KEY, n int, body text)",
        "ALTER TABLE full_docs REPLICA IDENTITY FULL",
        "ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL",
        "ALTER TABLE full_docs ALTER COLUMN body SET STORAGE EXTERNAL",
    )
    with CaptureThread(dsn=pg_dsn, tables=["docs", "full_docs"], bootstrap=bootstrap):
        for table in ("docs", "full_docs"):
            execute(
                pg_dsn,
                f"INSERT INTO {table} VALUES (1, 0, '{big}')",
                f"UPDATE {table} SET n = 1 WHERE id = 1",
            )
        wait_for(lambda: len(read_topic(bootstrap, "tidelog.public.full_docs")) >= 2, "2")
        wait_for(lambda: len(read_topic(bootstrap, "tidelog.public.docs")) >= 2, "2")
    plain = read_topic(bootstrap, "tidelog.public.docs")[1].value["after"]
    assert plain == {"id": 1, "n": 1, "body": "__debezium_unavailable_value"}
    full = read_topic(bootstrap, "tidelog.public.full_docs")[1].value
    assert full["after"] == {"id": 1, "n": 1, "body": big}
    assert full["before"] == {"id": 1, "n": 0, "body": big}


def test_a_table_without_a_primary_key_is_refused_with_the_reason(pg_dsn, bootstrap):
    execute(
        pg_dsn,
        "CREATE TABLE logs (line text)",
        "CREATE TABLE quiet (id int PRIMARY KEY)",
        "ALTER TABLE quiet REPLICA IDENTITY NOTHING",
    )
    with pytest.raises(CaptureError, match=r"public\.logs has no primary key"):
        PostgresCapture(dsn=pg_dsn, tables=["logs"], bootstrap=bootstrap).setup()

    result = run_capture(pg_dsn, "logs,quiet,missing", bootstrap)
    assert result.returncode == 2
    assert "table public.logs has no primary key" in result.stderr
    assert "ALTER TABLE public.logs ADD PRIMARY KEY" in result.stderr
    assert "public.quiet has REPLICA IDENTITY NOTHING" in result.stderr
    assert "table public.missing does not exist" in result.stderr
    assert "Traceback" not in result.stderr
    # nothing was created: no slot, no publication
    conn = psycopg2.connect(pg_dsn)
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_replication_slots WHERE database = current_database()")
        assert cur.fetchone()[0] == 0
        cur.execute("SELECT count(*) FROM pg_publication")
        assert cur.fetchone()[0] == 0
    conn.close()
