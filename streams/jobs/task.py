"""A task: one instance of a job's graph for one input partition number, with its own
operators and state stores (Kafka Streams' task). The runner (or the test driver) feeds it
deserialised records ``feed(topic, key, value, ts)`` in timestamp order and collects what it
writes through ``emit``.

**Batches.** The runner feeds a poll's records a batch at a time (``feed_many``: one input's
records; ``feed_merged``: a join task's inputs merged in timestamp order). A batch moves
through the graph as a list of ``(key, value, ts, offset)`` records: each step takes the whole
list (``push_many``) and hands its output list to its child, so a chain of
filter/map/key_by/window/join/sink costs a few calls per batch instead of several per record.
The outcome is the same as feeding the records one by one — every step sees its records in
the same order, and each of its outputs in the same order — because a batch only moves as a
list along a step with **one** child (a table's view tap aside: it only writes its own view
store): where a step has several children (or a ``late()`` side output), its records go to
them one at a time (``push``), record by record, as before, so that the children's outputs
interleave as they did. One difference remains: a step sees
record n+1 of a batch before the steps after it see record n (nothing a step does depends on
what later steps did, so only the interleaving of side effects in user functions of
different steps can tell). An interval join expires state at the end of a batch instead of
after each record (inner joins only; a left join emits unmatched records on expiry, so it
still expires per record); expired entries can match nothing, so its output is unchanged.

A step that fails on a record names it (``failed``: topic and offset) when it knows which one
(stateless steps, joins, sinks); a window's aggregation failing inside a batch names the batch.

Thread-safety: none; one task is driven by one thread.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

from streams.jobs.cep import CepOperator
from streams.jobs.job import Job, KeyState, Node
from streams.jobs.joins import AsOfJoin, IntervalJoin, TableJoin, pair
from streams.jobs.search import QueryIndex
from streams.jobs.serde import JSON, json_text
from streams.jobs.state import Store
from streams.jobs.views import VIEW_KINDS, view_store
from streams.jobs.worker import gc_deferred
from streams.processing.aggregates import (
    CNT,
    MAX,
    MIN,
    NEED_MINMAX,
    NEED_SUM,
    SUM,
    add_value,
    new_acc,
    values_builder,
)
from streams.processing.operator import MIN_TIME, WindowOperator, extract_values
from streams.processing.operator import _cwindow as _cwindow_module
from streams.processing.windows import Session, Tumbling

# a window step's rows from its results, compiled (_cwindow.pyx; None: not built)
_emit_fixed_c = getattr(_cwindow_module, "emit_fixed", None)
_view_rows_c = getattr(_cwindow_module, "view_rows", None)  # a windowed view tap's rows
# emit(kind, topic, key, value, ts) with kind "sink" or "repartition"
Emit = Callable[[str, str, object, object, int], None]
# emit_many(kind, topic, records): the same for a list of (key, value, ts, offset) records;
# kind "sink-serialized": a sink's records whose values are the sink's bytes already
EmitMany = Callable[[str, str, list], None]
Rec = tuple[object, object, int, int | None]  # (key, value, ts, input offset or None)
_PROGRESS = ("__progress__",)
_SESSION = "sessions"  # store key (key, "sessions"): all of a session-windowed key's sessions


class Task:
    def __init__(
        self,
        job: Job,
        partition: int,
        emit: Emit,
        open_store: Callable[[str], Store],
        emit_many: EmitMany | None = None,
    ):
        self.job, self.partition, self.emit = job, partition, emit
        self.emit_many: EmitMany = emit_many or self._emit_each
        # (topic, offset) of the record a failed batch failed on; offset None: not known
        self.failed: tuple[str | None, int | None] | None = None
        self._feeding: str | None = None  # the topic feed_many is feeding
        self.stores: dict[str, Store] = {}
        self.metrics: dict[str, int] = {"in": 0, "out": 0, "late": 0}
        children = job.children()
        self._runtime: dict[int, _Step] = {}
        for node in job.nodes:  # parents come first: nodes are created in order
            for store in node.params.get("stores", ()):
                self.stores[store] = open_store(store)
            self._runtime[node.id] = _make(node, self)
        self._views: dict[str, _ViewTap] = {}
        for node in job.nodes:
            step = self._runtime[node.id]
            kids = children[node.id]
            step.children = [(self._runtime[c.id], s) for c, s in kids if c.kind != "late_events"]
            step.late_children = [
                (self._runtime[c.id], s) for c, s in kids if c.kind == "late_events"
            ]
            if node.kind in VIEW_KINDS:  # the rows of a table also go to its view store
                tap = self._views[node.name] = _ViewTap(node, self, step)
                step.children.append((tap, 0))
            # a view tap's store is its own: a batch can go to it and to one other child
            step.batch_children = sum(not isinstance(c, _ViewTap) for c, _ in step.children) <= 1
        self._sources: dict[str, list[_Step]] = {}
        for node in job.sources():
            self._sources.setdefault(node.params["topic"], []).append(self._runtime[node.id])
        for step in self._runtime.values():
            step.restored()
        for tap in self._views.values():
            tap.restored()
        self._direct_join = self._find_direct_join()
        # the input topics whose values may come as their JSON text (``raw_json_inputs``)
        self.raw_json_inputs: frozenset[str] = self._json_text_join()

    def _find_direct_join(self) -> tuple[_IntervalJoin, dict[str, int]] | None:
        """The interval join this task's inputs go straight into (each input topic one source
        whose only child is the join, no late side output), with each topic's side; None if
        its graph is any other shape. ``feed_merged`` hands such a join the merged batch."""
        join, sides = None, {}
        for topic, steps in self._sources.items():
            if len(steps) != 1 or len(steps[0].children) != 1:
                return None
            child, side = steps[0].children[0]
            if not isinstance(child, _IntervalJoin) or child.late_children:
                return None
            if join is not None and child is not join:
                return None
            join, sides[topic] = child, side
        return None if join is None else (join, sides)

    def _json_text_join(self) -> frozenset[str]:
        """A direct inner interval join with the default joiner (``pair``) between JSON inputs
        (no timestamp extractor) that writes straight to a JSON sink never needs its values
        as objects: it keeps each as its JSON text and writes each pair as the text of
        ``[left, right]`` (``IntervalJoin.use_json_text``), the bytes the sink would write.
        Then the runner may hand it an input value unread, as its bytes, when they are
        canonical JSON (``serde.canonical_json``: they are the text the sink would write of
        the value); returns those input topics (none for any other graph, or when the
        compiled join is not on)."""
        if self._direct_join is None:
            return frozenset()
        join, sides = self._direct_join
        if join.p["how"] != "inner" or join.p["joiner"] is not pair or len(join.children) != 1:
            return frozenset()
        sink, _ = join.children[0]
        if not isinstance(sink, _Sink) or sink.p["value"] is not JSON:
            return frozenset()
        for steps in self._sources.values():
            if steps[0].p["value"] is not JSON or steps[0].p["timestamp"] is not None:
                return frozenset()
        if join.op is None or not join.op.use_json_text(json_text, JSON.deserialize):
            return frozenset()
        join.text_sink = sink
        return frozenset(sides)

    def feed(self, topic: str, key: object, value: object, ts: int) -> None:
        self.metrics["in"] += 1
        for step in self._sources[topic]:
            step.forward(key, value, ts)

    def feed_many(self, topic: str, recs: list[Rec]) -> None:
        """Records ``(key, value, ts, offset)`` of `topic`, in order (see the module docstring).
        If a step fails, ``failed`` names the record when the step knows it."""
        self.metrics["in"] += len(recs)
        self.failed, self._feeding = None, topic
        sources = self._sources[topic]
        if len(sources) == 1:
            sources[0].push_many(0, recs)
            return
        r = None
        try:
            for r in recs:
                for step in sources:
                    step.forward(r[0], r[1], r[2])
        except Exception:
            self.blame(r)
            raise

    def feed_merged(self, topics: list[str], items: list[tuple[int, Rec]]) -> None:
        """Records of several inputs, ``(index in topics, record)``, already merged in the
        order they are to be processed (the runner's timestamp order). A join fed straight
        by its inputs gets them as one batch; any other graph gets each run of one topic's
        records as a batch."""
        if not items:
            return
        if self._direct_join is not None:
            join, sides = self._direct_join
            self.metrics["in"] += len(items)
            self.failed, self._feeding = None, None
            by_index = [sides[t] for t in topics]
            if by_index != list(range(len(topics))):  # inputs listed in another order
                items = [(by_index[i], r) for i, r in items]
            join.push_sides(items, sides)
            return
        run_index, run = items[0][0], []
        for i, r in items:
            if i != run_index:
                self.feed_many(topics[run_index], run)
                run_index, run = i, []
            run.append(r)
        self.feed_many(topics[run_index], run)

    def blame(self, rec, topic: str | None = None) -> None:
        """Note the record a batch failed on (the first noted stands: the innermost step)."""
        if self.failed is None:
            offset = None if rec is None else rec[3]
            self.failed = (topic or self._feeding, offset)

    def _emit_each(self, kind: str, topic: str, recs: list) -> None:
        emit = self.emit
        r = None
        try:
            if kind == "sink-serialized":  # `emit` takes values: read the JSON text back
                for r in recs:
                    emit("sink", topic, r[0], JSON.deserialize(r[1]), r[2])
                return
            for r in recs:
                emit(kind, topic, r[0], r[1], r[2])
        except Exception:
            self.blame(r)
            raise

    def flush(self) -> None:
        """End of a bounded input: windows emit what they hold, left joins their unmatched."""
        for node in self.job.nodes:
            self._runtime[node.id].flush()

    def before_commit(self) -> None:
        """Let steps write what they keep outside their stores (window snapshots)."""
        for step in self._runtime.values():
            step.before_commit()
        for tap in self._views.values():
            tap.before_commit()

    def late_count(self) -> int:
        return sum(s.late() for s in self._runtime.values())

    def late_counts(self) -> dict[str, tuple[int, bool]]:
        """Per step with a watermark: (late events so far, whether they go to a side output
        (``Stream.late()``) rather than being dropped)."""
        out = {}
        for node in self.job.nodes:
            step = self._runtime[node.id]
            if step.watermark() is not False:
                out[node.name] = (step.late(), bool(step.late_children))
        return out

    def view_event_time(self, name: str) -> int | None:
        """The largest event time (ms) view `name` has applied (None: none yet)."""
        return self._views[name].max_ts

    def watermarks(self) -> dict[str, int | None]:
        """Event-time watermark (ms) of each windowed or joining step, by step name."""
        out = {}
        for node in self.job.nodes:
            wm = self._runtime[node.id].watermark()
            if wm is not False:
                out[node.name] = wm
        return out


class _Step:
    def __init__(self, node: Node, task: Task):
        self.node, self.task, self.p = node, task, node.params
        self.children: list[tuple[_Step, int]] = []
        self.late_children: list[tuple[_Step, int]] = []  # Stream.late() side outputs
        self.batch_children = False  # whether forward_many may pass batches to every child

    def forward(self, key: object, value: object, ts: int) -> None:
        for child, side in self.children:
            child.push(side, key, value, ts)

    def forward_many(self, recs: list[Rec]) -> None:
        """A batch to the children: as a list to an only child, else record by record."""
        if not recs:
            return
        children = self.children
        if len(children) == 1:
            child, side = children[0]
            child.push_many(side, recs)
            return
        if self.batch_children:  # one child and view taps (which only write their store)
            for child, side in children:
                child.push_many(side, recs)
            return
        r = None
        try:
            for r in recs:
                for child, side in children:
                    child.push(side, r[0], r[1], r[2])
        except Exception:
            self.task.blame(r)
            raise

    def push_many(self, side: int, recs: list[Rec]) -> None:
        """A batch, record by record (steps with a batch loop of their own override this)."""
        push = self.push
        r = None
        try:
            for r in recs:
                push(side, r[0], r[1], r[2])
        except Exception:
            self.task.blame(r)
            raise

    def forward_late(self, key: object, value: object, ts: int) -> None:
        """A late input record, as it came in, to the step's ``late()`` side outputs."""
        for child, side in self.late_children:
            child.push(side, key, value, ts)

    def push(self, side: int, key: object, value: object, ts: int) -> None:
        raise NotImplementedError

    def restored(self) -> None:
        """Called once the task's stores are restored from their changelogs."""

    def flush(self) -> None:
        pass

    def before_commit(self) -> None:
        pass

    def late(self) -> int:
        return 0

    def watermark(self) -> int | None | bool:
        """False: the step keeps no watermark."""
        return False


class _Source(_Step):
    def push(self, side, key, value, ts):  # the repartition topic's loop-back in the driver
        self.forward(key, value, ts)

    def push_many(self, side, recs):
        self.forward_many(recs)


class _Filter(_Step):
    def push(self, side, key, value, ts):
        if self.p["fn"](value):
            self.forward(key, value, ts)

    def push_many(self, side, recs):
        fn, out, r = self.p["fn"], [], None
        try:
            for r in recs:
                if fn(r[1]):
                    out.append(r)
        except Exception:
            self.task.blame(r)
            raise
        self.forward_many(out)


class _Map(_Step):
    def push(self, side, key, value, ts):
        self.forward(key, self.p["fn"](value), ts)

    def push_many(self, side, recs):
        fn, out, r = self.p["fn"], [], None
        try:
            for r in recs:
                out.append((r[0], fn(r[1]), r[2], r[3]))
        except Exception:
            self.task.blame(r)
            raise
        self.forward_many(out)


class _KeyBy(_Step):
    def push(self, side, key, value, ts):
        self.forward(self.p["fn"](value), value, ts)

    def push_many(self, side, recs):
        fn, out, r = self.p["fn"], [], None
        try:
            for r in recs:
                out.append((fn(r[1]), r[1], r[2], r[3]))
        except Exception:
            self.task.blame(r)
            raise
        self.forward_many(out)


class _Repartition(_Step):
    def push(self, side, key, value, ts):
        self.task.emit("repartition", self.p["topic"], key, value, ts)

    def push_many(self, side, recs):
        self.task.emit_many("repartition", self.p["topic"], recs)


class _Sink(_Step):
    def push(self, side, key, value, ts):
        self.task.metrics["out"] += 1
        self.task.emit("sink", self.p["topic"], key, value, ts)

    def push_many(self, side, recs):
        self.task.metrics["out"] += len(recs)
        self.task.emit_many("sink", self.p["topic"], recs)

    def push_serialized(self, recs):
        """Records whose values are this sink's bytes already (a join's JSON text pairs)."""
        if recs:
            self.task.metrics["out"] += len(recs)
            self.task.emit_many("sink-serialized", self.p["topic"], recs)


class _Foreach(_Step):
    def push(self, side, key, value, ts):
        self.task.metrics["out"] += 1
        self.p["fn"](key, value, ts)


class _Process(_Step):
    def __init__(self, node, task):
        super().__init__(node, task)
        self.store = task.stores[node.params["stores"][0]]

    def push(self, side, key, value, ts):
        self.forward(key, self.p["fn"](value, KeyState(self.store, key)), ts)


class _Window(_Step):
    """``WindowOperator``s (one per distinct aggregated field) whose emissions are zipped.

    Changelog: ``(key, start) -> [[revision, count, sum, min, max] per operator]`` for every
    open window an event touched, a tombstone when it closes, and the operators' progress
    (watermark) under ``("__progress__",)``; session windows keep all of a key's open
    sessions under ``(key, "sessions")``. A session's emission lists the bounds of earlier
    emitted sessions it merged (``"replaces"``), as ``WindowResult.replaces``."""

    def __init__(self, node, task):
        super().__init__(node, task)
        self.store = task.stores[node.params["stores"][0]]
        groups: dict[object, list[tuple[str, Any]]] = {}
        count_names = []
        for name, agg in node.params["aggregates"].items():
            if agg.field_id() == "__count__":
                count_names.append((name, agg))
            else:
                groups.setdefault(agg.field_id(), []).append((name, agg))
        if not groups:
            groups["__count__"] = []
        first = next(iter(groups))
        groups[first].extend(count_names)
        self.window = node.params["window"]
        emit = "current" if node.params["emit"] == "updates" else "final"
        self.only_final = node.params["emit"] == "final"
        self._dirty: set[tuple[object, object]] = set()  # windows touched since the last commit
        # the fixed windows the store holds a snapshot of (so that a window that opens and
        # closes between two commits, never written, is not looked up to be deleted)
        self._stored: set[tuple[object, object]] = set()
        self.sessions = isinstance(self.window, Session)
        self._size = self.window.size_ms if type(self.window) is Tumbling else None
        self.ops: list[tuple[Callable, WindowOperator]] = []
        self._fields: list[str | None] = []  # each op's field name, for extract_values
        for members in groups.values():
            ext = next(
                (a.extractor() for _, a in members if a.field_id() != "__count__"),
                members[0][1].extractor(),
            )
            named = next((a.field for _, a in members if a.field_id() != "__count__"), None)
            self._fields.append(named if isinstance(named, str) else None)
            op = WindowOperator(
                self.window,
                {n: a.spec() for n, a in members},
                grace_ms=node.params["grace_ms"],
                out_of_orderness_ms=node.params["ooo"],
                emit=emit,
            )
            self.ops.append((ext, op))

    def restored(self) -> None:
        progress = self.store.get(_PROGRESS)
        if progress is None:
            return
        for (_, op), (wm, pmax) in zip(self.ops, progress, strict=True):
            op.restore_progress(wm, {int(p): t for p, t in pmax.items()})
        for skey in list(self.store.keys()):
            if skey == _PROGRESS:
                continue
            key, start = skey
            states = self.store[skey]
            pairs = zip(self.ops, states, strict=True)
            if self.sessions:
                opened = [op.restore_sessions(key, st) for (_, op), st in pairs]
            else:
                opened = [op.restore_fixed(key, start, st) for (_, op), st in pairs]
            if not all(opened):
                del self.store[skey]
            elif not self.sessions:
                self._stored.add(skey)

    def push(self, side, key, value, ts):
        op0 = self.ops[0][1]
        late = op0.late_count
        if len(self.ops) == 1:  # one aggregated field (count + sum of it): no lists to zip
            ext = self.ops[0][0]
            out = op0.process_many(((key, ext(value), ts, 0),))
            if out:
                self._emit((out,))
        else:
            outs = [op.process_many(((key, ext(value), ts, 0),)) for ext, op in self.ops]
            if outs[0]:
                self._emit(outs)
        if self.late_children and op0.late_count != late:
            self.forward_late(key, value, ts)
        if self.sessions:
            self._dirty.add((key, _SESSION))
        elif self._size is not None:  # tumbling: one window, its start computed here
            self._dirty.add((key, ts - ts % self._size))
        else:
            dirty = self._dirty
            for start in self.window.starts(ts):
                dirty.add((key, start))

    def push_many(self, side, recs):
        if self.late_children:  # late records interleave with results: one at a time
            super().push_many(side, recs)
            return
        dirty = self._dirty
        touched = None  # a tumbling window's operator notes the windows touched itself
        if self.sessions:
            dirty.update([(r[0], _SESSION) for r in recs])
        elif self._size is not None:
            touched = dirty
        else:
            starts = self.window.starts
            dirty.update([(r[0], s) for r in recs for s in starts(r[2])])
        outs = []
        for (ext, op), field in zip(self.ops, self._fields, strict=True):
            values = None
            if op.needs_values:
                values = []
                try:
                    extract_values(recs, field, ext, values)
                except Exception:
                    self.task.blame(recs[len(values)])
                    raise
            # a failure here names the batch
            outs.append(op.process_records(recs, values, touched))
            touched = None
        if outs[0]:
            self._emit(outs, recs[-1][3])

    def before_commit(self) -> None:
        """Snapshot the windows events touched since the last commit (closed ones were
        deleted when they closed) and the operators' progress."""
        op0 = self.ops[0][1]
        if self.sessions:
            for key, start in self._dirty:
                if op0.session_state(key) is not None:
                    self.store[(key, start)] = [op.session_state(key) for _, op in self.ops]
                else:
                    self.store.pop((key, start), None)
        else:
            state0, store, stored = op0.fixed_window_state, self.store, self._stored
            others = [op.fixed_window_state for _, op in self.ops[1:]]
            for wk in self._dirty:
                st = state0(*wk)
                if st is not None:
                    store[wk] = [st, *[state(*wk) for state in others]] if others else [st]
                    stored.add(wk)
        self._dirty.clear()
        self.store[_PROGRESS] = [op.progress() for _, op in self.ops]

    def _emit(self, outs, origin: int | None = None) -> None:
        """Forward the operators' results (zipped), as a batch; `origin`: the input offset
        they are blamed on if a later step fails on them (the batch's last record)."""
        batch: list = []
        if len(outs) == 1 and not self.sessions:  # one operator's fixed windows: the loop
            self._emit_fixed(outs[0], origin, batch)  # below, unrolled
            self.forward_many(batch)
            return
        for results in zip(*outs, strict=True):
            r0 = results[0]
            if self.sessions:
                self._dirty.add((r0.key, _SESSION))  # snapshot (or delete) its sessions
            elif r0.final:
                wk = (r0.key, r0.start)
                self._dirty.discard(wk)
                if wk in self._stored:
                    self._stored.discard(wk)
                    del self.store[wk]
            if self.only_final and not r0.final:
                continue
            value = {"start": r0.start, "end": r0.end}
            for r in results:
                value.update(r.values)
            value["revision"], value["final"] = r0.revision, r0.final
            if r0.replaces:
                value["replaces"] = [list(b) for b in r0.replaces]
            batch.append((r0.key, value, r0.end - 1, origin))
        self.forward_many(batch)

    def _emit_fixed(self, results: list, origin: int | None, batch: list) -> None:
        """``_emit`` of one operator's tumbling or hopping windows, into `batch`: the compiled
        loop (``_cwindow.emit_fixed``) when built, the loop below (its reference) for what it
        does not take."""
        if _emit_fixed_c is not None:
            dirty, stored, store, only_final = (
                self._dirty,
                self._stored,
                self.store,
                self.only_final,
            )
            i, n = 0, len(results)
            while i < n:
                i = _emit_fixed_c(results, i, origin, batch, dirty, stored, store, only_final)
                if i < n:
                    self._emit_fixed_pure(results[i : i + 1], origin, batch)
                    i += 1
            return
        self._emit_fixed_pure(results, origin, batch)

    def _emit_fixed_pure(self, results: list, origin: int | None, batch: list) -> None:
        discard, stored, store = self._dirty.discard, self._stored, self.store
        only_final, append = self.only_final, batch.append
        for key, start, end, values, revision, _correction, final, replaces in results:
            if final:
                wk = (key, start)
                discard(wk)
                if wk in stored:
                    stored.discard(wk)
                    del store[wk]
            elif only_final:
                continue
            value = {"start": start, "end": end, **values, "revision": revision, "final": final}
            if replaces:
                value["replaces"] = [list(b) for b in replaces]
            append((key, value, end - 1, origin))

    def flush(self) -> None:
        self._emit([op.flush() for _, op in self.ops])
        self._dirty.clear()
        self._stored.clear()
        for skey in list(self.store.keys()):
            del self.store[skey]

    def late(self) -> int:
        return self.ops[0][1].late_count

    def watermark(self) -> int | None:
        return self.ops[0][1].watermark


class _Aggregate(_Step):
    """A running aggregate per key: the same accumulator layout and value expressions as
    ``streams.processing``'s windows (``new_acc``, ``add_value``, ``values_builder``), kept
    as ``key -> [[count, sum, min, max] per field]`` in a changelogged value store."""

    def __init__(self, node, task):
        super().__init__(node, task)
        self.store = task.stores[node.params["stores"][0]]
        groups: dict[object, list] = {}
        for name, agg in node.params["aggregates"].items():
            fid = agg.field_id()
            groups.setdefault(None if fid == "__count__" else fid, []).append((name, agg))
        counts = groups.pop(None, [])
        if not groups:
            groups["__count__"] = []
        next(iter(groups.values())).extend(counts)
        self.groups = []
        for members in groups.values():
            ext = next((a.extractor() for _, a in members if a.field_id() != "__count__"), None)
            specs = [(n, a.spec()) for n, a in members]
            needs = frozenset().union(*(sp.needs for _, sp in specs))
            self.groups.append(
                (ext, values_builder(specs), NEED_SUM in needs, NEED_MINMAX in needs)
            )

    def push(self, side, key, value, ts):
        saved = self.store.get(key)
        row: dict = {}
        new = []
        for i, (ext, values, need_sum, need_minmax) in enumerate(self.groups):
            acc = new_acc(key, 0, 0, False)
            if saved is not None:
                cnt, total, lo, hi = saved[i]
                acc[CNT], acc[SUM] = cnt, total
                acc[MIN] = math.inf if lo is None else lo
                acc[MAX] = -math.inf if hi is None else hi
            add_value(acc, 0 if ext is None else ext(value), need_sum, need_minmax)
            row.update(values(acc))
            lo, hi = acc[MIN], acc[MAX]
            new.append(
                [
                    acc[CNT],
                    acc[SUM],
                    None if lo == math.inf else lo,
                    None if hi == -math.inf else hi,
                ]
            )
        self.store[key] = new
        self.forward(key, row, ts)


class _IntervalJoin(_Step):
    def __init__(self, node, task):
        super().__init__(node, task)
        self.op: IntervalJoin | None = None
        # the sink its pairs go to as JSON text while the op keeps its values so
        # (``Task._json_text_join``)
        self.text_sink: _Sink | None = None

    def restored(self) -> None:
        left, right, meta = (self.task.stores[s] for s in self.p["stores"])
        self.op = IntervalJoin(
            self.p["within"],
            how=self.p["how"],
            grace_ms=self.p["grace_ms"],
            joiner=self.p["joiner"],
            left=left,
            right=right,
            meta=meta,
        )

    def push(self, side, key, value, ts):
        if self.text_sink is not None:
            self.push_sides([(side, (key, value, ts, None))])
            return
        late = self.op.late_count
        for k, v, t in self.op.process(side, key, value, ts):
            self.forward(k, v, t)
        if self.late_children and self.op.late_count != late:
            self.forward_late(key, value, ts)

    def push_many(self, side, recs):
        if self.late_children:
            super().push_many(side, recs)
            return
        self.push_sides([(side, r) for r in recs])

    def push_sides(self, items: list[tuple[int, Rec]], topics: dict | None = None) -> None:
        """``(side, record)`` items in processing order (``IntervalJoin.process_many``).

        The cycle collector waits until the batch and its outputs are through: a join makes
        several short-lived containers per record (entries, pairs, output tuples), and the
        collections they set off every few hundred records also walked the batch and the
        state alive around them (profile: a quarter of the join bench's time). It runs after
        the batch instead, once (``gc_deferred``)."""
        with gc_deferred():
            try:
                out = self.op.process_many(items)
            except Exception:
                side, r = self.op.failed_item or (None, None)
                topic = next((t for t, s in (topics or {}).items() if s == side), None)
                self.task.blame(r, topic)
                raise
            if self.text_sink is not None and self.op.json_text is not None:
                self.text_sink.push_serialized(out)  # the pairs' JSON text
            else:
                self.forward_many(out)

    def flush(self) -> None:
        for k, v, t in self.op.flush():
            self.forward(k, v, t)

    def before_commit(self) -> None:
        """An inner join keeps its state in compiled form between checkpoints: into the
        stores before they are taken."""
        self.op.sync()

    def late(self) -> int:
        return self.op.late_count

    def watermark(self) -> int | None:
        return self.op.watermark


class _AsOfJoin(_Step):
    def __init__(self, node, task):
        super().__init__(node, task)
        versions, meta = (task.stores[s] for s in node.params["stores"])
        self.op = AsOfJoin(
            how=self.p["how"],
            tolerance_ms=self.p["tolerance_ms"],
            grace_ms=self.p["grace_ms"],
            joiner=self.p["joiner"],
            versions=versions,
            meta=meta,
        )

    def push(self, side, key, value, ts):
        if side == 1:
            self.op.update(key, value, ts)
            return
        late = self.op.late_count
        for k, v, t in self.op.process(key, value, ts):
            self.forward(k, v, t)
        if self.late_children and self.op.late_count != late:
            self.forward_late(key, value, ts)

    def late(self) -> int:
        return self.op.late_count

    def watermark(self) -> int | None:
        wm = self.op.meta.get("wm", MIN_TIME)
        return None if wm == MIN_TIME else wm


class _TableJoin(_Step):
    def __init__(self, node, task):
        super().__init__(node, task)
        left, right = (task.stores[s] for s in node.params["stores"][:2])
        self.op = TableJoin(how=self.p["how"], joiner=self.p["joiner"], left=left, right=right)

    def push(self, side, key, value, ts):
        for k, v, t in self.op.update(side, key, value, ts):
            self.forward(k, v, t)


class _ViewTap(_Step):
    """Keeps a table step's rows in its view store (``views``): key -> latest row, a
    ``None`` row (a join's retraction) deletes; a windowed step's rows are keyed
    ``(key, start)``, and a session that merged earlier ones deletes their rows."""

    def __init__(self, node, task, table: _Step):
        super().__init__(node, task)
        self.store = task.stores[view_store(node.name)]
        self.table = table
        self.windowed = node.kind == "window"
        self.max_ts: int | None = None
        # a windowed view's rows by end: a heap of the distinct ends, and the keys
        # ``(key, start)`` noted at each end, in the order they were noted (a tumbling
        # window's keys share a few ends: one heap entry per end, not per row)
        self.ends: list[int] = []
        self.at_end: dict[int, list[tuple]] = {}
        self._keys: set[tuple] = set()  # a windowed view's keys in the store

    def restored(self) -> None:
        if self.windowed:
            for k, row in self.store.scan():
                self._note_end(row["end"], k)
            self._keys = {k for ks in self.at_end.values() for k in ks}

    def _note_end(self, end: int, k: tuple) -> None:
        bucket = self.at_end.get(end)
        if bucket is None:
            self.at_end[end] = [k]
            heapq.heappush(self.ends, end)
        else:
            bucket.append(k)

    def before_commit(self) -> None:
        """Drop the windows the watermark has passed by more than the view's retention."""
        wm = self.table.watermark() if self.windowed else None
        if wm is None or wm is False:
            return
        horizon = wm - self.p["view_retention_ms"]
        ends, at_end, store = self.ends, self.at_end, self.store
        while ends and ends[0] < horizon:
            end = heapq.heappop(ends)
            for k in at_end.pop(end):
                row = store.get(k)
                if row is None:
                    continue
                if row["end"] == end:
                    del store[k]
                    self._keys.discard(k)
                else:  # a session that grew since: its row expires later
                    self._note_end(row["end"], k)

    def push(self, side, key, value, ts):
        if self.max_ts is None or ts > self.max_ts:
            self.max_ts = ts
        if not self.windowed:
            if value is None:
                self.store.pop(key, None)
            else:
                self.store[key] = value
            return
        for start, _end in value.get("replaces", ()):
            if (key, start) in self._keys:
                self._keys.discard((key, start))
                del self.store[(key, start)]
        k = (key, value["start"])
        if k not in self._keys:
            self._keys.add(k)
            self._note_end(value["end"], k)
        self.store[k] = value

    def push_many(self, side, recs):
        """A windowed step's rows: ``push`` of each, inlined (compiled: ``_cwindow.view_rows``,
        when built, ``_push_rows`` below, its reference, for what it does not take)."""
        if not self.windowed:
            super().push_many(side, recs)
            return
        if _view_rows_c is not None:
            keys, at_end, ends, rows = self._keys, self.at_end, self.ends, self.store.direct()[0]
            i, n = 0, len(recs)
            while i < n:
                i, self.max_ts = _view_rows_c(recs, i, keys, at_end, ends, rows, self.max_ts)
                if i < n:
                    self._push_rows(recs[i : i + 1])
                    i += 1
            return
        self._push_rows(recs)

    def _push_rows(self, recs) -> None:
        max_ts, keys, store = self.max_ts, self._keys, self.store
        # rows are dicts (never None): set straight into the store's cache (Store.direct)
        at_end, rows = self.at_end, store.direct()[0]
        r = None
        try:
            for r in recs:
                key, value, ts = r[0], r[1], r[2]
                if max_ts is None or ts > max_ts:
                    max_ts = ts
                replaces = value.get("replaces")
                if replaces:
                    for start, _end in replaces:
                        if (key, start) in keys:
                            keys.discard((key, start))
                            del store[(key, start)]
                k = (key, value["start"])
                if k not in keys:
                    keys.add(k)
                    end = value["end"]
                    bucket = at_end.get(end)
                    if bucket is None:
                        at_end[end] = [k]
                        heapq.heappush(self.ends, end)
                    else:
                        bucket.append(k)
                rows[k] = value
        except Exception:
            self.task.blame(r)
            raise
        finally:
            self.max_ts = max_ts


class _Cep(_Step):
    """``cep.CepOperator``: matches go to the children, timed-out partials to ``timed_out()``."""

    def __init__(self, node, task):
        super().__init__(node, task)
        self.op: CepOperator | None = None

    def restored(self) -> None:
        self.op = CepOperator(
            self.p["pattern"],
            out_of_orderness_ms=self.p["ooo"],
            store=self.task.stores[self.p["stores"][0]],
            timeouts=any(isinstance(c, _CepTimeouts) for c, _ in self.children),
        )

    def _out(self, matches, timeouts) -> None:
        for child, side in self.children:
            for k, v, t in timeouts if isinstance(child, _CepTimeouts) else matches:
                child.push(side, k, v, t)

    def push(self, side, key, value, ts):
        late = self.op.late_count
        self._out(*self.op.process(key, value, ts))
        if self.late_children and self.op.late_count != late:
            self.forward_late(key, value, ts)

    def before_commit(self) -> None:
        self.op.sync()

    def flush(self) -> None:
        self._out(*self.op.flush())

    def late(self) -> int:
        return self.op.late_count

    def watermark(self) -> int | None:
        return self.op.watermark


class _Search(_Step):
    """``search.QueryIndex``: side 1 (the queries topic) changes the queries, side 0 events
    are matched; each match goes on keyed by its query id."""

    def __init__(self, node, task):
        super().__init__(node, task)
        self.index = QueryIndex(node.params.get("for_topic"))

    def push(self, side, key, value, ts):
        if side == 1:
            if key is not None:  # a query needs an id; a keyless record names none
                self.index.put(str(key), value)
            return
        for qid in self.index.match(value):
            self.forward(qid, {"query": qid, "key": key, "event": value}, ts)


class _CepTimeouts(_Step):
    def push(self, side, key, value, ts):
        self.forward(key, value, ts)


class _LateEvents(_Step):
    """``Stream.late()``: its parent's late input records, passed on unchanged."""

    def push(self, side, key, value, ts):
        self.forward(key, value, ts)


_KINDS = {
    "cep": _Cep,
    "cep_timeouts": _CepTimeouts,
    "late_events": _LateEvents,
    "search": _Search,
    "source": _Source,
    "filter": _Filter,
    "map": _Map,
    "key_by": _KeyBy,
    "repartition": _Repartition,
    "sink": _Sink,
    "foreach": _Foreach,
    "process": _Process,
    "window": _Window,
    "aggregate": _Aggregate,
    "interval_join": _IntervalJoin,
    "asof_join": _AsOfJoin,
    "table_join": _TableJoin,
}


def _make(node: Node, task: Task) -> _Step:
    return _KINDS[node.kind](node, task)


__all__ = ["MIN_TIME", "Task"]
