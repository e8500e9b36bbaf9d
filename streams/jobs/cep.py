"""Complex event processing: patterns over a keyed stream, in the shape of Flink CEP.

::

    from streams.jobs import field

    pattern = (Pattern.begin("search", where=field("type") == "search")
               .followed_by("click", where=lambda e, m: e["type"] == "click"
                                                 and e["q"] == m["search"][0]["q"])
               .not_followed_by("order", where=field("type") == "order")
               .within(600_000))
    matches = events.key_by("user").match(pattern, out_of_orderness_ms=5_000)
    matches.to("abandoned")
    matches.timed_out().to("abandoned-partial")

A pattern is a sequence of *stages*. Each has a name and a condition ``where(event)`` or
``where(event, matched)``, where ``matched`` maps the names of the stages matched so far to
the lists of their events (in the order taken). Conditions must be pure functions of their
arguments (they are evaluated again after a restart, on restored state). Positive stages take
one event each (more with ``times`` / ``one_or_more``); ``not_next`` / ``not_followed_by``
stages are negations that take none.

**Write conditions on the event alone as compiled conditions** (``streams.jobs.conditions``):
``field("type") == "search"``, ``(field("type") == "click") & (field("price") >= 100)``,
``field("type").isin([...])``, ``~``, ``|``. They mean what the Python function would (a
missing field reads as ``None``), and the operator can read them: a *chain* (``begin`` then
``followed_by`` stages, ``times(n)`` included) whose conditions are all compiled runs a
matcher generated for it (``streams.jobs.cep_chain``): the conditions are written into its
code, no function is called per event per partial match. Use a Python function for what they cannot
say (a condition on the events matched so far, as ``click`` above); any pattern may mix both.

Semantics (per key; ``E`` = the key's events in event-time order, see "Order" below). A
**match** assigns to each positive stage an event of ``E`` (or, for an ``optional()``
stage, possibly none), at increasing positions, such that:

- each assigned event satisfies its stage's condition given the events assigned before it;
- ``begin``: any event may start a match (so matches may overlap: **no skip** after a
  match — Flink's ``AfterMatchSkipStrategy.noSkip()`` — every match is emitted);
- ``next`` (strict contiguity): the stage's event immediately follows the previous
  assigned event in ``E``;
- ``followed_by`` (relaxed contiguity, Flink's *skip till next match*): the stage's event is
  the *first* event after the previous assigned event that satisfies the stage's condition
  (events in between that do not satisfy it are ignored);
- ``optional()``: the stage may be left out; contiguity then refers to the previous
  *assigned* event;
- ``not_next(name, where)``: the event immediately after the previous assigned event does
  not satisfy ``where`` (if there is such an event);
- ``not_followed_by(name, where)``: no event strictly between the previous assigned event
  and the next assigned one satisfies ``where``; as the last stage (which needs ``within``)
  no event after the last assigned one and less than ``within`` after the first does;
- ``times(n)``: the stage takes `n` events: the first with the stage's contiguity, each
  further one the first event after the previous that satisfies the condition (relaxed
  internal contiguity, Flink's default) — exactly as `n` copies of the stage chained with
  ``followed_by``; its events are listed together under its name;
- ``one_or_more()``: the stage takes 1, 2, ... events, each further one as in ``times``; a
  match is made for every count (``a b+`` over ``a1 b2 b3`` gives ``{a1 b2}`` and
  ``{a1 b2 b3}``; ``a b+ c`` over ``a1 b2 x3 b4 c5`` gives ``{a1 b2 c5}`` and
  ``{a1 b2 b4 c5}``, not ``{a1 b4 c5}``: b2 was the first b). ``one_or_more().optional()``
  is zero or more;
- ``within(ms)``: every assigned event is less than ``ms`` after the first
  (``ts - first.ts < ms``, Flink's rule).

A match is emitted as ``(key, {stage name: [event, ...]}, ts of its last event)`` (a stage
left out has no entry), when its last event is processed, or — ending in
``not_followed_by`` — when the watermark passes ``first.ts + within``. With ``timed_out()``,
a *partial* match (begun, not complete) whose ``within`` expires is emitted there as
``{stage name: [events]}`` at ``first.ts + within - 1``; partial matches that can no longer
complete for other reasons (a negation, a missed strict ``next``) are dropped silently, and a
run ending in ``one_or_more()`` that has matched never times out (it just stops growing).
Without ``within`` partial matches are kept for ever: give a ``within``.

Order: events are buffered in state until the watermark passes them, then processed in
``(ts, canonical JSON of the value)`` order, so the result does not depend on arrival
order. The watermark (one per task, as windows) is the largest event time seen minus
``out_of_orderness_ms``; an event is released once ``ts < watermark``, and an event that
arrives with ``ts < watermark`` is **late**: counted and dropped. ``flush`` (end of a
bounded input) releases everything, then emits pending ``not_followed_by`` matches and
times out what is left.

Not supported (yet): skip strategies other than no-skip; ``optional()`` on the first or last
stage, before a negation or after ``times``; a negation right after ``one_or_more()``;
``consecutive()`` / ``allow_combinations()`` / ``until()`` / ``greedy()`` for looping stages.

State (a changelogged store, restored after a restart): ``(key,) -> [buffered events,
partial matches]`` (one entry per key with either; see ``CepOperator``), ``("__wm__", 0) ->
[largest event time seen, watermark]``, written by ``CepOperator.sync()`` before each commit.

Thread-safety: none; a task drives its operators from one thread.
"""

from __future__ import annotations

import heapq
import inspect
import json
from collections import deque
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, replace

from streams.errors import InvalidConfig
from streams.jobs.cep_chain import (
    LIMIT,
    NATIVE,
    native_kernel,
    specialisable,
    specialised_process,
)
from streams.jobs.conditions import Cond

Out = list[tuple[object, object, int]]  # returned as () when empty
MIN_TIME = -(2**63)
_WM = ("__wm__", 0)  # never a (key,) entry
_INF = 2**62
_NOTHING: dict = {}  # `matched` for patterns whose conditions all ignore it
_NONE: tuple = ((), ())  # (matches, timed out) when an event releases nothing


@dataclass(frozen=True)
class Stage:
    name: str
    cond: Callable[[object, dict], bool]
    kind: str  # "begin" | "next" | "followed_by" | "not_next" | "not_followed_by"
    optional: bool = False
    loop: bool = False  # one_or_more()
    uses_matched: bool = True  # where(event, matched)

    @property
    def negative(self) -> bool:
        return self.kind.startswith("not_")


def _two(where: Callable) -> bool:
    """Whether `where` takes ``(event, matched)`` rather than ``(event)``."""
    try:
        params = [
            p
            for p in inspect.signature(where).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):  # builtins without a signature
        return False
    return len(params) >= 2


def _condition(where: Callable) -> Callable[[object, dict], bool]:
    if isinstance(where, Cond):  # compiled: its function on the hot path, itself kept
        fn = where.function()

        def compiled(e, _m):
            return fn(e)

        compiled.__wrapped__ = fn  # type: ignore[attr-defined]
        compiled.cond_expr = where  # type: ignore[attr-defined]
        return compiled
    if not callable(where):
        raise InvalidConfig("where", where, "must be a function of (event) or (event, matched)")
    if _two(where):
        return where

    def one(e, _m):
        return where(e)

    one.__wrapped__ = where  # type: ignore[attr-defined]  # called directly on the hot path
    return one


class Pattern:
    """An immutable pattern; each method returns a new one (see the module docstring)."""

    def __init__(self, stages: tuple[Stage, ...], within_ms: int | None = None):
        self.stages, self.within_ms = stages, within_ms

    @classmethod
    def begin(cls, name: str, where: Callable = lambda e: True) -> Pattern:
        return cls((Stage(_name(name), _condition(where), "begin", uses_matched=_two(where)),))

    def _add(self, name: str, where: Callable, kind: str) -> Pattern:
        name = _name(name)
        if any(s.name == name for s in self.stages):
            raise InvalidConfig("name", name, "the pattern already has a stage so named")
        if kind.startswith("not_") and self.stages[-1].loop:
            raise InvalidConfig(name, kind, "a negation cannot follow one_or_more()")
        if kind.startswith("not_") and self.stages[-1].optional:
            raise InvalidConfig(name, kind, "a negation cannot follow an optional stage")
        if kind.startswith("not_") and self.stages[-1].negative:
            raise InvalidConfig(name, kind, "two negations in a row are not supported")
        stage = Stage(name, _condition(where), kind, uses_matched=_two(where))
        return Pattern((*self.stages, stage), self.within_ms)

    def next(self, name: str, where: Callable = lambda e: True) -> Pattern:
        return self._add(name, where, "next")

    def followed_by(self, name: str, where: Callable = lambda e: True) -> Pattern:
        return self._add(name, where, "followed_by")

    def not_next(self, name: str, where: Callable) -> Pattern:
        return self._add(name, where, "not_next")

    def not_followed_by(self, name: str, where: Callable) -> Pattern:
        return self._add(name, where, "not_followed_by")

    def optional(self) -> Pattern:
        last = self.stages[-1]
        if last.kind == "begin" or last.negative:
            raise InvalidConfig("optional", last.name, "the first stage and negations are required")
        if self._repeated():
            raise InvalidConfig("optional", last.name, "optional() after times() is not supported")
        stages = (*self.stages[:-1], replace(last, optional=True))
        return Pattern(stages, self.within_ms)

    def _repeated(self) -> bool:
        return len(self.stages) > 1 and self.stages[-2].name == self.stages[-1].name

    def _quantifiable(self, what: str) -> Stage:
        last = self.stages[-1]
        if last.negative or last.loop or last.optional or self._repeated():
            raise InvalidConfig(
                what, last.name, "applies once, to a positive stage, before optional()"
            )
        return last

    def times(self, n: int) -> Pattern:
        """The last stage takes exactly `n` events (see the module docstring)."""
        last = self._quantifiable("times")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidConfig("times", n, "must be a whole number >= 1")
        copy = replace(last, kind="followed_by")
        return Pattern((*self.stages, *[copy] * (n - 1)), self.within_ms)

    def one_or_more(self) -> Pattern:
        """The last stage takes one event or more (see the module docstring)."""
        last = self._quantifiable("one_or_more")
        stages = (*self.stages[:-1], replace(last, loop=True))
        return Pattern(stages, self.within_ms)

    def within(self, ms: int) -> Pattern:
        if isinstance(ms, bool) or not isinstance(ms, int) or ms <= 0:
            raise InvalidConfig("within", ms, "must be a positive whole number of milliseconds")
        return Pattern(self.stages, ms)

    def check(self) -> None:
        """Raise ``InvalidConfig`` for a pattern that cannot be run."""
        last = self.stages[-1]
        if last.optional:
            raise InvalidConfig("optional", last.name, "the last stage cannot be optional")
        if last.negative and (last.kind == "not_next" or self.within_ms is None):
            raise InvalidConfig(
                last.name, last.kind, "a pattern may end with not_followed_by only with within()"
            )

    @property
    def positives(self) -> list[int]:
        return [i for i, s in enumerate(self.stages) if not s.negative]


def _name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidConfig("name", name, "a stage needs a non-empty name")
    return name


def _ts(event: list) -> int:
    return event[0]


def _order(event: list) -> tuple:
    return (event[0], json.dumps(event[1], sort_keys=True, separators=(",", ":")))


class CepOperator:
    """Runs one pattern over keyed events; state in `store` (any ``MutableMapping``).

    A key's state is ``[buffered events, partial matches ("runs")]``, each buffered event
    ``[ts, value]``. A run of a *chain* pattern (``begin`` then ``followed_by`` stages only:
    nothing optional, looping or negated; ``times(n)`` included) is ``[index of the stage it
    waits for, ts, value, ts, value, ...]`` (the events it took, the first one's time first):
    it has one open stage and no guards, so it takes the event in place or ignores it. Any
    other pattern's run is ``{"s": first ts, "t": [[stage index, event], ...], "o": [open
    stage indices; ``~i``: one more event for looping stage i], "f": fresh (no event seen
    since its last take), "g": [active negation stage indices], "p": pending (complete but
    for a trailing not_followed_by)}``, plus ``"d": 1`` once a run ending in
    ``one_or_more()`` has matched (it may still grow; it never times out). A key's runs are
    kept in order of their first event's time (new runs start at the latest time), so the
    ones `within` expires are a prefix.

    Speed (``make bench BENCH=cep``):

    - the pattern is compiled once into per-stage tables (condition, taking ``(event)`` or
      ``(event, matched)``; strictness; the options and negations after each stage), so
      stepping a run is table look-ups and condition calls;
    - the states of the keys touched since the last ``sync()`` are kept in a dict of their
      own and written to `store` only by ``sync()`` (the job calls it before each commit),
      once per key, not once per event: the store sees what it would have seen, one commit
      at a time;
    - an event that arrives in order (``ts`` >= the largest time seen) waits in one arrival
      queue ``(ts, key, value)``, released from its head as the watermark passes; only at
      ``sync()`` do the events still waiting move into their keys' states. Events that
      arrive out of order go to their key's state at once, with a wake-up on a heap;
    - runs' ends are wake-ups ``(due, key)`` in a queue while they come in time order (a
      heap otherwise); the common case — one event released, nothing else due — is stepped
      without sorting keys, and for a chain without ``timed_out()`` consumer the runs'
      ends, which then emit nothing, just drop the runs;
    - ``timeouts=False`` (a ``.match`` with no ``timed_out()`` consumer) skips building the
      timed-out partial matches nobody reads; runs still end at the same time;
    - a chain whose conditions are all compiled (``field("type") == "search"``) gets a
      ``process`` made for it (``streams.jobs.cep_chain``: compiled by Cython when built,
      else generated Python; ``specialise="python"`` asks for the latter, ``False`` keeps
      the general one): the same state, the same steps, without the calls.
    """

    def __init__(
        self,
        pattern: Pattern,
        *,
        out_of_orderness_ms: int = 0,
        store: MutableMapping | None = None,
        timeouts: bool = True,
        specialise: bool | str = True,
    ):
        pattern.check()
        if isinstance(out_of_orderness_ms, bool) or not isinstance(out_of_orderness_ms, int):
            raise InvalidConfig("out_of_orderness_ms", out_of_orderness_ms, "must be ms")
        if out_of_orderness_ms < 0:
            raise InvalidConfig("out_of_orderness_ms", out_of_orderness_ms, "must be >= 0")
        self.pattern, self.ooo = pattern, out_of_orderness_ms
        self.stages = pattern.stages
        self._uses_matched = any(s.uses_matched for s in self.stages)
        self.within = pattern.within_ms
        self.store = store if store is not None else {}
        self.timeouts = timeouts
        self.late_count = 0
        # compiled tables, by stage index
        self._conds = [s.cond for s in self.stages]
        self._unary = [getattr(s.cond, "__wrapped__", None) for s in self.stages]
        self._exprs = [getattr(s.cond, "cond_expr", None) for s in self.stages]  # compiled
        self._strict = [s.kind == "next" for s in self.stages]
        self._names = [s.name for s in self.stages]
        self._distinct = len(set(self._names)) == len(self._names)
        self._after: dict[int, tuple[list[int], list[int]]] = {}
        for i in range(len(self.stages)):
            self._after[i] = self._options(i)
        # a new run from stage 0 can be built inline: more stages follow, no loop on stage 0
        self._simple_start = bool(self._after[0][0]) and not self.stages[0].loop
        self._chain = len(self.stages) > 1 and all(
            s.kind == ("begin" if i == 0 else "followed_by") and not s.optional and not s.loop
            for i, s in enumerate(self.stages)
        )
        self._last = len(self.stages) - 1
        # events that arrived in order, (ts, key, value), not yet in their keys' states
        self._pend: deque[tuple[int, object, object]] = deque()
        # wake-ups (due, key): of runs' ends while they come in order; of everything else
        # (events buffered out of order, restored state; a heap)
        self._qx: deque[tuple[int, object]] = deque()
        # a chain's runs' ends emit nothing when nobody reads the timed-out partial matches
        self._quiet = self._chain and not timeouts
        # the lists the next matches and timed-out partials go to (new ones once returned)
        self._m: Out = []
        self._t: Out = []
        self._heap: list[tuple[int, int, object]] = []
        self._seq = 0
        # key -> [buffer, runs]: the keys touched since the last sync (their state is here,
        # not yet in the store)
        self._live: dict[object, list] = {}
        self._mx, self._wm = self.store.get(_WM) or [MIN_TIME, MIN_TIME]
        scan = getattr(self.store, "scan", self.store.items)
        for skey, st in scan():
            if skey != _WM:
                self._schedule(skey[0], self._decode(st))
        # a chain of compiled conditions: a process() made for it (``cep_chain``)
        self.specialised: str | None = None
        self.specialised_source: str | None = None
        self._kernel = None  # the native kernel, which then keeps the clock (_clock)
        if specialise and specialisable(self):
            process, self.specialised_source = specialised_process(self, _NONE)
            self.specialised = "python"
            if (
                NATIVE
                and specialise != "python"
                and (self.within or 0) < LIMIT
                and self.ooo < LIMIT
                and type(self._mx) is int  # restored: a float time keeps the Python
                and (self._mx == MIN_TIME or -LIMIT < self._mx < LIMIT)
            ):
                self._kernel = native_kernel(self, _NONE, process)
                process, self.specialised = self._kernel.process, "native"
            self.process = process  # type: ignore[method-assign]

    # -------------------------------------------------------------- structure

    def _options(self, i: int) -> tuple[list[int], list[int]]:
        """After taking stage `i`: the stages the next take may be (an optional stage and
        what follows it), and the negations then active."""
        opts: list[int] = []
        guards: list[int] = []
        j = i + 1
        while j < len(self.stages):
            s = self.stages[j]
            if s.negative:
                guards.append(j)
            else:
                opts.append(j)
                if not s.optional:
                    break
            j += 1
        return opts, guards

    def _decode(self, st: object) -> list:
        """A key's stored state as ``[buffer, runs]`` (also from the ``{"b", "r"}`` dicts
        written before runs of chains were compacted)."""
        if isinstance(st, dict):
            buf, runs = st["b"], st["r"]
            if self._chain:
                runs = [[r["o"][0], *(x for _, e in r["t"] for x in e)] for r in runs]
            return [buf, runs]
        return st  # type: ignore[return-value]

    # -------------------------------------------------------------- time

    @property
    def watermark(self) -> int | None:
        wm = self._clock()[1]
        return None if wm == MIN_TIME else wm

    def _clock(self) -> tuple[int, int]:
        """(largest event time seen, watermark): the native kernel's while it runs."""
        k = self._kernel
        return (self._mx, self._wm) if k is None else (k.mx, k.wm)

    def sync(self) -> None:
        """Write the state of the keys touched since the last sync, and the watermark, to the
        store (before the store is snapshotted)."""
        self._unqueue()
        store = self.store
        for key, st in self._live.items():
            skey = (key,)
            if st[0] or st[1]:
                store[skey] = st
            elif skey in store:
                del store[skey]
        self._live.clear()
        mx, wm = self._clock()
        if mx != MIN_TIME:
            store[_WM] = [mx, wm]

    def process(self, key: object, value: object, ts: int) -> tuple[Out, Out]:
        """Add one event; returns ``(matches, timed out)`` released by it."""
        wm = self._wm
        if ts < wm:
            self.late_count += 1
            return _NONE
        if ts >= self._mx:  # in order: it waits in the arrival queue
            pend = self._pend
            pend.append((ts, key, value))
            if ts > self._mx:
                self._mx = ts
                if ts - self.ooo > wm:
                    wm = self._wm = ts - self.ooo
                    if self._quiet and pend[0][0] < wm and pend[1][0] >= wm:
                        heap = self._heap
                        if not heap or heap[0][0] > wm:
                            # `advance`'s common case for a chain without timed_out()
                            # consumer, inlined: one event released, no timed-out partials
                            ts, key, value = pend.popleft()
                            matches = self._m
                            self._chain_one(key, ts, value, wm, matches, self._t)
                            qx = self._qx
                            while qx and qx[0][0] <= wm:
                                self._chain_drop(qx.popleft()[1], wm)
                            if not matches:
                                return _NONE
                            self._m = []
                            return matches, ()
                    return self.advance(wm)
            return _NONE
        self._buffer(key, ts, value)
        return _NONE

    def _buffer(self, key: object, ts: int, value: object) -> None:
        """`key`'s event waits in the key's state, with a wake-up when the watermark passes."""
        st = self._live.get(key)
        if st is None:
            raw = self.store.get((key,))
            st = self._live[key] = [[], []] if raw is None else self._decode(raw)
        st[0].append([ts, value])
        self._seq += 1
        heapq.heappush(self._heap, (ts + 1, self._seq, key))

    def _unqueue(self) -> None:
        """The events waiting in the arrival queue go to their keys' states (which the store
        holds; the native kernel's held event first)."""
        if self._kernel is not None:
            self._kernel.unhold()
        for ts, key, value in self._pend:
            self._buffer(key, ts, value)
        self._pend.clear()

    def _schedule(self, key: object, st: list) -> None:
        """Wake-ups for a restored key: each buffered event, each run's end."""
        for e in st[0]:
            self._seq += 1
            heapq.heappush(self._heap, (e[0] + 1, self._seq, key))
        if self.within is not None:
            for r in st[1]:
                self._seq += 1
                start = r[1] if self._chain else r["s"]
                heapq.heappush(self._heap, (start + self.within, self._seq, key))

    def advance(self, wm: int) -> tuple[Out, Out]:
        """Release the events before `wm` and expire what `wm` passed, key by key (in the
        order of ``repr(key)``)."""
        pend, qx, heap = self._pend, self._qx, self._heap
        if (
            pend
            and pend[0][0] < wm
            and (len(pend) == 1 or pend[1][0] >= wm)
            and not (heap and heap[0][0] <= wm)
            and (self._quiet or not (qx and qx[0][0] <= wm))
        ):  # one event released, no other due but runs' ends that emit nothing: the common
            # case of in-order input
            ts, key, value = pend.popleft()
            matches, timeouts = self._m, self._t
            if self._chain:
                self._chain_one(key, ts, value, wm, matches, timeouts)
                while qx and qx[0][0] <= wm:
                    self._chain_drop(qx.popleft()[1], wm)
            else:
                self._run_key(key, wm, matches, timeouts, [[ts, value]])
            if not matches and not timeouts:
                return _NONE
            if matches:
                self._m = []
            if timeouts:
                self._t = []
            return matches or (), timeouts or ()
        keys: dict = {}
        while pend and pend[0][0] < wm:
            ts, key, value = pend.popleft()
            got = keys.get(key)
            if got is None:
                keys[key] = [[ts, value]]
            else:
                got.append([ts, value])
        while qx and qx[0][0] <= wm:
            keys.setdefault(qx.popleft()[1], None)
        while heap and heap[0][0] <= wm:
            keys.setdefault(heapq.heappop(heap)[2], None)
        if not keys:
            return _NONE
        matches = []
        timeouts = []
        for k in sorted(keys, key=repr) if len(keys) > 1 else keys:
            self._run_key(k, wm, matches, timeouts, keys[k])
        return matches, timeouts

    def _ends(self, due: int, key: object) -> None:
        """A wake-up when a run's `within` ends."""
        qx = self._qx
        if not qx or qx[-1][0] <= due:
            qx.append((due, key))
        else:
            self._seq += 1
            heapq.heappush(self._heap, (due, self._seq, key))

    def flush(self) -> tuple[Out, Out]:
        """End of a bounded input: everything is released, then time runs out."""
        matches: Out = []
        timeouts: Out = []
        self._unqueue()
        keys = {repr(k[0]): k[0] for k in list(self.store.keys()) if k != _WM}
        keys.update((repr(k), k) for k in self._live)
        for rk in sorted(keys):
            self._run_key(keys[rk], _INF, matches, timeouts)
        for k in list(self.store.keys()):
            del self.store[k]
        self._live.clear()
        self._qx.clear()
        self._heap.clear()
        self._mx = self._wm = MIN_TIME
        if self._kernel is not None:
            self._kernel.mx = self._kernel.wm = MIN_TIME
        return matches, timeouts

    # -------------------------------------------------------------- matching

    def _run_key(
        self, key: object, wm: int, matches: Out, timeouts: Out, queued: list | None = None
    ) -> None:
        """Release `key`'s events before `wm` (those in its state and `queued`, from the
        arrival queue, in time order), expire its runs."""
        st = self._live.get(key)
        if st is None:
            raw = self.store.get((key,))
            if raw is not None:
                st = self._live[key] = self._decode(raw)
            elif queued:
                st = self._live[key] = [[], []]
            else:
                return
        buf, runs = st
        within = self.within
        ready: list
        if buf:
            ready = [e for e in buf if e[0] < wm]
            st[0] = [e for e in buf if e[0] >= wm] if len(ready) < len(buf) else []
            if queued:
                ready += queued
            if len(ready) > 1:
                ready.sort(key=_ts)
        else:
            ready = queued or []
        if len(ready) > 1 and any(a[0] == b[0] for a, b in zip(ready, ready[1:], strict=False)):
            ready.sort(key=_order)  # ties: by value
        if ready:
            if self._chain:
                runs = self._chain_steps(key, runs, ready, matches, timeouts)
            else:
                for ts, value in ready:
                    if runs and within is not None and runs[0]["s"] + within <= ts:
                        runs = self._expire(key, runs, ts, matches, timeouts)
                    runs = self._step(key, runs, ts, value, matches)
        if runs:
            if within is not None:
                if (runs[0][1] if self._chain else runs[0]["s"]) + within <= wm:
                    if self._chain:
                        runs = self._chain_expire(key, runs, wm, timeouts)
                    else:
                        runs = self._expire(key, runs, wm, matches, timeouts)
            elif wm >= _INF:
                runs = self._end(key, runs, matches, timeouts)
        st[1] = runs

    # chains ---------------------------------------------------------------

    def _chain_value(self, run: list) -> dict:
        """A chain's run ``[stage it waits for, ts, value, ts, value, ...]`` as a match."""
        if self._distinct:
            return {n: [v] for n, v in zip(self._names, run[2::2], strict=False)}
        out: dict[str, list] = {}
        for n, v in zip(self._names, run[2::2], strict=False):
            out.setdefault(n, []).append(v)
        return out

    def _chain_expire(self, key, runs: list, now: int, timeouts: Out) -> list:
        """Runs (of a chain) whose `within` ends at or before `now` leave, timed out."""
        within = self.within
        n = 0
        for r in runs:
            if r[1] + within > now:
                break
            if self.timeouts:
                timeouts.append((key, self._chain_value(r), r[1] + within - 1))
            n += 1
        return runs[n:]

    def _chain_drop(self, key: object, wm: int) -> None:
        """A chain's wake-up when nobody reads timed-out partial matches: the runs of `key`
        whose `within` ended leave (nothing is emitted, so keys need no order). Only called
        when no event of `key` before `wm` is left to release."""
        st = self._live.get(key)
        if st is None:
            raw = self.store.get((key,))
            if raw is None:
                return
            st = self._live[key] = self._decode(raw)
        runs = st[1]
        if runs and runs[0][1] + self.within <= wm:  # type: ignore[operator]
            st[1] = self._chain_expire(key, runs, wm, [])

    def _chain_one(self, key, ts: int, value, wm: int, matches: Out, timeouts: Out) -> None:
        """`_run_key` for one event of a chain's key and nothing else of the key's released
        (the common case, inlined: the same steps as `_chain_steps`)."""
        st = self._live.get(key)
        if st is None:
            raw = self.store.get((key,))
            st = self._live[key] = [[], []] if raw is None else self._decode(raw)
        elif st[0]:  # events buffered out of order: the general way
            self._run_key(key, wm, matches, timeouts, [[ts, value]])
            return
        runs = st[1]
        within = self.within
        if runs:
            if within is not None and runs[0][1] + within <= ts:
                runs = self._chain_expire(key, runs, ts, timeouts)
            unary = self._unary
            ended = False
            for r in runs:
                i = r[0]
                f = unary[i]
                if not (
                    f(value)
                    if f is not None
                    else self._conds[i](
                        value, self._chain_value(r) if self._uses_matched else _NOTHING
                    )
                ):
                    continue
                r += (ts, value)
                if i == self._last:
                    matches.append((key, self._chain_value(r), ts))
                    r[0] = -1
                    ended = True
                else:
                    r[0] = i + 1
            if ended:
                runs = [r for r in runs if r[0] >= 0]
        f = self._unary[0]
        if f(value) if f is not None else self._conds[0](value, {}):
            runs.append([1, ts, value])
            if within is not None:
                due = ts + within
                qx = self._qx
                if not qx or qx[-1][0] <= due:
                    qx.append((due, key))
                else:
                    self._ends(due, key)
        if runs and within is not None and runs[0][1] + within <= wm:
            runs = self._chain_expire(key, runs, wm, timeouts)
        st[1] = runs

    def _chain_steps(self, key, runs: list, ready, matches: Out, timeouts: Out) -> list:
        """The same rules as `_step`, for runs whose only option is their next stage (relaxed
        contiguity): each takes the event (and moves on, or matches) or ignores it."""
        unary, conds, last, within = self._unary, self._conds, self._last, self.within
        first = unary[0]
        for ts, value in ready:
            if runs:
                if within is not None and runs[0][1] + within <= ts:
                    runs = self._chain_expire(key, runs, ts, timeouts)
                ended = False
                for r in runs:
                    i = r[0]
                    f = unary[i]
                    if not (
                        f(value)
                        if f is not None
                        else conds[i](
                            value, self._chain_value(r) if self._uses_matched else _NOTHING
                        )
                    ):
                        continue
                    # (a run too old to take it has just expired: ts - first ts < within)
                    r += (ts, value)  # a chain never branches: the run is its own
                    if i == last:
                        matches.append((key, self._chain_value(r), ts))
                        r[0] = -1
                        ended = True
                    else:
                        r[0] = i + 1
                if ended:
                    runs = [r for r in runs if r[0] >= 0]
            if first(value) if first is not None else conds[0](value, {}):
                runs.append([1, ts, value])
                if within is not None:
                    self._ends(ts + within, key)
        return runs

    # any other pattern ----------------------------------------------------

    def _expire(self, key, runs: list, now: int, matches: Out, timeouts: Out) -> list:
        """Runs whose `within` ends at or before `now` leave: pending ones match."""
        keep = []
        for r in runs:
            end = r["s"] + self.within
            if end > now:
                keep.append(r)
            elif r.get("d"):
                continue
            elif r["p"]:
                matches.append((key, self._value(r), r["t"][-1][1][0]))
            elif self.timeouts:
                timeouts.append((key, self._value(r), end - 1))
        return keep

    def _end(self, key, runs, matches, timeouts) -> list:
        if not self._chain:
            for r in runs:
                if r["p"]:
                    matches.append((key, self._value(r), r["t"][-1][1][0]))
        return []

    def _value(self, run: dict) -> dict:
        out: dict[str, list] = {}
        stages = self.stages
        for i, (_, v) in run["t"]:
            name = stages[i].name
            got = out.get(name)
            if got is None:
                out[name] = [v]
            else:
                got.append(v)
        return out

    def _step(self, key, runs: list, ts: int, value: object, matches: Out) -> list:
        stages = self.stages
        out_runs: list = []
        if runs:
            conds, unary, strict_of = self._conds, self._unary, self._strict
            uses_matched = self._uses_matched
            for r in runs:
                ctx = self._value(r) if uses_matched else _NOTHING
                if r["p"]:  # complete but for the trailing not_followed_by
                    if not conds[-1](value, ctx):
                        out_runs.append(r)
                    continue
                fresh = r["f"]
                guards = r["g"]
                if (
                    guards
                    and fresh
                    and any(stages[g].kind == "not_next" and conds[g](value, ctx) for g in guards)
                ):
                    continue
                still_open = []
                for o in r["o"]:
                    if o >= 0:
                        i = o
                        strict = strict_of[o]
                        if strict and not fresh:
                            continue
                    else:
                        i = ~o
                        strict = False
                    f = unary[i]
                    if f(value) if f is not None else conds[i](value, ctx):
                        self._take(key, r, i, ts, value, out_runs, matches)
                    elif not strict:
                        still_open.append(o)
                if still_open and not (
                    guards
                    and any(
                        stages[g].kind == "not_followed_by" and conds[g](value, ctx) for g in guards
                    )
                ):
                    r["o"], r["f"] = still_open, False
                    out_runs.append(r)
        # a new run from this event
        f = self._unary[0]
        if f(value) if f is not None else self._conds[0](value, {}):
            if self._simple_start:
                opts, guards = self._after[0]
                out_runs.append(
                    {
                        "s": ts,
                        "t": [[0, [ts, value]]],
                        "o": opts,
                        "f": True,
                        "g": guards,
                        "p": False,
                    }
                )
            else:
                start = {"s": ts, "t": [], "o": [], "f": True, "g": [], "p": False}
                self._take(key, start, 0, ts, value, out_runs, matches)
            if self.within is not None:
                self._ends(ts + self.within, key)
        return out_runs

    def _take(self, key, run, stage, ts, value, out_runs, matches) -> None:
        taken = [*run["t"], [stage, [ts, value]]]
        s = taken[0][1][0]
        if self.within is not None and ts - s >= self.within:
            return
        opts, guards = self._after[stage]
        loop = self.stages[stage].loop
        new = {"s": s, "t": taken, "o": opts, "f": True, "g": guards, "p": False}
        if not opts:
            if guards:  # ends with not_followed_by: wait for within to pass
                new["p"] = True
                out_runs.append(new)
                return
            matches.append((key, self._value(new), ts))
            if not loop:
                return
            new["d"] = 1
        if loop:
            new["o"] = [~stage, *opts]
        out_runs.append(new)
