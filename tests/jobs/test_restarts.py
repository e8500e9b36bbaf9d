"""Property: a job stopped and restarted at arbitrary points (each restart a new runner that
restores its stores from the changelogs and resumes at the committed offsets), with arbitrary
read batch sizes, writes the same windowed totals and running counts as the oracle."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.groups import GroupCoordinator
from streams.jobs import JSON, Count, Job, Session, Sum, Tumbling, field
from streams.jobs.runner import Runner
from streams.log import LogStore

SIZE = 100
GAP = 30


def job(grace: int) -> Job:
    j = Job("shop")
    orders = j.stream("orders", value=JSON, timestamp=field("ts"))
    keyed = orders.key_by("country")

    def running(o, state):
        n = state.get("n", 0) + 1
        state.set("n", n)
        return {"country": o["country"], "n": n}

    keyed.process(running, store="seen").to("running")
    keyed.aggregate(name="sums", total=Sum("amount"), n=Count()).to("sums")
    keyed.window(Tumbling(SIZE), grace_ms=grace).aggregate(
        name="totals", total=Sum("amount"), n=Count()
    ).to("totals")
    keyed.window(Session(GAP), grace_ms=grace).aggregate(name="visits", n=Count()).to("sessions")
    return j


def session_oracle(orders) -> dict:
    out = {}
    for country in {c for c, _, _ in orders}:
        times = sorted(t for c, _, t in orders if c == country)
        first = prev = times[0]
        n = 0
        for t in times:
            if t - prev >= GAP:
                out[(country, first, prev + GAP)] = n
                first, n = t, 0
            prev = t
            n += 1
        out[(country, first, prev + GAP)] = n
    return out


def read_all(store: LogStore, topic: str) -> list:
    out = []
    for p in range(store.partition_count(topic)):
        pos, end = store.offsets(topic, p)
        while pos < end:
            recs = store.read(topic, p, pos)
            out.extend((json.loads(r.key), json.loads(r.value)) for r in recs)
            pos = recs[-1].offset + 1
    return out


orders_st = st.lists(
    st.tuples(st.sampled_from(["fr", "de", "es", "it"]), st.integers(1, 9), st.integers(0, 999)),
    min_size=1,
    max_size=80,
)


@settings(max_examples=20, deadline=None)
@given(
    orders_st,
    st.lists(st.floats(0.05, 0.95), min_size=1, max_size=3),  # where to stop, as fractions
    st.integers(1, 20),
    st.booleans(),
)
def test_restarts_anywhere_give_the_oracles_output(orders, cuts, batch, in_order):
    """Either any order over 2 partitions with a grace covering everything (no window closes
    before the end), or time-ordered input on 1 partition with no grace (windows close while
    the job runs, so restarts fall between closes: restored watermarks, tombstoned windows)."""
    if in_order:
        orders = sorted(orders, key=lambda o: o[2])
    partitions, grace = (1, 0) if in_order else (2, 10_000)
    with tempfile.TemporaryDirectory() as d:
        store = LogStore.open(Path(d) / "data", background=False)
        co = GroupCoordinator(store)
        co.load()
        try:
            store.create_topic("orders", partitions)
            bounds = sorted({int(c * len(orders)) for c in cuts} | {0, len(orders)})
            for lo, hi in zip(bounds, bounds[1:], strict=False):
                store.append_batch(
                    "orders",
                    [
                        (
                            json.dumps({"country": c, "amount": a, "ts": t}).encode(),
                            f"o{i}".encode(),
                        )
                        for i, (c, a, t) in enumerate(orders[lo:hi], lo)
                    ],
                )
                runner = Runner(job(grace), store, coordinator=co, max_records=batch)
                runner.run_until_idle()
                if hi == len(orders):
                    runner.flush()
                runner.close()
            # running counts: per country 1, 2, 3, ... with nothing repeated or skipped
            seen: dict[str, list[int]] = {}
            for k, v in read_all(store, "running"):
                seen.setdefault(k, []).append(v["n"])
            expected_n = {c: sum(1 for o in orders if o[0] == c) for c, _, _ in orders}
            assert seen == {c: list(range(1, n + 1)) for c, n in expected_n.items()}
            # running aggregate (a table): each key's last row is its total over all orders
            last = {k: v for k, v in read_all(store, "sums")}
            assert last == {
                c: {"total": sum(a for c2, a, _ in orders if c2 == c), "n": n}
                for c, n in expected_n.items()
            }
            # windowed totals: nothing is late (grace covers the range, or the input is ordered)
            totals = read_all(store, "totals")
            got = {(k, v["start"]): (v["total"], v["n"]) for k, v in totals}
            assert len(got) == len(totals)  # one final record per window, none repeated
            expected: dict = {}
            for c, a, t in orders:
                acc = expected.setdefault((c, t - t % SIZE), [0, 0])
                acc[0] += a
                acc[1] += 1
            assert got == {k: tuple(v) for k, v in expected.items()}
            # sessions: per key, events less than GAP apart chain into one [first, last + GAP)
            sessions = read_all(store, "sessions")
            got_s = {(k, v["start"], v["end"]): v["n"] for k, v in sessions}
            assert len(got_s) == len(sessions)
            assert got_s == session_oracle(orders)
        finally:
            co.close()
            store.close()
