"""The chained API through the in-memory TestDriver: windowed aggregates against an oracle,
serialisers, process() state, joins wired through the API."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.errors import InvalidConfig
from streams.jobs import JSON, TEXT, Count, Hopping, Job, Max, Sum, Tumbling, field
from streams.jobs.serde import BYTES, SerdeError, serde_of
from streams.jobs.testing import TestDriver
from streams.processing.operator import MIN_TIME
from tests.jobs.test_joins import interval_oracle


def revenue_job(size: int, grace: int, step: int | None = None) -> Job:
    job = Job("revenue")
    orders = job.stream("orders", value=JSON, timestamp=field("ts"))
    (
        orders.filter(lambda o: o["amount"] > 0)
        .key_by("country")
        .window(Tumbling(size) if step is None else Hopping(size, step), grace_ms=grace)
        .aggregate(revenue=Sum("amount"), n=Count(), top=Max("amount"))
        .to("revenue-by-country")
    )
    return job


def window_oracle(orders, size, grace, step=None):
    """Final (revenue, n, max) per (country, window start) over the non-late orders: an order
    counts in each of its windows that has not closed (end + grace <= max earlier event
    time). Hopping windows start every `step`."""
    step = step or size
    wm = MIN_TIME
    out: dict = {}
    for o in orders:
        t = o["ts"]
        starts = range(t - t % step - (size - 1) // step * step, t + 1, step)
        for start in [s for s in starts if s <= t < s + size]:
            if o["amount"] > 0 and start + size + grace > wm:
                acc = out.setdefault((o["country"], start), [0, 0, None])
                acc[0] += o["amount"]
                acc[1] += 1
                acc[2] = o["amount"] if acc[2] is None else max(acc[2], o["amount"])
        if o["amount"] > 0:  # filtered events never reach the window
            wm = max(wm, t)
    return {k: tuple(v) for k, v in out.items()}


orders_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "country": st.sampled_from(["fr", "de", "es"]),
            "amount": st.integers(-2, 50),
            "ts": st.integers(0, 600),
        }
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(
    orders_strategy,
    st.sampled_from([10, 60, 100]),
    st.integers(0, 80),
    st.sampled_from([None, 5, 20, 30]),
)
def test_windowed_aggregate_equals_oracle(orders, size, grace, step):
    """Tumbling (step None) and hopping windows through the chained API and a repartition."""
    if step is not None and step > size:
        step = size
    driver = TestDriver(revenue_job(size, grace, step))
    for i, o in enumerate(orders):
        driver.pipe("orders", f"o{i}", o)
    driver.flush()
    out = driver.output("revenue-by-country")
    assert all(v["final"] for _, v, _ in out)
    got = {(k, v["start"]): (v["revenue"], v["n"], v["top"]) for k, v, _ in out}
    assert len(got) == len(out)  # one final record per window
    assert got == window_oracle(orders, size, grace, step)
    assert all(ts == v["end"] - 1 for _, v, ts in out)


def test_updates_mode_emits_each_change_then_a_final():
    job = Job("j")
    job.stream("in", value=JSON, timestamp=field("t")).window(Tumbling(10)).aggregate(
        n=Count(), emit="updates"
    ).to("out")
    d = TestDriver(job)
    d.pipe("in", "k", {"t": 1})
    d.pipe("in", "k", {"t": 2})
    d.pipe("in", "k", {"t": 15})
    out = [(k, v["n"], v["final"]) for k, v, _ in d.output("out")]
    # the event is added (its window emits) before it advances the watermark (the old closes)
    assert out == [("k", 1, False), ("k", 2, False), ("k", 1, False), ("k", 2, True)]


def test_process_step_keeps_state_per_key():
    job = Job("counts")

    def running(value, state):
        n = state.get("n", 0) + 1
        state.set("n", n)
        return {"word": value, "n": n}

    job.stream("words", value=TEXT).key_by(lambda w: w).process(running, store="seen").to("o")
    d = TestDriver(job)
    for i, w in enumerate(["a", "b", "a", "a"]):
        d.pipe("words", None, w, ts=i)
    assert [v["n"] for _, v, _ in d.output("o")] == [1, 1, 2, 3]
    assert job.stores() == ["seen"]


def test_stream_stream_and_stream_table_joins_through_the_api():
    job = Job("ctr")
    searches = job.stream("searches", value=JSON, timestamp=field("ts"))
    clicks = job.stream("clicks", value=JSON, timestamp=field("ts"))
    searches.join(clicks, within=600_000, how="left").to("search-clicks")
    customers = job.table("customers", timestamp=field("ts"))
    orders = job.stream("orders", value=JSON, timestamp=field("ts"))
    orders.key_by("customer").join(customers, how="left").to("enriched")
    d = TestDriver(job)
    d.pipe("searches", "s1", {"q": "shoes", "ts": 0})
    d.pipe("searches", "s2", {"q": "hats", "ts": 10})
    d.pipe("clicks", "s1", {"url": "/shoe", "ts": 5_000})
    d.pipe("customers", "c1", {"country": "fr", "ts": 0})
    d.pipe("orders", "o1", {"customer": "c1", "ts": 100})
    d.pipe("orders", "o2", {"customer": "c9", "ts": 100})
    d.flush()
    assert d.output("search-clicks") == [
        ("s1", [{"q": "shoes", "ts": 0}, {"url": "/shoe", "ts": 5_000}], 5_000),
        ("s2", [{"q": "hats", "ts": 10}, None], 10),
    ]
    assert d.output("enriched") == [
        ("c1", [{"customer": "c1", "ts": 100}, {"country": "fr", "ts": 0}], 100),
        ("c9", [{"customer": "c9", "ts": 100}, None], 100),
    ]


def test_table_table_join_emits_retractions():
    job = Job("timeline")
    follows = job.table("follows")
    posts = job.table("posts")
    follows.join(posts).to("view")
    d = TestDriver(job)
    d.pipe("follows", "u1", {"f": 1}, ts=1)
    d.pipe("posts", "u1", {"p": 1}, ts=2)
    d.pipe("follows", "u1", None, ts=3)
    assert d.output("view") == [("u1", [{"f": 1}, {"p": 1}], 2), ("u1", None, 3)]


def test_serdes_are_open_and_refuse_bad_input_clearly():
    class Upper:
        def serialize(self, obj):
            return obj.upper().encode()

        def deserialize(self, data):
            return data.decode().lower()

    assert serde_of(Upper()).deserialize(b"AB") == "ab"
    assert serde_of("json") is JSON and serde_of("bytes") is BYTES
    with pytest.raises(SerdeError, match="not a serialiser"):
        serde_of(object())
    with pytest.raises(SerdeError, match="not JSON"):
        JSON.deserialize(b"{nope")
    with pytest.raises(SerdeError, match="not str"):
        TEXT.serialize(5)
    assert JSON.serialize(None) is None and JSON.deserialize(None) is None


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("\ud800\x00\n")),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_json_reads_what_json_loads_reads(value):
    """The JSON serde reads through orjson where it gives json.loads's result, through json
    where it would not: integers past 64 bits, NaN and infinities, lone surrogates."""
    import json

    data = json.dumps(value).encode()
    got, want = JSON.deserialize(data), json.loads(data)
    assert repr(got) == repr(want)  # repr: NaN != NaN, and 1 == 1.0 would hide a float
    for edge in (b"123456789012345678901234567890", b"-9223372036854775809", b"1e400", b"NaN"):
        assert repr(JSON.deserialize(edge)) == repr(json.loads(edge))


@settings(max_examples=500, deadline=None)
@given(
    st.recursive(
        JSON_VALUES
        | st.sampled_from(
            ["\x7f", '\x1f\x08\x0c/\\"', 1e16, 1e-7, -0.0, float("nan"), float("-inf")]
        ),
        lambda inner: (
            st.tuples(inner, inner)
            | st.dictionaries(st.integers(0, 3) | st.booleans() | st.none() | st.text(), inner)
        ),
        max_leaves=6,
    )
)
def test_json_writes_what_json_dumps_writes(value):
    """The JSON serde and a store's keys are json.dumps's compact bytes, through orjson where
    its text is the same: not for non-ASCII text, floats, NaN, non-string keys, integers past
    64 bits; the same error for what json cannot write. A store's values read back as
    json.dumps's do."""
    import json

    from streams.jobs.state import encode, encode_value

    try:
        want = json.dumps(value, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        with pytest.raises(SerdeError, match=re.escape(str(exc)[:40])):
            JSON.serialize(value)
        return
    assert JSON.serialize(value) == (None if value is None else want)  # None: a tombstone
    assert encode(value) == want
    assert repr(json.loads(encode_value(value))) == repr(json.loads(want))  # NaN != NaN


def test_bad_job_definitions_get_clear_errors():
    job = Job("j")
    s = job.stream("a")
    with pytest.raises(InvalidConfig, match="within"):
        s.join(job.stream("b"))
    with pytest.raises(InvalidConfig, match="name at least one"):
        s.window(Tumbling(10)).aggregate()
    with pytest.raises(InvalidConfig, match="sliding windows are not supported"):
        from streams.processing.windows import Sliding

        s.window(Sliding(10))


def test_running_aggregate_is_a_table_joinable_to_another():
    job = Job("totals")
    orders = job.stream("orders", value=JSON)
    per_country = orders.key_by("country").aggregate(
        name="per-country", revenue=Sum("amount"), n=Count(), top=Max("amount")
    )
    per_country.to("revenue-per-country")
    targets = job.table("targets")
    per_country.join(targets, joiner=lambda a, t: a["revenue"] >= t["goal"]).to("met")
    d = TestDriver(job)
    d.pipe("targets", "fr", {"goal": 10}, ts=0)
    for i, (c, a) in enumerate([("fr", 4), ("de", 2), ("fr", 7), ("fr", 1)]):
        d.pipe("orders", f"o{i}", {"country": c, "amount": a}, ts=i + 1)
    assert [(k, v) for k, v, _ in d.output("revenue-per-country")] == [
        ("fr", {"revenue": 4, "n": 1, "top": 4}),
        ("de", {"revenue": 2, "n": 1, "top": 2}),
        ("fr", {"revenue": 11, "n": 2, "top": 7}),
        ("fr", {"revenue": 12, "n": 3, "top": 7}),
    ]
    assert [(k, v) for k, v, _ in d.output("met")] == [("fr", False), ("fr", True)]
    assert job.stores() == [
        "per-country",
        "per-country-view",  # the rows of each table, queryable (streams.jobs.views)
        "table_join-7-left",
        "table_join-7-right",
        "table_join-7-view",
    ]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 1), st.sampled_from(["a", "b", "c"]), st.integers(0, 300)),
        max_size=40,
    ),
    st.integers(0, 60),
    st.integers(0, 100),
    st.sampled_from(["inner", "left"]),
)
def test_interval_join_through_the_api_equals_brute_force(events, within, grace, how):
    """Both sides re-keyed (so each goes through a repartition) and joined: the output is the
    operator's semantics, checked by the same oracle as the operator itself."""
    job = Job("j")
    left = job.stream("l", value=JSON, timestamp=field("t")).key_by("k")
    right = job.stream("r", value=JSON, timestamp=field("t")).key_by("k")
    left.join(right, within=within, how=how, grace_ms=grace).to("out")
    d = TestDriver(job)
    for i, (side, key, ts) in enumerate(events):
        d.pipe("lr"[side], None, {"k": key, "t": ts, "i": i})
    d.flush()
    got = Counter(
        (k, (lv["i"], None if rv is None else rv["i"]), ts) for k, (lv, rv), ts in d.output("out")
    )
    assert got == interval_oracle(events, within, grace, how)
