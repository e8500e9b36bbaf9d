"""Metric series: the names of what the broker measures, and one windowed value of one.

A series name is ``kind/part/part…`` with each part percent-encoded, so topic names and group
ids (which may hold ``/``) round-trip; build names with `series()` and read them with
`parse_series()`, never by hand.

Kinds and their parts (rates are totals per window: records or bytes; divide by the window's
length in seconds for a per-second rate — a 1-minute rollup of a minute the broker was up for
only part of holds the mean of its seconds × 60, so that division gives the average rate while
measured; gauges are the value at the window's end, or the peak over a 1-minute rollup):

====================  ==================================  ======
kind                  parts                               type
====================  ==================================  ======
records_in, bytes_in  () total | (topic,) | (topic, p)    rate
records_out,          (topic,) | (topic, p)               rate   consumed by groups (commits)
bytes_out
group_records,        (group,)                            rate   processing time (commit time)
group_bytes
group_records_et      (group,)                            rate   event time (record timestamps)
group_lag             (group,) | (group, topic, p)        gauge
group_committed       (group, topic, p)                   gauge
end_offset            (topic, p)                          gauge
====================  ==================================  ======
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import quote, unquote

RATE_KINDS = frozenset(
    {
        "records_in",
        "bytes_in",
        "records_out",
        "bytes_out",
        "group_records",
        "group_bytes",
        "group_records_et",
    }
)
GAUGE_KINDS = frozenset({"group_lag", "end_offset", "group_committed"})
# rates whose windows exist only when something happened (an event-time window opens with its
# first record): a missing window is a zero, not a gap in the measurement
SPARSE_KINDS = frozenset({"group_records_et"})

SECOND_MS = 1000
MINUTE_MS = 60_000


class Point(NamedTuple):
    """One window of one series: closed, or (`partial`) still open, with its value so far."""

    series: str
    t: int  # window start, ms since the epoch (UTC)
    w: int  # window length in ms: SECOND_MS or MINUTE_MS
    v: float  # rate kinds: total in the window; gauge kinds: value at the end (rollup: peak)
    rev: int = 0  # 0: first emission; > 0: a correction of an emitted window
    # an open window's value so far (never kept: the closed window replaces it): a rate's is
    # the rate measured so far as a total over the whole window, a gauge's its value now
    partial: bool = False

    def closed(self) -> list:
        """[series, t, w, v, rev]: what ``__metrics`` keeps of a closed window."""
        return [self.series, self.t, self.w, self.v, self.rev]


def series(kind: str, *parts: object) -> str:
    """The name of a series, e.g. ``series("records_in", "orders", 0)``."""
    if kind not in RATE_KINDS and kind not in GAUGE_KINDS:
        raise ValueError(f"unknown metric kind {kind!r}")
    return "/".join([kind, *(quote(str(p), safe="") for p in parts)])


def parse_series(name: str) -> tuple[str, tuple[str, ...]]:
    """(kind, parts) of a series name; parts come back as strings."""
    kind, *parts = name.split("/")
    return kind, tuple(unquote(p) for p in parts)


def is_rate(name: str) -> bool:
    return name.split("/", 1)[0] in RATE_KINDS


def is_sparse(name: str) -> bool:
    return name.split("/", 1)[0] in SPARSE_KINDS
