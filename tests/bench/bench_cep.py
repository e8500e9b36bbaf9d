"""Benchmark `cep`: complex event processing and search on streams (issue 14 item 8).

Run: ``make bench BENCH=cep``, ``python -m tests.bench cep`` or ``python tests/bench/bench_cep.py``.
``BENCH_SCALE`` (default 1.0) scales the event counts (1.0 = the issue's 1,000,000 CEP events;
0.01 a smoke run). Writes ``bench-results/cep.json``.

**CEP.** 1,000,000 events over 10,000 keys (uniform), event ``i`` at ``T0 + i`` ms (in order,
no two at one time), each ``{"type": search|click|order|view}`` (uniform). The pattern::

    Pattern.begin("search", where=type == "search")
           .followed_by("click", where=type == "click")
           .followed_by("order", where=type == "order")
           .within(60_000)

- Tidelog: ``CepOperator(pattern, out_of_orderness_ms=0, store={})`` (the operator a job's
  ``.match`` step runs, over a dict store: the changelog's encoding at commit is not timed),
  ``process(key, value, ts)`` per event, then ``flush()``; events wait for the watermark as
  always (released by the next event's time).
- Peer (the floor any library must beat): a hand-written Python state machine for the same
  pattern and the same semantics (no skip after a match, each ``followed_by`` takes the first
  matching event after the previous one, ``ts - first.ts < within``): per key a list of open
  runs ``[first ts, stage, events]``, processed in arrival order (it needs no buffering: the
  input is in order).

Both produce the matches as ``(key, search ts, click ts, order ts)``; the multisets are checked
equal (a difference fails the benchmark). Target: Tidelog >= 0.5x the hand-written machine.

**Search.** Events ``{"user", "page", "country", "status", "latency_ms", "message"}`` (users from
100,000, pages from 10,000, message 8 words from a 50,000-word vocabulary) through a
``QueryIndex`` holding 1, 1,000 or 100,000 queries of a mix: 40% ``user:uN AND
status:error``, 30% ``page:"product N" AND country:XX``, 20% ``message:wA OR message:wB``, 10%
``latency_ms:[N TO *] AND page:"product N"``, plus three queries with no required term
(``NOT status:ok AND latency_ms:>=990``-like: the always-check list), whatever the count.
Every query is a search for something specific (a user, a page, a word), as saved searches
and alerts are, so candidates per event grow with (queries) x (selectivity); the table shows
them. Reported: events/s (``QueryIndex.match``, one event at a time, the analysis of the event
included); the 100,000 row's peer is the 1,000 row (target: >= 0.3x). A brute-force row
evaluates every (compiled) query on every event (the 1,000 case, fewer events) and checks the
index's matches equal to it on those events.

Each measurement runs 3 times, interleaved (Tidelog, peer, Tidelog, ...); medians reported.
"""

from __future__ import annotations

import gc
import random
import sys
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streams.jobs.cep import CepOperator, Pattern  # noqa: E402
from streams.jobs.search import Doc, QueryIndex, brute_force_match  # noqa: E402
from tests.bench.common import (  # noqa: E402
    Row,
    at_least_ratio,
    log,
    median,
    print_table,
    scaled,
    write_results,
)

NAME = "cep"
KEYS = 10_000
WITHIN_MS = 60_000
TYPES = ("search", "click", "order", "view")
REPEATS = 3
T0 = 1_800_000_000_000
SEED = 20261202

# ---------------------------------------------------------------------- CEP

PATTERN = (
    Pattern.begin("search", where=lambda e: e["type"] == "search")
    .followed_by("click", where=lambda e: e["type"] == "click")
    .followed_by("order", where=lambda e: e["type"] == "order")
    .within(WITHIN_MS)
)

Match = tuple[str, int, int, int]


def cep_events(n: int) -> list[tuple[str, dict, int]]:
    rng = random.Random(SEED)
    keys = [f"user-{i}" for i in range(KEYS)]
    values = [{"type": t} for t in TYPES]
    return [(keys[rng.randrange(KEYS)], values[rng.randrange(4)], T0 + i) for i in range(n)]


def run_cep(events) -> tuple[float, list[Match]]:
    op = CepOperator(PATTERN, out_of_orderness_ms=0, store={})
    got: list = []
    process = op.process
    started = time.perf_counter()
    for key, value, ts in events:
        matches, _ = process(key, value, ts)
        if matches:
            got.extend(matches)
    got.extend(op.flush()[0])
    elapsed = time.perf_counter() - started
    return len(events) / elapsed, got


def run_hand(events) -> tuple[float, list[Match]]:
    """The hand-written state machine (see the module docstring)."""
    runs: dict[str, list[list]] = {}
    out: list[Match] = []
    within = WITHIN_MS
    started = time.perf_counter()
    for key, value, ts in events:
        t = value["type"]
        mine = runs.get(key)
        if mine:
            keep = []
            for r in mine:
                if ts - r[0] >= within:
                    continue  # expired
                stage = r[1]
                if stage == 1:
                    if t == "click":
                        r[1], r[3] = 2, ts
                    keep.append(r)
                elif t == "order":
                    out.append((key, r[0], r[3], ts))
                else:
                    keep.append(r)
            if t == "search":
                keep.append([ts, 1, key, 0])
            runs[key] = keep
        elif t == "search":
            runs[key] = [[ts, 1, key, 0]]
    elapsed = time.perf_counter() - started
    return len(events) / elapsed, out


def normalise_cep(got) -> Counter:
    out = Counter()
    for key, m, _ts in got:
        out[(key, m["search"][0]["ts"], m["click"][0]["ts"], m["order"][0]["ts"])] += 1
    return out


def cep_section(rows: list[Row]) -> None:
    n = scaled(1_000_000, 10_000)
    log(f"CEP: generating {n:,} events over {KEYS:,} keys")
    events = [(k, {"type": v["type"], "ts": ts}, ts) for k, v, ts in cep_events(n)]
    gc.collect()
    gc.freeze()
    ours, theirs = [], []
    want = None
    for run in range(REPEATS):
        rate_h, got_h = run_hand(events)
        theirs.append(rate_h)
        hand = Counter(got_h)
        rate_c, got_c = run_cep(events)
        ours.append(rate_c)
        mine = normalise_cep(got_c)
        if mine != hand:
            diff = (mine - hand) + (hand - mine)
            raise SystemExit(f"CEP and the hand-written machine differ: {list(diff)[:5]}")
        want = sum(hand.values())
        log(
            f"run {run + 1}: tidelog {rate_c:,.0f} events/s, hand-written {rate_h:,.0f} "
            f"events/s, {want:,} matches, equal"
        )
    gc.unfreeze()
    rows.append(
        Row(
            "CEP search->click->order within 60 s",
            "events/s",
            median(ours),
            peer="hand-written Python state machine",
            peer_value=median(theirs),
            target=">= 0.5x peer",
            check=at_least_ratio(0.5),
            note=(
                f"{n:,} events, {KEYS:,} keys, in order, {want:,} matches (equal on both); "
                f"CepOperator with a dict store (watermark buffering included); median of "
                f"{REPEATS}"
            ),
        )
    )


# ---------------------------------------------------------------------- search

USERS, PAGES, WORDS, COUNTRIES = 100_000, 10_000, 50_000, 50
STATUSES = ("ok", "ok", "ok", "error", "timeout")


def search_events(n: int, rng: random.Random) -> list[dict]:
    out = []
    for _ in range(n):
        out.append(
            {
                "user": f"u{rng.randrange(USERS)}",
                "page": f"/product/{rng.randrange(PAGES)}",
                "country": f"c{rng.randrange(COUNTRIES)}",
                "status": rng.choice(STATUSES),
                "latency_ms": rng.randrange(1000),
                "message": " ".join(f"w{rng.randrange(WORDS)}" for _ in range(8)),
            }
        )
    return out


def search_queries(n: int, rng: random.Random) -> dict[str, str]:
    qs = {
        "always-1": "NOT status:ok AND latency_ms:>=990",
        "always-2": "-country:c1 -country:c2 +latency_ms:[995 TO *]",
        "always-3": "NOT (status:ok OR status:timeout) AND latency_ms:>998",
    }
    for i in range(n):
        r = rng.random()
        if r < 0.4:
            q = f"user:u{rng.randrange(USERS)} AND status:error"
        elif r < 0.7:
            q = f'page:"product {rng.randrange(PAGES)}" AND country:c{rng.randrange(COUNTRIES)}'
        elif r < 0.9:
            q = f"message:w{rng.randrange(WORDS)} OR message:w{rng.randrange(WORDS)}"
        else:
            q = f'latency_ms:[{rng.randrange(1000)} TO *] AND page:"product {rng.randrange(PAGES)}"'
        qs[f"q{i}"] = q
    return qs


def run_search(index: QueryIndex, events: list[dict]) -> tuple[float, int, int]:
    match = index.match
    matched = 0
    started = time.perf_counter()
    for e in events:
        matched += len(match(e))
    elapsed = time.perf_counter() - started
    cands = sum(len(index.candidates(Doc(e))) for e in events[:2000])
    return len(events) / elapsed, matched, cands / min(len(events), 2000)


def search_section(rows: list[Row]) -> None:
    rng = random.Random(SEED)
    n = scaled(100_000, 2_000)
    events = search_events(n, rng)
    indexes = {}
    build: dict[int, float] = {}
    for count in (1, 1_000, 100_000):
        qs = search_queries(count, random.Random(SEED + count))
        t = time.perf_counter()
        index = QueryIndex()
        for qid, text in qs.items():
            index.put(qid, text)
        took = time.perf_counter() - t
        log(f"search: {len(qs):,} queries parsed and indexed in {took:.1f} s")
        build[count] = len(qs) / took
        indexes[count] = (qs, index)
    gc.collect()
    gc.freeze()
    rates: dict[int, list[float]] = {c: [] for c in indexes}
    info: dict[int, tuple[int, float]] = {}
    for run in range(REPEATS):
        for count, (_, index) in indexes.items():
            rate, matched, cands = run_search(index, events)
            rates[count].append(rate)
            info[count] = (matched, cands)
            log(
                f"run {run + 1}: {count:,} queries: {rate:,.0f} events/s, {matched:,} matches, "
                f"{cands:.1f} candidates/event"
            )
    # the oracle: every query evaluated on every event (1,000 queries, a few events)
    qs, index = indexes[1_000]
    few = events[: scaled(2_000, 200)]
    every = [(qid, q.matcher) for qid, q in index.queries.items()]  # compiled once
    started = time.perf_counter()
    brute = []
    for e in few:
        doc = Doc(e)
        brute.append(sorted(qid for qid, matcher in every if matcher(doc)))
    brute_rate = len(few) / (time.perf_counter() - started)
    if brute != [index.match(e) for e in few]:
        raise SystemExit("the index's matches differ from evaluating every query")
    if brute[:5] != [brute_force_match(qs, e) for e in few[:5]]:  # parsed afresh (slow)
        raise SystemExit("the compiled queries differ from parsing them again")
    gc.unfreeze()
    base = median(rates[1_000])
    for count in (1, 1_000, 100_000):
        matched, cands = info[count]
        rows.append(
            Row(
                f"search, {count:,} stored queries (+3 always-check)",
                "events/s",
                median(rates[count]),
                peer="same, 1,000 queries" if count == 100_000 else None,
                peer_value=base if count == 100_000 else None,
                target=">= 0.3x peer" if count == 100_000 else None,
                check=at_least_ratio(0.3) if count == 100_000 else None,
                note=(
                    f"{n:,} events, {matched / n:.2f} matches/event, {cands:.1f} candidate "
                    f"queries evaluated/event; median of {REPEATS}"
                ),
            )
        )
    rows.append(
        Row(
            "search: adding queries to the index (100,000)",
            "queries/s",
            build[100_000],
            note="parse (luqum, PLY: most of the time) + compile + index; once per query change",
        )
    )
    rows.append(
        Row(
            "search, 1,000 queries, brute force (every query per event)",
            "events/s",
            brute_rate,
            note=f"{len(few):,} events; matches equal to the index's",
        )
    )


def main() -> None:
    rows: list[Row] = []
    cep_section(rows)
    search_section(rows)
    print_table(rows)
    write_results(NAME, rows)


if __name__ == "__main__":
    main()
