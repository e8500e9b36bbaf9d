"""A direct interval join to a JSON sink keeps its values as JSON text (``Task._json_text_join``,
``IntervalJoin.use_json_text``): an input value whose bytes are canonical JSON is handed over
unread, each pair is written as ``[left, right]``'s JSON text. Whatever the bytes of the inputs
(canonical or not, across a restart that restores the state from its changelogs), the output
topic holds exactly the bytes the join of decoded values writes; any other graph keeps values."""

from __future__ import annotations

import random
from typing import NamedTuple

import pytest

from streams.jobs import BYTES, JSON, TEXT, Job, field
from streams.jobs import serde as serde_module
from streams.jobs.runner import Runner
from streams.log import LogStore

# canonical JSON text (kept as it is) and JSON that is not (read, then written again): spaces,
# floats, escapes, non-ASCII, a repeated key, integers past 64 bits, NaN, a bare null
VALUES = [
    b'{"id":1}',
    b'{"id":-20,"tag":"a\\"b\\\\c"}',
    b'[1,[true,false,null],{"x":{}}]',
    b'"text"',
    b"0",
    b"null",
    b'{"id": 2}',
    b' {"id":3}',
    b'{"a":1,"a":2}',
    b"[1.5,2e3,-0.0]",
    b'"caf\xc3\xa9"',
    b'"\\u00e9\\/"',
    b'{"n":123456789012345678901234}',
    b"-0",
    b"NaN",
    b'{"k":[1,2, 3]}',
]


def inputs(n: int, seed: int) -> dict[str, list[tuple[bytes, bytes, int]]]:
    """(key, value bytes, ts) per side, in time order per side."""
    rnd = random.Random(seed)
    out: dict[str, list] = {"left": [], "right": []}
    for side in out:
        ts = 0
        for _ in range(n):
            ts += rnd.randint(0, 3)
            out[side].append((f"k{rnd.randrange(4)}".encode(), rnd.choice(VALUES), ts))
    return out


def oracle(recs: dict[str, list], within: int) -> list[tuple[bytes, bytes]]:
    """Every matching pair as (key, the bytes JSON writes of [left value, right value])."""
    out = []
    for lk, lv, lt in recs["left"]:
        for rk, rv, rt in recs["right"]:
            if lk == rk and abs(lt - rt) <= within:
                pair = [JSON.deserialize(lv), JSON.deserialize(rv)]
                out.append((lk, JSON.serialize(pair)))
    return sorted(out)


def output(store: LogStore, topic: str) -> list[tuple[bytes, bytes]]:
    out = []
    for p in range(store.partition_count(topic)):
        pos, end = store.offsets(topic, p)
        while pos < end:
            recs = store.read(topic, p, pos)
            out.extend((r.key, r.value) for r in recs)
            pos = recs[-1].offset + 1
    return sorted(out)


def join_job(name: str = "text-join"):
    job = Job(name)
    left = job.stream("left", value=JSON)
    left.join(job.stream("right", value=JSON), within=5, grace_ms=1000).to("out", key=TEXT)
    return job


@pytest.mark.parametrize("restart", [False, True])
def test_a_direct_join_writes_the_bytes_the_join_of_values_writes(store, coordinator, restart):
    """With `restart`, a second runner restores the join's state from its changelogs (the
    stores hold values: the text is read back at each checkpoint) and goes on in text."""
    recs = inputs(300, seed=7)
    for topic in recs:
        store.create_topic(topic, 2)
    half = {t: len(r) // 2 for t, r in recs.items()}

    def write(upto: bool) -> None:
        for topic, rs in recs.items():
            part = rs[: half[topic]] if upto else rs[half[topic] :]
            store.append_batch(topic, [(v, k, (), ts) for k, v, ts in part])

    write(True)
    runner = Runner(join_job(), store, coordinator=coordinator, max_records=16)
    runner.run_until_idle()
    assert all(t.raw_json_inputs == {"left", "right"} for t in runner.tasks.values())
    if restart:
        runner.close()
        runner = Runner(join_job(), store, coordinator=coordinator, max_records=16)
        runner.start()
        sizes = [s.size() for t in runner.tasks.values() for s in t.stores.values()]
        assert sum(sizes) > 0  # restored from the changelogs
    write(False)
    runner.run_until_idle()
    runner.close()
    assert runner.late_count() == 0
    assert output(store, "out") == oracle(recs, 5)


def shapes():
    """Jobs where the join's values must be values: (name, build(job, left, right))."""

    def other_joiner(job, left, right):
        left.join(right, within=5, joiner=lambda a, b: [a, b]).to("out", key=TEXT)

    def left_join(job, left, right):
        left.join(right, within=5, how="left").to("out", key=TEXT)

    def map_after(job, left, right):
        left.join(right, within=5).map(lambda v: v).to("out", key=TEXT)

    def bytes_sink(job, left, right):
        left.join(right, within=5).map(JSON.serialize).to("out", key=TEXT, value=BYTES)

    def late_output(job, left, right):
        joined = left.join(right, within=5)
        joined.to("out", key=TEXT)
        joined.late().to("late", key=TEXT)

    return [other_joiner, left_join, map_after, bytes_sink, late_output]


@pytest.mark.parametrize("build", shapes(), ids=lambda f: f.__name__)
def test_other_graphs_keep_values(store, coordinator, build):
    for topic in ("left", "right"):
        store.create_topic(topic, 1)
    job = Job(f"shape-{build.__name__}")
    build(job, job.stream("left", value=JSON), job.stream("right", value=JSON))
    runner = Runner(job, store, coordinator=coordinator)
    runner.start()
    assert all(not t.raw_json_inputs for t in runner.tasks.values())
    runner.close()


def test_a_timestamp_extractor_keeps_values(store, coordinator):
    for topic in ("left", "right"):
        store.create_topic(topic, 1)
    job = Job("extractor")
    left = job.stream("left", value=JSON, timestamp=field("ts"))
    left.join(job.stream("right", value=JSON), within=5).to("out", key=TEXT)
    runner = Runner(job, store, coordinator=coordinator)
    runner.start()
    assert all(not t.raw_json_inputs for t in runner.tasks.values())
    runner.close()


class Rec(NamedTuple):
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    offset: int


@pytest.mark.skipif(serde_module._crecords is None, reason="_crecords is not built")
def test_raw_decoding_keeps_canonical_bytes_and_reads_the_others():
    """The worker over Kafka reads through ``decode_records``: `raw` keeps a value whose bytes
    are canonical JSON as those bytes, and reads every other as before."""
    recs = [Rec(b"k", v, i, i) for i, v in enumerate([*VALUES, None])]
    raw = serde_module.decode_records(recs, TEXT, JSON, None, raw=True)
    plain = serde_module.decode_records(recs, TEXT, JSON, None)
    assert raw is not None and plain is not None
    kept = 0
    for r, got, want in zip(recs, raw, plain, strict=True):
        assert got[0] == want[0] and got[2:] == want[2:]
        if type(got[1]) is bytes:
            kept += 1
            assert got[1] == r.value
            assert JSON.serialize(JSON.deserialize(r.value)) == r.value
        else:
            assert got[1] == want[1] or got[1] != got[1]  # (NaN)
    assert kept == 5  # the canonical ones: the first five of VALUES (a bare null is a tombstone)
