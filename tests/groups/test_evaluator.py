"""Burrow's rules, one table per rule: a window of commits (offset, lag at the commit), the
current lag and the time since the last commit → the partition's status. Plus properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.groups.evaluator import Commit, Status, evaluate_partition, worst

T0 = 1_700_000_000_000
STEP = 5000  # ms between commits in the tables


def window(*pairs: tuple[int, int]) -> list[Commit]:
    """Commits every 5 s: (offset, lag at the commit)."""
    return [Commit(o, T0 + i * STEP, lag) for i, (o, lag) in enumerate(pairs)]


def judge(commits, current_lag, *, silent_ms=STEP, end_offsets=(), **kw):
    now = commits[-1].timestamp_ms + silent_ms if commits else T0
    kw.setdefault("min_span_ms", 0)
    return evaluate_partition(
        commits, current_lag=current_lag, now_ms=now, end_offsets=end_offsets, **kw
    )


TABLE = [
    # (name, window, current lag, ms since the last commit, status)
    ("caught up now", window((10, 5), (12, 3), (14, 1)), 0, STEP, Status.OK),
    ("lag zero at one commit", window((10, 0), (12, 3), (14, 4)), 4, STEP, Status.OK),
    ("lag shrinking", window((10, 9), (20, 7), (30, 2)), 2, STEP, Status.OK),
    (
        "rule 5 WARN: lag never shrinks",
        window((10, 5), (12, 6), (14, 6), (16, 9)),
        9,
        STEP,
        Status.WARN,
    ),
    ("rule 4 STALL: offset unchanged", window((10, 5), (10, 8), (10, 12)), 12, STEP, Status.STALL),
    (
        "rule 3 STOP: silent longer than the window",
        window((10, 5), (12, 6), (14, 7)),
        7,
        3 * STEP,
        Status.STOP,
    ),
    (
        "STOP beats the zero-lag history",
        window((10, 0), (12, 0), (14, 0)),
        30,
        3 * STEP,
        Status.STOP,
    ),
    (
        "silent exactly the window's span is not yet a stop",
        window((10, 5), (12, 6), (14, 7)),
        7,
        2 * STEP,
        Status.WARN,
    ),
    (
        "rule 2 REWIND: went back, not recovered",
        window((100, 5), (120, 5), (40, 90)),
        90,
        STEP,
        Status.REWIND,
    ),
    ("rewind recovered", window((100, 5), (40, 70), (110, 0)), 3, STEP, Status.OK),
    (
        "REWIND even with zero lag earlier",
        window((100, 0), (120, 0), (40, 80)),
        80,
        STEP,
        Status.REWIND,
    ),
    (
        "steady lag keeps pace (Burrow would warn)",
        window((10, 2), (20, 2), (30, 2)),
        2,
        STEP,
        Status.OK,
    ),
    ("incomplete window: OK, not WARN", window((10, 5), (12, 6)), 6, STEP, Status.OK),
]


@pytest.mark.parametrize(
    ("name", "commits", "current_lag", "silent", "expected"), TABLE, ids=[r[0] for r in TABLE]
)
def test_burrow_rules(name, commits, current_lag, silent, expected):
    verdict = judge(commits, current_lag, silent_ms=silent)
    assert verdict.status is expected, verdict.reason
    assert verdict.reason


def test_a_healthy_consumer_with_a_lag_of_two_is_ok_not_warned():
    """The console said "not catching up" here: lag 0–2, moving with the producers."""
    commits = window((100, 2), (150, 0), (200, 1), (250, 2), (300, 1))
    assert judge(commits, 2).status is Status.OK


def test_an_empty_group_that_read_everything_is_ok_however_long_ago():
    commits = window((500, 0), (500, 0), (500, 0))
    assert judge(commits, 0, silent_ms=86_400_000).status is Status.OK


def test_an_empty_group_left_with_lag_is_stopped():
    commits = window((500, 0), (600, 0), (700, 3))
    verdict = judge(commits, 40, silent_ms=3600_000)
    assert verdict.status is Status.STOP
    assert "no commit for 60 min" in verdict.reason and "40 records" in verdict.reason


def test_recent_end_offsets_at_the_commit_delay_a_stop():
    """Burrow: the partition's end offset was at the last commit a moment ago — the group was
    caught up then; producers just wrote more. An end sampled before the commit proves nothing."""
    commits = window((10, 5), (12, 6), (14, 7))
    last = commits[-1].timestamp_ms
    ends = [(last - 1000, 14), (last + 30_000, 14), (last + 50_000, 21)]
    assert judge(commits, 7, silent_ms=60_000, end_offsets=ends).status is Status.WARN
    ends = [(last - 1000, 14), (last + 30_000, 18), (last + 50_000, 21)]
    assert judge(commits, 7, silent_ms=60_000, end_offsets=ends).status is Status.STOP


def test_one_commit_then_silence_is_a_stop_after_the_minimum_span():
    commits = window((10, 5))
    assert judge(commits, 5, silent_ms=20_000, min_span_ms=30_000).status is Status.OK
    assert judge(commits, 5, silent_ms=31_000, min_span_ms=30_000).status is Status.STOP


def test_allowed_lag_counts_as_caught_up():
    commits = window((10, 3), (10, 3), (10, 3))
    assert judge(commits, 3).status is Status.STALL
    assert judge(commits, 3, allowed_lag=3).status is Status.OK


def test_fallen_behind_retention_is_an_error_first():
    verdict = judge(window((10, 0), (12, 0), (14, 0)), 0, fallen_behind=True)
    assert verdict.status is Status.ERR and "log start" in verdict.reason


def test_no_commits_is_ok_and_incomplete():
    verdict = evaluate_partition([], current_lag=5, now_ms=T0)
    assert verdict.status is Status.OK and not verdict.complete


def test_the_group_takes_the_worst():
    assert worst([Status.OK, Status.WARN, Status.OK]) is Status.WARN
    assert worst([Status.STALL, Status.STOP, Status.WARN]) is Status.STOP
    assert worst([Status.REWIND, Status.ERR]) is Status.ERR
    assert worst([]) is Status.OK


commit_lists = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 500), st.integers(1, 60_000)),
    min_size=1,
    max_size=10,
)


def _commits(raw) -> list[Commit]:
    out, t = [], T0
    for offset, lag, gap in raw:
        t += gap
        out.append(Commit(offset, t, lag))
    return out


@given(commit_lists, st.integers(0, 1000), st.integers(0, 10**7), st.integers(-5000, 5000))
def test_only_offset_differences_matter(raw, lag, silent, shift):
    """Moving every offset by the same amount (a bigger or smaller log) changes nothing."""
    commits = _commits(raw)
    now = commits[-1].timestamp_ms + silent
    moved = [Commit(c.offset + shift, c.timestamp_ms, c.lag) for c in commits]
    a = evaluate_partition(commits, current_lag=lag, now_ms=now, min_commits=1)
    b = evaluate_partition(moved, current_lag=lag, now_ms=now, min_commits=1)
    assert a.status is b.status


@given(commit_lists, st.integers(0, 10**7))
def test_no_lag_now_is_always_ok(raw, silent):
    commits = _commits(raw)
    now = commits[-1].timestamp_ms + silent
    assert evaluate_partition(commits, current_lag=0, now_ms=now).status is Status.OK


@given(commit_lists, st.integers(1, 1000))
def test_a_consumer_that_commits_and_advances_and_gains_is_ok(raw, lag):
    """Offsets strictly rising with the lag strictly falling, committing just now: OK."""
    commits = _commits(raw)
    rising = [Commit(i * 10, c.timestamp_ms, (len(commits) - i) * 7) for i, c in enumerate(commits)]
    now = rising[-1].timestamp_ms
    verdict = evaluate_partition(rising, current_lag=lag, now_ms=now, min_commits=1)
    assert verdict.status is Status.OK
