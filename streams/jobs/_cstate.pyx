# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Tidelog's compiled changelog loop of a store over the in-memory backend
(``streams.jobs.state.Store.take_changes``; ``state._take_memory`` is the reference and the
fallback, tests/jobs/test_cstate.py holds the two to the same answers).

One function, ``take_memory(dirty, d, objects, missing, out, taken, enc_key, enc_value, dumps,
default, options)``: ``_take_memory``'s loop, each key written as ``enc_key`` (``state.encode``,
``serde.compact_json_bytes()``) and each value as ``enc_value`` (``state.encode_value``,
``exact=False``) would: orjson's bytes (``dumps(obj, default, options)``) copied to a bytes of
their size where those functions keep them — a key's when ASCII without DEL, ``null`` or a
digit followed by ``.``, ``e`` or ``E``; a value's when without ``null`` — and in any other
case (orjson's error included) what the function itself returns or raises.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_Append
from cpython.ref cimport PyObject

cdef extern from "Python.h":
    bint PyBytes_CheckExact(object)


from streams.jobs._cjsontext cimport _json_exact


cdef inline bint _no_null(const unsigned char* p, Py_ssize_t n):
    cdef Py_ssize_t i
    for i in range(n - 3):
        if p[i] == 110 and p[i + 1] == 117 and p[i + 2] == 108 and p[i + 3] == 108:
            return False
    return True


cdef inline object _encode(object obj, bint exact, object enc, object dumps, object default,
                           object options):
    cdef object data
    cdef const unsigned char* p
    cdef Py_ssize_t n
    try:
        data = dumps(obj, default, options)
    except Exception:
        return enc(obj)  # the function's own way: json's bytes, or its error
    if not PyBytes_CheckExact(data):
        return enc(obj)
    p = <const unsigned char*>PyBytes_AS_STRING(data)
    n = PyBytes_GET_SIZE(data)
    if (_json_exact(p, n) if exact else _no_null(p, n)):
        return PyBytes_FromStringAndSize(<char*>p, n)  # a copy of its size (see serde)
    return enc(obj)


def take_memory(dict dirty, dict d, dict objects, object missing, list out, list taken,
                object enc_key, object enc_value, object dumps, object default, object options):
    cdef object key, value, k, v
    cdef PyObject* old
    for key, value in dirty.items():
        k = _encode(key, True, enc_key, dumps, default, options)
        if value is missing:
            d.pop(k, None)
            PyList_Append(out, (k, None))
            PyList_Append(taken, (key, None))
            objects.pop(key, None)
        else:
            v = _encode(value, False, enc_value, dumps, default, options)
            old = PyDict_GetItem(d, k)
            if old == NULL or <object>old != v:
                PyDict_SetItem(d, k, v)
                PyList_Append(out, (k, v))
                PyList_Append(taken, (key, value))
            PyDict_SetItem(objects, key, value)
