"""The cycle collector around a job's records: ``settle_gc`` (``streams.gcsettings``), which
a worker process (``python -m streams.jobs run``) applies once its job is loaded and its
clients are made, before the first record; and ``gc_deferred``, the collector held off for the
length of a batch (any runner)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

from streams.gcsettings import YOUNG_GC_THRESHOLD, settle_gc

__all__ = ["YOUNG_GC_THRESHOLD", "gc_deferred", "settle_gc"]


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
