"""Fixtures shared by the stream-job tests: a log store (no background thread) in the test's
temporary directory, and a group coordinator over it."""

from __future__ import annotations

import pytest

from streams.groups import GroupCoordinator
from streams.log import LogStore


@pytest.fixture
def store(tmp_path):
    s = LogStore.open(tmp_path / "data", background=False)
    yield s
    s.close()


@pytest.fixture
def coordinator(store):
    c = GroupCoordinator(store)
    c.load()
    yield c
    c.close()
