"""Consumer health by Burrow's rules: a status per partition from a sliding window of the
group's commits, and the group's status, the worst of its partitions'.

The rules are those of LinkedIn's Burrow (``core/internal/evaluator``), re-stated here from its
documentation and source, over a window of the last `WINDOW` commits of one partition (each
the committed offset, when it was committed and the lag then) and the partition's recent end
offsets (high watermarks), checked in this order once the current lag is above
``allowed_lag``:

STOP    the group stopped committing: the time since the last commit is longer than the span
        of the window (first to last commit), unless an end offset sampled since the last
        commit shows nothing new was there to read then (Burrow looks at any recent end
        offset; one sampled before the commit proves nothing, so Tidelog does not).
        The window spans at least `min_span_ms`: one late commit is not a stop at once.
REWIND  the committed offset went back inside the window and has not come back to where it
        was (a reset, or a consumer that lost its progress).
STALL   the lag was above ``allowed_lag`` at every commit of the window and the offset never
        moved: commits arrive, progress does not.
WARN    the lag was above ``allowed_lag`` at every commit of the window, never went down
        from one commit to the next, and ended higher than it began: the consumer moves, but
        slower than producers. (Burrow warns on a lag that merely stays level too; a consumer
        holding a steady lag of a record or two keeps pace with its producers, and warning on
        it is the false alarm this replaces.)
OK      anything else: the lag was zero (or within ``allowed_lag``) at some commit of the
        window, or it shrinks.

Tidelog adds one partition status of its own, checked first:

ERR     the committed offset is below the partition's log start: retention (or a purge)
        deleted records before the group read them; they are lost for it.

A window with fewer than `min_commits` commits is "incomplete": only STOP and ERR are decided
(Burrow leaves incomplete partitions OK, which would hide a consumer that committed once and
hung), everything else is OK until the window fills.

A group's status is the worst of its partitions', in the order of `Status` (OK best, ERR
worst). Pure functions, no I/O; `streams.groups.health` keeps the windows.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Sequence

WINDOW = 10  # commits per partition (Burrow's "intervals")
MIN_COMMITS = 3


class Status(enum.Enum):
    """Partition and group statuses, best first (`rank`)."""

    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    REWIND = "REWIND"
    ERR = "ERR"

    @property
    def rank(self) -> int:
        return _ORDER.index(self)

    def __str__(self) -> str:
        return self.value


_ORDER = list(Status)

MEANING = {
    Status.OK: "consuming: caught up at some point of the window, or the lag is shrinking",
    Status.WARN: "falling behind: offsets advance but the lag only grew over the window",
    Status.STALL: "stalled: commits keep coming but the committed offset does not move",
    Status.STOP: "stopped: no commit for longer than the window spans, with lag",
    Status.REWIND: "rewound: the committed offset went back and has not recovered",
    Status.ERR: "records lost: the committed offset is below the log start (retention)",
}


@dataclasses.dataclass(frozen=True)
class Commit:
    """One commit of one partition, as the broker saw it."""

    offset: int
    timestamp_ms: int  # when it was committed
    lag: int  # end offset - committed offset when the broker saw the commit


@dataclasses.dataclass(frozen=True)
class Verdict:
    status: Status
    reason: str  # why, in words, with the numbers that decided it
    complete: bool = True  # the window had `min_commits` commits


def evaluate_partition(
    commits: Sequence[Commit],
    *,
    current_lag: int,
    now_ms: int,
    end_offsets: Sequence[tuple[int, int]] = (),
    allowed_lag: int = 0,
    min_commits: int = MIN_COMMITS,
    min_span_ms: int = 0,
    fallen_behind: bool = False,
) -> Verdict:
    """The status of one partition. `commits`: the window, oldest first; `end_offsets`:
    (time ms, end offset) samples of the partition; `fallen_behind`: the committed offset is
    below the log start."""
    if fallen_behind:
        return Verdict(
            Status.ERR, "the committed offset is below the log start: records were deleted unread"
        )
    if not commits:
        return Verdict(Status.OK, "no commit seen yet", complete=False)
    min_commits = max(2, min_commits)  # one commit shows neither progress nor its absence
    complete = len(commits) >= min_commits
    if current_lag <= allowed_lag:
        return Verdict(Status.OK, _caught_up(current_lag, allowed_lag), complete)

    last = commits[-1]
    span = max(last.timestamp_ms - commits[0].timestamp_ms, min_span_ms)
    silent = now_ms - last.timestamp_ms
    if silent > span and not _caught_up_since(last, end_offsets):
        return Verdict(
            Status.STOP,
            f"no commit for {span_text(silent)}, longer than the window's {span_text(span)}, "
            f"with a lag of {current_lag} records",
            complete,
        )
    if not complete:
        return Verdict(
            Status.OK, f"window incomplete ({len(commits)} of {min_commits} commits)", False
        )

    rewind = _rewind_index(commits)
    if rewind > 0 and not _recovered(commits, rewind):
        before, after = commits[rewind - 1].offset, commits[rewind].offset
        return Verdict(
            Status.REWIND,
            f"the committed offset went back from {before} to {after} and is still below it",
        )
    if all(c.lag > allowed_lag for c in commits):
        if all(c.offset == commits[0].offset for c in commits):
            return Verdict(
                Status.STALL,
                f"{len(commits)} commits at offset {commits[0].offset} with a lag of "
                f"{commits[0].lag}–{max(c.lag for c in commits)} records",
            )
        if _lag_never_decreases(commits) and last.lag > commits[0].lag:
            return Verdict(
                Status.WARN,
                f"the lag grew from {commits[0].lag} to {last.lag} records over "
                f"{len(commits)} commits without shrinking once",
            )
        if _lag_never_decreases(commits):
            return Verdict(Status.OK, f"keeping pace with a steady lag of {last.lag} records")
        return Verdict(Status.OK, f"the lag is shrinking ({_lag_range(commits)})")
    return Verdict(Status.OK, "caught up at some commit of the window")


def worst(statuses: Iterable[Status]) -> Status:
    """The group's status: the worst of its partitions' (OK without partitions)."""
    return max(statuses, key=lambda s: s.rank, default=Status.OK)


def _caught_up(lag: int, allowed: int) -> str:
    if lag <= 0:
        return "caught up (lag 0)"
    return f"lag {lag} is within the allowed {allowed}"


def _caught_up_since(last: Commit, end_offsets: Sequence[tuple[int, int]]) -> bool:
    """An end offset sampled since the last commit at or below it: the group had read all
    there was a moment ago, so a pause in commits is not a stop yet."""
    return any(t >= last.timestamp_ms and end <= last.offset for t, end in end_offsets)


def _rewind_index(commits: Sequence[Commit]) -> int:
    for i in range(1, len(commits)):
        if commits[i].offset < commits[i - 1].offset:
            return i
    return -1


def _recovered(commits: Sequence[Commit], index: int) -> bool:
    previous = commits[index - 1].offset
    return any(c.offset >= previous for c in commits[index:])


def _lag_never_decreases(commits: Sequence[Commit]) -> bool:
    return all(b.lag >= a.lag for a, b in zip(commits, commits[1:], strict=False))


def _lag_range(commits: Sequence[Commit]) -> str:
    return f"{commits[0].lag} → {commits[-1].lag} records over {len(commits)} commits"


def span_text(ms: int) -> str:
    """A span of time in words: 40 s, 12 min, 3.5 h."""
    s = ms / 1000
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
