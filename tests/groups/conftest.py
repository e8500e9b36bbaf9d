from __future__ import annotations

import pytest

from streams.groups import GroupCoordinator
from streams.log import LogStore


class Clock:
    """A hand-advanced millisecond clock."""

    def __init__(self, now: int = 1_700_000_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(tmp_path):
    s = LogStore.open(tmp_path / "data", background=False)
    yield s
    s.close()


@pytest.fixture
def coordinator(store, clock):
    c = GroupCoordinator(store, clock=clock)
    c.load()
    yield c
    c.close()
