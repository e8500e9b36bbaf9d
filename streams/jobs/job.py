"""The chained API: a ``Job`` is a graph of steps built from plain Python calls.

::

    job = Job("revenue")
    orders = job.stream("orders", value=JSON, timestamp=field("ts"))
    (orders.filter(lambda o: o["amount"] > 0)
           .key_by("country")
           .window(Tumbling(60_000), grace_ms=5_000)
           .aggregate(revenue=Sum("amount"), n=Count())
           .to("revenue-by-country"))

Building a job only records steps (nothing runs, nothing is read); ``runner.Runner`` (over a
``LogStore``) or ``testing.TestDriver`` (in memory) instantiate it as one *task* per input
partition, each with its own operators and state stores.

Keys: a stream keeps its records' keys until ``key_by`` changes them. A stateful step (window,
join, process with state) needs records of one key in one task, so on a re-keyed stream it
first goes through ``repartition()`` — written to the internal topic
``<job>-<name>-repartition``, partitioned by the new key, and read back — inserted
automatically if not called explicitly.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streams.errors import InvalidConfig
from streams.jobs.aggregates import FieldAggregate, extractor
from streams.jobs.cep import Pattern
from streams.jobs.joins import Joiner, pair
from streams.jobs.search import QUERIES
from streams.jobs.serde import BYTES, JSON, KEY, TEXT, Serde, serde_of
from streams.jobs.views import VIEW_RETENTION_MS, view_store
from streams.processing.windows import Hopping, Session, Tumbling


@dataclass(eq=False)
class Node:
    """One step of a job's graph; `parents` are ``(node, input side)``."""

    id: int
    kind: str
    name: str
    params: dict[str, Any]
    parents: list[tuple[Node, int]] = field(default_factory=list)


# steps with a watermark whose late input ``Stream.late()`` can route to a side output
LATE_KINDS = frozenset({"window", "interval_join", "asof_join", "cep"})


class Job:
    """A named dataflow. The name prefixes its internal topics and is its consumer group."""

    def __init__(self, name: str):
        if not name or not isinstance(name, str):
            raise InvalidConfig("name", name, "a job needs a non-empty name")
        self.name = name
        self.nodes: list[Node] = []
        self._ids = itertools.count()
        self._names: set[str] = set()

    # ------------------------------------------------------------------ inputs

    def stream(
        self,
        topic: str,
        *,
        key: Serde | str = TEXT,
        value: Serde | str = BYTES,
        timestamp: Callable[[object], int] | None = None,
    ) -> Stream:
        """Records of `topic` as a stream. `timestamp` extracts the event time (ms) from the
        deserialised value (e.g. ``field("ts")``); without it, the record's timestamp."""
        node = self._node(
            "source",
            topic,
            None,
            topic=topic,
            key=serde_of(key),
            value=serde_of(value),
            timestamp=timestamp,
            table=False,
        )
        return Stream(self, node, rekeyed=False)

    def table(
        self,
        topic: str,
        *,
        key: Serde | str = TEXT,
        value: Serde | str = JSON,
        timestamp: Callable[[object], int] | None = None,
    ) -> Table:
        """`topic` (normally compacted) read as a table: each record sets its key's row from
        its timestamp on; a ``None`` value (tombstone) deletes it."""
        node = self._node(
            "source",
            topic,
            None,
            topic=topic,
            key=serde_of(key),
            value=serde_of(value),
            timestamp=timestamp,
            table=True,
        )
        return Table(self, node)

    # ------------------------------------------------------------------ graph

    def _node(self, kind: str, name: str | None, parents, **params) -> Node:
        n = next(self._ids)
        if name is None:
            name = f"{kind}-{n}"
        elif kind != "source":
            if name in self._names:
                raise InvalidConfig("name", name, f"job {self.name!r} already has a step so named")
            self._names.add(name)
        node = Node(n, kind, name, params, list(parents or []))
        self.nodes.append(node)
        return node

    def sources(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "source"]

    def children(self) -> dict[int, list[tuple[Node, int]]]:
        out: dict[int, list[tuple[Node, int]]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for parent, side in n.parents:
                out[parent.id].append((n, side))
        return out

    def internal_topic(self, name: str, suffix: str) -> str:
        """``<job>-<name>-<suffix>``; an automatic name already says its kind."""
        if name.startswith(f"{suffix}-"):
            return f"{self.name}-{name}"
        return f"{self.name}-{name}-{suffix}"

    def stores(self) -> list[str]:
        """Names of the state stores the job's steps declare (one changelog each)."""
        return [s for n in self.nodes for s in n.params.get("stores", ())]


class Stream:
    """A stream of keyed records; each method adds a step and returns the resulting stream."""

    def __init__(self, job: Job, node: Node, *, rekeyed: bool):
        self.job, self.node, self.rekeyed = job, node, rekeyed

    def _then(
        self, kind: str, name: str | None = None, rekeyed: bool | None = None, **params
    ) -> Stream:
        node = self.job._node(kind, name, [(self.node, 0)], **params)
        return Stream(self.job, node, rekeyed=self.rekeyed if rekeyed is None else rekeyed)

    # stateless
    def filter(self, predicate: Callable[[object], bool]) -> Stream:
        """Keep the records whose value `predicate` is true for."""
        return self._then("filter", fn=predicate)

    def map(self, fn: Callable[[object], object]) -> Stream:
        """Replace each value by ``fn(value)`` (the key and timestamp stay)."""
        return self._then("map", fn=fn)

    def key_by(self, by: str | Callable[[object], object]) -> Stream:
        """Re-key each record by a field of its value or ``by(value)``."""
        return self._then("key_by", fn=extractor(by), rekeyed=True)

    def repartition(
        self,
        name: str | None = None,
        *,
        partitions: int | None = None,
        key: Serde | str = KEY,
        value: Serde | str = JSON,
    ) -> Stream:
        """Write the stream to ``<job>-<name>-repartition`` partitioned by key (murmur2, as
        Kafka) and read it back, so that each key's records meet in one task. `partitions`
        defaults to the partition count of the job's first input topic. To join a topic,
        the keys must be written as that topic's key bytes: the default `key` serialiser
        writes strings as UTF-8 (as ``TEXT``), other keys as JSON (see ``serde.KeySerde``)."""
        n = self.job._node("repartition", name, [(self.node, 0)], partitions=partitions)
        topic = self.job.internal_topic(n.name, "repartition")
        n.params["topic"] = topic
        src = self.job._node(
            "source",
            topic,
            [(n, 0)],
            topic=topic,
            key=serde_of(key),
            value=serde_of(value),
            timestamp=None,
            table=False,
            internal=True,
            partitions=partitions,
        )
        return Stream(self.job, src, rekeyed=False)

    def _keyed(self) -> Stream:
        return self.repartition() if self.rekeyed else self

    # stateful
    def process(self, fn: Callable[[object, KeyState], object], *, store: str) -> Stream:
        """``fn(value, state) -> new value`` with ``state.get(name, default)``,
        ``state.set(name, value)`` and ``state.delete(name)`` scoped to the record's key, kept
        in the store `store` (changelogged as ``<job>-<store>-changelog``)."""
        return self._keyed()._then("process", store, fn=fn, stores=(store,))

    def aggregate(self, *, name: str | None = None, **aggregates: FieldAggregate) -> Table:
        """A running aggregate per key over the whole stream (no window): a table whose row
        for a key is ``{<aggregates>}``, emitted on every update (write it to a compacted
        topic with ``to``, or join it to another table). Its state is a value store with a
        changelog, ``<job>-<name>-changelog``; its rows can be queried and watched while the
        job runs (``views``: a view named `name`, its rows in ``<name>-view``)."""
        _check_aggregates(aggregates)
        keyed = self._keyed()
        node = self.job._node("aggregate", name, [(keyed.node, 0)], aggregates=aggregates)
        node.params["stores"] = (node.name, view_store(node.name))
        return Table(self.job, node)

    def window(
        self,
        window: Tumbling | Hopping | Session,
        *,
        grace_ms: int = 0,
        out_of_orderness_ms: int = 0,
    ) -> WindowedStream:
        """Event-time windows per key (``streams.processing``'s operator and semantics)."""
        if not isinstance(window, (Tumbling, Hopping, Session)):
            raise InvalidConfig(
                "window",
                window,
                "jobs support Tumbling, Hopping and Session windows (their state is "
                "changelogged); sliding windows are not supported yet",
            )
        return WindowedStream(self._keyed(), window, grace_ms, out_of_orderness_ms)

    def join(
        self,
        other: Stream | Table,
        *,
        within: int | None = None,
        how: str = "inner",
        grace_ms: int = 0,
        joiner: Joiner = pair,
        name: str | None = None,
    ) -> Stream:
        """Join with a stream within `within` ms (``joins.IntervalJoin``) or enrich from a
        table at each event's time (``joins.AsOfJoin``); see those for the semantics."""
        left = self._keyed()
        if isinstance(other, Table):
            if within is not None:
                raise InvalidConfig("within", within, "a stream-table join takes no interval")
            return left._asof(other.node, how, None, grace_ms, joiner, name, "join")
        if within is None:
            raise InvalidConfig("within", within, "a stream-stream join needs within=<ms>")
        right = other._keyed()
        node = self.job._node(
            "interval_join",
            name,
            [(left.node, 0), (right.node, 1)],
            within=within,
            how=how,
            grace_ms=grace_ms,
            joiner=joiner,
        )
        node.params["stores"] = (f"{node.name}-left", f"{node.name}-right", f"{node.name}-meta")
        return Stream(self.job, node, rekeyed=False)

    def join_asof(
        self,
        other: Stream,
        *,
        tolerance_ms: int | None = None,
        how: str = "inner",
        grace_ms: int = 0,
        joiner: Joiner = pair,
        name: str | None = None,
    ) -> Stream:
        """Join each event with the latest `other` event of its key at or before its time."""
        return self._keyed()._asof(
            other._keyed().node, how, tolerance_ms, grace_ms, joiner, name, "join_asof"
        )

    def _asof(self, right: Node, how, tolerance, grace, joiner, name, kind) -> Stream:
        node = self.job._node(
            "asof_join",
            name,
            [(self.node, 0), (right, 1)],
            how=how,
            tolerance_ms=tolerance,
            grace_ms=grace,
            joiner=joiner,
        )
        node.params["stores"] = (f"{node.name}-versions", f"{node.name}-meta")
        return Stream(self.job, node, rekeyed=False)

    def match(
        self, pattern: Pattern, *, out_of_orderness_ms: int = 0, name: str | None = None
    ) -> MatchStream:
        """Complex event processing (``cep``): the matches of `pattern` per key, as
        ``{stage name: [events]}`` at the time of their last event; ``.timed_out()`` on the
        result gives the partial matches whose ``within`` expired. Events wait in state until
        the watermark (largest event time minus `out_of_orderness_ms`) passes them; semantics
        in ``streams.jobs.cep``."""
        if not isinstance(pattern, Pattern):
            raise InvalidConfig("pattern", pattern, "is not a Pattern (Pattern.begin(...))")
        pattern.check()
        keyed = self._keyed()
        node = self.job._node(
            "cep", name, [(keyed.node, 0)], pattern=pattern, ooo=out_of_orderness_ms
        )
        node.params["stores"] = (node.name,)
        return MatchStream(self.job, node, rekeyed=False)

    def late(self) -> Stream:
        """The side output of this step's late events (a windowed aggregate, a join or a
        pattern match): each input record that arrived after the step's watermark had passed
        it (``streams.processing``'s rule: its windows had closed, or it was older than a
        join's watermark), as it came in — key, value and event time — instead of being
        dropped. The step still counts it in its late count; without ``late()`` it is
        counted and dropped."""
        if self.node.kind not in LATE_KINDS:
            raise InvalidConfig(
                "late",
                self.node.name,
                "only a windowed aggregate, a stream join or a pattern match has late events",
            )
        node = self.job._node("late_events", None, [(self.node, 0)])
        return Stream(self.job, node, rekeyed=False)

    def search(
        self, *, queries: str, for_topic: str | None = None, name: str | None = None
    ) -> Stream:
        """Search on the stream (``streams.jobs.search``): every event is matched against the
        live queries of the compacted topic `queries` (key = query id, value = a query string
        or ``{"query": ...}``, a tombstone deletes); each match is a record ``(query id,
        {"query": id, "key": event key, "event": value}, event ts)``. The queries topic is read
        whole by every task (a global source). With `for_topic`, a query record
        ``{"query": ..., "topic": t}`` naming another topic than `for_topic` is ignored (one
        queries topic can serve searches over several topics)."""
        if not isinstance(queries, str) or not queries:
            raise InvalidConfig("queries", queries, "name the topic of the saved queries")
        qsrc = self.job._node(
            "source",
            queries,
            None,
            topic=queries,
            key=TEXT,
            value=QUERIES,
            timestamp=None,
            table=True,
            global_=True,
        )
        node = self.job._node("search", name, [(self.node, 0), (qsrc, 1)], for_topic=for_topic)
        return Stream(self.job, node, rekeyed=True)

    # output
    def foreach(
        self, fn: Callable[[object, object, int], None], *, name: str | None = None
    ) -> Stream:
        """Call ``fn(key, value, ts)`` for every record: a sink into a system outside the log
        (a database table, a search index). The runner is at-least-once — after a crash the
        records since the last commit come again — so `fn` must be idempotent (e.g. apply an
        event only if its version is newer than the one the row holds)."""
        self.job._node("foreach", name, [(self.node, 0)], fn=fn)
        return self

    def to(self, topic: str, *, key: Serde | str = JSON, value: Serde | str = JSON) -> Stream:
        """Write every record to `topic` (created with the input's partition count if missing),
        partitioned by key."""
        self.job._node(
            "sink", None, [(self.node, 0)], topic=topic, key=serde_of(key), value=serde_of(value)
        )
        return self


class MatchStream(Stream):
    """The matches of a pattern; ``timed_out()`` is its side output of expired partials."""

    def timed_out(self) -> Stream:
        node = self.job._node("cep_timeouts", None, [(self.node, 0)])
        return Stream(self.job, node, rekeyed=False)


class WindowedStream:
    def __init__(self, stream: Stream, window, grace_ms: int, out_of_orderness_ms: int):
        self.stream, self.window = stream, window
        self.grace_ms, self.ooo = grace_ms, out_of_orderness_ms

    def aggregate(
        self,
        *,
        name: str | None = None,
        emit: str = "final",
        view_retention_ms: int = VIEW_RETENTION_MS,
        **aggregates: FieldAggregate,
    ) -> Stream:
        """One record per window (``emit="final"``: when it closes, its last word) or per
        update (``"updates"``): key = the stream's key, value = ``{"start", "end",
        <aggregates>, "revision", "final"}``, timestamp = ``end - 1``. What it emits is also
        a queryable view (``views``) keyed by ``(key, start)``, which keeps a window until the
        watermark is `view_retention_ms` past its end (a day by default, as Kafka Streams'
        window stores)."""
        if emit not in ("final", "updates"):
            raise InvalidConfig("emit", emit, "must be final or updates")
        if isinstance(view_retention_ms, bool) or not isinstance(view_retention_ms, int):
            raise InvalidConfig("view_retention_ms", view_retention_ms, "must be whole ms")
        if view_retention_ms < 0:
            raise InvalidConfig("view_retention_ms", view_retention_ms, "must be >= 0")
        _check_aggregates(aggregates)
        s = self.stream._then(
            "window",
            name,
            window=self.window,
            grace_ms=self.grace_ms,
            ooo=self.ooo,
            aggregates=aggregates,
            emit=emit,
            view_retention_ms=view_retention_ms,
        )
        s.node.params["stores"] = (s.node.name, view_store(s.node.name))
        return s


def _check_aggregates(aggregates: dict) -> None:
    if not aggregates:
        raise InvalidConfig("aggregates", aggregates, "name at least one: n=Count()")
    for k, a in aggregates.items():
        if not isinstance(a, FieldAggregate):
            raise InvalidConfig(f"aggregates[{k!r}]", a, "is not an aggregate (Sum(...)...)")


class Table:
    """A table: a changelog of rows by key. Join it to a stream (enrichment) or to another
    table (a materialised view), or write its changes with ``to``."""

    def __init__(self, job: Job, node: Node):
        self.job, self.node = job, node

    def join(
        self, other: Table, *, how: str = "inner", joiner: Joiner = pair, name: str | None = None
    ) -> Table:
        """Table–table join by key (``joins.TableJoin``): a table of the joined rows whose
        changes (retractions as tombstones) flow downstream; it is a queryable view
        (``views``)."""
        node = self.job._node(
            "table_join", name, [(self.node, 0), (other.node, 1)], how=how, joiner=joiner
        )
        node.params["stores"] = (
            f"{node.name}-left",
            f"{node.name}-right",
            view_store(node.name),
        )
        return Table(self.job, node)

    def to(self, topic: str, *, key: Serde | str = JSON, value: Serde | str = JSON) -> Table:
        self.job._node(
            "sink", None, [(self.node, 0)], topic=topic, key=serde_of(key), value=serde_of(value)
        )
        return self


class KeyState:
    """The state of one key in a ``process`` step's store."""

    __slots__ = ("_store", "_key")

    def __init__(self, store, key: object):
        self._store, self._key = store, key

    def get(self, name: str, default: object = None) -> object:
        return self._store.get((self._key, name), default)

    def set(self, name: str, value: object) -> None:
        self._store[(self._key, name)] = value

    def delete(self, name: str) -> None:
        self._store.pop((self._key, name), None)
