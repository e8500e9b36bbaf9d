"""Benchmark `cep`: complex event processing and search on streams (issue 14 item 8).

Run: ``make bench BENCH=cep``, ``python -m tests.bench cep`` or ``python tests/bench/bench_cep.py``.
``BENCH_SCALE`` (default 1.0) scales the event counts (1.0 = the issue's 1,000,000 CEP events;
0.01 a smoke run). ``BENCH_CEP_PARTS`` = ``cep`` or ``search`` runs one part only (default:
both). Writes ``bench-results/cep.json``.

**CEP.** 1,000,000 events over 10,000 keys (uniform), event ``i`` at ``T0 + i`` ms (in order,
no two at one time), each ``{"type": search|click|order|view}`` (uniform). The pattern::

    Pattern.begin("search", where=field("type") == "search")
           .followed_by("click", where=field("type") == "click")
           .followed_by("order", where=field("type") == "order")
           .within(60_000)

written as ``streams.jobs.cep`` recommends (compiled conditions; the operator then runs its
native kernel for chains, ``streams/jobs/_cepchain.pyx``, built by ``make native``).

- Tidelog: ``CepOperator(pattern, out_of_orderness_ms=0, store={}, timeouts=False)`` (the
  operator a job's ``.match`` step runs when nothing reads its ``timed_out()``), over a dict
  store, ``process(key, value, ts)`` per event, then ``flush()``. It does what it always does:
  events wait for the watermark (each is released by the next event's later time), ties in
  time are put in order by value, partial matches are dropped when the watermark passes
  their ``within`` (a wake-up per run), matches are built as ``{stage: [event]}``. A second
  row runs the same pattern with its conditions as Python functions (``lambda e:
  e["type"] == "search"``): the operator's general path.
- Peer (the floor any library must beat): a hand-written Python state machine for the same
  pattern and the same matches (no skip after a match, each ``followed_by`` takes the first
  matching event after the previous one, ``ts - first.ts < within``): per key a list of open
  runs ``[first ts, stage, events]``, processed in arrival order. It does **less** than the
  operator, as a hand-written machine for in-order input would: no watermark buffering (the
  input is in order, so it needs none), expired runs dropped only when their key sees another
  event, its conditions inlined (``t == "click"``), matches built as tuples.
- A third row runs the operator as a job does: over a ``Store`` (the changelogged store),
  with ``sync()`` and ``take_changes()`` (the changelog records, JSON-encoded) every 1,000
  events, as the runner's default (a checkpoint after each poll of up to 1,000 records).

Both produce the matches as ``(key, search ts, click ts, order ts)`` (the operator's
``{stage: [event]}`` matches reduced to that as they come out, in the timed loop, as a sink
consumes them); the multisets are checked equal (a difference fails the benchmark).
Target: Tidelog >= 0.5x the hand-written machine.
Rates are given per second of wall-clock time and per CPU-second of the process (the machine
may be shared; the load average is in the notes).

**Search.** Events ``{"user", "page", "country", "status", "latency_ms", "message"}`` (users from
100,000, pages from 10,000, message 8 words from a 50,000-word vocabulary) through a
``QueryIndex`` holding 1, 1,000 or 100,000 queries of a mix: 40% ``user:uN AND
status:error``, 30% ``page:"product N" AND country:XX``, 20% ``message:wA OR message:wB``, 10%
``latency_ms:[N TO *] AND page:"product N"``, plus three queries with no required term
(``NOT status:ok AND latency_ms:>=990``-like: the always-check list), whatever the count.
Every query is a search for something specific (a user, a page, a word), as saved searches
and alerts are, so candidates per event grow with (queries) x (selectivity), and so do the
matches (at 100,000 queries about 7 an event, most of them ``message:`` ORs); the table shows
the queries the index finds per event and how many of them are evaluated (an exact query,
one word or an OR of words, is not). Reported: events/s and events per CPU-second
(``QueryIndex.match``, one event at a time, the analysis of the event included); the 100,000
rows' peer is the 1,000 row (target: >= 0.3x). A brute-force row
evaluates every (compiled) query on every event (the 1,000 case, fewer events) and checks the
index's matches equal to it on those events.

Each measurement runs 3 times, interleaved (Tidelog, peer, Tidelog, ...); medians reported.
"""

from __future__ import annotations

import gc
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from streams.jobs.cep import CepOperator, Pattern  # noqa: E402
from streams.jobs.conditions import field  # noqa: E402
from streams.jobs.search import Doc, QueryIndex, brute_force_match  # noqa: E402
from streams.jobs.state import Store  # noqa: E402
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
    Pattern.begin("search", where=field("type") == "search")
    .followed_by("click", where=field("type") == "click")
    .followed_by("order", where=field("type") == "order")
    .within(WITHIN_MS)
)
# the same pattern, its conditions Python functions: the operator's general path
PATTERN_FUNCTIONS = (
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


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def run_cep(
    events, commit_every: int | None = None, pattern: Pattern = PATTERN
) -> tuple[float, float, list[Match]]:
    """(events/s, events per CPU-second, matches); with `commit_every`, over a ``Store``
    synced and its changes taken every that many events. Each match is consumed as it comes
    out, as a job's sink would: reduced to ``(key, search ts, click ts, order ts)``, what the
    hand-written machine emits (keeping every match's dict and lists until the end would
    leave the cycle collector walking them over and over, which no job does)."""
    store = Store("cep") if commit_every else {}
    op = CepOperator(pattern, out_of_orderness_ms=0, store=store, timeouts=False)
    global SPECIALISED
    SPECIALISED = op.specialised
    got: list[Match] = []
    add = got.append
    process = op.process
    every = commit_every or len(events) + 1
    started, cpu = time.perf_counter(), time.process_time()
    for i, (key, value, ts) in enumerate(events, 1):
        matches, _ = process(key, value, ts)
        if matches:
            for k, m, _ts in matches:
                add((k, m["search"][0]["ts"], m["click"][0]["ts"], m["order"][0]["ts"]))
        if i % every == 0:
            op.sync()
            store.take_changes()  # type: ignore[union-attr]
    for k, m, _ts in op.flush()[0]:
        add((k, m["search"][0]["ts"], m["click"][0]["ts"], m["order"][0]["ts"]))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return len(events) / elapsed, len(events) / cpu, got


def run_hand(events) -> tuple[float, float, list[Match]]:
    """The hand-written state machine (see the module docstring)."""
    runs: dict[str, list[list]] = {}
    out: list[Match] = []
    within = WITHIN_MS
    started, cpu = time.perf_counter(), time.process_time()
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
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return len(events) / elapsed, len(events) / cpu, out


def cep_section(rows: list[Row]) -> None:
    n = scaled(1_000_000, 10_000)
    log(f"CEP: generating {n:,} events over {KEYS:,} keys")
    events = [(k, {"type": v["type"], "ts": ts}, ts) for k, v, ts in cep_events(n)]
    gc.collect()
    gc.freeze()
    rates: dict[str, list[tuple[float, float]]] = {
        "tidelog": [],
        "hand": [],
        "committed": [],
        "functions": [],
    }
    want = None
    load = [loadavg()]
    for run in range(REPEATS):
        rate_h, cpu_h, got_h = run_hand(events)
        rates["hand"].append((rate_h, cpu_h))
        hand = Counter(got_h)
        rate_c, cpu_c, got_c = run_cep(events)
        rates["tidelog"].append((rate_c, cpu_c))
        specialised = SPECIALISED
        rate_s, cpu_s, got_s = run_cep(events, commit_every=1_000)
        rates["committed"].append((rate_s, cpu_s))
        rate_f, cpu_f, got_f = run_cep(events, pattern=PATTERN_FUNCTIONS)
        rates["functions"].append((rate_f, cpu_f))
        for got in (got_c, got_s, got_f):
            mine = Counter(got)
            if mine != hand:
                diff = (mine - hand) + (hand - mine)
                raise SystemExit(f"CEP and the hand-written machine differ: {list(diff)[:5]}")
        want = sum(hand.values())
        log(
            f"run {run + 1}: tidelog {rate_c:,.0f} events/s ({cpu_c:,.0f}/CPU-s), with commits "
            f"{rate_s:,.0f} ({cpu_s:,.0f}/CPU-s), function conditions {rate_f:,.0f} "
            f"({cpu_f:,.0f}/CPU-s), hand-written {rate_h:,.0f} events/s "
            f"({cpu_h:,.0f}/CPU-s), {want:,} matches, equal"
        )
    load.append(loadavg())
    gc.unfreeze()

    def med(side: str, i: int) -> float:
        return median([r[i] for r in rates[side]])

    common = f"{n:,} events, {KEYS:,} keys, in order, {want:,} matches (equal on all sides)"
    loads = f"load average {load[0]} -> {load[1]}"
    hand_name = "hand-written Python state machine"
    rows.append(
        Row(
            "CEP search->click->order within 60 s",
            "events/s",
            med("tidelog", 0),
            peer=hand_name,
            peer_value=med("hand", 0),
            target=">= 0.5x peer",
            check=at_least_ratio(0.5),
            note=(
                f"{common}; CepOperator over a dict store (watermark buffering included), "
                f"compiled conditions (chain matcher: {specialised}); "
                f"median of {REPEATS}, interleaved; {loads}"
            ),
        )
    )
    rows.append(
        Row(
            "CEP search->click->order within 60 s, per CPU-second",
            "events/CPU-s",
            med("tidelog", 1),
            peer=hand_name,
            peer_value=med("hand", 1),
            target=">= 0.5x peer",
            check=at_least_ratio(0.5),
            note=f"the same runs, per CPU-second of this process; {loads}",
        )
    )
    rows.append(
        Row(
            "CEP, conditions as Python functions (the general operator)",
            "events/s",
            med("functions", 0),
            peer=hand_name,
            peer_value=med("hand", 0),
            note=(
                f"{common}; per CPU-second: {med('functions', 1):,.0f} (hand-written "
                f"{med('hand', 1):,.0f}); lambda e: e['type'] == ...: a call per event per run"
            ),
        )
    )
    rows.append(
        Row(
            "CEP, as in a job: a Store, sync + changelog records every 1,000 events",
            "events/s",
            med("committed", 0),
            peer=hand_name,
            peer_value=med("hand", 0),
            note=(
                f"{common}; per CPU-second: {med('committed', 1):,.0f} (hand-written "
                f"{med('hand', 1):,.0f}); the hand-written machine keeps nothing durable"
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


def run_search(index: QueryIndex, events: list[dict]) -> tuple[float, float, int]:
    """(events/s, events per CPU-second, matches)."""
    match = index.match
    matched = 0
    started, cpu = time.perf_counter(), time.process_time()
    for e in events:
        matched += len(match(e))
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return len(events) / elapsed, len(events) / cpu, matched


def candidates(index: QueryIndex, events: list[dict]) -> tuple[float, float]:
    """Per event: (queries the index finds, those of them evaluated: all but its exact ones)."""
    found = evaluated = 0
    for e in events:
        cands = index.candidates(Doc(e))
        found += len(cands)
        evaluated += len(cands - index.exact)
    return found / len(events), evaluated / len(events)


def search_section(rows: list[Row]) -> None:
    rng = random.Random(SEED)
    n = scaled(100_000, 2_000)
    events = search_events(n, rng)
    indexes = {}
    build: dict[int, tuple[float, float]] = {}
    load = [loadavg()]
    for count in (1, 1_000, 100_000):
        qs = search_queries(count, random.Random(SEED + count))
        t, cpu = time.perf_counter(), time.process_time()
        index = QueryIndex()
        for qid, text in qs.items():
            index.put(qid, text)
        took, cpu = time.perf_counter() - t, time.process_time() - cpu
        log(f"search: {len(qs):,} queries parsed and indexed in {took:.1f} s ({cpu:.1f} CPU-s)")
        build[count] = (len(qs) / took, len(qs) / cpu)
        indexes[count] = (qs, index)
    gc.collect()
    gc.freeze()
    rates: dict[int, list[float]] = {c: [] for c in indexes}
    cpu_rates: dict[int, list[float]] = {c: [] for c in indexes}
    info: dict[int, tuple[int, float, float]] = {}
    for count, (_, index) in indexes.items():
        info[count] = (0, *candidates(index, events[:2000]))
    for run in range(REPEATS):
        for count, (_, index) in indexes.items():
            rate, cpu_rate, matched = run_search(index, events)
            rates[count].append(rate)
            cpu_rates[count].append(cpu_rate)
            info[count] = (matched, *info[count][1:])
            log(
                f"run {run + 1}: {count:,} queries: {rate:,.0f} events/s "
                f"({cpu_rate:,.0f}/CPU-s), {matched:,} matches"
            )
    load.append(loadavg())
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
        matched, found, evaluated = info[count]
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
                    f"{n:,} events, {matched / n:.2f} matches/event, {found:.1f} queries found "
                    f"by the index/event, {evaluated:.1f} of them evaluated; "
                    f"{median(cpu_rates[count]):,.0f} events/CPU-s; median of {REPEATS}, "
                    f"interleaved; load average {load[0]} -> {load[1]}"
                ),
            )
        )
    rows.append(
        Row(
            "search, 100,000 stored queries, per CPU-second",
            "events/CPU-s",
            median(cpu_rates[100_000]),
            peer="same, 1,000 queries",
            peer_value=median(cpu_rates[1_000]),
            target=">= 0.3x peer",
            check=at_least_ratio(0.3),
            note="the same runs, per CPU-second of this process",
        )
    )
    rows.append(
        Row(
            "search: adding queries to the index (100,000)",
            "queries/s",
            build[100_000][0],
            note=(
                f"{build[100_000][1]:,.0f} queries/CPU-s; parse (the common shapes without "
                "luqum's PLY parser) + compile + index; at job start and once per query change"
            ),
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


SPECIALISED: str | None = None  # which chain matcher the last run_cep used


def main() -> None:
    parts = os.environ.get("BENCH_CEP_PARTS", "cep,search").split(",")
    if not set(parts) <= {"cep", "search"}:
        raise SystemExit(f"BENCH_CEP_PARTS must name cep and/or search, got {parts!r}")
    rows: list[Row] = []
    if "cep" in parts:
        cep_section(rows)
    if "search" in parts:
        search_section(rows)
    print_table(rows)
    write_results(NAME, rows)


if __name__ == "__main__":
    main()
