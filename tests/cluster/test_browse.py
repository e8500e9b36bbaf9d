"""Browsing through the Cluster interface: seek modes, merge order, filters, cursors, budgets."""

from __future__ import annotations

import pytest

from streams.cluster import BrowseRequest, Filter, LocalCluster
from streams.errors import InvalidRecord
from streams.groups import GroupCoordinator
from streams.log import LogStore


@pytest.fixture
def cluster(tmp_path):
    store = LogStore.open(tmp_path, background=False)
    co = GroupCoordinator(store)
    co.load()
    store.create_topic("t", 3)
    for i in range(300):  # partition i % 3, timestamp 1000 + i: a global order to check
        store.append(
            "t",
            b'{"n": %d}' % i,
            key=b"k%d" % (i % 7),
            partition=i % 3,
            headers=(("h", b"x" if i % 2 else b"y"),),
            timestamp_ms=1000 + i,
        )
    yield LocalCluster(store, co)
    store.close()


def ns(result):
    return [int(r.value[6:-1]) for r in result.records]


def test_newest_first_across_partitions_by_timestamp_and_paging(cluster):
    page = cluster.browse(BrowseRequest("t", seek="newest", page_size=10))
    assert ns(page) == list(range(299, 289, -1)) and page.stopped == "page full"
    nxt = cluster.browse(BrowseRequest("t", cursor=page.next_cursor, page_size=10))
    assert ns(nxt) == list(range(289, 279, -1))
    back = cluster.browse(BrowseRequest("t", cursor=nxt.prev_cursor, page_size=10))
    assert ns(back) == list(range(290, 300))  # the records after this page, oldest first


@pytest.mark.parametrize(
    "seek, value, partition, expected",
    [
        ("oldest", None, None, [0, 1, 2, 3]),
        ("newest-n", 2, None, [294, 295, 296, 297]),  # last 2 of each partition, by time
        ("offset", 50, 1, [151, 154, 157, 160]),  # partition 1 holds n = 3k + 1
        ("timestamp", 1200, None, [200, 201, 202, 203]),
    ],
)
def test_seek_modes(cluster, seek, value, partition, expected):
    page = cluster.browse(
        BrowseRequest("t", partition=partition, seek=seek, value=value, page_size=4)
    )
    assert ns(page) == expected


def test_filters_on_every_field(cluster):
    def run(*filters):
        return ns(
            cluster.browse(BrowseRequest("t", seek="oldest", page_size=5, filters=tuple(filters)))
        )

    assert run(Filter("value", "contains", "99")) == [99, 199, 299]
    assert run(Filter("key", "equals", "k3"))[:3] == [3, 10, 17]
    assert run(Filter("header_value", "equals", "x")) == [1, 3, 5, 7, 9]
    assert run(Filter("header_key", "not_contains", "h")) == []
    both = run(Filter("value", "not_contains", "1"), Filter("key", "equals", "k0"))
    assert both == [0, 7, 28, 35, 42]  # n % 7 == 0 and no digit 1


def test_budgets_stop_the_scan_and_the_cursor_resumes_without_loss(cluster):
    first = cluster.browse(
        BrowseRequest(
            "t",
            seek="oldest",
            page_size=50,
            max_scan_records=1,
            filters=(Filter("value", "contains", "9"),),
        )
    )
    assert "scan limit" in first.stopped and not first.complete
    seen = ns(first)
    cursor = first.next_cursor
    while cursor:
        page = cluster.browse(
            BrowseRequest(
                "t",
                cursor=cursor,
                page_size=50,
                max_scan_records=1,
                filters=(Filter("value", "contains", "9"),),
            )
        )
        seen += ns(page)
        cursor = page.next_cursor
    assert seen == [n for n in range(300) if "9" in str(n)]


def test_hand_made_cursors_are_clamped_and_bad_ones_refused(cluster):
    page = cluster.browse(BrowseRequest("t", cursor="b:0=99999999999999999999", page_size=3))
    assert ns(page) == [297, 294, 291]
    with pytest.raises(InvalidRecord, match="malformed page cursor"):
        cluster.browse(BrowseRequest("t", cursor="x:garbage"))
    with pytest.raises(InvalidRecord, match="unknown seek"):
        BrowseRequest("t", seek="middle")
