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
