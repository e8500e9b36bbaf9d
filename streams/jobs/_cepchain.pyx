# cython: language_level=3
"""The native ``process`` of a CEP chain with compiled conditions (``streams.jobs.cep_chain``).

The same steps as the Python source ``cep_chain.specialised_process`` writes for a chain —
the same state, kept in the operator's own containers (its arrival queue, wake-up queues,
live keys and store), the same fall-backs to the operator's methods for everything but the
common case — compiled: the interpreter's work per event is gone, only the objects remain.

A stage whose condition is ``field(name) == constant`` (a str or int constant, one level)
is tested in C on a ``dict`` event; any other compiled condition is called (its generated
Python function). Two differences in how, not what: the newest in-order event waits in the
kernel rather than in the arrival queue while that is empty (``unhold`` puts it there before
any of the operator's methods looks), and the lists the kernel builds for its state are not
tracked by the cycle collector (``untracked``). Built by ``make native`` beside its source; without it the generated
Python runs (``cep_chain.NATIVE`` says which).
"""

cimport cython
from cpython.object cimport Py_EQ, PyObject_RichCompareBool


# times (and within, out-of-orderness) the kernel keeps in C: sums of two stay in 64 bits
DEF LIMIT = 2**61
cdef object LOW = -LIMIT, HIGH = LIMIT


cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void *op)


cdef inline list untracked(list state):
    """`state` (a key's state, its runs, a run: lists of our own that no value refers to, so
    they cannot be part of a reference cycle) taken out of the cycle collector's sight: its
    collections would otherwise walk every open run of every key again and again."""
    PyObject_GC_UnTrack(<void *>state)
    return state


@cython.final
cdef class ChainKernel:
    """Also the operator's clock while it runs: the largest event time seen (`mx`) and the
    watermark (`wm`) are C integers here (``CepOperator`` reads them through ``_clock``)."""

    cdef public long long mx, wm
    cdef object op, none
    cdef object pend, qx, store_get
    cdef list heap
    cdef dict live
    cdef object pend_append, pend_popleft, qx_append, qx_popleft
    cdef object decode, buffer, advance, run_key, chain_expire, chain_value, ends
    cdef list conds, eq_names, eq_consts, names
    cdef long long ooo, within
    cdef bint has_within, quiet, distinct
    cdef Py_ssize_t last
    # the newest in-order event, held here rather than in the arrival queue while that is
    # empty (`unhold` puts it there): in order, each event is released by the next one
    cdef bint holding
    cdef long long h_t
    cdef object h_ts, h_key, h_value
    # the generated Python process, which takes over for good at the first time that is not
    # an int within +-2**61 (C's integers would not hold it: see `give_up`)
    cdef object python_process, fallback

    def __init__(self, op, none, conds, eqs, long long mx, long long wm, python_process):
        """`conds`: per stage a function ``(event) -> bool``; `eqs`: per stage ``(field
        name, constant)`` when its condition is ``field(name) == constant``, else None;
        `python_process`: the generated Python (``cep_chain.specialised_process``)."""
        self.op, self.none = op, none
        self.python_process, self.fallback = python_process, None
        self.mx, self.wm = mx, wm
        self.pend, self.qx, self.heap = op._pend, op._qx, op._heap
        self.pend_append, self.pend_popleft = op._pend.append, op._pend.popleft
        self.qx_append, self.qx_popleft = op._qx.append, op._qx.popleft
        self.live, self.store_get = op._live, op.store.get
        self.decode, self.buffer, self.advance = op._decode, op._buffer, op.advance
        self.run_key, self.chain_expire = op._run_key, op._chain_expire
        self.chain_value, self.ends = op._chain_value, op._ends
        self.conds = list(conds)
        self.eq_names = [None if e is None else e[0] for e in eqs]
        self.eq_consts = [None if e is None else e[1] for e in eqs]
        self.names = list(op._names)
        self.distinct = op._distinct
        self.ooo = op.ooo
        self.has_within = op.within is not None
        self.within = op.within if self.has_within else 0
        self.quiet = op._quiet
        self.last = op._last

    cpdef unhold(self):
        """The held event goes to the arrival queue, where the operator's methods look (it is
        empty while one is held). ``CepOperator._unqueue`` calls this first."""
        if self.holding:
            self.holding = False
            self.pend_append((self.h_ts, self.h_key, self.h_value))
            self.h_ts = self.h_key = self.h_value = None

    cdef inline void hold(self, long long t, object ts, object key, object value):
        self.holding = True
        self.h_t, self.h_ts, self.h_key, self.h_value = t, ts, key, value

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef inline bint holds(self, Py_ssize_t i, object value) except -1:
        cdef object name = self.eq_names[i]
        if name is not None and type(value) is dict:
            return PyObject_RichCompareBool((<dict>value).get(name), self.eq_consts[i], Py_EQ)
        return bool(self.conds[i](value))

    cdef list expired(self, list runs, long long now):
        """Runs whose `within` ended at or before `now` leave (the first one has)."""
        cdef Py_ssize_t n = 1, size = len(runs)
        while n < size and <long long>runs[n][1] + self.within <= now:
            n += 1
        return untracked(runs[n:])

    cdef drain(self, long long wm):
        """Without a timed_out() reader a run's end only drops it (``_chain_drop``)."""
        qx = self.qx
        while qx and <long long>qx[0][0] <= wm:
            k = self.qx_popleft()[1]
            s = self.live.get(k)
            if s is None:
                raw = self.store_get((k,))
                if raw is None:
                    continue
                s = self.decode(raw)
                self.live[k] = s
            rs = s[1]
            if rs and <long long>rs[0][1] + self.within <= wm:
                s[1] = self.expired(rs, wm)

    def give_up(self):
        """From now on the generated Python runs (a time C's integers would not hold: a float,
        a bool, a huge int): the held event to the arrival queue, the clock to the operator."""
        op = self.op
        self.unhold()
        op._mx, op._wm = self.mx, self.wm
        op._kernel = None
        op.process = self.fallback = self.python_process
        op.specialised = "python"

    def process(self, key, value, ts):
        if self.fallback is not None or type(ts) is not int or not (LOW < ts < HIGH):
            if self.fallback is None:
                self.give_up()
            return self.fallback(key, value, ts)
        cdef long long t = ts, wm = self.wm, mx = self.mx
        cdef object st, raw, r, matches, timeouts, built
        cdef list runs
        cdef Py_ssize_t i, j
        cdef bint ended
        if t < wm:
            self.op.late_count += 1
            return self.none
        if t < mx:
            self.buffer(key, ts, value)
            return self.none
        pend, qx, heap = self.pend, self.qx, self.heap
        if t == mx:
            self.unhold()
            self.pend_append((ts, key, value))
            return self.none
        self.mx = t
        if t - self.ooo <= wm:  # nothing released
            if self.holding or pend:
                self.unhold()
                self.pend_append((ts, key, value))
            else:
                self.hold(t, ts, key, value)
            return self.none
        wm = self.wm = t - self.ooo
        if (
            self.holding
            and self.h_t < wm
            and not (heap and <long long>heap[0][0] <= wm)
            and not (not self.quiet and self.has_within and qx and <long long>qx[0][0] <= wm)
        ):  # the common case: the held event alone is released, the new one held
            t, ts, key, value, self.h_t, self.h_ts, self.h_key, self.h_value = (
                self.h_t, self.h_ts, self.h_key, self.h_value, t, ts, key, value
            )
        else:
            self.unhold()
            self.pend_append((ts, key, value))
            if (
                <long long>pend[0][0] >= wm
                or (len(pend) > 1 and <long long>pend[1][0] < wm)
                or (heap and <long long>heap[0][0] <= wm)
                or (not self.quiet and self.has_within and qx and <long long>qx[0][0] <= wm)
            ):
                return self.advance(wm)
            ts, key, value = self.pend_popleft()
            t = ts
            if len(pend) == 1:  # the new event alone waits: held from now on
                h = self.pend_popleft()
                self.hold(h[0], h[0], h[1], h[2])
        live = self.live
        st = live.get(key)
        if st is None:
            raw = self.store_get((key,))
            st = untracked([untracked([]), untracked([])]) if raw is None else self.decode(raw)
            live[key] = st
        elif st[0]:  # events of the key buffered out of order: the operator's way
            matches, timeouts = [], []
            self.run_key(key, wm, matches, timeouts, [[ts, value]])
            if self.quiet and self.has_within:
                self.drain(wm)
            if matches or timeouts:
                return (matches or (), timeouts or ())
            return self.none
        runs = st[1]
        matches = None
        timeouts = ()
        if runs:
            if self.has_within and <long long>runs[0][1] + self.within <= t:
                if self.quiet:
                    runs = self.expired(runs, t)
                else:
                    timeouts = []
                    runs = self.chain_expire(key, runs, ts, timeouts)
            ended = False
            for r in runs:
                i = r[0]
                if not self.holds(i, value):
                    continue
                r.append(ts)
                r.append(value)
                if i == self.last:
                    if self.distinct:
                        built = {}
                        for j in range(self.last + 1):
                            built[self.names[j]] = [r[2 + 2 * j]]
                    else:
                        built = self.chain_value(r)
                    if matches is None:
                        matches = []
                    matches.append((key, built, ts))
                    r[0] = -1
                    ended = True
                else:
                    r[0] = i + 1
            if ended:
                runs = untracked([r for r in runs if r[0] >= 0])
        if self.holds(0, value):
            runs.append(untracked([1, ts, value]))
            if self.has_within:
                due = t + self.within
                if not qx or <long long>qx[len(qx) - 1][0] <= due:
                    self.qx_append((due, key))
                else:
                    self.ends(due, key)
        if self.has_within and runs and <long long>runs[0][1] + self.within <= wm:
            if self.quiet:
                runs = self.expired(runs, wm)
            else:
                if not timeouts:
                    timeouts = []
                runs = self.chain_expire(key, runs, wm, timeouts)
        st[1] = runs
        if self.quiet and self.has_within and qx and <long long>qx[0][0] <= wm:
            self.drain(wm)
        if matches is None and not timeouts:
            return self.none
        return (matches if matches is not None else (), timeouts)
