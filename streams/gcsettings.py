"""Python's cycle collector set for a Tidelog server process's allocation pattern.

Called once by each process that moves records — a job worker (``python -m streams.jobs run``)
once its job is loaded and its clients are made, the console's server (``brokerui/asgi.py``,
where the broker, its Kafka listener and the embedded jobs run) and the standalone listener
(``python -m streams.protocol``) once their broker is open — before the first record.
"""

from __future__ import annotations

import gc

# a young collection after this many net container allocations (CPython's default: 700)
YOUNG_GC_THRESHOLD = 50_000


def settle_gc() -> None:
    """Every record read, decoded and emitted is a handful of short-lived, acyclic tuples,
    bytes and dicts, so at the default threshold the collector runs every few hundred records
    and keeps walking the records buffered between read and write (a profile of the window
    bench's worker over Kafka: 16 % of the main thread's samples in ``gc_collect_main``; the
    embedded runner's interval join: 1.3-1.5x records/s with this set, in one process A/B).

    - ``gc.freeze()``: what is alive now (modules, the job, its clients, the server's apps)
      moves to the permanent generation, which no collection walks again.
    - the young generation's threshold raised to ``YOUNG_GC_THRESHOLD`` (the older
      generations' ratios kept): the collector runs some 70 times less often, and most of what
      it would have walked has died in between.

    Nothing is left uncollected that was made after the call: cycles are still found, at most
    ``YOUNG_GC_THRESHOLD`` allocations later. (What was frozen is never walked again: a cycle
    among those objects that becomes garbage later stays; at start-up they are the modules and
    the process's long-lived objects.)"""
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, older, oldest)
