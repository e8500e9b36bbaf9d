"""The live tail (streams.cluster.tail): what follows a position, filtered as a browse is; a
position that moves past records a filter leaves out; a tail far behind skips to the newest,
saying how many it skipped; a wait woken by the store's append within milliseconds."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from streams.cluster import BrowseRequest, Filter, LocalCluster
from streams.cluster import tail as tails
from streams.errors import InvalidRecord
from streams.groups import GroupCoordinator
from streams.log import LogStore


@pytest.fixture
def cluster(tmp_path):
    store = LogStore.open(tmp_path, background=False)
    co = GroupCoordinator(store)
    co.load()
    store.create_topic("t", 2)
    yield LocalCluster(store, co)
    store.close()


def write(cluster, values, partition=None):
    for i, v in enumerate(values):
        p = partition if partition is not None else i % 2
        cluster.store.append("t", v.encode(), partition=p)


def test_a_tail_reads_what_follows_its_position_filtered_and_moves_past_the_rest(cluster):
    write(cluster, ["old-1", "old-2"])
    cursor = tails.start_cursor(cluster, "t")
    step = tails.tail_step(cluster, BrowseRequest("t"), cursor)
    assert step.result.records == [] and step.cursor == cursor and step.skipped == 0
    write(cluster, ["a-1", "b-1", "a-2"])
    wanted = BrowseRequest("t", filters=(Filter("value", "contains", "a-"),))
    step = tails.tail_step(cluster, wanted, cursor)
    assert sorted(r.value for r in step.result.records) == [b"a-1", b"a-2"]
    assert tails.positions_of(step.cursor) == {0: 3, 1: 2}  # past b-1 too
    again = tails.tail_step(cluster, wanted, step.cursor)
    assert again.result.records == [] and again.cursor == step.cursor
    only_1 = tails.start_cursor(cluster, "t", 1)
    one = tails.tail_step(cluster, BrowseRequest("t", partition=1), only_1)
    assert tails.positions_of(one.cursor) == {1: 2}
    with pytest.raises(InvalidRecord, match="forward cursor"):
        tails.tail_step(cluster, wanted, "b:0=1")


def test_a_tail_far_behind_skips_to_the_newest_and_says_how_many(cluster, monkeypatch):
    monkeypatch.setattr(tails, "MAX_BEHIND", 100)
    cursor = tails.start_cursor(cluster, "t")
    write(cluster, [f"v{i}" for i in range(300)], partition=0)
    step = tails.tail_step(cluster, BrowseRequest("t", page_size=20), cursor)
    assert step.skipped == 290  # a share of the page (10) from each of the two partitions
    assert [r.value for r in step.result.records] == [f"v{i}".encode() for i in range(290, 300)]
    assert tails.positions_of(step.cursor) == {0: 300, 1: 0}


def test_page_by_page_a_tail_under_the_limit_loses_nothing(cluster):
    cursor = tails.start_cursor(cluster, "t")
    write(cluster, [f"v{i}" for i in range(130)])
    seen = []
    for _ in range(10):
        step = tails.tail_step(cluster, BrowseRequest("t", page_size=50), cursor)
        seen += [r.value for r in step.result.records]
        cursor = step.cursor
    assert sorted(seen) == sorted(f"v{i}".encode() for i in range(130)) and step.skipped == 0


def test_a_wait_is_woken_by_an_append_and_times_out_without_one(cluster):
    cursor = tails.start_cursor(cluster, "t")
    subscribe = tails.store_subscription(cluster.store, "t")

    async def body():
        started = time.monotonic()
        assert not await tails.wait_for_records(cluster, "t", cursor, 0.3, subscribe)
        assert time.monotonic() - started >= 0.3
        cluster.store.create_topic("other", 1)
        timer = threading.Timer(0.2, lambda: cluster.store.append("other", b"x"))
        timer.start()  # another topic's append wakes nothing
        assert not await tails.wait_for_records(cluster, "t", cursor, 0.5, subscribe)
        timer = threading.Timer(0.2, lambda: write(cluster, ["new"]))
        timer.start()
        started = time.monotonic()
        assert await tails.wait_for_records(cluster, "t", cursor, 10, subscribe)
        woke = time.monotonic() - started
        assert woke < 5, woke  # woken by the append, not by the timeout
        assert cluster.store._append_listeners == ()  # nothing left behind
        polled = await tails.wait_for_records(cluster, "t", cursor, 1)  # no subscription
        assert polled  # the ends, asked

    asyncio.run(body())
