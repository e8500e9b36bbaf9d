"""Serialisers: how a job turns record keys and values into objects and back.

A serialiser is anything with ``serialize(obj) -> bytes | None`` and
``deserialize(data: bytes | None) -> object`` (the ``Serde`` Protocol), so users can bring their
own (Avro, Protobuf, msgpack ...) without subclassing. ``None`` is kept as ``None`` both ways:
it is a tombstone on a compacted topic.

Bad input gets a clear error that names the topic, partition and offset (``SerdeError``); the
runner does not skip it silently.
"""

from __future__ import annotations

import json as _json
import re
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import orjson

from streams.errors import TidelogError
from streams.jobs.conditions import field  # noqa: F401 - re-exported (``streams.jobs.field``)


class SerdeError(TidelogError):
    code = "serde_error"


@runtime_checkable
class Serde(Protocol):
    def serialize(self, obj: object) -> bytes | None: ...

    def deserialize(self, data: bytes | None) -> object: ...


class BytesSerde:
    """Bytes as they are."""

    name = "bytes"

    def serialize(self, obj: object) -> bytes | None:
        if obj is None or isinstance(obj, bytes):
            return obj
        if isinstance(obj, (bytearray, memoryview)):
            return bytes(obj)
        raise SerdeError(f"the bytes serialiser got a {type(obj).__name__}, not bytes")

    def deserialize(self, data: bytes | None) -> object:
        return data


class TextSerde:
    """UTF-8 text."""

    name = "text"

    def serialize(self, obj: object) -> bytes | None:
        if obj is None:
            return None
        if not isinstance(obj, str):
            raise SerdeError(f"the text serialiser got a {type(obj).__name__}, not str")
        return obj.encode()

    def deserialize(self, data: bytes | None) -> object:
        return None if data is None else bytes(data).decode()


def compact_json_encoder() -> Callable[[object], str]:
    """``json.dumps(obj, separators=(",", ":"))`` — the same text, the same errors for what
    JSON cannot hold — at about a third of its cost per call: ``JSONEncoder.encode`` builds
    a new C encoder for every call; this builds one, once. Unlike ``json.dumps`` it does not
    look for circular references: a circular value fails with ``RecursionError``, as a value
    nested too deeply does, instead of ``ValueError``."""
    from json import encoder as _enc

    make = getattr(_enc, "c_make_encoder", None)
    if make is None:  # no C accelerator: the json module's own path
        return _json.JSONEncoder(separators=(",", ":")).encode
    c_encode = make(
        None,  # markers: no circular reference check
        _json.JSONEncoder().default,  # what an unknown type raises
        _enc.encode_basestring_ascii,
        None,  # indent
        ":",
        ",",
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan, as json.dumps
    )
    join = "".join

    def encode(obj: object) -> str:
        return join(c_encode(obj, 0))

    return encode


def _not_json(obj: object) -> object:
    raise TypeError(f"{type(obj).__name__} is left to the json module")


# What orjson writes otherwise than json.dumps(ensure_ascii=True): non-ASCII text and DEL (json
# escapes them), NaN and infinities (orjson writes null) and floats (at times another shortest
# form: 1e16 for 1e+16). Such a value, or one with a bare null, goes to the json encoder.
_FLOAT = re.compile(rb"[0-9][.eE]").search  # after a quick "no . e E at all"
_ORJSON_STRICT = (
    orjson.OPT_PASSTHROUGH_SUBCLASS  # str/int/dict subclasses: json's conversion decides
    | orjson.OPT_PASSTHROUGH_DATACLASS  # what json cannot write goes to _not_json ...
    | orjson.OPT_PASSTHROUGH_DATETIME  # ... and then to json, which raises its own error
)


def compact_json_bytes(*, exact: bool = True) -> Callable[[object], bytes]:
    """``json.dumps(obj, separators=(",", ":")).encode()`` written by orjson (several times
    faster) where that gives the same bytes — ASCII, no float, no null — and by the json
    encoder above (``compact_json_encoder``) otherwise, with its result or error. A value
    orjson refuses (non-string dict keys, integers past 64 bits, subclasses, dataclasses,
    datetimes, nesting past 254 levels, lone surrogates) goes to json too. Two kinds of value
    json refuses and orjson writes: ``enum.Enum`` members (their value), ``uuid.UUID`` (text).

    ``exact=False`` (a store's changelog, which only ``json.loads`` reads): orjson's bytes
    whenever ``json.loads`` reads them back as it reads json's, i.e. also with floats (the
    shortest form that round-trips) and non-ASCII text as UTF-8; not with NaN or infinities
    (orjson writes null), so a null still sends the value to json.

    orjson's bytes are returned as a copy of their size (``data.decode().encode()``, the same
    bytes): orjson writes into a buffer of about 1 KiB and shrinks it, so each result it
    returns holds a block of the C heap of its own, and results kept alive (a store's
    backend, buffered outputs and changelog records) grow the heap by some 1 KiB each, at a
    page fault every few: keeping 5,000 window rows' keys and values cost 33 ms that way, 4 ms
    copied (about 0.1 us more per value that is not kept)."""
    text = compact_json_encoder()
    dumps, strict, no_float = orjson.dumps, _ORJSON_STRICT, _FLOAT

    def encode_exact(obj: object) -> bytes:
        try:
            data = dumps(obj, _not_json, strict)
        except TypeError:
            return text(obj).encode()
        # the bytes tested by value (127: DEL, 110: n, 46: ., 101: e, 69: E): ``int in bytes``
        # is a memchr, where CPython 3.11 tries a bytes needle as an int first and clears the
        # error (some 0.5 us a test)
        if (
            data.isascii()
            and 127 not in data
            and (110 not in data or data.find(b"null") < 0)
            and ((46 not in data and 101 not in data and 69 not in data) or no_float(data) is None)
        ):
            return data.decode().encode()  # a copy of its size (see above)
        return text(obj).encode()

    def encode_loadable(obj: object) -> bytes:
        try:
            data = dumps(obj, _not_json, strict)
        except TypeError:
            return text(obj).encode()
        if 110 not in data or data.find(b"null") < 0:  # no null (110: n; see above)
            return data.decode().encode()  # a copy of its size (see above)
        return text(obj).encode()

    return encode_exact if exact else encode_loadable


# The grammar of json_canonical (and of its compiled twin, streams/jobs/_cjsoncanon.pxd)
_CANON_DEPTH = 64  # containers open at once
_CANON_KEYS = 32  # keys of one object
_CANON_STRING = re.compile(rb'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\nrtbf])*"').match
_CANON_INT = re.compile(rb"0|-?[1-9][0-9]{0,17}").match  # no -0; a digit after it: rejected


def json_canonical(data: bytes) -> bool:
    """Whether `data` are *canonical* JSON: the bytes Tidelog's JSON serialiser writes for the
    value they decode to, ``JSON.serialize(JSON.deserialize(data)) == data`` — so a job may
    pass them on undecoded (a join's ``[left, right]`` is then ``b"[" + L + b"," + R +
    b"]"``). Conservative: False for some canonical bytes (the caller decodes and re-encodes,
    only slower), never True for bytes that are not, or not JSON at all.

    It accepts one value without any whitespace: an object (no key repeated: ``json.loads``
    keeps the last value at the first key's place; at most 32 keys), an array, a string
    (bytes 0x20..0x7e but ``"`` and ``\\``, and the escapes json.dumps writes: ``\\"``
    ``\\\\`` ``\\n`` ``\\r`` ``\\t`` ``\\b`` ``\\f``; so each character has one spelling and
    equal keys are equal bytes), an integer (``-?(0|[1-9][0-9]*)``, at most 18 digits: no
    ``-0``, no fraction or exponent), ``true``, ``false``, ``null`` (but not as the whole
    input: ``JSON.serialize(None)`` is None, a tombstone); at most 64 containers deep.
    The pure reference of the compiled ``_crecords.json_canonical_bytes``
    (``canonical_json`` is the one built, else this)."""
    if data == b"null":
        return False
    return _canon_value(data, 0, 0) == len(data)


def _canon_value(data: bytes, i: int, depth: int) -> int:
    """The end of the canonical value at ``data[i]`` inside `depth` open containers, or -1."""
    c = data[i : i + 1]
    if c == b"[" or c == b"{":
        if depth == _CANON_DEPTH:
            return -1
        close = b"]" if c == b"[" else b"}"
        i += 1
        if data[i : i + 1] == close:
            return i + 1
        keys: set[bytes] = set()
        while True:
            if c == b"{":  # a key, then ':'
                m = _CANON_STRING(data, i)
                if m is None or m.group() in keys or len(keys) == _CANON_KEYS:
                    return -1
                keys.add(m.group())
                i = m.end()
                if data[i : i + 1] != b":":
                    return -1
                i += 1
            i = _canon_value(data, i, depth + 1)
            if i < 0:
                return -1
            if data[i : i + 1] == close:
                return i + 1
            if data[i : i + 1] != b",":
                return -1
            i += 1
    for word in (b"true", b"false", b"null"):
        if data.startswith(word, i):
            return i + len(word)
    m = _CANON_STRING(data, i) or _CANON_INT(data, i)
    return -1 if m is None else m.end()


# One encoder and decoder for every record: ``json.dumps(obj, separators=...)`` would build a
# new encoder per call, and ``json.loads(bytes)`` sniffs the encoding of each record first.
_encode = compact_json_bytes()
_decode = _json.JSONDecoder().decode
# orjson (pinned, 3.13) reads JSON several times faster than the json module, with the same
# result, except: integers beyond 64 bits (orjson returns a float), and what it rejects and
# json accepts (NaN, Infinity, 1e400, lone surrogate escapes). A run of 19 digits sends a
# record to the json module, as does any orjson error, so the result is json.loads's.
_orjson_loads, _OrjsonError = orjson.loads, orjson.JSONDecodeError
_LONG_DIGITS = re.compile(rb"[0-9]{19}").search


class JsonSerde:
    """JSON (UTF-8, compact, keys in insertion order). Tuples come back as lists. Reading
    gives what ``json.loads`` gives (orjson first, see ``_LONG_DIGITS``)."""

    name = "json"

    def serialize(self, obj: object) -> bytes | None:
        if obj is None:
            return None
        try:
            return _encode(obj)
        except (TypeError, ValueError, RecursionError) as exc:
            raise SerdeError(f"cannot write as JSON: {exc}") from exc

    def deserialize(self, data: bytes | None) -> object:
        if data is None:
            return None
        try:
            if _LONG_DIGITS(data) is None:  # type: ignore[arg-type]
                return _orjson_loads(data)  # type: ignore[arg-type]
        except (_OrjsonError, TypeError):
            pass  # json decides (TypeError: not bytes-like)
        try:
            return _decode(data.decode())  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass  # not bytes, not UTF-8 (UTF-16/32, a BOM) or not JSON: json.loads decides
        try:
            return _json.loads(data)
        except ValueError as exc:
            raise SerdeError(f"not JSON: {exc}") from exc


class KeySerde:
    """The default key serialiser of repartition topics: a string key is written as its UTF-8
    bytes — the bytes a ``TEXT``-keyed topic holds, so a stream re-keyed by customer id lands
    in the same partition as that customer's row of a text-keyed table (co-partitioning needs
    equal key bytes) — and any other key as a 0 byte followed by its JSON."""

    name = "key"

    def serialize(self, obj: object) -> bytes | None:
        if obj is None:
            return None
        if isinstance(obj, str):
            if obj.startswith("\x00"):
                return b"\x00" + JSON.serialize(obj)
            return obj.encode()
        return b"\x00" + JSON.serialize(obj)

    def deserialize(self, data: bytes | None) -> object:
        if data is None:
            return None
        data = bytes(data)
        if data[:1] == b"\x00":
            return JSON.deserialize(data[1:])
        return data.decode()


def json_text(obj: object) -> bytes:
    """The JSON text ``JSON.serialize`` writes for `obj` inside a list (``None``: ``null``, not
    a tombstone): a direct interval join keeps its values as such text (``_cjoin``), so that
    its pairs are ``b"[" + left + b"," + right + b"]"``, the bytes ``JSON.serialize([l, r])``
    writes. ``JSON.deserialize`` reads the value back."""
    try:
        return _encode(obj)
    except (TypeError, ValueError, RecursionError) as exc:
        raise SerdeError(f"cannot write as JSON: {exc}") from exc


BYTES = BytesSerde()
TEXT = TextSerde()
JSON = JsonSerde()
KEY = KeySerde()

try:  # the compiled reading of input records, built in place by `make native`
    from streams.jobs import _crecords
except ImportError:  # not built: the runner's pure loop decodes every record
    _crecords = None
# the compiled canonical-JSON test when built, else the pure one (tests/jobs/test_json_canonical.py)
canonical_json = getattr(_crecords, "json_canonical_bytes", json_canonical)
_LAYOUTS: dict[type, tuple[int, int, int, int] | None] = {}


def decode_records(
    recs: list,
    key: Serde,
    value: Serde,
    extract: Callable[[object], int] | None,
    raw: bool = False,
) -> list | None:
    """A batch read from a log — records of one ``NamedTuple`` type with ``key``, ``value``,
    ``timestamp_ms`` and ``offset`` fields (``Record``, ``LogRecord``) — as the runner's
    ``(key, value, ts, offset)`` tuples, by the compiled loop (``_crecords.pyx``), which takes
    text or bytes keys and JSON values: the same tuples as deserialising each record (the
    timestamp ``extract(value)``, or the record's for a tombstone or without `extract`). None
    when it does not take the batch (other serialisers, not built, a record it defers on):
    then decode it record by record. `raw`: as ``batch_decoder``'s."""
    if _crecords is None or not recs or value is not JSON or (key is not TEXT and key is not BYTES):
        return None
    rtype = type(recs[0])
    layout = _LAYOUTS.get(rtype, ())
    if layout == ():
        fields = getattr(rtype, "_fields", ())
        names = ("key", "value", "timestamp_ms", "offset")
        ok = issubclass(rtype, tuple) and all(n in fields for n in names)
        layout = _LAYOUTS[rtype] = tuple(fields.index(n) for n in names) if ok else None
    if layout is None:
        return None
    out: list = []
    raw = raw and extract is None
    if _crecords.decode(recs, rtype, *layout, key is TEXT, JSON.deserialize, extract, out, raw):
        return out
    return None


def batch_decoder(
    key: Serde, value: Serde, extract: Callable[[object], int] | None, raw: bool = False
) -> Callable[[object, object, int, int, list], int] | None:
    """The compiled reading of a log batch's records straight into the runner's ``(key,
    value, ts, offset)`` tuples (``_crecords.decode_body``) for text or bytes keys and JSON
    values, else None (other serialisers, not built): ``decode(body, header, skip_below, end,
    out)`` appends the tuples of the records of the batch (`header`, a ``BatchHeader``; `body`,
    its uncompressed records section) with offsets in [`skip_below`, `end`) to `out` — the
    tuples ``decode_records`` makes of the records the log's decoder reads — and returns 0
    (batch done), 1 (`end` reached) or -1 (it defers: read that batch the usual way).
    `raw` (no `extract`): a value whose bytes are canonical JSON (``canonical_json``) stays
    those bytes, unread (a direct interval join's input: ``task.Task.raw_json_inputs``)."""
    native = getattr(_crecords, "decode_body", None)  # (None: not built, or built before it)
    if native is None or value is not JSON or (key is not TEXT and key is not BYTES):
        return None
    text_keys, json_value = key is TEXT, JSON.deserialize
    raw = raw and extract is None

    def decode(body, h, skip_below: int, end: int, out: list) -> int:
        return native(
            body,
            h.base_offset,
            h.base_timestamp,
            bool(h.attributes & 0x08),  # LogAppendTime: every record has the max timestamp
            h.max_timestamp,
            h.count,
            skip_below,
            end,
            text_keys,
            json_value,
            extract,
            out,
            True,
            raw,
        )

    return decode


def merge_two(a: list, b: list, ia: int, ib: int, out: list) -> tuple[int, int]:
    """The runner's two-way merge of two inputs' batches (``Runner._merge``): appends ``(ia,
    a[i])`` and ``(ib, b[j])`` to `out` in timestamp order (a record's index 2; of equal
    timestamps, `a`'s first) while both have records left; returns ``(i, j)``, how many of
    each it took. The pure reference of the compiled ``_crecords.merge2`` (``merge``)."""
    i = j = 0
    na, nb = len(a), len(b)
    append = out.append
    while i < na and j < nb:
        if b[j][2] < a[i][2]:
            append((ib, b[j]))
            j += 1
        else:
            append((ia, a[i]))
            i += 1
    return i, j


def tag_rest(recs: list, start: int, index: int, out: list) -> None:
    """Appends ``(index, r)`` for the records of `recs` from `start` (a merge's rest once the
    other input ran out). The pure reference of the compiled ``_crecords.tag``."""
    out.extend([(index, r) for r in recs[start:]])


# the compiled merge when built, else the pure one (tests/jobs/test_crecords.py: the same)
# (a module built from an older _crecords.pyx has no merge2: `make native` builds it again)
merge = getattr(_crecords, "merge2", merge_two)
tag = getattr(_crecords, "tag", tag_rest)


def records_encoder(
    key: Serde, value: Serde, serialized: bool = False
) -> Callable[[list, int, list], int] | None:
    """The compiled writing of a job's outputs (``_crecords.encode``) for text or bytes keys
    and JSON values, else None (other serialisers, not built): ``encode(recs, start, out)``
    appends outputs ``(key, value, ts, ...)`` of `recs` from index `start` to `out` as the
    records a runner buffers, ``(value bytes, key bytes, (), ts)`` — the same records as
    ``(value.serialize(v), key.serialize(k), (), ts)`` for each — and returns the index of the
    first record it did not write (``len(recs)``: all of them). The caller writes that one the
    pure way (which raises its error, if any) and calls again after it. `serialized`: the
    values are JSON's bytes already (``emit_many``'s "sink-serialized"), written as they are."""
    if _crecords is None or value is not JSON or (key is not TEXT and key is not BYTES):
        return None
    native, text_keys, json_value = _crecords.encode, key is TEXT, JSON.serialize

    def encode(recs: list, start: int, out: list) -> int:
        return native(
            recs, start, text_keys, json_value, _not_json, _ORJSON_STRICT, out, serialized
        )

    return encode


def serde_of(value: object) -> Serde:
    """A Serde, or one of the names "bytes", "text", "json"."""
    if isinstance(value, str):
        named = {"bytes": BYTES, "text": TEXT, "json": JSON}.get(value)
        if named is None:
            raise SerdeError(f"unknown serialiser {value!r}: use bytes, text, json or a Serde")
        return named
    if not isinstance(value, Serde):
        raise SerdeError(f"{value!r} is not a serialiser (needs serialize and deserialize)")
    return value


def __getattr__(name: str):
    """``Avro``, ``Protobuf`` and ``JsonSchema`` (`streams.schemas.serdes`), imported when
    first named: most jobs need neither fastavro nor protobuf."""
    if name in ("Avro", "Protobuf", "JsonSchema"):
        from streams.schemas import serdes

        return getattr(serdes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
