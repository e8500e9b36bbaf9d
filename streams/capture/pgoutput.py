"""A decoder of PostgreSQL's ``pgoutput`` logical replication messages (protocol version 1).

Each ``XLogData`` payload that the walsender sends for a ``pgoutput`` slot is one message, its
first byte the kind (PostgreSQL docs, "Logical Replication Message Formats"):

- ``R`` Relation: a table's id, namespace, name, replica identity and columns (name, type oid,
  typmod, part of the replica identity key or not). Sent before the first change of a table in a
  session and again after its definition changed (``ALTER TABLE``), so it is how a schema change
  reaches the stream.
- ``B`` Begin / ``C`` Commit: a transaction's bounds (commit LSN, end LSN, commit time, xid).
- ``I`` Insert / ``U`` Update / ``D`` Delete: a change with its tuple(s). An update carries the
  old tuple (``K``: key columns only, ``O``: the whole row) only when the key changed or the
  table has ``REPLICA IDENTITY FULL``; a delete always carries one of them.
- ``T`` Truncate, ``Y`` Type, ``O`` Origin and ``M`` Message are decoded too.

Column values are kept as the text (``t``) or binary (``b``) bytes the server sent, ``None`` for
SQL NULL and `UNCHANGED_TOAST` for a large value the update did not touch (``u``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# PostgreSQL timestamps count microseconds from 2000-01-01 00:00 UTC
PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
PG_EPOCH_UNIX_US = int((PG_EPOCH - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1))


class PgOutputError(ValueError):
    """A message that is not valid ``pgoutput`` (truncated, unknown kind or tuple marker)."""


class _UnchangedToast:
    """The marker of a TOASTed value an update left as it was (the server does not resend it)."""

    _instance: _UnchangedToast | None = None

    def __new__(cls) -> _UnchangedToast:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST = _UnchangedToast()

Value = bytes | None | _UnchangedToast


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    is_key: bool  # part of the replica identity key


@dataclass(frozen=True)
class Relation:
    relation_id: int
    namespace: str
    name: str
    replica_identity: str  # d default (primary key), n nothing, f full, i index
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Begin:
    final_lsn: int  # the LSN of the commit record
    commit_ts_us: int  # microseconds since the Unix epoch
    xid: int


@dataclass(frozen=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int  # the LSN just past the commit record: what a consumer confirms
    commit_ts_us: int


@dataclass(frozen=True)
class Insert:
    relation_id: int
    new: tuple[Value, ...]


@dataclass(frozen=True)
class Update:
    relation_id: int
    old: tuple[Value, ...] | None
    old_kind: str | None  # "K" key columns only, "O" the whole old row, None not sent
    new: tuple[Value, ...]


@dataclass(frozen=True)
class Delete:
    relation_id: int
    old: tuple[Value, ...]
    old_kind: str  # "K" or "O"


@dataclass(frozen=True)
class Truncate:
    relation_ids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True)
class Type:
    type_oid: int
    namespace: str
    name: str


@dataclass(frozen=True)
class Origin:
    lsn: int
    name: str


@dataclass(frozen=True)
class Message:
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


PgOutputMessage = (
    Relation | Begin | Commit | Insert | Update | Delete | Truncate | Type | Origin | Message
)


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.buf):
            raise PgOutputError(
                f"message truncated: wanted {n} bytes at offset {self.pos}, "
                f"{len(self.buf)} bytes in all"
            )
        out = self.buf[self.pos : end]
        self.pos = end
        return out

    def byte(self) -> str:
        return chr(self._take(1)[0])

    def int8(self) -> int:
        return self._take(1)[0]

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def uint32(self) -> int:
        return struct.unpack(">I", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def uint64(self) -> int:
        return struct.unpack(">Q", self._take(8))[0]

    def string(self) -> str:
        end = self.buf.find(b"\0", self.pos)
        if end < 0:
            raise PgOutputError(f"unterminated string at offset {self.pos}")
        out = self.buf[self.pos : end].decode()
        self.pos = end + 1
        return out

    def timestamp_us(self) -> int:
        return self.int64() + PG_EPOCH_UNIX_US

    def tuple(self) -> tuple[Value, ...]:
        # the hottest step of a capture (every row of every change): one tight loop over the
        # buffer, no method call per field
        buf, pos, size = self.buf, self.pos, len(self.buf)
        if pos + 2 > size:
            self._take(2)  # raises: truncated
        (count,) = _INT16.unpack_from(buf, pos)
        pos += 2
        values: list[Value] = []
        append = values.append
        for _ in range(count):
            if pos >= size:
                self.pos = pos
                self._take(1)  # raises: truncated
            kind = buf[pos]
            pos += 1
            if kind == 0x74 or kind == 0x62:  # 't' text, 'b' binary
                if pos + 4 > size:
                    self.pos = pos
                    self._take(4)
                (length,) = _INT32.unpack_from(buf, pos)
                pos += 4
                end = pos + length
                if length < 0:
                    raise PgOutputError(f"negative column length {length} at offset {pos - 4}")
                if end > size:
                    self.pos = pos
                    self._take(length)  # raises: truncated
                append(buf[pos:end])
                pos = end
            elif kind == 0x6E:  # 'n' null
                append(None)
            elif kind == 0x75:  # 'u' unchanged TOAST
                append(UNCHANGED_TOAST)
            else:
                raise PgOutputError(f"unknown tuple column kind {chr(kind)!r} at offset {pos - 1}")
        self.pos = pos
        return tuple(values)

    def done(self, kind: str) -> None:
        if self.pos != len(self.buf):
            raise PgOutputError(
                f"{len(self.buf) - self.pos} bytes left over after a {kind!r} message"
            )


def decode(payload: bytes) -> PgOutputMessage:
    """One ``pgoutput`` message from the bytes of one ``XLogData`` payload."""
    if not payload:
        raise PgOutputError("empty message")
    r = _Reader(bytes(payload))
    buf = r.buf
    if buf[0] == 0x49 and len(buf) > 5 and buf[5] == 0x4E:  # 'I' ... 'N': most messages
        r.pos = 6
        insert = Insert(_UINT32.unpack_from(buf, 1)[0], r.tuple())
        r.done("I")
        return insert
    kind = r.byte()
    msg: PgOutputMessage
    if kind == "B":
        msg = Begin(final_lsn=r.uint64(), commit_ts_us=r.timestamp_us(), xid=r.uint32())
    elif kind == "C":
        msg = Commit(
            flags=r.int8(), commit_lsn=r.uint64(), end_lsn=r.uint64(), commit_ts_us=r.timestamp_us()
        )
    elif kind == "R":
        rel_id, namespace, name = r.uint32(), r.string(), r.string()
        identity = r.byte()
        columns = []
        for _ in range(r.int16()):
            flags = r.int8()
            columns.append(
                Column(
                    name=r.string(),
                    type_oid=r.uint32(),
                    type_modifier=r.int32(),
                    is_key=bool(flags & 1),
                )
            )
        msg = Relation(rel_id, namespace, name, identity, tuple(columns))
    elif kind == "I":
        rel_id = r.uint32()
        if (marker := r.byte()) != "N":
            raise PgOutputError(f"insert: expected a new tuple ('N'), got {marker!r}")
        msg = Insert(rel_id, r.tuple())
    elif kind == "U":
        rel_id = r.uint32()
        marker = r.byte()
        old, old_kind = None, None
        if marker in ("K", "O"):
            old, old_kind = r.tuple(), marker
            marker = r.byte()
        if marker != "N":
            raise PgOutputError(f"update: expected a new tuple ('N'), got {marker!r}")
        msg = Update(rel_id, old, old_kind, r.tuple())
    elif kind == "D":
        rel_id = r.uint32()
        marker = r.byte()
        if marker not in ("K", "O"):
            raise PgOutputError(f"delete: expected an old tuple ('K' or 'O'), got {marker!r}")
        msg = Delete(rel_id, r.tuple(), marker)
    elif kind == "T":
        count, options = r.int32(), r.int8()
        msg = Truncate(
            tuple(r.uint32() for _ in range(count)), bool(options & 1), bool(options & 2)
        )
    elif kind == "Y":
        msg = Type(r.uint32(), r.string(), r.string())
    elif kind == "O":
        msg = Origin(r.uint64(), r.string())
    elif kind == "M":
        flags, lsn, prefix = r.int8(), r.uint64(), r.string()
        msg = Message(bool(flags & 1), lsn, prefix, r._take(r.int32()))
    else:
        raise PgOutputError(f"unknown pgoutput message kind {kind!r}")
    r.done(kind)
    return msg


def format_lsn(lsn: int) -> str:
    """PostgreSQL's spelling of an LSN: ``16/B374D848``."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, _, low = text.partition("/")
    if not low:
        raise ValueError(f"not an LSN: {text!r} (expected e.g. 16/B374D848)")
    return (int(high, 16) << 32) | int(low, 16)
