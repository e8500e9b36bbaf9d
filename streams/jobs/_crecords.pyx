# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Tidelog's compiled reading of a job's input records (``streams.jobs.serde.decode_records``,
whose pure loop in ``streams.jobs.runner`` stays the reference; tests/jobs/test_crecords.py
holds the two to the same answers).

One function, ``decode(recs, rtype, ki, vi, ti, oi, text_keys, json_value, extract, out)``:
for records that are all of type `rtype` (a tuple type; the key, value, timestamp and offset at
indexes `ki`, `vi`, `ti`, `oi`), appends ``(key, value, ts, offset)`` to `out`: the key as
UTF-8 text (`text_keys`) or as its bytes; the value read by `json_value` (``JSON.deserialize``),
through orjson directly when the bytes hold no run of 19 digits (``serde._LONG_DIGITS``: such
a record, and any that orjson rejects, is given to `json_value`, as that function would);
the timestamp ``extract(value)`` (a tombstone, or no `extract`: the record's). It returns
False, leaving `out` part-filled, at anything else — a record of another type, a key or value
that is not ``bytes``, an error of any kind — and the caller then decodes the batch the pure
way, which raises that record's error.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8

cdef extern from "Python.h":
    bint PyBytes_CheckExact(object)

import orjson

cdef object _orjson_loads = orjson.loads


cdef inline bint _long_digits(bytes data):
    """Whether `data` holds a run of 19 ASCII digits (``serde._LONG_DIGITS``)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t i, n = PyBytes_GET_SIZE(data), run = 0
    for i in range(n):
        if 48 <= p[i] <= 57:
            run += 1
            if run >= 19:
                return True
        else:
            run = 0
    return False


def decode(list recs, type rtype, Py_ssize_t ki, Py_ssize_t vi, Py_ssize_t ti, Py_ssize_t oi,
           bint text_keys, object json_value, object extract, list out):
    cdef Py_ssize_t i, n = PyList_GET_SIZE(recs)
    cdef object rec, k, v, key, value, ts
    try:
        for i in range(n):
            rec = <object>PyList_GET_ITEM(recs, i)
            if type(rec) is not rtype:
                return False
            k = <object>PyTuple_GET_ITEM(rec, ki)
            if k is None:
                key = None
            elif not PyBytes_CheckExact(k):
                return False
            elif text_keys:
                key = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k), NULL)
            else:
                key = k
            v = <object>PyTuple_GET_ITEM(rec, vi)
            if v is None:
                value = None
            elif not PyBytes_CheckExact(v):
                return False
            elif _long_digits(v):
                value = json_value(v)
            else:
                try:
                    value = _orjson_loads(v)
                except Exception:
                    value = json_value(v)  # json.loads decides, as JSON.deserialize does
            if extract is None or value is None:
                ts = <object>PyTuple_GET_ITEM(rec, ti)
            else:
                ts = extract(value)
            PyList_Append(out, (key, value, ts, <object>PyTuple_GET_ITEM(rec, oi)))
    except Exception:
        return False
    return True


# ------------------------------------------------------------------ writing outputs

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.tuple cimport PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8String

cdef extern from "Python.h":
    bint PyUnicode_CheckExact(object)
    bint PyTuple_Check(object)

cdef object _orjson_dumps = orjson.dumps
cdef tuple _NO_HEADERS = ()


cdef inline bint _json_exact(bytes data):
    """Whether orjson's `data` is the text ``json.dumps`` writes (``serde.compact_json_bytes``'s
    ``encode_exact`` test): ASCII without DEL, no ``null``, no digit followed by ``.``, ``e`` or
    ``E`` (a float, which json may write otherwise)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t i, n = PyBytes_GET_SIZE(data)
    cdef unsigned char c
    for i in range(n):
        c = p[i]
        if c >= 0x7f:
            return False
        if c == 110 and i + 3 < n and p[i + 1] == 117 and p[i + 2] == 108 and p[i + 3] == 108:
            return False  # null
        if (c == 46 or c == 101 or c == 69) and i > 0 and 48 <= p[i - 1] <= 57:
            return False  # [0-9][.eE]
    return True


def encode(list recs, Py_ssize_t start, bint text_keys, object json_value, object default,
           object options, list out):
    """Outputs ``(key, value, ts, ...)`` of `recs` from index `start` as ``(value bytes, key
    bytes, (), ts)`` appended to `out`, the key as UTF-8 text (`text_keys`: it must be a
    ``str``) or as its ``bytes``, the value as compact JSON: orjson's bytes (``dumps(value,
    default, options)``) where they are json's, else `json_value` (``JSON.serialize``)'s.
    Returns the index of the first record it does not take (``len(recs)`` when it took them
    all): a record that is not a tuple of three or more, a key of another type, a value whose
    `json_value` raised; the caller writes that one the pure way, which raises its error."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(recs)
    cdef object rec, k, v, key, value
    for i in range(start, n):
        rec = <object>PyList_GET_ITEM(recs, i)
        if not PyTuple_Check(rec) or PyTuple_GET_SIZE(rec) < 3:
            return i
        k = <object>PyTuple_GET_ITEM(rec, 0)
        if k is None:
            key = None
        elif text_keys:
            if not PyUnicode_CheckExact(k):
                return i
            try:
                key = PyUnicode_AsUTF8String(k)
            except Exception:
                return i  # a lone surrogate: str.encode raises
        elif PyBytes_CheckExact(k):
            key = k
        else:
            return i
        v = <object>PyTuple_GET_ITEM(rec, 1)
        if v is None:
            value = None
        else:
            try:
                value = _orjson_dumps(v, default, options)
                if _json_exact(value):
                    # a copy of its size: orjson's result keeps a ~1 KiB block of the C heap
                    # (``serde.compact_json_bytes``), and buffered outputs stay alive until the
                    # checkpoint: 100k of them grew the heap at a page fault every few (5x)
                    value = PyBytes_FromStringAndSize(PyBytes_AS_STRING(value),
                                                      PyBytes_GET_SIZE(value))
                else:
                    value = json_value(v)
            except Exception:
                try:
                    value = json_value(v)
                except Exception:
                    return i
        PyList_Append(out, (value, key, _NO_HEADERS, <object>PyTuple_GET_ITEM(rec, 2)))
    return n


# ------------------------------------------------------------------ cutting a checkpoint's runs

def runs(list recs, Py_ssize_t limit):
    """``streams.jobs.logs._runs_pure`` (the reference) compiled: `recs` (``(value, key,
    headers, ts)``) cut into runs in order, each of at most `limit` bytes of keys and values
    plus 16 per record (a run of one record may be more); a list that fits is returned whole,
    uncopied. None when a record is not a tuple of four or a key or value is neither None nor
    ``bytes``: the caller then cuts them the pure way."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(recs), start = 0, size = 0, m
    cdef object rec, k, v
    cdef list out = []
    for i in range(n):
        rec = <object>PyList_GET_ITEM(recs, i)
        if not PyTuple_Check(rec) or PyTuple_GET_SIZE(rec) != 4:
            return None
        v = <object>PyTuple_GET_ITEM(rec, 0)
        k = <object>PyTuple_GET_ITEM(rec, 1)
        m = 16
        if v is not None:
            if not PyBytes_CheckExact(v):
                return None
            m += PyBytes_GET_SIZE(v)
        if k is not None:
            if not PyBytes_CheckExact(k):
                return None
            m += PyBytes_GET_SIZE(k)
        if size + m > limit and i > start:
            out.append(recs[start:i])
            start = i
            size = 0
        size += m
    if start == 0:
        return [recs]
    out.append(recs[start:])
    return out
