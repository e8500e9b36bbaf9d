# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Tidelog's compiled batch loop of keyed tumbling windows (``WindowOperator.process_records``).

Two functions with the contract of their pure-Python counterparts in
``streams.processing.operator`` (which stay the reference; tests/processing/test_cwindow.py
holds the two to the same answers):

- ``extract_values(recs, field, ext, values)``: appends each record's aggregated value to
  `values` (a dict's `field` read directly; anything else through ``ext(value)``, which also
  raises the error a missing field gets). On an error, ``len(values)`` is the failing record.
- ``tumbling_records(op, recs, values, touched, out, i)``: the tumbling event-time loop of
  ``WindowOperator._tumbling_many`` over records ``(key, _, event_time, ...)`` of partition 0
  from index `i`, adding ``(key, window start)`` of every record to `touched` (a set or
  None). It works on the operator's own state (its windows dict, timer heaps, watermark)
  and calls back into the operator for what is rare (opening a window, a late event, an
  emission, due timers). It returns the index of the first record it did not take — a
  timestamp that is not an ``int`` within +-2**62 — so that the caller processes that record
  the pure way and calls again; ``len(recs)`` when it took them all.
"""

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem, PyDict_Update
from cpython.object cimport PyObject_IsTrue
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_SIZE
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject
from cpython.set cimport PySet_Add
from cpython.tuple cimport PyTuple_GET_ITEM
from libc.stdint cimport int64_t

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1
    bint PyTuple_CheckExact(object)
    bint PyDict_CheckExact(object)
    bint PyLong_CheckExact(object)
    bint PyUnicode_CheckExact(object)
    bint PyBytes_CheckExact(object)

import heapq

# the accumulator layout of streams.processing.aggregates (checked equal at import there)
cdef enum:
    _K = 0
    _S = 1
    _E = 2
    _REV = 3
    _ALIVE = 4
    _CNT = 5
    _SUM = 6
    _MIN = 7
    _MAX = 8
    _SK = 9

cdef int64_t LIMIT = (<int64_t>1) << 62  # event times, watermarks: within +-LIMIT
cdef int64_t SPAN = (<int64_t>1) << 60  # window size, grace, out-of-orderness: below SPAN
ACC_INDEXES = (_K, _S, _E, _REV, _ALIVE, _CNT, _SUM, _MIN, _MAX, _SK)
ACC_LEN = 10
cdef object _INF = float("inf")
cdef object _NINF = float("-inf")
cdef object _heappush = heapq.heappush


cdef inline object _item(object rec, Py_ssize_t i):
    if PyTuple_CheckExact(rec):
        return <object>PyTuple_GET_ITEM(rec, i)
    return rec[i]


def extract_values(list recs, object field, object ext, list values):
    cdef Py_ssize_t i, n = PyList_GET_SIZE(recs)
    cdef PyObject* v
    cdef object value
    for i in range(n):
        value = _item(<object>PyList_GET_ITEM(recs, i), 1)
        if field is not None and PyDict_CheckExact(value):
            v = PyDict_GetItem(value, field)
            if v != NULL:
                PyList_Append(values, <object>v)
                continue
        PyList_Append(values, ext(value))


cdef inline bint _in_range(object x, int64_t* out, int64_t limit):
    """x as int64 when it is an int within +-limit."""
    cdef int overflow = 0
    cdef long long y
    if not PyLong_CheckExact(x):
        return False
    y = PyLong_AsLongLongAndOverflow(x, &overflow)
    if overflow or y > limit or y < -limit:
        return False
    out[0] = y
    return True


def tumbling_records(op, list recs, list values, object touched, list out, Py_ssize_t i):
    cdef Py_ssize_t n = PyList_GET_SIZE(recs)
    cdef int64_t size = 0, grace = 0, ooo = 0, wm = 0, pmax0 = 0, t = 0, start, end, cand
    cdef int64_t last_start = 0
    cdef bint have_start = False
    cdef bint need_sum = op._need_sum
    cdef bint need_minmax = op._need_minmax
    cdef bint sketch = op._sketch
    cdef bint current = op._current
    cdef dict fixed = op._fixed
    cdef dict pmax = op._pmax
    cdef list fire_heap = op._fire_heap
    cdef list close_heap = op._close_heap
    cdef dict fire_at = op._fire_at
    cdef PyObject* found
    cdef PyObject* bucket
    cdef PyObject* hit
    cdef list acc
    cdef object rec, key, tobj, v, wkey, ckey, start_obj = None, end_obj = None, wm_obj, prev
    cdef bint fired
    # the operator's cache of the newest window start's open windows: key -> (acc, (key,
    # start)); an entry is good while its acc is alive (a closed window's records are late)
    cdef dict cache = op._ccache
    cdef object cache_start = op._ccache_start
    cdef int64_t cstart = 0
    cdef bint use_cache = False
    # (a window start is an event time's within +-LIMIT, less the window's size: below SPAN)
    if cache_start is not None and not _in_range(cache_start, &cstart, LIMIT + SPAN):
        return i
    if i >= n:
        return n
    if not (_in_range(op.window.size_ms, &size, SPAN) and _in_range(op._grace, &grace, SPAN)
            and _in_range(op._ooo, &ooo, SPAN) and _in_range(op._wm, &wm, LIMIT)):
        return i  # beyond what the C arithmetic holds: the pure loop takes the batch
    if size <= 0:
        return i
    if len(pmax) > 1 or (pmax and 0 not in pmax):
        return i  # other partitions' progress: the pure loop (jobs' windows have one)
    prev = pmax.get(0)
    if prev is None:
        pmax0 = -LIMIT  # MIN_TIME, as the pure loop's default
    elif not _in_range(prev, &pmax0, LIMIT):
        return i
    wm_obj = op._wm
    v = 0
    while i < n:
        rec = <object>PyList_GET_ITEM(recs, i)
        tobj = _item(rec, 2)
        if not _in_range(tobj, &t, LIMIT):
            return i
        key = _item(rec, 0)
        if values is not None:
            v = <object>PyList_GET_ITEM(values, i)
        start = t - t % size  # Cython's % is Python's floor modulo here (cdivision is off)
        end = start + size
        if not have_start or start != last_start:
            start_obj, end_obj = start, end
            last_start, have_start = start, True
            if cache_start is None or start > cstart:  # a newer start: a new cache
                cache = {}
                cache_start, cstart = start_obj, start
                op._ccache, op._ccache_start = cache, cache_start
            use_cache = start == cstart
        hit = NULL
        if use_cache and end + grace > wm:
            hit = PyDict_GetItem(cache, key)
            if hit != NULL and (<list>PyTuple_GET_ITEM(<object>hit, 0))[_ALIVE] is not True:
                hit = NULL
        if hit != NULL:
            # an open window of this start met before: its acc, and its (key, start) as kept
            # when that key is the same as this one (a str, bytes or int of the same type;
            # else, an equal key of another type, 7.0 for 7, goes to touched as it is)
            wkey = <object>PyTuple_GET_ITEM(<object>hit, 1)
            ckey = <object>PyTuple_GET_ITEM(wkey, 0)
            if not (type(ckey) is type(key) and (
                PyUnicode_CheckExact(key) or PyBytes_CheckExact(key) or PyLong_CheckExact(key)
            )):
                wkey = (key, start_obj)
            if touched is not None:
                PySet_Add(touched, wkey)
            found = PyTuple_GET_ITEM(<object>hit, 0)
        else:
            wkey = (key, start_obj)
            if touched is not None:
                PySet_Add(touched, wkey)
            found = NULL
        if end + grace <= wm:
            op._late(key, v, tobj, 0)  # still news of its partition's progress (below)
        else:
            if found == NULL:
                found = PyDict_GetItem(fixed, wkey)
                if found != NULL and use_cache:
                    PyDict_SetItem(cache, key, (<object>found, wkey))
            if found == NULL and (sketch or current or end <= wm):
                acc = op._open_fixed(key, start_obj, end_obj)
                if use_cache:
                    PyDict_SetItem(cache, key, (acc, wkey))
            elif found == NULL:
                # op._open_fixed inlined (no sketch, its timer a fire at its end): new_acc's
                # list, in the windows dict, counted open, in the fire bucket of its end
                acc = [key, start_obj, end_obj, 0, True, 0, 0, _INF, _NINF, None]
                PyDict_SetItem(fixed, wkey, acc)
                if use_cache:
                    PyDict_SetItem(cache, key, (acc, wkey))
                op._open = op._open + 1
                bucket = PyDict_GetItem(fire_at, end_obj)
                if bucket == NULL:
                    PyDict_SetItem(fire_at, end_obj, [acc])
                    _heappush(fire_heap, end_obj)
                else:
                    PyList_Append(<object>bucket, acc)
            else:
                acc = <list>found
            acc[_CNT] = acc[_CNT] + 1
            if need_sum:
                acc[_SUM] = acc[_SUM] + v
            if need_minmax:
                if v < acc[_MIN]:
                    acc[_MIN] = v
                if v > acc[_MAX]:
                    acc[_MAX] = v
            if sketch:
                acc[_SK].add(v)
            fired = end <= wm
            if current or fired:
                op._emit(acc, fired and acc[_REV] > 0, False, out)
        if t > pmax0:
            pmax0 = t
            PyDict_SetItem(pmax, 0, tobj)  # the only partition: the watermark follows it
            cand = t - ooo
            if cand > wm:
                wm = cand
                wm_obj = wm
                op._wm = wm_obj
                if (fire_heap and fire_heap[0] <= wm_obj) or (
                    close_heap and close_heap[0] <= wm_obj
                ):
                    op._fire_due(out)
        i += 1
    return n


cdef object _START = "start"
cdef object _END = "end"
cdef object _REVISION = "revision"
cdef object _FINAL = "final"


def emit_fixed(list results, Py_ssize_t i, object origin, list batch, set dirty, set stored,
               object store, bint only_final):
    """``streams.jobs.task._Window._emit_fixed``'s loop (its reference) from index `i`: each
    ``WindowResult`` of a tumbling or hopping window as a row ``(key, {"start", "end",
    **values, "revision", "final"}, end - 1, origin)`` appended to `batch` (only final ones
    when `only_final`); a final one's ``(key, start)`` leaves `dirty`, and `stored` and
    `store` when it was stored. Returns the index of the first result it does not take (one
    that is not a tuple of 8 with a dict of values and no ``replaces``), ``len(results)``
    when it took them all: the caller writes that one the pure way."""
    cdef Py_ssize_t n = PyList_GET_SIZE(results)
    cdef object r, key, start, end, values, final, wk
    cdef dict row
    while i < n:
        r = <object>PyList_GET_ITEM(results, i)
        if not PyTuple_Check(r) or PyTuple_GET_SIZE(r) != 8:
            return i
        values = <object>PyTuple_GET_ITEM(r, 3)
        if not PyDict_CheckExact(values) or PyObject_IsTrue(<object>PyTuple_GET_ITEM(r, 7)):
            return i
        key = <object>PyTuple_GET_ITEM(r, 0)
        start = <object>PyTuple_GET_ITEM(r, 1)
        final = <object>PyTuple_GET_ITEM(r, 6)
        if PyObject_IsTrue(final):
            wk = (key, start)
            dirty.discard(wk)
            if wk in stored:
                stored.discard(wk)
                del store[wk]
        elif only_final:
            i += 1
            continue
        end = <object>PyTuple_GET_ITEM(r, 2)
        row = {_START: start, _END: end}
        PyDict_Update(row, values)
        PyDict_SetItem(row, _REVISION, <object>PyTuple_GET_ITEM(r, 4))
        PyDict_SetItem(row, _FINAL, final)
        PyList_Append(batch, (key, row, end - 1, origin))
        i += 1
    return n


cdef object _REPLACES = "replaces"


def view_rows(list recs, Py_ssize_t i, set keys, dict at_end, list ends, dict rows,
              object max_ts):
    """``streams.jobs.task._ViewTap._push_rows``'s loop (its reference) from index `i`: a
    windowed view's rows ``(key, row dict, ts, ...)`` set into `rows` (its store's cache,
    ``Store.direct``) under ``(key, row["start"])``, a new one noted in `keys` and under its
    end (`at_end`, the heap `ends`). Returns ``(index of the first record it does not take,
    max_ts)``: a record that is not a tuple of 3 or more with an int time and a dict row with
    "start" and "end" and no "replaces", or an unhashable key; the caller pushes that one the
    pure way (which raises its error)."""
    cdef Py_ssize_t n = PyList_GET_SIZE(recs)
    cdef object r, key, value, ts, start, end, k
    cdef PyObject* p
    cdef PyObject* bucket
    while i < n:
        r = <object>PyList_GET_ITEM(recs, i)
        if not PyTuple_Check(r) or PyTuple_GET_SIZE(r) < 3:
            return i, max_ts
        key = <object>PyTuple_GET_ITEM(r, 0)
        value = <object>PyTuple_GET_ITEM(r, 1)
        ts = <object>PyTuple_GET_ITEM(r, 2)
        if not PyDict_CheckExact(value) or not PyLong_CheckExact(ts):
            return i, max_ts
        if max_ts is not None and not PyLong_CheckExact(max_ts):
            return i, max_ts
        p = PyDict_GetItem(value, _REPLACES)
        if p != NULL and PyObject_IsTrue(<object>p):
            return i, max_ts
        p = PyDict_GetItem(value, _START)
        if p == NULL:
            return i, max_ts
        start = <object>p
        p = PyDict_GetItem(value, _END)
        if p == NULL:
            return i, max_ts
        end = <object>p
        k = (key, start)
        try:
            hash(k)
        except Exception:
            return i, max_ts
        if max_ts is None or ts > max_ts:
            max_ts = ts
        if k not in keys:
            keys.add(k)
            bucket = PyDict_GetItem(at_end, end)
            if bucket == NULL:
                PyDict_SetItem(at_end, end, [k])
                _heappush(ends, end)
            else:
                PyList_Append(<object>bucket, k)
        PyDict_SetItem(rows, k, value)
        i += 1
    return n, max_ts
