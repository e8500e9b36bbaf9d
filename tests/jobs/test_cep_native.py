"""CEP chains of compiled conditions (``streams.jobs.cep_chain``): the native kernel
(``_cepchain.pyx``, built by ``make native``) and the generated Python give what the general
operator gives — the same matches and timed-out partials in the same order, the same state
in the store at every sync, across restarts from that state — for any chain and any arrival
within the disorder bound."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.jobs import Pattern, field
from streams.jobs.cep import CepOperator
from streams.jobs.cep_chain import NATIVE


def test_the_native_kernel_is_built_and_in_use():
    """`make native` builds it (Cython and a C compiler); run it when this fails."""
    assert NATIVE, "streams/jobs/_cepchain is not built: run `make native`"
    p = Pattern.begin("a", field("t") == "a").followed_by("b", field("t") == "b")
    assert CepOperator(p).specialised == "native"
    assert CepOperator(p, specialise="python").specialised == "python"
    assert CepOperator(p, specialise=False).specialised is None


letters = st.sampled_from("abc")
conditions = st.one_of(
    st.builds(lambda t: field("t") == t, letters),  # tested in C by the kernel
    st.builds(lambda t: (field("t") == t) & (field("v") >= 1), letters),  # called
    st.builds(lambda a, b: field("t").isin([a, b]), letters, letters),
)


@st.composite
def chains(draw):
    p = Pattern.begin("s0", where=draw(conditions))
    for i in range(1, draw(st.integers(1, 3))):
        p = p.followed_by(f"s{i}", where=draw(conditions))
        if draw(st.integers(0, 4)) == 0:
            p = p.times(2)
    if draw(st.booleans()):
        p = p.within(draw(st.integers(2, 15)))
    return p


events_st = st.lists(
    st.tuples(st.sampled_from("uuvw"), letters, st.integers(0, 30), st.integers(0, 2)),
    min_size=1,
    max_size=25,
)


def drive(pattern, arrival, ooo, timeouts, syncs, specialise):
    """Everything the operator emits, and the store after each sync (a restart from the
    store after each: a new operator over it)."""
    store: dict = {}
    op = CepOperator(
        pattern, out_of_orderness_ms=ooo, store=store, timeouts=timeouts, specialise=specialise
    )
    out: list = []
    snapshots: list = []
    for n, (key, value, ts) in enumerate(arrival):
        out.append(op.process(key, value, ts))
        if n in syncs:
            op.sync()
            snapshots.append(copy.deepcopy(store))
            op = CepOperator(
                pattern,
                out_of_orderness_ms=ooo,
                store=store,
                timeouts=timeouts,
                specialise=specialise,
            )
    out.append(op.flush())
    norm = [(list(m), list(t)) for m, t in out]
    return norm, snapshots, op.late_count


@settings(max_examples=400, deadline=None)
@given(
    chains(),
    events_st,
    st.integers(0, 4),
    st.randoms(use_true_random=False),
    st.booleans(),
    st.sets(st.integers(0, 25), max_size=3),
)
def test_the_specialised_chains_equal_the_general_operator(
    pattern, events, ooo, rnd, timeouts, syncs
):
    evs = [(k, {"t": t, "ts": ts, "v": v}, ts) for k, t, ts, v in events]
    arrival = sorted(evs, key=lambda e: e[2] + rnd.randint(0, ooo))
    general = drive(pattern, arrival, ooo, timeouts, syncs, False)
    assert drive(pattern, arrival, ooo, timeouts, syncs, "python") == general
    if NATIVE:
        assert drive(pattern, arrival, ooo, timeouts, syncs, True) == general


@settings(max_examples=100, deadline=None)
@given(
    chains(),
    events_st,
    st.sampled_from([1.5, True, 2**62, -(2**62)]),
    st.integers(0, 25),
    st.booleans(),
)
def test_a_time_c_cannot_hold_hands_the_kernel_over_to_the_python(
    pattern, events, odd, at, timeouts
):
    """A float, a bool or a huge time (from a user's timestamp extractor): the kernel hands
    over to the generated Python for good, which gives what the general operator gives."""
    evs = [
        (k, {"t": t, "ts": ts, "v": v}, ts) for k, t, ts, v in sorted(events, key=lambda e: e[2])
    ]
    at = min(at, len(evs))
    shifted = odd if isinstance(odd, int) and abs(odd) > 2**61 else 0
    arrival = [(k, v, ts + shifted) for k, v, ts in evs[:at]]
    arrival.append(("u", {"t": "a", "ts": odd, "v": 0}, odd if shifted == 0 else shifted + 40))
    arrival += [(k, v, ts + shifted + 41) for k, v, ts in evs[at:]]
    general = drive(pattern, arrival, 0, timeouts, set(), False)
    assert drive(pattern, arrival, 0, timeouts, set(), True) == general
