"""CEP (``streams.jobs.cep``): each construct on a timeline, a brute-force oracle over all
event subsequences (hypothesis, arrival permutations within the disorder bound), and a
restart mid-pattern from the changelog.

Timelines: one column per event in event-time order, ``a3`` = an event of type ``a`` at
``ts=3``; ``^`` marks the events of a match.
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.errors import InvalidConfig
from streams.groups import GroupCoordinator
from streams.jobs import JSON, Job, Pattern, field
from streams.jobs.cep import CepOperator
from streams.jobs.runner import Runner
from streams.jobs.testing import TestDriver
from streams.log import LogStore


def is_(t):
    return lambda e: e["t"] == t


def is_field(t):
    return field("t") == t


@pytest.fixture(name="is_", params=["function", "compiled"])
def _is(request):
    """The timelines' conditions as Python functions (the operator's general path) and as
    compiled conditions (``field("t") == t``: a chain of them runs the generated matcher)."""
    return is_ if request.param == "function" else is_field


def run(pattern, events, *, ooo=0, key="u", timeouts=True):
    """Events given as "a3 b5 ..." (or "v:a3" for key v, or dicts); returns (matches, timed
    out) after flush, each as a list of {stage: "a3 b5"-style strings}. `timeouts=False`:
    nothing reads the timed-out partial matches (the operator then builds none)."""
    j = Job("cep")
    m = j.stream("ev", value=JSON, timestamp=field("ts")).match(pattern, out_of_orderness_ms=ooo)
    m.to("matches")
    if timeouts:
        m.timed_out().to("timeouts")
    d = TestDriver(j)
    if isinstance(events, str):
        events = [
            {"t": w[-1][0], "ts": int(w[-1][1:]), "k": w[0] if len(w) == 2 else key}
            for w in (x.split(":") for x in events.split())
        ]
    for e in events:
        d.pipe("ev", e.get("k", key), e)
    d.flush()

    def show(rows):
        return [
            {n: " ".join(f"{e['t']}{e['ts']}" for e in es) for n, es in v.items()}
            for _, v, _ in rows
        ]

    return show(d.output("matches")), show(d.output("timeouts"))


def test_followed_by_takes_the_next_matching_event_and_does_not_skip_after_a_match(is_):
    """followed_by is relaxed (skip till next match); no skip after a match: every a starts one.

    a1  x2  b3  a4  b5  b6
    ^       ^                 {a1, b3}   (b5, b6: not the first b after a1)
                ^   ^         {a4, b5}
    """
    p = Pattern.begin("a", where=is_("a")).followed_by("b", where=is_("b"))
    matches, _ = run(p, "a1 x2 b3 a4 b5 b6")
    assert matches == [{"a": "a1", "b": "b3"}, {"a": "a4", "b": "b5"}]


def test_next_needs_the_immediately_following_event(is_):
    """next is strict contiguity.

    a1  b2  a3  x4  b5
    ^   ^                     {a1, b2}
            a3 is followed by x4: no match
    """
    p = Pattern.begin("a", where=is_("a")).next("b", where=is_("b"))
    matches, _ = run(p, "a1 b2 a3 x4 b5")
    assert matches == [{"a": "a1", "b": "b2"}]


def test_not_followed_by_between_two_stages(is_):
    """a, then c, with no n in between.

    a1  n2  c3  a4  x5  c6
    a1 .. c3 has n2 in between: no match
                ^       ^     {a4, c6}
    """
    p = (
        Pattern.begin("a", where=is_("a"))
        .not_followed_by("n", where=is_("n"))
        .followed_by("c", where=is_("c"))
    )
    matches, _ = run(p, "a1 n2 c3 a4 x5 c6")
    assert matches == [{"a": "a4", "c": "c6"}]


def test_not_next(is_):
    """a, not immediately followed by n, then c.

    a1  n2  c3  a4  x5  n6  c7
    a1 is followed by n2: no match
                ^           ^ {a4, c7}   (n6 is not right after a4)
    """
    p = Pattern.begin("a", where=is_("a")).not_next("n", where=is_("n")).followed_by("c", is_("c"))
    matches, _ = run(p, "a1 n2 c3 a4 x5 n6 c7")
    assert matches == [{"a": "a4", "c": "c7"}]


def test_trailing_not_followed_by_waits_for_within(is_):
    """search, click, and no order within 10 ms of the search (the demo's pattern).

    s0  c2  o5 | s20 c21  x25 | s40 c41 ... o52
    s0,c2 ordered at 5: no match
                 ^   ^        {s20, c21}, emitted once 30 passed
                                s40,c41: o52 is outside 40+10: {s40, c41}
    """
    p = (
        Pattern.begin("s", where=is_("s"))
        .followed_by("c", where=is_("c"))
        .not_followed_by("o", where=is_("o"))
        .within(10)
    )
    matches, timeouts = run(p, "s0 c2 o5 s20 c21 x25 s40 c41 o52")
    assert matches == [{"s": "s20", "c": "c21"}, {"s": "s40", "c": "c41"}]
    assert timeouts == []


def test_optional_stage(is_):
    """a, optionally b, then c: both the match with b and the one without.

    a1  b2  c3
    ^   ^   ^                 {a1, b2, c3}
    ^       ^                 {a1, c3}
    """
    p = (
        Pattern.begin("a", where=is_("a"))
        .followed_by("b", where=is_("b"))
        .optional()
        .followed_by("c", where=is_("c"))
    )
    matches, _ = run(p, "a1 b2 c3")
    assert sorted(matches, key=len) == [{"a": "a1", "c": "c3"}, {"a": "a1", "b": "b2", "c": "c3"}]


def test_times_takes_n_events_each_the_next_that_fits(is_):
    """b.times(2): two b's, the first after a, the second the first b after that.

    a1  b2  x3  b4  b5
    ^   ^       ^             {a1, b2 b4}
    """
    p = Pattern.begin("a", where=is_("a")).followed_by("b", where=is_("b")).times(2)
    matches, _ = run(p, "a1 b2 x3 b4 b5")
    assert matches == [{"a": "a1", "b": "b2 b4"}]


def test_one_or_more_gives_a_match_per_count(is_):
    """a b+ c (relaxed inside the loop: skip till next).

    a1  b2  x3  b4  c5
    ^   ^           ^         {a1, b2, c5}
    ^   ^       ^   ^         {a1, b2 b4, c5}
    not {a1, b4, c5}: b2 is the first b after a1
    """
    p = (
        Pattern.begin("a", where=is_("a"))
        .followed_by("b", where=is_("b"))
        .one_or_more()
        .followed_by("c", where=is_("c"))
    )
    matches, _ = run(p, "a1 b2 x3 b4 c5")
    assert sorted(matches, key=lambda m: m["b"]) == [
        {"a": "a1", "b": "b2", "c": "c5"},
        {"a": "a1", "b": "b2 b4", "c": "c5"},
    ]


def test_next_one_or_more_is_strict_only_for_the_first_event(is_):
    """a next(b)+: the first b right after a, the further ones relaxed (Flink's default).

    a1  b2  x3  b4  a5  x6  b7
    ^   ^                         {a1, b2}
    ^   ^       ^                 {a1, b2 b4}
    ^   ^       ^           ^     {a1, b2 b4 b7}
                    a5 is not immediately followed by a b
    """
    p = Pattern.begin("a", where=is_("a")).next("b", where=is_("b")).one_or_more()
    matches, _ = run(p, "a1 b2 x3 b4 a5 x6 b7")
    assert matches == [
        {"a": "a1", "b": "b2"},
        {"a": "a1", "b": "b2 b4"},
        {"a": "a1", "b": "b2 b4 b7"},
    ]


def test_one_or_more_at_the_end_matches_at_each_event_and_never_times_out(is_):
    """a b+ within 10.

    a1  b2  b3  a20
    ^   ^                     {a1, b2}       (at b2)
    ^   ^   ^                 {a1, b2 b3}    (at b3)
                a20 times out alone; the a1 run, already matched, does not
    """
    p = Pattern.begin("a", where=is_("a")).followed_by("b", where=is_("b")).one_or_more()
    matches, timeouts = run(p.within(10), "a1 b2 b3 a20")
    assert matches == [{"a": "a1", "b": "b2"}, {"a": "a1", "b": "b2 b3"}]
    assert timeouts == [{"a": "a20"}]


def test_within_drops_partial_matches_and_reports_them_as_timed_out(is_):
    """within 10: b must come less than 10 after a.

    a0  b10  a12  b15  a30
    a0..b10 is 10 apart: a0 times out (at 9)
             ^    ^           {a12, b15}
                       a30 never sees a b: times out at the end of input
    """
    p = Pattern.begin("a", where=is_("a")).followed_by("b", where=is_("b")).within(10)
    matches, timeouts = run(p, "a0 b10 a12 b15 a30")
    assert matches == [{"a": "a12", "b": "b15"}]
    assert timeouts == [{"a": "a0"}, {"a": "a30"}]


@pytest.mark.parametrize("timeouts", [True, False])
def test_within_ends_each_run_on_its_own_time_while_other_keys_move_the_watermark(is_, timeouts):
    """s, c, o within 10; key u's two runs end at 10 and 12; key v's events move the watermark.

    u:  s0  s2  c3                  o11
    v:              x5      x10           x20
        s0 ends at 10 (x10 passes it, releasing x5): timed out {s0, c3}
            ^   ^                   ^     {s2, c3, o11}: s2 runs until 12
    The same matches whether or not a timed_out() consumer exists (without one, a run's end
    only drops it)."""
    p = (
        Pattern.begin("s", where=is_("s"))
        .followed_by("c", where=is_("c"))
        .followed_by("o", where=is_("o"))
        .within(10)
    )
    matches, timed_out = run(p, "u:s0 u:s2 u:c3 v:x5 v:x10 u:o11 v:x20", timeouts=timeouts)
    assert matches == [{"s": "s2", "c": "c3", "o": "o11"}]
    assert timed_out == ([{"s": "s0", "c": "c3"}] if timeouts else [])


def test_conditions_see_the_events_matched_so_far(is_):
    """b must carry a larger value than the a it follows.

    a1(v=5)  b2(v=3)  b3(v=7)
    ^                 ^       {a1, b3}   (b2 does not satisfy b's condition given a1)
    """
    p = Pattern.begin("a", where=is_("a")).followed_by(
        "b", where=lambda e, m: e["t"] == "b" and e["v"] > m["a"][0]["v"]
    )
    evs = [{"t": "a", "ts": 1, "v": 5}, {"t": "b", "ts": 2, "v": 3}, {"t": "b", "ts": 3, "v": 7}]
    matches, _ = run(p, evs)
    assert matches == [{"a": "a1", "b": "b3"}]


def test_out_of_order_events_within_the_bound_give_the_in_order_result(is_):
    """Arrival b3 a1 b2 c5 against event time a1 b2 b3 c5 (disorder 2): a next b is {a1, b2}.
    A late event (more than the bound behind the largest time seen) is dropped and counted."""
    p = Pattern.begin("a", where=is_("a")).next("b", where=is_("b"))
    matches, _ = run(p, "b3 a1 b2 c5", ooo=2)
    assert matches == [{"a": "a1", "b": "b2"}]
    matches, _ = run(p, "b3 c9 a1 b2", ooo=2)  # a1 and b2 arrive after the watermark passed 7
    assert matches == []


def test_matches_are_per_key(is_):
    """a1 (key u), b2 (key v): keys do not mix."""
    p = Pattern.begin("a", where=is_("a")).followed_by("b", where=is_("b"))
    evs = [{"t": "a", "ts": 1, "k": "u"}, {"t": "b", "ts": 2, "k": "v"}]
    assert run(p, evs)[0] == []


def test_a_chain_of_compiled_conditions_runs_the_generated_matcher():
    """Only a chain (begin, then followed_by) whose conditions are all compiled gets the
    generated process(); a function condition, or a negation, keeps the general one."""
    s, c = field("t") == "s", field("t") == "c"
    assert CepOperator(Pattern.begin("s", s).followed_by("c", c)).specialised_source
    assert CepOperator(Pattern.begin("s", s).followed_by("c", c), specialise=False).process
    for p in (
        Pattern.begin("s", s).followed_by("c", is_("c")),
        Pattern.begin("s", s).followed_by("c", c).not_followed_by("o", s).within(5),
        Pattern.begin("s", s).next("c", c),
    ):
        assert CepOperator(p).specialised_source is None


def test_invalid_patterns_are_refused_clearly():
    a = Pattern.begin("a", where=is_("a"))
    with pytest.raises(InvalidConfig, match="whole number >= 1"):
        a.times(0)
    with pytest.raises(InvalidConfig, match="applies once"):
        a.one_or_more().times(2)
    with pytest.raises(InvalidConfig, match="after times"):
        a.followed_by("b").times(2).optional()
    with pytest.raises(InvalidConfig, match="cannot follow one_or_more"):
        a.one_or_more().not_followed_by("n", is_("n"))
    with pytest.raises(InvalidConfig, match="already has a stage"):
        a.followed_by("a")
    with pytest.raises(InvalidConfig, match="first stage"):
        a.optional()
    with pytest.raises(InvalidConfig, match="only with within"):
        a.not_followed_by("n", is_("n")).check()
    with pytest.raises(InvalidConfig, match="cannot be optional"):
        a.followed_by("b").optional().check()
    with pytest.raises(InvalidConfig, match="cannot follow an optional"):
        a.followed_by("b").optional().not_followed_by("n", is_("n"))
    with pytest.raises(InvalidConfig, match="within"):
        a.within(0)
    with pytest.raises(InvalidConfig, match="is not a Pattern"):
        Job("j").stream("ev").match("a b c")


# ---------------------------------------------------------------------- brute force


def order(e):
    return (e["ts"], json.dumps(e, sort_keys=True, separators=(",", ":")))


def oracle(pattern: Pattern, events: list[dict], timed_out: list | None = None) -> list[dict]:
    """Every assignment of events to the positive stages that the module docstring's rules
    allow, found by trying all increasing index sequences. With `timed_out`, also appends
    to it every partial assignment alive when its `within` ends: no negation after it broken
    and some next stage still open (a relaxed one that no event before the end satisfied, a
    strict one with no event at all before the end)."""
    E = sorted(events, key=order)
    stages, W = pattern.stages, pattern.within_ms
    pos = [i for i, s in enumerate(stages) if not s.negative]
    out = []

    def times_out(assign):
        i, p = assign[-1]
        ctx = ctx_of(assign)
        for g in range(1, i):  # negations between the events of the prefix
            if stages[g].negative and not negations_hold_at(g, assign):
                return False
        options, guards = [], []
        if stages[i].loop:
            options.append((i, "followed_by"))
        for j in range(i + 1, len(stages)):
            if stages[j].negative:
                guards.append(j)
                continue
            options.append((j, stages[j].kind))
            if not stages[j].optional:
                break
        if len(options) == (1 if stages[i].loop else 0):
            return False  # complete: a match (or, ending in a loop, one that never times out)
        end = E[assign[0][1]]["ts"] + W
        later = [q for q in range(p + 1, len(E)) if E[q]["ts"] < end]
        for g in guards:
            cond = stages[g].cond
            if stages[g].kind == "not_next" and later and cond(E[later[0]], ctx):
                return False
            if stages[g].kind == "not_followed_by" and any(cond(E[q], ctx) for q in later):
                return False
        for j, kind in options:
            if kind == "next" and j != i:
                if not later:
                    return True
            elif not any(stages[j].cond(E[q], ctx) for q in later):
                return True
        return False

    def negations_hold_at(g, assign):
        before = [(s, q) for s, q in assign if s < g]
        after = [q for s, q in assign if s > g]
        prev, ctx, cond = before[-1][1], ctx_of(before), stages[g].cond
        if stages[g].kind == "not_next":
            return not (prev + 1 < len(E) and cond(E[prev + 1], ctx))
        return not any(cond(E[r], ctx) for r in range(prev + 1, after[0]))

    def ctx_of(assign):
        d: dict = {}
        for s, q in assign:
            d.setdefault(stages[s].name, []).append(E[q])
        return d

    def negations_hold(assign):
        first = E[assign[0][1]]["ts"]
        for g, st_ in enumerate(stages):
            if not st_.negative:
                continue
            before = [(s, q) for s, q in assign if s < g]
            after = [q for s, q in assign if s > g]
            prev, ctx = before[-1][1], ctx_of(before)
            if st_.kind == "not_next":
                if prev + 1 < len(E) and st_.cond(E[prev + 1], ctx):
                    return False
            elif after:
                if any(st_.cond(E[r], ctx) for r in range(prev + 1, after[0])):
                    return False
            elif any(
                st_.cond(E[r], ctx) for r in range(prev + 1, len(E)) if E[r]["ts"] - first < W
            ):
                return False
        return True

    def candidates(si, kind, assign):
        cond, ctx = stages[si].cond, ctx_of(assign)
        prev = assign[-1][1] if assign else -1
        for q in range(prev + 1, len(E)):
            e = E[q]
            if assign and W is not None and e["ts"] - E[assign[0][1]]["ts"] >= W:
                break
            if kind == "next" and q != prev + 1:
                break
            if not cond(e, ctx):
                continue
            if kind == "followed_by" and any(cond(E[r], ctx) for r in range(prev + 1, q)):
                continue
            yield q

    def rec(k, assign):  # the next stage to assign is pos[k]
        if k == len(pos):
            if negations_hold(assign):
                out.append(ctx_of(assign))
            return
        si = pos[k]
        if stages[si].optional:
            rec(k + 1, assign)
        for q in candidates(si, stages[si].kind, assign):
            assigned(k, [*assign, (si, q)])

    def assigned(k, assign):  # pos[k] was just assigned
        if W is not None and timed_out is not None and times_out(assign):
            timed_out.append(ctx_of(assign))
        rec(k + 1, assign)
        si = pos[k]
        if stages[si].loop:  # one more, relaxed
            for q in candidates(si, "followed_by", assign):
                assigned(k, [*assign, (si, q)])

    rec(0, [])
    return out


def _cond(t: str, bigger: bool, first: str, compiled: bool = False):
    if bigger:
        return lambda e, m: e["t"] == t and e["v"] >= m[first][0]["v"]
    if compiled:
        return field("t") == t
    return lambda e, m: e["t"] == t


@st.composite
def patterns(draw, compiled: bool = False):
    """1-3 positive stages (next / followed_by, optional in the middle), a negation or none
    in each gap, possibly a trailing not_followed_by (with within). `compiled`: the
    conditions that do not look at the matched events are ``field("t") == t`` (a chain of
    them runs the generated matcher), else functions."""
    letters = st.sampled_from("abc")
    quantifiers = st.sampled_from([None, None, "times", "one_or_more"])

    def quantify(p, i):
        q = draw(quantifiers)
        if q == "times":
            p = p.times(draw(st.integers(1, 3)))
        elif q == "one_or_more":
            p = p.one_or_more()
        if 0 < i < n and q != "times" and draw(st.booleans()):
            p = p.optional()
        return p

    bigger = st.sampled_from([False, False, True])  # compare with s0's event
    n = draw(st.integers(1, 3))
    p = quantify(Pattern.begin("s0", where=_cond(draw(letters), False, "", compiled)), 0)
    for i in range(1, n + 1):
        neg = draw(st.sampled_from([None, "not_next", "not_followed_by", "not_followed_by"]))
        if neg and not p.stages[-1].optional and not p.stages[-1].loop:
            p = getattr(p, neg)(f"n{i}", _cond(draw(letters), draw(bigger), "s0", compiled))
        if i == n and draw(st.booleans()):
            break
        kind = draw(st.sampled_from(["next", "followed_by", "followed_by"]))
        p = quantify(
            getattr(p, kind)(f"s{i}", _cond(draw(letters), draw(bigger), "s0", compiled)), i
        )
    if p.stages[-1].kind == "not_next" or p.stages[-1].optional:
        p = p.followed_by(f"s{n + 1}", _cond(draw(letters), False, "", compiled))
    if draw(st.booleans()) or p.stages[-1].negative:
        p = p.within(draw(st.integers(3, 20)))
    p.check()
    return p


events_st = st.lists(
    st.fixed_dictionaries(
        {
            "k": st.sampled_from("uuv"),
            "t": st.sampled_from("aabbccx"),
            "ts": st.integers(0, 15),
            "v": st.integers(0, 2),
        }
    ),
    min_size=4,
    max_size=12,
)


def canon(key, m):
    return (key, json.dumps(m, sort_keys=True))


@pytest.mark.parametrize("compiled", [False, True], ids=["function", "compiled"])
@settings(max_examples=300, deadline=None)
@given(
    st.data(),
    events_st,
    st.integers(0, 4),
    st.randoms(use_true_random=False),
    st.sampled_from([True, True, False]),
)
def test_matches_equal_the_brute_force_for_any_arrival_within_the_disorder_bound(
    compiled, data, events, ooo, rnd, read_timeouts
):
    """Arrival order: sorted by ts + a jitter in [0, ooo], so every event arrives no more than
    `ooo` behind the largest time seen before it (never late); the matches and the timed-out
    partial matches (multisets) are the oracle's whatever that order. Without a
    ``timed_out()`` consumer (the operator then skips building them) the matches are the
    same. Conditions as functions, and compiled (chains of them: the generated matcher)."""
    pattern = data.draw(patterns(compiled), label="pattern")
    arrival = sorted(events, key=lambda e: e["ts"] + rnd.randint(0, ooo))
    j = Job("cep")
    m = j.stream("ev", value=JSON, timestamp=field("ts")).match(pattern, out_of_orderness_ms=ooo)
    m.to("matches")
    if read_timeouts:
        m.timed_out().to("timeouts")
    d = TestDriver(j)
    for e in arrival:
        d.pipe("ev", e["k"], e)
    d.flush()
    assert d.task.late_count() == 0
    got = sorted(canon(k, v) for k, v, _ in d.output("matches"))
    expected, timed_out = [], []
    for k in "uv":
        t: list = []
        expected += [canon(k, mm) for mm in oracle(pattern, [e for e in events if e["k"] == k], t)]
        timed_out += [canon(k, mm) for mm in t]
    assert got == sorted(expected)
    if read_timeouts:
        assert sorted(canon(k, v) for k, v, _ in d.output("timeouts")) == sorted(timed_out)


# ---------------------------------------------------------------------- restart


ABANDONED = (
    Pattern.begin("search", where=is_("s"))
    .followed_by("click", where=lambda e, m: e["t"] == "c" and e["v"] == m["search"][0]["v"])
    .not_followed_by("order", where=is_("o"))
    .within(50)
)
# a chain (begin, then followed_by only): its runs are kept in a compact form of their own
BOUGHT = (
    Pattern.begin("search", where=is_("s"))
    .followed_by("click", where=lambda e, m: e["t"] == "c" and e["v"] == m["search"][0]["v"])
    .followed_by("order", where=is_("o"))
    .within(150)
)


def demo_job(p: Pattern = ABANDONED, timeouts: bool = True) -> Job:
    j = Job("abandon")
    m = (
        j.stream("ev", value=JSON, timestamp=field("ts"))
        .key_by("k")
        .match(p, out_of_orderness_ms=5)
    )
    m.to("matches")
    if timeouts:
        m.timed_out().to("timeouts")
    return j


def read_all(store: LogStore, topic: str) -> list:
    out: list = []
    if topic not in store.list_topics():
        return out
    for p in range(store.partition_count(topic)):
        pos, end = store.offsets(topic, p)
        while pos < end:
            recs = store.read(topic, p, pos)
            out.extend(json.dumps([json.loads(r.key), json.loads(r.value)]) for r in recs)
            pos = recs[-1].offset + 1
    return sorted(out)


def run_with_restarts(
    events: list[dict],
    cuts: list[int],
    backend: str = "memory",
    pattern: Pattern = ABANDONED,
    timeouts: bool = True,
) -> tuple[list, list, list]:
    """(matches and timed-out partials before the final flush, matches, timed out)."""
    with tempfile.TemporaryDirectory() as d:
        store = LogStore.open(Path(d) / "data", background=False)
        co = GroupCoordinator(store)
        co.load()
        try:
            store.create_topic("ev", 2)
            bounds = [0, *cuts, len(events)]
            for lo, hi in zip(bounds, bounds[1:], strict=False):
                store.append_batch(
                    "ev", [(json.dumps(e).encode(), e["k"].encode()) for e in events[lo:hi]]
                )
                runner = Runner(
                    demo_job(pattern, timeouts),
                    store,
                    coordinator=co,
                    max_records=7,
                    state_backend=backend,
                    state_dir=str(Path(d) / "state"),
                )
                runner.run_until_idle()
                if hi == len(events):
                    runner.commit()
                    before = read_all(store, "matches") + read_all(store, "timeouts")
                    runner.flush()
                runner.close()
            return before, read_all(store, "matches"), read_all(store, "timeouts")
        finally:
            co.close()
            store.close()


# the same chain, its conditions compiled: the generated matcher (``cep_chain``)
BOUGHT_COMPILED = (
    Pattern.begin("search", where=field("t") == "s")
    .followed_by("click", where=(field("t") == "c") & (field("v") == 1))
    .followed_by("order", where=field("t") == "o")
    .within(150)
)


@pytest.mark.parametrize(
    ("pattern", "timeouts"),
    [
        (ABANDONED, True),
        (BOUGHT, True),
        (BOUGHT, False),
        (BOUGHT_COMPILED, True),
        (BOUGHT_COMPILED, False),
    ],
    ids=[
        "not_followed_by",
        "chain",
        "chain-no-timed_out",
        "compiled-chain",
        "compiled-chain-no-timed_out",
    ],
)
@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_a_restart_mid_pattern_gives_the_uninterrupted_runs_matches(backend, pattern, timeouts):
    """Stopped (runner closed: commit, changelogs written) at several points mid-pattern —
    searches waiting for clicks, clicks waiting for within to rule out an order, events
    buffered behind the watermark — and restarted from the changelogs each time: the same
    matches and timed-out partials as one uninterrupted run, and as the brute force."""
    rnd = random.Random(14)
    events = []
    for i in range(300):
        events.append(
            {
                "k": f"user{rnd.randint(0, 5)}",
                "t": rnd.choice("sscox"),
                "v": rnd.randint(0, 1),
                "ts": i * 3 + rnd.randint(0, 4),  # out of order by up to 4 ms (< the bound, 5)
            }
        )
    # then new keys far later: after the last restart they alone move the watermark past
    # every other key's state, which the restored operator must find by itself
    events += [{"k": f"new{i}", "t": "x", "v": 0, "ts": 10_000} for i in range(8)]
    straight = run_with_restarts(events, [], pattern=pattern, timeouts=timeouts)
    cuts = [37, 38, 101, 150, 222, 299, 300]
    restarted = run_with_restarts(events, cuts, backend, pattern, timeouts)
    assert restarted == straight
    assert straight[0] and (straight[2] or not timeouts)  # both outputs before the flush
    assert len(straight[0]) > (100 if timeouts else 20)
    expected = sorted(
        json.dumps([k, mm])
        for k in {e["k"] for e in events}
        for mm in oracle(pattern, [e for e in events if e["k"] == k])
    )
    assert straight[1] == expected
