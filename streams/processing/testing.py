"""A testing kit for window operators: a hand-advanced clock, a scripted source and a sink.

The idea of Kafka Streams' TopologyTestDriver and Bytewax's TestingSource + TimeTestingGetter:
feed events and move time by hand, then look at exactly what came out::

    clock = ManualClock(0)
    op = WindowOperator(Tumbling(10), {"n": Count()}, idle_timeout_ms=5_000, clock=clock)
    source = TestingSource([("a", 1, 3, 0), Wait(6_000), ("a", 1, 12, 1)])
    sink = run_operator(op, source, clock=clock)
    sink.finals()

A source item is an event ``(key, value, event_time[, partition])`` or a step: ``Wait(ms)``
(advance the clock, then ``operator.advance()``), ``SetClock(ms)`` (likewise, to an absolute
time) or ``Tick()`` (just ``operator.advance()``). Late events the operator sends to its side
output are collected in ``sink.late``.

Thread-safety: none; test helpers for one thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from streams.processing.operator import LateEvent, WindowOperator, WindowResult


class ManualClock:
    """A clock in ms that only moves when told to; pass it as an operator's `clock`."""

    def __init__(self, start_ms: int = 0):
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("a clock does not go back")
        self.now += ms
        return self.now

    def set(self, ms: int) -> int:
        self.now = ms
        return self.now


@dataclass(frozen=True)
class Wait:
    """Advance the clock by `ms`, then let the operator re-read it."""

    ms: int


@dataclass(frozen=True)
class SetClock:
    """Set the clock to `ms`, then let the operator re-read it."""

    ms: int


@dataclass(frozen=True)
class Tick:
    """Let the operator re-read the clock without moving it."""


Step = Wait | SetClock | Tick


class TestingSource:
    """A scripted input: events (3- or 4-tuples, partition 0 by default) and clock steps."""

    __test__ = False  # not a pytest class

    def __init__(self, items: Iterable[tuple | Step]):
        self.items = list(items)

    def __iter__(self) -> Iterator[tuple | Step]:
        for item in self.items:
            if isinstance(item, (Wait, SetClock, Tick)):
                yield item
            elif len(item) == 3:
                yield (*item, 0)
            elif len(item) == 4:
                yield tuple(item)
            else:
                raise ValueError(f"not an event (key, value, time[, partition]): {item!r}")


class TestingSink:
    """Collects every emission (and late side-output events) in order."""

    __test__ = False

    def __init__(self) -> None:
        self.results: list[WindowResult] = []
        self.late: list[LateEvent] = []

    def __call__(self, results: Iterable[WindowResult]) -> None:
        self.results.extend(results)

    def __len__(self) -> int:
        return len(self.results)

    def finals(self) -> list[WindowResult]:
        return [r for r in self.results if r.final]

    def corrections(self) -> list[WindowResult]:
        return [r for r in self.results if r.correction]

    def by_key(self, key: object) -> list[WindowResult]:
        return [r for r in self.results if r.key == key]

    def latest(self) -> dict[tuple[object, int, int], dict[str, object]]:
        """The last values emitted per window ``(key, start, end)``."""
        return {(r.key, r.start, r.end): r.values for r in self.results}

    def final_values(self, name: str | None = None) -> dict[tuple[object, int, int], object]:
        """``(key, start, end) -> values`` (or one aggregate's value) of the final emissions."""
        return {
            (r.key, r.start, r.end): (r.values if name is None else r.values[name])
            for r in self.finals()
        }


def run_operator(
    operator: WindowOperator,
    source: TestingSource | Iterable[tuple | Step],
    sink: TestingSink | None = None,
    clock: ManualClock | None = None,
    *,
    flush: bool = False,
) -> TestingSink:
    """Drive `operator` through `source` one item at a time into `sink` (a new one if None);
    with `flush`, end with ``operator.flush()``. Clock steps need `clock`."""
    sink = sink if sink is not None else TestingSink()
    if not isinstance(source, TestingSource):
        source = TestingSource(source)
    for item in source:
        if isinstance(item, (Wait, SetClock, Tick)):
            if not isinstance(item, Tick):
                if clock is None:
                    raise ValueError(f"{item!r} needs a ManualClock passed as clock=")
                clock.advance(item.ms) if isinstance(item, Wait) else clock.set(item.ms)
            sink(operator.advance())
        else:
            sink(operator.process(*item))
        if operator.side_output:
            sink.late.extend(operator.side_output)
            operator.side_output.clear()
    if flush:
        sink(operator.flush())
    return sink
