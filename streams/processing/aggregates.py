"""Mergeable aggregate specs and the accumulator layout the window operator keeps per window.

A window's state is one small list (see the ``K``..``SK`` indexes below): its key, bounds,
revision, liveness and the running count, sum, min, max and, when a quantile is asked for, a
quantile sketch. Each spec only *reads* that list (``value``); the operator updates the fields
that the job's specs need (``needs``) inline in its hot loop, so adding an event allocates
nothing.
Everything here is mergeable (count and sum add, min/max compare, sketches merge), which is what
lets session windows merge.

Quantiles use ``sketch.QuantileSketch``, a small DDSketch-style sketch (relative accuracy 1 %:
a reported quantile is within 1 % of the value of the requested rank), mergeable exactly; its
docstring says why not the ``ddsketch`` package.

Thread-safety: specs are immutable; accumulators belong to one operator (not thread-safe).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from streams.errors import InvalidConfig
from streams.processing.sketch import QuantileSketch

# Accumulator layout (one list per window).
K, S, E, REV, ALIVE, CNT, SUM, MIN, MAX, SK = range(10)
ACC_LEN = 10
SKETCH_ACCURACY = 0.01

NEED_SUM, NEED_MINMAX, NEED_SKETCH = "sum", "minmax", "sketch"


def new_acc(key: object, start: int, end: int, sketch: bool) -> list:
    return [
        key,
        start,
        end,
        0,
        True,
        0,
        0,
        math.inf,
        -math.inf,
        QuantileSketch(SKETCH_ACCURACY) if sketch else None,
    ]


def merge_into(a: list, b: list) -> None:
    """Fold accumulator `b`'s aggregates into `a` (bounds and revision are the caller's)."""
    a[CNT] += b[CNT]
    a[SUM] += b[SUM]
    if b[MIN] < a[MIN]:
        a[MIN] = b[MIN]
    if b[MAX] > a[MAX]:
        a[MAX] = b[MAX]
    if a[SK] is not None and b[SK] is not None:
        a[SK].merge(b[SK])


def add_value(acc: list, v: float, need_sum: bool, need_minmax: bool) -> None:
    """The slow-path update (the hot loops inline the same steps)."""
    acc[CNT] += 1
    if need_sum:
        acc[SUM] += v
    if need_minmax:
        if v < acc[MIN]:
            acc[MIN] = v
        if v > acc[MAX]:
            acc[MAX] = v
    if acc[SK] is not None:
        acc[SK].add(v)


class AggregateSpec:
    """Base of the aggregate specs: what they need kept, and their value from an accumulator.

    `expr`, when set, is the same value as a Python expression over the accumulator ``a``:
    ``values_builder`` compiles the specs of a job into one function, which makes emitting a
    result several times cheaper than calling ``value`` per spec.
    """

    needs: frozenset[str] = frozenset()
    expr: str | None = None

    def value(self, acc: list) -> object:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True)
class Count(AggregateSpec):
    """Number of events in the window (the value given to ``process`` is ignored)."""

    needs = frozenset()
    expr = f"a[{CNT}]"

    def value(self, acc: list) -> int:
        return acc[CNT]


@dataclass(frozen=True)
class Sum(AggregateSpec):
    needs = frozenset({NEED_SUM})
    expr = f"a[{SUM}]"

    def value(self, acc: list) -> float:
        return acc[SUM]


@dataclass(frozen=True)
class Min(AggregateSpec):
    """Smallest value; None for a window without events (never emitted in practice)."""

    needs = frozenset({NEED_MINMAX})
    expr = f"(a[{MIN}] if a[{CNT}] else None)"

    def value(self, acc: list) -> float | None:
        return acc[MIN] if acc[CNT] else None


@dataclass(frozen=True)
class Max(AggregateSpec):
    needs = frozenset({NEED_MINMAX})
    expr = f"(a[{MAX}] if a[{CNT}] else None)"

    def value(self, acc: list) -> float | None:
        return acc[MAX] if acc[CNT] else None


@dataclass(frozen=True)
class Mean(AggregateSpec):
    """Sum / count (kept as the two, so it merges exactly)."""

    needs = frozenset({NEED_SUM})
    expr = f"(a[{SUM}] / a[{CNT}] if a[{CNT}] else None)"

    def value(self, acc: list) -> float | None:
        return acc[SUM] / acc[CNT] if acc[CNT] else None


def values_builder(aggregates: list[tuple[str, AggregateSpec]]) -> Callable[[list], dict]:
    """One function ``acc -> {name: value}`` for a job's specs (compiled once per operator:
    the names are ``repr``-quoted strings, the expressions come from the spec classes)."""
    env: dict[str, object] = {}
    parts = []
    for i, (name, spec) in enumerate(aggregates):
        expr = type(spec).expr
        if expr is None:
            env[f"_v{i}"] = spec.value
            expr = f"_v{i}(a)"
        parts.append(f"{name!r}: {expr}")
    return eval("lambda a: {" + ", ".join(parts) + "}", env)  # noqa: S307 - see docstring


def _check_q(q: object) -> float:
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 1:
        raise InvalidConfig("quantile", q, "must be a number between 0 and 1")
    return float(q)


def quantile_name(q: float) -> str:
    """0.5 -> "p50", 0.95 -> "p95", 0.999 -> "p99.9"."""
    return f"p{round(q * 100, 6):g}"


@dataclass(frozen=True)
class Quantiles(AggregateSpec):
    """Approximate quantiles (DDSketch-style, 1 % relative accuracy) as ``{"p50": .., ...}``;
    every entry is None for a window without events."""

    qs: tuple[float, ...] = (0.5, 0.95, 0.99)
    needs = frozenset({NEED_SKETCH, NEED_MINMAX})

    def __post_init__(self) -> None:
        if not self.qs:
            raise InvalidConfig("qs", self.qs, "needs at least one quantile")
        object.__setattr__(self, "qs", tuple(_check_q(q) for q in self.qs))

    def value(self, acc: list) -> dict[str, float | None]:
        sketch = acc[SK]
        if not acc[CNT] or sketch is None:
            return {quantile_name(q): None for q in self.qs}
        values = sketch.quantiles(self.qs)
        return {quantile_name(q): _clamped(acc, v) for q, v in zip(self.qs, values, strict=True)}


@dataclass(frozen=True)
class Quantile(AggregateSpec):
    """One approximate quantile as a plain number (what a console panel's "p95" shows)."""

    q: float
    needs = frozenset({NEED_SKETCH, NEED_MINMAX})

    def __post_init__(self) -> None:
        object.__setattr__(self, "q", _check_q(self.q))

    def value(self, acc: list) -> float | None:
        sketch = acc[SK]
        if not acc[CNT] or sketch is None:
            return None
        return _clamped(acc, sketch.quantiles((self.q,))[0])


def _clamped(acc: list, estimate: float) -> float:
    """The sketch's estimate kept within the window's exact min and max (a one-value window
    reports that value, not a bucket boundary 1 % away)."""
    return min(max(estimate, acc[MIN]), acc[MAX])
