"""Compaction keeps the latest record per key, keeps offsets, expires tombstones, survives crashes.

The property test checks a compacted partition against a dict model of the writes.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.log import LogStore
from streams.log.cleaner import Cleaner


class Clock:
    def __init__(self, now: int = 10_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


KEYS = [b"k%d" % i for i in range(6)]
ops_strategy = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(KEYS), st.binary(min_size=0, max_size=40)),
        st.tuples(st.just("delete"), st.sampled_from(KEYS), st.none()),
        st.tuples(st.just("roll"), st.none(), st.none()),
        st.tuples(st.just("compact"), st.none(), st.none()),
    ),
    min_size=1,
    max_size=80,
)


def all_records(store, topic="t"):
    start, end = store.offsets(topic, 0)
    out, offset = [], start
    while offset < end:
        batch = store.read(topic, 0, offset, max_records=1000)
        if not batch:  # compaction removed every record in [offset, end)
            break
        out += batch
        offset = batch[-1].offset + 1
    return out


def check_against_model(store, written, latest, cleaned_below, tombstones_may_be_gone):
    recs = all_records(store)
    offsets = [r.offset for r in recs]
    assert offsets == sorted(set(offsets)), "offsets strictly increase"
    for r in recs:  # every surviving record is exactly what was written at its offset
        assert written[r.offset] == (r.key, r.value)
    survivors = {r.offset for r in recs}
    for off in range(cleaned_below, len(written)):  # the dirty tail is untouched
        assert off in survivors
    seen = {}
    for r in recs:
        seen[r.key] = r
    for key, (off, value) in latest.items():
        if value is None and tombstones_may_be_gone and key not in seen:
            continue
        assert seen[key].offset == off and seen[key].value == value
    cleaned_keys = [r.key for r in recs if r.offset < cleaned_below]
    assert len(cleaned_keys) == len(set(cleaned_keys)), "one record per key in the cleaned range"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=ops_strategy)
def test_compacted_partition_matches_dict_model(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("c")
    clock = Clock()
    store = LogStore.open(path, clock=clock, background=False)
    store.create_topic(
        "t",
        1,
        {
            "cleanup.policy": "compact",
            "delete.retention.ms": "1000",
            "min.cleanable.dirty.ratio": "0.01",
        },
    )
    written: dict[int, tuple] = {}
    latest: dict[bytes, tuple] = {}
    cleaned_below = 0
    for op, key, value in ops:
        clock.now += 10
        if op in ("put", "delete"):
            res = store.append("t", value, key=key, partition=0)
            written[res.offset] = (key, value)
            latest[key] = (res.offset, value)
        elif op == "roll":
            store.partition_log("t", 0).roll()
        else:
            store.compact(force=True)
            segs = store.partition_log("t", 0).segments
            cleaned_below = segs[-1].base_offset if len(segs) > 1 else cleaned_below
        check_against_model(store, written, latest, cleaned_below, tombstones_may_be_gone=False)
    # after delete.retention.ms, a second pass drops the tombstones' keys entirely
    store.partition_log("t", 0).roll()
    store.compact(force=True)
    clock.now += 5000
    store.compact(force=True)
    cleaned_below = len(written)
    check_against_model(store, written, latest, cleaned_below, tombstones_may_be_gone=True)
    keys_left = {r.key for r in all_records(store)}
    assert keys_left == {k for k, (_, v) in latest.items() if v is not None}
    store.close()
    reopened = LogStore.open(path, clock=clock, background=False)
    check_against_model(reopened, written, latest, cleaned_below, tombstones_may_be_gone=True)
    reopened.close()


def test_min_compaction_lag_and_active_segment_untouched(tmp_path):
    clock = Clock()
    with LogStore.open(tmp_path, clock=clock, background=False) as store:
        store.create_topic("t", 1, {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"})
        for i in range(10):
            store.append("t", b"v%d" % i, key=b"same", partition=0)
        store.partition_log("t", 0).roll()
        for i in range(10, 20):
            store.append("t", b"v%d" % i, key=b"same", partition=0)
        store.compact(force=True)
        assert len(all_records(store)) == 20  # too young to compact
        clock.now += 120_000
        store.compact(force=True)
        assert [r.offset for r in all_records(store)] == [9] + list(range(10, 20))


def test_dirty_ratio_decides_when_background_cleaning_runs(tmp_path):
    clock = Clock()
    with LogStore.open(tmp_path, clock=clock, background=False) as store:
        store.create_topic("t", 1, {"cleanup.policy": "compact"})
        for i in range(20):
            store.append("t", b"v", key=b"k%d" % (i % 2), partition=0)
        store.partition_log("t", 0).roll()
        assert store.compact() == 1  # never cleaned: all dirty
        store.append("t", b"v", key=b"k0", partition=0)
        store.partition_log("t", 0).roll()
        assert store.compact() == 0 or len(all_records(store)) <= 3


def test_compacted_topic_requires_keys(tmp_path):
    from streams.errors import InvalidRecord

    with LogStore.open(tmp_path, background=False) as store:
        store.create_topic("t", 1, {"cleanup.policy": "compact"})
        with pytest.raises(InvalidRecord, match="needs a key"):
            store.append("t", b"v")


def test_a_client_batch_on_a_compacted_topic_is_checked_not_re_encoded():
    """A client's batch on a compacted topic is decoded to check its keys, then stored as
    received (as Kafka's LogValidator does), not rebuilt; a keyless one is still refused."""
    from streams.errors import InvalidRecord
    from streams.log import produce
    from streams.log import records as rb
    from streams.log.config import TopicConfig

    config = TopicConfig.from_mapping({"cleanup.policy": "compact"})
    batch = rb.build_batch(
        [rb.ProducerRecord(b"v%d" % i, b"k%d" % i, (), 1_000 + i) for i in range(3)],
        now_ms=1_000,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
    )
    [(header, stored)] = produce.client_batches(config, "t", batch, 5_000)
    assert stored is batch and header.count == 3
    keyless = rb.build_batch([rb.ProducerRecord(b"v", None, (), 1_000)], now_ms=1_000)
    with pytest.raises(InvalidRecord, match="needs a key"):
        produce.client_batches(config, "t", keyless, 5_000)


def crash(store):
    """Drop a store as a killed process would: no flush, no marker, lock released."""
    os.close(store._lock_fd)
    store._lock_fd = -1
    store._closed = True


@pytest.mark.parametrize("crash_at", ["copied", "committed"])
def test_crash_during_cleaning_leaves_a_correct_log(tmp_path, crash_at):
    clock = Clock()
    store = LogStore.open(tmp_path, clock=clock, background=False)
    store.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1024"})
    written, latest = {}, {}
    for i in range(200):
        key, value = b"k%d" % (i % 7), b"value-%d" % i
        res = store.append("t", value, key=key, partition=0)
        written[res.offset] = (key, value)
        latest[key] = (res.offset, value)
    cleaner = Cleaner(store.cleaner_offsets, crash_at=crash_at)
    with pytest.raises(RuntimeError, match="simulated crash"):
        cleaner.clean(store.partition_log("t", 0), clock.now, force=True)
    crash(store)
    names = os.listdir(tmp_path / "t-0")
    assert any(n.endswith(".swap") for n in names) == (crash_at == "committed")
    reopened = LogStore.open(tmp_path, clock=clock, background=False)
    assert not any(n.endswith(".swap") for n in os.listdir(tmp_path / "t-0"))
    # before the commit point nothing changed; after it, the first segment is the cleaned copy
    cleaned = (
        reopened.partition_log("t", 0).segments[1].base_offset if crash_at == "committed" else 0
    )
    check_against_model(reopened, written, latest, cleaned, tombstones_may_be_gone=False)
    assert reopened.offsets("t", 0) == (0, 200)
    reopened.compact(force=True)
    segs = reopened.partition_log("t", 0).segments
    check_against_model(reopened, written, latest, segs[-1].base_offset, False)
    reopened.close()
