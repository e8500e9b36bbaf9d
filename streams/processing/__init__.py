"""Stream processing: event-time windows over keyed streams (a pure library, no Django).

- ``windows``: the assigners ``Tumbling``, ``Hopping``, ``Sliding``, ``Session``;
- ``aggregates``: mergeable aggregate specs ``Count``, ``Sum``, ``Min``, ``Max``, ``Mean``,
  ``Quantiles`` (and the single-number ``Quantile``);
- ``operator``: ``WindowOperator`` (watermarks, idleness, grace, corrections, late events)
  and its outputs ``WindowResult`` and ``LateEvent``;
- ``skew``: ``ClockSkewCorrector`` (device clock offsets from send/receive times);
- ``testing``: a hand-driven clock, a scripted source and a sink for tests;
- ``panels``: topic aggregation jobs over the log store for the console's panels.
"""

from streams.processing.aggregates import (
    AggregateSpec,
    Count,
    Max,
    Mean,
    Min,
    Quantile,
    Quantiles,
    Sum,
)
from streams.processing.operator import LateEvent, WindowOperator, WindowResult
from streams.processing.skew import ClockSkewCorrector
from streams.processing.windows import Hopping, Session, Sliding, Tumbling

__all__ = [
    "AggregateSpec",
    "ClockSkewCorrector",
    "Count",
    "Hopping",
    "LateEvent",
    "Max",
    "Mean",
    "Min",
    "Quantile",
    "Quantiles",
    "Session",
    "Sliding",
    "Sum",
    "Tumbling",
    "WindowOperator",
    "WindowResult",
]
