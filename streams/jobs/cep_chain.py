"""A ``CepOperator.process`` generated for one pattern: a chain whose conditions are compiled.

A *chain* is ``begin`` then ``followed_by`` stages only (``times(n)`` included; nothing
optional, looping or negated; see ``CepOperator``). When every stage's condition is a
``streams.jobs.conditions.Cond`` (``field("type") == "search"``), ``specialised_process``
writes the Python source of a ``process(key, value, ts)`` for that pattern and compiles it:

- the event's fields are read once (``value.get("type")``), and each condition is an
  expression in the code, not a call per event per run;
- the common case of in-order input — one event released by the watermark, nothing else due
  — is stepped inline (what ``CepOperator.advance`` and ``_chain_one`` do, without their
  calls and table look-ups), a match is built as a dict literal, and, when nothing reads
  ``timed_out()``, the runs' ends that fell due are dropped inline;
- everything else (an event out of order, several released at once, restored state,
  timed-out partials to emit) goes to the operator's own methods, which keep the state in
  the same form: the generated code is only a faster way through the same steps, and the
  operator's tests run both ways (``specialise=False`` turns it off).

``streams/jobs/_cepchain.pyx`` (Cython, built by ``make native``) is the same ``process``
compiled, used when built (``NATIVE``); it tests ``field(name) == constant`` in C. The
operator says which runs in ``CepOperator.specialised`` (``"native"``, ``"python"`` or None)
and keeps the generated source as ``specialised_source`` (for reading and debugging).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from streams.jobs.conditions import Cond, Env, _Compare

if TYPE_CHECKING:
    from streams.jobs.cep import CepOperator

try:  # the same process, compiled (streams/jobs/_cepchain.pyx, built by `make native`)
    from streams.jobs._cepchain import ChainKernel
except ImportError:  # not built: the generated Python
    ChainKernel = None

NATIVE = ChainKernel is not None


def specialisable(op: CepOperator) -> bool:
    """Whether `op` runs a chain whose conditions are all compiled."""
    return op._chain and all(isinstance(u, Cond) for u in op._exprs)


LIMIT = 2**61  # the kernel keeps times, within and out-of-orderness in C below this


def native_kernel(op: CepOperator, none: tuple, python_process: Callable):
    """A ``ChainKernel`` for `op` (``NATIVE`` and ``specialisable(op)`` must hold): the steps
    of ``specialised_process``'s source, compiled; it keeps the operator's clock from then
    on (``CepOperator._clock``)."""
    conds = [u.function() for u in op._exprs if isinstance(u, Cond)]
    eqs = []
    for u in op._exprs:
        simple = (
            isinstance(u, _Compare)
            and u.op == "=="
            and len(u.path) == 1
            and type(u.value) in (str, int)  # equal when identical, as C's test assumes
        )
        eqs.append((u.path[0], u.value) if simple else None)  # type: ignore[union-attr]
    return ChainKernel(op, none, conds, eqs, op._mx, op._wm, python_process)  # type: ignore[misc]


def specialised_process(op: CepOperator, none: tuple) -> tuple[Callable, str]:
    """``(process, its source)`` for `op` (``specialisable(op)`` must hold); `none` is the
    operator's ``(matches, timed out)`` answer for nothing released."""
    env = Env("value")
    exprs = [u.source(env) for u in op._exprs if isinstance(u, Cond)]
    last, within, quiet = op._last, op.within, op._quiet
    names = op._names
    if op._distinct:
        built = "{" + ", ".join(f"{n!r}: [r[{2 + 2 * j}]]" for j, n in enumerate(names)) + "}"
    else:
        built = "chain_value(r)"
    w = within is not None
    lines: list[str] = []
    add = lines.append
    add("def process(key, value, ts):")
    add("    wm = op._wm")
    add("    if ts < wm:")
    add("        op.late_count += 1")
    add("        return NONE")
    add("    mx = op._mx")
    add("    if ts < mx:")
    add("        buffer(key, ts, value)")
    add("        return NONE")
    add("    push((ts, key, value))")
    add("    if ts == mx:")
    add("        return NONE")
    add("    op._mx = ts")
    add(f"    if ts - {op.ooo} <= wm:")
    add("        return NONE")
    add(f"    wm = op._wm = ts - {op.ooo}")
    # the common case: the head of the arrival queue alone is released, and no wake-up is
    # due but (without a timed_out() reader) runs' ends; anything else: advance()
    due_qx = "" if quiet or not w else " or (qx and qx[0][0] <= wm)"
    add(
        "    if pend[0][0] >= wm or (len(pend) > 1 and pend[1][0] < wm)"
        f" or (heap and heap[0][0] <= wm){due_qx}:"
    )
    add("        return advance(wm)")
    add("    ts, key, value = popleft()")
    add("    st = live.get(key)")
    add("    if st is None:")
    add("        raw = store.get((key,))")
    add("        st = live[key] = [[], []] if raw is None else decode(raw)")
    add("    elif st[0]:  # events of the key buffered out of order: the operator's way")
    add("        matches, timeouts = [], []")
    add("        run_key(key, wm, matches, timeouts, [[ts, value]])")
    if quiet and w:
        add("        drain(wm)")
    add("        return (matches or (), timeouts or ()) if matches or timeouts else NONE")
    add(env.prelude("    ").rstrip("\n"))
    add("    runs = st[1]")
    add("    matches = None")
    add("    timeouts = ()")
    add("    if runs:")
    if w:
        add(f"        if runs[0][1] + {within} <= ts:")
        if quiet:
            add("            runs = expired(runs, ts)")
        else:
            add("            timeouts = []")
            add("            runs = chain_expire(key, runs, ts, timeouts)")
    add("        ended = False")
    add("        for r in runs:")
    add("            i = r[0]")
    for i in range(1, last + 1):
        add(f"            {'if' if i == 1 else 'elif'} i == {i}:")
        add(f"                if {exprs[i]}:")
        add("                    r += (ts, value)")
        if i == last:
            add("                    if matches is None:")
            add("                        matches = []")
            add(f"                    matches.append((key, {built}, ts))")
            add("                    r[0] = -1")
            add("                    ended = True")
        else:
            add(f"                    r[0] = {i + 1}")
    add("        if ended:")
    add("            runs = [r for r in runs if r[0] >= 0]")
    add(f"    if {exprs[0]}:")
    add("        runs.append([1, ts, value])")
    if w:
        add(f"        due = ts + {within}")
        add("        if not qx or qx[-1][0] <= due:")
        add("            qpush((due, key))")
        add("        else:")
        add("            ends(due, key)")
        add(f"    if runs and runs[0][1] + {within} <= wm:")
        if quiet:
            add("        runs = expired(runs, wm)")
        else:
            add("        if not timeouts:")
            add("            timeouts = []")
            add("        runs = chain_expire(key, runs, wm, timeouts)")
    add("    st[1] = runs")
    if quiet and w:
        add("    if qx and qx[0][0] <= wm:")
        add("        drain(wm)")
    add("    if matches is None and not timeouts:")
    add("        return NONE")
    add("    return matches or (), timeouts")
    if quiet and w:
        # nothing reads timed-out partials: a run's end only drops it (`_chain_drop`)
        add("")
        add("def expired(runs, now):")
        add("    n = 1")
        add(f"    while n < len(runs) and runs[n][1] + {within} <= now:")
        add("        n += 1")
        add("    return runs[n:]")
        add("")
        add("def drain(wm):")
        add("    while qx and qx[0][0] <= wm:")
        add("        k = qpop()[1]")
        add("        s = live.get(k)")
        add("        if s is None:")
        add("            raw = store.get((k,))")
        add("            if raw is None:")
        add("                continue")
        add("            s = live[k] = decode(raw)")
        add("        rs = s[1]")
        add(f"        if rs and rs[0][1] + {within} <= wm:")
        add("            s[1] = expired(rs, wm)")
    src = "\n".join(lines) + "\n"
    ns: dict[str, object] = dict(env.ns)
    ns.update(
        op=op,
        NONE=none,
        pend=op._pend,
        push=op._pend.append,
        popleft=op._pend.popleft,
        qx=op._qx,
        qpush=op._qx.append,
        qpop=op._qx.popleft,
        heap=op._heap,
        live=op._live,
        store=op.store,
        decode=op._decode,
        buffer=op._buffer,
        advance=op.advance,
        run_key=op._run_key,
        chain_expire=op._chain_expire,
        chain_value=op._chain_value,
        ends=op._ends,
    )
    exec(compile(src, "<cep chain process>", "exec"), ns)  # noqa: S102 - our own source
    return ns["process"], src  # type: ignore[return-value]
