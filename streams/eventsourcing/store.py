"""Aggregates, commands and the single-writer command handler over a topic of the log.

An *aggregate* (a product, a cart) is the unit of consistency: its state is the fold of its
events, and its *version* is the number of events it has. A *command* asks to change one
aggregate; a ``Decider`` turns it into events after validating it against the current state, or
rejects it. Events are immutable records on one topic, keyed by aggregate id, so all of an
aggregate's events are in one partition, in order.

Optimistic concurrency — the design and why
-------------------------------------------
A command may carry ``expected_version``: the version its sender read. It wins only if the
aggregate still has that version, so two commands sent against the same version cannot both win.
Kafka has no conditional append ("append only if the log still ends at N"), and we did not add
one to the log: the check needs the aggregate's current state anyway (to validate the command),
so it lives with the state, in a **single writer per partition** — the ``CommandHandler`` —
which owns the aggregates of its partitions:

- commands of one partition are decided one at a time under that partition's lock: catch up
  with the log, check ``expected_version``, decide, append the events as one batch, fold them
  into the state. Nothing else writes the topic, so the log cannot move between the check and the
  append; commands of different partitions run in parallel;
- ownership is enforced, not assumed: the ``LogStore`` directory lock allows one process, and
  one handler per (store, topic) in it (``OwnershipError`` for a second one). Producers through
  the Kafka protocol must send commands, never events; if a foreign record does show up in the
  partition, the handler notices it (the append did not land where it should) and raises
  ``OwnershipError`` instead of carrying on with a stale state;
- a command id makes a retry idempotent: the same id is answered with the first answer, without
  deciding again.

A conditional append in the embedded store would have worked too, but it is a primitive no
Kafka client can use, and every command would re-read its partition to validate; the single
writer keeps the log Kafka's log and validates against state it already holds. The cost is the
one the design names: one writer per partition (a second process would need fencing, e.g. a
transactional producer's epoch).

Thread-safety: ``CommandHandler.handle`` may be called from any number of threads.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from streams.errors import InvalidConfig, TidelogError, TopicAlreadyExists
from streams.log.partitioner import partition_for_key
from streams.log.records import ProducerRecord
from streams.log.store import LogStore

S = TypeVar("S")


class CommandRejected(TidelogError):
    """The command is invalid for the aggregate's current state (no events were written)."""

    code = "command_rejected"


class ConcurrencyConflict(TidelogError):
    """The aggregate's version is not the one the command expected: another command won."""

    code = "concurrency_conflict"

    def __init__(self, aggregate: str, expected: int, actual: int):
        super().__init__(
            f"{aggregate} is at version {actual}, the command expected {expected}: "
            "another command changed it first; read it again and retry"
        )
        self.aggregate, self.expected, self.actual = aggregate, expected, actual


class OwnershipError(TidelogError):
    """Something other than this handler writes (or would write) the events topic."""

    code = "ownership_error"


@dataclass(frozen=True)
class Command:
    """A request to change `aggregate` (``<kind>/<id>``, e.g. ``product/tea``)."""

    aggregate: str
    type: str
    data: Mapping[str, Any] = field(default_factory=dict)
    expected_version: int | None = None
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def kind(self) -> str:
        return self.aggregate.split("/", 1)[0]


@dataclass(frozen=True)
class Event:
    """One immutable fact: the `version`-th event of `aggregate` (versions count from 1)."""

    aggregate: str
    version: int
    type: str
    data: dict
    command: str
    ts_ms: int

    def to_json(self) -> dict:
        return {
            "aggregate": self.aggregate,
            "version": self.version,
            "type": self.type,
            "data": self.data,
            "command": self.command,
            "ts_ms": self.ts_ms,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Event:
        return cls(
            value["aggregate"],
            value["version"],
            value["type"],
            value["data"],
            value["command"],
            value["ts_ms"],
        )


@dataclass(frozen=True)
class Decider(Generic[S]):
    """How one kind of aggregate behaves: its state before any event (`initial`), the events a
    command makes (`decide(command, state) -> [(type, data)]`, raising ``CommandRejected``),
    and how an event changes the state (`evolve(state, event) -> state`, pure)."""

    initial: Callable[[], S]
    decide: Callable[[Command, S], list[tuple[str, dict]]]
    evolve: Callable[[S, Event], S]


@dataclass(frozen=True)
class Accepted:
    """A command that won: the events it wrote and the aggregate's version after them."""

    aggregate: str
    version: int
    events: tuple[Event, ...]
    offsets: tuple[int, ...]
    partition: int


class _Partition:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.position = 0  # next offset to fold into the states
        self.states: dict[str, tuple[int, Any]] = {}  # aggregate -> (version, state)
        # command id -> its answer, for idempotent retries (kept for the handler's lifetime;
        # a long-running deployment would bound it by age)
        self.answers: dict[str, Accepted] = {}


# store -> {topic: its handler}; weak, so a store's entry goes with the store
_OWNERS: weakref.WeakKeyDictionary[LogStore, dict[str, CommandHandler]] = (
    weakref.WeakKeyDictionary()
)
_OWNERS_LOCK = threading.Lock()


class CommandHandler:
    """The single writer of an events topic (see the module docstring)."""

    def __init__(
        self,
        store: LogStore,
        topic: str,
        deciders: Mapping[str, Decider],
        *,
        partitions: int = 1,
        clock: Callable[[], int] | None = None,
    ):
        if not deciders:
            raise InvalidConfig("deciders", deciders, "a handler needs at least one Decider")
        self.store, self.topic, self.deciders = store, topic, dict(deciders)
        self.clock = clock or (lambda: int(time.time() * 1000))
        with _OWNERS_LOCK:
            owners = _OWNERS.setdefault(store, {})
            if topic in owners:
                raise OwnershipError(
                    f"{topic} already has a command handler in this process; one writer owns "
                    "an events topic (close the other one first)"
                )
            owners[topic] = self
        try:
            try:
                store.create_topic(topic, partitions, None)
            except TopicAlreadyExists:
                pass
            self.partitions = store.partition_count(topic)
        except BaseException:
            self.close()
            raise
        self._parts = [_Partition() for _ in range(self.partitions)]

    def close(self) -> None:
        """Give up ownership (another handler may then be opened on the topic)."""
        with _OWNERS_LOCK:
            owners = _OWNERS.get(self.store, {})
            if owners.get(self.topic) is self:
                del owners[self.topic]

    def __enter__(self) -> CommandHandler:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ queries

    def partition_of(self, aggregate: str) -> int:
        return partition_for_key(aggregate.encode(), self.partitions)

    def load(self, aggregate: str) -> tuple[int, Any]:
        """``(version, state)`` of `aggregate` as of the end of the log (version 0: no events);
        the state is a copy (changing it changes nothing)."""
        decider = self._decider(aggregate)
        p = self.partition_of(aggregate)
        part = self._parts[p]
        with part.lock:
            self._catch_up(p, part)
            version, state = part.states.get(aggregate, (0, decider.initial()))
            return version, copy.deepcopy(state)

    # ------------------------------------------------------------------ commands

    def handle(self, command: Command) -> Accepted:
        """Decide `command` and append its events; raises ``CommandRejected`` or
        ``ConcurrencyConflict`` (nothing written then)."""
        decider = self._decider(command.aggregate)
        p = self.partition_of(command.aggregate)
        part = self._parts[p]
        with part.lock:
            self._catch_up(p, part)
            earlier = part.answers.get(command.id)
            if earlier is not None:
                return earlier
            version, state = part.states.get(command.aggregate, (0, decider.initial()))
            if command.expected_version is not None and command.expected_version != version:
                raise ConcurrencyConflict(command.aggregate, command.expected_version, version)
            decided = decider.decide(command, state)
            if not decided:
                return Accepted(command.aggregate, version, (), (), p)
            now = self.clock()
            events = tuple(
                Event(command.aggregate, version + i, etype, dict(data), command.id, now)
                for i, (etype, data) in enumerate(decided, start=1)
            )
            key = command.aggregate.encode()
            records = [
                ProducerRecord(json.dumps(e.to_json()).encode(), key, (), now) for e in events
            ]
            results = self.store.append_batch(self.topic, records, partition=p)
            offsets = tuple(r.offset for r in results)
            if offsets[0] != part.position:
                # a record we did not write landed between our catch-up and our append
                expected, part.position = part.position, -1  # rebuild on next use
                raise OwnershipError(
                    f"{self.topic}[{p}] has records this handler did not write (expected to "
                    f"append at {expected}, appended at {offsets[0]}): only the command "
                    "handler may write an events topic"
                )
            for e in events:
                state = decider.evolve(state, e)
            part.states[command.aggregate] = (events[-1].version, state)
            part.position = offsets[-1] + 1
            answer = Accepted(command.aggregate, events[-1].version, events, offsets, p)
            part.answers[command.id] = answer
            return answer

    # ------------------------------------------------------------------ internals

    def _decider(self, aggregate: str) -> Decider:
        kind = aggregate.split("/", 1)[0]
        decider = self.deciders.get(kind)
        if decider is None or "/" not in aggregate:
            raise CommandRejected(
                f"{aggregate!r} is not an aggregate id of a known kind: use <kind>/<id> with "
                f"kind one of {', '.join(sorted(self.deciders))}"
            )
        return decider

    def _catch_up(self, p: int, part: _Partition) -> None:
        """Fold the partition's events from `part.position` to the end into the states (a new
        handler starts at the log start: the log is the source of truth)."""
        if part.position < 0:  # after an ownership error: rebuild from scratch
            part.position, part.states, part.answers = 0, {}, {}
        start, end = self.store.offsets(self.topic, p)
        part.position = max(part.position, start)
        while part.position < end:
            records = self.store.read(self.topic, p, part.position, max_records=1000)
            if not records:
                break
            for r in records:
                event = Event.from_json(json.loads(r.value))
                decider = self._decider(event.aggregate)
                version, state = part.states.get(event.aggregate, (0, decider.initial()))
                if event.version != version + 1:
                    raise OwnershipError(
                        f"{self.topic}[{p}] offset {r.offset}: {event.aggregate} event version "
                        f"{event.version} after version {version}: the topic was written by "
                        "something other than its command handler"
                    )
                part.states[event.aggregate] = (event.version, decider.evolve(state, event))
                prev = part.answers.get(event.command)
                if prev is None or prev.aggregate != event.aggregate:
                    prev = Accepted(event.aggregate, 0, (), (), p)
                part.answers[event.command] = Accepted(
                    event.aggregate,
                    event.version,
                    (*prev.events, event),
                    (*prev.offsets, r.offset),
                    p,
                )
            part.position = records[-1].offset + 1
