# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The compiled loops of an inner interval join (``streams.jobs.joins``).

``inner_batch`` has the contract of the pure-Python loop of ``IntervalJoin.process_many`` for
``how="inner"``, and ``expire_inner`` that of ``IntervalJoin._expire`` for an inner join (the
Python loops stay the reference, and run whenever this module is not built or the join is a
left join): the same emissions in the same order, the same state, heap, late count and
watermark, and on a joiner's error the index of the failing item. Same algorithm, compiled:
no bytecode dispatch per record, the stores' ``get`` and the heap calls made directly.
Timestamps stay Python integers (a user's timestamp extractor may give any integer). What
it saves is modest (about 15 % of the join's own time, measured: the stores' Python methods
and the joiner stay Python calls).

A property test (tests/jobs/test_joins_native.py) holds the two to the same answers.
"""

from bisect import bisect_left, bisect_right
from heapq import heappop, heappush
from operator import itemgetter

from cpython.list cimport PyList_Append

cdef object _first = itemgetter(0)


def inner_batch(
    list items, object lstore, object rstore, object within, object joiner, list maxs,
    list heap, tuple unordered, Py_ssize_t scan_max, object grace, object min_time,
    list progress,
):
    """Process `items` (``(side, (key, value, ts, origin))``) into `lstore`/`rstore`;
    returns the emissions ``(key, value, ts, origin)``. `maxs` (each side's largest time),
    `heap` and `unordered` are updated in place, as is `progress`: ``[watermark, late
    records, index of the item being processed]`` (on an exception, the failing one)."""
    cdef list out = []
    cdef list mine_out
    cdef list other, other_in, mine
    cdef Py_ssize_t n = len(items), idx = 0, late = 0, i
    cdef int side
    cdef bint matched, changed
    cdef object item, rec, key, value, ts, origin, e, lo, hi, o, cand, others, mine_store
    cdef set unordered_other
    cdef tuple stores = (lstore, rstore)
    cdef object wm = progress[0]
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
            others = stores[1 - side]
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
                    if lo <= (<list>e)[0] <= hi:
                        matched = True
                        if not (<list>e)[2]:
                            (<list>e)[2] = True
                            changed = True
                        if side == 0:
                            v = joiner(value, (<list>e)[1])
                        else:
                            v = joiner((<list>e)[1], value)
                        o = (<list>e)[0]
                        PyList_Append(mine_out, (key, v, ts if ts > o else o, origin))
                if changed:
                    others[key] = other  # tell a changelogged store
            mine_store = stores[side]
            mine = mine_store.get(key)
            if mine is None:
                mine_store[key] = [[ts, value, matched]]
            else:
                if mine and ts < (<list>mine[len(mine) - 1])[0]:
                    (<set>unordered[side]).add(key)
                PyList_Append(mine, [ts, value, matched])
                mine_store[key] = mine
            heappush(heap, (ts + within, side, key))
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


cdef object _third = itemgetter(2)


def expire_inner(list heap, object lstore, object rstore, object within, object wm,
                 tuple unordered):
    """An inner join's expiry (``IntervalJoin._expire`` with nothing to emit): every entry
    with ``ts + within < wm`` leaves its key's list, a key left empty leaves its store."""
    cdef set touched = set()
    cdef tuple top, stores = (lstore, rstore)
    cdef list entries, keep
    cdef object store, e, key
    cdef int side
    while heap and (<tuple>heap[0])[0] < wm:
        top = heappop(heap)
        touched.add((top[1], top[2]))
    for top in touched:
        side = top[0]
        key = top[1]
        store = stores[side]
        entries = store.get(key)
        if not entries:
            continue
        keep = []
        for e in entries:
            if not ((<list>e)[0] + within < wm):
                PyList_Append(keep, e)
        if keep:
            store[key] = keep
        else:
            del store[key]
            (<set>unordered[side]).discard(key)
