"""Interactive queries and change streams of the tables a job maintains (Kafka Streams'
interactive queries, Materialize's ``SUBSCRIBE``).

Every table a job maintains — a running ``aggregate``, a windowed ``aggregate``, a table–table
``join`` — is a **view**, named after its step. Its rows live in a changelogged store of the
task, ``<step>-view`` (so a restarted or moved task restores them like any state); the key of
a windowed view's row is ``(key, window start)``.

Read side. A task's view store belongs to the runner's thread, so readers never touch it:
at each commit (after the outputs and changelogs are appended) the runner **publishes** what
the view stores changed into the ``View`` — one per job and step, shared by every worker of the
job in the process — together with the task's input positions. Hence every answer reflects
whole commits, and carries a **consistency token**: the input offsets it reflects (``{topic:
{partition: next offset}}``, repartition topics included) and the watermark (the step's
event-time watermark; for a table without windows, which drops nothing as late, the largest
event time it has applied).

Routing. A key's row lives in the task of the key's partition: the key is serialised with the
key serde of the topic that partitioned the view's input (the repartition topic after a
``key_by``, else the input topic) and hashed with murmur2, as Kafka's default partitioner
(so a job reading an input keyed by its producer, not re-keyed, assumes the producer used the
default partitioner). ``LocalViews`` answers for the tasks the runners of this process own; a
partition owned by no runner here raises ``ViewUnavailable`` naming it. Workers in other
processes are reached by ``viewserver.RoutedViews`` (what the console uses) at the query
endpoint each advertises.

Read-your-writes. ``wait_for={topic: {partition: offset}}`` blocks (up to ``timeout_s``, then
``ViewTimeout``) until the view reflects every record of those input partitions below those
offsets: first until the owning tasks' positions reach them, then, for each repartition topic
upstream of the view in order, until the tasks have read up to its end offsets as they were
once the previous stage was reached (a record's re-keyed copy is appended by the commit that
read it, which happens before its positions are published). An end is read once the
transactions with records below the high watermark have their markers: EndTxn is answered
before they are written (as Kafka's), so a committed checkpoint's records can still be above
the last stable offset for a moment (``ViewRegistry.end_offset``).

Change streams. ``View.subscribe(callback)`` returns a snapshot (rows at time T) and then calls
``callback(Changes)`` after each publish: ``(time, diff, key, row)`` updates — an update of a row
is ``-1`` old row, ``+1`` new row — and a progress mark: the view is complete for every time
``< progress`` and reflects the given offsets. Times are milliseconds of the wall clock at
publish, strictly increasing per view (so they double as "as of" freshness). The callback runs
on a runner's thread under the view's lock: it must hand over and return (``relay.Relay``).

Thread-safety: ``View`` and ``ViewRegistry`` are thread-safe (one lock per view).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sortedcontainers import SortedKeyList

from streams.errors import InvalidConfig, TidelogError
from streams.jobs.state import decode_key
from streams.log.partitioner import partition_for_key

VIEW_KINDS = ("aggregate", "window", "table_join")
MAX_ROWS = 1000  # largest answer of a range query (``limit``)
MAX_WAIT_S = 60.0
_LOOKBACK = 256  # records read back from a partition's end to find its last data record
_SETTLE_PAUSE_S = 0.005  # between looks at a partition whose transaction's markers are due
VIEW_RETENTION_MS = 24 * 3600 * 1000  # a windowed view keeps a window a day past its end


def view_store(step: str) -> str:
    return f"{step}-view"


class UnknownView(TidelogError):
    code = "unknown_view"


class ViewUnavailable(TidelogError):
    """The partitions that hold the answer are not served by any runner of this process
    (`partitions`), or by no worker that advertises a query endpoint."""

    code = "view_unavailable"

    def __init__(self, message: str, partitions: list[int] | None = None):
        super().__init__(message)
        self.partitions = partitions or []


class ViewTimeout(TidelogError):
    """The view did not reach the offsets a query asked to wait for in time."""

    code = "view_timeout"


_END = -1  # closes a list's elements in ``order``: below every rank (a prefix sorts first)


def order(key: object) -> tuple:
    """A total order over JSON-able keys: numbers < strings < lists/tuples (element-wise),
    ``None`` first; within a type, the type's own order.

    The sort key is flat, so that comparing two (a sorted list's bisect) compares one tuple of
    scalars: each scalar is its rank (0 None, 1 number, 2 string) and its value (none for
    None); a list is 3, its elements' entries, then ``_END``. Equal ranks at a position mean
    the same shape up to it, so the flat tuples compare as the keys do."""
    t = type(key)  # the common shapes first: a string, a number, (string, number)
    if t is str:
        return (2, key)
    if t is int or t is float:
        return (1, key)
    out: list = []
    if t is tuple:  # a windowed view's (key, start)
        if len(key) == 2 and type(key[1]) is int:  # type: ignore[arg-type]
            k0 = key[0]  # type: ignore[index]
            if type(k0) is str:
                return (3, 2, k0, 1, key[1], _END)  # type: ignore[index]
            if type(k0) is int:
                return (3, 1, k0, 1, key[1], _END)  # type: ignore[index]
        out.append(3)
        append = out.append
        for k in key:  # type: ignore[attr-defined]
            tk = type(k)
            if tk is str:
                append(2)
                append(k)
            elif tk is int:
                append(1)
                append(k)
            else:
                _flat(k, out)
        append(_END)
    else:
        _flat(key, out)
    return tuple(out)


def _flat(key: object, out: list) -> None:
    t = type(key)
    if t is str:
        out += (2, key)
    elif t is int or t is float:
        out += (1, key)
    elif t is tuple or t is list:
        out.append(3)
        for k in key:  # type: ignore[attr-defined]
            _flat(k, out)
        out.append(_END)
    elif key is None:
        out.append(0)
    elif isinstance(key, bool):
        out += (1, int(key))
    elif isinstance(key, int | float):
        out += (1, key)
    elif isinstance(key, str):
        out += (2, key)
    elif isinstance(key, list | tuple):
        _flat(list(key), out)
    else:
        raise InvalidConfig("key", key, "a view key is a number, a string or a list of those")


@dataclass(frozen=True)
class Token:
    """What an answer reflects: ``offsets[topic][partition]`` = next offset read (every record
    below it is reflected); `watermark_ms` (None before any event); `as_of_ms`: when the
    newest of it was published (wall clock)."""

    offsets: dict[str, dict[int, int]]
    watermark_ms: int | None
    as_of_ms: int | None

    def to_dict(self) -> dict:
        return {
            "offsets": {t: {str(p): o for p, o in ps.items()} for t, ps in self.offsets.items()},
            "watermark_ms": self.watermark_ms,
            "as_of_ms": self.as_of_ms,
        }


@dataclass(frozen=True)
class Answer:
    """Rows ``[(key, row)]`` in key order, the token they reflect, and whether a `limit` cut
    them (`truncated`)."""

    rows: list[tuple[object, object]]
    token: Token
    truncated: bool = False


@dataclass(frozen=True)
class Changes:
    """One publish: `changes` ``[(diff, key, row)]`` at `time` (empty for a progress mark only),
    then the view is complete for all times ``< progress`` and reflects `token`."""

    time: int
    changes: list[tuple[int, object, object]]
    progress: int
    token: Token


ENDED = Changes(0, [], 0, Token({}, None, None))  # a change stream's last item: the job stopped


@dataclass(frozen=True)
class Snapshot:
    time: int
    rows: list[tuple[object, object]]
    progress: int
    token: Token


@dataclass(frozen=True)
class ViewInfo:
    job: str
    name: str
    kind: str  # aggregate | window | table_join
    windowed: bool
    partitions: int
    served: list[int]  # partitions a runner of this process serves
    keys: int  # rows in those partitions
    as_of_ms: int | None
    served_elsewhere: list[int] = field(default_factory=list)  # by workers of other processes


@dataclass
class _Part:
    rows: dict[object, object] = field(default_factory=dict)
    # the rows' keys in ``order``, but for those in `added` (not sorted in yet): a commit only
    # notes its new keys, the first query (or removal) after it sorts them in (``keys``)
    sorted_keys: SortedKeyList = field(default_factory=lambda: SortedKeyList(key=order))
    added: list = field(default_factory=list)
    offsets: dict[str, int] = field(default_factory=dict)
    watermark: int | None = None
    owner: object | None = None  # the runner serving it; None: stale (rebalancing, stopped)
    as_of: int | None = None

    @property
    def keys(self) -> SortedKeyList:
        """Every row's key in ``order`` (the view's lock held)."""
        if self.added:
            self.sorted_keys.update(self.added)
            self.added = []
        return self.sorted_keys


class View:
    """The published rows of one view, by partition."""

    def __init__(self, job, node, end_offset, partitions: int, key_topic: str, key_serde):
        self.job_name, self.name, self.kind = job.name, node.name, node.kind
        self.windowed = node.kind == "window"
        self.partitions, self.key_topic, self.key_serde = partitions, key_topic, key_serde
        # (topic, partition, deadline, pause) -> where a reader of all its records stands
        self.end_offset = end_offset
        self.repartition_topics = _upstream_repartitions(node)
        self.input_topics = _upstream_topics(node)
        self.parts: dict[int, _Part] = {}
        self.time = 0
        self._cond = threading.Condition()
        self._subscribers: list[Callable[[Changes], None]] = []

    # ---------------------------------------------------------------- write side (runner)

    def _tick(self) -> int:
        self.time = max(self.time + 1, int(time.time() * 1000))
        return self.time

    def open(self, p: int, owner, rows: Iterable[tuple[object, object]], offsets, wm) -> None:
        """A runner opened task `p` with these restored rows: serve them (a change to whatever
        was published for `p` before, normally none, goes to the subscribers)."""
        new = dict(rows)
        with self._cond:
            part = self.parts.setdefault(p, _Part())
            changes: list[tuple[object, object | None]] = [
                (k, None) for k in part.rows if k not in new
            ]
            changes += [(k, v) for k, v in new.items() if part.rows.get(k) != v]
            part.owner = owner
            self._apply(p, part, changes, offsets, wm)

    def publish(self, p: int, owner, changes, offsets, wm) -> None:
        """A commit of task `p`: `changes` ``[(key, row | None)]`` (None deletes)."""
        with self._cond:
            part = self.parts.get(p)
            if part is None or part.owner is not owner:
                return
            if not changes and part.offsets == offsets and part.watermark == wm:
                return  # an idle commit: nothing to tell
            self._apply(p, part, changes, offsets, wm)

    def close(self, p: int, owner) -> None:
        """Task `p` closed (revoked or stopped): its rows stay, stale, until it reopens."""
        with self._cond:
            part = self.parts.get(p)
            if part is not None and part.owner is owner:
                part.owner = None
            self._cond.notify_all()

    def _apply(self, p: int, part: _Part, changes, offsets, wm) -> None:
        # the diffs only for subscribers; new keys are sorted in by the next query that needs
        # them (``_Part.keys``: a commit's changes name each key once)
        diffs: list[tuple[int, object, object]] | None = [] if self._subscribers else None
        rows, added = part.rows, part.added
        rows_get = rows.get
        for key, row in changes:
            old = rows_get(key)
            if old is not None:
                if old == row:
                    continue
                if diffs is not None:
                    diffs.append((-1, key, old))
                if row is None:
                    del rows[key]
                    part.keys.remove(key)  # sorts in what was added (rare: a retraction)
                    added = part.added
            if row is not None:
                if old is None:
                    added.append(key)
                rows[key] = row
                if diffs is not None:
                    diffs.append((1, key, row))
        part.offsets = {t: o for t, o in offsets.items() if t in self.input_topics}
        part.watermark = wm
        t = self._tick()
        part.as_of = t
        self._cond.notify_all()
        if self._subscribers and diffs is not None:
            batch = Changes(t, diffs, t + 1, self._token(self.parts))
            for callback in list(self._subscribers):
                callback(batch)

    # ---------------------------------------------------------------- read side

    def partition_of(self, key: object) -> int:
        data = self.key_serde.serialize(key)
        if data is None:
            raise InvalidConfig("key", key, "a view has no row for a null key")
        return partition_for_key(data, self.partitions)

    def get(self, key: object, *, wait_for=None, timeout_s: float = 0.0) -> Answer:
        """The row of `key` (``rows`` empty when it has none), from its partition's task."""
        k = _key(key)
        if self.windowed:
            raise InvalidConfig("key", key, f"{self.name} is windowed: query by key and time")
        p = self.partition_of(k)
        with self._cond:
            self._wait(wait_for, timeout_s, [p])
            part = self._served(p)
            row = part.rows.get(k)
            return Answer([] if row is None else [(k, row)], self._token({p: part}))

    def range(
        self,
        lo: object = None,
        hi: object = None,
        *,
        limit: int = MAX_ROWS,
        wait_for=None,
        timeout_s: float = 0.0,
        partitions: list[int] | None = None,
    ) -> Answer:
        """Rows with ``lo <= key <= hi`` (either bound may be None: open) across every
        partition (or those in `partitions`), merged in key order (``order``), at most
        `limit`. For a windowed view the keys are ``[key, start]`` pairs and the bounds
        compare with them."""
        limit = _limit(limit)
        lo_k = None if lo is None else order(_key(lo))
        hi_k = None if hi is None else order(_key(hi))
        with self._cond:
            ps = list(range(self.partitions)) if partitions is None else sorted(set(partitions))
            self._wait(wait_for, timeout_s, ps)
            missing = [p for p in ps if p not in self.served()]
            if missing:
                self._served(missing[0], missing)
            parts = {p: self._served(p) for p in ps}
            found: list[tuple[object, object]] = []
            for part in parts.values():
                for k in part.keys.irange_key(lo_k, hi_k):
                    found.append((k, part.rows[k]))
            found.sort(key=lambda kv: order(kv[0]))
            return Answer(found[:limit], self._token(parts), len(found) > limit)

    def windows(
        self,
        key: object,
        *,
        time_from: int | None = None,
        time_to: int | None = None,
        limit: int = MAX_ROWS,
        wait_for=None,
        timeout_s: float = 0.0,
    ) -> Answer:
        """A windowed view's windows of `key` whose start is in ``[time_from, time_to]`` (ms,
        inclusive as Kafka Streams' ``fetch(key, from, to)``; None: open)."""
        if not self.windowed:
            raise InvalidConfig("time_from", time_from, f"{self.name} is not windowed")
        limit = _limit(limit)
        k = _key(key)
        p = self.partition_of(k)
        # unbounded: every (k, start) from its prefix (3, k) up to (3, k, 9), 9 above any rank
        lo = order((k, time_from)) if time_from is not None else (3, *order(k))
        hi = order((k, time_to)) if time_to is not None else (3, *order(k), 9)
        with self._cond:
            self._wait(wait_for, timeout_s, [p])
            part = self._served(p)
            found = [(wk, part.rows[wk]) for wk in part.keys.irange_key(lo, hi)]
            return Answer(found[:limit], self._token({p: part}), len(found) > limit)

    def subscribe(self, callback: Callable[[Changes], None]) -> tuple[Snapshot, Callable]:
        """The rows now (every partition this process holds) and, from then on, each publish
        given to `callback`; returns ``(snapshot, unsubscribe)``."""
        with self._cond:
            unsubscribe = self.listen(callback)
            return self.snapshot(), unsubscribe

    def listen(self, callback: Callable[[Changes], None]) -> Callable[[], None]:
        """From now on, each publish is given to `callback`; returns ``unsubscribe``. A
        listener that joins a stream already going takes a ``snapshot`` after listening and
        drops the changes whose time is below the snapshot's (they are in it)."""
        with self._cond:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._cond:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def snapshot(self) -> Snapshot:
        """Every row this process holds, at a time after every publish so far."""
        with self._cond:
            rows = sorted(
                ((k, v) for part in self.parts.values() for k, v in part.rows.items()),
                key=lambda kv: order(kv[0]),
            )
            t = self._tick()
            return Snapshot(t, rows, t + 1, self._token(self.parts))

    def end(self) -> None:
        """The job stopped here: listeners get ``ENDED`` and are dropped."""
        with self._cond:
            listeners, self._subscribers = self._subscribers, []
            self.parts.clear()
            self._cond.notify_all()
        for callback in listeners:
            callback(ENDED)

    def token(self) -> Token:
        with self._cond:
            return self._token(self.parts)

    def info(self) -> ViewInfo:
        with self._cond:
            served = sorted(p for p, part in self.parts.items() if part.owner is not None)
            as_of = max((part.as_of or 0 for part in self.parts.values()), default=0) or None
            keys = sum(len(self.parts[p].rows) for p in served)
        return ViewInfo(
            self.job_name,
            self.name,
            self.kind,
            self.windowed,
            self.partitions,
            served,
            keys,
            as_of,
        )

    # ---------------------------------------------------------------- internals (locked)

    def served(self) -> set[int]:
        """The partitions a runner of this process serves now."""
        with self._cond:
            return {p for p, part in self.parts.items() if part.owner is not None}

    def wait_offsets(self, targets: dict[str, dict[int, int]], timeout_s: float) -> None:
        """Block until these partitions' published positions reach `targets` (one stage of
        a ``wait_for``: no repartition topic is followed), at most `timeout_s`."""
        with self._cond:
            self._wait_until(targets, time.monotonic() + timeout_s, targets, timeout_s)

    def _served(self, p: int, all_missing: list[int] | None = None) -> _Part:
        part = self.parts.get(p)
        if part is None or part.owner is None:
            missing = all_missing or [p]
            raise ViewUnavailable(
                f"partition{'s' if len(missing) > 1 else ''} "
                f"{', '.join(map(str, missing))} of view {self.job_name}/{self.name} "
                "not served by a worker in this process (rebalancing, stopped, or owned by "
                "another process)",
                missing,
            )
        return part

    def _token(self, parts: dict[int, _Part]) -> Token:
        offsets: dict[str, dict[int, int]] = {}
        for p, part in sorted(parts.items()):
            for topic, off in part.offsets.items():
                offsets.setdefault(topic, {})[p] = off
        known = [part.watermark for part in parts.values() if part.watermark is not None]
        wm = min(known) if known and len(known) == len(parts) else None
        as_of = max((part.as_of or 0 for part in parts.values()), default=0) or None
        return Token(offsets, wm, as_of)

    def _wait(self, wait_for, timeout_s: float, partitions: list[int]) -> None:
        """Block (lock held, released while waiting) until `wait_for` is reflected."""
        if not wait_for:
            return
        if not 0 <= timeout_s <= MAX_WAIT_S:
            raise InvalidConfig("timeout_s", timeout_s, f"must be within 0..{MAX_WAIT_S:g} s")
        targets = _parse_wait_for(wait_for)
        for topic in targets:
            if topic not in self.input_topics:
                raise InvalidConfig(
                    "wait_for",
                    topic,
                    f"is not an input of view {self.job_name}/{self.name} "
                    f"(its inputs: {', '.join(sorted(self.input_topics))})",
                )
        for topic, ps in targets.items():
            for p in ps:
                if p >= self.partitions:
                    raise InvalidConfig("wait_for", f"{topic}:{p}", f"{topic} has no partition {p}")
        deadline = time.monotonic() + timeout_s
        self._wait_until(targets, deadline, targets, timeout_s)
        for topic in self.repartition_topics:
            ends = {
                topic: {q: self.end_offset(topic, q, deadline, self._cond.wait) for q in partitions}
            }
            self._wait_until(ends, deadline, targets, timeout_s)

    def _wait_until(self, targets, deadline: float, asked, timeout_s: float) -> None:
        while True:
            behind = [
                (t, p, o)
                for t, ps in targets.items()
                for p, o in ps.items()
                if p not in self.parts or self.parts[p].offsets.get(t, -1) < o
            ]
            if not behind:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                t, p, o = behind[0]
                at = self.parts[p].offsets.get(t) if p in self.parts else None
                wanted = ", ".join(
                    f"{tp}-{pn}:{off}" for tp, ps in sorted(asked.items()) for pn, off in ps.items()
                )
                raise ViewTimeout(
                    f"view {self.job_name}/{self.name} did not reach {wanted} within "
                    f"{timeout_s:g} s: {t}-{p} is at {at if at is not None else 'no offset'}, "
                    f"waiting for {o}"
                )
            self._cond.wait(left)


def _key(key: object) -> object:
    """Keys as the stores hold them: lists (from JSON) become tuples."""
    if isinstance(key, list):
        return tuple(_key(k) for k in key)
    order(key)  # checks the type
    return key


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ROWS:
        raise InvalidConfig("limit", limit, f"must be a whole number in 1..{MAX_ROWS}")
    return limit


def _parse_wait_for(wait_for) -> dict[str, dict[int, int]]:
    if not isinstance(wait_for, dict):
        raise InvalidConfig("wait_for", wait_for, "must be {topic: {partition: offset}}")
    out: dict[str, dict[int, int]] = {}
    for topic, ps in wait_for.items():
        if not isinstance(ps, dict):
            raise InvalidConfig("wait_for", wait_for, "must be {topic: {partition: offset}}")
        for p, o in ps.items():
            try:
                pn, on = int(p), int(o)
            except (TypeError, ValueError) as exc:
                raise InvalidConfig(
                    "wait_for", wait_for, "partitions and offsets are whole numbers"
                ) from exc
            if pn < 0 or on < 0:
                raise InvalidConfig("wait_for", wait_for, "partitions and offsets are >= 0")
            out.setdefault(str(topic), {})[pn] = on
    return out


def _ancestors(node) -> list:
    seen: dict[int, Any] = {}

    def walk(n) -> None:
        for parent, _ in n.parents:
            if parent.id not in seen:
                seen[parent.id] = parent
                walk(parent)

    walk(node)
    return sorted(seen.values(), key=lambda n: n.id)


def _upstream_repartitions(node) -> list[str]:
    return [n.params["topic"] for n in _ancestors(node) if n.kind == "repartition"]


def _upstream_topics(node) -> set[str]:
    return {n.params["topic"] for n in _ancestors(node) if n.kind == "source"}


def _keying_source(node):
    """The source whose partitioning the view's keys follow (its first input's)."""
    n = node
    while n.kind != "source":
        n = n.parents[0][0]
    return n


# ------------------------------------------------------------------------------ runners


class ViewRegistry:
    """The views of the jobs running over one log in this process, by job and name. The
    log is what the runners read: the embedded ``LogStore`` (``offsets``) or any object with
    ``end_offset(topic, partition)``."""

    def __init__(self, log_store) -> None:
        if log_store is None:
            raise InvalidConfig("log", None, "a view registry needs the log its jobs read")
        self.log_store = log_store
        self._lock = threading.Lock()
        self._views: dict[str, dict[str, View]] = {}
        self._runners: dict[str, set[int]] = {}

    def end_offset(
        self,
        topic: str,
        partition: int,
        deadline: float | None = None,
        pause: Callable[[float], object] = time.sleep,
    ) -> int:
        """Where a runner that has read all of the partition's committed records stands: one
        past the last committed data record (a transaction's commit marker, or an aborted
        record, at the end is never a runner's position: read_committed readers skip them).

        Over a ``LogStore`` it first waits until every transaction with records in the
        partition now is decided and its markers written — the last stable offset reaches
        the high watermark as it is now — pausing with `pause(seconds)` between looks, and
        raises ``ViewTimeout`` at `deadline` (``time.monotonic()``; None: now). An EndTxn
        is answered before its markers are written (as Kafka's), so a job's checkpoint can
        be committed, and its positions published, while the records it appended are still
        above the last stable offset: an end read then would leave them out."""
        end_offset = getattr(self.log_store, "end_offset", None)
        if end_offset is not None:
            return end_offset(topic, partition)
        store = self.log_store
        high = store.offsets(topic, partition)[1]
        while True:
            start, stable = store.offsets(topic, partition, committed=True)
            if stable >= high:
                break
            left = (deadline if deadline is not None else 0.0) - time.monotonic()
            if left <= 0:
                raise ViewTimeout(
                    f"{topic}-{partition}: a transaction below offset {high} is still open "
                    f"(its last stable offset is {stable})"
                )
            pause(min(left, _SETTLE_PAUSE_S))
        upto = stable
        while upto > start:
            lo = pos = max(start, upto - _LOOKBACK)
            last = None
            while pos < upto:  # forward through the window (a read may stop early)
                recs = store.read(topic, partition, pos, max_records=_LOOKBACK, committed=True)
                if not recs:
                    break
                last = max([r.offset for r in recs if r.offset < upto], default=last)
                pos = recs[-1].offset + 1
            if last is not None:
                return last + 1
            upto = lo
        return start

    def attach(self, runner, counts: dict[str, int]) -> RunnerViews:
        job = runner.job
        with self._lock:
            views = self._views.get(job.name)
            if views is None:
                views = {}
                for node in job.nodes:
                    if node.kind in VIEW_KINDS:
                        src = _keying_source(node)
                        topic = src.params["topic"]
                        views[node.name] = View(
                            job, node, self.end_offset, counts[topic], topic, src.params["key"]
                        )
                self._views[job.name] = views
            self._runners.setdefault(job.name, set()).add(id(runner))
        return RunnerViews(self, runner, views)

    def detach(self, runner) -> None:
        """A runner stopped; when it was the job's last here, its views end."""
        ended: dict[str, View] = {}
        with self._lock:
            members = self._runners.get(runner.job.name, set())
            members.discard(id(runner))
            if not members:
                self._runners.pop(runner.job.name, None)
                ended = self._views.pop(runner.job.name, {})
        for view in ended.values():
            view.end()

    def jobs(self) -> dict[str, dict[str, View]]:
        with self._lock:
            return {job: dict(views) for job, views in self._views.items()}

    def view(self, job: str, name: str) -> View:
        with self._lock:
            views = self._views.get(job)
            if views is None:
                raise UnknownView(f"no job {job!r} runs in this process")
            view = views.get(name)
            if view is None:
                have = ", ".join(sorted(views)) or "none"
                raise UnknownView(f"job {job!r} has no view {name!r} (its views: {have})")
            return view


class RunnerViews:
    """A runner's side of its job's views: it tells them when tasks open, commit and close."""

    def __init__(self, registry: ViewRegistry, runner, views: dict[str, View]):
        self.registry, self.runner, self.views = registry, runner, views

    def opened(self, p: int, task, offsets: dict[str, int]) -> None:
        for name, view in self.views.items():
            store = task.stores[view_store(name)]
            view.open(p, self.runner, store.scan(), offsets, _watermark(task, name))

    def committed(self, p: int, task, changes: dict[str, list], offsets: dict[str, int]) -> None:
        for name, view in self.views.items():
            raw = changes.get(view_store(name), ())
            store = task.stores[view_store(name)]
            if view.windowed and raw and store.taken_from is raw:
                # the rows a window step built (numbers, strings, lists): the objects that
                # were encoded are what decoding them would give, so they are not decoded
                decoded = store.taken
            else:
                decoded = [(decode_key(k), None if v is None else _json(v)) for k, v in raw]
            view.publish(p, self.runner, decoded, offsets, _watermark(task, name))

    def closed(self, partitions: Iterable[int]) -> None:
        for view in self.views.values():
            for p in partitions:
                view.close(p, self.runner)

    def detach(self) -> None:
        self.registry.detach(self.runner)


def _json(raw: bytes) -> object:
    import json

    return json.loads(raw)


def _watermark(task, name: str) -> int | None:
    wm = task.watermarks().get(name, False)
    if wm is False:
        return task.view_event_time(name)
    return wm


_registries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_registries_lock = threading.Lock()


def registry(log_store) -> ViewRegistry:
    """The process's view registry of the jobs running over `log_store`."""
    with _registries_lock:
        reg = _registries.get(log_store)
        if reg is None:
            reg = _registries[log_store] = ViewRegistry(log_store)
        return reg


# ------------------------------------------------------------------------------ the seam


class ViewQuery(Protocol):
    """What the console and the JSON API ask of views (``LocalViews``: this process's)."""

    def list_views(self) -> list[ViewInfo]: ...

    def get(self, job: str, view: str, key: object, **kw) -> Answer: ...

    def range(self, job: str, view: str, **kw) -> Answer: ...

    def windows(self, job: str, view: str, key: object, **kw) -> Answer: ...

    def subscribe(
        self, job: str, view: str, callback: Callable[[Changes], None]
    ) -> tuple[Snapshot, Callable[[], None]]: ...

    def view(self, job: str, view: str) -> View: ...


class LocalViews:
    """``ViewQuery`` over the runners of this process that run over `log_store`."""

    def __init__(self, log_store) -> None:
        self.registry = registry(log_store)

    def list_views(self) -> list[ViewInfo]:
        return [
            view.info()
            for _, views in sorted(self.registry.jobs().items())
            for _, view in sorted(views.items())
        ]

    def view(self, job: str, view: str) -> View:
        return self.registry.view(job, view)

    def get(self, job: str, view: str, key: object, **kw) -> Answer:
        return self.view(job, view).get(key, **kw)

    def range(self, job: str, view: str, **kw) -> Answer:
        return self.view(job, view).range(**kw)

    def windows(self, job: str, view: str, key: object, **kw) -> Answer:
        return self.view(job, view).windows(key, **kw)

    def subscribe(self, job: str, view: str, callback):
        return self.view(job, view).subscribe(callback)
