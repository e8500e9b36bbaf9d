"""`PanelSpec`: what a user-defined panel computes, validated, and how one record is read for it.

A spec names a topic, an aggregation of a JSON field (dotted path), an optional group-by field,
a window kind and size, the event-time field (or none: the record's append time) and the
allowed lateness; `PanelSpec.validate` explains a bad value by field name. `extract`,
`parse_time` and `_Parser` turn one record into ``(key, value, event_time)`` or a parse error.

Immutable and thread-safe.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from streams.errors import InvalidConfig
from streams.processing.aggregates import (
    AggregateSpec,
    Count,
    Max,
    Mean,
    Min,
    Quantile,
    Sum,
)
from streams.processing.operator import WindowOperator
from streams.processing.windows import Hopping, Session, Sliding, Tumbling

AGGREGATIONS = ("count", "sum", "min", "max", "mean", "p50", "p95", "p99")
WINDOWS = ("tumbling", "hopping", "sliding", "session")
IDLE_TIMEOUT_MS = 5_000
MIN_SIZE_MS = 100
MAX_SIZE_MS = 24 * 3600_000
MAX_WINDOWS_PER_EVENT = 100  # hopping: size / step
MAX_DELAY_MS = 3600_000  # lateness and out-of-orderness

_MISSING = object()


class ValueDecoder(Protocol):
    """Reads a topic's values with a schema (``streams.schemas.mapping.PartDecoder``: the
    registry's wire format, or the topic's mapped schema); raises ``ValueError`` for bytes it
    cannot read."""

    def handles(self, data: bytes | None) -> bool: ...

    def value(self, data: bytes) -> object: ...


class TopicDecoders(Protocol):
    """Each topic's value decoder (``streams.schemas.mapping.TopicReading``)."""

    def value(self, topic: str) -> ValueDecoder | None: ...


def read_document(raw: bytes | None, decoder: ValueDecoder | None = None) -> object:
    """A record value as a document: JSON, or (with a `decoder`) a value it reads (the
    registry's wire format, a mapped topic's schema) decoded; `_MISSING` when it is neither."""
    if raw is None:
        return _MISSING
    if decoder is not None and decoder.handles(raw):
        try:
            return decoder.value(raw)
        except ValueError:
            return _MISSING
    try:
        return json.loads(raw)
    except ValueError:
        return _MISSING


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def _aggregate(name: str) -> AggregateSpec:
    return {
        "count": Count,
        "sum": Sum,
        "min": Min,
        "max": Max,
        "mean": Mean,
    }.get(name, lambda: Quantile(int(name[1:]) / 100))()


@dataclass(frozen=True)
class PanelSpec:
    """What one panel computes. ``validate`` (and ``from_dict``) raise ``InvalidConfig`` whose
    ``key`` is the offending field's name."""

    topic: str
    aggregation: str  # one of AGGREGATIONS
    value_field: str | None = None  # dotted JSON path ("total", "items.0.qty"); not for count
    group_by: str | None = None  # dotted JSON path; its value as text is the key; None -> "all"
    window: str = "tumbling"  # one of WINDOWS
    size_ms: int = 10_000
    step_ms: int | None = None  # hopping only
    gap_ms: int | None = None  # session only
    time_field: str | None = None  # dotted path to epoch ms or ISO-8601; None -> log timestamp
    lateness_ms: int = 0  # grace
    out_of_orderness_ms: int = 0

    def validate(self) -> None:
        if not isinstance(self.topic, str) or not self.topic.strip():
            raise InvalidConfig("topic", self.topic, "name a topic")
        if self.aggregation not in AGGREGATIONS:
            raise InvalidConfig(
                "aggregation", self.aggregation, f"must be one of {', '.join(AGGREGATIONS)}"
            )
        if self.aggregation != "count" and self.value_field is None:
            raise InvalidConfig(
                "value_field", None, f"{self.aggregation} needs a field to aggregate"
            )
        for name in ("value_field", "group_by", "time_field"):
            _check_path(name, getattr(self, name))
        if self.window not in WINDOWS:
            raise InvalidConfig("window", self.window, f"must be one of {', '.join(WINDOWS)}")
        if self.window != "session":
            _check_int("size_ms", self.size_ms, MIN_SIZE_MS, MAX_SIZE_MS)
        if self.window == "hopping":
            if self.step_ms is None:
                raise InvalidConfig("step_ms", None, "a hopping window needs a step")
            _check_int("step_ms", self.step_ms, 1, self.size_ms)
            if self.size_ms / self.step_ms > MAX_WINDOWS_PER_EVENT:
                raise InvalidConfig(
                    "step_ms", self.step_ms, f"size/step may be at most {MAX_WINDOWS_PER_EVENT}"
                )
        if self.window == "session":
            if self.gap_ms is None:
                raise InvalidConfig("gap_ms", None, "a session window needs a gap")
            _check_int("gap_ms", self.gap_ms, MIN_SIZE_MS, MAX_SIZE_MS)
        _check_int("lateness_ms", self.lateness_ms, 0, MAX_DELAY_MS)
        _check_int("out_of_orderness_ms", self.out_of_orderness_ms, 0, MAX_DELAY_MS)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> PanelSpec:
        """Build and validate a spec from form or JSON data: numbers may be strings, empty
        strings and None mean "not set" (the default), and keys that are not fields are
        ignored."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, object] = {}
        for name, value in d.items():
            if name not in names:
                continue
            if isinstance(value, str):
                value = value.strip()
                if value == "" and name not in ("topic", "aggregation"):
                    continue
            if value is None and names[name].default is not None:
                continue  # "not given": keep the default (size, lateness, ...)
            if name.endswith("_ms") and value is not None:
                value = _coerce_int(name, value)
            kwargs[name] = value
        for required in ("topic", "aggregation"):
            if required not in kwargs:
                raise InvalidConfig(required, None, "is required")
        spec = cls(**kwargs)
        spec.validate()
        return spec

    def operator(self, clock: Callable[[], int]) -> WindowOperator:
        """The window operator this spec runs (validated first)."""
        self.validate()
        window = {
            "tumbling": lambda: Tumbling(self.size_ms),
            "hopping": lambda: Hopping(self.size_ms, self.step_ms),
            "sliding": lambda: Sliding(self.size_ms),
            "session": lambda: Session(self.gap_ms),
        }[self.window]()
        return WindowOperator(
            window,
            {self.aggregation: _aggregate(self.aggregation)},
            out_of_orderness_ms=self.out_of_orderness_ms,
            grace_ms=self.lateness_ms,
            idle_timeout_ms=IDLE_TIMEOUT_MS if self.time_field else None,
            emit="current",
            late="side",  # the job keeps the latest late events to mark them on the chart
            clock=clock,
        )


def _check_path(name: str, path: object) -> None:
    if path is None:
        return
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        raise InvalidConfig(name, path, "must be a dotted JSON path such as total or items.0.qty")


def _check_int(name: str, value: object, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfig(name, value, "must be a whole number of milliseconds")
    if not lo <= value <= hi:
        raise InvalidConfig(name, value, f"must be between {lo} and {hi} ms")


def _coerce_int(name: str, value: object) -> object:
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise InvalidConfig(name, value, "must be a whole number of milliseconds") from None
        if not number.is_integer():
            raise InvalidConfig(name, value, "must be a whole number of milliseconds")
        return int(number)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# ------------------------------------------------------------------------------ record parsing


def extract(doc: object, path: str) -> object:
    """The value at a dotted path (list items by index), or ``_MISSING``."""
    for part in path.split("."):
        if isinstance(doc, dict):
            doc = doc.get(part, _MISSING)
        elif isinstance(doc, list):
            try:
                doc = doc[int(part)]
            except (ValueError, IndexError):
                return _MISSING
        else:
            return _MISSING
        if doc is _MISSING:
            return _MISSING
    return doc


def _number(value: object) -> float | None:
    if isinstance(value, bool) or value is None or value is _MISSING:
        return None
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def parse_time(value: object) -> int | None:
    """Epoch milliseconds from a number or an ISO-8601 string (naive means UTC)."""
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return (dt - _EPOCH) // _MS  # exact: no float rounding of the milliseconds
    number = _number(value)
    return None if number is None else int(number)


class _Parser:
    """Turns one record into ``(key, value, event_time)`` or None (a parse error)."""

    def __init__(self, spec: PanelSpec, decoder: ValueDecoder | None = None):
        self.decoder = decoder
        self.value_field = spec.value_field if spec.aggregation != "count" else None
        self.group_by = spec.group_by
        self.time_field = spec.time_field

    def __call__(self, raw: bytes | None, log_ts: int) -> tuple[str, object, int] | None:
        doc = read_document(raw, self.decoder)
        if doc is _MISSING:
            return None
        value = None
        if self.value_field is not None:
            value = _number(extract(doc, self.value_field))
            if value is None:
                return None
        key = "all"
        if self.group_by is not None:
            group = extract(doc, self.group_by)
            if group is _MISSING:
                return None
            key = group if isinstance(group, str) else json.dumps(group, sort_keys=True)
        t = log_ts
        if self.time_field is not None:
            t = parse_time(extract(doc, self.time_field))
            if t is None:
                return None
        return key, value, t
