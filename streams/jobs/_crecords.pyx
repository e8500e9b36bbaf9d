# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Tidelog's compiled reading of a job's input records (``streams.jobs.serde.decode_records``,
whose pure loop in ``streams.jobs.runner`` stays the reference; tests/jobs/test_crecords.py
holds the two to the same answers).

One function, ``decode(recs, rtype, ki, vi, ti, oi, text_keys, json_value, extract, out)``:
for records that are all of type `rtype` (a tuple type; the key, value, timestamp and offset at
indexes `ki`, `vi`, `ti`, `oi`), appends ``(key, value, ts, offset)`` to `out`: the key as
UTF-8 text (`text_keys`) or as its bytes; the value read by `json_value` (``JSON.deserialize``),
through orjson directly when the bytes hold no run of 19 digits (``serde._LONG_DIGITS``: such
a record, and any that orjson rejects, is given to `json_value`, as that function would; a
flat object written compactly is read without orjson, ``_small_json``);
the timestamp ``extract(value)`` (a tombstone, or no `extract`: the record's). It returns
False, leaving `out` part-filled, at anything else — a record of another type, a key or value
that is not ``bytes``, an error of any kind — and the caller then decodes the batch the pure
way, which raises that record's error.

``decode_body`` does the same straight from a log batch's records section (the runner's read
over the embedded store, ``EmbeddedLog.read_tuples``: no ``Record`` in between), and
``merge2``/``tag`` are a join's two-way merge of its inputs' batches (``serde.merge_two``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8

cdef extern from "Python.h":
    bint PyBytes_CheckExact(object)

import orjson

cdef object _orjson_loads = orjson.loads

from streams.jobs._cjsoncanon cimport json_canonical


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
           bint text_keys, object json_value, object extract, list out, bint raw=False):
    """(See the module docstring.) `raw` (no `extract`): a value whose bytes are canonical
    JSON (``serde.canonical_json``) is kept as those bytes, not read."""
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
                key = _record_key(<const unsigned char*>PyBytes_AS_STRING(k), PyBytes_GET_SIZE(k))
            else:
                key = k
            v = <object>PyTuple_GET_ITEM(rec, vi)
            if v is None:
                value = None
            elif not PyBytes_CheckExact(v):
                return False
            elif raw and extract is None and json_canonical(
                <const unsigned char*>PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v)
            ):
                value = v  # its own text: what the join writes back (serde.canonical_json)
            elif _long_digits(v):
                value = json_value(v)
            else:
                value = _small_json(<const unsigned char*>PyBytes_AS_STRING(v),
                                    PyBytes_GET_SIZE(v))  # a flat, compact object
                if value is None:
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


# ------------------------------------------------------------------ straight from a log batch

from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint64_t
from cpython.bytes cimport PyBytes_FromStringAndSize
from streams.log._cvarint cimport _add, _varint


from cpython.dict cimport PyDict_New, PyDict_SetItem
from cpython.long cimport PyLong_FromLongLong
from libc.string cimport memcmp

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL
    object PyUnicode_DecodeASCII(const char*, Py_ssize_t, const char*)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    void* PyUnicode_DATA(object)

from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XDECREF

cdef list _key_cache = []  # keys of small JSON objects seen so far (at most 16), shared


# the str of each record key decoded lately, by a hash of its bytes (ASCII keys of at most
# KEY_MAX bytes): a key that comes again is the same str, its hash computed once (a job's dict
# lookups by key find it by identity) and no new str made
DEF KEY_SLOTS = 4096  # a power of two
DEF KEY_MAX = 64
cdef PyObject* _record_keys[KEY_SLOTS]


cdef object _record_key(const unsigned char* p, Py_ssize_t n):
    """``p[:n].decode()`` (UTF-8; raises as it does), the same str as the last time these
    bytes came if they are ASCII and short (``_record_keys``)."""
    cdef Py_ssize_t i
    cdef uint64_t h = 1469598103934665603ULL  # FNV-1a
    cdef unsigned char c
    cdef PyObject* slot
    cdef object k
    if n > KEY_MAX:
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    for i in range(n):
        c = p[i]
        if c >= 0x80:
            return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
        h = (h ^ c) * 1099511628211ULL
    i = <Py_ssize_t>(h & (KEY_SLOTS - 1))
    slot = _record_keys[i]
    if (slot != NULL and PyUnicode_GET_LENGTH(<object>slot) == n
            and memcmp(PyUnicode_DATA(<object>slot), p, n) == 0):
        return <object>slot
    k = PyUnicode_DecodeASCII(<const char*>p, n, NULL)
    Py_XDECREF(slot)
    Py_INCREF(k)
    _record_keys[i] = <PyObject*>k
    return k


def record_key(bytes data):
    """``_record_key`` of `data` (for tests)."""
    return _record_key(<const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef inline bint _plain(unsigned char c) noexcept nogil:
    """A character of a string taken as it is: printable ASCII but a quote or a backslash."""
    return 0x20 <= c <= 0x7e and c != 34 and c != 92


cdef object _key(const unsigned char* p, Py_ssize_t n):
    """The str of the printable ASCII key p[:n]: the same object as the last time it came."""
    cdef Py_ssize_t i, size
    cdef const char* data
    for i in range(PyList_GET_SIZE(_key_cache)):
        k = <object>PyList_GET_ITEM(_key_cache, i)
        data = PyUnicode_AsUTF8AndSize(k, &size)
        if size == n and memcmp(data, p, n) == 0:
            return k
    k = PyUnicode_DecodeASCII(<const char*>p, n, NULL)
    if PyList_GET_SIZE(_key_cache) < 16:
        _key_cache.append(k)
    return k


cdef object _small_json(const unsigned char* p, Py_ssize_t n):
    """What ``json.loads`` (and orjson) make of p[:n] when it is a flat JSON object written
    compactly (no whitespace): keys and string values of printable ASCII without escapes,
    values integers of at most 18 digits (no fraction, no exponent), strings, true, false or
    null. None for anything else (the caller reads it as before: orjson, else json)."""
    cdef Py_ssize_t i = 1, j, digits
    cdef long long v
    cdef bint neg
    cdef object key, value
    if n < 2 or p[0] != 123:  # {
        return None
    d = PyDict_New()
    if p[1] == 125:  # }
        return d if n == 2 else None
    while True:
        if i >= n or p[i] != 34:  # "
            return None
        j = i + 1
        while j < n and _plain(p[j]):
            j += 1
        if j + 1 >= n or p[j] != 34 or p[j + 1] != 58:  # ":
            return None
        key = _key(p + i + 1, j - i - 1)
        i = j + 2
        if i >= n:
            return None
        if p[i] == 34:  # a string
            j = i + 1
            while j < n and _plain(p[j]):
                j += 1
            if j >= n or p[j] != 34:
                return None
            value = PyUnicode_DecodeASCII(<const char*>(p + i + 1), j - i - 1, NULL)
            i = j + 1
        elif p[i] == 45 or 48 <= p[i] <= 57:  # -, a digit
            neg = p[i] == 45
            if neg:
                i += 1
            if i >= n or not 48 <= p[i] <= 57:
                return None
            if p[i] == 48 and i + 1 < n and 48 <= p[i + 1] <= 57:
                return None  # a leading zero: not JSON
            v = 0
            digits = 0
            while i < n and 48 <= p[i] <= 57:
                digits += 1
                if digits > 18:
                    return None
                v = v * 10 + (p[i] - 48)
                i += 1
            if i < n and (p[i] == 46 or p[i] == 101 or p[i] == 69):  # . e E: a float
                return None
            value = PyLong_FromLongLong(-v if neg else v)
        elif n - i >= 4 and memcmp(p + i, b"true", 4) == 0:
            value = True
            i += 4
        elif n - i >= 5 and memcmp(p + i, b"false", 5) == 0:
            value = False
            i += 5
        elif n - i >= 4 and memcmp(p + i, b"null", 4) == 0:
            value = None
            i += 4
        else:
            return None
        PyDict_SetItem(d, key, value)
        if i >= n:
            return None
        if p[i] == 125:  # }
            return d if i + 1 == n else None
        if p[i] != 44:  # ,
            return None
        i += 1


def small_json(bytes data):
    """``_small_json`` of `data` (for tests): the dict, or None where it defers."""
    return _small_json(<const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


def decode_body(const unsigned char[::1] body, int64_t base, int64_t base_ts, bint log_append,
                int64_t max_ts, Py_ssize_t count, int64_t skip_below, int64_t end_offset,
                bint text_keys, object json_value, object extract, list out, bint small=True,
                bint raw=False):
    """The records of a batch's (uncompressed) records section `body` with offsets in
    [`skip_below`, `end_offset`) as the runner's ``(key, value, ts, offset)`` tuples appended
    to `out`: what ``streams.log.records.decode_from`` and then ``decode`` above make of them
    (the reference, tests/jobs/test_crecords.py), without the ``Record`` in between; the
    whole batch is read, so that a record it does not take anywhere in it defers the batch,
    as the log's decoder defers a whole batch. `base`, `base_ts`, `max_ts`, `count`: from the
    batch header; `log_append`: its LogAppendTime flag. A value that is a flat JSON object
    written compactly is read here (``_small_json``, with `small`), the others as ``decode``
    reads them. Returns 0 when the batch is done, 1
    when `end_offset` was reached, -1 (`out` part-filled) where either of those defers or
    fails: a record not laid out as ``streams/log/_cdecode.pyx`` expects, a key that is not
    UTF-8 (`text_keys`), a value or an `extract` that raises... The caller then reads the
    batch the usual way, which answers (or raises) as always. `raw` (no `extract`): a value
    whose bytes are canonical JSON (``serde.canonical_json``) is kept as a copy of those
    bytes, not read (a direct interval join writes them back as they are)."""
    cdef const unsigned char* p = &body[0] if body.shape[0] else NULL
    cdef Py_ssize_t end = body.shape[0]
    cdef Py_ssize_t pos = 0, rec_end, i, m
    cdef int64_t length, tsd, od, offset, ts, klen, vlen, nh, hk, hl, c
    cdef object key, value, vb, tso
    if count < 0:
        return -1
    try:
        for c in range(count):
            if not _varint(p, end, &pos, &length) or length < 6 or length > end - pos:
                return -1
            rec_end = pos + <Py_ssize_t>length
            pos += 1  # the record's attributes byte (unused in v2)
            if not _varint(p, rec_end, &pos, &tsd) or not _varint(p, rec_end, &pos, &od):
                return -1
            if not _add(base, od, &offset):
                return -1
            if offset < skip_below:
                pos = rec_end
                continue
            if offset >= end_offset:
                return 1
            # key
            if not _varint(p, rec_end, &pos, &klen) or klen > rec_end - pos:
                return -1
            if klen < 0:
                key = None
            else:
                i = pos
                pos += <Py_ssize_t>klen
                if text_keys:
                    key = _record_key(p + i, <Py_ssize_t>klen)
                else:
                    key = PyBytes_FromStringAndSize(<char*>(p + i), <Py_ssize_t>klen)
            # value
            if not _varint(p, rec_end, &pos, &vlen) or vlen > rec_end - pos:
                return -1
            if vlen < 0:
                value = None
            elif raw and extract is None and json_canonical(p + pos, <Py_ssize_t>vlen):
                value = PyBytes_FromStringAndSize(<char*>(p + pos), <Py_ssize_t>vlen)
                pos += <Py_ssize_t>vlen
            else:
                value = _small_json(p + pos, <Py_ssize_t>vlen) if small else None
                if value is None:
                    vb = PyBytes_FromStringAndSize(<char*>(p + pos), <Py_ssize_t>vlen)
                    if _long_digits(vb):
                        value = json_value(vb)
                    else:
                        try:
                            value = _orjson_loads(vb)
                        except Exception:
                            value = json_value(vb)  # json.loads decides, as JSON.deserialize does
                pos += <Py_ssize_t>vlen
            # headers: walked as the log's decoder checks them, not kept
            if not _varint(p, rec_end, &pos, &nh) or nh < 0:
                return -1
            for m in range(nh):
                if not _varint(p, rec_end, &pos, &hk) or hk < 0 or hk > rec_end - pos:
                    return -1
                pos += <Py_ssize_t>hk
                if not _varint(p, rec_end, &pos, &hl) or hl > rec_end - pos:
                    return -1
                if hl > 0:
                    pos += <Py_ssize_t>hl
            if pos != rec_end:
                return -1
            if extract is None or value is None:
                if log_append:
                    ts = max_ts
                elif not _add(base_ts, tsd, &ts):
                    return -1
                tso = ts
            else:
                tso = extract(value)
            PyList_Append(out, (key, value, tso, offset))
    except Exception:
        return -1
    return 0


# ------------------------------------------------------------------ merging two inputs


def merge2(list a, list b, object ia, object ib, list out):
    """The two-way merge of ``streams.jobs.serde.merge_two`` (its pure reference; the same
    answers, tests/jobs/test_crecords.py): appends ``(ia, a[i])`` and ``(ib, b[j])`` to `out`
    in timestamp order (index 2 of each record; of equal ones, `a`'s first) while both lists
    have records left, and returns ``(i, j)``, how many of each it took. A comparison that
    raises raises, as the pure loop's."""
    cdef Py_ssize_t i = 0, j = 0, na = PyList_GET_SIZE(a), nb = PyList_GET_SIZE(b)
    cdef object ra, rb, ta, tb
    if na == 0 or nb == 0:
        return 0, 0
    ra = <object>PyList_GET_ITEM(a, 0)
    rb = <object>PyList_GET_ITEM(b, 0)
    ta = ra[2]
    tb = rb[2]
    while True:
        if tb < ta:
            PyList_Append(out, (ib, rb))
            j += 1
            if j == nb:
                break
            rb = <object>PyList_GET_ITEM(b, j)
            tb = rb[2]
        else:
            PyList_Append(out, (ia, ra))
            i += 1
            if i == na:
                break
            ra = <object>PyList_GET_ITEM(a, i)
            ta = ra[2]
    return i, j


def tag(list recs, Py_ssize_t start, object index, list out):
    """Appends ``(index, r)`` for each record `r` of `recs` from `start` to `out` (the rest
    of a merge once one side ran out; ``serde.tag_rest``'s pure reference)."""
    cdef Py_ssize_t k, n = PyList_GET_SIZE(recs)
    for k in range(start, n):
        PyList_Append(out, (index, <object>PyList_GET_ITEM(recs, k)))


# ------------------------------------------------------------------ writing outputs

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.tuple cimport PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_AsUTF8String

cdef extern from "Python.h":
    bint PyUnicode_CheckExact(object)
    bint PyTuple_Check(object)

cdef object _orjson_dumps = orjson.dumps
cdef tuple _NO_HEADERS = ()


from streams.jobs._cjsontext cimport _json_exact


def encode(list recs, Py_ssize_t start, bint text_keys, object json_value, object default,
           object options, list out, bint serialized=False):
    """Outputs ``(key, value, ts, ...)`` of `recs` from index `start` as ``(value bytes, key
    bytes, (), ts)`` appended to `out`, the key as UTF-8 text (`text_keys`: it must be a
    ``str``) or as its ``bytes``, the value as compact JSON: orjson's bytes (``dumps(value,
    default, options)``) where they are json's, else `json_value` (``JSON.serialize``)'s.
    Returns the index of the first record it does not take (``len(recs)`` when it took them
    all): a record that is not a tuple of three or more, a key of another type, a value whose
    `json_value` raised; the caller writes that one the pure way, which raises its error.
    `serialized`: the values are their bytes already (a direct join's spliced pairs), each
    written as it is (a value that is not ``bytes`` is not taken)."""
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
        elif serialized:
            if not PyBytes_CheckExact(v):
                return i
            value = v
        else:
            try:
                value = _orjson_dumps(v, default, options)
                if _json_exact(<const unsigned char*>PyBytes_AS_STRING(value),
                               PyBytes_GET_SIZE(value)):
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


# ------------------------------------------------------------------ canonical JSON

from streams.jobs._cjsoncanon cimport json_canonical


def json_canonical_bytes(bytes data not None):
    """Whether `data` are canonical JSON, ``JSON.serialize(JSON.deserialize(data)) == data``
    (conservative: False for some that are; ``streams/jobs/_cjsoncanon.pxd``, whose pure
    reference is ``serde.json_canonical``)."""
    cdef bint ok
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
    with nogil:
        ok = json_canonical(p, n)
    return ok
