# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Tidelog's compiled decoder of a record batch's records section (Kafka record format v2).

One function, ``decode_body``, with the contract of ``streams.log.records._decode_body`` (the
pure-Python decoder, which stays the reference): the records with offset >= `skip_below`, at
most `limit`, within `max_bytes` of encoded record bytes. It builds the ``Record`` tuples
itself, which is where the time of a sequential read went (aiokafka's compiled reader decodes
quickly but hands back objects that cost as much again to turn into records).

It is strict where the pure decoder is lenient or raises: on anything it does not expect — a
length or a field running past its record, a varint wider than 64 bits, an offset or a
timestamp outside int64, a negative count — it returns None and the caller decodes the batch
with the pure decoder, so a corrupt batch gets that decoder's records or its CorruptRecord.
A property test (tests/log/test_records_native.py) holds the two to the same answers.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_Append
from cpython.ref cimport PyObject, Py_INCREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint64_t
from libc.string cimport memcpy


cdef extern from "Python.h":
    ctypedef struct _TypeObject "PyTypeObject":
        PyObject* (*tp_alloc)(_TypeObject*, Py_ssize_t)
    void _tuple_set "PyTuple_SET_ITEM"(PyObject*, Py_ssize_t, PyObject*)
    void _decref "Py_DECREF"(PyObject*)
    void PyObject_GC_UnTrack(void*)


from streams.log._cvarint cimport _add, _varint


cdef int _append_record(list out, _TypeObject* record_type, object offset, object timestamp,
                        object key, object value, object headers) except -1:
    """A ``record_type`` (a tuple subclass with no fields of its own: a NamedTuple) of the five
    values appended to `out`: allocated and filled as CPython's tuple.__new__ does for a
    subclass, without the argument tuple that calling it would build first.

    The record is then untracked by the cycle collector, as CPython's collector untracks a
    plain tuple of atomic values the first time it sees one: ints, bytes, None and a tuple of
    (str, bytes-or-None) pairs cannot be part of a reference cycle. A read of 1000 records
    would otherwise set off a collection that walks them all, and again in each older
    generation they reach — most of a sequential read's time, measured."""
    cdef PyObject* r = record_type.tp_alloc(record_type, 5)
    if r == NULL:
        raise MemoryError()
    Py_INCREF(offset)
    _tuple_set(r, 0, <PyObject*>offset)
    Py_INCREF(timestamp)
    _tuple_set(r, 1, <PyObject*>timestamp)
    Py_INCREF(key)
    _tuple_set(r, 2, <PyObject*>key)
    Py_INCREF(value)
    _tuple_set(r, 3, <PyObject*>value)
    Py_INCREF(headers)
    _tuple_set(r, 4, <PyObject*>headers)
    PyObject_GC_UnTrack(r)
    try:
        PyList_Append(out, <object>r)
    finally:
        _decref(r)
    return 0


cdef object _bytes_or_none(const unsigned char* p, Py_ssize_t rec_end, Py_ssize_t* pos,
                           bint* ok):
    """A length-prefixed byte string (negative length: None) inside the record; sets ok[0] to
    False when it runs past the record."""
    cdef int64_t n
    cdef Py_ssize_t i
    if not _varint(p, rec_end, pos, &n):
        ok[0] = False
        return None
    if n < 0:
        return None
    i = pos[0]
    if n > rec_end - i:
        ok[0] = False
        return None
    pos[0] = i + <Py_ssize_t>n
    return PyBytes_FromStringAndSize(<char*>(p + i), <Py_ssize_t>n)


cdef object _headers(const unsigned char* p, Py_ssize_t rec_end, Py_ssize_t* pos, bint* ok):
    """The record's headers as a tuple of (str key, bytes-or-None value); the key decoded as
    UTF-8 with replacement characters, as the pure decoder does."""
    cdef int64_t n, klen
    cdef int64_t k
    cdef Py_ssize_t i
    cdef list out
    if not _varint(p, rec_end, pos, &n) or n < 0:
        ok[0] = False
        return None
    if n == 0:
        return ()
    out = []
    for k in range(n):
        if not _varint(p, rec_end, pos, &klen) or klen < 0 or klen > rec_end - pos[0]:
            ok[0] = False
            return None
        i = pos[0]
        key = PyUnicode_DecodeUTF8(<char*>(p + i), <Py_ssize_t>klen, "replace")
        pos[0] = i + <Py_ssize_t>klen
        value = _bytes_or_none(p, rec_end, pos, ok)
        if not ok[0]:
            return None
        pair = (key, value)
        PyObject_GC_UnTrack(<PyObject*>pair)  # atomic: see _append_record
        out.append(pair)
    result = tuple(out)
    PyObject_GC_UnTrack(<PyObject*>result)
    return result


def decode_body(const unsigned char[::1] body, int64_t base, int64_t base_ts, bint log_append,
                int64_t max_ts, Py_ssize_t count, bint gapless, int64_t skip_below,
                Py_ssize_t limit, Py_ssize_t max_bytes, bint force_first, type record_type):
    """(records, encoded bytes of those returned, whether the end of the batch was reached),
    as ``_decode_body``; None when the pure decoder must answer (see the module's docstring).

    `body`: the records section (decompressed); `base`, `base_ts`, `max_ts`, `count`: from the
    batch header; `log_append`: its LogAppendTime flag (every record then has `max_ts`);
    `gapless`: count == last offset delta + 1, so the records below `skip_below` can be
    stepped over by their lengths; `max_bytes` < 0: no byte budget."""
    if not issubclass(record_type, tuple) or count < 0:
        return None
    cdef const unsigned char* p = &body[0] if body.shape[0] else NULL
    cdef Py_ssize_t end = body.shape[0]
    cdef Py_ssize_t pos = 0, rec_end
    cdef Py_ssize_t used = 0
    cdef int64_t length, tsd, od, offset, ts, k, skip
    cdef bint ok = True
    cdef list out = []
    cdef _TypeObject* tp = <_TypeObject*>record_type
    if skip_below > base and gapless:
        if base < 0:
            return None
        skip = skip_below - base
        if skip > count:
            skip = count
        for k in range(skip):
            if not _varint(p, end, &pos, &length) or length < 0 or length > end - pos:
                return None
            pos += <Py_ssize_t>length
        count -= <Py_ssize_t>skip
    for k in range(count):
        if not _varint(p, end, &pos, &length) or length < 6 or length > end - pos:
            return None
        rec_end = pos + <Py_ssize_t>length
        pos += 1  # the record's attributes byte (unused in v2)
        if not _varint(p, rec_end, &pos, &tsd) or not _varint(p, rec_end, &pos, &od):
            return None
        if not _add(base, od, &offset):
            return None
        if offset < skip_below:
            pos = rec_end
            continue
        if max_bytes >= 0 and used + length > max_bytes and (len(out) or not force_first):
            return out, used, False
        used += <Py_ssize_t>length
        key = _bytes_or_none(p, rec_end, &pos, &ok)
        value = _bytes_or_none(p, rec_end, &pos, &ok) if ok else None
        headers = _headers(p, rec_end, &pos, &ok) if ok else None
        if not ok or pos != rec_end:
            return None
        if log_append:
            ts = max_ts
        elif not _add(base_ts, tsd, &ts):
            return None
        _append_record(out, tp, offset, ts, key, value, headers)
        if len(out) >= limit:
            return out, used, pos >= end
    return out, used, True


def count_records(const unsigned char[::1] body):
    """How many length-prefixed records `body` (a batch's uncompressed records section) holds,
    with the contract of ``streams.log.records.count_records`` (the pure reference): -1 where
    that one raises (a length that is not positive, a record overrunning the body, a varint
    that does not end or is wider than 64 bits), and the caller asks the pure one for its
    reason. It runs on every produce (Kafka's broker checks the same): a microsecond or two for
    a thousand records, where the pure walk takes tens."""
    cdef const unsigned char* p = &body[0] if body.shape[0] > 0 else NULL
    cdef Py_ssize_t end = body.shape[0]
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t count = 0
    cdef int64_t length
    while pos < end:
        if not _varint(p, end, &pos, &length) or length <= 0 or length > end - pos:
            return -1
        pos += length
        count += 1
    return count


def envelopes(const unsigned char[::1] body, bint keys):
    """The schema registry's wire-format envelope of each record's value (key when `keys`):
    (index of the first record whose field is neither null nor 5+ bytes starting with the
    magic byte 0, or -1; {schema id: index of the first record naming it}). None when the
    records do not parse (the append refuses them then). Produce-path schema validation
    (``streams.schemas.validation``) reads only this, without building records."""
    cdef const unsigned char* p = &body[0] if body.shape[0] else NULL
    cdef Py_ssize_t end = body.shape[0]
    cdef Py_ssize_t pos = 0, rec_end, index = 0, first_bad = -1
    cdef int64_t length, skip, n
    cdef uint64_t schema_id, last_id = 0
    cdef bint have_last = False
    cdef dict ids = {}
    while pos < end:
        if not _varint(p, end, &pos, &length) or length < 6 or length > end - pos:
            return None
        rec_end = pos + <Py_ssize_t>length
        pos += 1  # attributes
        if not _varint(p, rec_end, &pos, &skip) or not _varint(p, rec_end, &pos, &skip):
            return None  # the timestamp and offset deltas
        if not _varint(p, rec_end, &pos, &n):
            return None
        if not keys:  # step over the key to the value
            if n > 0:
                if n > rec_end - pos:
                    return None
                pos += <Py_ssize_t>n
            if not _varint(p, rec_end, &pos, &n):
                return None
        if n > rec_end - pos:
            return None
        if n >= 0:
            if n < 5 or p[pos] != 0:
                if first_bad < 0:
                    first_bad = index
            else:
                schema_id = ((<uint64_t>p[pos + 1] << 24) | (<uint64_t>p[pos + 2] << 16)
                             | (<uint64_t>p[pos + 3] << 8) | <uint64_t>p[pos + 4])
                if not have_last or schema_id != last_id:
                    if schema_id not in ids:
                        ids[schema_id] = index
                    last_id, have_last = schema_id, True
        pos = rec_end
        index += 1
    return first_bad, ids


# ------------------------------------------------------------------ encoding

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE

cdef extern from "Python.h":
    bint PyBytes_CheckExact(object)
    bint PyLong_CheckExact(object)
    bint PyTuple_Check(object)


cdef inline Py_ssize_t _zz_size(int64_t n) noexcept nogil:
    """Bytes of the zig-zag varint of `n`."""
    cdef uint64_t u = (<uint64_t>n << 1) ^ <uint64_t>(n >> 63)
    cdef Py_ssize_t size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


cdef inline Py_ssize_t _zz_put(unsigned char* p, int64_t n) noexcept nogil:
    """Write the zig-zag varint of `n` at `p`; returns its size."""
    cdef uint64_t u = (<uint64_t>n << 1) ^ <uint64_t>(n >> 63)
    cdef Py_ssize_t i = 0
    while u >= 0x80:
        p[i] = <unsigned char>((u & 0x7F) | 0x80)
        u >>= 7
        i += 1
    p[i] = <unsigned char>u
    return i + 1


cdef inline bint _delta(object ts, int64_t default_ts, int64_t base_ts, int64_t* out):
    """The record's timestamp delta (its `ts`, else `default_ts`, minus `base_ts`) into out;
    False when it is not an int64 or the delta leaves int64."""
    cdef int64_t t
    if ts is None:
        t = default_ts
    elif not PyLong_CheckExact(ts):
        return False
    else:
        try:
            t = ts
        except OverflowError:
            return False
    return _add(t, -base_ts, out) if base_ts != INT64_MIN else False


def encode_body(list records, int64_t base_ts, int64_t default_ts):
    """The records section of a batch of `records` (``(value, key, headers, ts)`` tuples or
    ``ProducerRecord``s), offset deltas 0, 1, 2...: the bytes of ``records._encode_pure``
    (the reference; tests/log/test_records_native.py holds the two alike). None, for the pure
    encoder to answer, at anything else: a record that is not a tuple of four, a key or value
    neither ``bytes`` nor None, headers, a timestamp that is not an int64."""
    cdef Py_ssize_t i, n = PyList_GET_SIZE(records), total = 0, size, pos = 0
    cdef object rec, key, value, headers
    cdef int64_t tsd
    for i in range(n):
        rec = <object>PyList_GET_ITEM(records, i)
        if not PyTuple_Check(rec) or PyTuple_GET_SIZE(rec) != 4:
            return None
        value = <object>PyTuple_GET_ITEM(rec, 0)
        key = <object>PyTuple_GET_ITEM(rec, 1)
        headers = <object>PyTuple_GET_ITEM(rec, 2)
        if headers:
            return None
        if not _delta(<object>PyTuple_GET_ITEM(rec, 3), default_ts, base_ts, &tsd):
            return None
        size = 1 + _zz_size(tsd) + _zz_size(i) + 1  # attributes, deltas, header count
        if key is None:
            size += 1
        elif PyBytes_CheckExact(key):
            size += _zz_size(PyBytes_GET_SIZE(key)) + PyBytes_GET_SIZE(key)
        else:
            return None
        if value is None:
            size += 1
        elif PyBytes_CheckExact(value):
            size += _zz_size(PyBytes_GET_SIZE(value)) + PyBytes_GET_SIZE(value)
        else:
            return None
        total += _zz_size(size) + size
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* p = <unsigned char*>PyBytes_AS_STRING(out)
    cdef Py_ssize_t klen, vlen
    for i in range(n):
        rec = <object>PyList_GET_ITEM(records, i)
        value = <object>PyTuple_GET_ITEM(rec, 0)
        key = <object>PyTuple_GET_ITEM(rec, 1)
        _delta(<object>PyTuple_GET_ITEM(rec, 3), default_ts, base_ts, &tsd)
        klen = -1 if key is None else PyBytes_GET_SIZE(key)
        vlen = -1 if value is None else PyBytes_GET_SIZE(value)
        size = 1 + _zz_size(tsd) + _zz_size(i) + 1 + _zz_size(klen) + _zz_size(vlen)
        size += (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
        pos += _zz_put(p + pos, size)
        p[pos] = 0  # attributes
        pos += 1
        pos += _zz_put(p + pos, tsd)
        pos += _zz_put(p + pos, i)
        pos += _zz_put(p + pos, klen)
        if klen > 0:
            memcpy(p + pos, PyBytes_AS_STRING(key), klen)
            pos += klen
        pos += _zz_put(p + pos, vlen)
        if vlen > 0:
            memcpy(p + pos, PyBytes_AS_STRING(value), vlen)
            pos += vlen
        p[pos] = 0  # no headers
        pos += 1
    if pos != total:
        return None
    return out
