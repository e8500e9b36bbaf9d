"""Benchmark `windows`: Tidelog's window operator against Bytewax, measured in the same run.

Run: ``make bench BENCH=windows``, ``python -m tests.bench windows`` or
``python tests/bench/bench_windows.py``. ``BENCH_SCALE`` (default 1.0) scales the event count:
1.0 is the issue's 1,000,000 events, 0.01 a smoke run. Writes ``bench-results/windows.json``.

The workload (the issue's): 1,000,000 events over 1,000 keys (uniform), an event-time rate of
10,000 events/s (event ``i`` is sent at ``T0 + i/10`` ms) with disorder uniform in 0-2 s (its
event time is the send time minus a delay drawn from 0..1999 ms), integer values 0..999. The
job: a 1-second tumbling window per key with count, sum and mean.

- Tidelog: ``WindowOperator(Tumbling(1000), {count, sum, mean}, out_of_orderness_ms=2000,
  grace_ms=2000)``; events fed as ``(key, value, event_time_ms, 0)`` tuples through
  ``process_many`` in chunks of 1000, then ``flush``. Out-of-orderness = the disorder bound
  (2 s), so no valid event is ever behind the watermark: nothing is late, nothing corrected;
  the grace is the issue's 2 s on top. Each window emits twice (at end + 2 s, and its closing
  ``final`` emission at end + 4 s); the final ones are checked.
- Bytewax 0.21.1: ``TestingSource(items, batch_size=1000)`` -> ``fold_window`` with an
  ``EventClock`` (``wait_for_system_duration`` = 2 s) and a ``TumblingWindower`` of 1 s aligned
  to the epoch, folding ``[count, sum]``, then a ``map`` adding the mean, into a
  ``TestingSink``; run with ``run_main`` (one worker, in process). Its items are
  ``(key, (value, datetime))`` with the datetimes built before the clock starts (in Bytewax's
  favour: the conversion is not timed).

Both outputs are checked against a batch oracle (plain dict arithmetic over all events); a
difference fails the benchmark loudly (SystemExit). Each side runs 3 times, interleaved; medians
of events/s are reported. The prebuilt inputs are moved out of the cyclic GC's reach
(``gc.freeze``) before timing, for both sides alike.
"""

from __future__ import annotations

import gc
import random
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streams.processing import Count, Mean, Sum, Tumbling, WindowOperator  # noqa: E402
from tests.bench.common import (  # noqa: E402
    Row,
    at_least_ratio,
    log,
    median,
    print_table,
    scaled,
    write_results,
)

NAME = "windows"
PEER = "bytewax"
BYTEWAX_VERSION = "0.21.1"
KEYS = 1000
RATE_PER_S = 10_000
DISORDER_MS = 2000
SIZE_MS = 1000
GRACE_MS = 2000
OUT_OF_ORDERNESS_MS = DISORDER_MS
CHUNK = 1000
REPEATS = 3
T0 = 1_800_000_000_000  # a whole second: windows start at multiples of 1000 ms
SEED = 20261129

Result = dict[tuple[str, int], tuple[int, int, float]]  # (key, start) -> (count, sum, mean)


def make_events(n: int) -> list[tuple[str, int, int, int]]:
    rng = random.Random(SEED)
    keys = [f"k{i}" for i in range(KEYS)]
    events = []
    for i in range(n):
        sent = T0 + i * 1000 // RATE_PER_S
        events.append(
            (keys[rng.randrange(KEYS)], rng.randrange(1000), sent - rng.randrange(DISORDER_MS), 0)
        )
    return events


def oracle(events) -> Result:
    acc: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for key, value, t, _ in events:
        a = acc[(key, t - t % SIZE_MS)]
        a[0] += 1
        a[1] += value
    return {k: (c, s, s / c) for k, (c, s) in acc.items()}


def check(name: str, got: Result, want: Result) -> None:
    if got.keys() != want.keys():
        missing, extra = want.keys() - got.keys(), got.keys() - want.keys()
        raise SystemExit(
            f"{name}: windows differ from the oracle: {len(missing)} missing "
            f"(e.g. {sorted(missing)[:3]}), {len(extra)} extra "
            f"(e.g. {sorted(extra)[:3]})"
        )
    bad = [
        k
        for k, (c, s, m) in want.items()
        if got[k][0] != c or got[k][1] != s or abs(got[k][2] - m) > 1e-9 * max(1, abs(m))
    ]
    if bad:
        k = bad[0]
        raise SystemExit(
            f"{name}: {len(bad)} windows differ from the oracle, e.g. {k}: "
            f"got {got[k]}, want {want[k]}"
        )


# ------------------------------------------------------------------------------ Tidelog


def run_tidelog(events) -> tuple[float, Result, int]:
    operator = WindowOperator(
        Tumbling(SIZE_MS),
        {"count": Count(), "sum": Sum(), "mean": Mean()},
        out_of_orderness_ms=OUT_OF_ORDERNESS_MS,
        grace_ms=GRACE_MS,
    )
    out = []
    started = time.perf_counter()
    for i in range(0, len(events), CHUNK):
        out += operator.process_many(events[i : i + CHUNK])
    out += operator.flush()
    elapsed = time.perf_counter() - started
    if operator.late_count or operator.corrections:
        raise SystemExit(
            f"tidelog: {operator.late_count} late events and "
            f"{operator.corrections} corrections where none are possible"
        )
    result = {
        (r.key, r.start): (r.values["count"], r.values["sum"], r.values["mean"])
        for r in out
        if r.final
    }
    if len(result) != sum(1 for r in out if r.final):
        raise SystemExit("tidelog: a window had more than one final emission")
    return len(events) / elapsed, result, len(out)


def run_tidelog_single(events) -> float:
    """The same job fed one ``process`` call per event (informational)."""
    operator = WindowOperator(
        Tumbling(SIZE_MS),
        {"count": Count(), "sum": Sum(), "mean": Mean()},
        out_of_orderness_ms=OUT_OF_ORDERNESS_MS,
        grace_ms=GRACE_MS,
    )
    process = operator.process
    started = time.perf_counter()
    for key, value, t, p in events:
        process(key, value, t, p)
    operator.flush()
    return len(events) / (time.perf_counter() - started)


# ------------------------------------------------------------------------------ Bytewax


def bytewax_items(events) -> list:
    return [(key, (value, datetime.fromtimestamp(t / 1000, tz=UTC))) for key, value, t, _ in events]


def run_bytewax(items) -> tuple[float, Result, int]:
    import bytewax.operators as op
    import bytewax.operators.windowing as win
    from bytewax.dataflow import Dataflow
    from bytewax.testing import TestingSink, TestingSource, run_main

    def folder(acc, item):
        acc[0] += 1
        acc[1] += item[0]
        return acc

    def merger(a, b):
        return [a[0] + b[0], a[1] + b[1]]

    def with_mean(key_window):
        key, (window_id, (count, total)) = key_window
        return key, (window_id, count, total, total / count)

    down: list = []
    late: list = []
    flow = Dataflow("bench_windows")
    stream = op.input("in", flow, TestingSource(items, batch_size=CHUNK))
    clock = win.EventClock(
        lambda item: item[1], wait_for_system_duration=timedelta(milliseconds=OUT_OF_ORDERNESS_MS)
    )
    windower = win.TumblingWindower(
        length=timedelta(milliseconds=SIZE_MS), align_to=datetime(1970, 1, 1, tzinfo=UTC)
    )
    out = win.fold_window("fold", stream, clock, windower, lambda: [0, 0], folder, merger)
    op.output("down", op.map("mean", out.down, with_mean), TestingSink(down))
    op.output("late", out.late, TestingSink(late))
    started = time.perf_counter()
    run_main(flow)
    elapsed = time.perf_counter() - started
    if late:
        raise SystemExit(f"bytewax: {len(late)} events came out late")
    result = {
        (key, window_id * SIZE_MS): (count, total, mean)
        for key, (window_id, count, total, mean) in down
    }
    return len(items) / elapsed, result, len(down)


def bytewax_available() -> str | None:
    """None if bytewax imports, else why not."""
    try:
        import bytewax  # noqa: F401
        import bytewax.operators.windowing  # noqa: F401
    except Exception as e:  # ImportError, or a wheel that does not load on this platform
        return f"bytewax {BYTEWAX_VERSION} could not be imported: {e}"
    return None


# ------------------------------------------------------------------------------ main


def main() -> None:
    n = scaled(1_000_000, 10_000)
    log(f"generating {n:,} events over {KEYS} keys ({RATE_PER_S:,}/s, disorder 0-2 s)")
    events = make_events(n)
    want = oracle(events)
    log(f"oracle: {len(want):,} windows")
    missing = bytewax_available()
    items = bytewax_items(events) if missing is None else None
    # the inputs live for the whole run: keep the cyclic GC from rescanning them (both sides)
    gc.collect()
    gc.freeze()
    ours, theirs, single = [], [], []
    for run in range(REPEATS):
        rate, got, emitted = run_tidelog(events)
        check("tidelog", got, want)
        ours.append(rate)
        log(f"run {run + 1}: tidelog {rate:,.0f} events/s ({emitted:,} emissions), matches")
        if items is not None:
            rate, got, emitted = run_bytewax(items)
            check("bytewax", got, want)
            theirs.append(rate)
            log(f"run {run + 1}: bytewax {rate:,.0f} events/s ({emitted:,} windows), matches")
    for _ in range(REPEATS):
        single.append(run_tidelog_single(events))
    workload = (
        f"{n:,} events, {KEYS} keys, 1 s tumbling count+sum+mean, disorder 0-2 s, "
        f"out-of-orderness {OUT_OF_ORDERNESS_MS} ms + grace {GRACE_MS} ms; "
        f"median of {REPEATS}; both checked against a batch oracle"
    )
    peer_note = (
        f"bytewax {BYTEWAX_VERSION}: TestingSource batch 1000, fold_window, EventClock "
        f"(wait 2 s), TumblingWindower 1 s, datetimes prebuilt (untimed)"
        if missing is None
        else f"peer not measured: {missing}"
    )
    rows = [
        Row(
            "tumbling count+sum+mean (process_many)",
            "events/s",
            median(ours),
            peer=PEER,
            peer_value=median(theirs) if theirs else None,
            target=">= 5x peer",
            check=at_least_ratio(5),
            note=f"{workload}; {peer_note}",
        ),
        Row(
            "same, one process() call per event",
            "events/s",
            median(single),
            note="informational: per-call overhead of process() over process_many",
        ),
    ]
    print_table(rows)
    write_results(NAME, rows)


if __name__ == "__main__":
    main()
