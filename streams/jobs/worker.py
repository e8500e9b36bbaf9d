"""Process-wide settings of a job worker (``python -m streams.jobs run``), applied once its job
is loaded and its clients are made, before the first record; and ``gc_deferred``, the cycle
collector held off for the length of a batch (any runner)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# a young collection after this many net container allocations (CPython's default: 700)
YOUNG_GC_THRESHOLD = 50_000


def settle_gc() -> None:
    """Python's cycle collector set for a worker's allocation pattern: every record read,
    decoded and emitted is a handful of short-lived, acyclic tuples, bytes and dicts, so at the
    default threshold the collector runs every few hundred records and keeps walking the
    records buffered between fetch and task (a profile of the window bench's worker over Kafka:
    16 % of the main thread's samples in ``gc_collect_main``).

    - ``gc.freeze()``: what is alive now (modules, the job, its clients) moves to the permanent
      generation, which no collection walks again.
    - the young generation's threshold raised to ``YOUNG_GC_THRESHOLD`` (the older
      generations' ratios kept): the collector runs some 70 times less often, and most of what
      it would have walked has died in between.

    Nothing is left uncollected: cycles are still found, at most ``YOUNG_GC_THRESHOLD``
    allocations later. Only a worker process calls this (not the embedded runner, whose host
    process has its own allocation pattern)."""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, older, oldest)


@contextlib.contextmanager
def gc_deferred() -> Iterator[None]:
    """The cycle collector off for the block (a batch), then back on if it was on: the
    allocations made meanwhile still count, so the next one after the block sets off the
    collection that the block's would have. Nothing goes uncollected; cyclic garbage made in
    the block lives until then. (If another thread turns the collector off meanwhile, this
    turns it back on at the end.)"""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
