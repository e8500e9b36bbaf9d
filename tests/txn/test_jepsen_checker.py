"""The Jepsen-style checker (tests/txn/jepsen.py) finds each anomaly: a small good history is
clean, and the same history with one anomaly injected is reported with exactly that anomaly,
so the randomized run (test_jepsen_run.py) can fail."""

from __future__ import annotations

import copy

import pytest

from tests.txn.jepsen import History, Poll, Txn, check


def good() -> History:
    """Two partitions. T1 and T2 committed, T3 aborted (its records at offsets 2 and 1 stay in
    the log, hidden), T4 committed after reading T1's record (consume-transform-produce),
    T5's outcome unknown and not visible. Offsets: markers take one offset after each
    transaction's records."""
    t1 = Txn("T1", "ok", sends=[(0, b"a", 0), (1, b"b", 0)], commit_at=1.0)
    t2 = Txn("T2", "ok", sends=[(0, b"c", 4)], commit_at=3.0)
    t3 = Txn("T3", "fail", sends=[(0, b"x", 2), (1, b"y", 2)], commit_at=None)
    t4 = Txn("T4", "ok", sends=[(1, b"d", 4)], reads=[(0, 0, b"a")], commit_at=4.0)
    t5 = Txn("T5", "info", sends=[(1, b"e", None)], commit_at=5.0)
    polls = [
        Poll("s1", 2.0, [(0, 0, b"a"), (1, 0, b"b")]),
        Poll("s1", 3.5, [(0, 4, b"c")]),
        Poll("s1", 4.5, [(1, 4, b"d")]),
        Poll("s2", 4.6, [(1, 0, b"b"), (1, 4, b"d")]),
    ]
    final = {0: [(0, b"a"), (4, b"c")], 1: [(0, b"b"), (4, b"d")]}
    return History([t1, t2, t3, t4, t5], polls, final)


def _txn(h: History, txn_id: str) -> Txn:
    return next(t for t in h.txns if t.id == txn_id)


def test_a_good_history_is_clean():
    assert check(good()) == {}


def test_an_indeterminate_transaction_may_be_visible_or_not():
    h = good()
    _txn(h, "T5").sends = [(1, b"e", 6)]
    h.final[1].append((6, b"e"))
    h.polls.append(Poll("s2", 6.0, [(1, 6, b"e")]))
    assert check(h) == {}


def aborted_read(h: History) -> None:
    h.polls.append(Poll("s3", 9.0, [(0, 2, b"x")]))


def lost_write(h: History) -> None:
    h.final[0] = [(0, b"a")]  # T2's committed c is gone


def duplicate(h: History) -> None:
    h.final[0].append((6, b"c"))  # c again, at a new offset


def inconsistent_offset(h: History) -> None:
    h.polls.append(Poll("s3", 9.0, [(0, 4, b"zzz")]))  # offset 4 of partition 0 holds c


def precommitted_read(h: History) -> None:
    h.polls.insert(0, Poll("s0", 2.5, [(0, 4, b"c")]))  # T2 asked to commit at 3.0


def wr_cycle(h: History) -> None:
    _txn(h, "T1").reads = [(1, 4, b"d")]  # T1 read T4's write, and T4 read T1's


def nonmonotonic_poll(h: History) -> None:
    h.polls.append(Poll("s1", 5.0, [(0, 0, b"a")]))  # s1 was at offset 4 of partition 0


def poll_skip(h: History) -> None:
    h.final[0] = [(0, b"a"), (2, b"q"), (4, b"c")]
    _txn(h, "T2").sends.append((0, b"q", 2))
    _txn(h, "T3").sends = [(1, b"y", 2)]  # (offset 2 of partition 0 is q's now)


@pytest.mark.parametrize(
    ("inject", "anomaly"),
    [
        (aborted_read, "aborted-read"),
        (lost_write, "lost-write"),
        (duplicate, "duplicate"),
        (inconsistent_offset, "inconsistent-offset"),
        (precommitted_read, "precommitted-read"),
        (wr_cycle, "wr-cycle"),
        (nonmonotonic_poll, "nonmonotonic-poll"),
        (poll_skip, "poll-skip"),
    ],
)
def test_each_injected_anomaly_is_reported(inject, anomaly):
    h = copy.deepcopy(good())
    inject(h)
    found = check(h)
    assert anomaly in found, found
    assert set(found) == {anomaly}, f"{anomaly} alone was injected, found {found}"


def test_a_value_written_twice_is_refused_as_a_bad_run():
    h = good()
    _txn(h, "T2").sends.append((1, b"a", 9))
    with pytest.raises(ValueError, match="written twice"):
        check(h)
