# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled loops of an inner interval join (``streams.jobs.joins``).

``inner_batch`` has the contract of the pure-Python loop of ``IntervalJoin.process_many`` for
``how="inner"``, and ``expire_inner`` that of ``IntervalJoin._expire`` for an inner join (the
Python loops stay the reference, and run whenever this module is not built or the join is a
left join): the same emissions in the same order, the same state, expiry queue and heap, late
count and watermark, and on a joiner's error the index of the failing item. Same algorithm,
compiled: no bytecode dispatch per record, and the stores reached without their Python
methods: a plain dict directly, a ``state.Store`` through its ``direct()`` cache (any other
mapping through ``get``/``[]=``/``del``). The default joiner (``joins.pair``, `pairs` true)
is built in place. A batch whose times are all ints within +-2**62 runs with them as C
integers (``_inner_batch_c``; the state still holds the Python ints); any other (a user's
timestamp extractor may give any integer) runs on Python integers.

A property test (tests/jobs/test_joins_native.py) holds the two to the same answers.
"""

cimport cython

from bisect import bisect_left, bisect_right
from heapq import heappop, heappush
from operator import itemgetter

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem, PyDict_DelItem
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.list cimport PyList_Append, PyList_GET_SIZE, PyList_New, PyList_SET_ITEM
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF, Py_XINCREF, Py_DECREF, Py_XDECREF
from cpython.long cimport PyLong_CheckExact, PyLong_AsLongLongAndOverflow, PyLong_FromLongLong
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memcpy

# the C-integer loop takes a batch whose times all lie within +-TS_MAX (and `within`, `grace`
# within +-SPAN_MAX): no sum or difference it makes can overflow 64 bits
cdef long long TS_MAX = 1LL << 62
cdef long long SPAN_MAX = 1LL << 60

cdef object _first = itemgetter(0)
cdef object _third = itemgetter(2)


cdef class _Side:
    """One side's store as the loops reach it: ``cache`` (a plain dict store itself, or a
    Store's ``direct()`` cache, ``fallback`` its ``get``) or, for any other mapping, none."""
    cdef object store
    cdef dict cache
    cdef object deleted
    cdef object fallback
    cdef bint plain  # the store is this dict: a missing key is absent

    def __init__(self, store):
        self.store = store
        self.cache = None
        self.deleted = None
        self.fallback = None
        self.plain = False
        if type(store) is dict:
            self.cache = store
            self.plain = True
        else:
            direct = getattr(store, "direct", None)
            if direct is not None:
                self.cache, self.deleted = direct()
                self.fallback = store.get

    cdef inline object get(self, object key):
        """The key's value, or None."""
        cdef PyObject* v
        if self.cache is None:
            return self.store.get(key)
        v = PyDict_GetItem(self.cache, key)
        if v != NULL:
            if <object>v is self.deleted and not self.plain:
                return None
            return <object>v
        if self.plain:
            return None
        return self.fallback(key)

    cdef inline void touched(self, object key, object value) except *:
        """`value` (got from this side, mutated in place) set back: a no-op for a cache."""
        if self.cache is None:
            self.store[key] = value

    cdef inline void set(self, object key, object value) except *:
        if self.cache is None:
            self.store[key] = value
        else:
            PyDict_SetItem(self.cache, key, value)

    cdef inline void delete(self, object key) except *:
        """Delete a key the store holds."""
        if self.cache is None:
            del self.store[key]
        elif self.plain:
            PyDict_DelItem(self.cache, key)
        else:
            PyDict_SetItem(self.cache, key, self.deleted)


cdef struct _QEntry:
    long long exp  # the time, when `big` is NULL
    PyObject* big  # the time as an object (a strong reference) when not a small int
    PyObject* key  # a strong reference
    int side


cdef class ExpiryQueue:
    """The join's expiry queue: ``(expires after, side, key)`` entries in time order, as a ring
    of C structs (a deque of tuples made a tuple and an int per record). The part of a deque's
    interface the Python loops use (``append``, ``popleft``, ``[0]``, ``[-1]``, ``len``,
    iteration, ``clear``) gives and takes those tuples; the compiled loops reach the ring
    directly. A time that is not an int within +-2**62 is kept as its object."""
    cdef _QEntry* ring
    cdef Py_ssize_t head, n, cap  # cap: a power of two

    def __cinit__(self, entries=()):
        self.cap = 64
        self.head = self.n = 0
        self.ring = <_QEntry*>PyMem_Malloc(self.cap * sizeof(_QEntry))
        if self.ring == NULL:
            raise MemoryError()
        for e in entries:
            self.append(e)

    def __dealloc__(self):
        if self.ring != NULL:
            self._clear()
            PyMem_Free(self.ring)

    cdef void _clear(self):
        cdef _QEntry* q
        while self.n:
            q = &self.ring[self.head]
            Py_XDECREF(q.big)
            Py_XDECREF(q.key)
            q.big = q.key = NULL
            self.head = (self.head + 1) & (self.cap - 1)
            self.n -= 1
        self.head = 0

    cdef int _grow(self) except -1:
        cdef Py_ssize_t cap = self.cap * 2, i
        cdef _QEntry* ring = <_QEntry*>PyMem_Malloc(cap * sizeof(_QEntry))
        if ring == NULL:
            raise MemoryError()
        for i in range(self.n):
            ring[i] = self.ring[(self.head + i) & (self.cap - 1)]
        PyMem_Free(self.ring)
        self.ring, self.cap, self.head = ring, cap, 0
        return 0

    cdef inline _QEntry* _at(self, Py_ssize_t i):
        return &self.ring[(self.head + i) & (self.cap - 1)]

    cdef inline object _exp(self, _QEntry* q):
        if q.big != NULL:
            return <object>q.big
        return PyLong_FromLongLong(q.exp)

    cdef int _push(self, long long exp, object big, int side, object key) except -1:
        """Append (`big` None: the time is `exp`)."""
        cdef _QEntry* q
        if self.n == self.cap:
            self._grow()
        q = self._at(self.n)
        q.exp = exp
        if big is None:
            q.big = NULL
        else:
            Py_INCREF(big)
            q.big = <PyObject*>big
        Py_INCREF(key)
        q.key = <PyObject*>key
        q.side = side
        self.n += 1
        return 0

    cdef inline bint push_small(self, long long exp, int side, object key) except -1:
        """Append `exp` (a small int) if it comes no earlier than the last entry; else False."""
        cdef _QEntry* last
        if self.n:
            last = self._at(self.n - 1)
            if last.big != NULL:
                if not (PyLong_FromLongLong(exp) >= <object>last.big):
                    return False
            elif exp < last.exp:
                return False
        self._push(exp, None, side, key)
        return True

    cdef bint push_object(self, object exp, int side, object key) except -1:
        """``push_small`` for a time of any size."""
        cdef long long c = 0
        if _small(exp, TS_MAX, &c):
            return self.push_small(c, side, key)
        if self.n and not (exp >= self._exp(self._at(self.n - 1))):
            return False
        self._push(0, exp, side, key)
        return True

    cdef inline bint front_before(self, long long c_wm, object wm, bint small) except -1:
        """The first entry's time is < the watermark (`c_wm` when `small`, else `wm`)."""
        cdef _QEntry* q
        if not self.n:
            return False
        q = &self.ring[self.head]
        if small and q.big == NULL:
            return q.exp < c_wm
        return self._exp(q) < wm

    cdef inline object pop_key(self, int* side):
        """Take the first entry off: its key (and its side into `side`)."""
        cdef _QEntry* q = &self.ring[self.head]
        cdef object key = <object>q.key
        Py_DECREF(key)  # the ring's reference, `key` holds its own
        Py_XDECREF(q.big)
        q.big = q.key = NULL
        side[0] = q.side
        self.head = (self.head + 1) & (self.cap - 1)
        self.n -= 1
        return key

    def append(self, tuple entry):
        exp, side, key = entry
        cdef long long c = 0
        if _small(exp, TS_MAX, &c):
            self._push(c, None, side, key)
        else:
            self._push(0, exp, side, key)

    def popleft(self):
        if not self.n:
            raise IndexError("pop from an empty queue")
        cdef object exp = self._exp(&self.ring[self.head])
        cdef int side = 0
        key = self.pop_key(&side)
        return (exp, side, key)

    def __getitem__(self, Py_ssize_t i):
        if i < 0:
            i += self.n
        if i < 0 or i >= self.n:
            raise IndexError("queue index out of range")
        cdef _QEntry* q = self._at(i)
        return (self._exp(q), q.side, <object>q.key)

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter([self[i] for i in range(self.n)])

    def __repr__(self):
        return f"ExpiryQueue({list(self)!r})"

    def clear(self):
        self._clear()


cdef inline bytes _splice(bytes a, bytes b):
    """``b"[" + a + b"," + b + b"]"``: the JSON text of the pair of two values' texts."""
    cdef Py_ssize_t na = PyBytes_GET_SIZE(a), nb = PyBytes_GET_SIZE(b)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, na + nb + 3)
    cdef char* p = PyBytes_AS_STRING(out)
    p[0] = 91  # [
    memcpy(p + 1, PyBytes_AS_STRING(a), na)
    p[na + 1] = 44  # ,
    memcpy(p + na + 2, PyBytes_AS_STRING(b), nb)
    p[na + nb + 2] = 93  # ]
    return out


cdef inline list _pair(object a, object b):
    cdef list p = PyList_New(2)
    Py_INCREF(a)
    PyList_SET_ITEM(p, 0, a)
    Py_INCREF(b)
    PyList_SET_ITEM(p, 1, b)
    return p


def inner_batch(
    list items, object lstore, object rstore, object within, object joiner, list maxs,
    list heap, object queue, tuple unordered, Py_ssize_t scan_max, object grace,
    object min_time, list progress, bint pairs,
):
    """Process `items` (``(side, (key, value, ts, origin))``) into `lstore`/`rstore`;
    returns the emissions ``(key, value, ts, origin)``. `maxs` (each side's largest time),
    `heap`, `queue` (an ``ExpiryQueue``: the expiry entries in time order; the others go to the
    heap)
    and `unordered` are updated in place, as is `progress`: ``[watermark, late records,
    index of the item being processed]`` (on an exception, the failing one). `pairs`: the
    joiner is ``joins.pair`` (``[left, right]``, built here)."""
    cdef list out = []
    cdef list mine_out
    cdef list other, other_in, mine
    cdef Py_ssize_t n = len(items), idx = 0, late = 0, i
    cdef int side
    cdef bint matched, changed
    cdef object item, rec, key, value, ts, origin, e, lo, hi, o, cand, v, exp, last
    cdef set unordered_other
    cdef _Side others, mine_side
    cdef tuple sides = (_Side(lstore), _Side(rstore))
    cdef object wm = progress[0]
    cdef ExpiryQueue q = queue
    if _all_small(items, within, grace, wm, maxs, min_time):
        return _inner_batch_c(
            items, sides, within, joiner, maxs, heap, queue, unordered, scan_max, grace,
            min_time, progress, pairs,
        )
    try:
        while idx < n:
            item = items[idx]
            side = (<tuple>item)[0]
            rec = (<tuple>item)[1]
            key = (<tuple>rec)[0]
            value = (<tuple>rec)[1]
            ts = (<tuple>rec)[2]
            origin = (<tuple>rec)[3]
            if ts < wm:
                late += 1
                idx += 1
                if ts > maxs[side]:
                    maxs[side] = ts
                    cand = _candidate(maxs, side, ts, grace, min_time)
                    if cand > wm:
                        wm = cand
                continue
            others = <_Side>sides[1 - side]
            other = others.get(key)
            matched = False
            mine_out = None
            if other:
                changed = False
                mine_out = []
                lo = ts - within
                hi = ts + within
                unordered_other = unordered[1 - side]
                if len(other) > scan_max and key not in unordered_other:
                    i = bisect_left(other, lo, key=_first)
                    other_in = other[i:bisect_right(other, hi, i, key=_first)]
                else:
                    other_in = other
                for e in other_in:
                    o = (<list>e)[0]
                    if lo <= o <= hi:
                        matched = True
                        if not (<list>e)[2]:
                            (<list>e)[2] = True
                            changed = True
                        if pairs:
                            if side == 0:
                                v = _pair(value, (<list>e)[1])
                            else:
                                v = _pair((<list>e)[1], value)
                        elif side == 0:
                            v = joiner(value, (<list>e)[1])
                        else:
                            v = joiner((<list>e)[1], value)
                        PyList_Append(mine_out, (key, v, ts if ts > o else o, origin))
                if changed:
                    others.touched(key, other)  # tell a changelogged store
            mine_side = <_Side>sides[side]
            mine = mine_side.get(key)
            if mine is None:
                mine_side.set(key, [[ts, value, matched]])
            else:
                if mine and ts < (<list>mine[len(mine) - 1])[0]:
                    (<set>unordered[side]).add(key)
                PyList_Append(mine, [ts, value, matched])
                mine_side.touched(key, mine)
            exp = ts + within
            if not q.push_object(exp, side, key):
                heappush(heap, (exp, side, key))
            if ts > maxs[side]:
                maxs[side] = ts
                cand = _candidate(maxs, side, ts, grace, min_time)
                if cand > wm:
                    wm = cand
                    if mine_out is not None and len(mine_out) > 1:
                        mine_out.sort(key=_third)
            if mine_out:
                out.extend(mine_out)
            idx += 1
    finally:
        progress[0] = wm
        progress[1] = late
        progress[2] = idx
    return out


cdef inline object _candidate(list maxs, int side, object ts, object grace, object min_time):
    cdef object o = maxs[1 - side]
    if o == min_time:
        return ts - grace
    return (ts if ts < o else o) - grace


def expire_inner(list heap, object queue, object lstore, object rstore, object within,
                 object wm, tuple unordered):
    """An inner join's expiry (``IntervalJoin._expire`` with nothing to emit): every entry
    with ``ts + within < wm`` leaves its key's list, a key left empty leaves its store; the
    queue's and the heap's entries due before `wm` are taken off."""
    cdef tuple top
    cdef tuple sides = (_Side(lstore), _Side(rstore))
    cdef ExpiryQueue q = queue
    cdef long long c_within = 0, c_wm = 0
    cdef int side = 0
    cdef object key
    # small: an entry's time, if a small int too, is compared as a C integer
    cdef bint small = _small(within, SPAN_MAX, &c_within) and _small(wm, TS_MAX, &c_wm)
    while q.front_before(c_wm, wm, small):
        key = q.pop_key(&side)
        _expire_key(<_Side>sides[side], key, within, wm, <set>unordered[side],
                    small, c_within, c_wm)
    while heap and (<tuple>heap[0])[0] < wm:
        top = heappop(heap)
        _expire_key(<_Side>sides[<int>top[1]], top[2], within, wm, <set>unordered[<int>top[1]],
                    small, c_within, c_wm)


cdef inline void _expire_key(_Side side, object key, object within, object wm,
                             set unordered, bint small, long long c_within,
                             long long c_wm) except *:
    cdef list entries, keep
    cdef object e, t
    cdef Py_ssize_t i, n
    cdef long long c_t = 0
    cdef bint expired
    entries = side.get(key)
    if not entries:
        return
    n = len(entries)
    keep = None
    for i in range(n):
        e = entries[i]
        t = (<list>e)[0]
        if small and _small(t, TS_MAX, &c_t):
            expired = c_t + c_within < c_wm
        else:
            expired = t + within < wm
        if expired:
            if keep is None:
                keep = entries[:i]
        elif keep is not None:
            PyList_Append(keep, e)
    if keep is None:  # nothing expired (a key met again)
        return
    if keep:
        side.set(key, keep)
    else:
        side.delete(key)
        unordered.discard(key)


cdef inline bint _small(object x, long long bound, long long* out):
    """x is an int within +-bound: its value into `out`."""
    cdef int overflow = 0
    cdef long long v
    if not PyLong_CheckExact(x):
        return False
    v = PyLong_AsLongLongAndOverflow(x, &overflow)
    if overflow or v > bound or v < -bound:
        return False
    out[0] = v
    return True


cdef bint _all_small(list items, object within, object grace, object wm, list maxs,
                     object min_time) except -1:
    cdef long long v
    cdef object item
    if not (_small(within, SPAN_MAX, &v) and _small(grace, SPAN_MAX, &v)
            and _small(wm, TS_MAX, &v) and _small(maxs[0], TS_MAX, &v)
            and _small(maxs[1], TS_MAX, &v) and _small(min_time, TS_MAX, &v)):
        return False
    for item in items:
        if not _small((<tuple>(<tuple>item)[1])[2], TS_MAX, &v):
            return False
    return True


cdef list _inner_batch_c(
    list items, tuple sides, object within, object joiner, list maxs, list heap, object queue,
    tuple unordered, Py_ssize_t scan_max, object grace, object min_time, list progress,
    bint pairs,
):
    """``inner_batch`` for a batch of small integer times (``_all_small``): the same steps
    with the times as C integers (a partner entry's time too, when it is a small int; else
    compared as objects)."""
    cdef list out = []
    cdef list mine_out
    cdef list other, other_in, mine
    cdef Py_ssize_t n = len(items), idx = 0, late = 0, i
    cdef int side
    cdef bint matched, changed, small_o
    cdef object item, rec, key, value, ts, origin, e, o, v, lo, hi
    cdef set unordered_other
    cdef _Side others, mine_side
    cdef long long c_within = 0, c_grace = 0, c_wm = 0, c_ts = 0, c_lo = 0, c_hi = 0, c_o = 0
    cdef long long c_min = 0, c_cand = 0
    cdef long long c_max[2]
    c_max[0] = c_max[1] = 0
    cdef ExpiryQueue q = queue
    cdef object wm_obj = progress[0]  # the watermark as an object, while it is unchanged
    _small(within, SPAN_MAX, &c_within)
    _small(grace, SPAN_MAX, &c_grace)
    _small(progress[0], TS_MAX, &c_wm)
    _small(maxs[0], TS_MAX, &c_max[0])
    _small(maxs[1], TS_MAX, &c_max[1])
    _small(min_time, TS_MAX, &c_min)
    try:
        while idx < n:
            item = items[idx]
            side = (<tuple>item)[0]
            rec = (<tuple>item)[1]
            key = (<tuple>rec)[0]
            value = (<tuple>rec)[1]
            ts = (<tuple>rec)[2]
            origin = (<tuple>rec)[3]
            _small(ts, TS_MAX, &c_ts)
            if c_ts < c_wm:
                late += 1
                idx += 1
                if c_ts > c_max[side]:
                    c_max[side] = c_ts
                    maxs[side] = ts
                    c_cand = _candidate_c(c_max, side, c_ts, c_grace, c_min)
                    if c_cand > c_wm:
                        c_wm = c_cand
                        wm_obj = None
                continue
            others = <_Side>sides[1 - side]
            other = others.get(key)
            matched = False
            mine_out = None
            if other:
                changed = False
                mine_out = []
                c_lo = c_ts - c_within
                c_hi = c_ts + c_within
                lo = hi = None
                unordered_other = unordered[1 - side]
                if len(other) > scan_max and key not in unordered_other:
                    lo = PyLong_FromLongLong(c_lo)
                    hi = PyLong_FromLongLong(c_hi)
                    i = bisect_left(other, lo, key=_first)
                    other_in = other[i:bisect_right(other, hi, i, key=_first)]
                else:
                    other_in = other
                for e in other_in:
                    o = (<list>e)[0]
                    if _small(o, TS_MAX, &c_o):
                        if not (c_lo <= c_o <= c_hi):
                            continue
                        small_o = True
                    else:
                        if lo is None:
                            lo = PyLong_FromLongLong(c_lo)
                            hi = PyLong_FromLongLong(c_hi)
                        if not (lo <= o <= hi):
                            continue
                        small_o = False
                    matched = True
                    if not (<list>e)[2]:
                        (<list>e)[2] = True
                        changed = True
                    if pairs:
                        if side == 0:
                            v = _pair(value, (<list>e)[1])
                        else:
                            v = _pair((<list>e)[1], value)
                    elif side == 0:
                        v = joiner(value, (<list>e)[1])
                    else:
                        v = joiner((<list>e)[1], value)
                    if small_o:
                        PyList_Append(mine_out, (key, v, ts if c_ts > c_o else o, origin))
                    else:
                        PyList_Append(mine_out, (key, v, ts if ts > o else o, origin))
                if changed:
                    others.touched(key, other)  # tell a changelogged store
            mine_side = <_Side>sides[side]
            mine = mine_side.get(key)
            if mine is None:
                mine_side.set(key, [[ts, value, matched]])
            else:
                if mine and ts < (<list>mine[len(mine) - 1])[0]:
                    (<set>unordered[side]).add(key)
                PyList_Append(mine, [ts, value, matched])
                mine_side.touched(key, mine)
            if not q.push_small(c_ts + c_within, side, key):  # expires after
                heappush(heap, (PyLong_FromLongLong(c_ts + c_within), side, key))
            if c_ts > c_max[side]:
                c_max[side] = c_ts
                maxs[side] = ts
                c_cand = _candidate_c(c_max, side, c_ts, c_grace, c_min)
                if c_cand > c_wm:
                    c_wm = c_cand
                    wm_obj = None
                    if mine_out is not None and len(mine_out) > 1:
                        mine_out.sort(key=_third)
            if mine_out:
                out.extend(mine_out)
            idx += 1
    finally:
        progress[0] = wm_obj if wm_obj is not None else PyLong_FromLongLong(c_wm)
        progress[1] = late
        progress[2] = idx
    return out


cdef inline long long _candidate_c(long long* c_max, int side, long long ts, long long grace,
                                   long long min_time):
    cdef long long o = c_max[1 - side]
    if o == min_time:
        return ts - grace
    return (ts if ts < o else o) - grace


# --- the inner join's state in C, between checkpoints ---------------------------------------


@cython.no_gc
@cython.final
cdef class _Entries:
    """One key's entries on one side, as C arrays in arrival order: each entry's time (as a C
    integer, and the int object it came as), value and matched flag; ``[start, start + n)``
    are live (expiry drops a prefix by moving `start`). Not walked by the cycle collector
    (its values are records' decoded values, which cannot refer back to it)."""
    cdef long long* ts
    cdef PyObject** tsobj  # strong references
    cdef PyObject** values  # strong references
    cdef char* matched
    cdef Py_ssize_t start, n, cap
    cdef object key
    cdef bint dirty  # changed since the last sync (in its side's `dirty` list)
    cdef bint in_store  # the store holds the key (as of the last sync or load)
    cdef bint unordered  # the key is in its side's `unordered` set

    def __cinit__(self):
        self.ts = NULL
        self.tsobj = self.values = NULL
        self.matched = NULL
        self.start = self.n = self.cap = 0

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.start, self.start + self.n):
            Py_XDECREF(self.tsobj[i])
            Py_XDECREF(self.values[i])
        PyMem_Free(self.ts)
        PyMem_Free(self.tsobj)
        PyMem_Free(self.values)
        PyMem_Free(self.matched)

    cdef int _room(self) except -1:
        """Room for one more entry at the end."""
        cdef Py_ssize_t cap, i
        cdef long long* ts
        cdef PyObject** tsobj
        cdef PyObject** values
        cdef char* matched
        if self.start + self.n < self.cap:
            return 0
        if self.start and self.n <= self.cap // 2:  # slide the live entries down
            for i in range(self.n):
                self.ts[i] = self.ts[self.start + i]
                self.tsobj[i] = self.tsobj[self.start + i]
                self.values[i] = self.values[self.start + i]
                self.matched[i] = self.matched[self.start + i]
            self.start = 0
            return 0
        cap = 4 if self.cap == 0 else self.cap * 2
        ts = <long long*>PyMem_Malloc(cap * sizeof(long long))
        tsobj = <PyObject**>PyMem_Malloc(cap * sizeof(PyObject*))
        values = <PyObject**>PyMem_Malloc(cap * sizeof(PyObject*))
        matched = <char*>PyMem_Malloc(cap)
        if ts == NULL or tsobj == NULL or values == NULL or matched == NULL:
            PyMem_Free(ts)
            PyMem_Free(tsobj)
            PyMem_Free(values)
            PyMem_Free(matched)
            raise MemoryError()
        for i in range(self.n):
            ts[i] = self.ts[self.start + i]
            tsobj[i] = self.tsobj[self.start + i]
            values[i] = self.values[self.start + i]
            matched[i] = self.matched[self.start + i]
        PyMem_Free(self.ts)
        PyMem_Free(self.tsobj)
        PyMem_Free(self.values)
        PyMem_Free(self.matched)
        self.ts, self.tsobj, self.values, self.matched = ts, tsobj, values, matched
        self.start, self.cap = 0, cap
        return 0

    cdef int append(self, long long c_ts, object ts, object value, bint matched) except -1:
        cdef Py_ssize_t i
        self._room()
        i = self.start + self.n
        self.ts[i] = c_ts
        Py_INCREF(ts)
        self.tsobj[i] = <PyObject*>ts
        Py_INCREF(value)
        self.values[i] = <PyObject*>value
        self.matched[i] = matched
        self.n += 1
        return 0

    cdef list as_list(self, object from_text):
        """The entries as the store holds them: ``[[ts, value, matched], ...]`` (each value
        read from its text by `from_text`, unless None)."""
        cdef list out = PyList_New(self.n)
        cdef list e
        cdef Py_ssize_t i
        cdef object v
        for i in range(self.n):
            v = <object>self.values[self.start + i]
            if from_text is not None:
                v = from_text(v)
            e = [<object>self.tsobj[self.start + i], v,
                 True if self.matched[self.start + i] else False]
            Py_INCREF(e)
            PyList_SET_ITEM(out, i, e)
        return out


@cython.final
cdef class JoinSide:
    """One side of an inner interval join, between checkpoints: the keys touched since the
    last ``sync``, each as an ``_Entries`` (loaded from the store when first touched), over the
    store, which stays the state's truth at every checkpoint: ``sync`` writes the changed keys
    into it (the same ``[[ts, value, matched], ...]`` lists the Python loops keep there, so the
    same changelog) and empties the cache. Times are small ints only (``batch_is_small``)."""
    cdef object store
    cdef dict cache  # key -> _Entries
    cdef list dirty  # the _Entries changed since the last sync, in order of first change
    cdef set unordered  # the join's set of this side's keys whose entries are out of order
    # a join whose values are JSON text (``IntervalJoin.use_json_text``): the entries hold each
    # value's text (`to_text` makes it of a value loaded from the store, `from_text` reads it
    # back for the store at sync); None: the entries hold the values themselves
    cdef object to_text, from_text

    def __init__(self, store, set unordered, to_text=None, from_text=None):
        self.store = store
        self.cache = {}
        self.dirty = []
        self.unordered = unordered
        self.to_text, self.from_text = to_text, from_text

    cdef _Entries get(self, object key):
        """The key's entries (perhaps none: n == 0; a key the store lacks is cached so, till
        the next sync)."""
        cdef PyObject* p = PyDict_GetItem(self.cache, key)
        if p != NULL:
            return <_Entries>p
        return self._load(key)

    cdef _Entries _load(self, object key):
        cdef object stored = self.store.get(key)
        cdef _Entries es
        cdef long long c = 0
        if stored is None:
            return self.new(key)
        es = _Entries.__new__(_Entries)
        es.key = key
        es.in_store = True
        es.unordered = key in self.unordered
        for e in stored:
            if not _small(e[0], TS_MAX, &c):
                raise ValueError(f"a join entry's time out of range: {e[0]!r}")
            es.append(c, e[0], e[1] if self.to_text is None else self.to_text(e[1]), e[2])
        PyDict_SetItem(self.cache, key, es)
        return es

    cdef _Entries new(self, object key):
        cdef _Entries es = _Entries.__new__(_Entries)
        es.key = key
        PyDict_SetItem(self.cache, key, es)
        return es

    cdef inline void changed(self, _Entries es) except *:
        if not es.dirty:
            es.dirty = True
            PyList_Append(self.dirty, es)

    cdef void expire(self, object key, long long c_within, long long c_wm) except *:
        """Every entry of `key` with ``ts + within < wm`` leaves; a key left without entries
        leaves the unordered set (and the store, at the next sync)."""
        cdef _Entries es = self.get(key)
        cdef Py_ssize_t i, j, end, k
        if es.n == 0:
            return
        end = es.start + es.n
        if not es.unordered:  # in time order: the expired ones are a prefix
            k = es.start
            while k < end and es.ts[k] + c_within < c_wm:
                Py_DECREF(<object>es.tsobj[k])
                Py_DECREF(<object>es.values[k])
                k += 1
            if k == es.start:
                return
            es.n -= k - es.start
            es.start = k
        else:
            j = es.start
            for i in range(es.start, end):
                if es.ts[i] + c_within < c_wm:
                    Py_DECREF(<object>es.tsobj[i])
                    Py_DECREF(<object>es.values[i])
                else:
                    es.ts[j] = es.ts[i]
                    es.tsobj[j] = es.tsobj[i]
                    es.values[j] = es.values[i]
                    es.matched[j] = es.matched[i]
                    j += 1
            if j == end:
                return
            es.n = j - es.start
        if es.n == 0:
            es.start = 0
            if es.unordered:
                self.unordered.discard(key)
                es.unordered = False
        self.changed(es)

    def sync(self):
        """Write the keys changed since the last sync into the store; empty the cache."""
        cdef _Entries es
        store = self.store
        for es in self.dirty:
            es.dirty = False
            if es.n:
                store[es.key] = es.as_list(self.from_text)
                es.in_store = True
            elif es.in_store:
                del store[es.key]
                es.in_store = False
        self.dirty = []
        self.cache.clear()

    def __len__(self):
        """Entries held in the cache (the rest are in the store)."""
        cdef _Entries es
        return sum(es.n for es in self.cache.values())


def expire_sides(list heap, object queue, JoinSide lside, JoinSide rside, object within,
                 object wm):
    """``expire_inner`` over ``JoinSide`` state (small times only)."""
    cdef ExpiryQueue q = queue
    cdef long long c_within = 0, c_wm = 0
    cdef int side = 0
    cdef object key
    cdef tuple top
    cdef tuple sides = (lside, rside)
    if not (_small(within, SPAN_MAX, &c_within) and _small(wm, TS_MAX, &c_wm)):
        raise ValueError("expire_sides takes small times only")
    while q.front_before(c_wm, wm, True):
        key = q.pop_key(&side)
        (<JoinSide>sides[side]).expire(key, c_within, c_wm)
    while heap and (<tuple>heap[0])[0] < wm:
        top = heappop(heap)
        (<JoinSide>sides[<int>top[1]]).expire(top[2], c_within, c_wm)


cdef inline Py_ssize_t _lower(long long* ts, Py_ssize_t lo, Py_ssize_t hi, long long x):
    """The first index in [lo, hi) of sorted `ts` whose time is >= x."""
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if ts[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def inner_batch_sides(
    list items, JoinSide lside, JoinSide rside, object within, object joiner, list maxs,
    list heap, object queue, tuple unordered, Py_ssize_t scan_max, object grace,
    object min_time, list progress, bint pairs, object to_text=None,
):
    """``inner_batch`` over ``JoinSide`` state: the same emissions, in the same order, and
    the same state once synced; None (nothing done) if a time of the batch or of the join's
    progress is not an int within +-2**62 (or `within`, `grace` within +-2**60).

    `to_text` (with `pairs`, over sides made with it): the values are JSON text, ``bytes``
    (``IntervalJoin.use_json_text``); a value that is not is made so by ``to_text(value)``,
    and each pair is emitted as its JSON text, ``b"[" + left + b"," + right + b"]"``."""
    cdef list out = []
    cdef Py_ssize_t first  # where this record's emissions start in `out`
    cdef bint unsorted  # they are not in time order (a partner list out of order)
    cdef long long c_last, c_emit
    cdef Py_ssize_t n = len(items), idx = 0, late = 0, i, end
    cdef int side
    cdef bint matched, small_o
    cdef object item, rec, key, value, ts, origin, v
    cdef JoinSide others, mine_side
    cdef _Entries oe, me
    cdef tuple sides = (lside, rside)
    cdef long long c_within = 0, c_grace = 0, c_wm = 0, c_ts = 0, c_lo = 0, c_hi = 0, c_o = 0
    cdef long long c_min = 0, c_cand = 0
    cdef long long c_max[2]
    c_max[0] = c_max[1] = 0
    cdef ExpiryQueue q = queue
    cdef object wm_obj = progress[0]  # the watermark as an object, while it is unchanged
    cdef bint text = to_text is not None
    if text and not (pairs and lside.to_text is not None and rside.to_text is not None):
        raise ValueError("inner_batch_sides: JSON text needs the pair joiner and text sides")
    if not _all_small(items, within, grace, progress[0], maxs, min_time):
        return None
    _small(within, SPAN_MAX, &c_within)
    _small(grace, SPAN_MAX, &c_grace)
    _small(progress[0], TS_MAX, &c_wm)
    _small(maxs[0], TS_MAX, &c_max[0])
    _small(maxs[1], TS_MAX, &c_max[1])
    _small(min_time, TS_MAX, &c_min)
    try:
        while idx < n:
            item = items[idx]
            side = (<tuple>item)[0]
            rec = (<tuple>item)[1]
            key = (<tuple>rec)[0]
            value = (<tuple>rec)[1]
            ts = (<tuple>rec)[2]
            origin = (<tuple>rec)[3]
            _small(ts, TS_MAX, &c_ts)
            if c_ts < c_wm:
                late += 1
                idx += 1
                if c_ts > c_max[side]:
                    c_max[side] = c_ts
                    maxs[side] = ts
                    c_cand = _candidate_c(c_max, side, c_ts, c_grace, c_min)
                    if c_cand > c_wm:
                        c_wm = c_cand
                        wm_obj = None
                continue
            if text and type(value) is not bytes:
                value = to_text(value)
            others = <JoinSide>sides[1 - side]
            oe = others.get(key)
            matched = False
            first = PyList_GET_SIZE(out)
            unsorted = False
            c_last = c_min
            if oe.n:
                c_lo = c_ts - c_within
                c_hi = c_ts + c_within
                i = oe.start
                end = oe.start + oe.n
                if oe.n > scan_max and not oe.unordered:  # in time order: bisect
                    i = _lower(oe.ts, i, end, c_lo)
                    end = _lower(oe.ts, i, end, c_hi + 1)
                while i < end:
                    c_o = oe.ts[i]
                    if c_lo <= c_o <= c_hi:
                        matched = True
                        if not oe.matched[i]:
                            oe.matched[i] = 1
                            others.changed(oe)
                        if text:
                            if side == 0:
                                v = _splice(value, <bytes>oe.values[i])
                            else:
                                v = _splice(<bytes>oe.values[i], value)
                        elif pairs:
                            if side == 0:
                                v = _pair(value, <object>oe.values[i])
                            else:
                                v = _pair(<object>oe.values[i], value)
                        elif side == 0:
                            v = joiner(value, <object>oe.values[i])
                        else:
                            v = joiner(<object>oe.values[i], value)
                        c_emit = c_ts if c_ts > c_o else c_o
                        if c_emit < c_last:
                            unsorted = True
                        c_last = c_emit
                        PyList_Append(
                            out, (key, v, ts if c_ts > c_o else <object>oe.tsobj[i], origin)
                        )
                    i += 1
            mine_side = <JoinSide>sides[side]
            me = mine_side.get(key)
            if me.n and c_ts < me.ts[me.start + me.n - 1]:
                if not me.unordered:
                    me.unordered = True
                    mine_side.unordered.add(key)
            me.append(c_ts, ts, value, matched)
            mine_side.changed(me)
            if not q.push_small(c_ts + c_within, side, key):  # expires after
                heappush(heap, (PyLong_FromLongLong(c_ts + c_within), side, key))
            if c_ts > c_max[side]:
                c_max[side] = c_ts
                maxs[side] = ts
                c_cand = _candidate_c(c_max, side, c_ts, c_grace, c_min)
                if c_cand > c_wm:
                    c_wm = c_cand
                    wm_obj = None
                    if unsorted:  # in time order, as the reference sorts them (stable)
                        out[first:] = sorted(out[first:], key=_third)
            idx += 1
    finally:
        progress[0] = wm_obj if wm_obj is not None else PyLong_FromLongLong(c_wm)
        progress[1] = late
        progress[2] = idx
    return out
