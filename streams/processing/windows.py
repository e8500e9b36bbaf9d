"""Window assigners: which windows of a keyed stream an event at time ``t`` (ms) belongs to.

All windows are half-open, ``[start, end)``, in milliseconds since the epoch. Tumbling and
hopping windows are aligned to the epoch (``start % step == 0``); sliding windows are aligned to
the events that define them and session windows to the first and last event of a session.

The assigners are frozen value objects; the window operator (``operator``) keeps all state.
Thread-safety: immutable, so safe to share.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.errors import InvalidConfig


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidConfig(name, value, "must be a positive whole number of milliseconds")


@dataclass(frozen=True)
class Tumbling:
    """Back-to-back windows of `size_ms`: ``[n*size, (n+1)*size)``; each event is in exactly one."""

    size_ms: int

    def __post_init__(self) -> None:
        _positive("size_ms", self.size_ms)

    def starts(self, t: int) -> tuple[int, ...]:
        return (t - t % self.size_ms,)


@dataclass(frozen=True)
class Hopping:
    """Windows of `size_ms` starting every `step_ms`: ``[n*step, n*step + size)``.

    An event belongs to every such window that contains it (``ceil(size / step)`` of them when
    step divides size); ``step_ms == size_ms`` is a tumbling window. A step larger than the size
    leaves gaps: events in a gap belong to no window and are ignored (not counted as late).
    """

    size_ms: int
    step_ms: int

    def __post_init__(self) -> None:
        _positive("size_ms", self.size_ms)
        _positive("step_ms", self.step_ms)

    def starts(self, t: int) -> tuple[int, ...]:
        step, size = self.step_ms, self.size_ms
        last = t - t % step
        out = []
        s = last
        while s > t - size:
            out.append(s)
            s -= step
        out.reverse()
        return tuple(out)


@dataclass(frozen=True)
class Sliding:
    """Windows holding the events within `size_ms` of each other, one per event time.

    The rule (Kafka Streams' sliding windows, written half-open): an event at time ``t`` defines
    the window ``[t + 1 - size, t + 1)``, i.e. the events ``e`` of its key with
    ``t - size < e.t <= t`` (the `size_ms` up to and including ``t``). Events of one key with
    the same time share their window. Every event is also added to the existing windows of its
    key that contain it (those defined by later events less than `size_ms` after it), so each
    window ends up holding exactly the events of its key in its range, whatever the arrival
    order. Windows are therefore not aligned to the epoch but to the events; a window exists
    only where an event ends it, so no window is empty and none is emitted twice for the same
    contents at different times.
    """

    size_ms: int

    def __post_init__(self) -> None:
        _positive("size_ms", self.size_ms)

    def window_for(self, t: int) -> tuple[int, int]:
        """The window defined by an event at `t`."""
        return t + 1 - self.size_ms, t + 1


@dataclass(frozen=True)
class Session:
    """Sessions per key: an event at ``t`` opens ``[t, t + gap)``; overlapping sessions merge.

    Two events of a key are in the same session when a chain of events less than `gap_ms` apart
    links them, so a session is ``[first event, last event + gap)``. An event arriving late that
    bridges two sessions merges them into one.
    """

    gap_ms: int

    def __post_init__(self) -> None:
        _positive("gap_ms", self.gap_ms)


Window = Tumbling | Hopping | Sliding | Session
