"""Jobs and their oracles for the worker-process tests (``python -m streams.jobs run
tests.jobs.workload:windowed``): deterministic inputs with event times in the records, so the
expected output does not depend on timing.

- ``windowed``: orders keyed by country (the producer's key: no repartition), summed per
  tumbling second. Each input partition's times only grow, so a task's watermark, and which
  window an event closes, depend only on the partition's own records, not on timing. A last
  record per partition far in the future closes every window of the data.
- ``joined``: searches joined to clicks on the same query within 10 minutes (the book's
  example), inner; the grace covers the whole time range, so no event is late whatever the
  order the two topics are read in, and the output is exactly the matching pairs.
"""

from __future__ import annotations

import json
import random

from streams.jobs import JSON, TEXT, Count, Job, Sum, Tumbling, field

SIZE_MS = 1_000
WITHIN_MS = 600_000
END_TS = 10**12  # the closing record's time
COUNTRIES = ["fr", "de", "es", "it", "nl", "pt", "be", "at", "pl", "se"]


def windowed() -> Job:
    job = Job("wk-windowed")
    (
        job.stream("wk-orders", key=TEXT, value=JSON, timestamp=field("ts"))
        .window(Tumbling(SIZE_MS), grace_ms=0)
        .aggregate(name="totals", total=Sum("amount"), n=Count())
        .to("wk-totals", key=TEXT)
    )
    return job


def joined() -> Job:
    job = Job("wk-joined")
    searches = job.stream("wk-searches", key=TEXT, value=JSON, timestamp=field("ts"))
    clicks = job.stream("wk-clicks", key=TEXT, value=JSON, timestamp=field("ts"))
    searches.join(
        clicks,
        within=WITHIN_MS,
        grace_ms=END_TS,
        joiner=lambda s, c: {"s": s["id"], "c": c["id"]},
        name="ctr",
    ).to("wk-pairs", key=TEXT)
    return job


def orders(n: int, partitions: int, seed: int = 7) -> list[tuple[int, str, dict]]:
    """(partition, key, value): per partition growing times; keys pinned to partitions."""
    rnd = random.Random(seed)
    out = []
    clock = [0] * partitions
    for i in range(n):
        c = rnd.choice(COUNTRIES)
        p = COUNTRIES.index(c) % partitions
        clock[p] += rnd.randint(0, 300)
        out.append((p, c, {"id": i, "amount": rnd.randint(1, 9), "ts": clock[p]}))
    for p in range(partitions):
        out.append((p, "~end", {"id": -1 - p, "amount": 0, "ts": END_TS}))
    return out


def windowed_oracle(records) -> dict[tuple[str, int], tuple[int, int]]:
    acc: dict[tuple[str, int], list[int]] = {}
    for _, key, v in records:
        if key == "~end":
            continue
        a = acc.setdefault((key, v["ts"] - v["ts"] % SIZE_MS), [0, 0])
        a[0] += v["amount"]
        a[1] += 1
    return {k: (t, n) for k, (t, n) in acc.items()}


def searches_and_clicks(n: int, partitions: int, seed: int = 5):
    """(topic, partition, key, value) in one list: searches and later clicks per query."""
    rnd = random.Random(seed)
    queries = [f"q{i}" for i in range(40)]
    out = []
    for i in range(n):
        q = rnd.choice(queries)
        p = queries.index(q) % partitions
        ts = i * 1_000 + rnd.randint(0, 999)
        out.append(("wk-searches", p, q, {"id": i, "ts": ts}))
        for j in range(rnd.choice([0, 0, 1, 2])):
            out.append(("wk-clicks", p, q, {"id": i * 10 + j, "ts": ts + rnd.randint(-5, 900_000)}))
    return out


def joined_oracle(records) -> set[tuple[str, int, int]]:
    s = [(k, v) for t, _, k, v in records if t == "wk-searches"]
    c = [(k, v) for t, _, k, v in records if t == "wk-clicks"]
    return {
        (k, a["id"], b["id"])
        for k, a in s
        for k2, b in c
        if k == k2 and abs(a["ts"] - b["ts"]) <= WITHIN_MS
    }


def encode(value: dict) -> bytes:
    return json.dumps(value).encode()
