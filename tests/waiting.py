"""Waiting in tests for what another thread or process does."""

from __future__ import annotations

import time


def wait_until(predicate, what: str, timeout: float = 30.0, every: float = 0.02):
    """`predicate()`'s first true value, asked every `every` seconds; fails the test naming
    `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)
    return value
