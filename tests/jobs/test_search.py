"""Search on streams (``streams.jobs.search``): each query construct, errors with their position,
the percolator index against a brute-force matcher (hypothesis, with adds/changes/deletes
interleaved), the job step in the test driver and on a real LogStore with a runner."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from streams.errors import InvalidConfig
from streams.jobs import JSON, Job
from streams.jobs.runner import Runner
from streams.jobs.search import (
    QueryError,
    QueryIndex,
    brute_force_match,
    compile_query,
    explain,
    parse,
)
from streams.jobs.testing import TestDriver

EVENT = {
    "status": "ERROR",
    "service": "Checkout API",
    "latency_ms": 730,
    "env": "prod",
    "message": "Upstream TIMEOUT after 5s (retry 2.5)",
    "ts": "2026-03-01T12:00:00Z",
    "at": 1_772_366_400_000,  # 2026-03-01T12:00:00Z in ms
    "tags": ["beta", "eu-west"],
    "user": {"id": 42, "plan": "pro"},
    "ok": False,
    "note": None,
}


def matches(query: str, event: object = EVENT) -> bool:
    return bool(compile_query("q", query).matcher.__call__(_doc(event)))


def _doc(event):
    from streams.jobs.search import Doc

    return Doc(event)


# ---------------------------------------------------------------------- constructs


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # terms: analysed (lowercased words), on a field or on any field
        ("status:error", True),
        ("status:ok", False),
        ("message:timeout", True),
        ("timeout", True),  # no field: any field
        ("checkout", True),
        ("missing:error", False),
        # numbers and booleans are words; 2.0 is 2
        ("latency_ms:730", True),
        ("latency_ms:730.0", True),
        ("user.id:42", True),  # dotted path into a nested object
        ("ok:false", True),
        ("message:2.5", True),
        # lists: any element
        ("tags:beta", True),
        ("tags:west", True),
        ("tags:gamma", False),
        # phrases: consecutive words in one value
        ('service:"checkout api"', True),
        ('service:"api checkout"', False),
        ('message:"upstream timeout"', True),
        ('"timeout after 5s"', True),
        ('tags:"beta eu"', False),  # two list elements are two values
        ("service:checkout-api", True),  # a term of several words is a phrase
        # numeric ranges
        ("latency_ms:[500 TO *]", True),
        ("latency_ms:[730 TO 800]", True),
        ("latency_ms:{730 TO 800]", False),
        ("latency_ms:[* TO 730}", False),
        ("latency_ms:>=730", True),
        ("latency_ms:>730", False),
        ("latency_ms:<1000", True),
        ("latency_ms:<=729", False),
        ("env:[1 TO 5]", False),  # a word is no number
        # time ranges: ISO strings and epoch ms, UTC without an offset
        ("ts:[2026-03-01 TO 2026-03-02]", True),
        ("ts:[2026-03-01T12:00:01Z TO *]", False),
        ("ts:{2026-03-01T12:00:00 TO *]", False),
        ('at:[2026-03-01T11:00:00Z TO "2026-03-01T13:00:00+00:00"]', True),
        ('at:>="2026-03-01T13:00:00+02:00"', True),  # 11:00 UTC
        ('at:>"2026-03-01T14:00:00+02:00"', False),  # 12:00 UTC
        # presence, everything
        ("note:*", False),  # null is absent
        ("env:*", True),
        ("latency_ms:[* TO *]", True),
        ("*", True),
        ("*:*", True),
        # boolean operators
        ("status:error AND env:prod", True),
        ("status:error AND env:dev", False),
        ("status:ok OR env:prod", True),
        ("NOT env:dev", True),
        ("NOT env:prod", False),
        ("status:error AND NOT env:prod", False),
        ("env:(dev OR prod)", True),
        ("(status:ok OR latency_ms:>500) AND tags:beta", True),
        # Lucene clauses, default operator OR
        ("status:ok env:prod", True),
        ("status:ok env:dev", False),
        ("+status:ok env:prod", False),
        ("status:error -env:prod", False),
        ("-env:dev -status:ok", True),  # only prohibited clauses: everything else
        ('status:error AND service:"checkout api" AND latency_ms:[500 TO *] NOT env:dev', True),
        ('status:error AND service:"checkout api" AND latency_ms:[500 TO *] NOT env:prod', False),
    ],
)
def test_construct(query, expected):
    assert matches(query) is expected


def test_an_event_that_is_not_an_object_is_searched_as_text():
    assert matches("disk", "Disk full on node-3")
    assert not matches("status:disk", "Disk full on node-3")


def test_explain_brackets_the_query_as_read():
    assert explain("a b -c") == "(a b -c)"
    assert explain("status:error AND (env:dev OR env:prod)") == (
        "(status:error AND (env:dev OR env:prod))"
    )
    assert explain("x:>=5") == "x:[5 TO *]"
    assert explain('s:"Checkout  API"') == 's:"checkout api"'


@pytest.mark.parametrize(
    ("query", "position", "says"),
    [
        ("status:error AND", None, "ends too early"),
        ("(a OR b", None, "ends too early"),
        ("latency:[1 TO", None, "ends too early"),
        ("a AND )", 6, "unexpected ')'"),
        ("status:err*", 7, "wildcards are not supported"),
        ("env:dev OR nme~2", 11, "fuzzy"),
        ('a AND "b c"~3', 6, "proximity"),
        ("a^2", 0, "boosts"),
        ("a AND f:/x+/", 8, "regular expressions"),
        ("a:b:c", 2, "field 'b' inside field 'a'"),
        ("x AND lat:[a TO 5]", 10, "must both be numbers or both ISO-8601"),
        ("ok AND [1 TO 2]", 7, "a range needs a field"),
        ("   ", 0, "empty"),
        ('s:""', 2, "no words"),
    ],
)
def test_bad_queries_say_what_and_where(query, position, says):
    with pytest.raises(QueryError) as err:
        parse(query)
    assert err.value.position == position
    assert says in str(err.value)
    where = "at the end" if position is None else f"at position {position}"
    assert where in str(err.value)
    caret = err.value.pointer().splitlines()[1]
    assert caret.index("^") == (len(query) if position is None else position)


# ---------------------------------------------------------------------- the index


def test_the_index_only_evaluates_queries_whose_terms_the_event_has():
    index = QueryIndex()
    for i in range(1_000):
        index.put(f"u{i}", f"user:u{i} AND status:error")
    index.put("slow", "latency_ms:[500 TO *]")
    index.put("not-dev", "NOT env:dev")
    doc = _doc({"user": "u7", "status": "error", "env": "prod"})
    assert index.candidates(doc) == {"u7", "not-dev"}  # no latency_ms field: not "slow"
    assert index.match({"user": "u7", "status": "error", "env": "prod"}) == ["not-dev", "u7"]
    assert index.describe()["always_checked"] == 1
    assert compile_query("n", "NOT env:dev").keys is None
    assert compile_query("r", "latency_ms:>5 OR NOT x:1").keys is None


def test_a_change_replaces_the_query_and_a_tombstone_deletes_it():
    index = QueryIndex()
    index.put("q", "status:error")
    assert index.match({"status": "error"}) == ["q"]
    index.put("q", {"query": "status:ok"})
    assert index.match({"status": "error"}) == []
    assert index.match({"status": "ok"}) == ["q"]
    index.put("q", None)
    assert index.match({"status": "ok"}) == []
    assert index.postings == {} and index.queries == {}


def test_a_bad_query_record_removes_the_old_query_and_is_reported():
    index = QueryIndex()
    index.put("q", "status:error")
    index.put("q", "status:(")
    assert index.match({"status": "error"}) == []
    assert "ends too early" in index.errors["q"]
    index.put("q", 17)
    assert "a saved search is a string" in index.errors["q"]
    index.put("q", "status:error")
    assert index.errors == {} and index.match({"status": "error"}) == ["q"]


FIELDS = ["a", "b", "n"]
WORDS = ["x", "y", "z"]


@st.composite
def queries(draw, depth=2):
    kind = draw(st.sampled_from(["term", "phrase", "range", "exists", "all", "op"] * 1))
    if kind == "op" and depth > 0:
        op = draw(st.sampled_from(["AND", "OR", "NOT", " ", "+", "-"]))
        left = draw(queries(depth=depth - 1))
        right = draw(queries(depth=depth - 1))
        if op == "NOT":
            return f"NOT ({left})"
        if op in "+-":
            return f"{op}({left}) ({right})"
        return f"({left}) {op} ({right})"
    field = draw(st.sampled_from(["", *FIELDS]))
    prefix = f"{field}:" if field else ""
    if kind == "phrase":
        return f'{prefix}"{draw(st.sampled_from(WORDS))} {draw(st.sampled_from(WORDS))}"'
    if kind == "range" and field:
        lo, hi = sorted(draw(st.lists(st.integers(0, 4), min_size=2, max_size=2)))
        lo_s = draw(st.sampled_from([str(lo), "*"]))
        return f"{field}:{draw(st.sampled_from('[{'))}{lo_s} TO {hi}{draw(st.sampled_from(']}'))}"
    if kind == "exists" and field:
        return f"{field}:*"
    if kind == "all":
        return "*"
    return prefix + draw(st.sampled_from([*WORDS, "1", "2"]))


values = st.one_of(
    st.integers(0, 4),
    st.lists(st.sampled_from([*WORDS, "1"]), max_size=3).map(" ".join),
    st.lists(st.sampled_from(WORDS), max_size=2),
)
events = st.dictionaries(st.sampled_from(FIELDS), values, max_size=3)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(["q0", "q1", "q2", "q3"]), queries()),
        st.tuples(st.just("delete"), st.sampled_from(["q0", "q1", "q2", "q3"]), st.none()),
        st.tuples(st.just("event"), st.none(), events),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_the_index_matches_what_evaluating_every_query_matches(steps):
    index = QueryIndex()
    live: dict[str, str] = {}
    for op, qid, arg in steps:
        if op == "put":
            index.put(qid, arg)
            live[qid] = arg
        elif op == "delete":
            index.put(qid, None)
            live.pop(qid, None)
        else:
            assert index.match(arg) == brute_force_match(live, arg), (live, arg)


# ---------------------------------------------------------------------- the fast parser

_ATOMS = st.one_of(
    st.sampled_from(["a", "B2", "x_y", "1", "2.5", "007", "1e5", "a.b", "a.", "and", "TO", "to"]),
    st.sampled_from(['"a b"', '"Product 17"', '""', '"a"', '"x*"', '"1 2.5"']),
    st.builds(
        "{}{} TO {}{}".format,
        st.sampled_from("[{"),
        st.sampled_from(["1", "*", "2.5", "a", "2026"]),
        st.sampled_from(["5", "*", "1", "b"]),
        st.sampled_from("]}"),
    ),
    st.builds("{}{}".format, st.sampled_from([">", ">=", "<", "<="]), st.sampled_from(["5", "a"])),
    st.sampled_from(["*", "a*", "a~", "-5", "x^2", "/re/"]),
)
_SPACE = st.sampled_from([" ", " ", "  ", "\t", ""])


@st.composite
def _query_text(draw, depth=0):
    """Queries of the shapes the fast path reads, and near misses (spacing, lowercase
    operators, reserved words, unsupported syntax, bad nesting)."""
    kind = draw(st.sampled_from(["atom", "atom", "field", "op", "not", "prefix", "group"]))
    if depth > 2 or kind == "atom":
        return draw(_ATOMS)
    if kind == "field":
        name = draw(st.sampled_from(["f", "page", "user.id", "_x", "a.", "*"]))
        inner = draw(_ATOMS) if draw(st.booleans()) else f"({draw(_query_text(depth + 1))})"
        return f"{name}:{draw(st.sampled_from(['', '', ' ']))}{inner}"
    if kind == "op":
        parts = draw(st.lists(_query_text(depth + 1), min_size=2, max_size=3))
        op = draw(st.sampled_from(["AND", "OR", "AND", "OR", "and", "&&", ""]))
        return f"{draw(_SPACE)}{op}{draw(_SPACE)}".join(parts)
    if kind == "not":
        return f"NOT{draw(st.sampled_from([' ', '  ', '']))}{draw(_query_text(depth + 1))}"
    if kind == "prefix":
        return f"{draw(st.sampled_from('+-'))}{draw(_SPACE)}{draw(_query_text(depth + 1))}"
    closing = draw(st.sampled_from([")", ")", ""]))
    return f"({draw(_SPACE)}{draw(_query_text(depth + 1))}{draw(_SPACE)}{closing}"


def _outcome(read, query):
    try:
        return read(query)
    except QueryError as exc:
        return ("error", exc.reason, exc.position)


@settings(max_examples=1500, deadline=None)
@given(st.one_of(_query_text(), st.text('ab1 :()[]{}"+-*TONDR<>=.', max_size=20)))
def test_the_fast_parser_reads_every_query_as_luqum_does(query):
    """``parse`` reads the common shapes itself (luqum's parser costs about 1 ms a query)
    and gives the rest to luqum: whatever the query, the compiled tree (or the error, with
    its position) is luqum's."""
    from streams.jobs.search import _fast_tree, _luqum_parse

    assume(query.strip())  # (an empty query is refused before either)
    assert _outcome(parse, query) == _outcome(_luqum_parse, query)
    if query in ("a AND b", 'page:"product 17" AND country:c3', "f:(a OR b) AND NOT g:[1 TO 5}"):
        assert _fast_tree(query) is not None  # the fast path is taken


def test_the_fast_parser_takes_the_common_shapes():
    from streams.jobs.search import _fast_tree

    for query in [
        "status:error",
        'page:"product 17" AND country:c3',
        "user:u1 AND status:error",
        "message:w1 OR message:w2",
        "latency_ms:[500 TO *] AND page:x",
        "f:(a OR b) AND NOT g:{1 TO 5]",
        "-env:dev AND +status:error",
        "x:>=990",
    ]:
        assert _fast_tree(query) is not None, query
    for query in ["a b", "a and b", "x:-5", "NOT", "err*", '"a b"~2', "x:[1 TO 5"]:
        assert _fast_tree(query) is None, query


# ---------------------------------------------------------------------- in a job


def search_job() -> Job:
    job = Job("find")
    job.stream("logs", value=JSON).search(queries="saved").to("found")
    return job


def test_search_step_emits_each_match_with_its_query_id():
    driver = TestDriver(search_job())
    driver.pipe("saved", "errors", {"query": "status:error"}, ts=1)
    driver.pipe("saved", "slow", "latency_ms:>=500", ts=1)
    driver.pipe("logs", "k1", {"status": "error", "latency_ms": 900}, ts=10)
    driver.pipe("saved", "errors", None, ts=11)  # tombstone
    driver.pipe("saved", "slow", "latency_ms:>=1000", ts=12)  # change
    driver.pipe("logs", "k2", {"status": "error", "latency_ms": 900}, ts=20)
    driver.pipe("logs", "k3", {"status": "ok", "latency_ms": 1000}, ts=30)
    assert driver.output("found") == [
        ("errors", {"query": "errors", "key": "k1", "event": EV1}, 10),
        ("slow", {"query": "slow", "key": "k1", "event": EV1}, 10),
        ("slow", {"query": "slow", "key": "k3", "event": {"status": "ok", "latency_ms": 1000}}, 30),
    ]


EV1 = {"status": "error", "latency_ms": 900}


def test_search_needs_a_queries_topic():
    with pytest.raises(InvalidConfig):
        Job("x").stream("logs").search(queries="")


def _write(store, topic, records, partition=None):
    store.append_batch(
        topic,
        [
            (
                None if v is None else (v if isinstance(v, bytes) else json.dumps(v).encode()),
                k.encode(),
                (),
                ts,
            )
            for k, v, ts in records
        ],
        partition=partition,
    )


def _read(store, topic):
    out = []
    for p in range(store.partition_count(topic)):
        pos, end = store.offsets(topic, p)
        while pos < end:
            recs = store.read(topic, p, pos)
            out.extend((json.loads(r.key), json.loads(r.value)) for r in recs)
            pos = recs[-1].offset + 1
    return out


def test_every_task_reads_all_queries_and_a_restart_rebuilds_them(store, coordinator):
    store.create_topic("logs", 3)
    store.create_topic("saved", 1, {"cleanup.policy": "compact"})
    _write(store, "saved", [("err", {"query": "status:error"}, 1)])
    _write(store, "saved", [("junk", b"status:(", 1)])  # not JSON, not a query: reported
    for p in range(3):
        _write(store, "logs", [(f"k{p}", {"status": "error", "p": p}, 10 + p)], partition=p)
    runner = Runner(search_job(), store, coordinator=coordinator).start()
    runner.run_until_idle()
    found = _read(store, "found")
    assert sorted(v["event"]["p"] for k, v in found) == [0, 1, 2]
    assert {k for k, _ in found} == {"err"}
    step = next(iter(runner.tasks.values()))._runtime
    index = next(s.index for s in step.values() if hasattr(s, "index"))
    assert "junk" in index.errors
    runner.close()

    # a new runner (a restart) reads the queries topic from its beginning again
    _write(store, "logs", [("k9", {"status": "error", "p": 9}, 50)], partition=1)
    runner = Runner(search_job(), store, coordinator=coordinator).start()
    runner.run_until_idle()
    later = _read(store, "found")[len(found) :]
    assert [(k, v["event"]["p"]) for k, v in later] == [("err", 9)]
    runner.close()


def test_tasks_opened_by_a_rebalance_know_the_queries_read_before(store, coordinator):
    """Two workers in the job's group: the first reads the queries and owns every task; when
    the second joins, the first's tasks are closed and reopened (a rebalance) and must find
    the queries again (replayed to a new task up to the runner's position), and the second's
    read them from the start; every event after that matches on whichever worker owns it."""
    import threading
    import time

    options = {
        "session_timeout_ms": 10_000,
        "heartbeat_interval_ms": 50,
        "rebalance_timeout_ms": 10_000,
    }
    store.create_topic("logs", 4)
    store.create_topic("saved", 1, {"cleanup.policy": "compact"})
    _write(store, "saved", [("err", "status:error", 1)])

    def worker():
        runner = Runner(
            search_job(), store, coordinator=coordinator, group=True, consumer_options=options
        )
        stop, errors = threading.Event(), []

        def run():
            try:
                runner.run(stop.is_set, idle_sleep_s=0.01)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return runner, stop, thread, errors

    def wait(cond, what):
        deadline = time.monotonic() + 60
        while not cond():
            assert time.monotonic() < deadline, f"gave up waiting for {what}"
            time.sleep(0.02)

    first = worker()
    wait(lambda: len(first[0].tasks) == 4, "the first worker to own every task")
    wait(lambda: first[0]._global_pos.get(("saved", 0)) == 1, "the query to be read")
    second = worker()
    wait(
        lambda: (
            len(first[0].tasks) + len(second[0].tasks) == 4 and first[0].tasks and second[0].tasks
        ),
        "the two workers to share the tasks",
    )
    for p in range(4):
        _write(store, "logs", [(f"k{p}", {"status": "error", "p": p}, 10 + p)], partition=p)
    wait(lambda: len(_read(store, "found")) >= 4, "a match per event")
    for runner, stop, thread, errors in (first, second):
        stop.set()
        thread.join(30)
        assert not errors, errors
        runner.close()
    assert sorted(v["event"]["p"] for _, v in _read(store, "found")) == [0, 1, 2, 3]
