"""Aggregates of a job's windows: ``Sum("amount")``, ``Count()`` ... over fields of the value.

Each one pairs a value extractor (a field name, a callable, or None for the whole value) with
one of ``streams.processing``'s mergeable specs, which do the arithmetic inside the same
``WindowOperator`` the console's panels use: one operator library, not two. Aggregates over
the same field share one operator; the window stage runs one operator per distinct field and
merges their emissions (they see the same events, so they emit the same windows in the same
order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streams.errors import InvalidConfig
from streams.jobs.conditions import Field
from streams.processing import aggregates as spec

Extract = str | Callable[[object], object] | None


@dataclass(frozen=True)
class FieldAggregate:
    field: Extract = None

    def spec(self) -> spec.AggregateSpec:  # pragma: no cover - abstract
        raise NotImplementedError

    def extractor(self) -> Callable[[object], object]:
        return extractor(self.field)

    def field_id(self) -> object:
        if isinstance(self.field, Field):  # its == builds a condition: compare its path
            return ("__field__", *self.field.path)
        return self.field


def extractor(f: Extract) -> Callable[[object], object]:
    if f is None:
        return _identity
    if callable(f):
        return f
    if isinstance(f, str):
        name = f

        def get(value: object) -> object:
            try:
                return value[name]  # type: ignore[index]
            except (KeyError, TypeError, IndexError) as exc:
                raise InvalidConfig("field", name, f"is not in the value {value!r:.200}") from exc

        return get
    raise InvalidConfig("field", f, "must be a field name, a callable or None")


def _identity(value: object) -> object:
    return value


@dataclass(frozen=True)
class Count(FieldAggregate):
    """Number of events (the field is ignored)."""

    def spec(self) -> spec.AggregateSpec:
        return spec.Count()

    def extractor(self) -> Callable[[object], object]:
        return _zero

    def field_id(self) -> object:
        return "__count__"


def _zero(value: object) -> int:
    return 0


@dataclass(frozen=True)
class Sum(FieldAggregate):
    def spec(self) -> spec.AggregateSpec:
        return spec.Sum()


@dataclass(frozen=True)
class Min(FieldAggregate):
    def spec(self) -> spec.AggregateSpec:
        return spec.Min()


@dataclass(frozen=True)
class Max(FieldAggregate):
    def spec(self) -> spec.AggregateSpec:
        return spec.Max()


@dataclass(frozen=True)
class Mean(FieldAggregate):
    def spec(self) -> spec.AggregateSpec:
        return spec.Mean()
