"""The pgoutput decoder: hand-built messages of every kind, malformed ones refused with a reason,
and the binary changes of a real PostgreSQL slot (pg_logical_slot_peek_binary_changes)."""

from __future__ import annotations

import struct

import psycopg2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.capture import pgoutput
from streams.capture.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Column,
    Commit,
    Delete,
    Insert,
    Message,
    Origin,
    PgOutputError,
    Relation,
    Truncate,
    Type,
    Update,
    decode,
)

TS_2024 = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z in microseconds since the Unix epoch


def s(text: str) -> bytes:
    return text.encode() + b"\0"


def tuple_data(values) -> bytes:
    out = struct.pack(">h", len(values))
    for v in values:
        if v is None:
            out += b"n"
        elif v is UNCHANGED_TOAST:
            out += b"u"
        else:
            out += b"t" + struct.pack(">i", len(v)) + v
    return out


def pg_ts(unix_us: int) -> bytes:
    return struct.pack(">q", unix_us - pgoutput.PG_EPOCH_UNIX_US)


def test_begin_and_commit():
    begin = b"B" + struct.pack(">Q", 0x16B374D848) + pg_ts(TS_2024) + struct.pack(">I", 4242)
    assert decode(begin) == Begin(final_lsn=0x16B374D848, commit_ts_us=TS_2024, xid=4242)
    commit = b"C\0" + struct.pack(">QQ", 100, 180) + pg_ts(TS_2024 + 5)
    assert decode(commit) == Commit(0, 100, 180, TS_2024 + 5)


def test_relation_with_key_flags():
    msg = (
        b"R" + struct.pack(">I", 16384) + s("public") + s("items") + b"d" + struct.pack(">h", 2)
        + b"\x01" + s("id") + struct.pack(">Ii", 23, -1)
        + b"\x00" + s("name") + struct.pack(">Ii", 1043, 68)
    )  # fmt: skip
    assert decode(msg) == Relation(
        16384,
        "public",
        "items",
        "d",
        (Column("id", 23, -1, True), Column("name", 1043, 68, False)),
    )


def test_insert_update_delete_tuples():
    rel = struct.pack(">I", 7)
    assert decode(b"I" + rel + b"N" + tuple_data([b"1", None, UNCHANGED_TOAST])) == Insert(
        7, (b"1", None, UNCHANGED_TOAST)
    )
    plain = decode(b"U" + rel + b"N" + tuple_data([b"1", b"x"]))
    assert plain == Update(7, None, None, (b"1", b"x"))
    keyed = decode(b"U" + rel + b"K" + tuple_data([b"1", None]) + b"N" + tuple_data([b"2", b"x"]))
    assert keyed == Update(7, (b"1", None), "K", (b"2", b"x"))
    full = decode(b"U" + rel + b"O" + tuple_data([b"1", b"a"]) + b"N" + tuple_data([b"1", b"b"]))
    assert full.old_kind == "O" and full.old == (b"1", b"a")
    assert decode(b"D" + rel + b"K" + tuple_data([b"1", None])) == Delete(7, (b"1", None), "K")


def test_truncate_type_origin_message():
    msg = b"T" + struct.pack(">i", 2) + b"\x03" + struct.pack(">II", 10, 11)
    assert decode(msg) == Truncate((10, 11), cascade=True, restart_identity=True)
    assert decode(b"Y" + struct.pack(">I", 600) + s("public") + s("mood")) == Type(
        600, "public", "mood"
    )
    assert decode(b"O" + struct.pack(">Q", 99) + s("node_a")) == Origin(99, "node_a")
    msg = b"M\x01" + struct.pack(">Q", 5) + s("wm") + struct.pack(">i", 3) + b"abc"
    assert decode(msg) == Message(True, 5, "wm", b"abc")


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", "empty message"),
        (b"Z", "unknown pgoutput message kind 'Z'"),
        (b"B\0\0", "message truncated"),
        (b"I" + struct.pack(">I", 1) + b"X", "expected a new tuple"),
        (b"D" + struct.pack(">I", 1) + b"N" + tuple_data([b"1"]), "expected an old tuple"),
        (
            b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">h", 1) + b"q",
            "unknown tuple column kind",
        ),
        (b"Y" + struct.pack(">I", 1) + b"public", "unterminated string"),
        (b"I" + struct.pack(">I", 1) + b"N" + tuple_data([b"1"]) + b"!", "1 bytes left over"),
    ],
)
def test_malformed_messages_are_refused_with_a_reason(payload, reason):
    with pytest.raises(PgOutputError, match=reason):
        decode(payload)


values = st.lists(
    st.one_of(st.none(), st.just(UNCHANGED_TOAST), st.binary(max_size=40)), max_size=8
)


@given(values, values)
def test_any_tuples_decode_to_what_was_encoded(old, new):
    msg = b"U" + struct.pack(">I", 3) + b"O" + tuple_data(old) + b"N" + tuple_data(new)
    assert decode(msg) == Update(3, tuple(old), "O", tuple(new))


def test_lsn_spelling():
    assert pgoutput.format_lsn(0x16B374D848) == "16/B374D848"
    assert pgoutput.parse_lsn("16/B374D848") == 0x16B374D848
    with pytest.raises(ValueError, match="not an LSN"):
        pgoutput.parse_lsn("16")


def test_a_real_slots_binary_changes_decode(pg_dsn):
    """Every message PostgreSQL's pgoutput writes for inserts, updates (with a key change),
    deletes, a truncate, an added column and a logical message decodes, in order."""
    conn = psycopg2.connect(pg_dsn)
    conn.autocommit = True
    cur = conn.cursor()
    slot = "decoder_" + pg_dsn.split("dbname=")[1]
    cur.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    cur.execute("CREATE PUBLICATION decoder_pub FOR TABLE t")
    cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    cur.execute("INSERT INTO t VALUES (1, 'a'), (2, NULL)")
    cur.execute("UPDATE t SET v = 'b' WHERE id = 1")
    cur.execute("UPDATE t SET id = 3 WHERE id = 2")
    cur.execute("DELETE FROM t WHERE id = 1")
    cur.execute("ALTER TABLE t ADD COLUMN w int")
    cur.execute("INSERT INTO t VALUES (4, 'd', 9)")
    cur.execute("SELECT pg_logical_emit_message(true, 'wm', 'low')")
    cur.execute("TRUNCATE t")
    cur.execute(
        "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
        "'proto_version', '1', 'publication_names', 'decoder_pub', 'messages', 'true')",
        (slot,),
    )
    messages = [decode(bytes(row[0])) for row in cur.fetchall()]
    cur.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    conn.close()

    kinds = [type(m).__name__ for m in messages if not isinstance(m, Begin | Commit)]
    assert kinds == [
        "Relation", "Insert", "Insert", "Update", "Update", "Delete",
        "Relation", "Insert", "Message", "Relation", "Truncate",
    ]  # fmt: skip
    changes = [m for m in messages if isinstance(m, Insert | Update | Delete)]
    assert changes[0].new == (b"1", b"a") and changes[1].new == (b"2", None)
    assert changes[2] == Update(changes[2].relation_id, None, None, (b"1", b"b"))
    assert changes[3].old_kind == "K" and changes[3].old == (b"2", None)
    assert changes[4].old == (b"1", None)
    relations = [m for m in messages if isinstance(m, Relation)]
    assert [[c.name for c in r.columns] for r in relations] == [
        ["id", "v"],
        ["id", "v", "w"],
        ["id", "v", "w"],  # sent again before the truncate (a new relfilenode)
    ]
    assert [c.is_key for c in relations[0].columns] == [True, False]
    begins = [m for m in messages if isinstance(m, Begin)]
    assert [b.final_lsn for b in begins] == sorted(b.final_lsn for b in begins)
