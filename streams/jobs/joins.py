"""The join operators, as plain classes over keyed state (any ``MutableMapping``, by default a
dict; a job gives them changelogged stores, see ``state``). Each states its semantics here;
``tests/jobs/test_joins.py`` checks them against brute-force oracles with hypothesis.

All times are event times in ms. A join's inputs must be co-partitioned (same key, same
partition count), which the job checks when it starts; within one task the runner feeds the
inputs in timestamp order (the record with the smallest timestamp first), so the outcome does
not depend on which topic happened to be read first.

Thread-safety: none; one task drives its operators from one thread.
"""

from __future__ import annotations

import bisect
import heapq
import operator
from collections import deque
from collections.abc import Callable, MutableMapping

from streams.errors import InvalidConfig
from streams.processing.operator import MIN_TIME

try:  # the inner join's compiled loops, built in place by `make` (streams/jobs/_cjoin.pyx)
    from streams.jobs._cjoin import ExpiryQueue as _ExpiryQueue
    from streams.jobs._cjoin import JoinSide as _JoinSide
    from streams.jobs._cjoin import expire_inner as _native_expire_inner
    from streams.jobs._cjoin import expire_sides as _native_expire_sides
    from streams.jobs._cjoin import inner_batch as _native_inner_batch
    from streams.jobs._cjoin import inner_batch_sides as _native_inner_batch_sides
except ImportError:  # not built: the pure-Python loops below, the reference
    _native_inner_batch = _native_expire_inner = _JoinSide = None
    _native_expire_sides = _native_inner_batch_sides = None
    _ExpiryQueue = deque  # type: ignore[assignment,misc]

Out = list[tuple[object, object, int]]  # (key, value, timestamp)
Joiner = Callable[[object, object], object]


def _third(r: tuple) -> object:
    return r[2]


_first = operator.itemgetter(0)  # an entry's time: a bisection's key, called in C


def pair(left: object, right: object) -> object:
    """The default joiner: ``[left, right]`` (a list, so it survives JSON unchanged)."""
    return [left, right]


def _check_how(how: str, allowed: tuple[str, ...]) -> None:
    if how not in allowed:
        raise InvalidConfig("how", how, f"must be one of {', '.join(allowed)}")


def _check_ms(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidConfig(name, value, "must be a non-negative whole number of milliseconds")


class IntervalJoin:
    """Stream–stream join within an interval (Kafka Streams' JoinWindows, Flink's interval join).

    A left event ``l`` and a right event ``r`` with the same key *match* when
    ``|l.ts - r.ts| <= within_ms``; each matching pair is emitted once, as
    ``(key, joiner(l.value, r.value), max(l.ts, r.ts))``, when the second of the two arrives.

    Watermark: ``min`` over the two sides that have seen events of (the side's largest event
    time) minus `grace_ms` (the out-of-orderness allowed); it never goes back. An event older
    than the watermark (``ts < watermark``) is **late**: counted in ``late_count`` and dropped
    (it neither matches nor, in a left join, is emitted alone). An event is kept in state
    while a non-late partner could still arrive, i.e. until ``ts + within_ms < watermark``;
    then it is dropped from state (the watermark bounds the state).

    ``how="inner"`` emits only pairs. ``how="left"`` also emits each left event that matched
    nothing, as ``joiner(l.value, None)`` at ``l.ts``, when it leaves state (or at ``flush``),
    never early: no "unmatched" record is later contradicted by a match.

    Hence, for inputs without late events, the output is exactly the brute-force set of
    matching pairs (plus unmatched left events for a left join), whatever the arrival order.
    """

    SCAN_MAX = 8  # a partner list up to this long is scanned whole (cheaper than bisecting)
    # an inner join's batches go through the compiled loop when it is built (None: never)
    native = staticmethod(_native_inner_batch) if _native_inner_batch is not None else None

    def __init__(
        self,
        within_ms: int,
        *,
        how: str = "inner",
        grace_ms: int = 0,
        joiner: Joiner = pair,
        left: MutableMapping | None = None,
        right: MutableMapping | None = None,
        meta: MutableMapping | None = None,
    ):
        _check_ms("within_ms", within_ms)
        _check_ms("grace_ms", grace_ms)
        _check_how(how, ("inner", "left"))
        self.within, self.grace, self.how, self.joiner = within_ms, grace_ms, how, joiner
        # key -> [[ts, value, matched], ...] in arrival order
        self._sides: tuple[MutableMapping, MutableMapping] = (
            left if left is not None else {},
            right if right is not None else {},
        )
        self.meta = meta if meta is not None else {}
        # the meta store's progress, read once here and written through on every change
        self._max = [self.meta.get("lmax", MIN_TIME), self.meta.get("rmax", MIN_TIME)]
        self._wm = self.meta.get("wm", MIN_TIME)
        self.late_count = 0
        self.failed_item: tuple | None = None  # process_many's failing item
        # every entry's (expires after, side, key): in the queue if it comes no earlier than
        # the queue's last (as in-order input does), else in the heap; expiry takes from both.
        # The queue is a deque, or its compiled stand-in (``_cjoin.ExpiryQueue``, a ring of C
        # structs that the compiled loops need) when built
        self._queue: deque[tuple[int, int, object]] = _ExpiryQueue()
        self._heap: list[tuple[int, int, object]] = []
        # per side, the keys whose entries are not in time order (an event older than the
        # key's last one arrived): their lists are scanned whole, the others' bisected
        self._unordered: tuple[set, set] = (set(), set())
        for side, store in enumerate(self._sides):
            scan = getattr(store, "scan", store.items)  # a Store scans without caching
            for key, entries in scan():
                last = MIN_TIME
                for e in entries:
                    self._heap.append((e[0] + self.within, side, key))
                    if e[0] < last:
                        self._unordered[side].add(key)
                    last = e[0]
        heapq.heapify(self._heap)
        # an inner join's compiled state between checkpoints (``_cjoin.JoinSide``, over each
        # side's store; ``sync`` writes it there): while every time is a small int
        self._cached: tuple | None = None
        # (to_text, from_text) while the join's values are JSON text (``use_json_text``)
        self.json_text: tuple[Callable, Callable] | None = None
        self._from_text: Callable | None = None  # json_text's reader, kept once it is off
        if how == "inner" and _JoinSide is not None and self._small_state():
            self._cached = (
                _JoinSide(self._sides[0], self._unordered[0]),
                _JoinSide(self._sides[1], self._unordered[1]),
            )

    def _small_state(self) -> bool:
        small = 1 << 62
        return (
            within_small(self.within, self.grace)
            and all(-small <= t - self.within <= small for t, _, _ in self._heap)
            and all(-small <= t <= small for t in (*self._max, self._wm))
        )

    def use_json_text(self, to_text: Callable, from_text: Callable) -> bool:
        """From now on the values come, and the pairs go, as JSON text (``bytes``), when the
        joiner is ``pair`` and the compiled state is on; returns whether it is so. Each value
        is held as its text: as it came if it is ``bytes`` (the runner passes an input's value
        unread when its bytes are canonical JSON, ``serde.canonical_json``), else
        ``to_text(value)``; each pair is emitted as ``b"[" + left + b"," + right + b"]"``, the
        bytes that writing ``[left, right]`` as JSON gives (``to_text`` must be such a
        writer, ``serde.json_text``). The stores hold the values themselves, as always:
        ``from_text`` reads each back when the state is synced (the changelog is unchanged).
        Should the compiled state have to go (a time too large for C), the join syncs, reads
        the batch's text values back and goes on with values, as before the call."""
        if self._cached is None or self.joiner is not pair or self.how != "inner":
            return False
        self.sync()
        self._cached = (
            _JoinSide(self._sides[0], self._unordered[0], to_text, from_text),  # type: ignore[misc]
            _JoinSide(self._sides[1], self._unordered[1], to_text, from_text),  # type: ignore[misc]
        )
        self.json_text = (to_text, from_text)
        self._from_text = from_text
        return True

    def sync(self) -> None:
        """Write the compiled state's changes into the stores (a task does before every
        checkpoint takes the stores' changes; the stores hold the whole state after it)."""
        if self._cached is not None:
            self._cached[0].sync()
            self._cached[1].sync()

    def _uncache(self) -> None:
        """From now on the state lives in the stores only (a time too large for C came)."""
        self.sync()
        self._cached = None
        self.json_text = None

    @property
    def sides(self) -> tuple[MutableMapping, MutableMapping]:
        """The left and right stores: key -> ``[[ts, value, matched], ...]`` in arrival order
        (synced first: they hold the whole state)."""
        self.sync()
        return self._sides

    @property
    def watermark(self) -> int | None:
        return None if self._wm == MIN_TIME else self._wm

    def process(self, side: int, key: object, value: object, ts: int) -> Out:
        """Add an event of the left (`side` 0) or right (1) input; returns the emissions."""
        return [(k, v, t) for k, v, t, _ in self.process_many([(side, (key, value, ts, None))])]

    def process_many(self, items: list[tuple[int, tuple]]) -> list[tuple]:
        """``process`` for a batch: `items` are ``(side, (key, value, ts, origin))`` in
        processing order; returns ``(key, value, ts, origin)`` emissions (`origin` of the
        record that caused each), in the order batches of one record would have emitted
        them (``process`` is such a batch). A record's matches come in its partner's arrival
        order: a partner list in time order is bisected to the entries within reach, one
        with an out-of-order entry is scanned whole. An inner join expires state once, at the
        end of the batch (an entry past the watermark can match no non-late event, so no
        output changes); a left join, which emits unmatched records when they expire, expires
        after each record. The progress in ``meta`` is written once, at the end. If an item
        fails (the joiner raised), ``failed_item`` is that item."""
        sides, within, joiner = self._sides, self.within, self.joiner
        maxs, heap, unordered, scan_max = self._max, self._heap, self._unordered, self.SCAN_MAX
        if self._from_text is not None and self.json_text is None:
            items = _read_texts(items, self._from_text)  # text values read before it went off
        per_record = self.how != "inner"
        wm, grace = self._wm, self.grace
        self.failed_item = None
        queue = self._queue
        if not per_record and self.native is not None:
            progress = [wm, 0, 0]
            native = self.native
            args = (within, joiner, maxs, heap, queue, unordered, scan_max, grace, MIN_TIME)
            try:
                out = None
                if self._cached is not None and native is _native_inner_batch:
                    text = self.json_text
                    out = _native_inner_batch_sides(
                        items,
                        *self._cached,
                        *args,
                        progress,
                        joiner is pair,
                        None if text is None else text[0],
                    )
                    if out is None:  # a time too large for the compiled state
                        self._uncache()
                        if text is not None:  # the values as values again
                            items = _read_texts(items, text[1])
                if out is None:
                    out = native(items, sides[0], sides[1], *args, progress, joiner is pair)
            except Exception:
                self.failed_item = items[progress[2]]
                raise
            finally:
                wm = self._wm = progress[0]
                self.late_count += progress[1]
            self._progressed(wm, per_record)
            return out
        out: list[tuple] = []
        item = None
        try:
            for item in items:
                side, (key, value, ts, origin) = item
                if ts < wm:
                    self.late_count += 1
                    mine_out = None
                else:
                    others = sides[1 - side]
                    other = others.get(key)
                    matched = False
                    mine_out = None
                    if other:
                        changed = False
                        mine_out = []
                        lo, hi = ts - within, ts + within
                        if len(other) > scan_max and key not in unordered[1 - side]:
                            # in time order: only the entries within reach, found by bisection
                            # (the same ones, in the same order, as the whole scan would find)
                            i = bisect.bisect_left(other, lo, key=_first)
                            other_in = other[i : bisect.bisect_right(other, hi, i, key=_first)]
                        else:
                            other_in = other
                        for e in other_in:
                            if lo <= e[0] <= hi:
                                matched = True
                                if not e[2]:
                                    e[2] = changed = True
                                if side == 0:
                                    v = joiner(value, e[1])
                                else:
                                    v = joiner(e[1], value)
                                mine_out.append((key, v, ts if ts > e[0] else e[0], origin))
                        if changed:
                            others[key] = other  # tell a changelogged store
                    mine_store = sides[side]
                    mine = mine_store.get(key)
                    if mine is None:
                        mine_store[key] = [[ts, value, matched]]
                    else:
                        if mine and ts < mine[-1][0]:
                            unordered[side].add(key)
                        mine.append([ts, value, matched])
                        mine_store[key] = mine
                    exp = ts + within
                    if not queue or exp >= queue[-1][0]:
                        queue.append((exp, side, key))
                    else:
                        heapq.heappush(heap, (exp, side, key))
                if ts > maxs[side]:  # the watermark moves (meta written at the end)
                    maxs[side] = ts
                    o = maxs[1 - side]
                    cand = (ts if o == MIN_TIME else min(ts, o)) - grace
                    if cand > wm:
                        wm = self._wm = cand
                        if per_record:
                            expired: Out = []
                            self._expire(wm, expired)
                            if mine_out is None:
                                mine_out = []
                            mine_out.extend((k, v, t, origin) for k, v, t in expired)
                        if mine_out and len(mine_out) > 1:  # as _expire sorts its out
                            mine_out.sort(key=_third)
                if mine_out:
                    out.extend(mine_out)
        except Exception:
            self.failed_item = item
            raise
        self._progressed(wm, per_record)
        return out

    def _progressed(self, wm: int, per_record: bool) -> None:
        """After a batch: the progress into ``meta``; an inner join's state expires."""
        meta, maxs = self.meta, self._max
        for name, t in (("lmax", maxs[0]), ("rmax", maxs[1])):
            if t != MIN_TIME and meta.get(name) != t:
                meta[name] = t
        if wm != MIN_TIME and meta.get("wm") != wm:
            meta["wm"] = wm
            if not per_record:
                self._expire(wm, [])

    def _expire(self, wm: int, out: Out) -> None:
        if self.how == "inner" and self._cached is not None and self.native is not None:
            _native_expire_sides(self._heap, self._queue, *self._cached, self.within, wm)
            return
        if self.how == "inner" and self.native is not None:
            _native_expire_inner(
                self._heap,
                self._queue,
                self._sides[0],
                self._sides[1],
                self.within,
                wm,
                self._unordered,
            )
            return
        heap, queue = self._heap, self._queue
        touched: set[tuple[int, object]] = set()
        while queue and queue[0][0] < wm:
            _, side, key = queue.popleft()
            touched.add((side, key))
        while heap and heap[0][0] < wm:
            _, side, key = heapq.heappop(heap)
            touched.add((side, key))
        # a left join emits as it expires: in a fixed order; an inner one emits nothing here
        for side, key in sorted(touched, key=repr) if self.how == "left" else touched:
            entries = self._sides[side].get(key)
            if not entries:
                continue
            keep = []
            for e in entries:
                if e[0] + self.within < wm:
                    if side == 0 and self.how == "left" and not e[2]:
                        out.append((key, self.joiner(e[1], None), e[0]))
                else:
                    keep.append(e)
            if keep:
                self._sides[side][key] = keep
            else:
                del self._sides[side][key]
                self._unordered[side].discard(key)
        out.sort(key=lambda r: r[2])

    def flush(self) -> Out:
        """End of a bounded input: a left join emits its unmatched left events; state empties."""
        self.sync()
        out: Out = []
        if self.how == "left":
            for key, entries in list(self._sides[0].items()):
                out.extend((key, self.joiner(e[1], None), e[0]) for e in entries if not e[2])
        for store in self._sides:
            for key in list(store.keys()):
                del store[key]
        self._heap.clear()
        self._queue.clear()
        for keys in self._unordered:
            keys.clear()
        out.sort(key=lambda r: r[2])
        return out

    def state_size(self) -> int:
        self.sync()
        return sum(len(v) for s in self._sides for v in s.values())


def _read_texts(items: list[tuple[int, tuple]], from_text: Callable) -> list[tuple[int, tuple]]:
    """``process_many``'s items with each JSON text value (``bytes``) read back."""
    return [
        (side, (r[0], from_text(r[1]), *r[2:])) if type(r[1]) is bytes else (side, r)
        for side, r in items
    ]


def within_small(within: int, grace: int) -> bool:
    """The compiled state's bound on the join's spans (``_cjoin``'s SPAN_MAX)."""
    span = 1 << 60
    return type(within) is int and type(grace) is int and abs(within) <= span and abs(grace) <= span


class AsOfJoin:
    """Stream–table enrichment at event time, and as-of joins (Flink's temporal join, Quix's
    ``join_asof``).

    The right side is a *versioned table*: ``update(key, value, ts)`` records that from `ts` on
    the key's value is `value` (``None``: deleted). A left (stream) event at ``t`` is joined
    with the version of its key in force at ``t`` — the one with the largest ``ts <= t``
    among the versions received so far (of two with the same ``ts``, the later received) —
    and, with `tolerance_ms`, only if ``t - version.ts <= tolerance_ms``. It is emitted at
    once as ``(key, joiner(event, version value), t)``; with no such version (or a deleted
    one, or one too old) ``how="inner"`` emits nothing and ``how="left"`` emits
    ``joiner(event, None)``.

    A table update that arrives after a stream event it would have applied to (a late table
    update) does not rewrite that emitted result: emissions are final. Stream events are
    processed in arrival order; the watermark is the largest stream event time minus
    `grace_ms`, and a stream event older than it is late (counted in ``late_count``, dropped).
    Versions older than the newest one at or before the watermark can serve no non-late
    event and are dropped from state when their key is next touched. (A deletion is kept as
    a version: a late update older than it must not resurrect the row.)
    """

    def __init__(
        self,
        *,
        how: str = "inner",
        tolerance_ms: int | None = None,
        grace_ms: int = 0,
        joiner: Joiner = pair,
        versions: MutableMapping | None = None,
        meta: MutableMapping | None = None,
    ):
        _check_how(how, ("inner", "left"))
        if tolerance_ms is not None:
            _check_ms("tolerance_ms", tolerance_ms)
        _check_ms("grace_ms", grace_ms)
        self.how, self.tolerance, self.grace, self.joiner = how, tolerance_ms, grace_ms, joiner
        self.versions = versions if versions is not None else {}  # key -> [[ts, value], ...]
        self.meta = meta if meta is not None else {}
        self.late_count = 0

    def update(self, key: object, value: object, ts: int) -> None:
        vs = self.versions.get(key) or []
        i = bisect.bisect_left(vs, ts, key=_ts)
        if i < len(vs) and vs[i][0] == ts:
            vs[i] = [ts, value]
        else:
            vs.insert(i, [ts, value])
        self._prune(key, vs)

    def process(self, key: object, value: object, ts: int) -> Out:
        wm = self.meta.get("wm", MIN_TIME)
        if ts < wm:
            self.late_count += 1
            return []
        if ts - self.grace > wm:
            self.meta["wm"] = ts - self.grace
        vs = self.versions.get(key)
        found = None
        if vs:
            i = bisect.bisect_right(vs, ts, key=_ts)
            if i:
                vts, v = vs[i - 1]
                if v is not None and (self.tolerance is None or ts - vts <= self.tolerance):
                    found = v
            self._prune(key, vs)
        if found is None:
            return [] if self.how == "inner" else [(key, self.joiner(value, None), ts)]
        return [(key, self.joiner(value, found), ts)]

    def _prune(self, key: object, vs: list) -> None:
        wm = self.meta.get("wm", MIN_TIME)
        i = bisect.bisect_right(vs, wm, key=_ts)
        if i > 1:
            del vs[: i - 1]
        if vs:
            self.versions[key] = vs
        elif key in self.versions:
            del self.versions[key]

    def state_size(self) -> int:
        return sum(len(v) for v in self.versions.values())


def _ts(entry: list) -> int:
    return entry[0]


class TableJoin:
    """Table–table join by primary key, maintaining a materialised view.

    Each input is a changelog: ``update(side, key, value)`` sets the key's row on the left
    (`side` 0) or right (1) table, ``value None`` deletes it. The view holds, per key,
    ``joiner(left row, right row)`` when: both rows exist (``how="inner"``); the left row
    exists (``"left"``, right row or None); either exists (``"outer"``, missing one None).
    Every update emits the view's change for its key, if any: ``(key, new row, ts)``, or
    ``(key, None, ts)`` — a retraction (tombstone) — when the key leaves the view. An update
    that leaves the view unchanged emits nothing. Applying the emissions in order to a dict
    therefore gives the view at every step (the oracle in the tests), and writing them to a
    compacted topic keeps the view there.
    """

    def __init__(
        self,
        *,
        how: str = "inner",
        joiner: Joiner = pair,
        left: MutableMapping | None = None,
        right: MutableMapping | None = None,
    ):
        _check_how(how, ("inner", "left", "outer"))
        self.how, self.joiner = how, joiner
        self.sides: tuple[MutableMapping, MutableMapping] = (
            left if left is not None else {},
            right if right is not None else {},
        )

    def row(self, key: object) -> object:
        lv, rv = self.sides[0].get(key), self.sides[1].get(key)
        if self.how == "inner" and (lv is None or rv is None):
            return None
        if self.how == "left" and lv is None:
            return None
        if lv is None and rv is None:
            return None
        return self.joiner(lv, rv)

    def update(self, side: int, key: object, value: object, ts: int = 0) -> Out:
        before = self.row(key)
        store = self.sides[side]
        if value is None:
            if key in store:
                del store[key]
        else:
            store[key] = value
        after = self.row(key)
        if after == before:
            return []
        return [(key, after, ts)]

    def view(self) -> dict:
        keys = set(self.sides[0].keys()) | set(self.sides[1].keys())
        rows = {k: self.row(k) for k in keys}
        return {k: v for k, v in rows.items() if v is not None}

    def state_size(self) -> int:
        return len(self.sides[0]) + len(self.sides[1])
