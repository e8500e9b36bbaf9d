"""Retention by time and size deletes whole closed segments; delete-records raises the start."""

from __future__ import annotations

import logging

import pytest

from streams.errors import OffsetOutOfRange
from streams.log import LogStore, ProducerRecord


class Clock:
    def __init__(self, now: int = 1_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


def seg_bases(store, topic="t"):
    return [s.base_offset for s in store.partition_log(topic, 0).segments]


def test_time_retention_deletes_expired_segments_only(tmp_path, caplog):
    clock = Clock()
    store = LogStore.open(tmp_path, clock=clock, background=False)
    store.create_topic("t", 1, {"retention.ms": "60000", "segment.bytes": "2048"})
    for _ in range(100):  # ~100 records over 100 s of record time
        clock.now += 1000
        store.append("t", b"x" * 50, partition=0)
    before = seg_bases(store)
    assert len(before) > 4
    caplog.set_level(logging.INFO)
    deleted = store.apply_retention(now=clock.now)
    after = seg_bases(store)
    assert deleted == len(before) - len(after) > 0
    start, end = store.offsets("t", 0)
    assert start == after[0] and end == 100
    # every remaining record is younger than 60 s or shares a segment with one
    for seg in store.partition_log("t", 0).segments[:-1]:
        assert seg.max_timestamp >= clock.now - 60000
    assert "older than retention.ms=60000" in caplog.text
    with pytest.raises(OffsetOutOfRange):
        store.read("t", 0, 0)
    store.close()
    with LogStore.open(tmp_path, clock=clock, background=False) as again:
        assert again.offsets("t", 0) == (start, 100)


def test_everything_expired_rolls_and_keeps_the_log_end(tmp_path):
    clock = Clock()
    with LogStore.open(tmp_path, clock=clock, background=False) as store:
        store.create_topic("t", 1, {"retention.ms": "1000"})
        store.append_batch("t", [ProducerRecord(b"v")] * 10, partition=0)
        clock.now += 5000
        store.apply_retention()
        assert store.offsets("t", 0) == (10, 10)
        assert store.append("t", b"next", partition=0).offset == 10


def test_size_retention_deletes_oldest_while_the_rest_exceeds_the_limit(tmp_path):
    with LogStore.open(tmp_path, background=False) as store:
        store.create_topic(
            "t", 1, {"retention.bytes": "10000", "segment.bytes": "2048", "retention.ms": "-1"}
        )
        for _ in range(300):
            store.append("t", b"y" * 60, partition=0)
        plog = store.partition_log("t", 0)
        total_before = plog.size_bytes
        store.apply_retention()
        # Kafka's rule: delete the oldest segment while what remains is still >= the limit
        assert 10000 <= plog.size_bytes < total_before
        assert plog.size_bytes - plog.segments[0].size < 10000
        assert store.offsets("t", 0)[0] == plog.segments[0].base_offset


def test_compact_only_topics_are_not_deleted_by_retention(tmp_path):
    clock = Clock()
    with LogStore.open(tmp_path, clock=clock, background=False) as store:
        store.create_topic(
            "t", 1, {"cleanup.policy": "compact", "retention.ms": "1", "segment.bytes": "1024"}
        )
        for i in range(100):
            store.append("t", b"v" * 30, key=b"k%d" % i, partition=0)
        clock.now += 10_000
        assert store.apply_retention() == 0


def test_background_thread_applies_retention(tmp_path):
    import time

    with LogStore.open(tmp_path, retention_check_interval_ms=100) as store:
        store.create_topic("t", 1, {"retention.ms": "200", "segment.bytes": "1024"})
        for _ in range(100):
            store.append("t", b"z" * 40, partition=0, timestamp_ms=int(time.time() * 1000) - 10_000)
        deadline = time.time() + 10
        while store.offsets("t", 0)[0] == 0 and time.time() < deadline:
            time.sleep(0.05)
        assert store.offsets("t", 0)[0] > 0


def test_delete_records_survives_restart_and_deletes_segments(tmp_path):
    with LogStore.open(tmp_path, background=False) as store:
        store.create_topic("t", 2, {"segment.bytes": "2048"})
        for _ in range(200):
            store.append("t", b"w" * 40, partition=0)
        assert store.delete_records("t", {0: 150}) == {0: 150}
        assert (
            seg_bases(store)[0] <= 150 < store.partition_log("t", 0).segments[0].next_offset
            or seg_bases(store)[0] == 150
        )
        assert store.read("t", 0, 150, 1)[0].offset == 150
        with pytest.raises(OffsetOutOfRange):
            store.delete_records("t", {0: 201})
        with pytest.raises(OffsetOutOfRange):
            store.delete_records("t", {0: 100})  # below the current start
        # crash right after: the start offset is checkpointed before delete_records returns
        lock_fd = store._lock_fd
    import os

    os.unlink(tmp_path / ".clean-shutdown")
    del lock_fd
    with LogStore.open(tmp_path, background=False) as store:
        assert store.offsets("t", 0) == (150, 200)
        assert store.delete_records("t", {0: -1}) == {0: 200}  # -1: up to the end (purge)
        assert store.read("t", 0, 200) == []
