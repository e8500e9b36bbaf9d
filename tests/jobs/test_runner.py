"""The runner on a real LogStore: write input topics, run the job, read the output topics and
compare with an oracle; restore from changelogs; co-partitioning checked at start."""

from __future__ import annotations

import json
import random

import pytest

from streams.errors import InvalidConfig
from streams.jobs import JSON, Count, Job, Sum, Tumbling, field
from streams.jobs.runner import CoPartitioningError, RecordError, Runner
from streams.log import LogStore

SIZE = 1_000


def write(store: LogStore, topic: str, records) -> None:
    store.append_batch(
        topic, [(json.dumps(v).encode(), k.encode(), (), ts) for k, v, ts in records]
    )


def read_all(store: LogStore, topic: str) -> list[tuple[object, object, int]]:
    out = []
    for p in range(store.partition_count(topic)):
        pos, end = store.offsets(topic, p)
        while pos < end:
            recs = store.read(topic, p, pos)
            out.extend(
                (
                    json.loads(r.key),
                    None if r.value is None else json.loads(r.value),
                    r.timestamp_ms,
                )
                for r in recs
            )
            pos = recs[-1].offset + 1
    return out


def count_records(store: LogStore, topic: str) -> int:
    return sum(1 for _ in read_all(store, topic))


def enriched_revenue_job(name: str = "revenue") -> Job:
    """orders (keyed by order id) re-keyed by customer, enriched with the customers table at
    each order's time, re-keyed by country, summed per 1 s window."""
    job = Job(name)
    customers = job.table("customers", value=JSON, timestamp=field("ts"))
    orders = job.stream("orders", value=JSON, timestamp=field("ts"))
    (
        orders.key_by("customer")
        .join(
            customers,
            how="left",
            joiner=lambda o, c: {**o, "country": (c or {}).get("country", "??")},
            grace_ms=100_000,  # repartitioned orders arrive out of order
            name="enrich",
        )
        .key_by("country")
        .window(Tumbling(SIZE), grace_ms=100_000)
        .aggregate(name="totals", revenue=Sum("amount"), n=Count())
        .to("revenue-by-country")
    )
    return job


def make_data(seed: int, n_orders: int = 400):
    rnd = random.Random(seed)
    customers = []
    for c in range(12):
        for version in range(rnd.randint(1, 3)):
            country = rnd.choice(["fr", "de", "es"])
            customers.append((f"c{c}", {"country": country, "ts": version * 10_000}, 0))
    # a changelog is in time order (each partition's records are read in offset order, so a
    # row written after a later version of another row would be read after that version)
    customers.sort(key=lambda r: r[1]["ts"])
    orders = []
    for i in range(n_orders):
        ts = rnd.randint(0, 30_000)
        orders.append(
            (
                f"o{i}",
                {"customer": f"c{rnd.randint(0, 13)}", "amount": rnd.randint(1, 9), "ts": ts},
                ts,
            )
        )
    return customers, orders


def oracle(customers, orders):
    """The customer's version in force at the order's time (largest ts <= order ts), then
    revenue and count per (country, 1 s window)."""
    out: dict = {}
    for _, o, _ in orders:
        versions = [c for k, c, _ in customers if k == o["customer"] and c["ts"] <= o["ts"]]
        country = max(versions, key=lambda c: c["ts"])["country"] if versions else "??"
        start = o["ts"] - o["ts"] % SIZE
        acc = out.setdefault((country, start), [0, 0])
        acc[0] += o["amount"]
        acc[1] += 1
    return {k: tuple(v) for k, v in out.items()}


def finals(store):
    out = read_all(store, "revenue-by-country")
    got = {(k, v["start"]): (v["revenue"], v["n"]) for k, v, _ in out if v["final"]}
    assert len(got) == len([1 for _, v, _ in out if v["final"]])  # one final per window
    return got


def test_end_to_end_enrichment_and_windowed_revenue_equal_the_oracle(store, coordinator):
    store.create_topic("orders", 3)
    store.create_topic("customers", 3, {"cleanup.policy": "compact"})
    customers, orders = make_data(1)
    write(store, "customers", customers)
    write(store, "orders", orders)
    runner = Runner(enriched_revenue_job(), store, coordinator=coordinator, max_records=50)
    runner.run_until_idle()
    runner.flush()
    assert finals(store) == oracle(customers, orders)
    assert runner.late_count() == 0
    info = runner.describe()
    assert set(info["tasks"]) == {0, 1, 2}
    task0 = info["tasks"][0]
    assert all(i["lag_records"] == 0 for i in task0["inputs"].values())
    assert task0["late_events"] == 0 and task0["records_in"] > 0
    assert set(task0["watermarks_ms"]) == {"enrich", "totals"}
    assert task0["state_keys"]["enrich-versions"] > 0
    # the internal topics are named after the job; changelogs are compacted
    topics = set(store.list_topics())
    assert {"revenue-repartition-3", "revenue-totals-changelog"} <= topics
    assert store.describe_topic("revenue-totals-changelog").config["cleanup.policy"] == "compact"
    runner.close()


@pytest.mark.parametrize("backend", ["memory", "rocksdb"])
def test_restore_from_changelog_continues_correctly(store, coordinator, backend, tmp_path):
    """Run half the input, stop; a new runner restores the stores from their changelogs,
    resumes at the committed offsets and the whole output equals the oracle's (a runner
    that did not restore would lose the first half's open windows and counts)."""
    opts = {
        "state_backend": backend,
        "state_dir": str(tmp_path / "state"),
        "changelog_config": {"segment.bytes": 2048},  # small segments, so compaction has work
    }
    store.create_topic("orders", 3)
    store.create_topic("customers", 3, {"cleanup.policy": "compact"})
    customers, orders = make_data(2)
    orders.sort(key=lambda r: r[2])
    write(store, "customers", customers)
    write(store, "orders", orders[:200])
    first = Runner(enriched_revenue_job(), store, coordinator=coordinator, max_records=37, **opts)
    first.run_until_idle()
    first.close()  # stops without flushing: windows are open, their state is in changelogs
    before = count_records(store, "revenue-totals-changelog")
    store.compact(force=True)  # the changelogs are compacted topics: restore from what is kept
    assert count_records(store, "revenue-totals-changelog") < before

    second = Runner(enriched_revenue_job(), store, coordinator=coordinator, **opts)
    second.start()
    restored = sum(s.size() for t in second.tasks.values() for s in t.stores.values())
    assert restored > 0
    write(store, "orders", orders[200:])
    second.run_until_idle()
    second.flush()
    assert finals(store) == oracle(customers, orders)
    second.close()


def test_process_state_survives_a_restart(store, coordinator):
    store.create_topic("words", 2)

    def running(value, state):
        n = state.get("n", 0) + 1
        state.set("n", n)
        return {"word": value["w"], "n": n}

    def job():
        j = Job("wc")
        j.stream("words", value=JSON).key_by("w").process(running, store="counts").to("wc-out")
        return j

    words = [random.Random(3).choice("abc") for _ in range(60)]
    write(store, "words", [(str(i), {"w": w}, i) for i, w in enumerate(words[:30])])
    r1 = Runner(job(), store, coordinator=coordinator)
    r1.run_until_idle()
    r1.close()
    write(store, "words", [(str(i), {"w": w}, i) for i, w in enumerate(words[30:], 30)])
    r2 = Runner(job(), store, coordinator=coordinator)
    r2.run_until_idle()
    r2.close()
    last = {}
    for k, v, _ in read_all(store, "wc-out"):
        assert v["n"] == last.get(k, 0) + 1  # per key, the count goes up by one each time
        last[k] = v["n"]
    assert last == {w: words.count(w) for w in set(words)}
    assert "wc-counts-changelog" in store.list_topics()


def test_joins_check_co_partitioning_at_start(store):
    store.create_topic("searches", 3)
    store.create_topic("clicks", 2)
    job = Job("ctr")
    job.stream("searches").join(job.stream("clicks"), within=600_000).to("out")
    with pytest.raises(CoPartitioningError, match="clicks has 2, searches has 3"):
        Runner(job, store).start()
    missing = Job("nope")
    missing.stream("no-such-topic").to("o")
    with pytest.raises(InvalidConfig, match="reads a topic that does not exist"):
        Runner(missing, store).start()
    # repartitioning one side to 3 partitions makes it co-partitioned
    job2 = Job("ctr2")
    job2.stream("searches").join(job2.stream("clicks").repartition(partitions=3), within=10).to("o")
    Runner(job2, store).start()


@pytest.mark.parametrize("restart", [False, True])
def test_stream_stream_join_end_to_end(store, coordinator, restart):
    """Searches joined to clicks within 10 min on a real store (left join: unmatched
    searches come out as [search, null] once the watermark passes them, or at flush). With
    `restart`, the worker stops halfway and a new one restores the join's buffered state
    from its changelogs (the pairs and unmatched searches still equal the oracle's)."""
    store.create_topic("searches", 2)
    store.create_topic("clicks", 2)
    rnd = random.Random(5)
    searches = [(f"s{i}", {"q": i, "ts": i * 10_000}, 0) for i in range(100)]
    clicks = [
        (f"s{i}", {"c": i, "ts": i * 10_000 + rnd.randint(-100_000, 900_000)}, 0)
        for i in range(100)
        if rnd.random() < 0.6
    ]
    clicks.sort(key=lambda r: r[1]["ts"])

    def job():
        j = Job("ctr")
        s = j.stream("searches", value=JSON, timestamp=field("ts"))
        c = j.stream("clicks", value=JSON, timestamp=field("ts"))
        s.join(c, within=600_000, how="left", grace_ms=200_000).to("search-clicks")
        return j

    half = 500_000
    write(store, "searches", [r for r in searches if r[1]["ts"] < half])
    write(store, "clicks", [r for r in clicks if r[1]["ts"] < half])
    runner = Runner(job(), store, coordinator=coordinator, max_records=16)
    runner.run_until_idle()
    if restart:
        runner.close()
        runner = Runner(job(), store, coordinator=coordinator, max_records=16)
        runner.start()
        assert sum(s.size() for t in runner.tasks.values() for s in t.stores.values()) > 0
    write(store, "searches", [r for r in searches if r[1]["ts"] >= half])
    write(store, "clicks", [r for r in clicks if r[1]["ts"] >= half])
    runner.run_until_idle()
    runner.flush()
    got = sorted((k, json.dumps(v)) for k, v, _ in read_all(store, "search-clicks"))
    expected = []
    for k, sv, _ in searches:
        matches = [cv for ck, cv, _ in clicks if ck == k and abs(cv["ts"] - sv["ts"]) <= 600_000]
        expected.extend((k, json.dumps([sv, cv])) for cv in matches)
        if not matches:
            expected.append((k, json.dumps([sv, None])))
    assert runner.late_count() == 0
    assert got == sorted(expected)
    runner.close()


def test_table_table_join_keeps_a_materialised_view_in_a_compacted_topic(store, coordinator):
    """follows x profiles joined by user; the output topic's last record per key (what
    compaction keeps) is the view, and a deleted follow retracts the row."""
    store.create_topic("follows", 2, {"cleanup.policy": "compact"})
    store.create_topic("profiles", 2, {"cleanup.policy": "compact"})
    store.create_topic("view", 2, {"cleanup.policy": "compact"})
    rnd = random.Random(7)
    updates = []
    for i in range(200):
        topic = rnd.choice(["follows", "profiles"])
        user = f"u{rnd.randint(0, 9)}"
        value = None if rnd.random() < 0.2 else {"v": i}
        updates.append((topic, user, value, i))
    for topic, user, value, ts in updates:
        raw = None if value is None else json.dumps(value).encode()
        store.append(topic, raw, user.encode(), timestamp_ms=ts)
    j = Job("timeline")
    j.table("follows").join(j.table("profiles")).to("view")
    runner = Runner(j, store, coordinator=coordinator)
    runner.run_until_idle()
    runner.close()
    tables: dict = {"follows": {}, "profiles": {}}
    for topic, user, value, _ in updates:
        if value is None:
            tables[topic].pop(user, None)
        else:
            tables[topic][user] = value
    expected = {
        u: [tables["follows"][u], tables["profiles"][u]]
        for u in tables["follows"]
        if u in tables["profiles"]
    }
    last: dict = {}
    for k, v, _ in read_all(store, "view"):
        last[k] = v
    assert {k: v for k, v in last.items() if v is not None} == expected
    assert None in last.values()  # some rows were retracted


def test_a_bad_record_stops_the_job_naming_it_and_loses_nothing(store, coordinator):
    store.create_topic("in", 1)
    store.append_batch("in", [(b'{"x": 1}', b"a"), (b"{not json", b"b"), (b'{"x": 0}', b"c")])
    j = Job("div")
    j.stream("in", value=JSON).map(lambda v: {"inv": 1 / v["x"]}).to("out")
    runner = Runner(j, store, coordinator=coordinator)
    with pytest.raises(RecordError, match=r"in-0 offset 1: SerdeError: not JSON") as err:
        runner.run_until_idle()
    assert (err.value.topic, err.value.partition, err.value.offset) == ("in", 0, 1)
    assert coordinator.committed("div") == {}  # nothing committed: all is read again
    # a failing step names its record too
    store.create_topic("in2", 1)
    store.append_batch("in2", [(b'{"x": 0}', b"c")])
    j2 = Job("div2")
    j2.stream("in2", value=JSON).map(lambda v: {"inv": 1 / v["x"]}).to("out2")
    with pytest.raises(RecordError, match=r"in2-0 offset 0: ZeroDivisionError"):
        Runner(j2, store, coordinator=coordinator).run_until_idle()


def test_after_a_record_error_close_commits_nothing_of_the_failed_batch(store, coordinator):
    """A batch can fail half-way through the job (the records before the bad one have gone
    through some steps, maybe not all): closing the runner commits none of it — outputs,
    state or offsets — so that a restart redoes the batch from the last checkpoint."""
    store.create_topic("nums", 1)
    write(store, "nums", [(f"k{i}", {"x": x}, i) for i, x in enumerate([1, 2, 0, 4])])
    j = Job("inv")
    j.stream("nums", value=JSON).map(lambda v: {"inv": 1 / v["x"]}).to("inverses")
    runner = Runner(j, store, coordinator=coordinator, checkpoint_interval_ms=60_000)
    with pytest.raises(RecordError, match=r"nums-0 offset 2: ZeroDivisionError"):
        runner.run_until_idle()
    runner.close()
    assert coordinator.committed("inv") == {}
    assert count_records(store, "inverses") == 0


def test_a_table_tombstone_takes_its_records_timestamp(store, coordinator):
    """A deleted customer (a tombstone: no value to read "ts" from) is deleted from the
    record's timestamp on: orders after it are not enriched, orders before it are."""
    store.create_topic("customers", 1, {"cleanup.policy": "compact"})
    store.create_topic("orders", 1)
    store.append("customers", b'{"country": "fr", "ts": 0}', b"c1", timestamp_ms=0)
    store.append("customers", None, b"c1", timestamp_ms=50)
    store.append_batch(
        "orders",
        [(b'{"customer": "c1", "ts": 10}', b"o1"), (b'{"customer": "c1", "ts": 60}', b"o2")],
    )
    j = Job("enrich")
    customers = j.table("customers", timestamp=field("ts"))
    orders = j.stream("orders", value=JSON, timestamp=field("ts"))
    orders.key_by("customer").join(customers, how="left", grace_ms=1_000).to("enriched")
    runner = Runner(j, store, coordinator=coordinator)
    runner.run_until_idle()
    runner.close()
    out = sorted(read_all(store, "enriched"), key=lambda r: r[2])
    assert [v[1] for _, v, _ in out] == [{"country": "fr", "ts": 0}, None]


def test_a_checkpoint_commits_only_the_offsets_that_moved(store, coordinator):
    """A checkpoint writes an offset commit only for input partitions read since the last one
    (the demo's jobs read 4 records/s over many partitions: committing every partition each
    checkpoint wrote ~35 offset records/s to __consumer_offsets)."""
    store.create_topic("events", 4)
    runner = Runner(enriched_count_job(), store, coordinator=coordinator).start()
    write(store, "events", [("a", {"ts": 1}, 1)])
    runner.run_until_idle()
    runner.commit()
    before = offset_records(store)
    assert before >= 1
    runner.commit()  # nothing read since: nothing to commit
    runner.run_until_idle()
    runner.commit()
    assert offset_records(store) == before
    write(store, "events", [("a", {"ts": 2}, 2)])  # one partition moves: one offset record
    runner.run_until_idle()
    runner.commit()
    assert offset_records(store) == before + 1
    assert coordinator.committed("counter")[("events", partition_of(store))].offset == 2
    runner.close()


def enriched_count_job() -> Job:
    job = Job("counter")
    job.stream("events", value=JSON, timestamp=field("ts")).window(Tumbling(10)).aggregate(
        name="w", n=Count()
    ).to("counts")
    return job


def offset_records(store: LogStore) -> int:
    topic = "__consumer_offsets"
    return sum(store.offsets(topic, p)[1] for p in range(store.partition_count(topic)))


def partition_of(store: LogStore) -> int:
    for p in range(store.partition_count("events")):
        if store.offsets("events", p)[1]:
            return p
    raise AssertionError("no record written")


def graced_count_job(emit: str, name: str) -> Job:
    job = Job(name)
    job.stream(f"{name}-in", value=JSON, timestamp=field("ts")).window(
        Tumbling(10), grace_ms=100
    ).aggregate(name="w", emit=emit, n=Count()).to(f"{name}-out")
    return job


@pytest.mark.parametrize("emit", ["final", "updates"])
def test_a_restart_between_a_windows_firing_and_its_close_changes_no_output(
    store, coordinator, emit
):
    """A window with grace fires when the watermark passes its end, moved by another key's
    event (no event of its own touches it then, so its snapshot keeps the revision from
    before the firing). A restart after that checkpoint must give exactly the output of an
    uninterrupted run: no firing repeated, the same revisions."""

    def run(restart: bool) -> list:
        name = f"graced-{emit}-{restart}"
        topic = f"{name}-in"
        store.create_topic(topic, 1)
        job = graced_count_job(emit, name)
        write(store, topic, [("a", {"ts": 1}, 1), ("b", {"ts": 15}, 15)])
        runner = Runner(job, store, coordinator=coordinator).start()
        runner.run_until_idle()
        if restart:
            runner.close()  # checkpoints without flushing: a's window fired, still open
            runner = Runner(job, store, coordinator=coordinator).start()
        write(store, topic, [("a", {"ts": 50}, 50), ("c", {"ts": 500}, 500)])
        runner.run_until_idle()
        runner.close()
        return read_all(store, f"{name}-out")

    uninterrupted = run(False)
    assert uninterrupted
    assert run(True) == uninterrupted
