"""`RefreshAhead` (streams.cluster.kafka_io): a value never older than its maximum age when
returned, reloaded in the background from half that age so steady callers never wait, a
failure seen by the next caller, and a `forget` that a load already under way cannot undo."""

from __future__ import annotations

import threading

import pytest

from streams.cluster.kafka_io import RefreshAhead
from tests.waiting import wait_until


class Source:
    def __init__(self):
        self.version = 0
        self.loads = 0
        self.fail = False
        self.gate: threading.Event | None = None  # set: a load waits for it

    def load(self) -> int:
        self.loads += 1
        seen = self.version
        if self.gate is not None:
            self.gate.wait(10)
        if self.fail:
            raise RuntimeError("the cluster did not answer")
        return seen


def test_steady_callers_never_wait_and_never_see_a_value_past_its_age():
    now = [100.0]
    source = Source()
    cached = RefreshAhead(source.load, 10.0, "test", clock=lambda: now[0])
    assert cached.get()[0] == 0 and source.loads == 1  # the first get loads
    source.version = 1
    now[0] += 4.9
    assert cached.get()[0] == 0 and source.loads == 1  # young: as it is
    source.gate = threading.Event()
    now[0] += 0.2  # past half its age: returned at once, the next one loaded meanwhile
    assert cached.get()[0] == 0
    wait_until(lambda: source.loads == 2, "the background load")
    assert cached.get()[0] == 0 and source.loads == 2  # one load at a time
    source.gate.set()
    wait_until(lambda: cached.get()[0] == 1, "the background load's value")
    now[0] += 10.0  # nobody asked for its whole age: the caller loads
    source.gate, source.version = None, 2
    assert cached.get()[0] == 2 and source.loads == 3


def test_a_failed_background_load_is_the_next_callers_error():
    now = [0.0]
    source = Source()
    cached = RefreshAhead(source.load, 10.0, "test", clock=lambda: now[0])
    cached.get()
    source.fail = True
    now[0] = 6.0
    assert cached.get()[0] == 0  # the background load fails
    wait_until(lambda: source.loads == 2 and not cached._loading, "the failed load")
    with pytest.raises(RuntimeError, match="did not answer"):
        cached.get()  # not the old value again: the caller sees why
    source.fail = False
    source.version = 5
    assert cached.get()[0] == 5


def test_forget_is_not_undone_by_a_load_already_under_way():
    now = [0.0]
    source = Source()
    cached = RefreshAhead(source.load, 10.0, "test", clock=lambda: now[0])
    cached.get()
    source.gate = threading.Event()
    now[0] = 6.0
    cached.get()  # a background load starts, reading version 0
    wait_until(lambda: source.loads == 2, "the background load")
    source.version = 1  # a change made here, then forgotten
    cached.forget()
    source.gate.set()
    wait_until(lambda: not cached._loading, "the background load to end")
    assert cached.get()[0] == 1  # loaded again, not the load that began before the change
